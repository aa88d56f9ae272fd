//===- ExpertMemory.cpp - the executor's expert memory modes --------------===//
#include "switchyard/Memory/ExpertMemory.h"
#include "switchyard/Executor/BalanceRules.h"
#include "switchyard/Executor/HostKernels.h"
#include "switchyard/Runtime/Binding.h"

#include <algorithm>
#include <cmath>

namespace switchyard::memory {

namespace {
using Clock = std::chrono::steady_clock;

/// Sum over the tokens of softmax(x . W^T): the pre-gate mass of a layer whose router
/// weight is W [E, H], on hidden states x [T, H] (ExpertFlow §3.2.1).
std::vector<float> pregateMass(const float *x, int64_t tokens,
                               const std::vector<float> &gate, int64_t experts,
                               int64_t hidden) {
  std::vector<float> logits(static_cast<size_t>(tokens * experts)),
      mass(size_t(experts), 0.0f);
  if (tokens > 0)
    exec::matmulT(x, tokens, gate.data(), experts, hidden, logits.data());
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = logits.data() + t * experts;
    const float most = *std::max_element(row, row + experts);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e)
      sum += std::exp(double(row[e] - most));
    for (int64_t e = 0; e < experts; ++e)
      mass[size_t(e)] += float(std::exp(double(row[e] - most)) / sum);
  }
  return mass;
}
} // namespace

const char *memoryModeName(MemoryMode mode) {
  switch (mode) {
  case MemoryMode::Resident:
    return "resident";
  case MemoryMode::StaticLow:
    return "static-lo";
  case MemoryMode::DynaExq:
    return "dynaexq";
  case MemoryMode::Offload:
    return "offload";
  case MemoryMode::OnDemand:
    return "on-demand";
  }
  return "?";
}

bool parseMemoryMode(const std::string &text, MemoryMode &out) {
  for (MemoryMode m : {MemoryMode::Resident, MemoryMode::StaticLow, MemoryMode::DynaExq,
                       MemoryMode::Offload, MemoryMode::OnDemand})
    if (text == memoryModeName(m)) {
      out = m;
      return true;
    }
  return false;
}

ExpertMemory::~ExpertMemory() {
  for (exec::MoeLayer *layer : layers) {
    layer->setExpertsHook({});
    layer->setResidentExperts(nullptr);
  }
}

