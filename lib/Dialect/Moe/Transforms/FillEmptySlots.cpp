//===- FillEmptySlots.cpp - moe-fill-empty-slots: an engine's contract ----===//
//
// Serving engines' MoE kernels take expert ids in [0, E) only. For the builds an engine
// runs (moe-compile --fill-empty-slots), every router's topk_ids / topk_weights go
// through moe.fill_empty_slots before they are returned, so the contract holds inside
// the generated code on every target. A route with no set (`moe.route` without
// `within`) fills a token's empty slots from its own row (it leaves a row empty only when
// every score is -inf or NaN: expert 0 then), which keeps a policy of token loops one
// token loop (the GPU's grid kernel); any other producer (capacity drops, expert choice,
// a set smaller than k, a phase gate) also takes the batch's expert counts, for tokens
// left with no expert at all.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEFILLEMPTYSLOTS
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

/// Whether every token keeps at least one valid id in `ids` (unless all its logits are
/// -inf / NaN): a route over all experts of scores no batch-wide op masked (moe.admit
/// leaves a token whose every proposal was dropped with no eligible expert).
static bool rowsKeepAnExpert(Value ids) {
  auto route = ids.getDefiningOp<RouteOp>();
  return route && !route.getWithin() && !route.getScores().getDefiningOp<AdmitOp>();
}

LogicalResult switchyard::moe::fillEmptySlots(ModuleOp module, StringRef entry) {
  WalkResult result = module.walk([&](RouterOp router) {
    if (!entry.empty() && router.getSymName() != entry)
      return WalkResult::advance();
    int ids = -1, weights = -1;
    for (auto [i, n] : llvm::enumerate(router.getResultNames())) {
      StringRef name = cast<StringAttr>(n).getValue();
      ids = name == "topk_ids" ? int(i) : ids;
      weights = name == "topk_weights" ? int(i) : weights;
    }
    if (ids < 0 || weights < 0)
      return WalkResult::advance(); // not a router an engine runs
    if (ShapedType::isDynamic(router.getExperts())) {
      router.emitError() << "--fill-empty-slots: @" << router.getSymName()
                         << " is generic; bind its expert count first (--experts, --model)";
      return WalkResult::interrupt();
    }
    Operation *yield = router.getBodyBlock().getTerminator();
    Value routedIds = yield->getOperand(ids), routedWeights = yield->getOperand(weights);
    OpBuilder b(yield);
    Location loc = routedIds.getLoc();
    int64_t experts = router.getExperts();
    Value counts;
    if (!rowsKeepAnExpert(routedIds))
      counts = ExpertCountsOp::create(
          b, loc, RankedTensorType::get({experts}, b.getI32Type()), routedIds);
    auto fill = FillEmptySlotsOp::create(b, loc, routedIds.getType(),
                                         routedWeights.getType(), routedIds, routedWeights,
                                         counts, b.getI64IntegerAttr(experts));
    yield->setOperand(ids, fill.getResultIds());
    yield->setOperand(weights, fill.getResultWeights());
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

namespace {
struct MoeFillEmptySlotsPass
    : switchyard::moe::impl::MoeFillEmptySlotsBase<MoeFillEmptySlotsPass> {
  void runOnOperation() override {
    if (failed(fillEmptySlots(getOperation())))
      signalPassFailure();
  }
};
} // namespace
