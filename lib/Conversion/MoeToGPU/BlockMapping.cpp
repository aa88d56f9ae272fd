//===- BlockMapping.cpp - block-strided loops, block reductions, thread-0 runs ===//
//
// Parallel loops become block-strided loops (one thread per iteration), parallel
// reductions become block reductions through shared memory, and runs of sequential
// code run on thread 0 and broadcast what later code reads; barriers separate phases.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe::gpu_mapping {

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
  broadcastFromThreadZero(guard, escaping, /*storeIf=*/Value());
}

void KernelBuilder::broadcastFromThreadZero(scf::IfOp guard, SmallVector<Value> &escaping,
                                            Value storeIf) {
  if (escaping.size() > kSharedSlots - kBroadcastBase) {
    tooManySlots = true;
    escaping.clear();
  }
  if (!escaping.empty()) {
    OpBuilder::InsertionGuard keep(b);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
    if (storeIf) {
      auto store = scf::IfOp::create(b, loc, storeIf, /*withElseRegion=*/false);
      b.setInsertionPoint(store.thenBlock()->getTerminator());
    }
    for (auto [i, v] : llvm::enumerate(escaping))
      memref::StoreOp::create(
          b, loc, toBits(v), shared,
          ValueRange{arith::ConstantIndexOp::create(b, loc, kBroadcastBase + i)});
  }
  b.setInsertionPointAfter(guard);
  barrier();
  if (escaping.empty())
    return;
  for (auto [i, v] : llvm::enumerate(escaping)) {
    Value all =
        fromBits(sharedSlot(arith::ConstantIndexOp::create(b, loc, kBroadcastBase + i)),
                 v.getType());
    v.replaceUsesWithIf(all, [&](OpOperand &use) {
      return !guard->isAncestor(use.getOwner()) && use.getOwner() != all.getDefiningOp();
    });
  }
  barrier(); // every thread has read the slots before they are written again
}

bool KernelBuilder::runsOnOneWarp(Operation *op) const {
  if (!isa<scf::ForOp, scf::WhileOp>(op))
    return false;
  bool fits = true;
  op->walk([&](Operation *inner) {
    if (isa<memref::AllocOp>(inner) || target.runsOnEveryThread(inner))
      fits = false;
    auto loop = dyn_cast<scf::ParallelOp>(inner);
    if (!loop)
      return;
    // Expert-sized loops only (static bounds), none nested in another.
    if (!getConstantIntValue(loop.getUpperBound()[0]) ||
        !getConstantIntValue(loop.getLowerBound()[0]))
      fits = false;
    loop.getBody()->walk([&](scf::ParallelOp) { fits = false; });
  });
  return fits;
}

void KernelBuilder::mapOnWarpZero(Operation *op) {
  b.setInsertionPointAfter(op);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  Value firstWarp = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid, warpSize);
  SmallVector<Value> escaping;
  scf::IfOp guard = guardOps(b, loc, {op}, firstWarp, escaping);
  for (Region &region : op->getRegions())
    for (Block &nested : region)
      mapWarpBlock(nested);
  // Every lane of warp 0 holds the results; lane 0 (thread 0) publishes them.
  b.setInsertionPoint(guard.thenBlock()->getTerminator());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value firstLane = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
  broadcastFromThreadZero(guard, escaping, firstLane);
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
    return arith::BitcastOp::create(b, loc, type,
                                    arith::TruncIOp::create(b, loc, b.getI32Type(), bits));
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
    if (target.runsOnEveryThread(&op)) {
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
    // Set selection (a loop of rounds around expert-sized reductions: fill, union,
    // difference, per-device fills) runs on warp 0 alone, lane-strided with butterfly
    // reductions and no CTA barrier per round; its results are broadcast.
    if (op.getNumRegions() && containsParallel(&op) && runsOnOneWarp(&op)) {
      flush();
      mapOnWarpZero(&op);
      continue;
    }
    // Other loops around block reductions run on every thread: their bounds and
    // carried values are uniform (thread-0 values are broadcast).
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

} // namespace switchyard::moe::gpu_mapping
