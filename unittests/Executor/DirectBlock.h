//===- DirectBlock.h - the routed MoE block from its definition -*- C++ -*-===//
//
// sum_j w_j * down(silu(gate x) * up x) in double, each expert's weights widened from
// whatever views they have (f32, bf16, or the executor's Q8 / Q4 versions): the
// reference a layer running those versions must match.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_UNITTESTS_DIRECTBLOCK_H
#define SWITCHYARD_UNITTESTS_DIRECTBLOCK_H

#include "switchyard/Executor/MoeLayer.h"

#include <cmath>
#include <functional>
#include <random>

namespace switchyard::unittest {

inline std::vector<float> widened(const model::TensorView &v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  model::widenToFloat(v, 0, v.numel(), out.data());
  return out;
}

inline std::vector<float>
directBlock(const std::function<exec::FfnWeights(int32_t)> &weightsOf,
            const std::vector<float> &x, const exec::Routing &r, int64_t hidden) {
  std::vector<float> y(x.size(), 0.0f);
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int64_t j = 0; j < r.k; ++j) {
      const int32_t e = r.ids[static_cast<size_t>(t * r.k + j)];
      if (e < 0)
        continue;
      const exec::FfnWeights w = weightsOf(e);
      const std::vector<float> w1 = widened(*w.gate), w3 = widened(*w.up),
                               w2 = widened(*w.down);
      const int64_t inter = w.gate->shape[0];
      std::vector<double> act(static_cast<size_t>(inter));
      for (int64_t i = 0; i < inter; ++i) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < hidden; ++h) {
          g += double(w1[size_t(i * hidden + h)]) * x[size_t(t * hidden + h)];
          u += double(w3[size_t(i * hidden + h)]) * x[size_t(t * hidden + h)];
        }
        act[size_t(i)] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t h = 0; h < hidden; ++h) {
        double d = 0;
        for (int64_t i = 0; i < inter; ++i)
          d += double(w2[size_t(h * inter + i)]) * act[size_t(i)];
        y[size_t(t * hidden + h)] += static_cast<float>(r.weights[size_t(t * r.k + j)] * d);
      }
    }
  return y;
}

/// A routing of T tokens over E experts, top-2, every expert used.
inline exec::Routing roundRobinRouting(int64_t tokens, int64_t experts, unsigned seed) {
  exec::Routing r;
  r.tokens = tokens;
  r.k = 2;
  std::mt19937 rng(seed);
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t a = static_cast<int32_t>(t % experts);
    const int32_t b = static_cast<int32_t>((a + 1 + rng() % (experts - 1)) % experts);
    r.ids.insert(r.ids.end(), {a, b});
    r.weights.insert(r.weights.end(), {0.7f, 0.3f});
  }
  return r;
}

} // namespace switchyard::unittest

#endif
