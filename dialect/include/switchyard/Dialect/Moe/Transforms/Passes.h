//===- Passes.h - moe dialect passes ----------------------------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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

/// From moe ops to target-neutral loops: freeze knobs, canonicalize, form stages,
/// lower to loops, canonicalize, CSE. The first half of every target's pipeline;
/// `laneParallel` selects the GPU form of the per-token code (see moe-lower-to-loops).
void buildLoopPipeline(mlir::OpPassManager &pm, bool laneParallel = false);

/// The host pipeline after knob selection: freeze knobs, canonicalize, form stages,
/// lower to loops, lower to the LLVM dialect, add the C entry points.
void buildHostPipeline(mlir::OpPassManager &pm, bool laneParallel = false);

/// Registers the pipeline above as `moe-host-pipeline`.
void registerHostPipeline();

/// The PTX pipeline: the host pipeline's loop lowering, then moe-map-to-gpu (with
/// `mapping`: block size, size classes), NVVM and the NVPTX backend
/// (gpu-module-to-binary, format=isa), for `chip` (sm_80, sm_90, ...).
void buildPtxPipeline(mlir::OpPassManager &pm, llvm::StringRef chip,
                      const MoeMapToGPUOptions &mapping = {});

/// Registers `moe-ptx-pipeline` (chip sm_90).
void registerPtxPipeline();

} // namespace switchyard::moe

#endif
