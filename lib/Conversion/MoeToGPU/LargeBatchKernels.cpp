//===- LargeBatchKernels.cpp - two launches for batches beyond one CTA ----===//
//
// The large-batch size class runs a router as TWO kernels of G = ceil(T / P) CTAs each,
// CTA c owning tokens [c*P, min((c+1)*P, T)):
//
// kernel 1 - the token stage and the batch partials: the leading token loops (whose
//   writes are their own tokens' rows) run on the CTA's tokens, and each token fold
//   (an expert-parallel loop folding a value over the tokens with +, max, or, ... from
//   its identity: batch scores, the union of the tokens' top-k) folds the CTA's tokens
//   only and stores its partial in a [G, C] workspace array. CTA 0 also resets the
//   ticket and runs the initialisations later phases rely on (code that only writes
//   into buffers nothing before it touches, e.g. zeroed counts).
// kernel 2 - every CTA combines the G partials in CTA order and recomputes the (tiny)
//   set selection, writing CTA-private copies of what it writes (CTA 0 copies outputs
//   such as `selected` out), routes its own tokens (counts with atomics), then takes a
//   ticket; the last CTA to finish (device-scope fences around the ticket) runs the
//   rest over the whole batch: compaction and block alignment.
//
// Launch shapes depend only on T (CUDA-graph capturable) and there is no host
// synchronisation. The results equal the one-CTA kernel's except for the order in
// which float partials are added. A policy whose code does not fit this shape (a
// phase gate around token loops that the size class does not decide, set selection
// writing per-token buffers, ...) gets a reason instead, and its one-CTA kernel
// serves every batch size.
//
//===----------------------------------------------------------------------===//
#include "LargeBatchKernels.h"
#include "LargeBatchPlan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace switchyard::moe {

namespace {
int64_t elementBytes(Type type) {
  if (type.isIndex())
    return 8;
  return std::max<int64_t>(1, type.getIntOrFloatBitWidth() / 8);
}

int64_t roundUp16(int64_t n) { return (n + 15) / 16 * 16; }

/// The values both kernels compute on entry: this CTA, the grid, its token range, and
/// the reserved workspace (the same layout in both kernels).
struct Prologue {
  Value cta, grid, first, last;
  Value ticket;
  int64_t tilesPerCta = 0;        // token tiles per CTA (P / S; 0 without tiles)
  SmallVector<Value> partials;    // per fold: memref<? x elem>, [G * C]
  SmallVector<Value> privateCopy; // per privatized buffer: this CTA's copy
  LargeBatchLayout layout;        // what the prologue reserves
};

Prologue buildPrologue(OpBuilder &b, Location loc, Value tokens, Value workspace,
                       const LargeBatchPlan &plan, KernelRole role, int64_t tokensPerCta) {
  Prologue p;
  LargeBatchLayout &layout = p.layout;
  auto idx = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  p.cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value per;
  if (role == KernelRole::Grid) {
    // Token loops only (no partials, nothing shared between CTAs): the launcher picks
    // the grid (enough CTAs to fill the GPU), each CTA takes ceil(T / G) tokens.
    p.grid = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    per = arith::DivUIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, tokens,
                              arith::SubIOp::create(b, loc, p.grid, idx(1))),
        p.grid);
  } else {
    per = idx(tokensPerCta);
    // G from T (not gridDim): the workspace layout is a function of T alone.
    p.grid = arith::DivUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, tokens, idx(tokensPerCta - 1)), per);
  }
  p.first =
      arith::MinUIOp::create(b, loc, arith::MulIOp::create(b, loc, p.cta, per), tokens);
  p.last =
      arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, p.first, per), tokens);
  auto view = [&](MemRefType type, Value offset, ValueRange sizes) {
    return memref::ViewOp::create(b, loc, type, workspace, offset, sizes).getResult();
  };
  auto align16 = [&](Value bytes) {
    return arith::MulIOp::create(
        b, loc,
        arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, bytes, idx(15)),
                               idx(16)),
        idx(16));
  };
  p.ticket = view(MemRefType::get({1}, b.getI32Type()), idx(0), {});
  Value offset = idx(16);
  layout.fixedBytes = 16;
  for (TokenFold fold : plan.folds) {
    Type elem = fold.tokens.getResult(0).getType();
    int64_t bytes = fold.extent * elementBytes(elem);
    Value count = arith::MulIOp::create(b, loc, p.grid, idx(fold.extent));
    p.partials.push_back(
        view(MemRefType::get({ShapedType::kDynamic}, elem), offset, ValueRange{count}));
    offset = align16(arith::AddIOp::create(
        b, loc, offset, arith::MulIOp::create(b, loc, p.grid, idx(bytes))));
    // G * bytes <= (T / P + 1) * bytes, rounded up to 16.
    layout.perTokenBytes += (bytes + tokensPerCta - 1) / tokensPerCta;
    layout.fixedBytes += bytes + 16;
  }
  for (Value buffer : plan.privatized) {
    auto type = cast<MemRefType>(buffer.getType());
    int64_t bytes = roundUp16(type.getNumElements() * elementBytes(type.getElementType()));
    Value mine = arith::AddIOp::create(b, loc, offset,
                                       arith::MulIOp::create(b, loc, p.cta, idx(bytes)));
    p.privateCopy.push_back(
        view(MemRefType::get(type.getShape(), type.getElementType()), mine, {}));
    offset = arith::AddIOp::create(b, loc, offset,
                                   arith::MulIOp::create(b, loc, p.grid, idx(bytes)));
    layout.perTokenBytes += (bytes + tokensPerCta - 1) / tokensPerCta;
    layout.fixedBytes += bytes;
  }
  layout.reservedBytes = offset;
  return p;
}

