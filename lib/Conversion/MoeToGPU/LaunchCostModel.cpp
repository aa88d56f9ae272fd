//===- LaunchCostModel.cpp - which size class runs a batch fastest --------===//
#include "LaunchCostModel.h"
#include "LargeBatchPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace mlir;

namespace switchyard::moe {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// A loop whose trip count is data-dependent (a request's tokens, an insertion
/// shift) is counted this many times inside the token work.
constexpr int64_t kDynamicTrips = 8;

/// How the instruction count treats a loop bound: the batch size `tokens` stands for
/// (or nothing: the token work, per token) and the trips of a data-dependent loop.
struct TripRule {
  Value tokens;
  std::optional<int64_t> batch; // T, when counting the whole-batch phases
  int64_t dynamicTrips() const {
    return batch ? std::max<int64_t>(*batch, 1) : kDynamicTrips;
  }
};

/// The value of an index expression of the token count and constants at T = *rule.batch.
std::optional<int64_t> evaluate(Value v, const TripRule &rule, int depth = 0) {
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return c;
  if (!rule.batch || depth > 8)
    return std::nullopt;
  if (v == rule.tokens)
    return *rule.batch;
  Operation *op = v.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp,
          arith::TruncIOp>(op))
    return evaluate(op->getOperand(0), rule, depth + 1);
  if (op->getNumOperands() != 2)
    return std::nullopt;
  std::optional<int64_t> a = evaluate(op->getOperand(0), rule, depth + 1);
  std::optional<int64_t> b = evaluate(op->getOperand(1), rule, depth + 1);
  if (!a || !b)
    return std::nullopt;
  if (isa<arith::AddIOp>(op))
    return *a + *b;
  if (isa<arith::SubIOp>(op))
    return *a - *b;
  if (isa<arith::MulIOp>(op))
    return *a * *b;
  if (isa<arith::MinSIOp, arith::MinUIOp>(op))
    return std::min(*a, *b);
  if (isa<arith::MaxSIOp, arith::MaxUIOp>(op))
    return std::max(*a, *b);
  if (*b == 0)
    return std::nullopt;
  if (isa<arith::DivSIOp, arith::DivUIOp, arith::FloorDivSIOp>(op))
    return *a / *b;
  if (isa<arith::CeilDivSIOp, arith::CeilDivUIOp>(op))
    return ceilDiv(*a, *b);
  if (isa<arith::RemSIOp, arith::RemUIOp>(op))
    return *a % *b;
  return std::nullopt;
}

/// A loop's trip count: constant, or evaluated at the batch size, or `fallback`.
int64_t tripCount(Value lb, Value ub, Value step, const TripRule &rule, int64_t fallback) {
  std::optional<int64_t> l = evaluate(lb, rule), u = evaluate(ub, rule),
                         s = evaluate(step, rule);
  if (!l || !u || !s || *s <= 0)
    return fallback;
  return std::max<int64_t>(0, ceilDiv(*u - *l, *s));
}

/// Warp instructions of one pass through `block`: every op once, a lane-strided
/// loop (nested scf.parallel) ceil(trip / 32) times, a sequential loop trip times,
/// both branches of a conditional (an upper bound).
double warpInstructions(Block &block, int64_t experts, const TripRule &rule) {
  double n = 0;
  for (Operation &op : block) {
    if (isa<scf::YieldOp, scf::ReduceOp, scf::ReduceReturnOp>(op))
      continue;
    double inner = 0;
    for (Region &region : op.getRegions())
      for (Block &b : region)
        inner += warpInstructions(b, experts, rule);
    if (auto lanes = dyn_cast<scf::ParallelOp>(op)) {
      int64_t trip = tripCount(lanes.getLowerBound()[0], lanes.getUpperBound()[0],
                               lanes.getStep()[0], rule, experts); // lanes span the experts
      n += inner * std::ceil(trip / 32.0);
    } else if (auto loop = dyn_cast<scf::ForOp>(op)) {
      n += 1 + inner * tripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep(),
                                 rule, rule.dynamicTrips());
    } else if (isa<scf::WhileOp>(op)) {
      n += inner * rule.dynamicTrips();
    } else {
      n += 1 + inner;
    }
  }
  return n;
}

bool loopsOver(scf::ParallelOp loop, Value tokens) {
  return loop.getNumLoops() >= 1 && loop.getUpperBound()[0] == tokens;
}

/// A loop over experts folding the tokens (kernel 2 combines its values per CTA).
bool foldsTokens(scf::ParallelOp loop, Value tokens) {
  bool folds = false;
  loop.walk([&](scf::ForOp inner) { folds |= inner.getUpperBound() == tokens; });
  return folds;
}

