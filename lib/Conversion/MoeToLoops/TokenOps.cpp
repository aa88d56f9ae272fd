//===- TokenOps.cpp - loops of the per-token ops ----------------------------===//
//
// Each function writes one token's row (`t`); the loop lowering fuses a token stage's
// ops into one token-parallel loop around them.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult softmaxRow(RouterLowering &L, SoftmaxOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getInput());
  RowRef x = L.rowIn(op.getInput(), t), y = L.rowOut(op.getResult(), t);
  Value mx = maxOfRow(L, x, n);
  Value allMasked = em.cmpF(F::OEQ, mx, em.negInf());
  Value sum =
      L.reduceLanes(em.idx(n), em.f32(0), RouterLowering::Combine::AddF, [&](Value e) {
        Value p = em.exp(em.subF(L.at(x, e), mx));
        L.put(p, y, e);
        return p;
      });
  // An all-masked row (max -inf) is all zeros, not NaN.
  L.forEachLane(em.idx(n), [&](Value e) {
    L.put(em.select(allMasked, em.f32(0), em.divF(L.at(y, e), sum)), y, e);
  });
  return success();
}

LogicalResult topkOpRow(RouterLowering &L, TopKOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getInput());
  RowRef x = L.rowIn(op.getInput(), t);
  RowRef vals = L.rowOut(op.getValues(), t), ids = L.rowOut(op.getIndices(), t);
  topKRow(
      L, em.idx(n), em.idx(op.getK()), op.getK(), /*taken=*/Value(),
      [&](Value) { return always(em); }, [&](Value e) { return L.at(x, e); },
      [&](Value j, Value id, Value v) {
        L.put(v, vals, j);
        L.put(id, ids, j);
      });
  return success();
}

LogicalResult groupLimitRow(RouterLowering &L, GroupLimitOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getInput()), groups = op.getGroups();
  int64_t size = n / groups;
  RowRef x = L.rowIn(op.getInput(), t), y = L.rowOut(op.getResult(), t);
  Value groupScore = L.scratch(groups, em.builder().getF32Type());
  bool parallel = L.laneParallelHere() || L.blockParallelHere();
  // Sequentially, flags exclude a group's earlier picks; in the parallel form each
  // round's arg-max stays below the previous round's key (no flags, see argBestBelow).
  Value taken = parallel ? Value() : clearedFlags(L, n);
  // A group's score: the sum of its group_topk best scores, best first.
  em.loop(groups, [&](Value g) {
    Value base = em.mulI(g, em.idx(size));
    auto score = [&](Value i) { return L.at(x, em.addI(base, i)); };
    Value sum = em.loopCarried(
        em.idx(0), em.idx(op.getGroupTopk()), {em.f32(0), em.i64(-1)},
        [&](Value, ValueRange it) {
          if (parallel) {
            RouterLowering::Ranked best = L.argBestBelow(
                em.idx(size), [&](Value) { return always(em); }, score, it[1]);
            return SmallVector<Value>{em.addF(it[0], best.score), best.key};
          }
          auto [best, v] = L.argBest(
              em.idx(size),
              [&](Value i) { return em.notI(em.isSet(taken, em.addI(base, i))); }, score);
          em.store(em.i8(1), taken, em.addI(base, em.toIndex(best)));
          return SmallVector<Value>{em.addF(it[0], v), it[1]};
        })[0];
    em.store(sum, groupScore, g);
  });
  Value kept = clearedFlags(L, groups);
  topKRow(
      L, em.idx(groups), em.idx(op.getTopkGroups()), op.getTopkGroups(), kept,
      [&](Value) { return always(em); }, [&](Value g) { return em.load(groupScore, g); },
      [](Value, Value, Value) {});
  L.forEachLane(em.idx(n), [&](Value e) {
    Value inKept = em.isSet(kept, em.divUI(e, em.idx(size)));
    L.put(em.select(inKept, L.at(x, e), em.negInf()), y, e);
  });
  return success();
}

