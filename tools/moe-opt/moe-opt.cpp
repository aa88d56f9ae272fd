//===- moe-opt.cpp - verify and transform moe policies --------------------===//
//
// mlir-opt for Switchyard: parses .mlir policies, verifies them, runs the moe passes
// (and the core transforms such as -canonicalize and -cse) and prints the result.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/Host/Policy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  switchyard::moe::registerMoePasses();
  switchyard::moe::registerHostPipeline();
  switchyard::moe::registerPtxPipeline();

  mlir::DialectRegistry registry;
  registry.insert<switchyard::moe::MoeDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect, mlir::scf::SCFDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect>();
  registry.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect>();
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
  // The LLVM lowering of each dialect (used by the host pipeline's conversions).
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  // MlirOptMain, with the input checked first: a policy must be non-empty text (the
  // MLIR lexer skips NUL bytes, so a file of NULs would print an empty module).
  llvm::InitLLVM init(argc, argv);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Switchyard moe policy optimizer\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFile, outputFile, registry));
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(inputFile, &error);
  if (!file) {
    llvm::errs() << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(file->getBuffer(), file->getBufferIdentifier()),
      llvm::SMLoc());
  if (!switchyard::host::checkPolicyText(sourceMgr, id))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (failed(mlir::MlirOptMain(output->os(), std::move(file), registry, config)))
    return 1;
  output->keep();
  return 0;
}
