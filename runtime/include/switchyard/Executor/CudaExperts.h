//===- CudaExperts.h - device expert memory on a CUDA GPU -------*- C++ -*-===//
//
// The GPU side of expert memory, in the CUDA layer's plug-in (libSwitchyardExecutorCuda,
// loaded on first use like the layer: CudaLayer.h). openCudaBackend gives the
// DeviceBackend that DeviceExperts (switchyard/Memory/DeviceExperts.h) runs its pools
// and migrations on - cudaMalloc'd pool regions, cudaHostAlloc'd pinned tiers, copies
// on a migration stream ordered by events against the layers' compute stream - and
// cudaExpertFfn runs an expert from its handle: the version resolved to float32 (f32
// read in place; bf16 / f16 / int8 / int4 through the dequantising kernel into the
// device context's staging buffers), then the layer's cuBLAS GEMM path.
//
// Where the plug-in, the CUDA runtime or a GPU is missing these are errors naming it,
// as openCudaDevice's are.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDAEXPERTS_H
#define SWITCHYARD_EXECUTOR_CUDAEXPERTS_H

#include "switchyard/Memory/DeviceExperts.h"

namespace switchyard::exec {

/// The DeviceBackend of `device` (from openCudaDevice); its compute stream is the one
/// the device's layers run on. nullptr with `error` without CUDA support.
std::unique_ptr<memory::DeviceBackend> openCudaBackend(const std::shared_ptr<void> &device,
                                                       std::string &error);

/// y[n, hidden] = down . (silu(gate . x) * (up . x)) for a resident `expert` of
/// `device`, queued on the compute stream (after the waits its acquire() issued);
/// x and y are device memory. Asynchronous: synchronise the stream to read y.
bool cudaExpertFfn(const std::shared_ptr<void> &device, const memory::DeviceExpert &expert,
                   const float *x, int64_t n, float *y, std::string &error);

} // namespace switchyard::exec

#endif
