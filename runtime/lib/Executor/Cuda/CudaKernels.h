//===- CudaKernels.h - the executor's few elementwise GPU kernels -*- C++ -*-===//
//
// What cuBLAS does not do for a MoE layer: gather the routed rows in expert order,
// SwiGLU's silu(gate) * up, the deterministic weighted combine, Qwen2-MoE's sigmoid
// shared-expert gate. Each launches on the given stream and returns its cudaError_t.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDA_CUDAKERNELS_H
#define SWITCHYARD_EXECUTOR_CUDA_CUDAKERNELS_H

#include <cstdint>
#include <cuda_runtime_api.h>

namespace switchyard::exec::cuda {

/// out[r, :] = x[slots[r] / k, :] for r < rows.
cudaError_t gatherRows(const float *x, const int32_t *slots, int64_t rows, int64_t k,
                       int64_t width, float *out, cudaStream_t stream);
/// gate[i] = silu(gate[i]) * up[i].
cudaError_t siluMul(float *gate, const float *up, int64_t count, cudaStream_t stream);
/// y[t, :] += sum_j weights[t, j] * rows[rowOfSlot[t * k + j], :] over slots with a row
/// (rowOfSlot -1: none), in slot order (deterministic: no atomics).
cudaError_t combine(const float *rows, const int32_t *rowOfSlot, const float *weights,
                    int64_t tokens, int64_t k, int64_t width, float *y,
                    cudaStream_t stream);
/// y[t, :] *= sigmoid(dot(x[t, :], gate)).
cudaError_t scaleBySigmoidGate(const float *x, const float *gate, int64_t tokens,
                               int64_t width, float *y, cudaStream_t stream);

} // namespace switchyard::exec::cuda

#endif
