//===- CudaUnavailable.cpp - --device cuda in a build without CUDA ---------===//
#include "switchyard/Executor/CudaExperts.h"
#include "switchyard/Executor/CudaLayer.h"

namespace switchyard::exec {

std::shared_ptr<void> openCudaDevice(int, std::string &error) {
  error = "--device cuda: this build has no CUDA support (the CUDA toolkit was not found "
          "when Switchyard was configured)";
  return nullptr;
}

std::unique_ptr<Layer> loadCudaLayer(const std::shared_ptr<void> &,
                                     const model::MoeConfig &,
                                     const model::SafetensorsCheckpoint &, int64_t,
                                     const std::string &, const ExecutorOptions &,
                                     std::string &error) {
  error = "--device cuda: this build has no CUDA support";
  return nullptr;
}

std::unique_ptr<memory::DeviceBackend> openCudaBackend(const std::shared_ptr<void> &,
                                                       std::string &error) {
  error = "device expert memory: this build has no CUDA support";
  return nullptr;
}

bool cudaExpertFfn(const std::shared_ptr<void> &, const memory::DeviceExpert &,
                   const float *, int64_t, float *, std::string &error) {
  error = "device expert memory: this build has no CUDA support";
  return false;
}

} // namespace switchyard::exec
