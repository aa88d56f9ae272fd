//===- RuleEmitters.cpp - the loops each rule op lowers to ----------------===//
//
// Rule ops run on the host once per scheduling interval: plain sequential loops over
// experts, slots and GPUs, with the rankings every moe op shares (descending score,
// ties to the lower id) and f32 arithmetic accumulated in a fixed order, so the numpy
// references reproduce the results bit for bit.
//
//===----------------------------------------------------------------------===//
#include "RouterLowering.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
namespace {

int64_t sizeOf(Value v) { return cast<ShapedType>(v.getType()).getDimSize(0); }

Value always(LoopEmitter &em) { return em.cmpI(P::eq, em.i32(0), em.i32(0)); }

/// A fresh 1-D buffer of n elements, allocated before the op's loops (so that loops
/// may ask for one) and freed at the end of the rule.
Value buffer(RouterLowering &L, int64_t n, Type elem) { return L.scratch(n, elem); }

//===----------------------------------------------------------------------===//
// Residency (DynaExq)
//===----------------------------------------------------------------------===//

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
  Value lowAll = em.mulI(em.mulI(layers, c128(op.getExperts())), wide(L.scalar(op.getLoBytes())));
  Value free = em.subI(em.subI(wide(L.scalar(op.getBudget())), wide(L.scalar(op.getFixed()))),
                       lowAll);
  free = em.select(em.cmpI(P::slt, free, c128(0)), c128(0), free);
  Value perLayer = em.mulI(layers, wide(L.scalar(op.getHiBytes())));
  perLayer = em.select(em.cmpI(P::slt, perLayer, c128(1)), c128(1), perLayer);
  Value n = arith::DivSIOp::create(b, loc, free, perLayer);
  n = em.select(em.cmpI(P::sgt, n, c128(op.getExperts())), c128(op.getExperts()), n);
  L.setScalar(op.getResult(), arith::TruncIOp::create(b, loc, b.getI64Type(), n));
  return success();
}

/// An i64 parameter clamped to [lo, hi], as i32 (hi <= INT32_MAX).
Value clampedI32(LoopEmitter &em, Value v, int64_t lo, int64_t hi) {
  v = em.select(em.cmpI(P::slt, v, em.i64(lo)), em.i64(lo), v);
  v = em.select(em.cmpI(P::sgt, v, em.i64(hi)), em.i64(hi), v);
  return em.toI32(v);
}

