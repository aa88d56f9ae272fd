//===- MoeLayer.cpp - one MoE block of a checkpoint on the host ------------===//
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Executor/HostKernels.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace switchyard::exec {

namespace {
using Clock = std::chrono::steady_clock;
/// FFN worker threads: $SWITCHYARD_THREADS, else one per hardware thread.
int64_t workerThreads() {
  static const int64_t threads = [] {
    const char *text = std::getenv("SWITCHYARD_THREADS");
    int64_t n = text ? std::strtoll(text, nullptr, 10) : 0;
    return n > 0 ? std::min<int64_t>(n, 256)
                 : std::max<int64_t>(1, std::thread::hardware_concurrency());
  }();
  return threads;
}

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool widenTensor(const model::SafetensorsCheckpoint &ckpt, const std::string &name,
                 const std::vector<int64_t> &shape, std::vector<float> &out,
                 std::string &error) {
  const model::TensorView *v = ckpt.require(name, shape, error);
  if (!v)
    return false;
  out.resize(static_cast<size_t>(v->numel()));
  model::widenToFloat(*v, 0, v->numel(), out.data());
  return true;
}

bool loadFfn(const model::SafetensorsCheckpoint &ckpt, const std::string &gate,
             const std::string &up, const std::string &down, int64_t hidden, int64_t width,
             FfnWeights &w, std::string &error) {
  w.gate = ckpt.require(gate, {width, hidden}, error);
  w.up = w.gate ? ckpt.require(up, {width, hidden}, error) : nullptr;
  w.down = w.up ? ckpt.require(down, {hidden, width}, error) : nullptr;
  return w.down != nullptr;
}
} // namespace

std::unique_ptr<MoeLayer> MoeLayer::load(const model::MoeConfig &config,
                                         const model::SafetensorsCheckpoint &ckpt,
                                         int64_t layer, std::string &error) {
  std::unique_ptr<MoeLayer> m(new MoeLayer);
  m->config = &config;
  m->layer = layer;
  m->workers = workerThreads();
  int64_t h = config.hidden, e = config.experts, w = config.expertIntermediate;
  if (!widenTensor(ckpt, config.routerWeight(layer), {e, h}, m->routerWeight, error) ||
      !widenTensor(ckpt, config.postAttentionNorm(layer), {h}, m->norm, error))
    return nullptr;
  if (config.sigmoidScoring &&
      !widenTensor(ckpt, config.correctionBias(layer), {e}, m->bias, error))
    return nullptr;
  m->experts.resize(static_cast<size_t>(e));
  for (int64_t x = 0; x < e; ++x)
    if (!loadFfn(ckpt, config.expertWeight(layer, x, "gate"),
                 config.expertWeight(layer, x, "up"), config.expertWeight(layer, x, "down"),
                 h, w, m->experts[x], error))
      return nullptr;
  if (config.sharedIntermediate > 0 &&
      !loadFfn(ckpt, config.sharedWeight(layer, "gate"), config.sharedWeight(layer, "up"),
               config.sharedWeight(layer, "down"), h, config.sharedIntermediate, m->shared,
               error))
    return nullptr;
  if (config.sharedExpertGate &&
      !widenTensor(ckpt, config.sharedGateWeight(layer), {1, h}, m->sharedGate, error))
    return nullptr;
  return m;
}

void MoeLayer::expertFfn(const FfnWeights &w, const float *x, int64_t n, float *out,
                         Workspace &ws) {
  int64_t width = w.gate->shape[0];
  size_t need = static_cast<size_t>(n * width);
  if (ws.gate.size() < need) {
    ws.gate.resize(need);
    ws.up.resize(need);
  }
  matmulWeightT(x, n, *w.gate, ws.gate.data(), ws.widen);
  matmulWeightT(x, n, *w.up, ws.up.data(), ws.widen);
  siluMul(ws.gate.data(), ws.up.data(), n * width);
  matmulWeightT(ws.gate.data(), n, *w.down, out, ws.widen);
}

bool MoeLayer::countExpert(int64_t e, int64_t rows, LayerMetrics &metrics,
                           std::string &error) const {
  const FfnWeights &w = experts[static_cast<size_t>(e)];
  if (!w.gate) {
    error = "expert " + std::to_string(e) + " is routed but has no resident version";
    return false;
  }
  ++metrics.activeExperts;
  metrics.expertBytes += w.bytes();
  metrics.flops += 2 * rows * 3 * w.gate->shape[0] * config->hidden;
  return true;
}

void MoeLayer::runExperts(const Routing &routing, int64_t workers,
                          const std::vector<uint8_t> *include) {
  const int64_t h = config->hidden;
  const ExpertSlots &slots = routing.byExpert;
  std::vector<int64_t> order;
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(slots.offsets.size()); ++e)
    if (slots.count(e) > 0 && (!include || (*include)[static_cast<size_t>(e)]))
      order.push_back(e);
  // Largest first: the last expert a worker takes is a small one.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return slots.count(a) > slots.count(b); });
  // The GEMMs' threading follows the whole layer's active experts, not this call's
  // share of them: a wave of one expert (swap-ins) rounds as it would among the others.
  int64_t active = 0;
  for (int64_t e = 0; e + 1 < static_cast<int64_t>(slots.offsets.size()); ++e)
    active += slots.count(e) > 0;
  const bool parallel = std::min<int64_t>(workers, active) > 1;
  workers = std::max<int64_t>(1, std::min<int64_t>(workers, order.size()));
  if (static_cast<int64_t>(workspaces.size()) < workers)
    workspaces.resize(static_cast<size_t>(workers));
  std::atomic<size_t> next{0};
  auto work = [&](Workspace &ws) {
    for (size_t i; (i = next.fetch_add(1)) < order.size();) {
      int64_t e = order[i], begin = slots.offsets[e];
      expertFfn(experts[e], permutedIn.data() + begin * h, slots.count(e),
                permutedOut.data() + begin * h, ws);
    }
  };
  if (!parallel) {
    work(workspaces[0]);
    return;
  }
  // Parallel over experts, each GEMM on one thread: at decode sizes (a few rows per
  // expert) this streams the weights from several cores at once, which one
  // multi-threaded GEMM per expert does not.
  int previous = openblas_get_num_threads();
  openblas_set_num_threads(1);
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < workers; ++t)
    threads.emplace_back(work, std::ref(workspaces[t]));
  work(workspaces[0]);
  for (std::thread &t : threads)
    t.join();
  openblas_set_num_threads(previous);
}

