//===- Signature.h - the C ABI of a compiled policy entry -------*- C++ -*-===//
//
// What a compiled router or rule takes and returns, as the runtime sees it: after
// `num_tokens`, one parameter per buffer (two for a placement: replica counts then the
// log2phy table) and per scalar, inputs then outputs, each with a dtype and a shape
// whose dynamic dimension 0 follows a size rule in the token count T. The compiler
// writes it (moe-compile's manifest.json, `moe-run --list`); the runtime binds buffers
// by name against it. No LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_SIGNATURE_H
#define SWITCHYARD_RUNTIME_SIGNATURE_H

#include "switchyard/Runtime/Npy.h"
#include "switchyard/Runtime/ScalarRange.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::runtime {

/// An element type of the ABI: npy's one table (float32, int32, int64, int8 for sets'
/// 0/1 bytes, bfloat16 and float16 for narrowed float inputs; knobs: int64, float32).
using DType = npy::DType;

/// What a parameter carries (the IR's moe::AbiKind past the compiler).
enum class ParamKind : uint8_t { Tensor, Set, Scalar, PlacementReplicas, PlacementLog2Phy };
/// What an input's values may be beyond its dtype.
enum class ValueSet : uint8_t {
  Any,       // anything the dtype holds
  Phase,     // 0 prefill, 1 decode, 2 mixed
  ExpertIds, // -1 (no expert) or [0, idBound)
};
/// What an entry point is: a router, or one of the rules.
enum class EntryKind : uint8_t { Router, Residency, Balance, Prefetch };

/// Each enum's spelling in JSON, manifests and the tools' text ("placement_log2phy",
/// "expert_ids", "balance"; ValueSet::Any is ""), and its parse; spelled once, in
/// Signature.cpp's tables.
const char *spelling(ParamKind kind);
const char *spelling(ValueSet values);
const char *spelling(EntryKind kind);
std::optional<ParamKind> parseParamKind(std::string_view text);
std::optional<ValueSet> parseValueSet(std::string_view text);
std::optional<EntryKind> parseEntryKind(std::string_view text);

/// One parameter of the flat C entry point (after num_tokens).
struct Param {
  std::string name; // "logits", "placement.log2phy", ...
  bool isOutput = false;
  ParamKind kind = ParamKind::Tensor;
  DType dtype = DType::F32;   // F32, I32, I64, I8 (sets: 0/1 bytes); a float tensor input
                              // compiled with --input-dtype: BF16 or F16 (read in place,
                              // widened to float32 at each load)
  std::vector<int64_t> shape; // -1: dynamic, from sizeRule
  std::array<int64_t, 3> sizeRule{1, 0, 1}; // ceil((a*T + b) / d)
  /// What an input's values may be, beyond its dtype (the compiler derives it from how
  /// the entry uses the input).
  ValueSet values = ValueSet::Any;
  int64_t idBound = 0;

  int64_t elementBytes() const;
  bool isScalar() const { return kind == ParamKind::Scalar; }
  bool isSet() const { return kind == ParamKind::Set; }
  bool isPlacement() const {
    return kind == ParamKind::PlacementReplicas || kind == ParamKind::PlacementLog2Phy;
  }
  /// A float input read in place as bfloat16 or float16 (--input-dtype).
  bool isNarrowFloat() const { return dtype == DType::BF16 || dtype == DType::F16; }
  /// The shape for `tokens` tokens; nullopt when an extent or the byte count would
  /// not fit in 63 bits.
  std::optional<std::vector<int64_t>> shapeFor(int64_t tokens) const;
  /// The number of elements for `tokens` tokens; nullopt on overflow.
  std::optional<int64_t> elementsFor(int64_t tokens) const;
  /// The shape as the tools print it: "[?, 128]" (? is the dynamic dimension).
  std::string shapeText() const;
  /// The name the caller binds: "placement" for both placement parameters.
  std::string inputName() const;
};

/// One rule a knob obeys (from an op that uses it): the run-time check of the rule the
/// verifier applies to known values.
struct KnobRule {
  ScalarRange range;
  std::string text; // "budget must be in [0, inf]"
  std::string op;   // "moe.fill at xshare.mlir:24:15"
};

/// A knob the entry takes at run time, in its `const struct NAME_knobs *` (NULL: the
/// defaults): fields in this order, int64_t for "int64", float for "float32".
struct Knob {
  std::string name;
  DType dtype = DType::I64; // I64 or F32
  int64_t intDefault = 0;
  double floatDefault = 0;
  std::vector<KnobRule> rules;

  bool isFloat() const { return dtype == DType::F32; }
  /// "knob 'budget': budget must be in [0, inf], got -1 (moe.fill at ...)" for the first
  /// rule `value` breaks, or none (an int64 knob is checked exactly as an integer).
  std::optional<std::string> check(double value) const;
  std::optional<std::string> check(int64_t value) const;
};

/// The C layout of `struct NAME_knobs`: each field at its natural alignment.
struct KnobLayout {
  std::vector<size_t> offsets;
  size_t size = 0;
  explicit KnobLayout(const std::vector<Knob> &knobs);
};

/// Fills `bytes` with `struct NAME_knobs` (KnobLayout): the defaults, then each
/// "name=value" override parsed as the knob's type and checked against its rules;
/// false with `error` naming the knob otherwise.
bool packKnobs(const std::vector<Knob> &knobs, const std::vector<std::string> &overrides,
               std::vector<uint8_t> &bytes, std::string &error);

/// An entry point: a router or a rule.
struct Signature {
  std::string entry;
  EntryKind kind = EntryKind::Router;
  std::vector<Param> params;
  /// Knobs left tunable (empty when the policy was compiled with --freeze-knobs): the
  /// entry then takes `const struct NAME_knobs *knobs` after its buffers.
  std::vector<Knob> knobs;
  /// A GPU entry built for knob groups (moe-compile --knob-groups=G): its launcher takes
  /// input `knob_group` (each token's group) and G knob structs in one buffer; 0 without.
  int64_t knobGroups = 0;

  bool isRule() const { return kind != EntryKind::Router; }
  /// The index of the first parameter bound as input `name`, or -1.
  int64_t findInput(const std::string &name) const;
  /// The caller-visible input names, in order ("placement" once).
  std::vector<std::string> inputNames() const;
};

/// The most tokens one call takes (compiled code indexes tokens with i32) and the most
/// bytes one output buffer may need.
constexpr int64_t kMaxTokens = INT32_MAX;
constexpr int64_t kMaxOutputBytes = int64_t(1) << 34;

/// What a non-zero status of the entry means: 1 num_tokens outside [0, kMaxTokens],
/// 2 + j knob j broke one of its rules.
std::string statusMessage(const Signature &signature, int32_t status);

/// The signature as JSON: {"entry", "kind", "params": [{"name", "role", "kind",
/// "dtype", "shape", "size_rule", "values", "id_bound"}], "knobs": [{"name", "dtype",
/// "default", "rules": [{"text", "op", "float", "lo", "hi"?, "finite", "not_nan",
/// "nonzero", "min"?, "max"?, "min_open", "max_open"}]}], "knob_groups"?: G}.
std::string toJson(const Signature &signature);
/// Reads toJson's format; false with a message naming the bad field (an unknown kind,
/// dtype or value set included) otherwise.
bool fromJson(const std::string &text, Signature &signature, std::string &error);

} // namespace switchyard::runtime

#endif
