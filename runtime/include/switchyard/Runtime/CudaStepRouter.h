//===- CudaStepRouter.h - a policy's GPU launcher bound for an engine --*- C++ -*-===//
//
// The CUDA half of a StepRouter: what the engine's routing op launches once per MoE
// layer and step on CUDA tensors. A policy's GPU launchers (CudaPolicy: the float32
// entry, and entries compiled to read bfloat16 / float16 logits in place) are bound
// ONCE to the logits, the layer's tensors, the step's metadata and the two results
// (topk_ids, topk_weights; compile the entry with only those outputs). A call is then
// pointers in a fixed order and one launch sequence on the caller's stream: no host
// synchronisation, no allocation (the caller gives the workspace), nothing that a CUDA
// graph would freeze except pointers:
//
// * the knobs are the knob struct in device memory the caller keeps (deviceKnobs):
//   the kernels read it when they run, so writing it before a replay sets the knobs
//   of that replay;
// * the per-token metadata (request ids, positions, draft mask) are device buffers the
//   runner writes before each step or replay (the calling thread's DeviceStep names
//   them; a buffer holds at least the step's token count);
// * the phase is an int32 in device memory the caller keeps (devicePhase), written
//   before each step or replay like the knobs;
// * with entries compiled for knob groups (moe-compile --knob-groups=G), the knob
//   memory holds G structs and the DeviceStep's knobGroup says each token's group:
//   requests that set different knobs are routed in the same one launch, each group
//   as a batch of its own.
//
// The runtime does not link cudart: every pointer here is device memory the caller
// owns, the stream a cudaStream_t. No LLVM/MLIR, torch or Python dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_CUDASTEPROUTER_H
#define SWITCHYARD_RUNTIME_CUDASTEPROUTER_H

#include "switchyard/Runtime/CudaPolicy.h"
#include "switchyard/Runtime/Npy.h"

#include <memory>

namespace switchyard::runtime {

/// The step's batch metadata in device memory (int32 per token, the draft mask in the
/// entry's dtype), for CUDA routers; null: not given.
struct DeviceStep {
  const void *requestIds = nullptr, *positions = nullptr, *draftMask = nullptr;
  /// The step's phase was written into the routers' device phase (see create).
  bool phase = false;
  /// Each token's knob group (int32 per token), for entries compiled with knob groups.
  const void *knobGroup = nullptr;
  /// The step has per-request knob groups: entries without knob groups refuse it (an
  /// error, not the step's knobs for every token).
  bool knobGroups = false;
};
/// The calling thread's device metadata (the engine sets it before the layers run).
void setDeviceStep(const DeviceStep &step);
const DeviceStep &currentDeviceStep();

class CudaStepRouter {
public:
  /// One GPU launcher and the logits dtype it reads (float32 first).
  struct Entry {
    std::shared_ptr<const CudaPolicy> policy;
    npy::DType logits = npy::DType::F32;
  };

  /// Binds `entries` to the logits, then the ABI parameters named in `layerInputs`
  /// (in order; the placement's as "placement.replicas" / "placement.log2phy"), then
  /// the metadata inputs; the results topk_ids and topk_weights. Another input or
  /// result, or per-token metadata that is not int32, is an error naming it
  /// (kInvalidArgument). `deviceKnobs`: the knob struct in device memory (the
  /// caller's; null: the defaults), read by every launch; `devicePhase`: the step's
  /// phase, an int32 in device memory (the caller's; needed when the policy reads it).
  static std::unique_ptr<CudaStepRouter> create(std::vector<Entry> entries,
                                                const std::vector<std::string> &layerInputs,
                                                const void *deviceKnobs,
                                                const void *devicePhase,
                                                const std::string &label, Status &status);

  /// Device workspace bytes a call of `tokens` tokens with `logitsType` logits needs.
  int64_t workspaceBytes(int64_t tokens, npy::DType logitsType) const;

  /// Launches on `stream`: `tokens` rows of device logits (`logitsType`), the layer's
  /// device tensors in the order bound, ids int32 [tokens, k] and weights float32
  /// [tokens, k] written; `workspace` of workspaceBytes(tokens). The metadata come from
  /// the calling thread's DeviceStep.
  Status route(int64_t tokens, const void *logits, npy::DType logitsType,
               const void *const *layer, int32_t *ids, float *weights, void *workspace,
               void *stream) const;

  /// The size of the knob struct the kernels read (0: the policy has no run-time knobs).
  size_t knobStructBytes() const { return knobBytes; }
  /// The knob groups one launch routes (the structs the knob memory holds; 0: entries
  /// without knob groups, one struct).
  int64_t knobGroups() const { return groups; }

private:
  CudaStepRouter() = default;
  /// Where each ABI parameter's pointer comes from.
  enum class Source {
    Logits,
    Layer,
    RequestIds,
    Positions,
    DraftMask,
    Phase,
    KnobGroup,
    Ids,
    Weights
  };
  struct Bound {
    std::shared_ptr<const CudaPolicy> policy;
    npy::DType logits;
    std::vector<std::pair<Source, size_t>> params; // per ABI parameter (index: layer slot)
  };
  const Bound &entryFor(npy::DType logitsType) const;

  std::vector<Bound> entries;
  const void *knobs = nullptr, *phase = nullptr;
  size_t knobBytes = 0;
  int64_t groups = 0;
  std::string name;
};

} // namespace switchyard::runtime

#endif
