//===- CudaContext.h - the CUDA layer's device context and GEMM path -*- C++ -*-===//
//
// What the CUDA layer's pieces share (internal to libSwitchyardExecutorCuda): the
// device context (one compute stream, the cuBLAS handle bound to it, the staging
// buffers expert handles are dequantised into), growable device buffers, and the FFN
// path every expert runs through - cuBLAS float32 GEMMs (no TF32) and silu(gate) * up.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_CUDA_CUDACONTEXT_H
#define SWITCHYARD_EXECUTOR_CUDA_CUDACONTEXT_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace switchyard::exec::cuda {

std::string cudaText(cudaError_t status);

/// A device allocation that grows as needed.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  DeviceBuffer(DeviceBuffer &&other) noexcept : ptr(other.ptr), bytes(other.bytes) {
    other.ptr = nullptr;
    other.bytes = 0;
  }
  ~DeviceBuffer() {
    if (ptr)
      cudaFree(ptr);
  }
  cudaError_t reserve(size_t need);
  float *f32() const { return static_cast<float *>(ptr); }
  int32_t *i32() const { return static_cast<int32_t *>(ptr); }
};

/// The device the layers share: one stream, one cuBLAS handle bound to it.
struct CudaContext {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer staging[3];     // a resolved expert's gate, up, down in float32
  DeviceBuffer gateOut, upOut; // the FFN's intermediate rows (expert handles)
  ~CudaContext() {
    if (blas)
      cublasDestroy(blas);
    if (stream)
      cudaStreamDestroy(stream);
  }
};

/// Row-major out[n, rows] = in[n, cols] . W[rows, cols]^T (float32, on ctx.stream).
bool gemmT(CudaContext &ctx, const float *in, int64_t n, const float *w, int64_t rows,
           int64_t cols, float *out, std::string &error);

/// out[n, hidden] = down . (silu(gate . in) * (up . in)) with gate / up [width, hidden]
/// and down [hidden, width] float32 on the device; gateOut / upOut grow to n * width.
bool swigluFfn(CudaContext &ctx, const float *gate, const float *up, const float *down,
               int64_t hidden, int64_t width, const float *in, int64_t n, float *out,
               DeviceBuffer &gateOut, DeviceBuffer &upOut, std::string &error);

} // namespace switchyard::exec::cuda

#endif
