//===- MoeStages.cpp - which fused stage an op belongs to -----------------===//
#include "switchyard/Dialect/Moe/IR/MoeStages.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace switchyard::moe {

std::optional<StageKind> getStageKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<StageKind>>(op)
      .Case<SoftmaxOp, SigmoidOp, AddBiasOp, ScaleOp, TopKOp, GroupLimitOp, BinsOp, MaskOp,
            BiasResidentOp>([](auto) { return StageKind::token; })
      .Case<BatchReduceOp, SegmentReduceOp, BinScoreOp, UnionTopKOp, SegmentFillOp,
            ConfidentTop1Op>([](auto) { return StageKind::batch; })
      .Case<EmptySetOp, FullSetOp, FillOp, FillPerDeviceOp, ThresholdSetOp, DropLowestOp,
            UnionOp, IntersectOp>([](auto) { return StageKind::select; })
      .Case<RouteOp, RemapPhysicalOp, ExpertCountsOp, CompactActiveOp, AlignBlocksOp>(
          [](auto) { return StageKind::route; })
      .Default([](Operation *) { return std::nullopt; });
}

} // namespace switchyard::moe
