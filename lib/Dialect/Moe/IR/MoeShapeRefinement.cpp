//===- MoeShapeRefinement.cpp - binding a generic policy's result types ---===//
//
// ShapeRefinementOpInterface: once --moe-specialize has bound a generic policy's
// shape attributes (experts, k, groups, gpus, ...; getSizeParameters below) and its
// arguments, every op gives its results their bound types here, in program order. Most
// ops keep an operand's shape (the default); the ops below make new shapes from E, k,
// the devices and the slots.
//
//===----------------------------------------------------------------------===//
#include "MoeVerifyUtils.h"

using namespace mlir;
using namespace switchyard::moe;

LogicalResult switchyard::moe::detail::refineByMatchingTypes(Operation *op,
                                                             const ShapeBinding &binding,
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
  // Scores are [T, E]; an op over per-expert statistics reads [E] (or [E, E]) only.
  bool allExperts = op->hasTrait<role::ExpertOperands>();
  if (!tensor || (tensor.getRank() < 2 && !allExperts))
    return op->getOperand(index).getType();
  SmallVector<int64_t> shape(tensor.getShape());
  for (int64_t &d : llvm::drop_begin(shape, allExperts ? 0 : 1))
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
  return RankedTensorType::get({cast<ShapedType>(tokens.getType()).getDimSize(0), k},
                               element);
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

LogicalResult CapacityOp::refineResultTypes(const ShapeBinding &binding,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(getIds().getType());
  types.push_back(getWeights().getType());
  types.push_back(perExpert(binding.experts, IntegerType::get(getContext(), 32)));
  types.push_back(getDropped().getType());
  return success();
}

LogicalResult MetroReplicasOp::refineResultTypes(const ShapeBinding &binding,
                                                 SmallVectorImpl<Type> &types) {
  Type i32 = IntegerType::get(getContext(), 32);
  types.push_back(perExpert(binding.experts, i32));
  types.push_back(RankedTensorType::get({getPlacement().getType().getDevices()}, i32));
  return success();
}

LogicalResult ExpertChoiceOp::refineResultTypes(const ShapeBinding &,
                                                SmallVectorImpl<Type> &types) {
  // The per-token view is [T, max_experts]; the grouped layout is sized by T.
  Builder b(getContext());
  types.push_back(tokensBy(getScores(), getMaxExperts(), b.getI32Type()));
  types.push_back(tokensBy(getScores(), getMaxExperts(), b.getF32Type()));
  llvm::append_range(types, llvm::drop_begin(getResultTypes(), 2));
  return success();
}

LogicalResult WhenOp::refineResultTypes(const ShapeBinding &,
                                        SmallVectorImpl<Type> &types) {
  // The regions are bound first; the gate yields what its first region yields.
  llvm::append_range(types, getGated().front().getTerminator()->getOperandTypes());
  return success();
}

//===----------------------------------------------------------------------===//
// Model sizes the ops are written with (getSizeParameters)
//===----------------------------------------------------------------------===//

void RouteOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  // `k = ?` is the model's top-k; a fixed k may differ from it (a wider routing).
  params.push_back({"top_k", getK(), getKAttrName().getValue(), /*mayDiffer=*/true});
}

void AdmitOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  // The capacity is sized for the model's top-k; a fixed k may differ from it.
  params.push_back({"top_k", getK(), getKAttrName().getValue(), /*mayDiffer=*/true});
}

void ExpertChoiceOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  // The capacity is sized for the model's top-k; a fixed k may differ from it.
  params.push_back({"top_k", getK(), getKAttrName().getValue(), /*mayDiffer=*/true});
}

void TopKOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"top_k", getK(), getKAttrName().getValue(), /*mayDiffer=*/true});
}

void GroupLimitOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"groups", getGroups(), getGroupsAttrName().getValue()});
  params.push_back({"topk_groups", getTopkGroups(), getTopkGroupsAttrName().getValue()});
}

void HiCapacityOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"experts", getExperts(), getExpertsAttrName().getValue()});
}

void EplbOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"groups", getGroups(), getGroupsAttrName().getValue()});
  params.push_back({"nodes", getNodes(), getNodesAttrName().getValue()});
  params.push_back({"devices", getGpus(), getGpusAttrName().getValue()});
  params.push_back({"slots", getPhy2log().getType().getDimSize(0)});
}

void DeviceLoadsOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"devices", getGpus(), getGpusAttrName().getValue()});
}

void LeastLoadedOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"devices", getGpus(), getGpusAttrName().getValue()});
}

void GpuRequestsOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  params.push_back({"devices", getGpus(), getGpusAttrName().getValue()});
  params.push_back({"top_k", getIds().getType().getDimSize(1)});
}

void GateOp::getSizeParameters(SmallVectorImpl<SizeParameter> &params) {
  int64_t hidden = getHidden().getType().getDimSize(1);
  if (ShapedType::isDynamic(hidden))
    hidden = getWeight().getType().getDimSize(0);
  params.push_back({"hidden_size", hidden});
}

//===----------------------------------------------------------------------===//
// Rule steps and the ops of their routers
//===----------------------------------------------------------------------===//

/// `dim` when written, else `bound`.
static int64_t orBound(int64_t dim, int64_t bound) {
  return ShapedType::isDynamic(dim) ? bound : dim;
}

/// A bound [rows, cols] i32 or f32 tensor.
static Type matrix(int64_t rows, int64_t cols, Type element) {
  return RankedTensorType::get({rows, cols}, element);
}

