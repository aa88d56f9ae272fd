//===- LaneLoops.cpp - loops over one token's experts ---------------------===//
//
// The per-token code of a router walks the experts of one row: maxima, sums, arg-max
// rounds, element-wise maps. On the host these are sequential loops. With the
// lane-parallel option they are nested scf.parallel loops (and scf.reduce reductions)
// inside the token loop, which moe-map-to-gpu spreads over the 32 lanes of the warp that
// owns the token (lane-strided loops, butterfly shuffles for the reductions).
//
// An arg-max is a reduction of a single ordered 64-bit key per expert:
//   key = (rank(score) + 1) << 32 | ~id     for an eligible expert, 0 otherwise,
// where rank is the IEEE total order of the score with -0 folded into +0 and NaN mapped
// to 0 (below every number). The largest key is the highest score, ties to the lower id,
// exactly the ranking of LoopEmitter::outranks, and unsigned max is associative and
// commutative, so any reduction tree gives the same winner.
//
//===----------------------------------------------------------------------===//
#include "RouterLowering.h"

using namespace mlir;
using P = arith::CmpIPredicate;

namespace switchyard::moe {

bool RouterLowering::laneParallelHere() const {
  return laneParallel && parallelToken && parallelExtent == numTokens;
}

bool RouterLowering::blockParallelHere() const { return laneParallel && !parallelToken; }

void RouterLowering::forEachLane(Value n, function_ref<void(Value)> body) {
  if (!laneParallelHere())
    return emitter.loop(emitter.idx(0), n, body);
  Location loc = router.getLoc();
  scf::ParallelOp::create(
      b, loc, ValueRange{emitter.idx(0)}, ValueRange{n}, ValueRange{emitter.idx(1)},
      [&](OpBuilder &nested, Location, ValueRange ivs) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        body(ivs[0]);
      });
}

static Value combineValues(OpBuilder &b, Location loc, RouterLowering::Combine combine,
                           Value x, Value y) {
  switch (combine) {
  case RouterLowering::Combine::AddF:
    return arith::AddFOp::create(b, loc, x, y);
  case RouterLowering::Combine::MaximumF:
    return arith::MaximumFOp::create(b, loc, x, y);
  case RouterLowering::Combine::MaxUI:
    return arith::MaxUIOp::create(b, loc, x, y);
  case RouterLowering::Combine::AddI:
    return arith::AddIOp::create(b, loc, x, y);
  }
  llvm_unreachable("unknown combine");
}

Value RouterLowering::reduceLanes(Value n, Value init, Combine combine,
                                  function_ref<Value(Value)> value) {
  Location loc = router.getLoc();
  if (!laneParallelHere() && !blockParallelHere())
    return emitter.loopCarried(emitter.idx(0), n, {init}, [&](Value e, ValueRange it) {
      return SmallVector<Value>{combineValues(b, loc, combine, it[0], value(e))};
    })[0];
  auto loop = scf::ParallelOp::create(
      b, loc, ValueRange{emitter.idx(0)}, ValueRange{n}, ValueRange{emitter.idx(1)},
      ValueRange{init}, [&](OpBuilder &nested, Location, ValueRange ivs, ValueRange) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        Value v = value(ivs[0]);
        auto reduce = scf::ReduceOp::create(b, loc, ValueRange{v});
        Block &region = reduce.getReductions()[0].front();
        b.setInsertionPointToEnd(&region);
        scf::ReduceReturnOp::create(
            b, loc,
            combineValues(b, loc, combine, region.getArgument(0), region.getArgument(1)));
      });
  return loop.getResult(0);
}

std::pair<Value, Value> RouterLowering::argBest(Value n,
                                                function_ref<Value(Value)> eligible,
                                                function_ref<Value(Value)> score) {
  if (!laneParallelHere() && !blockParallelHere())
    return emitter.argBest(n, eligible, score);
  Ranked best = argBestBelow(n, eligible, score, emitter.i64(-1));
  return {best.id, best.score};
}

RouterLowering::Ranked RouterLowering::argBestBelow(Value n,
                                                    function_ref<Value(Value)> eligible,
                                                    function_ref<Value(Value)> score,
                                                    Value below) {
  LoopEmitter &em = emitter;
  Location loc = router.getLoc();
  Value key = reduceLanes(n, em.i64(0), Combine::MaxUI, [&](Value e) {
    Value v = score(e);
    Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), em.addF(v, em.f32(0)));
    Value rank = em.select(em.cmpI(P::slt, bits, em.i32(0)),
                           arith::XOrIOp::create(b, loc, bits, em.i32(-1)),
                           arith::XOrIOp::create(b, loc, bits, em.i32(INT32_MIN)));
    rank = em.select(em.isNaN(v), em.i32(0), rank);
    Value high = em.addI(arith::ExtUIOp::create(b, loc, b.getI64Type(), rank), em.i64(1));
    Value low = arith::ExtUIOp::create(
        b, loc, b.getI64Type(), arith::XOrIOp::create(b, loc, em.toI32(e), em.i32(-1)));
    Value packed = em.orI(arith::ShLIOp::create(b, loc, high, em.i64(32)), low);
    // (rank + 1) < 2^32, so no key is all ones: that bound excludes nothing.
    Value ok = em.andI(eligible(e), em.cmpI(P::ult, packed, below));
    return em.select(ok, packed, em.i64(0));
  });
  Value found = em.cmpI(P::ne, key, em.i64(0));
  Value id = arith::XOrIOp::create(
      b, loc, arith::TruncIOp::create(b, loc, b.getI32Type(), key), em.i32(-1));
  id = em.select(found, id, em.i32(-1));
  Value best =
      em.select(found, score(em.toIndex(em.select(found, id, em.i32(0)))), em.f32(0));
  return {id, best, key};
}

} // namespace switchyard::moe
