//===- ExpertMemory.h - the executor's expert memory modes ------*- C++ -*-===//
//
// How the executor keeps experts in a device budget (moe-exec --memory MODE --budget B):
//   resident    every expert's high-precision version in the budget (an error if it
//               does not fit): the reference point;
//   static-lo   every expert at low precision (int4 / int8), nothing moves;
//   dynaexq     every expert at low precision plus the hot ones at high precision
//               (DynaExq): per-layer routing counters, the compiled residency rule
//               (policies/dynaexq.mlir @dynaexq) every T_u of simulated (steps) or wall
//               time, promotions and demotions through the store's transition pipeline;
//   offload     a per-layer cache of high-precision experts over the host store
//               (ExpertFlow): the compiled prefetch rule (policies/expertflow.mlir
//               @expertflow) runs at every layer for its own cache (the demand: the
//               routed experts, the stall / overfetch feedback) and for the layer S
//               ahead (the prediction: that layer's gate on the current hidden states,
//               the pre-gate, prefetched); a routed expert not resident is loaded on
//               demand while the resident ones compute (a stall when it is not there
//               in time), and a router that takes `resident` routes cache-aware;
//   on-demand   the same cache with no prefetch and plain LRU eviction: the baseline.
// The store (switchyard/Memory/ExpertStore.h) enforces the budget and the handle
// invariants; versions switch only at step boundaries, except demand loads, which
// were resolvable by nothing before they landed.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_MEMORY_EXPERTMEMORY_H
#define SWITCHYARD_MEMORY_EXPERTMEMORY_H

#include "switchyard/Executor/Metrics.h"
#include "switchyard/Memory/ExpertStore.h"
#include "switchyard/Model/MoeConfig.h"
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/PolicyCache.h"

#include <chrono>

namespace switchyard::memory {

enum class MemoryMode { Resident, StaticLow, DynaExq, Offload, OnDemand };
const char *memoryModeName(MemoryMode mode);
bool parseMemoryMode(const std::string &text, MemoryMode &out);

struct MemoryOptions {
  MemoryMode mode = MemoryMode::Resident;
  int64_t budgetBytes = 0;
  Precision low = Precision::Int4;
  int64_t group = 0; // int4 group (0: automatic)
  LinkOptions link;
  int64_t updateSteps = 1;               // DynaExq's T_u in steps (simulated time) ...
  double updateSeconds = 0;              // ... or in wall-clock seconds (> 0 wins)
  std::vector<std::string> knobSettings; // "name=value" for the mode's rule
  bool checkInvariants = false; // check the store's invariants at every step boundary
};

class ExpertMemory {
public:
  static std::unique_ptr<ExpertMemory> create(const MemoryOptions &options,
                                              const model::MoeConfig &config,
                                              std::vector<exec::MoeLayer *> layers,
                                              runtime::PolicyCache &cache,
                                              std::string &error);
  ~ExpertMemory();
  /// The step boundary: publishes what landed, runs the residency rule when T_u has
  /// passed, records the versions the step will run with.
  bool beginStep(std::string &error);
  /// What the step did (counters since beginStep, the versions each layer ran).
  exec::MemoryMetrics endStep();
  const ExpertStore &store() const { return *experts; }

private:
  ExpertMemory() = default;
  bool routed(int64_t layer, const exec::Routing &routing, std::vector<int64_t> &pending,
              std::string &error);
  bool await(int64_t layer, const std::vector<int64_t> &pending,
             std::vector<int64_t> &ready, std::string &error);
  /// DynaExq: the rule on every layer's counters.
  bool updateResidency(std::string &error);
  /// ExpertFlow: one call of the rule for `layer`'s cache; applies its evictions and
  /// returns its loads (demand first).
  bool expertflowStep(int64_t layer, const std::vector<float> &pregateMass,
                      const std::vector<uint8_t> &requested,
                      const std::vector<int32_t> &events, std::vector<int32_t> &loads,
                      std::string &error);
  /// ExpertFlow: the layer S ahead predicted from this layer's input and prefetched.
  bool predictAhead(int64_t layer, const float *x, int64_t tokens, std::string &error);
  /// Makes room in `layer`'s cache for one more expert (LRU among those not `keep`).
  bool evictOne(int64_t layer, const std::vector<uint8_t> &keep);
  /// evictOne, else lets an unneeded load in flight land and evicts it.
  bool makeRoom(int64_t layer, const std::vector<uint8_t> &keep);
  /// Experts of `layer` holding a block (resident or loading).
  int64_t held(int64_t layer) const;
  /// Waits for the pending experts that are loading; they go to `ready`.
  bool waitLoading(int64_t layer, const std::vector<int64_t> &pending,
                   std::vector<int64_t> &ready, std::string &error);
  void refreshResident(int64_t layer);

  MemoryOptions options;
  const model::MoeConfig *config = nullptr;
  std::vector<exec::MoeLayer *> layers;
  std::unique_ptr<ExpertStore> experts;
  std::shared_ptr<runtime::HostPolicy> rule;
  std::vector<std::string> ruleSettings;
  int64_t capacity = 0; // offloading: experts per layer
  // DynaExq state per layer.
  std::vector<std::vector<float>> hotness;
  std::vector<std::vector<int32_t>> counts;
  int64_t steps = 0;
  std::chrono::steady_clock::time_point lastUpdate;
  // ExpertFlow / on-demand state per layer.
  std::vector<std::vector<int32_t>> lastUse;
  std::vector<std::vector<uint8_t>> resident, prefetched;
  int32_t tick = 0, stepSize = 0, stallCount = 0, overfetchCount = 0;
  int64_t prefetches = 0, overfetches = 0;
  StoreCounters atStart;
  std::vector<std::vector<int8_t>> versions; // [layer][expert] this step
};

} // namespace switchyard::memory

#endif
