//===- Pools.cpp - the expert memory budget and its fixed-block pools -----===//
#include "switchyard/Memory/Pools.h"

#include <cassert>

namespace switchyard::memory {

bool BudgetTracker::tryReserve(int64_t bytes) {
  int64_t now = inUse.load();
  do {
    if (bytes < 0 || now + bytes > limit)
      return false;
  } while (!inUse.compare_exchange_weak(now, now + bytes));
  int64_t peakNow = highWater.load();
  while (now + bytes > peakNow && !highWater.compare_exchange_weak(peakNow, now + bytes)) {
  }
  return true;
}

void BudgetTracker::release(int64_t bytes) {
  [[maybe_unused]] int64_t before = inUse.fetch_sub(bytes);
  assert(before >= bytes && "released more than was reserved");
}

HostBlocks::HostBlocks(size_t blockBytes, int64_t blocks)
    : size(blockBytes), storage(static_cast<size_t>(blocks)) {}

uint8_t *HostBlocks::block(int32_t b) {
  auto &slot = storage[static_cast<size_t>(b)];
  if (!slot)
    slot.reset(static_cast<uint8_t *>(::operator new[](size, std::align_val_t(64))));
  return slot.get();
}

BlockPool::BlockPool(std::string name, size_t blockBytes, int64_t blocks,
                     BudgetTracker &budget, std::unique_ptr<BlockMemory> memory)
    : poolName(std::move(name)), size(blockBytes), budget(budget),
      memory(memory ? std::move(memory)
                    : std::make_unique<HostBlocks>(blockBytes, blocks)) {
  inUse.assign(static_cast<size_t>(blocks), 0);
  for (int64_t b = blocks - 1; b >= 0; --b)
    freeList.push_back(static_cast<int32_t>(b));
}

int32_t BlockPool::allocate() {
  std::lock_guard<std::mutex> lock(mutex);
  if (freeList.empty() || !budget.tryReserve(static_cast<int64_t>(size)))
    return -1;
  int32_t block = freeList.back();
  freeList.pop_back();
  inUse[static_cast<size_t>(block)] = 1;
  memory->block(block); // a lazy memory makes the block now, under the lock
  return block;
}

void BlockPool::free(int32_t block) {
  std::lock_guard<std::mutex> lock(mutex);
  assert(block >= 0 && block < blocks() && inUse[static_cast<size_t>(block)] &&
         "freeing a block that is not allocated");
  inUse[static_cast<size_t>(block)] = 0;
  freeList.push_back(block);
  budget.release(static_cast<int64_t>(size));
}

bool BlockPool::allocated(int32_t block) const {
  std::lock_guard<std::mutex> lock(mutex);
  return block >= 0 && block < blocks() && inUse[static_cast<size_t>(block)];
}

int64_t BlockPool::freeBlocks() const {
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<int64_t>(freeList.size());
}

} // namespace switchyard::memory
