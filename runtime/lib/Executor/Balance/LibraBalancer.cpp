//===- LibraBalancer.cpp - Libra's lookahead replicas as a balancer -------===//
#include "switchyard/Executor/Balance/LibraBalancer.h"

#include <chrono>

namespace switchyard::exec {

LibraBalancer::LibraBalancer(std::shared_ptr<const LibraRules> rules, MoeLayer &layer,
                             comm::Communicator &comm, ExpertMover &mover)
    : rules(std::move(rules)), layer(layer), comm(comm), mover(mover), copies(layer) {}

void LibraBalancer::prepare(LibraBalancer *next) {
  successor = next;
  if (!successor)
    return;
  // @libra_predict takes the next layer's gate as [H, E].
  const std::vector<float> &w = successor->layer.routerWeights(); // [E, H]
  const int64_t e = layer.modelConfig().experts, h = layer.modelConfig().hidden;
  successor->gateForPredecessor.resize(static_cast<size_t>(h * e));
  for (int64_t r = 0; r < e; ++r)
    for (int64_t c = 0; c < h; ++c)
      successor->gateForPredecessor[static_cast<size_t>(c * e + r)] =
          w[static_cast<size_t>(r * h + c)];
}

bool LibraBalancer::beginStep(ExpertPlacement &placement, int64_t &moved,
                              std::string &error) {
  if (!forecast.planned) { // the first layer: the home placement, nothing predicted
    const int n = comm.size();
    forecast.plan = {};
    forecast.plan.imbalanceAfter = -1; // nothing planned
    forecast.plan.placement.assign(static_cast<size_t>(placement.experts * n), 0);
    for (int32_t e = 0; e < static_cast<int32_t>(placement.experts); ++e)
      forecast.plan.placement[static_cast<size_t>(e * n + placement.rankFor(e, 0))] = 1;
    forecast.predictedIds.clear();
    return true;
  }
  std::map<int32_t, ExpertCopy> replicas;
  if (!mover.wait(replicaTicket, replicas, moved, error))
    return false;
  for (auto &[expert, copy] : replicas)
    copies.install(expert, std::move(copy));
  return true;
}

bool LibraBalancer::afterRouting(const StepInput &input, double &commSeconds,
                                 std::string &error) {
  if (!successor)
    return true;
  std::vector<int32_t> mine, ids;
  if (!rules->predict(input.x, input.tokens, successor->gateForPredecessor, mine, error))
    return false;
  const int64_t k = input.tokens ? static_cast<int64_t>(mine.size()) / input.tokens
                                 : layer.modelConfig().topK;
  const auto start = std::chrono::steady_clock::now();
  if (!gatherRows(comm, mine.data(), input.tokens, k, *input.slices, ids, error))
    return false;
  commSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MoeLayer &next = successor->layer;
  ReplicaPlan plan;
  auto bytes = [&](int32_t expert) { return next.expertWeights(expert).bytes(); };
  if (!planReplicas(*rules, ids, tokenRanks(*input.slices), *input.placement, bytes, plan,
                    error))
    return false;
  TransferBatch batch;
  for (const ExpertTransfer &t : plan.transfers) {
    batch.transfers.push_back(t);
    batch.weights.emplace(t.expert, next.expertWeights(t.expert));
  }
  // The next layer waits for them at its step boundary.
  successor->forecast.plan = std::move(plan.holders);
  successor->forecast.predictedIds = std::move(ids);
  successor->forecast.planned = true;
  successor->replicaTicket = mover.submit(std::move(batch));
  return true;
}

bool LibraBalancer::endStep(const ExpertPlacement &, const Routing &, std::string &) {
  copies.restoreAll();
  forecast.planned = false;
  return true;
}

bool LibraBalancer::shardRemoteSlots(const Routing &routing,
                                     const std::vector<int32_t> &tokenRank,
                                     const std::vector<int32_t> &server,
                                     std::vector<int32_t> &remoteServer, float &imbalance,
                                     std::string &error) const {
  std::vector<int32_t> left; // [G, E]: remote slots of e rank g still takes
  if (!rules->shard(routing.ids, routing.k, tokenRank, holders(), left, imbalance, error))
    return false;
  return assignRemoteSlots(routing.ids, server, kRemote, std::move(left), holders(),
                           comm.size(), layer.modelConfig().experts, remoteServer, error);
}

void LibraBalancer::report(const ExpertPlacement &home, const Routing &routing,
                           LibraMetrics &metrics) const {
  const int n = comm.size();
  const std::vector<int32_t> &held = holders();
  metrics.replicas.assign(static_cast<size_t>(n), {});
  for (int32_t e = 0; e < static_cast<int32_t>(home.experts); ++e)
    for (int g = 0; g < n; ++g)
      if (held[static_cast<size_t>(e * n + g)] && home.rankFor(e, 0) != g)
        metrics.replicas[static_cast<size_t>(g)].push_back(e);
  metrics.plannedImbalance = forecast.plan.imbalanceAfter;
  metrics.predictionHitRate = forecast.hitRate(routing);
}

} // namespace switchyard::exec
