//===- StepBinding.cpp - step routers and the step's state, from Python ---===//
//
// The Python side of runtime::StepRouter: routers are registered once (their handle
// is what the torch op switchyard::route_step takes), an eager call routes through the
// same C++ as the op, and the engine integration sets the thread's StepState (batch
// metadata and knobs) once per forward step.
//
//===----------------------------------------------------------------------===//
#include "Bindings.h"

#include <optional>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

namespace switchyard::python {

int64_t registerStepRouter(std::vector<runtime::StepRouter::Entry> entries,
                           const std::vector<std::string> &layerInputs, int64_t experts,
                           const std::vector<std::string> &knobs, const std::string &label,
                           std::vector<runtime::CudaStepRouter::Entry> cuda,
                           const void *deviceKnobs, const void *devicePhase,
                           int64_t pinned) {
  runtime::Status status;
  std::unique_ptr<runtime::StepRouter> router = runtime::StepRouter::create(
      std::move(entries), layerInputs, experts, knobs, label, status);
  if (!router)
    fail(status);
  if (pinned >= 0) {
    const runtime::StepRouter *pin = runtime::stepRouter(pinned);
    if (!pin)
      fail("no step router has handle " + std::to_string(pinned) + " (the pinned router)");
    status = router->attachPinned(pin);
    if (!status.isOk())
      fail(status);
  }
  if (!cuda.empty()) {
    std::unique_ptr<runtime::CudaStepRouter> gpu =
        runtime::CudaStepRouter::create(std::move(cuda), router->layerInputs(), deviceKnobs,
                                        devicePhase, router->label(), status);
    if (!gpu)
      fail(status);
    router->attachCuda(std::move(gpu));
  }
  return runtime::registerStepRouter(std::move(router));
}

namespace {

using Int32Array = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Int64Array = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

/// The thread's step state, as a Python object (kept to restore a nesting's outer one).
struct StepStateRef {
  std::shared_ptr<const runtime::StepState> state;
};

const runtime::StepRouter &routerOf(int64_t handle) {
  const runtime::StepRouter *router = runtime::stepRouter(handle);
  if (!router)
    fail("no step router has handle " + std::to_string(handle));
  return *router;
}

std::optional<std::vector<int32_t>> copied(const std::optional<Int32Array> &array) {
  if (!array)
    return std::nullopt;
  return std::vector<int32_t>(array->data(), array->data() + array->shape(0));
}

StepStateRef
makeState(const std::optional<Int32Array> &requestIds,
          const std::optional<Int32Array> &positions,
          const std::optional<Int32Array> &draftMask, std::optional<int64_t> phase,
          bool warmup, const std::vector<std::string> &knobs,
          const std::vector<std::tuple<Int64Array, std::vector<std::string>, bool,
                                       std::vector<std::vector<std::string>>>> &groups,
          const std::vector<std::vector<std::string>> &layerKnobs) {
  auto state = std::make_shared<runtime::StepState>();
  state->requestIds = copied(requestIds);
  state->positions = copied(positions);
  state->draftMask = copied(draftMask);
  state->phase = phase;
  state->warmup = warmup;
  state->knobs = knobs;
  state->layerKnobs = layerKnobs;
  for (const auto &[rows, settings, pinned, perLayer] : groups)
    state->groups.push_back({std::vector<int64_t>(rows.data(), rows.data() + rows.shape(0)),
                             settings, pinned, perLayer});
  return {std::move(state)};
}

void route(const runtime::StepRouter &router, int64_t tokens, const void *logits,
           npy::DType logitsType, const void *const *layer, const npy::DType *layerTypes,
           uintptr_t ids, uintptr_t weights, int64_t moeLayer) {
  runtime::Status status;
  {
    // Small batches keep the GIL: releasing it costs more than the call.
    std::optional<nb::gil_scoped_release> release;
    if (tokens >= 64)
      release.emplace();
    status = router.route(tokens, logits, logitsType, layer, layerTypes,
                          reinterpret_cast<int32_t *>(ids),
                          reinterpret_cast<float *>(weights), moeLayer);
  }
  if (!status.isOk())
    fail(status);
}

/// The Python callable the step recorder calls (set_step_recorder), never freed: the
/// runtime may call it until the process exits.
nb::object *recorderCallable = nullptr;

template <typename T>
nb::ndarray<nb::numpy, T> view(const void *data, int64_t rows, int64_t cols) {
  size_t shape[2] = {static_cast<size_t>(rows), static_cast<size_t>(cols)};
  return nb::ndarray<nb::numpy, T>(const_cast<void *>(data), 2, shape, nb::handle());
}

/// runtime::StepRecorder: the call's memory as NumPy views (valid during the call: the
/// callable copies what it keeps); float32 logits as they are, bfloat16 / float16 as
/// their uint16 bit patterns (the last argument names the dtype). A Python error is
/// reported as unraisable, never raised into the op.
void recordInPython(const runtime::RecordedCall &call) {
  nb::gil_scoped_acquire gil;
  if (!recorderCallable || !recorderCallable->is_valid())
    return;
  try {
    nb::object logits =
        call.logitsType == npy::DType::F32
            ? nb::cast(view<float>(call.logits, call.tokens, call.width))
            : nb::cast(view<uint16_t>(call.logits, call.tokens, call.width));
    (*recorderCallable)(call.layer, logits, view<int32_t>(call.ids, call.tokens, call.k),
                        view<float>(call.weights, call.tokens, call.k),
                        npy::dtypeName(call.logitsType));
  } catch (nb::python_error &error) {
    error.discard_as_unraisable("switchyard's routing-trace recorder");
  } catch (const std::exception &error) {
    PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "switchyard's routing-trace recorder: %s",
                     error.what());
  }
}

} // namespace

