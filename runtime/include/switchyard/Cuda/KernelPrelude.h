//===- KernelPrelude.h - what the generated CUDA C++ of a policy uses -*- C++ -*-===//
//
// Every NAME.cu moe-compile writes (lib/Target/Cuda/CudaEmitter.cpp) starts with
// #include "switchyard/Cuda/KernelPrelude.h": compile it with -I of the Switchyard
// include directory (runtime/include in the source tree, include/ of an installed
// package). The memref descriptors the kernels take (the PTX entries' expanded
// parameters), element access, bit casts and the 16-bit input widening; with
// -DSWITCHYARD_CUDA_ON_HOST the source is plain C++ that CPU threads run
// (CudaOnHost.h).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CUDA_KERNELPRELUDE_H
#define SWITCHYARD_CUDA_KERNELPRELUDE_H

#include <math.h>
#include <stdint.h>
#ifdef SWITCHYARD_CUDA_ON_HOST
#include "switchyard/Cuda/CudaOnHost.h"
#else
#include <cooperative_groups.h>
// moe.grid_barrier: the kernel is launched cooperatively (the launcher's Cooperative
// class), so every CTA is resident and the grid can wait for itself.
__device__ inline void syGridSync() { cooperative_groups::this_grid().sync(); }
#endif
#define SY_EXPORT extern "C"

template <typename T, int R> struct SyMemRef {
  T *base;
  int64_t offset;
  int64_t sizes[R > 0 ? R : 1];
  int64_t strides[R > 0 ? R : 1];
};
// Element access: syAt for the kernel's buffers (global memory), syAtShared for
// block-shared memory; the same on the GPU, counted apart on the CPU (CudaOnHost.h).
#ifdef SWITCHYARD_CUDA_ON_HOST
#define SY_COUNT(counter) syCountOp(counter)
#else
#define SY_COUNT(counter)
#endif
template <typename T> __device__ inline T &syAt(const SyMemRef<T, 1> &m, int64_t i) {
  SY_COUNT(kSyGlobalOps);
  return m.base[m.offset + i * m.strides[0]];
}
template <typename T>
__device__ inline T &syAt(const SyMemRef<T, 2> &m, int64_t i, int64_t j) {
  SY_COUNT(kSyGlobalOps);
  return m.base[m.offset + i * m.strides[0] + j * m.strides[1]];
}
template <typename T> __device__ inline T &syAtShared(const SyMemRef<T, 1> &m, int64_t i) {
  SY_COUNT(kSySharedOps);
  return m.base[m.offset + i * m.strides[0]];
}
template <typename To, typename From> __device__ inline To syBitcast(From f) {
  To t;
  __builtin_memcpy(&t, &f, sizeof t);
  return t;
}
// bfloat16 / float16 inputs (moe-narrow-inputs) are held as their 16-bit patterns and
// widened exactly where they are loaded.
__device__ inline float syBf16ToFloat(uint16_t h) {
  return syBitcast<float>(static_cast<uint32_t>(h) << 16);
}
__device__ inline float syHalfToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f)
    return syBitcast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float m = static_cast<float>(mantissa) * 5.9604644775390625e-8f; // 2^-24
    return sign ? -m : m;
  }
  return syBitcast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
#endif
}
__device__ inline float syMaximum(float a, float b) {
  return (isnan(a) || isnan(b)) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

#endif
