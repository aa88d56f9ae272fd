//===- StepRouter.cpp - a routing policy bound for an engine's steps ------===//
#include "switchyard/Runtime/StepRouter.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>

namespace switchyard::runtime {

namespace {
std::shared_ptr<const StepState> &threadState() {
  thread_local std::shared_ptr<const StepState> state;
  return state;
}

constexpr MetadataInput kMetadataInputs[] = {
    MetadataInput::RequestIds, MetadataInput::Positions, MetadataInput::DraftMask,
    MetadataInput::Phase};

const char *metadataName(MetadataInput input) {
  switch (input) {
  case MetadataInput::RequestIds:
    return "request_ids";
  case MetadataInput::Positions:
    return "positions";
  case MetadataInput::DraftMask:
    return "draft_mask";
  case MetadataInput::Phase:
    return "phase";
  }
  return "?";
}

const std::optional<std::vector<int32_t>> *perToken(const StepState &state,
                                                    MetadataInput input) {
  switch (input) {
  case MetadataInput::RequestIds:
    return &state.requestIds;
  case MetadataInput::Positions:
    return &state.positions;
  case MetadataInput::DraftMask:
    return &state.draftMask;
  case MetadataInput::Phase:
    return nullptr;
  }
  return nullptr;
}

std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &n : names)
    text += (text.empty() ? "" : ", ") + n;
  return text;
}

/// Per-thread buffers of a call routed by rows (knob groups), grown, never shrunk.
struct RowScratch {
  std::vector<uint8_t> logits;
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::array<std::vector<int32_t>, 4> metadata;
};
RowScratch &rowScratch() {
  thread_local RowScratch scratch;
  return scratch;
}

constexpr size_t kMaxInputs = 16;
constexpr size_t kKnobCacheEntries = 256;
} // namespace

void setStepState(std::shared_ptr<const StepState> state) {
  threadState() = std::move(state);
}

const std::shared_ptr<const StepState> &currentStepState() { return threadState(); }

std::optional<MetadataInput> metadataInput(const std::string &name) {
  for (MetadataInput input : kMetadataInputs)
    if (name == metadataName(input))
      return input;
  return std::nullopt;
}

