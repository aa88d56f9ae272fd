//===- PrefetchOps.cpp - loops of the ExpertFlow prefetch ops ---------------===//
//
// Rule ops run on the host once per scheduling interval: plain sequential loops over
// the experts (and devices), in the order the papers' pseudo-code gives.
// ExpertFlow: expected experts, the prefetch step size and its feedback, the two-level
// LRU cache, and the cache-aware execution order.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult expectedExperts(RouterLowering &L, ExpectedExpertsOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = sizeOf(op.getScores());
  Value s = L.mem(op.getScores()), set = L.allocFull(op.getSet());
  Value count = L.allocFull(op.getCount());
  Value total =
      em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
        return SmallVector<Value>{em.addF(it[0], em.load(s, e))};
      })[0];
  Value target = em.mulF(L.scalar(op.getThreshold()), total);
  em.fill(set, em.idx(n), em.i8(0));
  Value cum = buffer(L, 1, b.getF32Type());
  em.store(em.f32(0), cum, em.idx(0));
  em.store(em.i32(0), count, em.idx(0));
  // The smallest prefix (best first) whose mass reaches the target.
  em.loop(n, [&](Value) {
    em.ifThen(em.cmpF(F::OLT, em.load(cum, em.idx(0)), target), [&] {
      auto [best, v] = em.argBest(
          em.idx(n), [&](Value e) { return em.notI(em.isSet(set, e)); },
          [&](Value e) { return em.load(s, e); });
      em.ifThen(em.cmpI(P::sge, best, em.i32(0)), [&] {
        em.store(em.i8(1), set, em.toIndex(best));
        em.store(em.addF(em.load(cum, em.idx(0)), v), cum, em.idx(0));
        em.store(em.addI(em.load(count, em.idx(0)), em.i32(1)), count, em.idx(0));
      });
    });
  });
  return success();
}

LogicalResult stepSize(RouterLowering &L, StepSizeOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Location loc = em.location();
  Value ne = em.toF32(em.load(L.mem(op.getCount()), em.idx(0)));
  Value es = em.toF32(L.scalar(op.getExpertBytes()));
  Value q = em.divF(em.mulF(ne, es),
                    em.mulF(L.scalar(op.getBandwidth()), L.scalar(op.getLayerTime())));
  Value c = math::CeilOp::create(b, loc, q);
  // Clamped to [1, layers] with layers itself clamped into i32, so the conversion to
  // i32 below is exact whatever the knobs (NaN from 0/0 falls back to layers).
  c = arith::MinNumFOp::create(
      b, loc, c, em.toF32(clampedI32(em, L.scalar(op.getLayers()), 1, kMaxLayers)));
  c = arith::MaxNumFOp::create(b, loc, c, em.f32(1));
  Value out = L.allocFull(op.getResult());
  em.store(arith::FPToSIOp::create(b, loc, b.getI32Type(), c), out, em.idx(0));
  return success();
}

LogicalResult stepFeedback(RouterLowering &L, StepFeedbackOp op) {
  LoopEmitter &em = L.em();
  Value zero = em.idx(0);
  Value step = L.allocFull(op.getStepOut()), stalls = L.allocFull(op.getStallOut());
  Value overs = L.allocFull(op.getOverfetchOut()), trace = L.allocFull(op.getTrace());
  // Knobs are i64; the state is i32. Clamp instead of truncating (a layer count of 2^32
  // must not become 0).
  Value layers = clampedI32(em, L.scalar(op.getLayers()), 1, INT32_MAX);
  Value stallLimit = clampedI32(em, L.scalar(op.getStallThreshold()), 0, INT32_MAX - 1);
  Value overLimit = clampedI32(em, L.scalar(op.getOverfetchThreshold()), 1, INT32_MAX);
  Value given = em.load(L.mem(op.getStep()), zero);
  Value start = em.select(em.cmpI(P::sgt, given, em.i32(0)), given,
                          em.load(L.mem(op.getInitial()), zero));
  start = em.select(em.cmpI(P::slt, start, em.i32(1)), em.i32(1), start);
  start = em.select(em.cmpI(P::sgt, start, layers), layers, start);
  em.store(start, step, zero);
  em.store(em.load(L.mem(op.getStallCount()), zero), stalls, zero);
  em.store(em.load(L.mem(op.getOverfetchCount()), zero), overs, zero);
  Value events = L.mem(op.getEvents());
  em.loop(zero, L.dimSize(op.getEvents(), 0), [&](Value i) {
    Value ev = em.load(events, i);
    em.ifThen(em.cmpI(P::eq, ev, em.i32(1)), [&] {
      Value c = em.addI(em.load(stalls, zero), em.i32(1));
      Value grow = em.cmpI(P::sgt, c, stallLimit);
      em.store(em.select(grow, em.i32(0), c), stalls, zero);
      Value s = em.load(step, zero);
      Value next = em.select(em.cmpI(P::slt, s, layers), em.addI(s, em.i32(1)), s);
      em.store(em.select(grow, next, s), step, zero);
    });
    em.ifThen(em.cmpI(P::eq, ev, em.i32(2)), [&] {
      Value c = em.addI(em.load(overs, zero), em.i32(1));
      Value shrink = em.cmpI(P::sge, c, overLimit);
      em.store(em.select(shrink, em.i32(0), c), overs, zero);
      Value s = em.load(step, zero);
      Value next = em.select(em.cmpI(P::sgt, s, em.i32(1)), em.subI(s, em.i32(1)), s);
      em.store(em.select(shrink, next, s), step, zero);
    });
    em.store(em.load(step, zero), trace, i);
  });
  return success();
}

