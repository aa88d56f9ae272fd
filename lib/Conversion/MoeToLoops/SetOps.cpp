//===- SetOps.cpp - loops of the expert-set selection ops -------------------===//
//
// Set selection over the E experts: greedy fills (by budget, by threshold, per device),
// dropping, and the set algebra. In the GPU form the fills' arg-max rounds are block
// reductions.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult fill(RouterLowering &L, FillOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores());
  Value out = L.allocFull(op.getResult()), s = L.mem(op.getScores());
  copySet(em, out, L.mem(op.getInit()), n);
  Value amount = L.scalar(op.getAmount());
  switch (op.getMode()) {
  case FillMode::budget:
    addBest(L, out, s, clampedCount(em, amount, n), n);
    break;
  case FillMode::min_size: {
    Value size = popcount(em, out, n);
    Value missing =
        em.select(em.cmpI(P::sgt, amount, size), em.subI(amount, size), em.i64(0));
    addBest(L, out, s, clampedCount(em, missing, n), n);
    break;
  }
  case FillMode::threshold: {
    // XShare Alg. 1: while f(S) < tau * f(E), add the best expert outside S.
    Value total =
        em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
          return SmallVector<Value>{em.addF(it[0], em.load(s, e))};
        })[0];
    Value target = em.mulF(amount, total);
    Value mass =
        em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
          Value v = em.load(s, e);
          return SmallVector<Value>{em.select(em.isSet(out, e), em.addF(it[0], v), it[0])};
        })[0];
    em.loopCarried(em.idx(0), em.idx(n), {mass}, [&](Value, ValueRange it) {
      Value below = em.cmpF(F::OLT, it[0], target);
      auto [best, v] = em.argBest(
          em.idx(n), [&](Value e) { return em.notI(em.isSet(out, e)); },
          [&](Value e) { return em.load(s, e); });
      Value add = em.andI(below, em.cmpI(P::sge, best, em.i32(0)));
      em.ifThen(add, [&] { em.store(em.i8(1), out, em.toIndex(best)); });
      return SmallVector<Value>{em.select(add, em.addF(it[0], v), it[0])};
    });
    break;
  }
  }
  return success();
}

LogicalResult fillPerDevice(RouterLowering &L, FillPerDeviceOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  PlacementType placement = op.getPlacement().getType();
  int64_t n = placement.getExperts(), devices = placement.getDevices();
  Value out = L.allocFull(op.getResult()), mass = L.mem(op.getScores());
  Value log2phy = L.get(op.getPlacement()).log2phy;
  copySet(em, out, L.mem(op.getInit()), n);
  // An expert's GPU is the device of its primary copy; -1 when it has none.
  auto deviceOf = [&](Value e) {
    Value slot = em.load(log2phy, {e, em.idx(0)});
    Value dev = arith::DivSIOp::create(b, em.location(), slot,
                                       em.i32(placement.getSlotsPerDevice()));
    return em.select(em.cmpI(P::slt, slot, em.i32(0)), em.i32(-1), dev);
  };
  // A per-device budget beyond n takes every expert either way; clamping it first keeps
  // budget * devices from wrapping for budgets near 2^63.
  Value budget = em.toI64(clampedCount(em, L.scalar(op.getBudget()), n));
  Value target = em.mulI(budget, em.i64(devices));
  // XShare Alg. 5: rounds over the devices while |S| < m_g * G, until a round adds
  // nothing. At most n rounds can add an expert.
  Value state = L.scratch(2, b.getI64Type()); // [|S|, done]
  em.store(popcount(em, out, n), state, em.idx(0));
  em.store(em.i64(0), state, em.idx(1));
  em.loop(n + 1, [&](Value) {
    Value size = em.load(state, em.idx(0));
    Value active = em.andI(em.cmpI(P::eq, em.load(state, em.idx(1)), em.i64(0)),
                           em.cmpI(P::slt, size, target));
    em.ifThenElse(
        active,
        [&] {
          Value added = em.loopCarried(
              em.idx(0), em.idx(devices), {em.i64(0)}, [&](Value g, ValueRange it) {
                Value gi = em.toI32(g);
                // One block reduction per device in the GPU form.
                auto [best, v] = L.argBest(
                    em.idx(n),
                    [&](Value e) {
                      return em.andI(em.notI(em.isSet(out, e)),
                                     em.cmpI(P::eq, deviceOf(e), gi));
                    },
                    [&](Value e) { return em.load(mass, e); });
                Value found = em.cmpI(P::sge, best, em.i32(0));
                em.ifThen(found, [&] { em.store(em.i8(1), out, em.toIndex(best)); });
                return SmallVector<Value>{
                    em.select(found, em.addI(it[0], em.i64(1)), it[0])};
              })[0];
          em.store(em.addI(size, added), state, em.idx(0));
          em.ifThen(em.cmpI(P::eq, added, em.i64(0)),
                    [&] { em.store(em.i64(1), state, em.idx(1)); });
        },
        [&] { em.store(em.i64(1), state, em.idx(1)); });
  });
  return success();
}

LogicalResult dropLowest(RouterLowering &L, DropLowestOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores());
  Value out = L.allocFull(op.getResult()), s = L.mem(op.getScores());
  copySet(em, out, L.mem(op.getSet()), n);
  em.loop(em.idx(0), clampedCount(em, L.scalar(op.getCount()), n), [&](Value) {
    Value worst = em.argWorst(
        em.idx(n), [&](Value e) { return em.isSet(out, e); },
        [&](Value e) { return em.load(s, e); });
    em.ifThen(em.cmpI(P::sge, worst, em.i32(0)),
              [&] { em.store(em.i8(0), out, em.toIndex(worst)); });
  });
  return success();
}

LogicalResult emptySet(RouterLowering &L, EmptySetOp o) {
  LoopEmitter &em = L.em();
  return perExpertSet(L, o.getResult(), [&](Value) { return em.i8(0); });
}

LogicalResult fullSet(RouterLowering &L, FullSetOp o) {
  LoopEmitter &em = L.em();
  return perExpertSet(L, o.getResult(), [&](Value) { return em.i8(1); });
}

LogicalResult thresholdSet(RouterLowering &L, ThresholdSetOp o) {
  LoopEmitter &em = L.em();
  Value s = L.mem(o.getScores()), theta = L.scalar(o.getTheta());
  return perExpertSet(L, o.getResult(), [&](Value e) {
    Value ge = em.cmpF(F::OGE, em.load(s, e), theta);
    return arith::ExtUIOp::create(em.builder(), em.location(), em.builder().getI8Type(), ge)
        .getResult();
  });
}

LogicalResult unionSet(RouterLowering &L, UnionOp o) {
  LoopEmitter &em = L.em();
  Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
  return perExpertSet(L, o.getResult(),
                      [&](Value e) { return em.orI(em.load(a, e), em.load(c, e)); });
}

LogicalResult intersectSet(RouterLowering &L, IntersectOp o) {
  LoopEmitter &em = L.em();
  Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
  return perExpertSet(L, o.getResult(),
                      [&](Value e) { return em.andI(em.load(a, e), em.load(c, e)); });
}

} // namespace

void registerSetOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<emptySet, fullSet, fill, fillPerDevice, thresholdSet, dropLowest,
                        unionSet, intersectSet>(context);
  });
}

} // namespace switchyard::moe
