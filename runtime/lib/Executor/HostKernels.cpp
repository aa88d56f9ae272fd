//===- HostKernels.cpp - the host executor's dense math --------------------===//
#include "switchyard/Executor/HostKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace switchyard::exec {

/// Below this many rows a product is done row by row (sgemv): GEMM's packing costs
/// more than it saves, and the weight stays in the last-level cache between rows.
/// (Measured on the Qwen3-MoE-shaped benchmark layer: 8 beats 2, 4, 16, 32 and 64.)
constexpr int64_t kGemvRows = 8;

void matmulT(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols, float *out) {
  if (n < kGemvRows) {
    for (int64_t i = 0; i < n; ++i) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w, cols, x + i * cols, 1, 0.0f,
                  out + i * rows, 1);
    }
  } else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, x, cols, w, cols,
                0.0f, out, rows);
}

/// Rows of a 16-bit weight widened per block: 64 KiB of float32 per row block of a
/// 4096-wide matrix, small enough to stay in L2 while the GEMM reads it.
constexpr int64_t kWidenBlockElements = 1 << 16;

void matmulWeightT(const float *x, int64_t n, const model::TensorView &w, float *out,
                   std::vector<float> &scratch) {
  int64_t rows = w.shape[0], cols = w.shape[1];
  bool aligned = reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0;
  if (w.dtype == model::DType::F32 && aligned) {
    matmulT(x, n, reinterpret_cast<const float *>(w.data), rows, cols, out);
    return;
  }
  int64_t block = std::max<int64_t>(1, kWidenBlockElements / cols);
  if (static_cast<int64_t>(scratch.size()) < block * cols)
    scratch.resize(static_cast<size_t>(block * cols));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    int64_t r = std::min(block, rows - r0);
    model::widenToFloat(w, r0 * cols, r * cols, scratch.data());
    if (n < kGemvRows) {
      for (int64_t i = 0; i < n; ++i)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, r, cols, 1.0f, scratch.data(), cols,
                    x + i * cols, 1, 0.0f, out + i * rows + r0, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, r, cols, 1.0f, x, cols,
                  scratch.data(), cols, 0.0f, out + r0, rows);
    }
  }
}

void rmsNorm(const float *x, int64_t n, int64_t width, const float *weight, double eps,
             float *y) {
  for (int64_t i = 0; i < n; ++i) {
    const float *row = x + i * width;
    float sum = 0;
    for (int64_t j = 0; j < width; ++j)
      sum += row[j] * row[j];
    float scale = 1.0f / std::sqrt(sum / static_cast<float>(width) + static_cast<float>(eps));
    for (int64_t j = 0; j < width; ++j)
      y[i * width + j] = weight[j] * (row[j] * scale);
  }
}

void siluMul(float *gate, const float *up, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

} // namespace switchyard::exec
