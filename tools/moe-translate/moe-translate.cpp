//===- moe-translate.cpp - translations out of the moe GPU kernels --------===//
//
// mlir-translate for Switchyard: `moe-translate --moe-to-cuda mapped.mlir` prints the
// kernels of a module mapped by moe-map-to-gpu as CUDA C++ (what moe-compile writes as
// NAME.cu), so the emitter is tested on its own with FileCheck. `--mlir-to-llvmir`
// translates the host pipeline's output to LLVM IR with the moe dialect loaded, so its
// attributes (the C entry's `#moe.abi`) parse; LLVM IR has no place for them and drops
// them.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Target/Cuda/CudaEmitter.h"

#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

static void registerToLLVMIR() {
  static mlir::TranslateFromMLIRRegistration registration(
      "mlir-to-llvmir", "translate the host pipeline's LLVM dialect to LLVM IR",
      [](mlir::Operation *op, llvm::raw_ostream &os) {
        llvm::LLVMContext context;
        std::unique_ptr<llvm::Module> module = mlir::translateModuleToLLVMIR(op, context);
        if (!module)
          return mlir::failure();
        module->print(os, nullptr);
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<switchyard::moe::MoeDialect>();
        mlir::registerAllToLLVMIRTranslations(registry);
      });
}

int switchyard::tools::moeTranslateMain(int argc, char **argv) {
  switchyard::cuda::registerToCudaTranslation();
  registerToLLVMIR();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "Switchyard translations")) ? 1
                                                                                      : 0;
}