/// `body` inside `scf.if (cta == 0)` at b's insertion point.
void inCtaZero(OpBuilder &b, Location loc, Value cta, function_ref<void()> body) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, cta, zero);
  auto branch = scf::IfOp::create(b, loc, isFirst, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard keep(b);
  b.setInsertionPoint(branch.thenBlock()->getTerminator());
  body();
}

void setTokenRange(scf::ParallelOp loop, Value first, Value last) {
  loop.getLowerBoundMutable()[0].set(first);
  loop.getUpperBoundMutable()[0].set(last);
}

/// This CTA's tiles of a tile count `tiles`: [cta * P / S, min((cta + 1) * P / S,
/// tiles)), built before `at` (P = tokens per CTA, a multiple of the tile's S tokens).
std::pair<Value, Value> ownTiles(Operation *at, const Prologue &p, Value tiles,
                                 int64_t perCta) {
  OpBuilder b(at);
  Location loc = at->getLoc();
  Value m = arith::ConstantIndexOp::create(b, loc, perCta);
  Value first = arith::MulIOp::create(b, loc, p.cta, m);
  Value last =
      arith::MinUIOp::create(b, loc, arith::AddIOp::create(b, loc, first, m), tiles);
  return {first, last};
}

/// A tile loop runs this CTA's tiles only.
void setOwnTiles(scf::ParallelOp loop, const Prologue &p, int64_t perCta) {
  auto [first, last] = ownTiles(loop, p, loop.getUpperBound()[0], perCta);
  setTokenRange(loop, first, last);
}

/// A tile scan (per expert, a running value over the tiles stored at each tile's row)
/// stops after this CTA's tiles and stores only at their rows: the rows of the other
/// tiles are their CTAs'.
void scanToOwnTiles(scf::ParallelOp scan, const Prologue &p, int64_t perCta) {
  for (Operation &op : scan.getBody()->without_terminator()) {
    auto tilesLoop = dyn_cast<scf::ForOp>(op);
    if (!tilesLoop)
      continue;
    auto [first, last] = ownTiles(scan, p, tilesLoop.getUpperBound(), perCta);
    tilesLoop.getUpperBoundMutable().set(last);
    Value tile = tilesLoop.getInductionVar();
    SmallVector<memref::StoreOp> stores;
    for (Operation &inner : tilesLoop.getBody()->without_terminator())
      if (auto store = dyn_cast<memref::StoreOp>(inner))
        stores.push_back(store);
    for (memref::StoreOp store : stores) {
      OpBuilder b(store);
      Value mine =
          arith::CmpIOp::create(b, store.getLoc(), arith::CmpIPredicate::uge, tile, first);
      auto guard = scf::IfOp::create(b, store.getLoc(), mine, /*withElseRegion=*/false);
      store->moveBefore(guard.thenBlock()->getTerminator());
    }
  }
}

