//===- EpMoeLayer.cpp - one MoE block, experts spread over ranks ----------===//
#include "switchyard/Executor/EpMoeLayer.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace switchyard::exec {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
} // namespace

EpMoeLayer::EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm,
                       std::shared_ptr<ExpertMover> mover)
    : local(std::move(inner)), comm(comm), mover(std::move(mover)) {
  placement = ExpertPlacement::contiguous(local->modelConfig().experts, comm.size());
  loads.assign(static_cast<size_t>(placement.experts), 0.0f);
}

void EpMoeLayer::balanceWith(std::shared_ptr<const EplbRule> rule,
                             const EplbOptions &options) {
  eplb = std::move(rule);
  eplbOptions = options;
}

void EpMoeLayer::balanceWith(std::shared_ptr<const LibraRules> rules, EpMoeLayer *next) {
  libra = std::move(rules);
  successor = next;
  if (!successor)
    return;
  // @libra_predict takes the next layer's gate as [H, E].
  const std::vector<float> &w = successor->local->routerWeights(); // [E, H]
  const int64_t e = placement.experts, h = local->modelConfig().hidden;
  successor->gateForPredecessor.resize(static_cast<size_t>(h * e));
  for (int64_t r = 0; r < e; ++r)
    for (int64_t c = 0; c < h; ++c)
      successor->gateForPredecessor[static_cast<size_t>(c * e + r)] =
          w[static_cast<size_t>(r * h + c)];
}

bool EpMoeLayer::forward(const float *x, int64_t tokens, const BatchInfo &batch,
                         const Routing *replay, Routing &routing, float *y,
                         LayerMetrics &metrics, std::string &error) {
  const int64_t e = placement.experts;
  const int me = comm.rank(), n = comm.size();
  const std::string where =
      "layer " + std::to_string(index()) + " (rank " + std::to_string(me) + "): ";
  const auto layerStart = Clock::now();
  Step s{x, tokens, &batch, {}, &routing, {}, y, &metrics};
  auto fail = [&] {
    error = where + error;
    return false;
  };
  auto start = Clock::now();
  if (!gatherSlices(comm, tokens, s.slices, error))
    return fail();
  s.commSeconds += since(start);
  const int64_t total = s.slices.begin[n];
  // A step boundary: balancers' weights arrive (EPLB publishes a complete migration;
  // Libra's replicas for this layer are installed).
  int64_t moved = 0;
  if ((eplb && !advanceMigration(moved, error)) ||
      (libra && !installReplicas(moved, error)))
    return fail();
  if (batch.tokens != total) {
    error = "the batch metadata has " + std::to_string(batch.tokens) +
            " tokens, the ranks hold " + std::to_string(total);
    return fail();
  }

  // 1. The global batch's routing, the same on every rank.
  double routerSeconds = 0, policySeconds = 0;
  if (replay) {
    routing = *replay;
    if (routing.tokens != total) {
      error = "the replayed routing is for " + std::to_string(routing.tokens) +
              " tokens, the batch has " + std::to_string(total);
      return fail();
    }
  } else {
    localLogits.resize(static_cast<size_t>(tokens * e));
    start = Clock::now();
    local->routerLogits(x, tokens, localLogits.data());
    routerSeconds = since(start);
    start = Clock::now();
    if (!gatherRows(comm, localLogits.data(), tokens, e, s.slices, globalLogits, error))
      return fail();
    s.commSeconds += since(start);
    start = Clock::now();
    if (!local->attachedRouter()->route(globalLogits.data(), total, local->correctionBias(),
                                        batch, routing, error, &placement))
      return fail();
    policySeconds = since(start);
  }
  // Libra: the next layer's replicas are planned and start moving now, while this
  // layer computes.
  if (libra && successor && !planSuccessor(s, error))
    return fail();

  // 2-3. Each slot's serving rank, the experts, the partial sums back to the owners.
  if (!(libra ? forwardTwoStage(s, error) : forwardAllToAll(s, error)))
    return fail();

  metrics.layer = index();
  metrics.tokens = tokens;
  metrics.seconds.routerGemm = routerSeconds;
  metrics.seconds.policy = policySeconds;
  // What every rank did: routed slots per rank from the (global) assignment; bytes sent
  // and seconds gathered.
  metrics.slotsPerRank.assign(static_cast<size_t>(n), 0);
  for (int32_t rank : s.server)
    if (rank >= 0)
      ++metrics.slotsPerRank[static_cast<size_t>(rank)];
  struct Report {
    int64_t bytes;
    double seconds;
  } mine{s.bytesSent, since(layerStart)};
  std::vector<Report> all(static_cast<size_t>(n));
  if (!comm.allGather(&mine, sizeof mine, all.data(), error))
    return fail();
  metrics.bytesSentPerRank.clear();
  metrics.secondsPerRank.clear();
  for (const Report &r : all) {
    metrics.bytesSentPerRank.push_back(r.bytes);
    metrics.secondsPerRank.push_back(r.seconds);
  }
  metrics.commSeconds = s.commSeconds;
  metrics.weightBytesMoved = moved;
  metrics.placementVersion = placement.version;
  if (eplb && !countAndPlan(routing, error))
    return fail();
  if (libra)
    dropReplicas();
  return true;
}

