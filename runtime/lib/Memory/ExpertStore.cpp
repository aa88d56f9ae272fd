//===- ExpertStore.cpp - versioned expert residency under a budget --------===//
#include "switchyard/Memory/ExpertStore.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace switchyard::memory {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kLoadAttempts = 8; // a demand load retried after injected failures
} // namespace

const char *residencyName(Residency r) {
  switch (r) {
  case Residency::ResidentHi:
    return "RESIDENT-HI";
  case Residency::ResidentLo:
    return "RESIDENT-LO";
  case Residency::Promoting:
    return "PROMOTING";
  case Residency::Demoting:
    return "DEMOTING";
  case Residency::Evicting:
    return "EVICTING";
  case Residency::Offloaded:
    return "OFFLOADED";
  case Residency::Loading:
    return "LOADING";
  }
  return "?";
}

/// One version moving host -> device: written by the worker, landed by the main thread.
struct ExpertStore::Copy {
  int64_t layer = 0, expert = 0;
  bool high = true;
  int32_t block = -1;
  uint8_t *destination = nullptr;
  // Set by the worker before `status` (release); read after it (acquire).
  double seconds = 0;
  std::atomic<int> status{0}; // 0 in flight, 1 landed, 2 failed
};

ExpertStore::ExpertStore(int64_t budgetBytes, const LinkOptions &link)
    : tracker(budgetBytes), link(link), faults(link.seed) {}

ExpertStore::~ExpertStore() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  if (worker.joinable())
    worker.join();
  // The layers outlive the store: their handles go back to the host versions.
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e)
      if (const exec::FfnWeights &host = hostHi[static_cast<size_t>(l * expertCount + e)];
          host.gate) // a store that failed to build may not have read them all
        layers[static_cast<size_t>(l)]->setExpertWeights(e, host);
}

std::unique_ptr<ExpertStore> ExpertStore::create(std::vector<exec::MoeLayer *> layers,
                                                 int64_t budgetBytes, Precision lo,
                                                 int64_t group, const LinkOptions &link,
                                                 std::string &error) {
  if (layers.empty()) {
    error = "expert store: no MoE layer";
    return nullptr;
  }
  if (budgetBytes <= 0) {
    error =
        "--budget " + std::to_string(budgetBytes) + ": the device budget must be positive";
    return nullptr;
  }
  std::unique_ptr<ExpertStore> s(new ExpertStore(budgetBytes, link));
  s->layers = std::move(layers);
  s->expertCount = s->layers.front()->modelConfig().experts;
  const int64_t count = s->layerCount() * s->expertCount;
  s->hostHi.resize(static_cast<size_t>(count));
  s->hostLo.resize(static_cast<size_t>(count));
  s->entries.resize(static_cast<size_t>(count));
  for (int64_t l = 0; l < s->layerCount(); ++l)
    for (int64_t e = 0; e < s->expertCount; ++e) {
      const size_t i = static_cast<size_t>(l * s->expertCount + e);
      s->hostHi[i] = s->layers[static_cast<size_t>(l)]->expertWeights(e);
      VersionLayout hi;
      if (!layoutVersion(s->hostHi[i], Precision::High, 0, hi, error) ||
          !makeVersion(s->hostHi[i], lo, group, s->hostLo[i], error))
        return nullptr;
      if (i == 0) {
        s->hiLayout = hi;
        s->loLayout = s->hostLo[i].layout;
      } else if (hi.bytes != s->hiLayout.bytes ||
                 s->hostLo[i].layout.bytes != s->loLayout.bytes) {
        error = "expert store: expert " + std::to_string(e) + " of MoE layer " +
                std::to_string(l) + " has another size or dtype than the first one";
        return nullptr;
      }
    }
  s->poolHi = std::make_unique<BlockPool>("pool_hi", s->hiLayout.bytes, count, s->tracker);
  s->poolLo = std::make_unique<BlockPool>("pool_lo", s->loLayout.bytes, count, s->tracker);
  s->worker = std::thread([raw = s.get()] { raw->work(); });
  return s;
}

