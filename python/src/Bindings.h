//===- Bindings.h - the pieces of the _switchyard extension -----*- C++ -*-===//
//
// The nanobind extension over the runtime (no LLVM/MLIR): compiled policies through
// the policy cache, called on NumPy arrays or DLPack tensors without copies, and the
// MoE executor. Every error is a switchyard.SwitchyardError carrying the runtime's
// message; the Python package (python/switchyard) types them further.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_PYTHON_BINDINGS_H
#define SWITCHYARD_PYTHON_BINDINGS_H

#include "switchyard/Runtime/Binding.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace switchyard::python {

namespace nb = nanobind;

/// Raised for every error the runtime reports (the Python side's SwitchyardError).
[[noreturn]] void fail(const std::string &message);

/// A NumPy array or DLPack tensor as the runtime sees it: C-contiguous memory of a known
/// dtype on the host or a CUDA device; anything else is an error naming `what`.
runtime::TensorView viewOf(const nb::ndarray<> &array, const std::string &what);

void bindPolicies(nb::module_ &m);
void bindExecutor(nb::module_ &m);
void bindShapeTable(nb::module_ &m);

} // namespace switchyard::python

#endif