bool EpMoeLayer::computeServed(Step &s, const float *rows,
                               const std::vector<int64_t> &served, bool routed,
                               bool withShared, float *out, std::string &error) {
  const Routing &routing = *s.routing;
  const int64_t k = routing.k, count = static_cast<int64_t>(served.size());
  const int me = comm.rank();
  Routing mine;
  mine.tokens = count;
  mine.k = k;
  mine.ids.resize(static_cast<size_t>(count * k));
  mine.weights.resize(static_cast<size_t>(count * k));
  for (int64_t r = 0; r < count; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t slot = served[static_cast<size_t>(r)] * k + j;
      const bool here = routed && s.server[static_cast<size_t>(slot)] == me;
      mine.ids[static_cast<size_t>(r * k + j)] =
          here ? routing.ids[static_cast<size_t>(slot)] : -1;
      mine.weights[static_cast<size_t>(r * k + j)] =
          here ? routing.weights[static_cast<size_t>(slot)] : 0.0f;
    }
  Routing scratch;
  LayerMetrics part;
  local->setSharedExperts(withShared);
  bool ok = local->forward(rows, count, *s.batch, &mine, scratch, out, part, error);
  local->setSharedExperts(true);
  LayerMetrics &m = *s.metrics;
  m.activeExperts = std::max(m.activeExperts, part.activeExperts);
  if (m.tokensPerExpert.empty())
    m.tokensPerExpert = part.tokensPerExpert;
  else
    for (size_t i = 0; i < part.tokensPerExpert.size(); ++i)
      m.tokensPerExpert[i] += part.tokensPerExpert[i];
  m.expertBytes += part.expertBytes;
  m.flops += part.flops;
  m.seconds.permute += part.seconds.permute;
  m.seconds.ffn += part.seconds.ffn;
  m.seconds.combine += part.seconds.combine;
  m.activeExperts = std::count_if(m.tokensPerExpert.begin(), m.tokensPerExpert.end(),
                                  [](int32_t c) { return c > 0; });
  return ok;
}

std::vector<int64_t> EpMoeLayer::ownTokens(const Step &s) const {
  std::vector<int64_t> tokens(static_cast<size_t>(s.tokens));
  for (int64_t t = 0; t < s.tokens; ++t)
    tokens[static_cast<size_t>(t)] = s.slices.begin[comm.rank()] + t;
  return tokens;
}