void bindSteps(nb::module_ &m) {
  m.def(
      "set_step_recorder",
      [](nb::object callable) {
        if (callable.is_none()) {
          runtime::setStepRecorder(nullptr);
          return;
        }
        if (!recorderCallable)
          recorderCallable = new nb::object();
        *recorderCallable = callable;
        runtime::setStepRecorder(&recordInPython);
      },
      nb::arg("recorder").none(),
      "Records the routing op's calls with a layer >= 0: recorder(layer, logits, ids, "
      "weights, logits_dtype), NumPy views valid during the call, 16-bit logits as their "
      "uint16 bits (None: stop).");
  nb::class_<StepStateRef>(m, "StepState");
  m.def("make_step_state", &makeState, nb::arg("request_ids").none(),
        nb::arg("positions").none(), nb::arg("draft_mask").none(), nb::arg("phase").none(),
        nb::arg("warmup"), nb::arg("knobs"), nb::arg("groups"),
        nb::arg("layer_knobs") = std::vector<std::vector<std::string>>(),
        "The batch metadata and knobs of a step (runtime::StepState; arrays copied).");
  m.def(
      "set_step_state",
      [](std::optional<const StepStateRef *> ref) {
        runtime::setStepState(ref && *ref ? (*ref)->state : nullptr);
      },
      nb::arg("state").none(), "Sets (None: clears) the calling thread's step state.");
  m.def(
      "step_router_info",
      [](int64_t handle) {
        const runtime::StepRouter &router = routerOf(handle);
        return std::make_tuple(router.topK(), router.layerInputs(), router.logitsWidth());
      },
      nb::arg("handle"),
      "(top_k, the layer inputs it binds, the logits' width) of a step router.");
  m.def(
      "step_route",
      [](int64_t handle, int64_t tokens, uintptr_t logits, npy::DType dtype,
         const std::vector<uintptr_t> &layer, const std::vector<npy::DType> &layerTypes,
         uintptr_t ids, uintptr_t weights, int64_t moeLayer) {
        const runtime::StepRouter &router = routerOf(handle);
        if (layer.size() != router.layerInputs().size() ||
            layerTypes.size() != layer.size())
          fail(router.label() + ": " + std::to_string(layer.size()) +
               " layer tensors for " + std::to_string(router.layerInputs().size()) +
               " layer inputs");
        route(router, tokens, reinterpret_cast<const void *>(logits), dtype,
              reinterpret_cast<const void *const *>(layer.data()), layerTypes.data(), ids,
              weights, moeLayer);
      },
      nb::arg("handle"), nb::arg("tokens"), nb::arg("logits"), nb::arg("dtype"),
      nb::arg("layer"), nb::arg("layer_dtypes"), nb::arg("ids"), nb::arg("weights"),
      nb::arg("moe_layer") = -1,
      "Routes one layer's call (raw pointers; results written in place).");
  m.def(
      "set_device_step",
      [](uintptr_t requestIds, uintptr_t positions, uintptr_t draftMask, bool phase,
         bool knobGroups, uintptr_t knobGroup) {
        runtime::DeviceStep step;
        step.requestIds = reinterpret_cast<const void *>(requestIds);
        step.positions = reinterpret_cast<const void *>(positions);
        step.draftMask = reinterpret_cast<const void *>(draftMask);
        step.phase = phase;
        step.knobGroups = knobGroups;
        step.knobGroup = reinterpret_cast<const void *>(knobGroup);
        runtime::setDeviceStep(step);
      },
      nb::arg("request_ids"), nb::arg("positions"), nb::arg("draft_mask"),
      nb::arg("phase") = false, nb::arg("knob_groups") = false, nb::arg("knob_group") = 0,
      "Sets the calling thread's device metadata (runtime::DeviceStep): device pointers "
      "(0: not given) to int32 per-token buffers the runner writes before each step; "
      "whether the step's phase was written into the routers' device phase; whether the "
      "step has per-request knob groups, and each token's group (int32 per token, for "
      "launchers compiled with knob groups).");
  m.def(
      "step_router_cuda_info",
      [](int64_t handle, int64_t tokens,
         npy::DType dtype) -> std::optional<std::pair<int64_t, size_t>> {
        const runtime::CudaStepRouter *gpu = routerOf(handle).cuda();
        if (!gpu)
          return std::nullopt;
        return std::make_pair(gpu->workspaceBytes(tokens, dtype),
                              gpu->knobStructBytes() *
                                  size_t(std::max<int64_t>(gpu->knobGroups(), 1)));
      },
      nb::arg("handle"), nb::arg("tokens"), nb::arg("dtype"),
      "(workspace bytes for `tokens`, the bytes of the knob memory: one knob struct, or "
      "one per knob group) of a step router's GPU launchers; None when it was bound for "
      "the host only.");
  m.def(
      "step_route_cuda",
      [](int64_t handle, int64_t tokens, uintptr_t logits, npy::DType dtype,
         const std::vector<uintptr_t> &layer, uintptr_t ids, uintptr_t weights,
         uintptr_t workspace, uintptr_t stream) {
        const runtime::StepRouter &router = routerOf(handle);
        const runtime::CudaStepRouter *gpu = router.cuda();
        if (!gpu)
          fail(router.label() + ": bound for the host only (no GPU launcher)");
        if (layer.size() != router.layerInputs().size())
          fail(router.label() + ": " + std::to_string(layer.size()) +
               " layer tensors for " + std::to_string(router.layerInputs().size()) +
               " layer inputs");
        runtime::Status status;
        {
          nb::gil_scoped_release release;
          status = gpu->route(
              tokens, reinterpret_cast<const void *>(logits), dtype,
              reinterpret_cast<const void *const *>(layer.data()),
              reinterpret_cast<int32_t *>(ids), reinterpret_cast<float *>(weights),
              reinterpret_cast<void *>(workspace), reinterpret_cast<void *>(stream));
        }
        if (!status.isOk())
          fail(status);
      },
      nb::arg("handle"), nb::arg("tokens"), nb::arg("logits"), nb::arg("dtype"),
      nb::arg("layer"), nb::arg("ids"), nb::arg("weights"), nb::arg("workspace"),
      nb::arg("stream"),
      "Launches one layer's routing on a CUDA stream (device pointers; the metadata from "
      "set_device_step, the knobs from the router's device knob struct).");
}

} // namespace switchyard::python
