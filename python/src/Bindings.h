//===- Bindings.h - the pieces of the _switchyard extension -----*- C++ -*-===//
//
// The nanobind extension over the runtime (no LLVM/MLIR): compiled policies through
// the policy cache, called on NumPy arrays or DLPack tensors without copies, and the
// MoE executor. Every error carries a runtime::StatusCode and the runtime's message, and
// is raised as the Python class python/switchyard/_errors.py registers for its code.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_PYTHON_BINDINGS_H
#define SWITCHYARD_PYTHON_BINDINGS_H

#include "switchyard/Runtime/Binding.h"
#include "switchyard/Runtime/Status.h"
#include "switchyard/Runtime/StepRouter.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace switchyard::python {

namespace nb = nanobind;

/// Raises the Python exception class registered for `code` (switchyard._errors maps
/// each runtime::StatusCode to one class; SwitchyardError before it registers).
[[noreturn]] void fail(runtime::StatusCode code, const std::string &message);
[[noreturn]] inline void fail(const runtime::Status &status) {
  fail(status.code(), status.message());
}
/// An argument of the call is wrong (kInvalidArgument): the message names it.
[[noreturn]] inline void fail(const std::string &message) {
  fail(runtime::StatusCode::kInvalidArgument, message);
}

/// A NumPy array or DLPack tensor as the runtime sees it: C-contiguous memory of a known
/// dtype on the host or a CUDA device; anything else is an error naming `what`.
runtime::TensorView viewOf(const nb::ndarray<> &array, const std::string &what);

/// Creates and registers a step router (runtime::StepRouter) of `entries`, with the
/// GPU launchers `cuda` (none: host only) reading the knob struct at `deviceKnobs` and
/// the phase at `devicePhase` (device memory);
/// returns its handle, or raises the router's error.
int64_t registerStepRouter(std::vector<runtime::StepRouter::Entry> entries,
                           const std::vector<std::string> &layerInputs, int64_t experts,
                           const std::vector<std::string> &knobs, const std::string &label,
                           std::vector<runtime::CudaStepRouter::Entry> cuda,
                           const void *deviceKnobs, const void *devicePhase,
                           int64_t pinned = -1);

void bindPolicies(nb::module_ &m);
void bindSteps(nb::module_ &m);
void bindExecutor(nb::module_ &m);
void bindShapeTable(nb::module_ &m);
void bindSignature(nb::module_ &m);

} // namespace switchyard::python

#endif
