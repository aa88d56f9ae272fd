//===- RouteOps.cpp - loops of the routing ops ------------------------------===//
//
// Per-token routing within the selected set (and the logical -> physical remap), then
// the batch outputs a grouped-GEMM launcher needs: expert counts, the compacted active
// experts, and vLLM's block-aligned token order.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

#include <cmath>

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

LogicalResult routeRow(RouterLowering &L, RouteOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getScores()), k = op.getK();
  RowRef s = L.rowIn(op.getScores(), t);
  std::optional<RowRef> w;
  if (op.getWeights())
    w = L.rowIn(op.getWeights(), t);
  Value within = op.getWithin() ? L.mem(op.getWithin()) : Value();
  RowRef ids = L.rowOut(op.getTopkIds(), t), wts = L.rowOut(op.getTopkWeights(), t);
  // rows(%mask): `within` and `max_rank` restrict this token only when its mask is set.
  Value restricted =
      op.getRows() ? em.cmpI(P::ne, em.load(L.mem(op.getRows()), t), em.i32(0)) : Value();
  auto eligible = [&](Value e) {
    Value v = L.at(s, e);
    Value ok = em.andI(em.notI(em.isNaN(v)), em.cmpF(F::ONE, v, em.negInf()));
    if (!within)
      return ok;
    Value in = em.isSet(within, e);
    return em.andI(ok, restricted ? em.orI(em.notI(restricted), in) : in);
  };
  topKRow(
      L, em.idx(n), em.idx(k), k, /*taken=*/Value(), eligible,
      [&](Value e) { return L.at(s, e); },
      [&](Value j, Value id, Value v) {
        Value found = em.cmpI(P::sge, id, em.i32(0));
        Value weight = v;
        if (w)
          weight = L.at(*w, em.toIndex(em.select(found, id, em.i32(0))));
        L.put(id, ids, j);
        L.put(em.select(found, weight, em.f32(0)), wts, j);
      });
  if (Value bound = op.getMaxRank()) {
    // OEA's piggy-back bound: a slot keeps its expert only when fewer than r experts
    // (over all E, ties to the lower id, NaN last) outrank it on the token's scores; r = 0
    // means k. The slots are best first, so the kept ones stay a prefix.
    Value r = L.scalar(bound);
    r = em.select(em.cmpI(P::sle, r, em.i64(0)), em.i64(k), r);
    em.loop(k, [&](Value j) {
      Value id = L.at(ids, j);
      Value found = em.cmpI(P::sge, id, em.i32(0));
      Value mine = em.toIndex(em.select(found, id, em.i32(0)));
      Value v = L.at(s, mine);
      Value above =
          L.reduceLanes(em.idx(n), em.i64(0), RouterLowering::Combine::AddI, [&](Value e) {
            Value other = L.at(s, e);
            Value ties = em.andI(em.cmpF(F::OEQ, other, v), em.cmpI(P::ult, e, mine));
            Value better = em.orI(em.cmpF(F::OGT, other, v), ties);
            return em.select(better, em.i64(1), em.i64(0));
          });
      Value ranked = em.cmpI(P::slt, above, r);
      Value keep =
          em.andI(found, restricted ? em.orI(em.notI(restricted), ranked) : ranked);
      L.put(em.select(keep, id, em.i32(-1)), ids, j);
      L.put(em.select(keep, L.at(wts, j), em.f32(0)), wts, j);
    });
  }
  if (Value p = op.getTopP()) {
    // Top-p: slot j stays when j < min_k or the slots kept before it hold less than p;
    // once they hold p, every later slot is emptied (the kept sum stops growing).
    Value mass = L.scalar(p);
    Value minK = op.getMinK() ? em.toIndex(L.scalar(op.getMinK())) : em.idx(1);
    em.loopCarried(em.idx(0), em.idx(k), {em.f32(0)}, [&](Value j, ValueRange it) {
      Value keep = em.orI(em.cmpI(P::ult, j, minK), em.cmpF(F::OLT, it[0], mass));
      Value weight = em.select(keep, L.at(wts, j), em.f32(0));
      L.put(em.select(keep, L.at(ids, j), em.i32(-1)), ids, j);
      L.put(weight, wts, j);
      return SmallVector<Value>{em.addF(it[0], weight)};
    });
  }
  if (op.getRenormalize()) {
    // softmax_weights: the slots hold the selected scores, best first; each becomes
    // exp(score - best) (0 for an empty slot) on the way into the sum. As the full
    // softmax, a row with a NaN or +inf score (anywhere, eligible or not) weighs NaN:
    // an integer flag reduction, which vectorizes (a NaN-propagating max does not).
    bool softmax = op.getSoftmaxWeights();
    Value best, poisoned;
    if (softmax) {
      best = L.at(wts, em.idx(0));
      Value any =
          L.reduceLanes(em.idx(n), em.i32(0), RouterLowering::Combine::MaxUI, [&](Value e) {
            Value v = L.at(s, e);
            Value bad = em.orI(em.isNaN(v), em.cmpF(F::OEQ, v, em.f32(INFINITY)));
            return em.select(bad, em.i32(1), em.i32(0));
          });
      poisoned = em.cmpI(P::ne, any, em.i32(0));
    }
    Value sum =
        em.loopCarried(em.idx(0), em.idx(k), {em.f32(0)}, [&](Value j, ValueRange it) {
          Value v = L.at(wts, j);
          if (softmax) {
            Value found = em.cmpI(P::sge, L.at(ids, j), em.i32(0));
            Value p = em.select(poisoned, em.f32(NAN), em.exp(em.subF(v, best)));
            v = em.select(found, p, em.f32(0));
            L.put(v, wts, j);
          }
          return SmallVector<Value>{em.addF(it[0], v)};
        })[0];
    Value positive = em.cmpF(F::OGT, sum, em.f32(0));
    em.loop(k, [&](Value j) {
      Value v = L.at(wts, j);
      L.put(em.select(positive, em.divF(v, sum), v), wts, j);
    });
  }
  float scaling = op.getScaling().convertToFloat();
  if (Value factor = op.getScalingFactor()) // a run-time value (a knob)
    em.loop(k, [&](Value j) { L.put(em.mulF(L.at(wts, j), L.scalar(factor)), wts, j); });
  else if (scaling != 1.0f)
    em.loop(k, [&](Value j) { L.put(em.mulF(L.at(wts, j), em.f32(scaling)), wts, j); });
  return success();
}

