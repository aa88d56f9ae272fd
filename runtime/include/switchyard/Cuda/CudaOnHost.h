//===- CudaOnHost.h - the CUDA C++ of a policy run on CPU threads -*- C++ -*-===//
//
// What KernelPrelude.h adds when the generated NAME.cu is compiled as plain C++
// (-DSWITCHYARD_CUDA_ON_HOST, C++20 for std::barrier and std::atomic_ref): how the
// tests check the emitted code on a CPU. Included once per NAME.cu, never on its own.
//
// The launch on a CPU: switchyard_host_launch(grid, block) before the kernel call is
// the <<<grid, block>>> of the launcher (NAME_launch.cpp's kernel table; NAME.json
// kernels[].block), and a kernel built for a block size (gpu.known_block_size, the PTX
// .maxntid) refuses any other. `block` threads (a multiple of the warp size 32) run the
// kernel body with their own threadIdx: __syncthreads is a barrier of the block, __syncwarp
// one of the thread's 32-thread warp, a shuffle an exchange through the warp's slots across
// a warp barrier; atomics are atomic. The grid's blocks run one after another, a valid
// schedule of independent CTAs.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CUDA_CUDAONHOST_H
#define SWITCHYARD_CUDA_CUDAONHOST_H

#include <stdint.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
struct SyDim {
  unsigned x;
};
static thread_local SyDim threadIdx = {0};
static thread_local SyDim blockDim = {1};
static thread_local SyDim blockIdx = {0};
static thread_local SyDim gridDim = {1};
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
  kSyCounters
};
static thread_local int64_t syCount[kSyCounters];
static std::atomic<int64_t> syMaxCount[kSyCounters];
static inline void syRecordThread() {
  for (int c = 0; c < kSyCounters; ++c) {
    int64_t seen = syMaxCount[c].load();
    while (syCount[c] > seen && !syMaxCount[c].compare_exchange_weak(seen, syCount[c])) {
    }
  }
}
// Copies each counter's maximum into out[0, n) (n <= kSyCounters) and clears them;
// returns kSyCounters.
extern "C" int switchyard_host_counters(int64_t *out, int n) {
  for (int c = 0; c < kSyCounters; ++c) {
    if (c < n)
      out[c] = syMaxCount[c].load();
    syMaxCount[c] = 0;
  }
  return kSyCounters;
}
static inline void __threadfence() {
  ++syCount[kSyFences];
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
static std::barrier<> *syBarrier = nullptr;
static inline void __syncthreads() {
  ++syCount[kSyCtaBarriers];
  syBarrier->arrive_and_wait();
}
struct SyWarp {
  std::barrier<> bar{32};
  uint64_t slot[2][32]; // shuffles alternate between the two
};
static std::vector<std::unique_ptr<SyWarp>> syWarps;
static inline SyWarp &syMyWarp() { return *syWarps[threadIdx.x / 32]; }
static inline void __syncwarp(unsigned = 0xffffffffu) {
  ++syCount[kSyWarpBarriers];
  syMyWarp().bar.arrive_and_wait();
}
// The lanes of a warp run the same shuffles (a converged warp): a lane writes the slots
// of shuffle n + 2 only after the barrier of shuffle n + 1, which every lane reaches
// after reading shuffle n's, so one barrier per shuffle suffices.
static thread_local unsigned syShuffles = 0;
template <typename T> static T syShuffle(T v, unsigned srcLane) {
  ++syCount[kSyShuffles];
  SyWarp &w = syMyWarp();
  uint64_t *slot = w.slot[syShuffles++ % 2];
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
static inline int32_t atomicAdd(int32_t *p, int32_t v) {
  ++syCount[kSyAtomics]; // (its syAt counted the global access)
  return std::atomic_ref<int32_t>(*p).fetch_add(v);
}
static inline float __int_as_float(int32_t i) {
  float f;
  __builtin_memcpy(&f, &i, 4);
  return f;
}
// The grid's blocks, one after another, on one set of `n` threads (made once per
// launch, not per block): each thread runs its part of block 0, waits for the whole
// block to finish, then block 1, ...
template <typename F> static void syRunBlocks(unsigned grid, unsigned n, F body) {
  std::barrier<> bar(n), blockDone(n);
  syBarrier = &bar;
  syWarps.clear();
  for (unsigned w = 0; w < n / 32; ++w)
    syWarps.push_back(std::make_unique<SyWarp>());
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      threadIdx.x = i;
      blockDim.x = n;
      gridDim.x = grid;
      for (unsigned block = 0; block < grid; ++block) {
        blockIdx.x = block;
        syShuffles = 0;
        for (int64_t &c : syCount)
          c = 0;
        body();
        syRecordThread();
        blockDone.arrive_and_wait();
      }
    });
  for (auto &t : threads)
    t.join();
}
// `kernel` built for `knownBlock`-thread blocks (0: any block size).
template <typename F>
static void syRunGrid(const char *kernel, unsigned knownBlock, F body) {
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
  syRunBlocks(syGridX, syBlockX, body);
}

#endif
