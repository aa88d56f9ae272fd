//===- OpEmitters.cpp - the loops each moe op lowers to -------------------===//
//
// Row emitters write one token's row (they run inside the fused token loop, with `t`
// the token); whole emitters write a complete loop nest over the batch or the experts.
// Every ranking goes through LoopEmitter::argBest / argWorst, so ties break toward the
// lower id and NaN ranks last in every op. Reductions over tokens run in token order,
// so floating-point sums are reproducible.
//
//===----------------------------------------------------------------------===//
#include "RouterLowering.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/TypeSwitch.h"

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
/// the usual top-k kernel shape; `capacity` bounds k.
void topKRow(RouterLowering &L, Value n, Value k, int64_t capacity, Value taken,
             function_ref<Value(Value)> eligible, function_ref<Value(Value)> score,
             function_ref<void(Value, Value, Value)> onPick) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  if (L.laneParallelHere() || L.blockParallelHere()) {
    // The GPU form: k rounds of a parallel arg-max over the ids not taken yet (the same
    // order: best first, ties to the lower id, -1 once nothing eligible is left); one
    // warp per token inside token loops, one block for set selection.
    em.loop(em.idx(0), k, [&](Value j) {
      auto [id, v] = L.argBest(
          n, [&](Value e) { return em.andI(em.notI(em.isSet(taken, e)), eligible(e)); },
          score);
      Value found = em.cmpI(P::sge, id, em.i32(0));
      em.ifThen(found, [&] { em.store(em.i8(1), taken, em.toIndex(id)); });
      onPick(j, id, v);
    });
    return;
  }
  Value vals = L.scratch(capacity, b.getF32Type());
  Value ids = L.scratch(capacity, b.getIndexType());
  Value one = em.idx(1), zero = em.idx(0);
  Value any = em.cmpI(P::ugt, k, zero);
  Value last = em.select(any, em.subI(k, one), zero);
  Value count = em.loopCarried(zero, n, {zero}, [&](Value e, ValueRange it) {
    Value c = it[0];
    Value full = em.cmpI(P::uge, c, k);
    Value ok = em.andI(any, em.andI(em.notI(em.isSet(taken, e)), eligible(e)));
    Value v = score(e);
    Value insert = em.andI(ok, em.orI(em.notI(full), em.outranks(v, em.load(vals, last))));
    em.ifThen(insert, [&] {
      Value start = em.select(full, last, c);
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
    });
    return SmallVector<Value>{em.select(em.andI(insert, em.notI(full)), em.addI(c, one), c)};
  })[0];
  em.loop(zero, k, [&](Value j) {
    Value found = em.cmpI(P::ult, j, count);
    Value id = em.select(found, em.toI32(em.load(ids, j)), em.i32(-1));
    Value val = em.select(found, em.load(vals, j), em.f32(0));
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

//===----------------------------------------------------------------------===//
// Row ops
//===----------------------------------------------------------------------===//

LogicalResult softmaxRow(RouterLowering &L, SoftmaxOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getInput());
  RowRef x = L.rowIn(op.getInput(), t), y = L.rowOut(op.getResult(), t);
  Value mx = maxOfRow(L, x, n);
  Value allMasked = em.cmpF(F::OEQ, mx, em.negInf());
  Value sum = L.reduceLanes(em.idx(n), em.f32(0), RouterLowering::Combine::AddF, [&](Value e) {
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
  Value taken = clearedFlags(L, n);
  topKRow(L, em.idx(n), em.idx(op.getK()), op.getK(), taken, [&](Value) { return always(em); },
          [&](Value e) { return L.at(x, e); },
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
  Value taken = clearedFlags(L, n);
  Value groupScore = L.scratch(groups, em.builder().getF32Type());
  // A group's score: the sum of its group_topk best scores, best first.
  em.loop(groups, [&](Value g) {
    Value base = em.mulI(g, em.idx(size));
    Value sum = em.loopCarried(em.idx(0), em.idx(op.getGroupTopk()), {em.f32(0)},
                               [&](Value, ValueRange it) {
      auto [best, v] = L.argBest(
          em.idx(size),
          [&](Value i) { return em.notI(em.isSet(taken, em.addI(base, i))); },
          [&](Value i) { return L.at(x, em.addI(base, i)); });
      em.store(em.i8(1), taken, em.addI(base, em.toIndex(best)));
      return SmallVector<Value>{em.addF(it[0], v)};
    })[0];
    em.store(sum, groupScore, g);
  });
  Value kept = clearedFlags(L, groups);
  topKRow(L, em.idx(groups), em.idx(op.getTopkGroups()), op.getTopkGroups(), kept,
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

LogicalResult routeRow(RouterLowering &L, RouteOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores()), k = op.getK();
  RowRef s = L.rowIn(op.getScores(), t);
  std::optional<RowRef> w;
  if (op.getWeights())
    w = L.rowIn(op.getWeights(), t);
  Value within = op.getWithin() ? L.mem(op.getWithin()) : Value();
  RowRef ids = L.rowOut(op.getTopkIds(), t), wts = L.rowOut(op.getTopkWeights(), t);
  Value taken = clearedFlags(L, n);
  auto eligible = [&](Value e) {
    Value v = L.at(s, e);
    Value ok = em.andI(em.notI(em.isNaN(v)), em.cmpF(F::ONE, v, em.negInf()));
    return within ? em.andI(ok, em.isSet(within, e)) : ok;
  };
  topKRow(L, em.idx(n), em.idx(k), k, taken, eligible, [&](Value e) { return L.at(s, e); },
          [&](Value j, Value id, Value v) {
            Value found = em.cmpI(P::sge, id, em.i32(0));
            Value weight = v;
            if (w)
              weight = L.at(*w, em.toIndex(em.select(found, id, em.i32(0))));
            L.put(id, ids, j);
            L.put(em.select(found, weight, em.f32(0)), wts, j);
          });
  if (op.getRenormalize()) {
    Value sum = em.loopCarried(em.idx(0), em.idx(k), {em.f32(0)}, [&](Value j, ValueRange it) {
      return SmallVector<Value>{em.addF(it[0], L.at(wts, j))};
    })[0];
    Value positive = em.cmpF(F::OGT, sum, em.f32(0));
    em.loop(k, [&](Value j) {
      Value v = L.at(wts, j);
      L.put(em.select(positive, em.divF(v, sum), v), wts, j);
    });
  }
  float scaling = op.getScaling().convertToFloat();
  if (scaling != 1.0f)
    em.loop(k, [&](Value j) { L.put(em.mulF(L.at(wts, j), em.f32(scaling)), wts, j); });
  return success();
}

LogicalResult remapRow(RouterLowering &L, RemapPhysicalOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t k = cast<RankedTensorType>(op.getIds().getType()).getDimSize(1);
  int64_t n = op.getPlacement().getType().getExperts();
  const Stored &placement = L.get(op.getPlacement());
  RowRef ids = L.rowIn(op.getIds(), t), out = L.rowOut(op.getResult(), t);
  Value tok = em.toI32(t);
  em.loop(k, [&](Value j) {
    Value e = L.at(ids, j);
    Value valid = em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n)));
    Value es = em.toIndex(em.select(valid, e, em.i32(0)));
    Value count = em.load(placement.replicas, es);
    count = em.select(em.cmpI(P::slt, count, em.i32(1)), em.i32(1), count);
    Value replica = em.toIndex(em.remUI(tok, count));
    Value phys = em.load(placement.log2phy, {es, replica});
    L.put(em.select(valid, phys, em.i32(-1)), out, j);
  });
  return success();
}

template <typename Fn>
LogicalResult elementwiseRow(RouterLowering &L, Value in, Value out, Value t, Fn fn) {
  RowRef x = L.rowIn(in, t), y = L.rowOut(out, t);
  L.forEachLane(L.em().idx(expertsOf(in)), [&](Value e) { L.put(fn(L.at(x, e), e), y, e); });
  return success();
}

//===----------------------------------------------------------------------===//
// Whole ops: batch reductions
//===----------------------------------------------------------------------===//

LogicalResult batchReduce(RouterLowering &L, BatchReduceOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getInput());
  Value out = L.allocFull(op.getResult()), x = L.mem(op.getInput());
  ReduceKind kind = op.getKind();
  Value init = kind == ReduceKind::count ? em.i32(0)
               : kind == ReduceKind::sum ? em.f32(0)
                                         : em.negInf();
  if (!op.getTopk()) {
    // Expert-parallel: each expert's reduction runs over the tokens in order, so the
    // float result is the same on every target.
    L.parallelLoop(em.idx(n), [&](Value e) {
      Value acc = em.loopCarried(em.idx(0), L.tokens(), {init}, [&](Value t, ValueRange it) {
        Value v = em.load(x, {t, e});
        Value next = kind == ReduceKind::sum
                         ? em.addF(it[0], v)
                         : arith::MaximumFOp::create(b, em.location(), it[0], v).getResult();
        return SmallVector<Value>{next};
      })[0];
      em.store(acc, out, e);
    });
    return success();
  }
  em.fill(out, em.idx(n), init);
  auto combine = [&](Value e, Value v) {
    Value acc = em.load(out, e);
    Value next = kind == ReduceKind::count ? em.addI(acc, em.i32(1))
                 : kind == ReduceKind::sum
                     ? em.addF(acc, v)
                     : arith::MaximumFOp::create(b, em.location(), acc, v).getResult();
    em.store(next, out, e);
  };
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value taken = clearedFlags(L, n);
    topKRow(L, em.idx(n), em.idx(*op.getTopk()), *op.getTopk(), taken, [&](Value) { return always(em); },
            [&](Value e) { return em.load(x, {t, e}); },
            [&](Value, Value id, Value v) { combine(em.toIndex(id), v); });
  });
  return success();
}