bool ExpertStore::placeAll(Precision precision, std::string &error) {
  const bool high = precision == Precision::High;
  BlockPool &pool = high ? *poolHi : *poolLo;
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e) {
      Entry &x = entry(l, e);
      DeviceVersion &v = high ? x.hi : x.lo;
      v.block = pool.allocate();
      if (v.block < 0) {
        error = "--budget " + std::to_string(tracker.budget()) + " bytes holds " +
                std::to_string(l * expertCount + e) + " of the " +
                std::to_string(layerCount() * expertCount) + " " +
                precisionName(precision) + " expert versions (" +
                std::to_string(pool.blockBytes()) + " bytes each)";
        return false;
      }
      const size_t i = static_cast<size_t>(l * expertCount + e);
      if (high)
        packVersion(hostHi[i], hiLayout, pool.data(v.block));
      else
        std::memcpy(pool.data(v.block), hostLo[i].bytes.data(), loLayout.bytes);
      bindVersion(pool.data(v.block), high ? hiLayout : loLayout, v.views);
      x.handleOnHi = high;
      x.handleOnLo = !high;
      x.state = high ? Residency::ResidentHi : Residency::ResidentLo;
      pointHandle(l, e);
    }
  return true;
}

void ExpertStore::placeNone() {
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e) {
      Entry &x = entry(l, e);
      x.state = Residency::Offloaded;
      x.handleOnHi = x.handleOnLo = false;
      pointHandle(l, e);
    }
}

void ExpertStore::pointHandle(int64_t l, int64_t e) {
  Entry &x = entry(l, e);
  const DeviceVersion *v = x.handleOnHi ? &x.hi : x.handleOnLo ? &x.lo : nullptr;
  layers[static_cast<size_t>(l)]->setExpertWeights(
      e,
      v ? exec::FfnWeights{&v->views[0], &v->views[1], &v->views[2]} : exec::FfnWeights{});
}

bool ExpertStore::resident(int64_t l, int64_t e) const {
  const Entry &x = entry(l, e);
  return x.handleOnHi || x.handleOnLo;
}

bool ExpertStore::activePrecision(int64_t l, int64_t e, Precision &out) const {
  const Entry &x = entry(l, e);
  if (!x.handleOnHi && !x.handleOnLo)
    return false;
  out = x.handleOnHi ? Precision::High : loLayout.precision;
  return true;
}

void ExpertStore::requestPromotion(int64_t l, int64_t e) {
  Entry &x = entry(l, e);
  std::pair<int64_t, int64_t> key{l, e};
  if (x.state != Residency::ResidentLo ||
      std::find(pendingPromotions.begin(), pendingPromotions.end(), key) !=
          pendingPromotions.end())
    return;
  pendingDemotions.erase(std::remove(pendingDemotions.begin(), pendingDemotions.end(), key),
                         pendingDemotions.end());
  pendingPromotions.push_back(key);
}

void ExpertStore::requestDemotion(int64_t l, int64_t e) {
  std::pair<int64_t, int64_t> key{l, e};
  pendingPromotions.erase(
      std::remove(pendingPromotions.begin(), pendingPromotions.end(), key),
      pendingPromotions.end());
  Residency s = entry(l, e).state;
  if ((s == Residency::ResidentHi || s == Residency::Promoting) &&
      std::find(pendingDemotions.begin(), pendingDemotions.end(), key) ==
          pendingDemotions.end())
    pendingDemotions.push_back(key);
}

bool ExpertStore::startCopy(int64_t l, int64_t e, bool high, bool first) {
  Entry &x = entry(l, e);
  BlockPool &pool = high ? *poolHi : *poolLo;
  DeviceVersion &v = high ? x.hi : x.lo;
  v.block = pool.allocate();
  if (v.block < 0)
    return false;
  auto copy = std::make_shared<Copy>();
  copy->layer = l;
  copy->expert = e;
  copy->high = high;
  copy->block = v.block;
  copy->destination = pool.data(v.block);
  x.copy = copy;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (first)
      queue.push_front(copy);
    else
      queue.push_back(copy);
  }
  changed.notify_all();
  return true;
}

bool ExpertStore::requestLoad(int64_t l, int64_t e, bool demand) {
  Entry &x = entry(l, e);
  if (x.state == Residency::Loading)
    x.dropOnLanding = false; // wanted again
  if (x.state != Residency::Offloaded)
    return true; // resident or on its way
  if (!startCopy(l, e, true, demand))
    return false;
  x.state = Residency::Loading;
  return true;
}

void ExpertStore::evict(int64_t l, int64_t e) {
  Entry &x = entry(l, e);
  if (x.state == Residency::Loading) { // in flight: its block goes when it lands
    x.dropOnLanding = true;
    return;
  }
  if (x.state != Residency::ResidentHi || x.lo.block >= 0)
    return; // only a loaded expert (offloading) is evicted this way
  x.state = Residency::Evicting;
  x.handleOnHi = false;
  pointHandle(l, e); // first the handle, then the memory
  freeVersion(x.hi, *poolHi);
  x.state = Residency::Offloaded;
  ++stats.evictions;
}