/// Moves every top-level memref.alloc (with the pure code of its sizes) to the front of
/// the body, so that both kernels place the temporaries at the same offsets whatever
/// code each keeps.
void hoistAllocs(Block &body) {
  Operation *anchor = &body.front();
  std::function<void(Operation *)> moveToFront = [&](Operation *op) {
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == &body && !def->isBeforeInBlock(anchor))
        moveToFront(def);
    if (op == anchor)
      anchor = op->getNextNode();
    else
      op->moveBefore(anchor);
  };
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<memref::AllocOp>(op))
      moveToFront(&op);
}

/// Moves `op` (and, first, the pure code in `body` its operands need) in front of
/// `pos`; false, with nothing moved, when an operand is made by code that is not pure.
bool moveWithOperandsBefore(Operation *op, Operation *pos, Block &body) {
  llvm::SetVector<Operation *> needed; // pure producers at or after pos, uses first
  bool movable = true;
  std::function<void(Operation *)> collect = [&](Operation *user) {
    user->walk([&](Operation *inner) {
      for (Value v : inner->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || def->getBlock() != &body || def->isBeforeInBlock(pos) ||
            needed.contains(def))
          continue;
        if (!isPure(*def)) {
          movable = false;
          return;
        }
        collect(def);
        needed.insert(def);
      }
    });
  };
  collect(op);
  if (!movable)
    return false;
  SmallVector<Operation *> order(needed.begin(), needed.end());
  llvm::sort(order, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *def : order)
    def->moveBefore(pos);
  op->moveBefore(pos);
  return true;
}

/// Moves the token stage's work up: a token loop writing its own tokens' rows, or a
/// token fold, that the source (stage formation) placed after routing, counting or
/// whole-batch code it does not depend on (union_topk after the counts) goes in front
/// of that code, as far up as its accesses allow, so that the split runs it in kernel 1
/// on every CTA's own tokens instead of in the last CTA's tail over the whole batch.
void hoistTokenWork(Block &body, Value tokens) {
  // Token work as the split sees it: a token loop writing its own rows, a token fold,
  // reading the rows earlier token work writes at their own row only.
  SmallVector<Operation *> candidates;
  llvm::DenseSet<Value> rows;
  for (Operation &op : body.without_terminator()) {
    if (isTokenLoop(&op, tokens)) {
      auto loop = cast<scf::ParallelOp>(op);
      if (writesOwnRows(loop) && readsOnlyRow(&op, loop.getInductionVars()[0], rows)) {
        candidates.push_back(&op);
        Accesses a = accessesOf(&op);
        rows.insert(a.writes.begin(), a.writes.end());
      }
    } else if (std::optional<TokenFold> fold = asTokenFold(&op, tokens);
               fold && readsOnlyRow(fold->tokens, fold->tokens.getInductionVar(), rows)) {
      candidates.push_back(&op);
    }
  }
  // Where the token stage ends: the first code that is not token work. Work moves up
  // to there at most (the token stage keeps its order).
  llvm::SmallPtrSet<Operation *, 8> isCandidate(candidates.begin(), candidates.end());
  Operation *boundary = nullptr;
  for (Operation &op : body.without_terminator())
    if (!isPure(op) && !isa<memref::AllocOp>(op) && !isCandidate.contains(&op)) {
      boundary = &op;
      break;
    }
  if (!boundary)
    return;
  for (Operation *op : candidates) {
    if (op->isBeforeInBlock(boundary))
      continue;
    Accesses mine = accessesOf(op);
    if (mine.unknown)
      continue;
    Operation *target = nullptr;
    for (Operation *prev = op->getPrevNode(); prev && !prev->isBeforeInBlock(boundary);
         prev = prev->getPrevNode()) {
      if (isPure(*prev) || isa<memref::AllocOp>(prev))
        continue;
      // Stop at code it depends on (or that depends on it).
      Accesses a = accessesOf(prev);
      auto any = [](const llvm::SetVector<Value> &xs, const llvm::SetVector<Value> &ys) {
        return llvm::any_of(xs, [&](Value v) { return ys.contains(v); });
      };
      if (a.unknown || any(mine.reads, a.writes) || any(mine.writes, a.writes) ||
          any(mine.writes, a.reads) || llvm::any_of(op->getOperands(), [&](Value v) {
            return v.getDefiningOp() == prev;
          }))
        break;
      bool usesResult = false;
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          usesResult |= v.getDefiningOp() == prev;
      });
      if (usesResult)
        break;
      target = prev;
    }
    if (target)
      (void)moveWithOperandsBefore(op, target, body);
  }
}

