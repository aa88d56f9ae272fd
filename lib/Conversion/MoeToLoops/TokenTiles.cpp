//===- TokenTiles.cpp - the batch outputs over tiles of tokens -------------===//
//
// The GPU form of expert counts and vLLM's block-aligned token order. Both come from
// one histogram of the routed slots per tile of kTileTokens tokens:
//
//   hist[b][e]  = how many slots of tile b route to expert e   (parallel over tiles,
//                                                                and over e in a tile)
//   counts[e]   = sum over the tiles of hist[b][e]             (parallel over e)
//   offs[b][e]  = start[e] + sum over tiles before b           (parallel over e, a scan
//                                                                over the tiles)
//   a slot's place = offs[b][e] + the earlier slots of its tile with the same expert
//                                                               (parallel over tiles,
//                                                                and over a tile's slots)
//
// Exactly the sequential layout (token order within an expert), with no atomics and
// no walk over the batch by one thread: every loop's per-thread work is a tile (or a
// scan over the tiles). The large-batch kernels give each CTA its own tiles (the
// histogram runs where the ids are made, each CTA's scan stops at its own tiles), so
// the whole batch is never walked by one CTA; see LargeBatchPlan.cpp.
//
//===----------------------------------------------------------------------===//
#include "OpLowerings.h"

using namespace mlir;
using P = arith::CmpIPredicate;

namespace switchyard::moe::emit {

namespace {

/// scf.parallel over [lb, ub) built at the emitter's insertion point (not through
/// RouterLowering::parallelLoop: no per-iteration scratch rows), with `attr` set.
scf::ParallelOp parallelRange(LoopEmitter &em, Value lb, Value ub,
                              function_ref<void(Value)> body,
                              std::optional<NamedAttribute> attr = std::nullopt) {
  OpBuilder &b = em.builder();
  auto loop = scf::ParallelOp::create(
      b, em.location(), ValueRange{lb}, ValueRange{ub}, ValueRange{em.idx(1)},
      [&](OpBuilder &nested, Location, ValueRange ivs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        body(ivs[0]);
      });
  if (attr)
    loop->setAttr(attr->getName(), attr->getValue());
  return loop;
}

/// The number of tiles of the batch, ceil(T / kTileTokens).
Value tileCount(RouterLowering &L) {
  LoopEmitter &em = L.em();
  return em.divUI(em.addI(L.tokens(), em.idx(kTileTokens - 1)), em.idx(kTileTokens));
}

/// A parallel loop over the tiles: body(b, first slot, end slot) for the slots
/// [first token * k, end token * k) of tile b.
void tileLoop(RouterLowering &L, Value tiles, int64_t k,
              function_ref<void(Value, Value, Value)> body) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  parallelRange(
      em, em.idx(0), tiles,
      [&](Value tile) {
        Value first = em.mulI(tile, em.idx(kTileTokens));
        Value last = em.minUI(em.addI(first, em.idx(kTileTokens)), L.tokens());
        body(tile, em.mulI(first, em.idx(k)), em.mulI(last, em.idx(k)));
      },
      b.getNamedAttr(kTokenTilesAttr, b.getI64IntegerAttr(kTileTokens)));
}

/// The tile count of a [tiles, E] buffer.
Value tilesOf(LoopEmitter &em, Value hist) {
  return memref::DimOp::create(em.builder(), em.location(), hist, 0);
}

/// ids[slot / k, slot % k].
Value slotId(LoopEmitter &em, Value ids, Value slot, int64_t k) {
  return em.load(ids, {em.divUI(slot, em.idx(k)), em.remUI(slot, em.idx(k))});
}

} // namespace

