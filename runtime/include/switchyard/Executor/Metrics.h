//===- Metrics.h - what one MoE layer did for one batch ---------*- C++ -*-===//
#ifndef SWITCHYARD_EXECUTOR_METRICS_H
#define SWITCHYARD_EXECUTOR_METRICS_H

#include <cstdint>
#include <string>
#include <vector>

namespace switchyard::exec {

/// Seconds per stage of a layer's forward pass.
struct StageTimes {
  double routerGemm = 0, policy = 0, permute = 0, ffn = 0, combine = 0;
  double total() const { return routerGemm + policy + permute + ffn + combine; }
};

/// What Libra did for one layer (expert parallelism with --libra).
struct LibraMetrics {
  bool on = false;
  std::vector<std::vector<int32_t>> replicas;    // per rank: experts imported (not home)
  std::vector<std::vector<int64_t>> remoteSlots; // [rank][expert]: remote slots it served
  int64_t localSlots = 0;        // slots served on their token's rank (MoE_local)
  double predictionHitRate = -1; // routed (token, expert) pairs predicted; -1: none
  double plannedImbalance = -1;  // @libra's imbalance after sharding, on the prediction
  double shardImbalance = 0;     // @libra_shard's, on the actual routing
};

struct LayerMetrics {
  int64_t layer = 0; // the checkpoint's layer index
  int64_t tokens = 0;
  int64_t activeExperts = 0;
  std::vector<int32_t> tokensPerExpert;
  int64_t expertBytes = 0; // weight bytes read: router, active experts, shared experts
  int64_t flops = 0;       // 2 x multiply-adds of the GEMMs
  StageTimes seconds;
  /// Expert parallelism (empty on one rank), one entry per rank: the routed slots its
  /// experts served, the bytes of hidden rows it sent (dispatch + combine), its seconds
  /// in the layer; communication seconds (gather, dispatch, combine) are in `comm`.
  std::vector<int64_t> slotsPerRank, bytesSentPerRank;
  std::vector<double> secondsPerRank;
  double commSeconds = 0;
  /// Live balancing: bytes of expert weights moved between ranks in this step (all
  /// ranks) and the version of the placement the step ran with (0: the initial one).
  int64_t weightBytesMoved = 0, placementVersion = 0;
  LibraMetrics libra;
  /// max / mean of slotsPerRank (1: balanced), 0 without expert parallelism.
  double imbalance() const;
};

/// What expert memory did in one step (moe-exec --memory).
struct MemoryMetrics {
  std::string mode, low; // low: the low-precision format
  int64_t budget = 0, used = 0, peak = 0;
  int64_t promotions = 0, demotions = 0, loads = 0, evictions = 0, failedCopies = 0;
  int64_t admittedPromotions = 0, deferredPromotions = 0, stalls = 0, prefetches = 0,
          overfetches = 0, bytesCopied = 0;
  double stallSeconds = 0, copySeconds = 0;
  int32_t stepSize = 0;                      // ExpertFlow's S
  std::vector<int64_t> layers;               // checkpoint layer indices
  std::vector<std::vector<int8_t>> versions; // [layer][expert]: 2 high, 1 low, 0 none
};

/// {"layers": [{"layer", "tokens", "active_experts", "tokens_per_expert", "expert_bytes",
/// "flops", "seconds": {"router_gemm", "policy", "permute", "ffn", "combine", "total"},
/// and with expert parallelism "ep": {"ranks", "slots_per_rank", "imbalance",
/// "bytes_sent_per_rank", "seconds_per_rank", "comm_seconds", "weight_bytes_moved",
/// "placement_version", and with Libra "libra": {"replicas", "remote_slots",
/// "local_slots", "prediction_hit_rate", "planned_imbalance", "shard_imbalance"}}}]}
/// as JSON text.
/// With expert memory, "memory": {"mode", "low", "budget", "used", "peak", "promotions",
/// "demotions", "loads", "evictions", "failed_copies", "admitted_promotions",
/// "deferred_promotions", "stalls",
/// "stall_seconds", "prefetches", "overfetches", "bytes_copied", "copy_seconds",
/// "step_size", "versions": {"<layer>": [2 high / 1 low / 0 none per expert]}}.
std::string metricsToJson(const std::vector<LayerMetrics> &layers,
                          const MemoryMetrics *memory = nullptr);

} // namespace switchyard::exec

#endif