/// Replaces T <op> constant by the answer it has for every T >= minTokens (a phase
/// gate's `max_tokens` below the size class), then folds the branches it decides.
void assumeLargeBatch(gpu::GPUFuncOp kernel, Value tokens, int64_t minTokens) {
  using P = arith::CmpIPredicate;
  SmallVector<std::pair<arith::CmpIOp, bool>> decided;
  kernel.walk([&](arith::CmpIOp cmp) {
    std::optional<int64_t> c = getConstantIntValue(cmp.getRhs());
    if (cmp.getLhs() != tokens || !c)
      return;
    switch (cmp.getPredicate()) {
    case P::ule:
      if (*c < minTokens)
        decided.push_back({cmp, false});
      break;
    case P::ult:
      if (*c <= minTokens)
        decided.push_back({cmp, false});
      break;
    case P::ugt:
      if (*c < minTokens)
        decided.push_back({cmp, true});
      break;
    case P::uge:
      if (*c <= minTokens)
        decided.push_back({cmp, true});
      break;
    default:
      break;
    }
  });
  for (auto [cmp, answer] : decided) {
    OpBuilder b(cmp);
    cmp.replaceAllUsesWith(
        arith::ConstantIntOp::create(b, cmp.getLoc(), answer, 1).getResult());
    cmp.erase();
  }
  if (decided.empty())
    return;
  RewritePatternSet patterns(kernel.getContext());
  scf::IfOp::getCanonicalizationPatterns(patterns, kernel.getContext());
  (void)applyPatternsGreedily(kernel.getBody(), std::move(patterns));
}

/// Kernel 1: the token stage on this CTA's tokens, the folds' partials, and (CTA 0)
/// the ticket reset and hoisted initialisations. Everything else is dropped.
LogicalResult finishKernel1(Block &body, Location loc, LargeBatchPlan &plan,
                            const Prologue &p, Operation *routerStart, WhyNot whyNot) {
  OpBuilder b(body.getParentOp()->getContext());
  for (auto [folded, partial] : llvm::zip(plan.folds, p.partials)) {
    TokenFold fold = folded;
    fold.tokens.getLowerBoundMutable().set(p.first);
    fold.tokens.getUpperBoundMutable().set(p.last);
    Block *loopBody = fold.loop.getBody();
    // Drop the finishing code; store the partial instead.
    SmallVector<Operation *> finish;
    for (Operation *op = fold.tokens->getNextNode(); op != loopBody->getTerminator();
         op = op->getNextNode())
      finish.push_back(op);
    for (Operation *op : llvm::reverse(finish)) {
      if (!op->use_empty()) {
        whyNot("a token fold's finishing code escapes its loop");
        return failure();
      }
      op->erase();
    }
    b.setInsertionPointAfter(fold.tokens);
    Value e = fold.loop.getInductionVars()[0];
    Value at = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, p.cta,
                              arith::ConstantIndexOp::create(b, loc, fold.extent)),
        e);
    memref::StoreOp::create(b, loc, fold.tokens.getResult(0), partial, ValueRange{at});
  }
  for (Operation *op : plan.kernel1)
    if (isTokenLoop(op, body.getArgument(0)))
      setTokenRange(cast<scf::ParallelOp>(op), p.first, p.last);
  for (scf::ParallelOp loop : plan.tileLoops)
    if (plan.kernel1.contains(loop))
      setOwnTiles(loop, p, p.tilesPerCta);
  // CTA 0: reset the ticket for kernel 2, run the hoisted initialisations.
  b.setInsertionPoint(body.getTerminator());
  inCtaZero(b, loc, p.cta, [&] {
    memref::StoreOp::create(b, loc, arith::ConstantIntOp::create(b, loc, 0, 32), p.ticket,
                            ValueRange{arith::ConstantIndexOp::create(b, loc, 0)});
    for (Operation *op : plan.hoisted)
      op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
  });
  // Drop the rest (kernel 2's code), last first so that uses go before definitions.
  Operation *branch = body.getTerminator()->getPrevNode();
  SmallVector<Operation *> ops;
  for (Operation *op = routerStart; op != branch; op = op->getNextNode())
    ops.push_back(op);
  for (Operation *op : llvm::reverse(ops)) {
    if (plan.kernel1.contains(op) || isa<memref::AllocOp>(op))
      continue;
    if (op->use_empty())
      op->erase();
    else if (!isPure(*op)) {
      whyNot("kernel 1 would need a value kernel 2 computes");
      return failure();
    }
  }
  return success();
}

