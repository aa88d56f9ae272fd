//===- MoeRuleOps.cpp - residency and balancing ops -----------------------===//
#include "MoeVerifyUtils.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

LogicalResult EmaOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getHotness().getType(), "hotness");
  if (failed(e))
    return failure();
  if (cast<ShapedType>(getCounts().getType()).getDimSize(0) != *e)
    return emitOpError() << "counts must have " << *e << " entries, like hotness";
  if (std::optional<double> a = getKnownFloat(getAlpha()); a && !(*a >= 0.0 && *a < 1.0))
    return emitOpError() << "alpha must be in [0, 1), got " << *a;
  return success();
}

LogicalResult HiCapacityOp::verify() {
  int64_t experts = getExperts();
  if (failed(verifyExpertCount(*this, experts, "hi_capacity")) ||
      failed(verifyIntInRange(*this, getHiBytes(), "hi_bytes", 1)) ||
      failed(verifyIntInRange(*this, getLoBytes(), "lo_bytes", 0)) ||
      failed(verifyIntInRange(*this, getLayers(), "layers", 1)) ||
      failed(verifyIntInRange(*this, getFixed(), "fixed", 0)) ||
      failed(verifyIntInRange(*this, getBudget(), "budget", 0)))
    return failure();
  std::optional<int64_t> budget = getKnownInt(getBudget()), fixed = getKnownInt(getFixed()),
                         hi = getKnownInt(getHiBytes()), lo = getKnownInt(getLoBytes()),
                         layers = getKnownInt(getLayers());
  if (!budget || !fixed || !hi || !lo || !layers)
    return success();
  // In 128-bit arithmetic: byte counts times layers times experts may overflow i64.
  __int128 needed = (__int128)*fixed + (__int128)*layers * experts * *lo + (__int128)*layers * *hi;
  if ((__int128)*budget < needed)
    return emitOpError() << "a budget of " << *budget << " bytes cannot hold the fixed "
                         << *fixed << " bytes, the low-precision experts ("
                         << *layers << " layers x " << experts << " x " << *lo
                         << " bytes) and one high-precision expert per layer ("
                         << *layers << " x " << *hi << " bytes)";
  return success();
}

LogicalResult HotSetOp::verify() {
  FailureOr<int64_t> e = verifyExpertVector(*this, getScores().getType(), "scores");
  if (failed(e) || failed(verifySetSize(*this, getCurrent().getType(), *e, "current")))
    return failure();
  if (failed(verifyIntInRange(*this, getCapacity(), "capacity", 0)))
    return failure();
  if (!getMargin() == !getRankSlack())
    return emitOpError() << "takes exactly one of margin(...) and rank_slack(...)";
  if (getMargin()) {
    if (failed(verifyFloatFinite(*this, getMargin(), "margin")))
      return failure();
    if (std::optional<double> m = getKnownFloat(getMargin()); m && *m < 0)
      return emitOpError() << "margin must be >= 0, got " << *m;
  }
  if (getRankSlack() && failed(verifyIntInRange(*this, getRankSlack(), "rank_slack", 0)))
    return failure();
  return success();
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

LogicalResult EplbOp::verify() {
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
  FailureOr<int64_t> e = verifyExpertVector(*this, getLoads().getType(), "loads");
  if (failed(e))
    return failure();
  int64_t gpus = getGpus();
  if (gpus < 1)
    return emitOpError() << "gpus must be >= 1, got " << gpus;
  if (cast<ShapedType>(getResult().getType()).getDimSize(0) != gpus)
    return emitOpError() << "result must have one entry per gpu (" << gpus << ")";
  if (!getPhy2log()) {
    if (*e % gpus != 0)
      return emitOpError() << "the default placement needs experts (" << *e
                           << ") divisible by gpus (" << gpus << ")";
    return success();
  }
  int64_t slots = cast<ShapedType>(getPhy2log().getType()).getDimSize(0);
  if (ShapedType::isDynamic(slots) || slots % gpus != 0)
    return emitOpError() << "phy2log must have a static number of slots divisible by gpus";
  if (cast<ShapedType>(getReplicaCount().getType()).getDimSize(0) != *e)
    return emitOpError() << "replica_count must have " << *e << " entries";
  return success();
}

LogicalResult ImbalanceOp::verify() {
  if (ShapedType::isDynamic(cast<ShapedType>(getLoads().getType()).getDimSize(0)))
    return emitOpError() << "loads must have a static size";
  if (cast<ShapedType>(getResult().getType()).getDimSize(0) != 1)
    return emitOpError() << "result must have exactly 1 entry";
  return success();
}
