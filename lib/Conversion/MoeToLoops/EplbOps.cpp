//===- EplbOps.cpp - loops of the EPLB balancing ops ------------------------===//
//
// Rule ops run on the host once per scheduling interval: plain sequential loops over
// the experts (and devices), in the order the papers' pseudo-code gives.
// DeepSeek's EPLB: balanced packing and replication (hierarchical or global), per-GPU
// loads and their imbalance.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;
using F = arith::CmpFPredicate;

namespace switchyard::moe {
using namespace emit;

namespace {

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
    Value best = em.loopCarried(
        em.idx(0), em.idx(packs), {em.i32(-1), em.f32(0)}, [&](Value p, ValueRange it) {
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
  int64_t groups = hierarchical ? op.getGroups() : 1,
          nodes = hierarchical ? op.getNodes() : 1;
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
    Value sum =
        em.loopCarried(zero, em.idx(groupSize), {em.f32(0)}, [&](Value j, ValueRange it) {
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
    Value first = em.mulI(
        em.addI(em.mulI(slot, em.idx(groupsPerNode)), em.toIndex(em.load(groupRank, g))),
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
    Value mlog =
        em.addI(em.mulI(node, em.idx(expertsPerNode)), em.toIndex(em.load(phy2mlog, phy)));
    Value logical = em.load(mlog2log, mlog);
    em.store(logical, phy2log, p);
    em.store(em.toI32(p), log2phy,
             {em.toIndex(logical), em.toIndex(em.load(phyRank, phy))});
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
      Value sum = em.loopCarried(
          em.idx(0), em.idx(perGpu), {em.f32(0)}, [&](Value j, ValueRange it) {
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
    Value sum =
        em.loopCarried(em.idx(0), em.idx(perGpu), {em.f32(0)}, [&](Value j, ValueRange it) {
          Value e = em.load(phy2log, em.addI(em.mulI(d, em.idx(perGpu)), j));
          Value valid =
              em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(experts)));
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
  auto res = em.loopCarried(
      em.idx(0), em.idx(n), {em.f32(0), em.negInf()}, [&](Value i, ValueRange it) {
        Value v = em.load(x, i);
        return SmallVector<Value>{
            em.addF(it[0], v),
            arith::MaximumFOp::create(em.builder(), em.location(), it[1], v)};
      });
  Value mean = em.divF(res[0], em.f32(static_cast<double>(n)));
  Value ratio = em.divF(res[1], mean);
  em.store(em.select(em.cmpF(F::OEQ, res[0], em.f32(0)), em.f32(1), ratio), out, em.idx(0));
  return success();
}

} // namespace

LogicalResult eplb(RouterLowering &L, EplbOp op) { return Eplb(L, op).run(); }

void registerEplbOpLowerings(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, MoeDialect *) {
    attachLoopLowerings<eplb, deviceLoads, imbalance>(context);
  });
}

} // namespace switchyard::moe
