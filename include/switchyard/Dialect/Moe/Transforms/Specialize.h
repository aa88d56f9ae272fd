//===- Specialize.h - binding generic policies to a model shape -*- C++ -*-===//
//
// A policy is written once, generic in the number of experts E and top-k (and in the
// expert groups, devices/slots of a placement, the shared experts, the routed scaling
// factor and renormalization), and bound to a model here: the `--moe-specialize` pass,
// and the tools' `--experts/--top-k/--groups/... /--model config.json` flags, rewrite it
// into the fully static form the lowering compiles.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_SPECIALIZE_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_SPECIALIZE_H

#include "switchyard/Dialect/Moe/ShapeParameters.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>

namespace switchyard::moe {

/// A value to bind and where it came from, as diagnostics name it ("--experts 8",
/// "models/mixtral.json: num_local_experts = 8").
template <typename T> struct Bound {
  T value;
  std::string source;
  /// Read from a model's config.json (not a flag): a value that describes the model
  /// rather than a routing choice is bound where a policy uses it and otherwise left
  /// alone (the hidden size; every value in a file of rules only, which do not route).
  bool fromModel = false;
};

/// What to bind a module's policies to; unset parameters stay as the policy has them.
/// One member per row of ShapeParameters.def (experts, topK, ..., scaling,
/// normTopkProb), of its KIND's type.
struct ShapeRequest {
#define SHAPE_PARAMETER(FIELD, KIND, ...)                                                  \
  std::optional<Bound<SHAPE_PARAMETER_TYPE(KIND)>> FIELD;
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  /// Values no policy has a parameter for are ignored rather than errors (an engine
  /// binds any policy to a whole model: a softmax router ignores DeepSeek's n_group).
  bool allowUnused = false;

  /// The integer parameter `name` (ShapeParameters.def's NAME: "experts", "top_k",
  /// "groups", ..., SizeParameter::name), or null for another name or a non-integer one.
  const std::optional<Bound<int64_t>> *size(llvm::StringRef name) const;

  bool empty() const {
#define SHAPE_PARAMETER(FIELD, ...)                                                        \
  if (FIELD)                                                                               \
    return false;
#include "switchyard/Dialect/Moe/ShapeParameters.def"
    return true;
  }
};

/// Binds every policy of `module` (routers and rules):
/// * a generic parameter (`?` expert dimensions, `k = ?`, `groups = ? keep = ?`, a
///   `?` in a placement, `gpus = ?`, EPLB's slots, a gate's hidden size,
///   `shared_experts` left at 0) takes the requested value; one with no value requested
///   is an error (a placement's slots default to E, shared_experts to 0, a rule's top-k
///   to its file's router's);
/// * a fixed parameter that differs from the request is an error naming both;
/// * a request no policy uses (e.g. groups without a `moe.group_limit`) is an error,
///   unless `allowUnused`;
/// * `scaling` / `norm_topk_prob` are the model's: they set every `moe.route`'s
///   `scaling` / `renormalize`;
/// * `moe.param` values become constants.
/// Then every generic router takes its bound types (ShapeRefinementOpInterface) and a
/// `moe.fill` budget larger than E is reported as a warning. Errors are reported at
/// the policy's location; the caller verifies the result.
mlir::LogicalResult specializePolicies(mlir::ModuleOp module, const ShapeRequest &request);

/// moe-specialize binding `request` (what the tools' shape flags build).
std::unique_ptr<mlir::Pass> createSpecializePass(ShapeRequest request);

/// Whether any policy of `module` still has a parameter to bind.
bool hasUnboundParameters(mlir::ModuleOp module);

} // namespace switchyard::moe

#endif
