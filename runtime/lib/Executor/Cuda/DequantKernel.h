//===- DequantKernel.h - expert matrices widened to float32 on the GPU -*- C++ -*-===//
//
// The kernel that resolves an expert handle for the GEMMs: every element of a packed
// matrix (f16 / bf16, int8 per row, int4 in groups, in device memory) widened to float32
// into a staging buffer, by the same code the host runs (switchyard/Memory/DequantMath.h).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDA_DEQUANTKERNEL_H
#define SWITCHYARD_EXECUTOR_CUDA_DEQUANTKERNEL_H

#include "switchyard/Memory/DequantMath.h"

#include <cuda_runtime_api.h>

namespace switchyard::exec::cuda {

/// out[i] = dequantAt(m, i) for i < m.rows * m.cols, launched on `stream`.
cudaError_t dequantize(const memory::PackedMatrix &m, float *out, cudaStream_t stream);

} // namespace switchyard::exec::cuda

#endif
