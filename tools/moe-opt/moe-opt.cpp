//===- moe-opt.cpp - verify and transform moe policies --------------------===//
//
// mlir-opt for Switchyard: parses .mlir policies, verifies them, runs the moe passes
// (and the core transforms such as -canonicalize and -cse) and prints the result.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  switchyard::moe::registerMoePasses();

  mlir::DialectRegistry registry;
  registry.insert<switchyard::moe::MoeDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Switchyard moe policy optimizer\n", registry));
}