void ExpertStore::freeVersion(DeviceVersion &v, BlockPool &pool) {
  if (v.block < 0)
    return;
  pool.free(v.block);
  v = {};
}

bool ExpertStore::land(int64_t l, int64_t e) {
  Entry &x = entry(l, e);
  std::shared_ptr<Copy> copy = std::move(x.copy);
  stats.copySeconds += copy->seconds;
  if (copy->status.load(std::memory_order_acquire) == 2) { // the handle never saw it
    ++stats.failedCopies;
    x.dropOnLanding = false;
    freeVersion(copy->high ? x.hi : x.lo, copy->high ? *poolHi : *poolLo);
    x.state = x.state == Residency::Loading ? Residency::Offloaded : Residency::ResidentLo;
    return false;
  }
  DeviceVersion &v = copy->high ? x.hi : x.lo;
  stats.bytesCopied += static_cast<int64_t>(copy->high ? hiLayout.bytes : loLayout.bytes);
  if (x.dropOnLanding) { // evicted while in flight: never published
    x.dropOnLanding = false;
    freeVersion(v, *poolHi);
    x.state = Residency::Offloaded;
    ++stats.evictions;
    return false;
  }
  bindVersion(copy->destination, copy->high ? hiLayout : loLayout, v.views);
  // Publish: the handle moves to the complete new version.
  if (x.state == Residency::Loading)
    ++stats.loads;
  else
    ++stats.promotions;
  x.state = Residency::ResidentHi;
  x.handleOnHi = true;
  x.handleOnLo = false;
  pointHandle(l, e);
  return true;
}

void ExpertStore::advance() {
  // 1. Publish what has landed.
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e) {
      Entry &x = entry(l, e);
      if (x.copy && x.copy->status.load(std::memory_order_acquire) != 0)
        land(l, e);
    }
  // 2. Demotions first: they give back budget. The handle moves to the resident low
  //    version, then the high block is reclaimed. A promotion still in flight is
  //    demoted once it lands.
  std::deque<std::pair<int64_t, int64_t>> later;
  for (auto [l, e] : pendingDemotions) {
    Entry &x = entry(l, e);
    if (x.state == Residency::Promoting) {
      later.push_back({l, e});
      continue;
    }
    if (x.state != Residency::ResidentHi || x.lo.block < 0)
      continue;
    x.state = Residency::Demoting;
    x.handleOnHi = false;
    x.handleOnLo = true;
    pointHandle(l, e);
    x.state = Residency::Evicting;
    freeVersion(x.hi, *poolHi);
    x.state = Residency::ResidentLo;
    ++stats.demotions;
  }
  pendingDemotions = std::move(later);
  // 3. Admit promotions while the budget reserves their blocks (backpressure: the rest
  //    wait, in order, and the layers keep running on the low versions).
  while (!pendingPromotions.empty()) {
    auto [l, e] = pendingPromotions.front();
    Entry &x = entry(l, e);
    if (x.state != Residency::ResidentLo) {
      pendingPromotions.pop_front();
      continue;
    }
    if (!startCopy(l, e, true, false)) {
      ++stats.deferredPromotions;
      break;
    }
    x.state = Residency::Promoting;
    ++stats.admittedPromotions;
    pendingPromotions.pop_front();
  }
}

void ExpertStore::settle(int64_t l, int64_t e) {
  Entry &x = entry(l, e);
  if (!x.copy)
    return;
  std::shared_ptr<Copy> copy = x.copy;
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return copy->status.load(std::memory_order_acquire) != 0; });
  }
  land(l, e);
}

void ExpertStore::settleDropped() {
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e)
      if (entry(l, e).copy && entry(l, e).dropOnLanding)
        settle(l, e);
}

bool ExpertStore::waitResident(int64_t l, int64_t e, std::string &error) {
  Entry &x = entry(l, e);
  if (x.handleOnHi || x.handleOnLo)
    return true;
  const auto start = Clock::now();
  for (int attempt = 0; attempt < kLoadAttempts; ++attempt) {
    x.dropOnLanding = false; // wanted now, whatever was decided before
    if (x.state == Residency::Offloaded && !requestLoad(l, e, true)) {
      error = "expert " + std::to_string(e) + " of MoE layer " + std::to_string(l) +
              ": no free block under the budget for a demand load (evict first)";
      return false;
    }
    std::shared_ptr<Copy> copy = x.copy;
    const bool waited = copy->status.load(std::memory_order_acquire) == 0;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return copy->status.load(std::memory_order_acquire) != 0; });
    }
    if (land(l, e)) {
      if (waited || attempt > 0) { // a stall: the layer waited for the link
        ++stats.stalls;
        stats.stallSeconds += std::chrono::duration<double>(Clock::now() - start).count();
      }
      return true;
    }
  }
  error = "expert " + std::to_string(e) + " of MoE layer " + std::to_string(l) +
          ": the copy to the device failed " + std::to_string(kLoadAttempts) + " times";
  return false;
}

