//===- MapToGPU.cpp - lowered routers -> single-CTA GPU kernels -----------===//
//
// The GPU mapping of the target-neutral loop IR (see moe-lower-to-loops): the whole
// policy becomes ONE kernel for one CTA, the decode-size contract (every token of the
// batch in one block). In the kernel body:
// * a token-parallel loop whose body loops over the token's experts (the lane-parallel
//   form: nested scf.parallel loops) becomes one WARP per token (t = warp, warp +
//   warps, ...): each nested loop is lane-strided (e = lane, lane + 32, ...), each
//   reduction combines the lane's elements and then the 32 lanes with butterfly
//   shuffles (every lane ends with the result), the remaining sequential row code with
//   side effects runs on lane 0 and broadcasts what it computes with a shuffle, and a
//   warp barrier (bar.warp.sync) follows every step that wrote memory;
// * any other parallel loop (over tokens or experts) becomes a block-strided loop, one
//   thread per iteration (i = tid, tid + blockDim, ...), followed by a barrier;
// * a run of sequential code (batch reductions, set selection, counts, alignment) runs
//   on thread 0, followed by a barrier; the values it makes for later runs come out of
//   the guarding scf.if;
// * a phase gate (scf.if whose branches hold token loops) has a uniform condition, so
//   each branch is mapped the same way;
// * temporaries (memref.alloc) become views into a caller-provided workspace (an i8
//   buffer passed as the last kernel parameter) at 16-byte aligned offsets.
// Pure code (constants, index arithmetic, views) runs on every thread.
//
//===----------------------------------------------------------------------===//
#include "LargeBatchKernels.h"

#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEMAPTOGPU
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;

namespace {

constexpr int32_t kWarpSize = 32;

bool containsParallel(Operation *op) {
  bool found = false;
  op->walk([&](scf::ParallelOp) { found = true; });
  return found;
}

/// A parallel loop written in the lane-parallel form: its body loops over a row.
bool hasLaneLoops(scf::ParallelOp loop) {
  for (Operation &op : loop.getBody()->without_terminator())
    if (containsParallel(&op))
      return true;
  return false;
}

/// Splits `scf.parallel (i, j, ...)` (the canonicalizer merges perfectly nested parallel
/// loops, e.g. a token loop around a lane loop) back into nested one-dimensional loops,
/// the form the mapping understands: the outer dimension is the token (or expert).
void splitMultiDimParallel(scf::ParallelOp loop) {
  if (loop.getNumLoops() < 2 || !loop.getInitVals().empty())
    return;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Block &old = loop.getRegion().front();
  auto outer = scf::ParallelOp::create(
      b, loc, ValueRange{loop.getLowerBound()[0]}, ValueRange{loop.getUpperBound()[0]},
      ValueRange{loop.getStep()[0]}, [&](OpBuilder &ob, Location, ValueRange outerIvs) {
        auto inner = scf::ParallelOp::create(
            ob, loc, loop.getLowerBound().drop_front(), loop.getUpperBound().drop_front(),
            loop.getStep().drop_front(), [&](OpBuilder &, Location, ValueRange) {});
        Block &body = inner.getRegion().front();
        body.getTerminator()->erase(); // the builder's empty scf.reduce
        old.getArgument(0).replaceAllUsesWith(outerIvs[0]);
        for (auto [from, to] : llvm::zip(old.getArguments().drop_front(), body.getArguments()))
          from.replaceAllUsesWith(to);
        body.getOperations().splice(body.end(), old.getOperations());
      });
  (void)outer;
  loop.erase();
  // A deeper nest is split again at the next level.
  outer.walk([](scf::ParallelOp nested) { splitMultiDimParallel(nested); });
}

/// The result of reduction region `region` applied to (a, b), built at `b`'s point.
Value combineWith(OpBuilder &b, Region &region, Value x, Value y) {
  Block &block = region.front();
  IRMapping mapping;
  mapping.map(block.getArgument(0), x);
  mapping.map(block.getArgument(1), y);
  for (Operation &op : block.without_terminator())
    b.clone(op, mapping);
  return mapping.lookup(cast<scf::ReduceReturnOp>(block.getTerminator()).getResult());
}

class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, Value tid, Value threads, Value workspace,
                Value tokens)
      : b(b), loc(loc), tid(tid), threads(threads), workspace(workspace), tokens(tokens) {}

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
  void warpBarrier() {
    NVVM::SyncWarpOp::create(b, loc, arith::ConstantIntOp::create(b, loc, -1, 32));
  }
  void replaceAlloc(memref::AllocOp alloc);

  OpBuilder &b;
  Location loc;
  Value tid, threads, workspace, tokens;
};

