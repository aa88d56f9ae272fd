//===- CudaExperts.cpp - device expert memory on a CUDA GPU -----------------===//
//
// The plug-in's half of switchyard/Executor/CudaExperts.h (the loader's half forwards
// to these through CudaLayerPlugin).
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"
#include "CudaLayerPlugin.h"

namespace switchyard::exec::cuda {

std::unique_ptr<memory::DeviceBackend> openBackend(const std::shared_ptr<void> &device,
                                                   std::string &error) {
  if (!device) {
    error = "device expert memory: no CUDA device (openCudaDevice first)";
    return nullptr;
  }
  return std::make_unique<CudaBackend>(std::static_pointer_cast<CudaContext>(device));
}

bool expertFfn(const std::shared_ptr<void> &device, const memory::DeviceExpert &expert,
               const float *x, int64_t n, float *y, std::string &error) {
  auto ctx = std::static_pointer_cast<CudaContext>(device);
  const model::TensorView &gate = expert.views[0], &down = expert.views[2];
  if (!ctx || !expert.image || gate.shape.size() != 2 || down.shape.size() != 2) {
    error = "device expert memory: not a resident expert version (acquire it first)";
    return false;
  }
  const int64_t width = gate.shape[0], hidden = gate.shape[1];
  CudaBackend backend(ctx);
  float *staging[3];
  for (int j = 0; j < 3; ++j) {
    cudaError_t status =
        ctx->staging[j].reserve(size_t(expert.views[j].numel()) * sizeof(float));
    if (status != cudaSuccess) {
      error = "device expert memory: the staging buffer of " + expert.views[j].name + ": " +
              cudaText(status);
      return false;
    }
    staging[j] = ctx->staging[j].f32();
  }
  const float *w[3];
  if (!memory::resolveExpert(backend, expert, staging, w, ctx->stream, error) ||
      !swigluFfn(*ctx, w[0], w[1], w[2], hidden, width, x, n, y, ctx->gateOut, ctx->upOut,
                 error)) {
    error = "expert " + std::to_string(expert.expert) + " (" +
            memory::precisionName(expert.precision) + "): " + error;
    return false;
  }
  return true;
}

} // namespace switchyard::exec::cuda
