//===- DequantKernel.cu - expert matrices widened to float32 on the GPU -----===//
#include "DequantKernel.h"

namespace switchyard::exec::cuda {

namespace {

constexpr int kBlock = 256;

// A grid-stride loop: one launch of at most kMaxBlocks CTAs covers any matrix.
constexpr int64_t kMaxBlocks = 65535;

__global__ void dequantizeKernel(memory::PackedMatrix m, float *out) {
  const int64_t count = m.rows * m.cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = memory::dequantAt(m, i);
}

} // namespace

cudaError_t dequantize(const memory::PackedMatrix &m, float *out, cudaStream_t stream) {
  const int64_t count = m.rows * m.cols;
  if (count <= 0)
    return cudaSuccess;
  if ((m.type == memory::PackedType::Q8 || m.type == memory::PackedType::Q4) && !m.scales)
    return cudaErrorInvalidValue;
  if (m.type == memory::PackedType::Q4 && (m.group <= 0 || m.cols % m.group != 0))
    return cudaErrorInvalidValue;
  const int64_t blocks = std::min<int64_t>((count + kBlock - 1) / kBlock, kMaxBlocks);
  dequantizeKernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(m, out);
  return cudaGetLastError();
}

} // namespace switchyard::exec::cuda
