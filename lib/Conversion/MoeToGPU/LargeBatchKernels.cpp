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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace switchyard::moe {

namespace {

/// The buffer a memref value views: a kernel parameter or a memref.alloc.
Value rootOf(Value m) {
  while (Operation *def = m.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    m = view.getViewSource();
  }
  return m;
}

struct Accesses {
  llvm::SetVector<Value> reads, writes;
  bool unknown = false; // an op with memory effects the split does not model
  void add(const Accesses &other) {
    reads.insert(other.reads.begin(), other.reads.end());
    writes.insert(other.writes.begin(), other.writes.end());
    unknown |= other.unknown;
  }
};

Accesses accessesOf(Operation *op) {
  Accesses a;
  op->walk([&](Operation *inner) {
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      a.reads.insert(rootOf(load.getMemRef()));
    } else if (auto store = dyn_cast<memref::StoreOp>(inner)) {
      a.writes.insert(rootOf(store.getMemRef()));
    } else if (auto atomic = dyn_cast<memref::AtomicRMWOp>(inner)) {
      a.reads.insert(rootOf(atomic.getMemref()));
      a.writes.insert(rootOf(atomic.getMemref()));
    } else if (inner->getNumRegions() == 0 && !isMemoryEffectFree(inner) &&
               !isa<memref::AllocOp, memref::AllocaOp>(inner)) {
      a.unknown = true;
    }
  });
  return a;
}

template <typename Set> bool readsAny(const Accesses &a, const Set &buffers) {
  return llvm::any_of(a.reads, [&](Value v) { return buffers.contains(v); });
}

bool isIndex(Value v, int64_t c) {
  std::optional<int64_t> k = getConstantIntValue(v);
  return k && *k == c;
}

bool isPure(Operation &op) { return op.getNumRegions() == 0 && isMemoryEffectFree(&op); }

/// scf.parallel over [0, T) step 1 without reductions.
bool isTokenLoop(Operation *op, Value tokens) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  return loop && loop.getNumLoops() == 1 && loop.getInitVals().empty() &&
         isIndex(loop.getLowerBound()[0], 0) && loop.getUpperBound()[0] == tokens &&
         isIndex(loop.getStep()[0], 1);
}

/// True when an access to `m` at `indices` inside `scope` touches row `row` only: [row,
/// ...] of a buffer, or a row view of one at `row` made inside `scope`.
bool isRowAccess(Value m, ValueRange indices, Value row, Operation *scope) {
  if (m == rootOf(m))
    return !indices.empty() && indices[0] == row;
  auto view = m.getDefiningOp<memref::SubViewOp>();
  if (!view || !scope->isAncestor(view) || view.getSource() != rootOf(view.getSource()))
    return false;
  return dyn_cast<Value>(view.getMixedOffsets()[0]) == row;
}

/// True when every write of token loop `loop` lands in its own token's row.
bool writesOwnRows(scf::ParallelOp loop) {
  Value t = loop.getInductionVars()[0];
  bool own = true;
  loop.walk([&](Operation *op) {
    if (auto store = dyn_cast<memref::StoreOp>(op))
      own &= isRowAccess(store.getMemRef(), store.getIndices(), t, loop);
    else if (isa<memref::AtomicRMWOp>(op))
      own = false;
  });
  return own;
}

/// True when `scope` reads the buffers in `rowWise` (written row by row by earlier
/// loops of the same kernel, each CTA its own tokens) at row `row` only: what other
/// CTAs write in the same kernel is not there yet.
bool readsOnlyRow(Operation *scope, Value row, const llvm::DenseSet<Value> &rowWise) {
  bool own = true;
  scope->walk([&](memref::LoadOp load) {
    if (rowWise.contains(rootOf(load.getMemRef())))
      own &= isRowAccess(load.getMemRef(), load.getIndices(), row, scope);
  });
  return own;
}

/// Writes of a routing loop that are not its own token's row (atomic counts).
llvm::SetVector<Value> writesAcrossRows(scf::ParallelOp loop) {
  llvm::SetVector<Value> across;
  loop.walk([&](memref::AtomicRMWOp op) { across.insert(rootOf(op.getMemref())); });
  if (!writesOwnRows(loop))
    loop.walk([&](memref::StoreOp op) { across.insert(rootOf(op.getMemRef())); });
  return across;
}