void KernelBuilder::replaceAlloc(memref::AllocOp alloc) {
  b.setInsertionPoint(alloc);
  MemRefType type = alloc.getType();
  Type elem = type.getElementType();
  int64_t elemBytes = elem.isIndex() ? 8 : std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
  int64_t staticElems = 1;
  for (int64_t d : type.getShape())
    if (!ShapedType::isDynamic(d))
      staticElems *= d;
  Value bytes = arith::ConstantIndexOp::create(b, loc, staticElems * elemBytes);
  // A temporary's one dynamic dimension is the token count (the caller checks there is
  // at most one); the workspace formula counts it per token.
  if (type.getNumDynamicDims() == 1)
    bytes = arith::MulIOp::create(b, loc, bytes, alloc.getDynamicSizes()[0]);
  (type.getNumDynamicDims() ? perTokenBytes : fixedBytes) += staticElems * elemBytes;
  fixedBytes += 16;
  Value offset = workspaceOffset ? workspaceOffset : arith::ConstantIndexOp::create(b, loc, 0);
  auto view = memref::ViewOp::create(b, loc, type, workspace, offset, alloc.getDynamicSizes());
  // Next offset: rounded up to 16 bytes.
  Value end = arith::AddIOp::create(b, loc, offset, bytes);
  Value c15 = arith::ConstantIndexOp::create(b, loc, 15);
  Value c16 = arith::ConstantIndexOp::create(b, loc, 16);
  workspaceOffset = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, end, c15), c16),
      c16);
  alloc.replaceAllUsesWith(view.getResult());
  alloc.erase();
}

/// Replaces a one-dimensional parallel loop without results by
/// `scf.for i = lb + first to ub step stride` with the same body.
scf::ForOp toStridedLoop(OpBuilder &b, Location loc, scf::ParallelOp loop, Value first,
                         Value stride) {
  b.setInsertionPoint(loop);
  Value lower = arith::AddIOp::create(b, loc, loop.getLowerBound()[0], first);
  auto strided = scf::ForOp::create(b, loc, lower, loop.getUpperBound()[0], stride);
  Block *body = strided.getBody();
  Block &old = loop.getRegion().front();
  old.getArgument(0).replaceAllUsesWith(strided.getInductionVar());
  old.getTerminator()->erase(); // scf.reduce
  body->getOperations().splice(body->begin(), old.getOperations());
  loop.erase();
  return strided;
}

void KernelBuilder::mapParallel(scf::ParallelOp loop) {
  if (hasLaneLoops(loop))
    return mapWarpLoop(loop);
  if (!loop.getInitVals().empty())
    return mapBlockReduction(loop);
  scf::ForOp strided = toStridedLoop(b, loc, loop, tid, threads);
  b.setInsertionPointAfter(strided);
  barrier();
}