/// leader[t] = the first token with t's request id: the leader of the nearest earlier
/// token of the same request (found scanning backwards, usually one step for the
/// contiguous tokens of a speculative-decoding request), or t itself.
Value requestLeaders(RouterLowering &L, Value requestIds) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Value leaders = memref::AllocOp::create(
      b, em.location(), MemRefType::get({ShapedType::kDynamic}, b.getI32Type()),
      ValueRange{L.tokens()});
  if (L.blockParallelHere()) {
    // The GPU form: token t's warp finds the first u <= t with t's id (the largest
    // key INT32_MAX - u among the matches), independently of the other tokens.
    L.parallelLoop(L.tokens(), [&](Value t) {
      Value id = em.load(requestIds, t);
      Value key = L.reduceLanes(em.addI(t, em.idx(1)), em.i32(0), RouterLowering::Combine::MaxUI,
                                [&](Value u) {
        return em.select(em.cmpI(P::eq, em.load(requestIds, u), id),
                         em.subI(em.i32(INT32_MAX), em.toI32(u)), em.i32(0));
      });
      em.store(em.subI(em.i32(INT32_MAX), key), leaders, t);
    });
    return leaders;
  }
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value id = em.load(requestIds, t);
    Value falseVal = em.cmpI(P::ne, em.i32(0), em.i32(0));
    auto last = em.whileLoop(
        {t, falseVal},
        [&](ValueRange s) {
          return em.andI(em.cmpI(P::ugt, s[0], em.idx(0)), em.notI(s[1]));
        },
        [&](ValueRange s) {
          Value u = em.subI(s[0], em.idx(1));
          return SmallVector<Value>{u, em.cmpI(P::eq, em.load(requestIds, u), id)};
        });
    Value earlier = em.load(leaders, em.select(last[1], last[0], t));
    em.store(em.select(last[1], earlier, em.toI32(t)), leaders, t);
  });
  return leaders;
}