void ExpertStore::work() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (stopping)
      return;
    std::shared_ptr<Copy> copy = queue.front();
    queue.pop_front();
    const double delay = link.maxDelaySeconds * unit(faults);
    const bool fail = unit(faults) < link.failureRate;
    lock.unlock();
    // The emulated link: the copy, then the rest of bytes / bandwidth.
    const auto start = Clock::now();
    const size_t i = static_cast<size_t>(copy->layer * expertCount + copy->expert);
    const size_t bytes = copy->high ? hiLayout.bytes : loLayout.bytes;
    if (fail) // a torn copy: garbage that must never be published
      std::memset(copy->destination, 0xff, bytes / 2);
    else if (copy->high)
      packVersion(hostHi[i], hiLayout, copy->destination);
    else
      std::memcpy(copy->destination, hostLo[i].bytes.data(), bytes);
    const double wire = link.bytesPerSecond > 0 ? double(bytes) / link.bytesPerSecond : 0.0;
    std::this_thread::sleep_until(start + std::chrono::duration<double>(wire + delay));
    copy->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    lock.lock();
    copy->status.store(fail ? 2 : 1, std::memory_order_release);
    changed.notify_all();
  }
}

bool ExpertStore::check(std::string &error) const {
  int64_t hiBlocks = 0, loBlocks = 0;
  std::vector<uint8_t> seenHi(static_cast<size_t>(poolHi->blocks()), 0),
      seenLo(static_cast<size_t>(poolLo->blocks()), 0);
  for (int64_t l = 0; l < layerCount(); ++l)
    for (int64_t e = 0; e < expertCount; ++e) {
      const Entry &x = entry(l, e);
      const std::string where = "expert " + std::to_string(e) + " of MoE layer " +
                                std::to_string(l) + " (" + residencyName(x.state) + "): ";
      for (auto [v, seen, count] :
           {std::tuple{&x.hi, &seenHi, &hiBlocks}, std::tuple{&x.lo, &seenLo, &loBlocks}})
        if (v->block >= 0) {
          if ((*seen)[static_cast<size_t>(v->block)]++) {
            error = where + "block " + std::to_string(v->block) + " has two owners";
            return false;
          }
          ++*count;
        }
      // The handle resolves to a complete version of this expert, or to nothing.
      const exec::FfnWeights &handle = layers[static_cast<size_t>(l)]->expertWeights(e);
      const DeviceVersion *want = x.handleOnHi ? &x.hi : x.handleOnLo ? &x.lo : nullptr;
      if (!want) {
        if (handle.gate ||
            (x.state != Residency::Offloaded && x.state != Residency::Loading)) {
          error = where + "no version, but the handle resolves";
          return false;
        }
        continue;
      }
      if (handle.gate != &want->views[0] || want->block < 0) {
        error = where + "the handle does not resolve to its published version";
        return false;
      }
      if (x.copy && x.copy->high == x.handleOnHi) {
        error = where + "the handle resolves to a version still being copied";
        return false;
      }
      // Complete: its bytes are exactly the host version's.
      const size_t i = static_cast<size_t>(l * expertCount + e);
      bool same = true;
      if (x.handleOnHi) {
        const model::TensorView *host[3] = {hostHi[i].gate, hostHi[i].up, hostHi[i].down};
        for (int j = 0; j < 3 && same; ++j)
          same = std::memcmp(want->views[j].data, host[j]->data, host[j]->bytes) == 0;
      } else {
        same =
            std::memcmp(want->views[0].data, hostLo[i].bytes.data(), loLayout.bytes) == 0;
      }
      if (!same) {
        error = where + "the handle resolves to an incomplete or foreign version";
        return false;
      }
    }
  if (hiBlocks != poolHi->blocks() - poolHi->freeBlocks() ||
      loBlocks != poolLo->blocks() - poolLo->freeBlocks()) {
    error = "a pool block is allocated but owned by no version";
    return false;
  }
  const int64_t used = hiBlocks * hiBytes() + loBlocks * loBytes();
  if (used != tracker.used() || used > tracker.budget()) {
    error = "budget: " + std::to_string(used) + " bytes in blocks, " +
            std::to_string(tracker.used()) + " reserved, budget " +
            std::to_string(tracker.budget());
    return false;
  }
  return true;
}

} // namespace switchyard::memory