bool EpMoeLayer::returnPartials(Step &s, const std::vector<int64_t> &served,
                                const float *partials,
                                const std::function<bool(int64_t, int)> &computed,
                                std::string &error) {
  const int64_t h = local->modelConfig().hidden, row = h * int64_t(sizeof(float));
  const int me = comm.rank(), n = comm.size();
  const int64_t first = s.slices.begin[me];
  std::vector<int64_t> sendBytes(static_cast<size_t>(n), 0),
      recvBytes(static_cast<size_t>(n), 0);
  for (int64_t token : served) // in rank order: slices are contiguous
    sendBytes[static_cast<size_t>(s.slices.owner(token))] += row;
  for (int p = 0; p < n; ++p)
    for (int64_t t = 0; t < s.tokens; ++t)
      if (computed(first + t, p))
        recvBytes[static_cast<size_t>(p)] += row;
  int64_t expected = 0;
  for (int p = 0; p < n; ++p) {
    expected += recvBytes[static_cast<size_t>(p)];
    if (p != me)
      s.bytesSent += sendBytes[static_cast<size_t>(p)];
  }
  back.resize(static_cast<size_t>(expected / int64_t(sizeof(float))));
  auto start = Clock::now();
  if (!comm.allToAllV(partials, sendBytes, back.data(), recvBytes, error))
    return false;
  s.commSeconds += since(start);
  auto combineStart = Clock::now();
  size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (int64_t t = 0; t < s.tokens; ++t)
      if (computed(first + t, p)) {
        const float *part = back.data() + at;
        float *out = s.y + t * h;
        for (int64_t c = 0; c < h; ++c)
          out[c] += part[c];
        at += static_cast<size_t>(h);
      }
  s.metrics->seconds.combine += since(combineStart);
  return true;
}

bool EpMoeLayer::forwardAllToAll(Step &s, std::string &error) {
  const Routing &routing = *s.routing;
  const int64_t h = local->modelConfig().hidden, k = routing.k, total = routing.tokens;
  const int me = comm.rank(), n = comm.size();
  const int64_t first = s.slices.begin[me];
  s.server.resize(static_cast<size_t>(total * k));
  // Which ranks serve each token (one of its slots), worked out once: the dispatch, the
  // receive order and the combine all read it.
  std::vector<uint8_t> serves(static_cast<size_t>(total * n), 0);
  for (int64_t token = 0; token < total; ++token)
    for (int64_t j = 0; j < k; ++j) {
      int rank = placement.rankFor(routing.ids[static_cast<size_t>(token * k + j)], token);
      s.server[static_cast<size_t>(token * k + j)] = rank;
      if (rank >= 0)
        serves[static_cast<size_t>(token * n + rank)] = 1;
    }
  auto needs = [&](int64_t token, int rank) {
    return serves[static_cast<size_t>(token * n + rank)] != 0;
  };

  // Dispatch: each local token's row once to every rank serving one of its slots.
  std::vector<int64_t> sendBytes(static_cast<size_t>(n), 0),
      recvBytes(static_cast<size_t>(n), 0);
  sendRows.clear();
  for (int p = 0; p < n; ++p)
    for (int64_t t = 0; t < s.tokens; ++t)
      if (needs(first + t, p)) {
        sendRows.insert(sendRows.end(), s.x + t * h, s.x + (t + 1) * h);
        sendBytes[static_cast<size_t>(p)] += h * int64_t(sizeof(float));
      }
  std::vector<int64_t> served; // global token of each received row, in arrival order
  for (int q = 0; q < n; ++q)
    for (int64_t token = s.slices.begin[q]; token < s.slices.begin[q + 1]; ++token)
      if (needs(token, me)) {
        served.push_back(token);
        recvBytes[static_cast<size_t>(q)] += h * int64_t(sizeof(float));
      }
  for (int p = 0; p < n; ++p)
    if (p != me)
      s.bytesSent += sendBytes[static_cast<size_t>(p)];
  recvRows.resize(served.size() * static_cast<size_t>(h));
  auto start = Clock::now();
  if (!comm.allToAllV(sendRows.data(), sendBytes, recvRows.data(), recvBytes, error))
    return false;
  s.commSeconds += since(start);

  // This rank's experts on the received rows, then the owners' shared experts (their
  // own tokens, every routed slot empty) and the partial sums in rank order.
  partial.resize(recvRows.size());
  if (!computeServed(s, recvRows.data(), served, true, false, partial.data(), error) ||
      !computeServed(s, s.x, ownTokens(s), false, true, s.y, error))
    return false;
  return returnPartials(s, served, partial.data(), needs, error);
}

//===----------------------------------------------------------------------===//
// Live EPLB
//===----------------------------------------------------------------------===//

