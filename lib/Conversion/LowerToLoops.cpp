//===- LowerToLoops.cpp - the moe-lower-to-loops pass ---------------------===//
#include "RouterLowering.h"

#include "switchyard/Dialect/Moe/Transforms/Passes.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOELOWERTOLOOPS
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

namespace {
struct MoeLowerToLoopsPass
    : switchyard::moe::impl::MoeLowerToLoopsBase<MoeLowerToLoopsPass> {
  using MoeLowerToLoopsBase::MoeLowerToLoopsBase;
  void runOnOperation() override {
    for (PolicyFunction policy : getPolicyFunctions(getOperation())) {
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
