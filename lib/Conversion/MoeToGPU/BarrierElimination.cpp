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
// everything; an op that contains a barrier counts whole on both sides. Barriers
// inside loops and branches are kept. (Upstream's gpu-eliminate-barriers is the general
// form; it cannot see that two views of one workspace are disjoint.)
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace switchyard::moe::gpu_mapping {

namespace {

/// What a run of ops reads and writes.
struct Footprint {
  llvm::SmallPtrSet<void *, 8> reads, writes;
  bool unknown = false;

  void clear() { *this = Footprint(); }
  bool conflictsWith(const Footprint &o) const {
    if (unknown || o.unknown)
      return true;
    auto meets = [](const llvm::SmallPtrSet<void *, 8> &a,
                    const llvm::SmallPtrSet<void *, 8> &b) {
      return llvm::any_of(a, [&](void *x) { return b.contains(x); });
    };
    return meets(writes, o.writes) || meets(writes, o.reads) || meets(reads, o.writes);
  }
};

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
      if (isa<MemoryEffects::Write>(e.getEffect()))
        footprint.writes.insert(buffer);
      else
        footprint.reads.insert(buffer);
    }
  });
}

bool containsBarrier(Operation *op) {
  return op->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); }).wasInterrupted();
}

} // namespace

int eliminateRedundantBarriers(gpu::GPUFuncOp kernel, const GpuTargetInfo &target) {
  Block &body = kernel.getBody().front();
  Footprint sinceKept; // since the last kept barrier (or the kernel's start)
  int erased = 0;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isa<gpu::BarrierOp>(op)) {
      addFootprint(&op, target, sinceKept);
      continue;
    }
    Footprint next; // up to the next barrier of the body (or its end)
    for (Operation *after = op.getNextNode(); after; after = after->getNextNode()) {
      if (isa<gpu::BarrierOp>(after))
        break;
      addFootprint(after, target, next);
      if (containsBarrier(after))
        break;
    }
    if (sinceKept.conflictsWith(next)) {
      sinceKept.clear();
      // (an op that contains a barrier counts on both sides of this one)
      for (Operation *before = op.getPrevNode(); before && !isa<gpu::BarrierOp>(before);
           before = before->getPrevNode())
        if (containsBarrier(before))
          addFootprint(before, target, sinceKept);
      continue;
    }
    op.erase();
    ++erased;
  }
  return erased;
}

} // namespace switchyard::moe::gpu_mapping
