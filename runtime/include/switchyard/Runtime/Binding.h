//===- Binding.h - host buffers of one call, bound by name ------*- C++ -*-===//
//
// The buffers of one call of a compiled entry: inputs bound by name from arrays
// (shapes, dtypes and the token count checked against the Signature, converted to the
// entry's dtypes), outputs allocated for the token count, and the flat argument list
// the C entry takes. Every bad input is a one-line error naming the argument. What
// moe-run, the Python package and an engine share. No LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_BINDING_H
#define SWITCHYARD_RUNTIME_BINDING_H

#include "switchyard/Runtime/Npy.h"
#include "switchyard/Runtime/Signature.h"

#include <map>

namespace switchyard::runtime {

/// Memory the caller owns, seen as a C-contiguous array (a DLPack tensor's data, a
/// NumPy array's buffer). `onDevice`: GPU memory, whose values the host cannot read.
struct TensorView {
  void *data = nullptr;
  npy::DType dtype = npy::DType::F32;
  std::vector<int64_t> shape;
  bool onDevice = false;
};

class CallBuffers {
public:
  explicit CallBuffers(Signature signature);

  const Signature &signature() const { return sig; }

  /// Binds input `name` to `array` (`what` names it in errors, e.g. "argument 'logits'
  /// (x.npy)"). A scalar input takes an array holding one integer; `placement` takes
  /// an int32 log2phy table [E, <=R] padded with -1 (or [E]).
  bool bind(const std::string &name, const npy::Array &array, const std::string &what,
            std::string &error);
  /// Binds input `name` to caller memory without a copy when its dtype is the entry's
  /// (float32, int32, bfloat16 / float16 for an input compiled with --input-dtype; bool
  /// or uint8 for a set) and it is on the host or `onDevice`; a bfloat16 / float16
  /// parameter refuses any other dtype (float32 would have to be rounded);
  /// otherwise (bf16 logits, int64 ids) host memory is converted into the call's own
  /// storage as bind() does. Value rules (expert ids, phases, finite rule inputs) are
  /// checked in place on the host; device memory gets shape and dtype checks only. The
  /// memory must outlive the call.
  bool bindView(const std::string &name, const TensorView &view, const std::string &what,
                std::string &error);
  /// Makes output `name` write into caller memory (`view`: the entry's dtype and the
  /// shape for the token count, checked in finish()); finish() allocates the others.
  bool bindOutput(const std::string &name, const TensorView &view, std::string &error);
  /// The index of output `name`, or -1.
  int64_t findOutput(const std::string &name) const;
  /// Binds scalar input `name` to an integer.
  bool bindScalar(const std::string &name, int64_t value, std::string &error);
  /// True when `name` is an input of the entry; `error` lists the inputs otherwise.
  bool isInput(const std::string &name, std::string &error) const;
  /// True when input `name` is a scalar.
  bool isScalar(const std::string &name) const;

  /// After every input is bound: checks that none is missing and allocates the outputs
  /// for the token count the inputs imply (0 when none has a token dimension).
  bool finish(std::string &error);

  int64_t tokens() const { return numTokens < 0 ? 0 : numTokens; }
  /// One pointer per ABI parameter (buffers) and the scalars' values, in ABI order.
  std::vector<void *> &buffers() { return pointers; }
  const std::vector<void *> &buffers() const { return pointers; }
  const std::vector<int64_t> &scalars() const { return scalarValues; }
  /// Output parameter `index` as an array (its shape for the token count).
  npy::Array output(size_t index) const;

private:
  bool noteTokens(int64_t tokens, const std::string &what, std::string &error);
  bool bindBuffer(size_t index, const npy::Array &array, const std::string &what,
                  std::string &error);
  bool bindPlacement(size_t index, const npy::Array &array, const std::string &what,
                     std::string &error);

  Signature sig;
  int64_t numTokens = -1;
  std::string tokensFrom;
  std::vector<std::vector<uint8_t>> storage; // one per ABI parameter
  std::vector<bool> bound;
  std::vector<void *> external;            // caller memory per parameter, or null
  std::vector<TensorView> externalOutputs; // the views bindOutput got, by parameter
  std::vector<void *> pointers;
  std::vector<int64_t> scalarValues;
};

/// The argument array of a call in MLIR's packed convention (`ENTRY_packed(void **)` of
/// a compiled library, ExecutionEngine::invokePacked for the JIT): a pointer to each
/// argument of the C entry (num_tokens, one per buffer or scalar, the knob struct when
/// the entry has knobs, then the `trailing` pointers: a GPU launcher's workspace and
/// stream), then one to the int32 status it returns.
class PackedArguments {
public:
  /// `scalarsInBuffers`: a scalar parameter is the pointer in `buffers` (a GPU
  /// launcher's scalar inputs, device pointers to their values), not a value.
  PackedArguments(const Signature &signature, int64_t tokens,
                  const std::vector<void *> &buffers, const std::vector<int64_t> &scalars,
                  const void *knobs, std::vector<void *> trailing = {},
                  bool scalarsInBuffers = false);
  PackedArguments(const PackedArguments &) = delete;
  PackedArguments &operator=(const PackedArguments &) = delete;

  std::vector<void *> &arguments() { return packed; }
  int32_t status() const { return result; }

private:
  int64_t numTokens;
  std::vector<void *> bufferValues;
  std::vector<int32_t> scalar32;
  std::vector<int64_t> scalar64;
  const void *knobStruct;
  std::vector<void *> extra;
  int32_t result = -1;
  std::vector<void *> packed;
};

} // namespace switchyard::runtime

#endif
