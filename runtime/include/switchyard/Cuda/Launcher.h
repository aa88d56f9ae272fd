//===- Launcher.h - the fixed part of every policy's GPU launcher -*- C++ -*-===//
//
// moe-compile writes, per router, NAME_launch.cpp with only what differs between
// routers: the kernel table (the PTX, each kernel's name and block size, the size
// classes with their grid rule and workspace) and the packing of the router's
// arguments. Everything else of a launch is here, compiled once into
// libSwitchyardLauncher.a and linked into each libNAME_gpu.so: loading the embedded PTX
// with cudart (cudaLibraryLoadData, never -lcuda), the device's compute-capability
// check, picking the size class, the grid of each class (with the per-device occupancy
// cache of the fill-the-GPU class) and the launches on the caller's stream. Nothing
// synchronises the host, so a launch is CUDA-graph capturable (one graph per class).
//
// Only the launcher libraries use this (they link cudart); the runtime does not. The
// declarations are hidden: every launcher library keeps its own copy and exports only
// its generated C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CUDA_LAUNCHER_H
#define SWITCHYARD_CUDA_LAUNCHER_H

#include <cuda_runtime_api.h>

#include <atomic>
#include <initializer_list>
#include <mutex>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#pragma GCC visibility push(hidden)

namespace switchyard::launch {

/// One kernel (a .entry of the PTX) and the threads per block it was built for.
struct Kernel {
  const char *name;
  unsigned block;
};

/// How many blocks a size class's launches have for a batch of T tokens.
enum class GridRule : int32_t {
  OneBlock,       // one CTA holds the whole batch
  TokensPerBlock, // ceil(T / tokensPerBlock) CTAs
  FillGpu,        // ceil(T / tokensPerBlock) CTAs (one warp per token), at most as many
                  // as the GPU holds at once (SMs x resident blocks per SM)
  Cooperative,    // ceil(T / tokensPerBlock) CTAs in one cooperative launch (its kernel
                  // has grid barriers), when the GPU holds them all at once; otherwise
                  // the class before it (the same batches in more launches) runs
};

/// A size class: the batches of minTokens tokens or more (up to the next class), its
/// kernels launched in order on the same arguments, and the workspace it needs.
struct SizeClass {
  const char *name; // "decode", "large", "grid", "cooperative" (NAME.json's size_classes)
  int64_t minTokens;
  GridRule grid;
  int64_t tokensPerBlock; // TokensPerBlock, FillGpu
  int32_t firstKernel, numKernels;
  int64_t workspacePerToken, workspaceFixed;
};

/// What a generated launcher declares about its router.
struct KernelTable {
  const char *router;
  const char *arch; // "sm_90": the PTX's target, the oldest GPU it runs on
  const char *ptx;
  const Kernel *kernels;
  int32_t numKernels;
  const SizeClass *classes; // by ascending minTokens; classes[0].minTokens == 0
  int32_t numClasses;
};

/// Launch statuses besides cudaError_t values (all negative, nothing launched).
enum : int32_t {
  kBadTokenCount = -1, // num_tokens outside [0, 2^31 - 1]
  // -(2 + j): knob j breaks a rule of the ops that use it (checked by the generated code)
};

/// Number of usable GPUs; 0 and a message (when `message` has room) without one.
int32_t gpuAvailable(char *message, size_t size);

/// The launch state of one router's table: its loaded kernels and occupancy cache.
/// One static instance per generated launcher; thread-safe.
class Launcher {
public:
  explicit constexpr Launcher(const KernelTable &table) : table(table) {}
  Launcher(const Launcher &) = delete;
  Launcher &operator=(const Launcher &) = delete;

  /// The class that runs a batch of `numTokens` tokens.
  const SizeClass &sizeClass(int64_t numTokens) const;
  /// Bytes of device workspace a launch for `numTokens` tokens needs.
  int64_t workspaceBytes(int64_t numTokens) const;
  /// Loads the kernels (once per process) and checks the token count: 0, the
  /// cudaError_t of the load, or kBadTokenCount.
  int32_t prepare(int64_t numTokens);
  /// Launches the class of `numTokens` on `stream`; `args` points at each kernel
  /// parameter in the order of the PTX entries. 0 or a cudaError_t.
  int32_t launch(int64_t numTokens, void **args, cudaStream_t stream);

private:
  static constexpr int kMaxDevices = 64;
  cudaError_t load();
  cudaError_t residentBlocks(const SizeClass &c, int &blocks);
  int32_t launchClass(const SizeClass &c, int64_t numTokens, void **args,
                      cudaStream_t stream);

  const KernelTable &table;
  std::once_flag once;
  cudaError_t loadStatus = cudaSuccess;
  cudaLibrary_t library = nullptr;
  cudaKernel_t *kernels = nullptr; // table.numKernels, never freed (as the library)
  // Blocks of the FillGpu or Cooperative class's kernel the GPU holds at once, per
  // device (a table has at most one such class); 0: not asked yet.
  std::atomic<int> resident[kMaxDevices] = {};
};

/// The kernel parameters of one launch as cudaLaunchKernel takes them (a pointer to
/// each value), packed in the PTX entry's order: scalars, and buffers as expanded memref
/// descriptors (allocated, aligned, offset, sizes, row-major strides). `Slots` is the
/// number of parameters; the generated code counts them.
template <int Slots> class Arguments {
public:
  template <typename T> void value(T v) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "a kernel parameter wider than 8 bytes");
    uint64_t *slot = next();
    if (slot)
      memcpy(slot, &v, sizeof v);
  }
  template <typename T> void buffer(const T *data, std::initializer_list<int64_t> sizes) {
    void *base = const_cast<void *>(static_cast<const void *>(data));
    value(base); // allocated
    value(base); // aligned
    value(int64_t(0));
    for (int64_t size : sizes)
      value(size);
    for (auto d = sizes.begin(); d != sizes.end(); ++d) {
      int64_t stride = 1;
      for (auto e = d + 1; e != sizes.end(); ++e)
        stride *= *e;
      value(stride);
    }
  }
  /// nullptr when more values were given than `Slots` (a generator bug, not launched).
  void **pointers() { return used <= Slots ? slotPointers : nullptr; }

private:
  uint64_t *next() {
    if (used >= Slots) {
      ++used;
      return nullptr;
    }
    slotPointers[used] = &slots[used];
    return &slots[used++];
  }
  uint64_t slots[Slots];
  void *slotPointers[Slots];
  int used = 0;
};

} // namespace switchyard::launch

#pragma GCC visibility pop

#endif
