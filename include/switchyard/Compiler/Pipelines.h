//===- Pipelines.h - the host and PTX pass pipelines ------------*- C++ -*-===//
//
// The pass pipelines the tools run, built from the moe transforms and conversions.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_PIPELINES_H
#define SWITCHYARD_COMPILER_PIPELINES_H

#include "switchyard/Compiler/Passes.h"
#include "switchyard/Conversion/Passes.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

namespace switchyard::moe {

/// From moe ops to target-neutral loops: (with `freezeKnobs`) freeze knobs,
/// canonicalize, form stages, lower to loops, canonicalize, CSE. The first half of every
/// target's pipeline; `laneParallel` selects the GPU form of the per-token code (see
/// moe-lower-to-loops). Knobs not frozen become run-time parameters. `inputDtypes`
/// ("NAME=bf16|f16|f32", --input-dtype) sets the element type float inputs of the entry
/// take (moe-narrow-inputs: read in place, widened at each load).
void buildLoopPipeline(mlir::OpPassManager &pm, bool laneParallel, bool freezeKnobs,
                       llvm::ArrayRef<std::string> inputDtypes = {});

/// The host pipeline after knob selection: the loop pipeline, the LLVM dialect, the C
/// entry points (which take the knobs left tunable in `const struct NAME_knobs *`).
/// Outside the lane-parallel (GPU emulation) form, a router's token loops (one per
/// run of token stages, see moe-lower-to-loops) run on OpenMP threads for batches of
/// at least `threadMinWork` scores (T * E) (0: always single-threaded; also when the
/// compiler was built without OpenMP).
void buildHostPipeline(mlir::OpPassManager &pm, bool laneParallel = false,
                       bool freezeKnobs = false,
                       int64_t threadMinWork = kDefaultThreadMinWork,
                       llvm::ArrayRef<std::string> inputDtypes = {});

/// moe-host-threads (Compiler/Passes.td): a router's outermost parallel loops behind
/// a `num_tokens * E >= minWork` test (threaded above it), every other parallel loop
/// sequential. minWork = 0: all sequential.
std::unique_ptr<mlir::Pass> createHostThreadsPass(int64_t minWork);

/// Whether this build links generated host code with an OpenMP runtime (the path of
/// libomp, empty when not).
llvm::StringRef openMPLibrary();

/// Registers the pipeline above as `moe-host-pipeline`.
void registerHostPipeline();

/// The PTX pipeline: the host pipeline's loop lowering (knobs not frozen are kernel
/// parameters), then moe-map-to-gpu (with
/// `mapping`: block size, size classes), NVVM and the NVPTX backend
/// (gpu-module-to-binary, format=isa), for `chip` (sm_80, sm_90, ...).
void buildPtxPipeline(mlir::OpPassManager &pm, llvm::StringRef chip,
                      const MoeMapToGPUOptions &mapping = {}, bool freezeKnobs = false,
                      llvm::ArrayRef<std::string> inputDtypes = {});

/// Its two halves: the loop lowering in the lane-parallel form and moe-map-to-gpu (what
/// the launch metadata and the CUDA C++ are read from), then NVVM and the NVPTX
/// backend (one clear error when CUDA's libdevice is missing).
void buildGpuMappingPipeline(mlir::OpPassManager &pm, const MoeMapToGPUOptions &mapping,
                             bool freezeKnobs = false,
                             llvm::ArrayRef<std::string> inputDtypes = {});
void buildNvvmPipeline(mlir::OpPassManager &pm, llvm::StringRef chip);

/// Registers `moe-ptx-pipeline` (chip sm_90).
void registerPtxPipeline();

} // namespace switchyard::moe

#endif