/// An scf.for folding `fold`'s combine over [lb, ub) `unroll` indices a step: each
/// index's value first (`valueAt(i)`, in flight together; an index past the end takes
/// the last one's), then the combines in index order, an index past the end skipped -
/// the same result as one index a step, float additions included, with a latency chain
/// `unroll` times shorter. A constant `lb` is made after the step (the order the
/// emitted code has always had).
scf::ForOp foldUnrolled(OpBuilder &b, Location loc, TokenFold fold, OpFoldResult lb,
                        Value ub, int64_t unroll,
                        function_ref<Value(OpBuilder &, Value)> valueAt) {
  Value acc = fold.tokens.getRegionIterArgs()[0];
  Value last = arith::SubIOp::create(b, loc, ub, arith::ConstantIndexOp::create(b, loc, 1));
  Value step = arith::ConstantIndexOp::create(b, loc, unroll);
  Value lower = isa<Value>(lb)
                    ? cast<Value>(lb)
                    : arith::ConstantIndexOp::create(
                          b, loc, cast<IntegerAttr>(cast<Attribute>(lb)).getInt())
                          .getResult();
  return scf::ForOp::create(
      b, loc, lower, ub, step, fold.tokens.getInitArgs(),
      [&](OpBuilder &nb, Location, Value i0, ValueRange it) {
        SmallVector<Value> values, valid;
        for (int64_t j = 0; j < unroll; ++j) {
          Value i = arith::AddIOp::create(nb, loc, i0,
                                          arith::ConstantIndexOp::create(nb, loc, j));
          valid.push_back(arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, i, ub));
          values.push_back(valueAt(nb, arith::MinUIOp::create(nb, loc, i, last)));
        }
        Value accValue = it[0];
        for (auto [x, ok] : llvm::zip(values, valid)) {
          IRMapping mapping;
          mapping.map(acc, accValue);
          for (Value operand : fold.combine->getOperands())
            if (operand != acc)
              mapping.map(operand, x);
          Value next = nb.clone(*fold.combine, mapping)->getResult(0);
          accValue = arith::SelectOp::create(nb, loc, ok, next, accValue);
        }
        scf::YieldOp::create(nb, loc, accValue);
      });
}

/// Rewrites a token fold of the tail (one thread per expert folding over the whole
/// batch) to take kFoldUnroll tokens a step (see foldUnrolled; a step past the end
/// reloads the last token).
void unrollTailFold(TokenFold &fold) {
  constexpr int64_t kFoldUnroll = 8;
  scf::ForOp loop = fold.tokens;
  OpBuilder b(loop);
  Value acc = loop.getRegionIterArgs()[0];
  Block *body = loop.getBody();
  auto unrolled =
      foldUnrolled(b, loop.getLoc(), fold, loop.getLowerBound(), loop.getUpperBound(),
                   kFoldUnroll, [&](OpBuilder &nb, Value token) {
                     IRMapping mapping;
                     mapping.map(loop.getInductionVar(), token);
                     for (Operation &op : body->without_terminator())
                       if (&op != fold.combine)
                         nb.clone(op, mapping);
                     Value x;
                     for (Value operand : fold.combine->getOperands())
                       if (operand != acc)
                         x = mapping.lookupOrDefault(operand);
                     return x;
                   });
  loop.getResult(0).replaceAllUsesWith(unrolled.getResult(0));
  loop.erase();
  fold.tokens = unrolled;
}