std::unique_ptr<StepRouter> StepRouter::create(std::vector<Entry> entries,
                                               const std::vector<std::string> &layerInputs,
                                               int64_t experts,
                                               const std::vector<std::string> &defaultKnobs,
                                               const std::string &label, Status &status) {
  std::unique_ptr<StepRouter> router(new StepRouter);
  router->name = label;
  auto invalid = [&](const std::string &message) {
    status = router->fail(StatusCode::kInvalidArgument, message);
    return nullptr;
  };
  if (entries.empty() || !entries.front().policy)
    return invalid("no host entry to bind");
  if (experts <= 0)
    return invalid("the expert count must be positive, got " + std::to_string(experts));
  const Signature &sig = entries.front().policy->signature();
  if (router->name.empty())
    router->name = "@" + sig.entry;
  std::vector<std::string> inputs = sig.inputNames();
  if (sig.findInput("logits") < 0)
    return invalid("the policy takes no 'logits' input (its inputs: " + joined(inputs) +
                   ")");
  std::vector<std::string> results;
  for (const Param &p : sig.params)
    if (p.isOutput)
      results.push_back(p.name);
  for (const char *needed : {"topk_ids", "topk_weights"})
    if (std::find(results.begin(), results.end(), needed) == results.end())
      return invalid(std::string("the policy returns no ") + needed + " (its results: " +
                     joined(results) + "): not a router an engine can run");
  // Layer inputs the policy takes; the placement as its ABI parameters (a replica
  // count per expert, the log2phy table), each passed by the engine.
  for (const std::string &n : layerInputs)
    for (const Param &p : sig.params)
      if (!p.isOutput && p.inputName() == n)
        router->layerNames.push_back(p.name);
  for (const std::string &n : inputs)
    if (std::optional<MetadataInput> m = metadataInput(n))
      router->metadata.push_back(*m);
  for (const std::string &n : inputs) {
    bool given =
        n == "logits" ||
        std::find(layerInputs.begin(), layerInputs.end(), n) != layerInputs.end() ||
        metadataInput(n);
    if (!given) {
      std::vector<std::string> offered{"logits"};
      offered.insert(offered.end(), layerInputs.begin(), layerInputs.end());
      for (MetadataInput m : kMetadataInputs)
        offered.push_back(metadataName(m));
      return invalid("the policy needs input '" + n +
                     "', which the engine does not give (given: " + joined(offered) + ")");
    }
  }
  if (1 + router->layerNames.size() + router->metadata.size() > kMaxInputs)
    return invalid("more than " + std::to_string(kMaxInputs) + " inputs");
  std::vector<std::string> order{"logits"};
  order.insert(order.end(), router->layerNames.begin(), router->layerNames.end());
  for (MetadataInput m : router->metadata)
    order.push_back(metadataName(m));
  for (Entry &entry : entries) {
    std::string error;
    std::unique_ptr<BoundCall> call =
        BoundCall::create(*entry.policy, order, {"topk_ids", "topk_weights"}, error);
    if (!call)
      return invalid(error);
    router->entries.push_back({std::move(entry.policy), entry.logits, std::move(call)});
  }
  const Param &ids = sig.params[router->entries.front().call->resultParam(0)];
  if (ids.shape.size() != 2 || ids.shape[1] < 0)
    return invalid("topk_ids of @" + sig.entry + " has no static k");
  router->k = ids.shape[1];
  router->numExperts = experts;
  const Param &logits = sig.params[sig.findInput("logits")];
  router->width =
      logits.shape.size() == 2 && logits.shape[1] > 0 ? logits.shape[1] : experts;
  router->defaults = defaultKnobs;
  for (size_t i = 0; i < router->entries.size(); ++i) {
    std::shared_ptr<const std::vector<uint8_t>> bytes;
    if (router->entries[i].policy->signature().knobs.empty()) {
      if (!defaultKnobs.empty()) {
        status = router->fail(StatusCode::kInvalidKnob, "knob " + defaultKnobs.front() +
                                                            ": @" + sig.entry +
                                                            " has no run-time knobs");
        return nullptr;
      }
    } else {
      std::vector<uint8_t> packed;
      Status packing = router->entries[i].policy->packKnobs(defaultKnobs, packed);
      if (!packing.isOk()) {
        status = router->fail(packing.code(), packing.message());
        return nullptr;
      }
      bytes = std::make_shared<const std::vector<uint8_t>>(std::move(packed));
    }
    router->defaultKnobs.push_back(std::move(bytes));
  }
  status = Status::ok();
  return router;
}

size_t StepRouter::entryFor(npy::DType logitsType) const {
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].logits == logitsType)
      return i;
  return 0;
}

Status StepRouter::knobsFor(size_t entry, const std::vector<std::string> &overrides,
                            std::shared_ptr<const std::vector<uint8_t>> &bytes) const {
  if (overrides.empty() || !defaultKnobs[entry]) {
    bytes = defaultKnobs[entry];
    if (!overrides.empty())
      return fail(StatusCode::kInvalidKnob, "knob " + overrides.front() + ": @" +
                                                entries[entry].policy->signature().entry +
                                                " has no run-time knobs");
    return Status::ok();
  }
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto key = std::make_pair(entry, overrides);
  auto found = cache.find(key);
  if (found != cache.end()) {
    bytes = found->second;
    return Status::ok();
  }
  std::vector<std::string> settings = defaults;
  settings.insert(settings.end(), overrides.begin(), overrides.end());
  std::vector<uint8_t> packed;
  Status status = entries[entry].policy->packKnobs(settings, packed);
  if (!status.isOk())
    return fail(status.code(), status.message());
  if (cache.size() >= kKnobCacheEntries)
    cache.clear();
  bytes = std::make_shared<const std::vector<uint8_t>>(std::move(packed));
  cache.emplace(std::move(key), bytes);
  return Status::ok();
}

Status StepRouter::knobStruct(const std::vector<std::string> &overrides,
                              std::vector<uint8_t> &bytes) const {
  std::shared_ptr<const std::vector<uint8_t>> packed;
  Status status = knobsFor(0, overrides, packed);
  bytes = packed ? *packed : std::vector<uint8_t>();
  return status;
}

