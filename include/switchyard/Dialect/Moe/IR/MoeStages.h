//===- MoeStages.h - which fused stage an op belongs to ---------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOESTAGES_H
#define SWITCHYARD_DIALECT_MOE_IR_MOESTAGES_H

#include "switchyard/Dialect/Moe/IR/MoeOps.h"

namespace switchyard::moe {

/// The stage kind an op runs in (its role trait, see MoeInterfaces.td), or nullopt
/// for ops that belong to no stage (structure, rule steps, other dialects' ops).
std::optional<StageKind> getStageKind(mlir::Operation *op);

/// True when an op of `kind` cannot consume a value made by another op of the same
/// stage: a batch reduction needs every token of its input first.
inline bool needsCompleteInputs(StageKind kind) { return kind == StageKind::batch; }

/// True when `consumer` cannot join the stage of `producer`: besides a batch
/// reduction's inputs, a row op (RowWise, run in the stage's token loop, which comes
/// first) cannot read what a whole op of its stage (run after that loop) makes -
/// moe.admit's masked scores routed by moe.route, say.
inline bool needsStageBoundary(StageKind kind, mlir::Operation *producer,
                               mlir::Operation *consumer) {
  return needsCompleteInputs(kind) ||
         (consumer->hasTrait<role::RowWise>() && !producer->hasTrait<role::RowWise>());
}

/// The value a stage result stands for (the operand its stage yields), recursively.
mlir::Value lookThroughStages(mlir::Value value);

/// The size of the dynamic dimension 0 of a router value as ceil((a*T + b) / d) in the
/// token count T: {1, 0, 1} for per-token data, else what the defining op says
/// (TokenSizedResultsOpInterface: vLLM's padded sizes of moe.align_blocks, ...).
std::array<int64_t, 3> getDynamicSizeRule(mlir::Value value);

} // namespace switchyard::moe

#endif
