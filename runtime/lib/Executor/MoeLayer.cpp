//===- MoeLayer.cpp - one MoE block of a checkpoint on the host ------------===//
#include "switchyard/Executor/MoeLayer.h"
#include "switchyard/Executor/HostKernels.h"

#include <chrono>
#include <cmath>
#include <cstring>

namespace switchyard::exec {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool widenTensor(const model::SafetensorsCheckpoint &ckpt, const std::string &name,
                 const std::vector<int64_t> &shape, std::vector<float> &out, std::string &error) {
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
                                         const model::SafetensorsCheckpoint &ckpt, int64_t layer,
                                         std::string &error) {
  std::unique_ptr<MoeLayer> m(new MoeLayer);
  m->config = &config;
  m->layer = layer;
  int64_t h = config.hidden, e = config.experts, w = config.expertIntermediate;
  if (!widenTensor(ckpt, config.routerWeight(layer), {e, h}, m->routerWeight, error) ||
      !widenTensor(ckpt, config.postAttentionNorm(layer), {h}, m->norm, error))
    return nullptr;
  if (config.sigmoidScoring &&
      !widenTensor(ckpt, config.correctionBias(layer), {e}, m->bias, error))
    return nullptr;
  m->experts.resize(static_cast<size_t>(e));
  for (int64_t x = 0; x < e; ++x)
    if (!loadFfn(ckpt, config.expertWeight(layer, x, "gate"), config.expertWeight(layer, x, "up"),
                 config.expertWeight(layer, x, "down"), h, w, m->experts[x], error))
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

void MoeLayer::expertFfn(const FfnWeights &w, const float *x, int64_t n, float *out) {
  int64_t width = w.gate->shape[0];
  size_t need = static_cast<size_t>(n * width);
  if (gateOut.size() < need) {
    gateOut.resize(need);
    upOut.resize(need);
  }
  matmulWeightT(x, n, *w.gate, gateOut.data(), widen);
  matmulWeightT(x, n, *w.up, upOut.data(), widen);
  siluMul(gateOut.data(), upOut.data(), n * width);
  matmulWeightT(gateOut.data(), n, *w.down, out, widen);
}

bool MoeLayer::forward(const float *x, int64_t tokens, const BatchInfo &batch,
                       const Router *router, const Routing *replay, Routing &routing, float *y,
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
    logits.resize(static_cast<size_t>(tokens * e));
    if (tokens > 0)
      matmulT(x, tokens, routerWeight.data(), e, h, logits.data());
    metrics.seconds.routerGemm = since(start);
    metrics.expertBytes += static_cast<int64_t>(routerWeight.size() * sizeof(float));
    metrics.flops += 2 * tokens * e * h;
    start = Clock::now();
    if (!router->route(logits.data(), tokens, bias.empty() ? nullptr : bias.data(), batch,
                       routing, error)) {
      error = where + error;
      return false;
    }
    metrics.seconds.policy = since(start);
  }

  // 2. Per active expert: gather its tokens, run its FFN into the slots' rows.
  const int64_t k = routing.k;
  slotOut.resize(static_cast<size_t>(tokens * k * h));
  metrics.tokensPerExpert.assign(static_cast<size_t>(e), 0);
  for (int64_t x2 = 0; x2 < e; ++x2) {
    int64_t n = routing.byExpert.count(x2);
    metrics.tokensPerExpert[x2] = static_cast<int32_t>(n);
    if (n == 0)
      continue;
    ++metrics.activeExperts;
    const FfnWeights &w = experts[x2];
    metrics.expertBytes += w.bytes();
    metrics.flops += 2 * n * 3 * w.gate->shape[0] * h;
    const int32_t *slots = routing.byExpert.slots.data() + routing.byExpert.offsets[x2];
    start = Clock::now();
    gathered.resize(static_cast<size_t>(n * h));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(gathered.data() + i * h, x + (slots[i] / k) * h, h * sizeof(float));
    metrics.seconds.permute += since(start);
    start = Clock::now();
    expertOut.resize(static_cast<size_t>(n * h));
    expertFfn(w, gathered.data(), n, expertOut.data());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(slotOut.data() + slots[i] * h, expertOut.data() + i * h, h * sizeof(float));
    metrics.seconds.ffn += since(start);
  }

  // 3. Combine: y[t] = sum_j w[t, j] * out[t * k + j] (+ the shared experts).
  start = Clock::now();
  if (shared.gate && tokens > 0) {
    expertFfn(shared, x, tokens, y);
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
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      if (routing.ids[t * k + j] < 0)
        continue;
      float w = routing.weights[t * k + j];
      const float *row = slotOut.data() + (t * k + j) * h;
      float *out = y + t * h;
      for (int64_t c = 0; c < h; ++c)
        out[c] += w * row[c];
    }
  metrics.seconds.combine = since(start);
  return true;
}

} // namespace switchyard::exec
