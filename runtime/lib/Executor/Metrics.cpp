//===- Metrics.cpp - what one MoE layer did for one batch ------------------===//
#include "switchyard/Executor/Metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace switchyard::exec {

double LayerMetrics::imbalance() const {
  if (slotsPerRank.empty())
    return 0;
  int64_t most = 0, sum = 0;
  for (int64_t s : slotsPerRank) {
    most = std::max(most, s);
    sum += s;
  }
  return sum ? double(most) * double(slotsPerRank.size()) / double(sum) : 1.0;
}

std::string metricsToJson(const std::vector<LayerMetrics> &layers,
                          const MemoryMetrics *memory) {
  nlohmann::json list = nlohmann::json::array();
  for (const LayerMetrics &m : layers) {
    list.push_back({{"layer", m.layer},
                    {"tokens", m.tokens},
                    {"active_experts", m.activeExperts},
                    {"tokens_per_expert", m.tokensPerExpert},
                    {"expert_bytes", m.expertBytes},
                    {"flops", m.flops},
                    {"seconds",
                     {{"router_gemm", m.seconds.routerGemm},
                      {"policy", m.seconds.policy},
                      {"permute", m.seconds.permute},
                      {"ffn", m.seconds.ffn},
                      {"combine", m.seconds.combine},
                      {"total", m.seconds.total()}}}});
    if (!m.slotsPerRank.empty())
      list.back()["ep"] = {{"ranks", m.slotsPerRank.size()},
                           {"slots_per_rank", m.slotsPerRank},
                           {"imbalance", m.imbalance()},
                           {"bytes_sent_per_rank", m.bytesSentPerRank},
                           {"seconds_per_rank", m.secondsPerRank},
                           {"comm_seconds", m.commSeconds},
                           {"weight_bytes_moved", m.weightBytesMoved},
                           {"placement_version", m.placementVersion}};
    if (m.libra.on)
      list.back()["ep"]["libra"] = {{"replicas", m.libra.replicas},
                                    {"remote_slots", m.libra.remoteSlots},
                                    {"local_slots", m.libra.localSlots},
                                    {"prediction_hit_rate", m.libra.predictionHitRate},
                                    {"planned_imbalance", m.libra.plannedImbalance},
                                    {"shard_imbalance", m.libra.shardImbalance}};
  }
  nlohmann::json out{{"layers", list}};
  if (memory) {
    nlohmann::json versions = nlohmann::json::object();
    for (size_t i = 0; i < memory->layers.size(); ++i)
      versions[std::to_string(memory->layers[i])] = memory->versions[i];
    out["memory"] = {{"mode", memory->mode},
                     {"low", memory->low},
                     {"budget", memory->budget},
                     {"used", memory->used},
                     {"peak", memory->peak},
                     {"promotions", memory->promotions},
                     {"demotions", memory->demotions},
                     {"loads", memory->loads},
                     {"evictions", memory->evictions},
                     {"failed_copies", memory->failedCopies},
                     {"admitted_promotions", memory->admittedPromotions},
                     {"deferred_promotions", memory->deferredPromotions},
                     {"stalls", memory->stalls},
                     {"stall_seconds", memory->stallSeconds},
                     {"prefetches", memory->prefetches},
                     {"overfetches", memory->overfetches},
                     {"bytes_copied", memory->bytesCopied},
                     {"copy_seconds", memory->copySeconds},
                     {"step_size", memory->stepSize},
                     {"versions", versions}};
  }
  return out.dump(2) + "\n";
}

} // namespace switchyard::exec
