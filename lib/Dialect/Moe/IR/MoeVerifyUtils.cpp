//===- MoeVerifyUtils.cpp - checks shared by the moe op verifiers ---------===//
#include "MoeVerifyUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace switchyard::moe {

static std::optional<Attribute> knownAttr(Value value, bool allowKnobs) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (auto cst = dyn_cast<arith::ConstantOp>(def))
    return cst.getValue();
  if (allowKnobs)
    if (auto knob = dyn_cast<KnobOp>(def))
      return knob.getValue();
  return std::nullopt;
}

static std::optional<int64_t> intOf(std::optional<Attribute> attr) {
  if (attr)
    if (auto i = dyn_cast<IntegerAttr>(*attr))
      return i.getValue().getSExtValue();
  return std::nullopt;
}

static std::optional<double> floatOf(std::optional<Attribute> attr) {
  if (attr)
    if (auto f = dyn_cast<FloatAttr>(*attr))
      return f.getValueAsDouble();
  return std::nullopt;
}

std::optional<int64_t> getKnownInt(Value v) { return intOf(knownAttr(v, true)); }
std::optional<double> getKnownFloat(Value v) { return floatOf(knownAttr(v, true)); }
std::optional<int64_t> getConstantInt(Value v) { return intOf(knownAttr(v, false)); }
std::optional<double> getConstantFloat(Value v) { return floatOf(knownAttr(v, false)); }

namespace detail {

static PolicyOpInterface enclosingPolicy(Operation *op) {
  return op->getParentOfType<PolicyOpInterface>();
}

std::optional<int64_t> enclosingExperts(Operation *op) {
  if (PolicyOpInterface f = enclosingPolicy(op))
    return f.getExperts();
  return std::nullopt;
}

std::string describeSize(int64_t size) {
  return ShapedType::isDynamic(size) ? std::string("?") : std::to_string(size);
}

std::string describeContainer(Operation *container) {
  auto f = dyn_cast<PolicyOpInterface>(container);
  if (!f || f.isRouter())
    return "router";
  return (f.getKind() + " rule").str();
}

bool inGenericPolicy(Operation *op) {
  PolicyOpInterface f = enclosingPolicy(op);
  return f && isParam(f.getExperts());
}

LogicalResult verifyExpertCount(Operation *op, int64_t experts, StringRef what) {
  if (inGenericPolicy(op)) {
    if (!isParam(experts))
      return op->emitOpError() << what << " has " << experts
                               << " experts but the enclosing generic "
                               << describeContainer(enclosingPolicy(op))
                               << " leaves the expert count to its binding: write ?";
    return success();
  }
  if (ShapedType::isDynamic(experts))
    return op->emitOpError() << what << " must have a static number of experts";
  if (experts < 1)
    return op->emitOpError() << what << " must have at least one expert";
  if (PolicyOpInterface f = enclosingPolicy(op); f && f.getExperts() != experts)
    return op->emitOpError() << what << " has " << experts << " experts but the enclosing "
                             << describeContainer(f) << " has " << f.getExperts();
  return success();
}

FailureOr<int64_t> verifyScoreMatrix(Operation *op, Type type, StringRef what) {
  auto t = cast<RankedTensorType>(type);
  if (failed(verifyExpertCount(op, t.getDimSize(1), what)))
    return failure();
  return t.getDimSize(1);
}

FailureOr<int64_t> verifyExpertVector(Operation *op, Type type, StringRef what) {
  auto t = cast<RankedTensorType>(type);
  if (failed(verifyExpertCount(op, t.getDimSize(0), what)))
    return failure();
  return t.getDimSize(0);
}

LogicalResult verifySameTokens(Operation *op, Type a, StringRef aName, Type b,
                               StringRef bName) {
  int64_t ta = cast<ShapedType>(a).getDimSize(0);
  int64_t tb = cast<ShapedType>(b).getDimSize(0);
  if (!ShapedType::isDynamic(ta) && !ShapedType::isDynamic(tb) && ta != tb)
    return op->emitOpError() << aName << " has " << ta << " tokens but " << bName << " has "
                             << tb;
  return success();
}

FailureOr<int64_t> verifyIdMatrix(Operation *op, Type type, StringRef what) {
  int64_t k = cast<ShapedType>(type).getDimSize(1);
  if (ShapedType::isDynamic(k) && !inGenericPolicy(op))
    return op->emitOpError() << what << " must have a static number of choices per token";
  return k;
}

LogicalResult verifyChoices(Operation *op, int64_t k, int64_t experts) {
  if (isParam(k)) {
    if (!inGenericPolicy(op))
      return op->emitOpError() << "k = ? is only allowed in a generic policy (one whose "
                                  "experts are bound by --moe-specialize)";
    return success();
  }
  if (k < 1 || (!isParam(experts) && k > experts))
    return op->emitOpError() << "k must be in [1, " << describeSize(experts) << "], got "
                             << k;
  return success();
}

LogicalResult verifySetSize(Operation *op, Type setType, int64_t experts, StringRef what) {
  int64_t n = cast<ExpertSetType>(setType).getExperts();
  if (n != experts)
    return op->emitOpError() << what << " is a set of " << describeSize(n)
                             << " experts, expected " << describeSize(experts);
  return success();
}

LogicalResult verifySizeParameters(Operation *op, bool *generic) {
  bool inGeneric = inGenericPolicy(op);
  if (generic)
    *generic = inGeneric;
  SmallVector<SizeParameter> params;
  cast<ShapeRefinementOpInterface>(op).getSizeParameters(params);
  for (const SizeParameter &p : params) {
    if (p.attr.empty())
      continue; // a size in types: the type checks cover it
    if (isParam(p.value)) {
      if (!inGeneric)
        return op->emitOpError() << p.attr
                                 << " = ? is only allowed in a generic policy "
                                    "(one whose experts are bound by --moe-specialize)";
      continue;
    }
    if (p.value < 1)
      return op->emitOpError() << p.attr << " must be >= 1, got " << p.value;
  }
  return success();
}

bool isFullSet(Value value) { return value.getDefiningOp<FullSetOp>() != nullptr; }
bool isEmptySet(Value value) { return value.getDefiningOp<EmptySetOp>() != nullptr; }

} // namespace detail
} // namespace switchyard::moe