/// Removes the `count` lowest-ranked members of `set`.
void dropWorst(RouterLowering &L, Value set, Value scores, Value count, int64_t n) {
  LoopEmitter &em = L.em();
  em.loop(em.idx(0), count, [&](Value) {
    Value worst = em.argWorst(em.idx(n), [&](Value e) { return em.isSet(set, e); },
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
      Value worst = em.argWorst(em.idx(n), [&](Value e) { return em.isSet(out, e); }, score);
      Value both = em.andI(em.cmpI(P::sge, best, em.i32(0)), em.cmpI(P::sge, worst, em.i32(0)));
      Value w = em.toIndex(em.select(both, worst, em.i32(0)));
      Value swap = em.andI(both, em.cmpF(F::OGT, bestScore, em.addF(em.load(s, w), margin)));
      em.ifThen(swap, [&] {
        em.store(em.i8(1), out, em.toIndex(best));
        em.store(em.i8(0), out, w);
      });
    });
    return success();
  }
  // Rank slack: members whose overall rank is below n + slack stay (a slack beyond n
  // keeps everyone; clamping it keeps the sum from wrapping).
  Value limit = em.addI(capacity, em.toI64(emit::clampedCount(em, L.scalar(op.getRankSlack()), n)));
  em.loop(n, [&](Value e) {
    Value v = em.load(s, e);
    Value rank = em.loopCarried(em.idx(0), em.idx(n), {em.i64(0)}, [&](Value j, ValueRange it) {
      Value u = em.load(s, j);
      // j ranks ahead of e: a higher score, or an equal one (both NaN included) at a
      // lower id; NaN ranks behind every number.
      Value equal = em.orI(em.cmpF(F::OEQ, u, v), em.andI(em.isNaN(u), em.isNaN(v)));
      Value ahead = em.orI(em.outranks(u, v),
                           em.andI(equal, em.cmpI(P::ult, j, e)));
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

//===----------------------------------------------------------------------===//
// Balance (DeepSeek EPLB)
//===----------------------------------------------------------------------===//

/// The EPLB plan's scratch state, all static sizes.
class Eplb {
public:
  Eplb(RouterLowering &L, EplbOp op) : L(L), em(L.em()), op(op) {}
  LogicalResult run();

private:
  Type i32() { return em.builder().getI32Type(); }
  Type f32() { return em.builder().getF32Type(); }
  Value load(Value m, Value i) { return em.load(m, em.toIndex(i)); }
  void store(Value v, Value m, Value i) { em.store(v, m, em.toIndex(i)); }

  /// Balanced packing of `n` items with `weights` (read at base + i) into `packs` packs
  /// of n/packs items: writes pack and rank (at base + i).
  void pack(Value weights, Value pack, Value rank, Value base, int64_t n, int64_t packs);
  /// Replication of `n` experts (weights at base + i) into `m` slots: writes slot ->
  /// expert (local ids, at slotBase + i), slot rank, and counts (at base + i).
  void replicate(Value weights, Value base, int64_t n, Value slotBase, int64_t m,
                 Value phy2mlog, Value phyRank, Value counts);

  RouterLowering &L;
  LoopEmitter &em;
  EplbOp op;
};

void Eplb::pack(Value weights, Value packOut, Value rankOut, Value base, int64_t n,
                int64_t packs) {
  int64_t perPack = n / packs;
  if (perPack == 1) { // DeepSeek: one item per pack keeps the identity
    em.loop(n, [&](Value i) {
      Value at = em.addI(base, i);
      em.store(em.toI32(i), packOut, at);
      em.store(em.i32(0), rankOut, at);
    });
    return;
  }
  // Items by descending weight, ties to the lower index (a stable insertion sort).
  Value order = buffer(L, n, em.builder().getIndexType());
  em.loop(n, [&](Value i) { em.store(i, order, i); });
  auto weightOf = [&](Value item) { return em.load(weights, em.addI(base, item)); };
  em.loop(em.idx(1), em.idx(n), [&](Value i) {
    Value key = em.load(order, i);
    Value w = weightOf(key);
    Value slot = em.whileLoop(
        {i},
        [&](ValueRange j) {
          Value inside = em.cmpI(P::ugt, j[0], em.idx(0));
          Value prev = em.select(inside, em.subI(j[0], em.idx(1)), em.idx(0));
          return em.andI(inside, em.cmpF(F::OLT, weightOf(em.load(order, prev)), w));
        },
        [&](ValueRange j) {
          Value prev = em.subI(j[0], em.idx(1));
          em.store(em.load(order, prev), order, j[0]);
          return SmallVector<Value>{prev};
        })[0];
    em.store(key, order, slot);
  });
  Value load = buffer(L, packs, f32()), items = buffer(L, packs, i32());
  em.fill(load, em.idx(packs), em.f32(0));
  em.fill(items, em.idx(packs), em.i32(0));
  em.loop(n, [&](Value i) {
    Value item = em.load(order, i);
    // The lightest pack that is not full, ties to the lower pack.
    Value best = em.loopCarried(em.idx(0), em.idx(packs), {em.i32(-1), em.f32(0)},
                                [&](Value p, ValueRange it) {
      Value open = em.cmpI(P::slt, em.load(items, p), em.i32(perPack));
      Value none = em.cmpI(P::slt, it[0], em.i32(0));
      Value lighter = em.cmpF(F::OLT, em.load(load, p), it[1]);
      Value take = em.andI(open, em.orI(none, lighter));
      return SmallVector<Value>{em.select(take, em.toI32(p), it[0]),
                                em.select(take, em.load(load, p), it[1])};
    })[0];
    Value p = em.toIndex(best), at = em.addI(base, item);
    em.store(best, packOut, at);
    em.store(em.load(items, p), rankOut, at);
    em.store(em.addF(em.load(load, p), em.load(weights, at)), load, p);
    em.store(em.addI(em.load(items, p), em.i32(1)), items, p);
  });
}

void Eplb::replicate(Value weights, Value base, int64_t n, Value slotBase, int64_t m,
                     Value phy2mlog, Value phyRank, Value counts) {
  em.loop(n, [&](Value i) {
    em.store(em.toI32(i), phy2mlog, em.addI(slotBase, i));
    em.store(em.i32(0), phyRank, em.addI(slotBase, i));
    em.store(em.i32(1), counts, em.addI(base, i));
  });
  em.loop(em.idx(n), em.idx(m), [&](Value slot) {
    // The expert with the highest load per replica, ties to the lower id.
    auto [hot, unused] = em.argBest(
        em.idx(n), [&](Value) { return em.cmpI(P::eq, em.i32(0), em.i32(0)); },
        [&](Value i) {
          Value at = em.addI(base, i);
          return em.divF(em.load(weights, at), em.toF32(em.load(counts, at)));
        });
    (void)unused;
    Value at = em.addI(base, em.toIndex(hot));
    em.store(hot, phy2mlog, em.addI(slotBase, slot));
    em.store(em.load(counts, at), phyRank, em.addI(slotBase, slot));
    em.store(em.addI(em.load(counts, at), em.i32(1)), counts, at);
  });
}

LogicalResult Eplb::run() {
  int64_t experts = sizeOf(op.getLoads()), slots = sizeOf(op.getPhy2log());
  bool hierarchical = op.isHierarchical();
  int64_t groups = hierarchical ? op.getGroups() : 1, nodes = hierarchical ? op.getNodes() : 1;
  int64_t gpus = op.getGpus();
  int64_t groupSize = experts / groups, groupsPerNode = groups / nodes;
  int64_t expertsPerNode = experts / nodes, slotsPerNode = slots / nodes;
  int64_t gpusPerNode = gpus / nodes, slotsPerGpu = slots / gpus;
  int64_t maxReplicas = slots - experts + 1;
  Value w = L.mem(op.getLoads());
  Value phy2log = L.allocFull(op.getPhy2log()), log2phy = L.allocFull(op.getLog2phy());
  Value replicaCount = L.allocFull(op.getReplicaCount());
  Value zero = em.idx(0);

  // Step 1: groups onto nodes.
  Value groupLoad = buffer(L, groups, f32());
  em.loop(groups, [&](Value g) {
    Value sum = em.loopCarried(zero, em.idx(groupSize), {em.f32(0)}, [&](Value j, ValueRange it) {
      return SmallVector<Value>{
          em.addF(it[0], em.load(w, em.addI(em.mulI(g, em.idx(groupSize)), j)))};
    })[0];
    em.store(sum, groupLoad, g);
  });
  Value groupPack = buffer(L, groups, i32()), groupRank = buffer(L, groups, i32());
  pack(groupLoad, groupPack, groupRank, zero, groups, nodes);
  // log2mlog: node-major ("middle") order of the logical experts, and its inverse.
  Value log2mlog = buffer(L, experts, i32()), mlog2log = buffer(L, experts, i32());
  em.loop(experts, [&](Value e) {
    Value g = em.divUI(e, em.idx(groupSize)), j = em.remUI(e, em.idx(groupSize));
    Value slot = em.addI(em.toIndex(em.load(groupPack, g)), zero);
    Value first = em.mulI(em.addI(em.mulI(slot, em.idx(groupsPerNode)),
                                  em.toIndex(em.load(groupRank, g))),
                          em.idx(groupSize));
    Value mlog = em.addI(first, j);
    em.store(em.toI32(mlog), log2mlog, e);
    em.store(em.toI32(e), mlog2log, mlog);
  });
  Value mlogLoad = buffer(L, experts, f32());
  em.loop(experts, [&](Value x) { em.store(load(w, em.load(mlog2log, x)), mlogLoad, x); });

  // Step 2: replicas inside each node; step 3: replicas onto the node's GPUs.
  Value phy2mlog = buffer(L, slots, i32()), phyRank = buffer(L, slots, i32());
  Value mlogCount = buffer(L, experts, i32());
  Value phyLoad = buffer(L, slots, f32());
  Value gpuOf = buffer(L, slots, i32()), rankOnGpu = buffer(L, slots, i32());
  Value pphy2phy = buffer(L, slots, i32());
  em.loop(nodes, [&](Value node) {
    Value base = em.mulI(node, em.idx(expertsPerNode));
    Value slotBase = em.mulI(node, em.idx(slotsPerNode));
    replicate(mlogLoad, base, expertsPerNode, slotBase, slotsPerNode, phy2mlog, phyRank,
              mlogCount);
    em.loop(slotsPerNode, [&](Value i) {
      Value at = em.addI(slotBase, i);
      Value x = em.addI(base, em.toIndex(em.load(phy2mlog, at)));
      em.store(em.divF(em.load(mlogLoad, x), em.toF32(em.load(mlogCount, x))), phyLoad, at);
    });
    pack(phyLoad, gpuOf, rankOnGpu, slotBase, slotsPerNode, gpusPerNode);
    // Invert phy -> (gpu, rank) into the node's physical order.
    em.loop(slotsPerNode, [&](Value i) {
      Value at = em.addI(slotBase, i);
      Value pphy = em.addI(em.mulI(em.toIndex(em.load(gpuOf, at)), em.idx(slotsPerGpu)),
                           em.toIndex(em.load(rankOnGpu, at)));
      em.store(em.toI32(i), pphy2phy, em.addI(slotBase, pphy));
    });
  });

  // Results: phy2log, replica counts, log2phy by replica rank.
  em.loop(experts, [&](Value e) {
    em.store(load(mlogCount, em.load(log2mlog, e)), replicaCount, e);
    em.loop(maxReplicas, [&](Value r) { em.store(em.i32(-1), log2phy, {e, r}); });
  });
  em.loop(slots, [&](Value p) {
    Value node = em.divUI(p, em.idx(slotsPerNode));
    Value slotBase = em.mulI(node, em.idx(slotsPerNode));
    Value phy = em.addI(slotBase, em.toIndex(em.load(pphy2phy, p)));
    Value mlog = em.addI(em.mulI(node, em.idx(expertsPerNode)),
                         em.toIndex(em.load(phy2mlog, phy)));
    Value logical = em.load(mlog2log, mlog);
    em.store(logical, phy2log, p);
    em.store(em.toI32(p), log2phy, {em.toIndex(logical), em.toIndex(em.load(phyRank, phy))});
  });
  return success();
}

LogicalResult deviceLoads(RouterLowering &L, DeviceLoadsOp op) {
  LoopEmitter &em = L.em();
  int64_t gpus = op.getGpus();
  Value w = L.mem(op.getLoads()), out = L.allocFull(op.getResult());
  if (!op.getPhy2log()) {
    int64_t perGpu = sizeOf(op.getLoads()) / gpus;
    em.loop(gpus, [&](Value d) {
      Value sum = em.loopCarried(em.idx(0), em.idx(perGpu), {em.f32(0)}, [&](Value j, ValueRange it) {
        return SmallVector<Value>{
            em.addF(it[0], em.load(w, em.addI(em.mulI(d, em.idx(perGpu)), j)))};
      })[0];
      em.store(sum, out, d);
    });
    return success();
  }
  Value phy2log = L.mem(op.getPhy2log()), counts = L.mem(op.getReplicaCount());
  int64_t perGpu = sizeOf(op.getPhy2log()) / gpus, experts = sizeOf(op.getLoads());
  em.loop(gpus, [&](Value d) {
    Value sum = em.loopCarried(em.idx(0), em.idx(perGpu), {em.f32(0)}, [&](Value j, ValueRange it) {
      Value e = em.load(phy2log, em.addI(em.mulI(d, em.idx(perGpu)), j));
      Value valid = em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(experts)));
      Value at = em.toIndex(em.select(valid, e, em.i32(0)));
      Value count = em.load(counts, at);
      count = em.select(em.cmpI(P::slt, count, em.i32(1)), em.i32(1), count);
      Value share = em.divF(em.load(w, at), em.toF32(count));
      return SmallVector<Value>{em.select(valid, em.addF(it[0], share), it[0])};
    })[0];
    em.store(sum, out, d);
  });
  return success();
}

LogicalResult imbalance(RouterLowering &L, ImbalanceOp op) {
  LoopEmitter &em = L.em();
  int64_t n = sizeOf(op.getLoads());
  Value x = L.mem(op.getLoads()), out = L.allocFull(op.getResult());
  auto res = em.loopCarried(em.idx(0), em.idx(n), {em.f32(0), em.negInf()},
                            [&](Value i, ValueRange it) {
    Value v = em.load(x, i);
    return SmallVector<Value>{em.addF(it[0], v),
                              arith::MaximumFOp::create(em.builder(), em.location(), it[1], v)};
  });
  Value mean = em.divF(res[0], em.f32(static_cast<double>(n)));
  Value ratio = em.divF(res[1], mean);
  em.store(em.select(em.cmpF(F::OEQ, res[0], em.f32(0)), em.f32(1), ratio), out, em.idx(0));
  return success();
}


//===----------------------------------------------------------------------===//
// Balance (Libra)
//===----------------------------------------------------------------------===//

LogicalResult gpuRequests(RouterLowering &L, GpuRequestsOp op) {
  LoopEmitter &em = L.em();
  auto type = cast<ShapedType>(op.getResult().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  int64_t k = cast<ShapedType>(op.getIds().getType()).getDimSize(1);
  Value ids = L.mem(op.getIds()), where = L.mem(op.getTokenGpu());
  Value out = L.allocFull(op.getResult());
  em.loop(gpus, [&](Value g) { em.loop(experts, [&](Value e) { em.store(em.i32(0), out, {g, e}); }); });
  em.loop(em.idx(0), L.tokens(), [&](Value t) {
    Value g = em.load(where, t);
    Value gOk = em.andI(em.cmpI(P::sge, g, em.i32(0)), em.cmpI(P::slt, g, em.i32(gpus)));
    em.loop(k, [&](Value j) {
      Value e = em.load(ids, {t, j});
      Value ok = em.andI(gOk, em.andI(em.cmpI(P::sge, e, em.i32(0)),
                                      em.cmpI(P::slt, e, em.i32(experts))));
      em.ifThen(ok, [&] {
        Value gi = em.toIndex(g), ei = em.toIndex(e);
        em.store(em.addI(em.load(out, {gi, ei}), em.i32(1)), out, {gi, ei});
      });
    });
  });
  return success();
}

/// Libra's load model over requests [G, E] and an optional placement [E, G]: the GPU
/// that serves GPU g's requests for e (g if it hosts e, else e's home).
class LibraLoads {
public:
  LibraLoads(RouterLowering &L, Value requests, int64_t gpus, int64_t experts)
      : L(L), em(L.em()), requests(requests), gpus(gpus), experts(experts) {}
  Value home(Value e) { return em.divUI(e, em.idx(experts / gpus)); }
  Value hosts(Value placement, Value e, Value g) {
    return placement ? em.cmpI(P::ne, em.load(placement, {e, g}), em.i32(0))
                     : em.cmpI(P::eq, home(e), g);
  }
  Value requested(Value g, Value e) { return em.load(requests, {g, e}); }
  /// loads[h] (i32) = requests served on h.
  void served(Value placement, Value loads) {
    em.fill(loads, em.idx(gpus), em.i32(0));
    em.loop(gpus, [&](Value g) {
      em.loop(experts, [&](Value e) {
        Value h = em.select(hosts(placement, e, g), g, home(e));
        em.store(em.addI(em.load(loads, h), requested(g, e)), loads, h);
      });
    });
  }
  /// B = total requests / G, in f32.
  Value target() {
    Value total = em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
      Value row = em.loopCarried(em.idx(0), em.idx(experts), {it[0]}, [&](Value e, ValueRange r) {
        return SmallVector<Value>{em.addI(r[0], requested(g, e))};
      })[0];
      return SmallVector<Value>{row};
    })[0];
    return em.divF(em.toF32(total), em.f32(static_cast<double>(gpus)));
  }

private:
  RouterLowering &L;
  LoopEmitter &em;
  Value requests;
  int64_t gpus, experts;
};

LogicalResult servedLoads(RouterLowering &L, ServedLoadsOp op) {
  LoopEmitter &em = L.em();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  LibraLoads model(L, L.mem(op.getRequests()), gpus, experts);
  Value counts = buffer(L, gpus, em.builder().getI32Type());
  model.served(op.getPlacement() ? L.mem(op.getPlacement()) : Value(), counts);
  Value out = L.allocFull(op.getResult());
  em.loop(gpus, [&](Value g) { em.store(em.toF32(em.load(counts, g)), out, g); });
  return success();
}

LogicalResult libraReplicate(RouterLowering &L, LibraReplicateOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  Value req = L.mem(op.getRequests()), m = L.allocFull(op.getPlacement());
  LibraLoads model(L, req, gpus, experts);
  // At most one extra replica per expert can be placed: clamping to E keeps the float
  // product below exact-conversion range.
  Value n = em.toI64(emit::clampedCount(em, L.scalar(op.getExtra()), experts));
  // L = floor(N * alpha), at most N.
  Value local = arith::FPToSIOp::create(
      b, em.location(), b.getI64Type(),
      math::FloorOp::create(b, em.location(),
                            em.mulF(em.toF32(n), L.scalar(op.getAlpha()))));
  local = em.select(em.cmpI(P::sgt, local, n), n, local);
  local = em.select(em.cmpI(P::slt, local, em.i64(0)), em.i64(0), local);
  Value extra = buffer(L, gpus, b.getI32Type());
  em.fill(extra, em.idx(gpus), em.i32(0));
  em.loop(experts, [&](Value e) {
    em.loop(gpus, [&](Value g) {
      em.store(em.select(em.cmpI(P::eq, model.home(e), g), em.i32(1), em.i32(0)), m, {e, g});
    });
  });
  // Phase 1: each GPU imports its top L requested remote experts.
  Value taken = buffer(L, experts, b.getI8Type());
  em.loop(gpus, [&](Value g) {
    em.fill(taken, em.idx(experts), em.i8(0));
    emit::topKRow(
        L, em.idx(experts), em.toIndex(local), experts, taken,
        [&](Value e) {
          return em.andI(em.cmpI(P::ne, model.home(e), g),
                         em.cmpI(P::sgt, model.requested(g, e), em.i32(0)));
        },
        [&](Value e) { return em.toF32(model.requested(g, e)); },
        [&](Value, Value id, Value) {
          em.ifThen(em.cmpI(P::sge, id, em.i32(0)), [&] {
            em.store(em.i32(1), m, {em.toIndex(id), g});
            em.store(em.addI(em.load(extra, g), em.i32(1)), extra, g);
          });
        });
  });
  // Phase 2: iterative duplication towards the target load.
  Value loads = buffer(L, gpus, b.getI32Type());
  model.served(m, loads);
  // remote[e]: requests for e served at its home by GPUs without a copy, kept up to
  // date as copies are added (a step then costs O(G + E/G)).
  Value remote = buffer(L, experts, b.getI32Type());
  em.loop(experts, [&](Value e) {
    Value sum = em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
      return SmallVector<Value>{
          em.select(model.hosts(m, e, g), it[0], em.addI(it[0], model.requested(g, e)))};
    })[0];
    em.store(sum, remote, e);
  });
  Value target = model.target();
  Value stop = buffer(L, 1, b.getI8Type());
  em.store(em.i8(0), stop, em.idx(0));
  Value steps = em.toIndex(em.mulI(em.subI(n, local), em.i64(gpus)));
  Value n32 = em.toI32(n);
  em.loop(em.idx(0), steps, [&](Value) {
    em.ifThen(em.notI(em.isSet(stop, em.idx(0))), [&] {
      auto [src, unusedLoad] = em.argBest(
          em.idx(gpus),
          [&](Value g) { return em.cmpF(F::OGT, em.toF32(em.load(loads, g)), target); },
          [&](Value g) { return em.toF32(em.load(loads, g)); });
      (void)unusedLoad;
      Value srcOk = em.cmpI(P::sge, src, em.i32(0));
      Value s = em.toIndex(em.select(srcOk, src, em.i32(0)));
      // The expert homed on src with the most remote requests (only src's E/G experts).
      Value base = em.mulI(s, em.idx(experts / gpus));
      auto [local, hotLoad] = em.argBest(
          em.idx(experts / gpus),
          [&](Value i) {
            return em.cmpI(P::sgt, em.load(remote, em.addI(base, i)), em.i32(0));
          },
          [&](Value i) { return em.toF32(em.load(remote, em.addI(base, i))); });
      (void)hotLoad;
      Value hot = em.select(em.cmpI(P::sge, local, em.i32(0)),
                            em.addI(local, em.toI32(base)), em.i32(-1));
      Value hotOk = em.andI(srcOk, em.cmpI(P::sge, hot, em.i32(0)));
      Value e = em.toIndex(em.select(hotOk, hot, em.i32(0)));
      auto [dst, negLoad] = em.argBest(
          em.idx(gpus),
          [&](Value g) {
            return em.andI(em.andI(em.cmpI(P::ne, g, s), em.notI(model.hosts(m, e, g))),
                           em.cmpI(P::slt, em.load(extra, g), n32));
          },
          [&](Value g) {
            return arith::NegFOp::create(b, em.location(), em.toF32(em.load(loads, g)))
                .getResult();
          });
      (void)negLoad;
      Value dstOk = em.andI(hotOk, em.cmpI(P::sge, dst, em.i32(0)));
      Value d = em.toIndex(em.select(dstOk, dst, em.i32(0)));
      Value moved = model.requested(d, e);
      Value after = em.addI(em.load(loads, d), moved);
      Value fits = em.andI(dstOk, em.cmpF(F::OLE, em.toF32(after), target));
      em.ifThenElse(
          fits,
          [&] {
            em.store(em.i32(1), m, {e, d});
            em.store(em.addI(em.load(extra, d), em.i32(1)), extra, d);
            em.store(after, loads, d);
            em.store(em.subI(em.load(loads, s), moved), loads, s);
            em.store(em.subI(em.load(remote, e), moved), remote, e);
          },
          [&] { em.store(em.i8(1), stop, em.idx(0)); });
    });
  });
  return success();
}

