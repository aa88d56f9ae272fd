//===- CudaBackend.cpp - DeviceBackend over the CUDA runtime ----------------===//
#include "CudaBackend.h"
#include "DequantKernel.h"

namespace switchyard::exec::cuda {

namespace {
cudaStream_t stream(memory::Stream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t event(memory::Event e) { return static_cast<cudaEvent_t>(e); }

bool ok(cudaError_t status, const char *what, std::string &error) {
  if (status == cudaSuccess)
    return true;
  error = std::string(what) + ": " + cudaText(status);
  return false;
}
} // namespace

std::string CudaBackend::name() const {
  std::string name = "cuda:" + std::to_string(ctx->ordinal);
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, ctx->ordinal) == cudaSuccess)
    name += std::string(" (") + props.name + ", sm_" + std::to_string(props.major) +
            std::to_string(props.minor) + ")";
  return name;
}

void *CudaBackend::allocateDevice(size_t bytes, std::string &error) {
  void *p = nullptr;
  if (!ok(cudaSetDevice(ctx->ordinal), "cudaSetDevice", error) ||
      !ok(cudaMalloc(&p, bytes),
          ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), error))
    return nullptr;
  return p;
}

void CudaBackend::freeDevice(void *p) { cudaFree(p); }

void *CudaBackend::allocatePinned(size_t bytes, std::string &error) {
  void *p = nullptr;
  if (!ok(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
          ("cudaHostAlloc of " + std::to_string(bytes) + " bytes").c_str(), error))
    return nullptr;
  return p;
}

void CudaBackend::freePinned(void *p) { cudaFreeHost(p); }

memory::Stream CudaBackend::createStream(std::string &error) {
  cudaStream_t s = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", error))
    return nullptr;
  return s;
}

void CudaBackend::destroyStream(memory::Stream s) { cudaStreamDestroy(stream(s)); }

memory::Event CudaBackend::createEvent(std::string &error) {
  cudaEvent_t e = nullptr;
  if (!ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", error))
    return nullptr;
  return e;
}

void CudaBackend::destroyEvent(memory::Event e) { cudaEventDestroy(event(e)); }

bool CudaBackend::copyAsync(void *to, const void *from, size_t bytes, memory::CopyKind kind,
                            memory::Stream s, std::string &error) {
  const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                  cudaMemcpyDeviceToDevice};
  return ok(cudaMemcpyAsync(to, from, bytes, kinds[int(kind)], stream(s)),
            "cudaMemcpyAsync", error);
}

bool CudaBackend::record(memory::Event e, memory::Stream s, std::string &error) {
  return ok(cudaEventRecord(event(e), stream(s)), "cudaEventRecord", error);
}

bool CudaBackend::wait(memory::Stream s, memory::Event e, std::string &error) {
  return ok(cudaStreamWaitEvent(stream(s), event(e), 0), "cudaStreamWaitEvent", error);
}

bool CudaBackend::done(memory::Event e, std::string &error) {
  cudaError_t status = cudaEventQuery(event(e));
  if (status == cudaErrorNotReady) {
    cudaGetLastError(); // not an error: clear it
    return false;
  }
  return ok(status, "cudaEventQuery", error);
}

bool CudaBackend::synchronize(memory::Stream s, std::string &error) {
  return ok(cudaStreamSynchronize(stream(s)), "cudaStreamSynchronize", error);
}

bool CudaBackend::dequantize(const memory::PackedMatrix &m, float *out, memory::Stream s,
                             std::string &error) {
  return ok(cuda::dequantize(m, out, stream(s)), "the dequantising kernel", error);
}

} // namespace switchyard::exec::cuda