LogicalResult binsRow(RouterLowering &L, BinsOp op, Value t) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getLogits());
  RowRef x = L.rowIn(op.getLogits(), t), y = L.rowOut(op.getBins(), t);
  Value alpha = L.scalar(op.getAlpha());
  // Bins never exceed 2^30, so the float -> int conversion is exact.
  Value beta = em.toF32(em.select(em.cmpI(P::sgt, L.scalar(op.getBeta()), em.i64(1 << 30)),
                                  em.i64(1 << 30), L.scalar(op.getBeta())));
  Value mx = maxOfRow(L, x, n);
  L.forEachLane(em.idx(n), [&](Value e) {
    Value z = L.at(x, e);
    Value gap = math::FloorOp::create(b, em.location(), em.mulF(alpha, em.subF(mx, z)));
    Value q = arith::MinNumFOp::create(b, em.location(), gap, beta);
    q = em.select(em.cmpF(F::OEQ, z, mx), em.f32(0), q);
    Value qi = arith::FPToSIOp::create(b, em.location(), b.getI32Type(), q);
    L.put(em.subI(em.i32(0), qi), y, e);
  });
  return success();
}

LogicalResult sigmoidRow(RouterLowering &L, SigmoidOp o, Value t) {
  LoopEmitter &em = L.em();
  return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value) {
    Value neg = arith::NegFOp::create(em.builder(), em.location(), x);
    return em.divF(em.f32(1), em.addF(em.f32(1), em.exp(neg)));
  });
}

LogicalResult addBiasRow(RouterLowering &L, AddBiasOp o, Value t) {
  LoopEmitter &em = L.em();
  Value bias = L.mem(o.getBias());
  return elementwiseRow(L, o.getInput(), o.getResult(), t,
                        [&](Value x, Value e) { return em.addF(x, em.load(bias, e)); });
}

LogicalResult scaleRow(RouterLowering &L, ScaleOp o, Value t) {
  LoopEmitter &em = L.em();
  Value f = L.scalar(o.getFactor());
  return elementwiseRow(L, o.getInput(), o.getResult(), t,
                        [&](Value x, Value) { return em.mulF(x, f); });
}

LogicalResult maskRow(RouterLowering &L, MaskOp o, Value t) {
  LoopEmitter &em = L.em();
  Value set = L.mem(o.getSet());
  return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value e) {
    return em.select(em.isSet(set, e), x, em.negInf());
  });
}

LogicalResult biasResidentRow(RouterLowering &L, BiasResidentOp o, Value t) {
  LoopEmitter &em = L.em();
  Value set = L.mem(o.getResident()), bonus = L.scalar(o.getBonus());
  return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value e) {
    return em.select(em.isSet(set, e), em.addF(x, bonus), x);
  });
}

/// Libra's lookahead gate: logits[t, e] = sum_h hidden[t, h] * weight[h, e], h in order.
LogicalResult gateRow(RouterLowering &L, GateOp o, Value t) {
  LoopEmitter &em = L.em();
  Value w = L.mem(o.getWeight());
  RowRef x = L.rowIn(o.getHidden(), t), y = L.rowOut(o.getResult(), t);
  int64_t hidden = cast<ShapedType>(o.getHidden().getType()).getDimSize(1);
  L.forEachLane(em.idx(expertsOf(o.getResult())), [&](Value e) {
    Value dot =
        em.loopCarried(em.idx(0), em.idx(hidden), {em.f32(0)}, [&](Value h, ValueRange it) {
          return SmallVector<Value>{
              em.addF(it[0], em.mulF(L.at(x, h), em.load(w, {h, e})))};
        })[0];
    L.put(dot, y, e);
  });
  return success();
}

} // namespace

void registerTokenOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<softmaxRow, sigmoidRow, addBiasRow, scaleRow, topkOpRow,
                        groupLimitRow, binsRow, maskRow, biasResidentRow, gateRow>(context);
  });
}

} // namespace switchyard::moe
