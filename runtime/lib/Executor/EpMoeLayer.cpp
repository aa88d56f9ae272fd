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
}

void EpMoeLayer::balanceWith(std::shared_ptr<const EplbRule> rule,
                             const EplbOptions &options) {
  balancer =
      std::make_unique<EplbBalancer>(std::move(rule), options, *local, comm.rank(), *mover);
  libra = nullptr;
}

void EpMoeLayer::balanceWith(std::shared_ptr<const LibraRules> rules, EpMoeLayer *next) {
  // A layer's Libra balancer is made by whichever of it and its predecessor asks first:
  // the predecessor hands it its replica plans.
  auto ensure = [&](EpMoeLayer &layer) {
    if (layer.libra)
      return;
    auto made =
        std::make_unique<LibraBalancer>(rules, *layer.local, layer.comm, *layer.mover);
    layer.libra = made.get();
    layer.balancer = std::move(made);
  };
  ensure(*this);
  if (next)
    ensure(*next);
  libra->prepare(next ? next->libra : nullptr);
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
  if (balancer && !balancer->beginStep(placement, moved, error))
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
  if (balancer &&
      !balancer->afterRouting({x, tokens, &s.slices, &placement}, s.commSeconds, error))
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
  if (balancer && !balancer->endStep(placement, routing, error))
    return fail();
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

bool EpMoeLayer::forwardTwoStage(Step &s, std::string &error) {
  const Routing &routing = *s.routing;
  const int64_t h = local->modelConfig().hidden, k = routing.k, total = routing.tokens;
  const int64_t experts = placement.experts;
  const int me = comm.rank(), n = comm.size();
  const std::vector<int32_t> owners = tokenRanks(s.slices);
  const std::vector<int32_t> &holders = libra->holders(); // [E, G]
  // MoE_local's slots: the token's own rank holds the expert (home or replica); the
  // others are remote, sharded below.
  s.server.assign(static_cast<size_t>(total * k), -1);
  int64_t localSlots = 0;
  for (int64_t slot = 0; slot < total * k; ++slot) {
    const int32_t e = routing.ids[static_cast<size_t>(slot)];
    if (e < 0)
      continue;
    const int owner = owners[static_cast<size_t>(slot / k)];
    const bool here = holders[static_cast<size_t>(e * n + owner)] != 0;
    s.server[static_cast<size_t>(slot)] = here ? owner : LibraBalancer::kRemote;
    localSlots += here;
  }
  // Token sharding on a CPU thread while MoE_local runs (§3.1).
  std::vector<int32_t> remoteServer;
  float shardImbalance = 0;
  std::string shardError;
  bool sharded = false;
  std::thread sharder([&] {
    sharded = libra->shardRemoteSlots(routing, owners, s.server, remoteServer,
                                      shardImbalance, shardError);
  });
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
    if (s.server[slot] == LibraBalancer::kRemote) {
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
  lm.shardImbalance = shardImbalance;
  libra->report(placement, routing, lm);
  return true;
}

} // namespace switchyard::exec
