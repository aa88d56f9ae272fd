//===- HostThreads.cpp - OpenMP threads for a router's host loops ---------===//
//
// moe-host-threads and moe-inline-alloca-scopes (include/switchyard/Compiler/
// Passes.td). The host form of a router is a sequence of scf.parallel loops over tokens
// (or experts) whose iterations are independent by construction (the GPU runs them on
// separate threads). moe-host-threads prepares them for convert-scf-to-openmp:
//
//  * in a router, each OUTERMOST parallel loop becomes
//        scf.if (num_tokens >= minTokens) { scf.parallel ... } else { scf.for ... }
//    with minTokens = ceil(minWork / E), so that small batches stay single-threaded
//    (an OpenMP fork and join costs microseconds; a token's row costs ~E ns) and large
//    ones are spread over the OpenMP threads (OMP_NUM_THREADS);
//  * every other parallel loop (nested ones, and all loops of rules, which run on
//    per-expert statistics and are small) becomes a sequential scf.for.
//
// Iterations are independent and integer atomics commute, so the results are
// bit-identical to the single-threaded code whatever the thread count.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/Passes.h"
#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEHOSTTHREADS
#define GEN_PASS_DEF_MOEINLINEALLOCASCOPES
#include "switchyard/Compiler/Passes.h.inc"

namespace {

/// `loop` (1-D or more, no reductions) as nested scf.for loops with the same body.
void makeSequential(scf::ParallelOp loop) {
  OpBuilder b(loop);
  IRMapping mapping;
  Location loc = loop.getLoc();
  SmallVector<Value> ivs;
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    auto inner = scf::ForOp::create(b, loc, lb, ub, step);
    ivs.push_back(inner.getInductionVar());
    b.setInsertionPoint(inner.getBody()->getTerminator());
  }
  for (auto [from, to] : llvm::zip(loop.getInductionVars(), ivs))
    mapping.map(from, to);
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, mapping);
  loop.erase();
}

/// The router's token count: its first argument when the ABI says so.
Value tokenCount(func::FuncOp func) {
  moe::AbiAttr abi = moe::getAbi(func);
  // A verified ABI starts with the token count.
  if (!abi || func.getNumArguments() == 0 || !func.getArgument(0).getType().isIndex())
    return {};
  return func.getArgument(0);
}

struct HostThreadsPass : impl::MoeHostThreadsBase<HostThreadsPass> {
  using MoeHostThreadsBase::MoeHostThreadsBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      auto kind =
          func->getAttrOfType<StringAttr>(moe::MoeDialect::KindAttrHelper::getNameStr());
      auto experts = func->getAttrOfType<IntegerAttr>(
          moe::MoeDialect::ExpertsAttrHelper::getNameStr());
      Value tokens = kind && kind.getValue() == "router" && experts && minWork > 0
                         ? tokenCount(func)
                         : Value();
      int64_t perRow = std::max<int64_t>(experts ? experts.getInt() : 1, 1);
      int64_t minTokens = (minWork + perRow - 1) / perRow;
      SmallVector<scf::ParallelOp> loops;
      func.walk([&](scf::ParallelOp loop) { loops.push_back(loop); }); // inner first
      for (scf::ParallelOp loop : loops) {
        if (loop.getNumResults() != 0)
          continue; // a reduction: convert-scf-to-openmp handles it as written
        bool outermost = !loop->getParentOfType<scf::ParallelOp>();
        if (!tokens || !outermost) {
          makeSequential(loop);
          continue;
        }
        OpBuilder b(loop);
        Location loc = loop.getLoc();
        Value large =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, tokens,
                                  arith::ConstantIndexOp::create(b, loc, minTokens));
        auto branch = scf::IfOp::create(b, loc, large, /*withElseRegion=*/true);
        loop->moveBefore(branch.thenBlock()->getTerminator());
        OpBuilder e = OpBuilder::atBlockTerminator(branch.elseBlock());
        auto copy = cast<scf::ParallelOp>(e.clone(*loop));
        makeSequential(copy);
      }
    });
  }
};

/// convert-scf-to-openmp wraps each loop body in a memref.alloca_scope, whose single
/// block the control-flow lowering would split; the bodies allocate nothing on the
/// stack, so the scopes are inlined.
struct InlineAllocaScopesPass : impl::MoeInlineAllocaScopesBase<InlineAllocaScopesPass> {

  void runOnOperation() override {
    SmallVector<memref::AllocaScopeOp> scopes;
    getOperation().walk([&](memref::AllocaScopeOp scope) {
      bool allocates = false;
      scope.walk([&](memref::AllocaOp) { allocates = true; });
      if (!allocates)
        scopes.push_back(scope);
    });
    for (memref::AllocaScopeOp scope : scopes) {
      Block &body = scope.getBodyRegion().front();
      auto ret = cast<memref::AllocaScopeReturnOp>(body.getTerminator());
      scope.replaceAllUsesWith(ret.getResults());
      ret.erase();
      scope->getBlock()->getOperations().splice(scope->getIterator(), body.getOperations());
      scope.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> createHostThreadsPass(int64_t minWork) {
  return createMoeHostThreads(MoeHostThreadsOptions{minWork});
}

} // namespace switchyard::moe
