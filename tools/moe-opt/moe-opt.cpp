//===- moe-opt.cpp - verify and transform moe policies --------------------===//
//
// mlir-opt for Switchyard: parses .mlir policies, verifies them, runs the moe passes
// (and the core transforms such as -canonicalize and -cse) and prints the result.
// --experts/--top-k/... and --model config.json bind a generic policy first.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/Policy.h"
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/InitAllDialects.h"
#include "switchyard/InitAllPasses.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

int switchyard::tools::moeOptMain(int argc, char **argv) {
  switchyard::registerAllPasses();
  switchyard::tools::registerShapeOptions(); // --experts, --model, ...: not --entry / --set
  mlir::DialectRegistry registry;
  switchyard::registerAllDialects(registry);
  // MlirOptMain, with the input checked first: a policy must be non-empty text (the
  // MLIR lexer skips NUL bytes, so a file of NULs would print an empty module).
  llvm::InitLLVM init(argc, argv);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "Switchyard moe policy optimizer\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  // --experts/--top-k/.../--model bind a generic policy before the passes given.
  switchyard::moe::ShapeRequest shape;
  std::string shapeError;
  if (!switchyard::tools::shapeRequest(shape, shapeError))
    return llvm::errs() << "moe-opt: error: " << shapeError << "\n", 1;
  if (!shape.empty()) {
    mlir::MlirOptMainConfig given = config;
    config.setPassPipelineSetupFn([given, shape](mlir::PassManager &pm) {
      pm.addPass(switchyard::moe::createSpecializePass(shape));
      return given.setupPassPipeline(pm);
    });
  }
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
  if (!switchyard::compiler::checkPolicyText(sourceMgr, id))
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
