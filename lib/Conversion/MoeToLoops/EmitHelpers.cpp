//===- EmitHelpers.cpp - building blocks shared by the op lowerings ---------===//
//
// Top-k of a row, counts clamped to a range, set copies and sizes: the pieces several
// op families use, written once so that every op ranks the same way.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
namespace emit {

int64_t expertsOf(Value v) {
  if (auto set = dyn_cast<ExpertSetType>(v.getType()))
    return set.getExperts();
  auto t = cast<RankedTensorType>(v.getType());
  return t.getDimSize(t.getRank() - 1);
}

/// A scratch buffer of n flags, cleared.
Value clearedFlags(RouterLowering &L, int64_t n) {
  LoopEmitter &em = L.em();
  Value flags = L.scratch(n, em.builder().getI8Type());
  L.forEachLane(em.idx(n), [&](Value i) { em.store(em.i8(0), flags, i); });
  return flags;
}

/// Picks the k best of a row among the eligible ids not yet marked in `taken`, marks
/// them, and calls `onPick(j, id, score)` for each slot j (id -1 when nothing eligible is
/// left). One pass over the row keeps the best k in a sorted buffer (insertion: a new
/// entry moves ahead only past strictly worse ones, so ties keep the lower id first),
/// the usual top-k kernel shape; `capacity` bounds k. `taken` may be null (nothing
/// excluded, nothing marked): callers that only need the k picks pass none.
void topKRow(RouterLowering &L, Value n, Value k, int64_t capacity, Value taken,
             function_ref<Value(Value)> eligible, function_ref<Value(Value)> score,
             function_ref<void(Value, Value, Value)> onPick) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  if (L.laneParallelHere() || L.blockParallelHere()) {
    // The GPU form: k rounds of a parallel arg-max, each below the previous round's
    // packed key (the same order: best first, ties to the lower id, -1 once nothing
    // eligible is left); one warp per token inside token loops, one block for set
    // selection. No flags: the bound excludes the earlier winners, so `taken` is
    // read (ids excluded before this call) and marked only when the caller gives it.
    em.loopCarried(em.idx(0), k, {em.i64(-1)}, [&](Value j, ValueRange bound) {
      RouterLowering::Ranked best = L.argBestBelow(
          n,
          [&](Value e) {
            return taken ? em.andI(em.notI(em.isSet(taken, e)), eligible(e)) : eligible(e);
          },
          score, bound[0]);
      if (taken) {
        Value found = em.cmpI(P::sge, best.id, em.i32(0));
        em.ifThen(found, [&] { em.store(em.i8(1), taken, em.toIndex(best.id)); });
      }
      onPick(j, best.id, best.score);
      return SmallVector<Value>{best.key};
    });
    return;
  }
  Value vals = L.scratch(capacity, b.getF32Type());
  Value ids = L.scratch(capacity, b.getIndexType());
  Value one = em.idx(1), zero = em.idx(0);
  Value any = em.cmpI(P::ugt, k, zero);
  Value last = em.select(any, em.subI(k, one), zero);
  // Inserts score v of e into the sorted list, from slot `start` up.
  auto insertAt = [&](Value start, Value v, Value e) {
    Value slot = em.whileLoop(
        {start},
        [&](ValueRange j) {
          Value inside = em.cmpI(P::ugt, j[0], zero);
          Value prev = em.select(inside, em.subI(j[0], one), zero);
          return em.andI(inside, em.outranks(v, em.load(vals, prev)));
        },
        [&](ValueRange j) {
          Value prev = em.subI(j[0], one);
          em.store(em.load(vals, prev), vals, j[0]);
          em.store(em.load(ids, prev), ids, j[0]);
          return SmallVector<Value>{prev};
        })[0];
    em.store(v, vals, slot);
    em.store(e, ids, slot);
  };
  auto candidate = [&](Value e) {
    Value free = taken ? em.notI(em.isSet(taken, e)) : always(em);
    return em.andI(free, eligible(e));
  };
  // Two phases, so that the scan of the (long) second carries no count from one id to
  // the next: fill the list with the first k candidates, then insert the ids that
  // outrank its last.
  SmallVector<Value> filled = em.whileLoop(
      {zero, zero},
      [&](ValueRange it) {
        return em.andI(em.cmpI(P::ult, it[0], n), em.cmpI(P::ult, it[1], k));
      },
      [&](ValueRange it) {
        Value e = it[0], c = it[1];
        Value ok = candidate(e);
        em.ifThen(ok, [&] { insertAt(c, score(e), e); });
        return SmallVector<Value>{em.addI(e, one), em.select(ok, em.addI(c, one), c)};
      });
  Value count = filled[1];
  em.loop(em.select(any, filled[0], n), n, [&](Value e) {
    Value v = score(e);
    em.ifThen(em.andI(candidate(e), em.outranks(v, em.load(vals, last))),
              [&] { insertAt(last, v, e); });
  });
  em.loop(zero, k, [&](Value j) {
    Value found = em.cmpI(P::ult, j, count);
    Value id = em.select(found, em.toI32(em.load(ids, j)), em.i32(-1));
    Value val = em.select(found, em.load(vals, j), em.f32(0));
    if (taken)
      em.ifThen(found, [&] { em.store(em.i8(1), taken, em.load(ids, j)); });
    onPick(j, id, val);
  });
}

Value always(LoopEmitter &em) { return em.cmpI(P::eq, em.i32(0), em.i32(0)); }

/// min(v, hi) for a non-negative i64 parameter, as an index loop bound.
Value clampedCount(LoopEmitter &em, Value v, int64_t hi) {
  Value nonNeg = em.select(em.cmpI(P::slt, v, em.i64(0)), em.i64(0), v);
  return em.toIndex(em.minUI(nonNeg, em.i64(hi)));
}

/// The buffer size a top-k of `count` (an i64 parameter) needs: its value when it is a
/// constant (knobs are frozen before lowering), else every expert.
int64_t capacityFor(Value count, int64_t n) {
  if (std::optional<int64_t> c = getConstantIntValue(count))
    return std::clamp<int64_t>(*c, 1, n);
  return n;
}

Value maxOfRow(RouterLowering &L, RowRef x, int64_t n) {
  LoopEmitter &em = L.em();
  return L.reduceLanes(em.idx(n), em.negInf(), RouterLowering::Combine::MaximumF,
                       [&](Value e) { return L.at(x, e); });
}

void copySet(LoopEmitter &em, Value dst, Value src, int64_t n) {
  if (dst != src)
    em.loop(n, [&](Value e) { em.store(em.load(src, e), dst, e); });
}

Value popcount(LoopEmitter &em, Value set, int64_t n) {
  return em.loopCarried(em.idx(0), em.idx(n), {em.i64(0)}, [&](Value e, ValueRange it) {
    return SmallVector<Value>{
        em.addI(it[0], arith::ExtUIOp::create(em.builder(), em.location(),
                                              em.builder().getI64Type(), em.load(set, e)))};
  })[0];
}

/// Adds up to `count` best experts outside `set`, by `scores`.
void addBest(RouterLowering &L, Value set, Value scores, Value count, int64_t n) {
  LoopEmitter &em = L.em();
  topKRow(
      L, em.idx(n), count, n, set, [&](Value) { return always(em); },
      [&](Value e) { return em.load(scores, e); }, [](Value, Value, Value) {});
}

} // namespace emit
} // namespace switchyard::moe