LogicalResult segmentReduce(RouterLowering &L, SegmentReduceOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getInput());
  bool isSum = op.getKind() == ReduceKind::sum;
  Value out = L.allocFull(op.getResult()), x = L.mem(op.getInput());
  Value leaders = requestLeaders(L, L.mem(op.getRequestIds()));
  Value init = isSum ? em.f32(0) : em.negInf();
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    em.loop(n, [&](Value e) { em.store(init, out, {t, e}); });
  });
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value lead = em.toIndex(em.load(leaders, t));
    em.loop(n, [&](Value e) {
      Value acc = em.load(out, {lead, e}), v = em.load(x, {t, e});
      Value next = isSum ? em.addF(acc, v)
                         : arith::MaximumFOp::create(b, em.location(), acc, v).getResult();
      em.store(next, out, {lead, e});
    });
  });
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value lead = em.toIndex(em.load(leaders, t));
    em.ifThen(em.cmpI(P::ne, lead, t), [&] {
      em.loop(n, [&](Value e) { em.store(em.load(out, {lead, e}), out, {t, e}); });
    });
  });
  memref::DeallocOp::create(b, em.location(), leaders);
  return success();
}

LogicalResult binScore(RouterLowering &L, BinScoreOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getResult());
  int64_t k = op.getIds().getType().getDimSize(1);
  Value out = L.allocFull(op.getResult());
  Value bins = L.mem(op.getBins()), ids = L.mem(op.getIds());
  Value base = em.toF32(L.tokens());
  // Expert-parallel: expert e adds its votes token by token, in order.
  L.parallelLoop(em.idx(n), [&](Value e) {
    em.store(em.f32(0), out, e);
    Value ei = em.toI32(e);
    em.loop(em.idx(0), L.tokens(), [&](Value t) {
      Value voted = em.loopCarried(em.idx(0), em.idx(k), {em.cmpI(P::ne, ei, ei)},
                                   [&](Value j, ValueRange it) {
        return SmallVector<Value>{em.orI(it[0], em.cmpI(P::eq, em.load(ids, {t, j}), ei))};
      })[0];
      em.ifThen(voted, [&] {
        Value weight = math::PowFOp::create(em.builder(), em.location(), base,
                                            em.toF32(em.load(bins, {t, e})));
        em.store(em.addF(em.load(out, e), weight), out, e);
      });
    });
  });
  return success();
}

