//===- BalancePlan.cpp - a balancer's rules turned into moves -------------===//
#include "switchyard/Executor/Balance/BalancePlan.h"

namespace switchyard::exec {

bool planMigration(const EplbRule &rule, const std::vector<float> &loads,
                   const ExpertPlacement &current, const ExpertBytes &bytes,
                   MigrationPlan &out, std::string &error) {
  std::vector<int32_t> phy2log;
  if (!rule.plan(loads, phy2log, error) ||
      !ExpertPlacement::fromPhy2Log(phy2log, current.experts, current.ranks, out.next,
                                    error))
    return false;
  out.next.version = current.version + 1;
  out.transfers.clear();
  for (int to = 0; to < current.ranks; ++to)
    for (int32_t e = 0; e < static_cast<int32_t>(current.experts); ++e) {
      if (!out.next.holds(to, e) || current.holds(to, e))
        continue;
      int from = 0;
      while (!current.holds(from, e)) // every expert has a slot, so some rank holds it
        ++from;
      out.transfers.push_back({e, from, to, bytes(e)});
    }
  return true;
}

bool planReplicas(const LibraRules &rules, const std::vector<int32_t> &predictedIds,
                  const std::vector<int32_t> &tokenRank, const ExpertPlacement &home,
                  const ExpertBytes &bytes, ReplicaPlan &out, std::string &error) {
  if (!rules.plan(predictedIds, tokenRank, out.holders, error))
    return false;
  const int n = home.ranks;
  out.transfers.clear();
  for (int32_t e = 0; e < static_cast<int32_t>(home.experts); ++e)
    for (int g = 0; g < n; ++g) {
      const int from = home.rankFor(e, 0);
      if (g == from || !out.holders.placement[static_cast<size_t>(e * n + g)])
        continue;
      out.transfers.push_back({e, from, g, bytes(e)});
    }
  return true;
}

bool assignRemoteSlots(const std::vector<int32_t> &ids, const std::vector<int32_t> &server,
                       int32_t remote, std::vector<int32_t> left,
                       const std::vector<int32_t> &holders, int ranks, int64_t experts,
                       std::vector<int32_t> &remoteServer, std::string &error) {
  const int n = ranks;
  std::vector<int> cursor(static_cast<size_t>(experts), 0);
  remoteServer.assign(server.size(), -1);
  for (size_t slot = 0; slot < server.size(); ++slot) {
    if (server[slot] != remote)
      continue;
    const int32_t e = ids[slot];
    int &g = cursor[static_cast<size_t>(e)];
    while (g < n && left[static_cast<size_t>(g * experts + e)] == 0)
      ++g;
    if (g == n) {
      error = "@libra_shard's plan serves fewer remote slots of expert " +
              std::to_string(e) + " than the routing has";
      return false;
    }
    if (!holders[static_cast<size_t>(e * n + g)]) {
      error = "@libra_shard gives rank " + std::to_string(g) + " remote slots of expert " +
              std::to_string(e) + ", which it does not hold";
      return false;
    }
    --left[static_cast<size_t>(g * experts + e)];
    remoteServer[slot] = g;
  }
  for (size_t i = 0; i < left.size(); ++i)
    if (left[i] != 0) {
      error = "@libra_shard's plan serves more remote slots of expert " +
              std::to_string(int64_t(i) % experts) + " than the routing has";
      return false;
    }
  return true;
}

} // namespace switchyard::exec
