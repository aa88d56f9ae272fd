//===- CapacityOps.cpp - loops of capacity-limited and expert-choice routing ---===//
//
// moe.capacity admits routed slots into experts of capacity C in GShard's priority
// order (all first choices in token order, then all second choices, ...): on the host
// one sequential pass in that order; in the GPU form a stable scatter over the slots
// in priority order (BlockParallel.cpp), whose placement within an expert IS the
// admission rank, so a slot is kept iff its rank is below C.
//
// moe.admit (capacity-aware token drop) is expert choice among proposals: each token
// proposes its m best experts (a radix select over its E keys), then each expert
// admits its C best proposals with expert choice's select, a non-proposal keyed 0.
//
// moe.expert_choice lets every expert take its c best tokens. Each expert finds the
// score of its c-th best token by a bitwise radix select over order-preserving
// integer keys (32 counting passes over the tokens), then how many tokens tie at
// that key and the last tied token it takes (ties go to the lower token index):
// token t is taken by e iff key(t,e) > K[e], or key(t,e) == K[e] and t <= last[e].
// The per-token view and the grouped layout are read off that rule, so both forms
// give the sequential result exactly. In the GPU form the select and the grouped
// layout's placement are spread over the block: slices of consecutive tokens per
// expert (n x slices work items), two bits of the key a step.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

/// The capacity as an index in [0, limit]: ceil(double(factor) * double(T*k) /
/// double(E)) with `factor`, else the absolute `capacity` clamped.
Value capacityOf(RouterLowering &L, Value factor, Value capacity, int64_t k,
                 int64_t experts, Value limit) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  Location loc = em.location();
  Value limit64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), limit);
  if (capacity) {
    Value c = L.scalar(capacity);
    c = em.select(em.cmpI(P::slt, c, em.i64(0)), em.i64(0), c);
    c = em.select(em.cmpI(P::sgt, c, limit64), limit64, c);
    return em.toIndex(c);
  }
  Type f64 = b.getF64Type();
  auto constant = [&](double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v)).getResult();
  };
  Value slots =
      arith::IndexCastOp::create(b, loc, b.getI64Type(), em.mulI(L.tokens(), em.idx(k)));
  Value x = em.divF(em.mulF(arith::ExtFOp::create(b, loc, f64, L.scalar(factor)),
                            arith::SIToFPOp::create(b, loc, f64, slots)),
                    constant(double(experts)));
  // Clamp before converting (the run-time check keeps the factor finite and > 0).
  Value limitF = arith::SIToFPOp::create(b, loc, f64, limit64);
  x = em.select(em.cmpF(F::OGT, x, limitF), limitF, x);
  x = em.select(em.cmpF(F::UGT, x, constant(0.0)), x, constant(0.0));
  Value q = arith::FPToSIOp::create(b, loc, b.getI64Type(), x);
  Value qf = arith::SIToFPOp::create(b, loc, f64, q);
  q = em.select(em.cmpF(F::OLT, qf, x), em.addI(q, em.i64(1)), q);
  return em.toIndex(q);
}

