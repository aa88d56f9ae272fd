//===- StepRouterOps.cpp - step routers bound from torch, no Python -------===//
//
// The ops that make libswitchyard_ops.so usable on its own: a program with torch (any
// CPython, or none: libtorch from C++) loads policies compiled ahead of time — the
// artifact directories of moe-compile / switchyard.compile — as step routers, sets the
// step's device metadata and packs knob structs, with no Switchyard Python extension:
//
//   switchyard::load_step_router(str directory, str entry, str cuda_directory,
//       str cuda_entry, str[] layer_inputs, int experts, str[] knobs, str label,
//       Tensor? device_knobs, Tensor? device_phase) -> int
//   switchyard::knob_struct(int handle, str[] knobs) -> Tensor         (uint8, CPU)
//   switchyard::set_device_step(Tensor? request_ids, Tensor? positions,
//       Tensor? draft_mask, bool phase, bool knob_groups, Tensor? knob_group=None) -> ()
//
// The handle is what switchyard::route_step takes. The device knob struct and phase are
// the caller's CUDA tensors (kept alive by the caller): writing them before a CUDA
// graph's replay sets that replay's knobs and phase.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/HostPolicy.h"
#include "switchyard/Runtime/StepRouter.h"

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using torch::stable::Tensor;
namespace runtime = switchyard::runtime;

void check(const runtime::Status &status) {
  if (!status.isOk())
    throw std::runtime_error(status.message());
}

const void *pointerOf(const std::optional<Tensor> &tensor) {
  return tensor ? tensor->data_ptr() : nullptr;
}

int64_t loadStepRouter(std::string directory, std::string entry, std::string cudaDirectory,
                       std::string cudaEntry, std::vector<std::string> layerInputs,
                       int64_t experts, std::vector<std::string> knobs, std::string label,
                       std::optional<Tensor> deviceKnobs,
                       std::optional<Tensor> devicePhase) {
  runtime::Status status;
  std::shared_ptr<const runtime::HostPolicy> host =
      runtime::HostPolicy::load(directory, entry, status);
  check(status);
  std::unique_ptr<runtime::StepRouter> router =
      runtime::StepRouter::create({{host}}, layerInputs, experts, knobs, label, status);
  check(status);
  if (!cudaDirectory.empty()) {
    std::shared_ptr<const runtime::CudaPolicy> gpu =
        runtime::CudaPolicy::load(cudaDirectory, cudaEntry, status);
    check(status);
    if (deviceKnobs && !deviceKnobs->is_cuda())
      throw std::runtime_error(router->label() + ": device_knobs is not a CUDA tensor");
    if (devicePhase && !devicePhase->is_cuda())
      throw std::runtime_error(router->label() + ": device_phase is not a CUDA tensor");
    std::unique_ptr<runtime::CudaStepRouter> cuda = runtime::CudaStepRouter::create(
        {{gpu}}, router->layerInputs(), pointerOf(deviceKnobs), pointerOf(devicePhase),
        router->label(), status);
    check(status);
    if (deviceKnobs && static_cast<size_t>(deviceKnobs->numel()) < cuda->knobStructBytes())
      throw std::runtime_error(router->label() + ": device_knobs holds " +
                               std::to_string(deviceKnobs->numel()) + " bytes, the knob " +
                               "struct " + std::to_string(cuda->knobStructBytes()));
    router->attachCuda(std::move(cuda));
  }
  return runtime::registerStepRouter(std::move(router));
}

Tensor knobStruct(int64_t handle, std::vector<std::string> knobs) {
  const runtime::StepRouter *router = runtime::stepRouter(handle);
  if (!router)
    throw std::runtime_error("switchyard::knob_struct: no step router has handle " +
                             std::to_string(handle));
  std::vector<uint8_t> bytes;
  check(router->knobStruct(knobs, bytes));
  int64_t size = static_cast<int64_t>(bytes.size()), stride = 1;
  AtenTensorHandle out = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(
      1, &size, &stride, aoti_torch_dtype_uint8(), aoti_torch_device_type_cpu(), 0, &out));
  Tensor tensor(out);
  if (!bytes.empty())
    std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  return tensor;
}

void setDeviceStep(std::optional<Tensor> requestIds, std::optional<Tensor> positions,
                   std::optional<Tensor> draftMask, bool phase, bool knobGroups,
                   std::optional<Tensor> knobGroup) {
  for (const std::optional<Tensor> *t : {&requestIds, &positions, &draftMask, &knobGroup})
    if (*t && (!(*t)->is_cuda() || !(*t)->is_contiguous()))
      throw std::runtime_error("switchyard::set_device_step: the metadata must be "
                               "contiguous CUDA tensors (int32, one value per token)");
  runtime::DeviceStep step;
  step.requestIds = pointerOf(requestIds);
  step.positions = pointerOf(positions);
  step.draftMask = pointerOf(draftMask);
  step.phase = phase;
  step.knobGroups = knobGroups;
  step.knobGroup = pointerOf(knobGroup);
  runtime::setDeviceStep(step);
}

} // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(switchyard, m) {
  m.def("load_step_router(str directory, str entry, str cuda_directory, str cuda_entry, "
        "str[] layer_inputs, int experts, str[] knobs, str label, Tensor? device_knobs, "
        "Tensor? device_phase) -> int");
  m.def("knob_struct(int handle, str[] knobs) -> Tensor");
  m.def("set_device_step(Tensor? request_ids, Tensor? positions, Tensor? draft_mask, "
        "bool phase, bool knob_groups, Tensor? knob_group=None) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(switchyard, CompositeExplicitAutograd, m) {
  m.impl("load_step_router", TORCH_BOX(&loadStepRouter));
  m.impl("knob_struct", TORCH_BOX(&knobStruct));
  m.impl("set_device_step", TORCH_BOX(&setDeviceStep));
}
