//===- BarrierElimination.cpp - CTA barriers that order nothing ------------===//
//
// The mapping puts a CTA barrier after every phase (a block-strided loop, a warp loop,
// a thread-0 run, a block reduction); many separate phases that touch different
// buffers — the tail's fills of the active list, the block list and the padding — and
// cost a barrier each. A barrier of the kernel's body block is erased when no access
// since the last kept barrier conflicts with one before the next barrier (one of them
// a write, to the same buffer). Deciding the barriers in order, with the accesses
// since the last KEPT barrier, checks every pair of segments a run of erased barriers
// joins.
//
// Buffers: a kernel argument (distinct buffers, the ABI's contract), the block-shared
// scratch, or one temporary of the workspace (a view tagged kWorkspaceTemporaryAttr:
// Workspace.cpp gives each its own bytes); other views of the workspace count as the
// workspace. An op whose effects are unknown (a fence, a call) conflicts with
// everything; an op that contains a barrier counts whole on both sides. The branches
// of a phase gate are decided in the same way (their condition is uniform), with what
// comes before and after the gate; barriers inside loops are kept. (Upstream's
// gpu-eliminate-barriers is the general form; it cannot see that two views of one workspace
// are disjoint.)
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace switchyard::moe::gpu_mapping {

namespace {

/// What a run of ops reads and writes: by every thread, and by warp 0 alone (inside a
/// thread-0 run or a warp-0 set selection).
struct Footprint {
  using Buffers = llvm::SmallPtrSet<void *, 8>;
  Buffers reads, writes;                 // accesses every thread may make
  Buffers warpZeroReads, warpZeroWrites; // accesses of warp 0 alone
  bool unknown = false;

  void clear() { *this = Footprint(); }
  void merge(const Footprint &o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
    warpZeroReads.insert(o.warpZeroReads.begin(), o.warpZeroReads.end());
    warpZeroWrites.insert(o.warpZeroWrites.begin(), o.warpZeroWrites.end());
    unknown |= o.unknown;
  }
};

enum class Ordering { None, WarpZero, Block };

/// What must order `a` (before) and `b` (after): nothing, a barrier of warp 0 (every
/// conflicting pair is between accesses of warp 0 alone), or the whole block.
Ordering needed(const Footprint &a, const Footprint &b) {
  if (a.unknown || b.unknown)
    return Ordering::Block;
  using Buffers = Footprint::Buffers;
  auto meets = [](const Buffers &x, const Buffers &y) {
    return llvm::any_of(x, [&](void *v) { return y.contains(v); });
  };
  auto conflict = [&](const Buffers &aReads, const Buffers &aWrites, const Buffers &bReads,
                      const Buffers &bWrites) {
    return meets(aWrites, bWrites) || meets(aWrites, bReads) || meets(aReads, bWrites);
  };
  auto all = [](const Buffers &x, const Buffers &y) {
    Buffers both = x;
    both.insert(y.begin(), y.end());
    return both;
  };
  Buffers aReads = all(a.reads, a.warpZeroReads), aWrites = all(a.writes, a.warpZeroWrites);
  Buffers bReads = all(b.reads, b.warpZeroReads), bWrites = all(b.writes, b.warpZeroWrites);
  if (conflict(a.reads, a.writes, bReads, bWrites) ||
      conflict(aReads, aWrites, b.reads, b.writes))
    return Ordering::Block; // a pair with an access any thread may make
  if (conflict(a.warpZeroReads, a.warpZeroWrites, b.warpZeroReads, b.warpZeroWrites))
    return Ordering::WarpZero;
  return Ordering::None;
}

/// True when `op` runs on warp 0 alone: inside the then-branch of an scf.if on
/// `thread_id.x == 0` or `thread_id.x < 32` (the mapping's thread-0 runs and warp-0
/// set selection).
bool onWarpZeroOnly(Operation *op) {
  for (Operation *child = op; Operation *parent = child->getParentOp(); child = parent) {
    auto branch = dyn_cast<scf::IfOp>(parent);
    if (!branch || child->getParentRegion() != &branch.getThenRegion())
      continue;
    auto cmp = branch.getCondition().getDefiningOp<arith::CmpIOp>();
    if (!cmp || !cmp.getLhs().getDefiningOp<gpu::ThreadIdOp>() ||
        cmp.getLhs().getDefiningOp<gpu::ThreadIdOp>().getDimension() != gpu::Dimension::x)
      continue;
    std::optional<int64_t> bound = getConstantIntValue(cmp.getRhs());
    if ((cmp.getPredicate() == arith::CmpIPredicate::eq && bound == 0) ||
        (cmp.getPredicate() == arith::CmpIPredicate::ult && bound && *bound <= kWarpSize))
      return true;
  }
  return false;
}

/// The buffer a memref value accesses (see the file comment).
Value bufferOf(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (def->hasAttr(kWorkspaceTemporaryAttr))
      return memref;
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      return memref;
    memref = view.getViewSource();
  }
  return memref;
}

/// Adds what `root` and the ops nested in it access to `footprint`.
void addFootprint(Operation *root, const GpuTargetInfo &target, Footprint &footprint) {
  root->walk([&](Operation *op) {
    if (isa<gpu::BarrierOp>(op) || target.isWarpBarrier(op) ||
        op->hasTrait<OpTrait::IsTerminator>())
      return;
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (!op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
        footprint.unknown = true;
      return;
    }
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &e : instances) {
      if (isa<MemoryEffects::Allocate, MemoryEffects::Free>(e.getEffect()))
        continue;
      Value v = e.getValue();
      if (!v || !isa<BaseMemRefType>(v.getType())) {
        footprint.unknown = true;
        continue;
      }
      void *buffer = bufferOf(v).getAsOpaquePointer();
      bool write = isa<MemoryEffects::Write>(e.getEffect());
      if (onWarpZeroOnly(op))
        (write ? footprint.warpZeroWrites : footprint.warpZeroReads).insert(buffer);
      else
        (write ? footprint.writes : footprint.reads).insert(buffer);
    }
  });
}

