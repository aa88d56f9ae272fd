//===- PtxCompiler.h - PTX, cubin, metadata and launcher --------*- C++ -*-===//
//
// The GPU target of moe-compile: a router's kernels (moe-map-to-gpu) through NVVM and
// the NVPTX backend to PTX, ptxas to a cubin, the launch metadata (NAME.json), the
// cudart launcher (NAME_launch.{h,cpp}: the router's kernel table and argument packing;
// the fixed part is runtime/lib/Cuda/Launcher.cpp) and the same kernels as CUDA C++.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_TARGET_PTX_PTXCOMPILER_H
#define SWITCHYARD_TARGET_PTX_PTXCOMPILER_H

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Compiler/Policy.h"
#include "switchyard/Target/Ptx/LaunchMetadata.h"

namespace switchyard::ptx {

using compiler::AbiParam;

/// What the GPU path produces for one router.
struct GpuArtifacts {
  std::string ptx;                        // the PTX module (one .entry per kernel)
  LaunchMetadata launch;                  // the kernels' launch contract, as one record
  std::string json;                       // launch.toJson(): NAME.json
  std::string launchHeader, launchSource; // NAME_launch.h / NAME_launch.cpp (cudart)
  std::string cuda; // NAME.cu: the same kernel as CUDA C++ (same parameters as the PTX)
  /// The launcher's parameters: the host entry's, plus knob_group with knob groups.
  std::vector<compiler::AbiParam> abi;
};

/// Compiles router `name` of `module` to PTX for `arch` (sm_80, sm_90, ...): its kernels
/// for every size class (one CTA for small batches, the large-batch pair beyond).
/// `mapping` sets the block size and the size classes (moe-map-to-gpu's options).
/// Knobs are kernel parameters the launcher takes in `const struct NAME_knobs *`, unless
/// `freezeKnobs` compiles their values in.
bool compileToPtx(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef arch,
                  const moe::MoeMapToGPUOptions &mapping, GpuArtifacts &out,
                  std::string &error, bool freezeKnobs = false,
                  llvm::ArrayRef<std::string> inputDtypes = {});

/// Assembles PTX into a cubin with the CUDA toolkit's ptxas; false (with the reason)
/// when ptxas is missing or rejects it.
bool assemblePtx(llvm::StringRef ptxPath, llvm::StringRef arch, llvm::StringRef cubinPath,
                 std::string &error, std::string *resourceUsage = nullptr);

/// Builds the launcher source into a shared library (`c++ -shared`, linked with the
/// fixed launcher libSwitchyardLauncher.a, found beside this moe-compile's prefix or in
/// its build tree, and cudart from the CUDA toolkit found at configure time): what
/// runtime::CudaPolicy loads. False (with the reason) without a toolkit, without the
/// fixed launcher or when the compiler fails.
bool linkLauncherLibrary(llvm::StringRef launcherSource, llvm::StringRef library,
                         std::string &error);

} // namespace switchyard::ptx

#endif
