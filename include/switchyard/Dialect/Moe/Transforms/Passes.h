//===- Passes.h - moe dialect transforms ------------------------*- C++ -*-===//
//
// Transforms that stay inside the moe dialect: knob overrides and freezing, the results
// a caller asks for, and the grouping of a policy's ops into fused stages.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace switchyard::moe {

#define GEN_PASS_DECL
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"

/// Parses `name=value` overrides and applies them to the module's knobs. On error,
/// reports through the module's diagnostics and returns failure. Shared by the
/// moe-set-knobs pass and the tools' `--set` flags.
mlir::LogicalResult setKnobs(mlir::ModuleOp module, llvm::ArrayRef<std::string> values);

/// Keeps only the results named in `names` in every policy of the module (or only in
/// `entry`) and erases what fed only the others (moe-select-outputs; `--outputs`).
mlir::LogicalResult selectOutputs(mlir::ModuleOp module, llvm::ArrayRef<std::string> names,
                                  llvm::StringRef entry = {});

/// Appends moe.fill_empty_slots to the topk_ids / topk_weights of every router of the
/// module (or only `entry`) that returns both (moe-fill-empty-slots;
/// `--fill-empty-slots`).
mlir::LogicalResult fillEmptySlots(mlir::ModuleOp module, llvm::StringRef entry = {});

} // namespace switchyard::moe

#endif