/// Piecewise-linear interpolation of sampled (tokens, instructions).
double interpolate(const std::vector<std::pair<int64_t, double>> &points, int64_t tokens) {
  if (points.empty())
    return 0;
  if (tokens <= points.front().first)
    return points.front().second;
  for (size_t i = 1; i < points.size(); ++i)
    if (tokens <= points[i].first) {
      auto [t0, y0] = points[i - 1];
      auto [t1, y1] = points[i];
      return y0 + (y1 - y0) * double(tokens - t0) / double(t1 - t0);
    }
  auto [t0, y0] = points[points.size() - 2];
  auto [t1, y1] = points.back();
  return y1 + (y1 - y0) * double(tokens - t1) / double(t1 - t0);
}

} // namespace

int64_t LaunchCostModel::residentCtasPerSm() const {
  int64_t threads = 32 * warps;
  int64_t byThreads = threadsPerSm / threads;
  int64_t byRegisters = registersPerSm / (threads * registersPerThread);
  int64_t byShared =
      sharedBytesPerCta > 0 ? sharedBytesPerSm / sharedBytesPerCta : ctasPerSm;
  return std::max<int64_t>(1, std::min({byThreads, byRegisters, byShared, ctasPerSm}));
}

double LaunchCostModel::oneCtaUs(int64_t tokens) const {
  int64_t t = std::max<int64_t>(tokens, 1);
  double cycles = ceilDiv(t, warps) * tokenInstr * cyclesPerInstr +
                  interpolate(batchOneCta, t) * batchCyclesPerInstr;
  return launchUs + cycles / (clockGHz * 1e3);
}

double LaunchCostModel::pairUs(int64_t tokens, int64_t perCta) const {
  int64_t t = std::max<int64_t>(tokens, 1);
  int64_t ctas = ceilDiv(t, perCta);
  int64_t resident = residentCtasPerSm();
  int64_t waves = ceilDiv(ctas, sms * resident);
  int64_t sharing = std::min(resident, ceilDiv(ctas, sms));
  double perToken = ceilDiv(perCta, warps) * tokenInstr;
  double wave = std::max(perToken * cyclesPerInstr,
                         sharing * warps * perToken / double(issuePerCycle));
  double cycles = waves * wave +
                  ceilDiv(ctas * combineValues, 32 * warps) * cyclesPerInstr +
                  interpolate(batchPair, t) * batchCyclesPerInstr;
  return 2 * launchUs + cycles / (clockGHz * 1e3);
}

double LaunchCostModel::largeUs(int64_t tokens, int64_t perCta) const {
  int64_t ctas = ceilDiv(std::max<int64_t>(tokens, 1), perCta);
  double pair = pairUs(tokens, perCta);
  if (ctas > sms * residentCtasPerSm())
    return pair; // more CTAs than the GPU holds: the pair
  return pair - launchUs + gridBarrierUs;
}

double LaunchCostModel::gridUs(int64_t tokens) const {
  int64_t t = std::max<int64_t>(tokens, 1);
  int64_t slots = sms * residentCtasPerSm();
  int64_t blocks = std::min(ceilDiv(t, warps), slots);
  double cycles = ceilDiv(t, blocks * warps) * tokenInstr * cyclesPerInstr;
  return launchUs + cycles / (clockGHz * 1e3);
}

DictionaryAttr LaunchCostModel::toAttr(MLIRContext *ctx,
                                       ArrayRef<SizeClass> classes) const {
  bool grid = llvm::is_contained(classes, SizeClass::grid);
  bool pair = llvm::is_contained(classes, SizeClass::large);
  Builder b(ctx);
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("token_instructions", b.getF64FloatAttr(tokenInstr)),
      b.getNamedAttr("combine_values", b.getI64IntegerAttr(combineValues)),
      b.getNamedAttr("warps", b.getI64IntegerAttr(warps)),
      b.getNamedAttr("resident_ctas_per_sm", b.getI64IntegerAttr(residentCtasPerSm())),
      b.getNamedAttr("launch_us", b.getF64FloatAttr(launchUs)),
      b.getNamedAttr("grid_barrier_us", b.getF64FloatAttr(gridBarrierUs)),
      b.getNamedAttr("cycles_per_instruction", b.getF64FloatAttr(cyclesPerInstr)),
      b.getNamedAttr("batch_cycles_per_instruction",
                     b.getF64FloatAttr(batchCyclesPerInstr))};
  auto table = [&](const std::vector<std::pair<int64_t, double>> &points) {
    SmallVector<Attribute> list;
    for (auto [tokens, instructions] : points)
      list.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("tokens", b.getI64IntegerAttr(tokens)),
           b.getNamedAttr("instructions", b.getF64FloatAttr(instructions))}));
    return b.getArrayAttr(list);
  };
  fields.push_back(b.getNamedAttr("batch_instructions_one_cta", table(batchOneCta)));
  fields.push_back(b.getNamedAttr("batch_instructions_pair", table(batchPair)));
  SmallVector<Attribute> points;
  for (int64_t t : {1, 64, 1024, 4096, 65536}) {
    double us = grid                      ? gridUs(t)
                : !pair || t <= ctaTokens ? oneCtaUs(t)
                                          : largeUs(t, tokensPerCta);
    points.push_back(b.getDictionaryAttr({b.getNamedAttr("tokens", b.getI64IntegerAttr(t)),
                                          b.getNamedAttr("us", b.getF64FloatAttr(us))}));
  }
  fields.push_back(b.getNamedAttr("modeled", b.getArrayAttr(points)));
  if (pair) {
    fields.push_back(b.getNamedAttr("cta_tokens", b.getI64IntegerAttr(ctaTokens)));
    fields.push_back(b.getNamedAttr("tokens_per_cta", b.getI64IntegerAttr(tokensPerCta)));
  }
  return b.getDictionaryAttr(fields);
}