namespace {
/// `knobs` followed by the per-layer overrides of MoE layer `moeLayer` (`layerKnobs`
/// empty: `knobs` alone); false when per-layer knobs are set and the layer has none.
bool knobsOfLayer(const std::vector<std::string> &knobs,
                  const std::vector<std::vector<std::string>> &layerKnobs, int64_t moeLayer,
                  std::vector<std::string> &out) {
  out = knobs;
  if (layerKnobs.empty())
    return true;
  if (moeLayer < 0 || moeLayer >= static_cast<int64_t>(layerKnobs.size()))
    return false;
  const std::vector<std::string> &own = layerKnobs[static_cast<size_t>(moeLayer)];
  out.insert(out.end(), own.begin(), own.end());
  return true;
}
} // namespace

Status StepRouter::route(int64_t tokens, const void *logits, npy::DType logitsType,
                         const void *const *layer, const npy::DType *layerTypes,
                         int32_t *ids, float *weights, int64_t moeLayer) const {
  if (tokens < 0 || tokens > kMaxTokens)
    return fail(StatusCode::kInvalidArgument, std::to_string(tokens) +
                                                  " tokens is outside [0, " +
                                                  std::to_string(kMaxTokens) + "]");
  if (logitsType != npy::DType::F32 && logitsType != npy::DType::BF16 &&
      logitsType != npy::DType::F16)
    return fail(StatusCode::kInvalidArgument, std::string("logits of dtype ") +
                                                  npy::dtypeName(logitsType) +
                                                  " (float32, bfloat16 or float16)");
  const StepState *state = currentStepState().get();
  if (!state && !metadata.empty()) {
    std::vector<std::string> names;
    for (MetadataInput m : metadata)
      names.push_back(metadataName(m));
    return fail(StatusCode::kInvalidArgument,
                "the policy needs " + joined(names) +
                    " from the step's batch metadata, and none is set "
                    "(switchyard.set_batch_metadata / the engine integration sets it)");
  }
  size_t entry = entryFor(logitsType);
  auto perLayer = [&](const std::vector<std::string> &given,
                      const std::vector<std::vector<std::string>> &layerKnobs,
                      std::vector<std::string> &out) -> Status {
    if (knobsOfLayer(given, layerKnobs, moeLayer, out))
      return Status::ok();
    return fail(StatusCode::kInvalidKnob,
                "the step's knobs give one value per MoE layer for " +
                    std::to_string(layerKnobs.size()) + " layers, and this call is " +
                    (moeLayer < 0 ? std::string("of no layer (the op's layer is -1)")
                                  : "of MoE layer " + std::to_string(moeLayer)));
  };
  std::vector<std::string> knobs;
  if (state) {
    Status status = perLayer(state->knobs, state->layerKnobs, knobs);
    if (!status.isOk())
      return status;
  }
  if (!state || state->groups.empty())
    return runRows(entry, tokens, logits, logitsType, layer, layerTypes, state, nullptr,
                   knobs, ids, weights);
  // Requests that set different knobs: each group is a batch of its own; rows in no
  // group (padding) take the step's knobs.
  std::vector<uint8_t> covered(static_cast<size_t>(tokens), 0);
  for (const StepState::KnobGroup &group : state->groups) {
    for (int64_t row : group.rows) {
      if (row < 0 || row >= tokens)
        return fail(StatusCode::kInvalidArgument,
                    "a knob group names token row " + std::to_string(row) + " of a " +
                        std::to_string(tokens) + "-token batch");
      covered[static_cast<size_t>(row)] = 1;
    }
    std::vector<std::string> groupKnobs;
    Status status =
        group.pinned ? Status::ok() : perLayer(group.knobs, group.layerKnobs, groupKnobs);
    if (!status.isOk())
      return status;
    status = group.pinned ? routePinned(tokens, logits, logitsType, layer, layerTypes,
                                        state, group.rows, ids, weights)
                          : runRows(entry, tokens, logits, logitsType, layer, layerTypes,
                                    state, &group.rows, groupKnobs, ids, weights);
    if (!status.isOk())
      return status;
  }
  std::vector<int64_t> rest;
  for (int64_t t = 0; t < tokens; ++t)
    if (!covered[static_cast<size_t>(t)])
      rest.push_back(t);
  if (rest.empty())
    return Status::ok();
  return runRows(entry, tokens, logits, logitsType, layer, layerTypes, state, &rest, knobs,
                 ids, weights);
}