/// `init` is the identity of `combine` (the partials all start from it).
bool isIdentity(Operation *combine, Value init) {
  Attribute value;
  if (!matchPattern(init, m_Constant(&value)))
    return false;
  if (auto f = dyn_cast<FloatAttr>(value)) {
    const APFloat &v = f.getValue();
    if (isa<arith::AddFOp>(combine))
      return v.isZero();
    if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine))
      return v.isInfinity() && v.isNegative();
    if (isa<arith::MinimumFOp, arith::MinNumFOp>(combine))
      return v.isInfinity() && !v.isNegative();
    return false;
  }
  auto i = dyn_cast<IntegerAttr>(value);
  if (!i)
    return false;
  const APInt &v = i.getValue();
  if (isa<arith::AddIOp, arith::OrIOp, arith::XOrIOp, arith::MaxUIOp>(combine))
    return v.isZero();
  if (isa<arith::AndIOp, arith::MinUIOp>(combine))
    return v.isAllOnes();
  if (isa<arith::MaxSIOp>(combine))
    return v.isMinSignedValue();
  if (isa<arith::MinSIOp>(combine))
    return v.isMaxSignedValue();
  return false;
}

/// An expert-parallel loop (scf.parallel over a static [0, C)) whose body is pure code,
/// one scf.for over [0, T) folding `acc = combine(acc, x)` from combine's identity while
/// only reading memory, and then finishing code that uses the fold (stores it).
struct TokenFold {
  scf::ParallelOp loop;
  scf::ForOp tokens;
  Operation *combine;
  int64_t extent;
  /// Accesses of the loop up to the fold (kernel 1) and of the finishing code (kernel 2).
  Accesses head, finish;
};

std::optional<TokenFold> asTokenFold(Operation *op, Value tokens) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  if (!loop || loop.getNumLoops() != 1 || !loop.getInitVals().empty() ||
      !isIndex(loop.getLowerBound()[0], 0) || !isIndex(loop.getStep()[0], 1))
    return std::nullopt;
  std::optional<int64_t> extent = getConstantIntValue(loop.getUpperBound()[0]);
  if (!extent)
    return std::nullopt;
  TokenFold fold{loop, nullptr, nullptr, *extent, {}, {}};
  for (Operation &inner : loop.getBody()->without_terminator()) {
    if (fold.tokens) {
      fold.finish.add(accessesOf(&inner));
      continue;
    }
    if (auto f = dyn_cast<scf::ForOp>(inner)) {
      fold.tokens = f;
      fold.head.add(accessesOf(&inner));
      continue;
    }
    if (!isPure(inner))
      return std::nullopt;
  }
  scf::ForOp f = fold.tokens;
  if (!f || f.getNumRegionIterArgs() != 1 || !isIndex(f.getLowerBound(), 0) ||
      f.getUpperBound() != tokens || !isIndex(f.getStep(), 1) ||
      !fold.head.writes.empty() || fold.head.unknown)
    return std::nullopt;
  Value acc = f.getRegionIterArgs()[0];
  auto yield = cast<scf::YieldOp>(f.getBody()->getTerminator());
  Operation *combine = yield.getOperand(0).getDefiningOp();
  if (!combine || combine->getBlock() != f.getBody() || combine->getNumOperands() != 2 ||
      combine->getNumResults() != 1 || !acc.hasOneUse() ||
      !llvm::is_contained(combine->getOperands(), acc) ||
      combine->getOperand(0) == combine->getOperand(1) ||
      !combine->getResult(0).hasOneUse() || !isIdentity(combine, f.getInitArgs()[0]))
    return std::nullopt;
  fold.combine = combine;
  return fold;
}

/// Values that are the same in every CTA and thread and need no memory: kernel
/// parameters, constants, buffers, and pure code of those.
bool isInvariant(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return isa<gpu::GPUFuncOp>(arg.getOwner()->getParentOp());
  Operation *def = v.getDefiningOp();
  if (!isPure(*def) && !isa<memref::AllocOp>(def))
    return false;
  return llvm::all_of(def->getOperands(), isInvariant);
}

/// Code that only writes, into buffers nothing before it touched, values computed from
/// invariants: it can run once, in CTA 0 of kernel 1, instead of where it stands.
bool isHoistable(Operation &op, const Accesses &a, const llvm::DenseSet<Value> &touched) {
  if (a.unknown || !a.reads.empty() || a.writes.empty() ||
      llvm::any_of(a.writes, [&](Value v) { return touched.contains(v); }))
    return false;
  bool invariant = true;
  op.walk([&](Operation *inner) {
    for (Value v : inner->getOperands()) {
      Operation *owner =
          isa<BlockArgument>(v) ? v.getParentBlock()->getParentOp() : v.getDefiningOp();
      if (!op.isAncestor(owner))
        invariant &= isInvariant(v);
    }
  });
  return invariant;
}

