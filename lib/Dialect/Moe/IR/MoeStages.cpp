//===- MoeStages.cpp - which fused stage an op belongs to -----------------===//
#include "switchyard/Dialect/Moe/IR/MoeStages.h"


using namespace mlir;

namespace switchyard::moe {

std::optional<StageKind> getStageKind(Operation *op) {
  if (op->hasTrait<role::TokenStage>())
    return StageKind::token;
  if (op->hasTrait<role::BatchStage>())
    return StageKind::batch;
  if (op->hasTrait<role::SelectStage>())
    return StageKind::select;
  if (op->hasTrait<role::RouteStage>())
    return StageKind::route;
  return std::nullopt;
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
