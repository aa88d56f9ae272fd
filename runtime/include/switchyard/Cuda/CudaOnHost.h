//===- CudaOnHost.h - the CUDA C++ of a policy run on the CPU ------*- C++ -*-===//
//
// What KernelPrelude.h adds when the generated NAME.cu is compiled as plain C++
// (-DSWITCHYARD_CUDA_ON_HOST, C++20): how the tests check the emitted code on a CPU.
// Included once per NAME.cu, never on its own.
//
// The launch on a CPU: switchyard_host_launch(grid, block) before the kernel call is
// the <<<grid, block>>> of the launcher (NAME_launch.cpp's kernel table; NAME.json
// kernels[].block), and a kernel built for a block size (gpu.known_block_size, the PTX
// .maxntid) refuses any other. `block` threads (a multiple of the warp size 32) run the
// kernel body with their own threadIdx: __syncthreads is a barrier of the block, __syncwarp
// one of the thread's 32-thread warp, a shuffle an exchange through the warp's slots across
// a warp barrier; atomics are atomic. The grid's blocks run one after another, a valid
// schedule of independent CTAs, except in a kernel with grid barriers (syGridSync, a
// cooperative launch): there all blocks' threads run together and wait for each other
// there. A block's threads are fibers of one OS thread, or real threads with
// -DSWITCHYARD_HOST_THREADS (see below).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CUDA_CUDAONHOST_H
#define SWITCHYARD_CUDA_CUDAONHOST_H

