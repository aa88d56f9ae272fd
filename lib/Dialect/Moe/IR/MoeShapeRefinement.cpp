//===- MoeShapeRefinement.cpp - binding a generic policy's result types ---===//
//
// ShapeRefinementOpInterface: once --moe-specialize has bound a generic router's
// arguments and shape attributes (experts, k, groups), every op gives its results their
// bound types here, in program order. Most ops keep an operand's shape (the default);
// the ops below make new shapes from E and k.
//
//===----------------------------------------------------------------------===//
#include "MoeVerifyUtils.h"

using namespace mlir;
using namespace switchyard::moe;

LogicalResult switchyard::moe::detail::refineByMatchingTypes(Operation *op, const ShapeBinding &binding,
                                            SmallVectorImpl<Type> &types) {
  for (OpResult result : op->getResults()) {
    Type written = result.getType();
    if (isa<ExpertSetType>(written)) {
      types.push_back(ExpertSetType::get(op->getContext(), binding.experts));
      continue;
    }
    auto shaped = dyn_cast<ShapedType>(written);
    if (!shaped || shaped.hasStaticShape()) {
      types.push_back(written);
      continue;
    }
    auto same = llvm::find_if(op->getOperands(), [&](Value operand) {
      return binding.writtenType(operand) == written;
    });
    if (same == op->getOperands().end())
      return op->emitOpError() << "cannot bind result #" << result.getResultNumber()
                               << " of type " << written
                               << ": no operand is written with that type";
    types.push_back((*same).getType());
  }
  return success();
}

Type switchyard::moe::detail::bindScoreOperand(Operation *op, unsigned index,
                              const ShapeBinding &binding) {
  auto tensor = dyn_cast<RankedTensorType>(op->getOperand(index).getType());
  if (!tensor || tensor.getRank() < 2)
    return op->getOperand(index).getType();
  SmallVector<int64_t> shape(tensor.getShape());
  for (int64_t &d : llvm::drop_begin(shape))
    if (ShapedType::isDynamic(d))
      d = binding.experts;
  return RankedTensorType::get(shape, tensor.getElementType());
}

Type AddBiasOp::bindOperandType(unsigned index, const ShapeBinding &binding) {
  if (index == 1) // the bias: one entry per expert
    return RankedTensorType::get({binding.experts}, getBias().getType().getElementType());
  return switchyard::moe::detail::bindScoreOperand(*this, index, binding);
}

/// [T, k] of `element`, T taken from `tokens` (a [T, ...] tensor).
static Type tokensBy(Value tokens, int64_t k, Type element) {
  return RankedTensorType::get(
      {cast<ShapedType>(tokens.getType()).getDimSize(0), k}, element);
}

/// [E] of `element`.
static Type perExpert(int64_t experts, Type element) {
  return RankedTensorType::get({experts}, element);
}

LogicalResult TopKOp::refineResultTypes(const ShapeBinding &,
                                        SmallVectorImpl<Type> &types) {
  Builder b(getContext());
  types.push_back(tokensBy(getInput(), getK(), b.getF32Type()));
  types.push_back(tokensBy(getInput(), getK(), b.getI32Type()));
  return success();
}

LogicalResult BinsOp::refineResultTypes(const ShapeBinding &,
                                        SmallVectorImpl<Type> &types) {
  types.push_back(getLogits().getType().clone(IntegerType::get(getContext(), 32)));
  return success();
}

LogicalResult BatchReduceOp::refineResultTypes(const ShapeBinding &binding,
                                               SmallVectorImpl<Type> &types) {
  types.push_back(perExpert(binding.experts, getResult().getType().getElementType()));
  return success();
}

LogicalResult BinScoreOp::refineResultTypes(const ShapeBinding &binding,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(perExpert(binding.experts, getResult().getType().getElementType()));
  return success();
}

LogicalResult RouteOp::refineResultTypes(const ShapeBinding &,
                                         SmallVectorImpl<Type> &types) {
  Builder b(getContext());
  types.push_back(tokensBy(getScores(), getK(), b.getI32Type()));
  types.push_back(tokensBy(getScores(), getK(), b.getF32Type()));
  return success();
}

LogicalResult ExpertCountsOp::refineResultTypes(const ShapeBinding &binding,
                                                SmallVectorImpl<Type> &types) {
  types.push_back(perExpert(binding.experts, IntegerType::get(getContext(), 32)));
  return success();
}

LogicalResult AlignBlocksOp::refineResultTypes(const ShapeBinding &,
                                               SmallVectorImpl<Type> &types) {
  // Sized by the token count and the one-value count: nothing to bind.
  llvm::append_range(types, getResultTypes());
  return success();
}

LogicalResult WhenOp::refineResultTypes(const ShapeBinding &,
                                        SmallVectorImpl<Type> &types) {
  // The regions are bound first; the gate yields what its first region yields.
  llvm::append_range(types, getGated().front().getTerminator()->getOperandTypes());
  return success();
}