/// out[e] = OR over the tokens t of flags[t, e]: expert-parallel, each expert visiting
/// the tokens in order (a token fold, which the large-batch kernels split over CTAs).
void unionOfRows(RouterLowering &L, Value flags, Value out, int64_t n) {
  LoopEmitter &em = L.em();
  L.parallelLoop(em.idx(n), [&](Value e) {
    Value any = em.loopCarried(em.idx(0), L.tokens(), {em.i8(0)}, [&](Value t, ValueRange it) {
      return SmallVector<Value>{em.orI(it[0], em.load(flags, {t, e}))};
    })[0];
    em.store(any, out, e);
  });
}

LogicalResult unionTopK(RouterLowering &L, UnionTopKOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getScores());
  Value out = L.allocFull(op.getResult()), x = L.mem(op.getScores());
  Value k0 = clampedCount(em, L.scalar(op.getK0()), n);
  // Token-parallel: each token flags its top-k0; then expert-parallel: an expert is in
  // the set when any token flagged it. No two iterations write the same place.
  Value flags = L.temporary(MemRefType::get({ShapedType::kDynamic, n}, b.getI8Type()),
                            L.tokens());
  L.parallelLoop(L.tokens(), [&](Value t) {
    Value row = L.rowView(flags, t, n);
    em.fill(row, em.idx(n), em.i8(0));
    topKRow(L, em.idx(n), k0, capacityFor(L.scalar(op.getK0()), n), row,
            [&](Value) { return always(em); },
            [&](Value e) { return em.load(x, {t, e}); }, [](Value, Value, Value) {});
  });
  unionOfRows(L, flags, out, n);
  return success();
}

/// XShare Alg. 3 for the request led by token r (its first token): marks S_r in `row`
/// (cleared by the caller) - the union of its tokens' top-k0 (warm-up) plus the m_r best
/// experts outside it by the request's summed scores (summed in token order, on every
/// target). In the GPU form r's warp does it, its row loops lane-parallel.
void buildRequestSet(RouterLowering &L, SegmentFillOp op, Value leaders, Value r, Value row) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores());
  Value x = L.mem(op.getScores());
  Value k0 = clampedCount(em, L.scalar(op.getK0()), n);
  Value budget = clampedCount(em, L.scalar(op.getBudget()), n);
  Value agg = L.scratch(n, em.builder().getF32Type());
  L.forEachLane(em.idx(n), [&](Value e) { em.store(em.f32(0), agg, e); });
  em.loop(r, L.tokens(), [&](Value t) {
    em.ifThen(em.cmpI(P::eq, em.load(leaders, t), em.toI32(r)), [&] {
      Value taken = clearedFlags(L, n);
      topKRow(L, em.idx(n), k0, capacityFor(L.scalar(op.getK0()), n), taken,
              [&](Value) { return always(em); }, [&](Value e) { return em.load(x, {t, e}); },
              [&](Value, Value id, Value) {
                em.ifThen(em.cmpI(P::sge, id, em.i32(0)),
                          [&] { em.store(em.i8(1), row, em.toIndex(id)); });
              });
      L.forEachLane(em.idx(n), [&](Value e) {
        em.store(em.addF(em.load(agg, e), em.load(x, {t, e})), agg, e);
      });
    });
  });
  topKRow(L, em.idx(n), budget, capacityFor(L.scalar(op.getBudget()), n), row,
          [&](Value) { return always(em); }, [&](Value e) { return em.load(agg, e); },
          [](Value, Value, Value) {});
}