LogicalResult remapRow(RouterLowering &L, RemapPhysicalOp op, Value t) {
  LoopEmitter &em = L.em();
  int64_t k = cast<RankedTensorType>(op.getIds().getType()).getDimSize(1);
  int64_t n = op.getPlacement().getType().getExperts();
  const Stored &placement = L.get(op.getPlacement());
  RowRef ids = L.rowIn(op.getIds(), t), out = L.rowOut(op.getResult(), t);
  Value chosen = op.getReplicas() ? L.mem(op.getReplicas()) : Value();
  Value tok = em.toI32(t);
  em.loop(k, [&](Value j) {
    Value e = L.at(ids, j);
    Value valid = em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n)));
    Value es = em.toIndex(em.select(valid, e, em.i32(0)));
    Value count = em.load(placement.replicas, es);
    count = em.select(em.cmpI(P::slt, count, em.i32(1)), em.i32(1), count);
    Value replica = em.toIndex(em.remUI(tok, count));
    Value phys = em.load(placement.log2phy, {es, replica});
    if (chosen) { // one replica per expert (moe.metro_replicas); round robin where none
      Value slot = em.load(chosen, es);
      phys = em.select(em.cmpI(P::sge, slot, em.i32(0)), slot, phys);
    }
    L.put(em.select(valid, phys, em.i32(-1)), out, j);
  });
  return success();
}