/// `for (i = 0; i < n && !stop(); ++i) body()`.
void loopUntil(LoopEmitter &em, int64_t n, function_ref<Value()> stop, function_ref<void()> body) {
  em.whileLoop(
      {em.idx(0)},
      [&](ValueRange it) { return em.andI(em.cmpI(P::ult, it[0], em.idx(n)), em.notI(stop())); },
      [&](ValueRange it) {
        body();
        return SmallVector<Value>{em.addI(it[0], em.idx(1))};
      });
}

LogicalResult libraShard(RouterLowering &L, LibraShardOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  auto type = cast<ShapedType>(op.getRequests().getType());
  int64_t gpus = type.getDimSize(0), experts = type.getDimSize(1);
  Value req = L.mem(op.getRequests()), m = L.mem(op.getPlacement());
  Value r = L.allocFull(op.getShardPlan()), out = L.allocFull(op.getLoads());
  LibraLoads model(L, req, gpus, experts);
  // Local loads, remote loads at the home GPUs, GPU loads.
  Value loads = buffer(L, gpus, b.getI32Type());
  em.fill(loads, em.idx(gpus), em.i32(0));
  em.loop(gpus, [&](Value g) { em.loop(experts, [&](Value e) { em.store(em.i32(0), r, {g, e}); }); });
  em.loop(gpus, [&](Value g) {
    em.loop(experts, [&](Value e) {
      Value here = model.hosts(m, e, g);
      Value h = em.select(here, g, model.home(e));
      em.store(em.addI(em.load(loads, h), model.requested(g, e)), loads, h);
      em.ifThen(em.notI(here), [&] {
        em.store(em.addI(em.load(r, {h, e}), model.requested(g, e)), r, {h, e});
      });
    });
  });
  Value target = model.target();
  Value limit = em.mulF(em.addF(em.f32(1), L.scalar(op.getEpsilon())), target);
  auto loadOf = [&](Value g) { return em.toF32(em.load(loads, g)); };
  // state: [done, moved]
  Value state = buffer(L, 2, b.getI8Type());
  Value visitedG = buffer(L, gpus, b.getI8Type());
  // Copies of each expert (the placement does not change while sharding).
  Value hostCount = buffer(L, experts, b.getI32Type());
  em.loop(experts, [&](Value e) {
    Value n = em.loopCarried(em.idx(0), em.idx(gpus), {em.i32(0)}, [&](Value g, ValueRange it) {
      return SmallVector<Value>{em.select(model.hosts(m, e, g), em.addI(it[0], em.i32(1)), it[0])};
    })[0];
    em.store(n, hostCount, e);
  });
  auto flag = [&](int i) { return em.isSet(state, em.idx(i)); };
  auto setFlag = [&](int i, int64_t v) { em.store(em.i8(v), state, em.idx(i)); };
  setFlag(0, 0);
  // Until balanced or stuck (at most 4*G*E transfers).
  em.whileLoop(
      {em.idx(0)},
      [&](ValueRange it) {
        return em.andI(em.cmpI(P::ult, it[0], em.idx(4 * gpus * experts)), em.notI(flag(0)));
      },
      [&](ValueRange it) {
    {
      Value maxLoad = em.loopCarried(em.idx(0), em.idx(gpus), {em.negInf()}, [&](Value g, ValueRange it) {
        return SmallVector<Value>{arith::MaximumFOp::create(b, em.location(), it[0], loadOf(g))};
      })[0];
      em.ifThenElse(
          em.cmpF(F::OGT, maxLoad, limit),
          [&] {
            setFlag(1, 0);
            em.fill(visitedG, em.idx(gpus), em.i8(0));
            // Sources in descending load, experts in descending remote load, first
            // feasible transfer wins.
            loopUntil(em, gpus, [&] { return flag(1); }, [&] {
              {
                auto [src, unused] = em.argBest(
                    em.idx(gpus),
                    [&](Value g) {
                      return em.andI(em.notI(em.isSet(visitedG, g)),
                                     em.cmpF(F::OGT, loadOf(g), target));
                    },
                    loadOf);
                (void)unused;
                em.ifThen(em.cmpI(P::sge, src, em.i32(0)), [&] {
                  Value s = em.toIndex(src);
                  em.store(em.i8(1), visitedG, s);
                  // The first feasible expert in descending R[s, e] (ties lower id) is
                  // the feasible one with the largest R: one pass, and the destination
                  // search (O(G)) only for replicated experts that could win.
                  auto best = em.loopCarried(
                      em.idx(0), em.idx(experts), {em.i32(-1), em.i32(0), em.i32(0), em.i32(0)},
                      [&](Value e, ValueRange it) {
                        Value have = em.load(r, {s, e});
                        Value better = em.orI(em.cmpI(P::slt, it[0], em.i32(0)),
                                              em.cmpI(P::sgt, have, it[1]));
                        Value cand = em.andI(em.andI(em.cmpI(P::sgt, have, em.i32(0)),
                                                     em.cmpI(P::sge, em.load(hostCount, e),
                                                             em.i32(2))),
                                             better);
                        auto ifOp = scf::IfOp::create(b, em.location(),
                                                      TypeRange{b.getI32Type(), b.getI32Type()},
                                                      cand, /*withElseRegion=*/true);
                        {
                          OpBuilder::InsertionGuard guard(b);
                          b.setInsertionPointToStart(ifOp.thenBlock());
                          auto [dst, unusedD] = em.argBest(
                              em.idx(gpus),
                              [&](Value g) {
                                return em.andI(em.cmpI(P::ne, g, s), model.hosts(m, e, g));
                              },
                              [&](Value g) {
                                return arith::NegFOp::create(b, em.location(), loadOf(g))
                                    .getResult();
                              });
                          (void)unusedD;
                          Value dOk = em.cmpI(P::sge, dst, em.i32(0));
                          Value d = em.toIndex(em.select(dOk, dst, em.i32(0)));
                          Value room = math::FloorOp::create(b, em.location(),
                                                             em.subF(target, loadOf(d)));
                          Value cap = arith::FPToSIOp::create(b, em.location(), b.getI32Type(),
                                                              room);
                          Value ok = em.andI(dOk, em.cmpI(P::sge, cap, em.i32(1)));
                          scf::YieldOp::create(b, em.location(),
                                               ValueRange{em.select(ok, dst, em.i32(-1)), cap});
                          b.setInsertionPointToStart(ifOp.elseBlock());
                          scf::YieldOp::create(b, em.location(), ValueRange{em.i32(-1), em.i32(0)});
                        }
                        Value take = em.cmpI(P::sge, ifOp.getResult(0), em.i32(0));
                        return SmallVector<Value>{
                            em.select(take, em.toI32(e), it[0]), em.select(take, have, it[1]),
                            em.select(take, ifOp.getResult(0), it[2]),
                            em.select(take, ifOp.getResult(1), it[3])};
                      });
                  em.ifThen(em.cmpI(P::sge, best[0], em.i32(0)), [&] {
                    Value e = em.toIndex(best[0]), d = em.toIndex(best[2]);
                    Value have = best[1], cap = best[3];
                    Value l = em.select(em.cmpI(P::slt, have, cap), have, cap);
                    em.store(em.subI(have, l), r, {s, e});
                    em.store(em.addI(em.load(r, {d, e}), l), r, {d, e});
                    em.store(em.subI(em.load(loads, s), l), loads, s);
                    em.store(em.addI(em.load(loads, d), l), loads, d);
                    setFlag(1, 1);
                  });
                });
              }
            });
            em.ifThen(em.notI(flag(1)), [&] { setFlag(0, 1); });
          },
          [&] { setFlag(0, 1); });
    }
    return SmallVector<Value>{em.addI(it[0], em.idx(1))};
  });
  em.loop(gpus, [&](Value g) { em.store(loadOf(g), out, g); });
  return success();
}