/// Moves `run` (ops of one block, in order) into `scf.if cond` built at the insertion
/// point (after the run's last op: pure code between its ops stays in front of it);
/// the values the run makes for later code come out of the if (zeros on the other
/// threads). Returns the if and those values.
scf::IfOp guardOps(OpBuilder &b, Location loc, ArrayRef<Operation *> run, Value cond,
                   SmallVector<Value> &escaping) {
  llvm::SmallPtrSet<Operation *, 16> inRun(run.begin(), run.end());
  for (Operation *op : run)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !inRun.contains(run.front()->getBlock()->findAncestorOpInBlock(*user));
          }))
        escaping.push_back(r);
  auto guard = scf::IfOp::create(b, loc, TypeRange(ValueRange(escaping)), cond,
                                 /*withElseRegion=*/true);
  // (An scf.if with results is built without terminators.)
  if (escaping.empty()) {
    Operation *thenYield = guard.thenBlock()->getTerminator();
    for (Operation *op : run)
      op->moveBefore(thenYield);
  } else {
    for (Operation *op : run)
      op->moveBefore(guard.thenBlock(), guard.thenBlock()->end());
    b.setInsertionPointToEnd(guard.thenBlock());
    scf::YieldOp::create(b, loc, escaping);
    b.setInsertionPointToEnd(guard.elseBlock());
    SmallVector<Value> zeros;
    for (Value v : escaping)
      zeros.push_back(arith::ConstantOp::create(b, loc, b.getZeroAttr(v.getType())));
    scf::YieldOp::create(b, loc, zeros);
  }
  b.setInsertionPointAfter(guard);
  return guard;
}

void KernelBuilder::guardRun(ArrayRef<Operation *> run) {
  b.setInsertionPointAfter(run.back());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  // Thread 0 runs the code and broadcasts the values later code uses through shared
  // slots (control flow around block reductions is uniform, so every thread needs them).
  SmallVector<Value> escaping;
  scf::IfOp guard = guardOps(b, loc, run, first, escaping);
  if (escaping.size() > kSharedSlots - kBroadcastBase) {
    tooManySlots = true;
    escaping.clear();
  }
  if (!escaping.empty()) {
    OpBuilder::InsertionGuard keep(b);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    for (auto [i, v] : llvm::enumerate(escaping))
      memref::StoreOp::create(b, loc, toBits(v), shared,
                              ValueRange{arith::ConstantIndexOp::create(b, loc, kBroadcastBase + i)});
  }
  barrier();
  if (escaping.empty())
    return;
  for (auto [i, v] : llvm::enumerate(escaping)) {
    Value all = fromBits(
        sharedSlot(arith::ConstantIndexOp::create(b, loc, kBroadcastBase + i)), v.getType());
    v.replaceUsesWithIf(all, [&](OpOperand &use) {
      return !guard->isAncestor(use.getOwner()) && use.getOwner() != all.getDefiningOp();
    });
  }
  barrier(); // every thread has read the slots before they are written again
}

Value KernelBuilder::toBits(Value v) {
  Type type = v.getType(), i64 = b.getI64Type();
  if (type.isIndex())
    return arith::IndexCastOp::create(b, loc, i64, v);
  if (type.isF32())
    v = arith::BitcastOp::create(b, loc, b.getI32Type(), v);
  if (v.getType().isInteger(64))
    return v;
  if (v.getType().isInteger() && v.getType().getIntOrFloatBitWidth() < 64)
    return arith::ExtUIOp::create(b, loc, i64, v);
  unsupported = type;
  return arith::ConstantIntOp::create(b, loc, 0, 64);
}

Value KernelBuilder::fromBits(Value bits, Type type) {
  if (type.isIndex())
    return arith::IndexCastOp::create(b, loc, type, bits);
  if (type.isInteger(64))
    return bits;
  if (type.isF32())
    return arith::BitcastOp::create(
        b, loc, type, arith::TruncIOp::create(b, loc, b.getI32Type(), bits));
  if (type.isInteger())
    return arith::TruncIOp::create(b, loc, type, bits);
  unsupported = type;
  return arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
}