/// Kernel 2: partials combined, set selection into private copies (outputs copied out
/// by CTA 0), routing on this CTA's tokens, the tail in the last CTA.
LogicalResult finishKernel2(const GpuTargetInfo &target, Block &body, Location loc,
                            LargeBatchPlan &plan, const Prologue &p) {
  OpBuilder b(body.getParentOp()->getContext());
  for (Operation *op : plan.kernel1)
    if (isTokenLoop(op, body.getArgument(0)) || tileTokensOf(op))
      op->erase();
  for (Operation *op : plan.hoisted)
    op->erase();
  for (auto [folded, partial] : llvm::zip(plan.folds, p.partials)) {
    TokenFold fold = folded;
    b.setInsertionPoint(fold.tokens);
    Value e = fold.loop.getInductionVars()[0];
    Value extent = arith::ConstantIndexOp::create(b, loc, fold.extent);
    // The partials in CTA order, kCombineUnroll CTAs a step (see foldUnrolled; a step
    // past the last CTA reloads the last one).
    constexpr int64_t kCombineUnroll = 8;
    auto combined =
        foldUnrolled(b, loc, fold, b.getIndexAttr(0), p.grid, kCombineUnroll,
                     [&](OpBuilder &nb, Value c) -> Value {
                       Value at = arith::AddIOp::create(
                           nb, loc, arith::MulIOp::create(nb, loc, c, extent), e);
                       return memref::LoadOp::create(nb, loc, partial, ValueRange{at});
                     });
    fold.tokens.getResult(0).replaceAllUsesWith(combined.getResult(0));
    fold.tokens.erase();
  }
  for (scf::ParallelOp loop : plan.routeLoops)
    setTokenRange(loop, p.first, p.last);
  for (scf::ParallelOp loop : plan.tileLoops)
    if (!plan.kernel1.contains(loop))
      setOwnTiles(loop, p, p.tilesPerCta);
  for (scf::ParallelOp scan : plan.tileScans)
    scanToOwnTiles(scan, p, p.tilesPerCta);
  // After set selection: CTA 0 copies the selected outputs out of its private copies
  // before the first routing code (token or tile loops, scans) or the tail.
  Operation *afterSelection = plan.tailStart ? plan.tailStart : body.getTerminator();
  auto earlier = [&](Operation *op) {
    if (op->isBeforeInBlock(afterSelection))
      afterSelection = op;
  };
  for (scf::ParallelOp loop : plan.routeLoops)
    earlier(loop);
  for (scf::ParallelOp loop : plan.tileLoops)
    if (!plan.kernel1.contains(loop) && loop->getBlock() == &body)
      earlier(loop);
  for (scf::ParallelOp scan : plan.tileScans)
    earlier(scan);
  for (auto [buffer, mine] : llvm::zip(plan.privatized, p.privateCopy)) {
    Value copy = mine;
    buffer.replaceUsesWithIf(
        copy, [&](OpOperand &use) { return use.getOwner() != copy.getDefiningOp(); });
    if (!isa<BlockArgument>(buffer))
      continue;
    b.setInsertionPoint(afterSelection);
    auto type = cast<MemRefType>(buffer.getType());
    inCtaZero(b, loc, p.cta, [&] {
      Value zero = arith::ConstantIndexOp::create(b, loc, 0);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto dim = [&](int d) {
        return arith::ConstantIndexOp::create(b, loc, type.getDimSize(d));
      };
      // Spread over the block (one element or row a thread), not a thread-0 loop.
      scf::ParallelOp::create(
          b, loc, ValueRange{zero}, ValueRange{dim(0)}, ValueRange{one},
          [&](OpBuilder &nb, Location, ValueRange ivs) {
            Value i = ivs[0];
            if (type.getRank() == 1) {
              memref::StoreOp::create(nb, loc, memref::LoadOp::create(nb, loc, copy, i),
                                      buffer, i);
            } else {
              scf::ForOp::create(
                  nb, loc, zero, dim(1), one, ValueRange{},
                  [&](OpBuilder &nn, Location, Value j, ValueRange) {
                    Value v = memref::LoadOp::create(nn, loc, copy, ValueRange{i, j});
                    memref::StoreOp::create(nn, loc, v, buffer, ValueRange{i, j});
                    scf::YieldOp::create(nn, loc);
                  });
            }
          });
    });
  }
  if (!plan.tailStart)
    return success();
  // The ticket: every thread fences its writes device-wide before the barrier after
  // which thread 0 counts the CTA done (release); after the count, every thread fences
  // again before it reads what the other CTAs wrote (acquire).
  b.setInsertionPoint(plan.tailStart);
  auto fence = [&] { target.createDeviceFence(b, loc); };
  fence();
  gpu::BarrierOp::create(b, loc);
  Value one = arith::ConstantIntOp::create(b, loc, 1, 32);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value done = memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, one,
                                           p.ticket, ValueRange{zero});
  fence();
  Value lastCta = arith::IndexCastOp::create(
      b, loc, b.getI32Type(),
      arith::SubIOp::create(b, loc, p.grid, arith::ConstantIndexOp::create(b, loc, 1)));
  Value isLast = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, done, lastCta);
  auto tail = scf::IfOp::create(b, loc, isLast, /*withElseRegion=*/false);
  // The tail's folds over the whole batch, unrolled (before the tail moves: a fold is
  // a top-level op of the body).
  for (Operation *op = plan.tailStart; op && op != body.getTerminator();
       op = op->getNextNode())
    if (std::optional<TokenFold> fold = asTokenFold(op, body.getArgument(0)))
      unrollTailFold(*fold);
  Operation *end = body.getTerminator();
  for (Operation *op = plan.tailStart; op != end;) {
    Operation *next = op->getNextNode();
    op->moveBefore(tail.thenBlock()->getTerminator());
    op = next;
  }
  return success();
}

} // namespace

