//===- MoeRuleOps.cpp - residency and balancing ops -----------------------===//
#include "MoeVerifyUtils.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

/// The prologue of the verifiers of ops written with model sizes (EPLB, Libra,
/// ExpertFlow): checks the size parameters (verifySizeParameters) and returns the
/// verifier's result when it ends there: failure() for a bad size, success() inside a
/// generic policy, whose shapes are checked once --moe-specialize has bound the sizes.
/// std::nullopt: the op is specialized, check its shapes.
static std::optional<LogicalResult> verifySizesFirst(Operation *op) {
  bool generic;
  if (failed(verifySizeParameters(op, &generic)))
    return failure();
  if (generic)
    return success();
  return std::nullopt;
}

LogicalResult EmaOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getHotness().getType(), "hotness");
  if (failed(e))
    return failure();
  if (cast<ShapedType>(getCounts().getType()).getDimSize(0) != *e)
    return emitOpError() << "counts must have " << *e << " entries, like hotness";
  return verifyScalarRules(*this);
}

void EmaOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::floatRange(getAlpha(), "alpha", 0.0, false, 1.0, true));
}

void HiCapacityOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::intRange(getHiBytes(), "hi_bytes", 1));
  rules.push_back(ScalarRule::intRange(getLoBytes(), "lo_bytes", 0));
  rules.push_back(ScalarRule::intRange(getLayers(), "layers", 1, kMaxLayers));
  rules.push_back(ScalarRule::intRange(getFixed(), "fixed", 0));
  rules.push_back(ScalarRule::intRange(getBudget(), "budget", 0));
  // One relation of all five (the verifier checks it below; the lowering at run time,
  // naming the first of them that is a knob).
  static constexpr llvm::StringLiteral relation =
      "budget >= fixed + layers * experts * lo_bytes + layers * hi_bytes (the "
      "low-precision experts and one high-precision expert per layer)";
  for (auto [value, name] : {std::pair{getBudget(), "budget"},
                             {getFixed(), "fixed"},
                             {getLayers(), "layers"},
                             {getHiBytes(), "hi_bytes"},
                             {getLoBytes(), "lo_bytes"}})
    rules.push_back(ScalarRule::relational(value, name, relation));
}

LogicalResult HiCapacityOp::verify() {
  int64_t experts = getExperts();
  if (failed(verifyExpertCount(*this, experts, "hi_capacity")) ||
      failed(verifyScalarRules(*this)))
    return failure();
  std::optional<int64_t> budget = getKnownInt(getBudget()), fixed = getKnownInt(getFixed()),
                         hi = getKnownInt(getHiBytes()), lo = getKnownInt(getLoBytes()),
                         layers = getKnownInt(getLayers());
  if (!budget || !fixed || !hi || !lo || !layers || isParam(experts))
    return success();
  // In 128-bit arithmetic: byte counts times layers times experts may overflow i64.
  __int128 needed =
      (__int128)*fixed + (__int128)*layers * experts * *lo + (__int128)*layers * *hi;
  if ((__int128)*budget < needed)
    return emitOpError() << "a budget of " << *budget << " bytes cannot hold the fixed "
                         << *fixed << " bytes, the low-precision experts (" << *layers
                         << " layers x " << experts << " x " << *lo
                         << " bytes) and one high-precision expert per layer (" << *layers
                         << " x " << *hi << " bytes)";
  return success();
}

LogicalResult HotSetOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getCurrent().getType(), *e, "current")))
    return failure();
  if (!getMargin() == !getRankSlack())
    return emitOpError() << "takes exactly one of margin(...) and rank_slack(...)";
  return verifyScalarRules(*this);
}

void HotSetOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::intRange(getCapacity(), "capacity", 0));
  if (getMargin()) {
    ScalarRule margin =
        ScalarRule::floatRange(getMargin(), "margin", 0.0, false, {}, false);
    margin.finite = true;
    rules.push_back(margin);
  }
  if (getRankSlack())
    rules.push_back(ScalarRule::intRange(getRankSlack(), "rank_slack", 0));
}

LogicalResult RankedOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getSet().getType(), *e, "set")))
    return failure();
  if (cast<ShapedType>(getIds().getType()).getDimSize(0) != *e)
    return emitOpError() << "ids must have " << *e << " entries (one per expert)";
  if (cast<ShapedType>(getCount().getType()).getDimSize(0) != 1)
    return emitOpError() << "count must have exactly 1 entry";
  return success();
}

/// Expert e on GPU e / (E / gpus): `gpus` >= 1 dividing the experts.
static LogicalResult verifyHomePlacement(Operation *op, int64_t experts, int64_t gpus,
                                         StringRef which) {
  if (gpus < 1)
    return op->emitOpError() << "gpus must be >= 1, got " << gpus;
  if (experts % gpus != 0)
    return op->emitOpError() << "the " << which << " placement needs experts (" << experts
                             << ") divisible by gpus (" << gpus << ")";
  return success();
}

