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
  if (auto result = dyn_cast<OpResult>(value))
    if (auto sized = dyn_cast<TokenSizedResultsOpInterface>(result.getOwner()))
      return sized.getDynamicSizeRule(result);
  return {1, 0, 1};
}

} // namespace switchyard::moe
