//===- MoeTokenOps.cpp - per-token op verifiers and folders ---------------===//
#include "MoeVerifyUtils.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

LogicalResult SoftmaxOp::verify() {
  return verifyScoreMatrix(*this, getInput().getType(), "input");
}

LogicalResult SigmoidOp::verify() {
  return verifyScoreMatrix(*this, getInput().getType(), "input");
}

LogicalResult AddBiasOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e))
    return failure();
  int64_t n = getBias().getType().getDimSize(0);
  if (n != *e)
    return emitOpError() << "bias has " << n << " entries but the scores have " << *e
                         << " experts";
  return success();
}

void ScaleOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule factor = ScalarRule::floatRange(getFactor(), "factor", {}, false, {}, false);
  factor.finite = factor.nonzero = true;
  factor.why = "(it would erase every score)";
  rules.push_back(factor);
}

LogicalResult ScaleOp::verify() {
  if (failed(verifyScoreMatrix(*this, getInput().getType(), "input")))
    return failure();
  return verifyScalarRules(*this);
}

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  if (getConstantFloat(getFactor()) == 1.0)
    return getInput();
  return {};
}

LogicalResult TopKOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e))
    return failure();
  if (failed(verifyChoices(*this, getK(), *e)))
    return failure();
  for (auto [type, name] : {std::pair<Type, StringRef>{getValues().getType(), "values"},
                            {getIndices().getType(), "indices"}}) {
    if (cast<ShapedType>(type).getDimSize(1) != getK())
      return emitOpError() << name << " must have k = " << describeSize(getK())
                           << " columns, got type " << type;
    if (failed(verifySameTokens(*this, getInput().getType(), "input", type, name)))
      return failure();
  }
  return success();
}

LogicalResult GroupLimitOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e))
    return failure();
  int64_t groups = getGroups();
  if (isParam(groups) != isParam(getTopkGroups()))
    return emitOpError() << "groups and keep are bound together: write both as ? or "
                            "neither";
  if (!isParam(groups) && groups < 1)
    return emitOpError() << "groups must be >= 1, got " << groups;
  if (!isParam(groups) && !isParam(*e) && *e % groups != 0)
    return emitOpError() << "groups (" << groups << ") must divide the number of experts ("
                         << *e << ")";
  if (!isParam(groups) && (getTopkGroups() < 1 || getTopkGroups() > groups))
    return emitOpError() << "keep (topk_groups) must be in [1, groups = " << groups
                         << "], got " << getTopkGroups();
  if (getGroupTopk() < 1)
    return emitOpError() << "group_topk must be >= 1, got " << getGroupTopk();
  if (isParam(groups) || isParam(*e))
    return success();
  int64_t perGroup = *e / groups;
  if (getGroupTopk() > perGroup)
    return emitOpError() << "group_topk must be in [1, experts per group = " << perGroup
                         << "], got " << getGroupTopk();
  return success();
}

OpFoldResult GroupLimitOp::fold(FoldAdaptor) {
  if (!isParam(getGroups()) && getTopkGroups() == getGroups())
    return getInput();
  return {};
}

LogicalResult BinsOp::verify() {
  if (failed(verifyScoreMatrix(*this, getLogits().getType(), "logits")))
    return failure();
  auto in = getLogits().getType();
  auto out = getBins().getType();
  if (in.getShape() != out.getShape())
    return emitOpError() << "bins must have the shape of the logits, got " << out << " for "
                         << in;
  return verifyScalarRules(*this);
}

void BinsOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule alpha =
      ScalarRule::floatRange(getAlpha(), "alpha", 0.0, /*minOpen=*/true, {}, false);
  alpha.finite = true;
  rules.push_back(alpha);
  rules.push_back(ScalarRule::intRange(getBeta(), "beta", 0));
}

LogicalResult MaskOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e))
    return failure();
  return verifySetSize(*this, getSet().getType(), *e, "set");
}

OpFoldResult MaskOp::fold(FoldAdaptor) {
  if (isFullSet(getSet()))
    return getInput();
  return {};
}

LogicalResult BiasResidentOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getInput().getType(), "input");
  if (failed(e) || failed(verifySetSize(*this, getResident().getType(), *e, "resident")))
    return failure();
  return verifyScalarRules(*this);
}

void BiasResidentOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule bonus = ScalarRule::floatRange(getBonus(), "bonus", 0.0, false, {}, false);
  bonus.finite = true;
  rules.push_back(bonus);
}

OpFoldResult BiasResidentOp::fold(FoldAdaptor) {
  if (getConstantFloat(getBonus()) == 0.0 || isEmptySet(getResident()))
    return getInput();
  return {};
}
