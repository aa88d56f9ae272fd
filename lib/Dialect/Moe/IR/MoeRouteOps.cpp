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
  if (getSoftmaxWeights() && (!getRenormalize() || getWeights()))
    return emitOpError() << "softmax_weights requires renormalize and no weights operand";
  int64_t k = getK();
  if (failed(verifyChoices(*this, k, *e)))
    return failure();
  if (auto router = (*this)->getParentOfType<RouterOp>(); router && router.getTopK() != k)
    return emitOpError() << "routes to k = " << describeSize(k) << " experts but router @"
                         << router.getSymName()
                         << " has top_k = " << describeSize(router.getTopK());
  for (auto [type, name] : {std::pair<Type, StringRef>{getTopkIds().getType(), "topk_ids"},
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
    return emitOpError() << "takes scaling = " << scaling << " or scaled_by(...), not both";
  if (getRows()) {
    if (!getWithin() && !getMaxRank())
      return emitOpError() << "rows(...) says which tokens within(...) and max_rank(...) "
                              "restrict: give one of them";
    if (failed(verifySameTokens(*this, getScores().getType(), "scores", getRows().getType(),
                                "rows")))
      return failure();
  }
  if (getMinK() && !getTopP())
    return emitOpError() << "min_k(...) bounds top_p(...) truncation: give top_p too";
  if (getTopP() && getSoftmaxWeights())
    return emitOpError() << "top_p needs the selected experts' probabilities, which "
                            "softmax_weights does not compute: weigh with "
                            "weights(moe.softmax ...)";
  return verifyScalarRules(*this);
}

void RouteOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  if (getScalingFactor()) {
    ScalarRule factor = ScalarRule::floatRange(getScalingFactor(), "scaled_by", 0.0,
                                               /*minOpen=*/true, {}, false);
    factor.finite = true;
    rules.push_back(factor);
  }
  if (getTopP())
    rules.push_back(ScalarRule::floatRange(getTopP(), "top_p", 0.0, /*minOpen=*/true, 1.0,
                                           /*maxOpen=*/false));
  if (getMaxRank()) {
    int64_t experts = cast<ShapedType>(getScores().getType()).getDimSize(1);
    rules.push_back(ScalarRule::intRange(
        getMaxRank(), "max_rank", 0,
        ShapedType::isDynamic(experts) ? std::nullopt : std::optional(experts)));
  }
  if (getMinK()) {
    int64_t k = getK();
    rules.push_back(ScalarRule::intRange(
        getMinK(), "min_k", 1, ShapedType::isDynamic(k) ? std::nullopt : std::optional(k)));
  }
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
  int64_t experts = getPlacement().getType().getExperts();
  if (failed(verifyExpertCount(*this, experts, "placement")))
    return failure();
  if (Value r = getReplicas()) {
    int64_t n = cast<ShapedType>(r.getType()).getDimSize(0);
    if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(experts) && n != experts)
      return emitOpError() << "replicas must have one slot per expert (" << experts
                           << "), got " << r.getType();
  }
  return success();
}

LogicalResult MetroReplicasOp::verify() {
  PlacementType placement = getPlacement().getType();
  int64_t experts = placement.getExperts(), devices = placement.getDevices();
  for (auto [value, name, size] :
       {std::tuple<Value, StringRef, int64_t>{getCounts(), "counts", experts},
        {getReplicas(), "replicas", experts},
        {getDeviceExperts(), "device_experts", devices}}) {
    int64_t n = cast<ShapedType>(value.getType()).getDimSize(0);
    if (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(size) && n != size)
      return emitOpError() << name << " must have " << size << " entries (the placement's "
                           << (name == "device_experts" ? "devices" : "experts")
                           << "), got " << value.getType();
  }
  return success();
}

LogicalResult FillEmptySlotsOp::verify() {
  FailureOr<int64_t> k = verifyIdMatrix(*this, getIds().getType(), "ids");
  if (failed(k))
    return failure();
  auto weights = cast<RankedTensorType>(getWeights().getType());
  if (weights.getDimSize(1) != *k)
    return emitOpError() << "weights must have k = " << *k << " columns like ids, got "
                         << weights;
  if (failed(verifySameTokens(*this, getIds().getType(), "ids", weights, "weights")))
    return failure();
  if (getExperts() < 1)
    return emitOpError() << "experts must be >= 1, got " << getExperts();
  if (failed(verifyExpertCount(*this, getExperts(), "experts")))
    return failure();
  if (Value counts = getCounts()) {
    int64_t n = cast<RankedTensorType>(counts.getType()).getDimSize(0);
    if (n != getExperts())
      return emitOpError() << "counts must have one entry per expert (" << getExperts()
                           << "), got " << counts.getType();
  }
  return success();
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
      return emitOpError() << name
                           << " depends on the token count: its size must be "
                              "dynamic, got "
                           << type;
  if (getNumTokensPostPadded().getType().getDimSize(0) != 1)
    return emitOpError() << "num_tokens_post_padded must hold one value, got "
                         << getNumTokensPostPadded().getType();
  return success();
}

std::array<int64_t, 3> AlignBlocksOp::getDynamicSizeRule(OpResult result) {
  int64_t k = getIds().getType().getDimSize(1);
  int64_t pad = getCounts().getType().getDimSize(0) * (getBlockSize() - 1);
  return {k, pad, result == getExpertIds() ? getBlockSize() : int64_t(1)};
}

