//===- ResidencyOps.cpp - loops of the DynaExq residency ops ----------------===//
//
// Rule ops run on the host once per scheduling interval: plain sequential loops over
// the experts (and devices), in the order the papers' pseudo-code gives.
// DynaExq: hotness EMA, high-precision capacity, the hot set with hysteresis, and
// the ranked promotion/demotion queues.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult ema(RouterLowering &L, EmaOp op) {
  LoopEmitter &em = L.em();
  Value s = L.mem(op.getHotness()), c = L.mem(op.getCounts()), a = L.scalar(op.getAlpha());
  Value out = L.allocFull(op.getResult());
  Value keep = em.subF(em.f32(1), a);
  em.loop(sizeOf(op.getHotness()), [&](Value e) {
    Value count = em.load(c, e);
    count = em.select(em.cmpI(P::slt, count, em.i32(0)), em.i32(0), count);
    em.store(em.addF(em.mulF(a, em.load(s, e)), em.mulF(keep, em.toF32(count))), out, e);
  });
  return success();
}

LogicalResult hiCapacity(RouterLowering &L, HiCapacityOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Location loc = em.location();
  // In 128-bit arithmetic: products of byte counts, layers and experts near 2^63 must
  // not wrap (each i64 operand times another and times E < 2^21 fits in 127 bits).
  Type i128 = b.getIntegerType(128);
  auto wide = [&](Value v) { return arith::ExtSIOp::create(b, loc, i128, v).getResult(); };
  auto c128 = [&](int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i128, v)).getResult();
  };
  Value layers = wide(L.scalar(op.getLayers()));
  Value lowAll =
      em.mulI(em.mulI(layers, c128(op.getExperts())), wide(L.scalar(op.getLoBytes())));
  Value budget = wide(L.scalar(op.getBudget())), fixed = wide(L.scalar(op.getFixed()));
  // The budget must hold one high-precision expert per layer (the verifier's rule, for
  // knobs set at run time).
  Value needed =
      em.addI(em.addI(fixed, lowAll), em.mulI(layers, wide(L.scalar(op.getHiBytes()))));
  L.failIf(em.cmpI(P::slt, budget, needed), {op.getBudget(), op.getFixed(), op.getLayers(),
                                             op.getHiBytes(), op.getLoBytes()});
  Value free = em.subI(em.subI(budget, fixed), lowAll);
  free = em.select(em.cmpI(P::slt, free, c128(0)), c128(0), free);
  Value perLayer = em.mulI(layers, wide(L.scalar(op.getHiBytes())));
  perLayer = em.select(em.cmpI(P::slt, perLayer, c128(1)), c128(1), perLayer);
  Value n = arith::DivSIOp::create(b, loc, free, perLayer);
  n = em.select(em.cmpI(P::sgt, n, c128(op.getExperts())), c128(op.getExperts()), n);
  L.setScalar(op.getResult(), arith::TruncIOp::create(b, loc, b.getI64Type(), n));
  return success();
}

/// Removes the `count` lowest-ranked members of `set`.
void dropWorst(RouterLowering &L, Value set, Value scores, Value count, int64_t n) {
  LoopEmitter &em = L.em();
  em.loop(em.idx(0), count, [&](Value) {
    Value worst = em.argWorst(
        em.idx(n), [&](Value e) { return em.isSet(set, e); },
        [&](Value e) { return em.load(scores, e); });
    em.ifThen(em.cmpI(P::sge, worst, em.i32(0)),
              [&] { em.store(em.i8(0), set, em.toIndex(worst)); });
  });
}

/// max(a - b, 0) for i64 values, as an index.
Value excess(LoopEmitter &em, Value a, Value b) {
  return em.toIndex(em.select(em.cmpI(P::sgt, a, b), em.subI(a, b), em.i64(0)));
}

