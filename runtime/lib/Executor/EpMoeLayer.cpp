//===- EpMoeLayer.cpp - one MoE block, experts spread over ranks ----------===//
#include "switchyard/Executor/EpMoeLayer.h"
#include "switchyard/Executor/Executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace switchyard::exec {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
} // namespace

ExpertPlacement ExpertPlacement::contiguous(int64_t experts, int ranks) {
  ExpertPlacement p;
  std::vector<int32_t> identity(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e)
    identity[static_cast<size_t>(e)] = static_cast<int32_t>(e);
  std::string unused;
  fromPhy2Log(identity, experts, ranks, p, unused);
  return p;
}

bool ExpertPlacement::fromPhy2Log(const std::vector<int32_t> &phy2log, int64_t experts,
                                  int ranks, ExpertPlacement &out, std::string &error) {
  out.experts = experts;
  out.ranks = ranks;
  out.phy2log = phy2log;
  out.log2phy.assign(static_cast<size_t>(experts), {});
  for (size_t slot = 0; slot < phy2log.size(); ++slot) {
    int32_t e = phy2log[slot];
    if (e < 0 || e >= experts) {
      error = "placement: slot " + std::to_string(slot) + " holds expert " + std::to_string(e) +
              ", outside [0, " + std::to_string(experts) + ")";
      return false;
    }
    out.log2phy[static_cast<size_t>(e)].push_back(static_cast<int64_t>(slot));
  }
  for (int64_t e = 0; e < experts; ++e)
    if (out.log2phy[static_cast<size_t>(e)].empty()) {
      error = "placement: expert " + std::to_string(e) + " has no slot";
      return false;
    }
  return true;
}

bool ExpertPlacement::holds(int rank, int32_t expert) const {
  if (expert < 0)
    return false;
  for (int64_t slot : log2phy[static_cast<size_t>(expert)])
    if (rankOfSlot(slot) == rank)
      return true;
  return false;
}

int TokenSlices::owner(int64_t token) const {
  auto it = std::upper_bound(begin.begin(), begin.end(), token);
  return static_cast<int>(it - begin.begin()) - 1;
}

bool gatherSlices(comm::Communicator &comm, int64_t localTokens, TokenSlices &slices,
                  std::string &error) {
  std::vector<int64_t> counts(static_cast<size_t>(comm.size()));
  if (!comm.allGather(&localTokens, sizeof localTokens, counts.data(), error))
    return false;
  slices.begin.assign(1, 0);
  for (int64_t c : counts)
    slices.begin.push_back(slices.begin.back() + c);
  return true;
}

EpMoeLayer::EpMoeLayer(std::unique_ptr<MoeLayer> inner, comm::Communicator &comm)
    : local(std::move(inner)), comm(comm) {
  placement = ExpertPlacement::contiguous(local->modelConfig().experts, comm.size());
  loads.assign(static_cast<size_t>(placement.experts), 0.0f);
}

bool gatherRows(comm::Communicator &comm, const float *mine, int64_t rows, int64_t width,
                const TokenSlices &slices, std::vector<float> &out, std::string &error) {
  // A padded all-gather: every rank sends max-rows blocks.
  const int n = comm.size();
  int64_t most = 0;
  for (int p = 0; p < n; ++p)
    most = std::max(most, slices.begin[p + 1] - slices.begin[p]);
  std::vector<float> padded(static_cast<size_t>(most * width), 0.0f);
  std::copy(mine, mine + rows * width, padded.begin());
  std::vector<float> all(static_cast<size_t>(n * most * width));
  if (!comm.allGather(padded.data(), padded.size() * sizeof(float), all.data(), error))
    return false;
  out.resize(static_cast<size_t>(slices.begin[n] * width));
  for (int p = 0; p < n; ++p)
    std::copy_n(all.begin() + p * most * width, (slices.begin[p + 1] - slices.begin[p]) * width,
                out.begin() + slices.begin[p] * width);
  return true;
}