std::unique_ptr<ExpertMemory> ExpertMemory::create(const MemoryOptions &options,
                                                   const model::MoeConfig &config,
                                                   std::vector<exec::MoeLayer *> layers,
                                                   runtime::PolicyCache &cache,
                                                   std::string &error) {
  std::unique_ptr<ExpertMemory> m(new ExpertMemory);
  m->options = options;
  m->config = &config;
  m->layers = layers;
  m->experts = ExpertStore::create(layers, options.budgetBytes, options.low, options.group,
                                   options.link, error);
  if (!m->experts)
    return nullptr;
  ExpertStore &store = *m->experts;
  const int64_t L = store.layerCount(), E = store.experts();
  const std::string budget = std::to_string(options.budgetBytes);
  switch (options.mode) {
  case MemoryMode::Resident:
    if (!store.placeAll(Precision::High, error))
      return nullptr;
    break;
  case MemoryMode::StaticLow:
  case MemoryMode::DynaExq:
    if (!store.placeAll(options.low, error))
      return nullptr;
    if (options.mode == MemoryMode::DynaExq &&
        options.budgetBytes < L * E * store.loBytes() + L * store.hiBytes()) {
      error = "--budget " + budget + " bytes holds the " + std::to_string(L * E) + " " +
              precisionName(options.low) +
              " experts but not one high-precision expert per "
              "MoE layer besides: dynaexq needs at least " +
              std::to_string(L * E * store.loBytes() + L * store.hiBytes()) + " bytes";
      return nullptr;
    }
    break;
  case MemoryMode::Offload:
  case MemoryMode::OnDemand:
    m->capacity = std::min<int64_t>(E, options.budgetBytes / store.hiBytes() / L);
    if (m->capacity < 1) {
      error = "--budget " + budget + " holds " +
              std::to_string(options.budgetBytes / store.hiBytes()) +
              " high-precision experts (" + std::to_string(store.hiBytes()) +
              " bytes each): fewer than one per MoE layer (" + std::to_string(L) + ")";
      return nullptr;
    }
    store.placeNone();
    break;
  }
  // The mode's rule, its knobs by name: the budget model's from the store, then the
  // user's.
  std::vector<std::string> settings;
  if (options.mode == MemoryMode::DynaExq) {
    m->rule = exec::compileShipped(config, "dynaexq.mlir", "dynaexq", {}, cache, error);
    settings = {"budget_bytes=" + budget, "fixed_bytes=0",
                "hi_bytes=" + std::to_string(store.hiBytes()),
                "lo_bytes=" + std::to_string(store.loBytes()),
                "layers=" + std::to_string(L)};
  } else if (options.mode == MemoryMode::Offload) {
    // The default capacity (32) may exceed a small model's experts: the job's instead.
    m->rule = exec::compileShipped(config, "expertflow.mlir", "expertflow",
                                   {"--set", "capacity=" + std::to_string(m->capacity)},
                                   cache, error);
    const double bandwidth =
        options.link.bytesPerSecond > 0 ? options.link.bytesPerSecond : 1e12;
    settings = {"expert_bytes=" + std::to_string(store.hiBytes()),
                "bandwidth=" + std::to_string(bandwidth), "layers=" + std::to_string(L),
                "capacity=" + std::to_string(m->capacity)};
  } else if (!options.knobSettings.empty()) {
    error = "--memory-set: --memory " + std::string(memoryModeName(options.mode)) +
            " runs no rule (dynaexq and offload do)";
    return nullptr;
  }
  if (options.mode == MemoryMode::DynaExq || options.mode == MemoryMode::Offload) {
    if (!m->rule)
      return nullptr;
    settings.insert(settings.end(), options.knobSettings.begin(),
                    options.knobSettings.end());
    std::vector<uint8_t> knobs;
    if (!m->rule->packKnobs(settings, knobs, error)) { // checked now, not at the first call
      error = "--memory " + std::string(memoryModeName(options.mode)) + ": " + error;
      return nullptr;
    }
    m->ruleSettings = settings;
  }
  m->hotness.assign(size_t(L), std::vector<float>(size_t(E), 0.0f));
  m->counts.assign(size_t(L), std::vector<int32_t>(size_t(E), 0));
  m->lastUse.assign(size_t(L), std::vector<int32_t>(size_t(E), -1));
  m->resident.assign(size_t(L), std::vector<uint8_t>(size_t(E), 0));
  m->prefetched.assign(size_t(L), std::vector<uint8_t>(size_t(E), 0));
  m->lastUpdate = Clock::now();
  ExpertMemory *self = m.get();
  for (int64_t l = 0; l < L; ++l) {
    exec::MoeLayer::ExpertsHook hook;
    hook.routed = [self, l](int64_t, const float *x, int64_t tokens, const exec::Routing &r,
                            std::vector<int64_t> &pending, std::string &err) {
      return self->routed(l, r, pending, err) &&
             (self->options.mode != MemoryMode::Offload ||
              self->predictAhead(l, x, tokens, err));
    };
    hook.await = [self, l](int64_t, const std::vector<int64_t> &pending,
                           std::vector<int64_t> &ready, std::string &err) {
      return self->await(l, pending, ready, err);
    };
    layers[size_t(l)]->setExpertsHook(std::move(hook));
    if (m->capacity > 0) { // cache-aware routing reads the layer's resident set
      m->refreshResident(l);
      layers[size_t(l)]->setResidentExperts(&m->resident[size_t(l)]);
    }
  }
  return m;
}

void ExpertMemory::refreshResident(int64_t layer) {
  for (int64_t e = 0; e < experts->experts(); ++e) {
    const Residency s = experts->state(layer, e);
    resident[size_t(layer)][size_t(e)] =
        s == Residency::ResidentHi || s == Residency::Loading;
  }
}

