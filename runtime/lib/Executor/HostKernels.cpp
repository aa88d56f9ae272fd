//===- HostKernels.cpp - the host executor's dense math --------------------===//
#include "switchyard/Executor/HostKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace switchyard::exec {

// GCC's vector extension: 8 floats, one AVX register in the x86-64-v3 clone below (two
// SSE registers in the default one). Only used inside this file's inlined helpers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Float8 __attribute__((vector_size(32)));
static inline Float8 load8(const float *p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
static inline float sum8(Float8 v) {
  float s = 0;
  for (int l = 0; l < 8; ++l)
    s += v[l];
  return s;
}

/// out[n, rows] (row stride ldo) = x[n, cols] . W[rows, cols]^T for a few rows x: W is
/// read once, 4 rows at a time, each against 2 rows of x (8 accumulators in registers),
/// AVX2/FMA where the CPU has them,
/// while x stays in cache. OpenBLAS's sgemm packs all of W first (its traffic again)
/// and sgemv per row re-reads W per row; at 2-8 rows this streams W ~2x faster than
/// either (measured on 768 x 2048 expert weights).
__attribute__((always_inline)) static inline void
streamWeightTBody(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols,
                  float *out, int64_t ldo) {
  const int64_t body = cols / 8 * 8;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *w0 = w + r * cols, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
    for (int64_t i = 0; i < n; i += 2) {
      bool pair = i + 1 < n;
      const float *xa = x + i * cols, *xb = pair ? xa + cols : xa;
      Float8 a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
      for (int64_t c = 0; c < body; c += 8) {
        Float8 va = load8(xa + c), vb = load8(xb + c);
        Float8 q0 = load8(w0 + c), q1 = load8(w1 + c), q2 = load8(w2 + c),
               q3 = load8(w3 + c);
        a0 += q0 * va;
        a1 += q1 * va;
        a2 += q2 * va;
        a3 += q3 * va;
        b0 += q0 * vb;
        b1 += q1 * vb;
        b2 += q2 * vb;
        b3 += q3 * vb;
      }
      float s[8] = {sum8(a0), sum8(a1), sum8(a2), sum8(a3),
                    sum8(b0), sum8(b1), sum8(b2), sum8(b3)};
      for (int64_t c = body; c < cols; ++c) {
        const float *wq[4] = {w0, w1, w2, w3};
        for (int q = 0; q < 4; ++q) {
          s[q] += wq[q][c] * xa[c];
          s[4 + q] += wq[q][c] * xb[c];
        }
      }
      for (int q = 0; q < 4; ++q) {
        out[i * ldo + r + q] = s[q];
        if (pair)
          out[(i + 1) * ldo + r + q] = s[4 + q];
      }
    }
  }
  for (; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int64_t c = 0; c < cols; ++c)
        sum += w[r * cols + c] * x[i * cols + c];
      out[i * ldo + r] = sum;
    }
}

// The body compiled twice, picked at run time (not with target_clones: its ifunc
// resolver runs before the sanitizers' runtimes start, which TSan does not survive).
__attribute__((target("arch=x86-64-v3"))) static void
streamWeightTAvx2(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols,
                  float *out, int64_t ldo) {
  streamWeightTBody(x, n, w, rows, cols, out, ldo);
}
static void streamWeightTBaseline(const float *x, int64_t n, const float *w, int64_t rows,
                                  int64_t cols, float *out, int64_t ldo) {
  streamWeightTBody(x, n, w, rows, cols, out, ldo);
}
static void streamWeightT(const float *x, int64_t n, const float *w, int64_t rows,
                          int64_t cols, float *out, int64_t ldo) {
  static const auto kernel = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                 ? streamWeightTAvx2
                                 : streamWeightTBaseline;
  kernel(x, n, w, rows, cols, out, ldo);
}
#pragma GCC diagnostic pop

/// One row: sgemv. 2 to kStreamRows - 1 rows: the streaming kernel. More: sgemm.
constexpr int64_t kStreamRows = 12;

/// out[n, rows] (row stride ldo) = x[n, cols] . W[rows, cols]^T.
static void product(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols,
                    float *out, int64_t ldo) {
  if (n == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, w, cols, x, 1, 0.0f, out, 1);
  else if (n < kStreamRows)
    streamWeightT(x, n, w, rows, cols, out, ldo);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, cols, 1.0f, x, cols, w,
                cols, 0.0f, out, ldo);
}

void matmulT(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols,
             float *out) {
  product(x, n, w, rows, cols, out, rows);
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
    product(x, n, scratch.data(), r, cols, out + r0, rows);
  }
}

void rmsNorm(const float *x, int64_t n, int64_t width, const float *weight, double eps,
             float *y) {
  for (int64_t i = 0; i < n; ++i) {
    const float *row = x + i * width;
    float sum = 0;
    for (int64_t j = 0; j < width; ++j)
      sum += row[j] * row[j];
    float scale =
        1.0f / std::sqrt(sum / static_cast<float>(width) + static_cast<float>(eps));
    for (int64_t j = 0; j < width; ++j)
      y[i * width + j] = weight[j] * (row[j] * scale);
  }
}

void siluMul(float *gate, const float *up, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

} // namespace switchyard::exec
