//===- MoeToGPU.h - lowered routers -> GPU kernels --------------*- C++ -*-===//
#ifndef SWITCHYARD_CONVERSION_MOETOGPU_MOETOGPU_H
#define SWITCHYARD_CONVERSION_MOETOGPU_MOETOGPU_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace switchyard::moe {

#define GEN_PASS_DECL_MOEMAPTOGPU
#define GEN_PASS_DECL_MOEGRIDBARRIERTONVVM
#include "switchyard/Conversion/Passes.h.inc"

} // namespace switchyard::moe

#endif
