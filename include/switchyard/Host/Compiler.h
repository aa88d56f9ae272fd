//===- Compiler.h - host code from a lowered policy -------------*- C++ -*-===//
//
// Turns a policy lowered to the LLVM dialect (switchyard::host::lowerToLLVM) into
// native code: a JIT engine for moe-run, or an object file, a shared library and a C
// header for moe-compile.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_HOST_COMPILER_H
#define SWITCHYARD_HOST_COMPILER_H

#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/Host/Policy.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"

namespace switchyard::host {

/// JIT-compiles the lowered module at -O3 for this CPU.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>> jitCompile(mlir::ModuleOp lowered);

/// Writes a relocatable object file for this CPU's architecture (-O3, PIC).
bool emitObjectFile(mlir::ModuleOp lowered, llvm::StringRef path, std::string &error);

/// Links `object` into a shared library with the system C compiler driver.
bool linkSharedLibrary(llvm::StringRef object, llvm::StringRef library, std::string &error);

/// The C header declaring the entry point of router `info` (lowered ABI `abi`).
std::string emitHeader(const RouterInfo &info, const std::vector<AbiParam> &abi);

/// The C type of a parameter in the generated headers: `const float *`, `int32_t`, ...
std::string cParamType(const AbiParam &p);

/// "[T, 128]", "[size(T)]": a parameter's shape as the header documents it.
std::string shapeText(const AbiParam &p);

/// Calls entry `name` of a JIT engine with one buffer per ABI parameter.
bool invokeEntry(mlir::ExecutionEngine &engine, llvm::StringRef name, int64_t tokens,
                 const std::vector<AbiParam> &abi, std::vector<void *> &buffers,
                 const std::vector<int64_t> &scalars, std::string &error);

/// What the GPU path produces for one router.
struct GpuArtifacts {
  std::string ptx;  // the PTX module (one .entry per kernel)
  std::string json; // launch metadata: kernels, parameters, block size, grid, workspace
  std::string launchHeader, launchSource; // NAME_launch.h / NAME_launch.cpp (cudart)
  std::string cuda; // NAME.cu: the same kernel as CUDA C++ (same parameters as the PTX)
};

/// Prints the kernels of a module mapped by moe-map-to-gpu as CUDA C++.
bool emitCuda(mlir::ModuleOp mapped, std::string &source, std::string &error);

/// Compiles router `name` of `module` to single-CTA PTX for `arch` (sm_80, sm_90, ...).
/// `mapping` sets the block size and the size classes (moe-map-to-gpu's options).
bool compileToPtx(mlir::ModuleOp module, llvm::StringRef name, llvm::StringRef arch,
                  const moe::MoeMapToGPUOptions &mapping, GpuArtifacts &out,
                  std::string &error);

/// Assembles PTX into a cubin with the CUDA toolkit's ptxas; false (with the reason)
/// when ptxas is missing or rejects it.
bool assemblePtx(llvm::StringRef ptxPath, llvm::StringRef arch, llvm::StringRef cubinPath,
                 std::string &error, std::string *resourceUsage = nullptr);

} // namespace switchyard::host

#endif
