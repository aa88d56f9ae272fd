//===- moe-opt.cpp - verify and transform moe policies --------------------===//
//
// mlir-opt for Switchyard: parses .mlir policies, verifies them, runs the moe passes
// (and the core transforms such as -canonicalize and -cse) and prints the result.
//
//===----------------------------------------------------------------------===//
#include "switchyard/InitAllDialects.h"
#include "switchyard/InitAllPasses.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  switchyard::registerAllPasses();
  mlir::DialectRegistry registry;
  switchyard::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Switchyard moe policy optimizer\n", registry));
}
