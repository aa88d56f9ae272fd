# Precompiled headers for the compiler's libraries and tools: MLIR's and LLVM's headers,
# which most of each translation unit's compile time goes to parsing, are parsed once
# (in MLIRMoe) and reused by every target with the same flags. Only headers from
# outside the project: a change to ours never invalidates the PCH. Where a target's
# flags differ, GCC ignores the PCH and parses the headers (slower, never wrong).
# SWITCHYARD_PCH=OFF turns it off.
option(SWITCHYARD_PCH "Precompile MLIR/LLVM headers for the compiler's targets" ON)

set(SWITCHYARD_PCH_HEADERS
  <llvm/ADT/DenseMap.h> <llvm/ADT/STLExtras.h> <llvm/ADT/SmallVector.h>
  <llvm/ADT/StringExtras.h> <llvm/ADT/StringSet.h> <llvm/ADT/TypeSwitch.h>
  <llvm/Support/FileSystem.h> <llvm/Support/JSON.h> <llvm/Support/raw_ostream.h>
  <mlir/IR/Builders.h> <mlir/IR/BuiltinOps.h> <mlir/IR/IRMapping.h>
  <mlir/IR/OpDefinition.h> <mlir/IR/PatternMatch.h> <mlir/IR/DialectImplementation.h>
  <mlir/Interfaces/SideEffectInterfaces.h> <mlir/Pass/Pass.h> <mlir/Pass/PassManager.h>
  <mlir/Dialect/Arith/IR/Arith.h> <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/Dialect/SCF/IR/SCF.h> <mlir/Dialect/MemRef/IR/MemRef.h>
  <mlir/Dialect/GPU/IR/GPUDialect.h> <mlir/Dialect/LLVMIR/LLVMDialect.h>
  <mlir/Transforms/DialectConversion.h>)

# The first target owns the PCH; the others reuse it.
function(switchyard_precompile_headers owner)
  if(NOT SWITCHYARD_PCH)
    return()
  endif()
  target_precompile_headers(${owner} PRIVATE ${SWITCHYARD_PCH_HEADERS})
  foreach(target ${ARGN})
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endforeach()
endfunction()
