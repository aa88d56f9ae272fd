//===- FormStages.cpp - group moe ops into fused stages -------------------===//
//
// Partitions each router body (and each phase-gate region) into `moe.stage` ops: the
// kernel boundaries of the policy. Within a run of ops between two phase gates, ops are
// list-scheduled: the first ready op opens a stage of its kind, and every op of the same
// kind whose operands are ready joins it, so independent ops of one kind share one loop
// even when the source interleaves them. A batch reduction never joins the stage that
// produces its input (it needs every token of it first), nor a row op the stage of a
// whole op it reads (the stage's token loop runs before its whole ops).
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/IR/MoeStages.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEFORMSTAGES
#include "switchyard/Dialect/Moe/Transforms/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;
using namespace switchyard::moe;

namespace {

/// Values defined by `op` or ops nested in it are not "operands from outside".
static SmallVector<Operation *> producersOf(Operation *op, Block &block) {
  SmallVector<Operation *> producers;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp())
      if (Operation *inBlock = block.findAncestorOpInBlock(*def))
        producers.push_back(inBlock);
  return producers;
}

/// Wraps `group` (ops of one kind, in a valid order) in a moe.stage placed before
/// `insertBefore`.
static void buildStage(StageKind kind, ArrayRef<Operation *> group,
                       Operation *insertBefore) {
  llvm::SmallPtrSet<Operation *, 16> inGroup(group.begin(), group.end());
  SmallVector<Value> escaping;
  for (Operation *op : group)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            Operation *anc = op->getBlock()->findAncestorOpInBlock(*user);
            return !anc || !inGroup.contains(anc);
          }))
        escaping.push_back(result);

  OpBuilder b(insertBefore);
  auto stage =
      StageOp::create(b, group.front()->getLoc(), TypeRange(ValueRange(escaping)), kind);
  Block *body = b.createBlock(&stage.getBody());
  b.setInsertionPointToEnd(body);
  auto yield = YieldOp::create(b, stage.getLoc(), escaping);
  for (Operation *op : group)
    op->moveBefore(yield);
  for (auto [value, result] : llvm::zip(escaping, stage.getResults()))
    value.replaceUsesWithIf(
        result, [&](OpOperand &use) { return !stage->isAncestor(use.getOwner()); });
}

/// Schedules the stage-able ops in [begin, end) of `block` into stages placed before
/// `end`.
static void formStagesInRun(Block &block, ArrayRef<Operation *> run, Operation *end) {
  SmallVector<Operation *> remaining(run.begin(), run.end());
  llvm::SmallPtrSet<Operation *, 32> scheduled;
  while (!remaining.empty()) {
    StageKind kind = *getStageKind(remaining.front());
    SmallVector<Operation *> group;
    llvm::SmallPtrSet<Operation *, 16> inGroup;
    bool grew = true;
    while (grew) {
      grew = false;
      for (Operation *op : remaining) {
        if (inGroup.contains(op) || getStageKind(op) != kind)
          continue;
        bool ready = llvm::all_of(producersOf(op, block), [&](Operation *p) {
          bool inRun = llvm::is_contained(run, p);
          if (!inRun || scheduled.contains(p))
            return true;
          return inGroup.contains(p) && !needsStageBoundary(kind, p, op);
        });
        if (!ready)
          continue;
        group.push_back(op);
        inGroup.insert(op);
        grew = true;
      }
    }
    for (Operation *op : group)
      scheduled.insert(op);
    llvm::erase_if(remaining, [&](Operation *op) { return inGroup.contains(op); });
    buildStage(kind, group, end);
  }
}

/// Knobs, constants, moe.num_tokens and scalar arithmetic on them: computed once,
/// before the stages.
static bool isScalarLeaf(Operation &op) {
  auto scalar = [](Type t) { return t.isIntOrIndexOrFloat(); };
  return op.getNumRegions() == 0 && !getStageKind(&op) &&
         !op.hasTrait<OpTrait::IsTerminator>() &&
         llvm::all_of(op.getOperandTypes(), scalar) &&
         llvm::all_of(op.getResultTypes(), scalar);
}

static void formStagesInBlock(Block &block) {
  // Scalar leaves go first, in order, so they never split a run (their operands are
  // block arguments or earlier leaves).
  SmallVector<Operation *> leaves;
  for (Operation &op : block)
    if (isScalarLeaf(op))
      leaves.push_back(&op);
  for (Operation *op : llvm::reverse(leaves))
    op->moveBefore(&block, block.begin());

  SmallVector<Operation *> run;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (getStageKind(&op)) {
      run.push_back(&op);
      continue;
    }
    if (isScalarLeaf(op))
      continue;
    if (!run.empty())
      formStagesInRun(block, run, &op);
    run.clear();
    for (Region &region : op.getRegions())
      for (Block &nested : region)
        formStagesInBlock(nested);
  }
}

struct MoeFormStagesPass : switchyard::moe::impl::MoeFormStagesBase<MoeFormStagesPass> {
  void runOnOperation() override {
    getOperation().walk([](RouterOp router) {
      bool staged = false;
      router.walk([&](StageOp) { staged = true; });
      if (!staged)
        formStagesInBlock(router.getBodyBlock());
    });
  }
};

} // namespace
