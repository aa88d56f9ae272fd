//===- Launcher.cpp - the fixed part of every policy's GPU launcher -------===//
//
// Compiled once into libSwitchyardLauncher.a (position independent, hidden) and linked
// into each generated libNAME_gpu.so with cudart; see switchyard/Cuda/Launcher.h.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Cuda/Launcher.h"

#include <stdio.h>
#include <stdlib.h>

namespace switchyard::launch {

int32_t gpuAvailable(char *message, size_t size) {
  int count = 0; // left unwritten by cudart without a driver
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0)
    return count;
  // 35 insufficient driver, 100 no device, 3 initialization, 34 stub library,
  // 999 unknown: all mean that this machine has no usable GPU.
  if (message && size)
    snprintf(message, size, "no usable GPU (cudaGetDeviceCount: %s, error %d)",
             cudaGetErrorString(status), (int)status);
  return 0;
}

const SizeClass &Launcher::sizeClass(int64_t numTokens) const {
  int32_t chosen = 0;
  for (int32_t c = 1; c < table.numClasses; ++c)
    if (numTokens >= table.classes[c].minTokens)
      chosen = c;
  return table.classes[chosen];
}

int64_t Launcher::workspaceBytes(int64_t numTokens) const {
  const SizeClass &c = sizeClass(numTokens);
  return numTokens * c.workspacePerToken + c.workspaceFixed;
}

/// The sm_XY of the table's arch as XY (0 when it is not of that form).
static int archNumber(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0)
    return 0;
  return atoi(arch + 3);
}

cudaError_t Launcher::load() {
  std::call_once(once, [this] {
    // The PTX of sm_XY runs on compute capability X.Y and later; on an older GPU the
    // load would fail in the JIT with a less telling status.
    int device = 0, major = 0, minor = 0;
    loadStatus = cudaGetDevice(&device);
    if (loadStatus == cudaSuccess)
      loadStatus =
          cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (loadStatus == cudaSuccess)
      loadStatus =
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (loadStatus == cudaSuccess && major * 10 + minor < archNumber(table.arch))
      loadStatus = cudaErrorNoKernelImageForDevice;
    if (loadStatus == cudaSuccess)
      loadStatus = cudaLibraryLoadData(&library, table.ptx, nullptr, nullptr, 0, nullptr,
                                       nullptr, 0);
    if (loadStatus != cudaSuccess)
      return;
    kernels = new cudaKernel_t[table.numKernels > 0 ? table.numKernels : 1];
    for (int32_t k = 0; k < table.numKernels && loadStatus == cudaSuccess; ++k)
      loadStatus = cudaLibraryGetKernel(&kernels[k], library, table.kernels[k].name);
  });
  return loadStatus;
}

int32_t Launcher::prepare(int64_t numTokens) {
  cudaError_t status = load();
  if (status != cudaSuccess)
    return (int32_t)status;
  if (numTokens < 0 || numTokens > 2147483647LL)
    return kBadTokenCount;
  return 0;
}

cudaError_t Launcher::residentBlocks(const SizeClass &c, int &blocks) {
  // Asked once per device: the SM count and the blocks of the class's first kernel an
  // SM holds at once.
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess)
    return status;
  blocks = device < kMaxDevices ? resident[device].load(std::memory_order_relaxed) : 0;
  if (blocks > 0)
    return cudaSuccess;
  int sms = 1, perSm = 1;
  const Kernel &kernel = table.kernels[c.firstKernel];
  if ((status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) !=
          cudaSuccess ||
      (status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
           &perSm, (const void *)kernels[c.firstKernel], (int)kernel.block, 0)) !=
          cudaSuccess)
    return status;
  blocks = sms * (perSm > 0 ? perSm : 1);
  if (device < kMaxDevices)
    resident[device].store(blocks, std::memory_order_relaxed);
  return cudaSuccess;
}

/// ceil(T / tokens per block): the grid of the per-CTA rules (before FillGpu's cap).
static int64_t ctasPerToken(const SizeClass &c, int64_t numTokens) {
  return c.tokensPerBlock > 0 ? (numTokens + c.tokensPerBlock - 1) / c.tokensPerBlock : 0;
}

int32_t Launcher::launch(int64_t numTokens, void **args, cudaStream_t stream) {
  cudaError_t status = load();
  if (status != cudaSuccess)
    return (int32_t)status;
  const SizeClass &c = sizeClass(numTokens);
  if (c.grid != GridRule::Cooperative)
    return launchClass(c, numTokens, args, stream);
  // The cooperative kernel when the GPU holds all its CTAs at once (a cooperative
  // launch of more fails), else the class before it: the same batches, more launches.
  int cap = 0;
  if (c.tokensPerBlock > 0 && (status = residentBlocks(c, cap)) != cudaSuccess)
    return (int32_t)status;
  if (ctasPerToken(c, numTokens) <= cap || &c == &table.classes[0])
    return launchClass(c, numTokens, args, stream);
  return launchClass((&c)[-1], numTokens, args, stream);
}

int32_t Launcher::launchClass(const SizeClass &c, int64_t numTokens, void **args,
                              cudaStream_t stream) {
  cudaError_t status = cudaSuccess;
  if (!args || c.numKernels < 1 || c.firstKernel < 0 ||
      c.firstKernel + c.numKernels > table.numKernels ||
      (c.grid != GridRule::OneBlock && c.tokensPerBlock < 1))
    return (int32_t)cudaErrorInvalidValue; // a malformed table or argument pack
  int64_t grid = c.grid == GridRule::OneBlock ? 1 : ctasPerToken(c, numTokens);
  if (c.grid == GridRule::FillGpu) {
    int cap = 1;
    if ((status = residentBlocks(c, cap)) != cudaSuccess)
      return (int32_t)status;
    grid = grid < cap ? grid : cap;
  }
  if (grid < 1)
    grid = 1;
  // The class's kernels in order on the same stream (a large batch: token stage +
  // batch partials, then set selection per CTA + routing; or both in one cooperative
  // kernel). A cooperative launch is captured into a CUDA graph like any other.
  for (int32_t k = c.firstKernel; k < c.firstKernel + c.numKernels; ++k) {
    cudaLaunchConfig_t config = {};
    cudaLaunchAttribute cooperative[1];
    config.gridDim = dim3((unsigned)grid);
    config.blockDim = dim3(table.kernels[k].block);
    config.stream = stream;
    if (c.grid == GridRule::Cooperative) {
      cooperative[0].id = cudaLaunchAttributeCooperative;
      cooperative[0].val.cooperative = 1;
      config.attrs = cooperative;
      config.numAttrs = 1;
    }
    status = cudaLaunchKernelExC(&config, (const void *)kernels[k], args);
    if (status != cudaSuccess)
      return (int32_t)status;
  }
  return 0;
}

} // namespace switchyard::launch
