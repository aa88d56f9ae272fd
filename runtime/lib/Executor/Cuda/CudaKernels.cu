//===- CudaKernels.cu - the executor's few elementwise GPU kernels ---------===//
#include "CudaKernels.h"

namespace switchyard::exec::cuda {

namespace {

constexpr int kBlock = 256;

unsigned blocksFor(int64_t count) {
  return static_cast<unsigned>((count + kBlock - 1) / kBlock);
}

__global__ void gatherRowsKernel(const float *x, const int32_t *slots, int64_t rows,
                                 int64_t k, int64_t width, float *out) {
  int64_t r = blockIdx.x;
  if (r >= rows)
    return;
  const float *from = x + (slots[r] / k) * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    out[r * width + c] = from[c];
}

__global__ void siluMulKernel(float *gate, const float *up, int64_t count) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) {
    float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void combineKernel(const float *rows, const int32_t *rowOfSlot,
                              const float *weights, int64_t k, int64_t width, float *y) {
  int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float sum = y[t * width + c];
    for (int64_t j = 0; j < k; ++j) {
      int32_t r = rowOfSlot[t * k + j];
      if (r >= 0)
        sum += weights[t * k + j] * rows[int64_t(r) * width + c];
    }
    y[t * width + c] = sum;
  }
}

__global__ void sigmoidGateKernel(const float *x, const float *gate, int64_t width,
                                  float *y) {
  __shared__ float partial[kBlock];
  int64_t t = blockIdx.x;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    sum += x[t * width + c] * gate[c];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  float scale = 1.0f / (1.0f + expf(-partial[0]));
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    y[t * width + c] *= scale;
}

} // namespace

cudaError_t gatherRows(const float *x, const int32_t *slots, int64_t rows, int64_t k,
                       int64_t width, float *out, cudaStream_t stream) {
  if (rows > 0)
    gatherRowsKernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, slots, rows, k,
                                                                         width, out);
  return cudaGetLastError();
}

cudaError_t siluMul(float *gate, const float *up, int64_t count, cudaStream_t stream) {
  if (count > 0)
    siluMulKernel<<<blocksFor(count), kBlock, 0, stream>>>(gate, up, count);
  return cudaGetLastError();
}

cudaError_t combine(const float *rows, const int32_t *rowOfSlot, const float *weights,
                    int64_t tokens, int64_t k, int64_t width, float *y,
                    cudaStream_t stream) {
  if (tokens > 0)
    combineKernel<<<static_cast<unsigned>(tokens), kBlock, 0, stream>>>(
        rows, rowOfSlot, weights, k, width, y);
  return cudaGetLastError();
}

cudaError_t scaleBySigmoidGate(const float *x, const float *gate, int64_t tokens,
                               int64_t width, float *y, cudaStream_t stream) {
  if (tokens > 0)
    sigmoidGateKernel<<<static_cast<unsigned>(tokens), kBlock, 0, stream>>>(x, gate, width,
                                                                            y);
  return cudaGetLastError();
}

} // namespace switchyard::exec::cuda