LaunchCostModel modelLaunches(func::FuncOp f, int64_t blockSize) {
  LaunchCostModel m;
  m.warps = std::max<int64_t>(blockSize / 32, 1);
  auto expertsAttr =
      f->getAttrOfType<IntegerAttr>(MoeDialect::ExpertsAttrHelper::getNameStr());
  int64_t experts = expertsAttr ? expertsAttr.getInt() : 32;
  Value tokens = f.getNumArguments() ? f.getArgument(0) : Value();
  TripRule perToken{tokens, std::nullopt};
  // The token work (I) and the batch folds (C).
  f.walk([&](scf::ParallelOp loop) {
    if (loop->getParentOfType<scf::ParallelOp>())
      return;
    if (tokens && loopsOver(loop, tokens)) {
      m.tokenInstr += warpInstructions(*loop.getBody(), experts, perToken);
      return;
    }
    // A token tile is one warp's work for its tokens, as a token loop's row is.
    if (int64_t tile = tileTokensOf(loop)) {
      m.tokenInstr += warpInstructions(*loop.getBody(), experts, perToken) / tile;
      return;
    }
    if (tokens && foldsTokens(loop, tokens))
      m.combineValues += tripCount(loop.getLowerBound()[0], loop.getUpperBound()[0],
                                   loop.getStep()[0], perToken, experts);
  });
  m.tokenInstr = std::max(m.tokenInstr, 1.0);
  // The whole-batch phases (B1, B2): every top-level op outside the token loops.
  for (int64_t t = 1; t <= 65536; t *= 4) {
    TripRule batch{tokens, t};
    double all = 0, folds = 0;
    for (Operation &op : f.getBody().front()) {
      auto loop = dyn_cast<scf::ParallelOp>(op);
      if (loop && ((tokens && loopsOver(loop, tokens)) || tileTokensOf(loop)))
        continue;
      double n = 0;
      if (op.getNumRegions()) {
        for (Region &region : op.getRegions())
          for (Block &b : region)
            n += warpInstructions(b, experts, batch);
        if (loop)
          n *= std::ceil(tripCount(loop.getLowerBound()[0], loop.getUpperBound()[0],
                                   loop.getStep()[0], batch, experts) /
                         32.0);
        else if (auto seq = dyn_cast<scf::ForOp>(op))
          n = 1 + n * tripCount(seq.getLowerBound(), seq.getUpperBound(), seq.getStep(),
                                batch, batch.dynamicTrips());
        else if (isa<scf::WhileOp>(op))
          n *= batch.dynamicTrips();
      } else {
        n = 1;
      }
      all += n;
      if (loop && tokens && foldsTokens(loop, tokens))
        folds += n;
    }
    m.batchOneCta.push_back({t, all});
    m.batchPair.push_back({t, all - folds});
  }
  // Tokens per CTA of the pair: the best at a large prefill batch.
  double best = INFINITY;
  for (int64_t p = m.warps; p <= 256; p *= 2)
    if (double t = m.largeUs(4096, p); t < best) {
      best = t;
      m.tokensPerCta = p;
    }
  // The one-CTA kernel up to the first batch where the pair is faster.
  m.ctaTokens = m.warps;
  for (int64_t t = 2 * m.warps; t <= 1024 && m.oneCtaUs(t) <= m.largeUs(t, m.tokensPerCta);
       t += m.warps)
    m.ctaTokens = t;
  return m;
}

} // namespace switchyard::moe
