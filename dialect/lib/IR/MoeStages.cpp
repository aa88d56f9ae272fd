//===- MoeStages.cpp - which fused stage an op belongs to -----------------===//
#include "switchyard/Dialect/Moe/IR/MoeStages.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace switchyard::moe {

std::optional<StageKind> getStageKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<StageKind>>(op)
      .Case<SoftmaxOp, SigmoidOp, AddBiasOp, ScaleOp, TopKOp, GroupLimitOp, BinsOp, MaskOp,
            BiasResidentOp, GateOp>([](auto) { return StageKind::token; })
      .Case<BatchReduceOp, SegmentReduceOp, BinScoreOp, UnionTopKOp, SegmentFillOp,
            ConfidentTop1Op>([](auto) { return StageKind::batch; })
      .Case<EmptySetOp, FullSetOp, FillOp, FillPerDeviceOp, ThresholdSetOp, DropLowestOp,
            UnionOp, IntersectOp>([](auto) { return StageKind::select; })
      .Case<RouteOp, RemapPhysicalOp, ExpertCountsOp, CompactActiveOp, AlignBlocksOp,
            ResidentFirstOp>(
          [](auto) { return StageKind::route; })
      .Default([](Operation *) { return std::nullopt; });
}

Value lookThroughStages(Value value) {
  while (auto stage = value.getDefiningOp<StageOp>()) {
    auto yield = cast<YieldOp>(stage.getBody().front().getTerminator());
    value = yield.getOperand(cast<OpResult>(value).getResultNumber());
  }
  return value;
}

std::array<int64_t, 3> getDynamicSizeRule(Value value) {
  value = lookThroughStages(value);
  if (auto align = value.getDefiningOp<AlignBlocksOp>()) {
    int64_t k = align.getIds().getType().getDimSize(1);
    int64_t pad = align.getCounts().getType().getDimSize(0) * (align.getBlockSize() - 1);
    return {k, pad, value == align.getExpertIds() ? align.getBlockSize() : int64_t(1)};
  }
  return {1, 0, 1};
}

} // namespace switchyard::moe