bool ExpertMemory::beginStep(std::string &error) {
  ExpertStore &store = *experts;
  // What lands at this boundary belongs to the step that starts here.
  atStart = store.counters();
  store.advance();
  if (options.mode == MemoryMode::DynaExq) {
    const bool due =
        options.updateSeconds > 0
            ? std::chrono::duration<double>(Clock::now() - lastUpdate).count() >=
                  options.updateSeconds
            : steps > 0 && steps % std::max<int64_t>(1, options.updateSteps) == 0;
    if (due) {
      if (!updateResidency(error))
        return false;
      lastUpdate = Clock::now();
      store.advance(); // demotions now; promotions admitted and copying
    }
  }
  ++steps;
  prefetches = overfetches = 0;
  versions.assign(size_t(store.layerCount()),
                  std::vector<int8_t>(size_t(store.experts()), 0));
  for (int64_t l = 0; l < store.layerCount(); ++l) {
    if (capacity > 0)
      refreshResident(l);
    for (int64_t e = 0; e < store.experts(); ++e) {
      Precision p;
      if (store.activePrecision(l, e, p))
        versions[size_t(l)][size_t(e)] = p == Precision::High ? 2 : 1;
    }
  }
  if (options.checkInvariants && !store.check(error)) {
    error = "expert memory: " + error;
    return false;
  }
  return true;
}

exec::MemoryMetrics ExpertMemory::endStep() {
  const ExpertStore &store = *experts;
  const StoreCounters &c = store.counters();
  exec::MemoryMetrics m;
  m.mode = memoryModeName(options.mode);
  m.low = precisionName(options.low);
  m.budget = store.budget().budget();
  m.used = store.budget().used();
  m.peak = store.budget().peak();
  m.promotions = c.promotions - atStart.promotions;
  m.demotions = c.demotions - atStart.demotions;
  m.loads = c.loads - atStart.loads;
  m.evictions = c.evictions - atStart.evictions;
  m.failedCopies = c.failedCopies - atStart.failedCopies;
  m.admittedPromotions = c.admittedPromotions - atStart.admittedPromotions;
  m.deferredPromotions = c.deferredPromotions - atStart.deferredPromotions;
  m.stalls = c.stalls - atStart.stalls;
  m.stallSeconds = c.stallSeconds - atStart.stallSeconds;
  m.bytesCopied = c.bytesCopied - atStart.bytesCopied;
  m.copySeconds = c.copySeconds - atStart.copySeconds;
  m.prefetches = prefetches;
  m.overfetches = overfetches;
  m.stepSize = stepSize;
  for (exec::MoeLayer *layer : layers)
    m.layers.push_back(layer->index());
  // Offloading: what each layer ran with is high precision for what it routed.
  m.versions = versions;
  if (capacity > 0)
    for (auto &layer : m.versions)
      std::fill(layer.begin(), layer.end(), int8_t(2));
  return m;
}

bool ExpertMemory::updateResidency(std::string &error) {
  ExpertStore &store = *experts;
  const int64_t E = store.experts();
  std::vector<uint8_t> knobs;
  if (!rule->packKnobs(ruleSettings, knobs, error))
    return false;
  for (int64_t l = 0; l < store.layerCount(); ++l) {
    std::vector<uint8_t> current(size_t(E), 0);
    for (int64_t e = 0; e < E; ++e) {
      const Residency s = store.state(l, e);
      current[size_t(e)] = s == Residency::ResidentHi || s == Residency::Promoting;
    }
    runtime::CallBuffers call(rule->signature());
    if (!call.bind("hotness", npy::makeF32({E}, hotness[size_t(l)].data()), "hotness",
                   error) ||
        !call.bind("counts", npy::makeI32({E}, counts[size_t(l)].data()), "counts",
                   error) ||
        !call.bind("current", npy::makeBool({E}, current.data()), "current", error) ||
        !call.finish(error) || !rule->run(call, knobs, error))
      return false;
    auto out = [&](const char *name) { return call.output(size_t(call.findOutput(name))); };
    npy::Array s = out("hotness_out"), up = out("promotions"), down = out("demotions");
    hotness[size_t(l)].assign(s.f32(), s.f32() + E);
    const int32_t ups = out("num_promotions").i32()[0],
                  downs = out("num_demotions").i32()[0];
    for (int32_t i = 0; i < downs; ++i) // demotions first: they free the budget
      store.requestDemotion(l, down.i32()[i]);
    for (int32_t i = 0; i < ups; ++i)
      store.requestPromotion(l, up.i32()[i]);
    std::fill(counts[size_t(l)].begin(), counts[size_t(l)].end(), 0);
  }
  return true;
}