bool EpMoeLayer::forward(const float *x, int64_t tokens, const BatchInfo &batch,
                         const Routing *replay, Routing &routing, float *y,
                         LayerMetrics &metrics, std::string &error) {
  const model::MoeConfig &cfg = local->modelConfig();
  const int64_t h = cfg.hidden, e = cfg.experts;
  const int me = comm.rank(), n = comm.size();
  const std::string where = "layer " + std::to_string(index()) + " (rank " +
                            std::to_string(me) + "): ";
  const auto layerStart = Clock::now();
  double commSeconds = 0, routerSeconds = 0, policySeconds = 0;
  auto start = Clock::now();
  TokenSlices slices;
  if (!gatherSlices(comm, tokens, slices, error))
    return false;
  commSeconds += since(start);
  const int64_t total = slices.begin[n], first = slices.begin[me];
  // A step boundary: the next chunk of a pending migration (published when complete).
  int64_t moved = 0;
  if (migrating && !migrateStep(moved, error)) {
    error = where + error;
    return false;
  }
  if (batch.tokens != total) {
    error = where + "the batch metadata has " + std::to_string(batch.tokens) +
            " tokens, the ranks hold " + std::to_string(total);
    return false;
  }

  // 1. The global batch's routing, the same on every rank.
  if (replay) {
    routing = *replay;
    if (routing.tokens != total) {
      error = where + "the replayed routing is for " + std::to_string(routing.tokens) +
              " tokens, the batch has " + std::to_string(total);
      return false;
    }
  } else {
    localLogits.resize(static_cast<size_t>(tokens * e));
    start = Clock::now();
    local->routerLogits(x, tokens, localLogits.data());
    routerSeconds = since(start);
    start = Clock::now();
    if (!gatherRows(comm, localLogits.data(), tokens, e, slices, globalLogits, error))
      return false;
    commSeconds += since(start);
    start = Clock::now();
    if (!local->attachedRouter()->route(globalLogits.data(), total, local->correctionBias(),
                                        batch, routing, error)) {
      error = where + error;
      return false;
    }
    policySeconds = since(start);
  }
  const int64_t k = routing.k;
  // Which ranks serve each token (one of its slots), worked out once per layer: the
  // dispatch, the receive order and the combine all read it.
  std::vector<uint8_t> serves(static_cast<size_t>(total * n), 0);
  for (int64_t token = 0; token < total; ++token)
    for (int64_t j = 0; j < k; ++j) {
      int rank = placement.rankFor(routing.ids[token * k + j], token);
      if (rank >= 0)
        serves[static_cast<size_t>(token * n + rank)] = 1;
    }
  auto needs = [&](int64_t token, int rank) {
    return serves[static_cast<size_t>(token * n + rank)] != 0;
  };

  // 2. Dispatch: each local token's row once to every rank holding one of its experts.
  std::vector<int64_t> sendBytes(static_cast<size_t>(n), 0), recvBytes(static_cast<size_t>(n), 0);
  sendRows.clear();
  for (int p = 0; p < n; ++p)
    for (int64_t t = 0; t < tokens; ++t)
      if (needs(first + t, p)) {
        sendRows.insert(sendRows.end(), x + t * h, x + (t + 1) * h);
        sendBytes[p] += h * int64_t(sizeof(float));
      }
  std::vector<int64_t> received; // global token of each received row, in arrival order
  for (int q = 0; q < n; ++q)
    for (int64_t token = slices.begin[q]; token < slices.begin[q + 1]; ++token)
      if (needs(token, me)) {
        received.push_back(token);
        recvBytes[q] += h * int64_t(sizeof(float));
      }
  const int64_t rows = static_cast<int64_t>(received.size());
  recvRows.resize(static_cast<size_t>(rows * h));
  start = Clock::now();
  if (!comm.allToAllV(sendRows.data(), sendBytes, recvRows.data(), recvBytes, error))
    return false;
  commSeconds += since(start);

  // 3. This rank's experts on the received rows: other ranks' slots masked (-1).
  Routing mine;
  mine.tokens = rows;
  mine.k = k;
  mine.ids.resize(static_cast<size_t>(rows * k));
  mine.weights.resize(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      int32_t id = routing.ids[received[r] * k + j];
      bool held = placement.rankFor(id, received[r]) == me;
      mine.ids[r * k + j] = held ? id : -1;
      mine.weights[r * k + j] = held ? routing.weights[received[r] * k + j] : 0.0f;
    }
  partial.resize(static_cast<size_t>(rows * h));
  Routing scratch;
  local->setSharedExperts(false);
  bool ok = local->forward(recvRows.data(), rows, batch, &mine, scratch, partial.data(), metrics,
                           error);
  local->setSharedExperts(true);
  if (!ok)
    return false;

  // 4. Combine: partial sums back to the owners; the owner adds them in rank order after
  //    its shared experts (computed on its own tokens with every routed slot empty).
  back.resize(sendRows.size());
  start = Clock::now();
  if (!comm.allToAllV(partial.data(), recvBytes, back.data(), sendBytes, error))
    return false;
  commSeconds += since(start);
  Routing none;
  none.tokens = tokens;
  none.k = k;
  none.ids.assign(static_cast<size_t>(tokens * k), -1);
  none.weights.assign(static_cast<size_t>(tokens * k), 0.0f);
  LayerMetrics sharedMetrics;
  if (!local->forward(x, tokens, batch, &none, scratch, y, sharedMetrics, error))
    return false;
  size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (int64_t t = 0; t < tokens; ++t)
      if (needs(first + t, p)) {
        const float *row = back.data() + at;
        for (int64_t c = 0; c < h; ++c)
          y[t * h + c] += row[c];
        at += static_cast<size_t>(h);
      }
  metrics.tokens = tokens;
  metrics.expertBytes += sharedMetrics.expertBytes;
  metrics.flops += sharedMetrics.flops;
  metrics.seconds.ffn += sharedMetrics.seconds.ffn;
  metrics.seconds.routerGemm = routerSeconds;
  metrics.seconds.policy = policySeconds;

  // What every rank did: routed slots per rank from the (global) routing; bytes sent and
  // seconds gathered.
  metrics.slotsPerRank.assign(static_cast<size_t>(n), 0);
  for (int64_t slot = 0; slot < total * k; ++slot)
    if (routing.ids[slot] >= 0)
      ++metrics.slotsPerRank[static_cast<size_t>(placement.rankFor(routing.ids[slot], slot / k))];
  int64_t sent = 0;
  for (int p = 0; p < n; ++p)
    if (p != me)
      sent += sendBytes[p] + recvBytes[p]; // rows dispatched, partial sums returned
  struct Report {
    int64_t bytes;
    double seconds;
  } mine2{sent, since(layerStart)};
  std::vector<Report> all(static_cast<size_t>(n));
  if (!comm.allGather(&mine2, sizeof mine2, all.data(), error))
    return false;
  metrics.bytesSentPerRank.clear();
  metrics.secondsPerRank.clear();
  for (const Report &r : all) {
    metrics.bytesSentPerRank.push_back(r.bytes);
    metrics.secondsPerRank.push_back(r.seconds);
  }
  metrics.commSeconds = commSeconds;
  metrics.weightBytesMoved = moved;
  metrics.placementVersion = placement.version;
  if (eplb && !countAndPlan(routing, error)) {
    error = where + error;
    return false;
  }
  return true;
}

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
  transfersDone = 0;
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
  return true;
}

