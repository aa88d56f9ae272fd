//===- EpMoeLayer.cpp - one MoE block, experts spread over ranks ----------===//
#include "switchyard/Executor/EpMoeLayer.h"

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
  placement.experts = local->modelConfig().experts;
  placement.ranks = comm.size();
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
  auto needs = [&](int64_t token, int rank) {
    for (int64_t j = 0; j < k; ++j)
      if (placement.holds(rank, routing.ids[token * k + j]))
        return true;
    return false;
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
      bool held = placement.holds(me, id);
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
  for (int32_t id : routing.ids)
    if (id >= 0)
      ++metrics.slotsPerRank[static_cast<size_t>(placement.owner(id))];
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
  return true;
}

} // namespace switchyard::exec
