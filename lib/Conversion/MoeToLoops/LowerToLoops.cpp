//===- LowerToLoops.cpp - the moe-lower-to-loops pass ---------------------===//
#include "OpLowerings.h"

#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOELOWERTOLOOPS
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

void switchyard::moe::registerLoopLoweringModels(DialectRegistry &registry) {
  registerTokenOpLowerings(registry);
  registerBatchOpLowerings(registry);
  registerSetOpLowerings(registry);
  registerRouteOpLowerings(registry);
  registerCapacityOpLowerings(registry);
  registerResidencyOpLowerings(registry);
  registerEplbOpLowerings(registry);
  registerLeastLoadedOpLowerings(registry);
  registerLibraOpLowerings(registry);
  registerPrefetchOpLowerings(registry);
}

namespace {
struct MoeLowerToLoopsPass
    : switchyard::moe::impl::MoeLowerToLoopsBase<MoeLowerToLoopsPass> {
  using MoeLowerToLoopsBase::MoeLowerToLoopsBase;
  void getDependentDialects(DialectRegistry &registry) const override {
    MoeLowerToLoopsBase::getDependentDialects(registry);
    registerLoopLoweringModels(registry);
  }
  void runOnOperation() override {
    for (PolicyOpInterface policy : getPolicyOps(getOperation())) {
      OpBuilder builder(policy.getOperation());
      RouterLowering lowering(policy, builder, laneParallel);
      if (failed(lowering.run()))
        return signalPassFailure();
      if (!keepRouters)
        policy.getOperation()->erase();
    }
  }
};
} // namespace