LogicalResult segmentFill(RouterLowering &L, SegmentFillOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getScores());
  Value out = L.allocFull(op.getResult());
  Value leaders = requestLeaders(L, L.mem(op.getRequestIds()));
  auto isLeader = [&](Value r) { return em.cmpI(P::eq, em.load(leaders, r), em.toI32(r)); };
  if (L.blockParallelHere()) {
    // The GPU form: one warp per request builds S_r in its leader's row of a [T, E]
    // flag buffer, then the union over the rows - the shape of union_topk (a token
    // loop and a token fold), which also splits over CTAs for large batches.
    Value picked = L.temporary(MemRefType::get({ShapedType::kDynamic, n}, b.getI8Type()),
                               L.tokens());
    L.parallelLoop(L.tokens(), [&](Value r) {
      Value row = L.rowView(picked, r, n);
      L.forEachLane(em.idx(n), [&](Value e) { em.store(em.i8(0), row, e); });
      em.ifThen(isLeader(r), [&] { buildRequestSet(L, op, leaders, r, row); });
    });
    unionOfRows(L, picked, out, n);
  } else {
    em.fill(out, em.idx(n), em.i8(0));
    em.loop(em.idx(0), L.tokens(), [&](Value r) {
      em.ifThen(isLeader(r), [&] {
        Value row = clearedFlags(L, n);
        buildRequestSet(L, op, leaders, r, row);
        em.loop(n, [&](Value e) { em.store(em.orI(em.load(out, e), em.load(row, e)), out, e); });
      });
    });
  }
  memref::DeallocOp::create(b, em.location(), leaders);
  return success();
}

LogicalResult confidentTop1(RouterLowering &L, ConfidentTop1Op op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getResult());
  Value out = L.allocFull(op.getResult());
  Value bins = L.mem(op.getBins()), ids = L.mem(op.getIds());
  em.fill(out, em.idx(n), em.i8(0));
  auto valid = [&](Value e) {
    return em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n)));
  };
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value second = em.load(ids, {t, em.idx(1)});
    Value first = em.load(ids, {t, em.idx(0)});
    em.ifThen(em.andI(valid(second), valid(first)), [&] {
      Value bin = em.load(bins, {t, em.toIndex(second)});
      em.ifThen(em.cmpI(P::sle, bin, em.i32(-1)),
                [&] { em.store(em.i8(1), out, em.toIndex(first)); });
    });
  });
  return success();
}

//===----------------------------------------------------------------------===//
// Whole ops: expert sets
//===----------------------------------------------------------------------===//

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
  topKRow(L, em.idx(n), count, n, set, [&](Value) { return always(em); },
          [&](Value e) { return em.load(scores, e); }, [](Value, Value, Value) {});
}

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
    Value missing = em.select(em.cmpI(P::sgt, amount, size), em.subI(amount, size), em.i64(0));
    addBest(L, out, s, clampedCount(em, missing, n), n);
    break;
  }
  case FillMode::threshold: {
    // XShare Alg. 1: while f(S) < tau * f(E), add the best expert outside S.
    Value total = em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
      return SmallVector<Value>{em.addF(it[0], em.load(s, e))};
    })[0];
    Value target = em.mulF(amount, total);
    Value mass = em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
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
          Value added = em.loopCarried(em.idx(0), em.idx(devices), {em.i64(0)},
                                       [&](Value g, ValueRange it) {
            Value gi = em.toI32(g);
            // One block reduction per device in the GPU form.
            auto [best, v] = L.argBest(
                em.idx(n),
                [&](Value e) {
                  return em.andI(em.notI(em.isSet(out, e)), em.cmpI(P::eq, deviceOf(e), gi));
                },
                [&](Value e) { return em.load(mass, e); });
            Value found = em.cmpI(P::sge, best, em.i32(0));
            em.ifThen(found, [&] { em.store(em.i8(1), out, em.toIndex(best)); });
            return SmallVector<Value>{em.select(found, em.addI(it[0], em.i64(1)), it[0])};
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
    Value worst = em.argWorst(em.idx(n), [&](Value e) { return em.isSet(out, e); },
                              [&](Value e) { return em.load(s, e); });
    em.ifThen(em.cmpI(P::sge, worst, em.i32(0)),
              [&] { em.store(em.i8(0), out, em.toIndex(worst)); });
  });
  return success();
}

template <typename Fn>
LogicalResult perExpertSet(RouterLowering &L, Value result, Fn fn) {
  LoopEmitter &em = L.em();
  Value out = L.allocFull(result);
  em.loop(expertsOf(result), [&](Value e) { em.store(fn(e), out, e); });
  return success();
}