LogicalResult capacity(RouterLowering &L, CapacityOp op) {
  LoopEmitter &em = L.em();
  int64_t k = op.getIds().getType().getDimSize(1), n = sizeOf(op.getCounts());
  Value ids = L.mem(op.getIds()), weights = L.mem(op.getWeights());
  Value keptIds = L.allocFull(op.getKeptIds()),
        keptWeights = L.allocFull(op.getKeptWeights());
  Value counts = L.allocFull(op.getCounts()), dropped = L.allocFull(op.getDropped());
  Value tokens = L.tokens(), slots = em.mulI(tokens, em.idx(k));
  Value cap =
      em.toI32(capacityOf(L, op.getCapacityFactor(), op.getCapacity(), k, n, slots));
  auto routed = [&](Value e) {
    return em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n)));
  };
  if (L.blockParallelHere()) {
    L.parallelLoop(slots, [&](Value s) {
      Value t = em.divUI(s, em.idx(k)), j = em.remUI(s, em.idx(k));
      em.store(em.i32(-1), keptIds, {t, j});
      em.store(em.f32(0), keptWeights, {t, j});
    });
    L.parallelLoop(em.idx(n), [&](Value e) { em.store(em.i32(0), counts, e); });
    // Priority position p is choice j = p / T of token t = p % T; its place among
    // its expert's slots in that order is its admission rank.
    stableScatter(
        L, slots, n,
        [&](Value p) {
          return em.load(ids, {em.remUI(p, tokens), em.divUI(p, tokens)});
        },
        [&](Value) { return em.i32(0); },
        [&](Value p, Value rank) {
          em.ifThen(em.cmpI(P::slt, rank, cap), [&] {
            Value t = em.remUI(p, tokens), j = em.divUI(p, tokens);
            Value e = em.load(ids, {t, j});
            em.store(e, keptIds, {t, j});
            em.store(em.load(weights, {t, j}), keptWeights, {t, j});
            memref::AtomicRMWOp::create(em.builder(), em.location(),
                                        arith::AtomicRMWKind::addi, em.i32(1), counts,
                                        ValueRange{em.toIndex(e)});
          });
        });
    Value total = blockSum(L, slots, [&](Value s) {
      Value t = em.divUI(s, em.idx(k)), j = em.remUI(s, em.idx(k));
      Value lost = em.andI(routed(em.load(ids, {t, j})),
                           em.cmpI(P::slt, em.load(keptIds, {t, j}), em.i32(0)));
      return em.select(lost, em.i32(1), em.i32(0));
    });
    em.store(total, dropped, em.idx(0));
  } else {
    em.fill(counts, em.idx(n), em.i32(0));
    Value total =
        em.loopCarried(em.idx(0), em.idx(k), {em.i32(0)}, [&](Value j, ValueRange outer) {
          return em.loopCarried(em.idx(0), tokens, {outer[0]}, [&](Value t, ValueRange it) {
            Value e = em.load(ids, {t, j});
            Value ok = routed(e);
            Value at = em.toIndex(em.select(ok, e, em.i32(0)));
            Value taken = em.load(counts, at);
            Value keep = em.andI(ok, em.cmpI(P::slt, taken, cap));
            em.ifThen(keep, [&] { em.store(em.addI(taken, em.i32(1)), counts, at); });
            em.store(em.select(keep, e, em.i32(-1)), keptIds, {t, j});
            em.store(em.select(keep, em.load(weights, {t, j}), em.f32(0)), keptWeights,
                     {t, j});
            Value lost = em.andI(ok, em.notI(keep));
            return SmallVector<Value>{
                em.addI(it[0], em.select(lost, em.i32(1), em.i32(0)))};
          });
        })[0];
    em.store(total, dropped, em.idx(0));
  }
  if (op.getRenormalizeAfterDrop())
    L.parallelLoop(tokens, [&](Value t) {
      Value sum =
          em.loopCarried(em.idx(0), em.idx(k), {em.f32(0)}, [&](Value j, ValueRange it) {
            return SmallVector<Value>{em.addF(it[0], em.load(keptWeights, {t, j}))};
          })[0];
      em.ifThen(em.cmpF(F::OGT, sum, em.f32(0)), [&] {
        em.loop(k, [&](Value j) {
          em.store(em.divF(em.load(keptWeights, {t, j}), sum), keptWeights, {t, j});
        });
      });
    });
  return success();
}

/// An order-preserving key of a score as an unsigned i32: a larger score has a
/// larger key, -0 is +0, and NaN ranks below everything (key 0).
Value scoreKey(LoopEmitter &em, Value s) {
  OpBuilder &b = em.builder();
  Location loc = em.location();
  s = em.select(em.cmpF(F::OEQ, s, em.f32(0)), em.f32(0), s);
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), s);
  Value flipped = arith::XOrIOp::create(b, loc, bits, em.i32(-1));
  Value raised = em.orI(bits, em.i32(INT32_MIN));
  Value key = em.select(em.cmpI(P::slt, bits, em.i32(0)), flipped, raised);
  return em.select(em.isNaN(s), em.i32(0), key);
}