LogicalResult EplbOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  FailureOr<int64_t> e = verifyExpertVector(*this, getLoads().getType(), "loads");
  if (failed(e))
    return failure();
  int64_t experts = *e, groups = getGroups(), nodes = getNodes(), gpus = getGpus();
  int64_t slots = cast<ShapedType>(getPhy2log().getType()).getDimSize(0);
  if (groups < 1 || nodes < 1 || gpus < 1)
    return emitOpError() << "groups, nodes and gpus must be >= 1, got " << groups << ", "
                         << nodes << ", " << gpus;
  if (ShapedType::isDynamic(slots) || slots < experts)
    return emitOpError() << "phy2log must have a static number of slots >= experts ("
                         << experts << ")";
  if (gpus % nodes != 0)
    return emitOpError() << "gpus (" << gpus << ") must be a multiple of nodes (" << nodes
                         << ")";
  if (slots % gpus != 0)
    return emitOpError() << "the " << slots << " slots must split evenly over " << gpus
                         << " gpus";
  if (isHierarchical()) {
    if (experts % groups != 0)
      return emitOpError() << "groups (" << groups << ") must divide the " << experts
                           << " experts in hierarchical mode";
    if (experts % nodes != 0 || slots / nodes < experts / nodes)
      return emitOpError() << "each of the " << nodes
                           << " nodes needs at least as many slots as experts";
  }
  auto l2p = cast<ShapedType>(getLog2phy().getType());
  if (l2p.getDimSize(0) != experts || l2p.getDimSize(1) != slots - experts + 1)
    return emitOpError() << "log2phy must be " << experts << "x" << slots - experts + 1
                         << " (experts x (slots - experts + 1))";
  if (cast<ShapedType>(getReplicaCount().getType()).getDimSize(0) != experts)
    return emitOpError() << "replica_count must have " << experts << " entries";
  return success();
}

LogicalResult DeviceLoadsOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  FailureOr<int64_t> e = verifyExpertVector(*this, getLoads().getType(), "loads");
  if (failed(e))
    return failure();
  int64_t gpus = getGpus();
  if (gpus < 1)
    return emitOpError() << "gpus must be >= 1, got " << gpus;
  if (cast<ShapedType>(getResult().getType()).getDimSize(0) != gpus)
    return emitOpError() << "result must have one entry per gpu (" << gpus << ")";
  if (!getPhy2log())
    return verifyHomePlacement(*this, *e, gpus, "default");
  int64_t slots = cast<ShapedType>(getPhy2log().getType()).getDimSize(0);
  if (ShapedType::isDynamic(slots) || slots % gpus != 0)
    return emitOpError() << "phy2log must have a static number of slots divisible by gpus";
  if (cast<ShapedType>(getReplicaCount().getType()).getDimSize(0) != *e)
    return emitOpError() << "replica_count must have " << *e << " entries";
  return success();
}

LogicalResult LeastLoadedOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  FailureOr<int64_t> e = verifyExpertVector(*this, getLoads().getType(), "loads");
  if (failed(e))
    return failure();
  int64_t gpus = getGpus();
  if (failed(verifyHomePlacement(*this, *e, gpus, "native")))
    return failure();
  auto plan = cast<ShapedType>(getPlan().getType());
  if (plan.getDimSize(0) != *e || plan.getDimSize(1) != gpus)
    return emitOpError() << "plan must be " << *e << "x" << gpus
                         << " (experts x gpus), got " << plan;
  for (auto [value, name] : {std::pair<Value, StringRef>{getNativeLoads(), "native_loads"},
                             {getGpuLoads(), "gpu_loads"}})
    if (cast<ShapedType>(value.getType()).getDimSize(0) != gpus)
      return emitOpError() << name << " must have one entry per gpu (" << gpus << ")";
  if (cast<ShapedType>(getTransfers().getType()).getDimSize(0) != 1)
    return emitOpError() << "transfers must hold one value";
  return verifyScalarRules(*this);
}

void LeastLoadedOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule factor = ScalarRule::floatRange(getCapacityFactor(), "capacity_factor", 0.0,
                                             /*minOpen=*/true, {}, false);
  factor.finite = true;
  rules.push_back(factor);
  rules.push_back(ScalarRule::intRange(getMinChunk(), "min_chunk", 0));
  ScalarRule threshold =
      ScalarRule::floatRange(getThreshold(), "threshold", {}, false, {}, false);
  threshold.finite = true;
  rules.push_back(threshold);
}

