//===- TraceCapture.h - an executor's routing as a routing trace -*- C++ -*-===//
//
// What moe-exec --capture DIR records: per forward pass (one batch) and MoE layer the
// router logits the executor computed and the ids / weights the policy returned, with
// the batch's per-token request ids, positions and phase and the pass's index (step),
// written as a routing trace in the native layout of docs/traces.md (meta.json,
// layer_<L>.{logits,ids,weights}.npy, request_ids / positions / phase / step.npy), the
// layout switchyard.trace.load_trace reads. At most `maxTokens` tokens per layer:
// recording stops before the step that would pass it.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_TRACECAPTURE_H
#define SWITCHYARD_EXECUTOR_TRACECAPTURE_H

#include "switchyard/Executor/Batch.h"
#include "switchyard/Executor/Routing.h"

#include <map>

namespace switchyard::exec {

/// meta.json's model description.
struct TraceMeta {
  std::string model; // the checkpoint directory
  int64_t experts = 0;
  int64_t topK = 0;            // k when no step was recorded (else the routings' k)
  int64_t groups = 1;          // > 1: written as "groups" (DeepSeek-V3's n_group)
  std::vector<int64_t> layers; // the MoE layers run (each written, T = 0 when empty)
  // The experts' sizes, for moe-eval's bytes and time models (written when known).
  int64_t hiddenSize = 0, moeIntermediateSize = 0;
  std::string torchDtype;
  std::string source = "moe-exec";
};

class TraceCapture {
public:
  /// `flag` names the option in messages ("--capture").
  TraceCapture(std::string dir, int64_t maxTokens, std::string flag = "--capture")
      : dir(std::move(dir)), flag(std::move(flag)), maxTokens(maxTokens) {}

  /// Creates the directory (one level, as --out) or checks that the existing one is a
  /// writable directory; false with a message naming the flag and the path.
  bool open(std::string &error) const;

  /// Appends one forward pass: `routings` (layer -> routing, each with its logits
  /// [T, E]) of `batch`'s tokens. False, and nothing recorded, when the step would take
  /// a layer past maxTokens (then and after that recording is stopped; `warning` says
  /// so the first time) or a routing has no logits (`warning` says why).
  bool record(const std::map<int64_t, Routing> &routings, const BatchInfo &batch,
              int64_t experts, std::string &warning);

  /// Writes the trace recorded so far (T may be 0); false with a message naming the
  /// flag and the file.
  bool write(const TraceMeta &meta, std::string &error) const;

  int64_t tokens() const { return recorded; }
  int64_t steps() const { return step; }
  bool stopped() const { return full; }

private:
  struct Layer {
    std::vector<float> logits, weights; // [T, E], [T, k]
    std::vector<int32_t> ids;           // [T, k]
  };
  std::string dir, flag;
  int64_t maxTokens;
  int64_t recorded = 0, step = 0, k = 0;
  bool full = false;
  std::map<int64_t, Layer> layers;
  std::vector<int32_t> requestIds, positions, stepOf;
  std::vector<uint8_t> phases;
};

} // namespace switchyard::exec

#endif
