//===- Routing.cpp - a compiled policy in the forward pass ----------------===//
#include "switchyard/Executor/Routing.h"

namespace switchyard::exec {

bool Routing::groupByExpert(int64_t experts, std::string &error) {
  byExpert.offsets.assign(static_cast<size_t>(experts + 1), 0);
  for (size_t s = 0; s < ids.size(); ++s) {
    if (ids[s] < -1 || ids[s] >= experts) {
      error = "expert id " + std::to_string(ids[s]) + " of token " + std::to_string(s / k) +
              " is outside [-1, " + std::to_string(experts) + ")";
      return false;
    }
    if (ids[s] >= 0)
      ++byExpert.offsets[ids[s] + 1];
  }
  for (int64_t e = 0; e < experts; ++e)
    byExpert.offsets[e + 1] += byExpert.offsets[e];
  byExpert.slots.assign(static_cast<size_t>(byExpert.offsets[experts]), 0);
  std::vector<int32_t> next(byExpert.offsets.begin(), byExpert.offsets.end() - 1);
  for (size_t s = 0; s < ids.size(); ++s)
    if (ids[s] >= 0)
      byExpert.slots[next[ids[s]]++] = static_cast<int32_t>(s);
  return true;
}

std::unique_ptr<Router> Router::create(std::shared_ptr<runtime::HostPolicy> policy,
                                       int64_t experts,
                                       const std::vector<std::string> &knobSettings,
                                       std::string &error) {
  std::unique_ptr<Router> r(new Router);
  const runtime::Signature &sig = policy->signature();
  std::string where = "policy @" + sig.entry;
  if (sig.isRule()) {
    error = where + " is a " + spelling(sig.kind) + " rule, not a router";
    return nullptr;
  }
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const runtime::Param &p = sig.params[i];
    if (!p.isOutput)
      continue;
    int64_t index = static_cast<int64_t>(i);
    if (p.name == "topk_ids")
      r->idsIndex = index;
    else if (p.name == "topk_weights")
      r->weightsIndex = index;
    else if (p.name == "sorted_token_ids")
      r->sortedIndex = index;
    else if (p.name == "expert_ids")
      r->blocksIndex = index;
    else if (p.name == "num_tokens_post_padded")
      r->paddedIndex = index;
  }
  if (r->idsIndex < 0 || r->weightsIndex < 0) {
    error = where + " has no topk_ids / topk_weights results: the executor runs routers "
                    "that name them";
    return nullptr;
  }
  const runtime::Param &ids = sig.params[r->idsIndex];
  if (ids.shape.size() != 2 || ids.shape[1] < 1) {
    error = where + ": topk_ids must be [T, k]";
    return nullptr;
  }
  int64_t logits = sig.findInput("logits");
  if (logits < 0 || sig.params[logits].shape.size() != 2 ||
      sig.params[logits].shape[1] != experts) {
    error = where + " must take logits [T, " + std::to_string(experts) +
            "] (the model's routed experts)" +
            (logits >= 0 ? ", it takes " + sig.params[logits].shapeText() : "");
    return nullptr;
  }
  r->k = ids.shape[1];
  r->experts = experts;
  r->policy = std::move(policy);
  if (!r->policy->packKnobs(knobSettings, r->knobs, error))
    return nullptr;
  // Every other input must be something a batch provides: checked now, not per batch.
  for (const std::string &name : sig.inputNames())
    if (name != "logits" && name != "bias" && name != "phase" && name != "request_ids" &&
        name != "positions" && name != "draft_mask" && name != "placement" &&
        name != "resident") {
      error = where + " takes '" + name +
              "', which the executor does not provide (it binds "
              "logits, bias, phase, request_ids, positions, draft_mask, placement, "
              "resident)";
      return nullptr;
    }
  return r;
}

std::vector<std::string> Router::boundInputs() const {
  std::vector<std::string> names;
  for (const std::string &n : signature().inputNames())
    if (n != "logits")
      names.push_back(n);
  return names;
}

bool Router::bindInput(runtime::CallBuffers &call, const std::string &name,
                       const float *logits, int64_t tokens, const float *bias,
                       const BatchInfo &batch, const ExpertPlacement *placement,
                       const std::vector<uint8_t> *resident, std::string &error) const {
  if (name == "logits")
    return call.bind(name, npy::makeF32({tokens, experts}, logits), "router logits", error);
  if (name == "bias") {
    // A model without DeepSeek-V3's correction bias corrects nothing: zeros (moe-exec
    // says so when it loads the policy).
    std::vector<float> zeros(bias ? 0 : static_cast<size_t>(experts), 0.0f);
    return call.bind(name, npy::makeF32({experts}, bias ? bias : zeros.data()),
                     "the correction bias", error);
  }
  if (name == "phase")
    return call.bindScalar(name, static_cast<int32_t>(batch.phase), error);
  if (name == "request_ids")
    return call.bind(name, npy::makeI32({tokens}, batch.requestIds.data()), "request ids",
                     error);
  if (name == "positions")
    return call.bind(name, npy::makeI32({tokens}, batch.positions.data()), "positions",
                     error);
  if (name == "draft_mask")
    return call.bind(name, npy::makeBool({tokens}, batch.draftMask.data()), "draft mask",
                     error);
  if (name == "resident") { // expert memory's resident set; without one, all experts
    std::vector<uint8_t> all(resident ? 0 : static_cast<size_t>(experts), 1);
    return call.bind(name,
                     npy::makeBool({experts}, resident ? resident->data() : all.data()),
                     "the resident experts", error);
  }
  if (placement) { // the expert-parallel job's live placement, as log2phy [E, R]
    std::vector<int32_t> table = placement->log2phyTable();
    return call.bind(name, npy::makeI32({experts, placement->maxReplicas()}, table.data()),
                     "the expert placement", error);
  }
  // placement: one device holds one replica of every expert.
  std::vector<int32_t> identity(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e)
    identity[e] = static_cast<int32_t>(e);
  return call.bind(name, npy::makeI32({experts}, identity.data()), "one-device placement",
                   error);
}