bool EpMoeLayer::migrateStep(int64_t &moved, std::string &error) {
  const int n = comm.size(), me = comm.rank();
  // This step's chunk: the next transfers up to the byte budget (at least one).
  size_t end = transfersDone;
  moved = 0;
  while (end < transfers.size() &&
         (end == transfersDone || moved + transfers[end].bytes <= eplbOptions.bytesPerStep))
    moved += transfers[end++].bytes;
  std::vector<std::vector<uint8_t>> toPeer(static_cast<size_t>(n));
  std::vector<int64_t> sendBytes(static_cast<size_t>(n), 0), recvBytes(static_cast<size_t>(n), 0);
  for (size_t i = transfersDone; i < end; ++i) {
    const Transfer &t = transfers[i];
    if (t.from == me) {
      const FfnWeights &w = local->expertWeights(t.expert);
      std::vector<uint8_t> &out = toPeer[static_cast<size_t>(t.to)];
      for (const model::TensorView *v : {w.gate, w.up, w.down})
        out.insert(out.end(), v->data, v->data + v->bytes);
      sendBytes[static_cast<size_t>(t.to)] += t.bytes;
    }
    if (t.to == me)
      recvBytes[static_cast<size_t>(t.from)] += t.bytes;
  }
  std::vector<uint8_t> send, recv;
  for (const std::vector<uint8_t> &block : toPeer)
    send.insert(send.end(), block.begin(), block.end());
  int64_t expected = 0;
  for (int64_t b : recvBytes)
    expected += b;
  recv.resize(static_cast<size_t>(expected));
  if (!comm.allToAllV(send.data(), sendBytes, recv.data(), recvBytes, error))
    return false;
  // Unpack per source rank, in the agreed transfer order.
  std::vector<int64_t> at(static_cast<size_t>(n), 0);
  for (int p = 1; p < n; ++p)
    at[static_cast<size_t>(p)] = at[static_cast<size_t>(p - 1)] + recvBytes[static_cast<size_t>(p - 1)];
  for (size_t i = transfersDone; i < end; ++i) {
    const Transfer &t = transfers[i];
    if (t.to != me)
      continue;
    const FfnWeights &w = local->expertWeights(t.expert); // shapes and dtypes to copy
    OwnedExpert &copy = incoming[t.expert];
    const uint8_t *from = recv.data() + at[static_cast<size_t>(t.from)];
    copy.bytes.assign(from, from + t.bytes);
    at[static_cast<size_t>(t.from)] += t.bytes;
    size_t offset = 0;
    const model::TensorView *views[3] = {w.gate, w.up, w.down};
    for (int j = 0; j < 3; ++j) {
      copy.views[j] = *views[j];
      copy.views[j].data = copy.bytes.data() + offset;
      offset += views[j]->bytes;
    }
  }
  transfersDone = end;
  if (transfersDone < transfers.size())
    return true;
  // Every rank has every byte (the same chunks everywhere): publish.
  for (auto &[expert, copy] : incoming) {
    checkpointViews.emplace(expert, local->expertWeights(expert)); // the first time only
    OwnedExpert &slot = owned[expert];
    slot = std::move(copy);
    local->setExpertWeights(expert, {&slot.views[0], &slot.views[1], &slot.views[2]});
  }
  incoming.clear();
  placement = next;
  migrating = false;
  // Evicted after publication: copies of experts this rank no longer serves.
  for (auto it = owned.begin(); it != owned.end();) {
    if (placement.holds(me, it->first)) {
      ++it;
      continue;
    }
    local->setExpertWeights(it->first, checkpointViews.at(it->first));
    it = owned.erase(it);
  }
  return true;
}

std::shared_ptr<EplbRule> EplbRule::create(const model::MoeConfig &config, int ranks,
                                           int64_t slots, runtime::PolicyCache &cache,
                                           std::string &error) {
  if (slots < config.experts || slots % ranks != 0) {
    error = "--eplb-slots " + std::to_string(slots) + " must be at least the " +
            std::to_string(config.experts) + " experts and a multiple of --ep " +
            std::to_string(ranks);
    return nullptr;
  }
  runtime::CompileRequest request;
  request.policyPath = shippedPolicyDir() + "/eplb.mlir";
  request.flags = {"--model", config.path, "--nodes", "1", "--devices", std::to_string(ranks),
                   "--slots", std::to_string(slots), "--entry", "eplb", "--allow-unused-sizes"};
  if (config.family != model::Family::DeepseekV3) // no expert groups: one
    request.flags.insert(request.flags.end(), {"--groups", "1"});
  std::string dir;
  if (!cache.artifacts(request, dir, error))
    return nullptr;
  auto rule = std::make_shared<EplbRule>();
  rule->policy = runtime::HostPolicy::load(dir, "eplb", error);
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

} // namespace switchyard::exec
