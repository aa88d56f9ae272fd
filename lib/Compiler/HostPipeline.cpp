//===- HostPipeline.cpp - the moe -> LLVM dialect pipeline for the host ---===//
#include "switchyard/Compiler/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void switchyard::moe::buildLoopPipeline(OpPassManager &pm, bool laneParallel,
                                        bool freezeKnobs) {
  if (freezeKnobs)
    pm.addPass(createMoeFreezeKnobs());
  pm.addPass(createCanonicalizerPass());
  // After the outputs are selected (the tools prune before the pipeline), so that a
  // softmax whose other users were pruned folds into its route.
  pm.addPass(createMoeFoldRouteSoftmax());
  pm.addPass(createMoeFormStages());
  MoeLowerToLoopsOptions lowering;
  lowering.laneParallel = laneParallel;
  pm.addPass(createMoeLowerToLoops(lowering));
  // Scalar arithmetic a policy writes on knobs (ceildivsi, maximumf, ...) in the basic
  // ops both code generators know.
  pm.addPass(arith::createArithExpandOpsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

llvm::StringRef switchyard::moe::openMPLibrary() {
#ifdef SWITCHYARD_OPENMP_LIBRARY
  return SWITCHYARD_OPENMP_LIBRARY;
#else
  return "";
#endif
}

void switchyard::moe::buildHostPipeline(OpPassManager &pm, bool laneParallel,
                                        bool freezeKnobs, int64_t threadMinWork) {
  buildLoopPipeline(pm, laneParallel, freezeKnobs);
  if (!laneParallel) {
    bool threads = !openMPLibrary().empty() && threadMinWork > 0;
    pm.addPass(createHostThreadsPass(threads ? threadMinWork : 0));
    if (threads) {
      pm.addPass(createConvertSCFToOpenMPPass());
      pm.addPass(createInlineAllocaScopesPass());
    }
  }
  // Loops -> LLVM dialect (the standard MLIR host path).
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createMoeEmitCEntry());
}

void switchyard::moe::registerHostPipeline() {
  PassPipelineRegistration<>("moe-host-pipeline",
                             "lower moe routers to LLVM dialect with C entry points",
                             [](OpPassManager &pm) { buildHostPipeline(pm); });
}
