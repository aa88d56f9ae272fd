//===- Metrics.cpp - what one MoE layer did for one batch ------------------===//
#include "switchyard/Executor/Metrics.h"

#include <nlohmann/json.hpp>

namespace switchyard::exec {

std::string metricsToJson(const std::vector<LayerMetrics> &layers) {
  nlohmann::json list = nlohmann::json::array();
  for (const LayerMetrics &m : layers)
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
  return nlohmann::json{{"layers", list}}.dump(2) + "\n";
}

} // namespace switchyard::exec