bool EpMoeLayer::countAndPlan(const Routing &routing, std::string &error) {
  for (int32_t id : routing.ids)
    if (id >= 0)
      loads[static_cast<size_t>(id)] += 1.0f;
  if (++stepsInWindow < eplbOptions.window || migrating)
    return true;
  // Every rank plans from the same loads (the routing is global): the same plan.
  std::vector<int32_t> phy2log;
  if (!eplb->plan(loads, phy2log, error) ||
      !ExpertPlacement::fromPhy2Log(phy2log, placement.experts, comm.size(), next, error))
    return false;
  next.version = placement.version + 1;
  std::fill(loads.begin(), loads.end(), 0.0f);
  stepsInWindow = 0;
  // What each rank newly serves comes from the lowest rank holding it now.
  transfers.clear();
  transfersSubmitted = 0;
  for (int to = 0; to < comm.size(); ++to)
    for (int32_t e = 0; e < static_cast<int32_t>(placement.experts); ++e) {
      if (!next.holds(to, e) || placement.holds(to, e))
        continue;
      int from = 0;
      while (!placement.holds(from, e))
        ++from;
      transfers.push_back({e, from, to, local->expertWeights(e).bytes()});
    }
  migrating = true;
  submitChunk(); // moves while the rest of the stack computes
  return true;
}

void EpMoeLayer::submitChunk() {
  // The next transfers up to the byte budget (at least one).
  TransferBatch batch;
  int64_t bytes = 0;
  while (transfersSubmitted < transfers.size() &&
         (batch.transfers.empty() ||
          bytes + transfers[transfersSubmitted].bytes <= eplbOptions.bytesPerStep)) {
    const ExpertTransfer &t = transfers[transfersSubmitted++];
    bytes += t.bytes;
    batch.transfers.push_back(t);
    batch.weights.emplace(t.expert, local->expertWeights(t.expert));
  }
  chunkInFlight = mover->submit(std::move(batch));
}

