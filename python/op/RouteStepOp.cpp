//===- RouteStepOp.cpp - torch's switchyard::route_step, in C++ -----------===//
//
// The routing op engines call once per MoE layer and step:
//
//   switchyard::route_step(Tensor logits, Tensor[] layer_inputs, int handle,
//                          int layer=-1)
//       -> (Tensor topk_weights float32 [T, k], Tensor topk_ids int32 [T, k])
//
// `handle` names a runtime::StepRouter bound before tracing (a constant in a compiled
// graph); a `layer` >= 0 is the MoE layer's index: it picks the layer's knobs when the
// step gives one value per layer, and the call is handed to the runtime's step recorder
// when a routing-trace capture has set one. The CPU kernel calls it
// directly: no Python, no nanobind, no name or shape work per call; the step's metadata and
// knobs are the thread's runtime::StepState. The CUDA kernel launches the router's GPU
// launcher (runtime::CudaStepRouter) on torch's current stream with outputs and workspace
// from torch's caching allocator: no host synchronisation, nothing but pointers that a
// CUDA graph would freeze (the knobs and the per-token metadata are device memory the
// kernels read; see CudaStepRouter.h). Built against PyTorch's stable ABI
// (TORCH_TARGET_VERSION in CMake: the oldest torch supported), so one build loads into any
// torch from that version on and any CPython; torch's CUDA library is looked up when a
// CUDA call first needs it, so the library links libtorch_cpu only. The fake (meta) kernel
// is registered from Python (switchyard/_step.py): it needs symbolic token counts.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Runtime/StepRouter.h"

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
namespace npy = switchyard::npy;

/// Errors reach Python as RuntimeError with this message (the op's own words, without
/// the source location STD_TORCH_CHECK would add).
void check(bool condition, const std::string &message) {
  if (!condition)
    throw std::runtime_error(message);
}

std::string shapeText(const Tensor &tensor) {
  std::string text = "[";
  for (int64_t d = 0; d < tensor.dim(); ++d)
    text += (d ? ", " : "") + std::to_string(tensor.size(d));
  return text + "]";
}

/// The runtime's element type of a tensor the op reads (int32: the placement's
/// tables); false for any other.
bool runtimeDType(const Tensor &tensor, npy::DType &dtype) {
  switch (tensor.scalar_type()) {
  case ScalarType::Int:
    dtype = npy::DType::I32;
    return true;
  case ScalarType::Float:
    dtype = npy::DType::F32;
    return true;
  case ScalarType::BFloat16:
    dtype = npy::DType::BF16;
    return true;
  case ScalarType::Half:
    dtype = npy::DType::F16;
    return true;
  default:
    return false;
  }
}

/// An uninitialised contiguous tensor [rows, cols] on a device (the caching allocator's
/// memory; no dispatcher round trip).
Tensor emptyOn(int32_t deviceType, int32_t deviceIndex, int64_t rows, int64_t cols,
               int32_t dtype) {
  int64_t sizes[2] = {rows, cols};
  int64_t strides[2] = {cols, 1};
  AtenTensorHandle handle = nullptr;
  TORCH_ERROR_CODE_CHECK(
      aoti_torch_empty_strided(2, sizes, strides, dtype, deviceType, deviceIndex, &handle));
  return Tensor(handle);
}

Tensor emptyCpu(int64_t rows, int64_t cols, int32_t dtype) {
  return emptyOn(aoti_torch_device_type_cpu(), 0, rows, cols, dtype);
}

std::tuple<Tensor, Tensor> routeStepCpu(Tensor logits, std::vector<Tensor> layerInputs,
                                        int64_t handle, int64_t layer) {
  const switchyard::runtime::StepRouter *router = switchyard::runtime::stepRouter(handle);
  check(router != nullptr, "switchyard::route_step: no step router has handle " +
                               std::to_string(handle) +
                               " (bind one with switchyard.vllm.bind)");
  const std::string &label = router->label();
  check(logits.dim() == 2 && logits.size(1) == router->logitsWidth(),
        label + ": logits of shape " + shapeText(logits) + ", expected [tokens, " +
            std::to_string(router->logitsWidth()) + "]");
  check(logits.is_cpu(), label + ": logits not on the CPU (the kernel this op runs)");
  npy::DType logitsType;
  check(runtimeDType(logits, logitsType),
        label + ": logits must be float32, bfloat16 or float16");
  if (!logits.is_contiguous())
    logits = torch::stable::contiguous(logits);
  check(layerInputs.size() == router->layerInputs().size(),
        label + ": " + std::to_string(layerInputs.size()) + " layer tensors for " +
            std::to_string(router->layerInputs().size()) + " layer inputs");
  // The layer's tensors as the entry reads them: float32 / bfloat16 / float16 or
  // int32, contiguous (a converted copy lives until the call returns).
  std::vector<const void *> layerData(layerInputs.size());
  std::vector<npy::DType> layerTypes(layerInputs.size());
  for (size_t i = 0; i < layerInputs.size(); ++i) {
    Tensor &tensor = layerInputs[i];
    check(tensor.is_cpu(),
          label + ": layer input '" + router->layerInputs()[i] + "' is not on the CPU");
    if (!runtimeDType(tensor, layerTypes[i])) {
      bool integral = tensor.scalar_type() == ScalarType::Long ||
                      tensor.scalar_type() == ScalarType::Short ||
                      tensor.scalar_type() == ScalarType::Char ||
                      tensor.scalar_type() == ScalarType::Byte;
      tensor = torch::stable::to(tensor, integral ? ScalarType::Int : ScalarType::Float);
      layerTypes[i] = integral ? npy::DType::I32 : npy::DType::F32;
    }
    if (!tensor.is_contiguous())
      tensor = torch::stable::contiguous(tensor);
    layerData[i] = tensor.data_ptr();
  }
  const int64_t tokens = logits.size(0), k = router->topK();
  Tensor ids = emptyCpu(tokens, k, aoti_torch_dtype_int32());
  Tensor weights = emptyCpu(tokens, k, aoti_torch_dtype_float32());
  switchyard::runtime::Status status =
      router->route(tokens, logits.data_ptr(), logitsType, layerData.data(),
                    layerTypes.data(), static_cast<int32_t *>(ids.data_ptr()),
                    static_cast<float *>(weights.data_ptr()), layer);
  check(status.isOk(), status.message());
  if (layer >= 0)
    if (switchyard::runtime::StepRecorder record = switchyard::runtime::stepRecorder())
      record({layer, tokens, router->logitsWidth(), k, logits.data_ptr(), logitsType,
              static_cast<const int32_t *>(ids.data_ptr()),
              static_cast<const float *>(weights.data_ptr())});
  return {weights, ids};
}