void KernelBuilder::mapBlockReduction(scf::ParallelOp loop) {
  Block &old = loop.getRegion().front();
  auto reduce = cast<scf::ReduceOp>(old.getTerminator());
  if (reduce.getNumOperands() > kBroadcastBase / kWarpSize) {
    tooManySlots = true;
    return;
  }
  // Each thread folds its strided elements, each warp combines its lanes' values,
  // lane 0 publishes the warp's value...
  SmallVector<Value> acc = foldAcrossWarp(loop, tid, threads);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value laneZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
  auto publish = scf::IfOp::create(b, loc, laneZero, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard keep(b);
    b.setInsertionPoint(publish.thenBlock()->getTerminator());
    for (auto [i, v] : llvm::enumerate(acc)) {
      Value slot = arith::AddIOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, i * kWarpSize), warp);
      memref::StoreOp::create(b, loc, toBits(v), shared, ValueRange{slot});
    }
  }
  barrier();
  // ... and every thread combines the warps' values in warp order (the same result on
  // every thread: control flow after it stays uniform).
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto gather = scf::ForOp::create(
      b, loc, zero, warps, one, loop.getInitVals(),
      [&](OpBuilder &nested, Location, Value w, ValueRange partial) {
        SmallVector<Value> next;
        OpBuilder::InsertionGuard keep(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        for (auto [i, region] : llvm::enumerate(reduce.getReductions())) {
          Value slot = arith::AddIOp::create(
              b, loc, arith::ConstantIndexOp::create(b, loc, i * kWarpSize), w);
          Value v = fromBits(sharedSlot(slot), partial[i].getType());
          next.push_back(combineWith(b, region, partial[i], v));
        }
        scf::YieldOp::create(b, loc, next);
      });
  b.setInsertionPointAfter(gather);
  barrier(); // the partial slots are free again
  loop.replaceAllUsesWith(gather.getResults());
  loop.erase();
}

//===----------------------------------------------------------------------===//
// One warp per token
//===----------------------------------------------------------------------===//

Value KernelBuilder::shuffle(Value v, Value offset, gpu::ShuffleMode mode) {
  Type type = v.getType();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  Value width = arith::ConstantIntOp::create(b, loc, kWarpSize, 32);
  auto shuffle32 = [&](Value x) {
    return gpu::ShuffleOp::create(b, loc, x, offset, width, mode).getShuffleResult();
  };
  if (type.isF32() || type.isInteger(32))
    return shuffle32(v);
  if (type.isIndex()) {
    Value wide = shuffle(arith::IndexCastOp::create(b, loc, i64, v), offset, mode);
    return arith::IndexCastOp::create(b, loc, type, wide);
  }
  if (type.isInteger(64)) { // two 32-bit halves
    Value c32 = arith::ConstantIntOp::create(b, loc, 32, 64);
    Value lo = shuffle32(arith::TruncIOp::create(b, loc, i32, v));
    Value hi = shuffle32(
        arith::TruncIOp::create(b, loc, i32, arith::ShRUIOp::create(b, loc, v, c32)));
    return arith::OrIOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, i64, lo),
        arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, hi), c32));
  }
  if (type.isInteger() && type.getIntOrFloatBitWidth() < 32) {
    Value wide = shuffle32(arith::ExtUIOp::create(b, loc, i32, v));
    return arith::TruncIOp::create(b, loc, type, wide);
  }
  unsupported = type;
  return v;
}

void KernelBuilder::mapWarpLoop(scf::ParallelOp loop) {
  scf::ForOp strided = toStridedLoop(b, loc, loop, warp, warps);
  mapWarpBlock(*strided.getBody());
  b.setInsertionPointAfter(strided);
  barrier();
}

SmallVector<Value> KernelBuilder::foldAcrossWarp(scf::ParallelOp loop, Value first,
                                                 Value count) {
  Block &old = loop.getRegion().front();
  auto reduce = cast<scf::ReduceOp>(old.getTerminator());
  b.setInsertionPoint(loop);
  Value step = loop.getStep()[0];
  Value start = arith::AddIOp::create(b, loc, loop.getLowerBound()[0],
                                      arith::MulIOp::create(b, loc, first, step));
  Value stride = arith::MulIOp::create(b, loc, step, count);
  auto strided = scf::ForOp::create(
      b, loc, start, loop.getUpperBound()[0], stride, loop.getInitVals(),
      [&](OpBuilder &nested, Location, Value iv, ValueRange acc) {
        IRMapping mapping;
        mapping.map(old.getArgument(0), iv);
        for (Operation &op : old.without_terminator())
          nested.clone(op, mapping);
        SmallVector<Value> next;
        for (auto [i, region] : llvm::enumerate(reduce.getReductions()))
          next.push_back(combineWith(nested, region, acc[i],
                                     mapping.lookupOrDefault(reduce.getOperands()[i])));
        scf::YieldOp::create(nested, loc, next);
      });
  b.setInsertionPointAfter(strided);
  SmallVector<Value> acc(strided.getResults());
  for (int32_t offset = kWarpSize / 2; offset >= 1; offset /= 2) {
    Value off = arith::ConstantIntOp::create(b, loc, offset, 32);
    for (auto [i, region] : llvm::enumerate(reduce.getReductions()))
      acc[i] = combineWith(b, region, acc[i], shuffle(acc[i], off, gpu::ShuffleMode::XOR));
  }
  return acc;
}