FailureOr<LargeBatchLayout> buildLargeBatchKernel(const GpuTargetInfo &target,
                                                  gpu::GPUFuncOp kernel, KernelRole role,
                                                  int64_t tokensPerCta, int64_t minTokens,
                                                  WhyNot whyNot) {
  Block &body = kernel.getBody().front();
  Location loc = kernel.getLoc();
  Value tokens = body.getArgument(0);
  Value workspace = body.getArgument(kernel.getFunctionType().getNumInputs() - 1);
  kernel.walk([](memref::DeallocOp op) { op.erase(); });
  assumeLargeBatch(kernel, tokens, minTokens);
  hoistAllocs(body);
  hoistTokenWork(body, tokens);
  FailureOr<LargeBatchPlan> plan = planLargeBatch(body, tokens, role, whyNot);
  if (failed(plan))
    return failure();
  Operation *routerStart = &body.front(); // the prologue goes in front of it
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  if (plan->tileTokens && role != KernelRole::Grid &&
      tokensPerCta % plan->tileTokens != 0) {
    whyNot("tokens per CTA (" + llvm::Twine(tokensPerCta) +
           ") must be a multiple of the token tiles' " + llvm::Twine(plan->tileTokens));
    return failure();
  }
  Prologue p = buildPrologue(b, loc, tokens, workspace, *plan, role, tokensPerCta);
  p.tilesPerCta = plan->tileTokens ? tokensPerCta / plan->tileTokens : 0;
  p.layout.needsKernel2 = plan->kernel2HasWork;
  LogicalResult done = role == KernelRole::LargeSecond
                           ? finishKernel2(target, body, loc, *plan, p)
                           : finishKernel1(body, loc, *plan, p, routerStart, whyNot);
  if (failed(done))
    return failure();
  return p.layout;
}

} // namespace switchyard::moe
