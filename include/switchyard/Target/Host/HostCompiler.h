//===- HostCompiler.h - host code from a lowered policy ---------*- C++ -*-===//
//
// Turns a policy lowered to the LLVM dialect (switchyard::compiler::lowerToLLVM) into
// native code: a JIT engine for moe-run, or an object file, a shared library and a C
// header for moe-compile.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_TARGET_HOST_HOSTCOMPILER_H
#define SWITCHYARD_TARGET_HOST_HOSTCOMPILER_H

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Compiler/Policy.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"

namespace switchyard::host {

// What the compiler reads off a lowered router (lib/Compiler).
using compiler::AbiParam;
using compiler::RouterInfo;

/// JIT-compiles the lowered module at -O3 for this CPU.
llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>> jitCompile(mlir::ModuleOp lowered);

/// Writes a relocatable object file for this CPU's architecture (-O3, PIC). With
/// `packedEntry`, it also defines `void ENTRY_packed(void **args)`, the entry in MLIR's
/// packed convention (what runtime::HostPolicy calls).
bool emitObjectFile(mlir::ModuleOp lowered, llvm::StringRef path, std::string &error,
                    llvm::StringRef packedEntry = {});

/// Links `object` into a shared library with the system C compiler driver.
bool linkSharedLibrary(llvm::StringRef object, llvm::StringRef library, std::string &error);

/// The C header declaring the entry point of router `info` (lowered ABI `abi`).
/// `struct NAME_knobs` and `NAME_knobs_default()` (include-guarded: the host header and
/// the GPU launcher's both declare them), nothing without knobs.
void emitKnobStruct(llvm::raw_ostream &os, const std::string &name,
                    const std::vector<runtime::Knob> &knobs);
/// A knob's default as a C literal, and the C condition under which value `v` breaks one
/// of its rules (what the generated entry and launcher check).
std::string knobDefaultText(const runtime::Knob &knob);
std::string knobCheckText(const runtime::Knob &knob, const std::string &v);

std::string emitHeader(const RouterInfo &info, const std::vector<AbiParam> &abi,
                       const std::vector<runtime::Knob> &knobs = {});

/// The C type of a parameter in the generated headers: `const float *`, `int32_t`, ...
std::string cParamType(const AbiParam &p);

/// "[T, 128]", "[size(T)]": a parameter's shape as the header documents it.
std::string shapeText(const AbiParam &p);

/// Calls entry `name` of a JIT engine with one buffer per ABI parameter.
bool invokeEntry(mlir::ExecutionEngine &engine, llvm::StringRef name, int64_t tokens,
                 const std::vector<AbiParam> &abi, std::vector<void *> &buffers,
                 const std::vector<int64_t> &scalars, std::string &error,
                 const runtime::Signature *signature = nullptr, void *knobs = nullptr);

} // namespace switchyard::host

#endif