#include <stdint.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
// (few headers: every test compiles a NAME.cu, and <atomic>, <thread> or <vector>
// would double the time; atomics are the compiler's __atomic builtins)
#ifdef SWITCHYARD_HOST_THREADS
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
#else
#include <sys/mman.h>
#include <ucontext.h>
#endif
#define __global__
#define __device__
// A block's threads run as fibers by default: one OS thread switches between them
// whenever one waits at a barrier (__syncthreads, __syncwarp, a shuffle), in order
// 0, 1, ..., so a barrier costs one switch per thread instead of waking 256 OS
// threads. -DSWITCHYARD_HOST_THREADS makes them real threads with real barriers: what
// ThreadSanitizer needs to see a race (test/gpu/test_cuda_races.py).
#ifdef SWITCHYARD_HOST_THREADS
#define SY_THREAD_LOCAL thread_local
#else
#define SY_THREAD_LOCAL
#endif
struct SyDim {
  unsigned x;
};
// Fibers share these; the scheduler sets threadIdx (and syMe) when it switches.
static SY_THREAD_LOCAL SyDim threadIdx = {0};
static SY_THREAD_LOCAL SyDim blockDim = {1};
static SY_THREAD_LOCAL SyDim blockIdx = {0};
static SY_THREAD_LOCAL SyDim gridDim = {1};
static unsigned syGridX = 0, syBlockX = 0;
extern "C" void switchyard_host_launch(unsigned grid, unsigned block) {
  syGridX = grid;
  syBlockX = block;
}
// What one thread of the launch did, for the static budgets of the kernel design
// (test/gpu/test_kernel_budgets.py): each counter's maximum over the launch's threads
// (CTA barriers: over its CTAs) is read and cleared by switchyard_host_counters.
enum SyCounter : int {
  kSyCtaBarriers,  // __syncthreads
  kSyWarpBarriers, // __syncwarp
  kSyShuffles,     // warp shuffles
  kSyGlobalOps,    // loads, stores and atomics on global memory (kernel buffers)
  kSySharedOps,    // loads and stores on block-shared memory
  kSyFences,       // __threadfence
  kSyAtomics,      // atomics (also counted in kSyGlobalOps)
  kSyGridBarriers, // syGridSync
  kSyCounters
};
// One emulated thread's own state: its counters and how many shuffles it has done.
struct SyThreadState {
  int64_t count[kSyCounters];
  unsigned shuffles;
};
static SY_THREAD_LOCAL SyThreadState *syMe = nullptr;
static inline void syCountOp(int counter) { ++syMe->count[counter]; }
static int64_t syMaxCount[kSyCounters];
static inline void syRecordThread() {
  for (int c = 0; c < kSyCounters; ++c) {
    int64_t seen = __atomic_load_n(&syMaxCount[c], __ATOMIC_SEQ_CST);
    while (syMe->count[c] > seen &&
           !__atomic_compare_exchange_n(&syMaxCount[c], &seen, syMe->count[c], true,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
  }
}
// Copies each counter's maximum into out[0, n) (n <= kSyCounters) and clears them;
// returns kSyCounters.
extern "C" int switchyard_host_counters(int64_t *out, int n) {
  for (int c = 0; c < kSyCounters; ++c) {
    if (c < n)
      out[c] = syMaxCount[c];
    syMaxCount[c] = 0;
  }
  return kSyCounters;
}
static inline void __threadfence() {
  syCountOp(kSyFences);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

#ifdef SWITCHYARD_HOST_THREADS
using SyBarrier = std::barrier<>;
#else
// The fibers of the running block. Each has its own stack (with a guard page below
// it: an overflow faults rather than corrupting the next fiber's stack).
struct SyFiber {
  ucontext_t context;
  SyThreadState state;
  bool done;
};
struct SyFibers {
  static constexpr size_t kStack = 256 << 10, kGuard = 4096;
  SyFiber *fibers = nullptr; // `capacity` of them
  unsigned capacity = 0;
  char *stacks = nullptr;
  size_t mapped = 0;
  ucontext_t scheduler;
  unsigned current = 0;
  uint64_t progress = 0; // arrivals at barriers and finished fibers, for deadlocks
  char *stack(unsigned i) { return stacks + i * (kStack + kGuard) + kGuard; }
  void reserve(unsigned n) { // n fibers and their stacks, kept for later launches
    if (n > capacity) {
      std::free(fibers);
      fibers = static_cast<SyFiber *>(std::calloc(n, sizeof(SyFiber)));
      if (!fibers) {
        std::fprintf(stderr, "CUDA-on-host: no memory for %u threads\n", n);
        std::abort();
      }
      capacity = n;
    }
    if (n * (kStack + kGuard) <= mapped)
      return;
    if (stacks)
      munmap(stacks, mapped);
    mapped = n * (kStack + kGuard);
    void *m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "CUDA-on-host: cannot map the stacks of %u threads\n", n);
      std::abort();
    }
    stacks = static_cast<char *>(m);
    for (unsigned i = 0; i < n; ++i)
      mprotect(stack(i) - kGuard, kGuard, PROT_NONE);
  }
  // Gives back the stacks beyond one block's (1024 threads): each guard page is a
  // mapping of its own, and a process has a limited number (vm.max_map_count), shared
  // by every library that emulates a cooperative launch.
  void trim() {
    if (mapped <= 1024 * (kStack + kGuard))
      return;
    munmap(stacks, mapped);
    stacks = nullptr;
    mapped = 0;
  }
};
static SyFibers syFibers;
// The running fiber waits: back to the scheduler, which runs the next one.
static inline void syYield() {
  SyFiber &me = syFibers.fibers[syFibers.current];
  swapcontext(&me.context, &syFibers.scheduler);
}
struct SyBarrier {
  SyBarrier() = default;
  explicit SyBarrier(unsigned expected) : expected(expected) {}
  void arrive_and_wait() {
    ++syFibers.progress;
    uint64_t seen = generation;
    if (++arrived == expected) {
      arrived = 0;
      ++generation;
      return;
    }
    while (generation == seen)
      syYield();
  }
  unsigned expected = 0, arrived = 0;
  uint64_t generation = 0;
};
#endif

// The running thread's block barrier and warps (its block's: in a cooperative launch
// the blocks run together), and the grid's barrier (a cooperative launch only).
static SY_THREAD_LOCAL SyBarrier *syBarrier = nullptr;
static SyBarrier *syGridBarrier = nullptr;
static inline void __syncthreads() {
  syCountOp(kSyCtaBarriers);
  syBarrier->arrive_and_wait();
}
struct SyWarp {
  SyBarrier bar{32};
  uint64_t slot[2][32]; // shuffles alternate between the two
};
// (a barrier is back at its start after each complete round, so the warps serve
// every block and launch that runs its blocks one after another)
static SyWarp syWarps[1024 / 32];
static SY_THREAD_LOCAL SyWarp *syBlockWarps = syWarps;
static inline SyWarp &syMyWarp() { return syBlockWarps[threadIdx.x / 32]; }
static inline void __syncwarp(unsigned = 0xffffffffu) {
  syCountOp(kSyWarpBarriers);
  syMyWarp().bar.arrive_and_wait();
}
// The lanes of a warp run the same shuffles (a converged warp): a lane writes the slots
// of shuffle n + 2 only after the barrier of shuffle n + 1, which every lane reaches
// after reading shuffle n's, so one barrier per shuffle suffices.
template <typename T> static T syShuffle(T v, unsigned srcLane) {
  syCountOp(kSyShuffles);
  SyWarp &w = syMyWarp();
  uint64_t *slot = w.slot[syMe->shuffles++ % 2];
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  slot[threadIdx.x % 32] = bits;
  w.bar.arrive_and_wait();
  bits = slot[srcLane % 32];
  T r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
template <typename T> static T __shfl_xor_sync(unsigned, T v, int laneMask, int = 32) {
  return syShuffle(v, (threadIdx.x % 32) ^ (unsigned)laneMask);
}
template <typename T> static T __shfl_sync(unsigned, T v, int srcLane, int = 32) {
  return syShuffle(v, (unsigned)srcLane);
}
// moe.grid_barrier: every thread of every block of a cooperative launch.
static inline void syGridSync() {
  syCountOp(kSyGridBarriers);
  if (!syGridBarrier) {
    std::fprintf(stderr, "CUDA-on-host: a grid barrier in a kernel that was not launched "
                         "cooperatively\n");
    std::abort();
  }
  syGridBarrier->arrive_and_wait();
}
static inline int32_t atomicAdd(int32_t *p, int32_t v) {
  syCountOp(kSyAtomics); // (its syAt counted the global access)
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline float __int_as_float(int32_t i) {
  float f;
  __builtin_memcpy(&f, &i, 4);
  return f;
}
#ifdef SWITCHYARD_HOST_THREADS
// The grid's blocks, one after another, on one set of `n` threads (made once per
// launch, not per block): each thread runs its part of block 0, waits for the whole
// block to finish, then block 1, ...
template <typename F> static void syRunBlocks(unsigned grid, unsigned n, F body) {
  std::barrier<> bar(n), blockDone(n);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      syBarrier = &bar;
      syBlockWarps = syWarps;
      threadIdx.x = i;
      blockDim.x = n;
      gridDim.x = grid;
      SyThreadState state;
      syMe = &state;
      for (unsigned block = 0; block < grid; ++block) {
        blockIdx.x = block;
        state = SyThreadState{};
        body();
        syRecordThread();
        blockDone.arrive_and_wait();
      }
    });
  for (auto &t : threads)
    t.join();
}
// A cooperative launch: every block's `n` threads at once, each block with its own
// barrier and warps, all of them with the grid's barrier.
template <typename F> static void syRunCooperative(unsigned grid, unsigned n, F body) {
  std::vector<std::unique_ptr<std::barrier<>>> blocks;
  for (unsigned b = 0; b < grid; ++b)
    blocks.push_back(std::make_unique<std::barrier<>>(n));
  std::vector<SyWarp> warps(grid * (n / 32));
  std::barrier<> all(grid * n);
  syGridBarrier = &all;
  std::vector<std::thread> threads;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned i = 0; i < n; ++i)
      threads.emplace_back([&, b, i] {
        threadIdx.x = i;
        blockIdx.x = b;
        blockDim.x = n;
        gridDim.x = grid;
        syBarrier = blocks[b].get();
        syBlockWarps = &warps[b * (n / 32)];
        SyThreadState state{};
        syMe = &state;
        body();
        syRecordThread();
      });
  for (auto &t : threads)
    t.join();
  syGridBarrier = nullptr;
}
#else
template <typename F> static void syFiberMain(unsigned lo, unsigned hi) {
  uintptr_t bodyAddress = (uintptr_t)hi << 32 | lo;
  (*reinterpret_cast<F *>(bodyAddress))();
  syRecordThread();
  syFibers.fibers[syFibers.current].done = true;
  ++syFibers.progress;
}
// Runs fibers [0, n) (each made by makeFiber before) until all have finished, in
// passes; `visit(k)` is the k-th fiber of a pass and prepares the thread's state.
template <typename Visit> static void syScheduleFibers(unsigned n, Visit visit) {
  SyFibers &f = syFibers;
  unsigned live = n;
  uint64_t progressAtPass = ~0ull;
  while (live) {
    // A whole pass over the waiting threads with no arrival and no finish: they
    // wait at barriers not all of them reach (a barrier in divergent code).
    if (f.progress == progressAtPass) {
      std::fprintf(stderr,
                   "CUDA-on-host: block %u deadlocked: its threads wait at "
                   "barriers the others do not reach\n",
                   blockIdx.x);
      std::abort();
    }
    progressAtPass = f.progress;
    live = 0;
    for (unsigned k = 0; k < n; ++k) {
      unsigned i = visit(k);
      if (f.fibers[i].done)
        continue;
      f.current = i;
      syMe = &f.fibers[i].state;
      swapcontext(&f.scheduler, &f.fibers[i].context);
      live += !f.fibers[i].done;
    }
  }
}
template <typename F> static void syMakeFiber(unsigned i, uintptr_t bodyAddress) {
  SyFibers &f = syFibers;
  SyFiber &fiber = f.fibers[i];
  fiber = SyFiber{};
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = f.stack(i);
  fiber.context.uc_stack.ss_size = SyFibers::kStack;
  fiber.context.uc_link = &f.scheduler;
  makecontext(&fiber.context, (void (*)())syFiberMain<F>, 2, (unsigned)bodyAddress,
              (unsigned)(bodyAddress >> 32));
}
static unsigned syLaunches = 0;
// The grid's blocks one after another; a block's `n` threads as fibers, each run
// until it waits, in turn (0 to n - 1, or n - 1 to 0), until all have finished.
template <typename F> static void syRunBlocks(unsigned grid, unsigned n, F body) {
  syFibers.reserve(n);
  SyBarrier bar(n);
  syBarrier = &bar;
  syBlockWarps = syWarps;
  blockDim.x = n;
  gridDim.x = grid;
  uintptr_t bodyAddress = reinterpret_cast<uintptr_t>(&body);
  ++syLaunches;
  for (unsigned block = 0; block < grid; ++block) {
    blockIdx.x = block;
    bar = SyBarrier(n);
    for (unsigned i = 0; i < n; ++i)
      syMakeFiber<F>(i, bodyAddress);
    // Every other block (and launch) runs its threads last to first: a thread reading
    // what another writes with no barrier between sees the stale value in one of the
    // two orders, and the outputs differ from the host's.
    bool reverse = (syLaunches + block) % 2;
    syScheduleFibers(n, [&](unsigned k) {
      unsigned i = reverse ? n - 1 - k : k;
      threadIdx.x = i;
      return i;
    });
  }
}
// A cooperative launch: every block's `n` threads as fibers together (block b's thread
// i is fiber b * n + i), each block with its own barrier and warps, all of them with
// the grid's barrier; every other block runs its threads last to first.
template <typename F> static void syRunCooperative(unsigned grid, unsigned n, F body) {
  unsigned total = grid * n, warpsPerBlock = n / 32;
  syFibers.reserve(total);
  SyBarrier *blocks = new SyBarrier[grid];
  SyWarp *warps = new SyWarp[grid * warpsPerBlock];
  for (unsigned b = 0; b < grid; ++b)
    blocks[b] = SyBarrier(n);
  SyBarrier all(total);
  syGridBarrier = &all;
  blockDim.x = n;
  gridDim.x = grid;
  uintptr_t bodyAddress = reinterpret_cast<uintptr_t>(&body);
  ++syLaunches;
  for (unsigned i = 0; i < total; ++i)
    syMakeFiber<F>(i, bodyAddress);
  syScheduleFibers(total, [&](unsigned k) {
    unsigned b = k / n, t = k % n;
    if ((syLaunches + b) % 2)
      t = n - 1 - t;
    blockIdx.x = b;
    threadIdx.x = t;
    syBarrier = &blocks[b];
    syBlockWarps = &warps[b * warpsPerBlock];
    return b * n + t;
  });
  syGridBarrier = nullptr;
  syBlockWarps = syWarps;
  delete[] blocks;
  delete[] warps;
  syFibers.trim();
}
#endif
// Block-shared memory (a kernel's __shared__ arrays): 48 KiB per block, CUDA's static
// limit; each block of a cooperative launch has its own, the blocks of any other launch
// (one after another) share the first.
static constexpr size_t kSySharedPerBlock = 48 << 10;
static char *sySharedArena = nullptr;
static unsigned sySharedBlocks = 0;
static bool sySharedPerBlock = false;
static inline void syReserveShared(unsigned blocks) {
  if (blocks <= sySharedBlocks)
    return;
  std::free(sySharedArena);
  sySharedArena = static_cast<char *>(std::calloc(blocks, kSySharedPerBlock));
  if (!sySharedArena) {
    std::fprintf(stderr, "CUDA-on-host: no memory for the shared memory of %u blocks\n",
                 blocks);
    std::abort();
  }
  sySharedBlocks = blocks;
}
static inline void *syBlockShared(size_t offset) {
  return sySharedArena + (sySharedPerBlock ? blockIdx.x : 0) * kSySharedPerBlock + offset;
}
// `kernel` built for `knownBlock`-thread blocks (0: any block size); `cooperative`: it
// has grid barriers, so all its blocks run together.
template <typename F>
static void syRunGrid(const char *kernel, unsigned knownBlock, bool cooperative, F body) {
  if (syGridX == 0 || syBlockX == 0 || syBlockX % 32 != 0 || syBlockX > 1024 ||
      (knownBlock != 0 && syBlockX != knownBlock)) {
    std::fprintf(stderr,
                 "%s launched with <<<%u, %u>>>: call switchyard_host_launch(grid, "
                 "block) first, with grid >= 1 and block %u%s\n",
                 kernel, syGridX, syBlockX, knownBlock,
                 knownBlock ? " (the kernel's block size)" : "");
    if (knownBlock == 0)
      std::fprintf(stderr, "(block: a multiple of 32 in [32, 1024])\n");
    std::abort();
  }
  syReserveShared(cooperative ? syGridX : 1);
  sySharedPerBlock = cooperative;
  if (cooperative)
    syRunCooperative(syGridX, syBlockX, body);
  else
    syRunBlocks(syGridX, syBlockX, body);
}
// A launch of a kernel without grid barriers (hand-written kernels: bench/gpu_baselines).
template <typename F>
static void syRunGrid(const char *kernel, unsigned knownBlock, F body) {
  syRunGrid(kernel, knownBlock, false, body);
}

#endif