LogicalResult RankedOp::refineResultTypes(const ShapeBinding &binding,
                                          SmallVectorImpl<Type> &types) {
  types.push_back(perExpert(binding.experts, IntegerType::get(getContext(), 32)));
  types.push_back(getCount().getType());
  return success();
}

LogicalResult EplbOp::refineResultTypes(const ShapeBinding &binding,
                                        SmallVectorImpl<Type> &types) {
  Type i32 = IntegerType::get(getContext(), 32);
  int64_t slots = orBound(getPhy2log().getType().getDimSize(0), binding.slots);
  types.push_back(RankedTensorType::get({slots}, i32));
  types.push_back(matrix(binding.experts, slots - binding.experts + 1, i32));
  types.push_back(perExpert(binding.experts, i32));
  return success();
}

LogicalResult DeviceLoadsOp::refineResultTypes(const ShapeBinding &,
                                               SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get({getGpus()}, Float32Type::get(getContext())));
  return success();
}

LogicalResult LeastLoadedOp::refineResultTypes(const ShapeBinding &binding,
                                               SmallVectorImpl<Type> &types) {
  Type f32 = Float32Type::get(getContext()), i32 = IntegerType::get(getContext(), 32);
  types.push_back(matrix(binding.experts, getGpus(), i32));
  types.push_back(RankedTensorType::get({getGpus()}, f32));
  types.push_back(RankedTensorType::get({getGpus()}, f32));
  types.push_back(getTransfers().getType());
  return success();
}

Type DeviceLoadsOp::bindOperandType(unsigned index, const ShapeBinding &binding) {
  Type element = cast<ShapedType>(getOperand(index).getType()).getElementType();
  // loads and replica_count are per expert, phy2log (operand 1 when placed) per slot.
  bool perSlot = getPhy2log() && index == 1;
  return RankedTensorType::get({perSlot ? binding.slots : binding.experts}, element);
}

LogicalResult GpuRequestsOp::refineResultTypes(const ShapeBinding &binding,
                                               SmallVectorImpl<Type> &types) {
  types.push_back(matrix(getGpus(), binding.experts, IntegerType::get(getContext(), 32)));
  return success();
}

Type GpuRequestsOp::bindOperandType(unsigned index, const ShapeBinding &binding) {
  auto type = cast<RankedTensorType>(getOperand(index).getType());
  if (index != 0) // token_gpu: [T]
    return type;
  return matrix(type.getDimSize(0), orBound(type.getDimSize(1), binding.topK),
                type.getElementType());
}

/// [G] f32 loads, G the rows of a bound [G, E] requests matrix.
static Type perGpuLoads(Value requests) {
  return RankedTensorType::get({cast<ShapedType>(requests.getType()).getDimSize(0)},
                               Float32Type::get(requests.getContext()));
}

LogicalResult ServedLoadsOp::refineResultTypes(const ShapeBinding &,
                                               SmallVectorImpl<Type> &types) {
  types.push_back(perGpuLoads(getRequests()));
  return success();
}

LogicalResult LibraReplicateOp::refineResultTypes(const ShapeBinding &,
                                                  SmallVectorImpl<Type> &types) {
  auto requests = cast<RankedTensorType>(getRequests().getType()); // [G, E]
  types.push_back(matrix(requests.getDimSize(1), requests.getDimSize(0),
                         requests.getElementType())); // [E, G]
  return success();
}

Type LibraShardOp::bindOperandType(unsigned index, const ShapeBinding &binding) {
  auto type = cast<ShapedType>(getOperand(index).getType());
  if (index != 1)
    return type;
  // A placement given as an argument (@libra_shard in policies/libra.mlir): [E, G], G the
  // GPUs its requests are bound to.
  int64_t gpus = type.getDimSize(1);
  if (auto requests = getRequests().getDefiningOp<GpuRequestsOp>())
    gpus = requests.getGpus();
  return matrix(binding.experts, gpus, type.getElementType());
}

LogicalResult LibraShardOp::refineResultTypes(const ShapeBinding &,
                                              SmallVectorImpl<Type> &types) {
  types.push_back(getRequests().getType());
  types.push_back(perGpuLoads(getRequests()));
  return success();
}

LogicalResult ResidentFirstOp::refineResultTypes(const ShapeBinding &,
                                                 SmallVectorImpl<Type> &types) {
  types.push_back(
      RankedTensorType::get({cast<ShapedType>(getIds().getType()).getDimSize(0)},
                            IntegerType::get(getContext(), 32)));
  types.push_back(getNumReady().getType());
  return success();
}

LogicalResult GateOp::refineResultTypes(const ShapeBinding &,
                                        SmallVectorImpl<Type> &types) {
  types.push_back(matrix(getHidden().getType().getDimSize(0),
                         getWeight().getType().getDimSize(1),
                         Float32Type::get(getContext())));
  return success();
}

Type GateOp::bindOperandType(unsigned index, const ShapeBinding &binding) {
  auto type = cast<RankedTensorType>(getOperand(index).getType());
  if (index == 0) // hidden: [T, H]
    return matrix(type.getDimSize(0), orBound(type.getDimSize(1), binding.hidden),
                  type.getElementType());
  // weight: [H, E]
  return matrix(orBound(type.getDimSize(0), binding.hidden),
                orBound(type.getDimSize(1), binding.experts), type.getElementType());
}
