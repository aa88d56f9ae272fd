//===- CudaLayer.h - one MoE block on a CUDA GPU ----------------*- C++ -*-===//
//
// The MoE block on the GPU: weights uploaded once (float32, widened from F16/BF16 at
// upload), the router GEMM with cuBLAS, the policy's compiled kernels launched on the
// layer's stream through its launcher library (runtime::CudaPolicy), the routed rows
// gathered by a kernel, each active expert's SwiGLU FFN as cuBLAS GEMMs, and a
// deterministic combine kernel (+ shared experts). One host synchronisation per layer:
// the expert ids come back to group the tokens by expert (cuBLAS takes host sizes).
//
// Built only when CMake finds the CUDA toolkit; otherwise openCudaDevice() says so.
// The layer is a plug-in, libSwitchyardExecutorCuda.so beside libSwitchyardExecutor.so,
// that these functions load on first use: where it or the CUDA runtime and cuBLAS it
// links cannot be loaded, openCudaDevice() is an error naming what is missing and how to
// get it. Without a GPU it is an error naming cudaGetDeviceCount's answer.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDALAYER_H
#define SWITCHYARD_EXECUTOR_CUDALAYER_H

#include "switchyard/Executor/Executor.h"
#include "switchyard/Executor/Layer.h"

namespace switchyard::exec {

/// Selects CUDA device `ordinal` and makes the context the layers share (stream,
/// cuBLAS handle); nullptr with `error` when there is no such GPU or no CUDA support.
std::shared_ptr<void> openCudaDevice(int ordinal, std::string &error);

/// Checkpoint layer `layer` on the GPU of `device`, routing with the launcher in the
/// artifact directory `artifacts`.
std::unique_ptr<Layer> loadCudaLayer(const std::shared_ptr<void> &device,
                                     const model::MoeConfig &config,
                                     const model::SafetensorsCheckpoint &ckpt,
                                     int64_t layer, const std::string &artifacts,
                                     const ExecutorOptions &options, std::string &error);

} // namespace switchyard::exec

#endif
