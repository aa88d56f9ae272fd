//===- CudaBackend.h - DeviceBackend over the CUDA runtime -------*- C++ -*-===//
//
// Device expert memory (switchyard/Memory/DeviceExperts.h) on a GPU: cudaMalloc'd
// regions, cudaHostAlloc'd pinned tiers, cudaMemcpyAsync on non-blocking streams,
// events without timing (cudaEventDisableTiming), cudaStreamWaitEvent, and the
// dequantising kernel (DequantKernel.cu) on the layers' compute stream. Internal to
// libSwitchyardExecutorCuda; made by openCudaBackend (CudaExperts.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDA_CUDABACKEND_H
#define SWITCHYARD_EXECUTOR_CUDA_CUDABACKEND_H

#include "CudaContext.h"
#include "switchyard/Memory/DeviceBackend.h"

#include <memory>

namespace switchyard::exec::cuda {

class CudaBackend : public memory::DeviceBackend {
public:
  explicit CudaBackend(std::shared_ptr<CudaContext> ctx) : ctx(std::move(ctx)) {}
  std::string name() const override;
  void *allocateDevice(size_t bytes, std::string &error) override;
  void freeDevice(void *p) override;
  void *allocatePinned(size_t bytes, std::string &error) override;
  void freePinned(void *p) override;
  memory::Stream computeStream() override { return ctx->stream; }
  memory::Stream createStream(std::string &error) override;
  void destroyStream(memory::Stream s) override;
  memory::Event createEvent(std::string &error) override;
  void destroyEvent(memory::Event e) override;
  bool copyAsync(void *to, const void *from, size_t bytes, memory::CopyKind kind,
                 memory::Stream s, std::string &error) override;
  bool record(memory::Event e, memory::Stream s, std::string &error) override;
  bool wait(memory::Stream s, memory::Event e, std::string &error) override;
  bool done(memory::Event e, std::string &error) override;
  bool synchronize(memory::Stream s, std::string &error) override;
  bool dequantize(const memory::PackedMatrix &m, float *out, memory::Stream s,
                  std::string &error) override;
  CudaContext &context() { return *ctx; }

private:
  std::shared_ptr<CudaContext> ctx;
};

} // namespace switchyard::exec::cuda

#endif
