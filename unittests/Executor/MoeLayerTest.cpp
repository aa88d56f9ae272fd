//===- MoeLayerTest.cpp - one MoE block against a direct loop, any thread count ===//
//
// A Mixtral-layout layer written by the test (random float32 and bfloat16 weights),
// run with a given routing (no compiled policy needed) on 1 and several FFN worker
// threads: the outputs must be bit-identical, and equal within 1e-5 to the block
// computed directly from its definition, sum_j w_j * down(silu(gate x) * up x). The
// thread sanitizer build runs this too (executor/tsan).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Executor/MoeLayer.h"
#include "TinyCheckpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace moe_layer_test {

using namespace switchyard;

namespace {

using Checkpoint = unittest::TinyCheckpoint;
constexpr int64_t H = 16, I = 8, E = 4, K = 2;

/// The block from its definition, in double.
std::vector<float> direct(const Checkpoint &c, const std::vector<float> &x,
                          const exec::Routing &r) {
  std::vector<float> y(x.size(), 0.0f);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int64_t j = 0; j < K; ++j) {
      int32_t e = r.ids[t * K + j];
      if (e < 0)
        continue;
      std::string p = "model.layers.0.block_sparse_moe.experts." + std::to_string(e) + ".";
      const auto &w1 = c.tensors.at(p + "w1.weight"), &w3 = c.tensors.at(p + "w3.weight"),
                 &w2 = c.tensors.at(p + "w2.weight");
      std::vector<double> act(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < H; ++h) {
          g += double(w1[i * H + h]) * x[t * H + h];
          u += double(w3[i * H + h]) * x[t * H + h];
        }
        act[i] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t h = 0; h < H; ++h) {
        double d = 0;
        for (int64_t i = 0; i < I; ++i)
          d += double(w2[h * I + i]) * act[i];
        y[t * H + h] += static_cast<float>(r.weights[t * K + j] * d);
      }
    }
  return y;
}

void runLayer(bool bf16) {
  Checkpoint c(bf16);
  std::string error;
  model::MoeConfig config;
  ASSERT_TRUE(model::readMoeConfig(c.dir, config, error)) << error;
  auto ckpt = model::SafetensorsCheckpoint::open(c.dir, error);
  ASSERT_TRUE(ckpt) << error;
  auto layer = exec::MoeLayer::load(config, *ckpt, 0, error);
  ASSERT_TRUE(layer) << error;

  const int64_t T = 9;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(T * H);
  for (float &v : x)
    v = normal(rng);
  exec::Routing replay;
  replay.tokens = T;
  replay.k = K;
  for (int64_t t = 0; t < T; ++t) {
    // Every expert gets tokens; token 4 has one slot unused (-1).
    replay.ids.push_back(static_cast<int32_t>(t % E));
    replay.ids.push_back(t == 4 ? -1 : static_cast<int32_t>((t + 1 + t / E) % E));
    replay.weights.push_back(0.75f);
    replay.weights.push_back(0.25f);
  }
  exec::BatchInfo batch;
  batch.tokens = T;
  ASSERT_TRUE(batch.derive(nullptr, error)) << error;
  std::vector<float> reference = direct(c, x, replay);
  std::vector<float> first;
  for (int64_t workers : {1, 3, 8}) {
    layer->setWorkers(workers);
    std::vector<float> y(T * H);
    exec::Routing routing;
    exec::LayerMetrics metrics;
    ASSERT_TRUE(
        layer->forward(x.data(), T, batch, &replay, routing, y.data(), metrics, error))
        << error;
    EXPECT_EQ(metrics.activeExperts, E);
    EXPECT_EQ(metrics.tokensPerExpert[0] + metrics.tokensPerExpert[1] +
                  metrics.tokensPerExpert[2] + metrics.tokensPerExpert[3],
              2 * T - 1);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], reference[i], 1e-5) << "workers " << workers << ", element " << i;
    if (first.empty())
      first = y;
    EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0)
        << workers << " workers are not bit-identical to 1";
  }
  // A replayed id outside [-1, E) is an error naming the token.
  replay.ids[5] = E;
  std::vector<float> y(T * H);
  exec::Routing routing;
  exec::LayerMetrics metrics;
  EXPECT_FALSE(
      layer->forward(x.data(), T, batch, &replay, routing, y.data(), metrics, error));
  EXPECT_NE(error.find("expert id 4 of token 2"), std::string::npos) << error;
}

TEST(MoeLayer, MatchesTheDefinitionOnAnyThreadCountF32) { runLayer(false); }
TEST(MoeLayer, MatchesTheDefinitionOnAnyThreadCountBF16) { runLayer(true); }

} // namespace

} // namespace moe_layer_test
