//===- MoeToLLVM.h - flat C entry points on the LLVM dialect ----*- C++ -*-===//
#ifndef SWITCHYARD_CONVERSION_MOETOLLVM_MOETOLLVM_H
#define SWITCHYARD_CONVERSION_MOETOLLVM_MOETOLLVM_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace switchyard::moe {

#define GEN_PASS_DECL_MOEEMITCENTRY
#include "switchyard/Conversion/Passes.h.inc"

} // namespace switchyard::moe

#endif