Value tileHistogram(RouterLowering &L, Value idsValue, int64_t experts) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  idsValue = L.resolved(idsValue);
  auto cached = L.tileHistograms.find(idsValue);
  if (cached != L.tileHistograms.end() &&
      cached->second.getParentBlock() == b.getInsertionBlock())
    return cached->second;
  Value ids = L.mem(idsValue);
  int64_t k = cast<MemRefType>(ids.getType()).getDimSize(1);
  Value tiles = tileCount(L);
  Value hist =
      L.temporary(MemRefType::get({ShapedType::kDynamic, experts}, b.getI32Type()), tiles);
  tileLoop(L, tiles, k, [&](Value tile, Value first, Value end) {
    parallelRange(em, em.idx(0), em.idx(experts), [&](Value e) {
      Value expert = em.toI32(e);
      Value count = em.loopCarried(first, end, {em.i32(0)}, [&](Value s, ValueRange it) {
        Value same = em.cmpI(P::eq, slotId(em, ids, s, k), expert);
        return SmallVector<Value>{em.addI(it[0], em.select(same, em.i32(1), em.i32(0)))};
      })[0];
      em.store(count, hist, {tile, e});
    });
  });
  L.tileHistograms[idsValue] = hist;
  return hist;
}

void countsFromTiles(RouterLowering &L, Value hist, Value counts, int64_t experts) {
  LoopEmitter &em = L.em();
  Value tiles = tilesOf(em, hist);
  L.parallelLoop(em.idx(experts), [&](Value e) {
    Value sum = em.loopCarried(em.idx(0), tiles, {em.i32(0)}, [&](Value t, ValueRange it) {
      return SmallVector<Value>{em.addI(it[0], em.load(hist, {t, e}))};
    })[0];
    em.store(sum, counts, e);
  });
}

void placeByTiles(RouterLowering &L, Value hist, Value ids, Value start, int64_t block,
                  Value sorted, Value sortedSize, Value blocks, Value blockCount) {
  LoopEmitter &em = L.em();
  OpBuilder &b = em.builder();
  int64_t experts = cast<MemRefType>(hist.getType()).getDimSize(1);
  int64_t k = cast<MemRefType>(ids.getType()).getDimSize(1);
  Value tiles = tilesOf(em, hist);
  Value offs =
      L.temporary(MemRefType::get({ShapedType::kDynamic, experts}, b.getI32Type()), tiles);
  // Where each tile's slots of expert e start: its segment's start plus the slots of e
  // in the tiles before.
  parallelRange(
      em, em.idx(0), em.idx(experts),
      [&](Value e) {
        em.loopCarried(em.idx(0), tiles, {em.load(start, e)}, [&](Value t, ValueRange it) {
          em.store(it[0], offs, {t, e});
          return SmallVector<Value>{em.addI(it[0], em.load(hist, {t, e}))};
        });
      },
      b.getNamedAttr(kTileScanAttr, b.getUnitAttr()));
  // Each slot: its tile's offset for its expert plus the earlier slots of the tile
  // with that expert. The first slot of each block of an expert's segment also names
  // the block's expert (every block holds at least one slot: its count is padded up
  // to the block, not beyond).
  tileLoop(L, tiles, k, [&](Value tile, Value first, Value end) {
    parallelRange(em, first, end, [&](Value s) {
      Value e = slotId(em, ids, s, k);
      Value valid =
          em.andI(em.cmpI(P::sge, e, em.i32(0)), em.cmpI(P::slt, e, em.i32(experts)));
      em.ifThen(valid, [&] {
        Value rank = em.loopCarried(first, s, {em.i32(0)}, [&](Value r, ValueRange it) {
          Value same = em.cmpI(P::eq, slotId(em, ids, r, k), e);
          return SmallVector<Value>{em.addI(it[0], em.select(same, em.i32(1), em.i32(0)))};
        })[0];
        Value pos = em.toIndex(em.addI(em.load(offs, {tile, em.toIndex(e)}), rank));
        em.ifThen(em.cmpI(P::ult, pos, sortedSize),
                  [&] { em.store(em.toI32(s), sorted, pos); });
        Value blockAt = em.divUI(pos, em.idx(block));
        Value firstOfBlock = em.cmpI(P::eq, em.remUI(pos, em.idx(block)), em.idx(0));
        em.ifThen(em.andI(firstOfBlock, em.cmpI(P::ult, blockAt, blockCount)),
                  [&] { em.store(e, blocks, blockAt); });
      });
    });
  });
}

} // namespace switchyard::moe::emit