//===----------------------------------------------------------------------===//
// Prefetch (ExpertFlow)
//===----------------------------------------------------------------------===//

LogicalResult expectedExperts(RouterLowering &L, ExpectedExpertsOp op) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t n = sizeOf(op.getScores());
  Value s = L.mem(op.getScores()), set = L.allocFull(op.getSet());
  Value count = L.allocFull(op.getCount());
  Value total = em.loopCarried(em.idx(0), em.idx(n), {em.f32(0)}, [&](Value e, ValueRange it) {
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
  Value q = em.divF(em.mulF(ne, es), em.mulF(L.scalar(op.getBandwidth()), L.scalar(op.getLayerTime())));
  Value c = math::CeilOp::create(b, loc, q);
  // Clamped to [1, layers] with layers itself clamped into i32, so the conversion to
  // i32 below is exact whatever the knobs (NaN from 0/0 falls back to layers).
  c = arith::MinNumFOp::create(b, loc, c,
                               em.toF32(clampedI32(em, L.scalar(op.getLayers()), 1,
                                                   kMaxLayers)));
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
    return em.loopCarried(em.idx(0), em.idx(n), {em.i32(-1), em.i32(0)}, [&](Value e, ValueRange it) {
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
    em.ifThen(em.andI(want, em.notI(em.isSet(res, e))), [&] { insert(e, /*isRequested=*/false); });
  });
  em.loop(n, [&](Value e) { em.store(em.andI(em.load(high, e), em.load(res, e)), high, e); });
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
  Value first = em.loopCarried(em.idx(0), L.tokens(), {em.idx(0)}, [&](Value t, ValueRange it) {
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

LogicalResult emitRuleOp(RouterLowering &L, Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](EmaOp o) { return ema(L, o); })
      .Case([&](HiCapacityOp o) { return hiCapacity(L, o); })
      .Case([&](HotSetOp o) { return hotSet(L, o); })
      .Case([&](RankedOp o) { return ranked(L, o); })
      .Case([&](DifferenceOp o) {
        LoopEmitter &em = L.em();
        Value a = L.mem(o.getLhs()), c = L.mem(o.getRhs());
        Value out = L.allocFull(o.getResult());
        em.loop(o.getType().getExperts(), [&](Value e) {
          em.store(em.andI(em.load(a, e), em.select(em.isSet(c, e), em.i8(0), em.i8(1))), out, e);
        });
        return success();
      })
      .Case([&](EplbOp o) { return Eplb(L, o).run(); })
      .Case([&](DeviceLoadsOp o) { return deviceLoads(L, o); })
      .Case([&](ImbalanceOp o) { return imbalance(L, o); })
      .Case([&](GpuRequestsOp o) { return gpuRequests(L, o); })
      .Case([&](ServedLoadsOp o) { return servedLoads(L, o); })
      .Case([&](LibraReplicateOp o) { return libraReplicate(L, o); })
      .Case([&](LibraShardOp o) { return libraShard(L, o); })
      .Case([&](ExpectedExpertsOp o) { return expectedExperts(L, o); })
      .Case([&](StepSizeOp o) { return stepSize(L, o); })
      .Case([&](StepFeedbackOp o) { return stepFeedback(L, o); })
      .Case([&](TwoLevelLruOp o) { return twoLevelLru(L, o); })
      .Case([&](ResidentFirstOp o) { return residentFirst(L, o); })
      .Default([](Operation *op) { return op->emitOpError() << "has no loop lowering"; });
}

} // namespace switchyard::moe