/// Whether every CTA can keep a private copy of `buffer` (small, static per-expert
/// state, not per-token data).
bool fitsEveryCta(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return type.hasStaticShape() && type.getRank() <= 2;
}

/// How the router's top-level code divides between the two kernels.
struct Plan {
  llvm::SmallPtrSet<Operation *, 8> kernel1; // token loops and folds of the token stage
  SmallVector<TokenFold> folds;
  SmallVector<Operation *> hoisted;        // run by CTA 0 of kernel 1
  SmallVector<scf::ParallelOp> routeLoops; // kernel 2, each CTA its tokens
  Operation *tailStart = nullptr;          // kernel 2, the last CTA: this and later
  SmallVector<Value> privatized;           // buffers set selection writes
  bool kernel2HasWork = false;             // folds, selection, routing or a tail
};

LogicalResult makePlan(Block &body, Value tokens, Plan &plan, std::string &reason) {
  enum class Phase { TokenStage, Selection, Routing } phase = Phase::TokenStage;
  llvm::DenseSet<Value> touched;     // buffers earlier code accesses
  llvm::DenseSet<Value> foldResults; // buffers the folds' finishing code writes
  llvm::DenseSet<Value> acrossRows;  // buffers routing loops write outside their rows
  llvm::DenseSet<Value> kernel1Rows; // buffers kernel 1's token loops write, row-wise
  llvm::DenseSet<Value> routeRows;   // buffers routing loops write, row-wise
  llvm::DenseSet<Value> hoistedWrites;
  llvm::SetVector<Value> privatized;
  Accesses later; // routing loops and the tail
  int selectionOps = 0;
  auto touch = [&](const Accesses &a) {
    touched.insert(a.reads.begin(), a.reads.end());
    touched.insert(a.writes.begin(), a.writes.end());
  };
  for (Operation &op : body.without_terminator()) {
    if (isPure(op) || isa<memref::AllocOp>(op))
      continue;
    Accesses a = accessesOf(&op);
    if (a.unknown) {
      reason = "'" + op.getName().getStringRef().str() +
               "' has memory effects the split cannot place";
      return failure();
    }
    if (plan.tailStart) {
      later.add(a);
      continue;
    }
    if (phase == Phase::TokenStage) {
      if (isTokenLoop(&op, tokens) && writesOwnRows(cast<scf::ParallelOp>(op)) &&
          !readsAny(a, foldResults) &&
          readsOnlyRow(&op, cast<scf::ParallelOp>(op).getInductionVars()[0], kernel1Rows)) {
        plan.kernel1.insert(&op);
        kernel1Rows.insert(a.writes.begin(), a.writes.end());
        touch(a);
        continue;
      }
      if (std::optional<TokenFold> fold = asTokenFold(&op, tokens);
          fold && !readsAny(fold->head, foldResults) &&
          readsOnlyRow(fold->tokens, fold->tokens.getInductionVar(), kernel1Rows)) {
        plan.kernel1.insert(&op);
        touch(fold->head);
        touch(fold->finish);
        foldResults.insert(fold->finish.writes.begin(), fold->finish.writes.end());
        privatized.insert(fold->finish.writes.begin(), fold->finish.writes.end());
        plan.folds.push_back(*fold);
        continue;
      }
      phase = Phase::Selection;
    }
    if (isHoistable(op, a, touched)) {
      plan.hoisted.push_back(&op);
      hoistedWrites.insert(a.writes.begin(), a.writes.end());
      touch(a);
      continue;
    }
    // Selection turns fold results into small per-expert state each CTA keeps a copy
    // of. Code that writes per-token (dynamic) buffers, or reads the token stage's rows
    // across the whole batch (a capacity admission, an expert's choice of tokens), is
    // the tail's: the last CTA runs it once.
    if (phase == Phase::Selection && !isTokenLoop(&op, tokens) &&
        llvm::all_of(a.writes, fitsEveryCta) && !readsAny(a, kernel1Rows)) {
      ++selectionOps;
      privatized.insert(a.writes.begin(), a.writes.end());
      touch(a);
      continue;
    }
    if (isTokenLoop(&op, tokens) && !readsAny(a, acrossRows) &&
        readsOnlyRow(&op, cast<scf::ParallelOp>(op).getInductionVars()[0], routeRows)) {
      phase = Phase::Routing;
      auto loop = cast<scf::ParallelOp>(op);
      routeRows.insert(a.writes.begin(), a.writes.end());
      plan.routeLoops.push_back(loop);
      llvm::SetVector<Value> across = writesAcrossRows(loop);
      acrossRows.insert(across.begin(), across.end());
      later.add(a);
      touch(a);
      continue;
    }
    plan.tailStart = &op;
    later.add(a);
  }
  for (Value buffer : privatized) {
    auto type = cast<MemRefType>(buffer.getType());
    if (!fitsEveryCta(buffer)) {
      reason = "set selection writes a buffer of type " + [&] {
        std::string t;
        llvm::raw_string_ostream os(t);
        os << type;
        return t;
      }() + " (per-token or higher-rank), which each CTA cannot keep a copy of";
      return failure();
    }
    if (hoistedWrites.contains(buffer) || later.writes.contains(buffer)) {
      reason = "a buffer set selection writes is also written by other phases";
      return failure();
    }
  }
  plan.privatized.assign(privatized.begin(), privatized.end());
  plan.kernel2HasWork = !plan.folds.empty() || !plan.routeLoops.empty() || plan.tailStart ||
                        !plan.privatized.empty() || selectionOps;
  return success();
}

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
  SmallVector<Value> partials;    // per fold: memref<? x elem>, [G * C]
  SmallVector<Value> privateCopy; // per privatized buffer: this CTA's copy
};

