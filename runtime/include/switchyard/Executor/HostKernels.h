//===- HostKernels.h - the host executor's dense math -----------*- C++ -*-===//
//
// The few dense operations of a MoE layer on the host: x . W^T against checkpoint
// weights (OpenBLAS sgemm / sgemv; F16 and BF16 weights widened to float32 one block
// of rows at a time, so the scratch stays in cache and the weight is read once), RMSNorm
// and the SwiGLU product. Weights stay in the mapped checkpoint.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_HOSTKERNELS_H
#define SWITCHYARD_EXECUTOR_HOSTKERNELS_H

#include "switchyard/Model/Safetensors.h"

#include <vector>

namespace switchyard::exec {

/// out[n, N] = x[n, K] . W^T for a checkpoint weight W [N, K] (PyTorch Linear layout).
/// `scratch` holds widened rows between calls (grown as needed).
void matmulWeightT(const float *x, int64_t n, const model::TensorView &w, float *out,
                   std::vector<float> &scratch);

/// out[n, N] = x[n, K] . W^T for a float32 W [N, K] in memory.
void matmulT(const float *x, int64_t n, const float *w, int64_t rows, int64_t cols,
             float *out);

/// y[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * weight (Hugging Face's RMSNorm, in
/// float32).
void rmsNorm(const float *x, int64_t n, int64_t width, const float *weight, double eps,
             float *y);

/// gate[i] = silu(gate[i]) * up[i], elementwise.
void siluMul(float *gate, const float *up, int64_t count);

} // namespace switchyard::exec

#endif
