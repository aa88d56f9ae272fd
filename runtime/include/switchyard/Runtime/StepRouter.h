//===- StepRouter.h - a routing policy bound for an engine's steps -*- C++ -*-===//
//
// What an engine's routing op (torch's switchyard::route_step, python/ops) calls once
// per MoE layer and forward step: a policy's host entries bound to what the engine
// gives — the logits (float32, or bfloat16 / float16 read in place by an entry compiled
// for them), the layer's own tensors (DeepSeek-V3's correction bias), the step's batch
// metadata — with vLLM's routing contract applied to the results (ids in [0, E):
// fillEmptySlots).
//
// The batch metadata and knobs of a step are per-thread state (StepState) the engine
// sets once per forward step, before the layers run; a layer's call then crosses no
// language boundary and allocates nothing once warm. Routers live in a process-wide
// table and are named by an integer handle (a constant in a traced graph). No
// LLVM/MLIR, torch or Python dependency.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_RUNTIME_STEPROUTER_H
#define SWITCHYARD_RUNTIME_STEPROUTER_H

#include "switchyard/Runtime/BoundCall.h"
#include "switchyard/Runtime/CudaStepRouter.h"

#include <map>
#include <mutex>
#include <optional>

namespace switchyard::runtime {

/// The batch metadata and knobs of one forward step (see python/switchyard/_metadata.py
/// for what each means). Per-token arrays hold one entry per token of the batch.
struct StepState {
  std::optional<std::vector<int32_t>> requestIds, positions, draftMask;
  std::optional<int64_t> phase;
  /// An engine's warm-up or profiling run (no requests): a missing per-token input
  /// is one request, positions 0..T-1, no drafts.
  bool warmup = false;
  /// Knob overrides for the whole step ("name=value"), over each router's defaults.
  std::vector<std::string> knobs;
  /// Per-layer overrides: MoE layer L's call (the op's `layer`) applies layerKnobs[L]
  /// after `knobs` (a knob given one value per layer). Empty: none; a call of a layer
  /// past the end, or of no layer (-1), while some are set is an error.
  std::vector<std::vector<std::string>> layerKnobs;
  /// Requests that set different knobs: each group's token rows are routed as a batch
  /// of their own with the group's overrides; rows in no group take `knobs`. A
  /// `pinned` group's rows (requests that asked for the model's own routing) are
  /// routed by the router's pinned router (StepRouter::attachPinned), without knobs.
  struct KnobGroup {
    std::vector<int64_t> rows;
    std::vector<std::string> knobs;
    bool pinned = false;
    /// The group's per-layer overrides (as StepState::layerKnobs).
    std::vector<std::vector<std::string>> layerKnobs;
  };
  std::vector<KnobGroup> groups;
};

/// The calling thread's step state (null: none set). Engines set it on the thread that
/// runs the forward pass; the layers' calls on that thread read it.
void setStepState(std::shared_ptr<const StepState> state);
const std::shared_ptr<const StepState> &currentStepState();

/// The inputs a policy may take from the step's batch metadata.
enum class MetadataInput { RequestIds, Positions, DraftMask, Phase };
/// The input named `name`, if it is one of them.
std::optional<MetadataInput> metadataInput(const std::string &name);

class StepRouter {
public:
  /// One host entry of the policy and the dtype of the logits it reads (float32: the
  /// entry that widens bfloat16 / float16 itself).
  struct Entry {
    std::shared_ptr<const HostPolicy> policy;
    npy::DType logits = npy::DType::F32;
  };

  /// Binds `entries` (the float32 one first; the same policy compiled for other logits
  /// dtypes after it) to the logits, then `layerInputs` (the names of the tensors the
  /// engine passes, in order; names the policy does not take are skipped; "placement"
  /// stands for its ABI parameters, layerInputs() names them), then the
  /// metadata inputs the policy declares. Every other input of the policy, or a
  /// policy without topk_ids / topk_weights results, is an error naming it
  /// (kInvalidArgument). `label` prefixes every error of the router's calls.
  static std::unique_ptr<StepRouter> create(std::vector<Entry> entries,
                                            const std::vector<std::string> &layerInputs,
                                            int64_t experts,
                                            const std::vector<std::string> &defaultKnobs,
                                            const std::string &label, Status &status);

  /// One layer's routing call: `tokens` rows of logits (`logitsType`), the layer
  /// tensors in the order of layerInputs() (float32, or bfloat16 / float16 widened;
  /// int32 for the placement's parameters),
  /// ids int32 [tokens, k] and weights float32 [tokens, k] written. The step's
  /// metadata and knobs come from the calling thread's StepState; `moeLayer` (the
  /// engine's MoE layer index, -1: not given) picks its per-layer knobs.
  Status route(int64_t tokens, const void *logits, npy::DType logitsType,
               const void *const *layer, const npy::DType *layerTypes, int32_t *ids,
               float *weights, int64_t moeLayer = -1) const;

