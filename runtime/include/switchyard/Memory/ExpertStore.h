//===- ExpertStore.h - versioned expert residency under a budget -*- C++ -*-===//
//
// DynaExq's Versioned Expert Residency (§3.2-3.4), and the device side of ExpertFlow's
// offloading. Per (layer, expert) an ENTRY owns the expert's versions: in host memory
// the high-precision one (the checkpoint's bytes) and a low-precision one packed at
// start (int8 / int4, switchyard/Memory/Quantize.h); on the device, copies in the
// fixed-block pools `pool_hi` / `pool_lo`, every block reserved from one BudgetTracker.
// The entry's HANDLE is the layer's expert slot (MoeLayer::expertWeights), which the
// FFN resolves to the active version: it always points to a complete device version,
// or to nothing while the expert is offloaded (a use must wait for its load).
//
// Transitions never block the forward pass: a migration worker thread copies a version
// host -> device over an emulated link throttled to a bandwidth (on a GPU: a migration
// stream and cudaMemcpyAsync), records completion, and only advance() - called at a step
// boundary, when no layer runs - publishes it (switches the handle) and then evicts the
// version no handle points to any more. A demand load (offloading) is published as
// soon as it lands: the handle pointed to nothing, so nothing was reading it.
//
// Invariants (check()): every handle resolves to a complete version of its own expert
// or to nothing while offloaded; every allocated block belongs to exactly one version;
// the budget is never exceeded (the tracker refuses). Copies fail or stall when told to
// (LinkOptions' fault injection); a failed copy frees its block and leaves the handle
// on the version it had.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_EXPERTSTORE_H
#define SWITCHYARD_MEMORY_EXPERTSTORE_H

#include "switchyard/Memory/Pools.h"
#include "switchyard/Memory/Quantize.h"

#include <condition_variable>
#include <deque>
#include <random>
#include <thread>

namespace switchyard::memory {

enum class Residency {
  ResidentHi, // the high-precision version is on the device; the handle points to it
  ResidentLo, // only the low-precision version; the handle points to it
  Promoting,  // the high version is being copied; the handle stays on the low one
  Demoting,   // the handle moves to the low version at the next publication
  Evicting,   // the handle has moved; the old version's block is being reclaimed
  Offloaded,  // no device version (offloading); the handle points to nothing
  Loading,    // a load is in flight (offloading); the handle points to nothing
};
const char *residencyName(Residency r);

/// The emulated host -> device link and its injected faults.
struct LinkOptions {
  double bytesPerSecond = 25e9; // PCIe 4.0 x16, effective; 0: unthrottled
  double failureRate = 0;       // each copy fails with this probability
  double maxDelaySeconds = 0;   // each copy is delayed by up to this much more
  uint64_t seed = 1;
};

struct StoreCounters {
  int64_t promotions = 0, demotions = 0, loads = 0, evictions = 0;
  int64_t failedCopies = 0, deferredPromotions = 0; // deferred: the budget said no
  int64_t admittedPromotions = 0;                   // copies started (they land later)
  int64_t bytesCopied = 0;
  double copySeconds = 0;  // the link's busy time
  double stallSeconds = 0; // time a layer waited for a demand load
  int64_t stalls = 0;
};

class ExpertStore {
public:
  /// The host store for `layers` (their experts' weights as loaded become the
  /// high-precision versions); low versions packed now at `lo` (int4 groups of `group`,
  /// 0: automatic). `budgetBytes` caps the device pools.
  static std::unique_ptr<ExpertStore> create(std::vector<exec::MoeLayer *> layers,
                                             int64_t budgetBytes, Precision lo,
                                             int64_t group, const LinkOptions &link,
                                             std::string &error);
  ~ExpertStore();

  int64_t layerCount() const { return static_cast<int64_t>(layers.size()); }
  int64_t experts() const { return expertCount; }
  int64_t hiBytes() const { return static_cast<int64_t>(hiLayout.bytes); }
  int64_t loBytes() const { return static_cast<int64_t>(loLayout.bytes); }
  Precision lowPrecision() const { return loLayout.precision; }