Status StepRouter::attachPinned(const StepRouter *router) {
  pin = nullptr;
  pinLayers.clear();
  if (!router)
    return Status::ok();
  if (router->topK() != k || router->experts() != numExperts ||
      router->logitsWidth() != width)
    return fail(StatusCode::kInvalidArgument,
                "the pinned router " + router->label() + " routes " +
                    std::to_string(router->experts()) + " experts, top-" +
                    std::to_string(router->topK()) + "; this one " +
                    std::to_string(numExperts) + ", top-" + std::to_string(k));
  if (!router->metadataInputs().empty())
    return fail(StatusCode::kInvalidArgument,
                "the pinned router " + router->label() +
                    " reads the step's batch metadata; the model's own routing does not");
  for (const std::string &name : router->layerInputs()) {
    auto found = std::find(layerNames.begin(), layerNames.end(), name);
    if (found == layerNames.end())
      return fail(StatusCode::kInvalidArgument,
                  "the pinned router " + router->label() + " takes layer input '" + name +
                      "', which this router is not given (given: " + joined(layerNames) +
                      ")");
    pinLayers.push_back(static_cast<size_t>(found - layerNames.begin()));
  }
  pin = router;
  return Status::ok();
}

Status StepRouter::routePinned(int64_t tokens, const void *logits, npy::DType logitsType,
                               const void *const *layer, const npy::DType *layerTypes,
                               const StepState *state, const std::vector<int64_t> &rows,
                               int32_t *ids, float *weights) const {
  if (!pin)
    return fail(StatusCode::kInvalidArgument,
                "a request asks for the model's own routing (switchyard.route = "
                "\"model\"), and this router was bound without a pinned router");
  std::array<const void *, kMaxInputs> pinLayer{};
  std::array<npy::DType, kMaxInputs> pinTypes{};
  for (size_t i = 0; i < pinLayers.size(); ++i) {
    pinLayer[i] = layer[pinLayers[i]];
    pinTypes[i] = layerTypes[pinLayers[i]];
  }
  static const std::vector<std::string> noKnobs;
  return pin->runRows(pin->entryFor(logitsType), tokens, logits, logitsType,
                      pinLayer.data(), pinTypes.data(), state, &rows, noKnobs, ids,
                      weights);
}

