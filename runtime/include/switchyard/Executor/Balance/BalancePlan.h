//===- BalancePlan.h - a balancer's rules turned into moves -----*- C++ -*-===//
//
// The plans of the balancers: the compiled rules (BalanceRules.h) decide the new
// placement; these functions call them and work out the expert transfers that realise
// it, in the order every rank agrees on (each rank computes the same plan from the same
// global data, so no rank needs to tell another). No communication here.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_BALANCE_BALANCEPLAN_H
#define SWITCHYARD_EXECUTOR_BALANCE_BALANCEPLAN_H

#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/ExpertTransfer.h"
#include "switchyard/Executor/Placement.h"

#include <functional>

namespace switchyard::exec {

/// The bytes of one expert's weights (what a transfer of it moves).
using ExpertBytes = std::function<int64_t(int32_t expert)>;

/// EPLB's plan: the next placement and the transfers that bring every rank the experts
/// it newly serves, rank by rank, expert by expert.
struct MigrationPlan {
  ExpertPlacement next;
  std::vector<ExpertTransfer> transfers;
};

/// The eplb rule on a window's `loads` [E]; each expert a rank newly serves comes from
/// the lowest rank serving it in `current`. The next placement's version is one more.
bool planMigration(const EplbRule &rule, const std::vector<float> &loads,
                   const ExpertPlacement &current, const ExpertBytes &bytes,
                   MigrationPlan &out, std::string &error);

/// Libra's plan for a layer: which ranks hold each expert (home or replica) and the
/// replica copies, each from its expert's home rank, expert by expert, rank by rank.
struct ReplicaPlan {
  LibraRules::Plan holders; // placement [E, G] and the imbalance the rule expects
  std::vector<ExpertTransfer> transfers;
};

/// @libra on the predicted ids [T, k] of every rank's tokens (tokenRank [T]); `home`:
/// the layer's home placement (one slot per expert).
bool planReplicas(const LibraRules &rules, const std::vector<int32_t> &predictedIds,
                  const std::vector<int32_t> &tokenRank, const ExpertPlacement &home,
                  const ExpertBytes &bytes, ReplicaPlan &out, std::string &error);

/// Libra's token sharding made concrete: `left` [G, E] (from @libra_shard) says how many
/// remote slots of expert e rank g serves; each slot marked `remote` in `server` [T * k]
/// goes, in slot order, to the ranks the plan gives its expert, in rank order.
/// remoteServer [T * k]: that rank, -1 for the other slots. An error where the shard
/// plan does not match the routing or gives a rank an expert `holders` [E, G] says it
/// does not hold.
bool assignRemoteSlots(const std::vector<int32_t> &ids, const std::vector<int32_t> &server,
                       int32_t remote, std::vector<int32_t> left,
                       const std::vector<int32_t> &holders, int ranks, int64_t experts,
                       std::vector<int32_t> &remoteServer, std::string &error);

} // namespace switchyard::exec

#endif