  /// Initial residency, before the first step (copies not counted): every expert at
  /// `precision`, or (Offloaded) none. An error when the budget cannot hold them.
  bool placeAll(Precision precision, std::string &error);
  void placeNone();

  /// DynaExq: promote (l, e) to its high version / demote it to its low one. Queued;
  /// a promotion is admitted only when the budget reserves its block (else it waits).
  void requestPromotion(int64_t layer, int64_t expert);
  void requestDemotion(int64_t layer, int64_t expert);
  /// Offloading: starts loading (l, e)'s high version (a prefetch; `demand` puts it
  /// first); false when no block is free under the budget (evict first).
  bool requestLoad(int64_t layer, int64_t expert, bool demand = false);
  /// Offloading: drops (l, e)'s device version (now, between layers' uses; a load in
  /// flight is dropped when it lands).
  void evict(int64_t layer, int64_t expert);
  /// Offloading: returns when (l, e) is resident, loading it on demand first (a stall,
  /// counted); failed copies are retried a few times.
  bool waitResident(int64_t layer, int64_t expert, std::string &error);

  /// Waits for (l, e)'s copy in flight, if any, and lands it as advance() would (a load
  /// evicted in flight gives its block back). Not a stall: for making room.
  void settle(int64_t layer, int64_t expert);
  /// Lands every load evicted while in flight (any layer), giving their blocks back.
  void settleDropped();
  /// The step boundary: publishes every finished copy (switching handles), evicts the
  /// versions no handle points to, admits queued promotions.
  void advance();

  Residency state(int64_t layer, int64_t expert) const {
    return entry(layer, expert).state;
  }
  bool resident(int64_t layer, int64_t expert) const;
  /// The precision the handle resolves to (High for ResidentHi, ...); false: none.
  bool activePrecision(int64_t layer, int64_t expert, Precision &out) const;
  const StoreCounters &counters() const { return stats; }
  const BudgetTracker &budget() const { return tracker; }
  /// The invariants above; false with the first one broken.
  bool check(std::string &error) const;

private:
  struct Copy; // one version moving host -> device
  struct DeviceVersion {
    int32_t block = -1;
    model::TensorView views[3];
  };
  struct Entry {
    Residency state = Residency::Offloaded;
    DeviceVersion hi, lo;
    bool handleOnHi = false, handleOnLo = false;
    bool dropOnLanding = false; // a load evicted while in flight
    std::shared_ptr<Copy> copy; // in flight
  };
  ExpertStore(int64_t budgetBytes, const LinkOptions &link);
  Entry &entry(int64_t l, int64_t e) {
    return entries[static_cast<size_t>(l * expertCount + e)];
  }
  const Entry &entry(int64_t l, int64_t e) const {
    return entries[static_cast<size_t>(l * expertCount + e)];
  }
  bool startCopy(int64_t l, int64_t e, bool high, bool first);
  /// Binds a finished copy and points the handle at it; false if the copy failed.
  bool land(int64_t l, int64_t e);
  void pointHandle(int64_t l, int64_t e);
  void freeVersion(DeviceVersion &v, BlockPool &pool);
  void work();

  std::vector<exec::MoeLayer *> layers;
  int64_t expertCount = 0;
  std::vector<exec::FfnWeights> hostHi; // [l * E + e]: the checkpoint's views
  std::vector<VersionImage> hostLo;     // [l * E + e]: packed at start
  VersionLayout hiLayout, loLayout;
  BudgetTracker tracker;
  std::unique_ptr<BlockPool> poolHi, poolLo;
  std::vector<Entry> entries;
  std::deque<std::pair<int64_t, int64_t>> pendingPromotions, pendingDemotions;
  StoreCounters stats;
  LinkOptions link;
  // The migration worker.
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Copy>> queue;
  bool stopping = false;
  std::mt19937_64 faults;
  std::thread worker;
};

} // namespace switchyard::memory

#endif
