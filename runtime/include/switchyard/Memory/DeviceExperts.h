//===- DeviceExperts.h - expert versions on a device, migrated on events -*- C++ -*-===//
//
// The device path of expert memory. Every expert's version at each precision asked for
// (the checkpoint's f32 / bf16 / f16, int8, int4 with scales: Quantize.h) is packed
// once into PINNED host memory - the host tier, one pool per precision, so that copies
// are asynchronous - and migrated into DEVICE pools: per precision one fixed region
// allocated once (DeviceBackend::allocateDevice), sliced into slots handed out by the
// host pools' own BlockPool logic (free list, one BudgetTracker for all device pools)
// over a RegionBlocks memory. A pool holds min(experts, budget / version bytes) slots:
// the regions may together exceed the budget (each could take all of it), the slots in
// use never do.
//
// Ordering, with no host synchronisation in the steady state:
//   migrate   the copy runs on the migration stream (cudaMemcpyAsync), then the slot's
//             LANDED event is recorded there;
//   acquire   the compute stream waits on that event (cudaStreamWaitEvent) before the
//             work queued after it, once per landing and stream;
//   evict     the slot's RELEASED event is recorded on the compute stream that used the
//             version (after the work queued so far) and the slot is freed; the next
//             migration into that slot makes the migration stream wait on it first, so
//             a copy never overwrites a version a kernel still reads.
// One thread drives an instance (the step loop); the backend may be a GPU's or a fake.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_DEVICEEXPERTS_H
#define SWITCHYARD_MEMORY_DEVICEEXPERTS_H

#include "switchyard/Memory/DeviceBackend.h"
#include "switchyard/Memory/Pools.h"
#include "switchyard/Memory/Quantize.h"

namespace switchyard::memory {

struct DeviceExpertsOptions {
  int64_t budgetBytes = 0; // device bytes the versions in the device pools may take
  std::vector<Precision> precisions{Precision::High, Precision::Int8, Precision::Int4};
  int64_t group = 0; // int4 group (0: automatic)
};

/// A version resident on the device: its image and views of it (device pointers; the
/// views' names, dtypes, shapes and scales as bindVersion makes them).
struct DeviceExpert {
  int64_t expert = -1;
  Precision precision = Precision::High;
  int32_t slot = -1;
  const uint8_t *image = nullptr;
  model::TensorView views[3]; // gate, up, down
};

struct DeviceCounters {
  int64_t migrations = 0, evictions = 0, bytesMigrated = 0;
  int64_t refused = 0; // migrations the budget or a full pool said no to
  int64_t waits = 0;   // stream waits issued (compute on landed, migration on released)
};

/// The packed-matrix description of a view (any memory); false for dtypes it has none.
bool packedMatrix(const model::TensorView &view, PackedMatrix &out, std::string &error);

/// The float32 gate, up, down of a resident version for the GEMMs, on the device:
/// F32 parts in place, every other part dequantised on `s` into staging[j] (device
/// memory of at least the part's element count in floats).
bool resolveExpert(DeviceBackend &backend, const DeviceExpert &expert,
                   float *const staging[3], const float *out[3], Stream s,
                   std::string &error);

class DeviceExperts {
public:
  /// Packs `experts` (the same shapes and dtypes each) into the pinned tier and makes
  /// the device pools; an error when the budget cannot hold one version at some
  /// precision, or the backend cannot allocate.
  static std::unique_ptr<DeviceExperts> create(DeviceBackend &backend,
                                               const std::vector<exec::FfnWeights> &experts,
                                               const DeviceExpertsOptions &options,
                                               std::string &error);
  ~DeviceExperts();
  DeviceExperts(const DeviceExperts &) = delete;
  DeviceExperts &operator=(const DeviceExperts &) = delete;

  int64_t experts() const { return count; }
  bool has(Precision p) const { return tier(p) != nullptr; }
  const VersionLayout &layout(Precision p) const;
  /// The pinned host image of (e, p) (what migrate copies).
  const uint8_t *hostImage(int64_t e, Precision p) const;
  const BlockPool &devicePool(Precision p) const;
  const BudgetTracker &budget() const { return tracker; }
  const DeviceCounters &counters() const { return stats; }
  Stream migrationStream() const { return migration; }
  bool resident(int64_t e, Precision p) const;

  /// Starts copying (e, p) host -> device (nothing if it is there); false with the
  /// reason when no slot is free under the budget (evict first) or the copy fails.
  bool migrate(int64_t e, Precision p, std::string &error);
  /// (e, p)'s device version for work queued on `compute` from now on (which waits for
  /// its migration on the device); false when it is not resident.
  bool acquire(int64_t e, Precision p, Stream compute, DeviceExpert &out,
               std::string &error);
  /// Frees (e, p)'s slot once the work queued on `compute` so far is done (on the
  /// device: the next copy into the slot waits for it).
  bool evict(int64_t e, Precision p, Stream compute, std::string &error);
  /// Whether (e, p)'s migration has landed, without waiting.
  bool landed(int64_t e, Precision p, bool &out, std::string &error);

private:
  struct Tier;
  explicit DeviceExperts(DeviceBackend &backend, int64_t budget);
  Tier *tier(Precision p) const;
  bool checkExpert(int64_t e, Precision p, Tier *&t, std::string &error) const;

  DeviceBackend &backend;
  int64_t count = 0;
  BudgetTracker tracker, pinnedTracker;
  std::vector<std::unique_ptr<Tier>> tiers;
  Stream migration = nullptr;
  DeviceCounters stats;
};

} // namespace switchyard::memory

#endif