void KernelBuilder::mapLaneLoop(scf::ParallelOp loop) {
  // Each lane folds its elements; after the butterfly every lane holds the result.
  b.setInsertionPoint(loop);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  SmallVector<Value> acc = foldAcrossWarp(loop, lane, warpSize);
  warpBarrier();
  loop.replaceAllUsesWith(acc);
  b.setInsertionPointAfter(loop);
  loop.erase(); // (the insertion point was in front of it)
}

void KernelBuilder::guardLaneRun(ArrayRef<Operation *> run) {
  b.setInsertionPointAfter(run.back());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
  SmallVector<Value> escaping;
  scf::IfOp guard = guardOps(b, loc, run, first, escaping);
  // Lane 0 ran the code; the whole warp reads its values.
  Value source = arith::ConstantIntOp::create(b, loc, 0, 32);
  for (auto [v, r] : llvm::zip(escaping, guard.getResults())) {
    Value all = shuffle(r, source, gpu::ShuffleMode::IDX);
    v.replaceUsesWithIf(all, [&](OpOperand &use) {
      return !guard->isAncestor(use.getOwner()) && use.getOwner() != all.getDefiningOp();
    });
  }
  warpBarrier();
}

void KernelBuilder::mapWarpBlock(Block &block) {
  SmallVector<Operation *> run;
  llvm::SmallPtrSet<Operation *, 16> inRun;
  auto flush = [&] {
    if (!run.empty())
      guardLaneRun(run);
    run.clear();
    inRun.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    if (auto inner = dyn_cast<scf::ParallelOp>(op)) {
      flush();
      mapLaneLoop(inner);
      continue;
    }
    // Control flow around lane loops (top-k rounds, masked-row branches) is uniform
    // across the warp: every lane runs it and the mapping goes inside.
    if (op.getNumRegions() && containsParallel(&op)) {
      flush();
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          mapWarpBlock(nested);
      continue;
    }
    bool usesRun = llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && inRun.contains(def);
    });
    if (isMemoryEffectFree(&op) && op.getNumRegions() == 0 && !usesRun)
      continue;
    run.push_back(&op);
    inRun.insert(&op);
  }
  flush();
}

void KernelBuilder::mapBlock(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block))
    if (isa<memref::DeallocOp>(op))
      op.erase();

  SmallVector<Operation *> run;
  llvm::SmallPtrSet<Operation *, 16> inRun;
  auto flush = [&] {
    if (!run.empty())
      guardRun(run);
    run.clear();
    inRun.clear();
  };
  auto usesRun = [&](Operation &op) {
    return llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && inRun.contains(def);
    });
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    // Temporaries are placed in program order, so that a gate's branches start from
    // an offset defined before the gate.
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      replaceAlloc(alloc);
      continue;
    }
    if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
      flush();
      mapParallel(loop);
      continue;
    }
    // A device-scope fence orders each thread's own accesses, a barrier waits for all:
    // every thread runs them.
    if (switchyard::moe::runsOnEveryThread(&op)) {
      flush();
      continue;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op); branch && containsParallel(branch)) {
      flush();
      // Both branches may reuse the workspace from the same offset.
      Value saved = workspaceOffset;
      for (Region &region : branch->getRegions())
        for (Block &nested : region) {
          workspaceOffset = saved;
          mapBlock(nested);
        }
      workspaceOffset = saved;
      continue;
    }
    // Loops around block reductions (set selection rounds) run on every thread: their
    // bounds and carried values are uniform (thread-0 values are broadcast).
    if (op.getNumRegions() && containsParallel(&op)) {
      flush();
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          mapBlock(nested);
      continue;
    }
    // Pure code runs on every thread, unless it reads what a run computes.
    if (isMemoryEffectFree(&op) && op.getNumRegions() == 0 && !usesRun(op))
      continue;
    run.push_back(&op);
    inRun.insert(&op);
  }
  flush();
}