bool Router::route(const float *logits, int64_t tokens, const float *bias,
                   const BatchInfo &batch, Routing &routing, std::string &error,
                   const ExpertPlacement *placement,
                   const std::vector<uint8_t> *resident) const {
  runtime::CallBuffers call(policy->signature());
  for (const std::string &name : signature().inputNames())
    if (!bindInput(call, name, logits, tokens, bias, batch, placement, resident, error))
      return false;
  if (!call.finish(error) || !policy->run(call, knobs, error))
    return false;
  routing.tokens = tokens;
  routing.k = k;
  size_t n = static_cast<size_t>(tokens * k);
  const int32_t *ids = static_cast<const int32_t *>(call.buffers()[idsIndex]);
  const float *weights = static_cast<const float *>(call.buffers()[weightsIndex]);
  routing.ids.assign(ids, ids + n);
  routing.weights.assign(weights, weights + n);
  if (keepLogits)
    routing.logits.assign(logits, logits + tokens * experts);
  else
    routing.logits.clear();
  if (sortedIndex < 0 || blocksIndex < 0 || paddedIndex < 0)
    return routing.groupByExpert(experts, error);
  return readSlots(call, routing, error);
}

/// The tokens of each expert from the policy's block-aligned order: blocks of
/// `block` entries, each owned by expert_ids[b], padded with the sentinel T*k. Checked
/// against topk_ids, so a policy whose fused outputs disagree is an error, not a
/// silently wrong layer.
bool Router::readSlots(const runtime::CallBuffers &call, Routing &routing,
                       std::string &error) const {
  const runtime::Signature &sig = signature();
  int64_t block = sig.params[blocksIndex].sizeRule[2];
  const int32_t *sorted = static_cast<const int32_t *>(call.buffers()[sortedIndex]);
  const int32_t *owners = static_cast<const int32_t *>(call.buffers()[blocksIndex]);
  int64_t padded = *static_cast<const int32_t *>(call.buffers()[paddedIndex]);
  int64_t sortedSize = *sig.params[sortedIndex].elementsFor(routing.tokens);
  int64_t sentinel = routing.tokens * k;
  if (block < 1 || padded < 0 || padded > sortedSize || padded % block != 0) {
    error = "policy @" + sig.entry +
            ": num_tokens_post_padded = " + std::to_string(padded) +
            " is not a multiple of the block size " + std::to_string(block) + " within " +
            std::to_string(sortedSize);
    return false;
  }
  ExpertSlots &out = routing.byExpert;
  out.offsets.assign(static_cast<size_t>(experts + 1), 0);
  out.slots.clear();
  std::vector<int32_t> perExpert(static_cast<size_t>(experts), 0);
  int64_t placed = 0, previous = -1;
  for (int64_t b = 0; b < padded / block; ++b) {
    int64_t e = owners[b];
    if (e < 0 || e >= experts || e < previous) {
      error = "policy @" + sig.entry + ": expert_ids[" + std::to_string(b) +
              "] = " + std::to_string(e) + " is not an expert in ascending order";
      return false;
    }
    previous = e;
    for (int64_t i = b * block; i < (b + 1) * block; ++i) {
      int64_t s = sorted[i];
      if (s == sentinel)
        continue;
      if (s < 0 || s > sentinel || routing.ids[s] != e) {
        error = "policy @" + sig.entry + ": sorted_token_ids[" + std::to_string(i) +
                "] = " + std::to_string(s) + " in a block of expert " + std::to_string(e) +
                " disagrees with topk_ids";
        return false;
      }
      out.slots.push_back(static_cast<int32_t>(s));
      ++perExpert[e];
      ++placed;
    }
  }
  int64_t routed = 0;
  for (int32_t id : routing.ids)
    routed += id >= 0;
  if (placed != routed) {
    error = "policy @" + sig.entry + ": sorted_token_ids place " + std::to_string(placed) +
            " of the " + std::to_string(routed) + " routed slots";
    return false;
  }
  for (int64_t e = 0; e < experts; ++e)
    out.offsets[e + 1] = out.offsets[e] + perExpert[e];
  return true;
}

} // namespace switchyard::exec