//===----------------------------------------------------------------------===//
// Whole ops: routing outputs
//===----------------------------------------------------------------------===//

LogicalResult expertCounts(RouterLowering &L, ExpertCountsOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getCounts());
  int64_t k = op.getIds().getType().getDimSize(1);
  Value out = L.allocFull(op.getCounts()), ids = L.mem(op.getIds());
  if (L.blockParallelHere())
    L.parallelLoop(em.idx(n), [&](Value e) { em.store(em.i32(0), out, e); });
  else
    em.fill(out, em.idx(n), em.i32(0));
  // Token-parallel with atomic increments: integer counts do not depend on the order.
  L.parallelLoop(L.tokens(), [&](Value t) {
    em.loop(k, [&](Value j) {
      Value e = em.load(ids, {t, j});
      em.ifThen(em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n))), [&] {
        memref::AtomicRMWOp::create(em.builder(), em.location(), arith::AtomicRMWKind::addi,
                                    em.i32(1), out, ValueRange{em.toIndex(e)});
      });
    });
  });
  return success();
}

LogicalResult compactActive(RouterLowering &L, CompactActiveOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getCounts());
  Value counts = L.mem(op.getCounts());
  Value active = L.allocFull(op.getActive()), num = L.allocFull(op.getNumActive());
  if (L.blockParallelHere()) {
    // Active experts in id order: a stable scatter into one bucket; -1 after them.
    auto has = [&](Value e) { return em.cmpI(P::sgt, em.load(counts, e), em.i32(0)); };
    stableScatter(
        L, em.idx(n), 1, [&](Value e) { return em.select(has(e), em.i32(0), em.i32(-1)); },
        [&](Value) { return em.i32(0); },
        [&](Value e, Value pos) { em.store(em.toI32(e), active, em.toIndex(pos)); });
    Value found =
        blockSum(L, em.idx(n), [&](Value e) { return em.select(has(e), em.i32(1), em.i32(0)); });
    L.parallelLoop(em.idx(n), [&](Value i) {
      em.ifThen(em.cmpI(P::sge, em.toI32(i), found),
                [&] { em.store(em.i32(-1), active, i); });
    });
    em.store(found, num, em.idx(0));
    return success();
  }
  Value found = em.loopCarried(em.idx(0), em.idx(n), {em.i32(0)}, [&](Value e, ValueRange it) {
    Value has = em.cmpI(P::sgt, em.load(counts, e), em.i32(0));
    em.ifThen(has, [&] { em.store(em.toI32(e), active, em.toIndex(it[0])); });
    return SmallVector<Value>{em.select(has, em.addI(it[0], em.i32(1)), it[0])};
  })[0];
  em.loop(em.toIndex(found), em.idx(n), [&](Value i) { em.store(em.i32(-1), active, i); });
  em.store(found, num, em.idx(0));
  return success();
}

/// align_blocks in the GPU form: the same layout from block-parallel passes - the
/// padded counts' prefix sum, each expert's block ids, and the slots placed by a
/// stable scatter (token order within an expert, as the sequential form).
LogicalResult alignBlocksParallel(RouterLowering &L, AlignBlocksOp op, Value slots,
                                  Value sortedSize, Value blockCount) {
  LoopEmitter &em = L.em();
  int64_t n = op.getCounts().getType().getDimSize(0);
  int64_t k = op.getIds().getType().getDimSize(1), block = op.getBlockSize();
  Value ids = L.mem(op.getIds()), counts = L.mem(op.getCounts());
  Value sorted = L.mem(op.getSortedTokenIds()), blocks = L.mem(op.getExpertIds());
  Value padded = L.mem(op.getNumTokensPostPadded());
  L.parallelLoop(sortedSize, [&](Value i) { em.store(em.toI32(slots), sorted, i); });
  L.parallelLoop(blockCount, [&](Value i) { em.store(em.i32(-1), blocks, i); });
  auto blocksOf = [&](Value e) {
    Value count = em.load(counts, e);
    count = em.select(em.cmpI(P::slt, count, em.i32(0)), em.i32(0), count);
    return em.divUI(em.addI(count, em.i32(block - 1)), em.i32(block));
  };
  Value start = L.temporary(MemRefType::get({n}, em.builder().getI32Type()), {});
  exclusiveScan(L, em.idx(n), start, [&](Value e) { return em.mulI(blocksOf(e), em.i32(block)); });
  L.parallelLoop(em.idx(n), [&](Value e) {
    Value first = em.toIndex(em.divUI(em.load(start, e), em.i32(block)));
    em.loop(em.idx(0), em.toIndex(blocksOf(e)), [&](Value i) {
      Value at = em.addI(first, i);
      em.ifThen(em.cmpI(P::ult, at, blockCount), [&] { em.store(em.toI32(e), blocks, at); });
    });
  });
  stableScatter(
      L, slots, n,
      [&](Value slot) {
        return em.load(ids, {em.divUI(slot, em.idx(k)), em.remUI(slot, em.idx(k))});
      },
      [&](Value e) { return em.load(start, e); },
      [&](Value slot, Value pos) {
        // Counts that disagree with the ids must not write out of bounds.
        em.ifThen(em.cmpI(P::ult, em.toIndex(pos), sortedSize),
                  [&] { em.store(em.toI32(slot), sorted, em.toIndex(pos)); });
      });
  Value lastExpert = em.idx(n - 1);
  Value total =
      em.addI(em.load(start, lastExpert), em.mulI(blocksOf(lastExpert), em.i32(block)));
  em.store(total, padded, em.idx(0));
  return success();
}

