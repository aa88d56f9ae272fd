//===- BalanceRules.h - the compiled balancing rules of an EP job -*- C++ -*-===//
//
// The balance rules an expert-parallel executor runs live, each compiled from its
// shipped .mlir file for the model and the job's ranks (through the policy cache;
// compileShipped does that for any shipped rule):
//   - EPLB (policies/eplb.mlir @eplb): window loads -> a phy2log of S physical slots;
//   - Libra (policies/libra.mlir): @libra_predict (the next layer's gate on the current
//     hidden states), @libra (replicas for the next layer from the prediction),
//     @libra_shard (token sharding of the actual routing on the replicas in place).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCERULES_H
#define SWITCHYARD_EXECUTOR_BALANCERULES_H

#include "switchyard/Model/MoeConfig.h"
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/PolicyCache.h"

#include <memory>

namespace switchyard::exec {

/// `entry` of the shipped policy `file` (policies/, see shippedPolicyDir) compiled for
/// the model's shape plus `flags`, through the cache, loaded for the host.
std::shared_ptr<runtime::HostPolicy>
compileShipped(const model::MoeConfig &config, const std::string &file,
               const std::string &entry, std::vector<std::string> flags,
               runtime::PolicyCache &cache, std::string &error);

/// The compiled eplb rule (policies/eplb.mlir) for one model and job. The rule is
/// virtual so that a balancer's tests can stand a hand-worked one in its place.
class EplbRule {
public:
  virtual ~EplbRule() = default;
  static std::shared_ptr<EplbRule> create(const model::MoeConfig &config, int ranks,
                                          int64_t slots, runtime::PolicyCache &cache,
                                          std::string &error);
  /// The plan for `loads` [E]: a phy2log of `slots` entries.
  virtual bool plan(const std::vector<float> &loads, std::vector<int32_t> &phy2log,
                    std::string &error) const;

private:
  std::shared_ptr<runtime::HostPolicy> policy;
};

/// Libra's three compiled entries (policies/libra.mlir) for one model and job. Experts
/// live on home rank e / (E / ranks); a placement is [E, ranks], 1 where a rank holds
/// the expert (home or replica). Virtual, as EplbRule.
class LibraRules {
public:
  virtual ~LibraRules() = default;
  /// `knobSettings`: "name=value" for the entries' knobs (extra_experts, alpha,
  /// epsilon); a name no entry has is an error.
  static std::shared_ptr<LibraRules> create(const model::MoeConfig &config, int ranks,
                                            const std::vector<std::string> &knobSettings,
                                            runtime::PolicyCache &cache,
                                            std::string &error);
  int ranks() const { return gpus; }
  /// The predicted top-k ids [T, k] of the next layer: @libra_predict on the current
  /// hidden states x [T, H] and the next layer's gate, transposed to [H, E].
  virtual bool predict(const float *x, int64_t tokens, const std::vector<float> &nextGate,
                       std::vector<int32_t> &ids, std::string &error) const;
  struct Plan {
    std::vector<int32_t> placement; // [E, G]
    float imbalanceBefore = 0, imbalanceReplicated = 0, imbalanceAfter = 0;
  };
  /// @libra on the predicted ids [T, k] of every rank's tokens (tokenRank [T]).
  virtual bool plan(const std::vector<int32_t> &ids, const std::vector<int32_t> &tokenRank,
                    Plan &out, std::string &error) const;
  /// @libra_shard: shardPlan [G, E] = the remote slots of expert e rank g serves, for the
  /// actual ids [T, k] with `placement` [E, G] in place; `imbalance` after sharding.
  virtual bool shard(const std::vector<int32_t> &ids, int64_t k,
                     const std::vector<int32_t> &tokenRank,
                     const std::vector<int32_t> &placement, std::vector<int32_t> &shardPlan,
                     float &imbalance, std::string &error) const;

private:
  struct Entry {
    std::shared_ptr<runtime::HostPolicy> policy;
    std::vector<uint8_t> knobs;
  };
  Entry predictor, replicate, sharder;
  int64_t experts = 0, topK = 0, hidden = 0;
  int gpus = 1;
};

} // namespace switchyard::exec

#endif
