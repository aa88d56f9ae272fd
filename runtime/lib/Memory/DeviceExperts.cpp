//===- DeviceExperts.cpp - expert versions on a device, migrated on events ----===//
#include "switchyard/Memory/DeviceExperts.h"

#include <algorithm>
#include <limits>

namespace switchyard::memory {

struct DeviceExperts::Tier {
  Precision precision = Precision::High;
  VersionLayout layout;
  std::unique_ptr<BlockPool> pinned, device;
  std::vector<int32_t> hostBlock;   // [expert]: its image in `pinned`
  std::vector<int32_t> deviceBlock; // [expert]: its slot in `device`, -1: not resident
  // Per device slot.
  std::vector<Event> landedEvent, releasedEvent;
  std::vector<uint8_t> releasePending; // the next copy into the slot waits on releasedEvent
  std::vector<Stream> waitedBy;        // the stream that already waits on landedEvent
  std::vector<Stream> usedBy;          // the stream that acquired it since it landed
};

bool packedMatrix(const model::TensorView &view, PackedMatrix &out, std::string &error) {
  out = {};
  switch (view.dtype) {
  case model::DType::F32:
    out.type = PackedType::F32;
    break;
  case model::DType::F16:
    out.type = PackedType::F16;
    break;
  case model::DType::BF16:
    out.type = PackedType::BF16;
    break;
  case model::DType::Q8:
    out.type = PackedType::Q8;
    break;
  case model::DType::Q4:
    out.type = PackedType::Q4;
    break;
  default:
    error = view.name + " is " + view.dtypeText + ", which no kernel widens to float32";
    return false;
  }
  if (view.shape.size() != 2) {
    error =
        view.name + ": an expert matrix must have two dimensions, not " + view.shapeText();
    return false;
  }
  out.rows = view.shape[0];
  out.cols = view.shape[1];
  out.group = view.group;
  out.data = view.data;
  out.scales = view.scales;
  return true;
}

bool resolveExpert(DeviceBackend &backend, const DeviceExpert &expert,
                   float *const staging[3], const float *out[3], Stream s,
                   std::string &error) {
  for (int j = 0; j < 3; ++j) {
    PackedMatrix m;
    if (!packedMatrix(expert.views[j], m, error))
      return false;
    if (m.type == PackedType::F32) { // the GEMM's dtype already: read in place
      out[j] = reinterpret_cast<const float *>(m.data);
      continue;
    }
    if (!backend.dequantize(m, staging[j], s, error))
      return false;
    out[j] = staging[j];
  }
  return true;
}

DeviceExperts::DeviceExperts(DeviceBackend &backend, int64_t budget)
    : backend(backend), tracker(budget),
      pinnedTracker(std::numeric_limits<int64_t>::max() / 2) {}

DeviceExperts::~DeviceExperts() {
  std::string ignored;
  // Teardown only: the copies in flight finish before their memory goes.
  if (migration)
    backend.synchronize(migration, ignored);
  backend.synchronize(backend.computeStream(), ignored);
  for (auto &t : tiers) {
    for (Event e : t->landedEvent)
      if (e)
        backend.destroyEvent(e);
    for (Event e : t->releasedEvent)
      if (e)
        backend.destroyEvent(e);
  }
  tiers.clear(); // the pools give their regions back
  if (migration)
    backend.destroyStream(migration);
}

DeviceExperts::Tier *DeviceExperts::tier(Precision p) const {
  for (const auto &t : tiers)
    if (t->precision == p)
      return t.get();
  return nullptr;
}

namespace {
void freeDeviceRegion(void *backend, void *p) {
  static_cast<DeviceBackend *>(backend)->freeDevice(p);
}
void freePinnedRegion(void *backend, void *p) {
  static_cast<DeviceBackend *>(backend)->freePinned(p);
}
} // namespace

std::unique_ptr<DeviceExperts>
DeviceExperts::create(DeviceBackend &backend, const std::vector<exec::FfnWeights> &experts,
                      const DeviceExpertsOptions &options, std::string &error) {
  if (experts.empty()) {
    error = "device expert memory: no expert";
    return nullptr;
  }
  if (options.budgetBytes <= 0) {
    error = "device expert memory: the budget must be positive (got " +
            std::to_string(options.budgetBytes) + " bytes)";
    return nullptr;
  }
  if (options.precisions.empty()) {
    error = "device expert memory: no precision asked for";
    return nullptr;
  }
  std::unique_ptr<DeviceExperts> d(new DeviceExperts(backend, options.budgetBytes));
  d->count = static_cast<int64_t>(experts.size());
  for (Precision p : options.precisions) {
    if (d->tier(p))
      continue;
    auto t = std::make_unique<Tier>();
    t->precision = p;
    if (!layoutVersion(experts[0], p, options.group, t->layout, error))
      return nullptr;
    const size_t bytes = t->layout.bytes, stride = RegionBlocks::strideFor(bytes);
    const int64_t slots = std::min<int64_t>(d->count, options.budgetBytes / int64_t(bytes));
    if (slots == 0) {
      error = "device expert memory: a budget of " + std::to_string(options.budgetBytes) +
              " bytes cannot hold one " + precisionName(p) + " expert version (" +
              std::to_string(bytes) + " bytes)";
      return nullptr;
    }
    // The host tier: every expert's version, packed once into pinned memory.
    auto *pinned =
        static_cast<uint8_t *>(backend.allocatePinned(stride * size_t(d->count), error));
    if (!pinned) {
      error = "device expert memory: pinned host tier (" + std::string(precisionName(p)) +
              ", " + std::to_string(stride * size_t(d->count)) + " bytes): " + error;
      return nullptr;
    }
    t->pinned = std::make_unique<BlockPool>(
        std::string("pinned_") + precisionName(p), bytes, d->count, d->pinnedTracker,
        std::make_unique<RegionBlocks>("pinned host", pinned, stride, freePinnedRegion,
                                       &backend));
    auto *region =
        static_cast<uint8_t *>(backend.allocateDevice(stride * size_t(slots), error));
    if (!region) {
      error = "device expert memory: device pool (" + std::string(precisionName(p)) + ", " +
              std::to_string(slots) + " slots of " + std::to_string(stride) +
              " bytes): " + error;
      return nullptr;
    }
    t->device = std::make_unique<BlockPool>(
        std::string("device_") + precisionName(p), bytes, slots, d->tracker,
        std::make_unique<RegionBlocks>("device", region, stride, freeDeviceRegion,
                                       &backend));
    t->hostBlock.assign(size_t(d->count), -1);
    t->deviceBlock.assign(size_t(d->count), -1);
    for (int64_t e = 0; e < d->count; ++e) {
      VersionLayout mine;
      if (!layoutVersion(experts[size_t(e)], p, t->layout.group, mine, error))
        return nullptr;
      bool same = mine.bytes == bytes;
      for (int j = 0; j < 3; ++j)
        same = same && mine.parts[j].dtype == t->layout.parts[j].dtype &&
               mine.parts[j].shape == t->layout.parts[j].shape;
      if (!same) {
        error = "device expert memory: expert " + std::to_string(e) +
                " has another shape or dtype than expert 0";
        return nullptr;
      }
      const int32_t block = t->pinned->allocate();
      packVersion(experts[size_t(e)], t->layout, t->pinned->data(block));
      t->hostBlock[size_t(e)] = block;
    }
    t->landedEvent.assign(size_t(slots), nullptr);
    t->releasedEvent.assign(size_t(slots), nullptr);
    for (int64_t s = 0; s < slots; ++s)
      if (!(t->landedEvent[size_t(s)] = backend.createEvent(error)) ||
          !(t->releasedEvent[size_t(s)] = backend.createEvent(error))) {
        d->tiers.push_back(std::move(t)); // the destructor frees what was made
        return nullptr;
      }
    t->releasePending.assign(size_t(slots), 0);
    t->waitedBy.assign(size_t(slots), nullptr);
    t->usedBy.assign(size_t(slots), nullptr);
    d->tiers.push_back(std::move(t));
  }
  if (!(d->migration = backend.createStream(error))) {
    error = "device expert memory: the migration stream: " + error;
    return nullptr;
  }
  return d;
}

const VersionLayout &DeviceExperts::layout(Precision p) const { return tier(p)->layout; }

const BlockPool &DeviceExperts::devicePool(Precision p) const { return *tier(p)->device; }

const uint8_t *DeviceExperts::hostImage(int64_t e, Precision p) const {
  Tier *t = tier(p);
  return t->pinned->data(t->hostBlock[size_t(e)]);
}

bool DeviceExperts::resident(int64_t e, Precision p) const {
  Tier *t = tier(p);
  return t && e >= 0 && e < count && t->deviceBlock[size_t(e)] >= 0;
}

bool DeviceExperts::checkExpert(int64_t e, Precision p, Tier *&t,
                                std::string &error) const {
  t = tier(p);
  if (!t) {
    error = std::string("device expert memory: no ") + precisionName(p) +
            " versions were packed";
    return false;
  }
  if (e < 0 || e >= count) {
    error = "device expert memory: expert " + std::to_string(e) + " of " +
            std::to_string(count);
    return false;
  }
  return true;
}

bool DeviceExperts::migrate(int64_t e, Precision p, std::string &error) {
  Tier *t;
  if (!checkExpert(e, p, t, error))
    return false;
  if (t->deviceBlock[size_t(e)] >= 0)
    return true;
  const int32_t slot = t->device->allocate();
  if (slot < 0) {
    ++stats.refused;
    error = "device expert memory: no free " + std::string(precisionName(p)) +
            " slot for expert " + std::to_string(e) + " (budget " +
            std::to_string(tracker.used()) + " of " + std::to_string(tracker.budget()) +
            " bytes in use, " + std::to_string(t->device->freeBlocks()) +
            " free slots): evict first";
    return false;
  }
  const size_t s = size_t(slot);
  if (t->releasePending[s]) { // the last version in this slot may still be read
    if (!backend.wait(migration, t->releasedEvent[s], error)) {
      t->device->free(slot);
      return false;
    }
    ++stats.waits;
    t->releasePending[s] = 0;
  }
  if (!backend.copyAsync(t->device->data(slot), hostImage(e, p), t->layout.bytes,
                         CopyKind::HostToDevice, migration, error) ||
      !backend.record(t->landedEvent[s], migration, error)) {
    t->device->free(slot);
    return false;
  }
  t->waitedBy[s] = nullptr;
  t->usedBy[s] = nullptr;
  t->deviceBlock[size_t(e)] = slot;
  ++stats.migrations;
  stats.bytesMigrated += int64_t(t->layout.bytes);
  return true;
}

bool DeviceExperts::acquire(int64_t e, Precision p, Stream compute, DeviceExpert &out,
                            std::string &error) {
  Tier *t;
  if (!checkExpert(e, p, t, error))
    return false;
  const int32_t slot = t->deviceBlock[size_t(e)];
  if (slot < 0) {
    error = "device expert memory: expert " + std::to_string(e) + " has no " +
            precisionName(p) + " version on the device (migrate it first)";
    return false;
  }
  const size_t s = size_t(slot);
  if (t->waitedBy[s] != compute) {
    if (!backend.wait(compute, t->landedEvent[s], error))
      return false;
    ++stats.waits;
    t->waitedBy[s] = compute;
  }
  t->usedBy[s] = compute;
  out.expert = e;
  out.precision = p;
  out.slot = slot;
  out.image = t->device->data(slot);
  bindVersion(out.image, t->layout, out.views);
  return true;
}

bool DeviceExperts::evict(int64_t e, Precision p, Stream compute, std::string &error) {
  Tier *t;
  if (!checkExpert(e, p, t, error))
    return false;
  const int32_t slot = t->deviceBlock[size_t(e)];
  if (slot < 0)
    return true;
  const size_t s = size_t(slot);
  if (t->usedBy[s]) { // a kernel may still read it: the next copy into the slot waits
    if (!backend.record(t->releasedEvent[s], compute ? compute : t->usedBy[s], error))
      return false;
    t->releasePending[s] = 1;
  }
  t->deviceBlock[size_t(e)] = -1;
  t->device->free(slot);
  ++stats.evictions;
  return true;
}

bool DeviceExperts::landed(int64_t e, Precision p, bool &out, std::string &error) {
  Tier *t;
  if (!checkExpert(e, p, t, error))
    return false;
  const int32_t slot = t->deviceBlock[size_t(e)];
  if (slot < 0) {
    error = "device expert memory: expert " + std::to_string(e) + " is not migrating";
    return false;
  }
  error.clear();
  out = backend.done(t->landedEvent[size_t(slot)], error);
  return error.empty();
}

} // namespace switchyard::memory
