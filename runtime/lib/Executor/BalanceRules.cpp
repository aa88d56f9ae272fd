//===- BalanceRules.cpp - the compiled balancing rules of an EP job -------===//
#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/Executor.h"
#include "switchyard/Runtime/Binding.h"

#include <algorithm>
#include <set>

namespace switchyard::exec {

std::shared_ptr<EplbRule> EplbRule::create(const model::MoeConfig &config, int ranks,
                                           int64_t slots, runtime::PolicyCache &cache,
                                           std::string &error) {
  if (slots < config.experts || slots % ranks != 0) {
    error = "--eplb-slots " + std::to_string(slots) + " must be at least the " +
            std::to_string(config.experts) + " experts and a multiple of --ep " +
            std::to_string(ranks);
    return nullptr;
  }
  std::vector<std::string> flags = {
      "--nodes", "1", "--devices", std::to_string(ranks), "--slots", std::to_string(slots)};
  if (config.family != model::Family::DeepseekV3) // no expert groups: one
    flags.insert(flags.end(), {"--groups", "1"});
  auto rule = std::make_shared<EplbRule>();
  rule->policy = compileShipped(config, "eplb.mlir", "eplb", flags, cache, error);
  return rule->policy ? rule : nullptr;
}

bool EplbRule::plan(const std::vector<float> &loads, std::vector<int32_t> &phy2log,
                    std::string &error) const {
  runtime::CallBuffers call(policy->signature());
  npy::Array array = npy::makeF32({static_cast<int64_t>(loads.size())}, loads.data());
  if (!call.bind("loads", array, "eplb loads", error) || !call.finish(error) ||
      !policy->run(call, {}, error))
    return false;
  npy::Array plan = call.output(static_cast<size_t>(call.findOutput("phy2log")));
  phy2log.assign(plan.i32(), plan.i32() + plan.numel());
  return true;
}

std::shared_ptr<LibraRules> LibraRules::create(const model::MoeConfig &config, int ranks,
                                               const std::vector<std::string> &knobSettings,
                                               runtime::PolicyCache &cache,
                                               std::string &error) {
  if (ranks < 2 || config.experts % ranks != 0) {
    error = "--libra places expert e on home rank e / (E / N): the model's " +
            std::to_string(config.experts) + " experts must split evenly over --ep " +
            std::to_string(ranks);
    return nullptr;
  }
  auto rules = std::make_shared<LibraRules>();
  rules->experts = config.experts;
  rules->topK = config.topK;
  rules->hidden = config.hidden;
  rules->gpus = ranks;
  const std::vector<std::string> devices = {"--devices", std::to_string(ranks)};
  std::set<std::string> known;
  for (auto [entry, slot] :
       {std::pair<const char *, Entry *>{"libra_predict", &rules->predictor},
        {"libra", &rules->replicate},
        {"libra_shard", &rules->sharder}}) {
    slot->policy = compileShipped(config, "libra.mlir", entry, devices, cache, error);
    if (!slot->policy)
      return nullptr;
    // Each entry takes the settings of the knobs it has.
    std::vector<std::string> mine;
    for (const std::string &setting : knobSettings)
      for (const runtime::Knob &knob : slot->policy->signature().knobs)
        if (setting.substr(0, setting.find('=')) == knob.name) {
          mine.push_back(setting);
          known.insert(knob.name);
        }
    if (!slot->policy->packKnobs(mine, slot->knobs, error)) {
      error = "--libra-set: " + error;
      return nullptr;
    }
  }
  for (const std::string &setting : knobSettings)
    if (!known.count(setting.substr(0, setting.find('=')))) {
      error = "--libra-set '" + setting +
              "': policies/libra.mlir has no such knob "
              "(extra_experts, alpha, epsilon)";
      return nullptr;
    }
  return rules;
}

bool LibraRules::predict(const float *x, int64_t tokens, const std::vector<float> &nextGate,
                         std::vector<int32_t> &ids, std::string &error) const {
  runtime::CallBuffers call(predictor.policy->signature());
  if (!call.bind("hidden", npy::makeF32({tokens, hidden}, x), "libra hidden states",
                 error) ||
      !call.bind("next_gate", npy::makeF32({hidden, experts}, nextGate.data()),
                 "the next layer's gate", error) ||
      !call.finish(error) || !predictor.policy->run(call, predictor.knobs, error))
    return false;
  npy::Array out = call.output(static_cast<size_t>(call.findOutput("next_topk_ids")));
  ids.assign(out.i32(), out.i32() + out.numel());
  return true;
}

bool LibraRules::plan(const std::vector<int32_t> &ids,
                      const std::vector<int32_t> &tokenRank, Plan &out,
                      std::string &error) const {
  const int64_t tokens = static_cast<int64_t>(tokenRank.size());
  runtime::CallBuffers call(replicate.policy->signature());
  if (!call.bind("next_topk_ids", npy::makeI32({tokens, topK}, ids.data()), "predicted ids",
                 error) ||
      !call.bind("token_gpu", npy::makeI32({tokens}, tokenRank.data()), "token ranks",
                 error) ||
      !call.finish(error) || !replicate.policy->run(call, replicate.knobs, error))
    return false;
  auto output = [&](const char *name) {
    return call.output(size_t(call.findOutput(name)));
  };
  npy::Array placement = output("placement");
  out.placement.assign(placement.i32(), placement.i32() + placement.numel());
  out.imbalanceBefore = output("imbalance_before").f32()[0];
  out.imbalanceReplicated = output("imbalance_replicated").f32()[0];
  out.imbalanceAfter = output("imbalance_after").f32()[0];
  return true;
}

bool LibraRules::shard(const std::vector<int32_t> &ids, int64_t k,
                       const std::vector<int32_t> &tokenRank,
                       const std::vector<int32_t> &placement,
                       std::vector<int32_t> &shardPlan, float &imbalance,
                       std::string &error) const {
  const int64_t tokens = static_cast<int64_t>(tokenRank.size());
  runtime::CallBuffers call(sharder.policy->signature());
  if (!call.bind("topk_ids", npy::makeI32({tokens, k}, ids.data()), "routed ids", error) ||
      !call.bind("token_gpu", npy::makeI32({tokens}, tokenRank.data()), "token ranks",
                 error) ||
      !call.bind("placement", npy::makeI32({experts, gpus}, placement.data()),
                 "libra placement", error) ||
      !call.finish(error) || !sharder.policy->run(call, sharder.knobs, error))
    return false;
  npy::Array plan = call.output(static_cast<size_t>(call.findOutput("shard_plan")));
  shardPlan.assign(plan.i32(), plan.i32() + plan.numel());
  imbalance = call.output(static_cast<size_t>(call.findOutput("imbalance_after"))).f32()[0];
  return true;
}

} // namespace switchyard::exec