/// METRO's replica choice: sequential over the activated experts (one thread in the GPU
/// form), each the most constrained left (fewest replicas, then most tokens, then the
/// lower id) placed on the replica whose GPU has the fewest activated experts (then the
/// fewest tokens, then the lower replica rank).
LogicalResult metroReplicas(RouterLowering &L, MetroReplicasOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  PlacementType placement = op.getPlacement().getType();
  int64_t n = placement.getExperts(), devices = placement.getDevices();
  int64_t maxReplicas = placement.getMaxReplicas(),
          perDevice = placement.getSlotsPerDevice();
  const Stored &where = L.get(op.getPlacement());
  Value counts = L.mem(op.getCounts());
  Value chosen = L.allocFull(op.getReplicas()), perGpu = L.allocFull(op.getDeviceExperts());
  Value tokens = buffer(L, devices, b.getI64Type());
  // One pass starts the state: -2 marks an activated expert not yet placed. It reads
  // the counts, so the GPU form runs it with the selection on every CTA's private copy
  // rather than hoisting it as an initialisation.
  em.loop(std::max(n, devices), [&](Value i) {
    em.ifThen(em.cmpI(P::ult, i, em.idx(n)), [&] {
      Value active = em.cmpI(P::sgt, em.load(counts, i), em.i32(0));
      em.store(em.select(active, em.i32(-2), em.i32(-1)), chosen, i);
    });
    em.ifThen(em.cmpI(P::ult, i, em.idx(devices)), [&] {
      em.store(em.i32(0), perGpu, i);
      em.store(em.i64(0), tokens, i);
    });
  });
  auto replicasOf = [&](Value e) {
    Value c = em.load(where.replicas, e);
    c = em.select(em.cmpI(P::slt, c, em.i32(1)), em.i32(1), c);
    return em.select(em.cmpI(P::sgt, c, em.i32(maxReplicas)), em.i32(maxReplicas), c);
  };
  auto deviceOf = [&](Value slot) {
    Value s = em.select(em.cmpI(P::slt, slot, em.i32(0)), em.i32(0), slot);
    return em.toIndex(arith::DivSIOp::create(b, em.location(), s, em.i32(perDevice)));
  };
  em.loop(n, [&](Value) {
    // The next expert: activated, not yet placed, most constrained first.
    auto next = em.loopCarried(
        em.idx(0), em.idx(n), {em.i32(-1), em.i32(0), em.i32(0)},
        [&](Value e, ValueRange it) {
          Value c = em.load(counts, e), r = replicasOf(e);
          Value open = em.cmpI(P::eq, em.load(chosen, e), em.i32(-2));
          Value better =
              em.orI(em.cmpI(P::slt, it[0], em.i32(0)),
                     em.orI(em.cmpI(P::slt, r, it[1]),
                            em.andI(em.cmpI(P::eq, r, it[1]), em.cmpI(P::sgt, c, it[2]))));
          Value take = em.andI(open, better);
          return SmallVector<Value>{em.select(take, em.toI32(e), it[0]),
                                    em.select(take, r, it[1]), em.select(take, c, it[2])};
        });
    em.ifThen(em.cmpI(P::sge, next[0], em.i32(0)), [&] {
      Value e = em.toIndex(next[0]);
      // The replica whose GPU has the fewest activated experts, then tokens.
      auto best = em.loopCarried(
          em.idx(0), em.toIndex(next[1]), {em.i32(-1), em.i32(0), em.i64(0)},
          [&](Value r, ValueRange it) {
            Value g = deviceOf(em.load(where.log2phy, {e, r}));
            Value x = em.load(perGpu, g), y = em.load(tokens, g);
            Value better = em.orI(
                em.cmpI(P::slt, it[0], em.i32(0)),
                em.orI(em.cmpI(P::slt, x, it[1]),
                       em.andI(em.cmpI(P::eq, x, it[1]), em.cmpI(P::slt, y, it[2]))));
            return SmallVector<Value>{em.select(better, em.toI32(r), it[0]),
                                      em.select(better, x, it[1]),
                                      em.select(better, y, it[2])};
          });
      Value slot = em.load(where.log2phy, {e, em.toIndex(best[0])});
      Value g = deviceOf(slot);
      em.store(slot, chosen, e);
      em.store(em.addI(em.load(perGpu, g), em.i32(1)), perGpu, g);
      em.store(em.addI(em.load(tokens, g), em.toI64(next[2])), tokens, g);
    });
  });
  return success();
}

/// The engine contract, one token per iteration (a whole op: it follows the ops that
/// make its ids, capacity drops and counts included): invalid slots get weight 0 and the
/// token's first valid id, else the lowest expert the batch routes to, else 0.
LogicalResult fillEmptySlots(RouterLowering &L, FillEmptySlotsOp op) {
  LoopEmitter &em = L.em();
  int64_t k = op.getIds().getType().getDimSize(1), n = op.getExperts();
  Value ids = L.mem(op.getIds()), weights = L.mem(op.getWeights());
  Value outIds = L.allocFull(op.getResultIds());
  Value outWeights = L.allocFull(op.getResultWeights());
  Value counts = op.getCounts() ? L.mem(op.getCounts()) : Value();
  auto valid = [&](Value e) {
    return em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(n)));
  };
  L.parallelLoop(L.tokens(), [&](Value t) {
    Value own =
        em.loopCarried(em.idx(0), em.idx(k), {em.i32(-1)}, [&](Value j, ValueRange it) {
          Value e = em.load(ids, {t, j});
          return SmallVector<Value>{
              em.select(em.andI(em.cmpI(P::slt, it[0], em.i32(0)), valid(e)), e, it[0])};
        })[0];
    Value fallback = em.i32(0);
    if (counts) {
      // The lowest routed expert: the largest key n - e over experts with tokens.
      Value key =
          L.reduceLanes(em.idx(n), em.i32(0), RouterLowering::Combine::MaxUI, [&](Value e) {
            Value used = em.cmpI(P::sgt, em.load(counts, e), em.i32(0));
            return em.select(used, em.subI(em.i32(n), em.toI32(e)), em.i32(0));
          });
      fallback =
          em.select(em.cmpI(P::sgt, key, em.i32(0)), em.subI(em.i32(n), key), em.i32(0));
    }
    Value fill = em.select(em.cmpI(P::sge, own, em.i32(0)), own, fallback);
    em.loop(k, [&](Value j) {
      Value e = em.load(ids, {t, j}), ok = valid(e);
      em.store(em.select(ok, e, fill), outIds, {t, j});
      em.store(em.select(ok, em.load(weights, {t, j}), em.f32(0)), outWeights, {t, j});
    });
  });
  return success();
}