bool ExpertMemory::routed(int64_t l, const exec::Routing &routing,
                          std::vector<int64_t> &pending, std::string &error) {
  ExpertStore &store = *experts;
  const int64_t E = store.experts();
  std::vector<uint8_t> requested(size_t(E), 0);
  for (int32_t id : routing.ids)
    if (id >= 0) {
      requested[size_t(id)] = 1;
      ++counts[size_t(l)][size_t(id)];
    }
  if (capacity == 0) // every expert has a version
    return true;
  ++tick;
  std::vector<int32_t> loads;
  if (options.mode == MemoryMode::Offload) {
    // Feedback: a routed expert not resident is a stall; a prefetched one not routed an
    // overfetch (ExpertFlow §3.2.2).
    std::vector<int32_t> events;
    for (int64_t e = 0; e < E; ++e) {
      if (requested[size_t(e)] && !store.resident(l, e))
        events.push_back(1);
      if (prefetched[size_t(l)][size_t(e)] && !requested[size_t(e)]) {
        events.push_back(2);
        ++overfetches;
      }
      if (requested[size_t(e)] || !store.resident(l, e))
        prefetched[size_t(l)][size_t(e)] = 0;
    }
    if (!expertflowStep(l, std::vector<float>(size_t(E), 0.0f), requested, events, loads,
                        error))
      return false;
  } else { // on demand: the routed experts that are missing, plain LRU
    for (int64_t e = 0; e < E; ++e)
      if (requested[size_t(e)] && store.state(l, e) == Residency::Offloaded)
        loads.push_back(int32_t(e));
  }
  for (int64_t e = 0; e < E; ++e)
    if (requested[size_t(e)])
      lastUse[size_t(l)][size_t(e)] = tick;
  for (int32_t e : loads) {
    if (!requested[size_t(e)])
      continue; // prefetches come from predictAhead
    if (options.mode == MemoryMode::OnDemand && held(l) >= capacity &&
        !makeRoom(l, requested))
      continue;                    // every slot holds a routed expert: a later wave
    store.requestLoad(l, e, true); // false: no block now, a later wave
  }
  for (int64_t e = 0; e < E; ++e)
    if (requested[size_t(e)] && !store.resident(l, e))
      pending.push_back(e);
  refreshResident(l);
  return true;
}

bool ExpertMemory::predictAhead(int64_t l, const float *x, int64_t tokens,
                                std::string &error) {
  // The layer S ahead, from its gate on this layer's input (the pre-gate), prefetched;
  // past the last layer, the next step's (decode runs the stack again).
  const int64_t L = experts->layerCount();
  if (L < 2)
    return true;
  const int64_t m = (l + std::clamp<int64_t>(stepSize, 1, L - 1)) % L;
  const int64_t E = experts->experts();
  std::vector<float> mass =
      pregateMass(x, tokens, layers[size_t(m)]->routerWeights(), E, config->hidden);
  std::vector<int32_t> loads;
  if (!expertflowStep(m, mass, std::vector<uint8_t>(size_t(E), 0), {}, loads, error))
    return false;
  for (int32_t e : loads)
    if (experts->requestLoad(m, e, false)) {
      prefetched[size_t(m)][size_t(e)] = 1;
      ++prefetches;
    }
  refreshResident(m);
  return true;
}