bool EpMoeLayer::advanceMigration(int64_t &moved, std::string &error) {
  if (!migrating)
    return true;
  if (chunkInFlight) {
    std::map<int32_t, ExpertCopy> got;
    if (!mover->wait(chunkInFlight, got, moved, error))
      return false;
    chunkInFlight = 0;
    for (auto &[expert, copy] : got)
      incoming[expert] = std::move(copy);
  }
  if (transfersSubmitted < transfers.size()) {
    submitChunk(); // moves during this step; this step still runs the old placement
    return true;
  }
  // Every rank has every byte (the same chunks everywhere): publish.
  for (auto &[expert, copy] : incoming) {
    checkpointViews.emplace(expert, local->expertWeights(expert)); // the first time only
    ExpertCopy &slot = owned[expert];
    slot = std::move(copy);
    local->setExpertWeights(expert, slot.weights());
  }
  incoming.clear();
  placement = next;
  migrating = false;
  // Evicted after publication: copies of experts this rank no longer serves.
  for (auto it = owned.begin(); it != owned.end();) {
    if (placement.holds(comm.rank(), it->first)) {
      ++it;
      continue;
    }
    local->setExpertWeights(it->first, checkpointViews.at(it->first));
    it = owned.erase(it);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Libra
//===----------------------------------------------------------------------===//

namespace {
/// The rank of each global token.
std::vector<int32_t> tokenRanks(const TokenSlices &slices) {
  std::vector<int32_t> ranks(static_cast<size_t>(slices.begin.back()));
  for (size_t r = 0; r + 1 < slices.begin.size(); ++r)
    std::fill(ranks.begin() + slices.begin[r], ranks.begin() + slices.begin[r + 1],
              static_cast<int32_t>(r));
  return ranks;
}
} // namespace

bool EpMoeLayer::planSuccessor(Step &s, std::string &error) {
  std::vector<int32_t> mine, ids;
  if (!libra->predict(s.x, s.tokens, successor->gateForPredecessor, mine, error))
    return false;
  const int64_t k =
      s.tokens ? static_cast<int64_t>(mine.size()) / s.tokens : local->modelConfig().topK;
  auto start = Clock::now();
  if (!gatherRows(comm, mine.data(), s.tokens, k, s.slices, ids, error))
    return false;
  s.commSeconds += since(start);
  LibraRules::Plan next;
  if (!libra->plan(ids, tokenRanks(s.slices), next, error))
    return false;
  // Each replica comes from its expert's home rank.
  const int n = comm.size();
  const int64_t experts = placement.experts;
  TransferBatch batch;
  for (int32_t e = 0; e < static_cast<int32_t>(experts); ++e)
    for (int g = 0; g < n; ++g) {
      const int home = placement.rankFor(e, 0);
      if (g == home || !next.placement[static_cast<size_t>(e * n + g)])
        continue;
      const FfnWeights &w = successor->local->expertWeights(e);
      batch.transfers.push_back({e, home, g, w.bytes()});
      batch.weights.emplace(e, w);
    }
  successor->acceptPlan(next, mover->submit(std::move(batch)), std::move(ids));
  return true;
}

void EpMoeLayer::acceptPlan(const LibraRules::Plan &next, ExpertMover::Ticket ticket,
                            std::vector<int32_t> predicted) {
  plan = next;
  replicaTicket = ticket;
  predictedIds = std::move(predicted);
  planned = true;
}

bool EpMoeLayer::installReplicas(int64_t &moved, std::string &error) {
  if (!planned) { // the first layer: the home placement, nothing predicted
    const int n = comm.size();
    plan = {};
    plan.imbalanceAfter = -1; // nothing planned
    plan.placement.assign(static_cast<size_t>(placement.experts * n), 0);
    for (int32_t e = 0; e < static_cast<int32_t>(placement.experts); ++e)
      plan.placement[static_cast<size_t>(e * n + placement.rankFor(e, 0))] = 1;
    predictedIds.clear();
    return true;
  }
  if (!mover->wait(replicaTicket, replicas, moved, error))
    return false;
  for (auto &[expert, copy] : replicas) {
    checkpointViews.emplace(expert, local->expertWeights(expert)); // the first time only
    local->setExpertWeights(expert, copy.weights());
  }
  return true;
}

void EpMoeLayer::dropReplicas() {
  for (auto &[expert, copy] : replicas)
    local->setExpertWeights(expert, checkpointViews.at(expert));
  replicas.clear();
  planned = false;
}

bool EpMoeLayer::shardRemoteSlots(const Step &s, std::vector<int32_t> &remoteServer,
                                  float &imbalance, std::string &error) const {
  const Routing &routing = *s.routing;
  const int n = comm.size();
  const int64_t experts = placement.experts, k = routing.k;
  std::vector<int32_t> left; // [G, E]: remote slots of e rank g still takes
  if (!libra->shard(routing.ids, k, tokenRanks(s.slices), plan.placement, left, imbalance,
                    error))
    return false;
  // Each remote slot of expert e, in slot order, to the ranks the plan gives e, in rank
  // order.
  std::vector<int> cursor(static_cast<size_t>(experts), 0);
  remoteServer.assign(s.server.size(), -1);
  for (size_t slot = 0; slot < s.server.size(); ++slot) {
    if (s.server[slot] != kRemote)
      continue;
    const int32_t e = routing.ids[slot];
    int &g = cursor[static_cast<size_t>(e)];
    while (g < n && left[static_cast<size_t>(g * experts + e)] == 0)
      ++g;
    if (g == n) {
      error = "@libra_shard's plan serves fewer remote slots of expert " +
              std::to_string(e) + " than the routing has";
      return false;
    }
    if (!plan.placement[static_cast<size_t>(e * n + g)]) {
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

bool EpMoeLayer::forwardTwoStage(Step &s, std::string &error) {
  const Routing &routing = *s.routing;
  const int64_t h = local->modelConfig().hidden, k = routing.k, total = routing.tokens;
  const int64_t experts = placement.experts;
  const int me = comm.rank(), n = comm.size();
  const std::vector<int32_t> owners = tokenRanks(s.slices);
  // MoE_local's slots: the token's own rank holds the expert (home or replica); the
  // others are remote, sharded below.
  s.server.assign(static_cast<size_t>(total * k), -1);
  int64_t localSlots = 0;
  for (int64_t slot = 0; slot < total * k; ++slot) {
    const int32_t e = routing.ids[static_cast<size_t>(slot)];
    if (e < 0)
      continue;
    const int owner = owners[static_cast<size_t>(slot / k)];
    const bool here = plan.placement[static_cast<size_t>(e * n + owner)] != 0;
    s.server[static_cast<size_t>(slot)] = here ? owner : kRemote;
    localSlots += here;
  }
  // Token sharding on a CPU thread while MoE_local runs (§3.1).
  std::vector<int32_t> remoteServer;
  float shardImbalance = 0;
  std::string shardError;
  bool sharded = false;
  std::thread sharder(
      [&] { sharded = shardRemoteSlots(s, remoteServer, shardImbalance, shardError); });
  // Libra's dispatch: every row to every rank (an all-gather needs no sharding plan).
  auto start = Clock::now();
  bool ok = gatherRows(comm, s.x, s.tokens, h, s.slices, allRows, error);
  s.commSeconds += since(start);
  s.bytesSent += s.tokens * h * int64_t(sizeof(float)) * (n - 1);
  // MoE_local: this rank's tokens on the experts it holds, with the shared experts.
  ok = ok && computeServed(s, s.x, ownTokens(s), true, true, s.y, error);
  sharder.join();
  if (!ok)
    return false;
  if (!sharded) {
    error = shardError;
    return false;
  }
  // MoE_remote: other ranks' tokens with a slot the plan gives this rank.
  std::vector<uint8_t> remote(static_cast<size_t>(total * n), 0); // [token, rank]
  LibraMetrics &lm = s.metrics->libra;
  lm.on = true;
  lm.remoteSlots.assign(static_cast<size_t>(n),
                        std::vector<int64_t>(static_cast<size_t>(experts), 0));
  for (size_t slot = 0; slot < s.server.size(); ++slot)
    if (s.server[slot] == kRemote) {
      const int g = remoteServer[slot];
      s.server[slot] = g;
      remote[slot / static_cast<size_t>(k) * n + g] = 1;
      ++lm.remoteSlots[static_cast<size_t>(g)][static_cast<size_t>(routing.ids[slot])];
    }
  auto computed = [&](int64_t token, int rank) {
    return remote[static_cast<size_t>(token * n + rank)] != 0;
  };
  std::vector<int64_t> served;
  for (int64_t token = 0; token < total; ++token)
    if (computed(token, me))
      served.push_back(token);
  recvRows.resize(served.size() * static_cast<size_t>(h));
  for (size_t r = 0; r < served.size(); ++r)
    std::copy_n(allRows.begin() + served[r] * h, h, recvRows.begin() + int64_t(r) * h);
  partial.resize(recvRows.size());
  if (!computeServed(s, recvRows.data(), served, true, false, partial.data(), error) ||
      !returnPartials(s, served, partial.data(), computed, error))
    return false;

  // What the balancer did for this layer.
  lm.localSlots = localSlots;
  lm.replicas.assign(static_cast<size_t>(n), {});
  for (int32_t e = 0; e < static_cast<int32_t>(experts); ++e)
    for (int g = 0; g < n; ++g)
      if (plan.placement[static_cast<size_t>(e * n + g)] && placement.rankFor(e, 0) != g)
        lm.replicas[static_cast<size_t>(g)].push_back(e);
  lm.plannedImbalance = plan.imbalanceAfter;
  lm.shardImbalance = shardImbalance;
  lm.predictionHitRate = -1;
  if (!predictedIds.empty() && total > 0) {
    const int64_t kp = static_cast<int64_t>(predictedIds.size()) / total;
    int64_t hits = 0, pairs = 0;
    for (int64_t slot = 0; slot < total * k; ++slot) {
      const int32_t e = routing.ids[static_cast<size_t>(slot)];
      if (e < 0)
        continue;
      ++pairs;
      const auto row = predictedIds.begin() + (slot / k) * kp;
      hits += std::find(row, row + kp, e) != row + kp;
    }
    lm.predictionHitRate = pairs ? double(hits) / double(pairs) : 1.0;
  }
  return true;
}

} // namespace switchyard::exec
