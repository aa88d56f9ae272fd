//===- CudaLayerPlugin.h - libSwitchyardExecutorCuda's entry point -*- C++ -*-===//
//
// The --device cuda layer (CudaLayer.cpp, CudaKernels.cu: cudart and cuBLAS) is a
// library of its own, libSwitchyardExecutorCuda.so, that libSwitchyardExecutor.so loads
// on first use (CudaLoader.cpp): the executor, and the Python extension over it, then
// load where no CUDA library is installed. One extern "C" symbol gives the table of its
// functions (the layer, and device expert memory: CudaExperts.h); the version guards
// against a plug-in of another build.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDA_CUDALAYERPLUGIN_H
#define SWITCHYARD_EXECUTOR_CUDA_CUDALAYERPLUGIN_H

#include "switchyard/Executor/CudaExperts.h"
#include "switchyard/Executor/CudaLayer.h"

namespace switchyard::exec {

struct CudaLayerPlugin {
  static constexpr int kVersion = 2;
  int version;
  decltype(&openCudaDevice) openDevice;
  decltype(&loadCudaLayer) loadLayer;
  decltype(&openCudaBackend) openBackend; // device expert memory (version 2)
  decltype(&cudaExpertFfn) expertFfn;
};

} // namespace switchyard::exec

#define SWITCHYARD_CUDA_LAYER_LIBRARY "libSwitchyardExecutorCuda.so"
#define SWITCHYARD_CUDA_LAYER_SYMBOL "switchyard_cuda_layer_plugin"

extern "C" const switchyard::exec::CudaLayerPlugin *switchyard_cuda_layer_plugin();

#endif