LogicalResult twoLevelLru(RouterLowering &L, TwoLevelLruOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = cast<ExpertSetType>(op.getResident().getType()).getExperts();
  Value zero = em.idx(0);
  Value requested = L.mem(op.getRequested()), predicted = L.mem(op.getPredicted());
  Value res = L.allocFull(op.getResidentOut()), high = L.allocFull(op.getHigh());
  Value lu = L.allocFull(op.getLastUseOut());
  Value loads = L.allocFull(op.getLoads()), evictions = L.allocFull(op.getEvictions());
  Value now = em.load(L.mem(op.getNow()), zero), step = em.load(L.mem(op.getStep()), zero);
  emit::copySet(em, res, L.mem(op.getResident()), n);
  Value lastIn = L.mem(op.getLastUse());
  em.loop(n, [&](Value e) {
    Value used = em.select(em.isSet(requested, e), now, em.load(lastIn, e));
    em.store(used, lu, e);
    Value recent = em.andI(em.cmpI(P::sge, used, em.i32(0)),
                           em.cmpI(P::slt, em.subI(now, used), step));
    Value hot = em.orI(em.isSet(predicted, e), recent);
    em.store(em.select(hot, em.i8(1), em.i8(0)), high, e);
    em.store(em.i32(-1), loads, e);
    em.store(em.i32(-1), evictions, e);
  });
  Value counters = buffer(L, 3, b.getI32Type()); // [size, loads, evictions]
  em.store(em.toI32(emit::popcount(em, res, n)), counters, em.idx(0));
  em.store(em.i32(0), counters, em.idx(1));
  em.store(em.i32(0), counters, em.idx(2));
  Value capacity = clampedI32(em, L.scalar(op.getCapacity()), 1, n);
  auto push = [&](Value list, int64_t slot, Value id) {
    Value at = em.load(counters, em.idx(slot));
    em.store(id, list, em.toIndex(at));
    em.store(em.addI(at, em.i32(1)), counters, em.idx(slot));
  };
  // Least recently used among the eligible residents, ties to the lower id.
  auto lruVictim = [&](function_ref<Value(Value)> eligible) {
    return em.loopCarried(
        em.idx(0), em.idx(n), {em.i32(-1), em.i32(0)}, [&](Value e, ValueRange it) {
          Value none = em.cmpI(P::slt, it[0], em.i32(0));
          Value older = em.cmpI(P::slt, em.load(lu, e), it[1]);
          Value take = em.andI(eligible(e), em.orI(none, older));
          return SmallVector<Value>{em.select(take, em.toI32(e), it[0]),
                                    em.select(take, em.load(lu, e), it[1])};
        })[0];
  };
  auto insert = [&](Value x, bool isRequested) {
    Value size = em.load(counters, em.idx(0));
    em.ifThenElse(
        em.cmpI(P::slt, size, capacity),
        [&] {
          em.store(em.i8(1), res, x);
          push(loads, 1, em.toI32(x));
          em.store(em.addI(size, em.i32(1)), counters, em.idx(0));
        },
        [&] {
          Value low = lruVictim([&](Value e) {
            return em.andI(em.andI(em.isSet(res, e), em.notI(em.isSet(high, e))),
                           em.notI(em.isSet(requested, e)));
          });
          Value hi = lruVictim([&](Value e) {
            return em.andI(em.andI(em.isSet(res, e), em.notI(em.isSet(requested, e))),
                           em.notI(em.isSet(predicted, e)));
          });
          Value victim = em.select(em.cmpI(P::sge, low, em.i32(0)), low, hi);
          if (isRequested) {
            Value any = lruVictim([&](Value e) {
              return em.andI(em.isSet(res, e), em.notI(em.isSet(requested, e)));
            });
            victim = em.select(em.cmpI(P::sge, victim, em.i32(0)), victim, any);
          }
          em.ifThen(em.cmpI(P::sge, victim, em.i32(0)), [&] {
            em.store(em.i8(0), res, em.toIndex(victim));
            push(evictions, 2, victim);
            em.store(em.i8(1), res, x);
            push(loads, 1, em.toI32(x));
          });
        });
  };
  em.loop(n, [&](Value e) {
    em.ifThen(em.andI(em.isSet(requested, e), em.notI(em.isSet(res, e))),
              [&] { insert(e, /*isRequested=*/true); });
  });
  em.loop(n, [&](Value e) {
    Value want = em.andI(em.isSet(predicted, e), em.notI(em.isSet(requested, e)));
    em.ifThen(em.andI(want, em.notI(em.isSet(res, e))),
              [&] { insert(e, /*isRequested=*/false); });
  });
  em.loop(n,
          [&](Value e) { em.store(em.andI(em.load(high, e), em.load(res, e)), high, e); });
  return success();
}

