//===- MoeLayer.h - one MoE block of a checkpoint on the host ---*- C++ -*-===//
//
// The Hugging Face sparse MoE block's forward on the host: router GEMM -> routing (a
// compiled policy, or a replayed routing) -> tokens gathered per expert -> SwiGLU
// expert FFN (down(silu(gate x) * up x)) per active expert -> weighted combine, plus
// the shared experts (Qwen2-MoE's behind sigmoid(shared_expert_gate x)). Weights stay in
// the mapped checkpoint (copying them into huge-page memory measured no faster);
// only the router's are widened at load.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_MOELAYER_H
#define SWITCHYARD_EXECUTOR_MOELAYER_H

#include "switchyard/Executor/Layer.h"
#include "switchyard/Model/MoeConfig.h"
#include "switchyard/Model/Safetensors.h"

#include <functional>

namespace switchyard::exec {

struct FfnWeights {
  const model::TensorView *gate = nullptr, *up = nullptr, *down = nullptr;
  int64_t bytes() const {
    return gate ? int64_t(gate->bytes + up->bytes + down->bytes) : 0;
  }
};

class MoeLayer : public Layer {
public:
  /// The weights of checkpoint layer `layer`, checked against the config's shapes.
  static std::unique_ptr<MoeLayer> load(const model::MoeConfig &config,
                                        const model::SafetensorsCheckpoint &ckpt,
                                        int64_t layer, std::string &error);

  int64_t index() const override { return layer; }
  /// The compiled router that computes the routing (nullptr: replays only).
  void attach(const Router *compiled) { router = compiled; }
  /// Threads that run the experts' FFNs (default: $SWITCHYARD_THREADS, else one per
  /// hardware thread).
  void setWorkers(int64_t n) { workers = n < 1 ? 1 : n; }
  const std::vector<float> &postAttentionNorm() const override { return norm; }
  /// Whether forward() adds the shared experts (an expert-parallel rank computing a
  /// part of the routed experts turns them off).
  void setSharedExperts(bool on) { includeShared = on; }
  /// The router GEMM alone: logits[T, E] = x[T, H] . router weight^T.
  void routerLogits(const float *x, int64_t tokens, float *logits) const;
  const Router *attachedRouter() const { return router; }
  /// The router's weight [E, H], widened.
  const std::vector<float> &routerWeights() const { return routerWeight; }
  /// DeepSeek-V3's e_score_correction_bias [E], or nullptr.
  const float *correctionBias() const { return bias.empty() ? nullptr : bias.data(); }
  const model::MoeConfig &modelConfig() const { return *config; }
  /// Expert `e`'s weights (views into the checkpoint, or into memory a balancer owns).
  const FfnWeights &expertWeights(int64_t e) const {
    return experts[static_cast<size_t>(e)];
  }
  /// Points expert `e` at other weights of the same shapes (a balancer publishing an
  /// expert it received); the views must outlive their use.
  void setExpertWeights(int64_t e, const FfnWeights &w) {
    experts[static_cast<size_t>(e)] = w;
  }

  /// Expert memory's view of a layer (switchyard/Memory/ExpertMemory.h): `routed` runs
  /// after routing (counts it; starts the loads of routed experts that are not resident
  /// and names them in `pending`); the resident experts run first, then `await` waits
  /// for pending ones (a stall) and they run, until none is left: the swap-ins overlap
  /// the ready tokens' compute (ExpertFlow §3.4). An error stops the layer.
  struct ExpertsHook {
    /// x: the layer's input [tokens, H].
    std::function<bool(int64_t layer, const float *x, int64_t tokens, const Routing &,
                       std::vector<int64_t> &pending, std::string &)>
        routed;
    /// Returns in `ready` the pending experts now resident (at least one).
    std::function<bool(int64_t layer, const std::vector<int64_t> &pending,
                       std::vector<int64_t> &ready, std::string &)>
        await;
  };
  void setExpertsHook(ExpertsHook hook) { expertsHook = std::move(hook); }
  /// Which experts are resident (1 per expert), for a policy that takes `resident`
  /// (cache-aware routing); nullptr: all of them.
  void setResidentExperts(const std::vector<uint8_t> *flags) { residentFlags = flags; }

  bool forward(const float *x, int64_t tokens, const BatchInfo &batch,
               const Routing *replay, Routing &routing, float *y, LayerMetrics &metrics,
               std::string &error) override;

private:
  /// Scratch of one FFN worker, reused across batches.
  struct Workspace {
    std::vector<float> gate, up, widen;
  };
  void expertFfn(const FfnWeights &w, const float *x, int64_t n, float *out, Workspace &ws);
  /// Runs the active experts' FFNs on the permuted rows, on `workers` threads (each
  /// takes the next-largest expert; OpenBLAS single-threaded inside); only those
  /// `include` marks when given.
  void runExperts(const Routing &routing, int64_t workers,
                  const std::vector<uint8_t> *include = nullptr);
  /// Adds expert e's bytes and FLOPs to `metrics`; false when it has no version.
  bool countExpert(int64_t e, int64_t rows, LayerMetrics &metrics,
                   std::string &error) const;

  const model::MoeConfig *config = nullptr;
  const Router *router = nullptr;
  int64_t layer = 0;
  int64_t workers = 1;
  bool includeShared = true;
  ExpertsHook expertsHook;
  const std::vector<uint8_t> *residentFlags = nullptr;
  std::vector<float> routerWeight; // [E, H], widened
  std::vector<float> bias;         // [E] or empty
  std::vector<float> norm;         // [H]
  std::vector<float> sharedGate;   // [H] or empty
  std::vector<FfnWeights> experts;
  FfnWeights shared;
  // Scratch reused across batches: permuted rows in expert order ([T * k, H] in and
  // out), one workspace per worker.
  std::vector<float> logits, permutedIn, permutedOut;
  std::vector<Workspace> workspaces;
};

} // namespace switchyard::exec

#endif