/// The GPU form's work items: `per` consecutive token ranges (slices) per expert, n x
/// per items (about one per thread). Item i is expert i % n (consecutive threads read
/// one score row) and slice i / n.
struct ExpertSlices {
  /// Slices per expert for n experts.
  static int64_t perExpert(int64_t n) { return std::clamp<int64_t>(256 / n, 1, 32); }

  ExpertSlices(RouterLowering &L, int64_t n, Value tokens)
      : L(L), em(L.em()), n(n), tokens(tokens), per(perExpert(n)), slices(em.idx(per)),
        items(em.idx(n * per)),
        length(em.divUI(em.addI(tokens, em.subI(slices, em.idx(1))), slices)) {}
  /// `body(e, s, first, last)` for each item, in a parallel loop: slice s of expert e
  /// holds tokens [first, last).
  void forEach(function_ref<void(Value e, Value s, Value first, Value last)> body) {
    L.parallelLoop(items, [&](Value i) {
      Value e = em.remUI(i, em.idx(n)), s = em.divUI(i, em.idx(n));
      Value first = em.minUI(em.mulI(s, length), tokens);
      body(e, s, first, em.minUI(em.addI(first, length), tokens));
    });
  }

  RouterLowering &L;
  LoopEmitter &em;
  int64_t n;
  Value tokens;
  int64_t per;
  Value slices, items, length; // slices: `per` as an index
};

/// The items of [0, n) where `pred` holds, counted as an i32.
Value countWhere(LoopEmitter &em, Value n, function_ref<Value(Value)> pred) {
  return em.loopCarried(em.idx(0), n, {em.i32(0)}, [&](Value i, ValueRange it) {
    return SmallVector<Value>{em.addI(it[0], em.select(pred(i), em.i32(1), em.i32(0)))};
  })[0];
}

/// A sequential radix select over the items of [0, n) with keys `key(i)`: K, the
/// largest key with at least `take` keys >= K (the take-th best key, 32 one-bit
/// steps), and the last item tied at K that the `take` best include (ties to the lower
/// index; -1 when they include none).
std::pair<Value, Value> selectTakeBest(LoopEmitter &em, Value n, Value take,
                                       function_ref<Value(Value)> key) {
  Value best =
      em.loopCarried(em.idx(0), em.idx(32), {em.i32(0)}, [&](Value b, ValueRange it) {
        Value bit = em.toI32(em.subI(em.idx(31), b));
        Value attempt = em.orI(
            it[0], arith::ShLIOp::create(em.builder(), em.location(), em.i32(1), bit));
        Value atLeast =
            countWhere(em, n, [&](Value i) { return em.cmpI(P::uge, key(i), attempt); });
        return SmallVector<Value>{
            em.select(em.cmpI(P::sge, atLeast, take), attempt, it[0])};
      })[0];
  Value above = countWhere(em, n, [&](Value i) { return em.cmpI(P::ugt, key(i), best); });
  Value need = em.subI(take, above);
  Value last =
      em.loopCarried(em.idx(0), n, {em.i32(0), em.i32(-1)}, [&](Value i, ValueRange it) {
        Value tie = em.cmpI(P::eq, key(i), best);
        Value seen = em.addI(it[0], em.select(tie, em.i32(1), em.i32(0)));
        Value isLast = em.andI(tie, em.cmpI(P::eq, seen, need));
        return SmallVector<Value>{seen, em.select(isLast, em.toI32(i), it[1])};
      })[1];
  return {best, last};
}

/// What a select leaves: key `k` of item `index` is among the best iff k > K, or
/// k == K and index <= the last tie taken.
Value isSelected(LoopEmitter &em, Value k, Value limit, Value index, Value lastTie) {
  Value tie = em.andI(em.cmpI(P::eq, k, limit), em.cmpI(P::sle, em.toI32(index), lastTie));
  return em.orI(em.cmpI(P::ugt, k, limit), tie);
}