/// Whether code of the policy reads `v` (through stage and phase-gate results), not
/// only returns it.
bool readByPolicy(Value v) {
  for (OpOperand &use : v.getUses()) {
    auto yield = dyn_cast<YieldOp>(use.getOwner());
    if (!yield)
      return true;
    Operation *parent = yield->getParentOp();
    if (isa<StageOp, WhenOp>(parent) &&
        readByPolicy(parent->getResult(use.getOperandNumber())))
      return true;
  }
  return false;
}

LogicalResult expertCounts(RouterLowering &L, ExpertCountsOp op) {
  LoopEmitter &em = L.em();
  int64_t n = expertsOf(op.getCounts());
  int64_t k = op.getIds().getType().getDimSize(1);
  Value out = L.allocFull(op.getCounts()), ids = L.mem(op.getIds());
  if (L.blockParallelHere() && readByPolicy(op.getCounts())) {
    // Counts the policy reads (compaction, block alignment): per-tile histograms, then
    // their sums, complete where the tiles are (no atomics that only the end of the
    // grid completes); block alignment of the same ids reuses the histogram
    // (TokenTiles.cpp). Counts that are only returned keep the atomics.
    countsFromTiles(L, tileHistogram(L, op.getIds(), n), out, n);
    return success();
  }
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
    Value found = blockSum(
        L, em.idx(n), [&](Value e) { return em.select(has(e), em.i32(1), em.i32(0)); });
    L.parallelLoop(em.idx(n), [&](Value i) {
      em.ifThen(em.cmpI(P::sge, em.toI32(i), found),
                [&] { em.store(em.i32(-1), active, i); });
    });
    em.store(found, num, em.idx(0));
    return success();
  }
  Value found =
      em.loopCarried(em.idx(0), em.idx(n), {em.i32(0)}, [&](Value e, ValueRange it) {
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
  exclusiveScan(L, em.idx(n), start,
                [&](Value e) { return em.mulI(blocksOf(e), em.i32(block)); });
  Value lastExpert = em.idx(n - 1);
  Value total =
      em.addI(em.load(start, lastExpert), em.mulI(blocksOf(lastExpert), em.i32(block)));
  // Counts made from these ids here (expert_counts of the same ids): their tile
  // histogram places the slots.
  if (auto source = L.resolved(op.getCounts()).getDefiningOp<ExpertCountsOp>();
      source && L.resolved(source.getIds()) == L.resolved(op.getIds())) {
    auto hist = L.tileHistograms.find(L.resolved(op.getIds()));
    if (hist != L.tileHistograms.end() &&
        hist->second.getParentBlock() == em.builder().getInsertionBlock()) {
      em.store(total, padded, em.idx(0));
      placeByTiles(L, hist->second, ids, start, block, sorted, sortedSize, blocks,
                   blockCount);
      return success();
    }
  }
  L.parallelLoop(em.idx(n), [&](Value e) {
    Value first = em.toIndex(em.divUI(em.load(start, e), em.i32(block)));
    em.loop(em.idx(0), em.toIndex(blocksOf(e)), [&](Value i) {
      Value at = em.addI(first, i);
      em.ifThen(em.cmpI(P::ult, at, blockCount),
                [&] { em.store(em.toI32(e), blocks, at); });
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
  Value total =
      em.loopCarried(em.idx(0), em.idx(n), {em.i32(0)}, [&](Value e, ValueRange it) {
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

} // namespace

void registerRouteOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<routeRow, remapRow, expertCounts, fillEmptySlots, compactActive,
                        alignBlocks, metroReplicas>(context);
  });
}

} // namespace switchyard::moe
