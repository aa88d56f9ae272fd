//===- KnobDiagnostics.h - the knob a diagnostic is about -------*- C++ -*-===//
//
// A diagnostic about a knob (a default that selects every expert, ...) names it in the
// diagnostic's metadata ({moe.knob = "budget"}), not only in its text, so that tools
// pass it on as data: moe-compile's diagnostics.json, Python's CompileWarning.knob.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_KNOBDIAGNOSTICS_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_KNOBDIAGNOSTICS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

namespace switchyard::moe {

inline constexpr llvm::StringLiteral kDiagnosticKnobKey = "moe.knob";

/// Records `knob` as the knob `diag` is about.
inline void setDiagnosticKnob(mlir::Diagnostic &diag, llvm::StringRef knob) {
  mlir::MLIRContext *context = diag.getLocation()->getContext();
  mlir::NamedAttribute entry(mlir::StringAttr::get(context, kDiagnosticKnobKey),
                             mlir::StringAttr::get(context, knob));
  diag.getMetadata().push_back(
      mlir::DiagnosticArgument(mlir::DictionaryAttr::get(context, {entry})));
}

/// The knob `diag` is about, or "" when it names none.
inline llvm::StringRef getDiagnosticKnob(mlir::Diagnostic &diag) {
  for (mlir::DiagnosticArgument &arg : diag.getMetadata())
    if (arg.getKind() == mlir::DiagnosticArgument::DiagnosticArgumentKind::Attribute)
      if (auto dict = llvm::dyn_cast<mlir::DictionaryAttr>(arg.getAsAttribute()))
        if (auto knob = dict.getAs<mlir::StringAttr>(kDiagnosticKnobKey))
          return knob.getValue();
  return {};
}

} // namespace switchyard::moe

#endif