LogicalResult hotSet(RouterLowering &L, HotSetOp op) {
  LoopEmitter &em = L.em();
  int64_t n = sizeOf(op.getScores());
  Value s = L.mem(op.getScores()), out = L.allocFull(op.getResult());
  emit::copySet(em, out, L.mem(op.getCurrent()), n);
  Value capacity = em.toI64(emit::clampedCount(em, L.scalar(op.getCapacity()), n));
  auto score = [&](Value e) { return em.load(s, e); };
  auto fillToCapacity = [&] {
    dropWorst(L, out, s, excess(em, emit::popcount(em, out, n), capacity), n);
    emit::addBest(L, out, s, excess(em, capacity, emit::popcount(em, out, n)), n);
  };
  if (op.getMargin()) {
    fillToCapacity();
    Value margin = L.scalar(op.getMargin());
    // Swaps while the best outsider beats the worst member by the margin; a swapped-in
    // expert is never swapped out again, so n rounds suffice.
    em.loop(em.idx(0), em.toIndex(capacity), [&](Value) {
      auto [best, bestScore] = em.argBest(
          em.idx(n), [&](Value e) { return em.notI(em.isSet(out, e)); }, score);
      Value worst = em.argWorst(
          em.idx(n), [&](Value e) { return em.isSet(out, e); }, score);
      Value both =
          em.andI(em.cmpI(P::sge, best, em.i32(0)), em.cmpI(P::sge, worst, em.i32(0)));
      Value w = em.toIndex(em.select(both, worst, em.i32(0)));
      Value swap =
          em.andI(both, em.cmpF(F::OGT, bestScore, em.addF(em.load(s, w), margin)));
      em.ifThen(swap, [&] {
        em.store(em.i8(1), out, em.toIndex(best));
        em.store(em.i8(0), out, w);
      });
    });
    return success();
  }
  // Rank slack: members whose overall rank is below n + slack stay (a slack beyond n
  // keeps everyone; clamping it keeps the sum from wrapping).
  Value limit =
      em.addI(capacity, em.toI64(emit::clampedCount(em, L.scalar(op.getRankSlack()), n)));
  em.loop(n, [&](Value e) {
    Value v = em.load(s, e);
    Value rank =
        em.loopCarried(em.idx(0), em.idx(n), {em.i64(0)}, [&](Value j, ValueRange it) {
          Value u = em.load(s, j);
          // j ranks ahead of e: a higher score, or an equal one (both NaN included) at a
          // lower id; NaN ranks behind every number.
          Value equal = em.orI(em.cmpF(F::OEQ, u, v), em.andI(em.isNaN(u), em.isNaN(v)));
          Value ahead = em.orI(em.outranks(u, v), em.andI(equal, em.cmpI(P::ult, j, e)));
          return SmallVector<Value>{em.select(ahead, em.addI(it[0], em.i64(1)), it[0])};
        })[0];
    em.ifThen(em.cmpI(P::sge, rank, limit), [&] { em.store(em.i8(0), out, e); });
  });
  fillToCapacity();
  return success();
}

LogicalResult ranked(RouterLowering &L, RankedOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = sizeOf(op.getScores());
  Value set = L.mem(op.getSet()), s = L.mem(op.getScores());
  Value ids = L.allocFull(op.getIds()), count = L.allocFull(op.getCount());
  Value taken = buffer(L, n, b.getI8Type());
  em.fill(taken, em.idx(n), em.i8(0));
  bool ascending = op.getAscending();
  emit::topKRow(
      L, em.idx(n), em.idx(n), n, taken, [&](Value e) { return em.isSet(set, e); },
      [&](Value e) {
        Value v = em.load(s, e);
        return ascending ? arith::NegFOp::create(b, em.location(), v).getResult() : v;
      },
      [&](Value j, Value id, Value) { em.store(id, ids, j); });
  em.store(em.toI32(emit::popcount(em, set, n)), count, em.idx(0));
  return success();
}

LogicalResult difference(RouterLowering &L, DifferenceOp o) {
  LoopEmitter &em = L.em();
  Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
  Value out = L.allocFull(o.getResult());
  em.loop(o.getType().getExperts(), [&](Value e) {
    em.store(em.andI(em.load(a, e), em.select(em.isSet(c, e), em.i8(0), em.i8(1))), out, e);
  });
  return success();
}

} // namespace

void registerResidencyOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<ema, hiCapacity, hotSet, ranked, difference>(context);
  });
}

} // namespace switchyard::moe
