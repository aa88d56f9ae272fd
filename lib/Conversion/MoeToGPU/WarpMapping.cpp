//===- WarpMapping.cpp - one warp per token ---------------------------------===//
//
// A token loop in the lane-parallel form runs one warp per token: loops over the
// experts are lane-strided, reductions end in butterfly shuffles, remaining row code
// runs on lane 0 and is broadcast, and a warp barrier follows each step that wrote
// memory.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe::gpu_mapping {

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

} // namespace switchyard::moe::gpu_mapping