Prologue buildPrologue(OpBuilder &b, Location loc, Value tokens, Value workspace,
                       Plan &plan, int64_t tokensPerCta, LargeBatchLayout &layout) {
  Prologue p;
  auto idx = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  p.cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value per;
  if (tokensPerCta == 0) {
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
LogicalResult finishKernel1(Block &body, Location loc, Plan &plan, const Prologue &p,
                            Operation *routerStart, std::string &reason) {
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
        reason = "a token fold's finishing code escapes its loop";
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
      reason = "kernel 1 would need a value kernel 2 computes";
      return failure();
    }
  }
  return success();
}

/// Rewrites a token fold of the tail (one thread per expert folding over the whole
/// batch) to take kFoldUnroll tokens a step: their loads first (in flight together; a
/// step past the end reloads the last token), then the combines in token order, one past
/// the end skipped - the same result, float additions included, with a latency chain
/// kFoldUnroll times shorter.
void unrollTailFold(TokenFold &fold) {
  constexpr int64_t kFoldUnroll = 8;
  scf::ForOp loop = fold.tokens;
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound();
  Value acc = loop.getRegionIterArgs()[0];
  Value iv = loop.getInductionVar();
  Block *body = loop.getBody();
  Value lastToken =
      arith::SubIOp::create(b, loc, ub, arith::ConstantIndexOp::create(b, loc, 1));
  auto unrolled = scf::ForOp::create(
      b, loc, lb, ub, arith::ConstantIndexOp::create(b, loc, kFoldUnroll),
      loop.getInitArgs(), [&](OpBuilder &nb, Location, Value t0, ValueRange it) {
        SmallVector<Value> values, valid;
        for (int64_t j = 0; j < kFoldUnroll; ++j) {
          Value t = arith::AddIOp::create(nb, loc, t0,
                                          arith::ConstantIndexOp::create(nb, loc, j));
          valid.push_back(arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, t, ub));
          IRMapping mapping;
          mapping.map(iv, arith::MinUIOp::create(nb, loc, t, lastToken).getResult());
          for (Operation &op : body->without_terminator())
            if (&op != fold.combine)
              nb.clone(op, mapping);
          Value x;
          for (Value operand : fold.combine->getOperands())
            if (operand != acc)
              x = mapping.lookupOrDefault(operand);
          values.push_back(x);
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
  loop.getResult(0).replaceAllUsesWith(unrolled.getResult(0));
  loop.erase();
  fold.tokens = unrolled;
}

/// Kernel 2: partials combined, set selection into private copies (outputs copied out
/// by CTA 0), routing on this CTA's tokens, the tail in the last CTA.
LogicalResult finishKernel2(const GpuTargetInfo &target, Block &body, Location loc,
                            Plan &plan, const Prologue &p) {
  OpBuilder b(body.getParentOp()->getContext());
  for (Operation *op : plan.kernel1)
    if (isTokenLoop(op, body.getArgument(0)))
      op->erase();
  for (Operation *op : plan.hoisted)
    op->erase();
  for (auto [folded, partial] : llvm::zip(plan.folds, p.partials)) {
    TokenFold fold = folded;
    b.setInsertionPoint(fold.tokens);
    Value acc = fold.tokens.getRegionIterArgs()[0];
    Value e = fold.loop.getInductionVars()[0];
    Value extent = arith::ConstantIndexOp::create(b, loc, fold.extent);
    // The partials in CTA order, kCombineUnroll CTAs a step: their loads first (in
    // flight together; a step past the last CTA reloads the last one), then the
    // combines in order, a combine past the last CTA skipped (the same result as one
    // CTA a step, float additions included).
    constexpr int64_t kCombineUnroll = 8;
    Value lastPartial =
        arith::SubIOp::create(b, loc, p.grid, arith::ConstantIndexOp::create(b, loc, 1));
    auto combined = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0), p.grid,
        arith::ConstantIndexOp::create(b, loc, kCombineUnroll), fold.tokens.getInitArgs(),
        [&](OpBuilder &nb, Location, Value c0, ValueRange it) {
          SmallVector<Value> values, valid;
          for (int64_t j = 0; j < kCombineUnroll; ++j) {
            Value c = arith::AddIOp::create(nb, loc, c0,
                                            arith::ConstantIndexOp::create(nb, loc, j));
            valid.push_back(
                arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::ult, c, p.grid));
            Value clamped = arith::MinUIOp::create(nb, loc, c, lastPartial);
            Value at = arith::AddIOp::create(
                nb, loc, arith::MulIOp::create(nb, loc, clamped, extent), e);
            values.push_back(memref::LoadOp::create(nb, loc, partial, ValueRange{at}));
          }
          Value accValue = it[0];
          for (auto [v, ok] : llvm::zip(values, valid)) {
            IRMapping mapping;
            mapping.map(acc, accValue);
            for (Value operand : fold.combine->getOperands())
              if (operand != acc)
                mapping.map(operand, v);
            Value next = nb.clone(*fold.combine, mapping)->getResult(0);
            accValue = arith::SelectOp::create(nb, loc, ok, next, accValue);
          }
          scf::YieldOp::create(nb, loc, accValue);
        });
    fold.tokens.getResult(0).replaceAllUsesWith(combined.getResult(0));
    fold.tokens.erase();
  }
  for (scf::ParallelOp loop : plan.routeLoops)
    setTokenRange(loop, p.first, p.last);
  // After set selection: CTA 0 copies the selected outputs out of its private copies.
  Operation *afterSelection = !plan.routeLoops.empty()
                                  ? plan.routeLoops.front().getOperation()
                              : plan.tailStart ? plan.tailStart
                                               : body.getTerminator();
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

