//===- Routing.h - a compiled policy in the forward pass --------*- C++ -*-===//
//
// The routing of one layer for one batch: the compiled policy called on the router
// logits and whatever else it declares by name (the correction bias, the batch's phase,
// request ids, positions, draft mask, a one-device placement), or a recorded routing
// replayed. Its result: per-token expert ids and weights, and the tokens grouped by
// expert, taken from the policy's fused block-aligned order (sorted_token_ids /
// expert_ids, vLLM's moe_align_block_size contract) when it has one.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_EXECUTOR_ROUTING_H
#define SWITCHYARD_EXECUTOR_ROUTING_H

#include "switchyard/Executor/Batch.h"
#include "switchyard/Executor/Placement.h"
#include "switchyard/Runtime/HostPolicy.h"

#include <memory>

namespace switchyard::exec {

/// Token slots (t * k + j) grouped by expert.
struct ExpertSlots {
  std::vector<int32_t> offsets; // [E + 1]
  std::vector<int32_t> slots;   // slots of expert e: [offsets[e], offsets[e + 1])
  int64_t count(int64_t e) const { return offsets[e + 1] - offsets[e]; }
};

struct Routing {
  int64_t tokens = 0, k = 0;
  std::vector<int32_t> ids;   // [T, k], -1: no expert
  std::vector<float> weights; // [T, k]
  ExpertSlots byExpert;
  /// The router logits [T, E] the policy was called on: kept only while the router
  /// records them (Router::recordLogits, for moe-exec --capture), else empty.
  std::vector<float> logits;

  /// Groups the slots by expert in ascending slot order (a counting sort); false when an
  /// id is outside [-1, experts).
  bool groupByExpert(int64_t experts, std::string &error);
};

/// A compiled router bound to a model's layer shape.
class Router {
public:
  /// `policy` loaded for the model's shape; `knobSettings` "name=value" (checked now).
  static std::unique_ptr<Router> create(std::shared_ptr<runtime::HostPolicy> policy,
                                        int64_t experts,
                                        const std::vector<std::string> &knobSettings,
                                        std::string &error);

  /// Routes `tokens` rows of `logits` [T, E]; `bias` [E] or nullptr; `placement`: the
  /// live expert placement of an expert-parallel job (nullptr: one device holds every
  /// expert) for a policy that takes one (XShare-EP); `resident`: which experts are in
  /// device memory (nullptr: all) for cache-aware routing (ExpertFlow).
  bool route(const float *logits, int64_t tokens, const float *bias, const BatchInfo &batch,
             Routing &routing, std::string &error,
             const ExpertPlacement *placement = nullptr,
             const std::vector<uint8_t> *resident = nullptr) const;

  const runtime::Signature &signature() const { return policy->signature(); }
  /// Inputs the policy takes besides the logits ("bias", "phase", ...).
  std::vector<std::string> boundInputs() const;
  /// Whether route() keeps a copy of the logits in Routing::logits (off: no copy).
  void recordLogits(bool on) { keepLogits = on; }

private:
  bool bindInput(runtime::CallBuffers &call, const std::string &name, const float *logits,
                 int64_t tokens, const float *bias, const BatchInfo &batch,
                 const ExpertPlacement *placement, const std::vector<uint8_t> *resident,
                 std::string &error) const;
  bool readSlots(const runtime::CallBuffers &call, Routing &routing,
                 std::string &error) const;

  std::shared_ptr<runtime::HostPolicy> policy;
  int64_t experts = 0, k = 0;
  bool keepLogits = false;
  std::vector<uint8_t> knobs;
  int64_t idsIndex = -1, weightsIndex = -1, sortedIndex = -1, blocksIndex = -1,
          paddedIndex = -1;
};

} // namespace switchyard::exec

#endif
