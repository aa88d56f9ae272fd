//===- InitAllDialects.h - every dialect a policy goes through --*- C++ -*-===//
//
// The dialects, interfaces and LLVM IR translations of the host and GPU paths: what
// every tool registers (moe-opt, moe-run, moe-compile, moe-translate).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_INITALLDIALECTS_H
#define SWITCHYARD_INITALLDIALECTS_H

#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"

namespace switchyard {

inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry
      .insert<moe::MoeDialect, mlir::arith::ArithDialect, mlir::func::FuncDialect,
              mlir::tensor::TensorDialect, mlir::scf::SCFDialect, mlir::math::MathDialect,
              mlir::memref::MemRefDialect, mlir::cf::ControlFlowDialect,
              mlir::index::IndexDialect, mlir::LLVM::LLVMDialect, mlir::gpu::GPUDialect,
              mlir::NVVM::NVVMDialect, mlir::omp::OpenMPDialect>();
  // How each moe op is written as loops (moe-lower-to-loops).
  moe::registerLoopLoweringModels(registry);
  // The LLVM lowering of each dialect (used by the host pipeline's conversions).
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  mlir::registerConvertOpenMPToLLVMInterface(registry);
  // LLVM IR and PTX export.
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  mlir::registerOpenMPDialectTranslation(registry);
}

} // namespace switchyard

#endif