LogicalResult buildLargeBatchKernel(const GpuTargetInfo &target, gpu::GPUFuncOp kernel,
                                    int which, int64_t tokensPerCta, int64_t minTokens,
                                    LargeBatchLayout &layout, std::string &reason) {
  Block &body = kernel.getBody().front();
  Location loc = kernel.getLoc();
  Value tokens = body.getArgument(0);
  Value workspace = body.getArgument(kernel.getFunctionType().getNumInputs() - 1);
  kernel.walk([](memref::DeallocOp op) { op.erase(); });
  assumeLargeBatch(kernel, tokens, minTokens);
  hoistAllocs(body);
  hoistTokenWork(body, tokens);
  Plan plan;
  if (failed(makePlan(body, tokens, plan, reason)))
    return failure();
  if (tokensPerCta == 0 && (plan.kernel2HasWork || !plan.folds.empty() ||
                            !plan.privatized.empty() || !plan.hoisted.empty())) {
    reason = "the policy is not token loops only";
    return failure();
  }
  Operation *routerStart = &body.front(); // the prologue goes in front of it
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  Prologue p = buildPrologue(b, loc, tokens, workspace, plan, tokensPerCta, layout);
  layout.needsKernel2 = plan.kernel2HasWork;
  if (which == 1)
    return finishKernel1(body, loc, plan, p, routerStart, reason);
  return finishKernel2(target, body, loc, plan, p);
}

} // namespace switchyard::moe
