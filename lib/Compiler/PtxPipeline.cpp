//===- PtxPipeline.cpp - moe -> PTX through NVVM and LLVM's NVPTX backend -===//
#include "switchyard/Compiler/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// libdevice supplies the accurate math functions (exp, pow, floor) on the device.
static const char *kLibdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";

void switchyard::moe::buildPtxPipeline(OpPassManager &pm, StringRef chip,
                                       const MoeMapToGPUOptions &mapping, bool freezeKnobs,
                                       llvm::ArrayRef<std::string> inputDtypes) {
  buildLoopPipeline(pm, /*laneParallel=*/true, freezeKnobs, inputDtypes);
  pm.addPass(createMoeMapToGPU(mapping));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  target.features = "+ptx80";
  target.optLevel = 3;
  target.linkLibs.push_back(kLibdevice);
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createCanonicalizerPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void switchyard::moe::registerPtxPipeline() {
  PassPipelineRegistration<>("moe-ptx-pipeline",
                             "lower moe routers to single-CTA GPU kernels in PTX (sm_90)",
                             [](OpPassManager &pm) { buildPtxPipeline(pm, "sm_90"); });
}
