//===- BatchOps.cpp - loops of the batch folds ------------------------------===//
//
// Reductions over the tokens of the batch (sums, maxima, counts, per-request folds,
// union of top-k, per-request sets). Tokens are visited in order, so float sums are
// reproducible.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult batchReduce(RouterLowering &L, BatchReduceOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getInput());
  Value out = L.allocFull(op.getResult()), x = L.mem(op.getInput());
  ReduceKind kind = op.getKind();
  Value init = kind == ReduceKind::count ? em.i32(0)
               : kind == ReduceKind::sum ? em.f32(0)
                                         : em.negInf();
  // rows(%mask): a token whose mask is 0 contributes nothing.
  Value rows = op.getRows() ? L.mem(op.getRows()) : Value();
  auto counts = [&](Value t) { return em.cmpI(P::ne, em.load(rows, t), em.i32(0)); };
  if (!op.getTopk()) {
    // Expert-parallel: each expert's reduction runs over the tokens in order, so the
    // float result is the same on every target.
    L.parallelLoop(em.idx(n), [&](Value e) {
      Value acc =
          em.loopCarried(em.idx(0), L.tokens(), {init}, [&](Value t, ValueRange it) {
            Value v = em.load(x, {t, e});
            Value next =
                kind == ReduceKind::sum
                    ? em.addF(it[0], v)
                    : arith::MaximumFOp::create(b, em.location(), it[0], v).getResult();
            return SmallVector<Value>{rows ? em.select(counts(t), next, it[0]) : next};
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
    auto reduceRow = [&] {
      topKRow(
          L, em.idx(n), em.idx(*op.getTopk()), *op.getTopk(), /*taken=*/Value(),
          [&](Value) { return always(em); },
          [&](Value e) {
            return em.load(x, {t, e});
          },
          [&](Value, Value id, Value v) { combine(em.toIndex(id), v); });
    };
    if (rows)
      em.ifThen(counts(t), reduceRow);
    else
      reduceRow();
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
      Value key = L.reduceLanes(
          em.addI(t, em.idx(1)), em.i32(0), RouterLowering::Combine::MaxUI, [&](Value u) {
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
      Value voted = em.loopCarried(
          em.idx(0), em.idx(k), {em.cmpI(P::ne, ei, ei)}, [&](Value j, ValueRange it) {
            return SmallVector<Value>{
                em.orI(it[0], em.cmpI(P::eq, em.load(ids, {t, j}), ei))};
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
    Value any =
        em.loopCarried(em.idx(0), L.tokens(), {em.i8(0)}, [&](Value t, ValueRange it) {
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
  Value flags =
      L.temporary(MemRefType::get({ShapedType::kDynamic, n}, b.getI8Type()), L.tokens());
  L.parallelLoop(L.tokens(), [&](Value t) {
    Value row = L.rowView(flags, t, n);
    em.fill(row, em.idx(n), em.i8(0));
    topKRow(
        L, em.idx(n), k0, capacityFor(L.scalar(op.getK0()), n), row,
        [&](Value) { return always(em); },
        [&](Value e) {
          return em.load(x, {t, e});
        },
        [](Value, Value, Value) {});
  });
  unionOfRows(L, flags, out, n);
  return success();
}

/// XShare Alg. 3 for the request led by token r (its first token): marks S_r in `row`
/// (cleared by the caller) - the union of its tokens' top-k0 (warm-up) plus the m_r best
/// experts outside it by the request's summed scores (summed in token order, on every
/// target). In the GPU form r's warp does it, its row loops lane-parallel.
void buildRequestSet(RouterLowering &L, SegmentFillOp op, Value leaders, Value r,
                     Value row) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores());
  Value x = L.mem(op.getScores());
  Value k0 = clampedCount(em, L.scalar(op.getK0()), n);
  Value budget = clampedCount(em, L.scalar(op.getBudget()), n);
  Value agg = L.scratch(n, em.builder().getF32Type());
  L.forEachLane(em.idx(n), [&](Value e) { em.store(em.f32(0), agg, e); });
  em.loop(r, L.tokens(), [&](Value t) {
    em.ifThen(em.cmpI(P::eq, em.load(leaders, t), em.toI32(r)), [&] {
      topKRow(
          L, em.idx(n), k0, capacityFor(L.scalar(op.getK0()), n), /*taken=*/Value(),
          [&](Value) { return always(em); },
          [&](Value e) {
            return em.load(x, {t, e});
          },
          [&](Value, Value id, Value) {
            em.ifThen(em.cmpI(P::sge, id, em.i32(0)),
                      [&] { em.store(em.i8(1), row, em.toIndex(id)); });
          });
      L.forEachLane(em.idx(n), [&](Value e) {
        em.store(em.addF(em.load(agg, e), em.load(x, {t, e})), agg, e);
      });
    });
  });
  topKRow(
      L, em.idx(n), budget, capacityFor(L.scalar(op.getBudget()), n), row,
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
    Value picked =
        L.temporary(MemRefType::get({ShapedType::kDynamic, n}, b.getI8Type()), L.tokens());
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
        em.loop(n, [&](Value e) {
          em.store(em.orI(em.load(out, e), em.load(row, e)), out, e);
        });
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

} // namespace

void registerBatchOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<batchReduce, segmentReduce, binScore, unionTopK, segmentFill,
                        confidentTop1>(context);
  });
}

} // namespace switchyard::moe
