//===- CudaContext.cpp - the CUDA layer's device context and GEMM path -------===//
#include "CudaContext.h"
#include "CudaKernels.h"

namespace switchyard::exec::cuda {

std::string cudaText(cudaError_t status) {
  return std::string(cudaGetErrorString(status)) + " (error " +
         std::to_string(int(status)) + ")";
}

cudaError_t DeviceBuffer::reserve(size_t need) {
  if (need <= bytes)
    return cudaSuccess;
  if (ptr)
    cudaFree(ptr);
  ptr = nullptr;
  bytes = 0;
  cudaError_t status = cudaMalloc(&ptr, need);
  if (status == cudaSuccess)
    bytes = need;
  return status;
}

bool gemmT(CudaContext &ctx, const float *in, int64_t n, const float *w, int64_t rows,
           int64_t cols, float *out, std::string &error) {
  // Row-major out[n, rows] = in[n, cols] . W[rows, cols]^T is column-major
  // out^T = W^T(cols x rows)^T . in^T: cuBLAS sees W as a cols x rows matrix.
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t status =
      cublasSgemm(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n), int(cols), &one, w,
                  int(cols), in, int(cols), &zero, out, int(rows));
  if (status != CUBLAS_STATUS_SUCCESS) {
    error = "cublasSgemm failed (status " + std::to_string(int(status)) + ")";
    return false;
  }
  return true;
}

bool swigluFfn(CudaContext &ctx, const float *gate, const float *up, const float *down,
               int64_t hidden, int64_t width, const float *in, int64_t n, float *out,
               DeviceBuffer &gateOut, DeviceBuffer &upOut, std::string &error) {
  cudaError_t status;
  if ((status = gateOut.reserve(size_t(n * width) * sizeof(float))) != cudaSuccess ||
      (status = upOut.reserve(size_t(n * width) * sizeof(float))) != cudaSuccess) {
    error = "the FFN's intermediate rows (" + std::to_string(n) + " x " +
            std::to_string(width) + "): " + cudaText(status);
    return false;
  }
  if (!gemmT(ctx, in, n, gate, width, hidden, gateOut.f32(), error) ||
      !gemmT(ctx, in, n, up, width, hidden, upOut.f32(), error))
    return false;
  if ((status = siluMul(gateOut.f32(), upOut.f32(), n * width, ctx.stream)) !=
      cudaSuccess) {
    error = "silu(gate) * up: " + cudaText(status);
    return false;
  }
  return gemmT(ctx, gateOut.f32(), n, down, hidden, width, out, error);
}

} // namespace switchyard::exec::cuda
