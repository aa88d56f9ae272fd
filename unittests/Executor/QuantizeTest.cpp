//===- QuantizeTest.cpp - low-precision expert versions and their FFN ------===//
//
// The int8 (per output channel) and int4 (group-wise) versions: the formats as
// documented (scales, rounding error at most half a step, nibble order), the layouts'
// errors, and a MoE layer running them against its definition on the dequantised
// weights (1e-5), with their accuracy against the high-precision layer measured.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Memory/Quantize.h"
#include "DirectBlock.h"
#include "TinyCheckpoint.h"

#include <gtest/gtest.h>

#include <cmath>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace quantize_test {

using namespace switchyard;
using namespace switchyard::memory;

namespace {

/// A float32 view of `values` shaped [rows, cols].
model::TensorView f32View(const std::vector<float> &values, int64_t rows, int64_t cols) {
  model::TensorView v;
  v.name = "w";
  v.dtype = model::DType::F32;
  v.shape = {rows, cols};
  v.data = reinterpret_cast<const uint8_t *>(values.data());
  v.bytes = values.size() * 4;
  return v;
}

TEST(Quantize, HandWorkedInt4Example) {
  // One row of 4, groups of 2: scales 1/7 and 0.5/7, values 7 -7 7 -7, packed low
  // nibble first: 0x97 0x97.
  std::vector<float> w = {1.0f, -1.0f, 0.5f, -0.5f};
  model::TensorView v = f32View(w, 1, 4);
  exec::FfnWeights expert{&v, &v, &v};
  VersionImage image;
  std::string error;
  ASSERT_TRUE(makeVersion(expert, Precision::Int4, 2, image, error)) << error;
  const model::TensorView &q = image.views[0];
  EXPECT_EQ(q.dtype, model::DType::Q4);
  ASSERT_EQ(q.bytes, 2u);
  EXPECT_EQ(q.data[0], 0x97);
  EXPECT_EQ(q.data[1], 0x97);
  EXPECT_FLOAT_EQ(q.scales[0], 1.0f / 7);
  EXPECT_FLOAT_EQ(q.scales[1], 0.5f / 7);
  std::vector<float> back(4);
  model::widenToFloat(q, 0, 4, back.data());
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(back[i], w[i], 1e-6);
}

TEST(Quantize, ErrorIsAtMostHalfAStep) {
  const int64_t rows = 24, cols = 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> w(rows * cols);
  for (float &x : w)
    x = normal(rng);
  w[5] = 0; // a zero row segment stays zero
  model::TensorView v = f32View(w, rows, cols);
  exec::FfnWeights expert{&v, &v, &v};
  for (auto [precision, group] :
       {std::pair{Precision::Int8, int64_t(0)}, std::pair{Precision::Int4, int64_t(16)}}) {
    VersionImage image;
    std::string error;
    ASSERT_TRUE(makeVersion(expert, precision, group, image, error)) << error;
    const model::TensorView &q = image.views[1];
    std::vector<float> back(w.size());
    model::widenToFloat(q, 0, rows * cols, back.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t g = precision == Precision::Int8 ? 0 : c / group;
        const float scale =
            precision == Precision::Int8 ? q.scales[r] : q.scales[r * (cols / group) + g];
        // The scale is max|run| / limit: the run's largest element is exact.
        ASSERT_LE(std::fabs(back[r * cols + c] - w[r * cols + c]), scale / 2 + 1e-6f)
            << precisionName(precision) << " row " << r << " col " << c;
      }
    // Widening a row block in the middle gives the same values.
    std::vector<float> block(3 * cols);
    model::widenToFloat(q, 7 * cols, 3 * cols, block.data());
    EXPECT_EQ(0, std::memcmp(block.data(), back.data() + 7 * cols, block.size() * 4));
  }
}

TEST(Quantize, LayoutErrors) {
  std::vector<float> w(3 * 6, 1.0f);
  model::TensorView v = f32View(w, 3, 6);
  exec::FfnWeights expert{&v, &v, &v};
  VersionImage image;
  std::string error;
  EXPECT_FALSE(makeVersion(expert, Precision::Int4, 4, image, error));
  EXPECT_NE(error.find("int4 groups of 4 do not divide the 6-wide rows"), std::string::npos)
      << error;
  ASSERT_TRUE(makeVersion(expert, Precision::Int4, 0, image, error)) << error;
  EXPECT_EQ(image.layout.group, 2); // the largest power of two dividing 6
  exec::FfnWeights quantised = image.weights();
  VersionImage twice;
  EXPECT_FALSE(makeVersion(quantised, Precision::Int8, 0, twice, error));
  EXPECT_NE(error.find("already quantised"), std::string::npos) << error;
  Precision p;
  EXPECT_TRUE(parsePrecision("int4", p) && p == Precision::Int4);
  EXPECT_FALSE(parsePrecision("int3", p));
}

/// A layer whose experts run the `precision` version: equal to the definition on the
/// dequantised weights; its deviation from the high-precision layer returned.
double layerDeviation(Precision precision, bool bf16) {
  unittest::TinyCheckpoint c(bf16, 1, 64, 32, 4);
  std::string error;
  model::MoeConfig config;
  EXPECT_TRUE(model::readMoeConfig(c.dir, config, error)) << error;
  auto ckpt = model::SafetensorsCheckpoint::open(c.dir, error);
  auto layer = exec::MoeLayer::load(config, *ckpt, 0, error);
  EXPECT_TRUE(layer) << error;
  const int64_t T = 13, H = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(T * H);
  for (float &v : x)
    v = normal(rng);
  exec::Routing routing = unittest::roundRobinRouting(T, 4, 9);
  exec::BatchInfo batch;
  batch.tokens = T;
  EXPECT_TRUE(batch.derive(nullptr, error)) << error;
  auto run = [&] {
    std::vector<float> y(T * H);
    exec::Routing scratch;
    exec::LayerMetrics metrics;
    EXPECT_TRUE(
        layer->forward(x.data(), T, batch, &routing, scratch, y.data(), metrics, error))
        << error;
    return y;
  };
  const std::vector<float> high = run();
  std::vector<VersionImage> versions(4);
  for (int e = 0; e < 4; ++e) {
    EXPECT_TRUE(makeVersion(layer->expertWeights(e), precision, 0, versions[e], error))
        << error;
  }
  for (int e = 0; e < 4; ++e)
    layer->setExpertWeights(e, versions[e].weights());
  const std::vector<float> low = run();
  const std::vector<float> want = unittest::directBlock(
      [&](int32_t e) { return versions[size_t(e)].weights(); }, x, routing, H);
  double worst = 0, num = 0, den = 0;
  for (size_t i = 0; i < low.size(); ++i) {
    worst = std::max(worst, double(std::fabs(low[i] - want[i])));
    num += double(low[i] - high[i]) * (low[i] - high[i]);
    den += double(high[i]) * high[i];
  }
  EXPECT_LE(worst, 1e-5) << precisionName(precision) << ": the layer is not its definition";
  return std::sqrt(num / den);
}

TEST(Quantize, LayersRunTheirVersionsAndMeasureAccuracy) {
  for (bool bf16 : {false, true}) {
    const double int8 = layerDeviation(Precision::Int8, bf16);
    const double int4 = layerDeviation(Precision::Int4, bf16);
    std::printf("relative RMS deviation from the %s layer: int8 %.4f, int4 %.4f\n",
                bf16 ? "bf16" : "f32", int8, int4);
    // Gaussian weights through three GEMMs and SiLU: about 1% for int8 and 17% for int4
    // (groups of 32) here; a regression in either format moves these a lot.
    EXPECT_LT(int8, 0.02);
    EXPECT_LT(int4, 0.25);
    EXPECT_LT(int8, int4);
  }
}

} // namespace

} // namespace quantize_test