//===----------------------------------------------------------------------===//
// capacity, admit, expert_choice
//===----------------------------------------------------------------------===//

/// Exactly one of `capacity_factor(...)` / `capacity(...)`.
static LogicalResult verifyCapacityForm(Operation *op, Value factor, Value capacity) {
  if (!factor == !capacity)
    return op->emitOpError() << "takes capacity_factor(...) or capacity(...): exactly one";
  return success();
}

static void capacityRules(Value factor, Value capacity,
                          SmallVectorImpl<ScalarRule> &rules) {
  if (factor) {
    ScalarRule rule = ScalarRule::floatRange(factor, "capacity_factor", 0.0,
                                             /*minOpen=*/true, {}, false);
    rule.finite = true;
    rules.push_back(rule);
  }
  if (capacity)
    rules.push_back(ScalarRule::intRange(capacity, "capacity", 0));
}

LogicalResult CapacityOp::verify() {
  if (failed(verifyCapacityForm(*this, getCapacityFactor(), getCapacity())))
    return failure();
  if (failed(verifyIdMatrix(*this, getIds().getType(), "ids")))
    return failure();
  if (getIds().getType().getShape() != getWeights().getType().getShape())
    return emitOpError() << "weights must have the shape of the ids (" << getIds().getType()
                         << "), got " << getWeights().getType();
  if (failed(verifyExpertCount(*this, getCounts().getType().getDimSize(0), "counts")))
    return failure();
  if (getDropped().getType().getDimSize(0) != 1)
    return emitOpError() << "dropped must hold one value, got " << getDropped().getType();
  return verifyScalarRules(*this);
}

void CapacityOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  capacityRules(getCapacityFactor(), getCapacity(), rules);
}

LogicalResult AdmitOp::verify() {
  if (failed(verifyCapacityForm(*this, getCapacityFactor(), getCapacity())))
    return failure();
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifyChoices(*this, getK(), *e)))
    return failure();
  return verifyScalarRules(*this);
}

void AdmitOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  capacityRules(getCapacityFactor(), getCapacity(), rules);
  if (getCandidates()) {
    int64_t experts = getScores().getType().getDimSize(1);
    rules.push_back(ScalarRule::intRange(
        getCandidates(), "candidates", 0,
        ShapedType::isDynamic(experts) ? std::nullopt : std::optional(experts)));
  }
}

LogicalResult ExpertChoiceOp::verify() {
  if (failed(verifyCapacityForm(*this, getCapacityFactor(), getCapacity())))
    return failure();
  FailureOr<int64_t> e = verifyScoreMatrix(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifyChoices(*this, getK(), *e)))
    return failure();
  int64_t m = getMaxExperts();
  if (m < 1 || (!isParam(*e) && m > *e))
    return emitOpError() << "max_experts must be in [1, " << describeSize(*e) << "], got "
                         << m;
  for (auto [type, name] : {std::pair<Type, StringRef>{getTopkIds().getType(), "topk_ids"},
                            {getTopkWeights().getType(), "topk_weights"}}) {
    if (cast<ShapedType>(type).getDimSize(1) != m)
      return emitOpError() << name << " must have max_experts = " << m << " columns, got "
                           << type;
    if (failed(verifySameTokens(*this, getScores().getType(), "scores", type, name)))
      return failure();
  }
  if (getBlockSize() < 1 || getBlockSize() > kMaxBlockSize)
    return emitOpError() << "block_size must be in [1, " << kMaxBlockSize << "], got "
                         << getBlockSize();
  if (!isParam(*e) && *e > kMaxStaticElements / getBlockSize())
    return emitOpError() << "block_size " << getBlockSize() << " pads " << *e
                         << " experts to more than " << kMaxStaticElements << " entries";
  for (auto [type, name] :
       {std::pair<Type, StringRef>{getSortedTokenIds().getType(), "sorted_token_ids"},
        {getSortedWeights().getType(), "sorted_weights"},
        {getExpertIds().getType(), "expert_ids"}})
    if (!cast<ShapedType>(type).isDynamicDim(0))
      return emitOpError() << name
                           << " depends on the token count: its size must be "
                              "dynamic, got "
                           << type;
  for (auto [type, name] : {std::pair<Type, StringRef>{getNumTokensPostPadded().getType(),
                                                       "num_tokens_post_padded"},
                            {getNumUnrouted().getType(), "num_unrouted"}})
    if (cast<ShapedType>(type).getDimSize(0) != 1)
      return emitOpError() << name << " must hold one value, got " << type;
  return verifyScalarRules(*this);
}

void ExpertChoiceOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  capacityRules(getCapacityFactor(), getCapacity(), rules);
}

std::array<int64_t, 3> ExpertChoiceOp::getDynamicSizeRule(OpResult result) {
  // Every expert may take every token: E*T slots plus each expert's padding.
  int64_t e = getScores().getType().getDimSize(1);
  if (result != getSortedTokenIds() && result != getSortedWeights() &&
      result != getExpertIds())
    return {1, 0, 1};
  return {e, e * (getBlockSize() - 1),
          result == getExpertIds() ? getBlockSize() : int64_t(1)};
}