void MoeLayer::routerLogits(const float *x, int64_t tokens, float *out) const {
  if (tokens > 0)
    matmulT(x, tokens, routerWeight.data(), config->experts, config->hidden, out);
}

bool MoeLayer::forward(const float *x, int64_t tokens, const BatchInfo &batch,
                       const Routing *replay, Routing &routing, float *y,
                       LayerMetrics &metrics, std::string &error) {
  const int64_t h = config->hidden, e = config->experts;
  metrics = LayerMetrics{};
  metrics.layer = layer;
  metrics.tokens = tokens;
  std::string where = "layer " + std::to_string(layer) + ": ";

  // 1. Router GEMM and routing (or the recorded routing).
  auto start = Clock::now();
  if (replay) {
    routing = *replay;
    if (routing.tokens != tokens) {
      error = where + "the replayed routing is for " + std::to_string(routing.tokens) +
              " tokens, the batch has " + std::to_string(tokens);
      return false;
    }
    start = Clock::now();
    if (!routing.groupByExpert(e, error)) {
      error = where + "replayed routing: " + error;
      return false;
    }
    metrics.seconds.permute = since(start);
  } else {
    if (!router) {
      error = where + "no router attached (replay only)";
      return false;
    }
    logits.resize(static_cast<size_t>(tokens * e));
    routerLogits(x, tokens, logits.data());
    metrics.seconds.routerGemm = since(start);
    metrics.expertBytes += static_cast<int64_t>(routerWeight.size() * sizeof(float));
    metrics.flops += 2 * tokens * e * h;
    start = Clock::now();
    if (!router->route(logits.data(), tokens, bias.empty() ? nullptr : bias.data(), batch,
                       routing, error, nullptr, residentFlags)) {
      error = where + error;
      return false;
    }
    metrics.seconds.policy = since(start);
  }

  // Expert memory: the routing is counted, loads of routed experts start.
  std::vector<int64_t> pending;
  if (expertsHook.routed &&
      !expertsHook.routed(layer, x, tokens, routing, pending, error)) {
    error = where + error;
    return false;
  }
  // 2. Permute: the routed rows in expert order (ExpertSlots), then every active
  //    expert's FFN on its contiguous rows (the pending ones last).
  const int64_t k = routing.k;
  const ExpertSlots &slots = routing.byExpert;
  start = Clock::now();
  int64_t rows = static_cast<int64_t>(slots.slots.size());
  permutedIn.resize(static_cast<size_t>(rows * h));
  permutedOut.resize(static_cast<size_t>(rows * h));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(permutedIn.data() + r * h, x + (slots.slots[r] / k) * h, h * sizeof(float));
  metrics.tokensPerExpert.assign(static_cast<size_t>(e), 0);
  std::vector<uint8_t> ready(static_cast<size_t>(e), 1);
  for (int64_t x2 : pending)
    ready[static_cast<size_t>(x2)] = 0;
  for (int64_t x2 = 0; x2 < e; ++x2) {
    int64_t n = slots.count(x2);
    metrics.tokensPerExpert[x2] = static_cast<int32_t>(n);
    if (n > 0 && ready[static_cast<size_t>(x2)] && !countExpert(x2, n, metrics, error)) {
      error = where + error;
      return false;
    }
  }
  metrics.seconds.permute += since(start);
  start = Clock::now();
  runExperts(routing, workers, pending.empty() ? nullptr : &ready);
  while (!pending.empty()) { // the swap-ins: wait for some, run their tokens, repeat
    std::vector<int64_t> now;
    if (!expertsHook.await || !expertsHook.await(layer, pending, now, error) ||
        now.empty()) {
      error =
          where + (error.empty() ? "pending experts that never became resident" : error);
      return false;
    }
    std::vector<uint8_t> batch(static_cast<size_t>(e), 0);
    for (int64_t x2 : now) {
      batch[static_cast<size_t>(x2)] = 1;
      if (slots.count(x2) > 0 && !countExpert(x2, slots.count(x2), metrics, error)) {
        error = where + error;
        return false;
      }
      pending.erase(std::remove(pending.begin(), pending.end(), x2), pending.end());
    }
    runExperts(routing, workers, &batch);
  }
  metrics.seconds.ffn += since(start);

  // 3. Combine: y[t] = sum_j w[t, j] * out[t * k + j] (+ the shared experts).
  start = Clock::now();
  if (includeShared && shared.gate && tokens > 0) {
    if (workspaces.empty())
      workspaces.resize(1);
    expertFfn(shared, x, tokens, y, workspaces[0]);
    metrics.expertBytes += shared.bytes();
    metrics.flops += 2 * tokens * 3 * shared.gate->shape[0] * h;
    if (!sharedGate.empty())
      for (int64_t t = 0; t < tokens; ++t) {
        float dot = 0;
        for (int64_t j = 0; j < h; ++j)
          dot += x[t * h + j] * sharedGate[j];
        float g = 1.0f / (1.0f + std::exp(-dot));
        for (int64_t j = 0; j < h; ++j)
          y[t * h + j] *= g;
      }
  } else {
    std::fill(y, y + tokens * h, 0.0f);
  }
  metrics.seconds.ffn += since(start);
  start = Clock::now();
  for (int64_t r = 0; r < rows; ++r) {
    int32_t slot = slots.slots[r];
    float w = routing.weights[slot];
    const float *row = permutedOut.data() + r * h;
    float *out = y + (slot / k) * h;
    for (int64_t c = 0; c < h; ++c)
      out[c] += w * row[c];
  }
  metrics.seconds.combine = since(start);
  return true;
}

} // namespace switchyard::exec
