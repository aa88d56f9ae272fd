//===- RouterLowering.h - moe router -> loops on buffers --------*- C++ -*-===//
//
// The state of lowering one `moe.router` to a `func.func` on memrefs: how each moe value
// is stored (a full buffer [T, X] / [E], a per-token row buffer inside a fused token
// loop, a scalar, or the two arrays of a placement), and the emitters for every op.
// RouterLowering.cpp drives the walk (stages, phase gates, outputs); each op writes
// its own loops through LoopLoweringOpInterface (OpLowerings.h, one file per family).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOLOOPS_ROUTERLOWERING_H
#define SWITCHYARD_LIB_CONVERSION_MOETOLOOPS_ROUTERLOWERING_H

#include "LoopEmitter.h"

#include "switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.h"
#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace switchyard::moe {

/// How one moe value is held after lowering.
struct Stored {
  mlir::Value mem;      // a memref (tensors, sets), or null
  mlir::Value scalar;   // an i32/i64/f32 value, or null
  mlir::Value replicas; // placement: replica_count memref<E x i32>
  mlir::Value log2phy;  // placement: log2phy memref<E x R x i32>
};

/// A view of one token's row of a value: either row `row` of a full [T, X] buffer, or
/// a per-token buffer of X elements (row is null), or a 1-D [X] value (row is null).
struct RowRef {
  mlir::Value mem;
  mlir::Value row;
};

class RouterLowering {
public:
  RouterLowering(PolicyOpInterface router, mlir::OpBuilder &builder,
                 bool laneParallel = false);

  /// Builds `func.func @<router name>` with the lowered body next to the router.
  mlir::FailureOr<mlir::func::FuncOp> run();

  // Used by the op emitters.
  LoopEmitter &em() { return emitter; }
  mlir::Value tokens() { return numTokens; }
  const Stored &get(mlir::Value v);
  mlir::Value mem(mlir::Value v) { return get(v).mem; }
  /// The value `v` stands for (through stage and phase-gate results).
  mlir::Value resolved(mlir::Value v) { return resolve(v); }
  mlir::Value scalar(mlir::Value v) { return get(v).scalar; }
  /// A full buffer for `v` (its router output when it is one).
  mlir::Value allocFull(mlir::Value v);
  /// Size of dimension `dim` of `v` as an index value.
  mlir::Value dimSize(mlir::Value v, unsigned dim);
  /// Row access inside a fused token loop.
  RowRef rowIn(mlir::Value v, mlir::Value t);
  RowRef rowOut(mlir::Value v, mlir::Value t);
  /// A scratch buffer of n elements, private to the current token when called inside
  /// a token-parallel loop (a row of a [T, n] buffer), reused across the iterations of
  /// sequential loops otherwise. Allocated on the heap before the loop nest of the op
  /// being lowered (stack buffers in loops would grow the stack with every token).
  mlir::Value scratch(int64_t n, mlir::Type elem);
  /// A parallel loop over [0, extent) (tokens or experts) whose iterations are
  /// independent; scratch buffers requested inside are private to each iteration.
  void parallelLoop(mlir::Value extent, llvm::function_ref<void(mlir::Value)> body);

  // Loops over one token's experts. Inside a token-parallel loop with the lane-parallel
  // option they are nested scf.parallel loops (moe-map-to-gpu spreads them over the
  // lanes of the token's warp); elsewhere plain sequential loops.
  /// True when loops over a row are written lane-parallel here.
  bool laneParallelHere() const;
  /// True when reductions over the experts are written block-parallel here: the GPU
  /// form outside any parallel loop (set selection), mapped onto one block.
  bool blockParallelHere() const;
  /// `body(e)` for every e in [0, n); the iterations are independent.
  void forEachLane(mlir::Value n, llvm::function_ref<void(mlir::Value)> body);
  enum class Combine { AddF, MaximumF, MaxUI, AddI };
  /// `init` combined with `value(e)` for every e in [0, n); `init` must be the identity
  /// of `combine` (0, -inf, 0): the lanes each start from it.
  mlir::Value reduceLanes(mlir::Value n, mlir::Value init, Combine combine,
                          llvm::function_ref<mlir::Value(mlir::Value)> value);
  /// LoopEmitter::argBest with the same ranking, as one reduction when lane-parallel.
  std::pair<mlir::Value, mlir::Value>
  argBest(mlir::Value n, llvm::function_ref<mlir::Value(mlir::Value)> eligible,
          llvm::function_ref<mlir::Value(mlir::Value)> score);
  /// The parallel form's arg-max (lane- or block-parallel only): the best id whose
  /// packed key (see LaneLoops.cpp) is below `below` (an i64, compared unsigned; all
  /// ones for no bound), its score and its key (0 when none). Successive rounds that
  /// pass the previous round's key need no flags to exclude the earlier winners: the
  /// keys of distinct ids differ, so the rounds visit the ranking in order.
  struct Ranked {
    mlir::Value id, score, key;
  };
  Ranked argBestBelow(mlir::Value n, llvm::function_ref<mlir::Value(mlir::Value)> eligible,
                      llvm::function_ref<mlir::Value(mlir::Value)> score,
                      mlir::Value below);