Status StepRouter::runRows(size_t entry, int64_t tokens, const void *logits,
                           npy::DType logitsType, const void *const *layer,
                           const npy::DType *layerTypes, const StepState *state,
                           const std::vector<int64_t> *rows,
                           const std::vector<std::string> &knobs, int32_t *ids,
                           float *weights) const {
  std::shared_ptr<const std::vector<uint8_t>> knobBytes;
  Status status = knobsFor(entry, knobs, knobBytes);
  if (!status.isOk())
    return status;
  const int64_t count = rows ? static_cast<int64_t>(rows->size()) : tokens;
  RowScratch &scratch = rowScratch();
  std::array<const void *, kMaxInputs> inputs{};
  std::array<npy::DType, kMaxInputs> types{};
  std::array<int64_t, kMaxInputs> scalars{};
  size_t slot = 0;
  const size_t rowBytes = static_cast<size_t>(width) * npy::dtypeSize(logitsType);
  if (rows) {
    scratch.logits.resize(static_cast<size_t>(count) * rowBytes);
    for (int64_t r = 0; r < count; ++r)
      std::memcpy(scratch.logits.data() + static_cast<size_t>(r) * rowBytes,
                  static_cast<const uint8_t *>(logits) +
                      static_cast<size_t>((*rows)[static_cast<size_t>(r)]) * rowBytes,
                  rowBytes);
    inputs[slot] = scratch.logits.data();
  } else {
    inputs[slot] = logits;
  }
  types[slot++] = logitsType;
  for (size_t i = 0; i < layerNames.size(); ++i, ++slot) {
    inputs[slot] = layer[i];
    types[slot] = layerTypes[i];
  }
  for (MetadataInput m : metadata) {
    if (m == MetadataInput::Phase) {
      if (!state->phase)
        return fail(StatusCode::kInvalidArgument,
                    "the step's batch metadata has no 'phase'");
      scalars[slot] = *state->phase;
      inputs[slot] = &scalars[slot];
      types[slot++] = npy::DType::I64;
      continue;
    }
    std::vector<int32_t> &buffer = scratch.metadata[static_cast<size_t>(m)];
    const std::optional<std::vector<int32_t>> &given = *perToken(*state, m);
    if (!given) {
      if (!state->warmup)
        return fail(StatusCode::kInvalidArgument,
                    std::string("the step's batch metadata has no '") + metadataName(m) +
                        "'");
      // A warm-up step: one request, positions 0..T-1, no drafts.
      buffer.assign(static_cast<size_t>(count), 0);
      if (m == MetadataInput::Positions)
        for (int64_t t = 0; t < count; ++t)
          buffer[static_cast<size_t>(t)] = static_cast<int32_t>(t);
      inputs[slot] = buffer.data();
    } else if (static_cast<int64_t>(given->size()) != tokens) {
      return fail(StatusCode::kInvalidArgument,
                  std::string("metadata '") + metadataName(m) + "' has " +
                      std::to_string(given->size()) + " entries for " +
                      std::to_string(tokens) + " tokens (one per token)");
    } else if (rows) {
      buffer.resize(static_cast<size_t>(count));
      for (int64_t r = 0; r < count; ++r)
        buffer[static_cast<size_t>(r)] =
            (*given)[static_cast<size_t>((*rows)[static_cast<size_t>(r)])];
      inputs[slot] = buffer.data();
    } else {
      inputs[slot] = given->data();
    }
    types[slot++] = npy::DType::I32;
  }
  int32_t *outIds = ids;
  float *outWeights = weights;
  if (rows) {
    scratch.ids.resize(static_cast<size_t>(count * k));
    scratch.weights.resize(static_cast<size_t>(count * k));
    outIds = scratch.ids.data();
    outWeights = scratch.weights.data();
  }
  void *results[2] = {outIds, outWeights};
  status = entries[entry].call->run(count, inputs.data(), types.data(), results,
                                    knobBytes ? knobBytes->data() : nullptr);
  if (!status.isOk())
    return fail(status.code(), status.message());
  fillEmptySlots(outIds, outWeights, count, k, numExperts);
  if (rows)
    for (int64_t r = 0; r < count; ++r) {
      size_t to = static_cast<size_t>((*rows)[static_cast<size_t>(r)] * k);
      std::memcpy(ids + to, outIds + r * k, static_cast<size_t>(k) * sizeof(int32_t));
      std::memcpy(weights + to, outWeights + r * k, static_cast<size_t>(k) * sizeof(float));
    }
  return Status::ok();
}

namespace {
std::atomic<StepRecorder> recorderHook{nullptr};
} // namespace

void setStepRecorder(StepRecorder recorder) { recorderHook.store(recorder); }
StepRecorder stepRecorder() { return recorderHook.load(std::memory_order_relaxed); }

namespace {
struct RouterTable {
  std::mutex mutex;
  std::deque<std::shared_ptr<const StepRouter>> routers;
};
RouterTable &routerTable() {
  // Never destroyed: an engine's threads may still route while the process exits.
  static RouterTable *table = new RouterTable;
  return *table;
}
} // namespace

int64_t registerStepRouter(std::shared_ptr<const StepRouter> router) {
  RouterTable &table = routerTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.routers.push_back(std::move(router));
  return static_cast<int64_t>(table.routers.size()) - 1;
}

const StepRouter *stepRouter(int64_t handle) {
  RouterTable &table = routerTable();
  std::lock_guard<std::mutex> lock(table.mutex);
  if (handle < 0 || handle >= static_cast<int64_t>(table.routers.size()))
    return nullptr;
  return table.routers[static_cast<size_t>(handle)].get();
}

} // namespace switchyard::runtime
