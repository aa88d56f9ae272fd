//===- OpLowerings.h - the loops of each moe op family ---------*- C++ -*-===//
//
// Each op family's file (TokenOps, BatchOps, SetOps, RouteOps, CapacityOps; ResidencyOps,
// EplbOps, LibraOps, PrefetchOps) writes its ops' loops as plain functions
// `LogicalResult f(RouterLowering &, SomeOp[, Value token])` and attaches them to the
// ops as LoopLoweringOpInterface models with `attachLoopLowerings<f, g, ...>`. A row
// function (with `token`) is for ops with the RowWise trait. The shared building
// blocks below keep every op's ranking the same: ties toward the lower id, NaN last.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOLOOPS_OPLOWERINGS_H
#define SWITCHYARD_LIB_CONVERSION_MOETOLOOPS_OPLOWERINGS_H

#include "RouterLowering.h"

#include "mlir/IR/DialectRegistry.h"

namespace switchyard::moe {

//===----------------------------------------------------------------------===//
// Attaching the functions to the ops
//===----------------------------------------------------------------------===//

namespace detail {
template <typename Fn> struct LoweringSignature;
template <typename OpT>
struct LoweringSignature<mlir::LogicalResult (*)(RouterLowering &, OpT, mlir::Value)> {
  using Op = OpT;
  static constexpr bool perRow = true;
};
template <typename OpT>
struct LoweringSignature<mlir::LogicalResult (*)(RouterLowering &, OpT)> {
  using Op = OpT;
  static constexpr bool perRow = false;
};

/// The LoopLoweringOpInterface model that calls `Fn`.
template <auto Fn>
struct FunctionLowering
    : LoopLoweringOpInterface::ExternalModel<FunctionLowering<Fn>,
                                             typename LoweringSignature<decltype(Fn)>::Op> {
  using Signature = LoweringSignature<decltype(Fn)>;
  mlir::LogicalResult lowerToLoops(mlir::Operation *op, RouterLowering &lowering,
                                   mlir::Value token) const {
    auto concrete = mlir::cast<typename Signature::Op>(op);
    if constexpr (Signature::perRow) {
      if (!token)
        return op->emitOpError() << "is a per-token op and must be lowered per row";
      return Fn(lowering, concrete, token);
    } else {
      return Fn(lowering, concrete);
    }
  }
};
} // namespace detail

/// Attaches each function as the loop lowering of the op it takes.
template <auto... Fns> void attachLoopLowerings(mlir::MLIRContext *context) {
  (detail::LoweringSignature<decltype(Fns)>::Op::template attachInterface<
       detail::FunctionLowering<Fns>>(*context),
   ...);
}

/// One registration per family file.
void registerTokenOpLowerings(mlir::DialectRegistry &registry);
void registerBatchOpLowerings(mlir::DialectRegistry &registry);
void registerSetOpLowerings(mlir::DialectRegistry &registry);
void registerRouteOpLowerings(mlir::DialectRegistry &registry);
void registerCapacityOpLowerings(mlir::DialectRegistry &registry);
void registerResidencyOpLowerings(mlir::DialectRegistry &registry);
void registerEplbOpLowerings(mlir::DialectRegistry &registry);
void registerLeastLoadedOpLowerings(mlir::DialectRegistry &registry);
void registerLibraOpLowerings(mlir::DialectRegistry &registry);
void registerPrefetchOpLowerings(mlir::DialectRegistry &registry);

//===----------------------------------------------------------------------===//
// Shared building blocks (EmitHelpers.cpp, BlockParallel.cpp)
//===----------------------------------------------------------------------===//

namespace emit {
/// The experts of a set or the last dimension of a score tensor.
int64_t expertsOf(mlir::Value v);
/// A scratch buffer of n flags, cleared.
mlir::Value clearedFlags(RouterLowering &L, int64_t n);
/// An i1 true.
mlir::Value always(LoopEmitter &em);
/// The buffer size a top-k of `count` (an i64 parameter) needs: its value when it is a
/// constant (knobs are frozen before lowering), else every expert.
int64_t capacityFor(mlir::Value count, int64_t n);
/// Dimension 0 of a shaped value.
inline int64_t sizeOf(mlir::Value v) {
  return mlir::cast<mlir::ShapedType>(v.getType()).getDimSize(0);
}
/// A 1-D buffer of n elements, allocated before the op's loops (so that loops may ask
/// for one) and freed at the end of the policy.
inline mlir::Value buffer(RouterLowering &L, int64_t n, mlir::Type elem) {
  return L.scratch(n, elem);
}
/// An i64 parameter clamped to [lo, hi], as i32 (hi <= INT32_MAX): knob values are
/// i64, rule state is i32, and truncating would turn 2^32 into 0.
inline mlir::Value clampedI32(LoopEmitter &em, mlir::Value v, int64_t lo, int64_t hi) {
  using P = mlir::arith::CmpIPredicate;
  v = em.select(em.cmpI(P::slt, v, em.i64(lo)), em.i64(lo), v);
  v = em.select(em.cmpI(P::sgt, v, em.i64(hi)), em.i64(hi), v);
  return em.toI32(v);
}
/// The maximum of a row of n scores.
mlir::Value maxOfRow(RouterLowering &L, RowRef x, int64_t n);
/// Picks the k best of a row among the eligible ids not yet marked in `taken`, marks
/// them, and calls `onPick(j, id, score)` for each slot j (id -1 when none is left).
void topKRow(RouterLowering &L, mlir::Value n, mlir::Value k, int64_t capacity,
             mlir::Value taken, llvm::function_ref<mlir::Value(mlir::Value)> eligible,
             llvm::function_ref<mlir::Value(mlir::Value)> score,
             llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value)> onPick);
/// min(max(v, 0), hi) for an i64 parameter, as an index.
mlir::Value clampedCount(LoopEmitter &em, mlir::Value v, int64_t hi);
void copySet(LoopEmitter &em, mlir::Value dst, mlir::Value src, int64_t n);
/// The number of members of a set of n flags, as i64.
mlir::Value popcount(LoopEmitter &em, mlir::Value set, int64_t n);
/// Adds up to `count` best experts outside `set`, by `scores`.
void addBest(RouterLowering &L, mlir::Value set, mlir::Value scores, mlir::Value count,
             int64_t n);

// Block-parallel batch-wide building blocks for the GPU form (BlockParallel.cpp).
/// `body(chunk, first, last)` for `chunks` chunks of consecutive items of [0, n), in
/// parallel.
void chunkedLoop(RouterLowering &L, mlir::Value n, mlir::Value chunks,
                 llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value)> body);
