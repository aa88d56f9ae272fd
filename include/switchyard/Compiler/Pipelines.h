//===- Pipelines.h - the host and PTX pass pipelines ------------*- C++ -*-===//
//
// The pass pipelines the tools run, built from the moe transforms and conversions.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_PIPELINES_H
#define SWITCHYARD_COMPILER_PIPELINES_H

#include "switchyard/Conversion/Passes.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

namespace switchyard::moe {

/// From moe ops to target-neutral loops: (with `freezeKnobs`) freeze knobs,
/// canonicalize, form stages, lower to loops, canonicalize, CSE. The first half of every
/// target's pipeline; `laneParallel` selects the GPU form of the per-token code (see
/// moe-lower-to-loops). Knobs not frozen become run-time parameters.
void buildLoopPipeline(mlir::OpPassManager &pm, bool laneParallel, bool freezeKnobs);

/// The host pipeline after knob selection: the loop pipeline, the LLVM dialect, the C
/// entry points (which take the knobs left tunable in `const struct NAME_knobs *`).
void buildHostPipeline(mlir::OpPassManager &pm, bool laneParallel = false,
                       bool freezeKnobs = false);

/// Registers the pipeline above as `moe-host-pipeline`.
void registerHostPipeline();

/// The PTX pipeline: the host pipeline's loop lowering (knobs not frozen are kernel
/// parameters), then moe-map-to-gpu (with
/// `mapping`: block size, size classes), NVVM and the NVPTX backend
/// (gpu-module-to-binary, format=isa), for `chip` (sm_80, sm_90, ...).
void buildPtxPipeline(mlir::OpPassManager &pm, llvm::StringRef chip,
                      const MoeMapToGPUOptions &mapping = {}, bool freezeKnobs = false);

/// Registers `moe-ptx-pipeline` (chip sm_90).
void registerPtxPipeline();

} // namespace switchyard::moe

#endif
