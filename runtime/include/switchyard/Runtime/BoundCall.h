//===- BoundCall.h - a host entry's call bound once, run per step -*- C++ -*-===//
//
// For engines that route every forward step: which inputs the caller passes (in a
// fixed order) and which results it gives memory for are resolved against the
// Signature ONCE; a call is then the token count, one pointer per input, the knob
// struct and the result pointers — no names, maps or per-call allocation (the
// results the caller does not want are written into per-thread scratch). bfloat16 /
// float16 inputs of a float32 parameter are widened into per-thread scratch by the
// call itself (the compiled entry reads float32; no allocation once warm). Values are not
// checked here (the engine produced them); shapes are the caller's contract: `tokens` rows
// of the entry's row width. No LLVM/MLIR dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_BOUNDCALL_H
#define SWITCHYARD_RUNTIME_BOUNDCALL_H

#include "switchyard/Runtime/HostPolicy.h"

namespace switchyard::runtime {

class BoundCall {
public:
  /// Binds `policy`'s inputs in the order of `inputs` (every input of the entry must
  /// be named once; scalars too; an input of several ABI parameters, the placement, by
  /// their ABI names: "placement.replicas", "placement.log2phy", in the caller's
  /// trust: values are not checked) and its results `results` (caller memory); false
  /// with `error` naming the argument otherwise.
  static std::unique_ptr<BoundCall> create(const HostPolicy &policy,
                                           const std::vector<std::string> &inputs,
                                           const std::vector<std::string> &results,
                                           std::string &error);

  /// Runs the entry on `tokens` tokens. `inputs[i]`: the memory of input i (a scalar
  /// input: a pointer to its int64 value); `dtypes[i]`: its element type (float32,
  /// or bfloat16 / float16 for a float32 tensor input, widened here; exactly the
  /// entry's bfloat16 / float16 for an input compiled with --input-dtype, read in
  /// place, float32 refused). `results[j]`:
  /// memory for result j, of its shape for `tokens`. `knobs`: the knob struct (null:
  /// the defaults).
  /// Failures: kInvalidArgument (an argument, the token count), kInvalidKnob.
  Status run(int64_t tokens, const void *const *inputs, const npy::DType *dtypes,
             void *const *results, const uint8_t *knobs) const;

  const Signature &signature() const { return policy.signature(); }
  /// The parameter index of result j (for its shape: Param::shapeFor).
  size_t resultParam(size_t j) const { return resultIndex[j]; }

private:
  explicit BoundCall(const HostPolicy &p) : policy(p) {}
  const HostPolicy &policy;
  // Per ABI parameter: the caller's input slot, result slot, or -1 (scratch).
  std::vector<int> inputSlot, resultSlot;
  std::vector<size_t> resultIndex;
  size_t numInputs = 0;
};

/// vLLM's routing contract on a routed batch (ids [T, K] int32, weights [T, K]
/// float32): every id in [0, E). A slot the policy left empty (an id outside
/// [0, E): -1 for XShare below k, capacity drops, expert choice) gets weight 0 and an
/// expert the token already uses (its first valid id); a token with none gets one
/// already active in the batch (the lowest routed expert), so no expert is newly
/// activated; only a batch with no routed slot at all falls back to expert 0. The same
/// rule as moe.fill_empty_slots (entries compiled with --fill-empty-slots already hold
/// it: nothing is left to fill). Returns the number of slots filled.
int64_t fillEmptySlots(int32_t *ids, float *weights, int64_t tokens, int64_t k,
                       int64_t experts);

} // namespace switchyard::runtime

#endif