  int64_t topK() const { return k; }
  int64_t experts() const { return numExperts; }
  /// The logits' row width (the expert count of the router's input).
  int64_t logitsWidth() const { return width; }
  const std::vector<std::string> &layerInputs() const { return layerNames; }
  const std::vector<MetadataInput> &metadataInputs() const { return metadata; }
  const std::string &label() const { return name; }

  /// The knob struct of the router's defaults plus `overrides` ("name=value"), checked
  /// against the knobs' rules (kInvalidKnob naming the knob); empty without run-time
  /// knobs (an override is then an error).
  Status knobStruct(const std::vector<std::string> &overrides,
                    std::vector<uint8_t> &bytes) const;

  /// The router that routes a pinned group's rows: the model's own routing for the
  /// same layer (topk_softmax, or deepseek_v3 for a grouped model), a registered step
  /// router (they live as long as the process). Its layer inputs must be among this
  /// router's (kInvalidArgument naming the one missing). Attached before the router is
  /// registered; without one, a pinned group is an error naming the request's setting.
  Status attachPinned(const StepRouter *router);
  const StepRouter *pinned() const { return pin; }

  /// The router's GPU launchers (null: bound for the host only). Attached before the
  /// router is registered.
  const CudaStepRouter *cuda() const { return gpu.get(); }
  void attachCuda(std::unique_ptr<const CudaStepRouter> router) { gpu = std::move(router); }

private:
  StepRouter() = default;
  struct Bound {
    std::shared_ptr<const HostPolicy> policy;
    npy::DType logits;
    std::unique_ptr<BoundCall> call;
  };
  size_t entryFor(npy::DType logitsType) const;
  /// The knob struct for the defaults plus `overrides` (cached; packing errors name the
  /// knob).
  Status knobsFor(size_t entry, const std::vector<std::string> &overrides,
                  std::shared_ptr<const std::vector<uint8_t>> &bytes) const;
  Status runRows(size_t entry, int64_t tokens, const void *logits, npy::DType logitsType,
                 const void *const *layer, const npy::DType *layerTypes,
                 const StepState *state, const std::vector<int64_t> *rows,
                 const std::vector<std::string> &knobs, int32_t *ids, float *weights) const;
  /// A pinned group's rows, routed by `pin` with this router's layer tensors mapped
  /// to its inputs.
  Status routePinned(int64_t tokens, const void *logits, npy::DType logitsType,
                     const void *const *layer, const npy::DType *layerTypes,
                     const StepState *state, const std::vector<int64_t> &rows, int32_t *ids,
                     float *weights) const;
  Status fail(StatusCode code, const std::string &message) const {
    return {code, name + ": " + message};
  }

  std::vector<Bound> entries;
  std::vector<std::string> layerNames;
  std::vector<MetadataInput> metadata;
  std::vector<std::string> defaults;
  std::string name;
  int64_t k = 0, numExperts = 0, width = 0;
  mutable std::mutex cacheMutex;
  // (entry index, overrides) -> knob struct; cleared when it grows past a bound.
  mutable std::map<std::pair<size_t, std::vector<std::string>>,
                   std::shared_ptr<const std::vector<uint8_t>>>
      cache;
  // Per entry: the defaults' knob struct (null: the policy has no run-time knobs).
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> defaultKnobs;
  std::unique_ptr<const CudaStepRouter> gpu;
  const StepRouter *pin = nullptr;
  // The pinned router's layer input i is this router's layer input pinLayers[i].
  std::vector<size_t> pinLayers;
};

/// A routed call the engine asked to record (the op's `layer` >= 0): the layer, its
/// logits (tokens x width, of logitsType) and the results (tokens x k).
struct RecordedCall {
  int64_t layer = -1, tokens = 0, width = 0, k = 0;
  const void *logits = nullptr;
  npy::DType logitsType = npy::DType::F32;
  const int32_t *ids = nullptr;
  const float *weights = nullptr;
};
/// The process's recorder of routed calls (a routing-trace capture; null: none). It
/// must not throw: a failed recording never fails the routing.
using StepRecorder = void (*)(const RecordedCall &call);
void setStepRecorder(StepRecorder recorder);
StepRecorder stepRecorder();

/// The process's step routers, by handle (a small integer, never reused).
int64_t registerStepRouter(std::shared_ptr<const StepRouter> router);
/// The router of `handle`, or null.
const StepRouter *stepRouter(int64_t handle);

} // namespace switchyard::runtime

#endif