/// Per expert e: `threshold[e]` = K, the largest key with at least `take` of the
/// tokens' keys `key(t, e)` >= K (the take-th best key), and `lastTie[e]` = the last
/// token tied at K that the expert takes (ties go to the lower token index; -1 when it
/// takes none). Token t is then taken by e iff key(t,e) > K, or key(t,e) == K and
/// t <= lastTie[e].
void selectPerExpert(RouterLowering &L, int64_t n, Value tokens, Value take,
                     function_ref<Value(Value t, Value e)> key, Value threshold,
                     Value lastTie) {
  LoopEmitter &em = L.em();
  Type i32 = em.builder().getI32Type();
  if (L.blockParallelHere()) {
    // The GPU form, spread over the block: `slices` consecutive token ranges per
    // expert (n x slices work items, about one per thread). The select takes two bits
    // a step (16 steps): each item counts its range's keys >= prefix | j << shift for
    // j = 1..3, then per expert the largest j whose total reaches `take` extends the
    // prefix, which is the same as the two one-bit steps of the sequential form (the
    // counts fall with j). Then each item counts its keys above K and tied with K, per
    // expert the slice holding the need-th tie is found, and that slice's item finds
    // the tied token. The same K and last tie as the sequential form.
    OpBuilder &b = em.builder();
    Location loc = em.location();
    const int64_t slicesPer = ExpertSlices::perExpert(n);
    // partial[j * slices + s, e]: count j of slice s of expert e.
    Value partial = L.temporary(MemRefType::get({3 * slicesPer, n}, i32), {});
    auto row = [&](int64_t j, Value s) { return em.addI(em.idx(j * slicesPer), s); };
    Value tieAt = L.temporary(MemRefType::get({n, 2}, i32), {});
    ExpertSlices work(L, n, tokens);
    Value slices = work.slices;
    auto shl = [&](Value v, int64_t bits) {
      return arith::ShLIOp::create(b, loc, v, em.i32(bits)).getResult();
    };
    L.parallelLoop(em.idx(n), [&](Value e) { em.store(em.i32(0), threshold, e); });
    for (int64_t shift = 30; shift >= 0; shift -= 2) {
      work.forEach([&](Value e, Value s, Value first, Value last) {
        Value prefix = em.load(threshold, e);
        Value a1 = em.orI(prefix, shl(em.i32(1), shift));
        Value a2 = em.orI(prefix, shl(em.i32(2), shift));
        Value a3 = em.orI(prefix, shl(em.i32(3), shift));
        auto one = [&](Value c) { return em.select(c, em.i32(1), em.i32(0)); };
        auto c = em.loopCarried(
            first, last, {em.i32(0), em.i32(0), em.i32(0)}, [&](Value t, ValueRange it) {
              Value k = key(t, e);
              return SmallVector<Value>{em.addI(it[0], one(em.cmpI(P::uge, k, a1))),
                                        em.addI(it[1], one(em.cmpI(P::uge, k, a2))),
                                        em.addI(it[2], one(em.cmpI(P::uge, k, a3)))};
            });
        for (int64_t j = 0; j < 3; ++j)
          em.store(c[j], partial, {row(j, s), e});
      });
      L.parallelLoop(em.idx(n), [&](Value e) {
        auto c = em.loopCarried(
            em.idx(0), slices, {em.i32(0), em.i32(0), em.i32(0)},
            [&](Value s, ValueRange it) {
              SmallVector<Value> next;
              for (int64_t j = 0; j < 3; ++j)
                next.push_back(em.addI(it[j], em.load(partial, {row(j, s), e})));
              return next;
            });
        Value prefix = em.load(threshold, e), best = prefix;
        for (int64_t j = 1; j <= 3; ++j)
          best = em.select(em.cmpI(P::sge, c[j - 1], take),
                           em.orI(prefix, shl(em.i32(j), shift)), best);
        em.store(best, threshold, e);
      });
    }
    work.forEach([&](Value e, Value s, Value first, Value last) {
      Value best = em.load(threshold, e);
      auto c =
          em.loopCarried(first, last, {em.i32(0), em.i32(0)}, [&](Value t, ValueRange it) {
            Value k = key(t, e);
            return SmallVector<Value>{
                em.addI(it[0], em.select(em.cmpI(P::ugt, k, best), em.i32(1), em.i32(0))),
                em.addI(it[1], em.select(em.cmpI(P::eq, k, best), em.i32(1), em.i32(0)))};
          });
      em.store(c[0], partial, {row(0, s), e});
      em.store(c[1], partial, {row(1, s), e});
    });
    // Per expert: the slice holding the need-th tie (-1: none, need <= 0) and the
    // tie's rank within it.
    L.parallelLoop(em.idx(n), [&](Value e) {
      Value above =
          em.loopCarried(em.idx(0), slices, {em.i32(0)}, [&](Value s, ValueRange it) {
            return SmallVector<Value>{em.addI(it[0], em.load(partial, {row(0, s), e}))};
          })[0];
      Value need = em.subI(take, above);
      auto at = em.loopCarried(
          em.idx(0), slices, {em.i32(0), em.i32(-1), em.i32(0)},
          [&](Value s, ValueRange it) {
            Value ties = em.load(partial, {row(1, s), e});
            Value here = em.andI(em.andI(em.cmpI(P::slt, it[1], em.i32(0)),
                                         em.cmpI(P::sgt, need, em.i32(0))),
                                 em.cmpI(P::sge, em.addI(it[0], ties), need));
            return SmallVector<Value>{em.addI(it[0], ties),
                                      em.select(here, em.toI32(s), it[1]),
                                      em.select(here, em.subI(need, it[0]), it[2])};
          });
      em.store(at[1], tieAt, {e, em.idx(0)});
      em.store(at[2], tieAt, {e, em.idx(1)});
      em.store(em.i32(-1), lastTie, e);
    });
    work.forEach([&](Value e, Value s, Value first, Value last) {
      em.ifThen(em.cmpI(P::eq, em.load(tieAt, {e, em.idx(0)}), em.toI32(s)), [&] {
        Value best = em.load(threshold, e), rank = em.load(tieAt, {e, em.idx(1)});
        Value found = em.loopCarried(
            first, last, {em.i32(0), em.i32(-1)}, [&](Value t, ValueRange it) {
              Value tie = em.cmpI(P::eq, key(t, e), best);
              Value seen = em.addI(it[0], em.select(tie, em.i32(1), em.i32(0)));
              Value isLast = em.andI(tie, em.cmpI(P::eq, seen, rank));
              return SmallVector<Value>{seen, em.select(isLast, em.toI32(t), it[1])};
            })[1];
        em.store(found, lastTie, e);
      });
    });
  } else
    L.parallelLoop(em.idx(n), [&](Value e) {
      auto [best, last] =
          selectTakeBest(em, tokens, take, [&](Value t) { return key(t, e); });
      em.store(best, threshold, e);
      em.store(last, lastTie, e);
    });
}