/// A kernel `name` in `gpuModule` with f's parameters plus the workspace, its body a
/// clone of f's, and merged parallel loops split back.
gpu::GPUFuncOp cloneIntoKernel(gpu::GPUModuleOp gpuModule, func::FuncOp f, StringRef name,
                               int64_t blockSize) {
  MLIRContext *ctx = f.getContext();
  Location loc = f.getLoc();
  OpBuilder kb = OpBuilder::atBlockEnd(gpuModule.getBody());
  SmallVector<Type> params(f.getArgumentTypes());
  params.push_back(MemRefType::get({ShapedType::kDynamic}, kb.getI8Type()));
  auto kernel = gpu::GPUFuncOp::create(kb, loc, name, kb.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel->setAttr("moe.abi", f->getAttr("moe.abi"));
  kernel.setKnownBlockSizeAttr(kb.getDenseI32ArrayAttr({(int32_t)blockSize, 1, 1}));
  Block &entry = kernel.getBody().front();
  IRMapping mapping;
  for (auto [from, to] : llvm::zip(f.getArguments(), entry.getArguments()))
    mapping.map(from, to);
  OpBuilder body = OpBuilder::atBlockEnd(&entry);
  for (Operation &op : f.getBody().front().without_terminator())
    body.clone(op, mapping);
  gpu::ReturnOp::create(body, loc);
  SmallVector<scf::ParallelOp> merged;
  kernel.walk([&](scf::ParallelOp loop) {
    if (loop.getNumLoops() > 1)
      merged.push_back(loop);
  });
  for (scf::ParallelOp loop : merged)
    splitMultiDimParallel(loop);
  return kernel;
}

/// Maps the body of `kernel` onto threads (see the file comment). `reserved`, when
/// given, is the workspace the large-batch pair keeps in front of the temporaries.
LogicalResult mapKernel(gpu::GPUFuncOp kernel, func::FuncOp f,
                        const switchyard::moe::LargeBatchLayout *reserved) {
  MLIRContext *ctx = kernel.getContext();
  Location loc = kernel.getLoc();
  Block &entry = kernel.getBody().front();
  bool ok = true;
  kernel.walk([&](memref::AllocOp alloc) {
    if (alloc.getType().getNumDynamicDims() > 1)
      ok = false;
  });
  if (!ok)
    return f.emitError() << "a temporary with more than one dynamic dimension cannot be "
                            "placed in the GPU workspace";
  OpBuilder inner = OpBuilder::atBlockBegin(&entry);
  Value tid = gpu::ThreadIdOp::create(inner, loc, gpu::Dimension::x);
  Value threads = gpu::BlockDimOp::create(inner, loc, gpu::Dimension::x);
  Value workspace = entry.getArgument(kernel.getFunctionType().getNumInputs() - 1);
  KernelBuilder builder(inner, loc, tid, threads, workspace, entry.getArgument(0));
  if (reserved)
    builder.reserve(reserved->reservedBytes, reserved->perTokenBytes, reserved->fixedBytes);
  auto sharedType = MemRefType::get(
      {KernelBuilder::kSharedSlots}, inner.getI64Type(), MemRefLayoutAttrInterface{},
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  builder.shared = kernel.addWorkgroupAttribution(sharedType, loc);
  Value warpSize = arith::ConstantIndexOp::create(inner, loc, kWarpSize);
  builder.lane = arith::RemUIOp::create(inner, loc, tid, warpSize);
  builder.warp = arith::DivUIOp::create(inner, loc, tid, warpSize);
  builder.warps = arith::DivUIOp::create(inner, loc, threads, warpSize);
  builder.mapBlock(entry);
  if (builder.tooManySlots)
    return f.emitError() << "a thread-0 phase or block reduction needs more shared slots "
                            "than the kernel reserves";
  if (builder.unsupported)
    return f.emitError() << "a warp shuffle cannot carry a value of type "
                         << builder.unsupported;
  kernel->setAttr("moe.workspace", inner.getDenseI64ArrayAttr(
                                       {builder.perTokenBytes, builder.fixedBytes}));
  return success();
}

struct MoeMapToGPUPass : switchyard::moe::impl::MoeMapToGPUBase<MoeMapToGPUPass> {
  using MoeMapToGPUBase::MoeMapToGPUBase;

  /// The large-batch pair `<name>_large_k1`, `<name>_large_k2` (only k1 when the
  /// policy is token loops only); false (with a warning saying why) when the policy
  /// does not split.
  bool addLargeBatchKernels(gpu::GPUModuleOp gpuModule, func::FuncOp f, bool &failed) {
    OpBuilder b(f.getContext());
    SmallVector<gpu::GPUFuncOp> pair;
    std::string reason;
    for (int which : {1, 2}) {
      std::string name = (f.getName() + "_large_k" + Twine(which)).str();
      gpu::GPUFuncOp kernel = cloneIntoKernel(gpuModule, f, name, blockSize);
      pair.push_back(kernel);
      switchyard::moe::LargeBatchLayout layout;
      if (mlir::failed(switchyard::moe::buildLargeBatchKernel(
              kernel, which, tokensPerCta, ctaTokens + 1, layout, reason))) {
        for (gpu::GPUFuncOp k : pair)
          k.erase();
        f.emitWarning() << "no large-batch kernels for @" << f.getName() << ": " << reason
                        << "; the one-CTA kernel serves every batch size";
        return false;
      }
      if (mlir::failed(mapKernel(kernel, f, &layout))) {
        failed = true;
        return false;
      }
      kernel->setAttr("moe.size_class", b.getStringAttr("large"));
      kernel->setAttr("moe.tokens_per_cta", b.getI64IntegerAttr(tokensPerCta));
      kernel->setAttr("moe.min_tokens", b.getI64IntegerAttr(ctaTokens + 1));
      if (!layout.needsKernel2)
        break; // token loops only: one launch serves large batches too
    }
    return true;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SmallVector<func::FuncOp> routers;
    module.walk([&](func::FuncOp f) {
      if (f->hasAttr("moe.abi"))
        routers.push_back(f);
    });
    if (routers.empty())
      return;
    if (blockSize < kWarpSize || blockSize % kWarpSize != 0 || blockSize > 1024) {
      module.emitError() << "moe-map-to-gpu: block-size must be a multiple of "
                         << kWarpSize << " in [32, 1024], got " << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (ctaTokens < 1 || tokensPerCta < 1) {
      module.emitError() << "moe-map-to-gpu: cta-tokens and tokens-per-cta must be positive";
      return signalPassFailure();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    for (func::FuncOp f : routers) {
      auto gpuModule = gpu::GPUModuleOp::create(b, f.getLoc(), (f.getName() + "_kernels").str());
      gpu::GPUFuncOp kernel = cloneIntoKernel(gpuModule, f, f.getName(), blockSize);
      if (failed(mapKernel(kernel, f, nullptr)))
        return signalPassFailure();
      kernel->setAttr("moe.size_class", b.getStringAttr("decode"));
      bool failedToMap = false;
      bool split = largeBatch && addLargeBatchKernels(gpuModule, f, failedToMap);
      if (failedToMap)
        return signalPassFailure();
      // Without the pair the one-CTA kernel takes every batch (no upper bound).
      kernel->setAttr("moe.max_tokens", b.getI64IntegerAttr(split ? ctaTokens : 0));
    }
  }
};

} // namespace
