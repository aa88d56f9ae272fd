//===- MoeRouteOps.cpp - route, remap_physical, expert_counts -------------===//
#include "MoeVerifyUtils.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

LogicalResult RouteOp::verify() {
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getScores().getType(), "scores");
  if (failed(e))
    return failure();
  if (getWithin() && failed(verifySetSize(*this, getWithin().getType(), *e, "within")))
    return failure();
  if (getWeights() && getWeights().getType() != getScores().getType())
    return emitOpError() << "weights must have the type of the scores ("
                         << getScores().getType() << "), got " << getWeights().getType();
  int64_t k = getK();
  if (failed(verifyChoices(*this, k, *e)))
    return failure();
  if (auto router = (*this)->getParentOfType<RouterOp>(); router && router.getTopK() != k)
    return emitOpError() << "routes to k = " << describeSize(k) << " experts but router @"
                         << router.getSymName()
                         << " has top_k = " << describeSize(router.getTopK());
  for (auto [type, name] :
       {std::pair<Type, StringRef>{getTopkIds().getType(), "topk_ids"},
        {getTopkWeights().getType(), "topk_weights"}}) {
    if (cast<ShapedType>(type).getDimSize(1) != k)
      return emitOpError() << name << " must have k = " << describeSize(k)
                           << " columns, got " << type;
    if (failed(verifySameTokens(*this, getScores().getType(), "scores", type, name)))
      return failure();
  }
  float scaling = getScaling().convertToFloat();
  if (!std::isfinite(scaling) || scaling <= 0.0f)
    return emitOpError() << "scaling must be finite and > 0, got " << scaling;
  if (getScalingFactor() && scaling != 1.0f)
    return emitOpError() << "takes scaling = " << scaling
                         << " or scaled_by(...), not both";
  return verifyScalarRules(*this);
}

void RouteOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  if (!getScalingFactor())
    return;
  ScalarRule factor = ScalarRule::floatRange(getScalingFactor(), "scaled_by", 0.0,
                                             /*minOpen=*/true, {}, false);
  factor.finite = true;
  rules.push_back(factor);
}

namespace {
/// Routing within every expert is plain routing.
struct DropFullWithin : OpRewritePattern<RouteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RouteOp op, PatternRewriter &rewriter) const override {
    if (!op.getWithin() || !isFullSet(op.getWithin()))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getWithinMutable().clear(); });
    return success();
  }
};
} // namespace

void RouteOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *context) {
  results.add<DropFullWithin>(context);
}

LogicalResult RemapPhysicalOp::verify() {
  if (failed(verifyIdMatrix(*this, getIds().getType(), "ids")))
    return failure();
  return verifyExpertCount(*this, getPlacement().getType().getExperts(), "placement");
}

LogicalResult ExpertCountsOp::verify() {
  if (failed(verifyIdMatrix(*this, getIds().getType(), "ids")))
    return failure();
  return verifyExpertCount(*this, getCounts().getType().getDimSize(0), "counts");
}

LogicalResult CompactActiveOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getCounts().getType(), "counts");
  if (failed(e))
    return failure();
  if (getActive().getType().getDimSize(0) != *e)
    return emitOpError() << "active must have one entry per expert (" << *e << "), got "
                         << getActive().getType();
  if (getNumActive().getType().getDimSize(0) != 1)
    return emitOpError() << "num_active must hold one value, got "
                         << getNumActive().getType();
  return success();
}

LogicalResult AlignBlocksOp::verify() {
  FailureOr<int64_t> k = verifyIdMatrix(*this, getIds().getType(), "ids");
  if (failed(k) || failed(verifyExpertVector(*this, getCounts().getType(), "counts")))
    return failure();
  if (getBlockSize() < 1 || getBlockSize() > kMaxBlockSize)
    return emitOpError() << "block_size must be in [1, " << kMaxBlockSize << "], got "
                         << getBlockSize();
  // The padded outputs hold T*k + E*(block_size - 1) entries: the fixed part must fit.
  int64_t experts = getCounts().getType().getDimSize(0);
  if (experts > kMaxStaticElements / getBlockSize())
    return emitOpError() << "block_size " << getBlockSize() << " pads " << experts
                         << " experts to more than " << kMaxStaticElements << " entries";
  for (auto [type, name] :
       {std::pair<Type, StringRef>{getSortedTokenIds().getType(), "sorted_token_ids"},
        {getExpertIds().getType(), "expert_ids"}})
    if (!cast<ShapedType>(type).isDynamicDim(0))
      return emitOpError() << name << " depends on the token count: its size must be "
                              "dynamic, got "
                           << type;
  if (getNumTokensPostPadded().getType().getDimSize(0) != 1)
    return emitOpError() << "num_tokens_post_padded must hold one value, got "
                         << getNumTokensPostPadded().getType();
  return success();
}
