//===- cudart_stub.cpp - a recording stand-in for cudart ------------------===//
//
// The cudart calls the fixed GPU launcher (switchyard/Cuda/Launcher.h) makes, answered
// without a GPU: a configurable device (count, compute capability, SMs, resident blocks
// per SM) and a record of every launch (kernel, grid, block, the first N parameter
// slots). test_launcher_stub.py links generated launchers against it as libcudart.so.
// With stub_emulate(library), a launch also RUNS: the kernel of the same name from the
// router's CUDA C++ compiled for the CPU (NAME.cu with -DSWITCHYARD_CUDA_ON_HOST, its
// KERNEL_params entry taking cudaLaunchKernel's parameter pointers) on CPU threads, with
// the launch's grid and block; "device memory" is then host memory.
//
//===----------------------------------------------------------------------===//
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

namespace {
struct Launch {
  std::string kernel;
  unsigned grid, block;
  bool cooperative;
  std::vector<uint64_t> args;
};
int devices = 1, ccMajor = 9, ccMinor = 0, sms = 4, perSm = 2, argSlots = 0;
int loads = 0, occupancyQueries = 0;
void *emulated = nullptr; // the kernels' CPU build (stub_emulate), or null
std::vector<std::string> kernels;
std::vector<Launch> launches;
} // namespace

extern "C" {
void stub_configure(int deviceCount, int major, int minor, int smCount, int blocksPerSm) {
  devices = deviceCount;
  ccMajor = major;
  ccMinor = minor;
  sms = smCount;
  perSm = blocksPerSm;
}
void stub_expect_args(int slots) { argSlots = slots; }
/// Runs every launch from now on with the kernels of the shared library at `path` (null:
/// record only); 0, or -1 when it does not load.
int stub_emulate(const char *path) {
  emulated = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  return path && !emulated ? -1 : 0;
}
void stub_clear() { launches.clear(); }
int stub_loads() { return loads; }
int stub_occupancy_queries() { return occupancyQueries; }
int stub_launch_count() { return (int)launches.size(); }
const char *stub_launch_kernel(int i) { return launches[i].kernel.c_str(); }
unsigned stub_launch_grid(int i) { return launches[i].grid; }
unsigned stub_launch_block(int i) { return launches[i].block; }
int stub_launch_cooperative(int i) { return launches[i].cooperative; }
uint64_t stub_launch_arg(int i, int slot) { return launches[i].args[slot]; }
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (devices == 0)
    return cudaErrorNoDevice;
  *count = devices;
  return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaErrorNoDevice ? "no CUDA-capable device is detected" : "stub error";
}

cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return devices ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int) {
  switch (attr) {
  case cudaDevAttrComputeCapabilityMajor:
    *value = ccMajor;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = ccMinor;
    return cudaSuccess;
  case cudaDevAttrMultiProcessorCount:
    *value = sms;
    return cudaSuccess;
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code, cudaJitOption *,
                                void **, unsigned int, cudaLibraryOption *, void **,
                                unsigned int) {
  ++loads;
  if (!code || !strstr(static_cast<const char *>(code), ".visible .entry"))
    return cudaErrorInvalidPtx;
  *library = reinterpret_cast<cudaLibrary_t>(uintptr_t(1));
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t, const char *name) {
  kernels.push_back(name);
  *kernel = reinterpret_cast<cudaKernel_t>(uintptr_t(kernels.size()));
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *, int,
                                                          size_t) {
  ++occupancyQueries;
  *blocks = perSm;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                void **args) {
  size_t index = reinterpret_cast<uintptr_t>(func) - 1;
  dim3 grid = config->gridDim, block = config->blockDim;
  if (index >= kernels.size() || grid.y != 1 || grid.z != 1 || block.y != 1 ||
      block.z != 1 || config->dynamicSmemBytes != 0)
    return cudaErrorInvalidValue;
  bool cooperative = false;
  for (unsigned a = 0; a < config->numAttrs; ++a) {
    if (config->attrs[a].id != cudaLaunchAttributeCooperative)
      return cudaErrorInvalidValue; // an attribute the launcher never sets
    cooperative = config->attrs[a].val.cooperative != 0;
  }
  // A cooperative launch larger than the GPU holds at once fails, as cudart's does.
  if (cooperative && grid.x > unsigned(sms * perSm))
    return cudaErrorCooperativeLaunchTooLarge;
  Launch launch{kernels[index], grid.x, block.x, cooperative,
                std::vector<uint64_t>(argSlots)};
  for (int slot = 0; slot < argSlots; ++slot)
    memcpy(&launch.args[slot], args[slot], sizeof(uint64_t)); // every slot is 8 bytes
  launches.push_back(launch);
  if (emulated) {
    auto geometry = reinterpret_cast<void (*)(unsigned, unsigned)>(
        dlsym(emulated, "switchyard_host_launch"));
    auto kernel = reinterpret_cast<void (*)(void **)>(
        dlsym(emulated, (kernels[index] + "_params").c_str()));
    if (!geometry || !kernel)
      return cudaErrorInvalidDeviceFunction;
    geometry(grid.x, block.x);
    kernel(args);
  }
  return cudaSuccess;
}