/// For every item i of [0, n) with bucket k = bucketOf(i) in [0, buckets) (an i32;
/// others are skipped): place(i, base(k) + the number of earlier items in bucket k).
void stableScatter(RouterLowering &L, mlir::Value n, int64_t buckets,
                   llvm::function_ref<mlir::Value(mlir::Value)> bucketOf,
                   llvm::function_ref<mlir::Value(mlir::Value)> base,
                   llvm::function_ref<void(mlir::Value, mlir::Value)> place);
/// out[i] = value(0) + ... + value(i - 1) (i32) for i in [0, n).
/// The GPU form's histogram of `ids` (a [T, K] i32 value) per tile of kTileTokens
/// tokens: a [tiles, E] i32 buffer, made at the first call for `ids` in this block
/// (TokenTiles.cpp).
mlir::Value tileHistogram(RouterLowering &L, mlir::Value ids, int64_t experts);
/// counts[e] = the sum of a tile histogram's column e.
void countsFromTiles(RouterLowering &L, mlir::Value hist, mlir::Value counts,
                     int64_t experts);
/// vLLM's block-aligned order from a tile histogram of `ids` (a [T, K] memref):
/// sorted[start[e] + rank] = slot for each valid slot (its rank among the batch's
/// slots of e, in order), and the expert of each block holding a slot.
void placeByTiles(RouterLowering &L, mlir::Value hist, mlir::Value ids, mlir::Value start,
                  int64_t block, mlir::Value sorted, mlir::Value sortedSize,
                  mlir::Value blocks, mlir::Value blockCount);

void exclusiveScan(RouterLowering &L, mlir::Value n, mlir::Value out,
                   llvm::function_ref<mlir::Value(mlir::Value)> value);
/// value(0) + ... + value(n - 1) (i32), as a block reduction.
mlir::Value blockSum(RouterLowering &L, mlir::Value n,
                     llvm::function_ref<mlir::Value(mlir::Value)> value);

/// out[e] = fn(in[e]) for every expert e of token t's row.
template <typename Fn>
mlir::LogicalResult elementwiseRow(RouterLowering &L, mlir::Value in, mlir::Value out,
                                   mlir::Value t, Fn fn) {
  RowRef x = L.rowIn(in, t), y = L.rowOut(out, t);
  L.forEachLane(L.em().idx(expertsOf(in)),
                [&](mlir::Value e) { L.put(fn(L.at(x, e), e), y, e); });
  return mlir::success();
}

/// A set whose flag for expert e is fn(e) (an i8).
template <typename Fn>
mlir::LogicalResult perExpertSet(RouterLowering &L, mlir::Value result, Fn fn) {
  LoopEmitter &em = L.em();
  mlir::Value out = L.allocFull(result);
  em.loop(expertsOf(result), [&](mlir::Value e) { em.store(fn(e), out, e); });
  return mlir::success();
}
} // namespace emit

} // namespace switchyard::moe

#endif