LogicalResult alignBlocks(RouterLowering &L, AlignBlocksOp op) {
  LoopEmitter &em = L.em();
  int64_t n = op.getCounts().getType().getDimSize(0);
  int64_t k = op.getIds().getType().getDimSize(1), block = op.getBlockSize();
  Value ids = L.mem(op.getIds()), counts = L.mem(op.getCounts());
  Value sorted = L.allocFull(op.getSortedTokenIds());
  Value blocks = L.allocFull(op.getExpertIds());
  Value padded = L.allocFull(op.getNumTokensPostPadded());
  Value slots = em.mulI(L.tokens(), em.idx(k));
  Value sortedSize = L.dimSize(op.getSortedTokenIds(), 0);
  Value blockCount = L.dimSize(op.getExpertIds(), 0);
  if (L.blockParallelHere())
    return alignBlocksParallel(L, op, slots, sortedSize, blockCount);
  em.fill(sorted, sortedSize, em.toI32(slots));
  em.fill(blocks, blockCount, em.i32(-1));
  // Each expert's segment starts at the padded prefix sum of the counts before it.
  Value next = L.scratch(n, em.builder().getI32Type());
  Value total = em.loopCarried(em.idx(0), em.idx(n), {em.i32(0)}, [&](Value e, ValueRange it) {
    Value count = em.load(counts, e);
    count = em.select(em.cmpI(P::slt, count, em.i32(0)), em.i32(0), count);
    Value nblocks = em.divUI(em.addI(count, em.i32(block - 1)), em.i32(block));
    em.store(it[0], next, e);
    Value first = em.toIndex(em.divUI(it[0], em.i32(block)));
    em.loop(em.idx(0), em.toIndex(nblocks), [&](Value i) {
      Value at = em.addI(first, i);
      em.ifThen(em.cmpI(P::ult, at, blockCount),
                [&] { em.store(em.toI32(e), blocks, at); });
    });
    return SmallVector<Value>{em.addI(it[0], em.mulI(nblocks, em.i32(block)))};
  })[0];
  em.loop(em.idx(0), slots, [&](Value slot) {
    Value e = em.load(ids, {em.divUI(slot, em.idx(k)), em.remUI(slot, em.idx(k))});
    em.ifThen(em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n))), [&] {
      Value ei = em.toIndex(e);
      Value pos = em.load(next, ei);
      // Counts that disagree with the ids must not write out of bounds.
      em.ifThen(em.cmpI(P::ult, em.toIndex(pos), sortedSize),
                [&] { em.store(em.toI32(slot), sorted, em.toIndex(pos)); });
      em.store(em.addI(pos, em.i32(1)), next, ei);
    });
  });
  em.store(total, padded, em.idx(0));
  return success();
}

} // namespace emit
using namespace emit;