bool ExpertMemory::expertflowStep(int64_t l, const std::vector<float> &mass,
                                  const std::vector<uint8_t> &requested,
                                  const std::vector<int32_t> &events,
                                  std::vector<int32_t> &loads, std::string &error) {
  const int64_t E = experts->experts();
  refreshResident(l);
  std::vector<int32_t> ev =
      events.empty() ? std::vector<int32_t>{0} : events; // 0: no event
  const int32_t now = tick, step = stepSize, stalls = stallCount, over = overfetchCount;
  std::vector<uint8_t> knobs;
  runtime::CallBuffers call(rule->signature());
  if (!rule->packKnobs(ruleSettings, knobs, error) ||
      !call.bind("pregate_mass", npy::makeF32({E}, mass.data()), "pre-gate mass", error) ||
      !call.bind("requested", npy::makeBool({E}, requested.data()), "requested", error) ||
      !call.bind("resident", npy::makeBool({E}, resident[size_t(l)].data()), "resident",
                 error) ||
      !call.bind("last_use", npy::makeI32({E}, lastUse[size_t(l)].data()), "last use",
                 error) ||
      !call.bind("now", npy::makeI32({1}, &now), "now", error) ||
      !call.bind("step", npy::makeI32({1}, &step), "step", error) ||
      !call.bind("stalls", npy::makeI32({1}, &stalls), "stalls", error) ||
      !call.bind("overfetches", npy::makeI32({1}, &over), "overfetches", error) ||
      !call.bind("events", npy::makeI32({int64_t(ev.size())}, ev.data()), "events",
                 error) ||
      !call.finish(error) || !rule->run(call, knobs, error))
    return false;
  auto out = [&](const char *name) { return call.output(size_t(call.findOutput(name))); };
  stepSize = out("step_size").i32()[0];
  stallCount = out("stalls_out").i32()[0];
  overfetchCount = out("overfetches_out").i32()[0];
  npy::Array used = out("last_use_out"), load = out("loads"), evict = out("evictions");
  lastUse[size_t(l)].assign(used.i32(), used.i32() + E);
  for (int64_t i = 0; i < E && evict.i32()[i] >= 0; ++i)
    experts->evict(l, evict.i32()[i]);
  loads.clear();
  for (int64_t i = 0; i < E && load.i32()[i] >= 0; ++i)
    loads.push_back(load.i32()[i]);
  return true;
}

bool ExpertMemory::makeRoom(int64_t l, const std::vector<uint8_t> &keep) {
  if (evictOne(l, keep))
    return true;
  // Every slot is resident-and-kept or on its way: let a prefetch that is not needed now
  // land, then it can go.
  for (int64_t e = 0; e < experts->experts(); ++e)
    if (!keep[size_t(e)] && experts->state(l, e) == Residency::Loading) {
      experts->settle(l, e);
      if (experts->state(l, e) == Residency::Offloaded || evictOne(l, keep))
        return true;
    }
  return false;
}

bool ExpertMemory::evictOne(int64_t l, const std::vector<uint8_t> &keep) {
  int64_t victim = -1;
  for (int64_t e = 0; e < experts->experts(); ++e)
    if (experts->state(l, e) == Residency::ResidentHi && !keep[size_t(e)] &&
        (victim < 0 || lastUse[size_t(l)][size_t(e)] < lastUse[size_t(l)][size_t(victim)]))
      victim = e;
  if (victim < 0)
    return false;
  experts->evict(l, victim);
  return true;
}

int64_t ExpertMemory::held(int64_t l) const {
  int64_t n = 0;
  for (int64_t e = 0; e < experts->experts(); ++e)
    n += experts->state(l, e) == Residency::ResidentHi ||
         experts->state(l, e) == Residency::Loading;
  return n;
}

bool ExpertMemory::waitLoading(int64_t l, const std::vector<int64_t> &pending,
                               std::vector<int64_t> &ready, std::string &error) {
  for (int64_t e : pending)
    if (experts->state(l, e) == Residency::Loading) {
      if (!experts->waitResident(l, e, error))
        return false;
      ready.push_back(e);
    }
  return true;
}

bool ExpertMemory::await(int64_t l, const std::vector<int64_t> &pending,
                         std::vector<int64_t> &ready, std::string &error) {
  // Those on their way: wait for them (a stall only if they are not there yet).
  if (!waitLoading(l, pending, ready, error))
    return false;
  if (ready.empty()) {
    // A wave: the slots hold experts that already ran; evict them for the rest.
    std::vector<uint8_t> keep(size_t(experts->experts()), 0);
    for (int64_t e : pending)
      keep[size_t(e)] = 1;
    for (int64_t e : pending) {
      if (held(l) >= capacity && !makeRoom(l, keep))
        break;
      // Loads other layers evicted in flight still hold their blocks until they land.
      if (!experts->requestLoad(l, e, true) &&
          (experts->settleDropped(), !experts->requestLoad(l, e, true)))
        break;
    }
    if (!waitLoading(l, pending, ready, error))
      return false;
    if (ready.empty()) {
      error = "expert memory: no room for a routed expert of MoE layer " +
              std::to_string(l) + " (" + std::to_string(capacity) + " slots per layer)";
      return false;
    }
  }
  refreshResident(l);
  return true;
}

} // namespace switchyard::memory
