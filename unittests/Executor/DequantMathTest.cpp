//===- DequantMathTest.cpp - the GPU's dequantisation math against the host's -===//
//
// DequantMath.h is the code the CUDA layer's dequantising kernel runs; here on the host
// it must equal the host reference (model::widenToFloat over Quantize.h's versions) bit
// for bit: int8, int4 (every group size the layouts pick, odd and even elements), f32,
// bf16 and every one of the 65536 f16 values.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Memory/DequantMath.h"
#include "switchyard/Memory/DeviceExperts.h"
#include "switchyard/Runtime/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

// A namespace of its own: unity builds put several test files in one
// translation unit (scripts/build-sanitized.sh).
namespace dequant_math_test {

using namespace switchyard;
using namespace switchyard::memory;

namespace {

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

/// Every element of `view` through dequantAt equals widenToFloat's, bit for bit.
void expectSameAsHost(const model::TensorView &view) {
  PackedMatrix m;
  std::string error;
  ASSERT_TRUE(packedMatrix(view, m, error)) << error;
  const int64_t n = view.numel();
  std::vector<float> host(static_cast<size_t>(n));
  model::widenToFloat(view, 0, n, host.data());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bitsOf(dequantAt(m, i)), bitsOf(host[size_t(i)]))
        << view.name << " element " << i << ": " << dequantAt(m, i) << " vs "
        << host[size_t(i)];
}

struct RandomExpert {
  std::vector<float> gate, up, down;
  model::TensorView views[3];
  RandomExpert(int64_t hidden, int64_t width, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (auto *w : {&gate, &up})
      for (int64_t i = 0; i < hidden * width; ++i)
        w->push_back(normal(rng));
    for (int64_t i = 0; i < hidden * width; ++i)
      down.push_back(normal(rng));
    down[3] = 0.0f; // a zero, and a row of zeros (scale 0)
    std::fill(gate.begin(), gate.begin() + hidden, 0.0f);
    const std::vector<float> *data[3] = {&gate, &up, &down};
    const int64_t shapes[3][2] = {{width, hidden}, {width, hidden}, {hidden, width}};
    for (int j = 0; j < 3; ++j) {
      views[j].name = j == 0 ? "gate" : j == 1 ? "up" : "down";
      views[j].dtype = model::DType::F32;
      views[j].dtypeText = "F32";
      views[j].shape = {shapes[j][0], shapes[j][1]};
      views[j].data = reinterpret_cast<const uint8_t *>(data[j]->data());
      views[j].bytes = data[j]->size() * 4;
    }
  }
  exec::FfnWeights weights() const { return {&views[0], &views[1], &views[2]}; }
};

TEST(DequantMath, Int8EqualsTheHostReference) {
  RandomExpert expert(48, 40, 1);
  VersionImage v;
  std::string error;
  ASSERT_TRUE(makeVersion(expert.weights(), Precision::Int8, 0, v, error)) << error;
  for (const model::TensorView &view : v.views)
    expectSameAsHost(view);
}

TEST(DequantMath, Int4EqualsTheHostReferenceAtEveryGroup) {
  RandomExpert expert(64, 96, 2);
  for (int64_t group : {0, 2, 8, 32}) {
    VersionImage v;
    std::string error;
    ASSERT_TRUE(makeVersion(expert.weights(), Precision::Int4, group, v, error)) << error;
    for (const model::TensorView &view : v.views)
      expectSameAsHost(view);
  }
}

TEST(DequantMath, Int4NibblesAreSignedLowFirst) {
  // 0x97: element 0 = 7 (low nibble), element 1 = -7 (0x9); 0x08: 8 -> -8, then 0.
  const uint8_t packed[2] = {0x97, 0x08};
  const float scales[1] = {0.5f};
  PackedMatrix m;
  m.type = PackedType::Q4;
  m.rows = 1;
  m.cols = 4;
  m.group = 4;
  m.data = packed;
  m.scales = scales;
  EXPECT_EQ(dequantAt(m, 0), 3.5f);
  EXPECT_EQ(dequantAt(m, 1), -3.5f);
  EXPECT_EQ(dequantAt(m, 2), -4.0f);
  EXPECT_EQ(dequantAt(m, 3), 0.0f);
}

TEST(DequantMath, HighPrecisionIsWidenedExactly) {
  RandomExpert expert(16, 24, 3);
  VersionImage v;
  std::string error;
  ASSERT_TRUE(makeVersion(expert.weights(), Precision::High, 0, v, error)) << error;
  for (const model::TensorView &view : v.views)
    expectSameAsHost(view); // f32: the same bits
  std::vector<uint16_t> bf16(expert.gate.size());
  for (size_t i = 0; i < bf16.size(); ++i)
    bf16[i] = uint16_t(bitsOf(expert.gate[i]) >> 16);
  model::TensorView view = expert.views[0];
  view.dtype = model::DType::BF16;
  view.data = reinterpret_cast<const uint8_t *>(bf16.data());
  view.bytes = bf16.size() * 2;
  expectSameAsHost(view);
}

TEST(DequantMath, EveryHalfEqualsNpy) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float mine = f16ToFloat(uint16_t(h)), ref = npy::halfToFloat(uint16_t(h));
    ASSERT_EQ(bitsOf(mine), bitsOf(ref)) << "half 0x" << std::hex << h;
    ASSERT_EQ(bitsOf(bf16ToFloat(uint16_t(h))), bitsOf(npy::bfloat16ToFloat(uint16_t(h))));
  }
}

TEST(DequantMath, UnknownDtypesAreRefusedByName) {
  model::TensorView view;
  view.name = "experts.0.w1";
  view.dtype = model::DType::Other;
  view.dtypeText = "I64";
  view.shape = {2, 2};
  PackedMatrix m;
  std::string error;
  EXPECT_FALSE(packedMatrix(view, m, error));
  EXPECT_NE(error.find("experts.0.w1 is I64"), std::string::npos) << error;
}

} // namespace

} // namespace dequant_math_test
