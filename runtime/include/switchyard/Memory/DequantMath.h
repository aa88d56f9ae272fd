//===- DequantMath.h - one expert matrix element widened to float32 -*- C++ -*-===//
//
// The arithmetic that turns an element of an expert version (switchyard/Memory/
// Quantize.h: f32, f16 or bf16 as the checkpoint has it; int8 per row, int4 in groups
// along a row, with float32 scales) into the float32 the GEMMs compute with. Header
// only and `__host__ __device__` under nvcc: the CUDA layer's dequantising kernel
// (runtime/lib/Executor/Cuda/DequantKernel.cu) and host C++ (unit tests, the fake device
// backend) run the same code, which equals model::widenToFloat bit for bit (one float
// multiply per quantised element, the same nibble decoding, exact f16 / bf16 widening).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_DEQUANTMATH_H
#define SWITCHYARD_MEMORY_DEQUANTMATH_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SWITCHYARD_HD __host__ __device__
#else
#define SWITCHYARD_HD
#endif

namespace switchyard::memory {

/// The element types of a packed expert matrix (model::DType without `Other`).
enum class PackedType : int32_t { F32, F16, BF16, Q8, Q4 };

/// One matrix of an expert version, `rows` x `cols` row-major, wherever it lives.
struct PackedMatrix {
  PackedType type = PackedType::F32;
  int64_t rows = 0, cols = 0;
  int64_t group = 0;             // Q4: elements per scale along a row
  const uint8_t *data = nullptr; // Q4: two elements per byte, the even one low
  const float *scales = nullptr; // Q8: [rows]; Q4: [rows, cols / group]
};

SWITCHYARD_HD inline float floatFromBits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

/// bfloat16 is the upper half of a float32: exact.
SWITCHYARD_HD inline float bf16ToFloat(uint16_t h) {
  return floatFromBits(uint32_t(h) << 16);
}

/// IEEE half to float32, exact (NaN payloads kept, as npy::halfToFloat).
SWITCHYARD_HD inline float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f)
    return floatFromBits(sign | 0x7f800000u | mantissa << 13);
  if (exponent != 0)
    return floatFromBits(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
  if (mantissa == 0)
    return floatFromBits(sign);
  int p = 9; // subnormal: normalise around the leading one bit
  while (!(mantissa & (1u << p)))
    --p;
  mantissa &= ~(1u << p);
  return floatFromBits(sign | uint32_t(p - 24 + 127) << 23 | mantissa << (23 - p));
}

/// A signed 4-bit value of a packed int4 matrix (element i: byte i / 2, even i low).
SWITCHYARD_HD inline int int4At(const uint8_t *packed, int64_t i) {
  const uint8_t byte = packed[i / 2];
  return (i & 1) ? int(int8_t(byte)) >> 4 : int(int8_t(uint8_t(byte << 4))) >> 4;
}

/// Element i (row-major) of `m` as float32.
SWITCHYARD_HD inline float dequantAt(const PackedMatrix &m, int64_t i) {
  switch (m.type) {
  case PackedType::F32: {
    uint32_t bits = uint32_t(m.data[4 * i]) | uint32_t(m.data[4 * i + 1]) << 8 |
                    uint32_t(m.data[4 * i + 2]) << 16 | uint32_t(m.data[4 * i + 3]) << 24;
    return floatFromBits(bits);
  }
  case PackedType::F16:
    return f16ToFloat(uint16_t(m.data[2 * i] | m.data[2 * i + 1] << 8));
  case PackedType::BF16:
    return bf16ToFloat(uint16_t(m.data[2 * i] | m.data[2 * i + 1] << 8));
  case PackedType::Q8:
    return float(int8_t(m.data[i])) * m.scales[i / m.cols];
  case PackedType::Q4: {
    const int64_t row = i / m.cols, col = i % m.cols;
    return float(int4At(m.data, i)) * m.scales[row * (m.cols / m.group) + col / m.group];
  }
  }
  return 0.0f;
}

} // namespace switchyard::memory

#endif
