//===- HostPipeline.cpp - the moe -> LLVM dialect pipeline for the host ---===//
#include "switchyard/Compiler/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <string>

using namespace mlir;

void switchyard::moe::buildLoopPipeline(OpPassManager &pm, bool laneParallel,
                                        bool freezeKnobs,
                                        llvm::ArrayRef<std::string> inputDtypes) {
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
  if (!inputDtypes.empty()) {
    MoeNarrowInputsOptions narrow;
    narrow.inputs = llvm::to_vector(inputDtypes);
    pm.addPass(createMoeNarrowInputs(narrow));
  }
  // Scalar arithmetic a policy writes on knobs (ceildivsi, maximumf, ...) in the basic
  // ops both code generators know.
  pm.addPass(arith::createArithExpandOpsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

llvm::StringRef switchyard::moe::openMPLibrary() {
#ifdef SWITCHYARD_OPENMP_LIBRARY
  // The copy in lib/ beside the running tool's bin/ (the build tree's, or the installed
  // package's wherever it is), else the one the build found.
  static const std::string path = [] {
    std::string self = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
    llvm::SmallString<256> beside(
        llvm::sys::path::parent_path(llvm::sys::path::parent_path(self)));
    llvm::sys::path::append(beside, "lib", "libomp.so.5");
    return !self.empty() && llvm::sys::fs::exists(beside) ? std::string(beside)
                                                          : SWITCHYARD_OPENMP_LIBRARY;
  }();
  return path;
#else
  return "";
#endif
}

void switchyard::moe::buildHostPipeline(OpPassManager &pm, bool laneParallel,
                                        bool freezeKnobs, int64_t threadMinWork,
                                        llvm::ArrayRef<std::string> inputDtypes) {
  buildLoopPipeline(pm, laneParallel, freezeKnobs, inputDtypes);
  if (!inputDtypes.empty()) {
    // bf16 -> f32 as integer ops (a shift: exact): x86 has no bf16 arithmetic, and
    // LLVM's soft promotion of bf16 values would call __truncsfbf2, which the libgcc of
    // GCC 12 lacks. (f16 widens with F16C or libgcc's __extendhfsf2; the GPU has both.)
    arith::ArithExpandOpsPassOptions expand;
    expand.includeBf16 = true;
    pm.addPass(arith::createArithExpandOpsPass(expand));
  }
  if (!laneParallel) {
    bool threads = !openMPLibrary().empty() && threadMinWork > 0;
    pm.addPass(createHostThreadsPass(threads ? threadMinWork : 0));
    if (threads) {
      pm.addPass(createConvertSCFToOpenMPPass());
      pm.addPass(createMoeInlineAllocaScopes());
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
