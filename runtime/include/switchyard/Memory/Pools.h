//===- Pools.h - the expert memory budget and its fixed-block pools -*- C++ -*-===//
//
// DynaExq §3.3: expert versions live in fixed-size blocks of disjoint pools
// (`pool_hi`, `pool_lo`) with constant-time free lists, and every block is reserved
// from one BudgetTracker first, so no allocation can exceed the device budget and
// none goes around it. On the host the "device" is emulated: a block's memory is host
// memory allocated on first use and reused after (named as an emulation in the README).
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

/// Fixed-size blocks, each holding one expert version; a free list of block ids.
/// allocate() reserves the block's bytes from the budget first. Thread-safe.
class BlockPool {
public:
  BlockPool(std::string name, size_t blockBytes, int64_t blocks, BudgetTracker &budget);
  const std::string &name() const { return poolName; }
  size_t blockBytes() const { return size; }
  /// A free block, or -1 when the pool is empty or the budget refuses it.
  int32_t allocate();
  void free(int32_t block);
  uint8_t *data(int32_t block) { return storage[static_cast<size_t>(block)].get(); }
  int64_t blocks() const { return static_cast<int64_t>(storage.size()); }
  int64_t freeBlocks() const;

private:
  std::string poolName;
  size_t size;
  BudgetTracker &budget;
  mutable std::mutex mutex;
  struct AlignedDelete {
    void operator()(uint8_t *p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::vector<std::unique_ptr<uint8_t[], AlignedDelete>> storage; // allocated on first use
  std::vector<int32_t> freeList;
  std::vector<uint8_t> inUse;
};

} // namespace switchyard::memory

#endif