bool containsBarrier(Operation *op) {
  return op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); }).wasInterrupted();
}

/// The accesses from `from` to the next barrier of its block (an op that contains one
/// counts whole), plus `after` when the block ends first.
Footprint upToNextBarrier(Operation *from, const Footprint &after,
                          const GpuTargetInfo &target) {
  Footprint next;
  for (Operation *op = from; op; op = op->getNextNode()) {
    if (isa<gpu::BarrierOp>(op))
      return next;
    addFootprint(op, target, next);
    if (containsBarrier(op))
      return next;
  }
  next.merge(after);
  return next;
}

/// Decides the barriers of `block`: `sinceKept` holds the accesses since the last kept
/// barrier before the block starts, `after` those from the block's end to the next
/// barrier of the code around it. The branches of an scf.if with barriers (a phase
/// gate: a uniform condition) are decided the same way; a loop with barriers counts
/// whole. Returns the accesses since the last kept barrier at the block's end.
Footprint decideBlock(Block &block, Footprint sinceKept, const Footprint &after,
                      const GpuTargetInfo &target, int &erased) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto branch = dyn_cast<scf::IfOp>(op); branch && containsBarrier(branch)) {
      Footprint afterBranch = upToNextBarrier(branch->getNextNode(), after, target);
      Footprint merged;
      for (Region &region : branch->getRegions())
        merged.merge(region.empty() ? sinceKept
                                    : decideBlock(region.front(), sinceKept, afterBranch,
                                                  target, erased));
      sinceKept = merged;
      continue;
    }
    if (!isa<gpu::BarrierOp>(op)) {
      addFootprint(&op, target, sinceKept);
      continue;
    }
    Ordering ordering = needed(sinceKept, upToNextBarrier(op.getNextNode(), after, target));
    if (ordering == Ordering::Block) {
      sinceKept.clear();
      continue;
    }
    if (ordering == Ordering::WarpZero) { // a warp barrier suffices (every warp runs it)
      OpBuilder b(&op);
      target.createWarpBarrier(b, op.getLoc());
    }
    op.erase();
    ++erased;
  }
  return sinceKept;
}

} // namespace

int eliminateRedundantBarriers(gpu::GPUFuncOp kernel, const GpuTargetInfo &target) {
  int erased = 0;
  // (nothing runs before the kernel's start or after its end)
  decideBlock(kernel.getBody().front(), Footprint(), Footprint(), target, erased);
  return erased;
}

} // namespace switchyard::moe::gpu_mapping
