//===- MoeSetOps.cpp - expert-set op verifiers, folders, patterns ---------===//
#include "MoeVerifyUtils.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

static int64_t setSize(Value set) {
  return cast<ExpertSetType>(set.getType()).getExperts();
}

//===----------------------------------------------------------------------===//
// union_topk
//===----------------------------------------------------------------------===//

LogicalResult UnionTopKOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getResult().getType(), *e, "result")))
    return failure();
  return verifyScalarRules(*this);
}

void UnionTopKOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  int64_t e = getScores().getType().getDimSize(1);
  rules.push_back(ScalarRule::intRange(getK0(), "k0", 0, boundOf(e)));
}

namespace {
/// k0 = 0 selects nothing; k0 = E selects every expert as soon as there is a token.
struct FoldTrivialWarmup : OpRewritePattern<UnionTopKOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnionTopKOp op, PatternRewriter &rewriter) const override {
    std::optional<int64_t> k0 = getConstantInt(op.getK0());
    if (k0 == 0) {
      rewriter.replaceOpWithNewOp<EmptySetOp>(op, op.getType());
      return success();
    }
    int64_t tokens = op.getScores().getType().getDimSize(0);
    if (k0 == setSize(op.getResult()) && !ShapedType::isDynamic(tokens) && tokens >= 1) {
      rewriter.replaceOpWithNewOp<FullSetOp>(op, op.getType());
      return success();
    }
    return failure();
  }
};
} // namespace

void UnionTopKOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<FoldTrivialWarmup>(context);
}

//===----------------------------------------------------------------------===//
// fill
//===----------------------------------------------------------------------===//

LogicalResult FillOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getInit().getType(), *e, "init")))
    return failure();
  Type amountType = getAmount().getType();
  switch (getMode()) {
  case FillMode::budget:
  case FillMode::min_size:
    if (!amountType.isInteger(64))
      return emitOpError() << "a '" << stringifyFillMode(getMode())
                           << "' fill takes an i64 number of experts, got " << amountType;
    break;
  case FillMode::threshold:
    if (!amountType.isF32())
      return emitOpError() << "a 'threshold' fill takes an f32 fraction of the mass, got "
                           << amountType;
    break;
  }
  return verifyScalarRules(*this);
}

void FillOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  int64_t e = getScores().getType().getDimSize(0);
  switch (getMode()) {
  case FillMode::budget:
    rules.push_back(ScalarRule::intRange(getAmount(), "budget", 0));
    return;
  case FillMode::min_size:
    rules.push_back(ScalarRule::intRange(getAmount(), "min_size", 0, boundOf(e)));
    return;
  case FillMode::threshold:
    rules.push_back(
        ScalarRule::floatRange(getAmount(), "threshold", 0.0, false, 1.0, false));
    return;
  }
}

OpFoldResult FillOp::fold(FoldAdaptor) {
  if (isFullSet(getInit()))
    return getInit();
  if (getMode() == FillMode::threshold)
    return getConstantFloat(getAmount()) == 0.0 ? getInit() : OpFoldResult();
  return getConstantInt(getAmount()) == 0 ? getInit() : OpFoldResult();
}

//===----------------------------------------------------------------------===//
// fill_per_device
//===----------------------------------------------------------------------===//

LogicalResult FillPerDeviceOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getInit().getType(), *e, "init")))
    return failure();
  int64_t placed = getPlacement().getType().getExperts();
  if (placed != *e)
    return emitOpError() << "placement places " << placed << " experts, expected " << *e;
  return verifyScalarRules(*this);
}

void FillPerDeviceOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::intRange(getBudget(), "budget", 0));
}

OpFoldResult FillPerDeviceOp::fold(FoldAdaptor) {
  if (isFullSet(getInit()) || getConstantInt(getBudget()) == 0)
    return getInit();
  return {};
}

//===----------------------------------------------------------------------===//
// segment_fill, threshold_set, drop_lowest, confident_top1
//===----------------------------------------------------------------------===//

LogicalResult SegmentFillOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getResult().getType(), *e, "result")) ||
      failed(verifySameTokens(*this, getScores().getType(), "scores",
                              getRequestIds().getType(), "request_ids")))
    return failure();
  return verifyScalarRules(*this);
}

void SegmentFillOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  int64_t e = getScores().getType().getDimSize(1);
  rules.push_back(ScalarRule::intRange(getK0(), "k0", 0, boundOf(e)));
  // Like moe.fill's budget: a budget beyond E simply takes every expert.
  rules.push_back(ScalarRule::intRange(getBudget(), "budget", 0));
}

LogicalResult ThresholdSetOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getResult().getType(), *e, "result")))
    return failure();
  return verifyScalarRules(*this);
}

void ThresholdSetOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule theta = ScalarRule::floatRange(getTheta(), "theta", {}, false, {}, false);
  theta.notNaN = true;
  rules.push_back(theta);
}

LogicalResult DropLowestOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getSet().getType(), *e, "set")))
    return failure();
  return verifyScalarRules(*this);
}

void DropLowestOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::intRange(getCount(), "count", 0));
}

OpFoldResult DropLowestOp::fold(FoldAdaptor) {
  if (getConstantInt(getCount()) == 0 || isEmptySet(getSet()))
    return getSet();
  return {};
}

LogicalResult ConfidentTop1Op::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getBins().getType(), "bins");
  if (failed(e) || failed(verifySetSize(*this, getResult().getType(), *e, "result")) ||
      failed(
          verifySameTokens(*this, getBins().getType(), "bins", getIds().getType(), "ids")))
    return failure();
  FailureOr<int64_t> k = verifyIdMatrix(*this, getIds().getType(), "ids");
  if (failed(k))
    return failure();
  if (!isParam(*k) && *k < 2)
    return emitOpError() << "ids must hold at least 2 choices per token to compare the "
                            "second choice's bin, got "
                         << *k;
  if (!isParam(*k) && !isParam(*e) && *k > *e)
    return emitOpError() << "ids hold " << *k << " choices per token but there are only "
                         << *e << " experts";
  return success();
}

//===----------------------------------------------------------------------===//
// union, intersect
//===----------------------------------------------------------------------===//

OpFoldResult UnionOp::fold(FoldAdaptor) {
  Value a = getLhs(), b = getRhs();
  if (a == b || isEmptySet(b) || isFullSet(a))
    return a;
  if (isEmptySet(a) || isFullSet(b))
    return b;
  return {};
}

OpFoldResult IntersectOp::fold(FoldAdaptor) {
  Value a = getLhs(), b = getRhs();
  if (a == b || isFullSet(b) || isEmptySet(a))
    return a;
  if (isFullSet(a) || isEmptySet(b))
    return b;
  return {};
}

//===----------------------------------------------------------------------===//
// DifferenceOp
//===----------------------------------------------------------------------===//

OpFoldResult DifferenceOp::fold(FoldAdaptor) {
  Value a = getLhs(), b = getRhs();
  if (isEmptySet(b) || isEmptySet(a))
    return a;
  return {};
}
