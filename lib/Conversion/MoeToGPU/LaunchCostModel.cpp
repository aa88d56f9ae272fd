//===- LaunchCostModel.cpp - which size class runs a batch fastest --------===//
#include "LaunchCostModel.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <cmath>

using namespace mlir;

namespace switchyard::moe {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// A loop's trip count when its bounds are constants, else `fallback`.
int64_t tripCount(Value lb, Value ub, Value step, int64_t fallback) {
  std::optional<int64_t> l = getConstantIntValue(lb), u = getConstantIntValue(ub),
                         s = getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0)
    return fallback;
  return std::max<int64_t>(0, ceilDiv(*u - *l, *s));
}

/// A loop whose trip count is data-dependent (a request's tokens, an insertion
/// shift) is counted this many times.
constexpr int64_t kDynamicTrips = 8;

/// Warp instructions of one pass through `block`: every op once, a lane-strided
/// loop (nested scf.parallel) ceil(trip / 32) times, a sequential loop trip times,
/// both branches of a conditional (an upper bound).
double warpInstructions(Block &block, int64_t experts) {
  double n = 0;
  for (Operation &op : block) {
    if (isa<scf::YieldOp, scf::ReduceOp, scf::ReduceReturnOp>(op))
      continue;
    double inner = 0;
    for (Region &region : op.getRegions())
      for (Block &b : region)
        inner += warpInstructions(b, experts);
    if (auto lanes = dyn_cast<scf::ParallelOp>(op)) {
      int64_t trip = tripCount(lanes.getLowerBound()[0], lanes.getUpperBound()[0],
                               lanes.getStep()[0], experts); // lanes span the experts
      n += inner * std::ceil(trip / 32.0);
    } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
      n += 1 + inner * tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep(),
                                 kDynamicTrips);
    } else if (isa<scf::WhileOp>(op)) {
      n += inner * kDynamicTrips;
    } else {
      n += 1 + inner;
    }
  }
  return n;
}

bool loopsOver(scf::ParallelOp loop, Value tokens) {
  return loop.getNumLoops() >= 1 && loop.getUpperBound()[0] == tokens;
}

} // namespace

double LaunchCostModel::oneCtaUs(int64_t tokens) const {
  double cycles = ceilDiv(std::max<int64_t>(tokens, 1), warps) * tokenInstr * cyclesPerInstr;
  return launchUs + cycles / (clockGHz * 1e3);
}

double LaunchCostModel::pairUs(int64_t tokens, int64_t perCta) const {
  int64_t ctas = ceilDiv(std::max<int64_t>(tokens, 1), perCta);
  double cycles = ceilDiv(perCta, warps) * tokenInstr * cyclesPerInstr +
                  ceilDiv(ctas * combineValues, 32 * warps) * cyclesPerInstr;
  return 2 * launchUs + cycles / (clockGHz * 1e3);
}

double LaunchCostModel::gridUs(int64_t tokens) const {
  int64_t t = std::max<int64_t>(tokens, 1);
  int64_t blocks = std::min(ceilDiv(t, warps), sms * residentBlocksPerSm);
  double cycles = ceilDiv(t, blocks * warps) * tokenInstr * cyclesPerInstr;
  return launchUs + cycles / (clockGHz * 1e3);
}

DictionaryAttr LaunchCostModel::toAttr(MLIRContext *ctx, Classes classes) const {
  Builder b(ctx);
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("token_instructions", b.getF64FloatAttr(tokenInstr)),
      b.getNamedAttr("combine_values", b.getI64IntegerAttr(combineValues)),
      b.getNamedAttr("warps", b.getI64IntegerAttr(warps))};
  SmallVector<Attribute> points;
  for (int64_t t : {1, 64, 1024, 4096, 65536}) {
    double us = classes == Classes::Grid                          ? gridUs(t)
                : classes == Classes::OneCta || t <= ctaTokens ? oneCtaUs(t)
                                                               : pairUs(t, tokensPerCta);
    points.push_back(b.getDictionaryAttr({b.getNamedAttr("tokens", b.getI64IntegerAttr(t)),
                                          b.getNamedAttr("us", b.getF64FloatAttr(us))}));
  }
  fields.push_back(b.getNamedAttr("modeled", b.getArrayAttr(points)));
  if (classes == Classes::Pair) {
    fields.push_back(b.getNamedAttr("cta_tokens", b.getI64IntegerAttr(ctaTokens)));
    fields.push_back(b.getNamedAttr("tokens_per_cta", b.getI64IntegerAttr(tokensPerCta)));
  }
  return b.getDictionaryAttr(fields);
}

LaunchCostModel modelLaunches(func::FuncOp f, int64_t blockSize) {
  LaunchCostModel m;
  m.warps = std::max<int64_t>(blockSize / 32, 1);
  auto expertsAttr = f->getAttrOfType<IntegerAttr>("moe.experts");
  int64_t experts = expertsAttr ? expertsAttr.getInt() : 32;
  Value tokens = f.getNumArguments() ? f.getArgument(0) : Value();
  f.walk([&](scf::ParallelOp loop) {
    if (loop->getParentOfType<scf::ParallelOp>())
      return;
    if (tokens && loopsOver(loop, tokens)) {
      m.tokenInstr += warpInstructions(*loop.getBody(), experts);
      return;
    }
    // A loop over experts folding the tokens: kernel 2 combines its values per CTA.
    bool folds = false;
    loop.walk([&](scf::ForOp inner) { folds |= inner.getUpperBound() == tokens; });
    if (folds)
      m.combineValues += tripCount(loop.getLowerBound()[0], loop.getUpperBound()[0],
                                   loop.getStep()[0], experts);
  });
  m.tokenInstr = std::max(m.tokenInstr, 1.0);
  // Tokens per CTA of the pair: the best at a large prefill batch.
  double best = INFINITY;
  for (int64_t p = m.warps; p <= 256; p *= 2)
    if (double t = m.pairUs(4096, p); t < best) {
      best = t;
      m.tokensPerCta = p;
    }
  // The one-CTA kernel while it is no slower than the pair.
  m.ctaTokens = m.warps;
  for (int64_t t = m.warps; t <= 1024; t += m.warps)
    if (m.oneCtaUs(t) <= m.pairUs(t, m.tokensPerCta))
      m.ctaTokens = t;
  return m;
}

} // namespace switchyard::moe
