//===- MapToGPU.cpp - lowered routers -> single-CTA GPU kernels -----------===//
//
// The first GPU mapping of the target-neutral loop IR (see moe-lower-to-loops): the
// whole policy becomes ONE kernel for one CTA, the decode-size contract (every token
// of the batch in one block). In the kernel body:
// * a token-parallel loop (scf.parallel over [0, T)) becomes a block-strided loop, one
//   thread per token (t = tid, tid + blockDim, ...), followed by a barrier;
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
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEMAPTOGPU
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;

namespace {

bool containsParallel(Operation *op) {
  bool found = false;
  op->walk([&](scf::ParallelOp) { found = true; });
  return found;
}

class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, Value tid, Value threads, Value workspace,
                Value tokens)
      : b(b), loc(loc), tid(tid), threads(threads), workspace(workspace), tokens(tokens) {}

  /// Maps one block of the kernel body in place.
  void mapBlock(Block &block);
  /// Bytes of workspace the kernel needs: perToken * T + fixed.
  int64_t perTokenBytes = 0, fixedBytes = 0;

private:
  Value workspaceOffset;
  void barrier() { gpu::BarrierOp::create(b, loc); }
  void mapParallel(scf::ParallelOp loop);
  void guardRun(ArrayRef<Operation *> run);
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

void KernelBuilder::mapParallel(scf::ParallelOp loop) {
  b.setInsertionPoint(loop);
  Value lower = arith::AddIOp::create(b, loc, loop.getLowerBound()[0], tid);
  auto strided = scf::ForOp::create(b, loc, lower, loop.getUpperBound()[0], threads);
  Block *body = strided.getBody();
  Block &old = loop.getRegion().front();
  old.getArgument(0).replaceAllUsesWith(strided.getInductionVar());
  old.getTerminator()->erase(); // scf.reduce
  body->getOperations().splice(body->begin(), old.getOperations());
  loop.erase();
  b.setInsertionPointAfter(strided);
  barrier();
}

void KernelBuilder::guardRun(ArrayRef<Operation *> run) {
  llvm::SmallPtrSet<Operation *, 16> inRun(run.begin(), run.end());
  SmallVector<Value> escaping;
  for (Operation *op : run)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !inRun.contains(run.front()->getBlock()->findAncestorOpInBlock(*user));
          }))
        escaping.push_back(r);
  // After the last op of the run: pure code between its ops stays in front of it.
  b.setInsertionPointAfter(run.back());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  auto guard = scf::IfOp::create(b, loc, TypeRange(ValueRange(escaping)), first,
                                 /*withElseRegion=*/true);
  // Thread 0 runs the code; the other threads get zeros (they never use them: every
  // user is another thread-0 run).
  Operation *thenYield = guard.thenBlock()->getTerminator();
  for (Operation *op : run)
    op->moveBefore(thenYield);
  if (!escaping.empty())
    thenYield->erase();
  if (!escaping.empty()) {
    b.setInsertionPointToEnd(guard.thenBlock());
    scf::YieldOp::create(b, loc, escaping);
    b.setInsertionPointToStart(guard.elseBlock());
    guard.elseBlock()->getTerminator()->erase();
    SmallVector<Value> zeros;
    for (Value v : escaping)
      zeros.push_back(arith::ConstantOp::create(b, loc, b.getZeroAttr(v.getType())));
    scf::YieldOp::create(b, loc, zeros);
  }
  for (auto [v, r] : llvm::zip(escaping, guard.getResults()))
    v.replaceUsesWithIf(r, [&](OpOperand &use) { return !guard->isAncestor(use.getOwner()); });
  b.setInsertionPointAfter(guard);
  barrier();
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
    // Pure code runs on every thread, unless it reads what a run computes.
    if (isMemoryEffectFree(&op) && op.getNumRegions() == 0 && !usesRun(op))
      continue;
    run.push_back(&op);
    inRun.insert(&op);
  }
  flush();
}

struct MoeMapToGPUPass : switchyard::moe::impl::MoeMapToGPUBase<MoeMapToGPUPass> {
  using MoeMapToGPUBase::MoeMapToGPUBase;
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
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    for (func::FuncOp f : routers) {
      Location loc = f.getLoc();
      auto gpuModule = gpu::GPUModuleOp::create(b, loc, (f.getName() + "_kernels").str());
      OpBuilder kb = OpBuilder::atBlockBegin(gpuModule.getBody());
      SmallVector<Type> params(f.getArgumentTypes());
      params.push_back(MemRefType::get({ShapedType::kDynamic}, kb.getI8Type()));
      auto kernel = gpu::GPUFuncOp::create(kb, loc, f.getName(), kb.getFunctionType(params, {}));
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

      OpBuilder inner = OpBuilder::atBlockBegin(&entry);
      Value tid = gpu::ThreadIdOp::create(inner, loc, gpu::Dimension::x);
      Value threads = gpu::BlockDimOp::create(inner, loc, gpu::Dimension::x);
      KernelBuilder builder(inner, loc, tid, threads, entry.getArguments().back(),
                            entry.getArgument(0));
      bool ok = true;
      kernel.walk([&](memref::AllocOp alloc) {
        if (alloc.getType().getNumDynamicDims() > 1)
          ok = false;
      });
      if (!ok) {
        f.emitError() << "a temporary with more than one dynamic dimension cannot be "
                         "placed in the GPU workspace";
        return signalPassFailure();
      }
      builder.mapBlock(entry);
      kernel->setAttr("moe.workspace",
                      kb.getDenseI64ArrayAttr({builder.perTokenBytes, builder.fixedBytes}));
    }
  }
};

} // namespace
