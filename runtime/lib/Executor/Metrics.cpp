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

std::string metricsToJson(const std::vector<LayerMetrics> &layers) {
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
  return nlohmann::json{{"layers", list}}.dump(2) + "\n";
}

} // namespace switchyard::exec