LogicalResult ImbalanceOp::verify() {
  if (ShapedType::isDynamic(cast<ShapedType>(getLoads().getType()).getDimSize(0)) &&
      !inGenericPolicy(*this))
    return emitOpError() << "loads must have a static size";
  if (cast<ShapedType>(getResult().getType()).getDimSize(0) != 1)
    return emitOpError() << "result must have exactly 1 entry";
  return success();
}

//===----------------------------------------------------------------------===//
// Libra
//===----------------------------------------------------------------------===//

LogicalResult GateOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  auto hidden = cast<ShapedType>(getHidden().getType());
  auto weight = cast<ShapedType>(getWeight().getType());
  auto result = cast<ShapedType>(getResult().getType());
  if (!weight.hasStaticShape() || hidden.isDynamicDim(1))
    return emitOpError() << "the hidden size and the weight must be static";
  if (weight.getDimSize(0) != hidden.getDimSize(1))
    return emitOpError() << "weight has " << weight.getDimSize(0)
                         << " rows but hidden states have " << hidden.getDimSize(1)
                         << " features";
  if (result.getDimSize(1) != weight.getDimSize(1))
    return emitOpError() << "result must have " << weight.getDimSize(1)
                         << " experts (the weight's columns)";
  if (failed(verifyExpertCount(*this, result.getDimSize(1), "result")))
    return failure();
  return verifySameTokens(*this, hidden, "hidden", result, "result");
}

/// [G, E] with E % G == 0 (every expert has a home GPU e / (E/G)); returns {G, E}.
static FailureOr<std::pair<int64_t, int64_t>> verifyRequests(Operation *op, Type type) {
  auto t = cast<ShapedType>(type);
  if (!t.hasStaticShape())
    return op->emitOpError() << "requests must have a static [gpus, experts] shape";
  int64_t g = t.getDimSize(0), e = t.getDimSize(1);
  if (g < 1 || e % g != 0)
    return op->emitOpError() << "the " << e << " experts must split evenly over the " << g
                             << " GPUs (home GPU of e: e / (E/G))";
  if (failed(verifyExpertCount(op, e, "requests")))
    return failure();
  return std::make_pair(g, e);
}

static LogicalResult verifyPlacementMatrix(Operation *op, Type type, int64_t g, int64_t e) {
  auto t = cast<ShapedType>(type);
  if (t.getDimSize(0) != e || t.getDimSize(1) != g)
    return op->emitOpError() << "placement must be " << e << "x" << g
                             << " (experts x GPUs)";
  return success();
}

/// The requests [G, E] (verifyRequests) and, when given, the placement [E, G] of a
/// Libra op; returns {G, E}.
static FailureOr<std::pair<int64_t, int64_t>>
verifyRequestsAndPlacement(Operation *op, Value requests, Value placement) {
  FailureOr<std::pair<int64_t, int64_t>> ge = verifyRequests(op, requests.getType());
  if (failed(ge) || (placement && failed(verifyPlacementMatrix(op, placement.getType(),
                                                               ge->first, ge->second))))
    return failure();
  return ge;
}

LogicalResult GpuRequestsOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  auto ids = cast<ShapedType>(getIds().getType());
  auto result = cast<ShapedType>(getResult().getType());
  if (result.getDimSize(0) != getGpus())
    return emitOpError() << "result must have one row per GPU (" << getGpus() << ")";
  if (failed(verifyRequests(*this, result)))
    return failure();
  if (ids.isDynamicDim(1))
    return emitOpError() << "ids must have a static k";
  return verifySameTokens(*this, ids, "ids", getTokenGpu().getType(), "token_gpu");
}

LogicalResult ServedLoadsOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  FailureOr<std::pair<int64_t, int64_t>> ge =
      verifyRequestsAndPlacement(*this, getRequests(), getPlacement());
  if (failed(ge))
    return failure();
  auto [g, e] = *ge;
  if (cast<ShapedType>(getResult().getType()).getDimSize(0) != g)
    return emitOpError() << "result must have one entry per GPU (" << g << ")";
  return success();
}

LogicalResult LibraReplicateOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  if (failed(verifyRequestsAndPlacement(*this, getRequests(), getPlacement())))
    return failure();
  return verifyScalarRules(*this);
}

void LibraReplicateOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  int64_t e = cast<ShapedType>(getRequests().getType()).getDimSize(1);
  rules.push_back(ScalarRule::intRange(getExtra(), "extra", 0, boundOf(e)));
  rules.push_back(ScalarRule::floatRange(getAlpha(), "alpha", 0.0, false, 1.0, false));
}

