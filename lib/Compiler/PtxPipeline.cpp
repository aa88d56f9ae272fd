//===- PtxPipeline.cpp - moe -> PTX through NVVM and LLVM's NVPTX backend -===//
#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Conversion/MoeToGPU/MoeToGPU.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

#include <cstdlib>

using namespace mlir;

/// libdevice supplies the accurate math functions (exp, pow, floor) on the device:
/// $SWITCHYARD_LIBDEVICE, else the CUDA toolkit's that CMake found (SWITCHYARD_LIBDEVICE,
/// lib/Compiler/CMakeLists.txt); empty when neither is set.
static std::string libdevicePath() {
  if (const char *path = std::getenv("SWITCHYARD_LIBDEVICE"); path && *path)
    return path;
#ifdef SWITCHYARD_LIBDEVICE
  return SWITCHYARD_LIBDEVICE;
#else
  return "";
#endif
}

namespace {
/// Stands in for the PTX lowering when libdevice is missing: one error saying where
/// it was looked for, instead of a failure deep in the NVVM target.
struct MissingLibdevice : PassWrapper<MissingLibdevice, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MissingLibdevice)
  explicit MissingLibdevice(std::string path) : path(std::move(path)) {}
  StringRef getArgument() const override { return "moe-missing-libdevice"; }
  void runOnOperation() override {
    InFlightDiagnostic error =
        emitError(getOperation()->getLoc())
        << "the PTX target links CUDA's libdevice (libdevice.10.bc), ";
    if (path.empty())
      error << "but this build found no CUDA toolkit: set SWITCHYARD_LIBDEVICE to the "
               "file (CUDA's nvvm/libdevice/libdevice.10.bc)";
    else
      error << "but '" << path
            << "' does not exist: install the CUDA toolkit or set SWITCHYARD_LIBDEVICE "
               "to the file";
    signalPassFailure();
  }
  std::string path;
};
/// A kernel built for exactly its block (moe-map-to-gpu sets nvvm.reqntid besides the
/// known block size) keeps .reqntid only: PTX allows one of the two, and with
/// .maxntid ptxas caps the registers and spills (see MapToGPU.cpp).
struct KeepRequiredBlockSize
    : PassWrapper<KeepRequiredBlockSize, OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(KeepRequiredBlockSize)
  StringRef getArgument() const override { return "moe-keep-required-block-size"; }
  void runOnOperation() override {
    getOperation().walk([](LLVM::LLVMFuncOp f) {
      if (f->hasAttr(NVVM::NVVMDialect::getReqntidAttrName()))
        f->removeAttr(NVVM::NVVMDialect::getMaxntidAttrName());
    });
  }
};
} // namespace

void switchyard::moe::buildGpuMappingPipeline(OpPassManager &pm,
                                              const MoeMapToGPUOptions &mapping,
                                              bool freezeKnobs,
                                              llvm::ArrayRef<std::string> inputDtypes) {
  buildLoopPipeline(pm, /*laneParallel=*/true, freezeKnobs, inputDtypes);
  pm.addPass(createMoeMapToGPU(mapping));
}

void switchyard::moe::buildNvvmPipeline(OpPassManager &pm, StringRef chip) {
  std::string libdevice = libdevicePath();
  if (libdevice.empty() || !llvm::sys::fs::exists(libdevice)) {
    pm.addPass(std::make_unique<MissingLibdevice>(libdevice));
    return;
  }
  pm.addNestedPass<gpu::GPUModuleOp>(createMoeGridBarrierToNVVM());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  target.features = "+ptx80";
  target.optLevel = 3;
  target.linkLibs.push_back(libdevice);
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(std::make_unique<KeepRequiredBlockSize>());
  device.addPass(createCanonicalizerPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void switchyard::moe::buildPtxPipeline(OpPassManager &pm, StringRef chip,
                                       const MoeMapToGPUOptions &mapping, bool freezeKnobs,
                                       llvm::ArrayRef<std::string> inputDtypes) {
  if (libdevicePath().empty() || !llvm::sys::fs::exists(libdevicePath())) {
    pm.addPass(std::make_unique<MissingLibdevice>(libdevicePath()));
    return;
  }
  buildGpuMappingPipeline(pm, mapping, freezeKnobs, inputDtypes);
  buildNvvmPipeline(pm, chip);
}

void switchyard::moe::registerPtxPipeline() {
  PassPipelineRegistration<>("moe-ptx-pipeline",
                             "lower moe routers to GPU kernels in PTX (sm_90): one CTA "
                             "for decode-size batches, multi-CTA launches beyond",
                             [](OpPassManager &pm) { buildPtxPipeline(pm, "sm_90"); });
}