LogicalResult residentFirst(RouterLowering &L, ResidentFirstOp op) {
  LoopEmitter &em = L.em();
  int64_t k = cast<ShapedType>(op.getIds().getType()).getDimSize(1);
  int64_t n = cast<ExpertSetType>(op.getResident().getType()).getExperts();
  Value ids = L.mem(op.getIds()), resident = L.mem(op.getResident());
  Value order = L.allocFull(op.getOrder()), ready = L.allocFull(op.getNumReady());
  auto isReady = [&](Value t) {
    return em.loopCarried(em.idx(0), em.idx(k), {always(em)}, [&](Value j, ValueRange it) {
      Value e = em.load(ids, {t, j});
      Value skip = em.cmpI(P::slt, e, em.i32(0));
      Value inRange = em.cmpI(P::slt, e, em.i32(n));
      Value at = em.toIndex(em.select(em.andI(em.notI(skip), inRange), e, em.i32(0)));
      Value ok = em.orI(skip, em.andI(inRange, em.isSet(resident, at)));
      return SmallVector<Value>{em.andI(it[0], ok)};
    })[0];
  };
  if (L.blockParallelHere()) {
    // The GPU form, a stable partition spread over the block: each token's flag (a
    // token loop: kernel 1 of the large-batch pair), each chunk of consecutive tokens
    // counts its ready ones, then places its tokens in order: a ready token after the
    // ready ones of earlier chunks, any other after all ready tokens and the other
    // tokens before it. The same order as the sequential form below.
    OpBuilder &b = em.builder();
    int64_t maxChunks = 128;
    Value flags =
        L.temporary(MemRefType::get({ShapedType::kDynamic}, b.getI32Type()), L.tokens());
    Value readyIn = L.temporary(MemRefType::get({maxChunks}, b.getI32Type()), {});
    L.parallelLoop(L.tokens(), [&](Value t) {
      em.store(em.select(isReady(t), em.i32(1), em.i32(0)), flags, t);
    });
    Value chunks = em.idx(maxChunks);
    chunkedLoop(L, L.tokens(), chunks, [&](Value c, Value first, Value last) {
      Value sum = em.loopCarried(first, last, {em.i32(0)}, [&](Value t, ValueRange it) {
        return SmallVector<Value>{em.addI(it[0], em.load(flags, t))};
      })[0];
      em.store(sum, readyIn, c);
    });
    chunkedLoop(L, L.tokens(), chunks, [&](Value c, Value first, Value last) {
      auto sums = em.loopCarried(
          em.idx(0), chunks, {em.i32(0), em.i32(0)}, [&](Value d, ValueRange it) {
            Value v = em.load(readyIn, d);
            Value earlier = em.cmpI(P::ult, d, c);
            return SmallVector<Value>{em.addI(it[0], v),
                                      em.addI(it[1], em.select(earlier, v, em.i32(0)))};
          });
      Value total = sums[0];
      em.loopCarried(first, last, {sums[1]}, [&](Value t, ValueRange it) {
        Value r = em.load(flags, t);
        Value isR = em.cmpI(P::ne, r, em.i32(0));
        Value other = em.addI(total, em.subI(em.toI32(t), it[0]));
        em.store(em.toI32(t), order, em.toIndex(em.select(isR, it[0], other)));
        return SmallVector<Value>{em.addI(it[0], r)};
      });
      em.ifThen(em.cmpI(P::eq, c, em.idx(0)), [&] { em.store(total, ready, em.idx(0)); });
    });
    return success();
  }
  Value first =
      em.loopCarried(em.idx(0), L.tokens(), {em.idx(0)}, [&](Value t, ValueRange it) {
        Value r = isReady(t);
        em.ifThen(r, [&] { em.store(em.toI32(t), order, it[0]); });
        return SmallVector<Value>{em.select(r, em.addI(it[0], em.idx(1)), it[0])};
      })[0];
  em.loopCarried(em.idx(0), L.tokens(), {first}, [&](Value t, ValueRange it) {
    Value r = isReady(t);
    em.ifThen(em.notI(r), [&] { em.store(em.toI32(t), order, it[0]); });
    return SmallVector<Value>{em.select(r, it[0], em.addI(it[0], em.idx(1)))};
  });
  em.store(em.toI32(first), ready, em.idx(0));
  return success();
}

} // namespace

void registerPrefetchOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<expectedExperts, stepSize, stepFeedback, twoLevelLru,
                        residentFirst>(context);
  });
}

} // namespace switchyard::moe