LogicalResult LibraShardOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  FailureOr<std::pair<int64_t, int64_t>> ge =
      verifyRequestsAndPlacement(*this, getRequests(), getPlacement());
  if (failed(ge))
    return failure();
  auto [g, e] = *ge;
  auto plan = cast<ShapedType>(getShardPlan().getType());
  if (plan.getDimSize(0) != g || plan.getDimSize(1) != e)
    return emitOpError() << "shard_plan must be " << g << "x" << e << " (GPUs x experts)";
  if (cast<ShapedType>(getLoads().getType()).getDimSize(0) != g)
    return emitOpError() << "loads must have one entry per GPU (" << g << ")";
  return verifyScalarRules(*this);
}

void LibraShardOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  ScalarRule epsilon =
      ScalarRule::floatRange(getEpsilon(), "epsilon", 0.0, false, {}, false);
  epsilon.finite = true;
  rules.push_back(epsilon);
}

//===----------------------------------------------------------------------===//
// ExpertFlow
//===----------------------------------------------------------------------===//

static LogicalResult verifyOneEntry(Operation *op, Value v, StringRef what) {
  if (cast<ShapedType>(v.getType()).getDimSize(0) != 1)
    return op->emitOpError() << what << " must have exactly 1 entry";
  return success();
}

LogicalResult ExpectedExpertsOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getSet().getType(), *e, "result")) ||
      failed(verifyOneEntry(*this, getCount(), "count")))
    return failure();
  return verifyScalarRules(*this);
}

void ExpectedExpertsOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(
      ScalarRule::floatRange(getThreshold(), "threshold", 0.0, true, 1.0, false));
}

LogicalResult StepSizeOp::verify() {
  if (failed(verifyOneEntry(*this, getCount(), "count")) ||
      failed(verifyOneEntry(*this, getResult(), "result")))
    return failure();
  return verifyScalarRules(*this);
}

void StepSizeOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  rules.push_back(ScalarRule::intRange(getExpertBytes(), "expert_bytes", 0));
  rules.push_back(ScalarRule::intRange(getLayers(), "layers", 1, kMaxLayers));
  for (auto [v, name] :
       {std::pair{getBandwidth(), "bandwidth"}, {getLayerTime(), "layer_time"}}) {
    ScalarRule rate = ScalarRule::floatRange(v, name, 0.0, /*minOpen=*/true, {}, false);
    rate.finite = true;
    rules.push_back(rate);
  }
}

LogicalResult StepFeedbackOp::verify() {
  for (auto [v, name] : {std::pair{getStep(), "step"},
                         {getInitial(), "initial"},
                         {getStallCount(), "stall_count"},
                         {getOverfetchCount(), "overfetch_count"},
                         {getStepOut(), "step_out"},
                         {getStallOut(), "stall_out"},
                         {getOverfetchOut(), "overfetch_out"}})
    if (failed(verifyOneEntry(*this, v, name)))
      return failure();
  if (getTrace().getType() != getEvents().getType())
    return emitOpError() << "trace must have one entry per event";
  return verifyScalarRules(*this);
}

void StepFeedbackOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  // The step and the counters are i32 state: thresholds and layers must fit.
  rules.push_back(
      ScalarRule::intRange(getStallThreshold(), "stall_threshold", 0, INT32_MAX - 1));
  rules.push_back(
      ScalarRule::intRange(getOverfetchThreshold(), "overfetch_threshold", 1, INT32_MAX));
  rules.push_back(ScalarRule::intRange(getLayers(), "layers", 1, kMaxLayers));
}

LogicalResult TwoLevelLruOp::verify() {
  int64_t e = cast<ExpertSetType>(getResident().getType()).getExperts();
  if (cast<ShapedType>(getLastUse().getType()).getDimSize(0) != e)
    return emitOpError() << "last_use must have " << e << " entries";
  if (failed(verifyOneEntry(*this, getNow(), "now")) ||
      failed(verifyOneEntry(*this, getStep(), "step")))
    return failure();
  return verifyScalarRules(*this);
}

void TwoLevelLruOp::getScalarRules(SmallVectorImpl<ScalarRule> &rules) {
  // A cache that cannot hold one expert is a configuration error.
  int64_t e = cast<ExpertSetType>(getResident().getType()).getExperts();
  rules.push_back(ScalarRule::intRange(getCapacity(), "capacity", 1, boundOf(e)));
}

LogicalResult ResidentFirstOp::verify() {
  if (std::optional<LogicalResult> done = verifySizesFirst(*this))
    return *done;
  auto ids = cast<ShapedType>(getIds().getType());
  if (ids.isDynamicDim(1))
    return emitOpError() << "ids must have a static k";
  if (failed(verifyOneEntry(*this, getNumReady(), "num_ready")))
    return failure();
  return verifySameTokens(*this, ids, "ids", getOrder().getType(), "order");
}