LogicalResult admit(RouterLowering &L, AdmitOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = expertsOf(op.getScores());
  Type i32 = b.getI32Type();
  Value scores = L.mem(op.getScores()), result = L.allocFull(op.getResult());
  Value tokens = L.tokens();
  Value take = em.toI32(
      capacityOf(L, op.getCapacityFactor(), op.getCapacity(), op.getK(), n, tokens));
  // The candidates per token, in [1, E]: 0 (or absent) means k.
  Value m = em.i64(op.getK());
  if (Value given = op.getCandidates()) {
    Value c = L.scalar(given);
    m = em.select(em.cmpI(P::sle, c, em.i64(0)), m, c);
    m = em.select(em.cmpI(P::sgt, m, em.i64(n)), em.i64(n), m);
  }
  Value want = em.toI32(em.toIndex(m));
  auto scoreAt = [&](Value t, Value e) { return scoreKey(em, em.load(scores, {t, e})); };

  // 1. Per token: its m-th best key over the experts and the last expert tied at it
  //    that it proposes (ties to the lower id) - a radix select over the E keys.
  Value tokenKey = L.temporary(MemRefType::get({ShapedType::kDynamic}, i32), tokens);
  Value tokenTie = L.temporary(MemRefType::get({ShapedType::kDynamic}, i32), tokens);
  L.parallelLoop(tokens, [&](Value t) {
    auto [best, last] =
        selectTakeBest(em, em.idx(n), want, [&](Value e) { return scoreAt(t, e); });
    em.store(best, tokenKey, t);
    em.store(last, tokenTie, t);
  });
  // A token's key for an expert it does not propose is 0: below every proposal, and
  // never admitted (NaN scores have key 0 too).
  auto key = [&](Value t, Value e) {
    Value k = scoreAt(t, e);
    Value proposed = isSelected(em, k, em.load(tokenKey, t), e, em.load(tokenTie, t));
    return em.select(proposed, k, em.i32(0));
  };

  // 2. Per expert: the take-th best proposal and the last tied token it admits.
  Value threshold = L.temporary(MemRefType::get({n}, i32), {});
  Value lastTie = L.temporary(MemRefType::get({n}, i32), {});
  selectPerExpert(L, n, tokens, take, key, threshold, lastTie);

  // 3. The admitted scores; -inf elsewhere.
  L.parallelLoop(tokens, [&](Value t) {
    em.loop(n, [&](Value e) {
      Value k = key(t, e);
      Value in = em.andI(em.cmpI(P::ne, k, em.i32(0)),
                         isSelected(em, k, em.load(threshold, e), t, em.load(lastTie, e)));
      em.store(em.select(in, em.load(scores, {t, e}), em.negInf()), result, {t, e});
    });
  });
  return success();
}

