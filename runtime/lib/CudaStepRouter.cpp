//===- CudaStepRouter.cpp - a policy's GPU launcher bound for an engine ---===//
#include "switchyard/Runtime/CudaStepRouter.h"
#include "switchyard/Runtime/StepRouter.h"

#include <algorithm>

namespace switchyard::runtime {

namespace {
DeviceStep &threadDeviceStep() {
  thread_local DeviceStep step;
  return step;
}
} // namespace

void setDeviceStep(const DeviceStep &step) { threadDeviceStep() = step; }
const DeviceStep &currentDeviceStep() { return threadDeviceStep(); }

std::unique_ptr<CudaStepRouter>
CudaStepRouter::create(std::vector<Entry> entries,
                       const std::vector<std::string> &layerInputs, const void *deviceKnobs,
                       const void *devicePhase, const std::string &label, Status &status) {
  std::unique_ptr<CudaStepRouter> router(new CudaStepRouter);
  router->name = label;
  router->knobs = deviceKnobs;
  router->phase = devicePhase;
  auto invalid = [&](const std::string &message) {
    status = Status(StatusCode::kInvalidArgument, label + ": " + message);
    return nullptr;
  };
  if (entries.empty() || !entries.front().policy)
    return invalid("no GPU launcher to bind");
  for (Entry &entry : entries) {
    const Signature &sig = entry.policy->signature();
    Bound bound{entry.policy, entry.logits, {}};
    for (const Param &p : sig.params) {
      std::pair<Source, size_t> source{Source::Logits, 0};
      if (p.isOutput) {
        if (p.name != "topk_ids" && p.name != "topk_weights")
          return invalid("@" + sig.entry + " returns '" + p.name +
                         "', which the engine does not take (compile its GPU entry with "
                         "only the outputs topk_ids and topk_weights)");
        source.first = p.name == "topk_ids" ? Source::Ids : Source::Weights;
      } else if (p.name == "logits") {
        source.first = Source::Logits;
      } else if (auto layer = std::find(layerInputs.begin(), layerInputs.end(), p.name);
                 layer != layerInputs.end()) {
        source = {Source::Layer, size_t(layer - layerInputs.begin())};
      } else if (p.name == "knob_group") {
        if (!sig.knobGroups || p.dtype != DType::I32)
          return invalid("@" + sig.entry +
                         " reads 'knob_group' but was not compiled for "
                         "knob groups");
        source.first = Source::KnobGroup;
      } else if (std::optional<MetadataInput> m = metadataInput(p.inputName())) {
        source.first = *m == MetadataInput::RequestIds  ? Source::RequestIds
                       : *m == MetadataInput::Positions ? Source::Positions
                       : *m == MetadataInput::DraftMask ? Source::DraftMask
                                                        : Source::Phase;
        if (*m != MetadataInput::DraftMask && p.dtype != DType::I32)
          return invalid("@" + sig.entry + " reads '" + p.name + "' as " +
                         npy::dtypeName(p.dtype) + "; the device metadata are int32");
        if (*m == MetadataInput::Phase && !devicePhase)
          return invalid("@" + sig.entry +
                         " reads the phase: bind it with the device "
                         "memory that holds the step's phase");
      } else {
        return invalid("@" + sig.entry + " needs input '" + p.name +
                       "', which the engine does not give");
      }
      bound.params.push_back(source);
    }
    if (router->knobBytes == 0 && !sig.knobs.empty())
      router->knobBytes = KnobLayout(sig.knobs).size;
    if (&entry != &entries.front() && sig.knobGroups != router->groups)
      return invalid("its GPU entries differ in knob groups (" +
                     std::to_string(router->groups) + " and " +
                     std::to_string(sig.knobGroups) + "): compile them alike");
    router->groups = sig.knobGroups;
    router->entries.push_back(std::move(bound));
  }
  status = Status::ok();
  return router;
}

const CudaStepRouter::Bound &CudaStepRouter::entryFor(npy::DType logitsType) const {
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].logits == logitsType)
      return entries[i];
  return entries.front();
}

int64_t CudaStepRouter::workspaceBytes(int64_t tokens, npy::DType logitsType) const {
  return entryFor(logitsType).policy->workspaceBytes(tokens);
}

Status CudaStepRouter::route(int64_t tokens, const void *logits, npy::DType logitsType,
                             const void *const *layer, int32_t *ids, float *weights,
                             void *workspace, void *stream) const {
  const Bound &entry = entryFor(logitsType);
  if (logitsType != entry.logits)
    return {StatusCode::kInvalidArgument,
            name + ": logits of dtype " + npy::dtypeName(logitsType) +
                " on the GPU need an entry compiled to read them (--input-dtype "
                "logits=bf16 / f16) or float32 logits"};
  const DeviceStep &step = currentDeviceStep();
  if (step.knobGroups && !groups)
    return {StatusCode::kInvalidKnob,
            name + ": the step has per-request knob groups, and this GPU entry routes one "
                   "knob setting per launch (compile it with knob groups, or set the "
                   "knobs for the whole step)"};
  const size_t count = entry.params.size();
  // A small fixed-size array would do; the vector is what CudaPolicy::launch takes.
  thread_local std::vector<void *> buffers;
  buffers.assign(count, nullptr);
  for (size_t i = 0; i < count; ++i) {
    auto [source, slot] = entry.params[i];
    const void *pointer = nullptr;
    const char *missing = nullptr;
    switch (source) {
    case Source::Logits:
      pointer = logits;
      break;
    case Source::Layer:
      pointer = layer[slot];
      break;
    case Source::RequestIds:
      pointer = step.requestIds;
      missing = pointer ? nullptr : "request_ids";
      break;
    case Source::Positions:
      pointer = step.positions;
      missing = pointer ? nullptr : "positions";
      break;
    case Source::DraftMask:
      pointer = step.draftMask;
      missing = pointer ? nullptr : "draft_mask";
      break;
    case Source::Phase:
      pointer = phase;
      missing = step.phase ? nullptr : "phase";
      break;
    case Source::KnobGroup:
      pointer = step.knobGroup;
      missing = pointer ? nullptr : "knob_group";
      break;
    case Source::Ids:
      pointer = ids;
      break;
    case Source::Weights:
      pointer = weights;
      break;
    }
    if (missing)
      return {StatusCode::kInvalidArgument,
              name + ": the policy needs '" + missing +
                  "' from the step's device metadata, and none is set (the engine "
                  "integration sets it before the layers run)"};
    buffers[i] = const_cast<void *>(pointer);
  }
  Status status = entry.policy->launch(tokens, buffers, knobs, workspace, stream);
  if (!status.isOk())
    return {status.code(), name + ": " + status.message()};
  return Status::ok();
}

} // namespace switchyard::runtime
