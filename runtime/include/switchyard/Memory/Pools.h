//===- Pools.h - the expert memory budget and its fixed-block pools -*- C++ -*-===//
//
// DynaExq §3.3: expert versions live in fixed-size blocks of disjoint pools
// (`pool_hi`, `pool_lo`) with constant-time free lists, and every block is reserved
// from one BudgetTracker first, so no allocation can exceed the device budget and
// none goes around it. The free lists and the budget are the pool's; where a block's
// bytes live is a BlockMemory's: host memory allocated on first use and reused after (the
// host store's emulated "device", named as an emulation in the README), or one fixed
// region allocated once - device memory (cudaMalloc) or pinned host memory
// (cudaHostAlloc) - sliced into blocks (switchyard/Memory/DeviceExperts.h).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_POOLS_H
#define SWITCHYARD_MEMORY_POOLS_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace switchyard::memory {

/// Reservations against the device budget (bytes). Thread-safe.
class BudgetTracker {
public:
  explicit BudgetTracker(int64_t budget) : limit(budget) {}
  /// Reserves `bytes` if they fit under the budget; false (nothing reserved) otherwise.
  bool tryReserve(int64_t bytes);
  void release(int64_t bytes);
  int64_t budget() const { return limit; }
  int64_t used() const { return inUse.load(); }
  int64_t peak() const { return highWater.load(); }

private:
  const int64_t limit;
  std::atomic<int64_t> inUse{0}, highWater{0};
};

/// Where the blocks of a pool live. block(b) is called first under the pool's lock
/// when b is allocated (a lazy memory makes it then), afterwards from any thread.
class BlockMemory {
public:
  virtual ~BlockMemory() = default;
  virtual const char *kind() const = 0; // "host", "device", "pinned host"
  /// The first byte of block `b` (64-byte aligned at least).
  virtual uint8_t *block(int32_t b) = 0;
};

/// Host memory, each block allocated on first use (64-byte aligned for the kernels).
class HostBlocks : public BlockMemory {
public:
  HostBlocks(size_t blockBytes, int64_t blocks);
  const char *kind() const override { return "host"; }
  uint8_t *block(int32_t b) override;

private:
  struct AlignedDelete {
    void operator()(uint8_t *p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  size_t size;
  std::vector<std::unique_ptr<uint8_t[], AlignedDelete>> storage;
};

/// One region allocated once by its owner, sliced into blocks `stride` bytes apart;
/// `release` (if any) frees it with the pool.
class RegionBlocks : public BlockMemory {
public:
  RegionBlocks(const char *kind, uint8_t *base, size_t stride,
               void (*release)(void *, void *), void *context)
      : what(kind), base(base), stride(stride), release(release), context(context) {}
  ~RegionBlocks() override {
    if (release)
      release(context, base);
  }
  const char *kind() const override { return what; }
  uint8_t *block(int32_t b) override { return base + size_t(b) * stride; }
  /// A block size rounded up to a stride that keeps every block 256-byte aligned.
  static size_t strideFor(size_t blockBytes) { return (blockBytes + 255) / 256 * 256; }

private:
  const char *what;
  uint8_t *base;
  size_t stride;
  void (*release)(void *, void *);
  void *context;
};

/// Fixed-size blocks, each holding one expert version; a free list of block ids.
/// allocate() reserves the block's bytes from the budget first. Thread-safe. The
/// memory is host memory allocated on first use unless another BlockMemory is given.
class BlockPool {
public:
  BlockPool(std::string name, size_t blockBytes, int64_t blocks, BudgetTracker &budget,
            std::unique_ptr<BlockMemory> memory = nullptr);
  const std::string &name() const { return poolName; }
  size_t blockBytes() const { return size; }
  const char *memoryKind() const { return memory->kind(); }
  /// A free block, or -1 when the pool is empty or the budget refuses it.
  int32_t allocate();
  void free(int32_t block);
  uint8_t *data(int32_t block) { return memory->block(block); }
  int64_t blocks() const { return static_cast<int64_t>(inUse.size()); }
  int64_t freeBlocks() const;
  bool allocated(int32_t block) const;

private:
  std::string poolName;
  size_t size;
  BudgetTracker &budget;
  std::unique_ptr<BlockMemory> memory;
  mutable std::mutex mutex;
  std::vector<int32_t> freeList;
  std::vector<uint8_t> inUse;
};

} // namespace switchyard::memory

#endif