LogicalResult expertChoice(RouterLowering &L, ExpertChoiceOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores()), m = op.getMaxExperts(), block = op.getBlockSize();
  Type i32 = em.builder().getI32Type();
  Value scores = L.mem(op.getScores());
  Value ids = L.allocFull(op.getTopkIds()), weights = L.allocFull(op.getTopkWeights());
  Value sorted = L.allocFull(op.getSortedTokenIds()),
        sortedW = L.allocFull(op.getSortedWeights());
  Value blocks = L.allocFull(op.getExpertIds());
  Value padded = L.allocFull(op.getNumTokensPostPadded());
  Value unrouted = L.allocFull(op.getNumUnrouted());
  Value tokens = L.tokens();
  Value take = em.toI32(
      capacityOf(L, op.getCapacityFactor(), op.getCapacity(), op.getK(), n, tokens));
  Value threshold = L.temporary(MemRefType::get({n}, i32), {});
  Value lastTie = L.temporary(MemRefType::get({n}, i32), {});
  auto key = [&](Value t, Value e) { return scoreKey(em, em.load(scores, {t, e})); };
  // 1. Per expert: K = the take-th best key, then the token of the last tie it takes.
  selectPerExpert(L, n, tokens, take, key, threshold, lastTie);
  auto chosen = [&](Value t, Value e, Value k) {
    return isSelected(em, k, em.load(threshold, e), t, em.load(lastTie, e));
  };

  // 2. Per token: its experts by descending key (ties to the lower id), the first m.
  //    Each pick is the best expert ranked after the previous pick.
  L.parallelLoop(tokens, [&](Value t) {
    em.loopCarried(
        em.idx(0), em.idx(m), {em.i32(0), em.i32(-1), em.i32(0)},
        [&](Value j, ValueRange prev) {
          Value started = em.cmpI(P::ne, prev[2], em.i32(0));
          auto pick = em.loopCarried(
              em.idx(0), em.idx(n), {em.i32(0), em.i32(-1)}, [&](Value e, ValueRange it) {
                Value k = key(t, e), id = em.toI32(e);
                Value after =
                    em.orI(em.notI(started), em.orI(em.cmpI(P::ult, k, prev[0]),
                                                    em.andI(em.cmpI(P::eq, k, prev[0]),
                                                            em.cmpI(P::sgt, id, prev[1]))));
                Value better = em.andI(
                    em.andI(chosen(t, e, k), after),
                    em.orI(em.cmpI(P::slt, it[1], em.i32(0)), em.cmpI(P::ugt, k, it[0])));
                return SmallVector<Value>{em.select(better, k, it[0]),
                                          em.select(better, id, it[1])};
              });
          Value found = em.cmpI(P::sge, pick[1], em.i32(0));
          em.store(pick[1], ids, {t, j});
          Value at = em.toIndex(em.select(found, pick[1], em.i32(0)));
          em.store(em.select(found, em.load(scores, {t, at}), em.f32(0)), weights, {t, j});
          // Once nothing is left, nothing ranks after (key 0, id n).
          return SmallVector<Value>{em.select(found, pick[0], em.i32(0)),
                                    em.select(found, pick[1], em.i32(n)), em.i32(1)};
        });
  });

  // 3. The grouped layout: every expert takes exactly `take` tokens, so expert e's
  //    segment starts at e * ceil(take / block) * block.
  Value sortedSize = L.dimSize(op.getSortedTokenIds(), 0);
  Value blockCount = L.dimSize(op.getExpertIds(), 0);
  Value sentinel = em.toI32(tokens);
  L.parallelLoop(sortedSize, [&](Value i) {
    em.store(sentinel, sorted, i);
    em.store(em.f32(0), sortedW, i);
  });
  L.parallelLoop(blockCount, [&](Value i) { em.store(em.i32(-1), blocks, i); });
  Value perExpert = em.divUI(em.addI(take, em.i32(block - 1)), em.i32(block));
  // Expert e's taken tokens among [first, last), in token order, from position `start`
  // of the sorted layout on.
  auto placeTaken = [&](Value e, Value first, Value last, Value start) {
    em.loopCarried(first, last, {start}, [&](Value t, ValueRange it) {
      Value s = em.load(scores, {t, e});
      Value in = chosen(t, e, scoreKey(em, s));
      em.ifThen(in, [&] {
        em.store(em.toI32(t), sorted, em.toIndex(it[0]));
        em.store(s, sortedW, em.toIndex(it[0]));
      });
      return SmallVector<Value>{em.select(in, em.addI(it[0], em.i32(1)), it[0])};
    });
  };
  L.parallelLoop(em.idx(n), [&](Value e) {
    Value first = em.mulI(em.toI32(e), perExpert);
    em.loop(em.idx(0), em.toIndex(perExpert),
            [&](Value i) { em.store(em.toI32(e), blocks, em.addI(em.toIndex(first), i)); });
    if (L.blockParallelHere())
      return; // The tokens are placed below, spread over the block.
    Value start = em.mulI(first, em.i32(block));
    placeTaken(e, em.idx(0), tokens, start);
  });
  if (L.blockParallelHere()) {
    // The GPU form: each (expert, slice of consecutive tokens) counts its taken
    // tokens, then places them after the earlier slices' ones: the sequential order.
    Value taken = L.temporary(MemRefType::get({ExpertSlices::perExpert(n), n}, i32), {});
    ExpertSlices work(L, n, tokens);
    work.forEach([&](Value e, Value s, Value first, Value last) {
      Value count = em.loopCarried(first, last, {em.i32(0)}, [&](Value t, ValueRange it) {
        Value in = chosen(t, e, key(t, e));
        return SmallVector<Value>{em.addI(it[0], em.select(in, em.i32(1), em.i32(0)))};
      })[0];
      em.store(count, taken, {s, e});
    });
    work.forEach([&](Value e, Value s, Value first, Value last) {
      Value start = em.mulI(em.mulI(em.toI32(e), perExpert), em.i32(block));
      Value base = em.loopCarried(em.idx(0), s, {start}, [&](Value d, ValueRange it) {
        return SmallVector<Value>{em.addI(it[0], em.load(taken, {d, e}))};
      })[0];
      placeTaken(e, first, last, base);
    });
  }
  em.store(em.mulI(em.mulI(perExpert, em.i32(block)), em.i32(n)), padded, em.idx(0));

  // 4. Tokens no expert took: their first column is empty.
  auto none = [&](Value t) {
    return em.select(em.cmpI(P::slt, em.load(ids, {t, em.idx(0)}), em.i32(0)), em.i32(1),
                     em.i32(0));
  };
  Value lost = L.blockParallelHere() ? blockSum(L, tokens, none)
                                     : countWhere(em, tokens, [&](Value t) {
                                         return em.cmpI(P::ne, none(t), em.i32(0));
                                       });
  em.store(lost, unrouted, em.idx(0));
  return success();
}

} // namespace

void registerCapacityOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<capacity, admit, expertChoice>(context);
  });
}

} // namespace switchyard::moe