  /// A rule relating several scalar operands (ScalarRule::relational), at run time:
  /// when `broken` holds, the C entry returns the status of the first knob among
  /// `operands` (2 + its index, as for its range) instead of 0; the code goes on with
  /// clamped values, outputs the caller must not use. With no knob among them the
  /// verifier has checked the constants and nothing is emitted.
  void failIf(mlir::Value broken, mlir::ValueRange operands);

  /// The GPU form's per-tile histograms of routed ids (TokenTiles.cpp): the ids value
  /// -> its [tiles, E] counts, made once for expert counts and block alignment.
  llvm::DenseMap<mlir::Value, mlir::Value> tileHistograms;

  /// Binds a scalar result (an i64/f32 computed by an op).
  void setScalar(mlir::Value v, mlir::Value scalar) { stored[v].scalar = scalar; }
  /// A temporary buffer freed at the end of the current scope.
  mlir::Value temporary(mlir::MemRefType type, mlir::ValueRange dynamicSizes);
  /// Row `i` of a 2-D buffer as a 1-D view of its n elements.
  mlir::Value rowView(mlir::Value buffer, mlir::Value i, int64_t n);
  mlir::Value at(RowRef r, mlir::Value i) {
    return r.row ? emitter.load(r.mem, {r.row, i}) : emitter.load(r.mem, i);
  }
  void put(mlir::Value value, RowRef r, mlir::Value i) {
    if (r.row)
      emitter.store(value, r.mem, {r.row, i});
    else
      emitter.store(value, r.mem, i);
  }

private:
  mlir::LogicalResult lowerBlock(mlir::Block &block);
  mlir::LogicalResult lowerOp(mlir::Operation *op);
  mlir::LogicalResult lowerStage(StageOp stage);
  /// Consecutive token-loop stages: their row ops in one token loop, then the last
  /// stage's whole ops.
  mlir::LogicalResult lowerStages(llvm::ArrayRef<StageOp> stages);
  /// A stage's results stand for the values its body yields.
  void aliasStageResults(StageOp stage);
  mlir::LogicalResult lowerWhen(WhenOp when);
  /// One token-parallel loop over the row ops in `ops`; values not in `local` escape.
  mlir::LogicalResult lowerRowLoop(llvm::ArrayRef<mlir::Operation *> ops);
  mlir::LogicalResult lowerRowOp(mlir::Operation *op, mlir::Value t);
  mlir::LogicalResult lowerWholeOp(mlir::Operation *op);
  void copyInto(mlir::Value dst, mlir::Value src, mlir::Value like);
  mlir::Value resolve(mlir::Value v);

  PolicyOpInterface router; // the router or rule being lowered
  mlir::OpBuilder &b;
  LoopEmitter emitter;
  mlir::Value numTokens;
  llvm::DenseMap<mlir::Value, Stored> stored;
  llvm::DenseMap<mlir::Value, mlir::Value> destinations; // value -> output buffer
  llvm::DenseMap<mlir::Value, mlir::Value> aliases;      // stage/gate result -> inner value
  llvm::DenseMap<mlir::Value, mlir::Value> rowLocal;     // value -> per-token buffer
  llvm::SmallVector<mlir::Value> temporaries;            // freed at the end
  llvm::DenseMap<mlir::Value, int32_t> knobIndex;        // knob -> field of NAME_knobs
  mlir::Block *entryBlock = nullptr;
  mlir::Value statusSlot; // memref<i32>: the status failIf sets (made by the first)
  mlir::OpBuilder::InsertPoint prologue; // where scratch buffers are allocated
  mlir::Value parallelToken;             // the iteration of the enclosing parallel loop
  mlir::Value parallelExtent;            // its trip count
  bool laneParallel;                     // the lane-parallel (GPU) form of row code
};

/// The memref type a moe value is stored in (sets are i8 flags).
mlir::MemRefType storageType(mlir::Type type);

} // namespace switchyard::moe

#endif
