//===- KernelBuilder.h - maps a lowered router body onto threads -*- C++ -*-===//
//
// The state of mapping one kernel body (moe-map-to-gpu): BlockMapping.cpp maps
// block-strided loops, block reductions and thread-0 phases, WarpMapping.cpp the
// warp-per-token loops (lane-strided loops, butterfly shuffles, lane-0 runs), and
// Workspace.cpp places temporaries in the caller's workspace. Target-specific
// operations go through GpuTargetInfo.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_KERNELBUILDER_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_KERNELBUILDER_H

#include "switchyard/Conversion/MoeToGPU/GpuTargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

namespace switchyard::moe::gpu_mapping {

using namespace mlir;

constexpr int32_t kWarpSize = 32;

/// True when `op` contains a parallel loop.
bool containsParallel(Operation *op);
/// A parallel loop written in the lane-parallel form: its body loops over a row.
bool hasLaneLoops(scf::ParallelOp loop);
/// The result of reduction region `region` applied to (a, b), built at `b`'s point.
Value combineWith(OpBuilder &b, Region &region, Value x, Value y);
/// Replaces a one-dimensional parallel loop without results by
/// `scf.for i = lb + first to ub step stride` with the same body.
scf::ForOp toStridedLoop(OpBuilder &b, Location loc, scf::ParallelOp loop, Value first,
                         Value stride);
/// Moves `run` (ops of one block, in order) into `scf.if cond` built at the insertion
/// point; the values the run makes for later code come out of the if (zeros on the
/// other threads) in `escaping`.
scf::IfOp guardOps(OpBuilder &b, Location loc, ArrayRef<Operation *> run, Value cond,
                   SmallVector<Value> &escaping);

/// The discardable attribute on a memref.view of the workspace that holds one
/// temporary (Workspace.cpp): its bytes overlap no other view's, so accesses through
/// it never conflict with accesses through another (BarrierElimination.cpp).
constexpr llvm::StringLiteral kWorkspaceTemporaryAttr =
    MoeDialect::WorkspaceTemporaryAttrHelper::getNameStr();

/// Erases the barriers of `kernel`'s body block that order no conflicting pair of
/// memory accesses (BarrierElimination.cpp); returns how many.
int eliminateRedundantBarriers(gpu::GPUFuncOp kernel, const GpuTargetInfo &target);

class KernelBuilder {
public:
  KernelBuilder(const GpuTargetInfo &target, OpBuilder &b, Location loc, Value tid,
                Value threads, Value workspace, Value tokens)
      : target(target), b(b), loc(loc), tid(tid), threads(threads), workspace(workspace),
        tokens(tokens) {}

  /// Maps one block of the kernel body in place.
  void mapBlock(Block &block);
  /// Starts the temporaries at `offset` (workspace reserved in front of them).
  void reserve(Value offset, int64_t perToken, int64_t fixed) {
    workspaceOffset = offset;
    perTokenBytes += perToken;
    fixedBytes += fixed;
  }
  /// Lane and warp of this thread.
  Value lane, warp, warps;
  /// Block-shared scratch (i64 slots): [0, 64) per-warp partials of block reductions,
  /// [64, 96) values thread 0 broadcasts to the block.
  Value shared;
  static constexpr int64_t kSharedSlots = 96, kBroadcastBase = 64;
  /// Set when a run or a reduction needs more shared slots than there are.
  bool tooManySlots = false;
  /// Bytes of workspace the kernel needs: perToken * T + fixed.
  int64_t perTokenBytes = 0, fixedBytes = 0;
  /// A value type the warp shuffles cannot carry, if one was met.
  Type unsupported;

private:
  Value workspaceOffset;
  void barrier() { gpu::BarrierOp::create(b, loc); }
  void mapParallel(scf::ParallelOp loop);
  void mapBlockReduction(scf::ParallelOp loop);
  void guardRun(ArrayRef<Operation *> run);
  /// After `guard` (run by thread 0, or by warp 0 with `storeIf` its lane 0): the
  /// `escaping` values through shared slots to every thread, between two barriers.
  void broadcastFromThreadZero(scf::IfOp guard, SmallVector<Value> &escaping,
                               Value storeIf);
  /// A loop of set-selection rounds that warp 0 runs alone: a loop around expert-sized
  /// (static-bound, unnested) parallel loops, with no temporaries, fences or barriers.
  bool runsOnOneWarp(Operation *op) const;
  void mapOnWarpZero(Operation *op);
  Value toBits(Value v);
  Value fromBits(Value bits, Type type);
  Value sharedSlot(Value slot) { return memref::LoadOp::create(b, loc, shared, slot); }
  // The warp-per-token mapping of a lane-parallel loop.
  void mapWarpLoop(scf::ParallelOp loop);
  void mapWarpBlock(Block &block);
  void mapLaneLoop(scf::ParallelOp loop);
  /// The reduction `loop` folded by strided iterations (first, first + count, ...) and
  /// then across the 32 lanes of each warp (butterfly): every lane holds its warp's
  /// value. The insertion point is left after it.
  SmallVector<Value> foldAcrossWarp(scf::ParallelOp loop, Value first, Value count);
  void guardLaneRun(ArrayRef<Operation *> run);
  Value shuffle(Value v, Value offset, gpu::ShuffleMode mode);
  void warpBarrier() { target.createWarpBarrier(b, loc); }
  void replaceAlloc(memref::AllocOp alloc);
  int64_t tokensPerRow(Value rows) const;

  const GpuTargetInfo &target;
  OpBuilder &b;
  Location loc;
  Value tid, threads, workspace, tokens;
};

} // namespace switchyard::moe::gpu_mapping

#endif