/// torch's current CUDA stream of `device` (a cudaStream_t). The shim function is in
/// torch's CUDA library, loaded by then (the tensors are CUDA tensors).
void *currentCudaStream(int32_t device) {
  using Getter = AOTITorchError (*)(int32_t, void **);
  static Getter get =
      reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "aoti_torch_get_current_cuda_stream"));
  check(get != nullptr, "switchyard::route_step: torch's CUDA library does not provide "
                        "aoti_torch_get_current_cuda_stream (a torch built without CUDA?)");
  void *stream = nullptr;
  TORCH_ERROR_CODE_CHECK(get(device, &stream));
  return stream;
}

std::tuple<Tensor, Tensor> routeStepCuda(Tensor logits, std::vector<Tensor> layerInputs,
                                         int64_t handle, int64_t layer) {
  (void)layer; // routing-trace capture records host calls only
  const switchyard::runtime::StepRouter *router = switchyard::runtime::stepRouter(handle);
  check(router != nullptr, "switchyard::route_step: no step router has handle " +
                               std::to_string(handle) +
                               " (bind one with switchyard.vllm.bind)");
  const std::string &label = router->label();
  const switchyard::runtime::CudaStepRouter *gpu = router->cuda();
  check(gpu != nullptr, label + ": logits on a CUDA device, but the policy was bound for "
                                "the host (bind it with target=\"cuda\")");
  check(logits.dim() == 2 && logits.size(1) == router->logitsWidth(),
        label + ": logits of shape " + shapeText(logits) + ", expected [tokens, " +
            std::to_string(router->logitsWidth()) + "]");
  npy::DType logitsType;
  check(runtimeDType(logits, logitsType) && logitsType != npy::DType::I32,
        label + ": logits must be float32, bfloat16 or float16");
  if (!logits.is_contiguous())
    logits = torch::stable::contiguous(logits);
  const int32_t device = logits.get_device_index();
  check(layerInputs.size() == router->layerInputs().size(),
        label + ": " + std::to_string(layerInputs.size()) + " layer tensors for " +
            std::to_string(router->layerInputs().size()) + " layer inputs");
  std::vector<const void *> layerData(layerInputs.size());
  for (size_t i = 0; i < layerInputs.size(); ++i) {
    Tensor &tensor = layerInputs[i];
    check(tensor.is_cuda() && tensor.get_device_index() == device,
          label + ": layer input '" + router->layerInputs()[i] +
              "' is not on the logits' device");
    // The GPU entry reads float32 (int32 for the placement's tables), contiguous.
    npy::DType type;
    bool integral = runtimeDType(tensor, type) ? type == npy::DType::I32
                                               : tensor.scalar_type() != ScalarType::Float;
    ScalarType wanted = integral ? ScalarType::Int : ScalarType::Float;
    if (tensor.scalar_type() != wanted)
      tensor = torch::stable::to(tensor, wanted);
    if (!tensor.is_contiguous())
      tensor = torch::stable::contiguous(tensor);
    layerData[i] = tensor.data_ptr();
  }
  const int64_t tokens = logits.size(0), k = router->topK();
  const int32_t cuda = aoti_torch_device_type_cuda();
  Tensor ids = emptyOn(cuda, device, tokens, k, aoti_torch_dtype_int32());
  Tensor weights = emptyOn(cuda, device, tokens, k, aoti_torch_dtype_float32());
  const int64_t bytes = gpu->workspaceBytes(tokens, logitsType);
  Tensor workspace =
      emptyOn(cuda, device, 1, bytes > 0 ? bytes : 1, aoti_torch_dtype_uint8());
  switchyard::runtime::Status status = gpu->route(
      tokens, logits.data_ptr(), logitsType, layerData.data(),
      static_cast<int32_t *>(ids.data_ptr()), static_cast<float *>(weights.data_ptr()),
      workspace.data_ptr(), currentCudaStream(device));
  check(status.isOk(), status.message());
  return {weights, ids};
}

} // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(switchyard, m) {
  m.def("route_step(Tensor logits, Tensor[] layer_inputs, int handle, int layer=-1) -> "
        "(Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(switchyard, CPU, m) {
  m.impl("route_step", TORCH_BOX(&routeStepCpu));
}

STABLE_TORCH_LIBRARY_IMPL(switchyard, CUDA, m) {
  m.impl("route_step", TORCH_BOX(&routeStepCuda));
}