LogicalResult emitRowOp(RouterLowering &L, Operation *op, Value t) {
  LoopEmitter &em = L.em();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](SoftmaxOp o) { return softmaxRow(L, o, t); })
      .Case([&](SigmoidOp o) {
        return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value) {
          Value neg = arith::NegFOp::create(em.builder(), em.location(), x);
          return em.divF(em.f32(1), em.addF(em.f32(1), em.exp(neg)));
        });
      })
      .Case([&](AddBiasOp o) {
        Value bias = L.mem(o.getBias());
        return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value e) {
          return em.addF(x, em.load(bias, e));
        });
      })
      .Case([&](ScaleOp o) {
        Value f = L.scalar(o.getFactor());
        return elementwiseRow(L, o.getInput(), o.getResult(), t,
                              [&](Value x, Value) { return em.mulF(x, f); });
      })
      .Case([&](MaskOp o) {
        Value set = L.mem(o.getSet());
        return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value e) {
          return em.select(em.isSet(set, e), x, em.negInf());
        });
      })
      .Case([&](BiasResidentOp o) {
        Value set = L.mem(o.getResident()), bonus = L.scalar(o.getBonus());
        return elementwiseRow(L, o.getInput(), o.getResult(), t, [&](Value x, Value e) {
          return em.select(em.isSet(set, e), em.addF(x, bonus), x);
        });
      })
      .Case([&](TopKOp o) { return topkOpRow(L, o, t); })
      .Case([&](GroupLimitOp o) { return groupLimitRow(L, o, t); })
      .Case([&](BinsOp o) { return binsRow(L, o, t); })
      .Case([&](RouteOp o) { return routeRow(L, o, t); })
      .Case([&](RemapPhysicalOp o) { return remapRow(L, o, t); })
      .Case([&](GateOp o) {
        // logits[t, e] = sum_h hidden[t, h] * weight[h, e], h in order.
        Value w = L.mem(o.getWeight());
        RowRef x = L.rowIn(o.getHidden(), t), y = L.rowOut(o.getResult(), t);
        int64_t hidden = cast<ShapedType>(o.getHidden().getType()).getDimSize(1);
        L.forEachLane(em.idx(expertsOf(o.getResult())), [&](Value e) {
          Value dot = em.loopCarried(em.idx(0), em.idx(hidden), {em.f32(0)},
                                     [&](Value h, ValueRange it) {
            return SmallVector<Value>{em.addF(it[0], em.mulF(L.at(x, h), em.load(w, {h, e})))};
          })[0];
          L.put(dot, y, e);
        });
        return success();
      })
      .Default([](Operation *op) {
        return op->emitOpError() << "has no per-token lowering";
      });
}

LogicalResult emitWholeOp(RouterLowering &L, Operation *op) {
  LoopEmitter &em = L.em();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](BatchReduceOp o) { return batchReduce(L, o); })
      .Case([&](SegmentReduceOp o) { return segmentReduce(L, o); })
      .Case([&](BinScoreOp o) { return binScore(L, o); })
      .Case([&](UnionTopKOp o) { return unionTopK(L, o); })
      .Case([&](SegmentFillOp o) { return segmentFill(L, o); })
      .Case([&](ConfidentTop1Op o) { return confidentTop1(L, o); })
      .Case([&](EmptySetOp o) {
        return perExpertSet(L, o.getResult(), [&](Value) { return em.i8(0); });
      })
      .Case([&](FullSetOp o) {
        return perExpertSet(L, o.getResult(), [&](Value) { return em.i8(1); });
      })
      .Case([&](FillOp o) { return fill(L, o); })
      .Case([&](FillPerDeviceOp o) { return fillPerDevice(L, o); })
      .Case([&](ThresholdSetOp o) {
        Value s = L.mem(o.getScores()), theta = L.scalar(o.getTheta());
        return perExpertSet(L, o.getResult(), [&](Value e) {
          Value ge = em.cmpF(F::OGE, em.load(s, e), theta);
          return arith::ExtUIOp::create(em.builder(), em.location(),
                                        em.builder().getI8Type(), ge)
              .getResult();
        });
      })
      .Case([&](DropLowestOp o) { return dropLowest(L, o); })
      .Case([&](UnionOp o) {
        Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
        return perExpertSet(L, o.getResult(), [&](Value e) {
          return em.orI(em.load(a, e), em.load(c, e));
        });
      })
      .Case([&](IntersectOp o) {
        Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
        return perExpertSet(L, o.getResult(), [&](Value e) {
          return em.andI(em.load(a, e), em.load(c, e));
        });
      })
      .Case([&](ExpertCountsOp o) { return expertCounts(L, o); })
      .Case([&](CompactActiveOp o) { return compactActive(L, o); })
      .Case([&](AlignBlocksOp o) { return alignBlocks(L, o); })
      .Default([&](Operation *op) { return emitRuleOp(L, op); });
}

} // namespace switchyard::moe
