//===- LargeBatchPlan.cpp - how a router divides between the pair ---------===//
#include "LargeBatchPlan.h"

#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;

namespace switchyard::moe {

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

void Accesses::add(const Accesses &other) {
  reads.insert(other.reads.begin(), other.reads.end());
  writes.insert(other.writes.begin(), other.writes.end());
  unknown |= other.unknown;
}

namespace {

/// One op's own memory effects on buffers (nested ops not included): `visit(root,
/// read, write)` for each buffer it touches; false when an effect names no value (or
/// the op does not say what it does). Allocations of fresh buffers touch nothing.
bool forEachAccess(Operation *op, function_ref<void(Value, bool, bool)> visit) {
  if (op->getNumRegions() != 0 || isMemoryEffectFree(op))
    return true; // a region's ops are walked themselves
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  llvm::MapVector<Value, std::pair<bool, bool>> touched; // root -> (read, write)
  for (const MemoryEffects::EffectInstance &effect : effects) {
    if (isa<MemoryEffects::Allocate>(effect.getEffect()) &&
        isa<memref::AllocOp, memref::AllocaOp>(op))
      continue;
    Value buffer = effect.getValue();
    if (!buffer || !isa<MemRefType>(buffer.getType()))
      return false;
    bool read = isa<MemoryEffects::Read>(effect.getEffect());
    bool write = isa<MemoryEffects::Write>(effect.getEffect());
    if (!read && !write)
      return false; // frees, allocations of other kinds
    std::pair<bool, bool> &rw = touched[rootOf(buffer)];
    rw.first |= read;
    rw.second |= write;
  }
  for (auto &[buffer, rw] : touched)
    visit(buffer, rw.first, rw.second);
  return true;
}

} // namespace

Accesses accessesOf(Operation *op) {
  Accesses a;
  op->walk([&](Operation *inner) {
    a.unknown |= !forEachAccess(inner, [&](Value buffer, bool read, bool write) {
      if (read)
        a.reads.insert(buffer);
      if (write)
        a.writes.insert(buffer);
    });
  });
  return a;
}

namespace {

template <typename Set> bool readsAny(const Accesses &a, const Set &buffers) {
  return llvm::any_of(a.reads, [&](Value v) { return buffers.contains(v); });
}

bool isIndex(Value v, int64_t c) {
  std::optional<int64_t> k = getConstantIntValue(v);
  return k && *k == c;
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

} // namespace

bool isPure(Operation &op) { return op.getNumRegions() == 0 && isMemoryEffectFree(&op); }

bool isTokenLoop(Operation *op, Value tokens) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  return loop && loop.getNumLoops() == 1 && loop.getInitVals().empty() &&
         isIndex(loop.getLowerBound()[0], 0) && loop.getUpperBound()[0] == tokens &&
         isIndex(loop.getStep()[0], 1);
}

bool writesOwnRows(scf::ParallelOp loop) {
  Value t = loop.getInductionVars()[0];
  bool own = true;
  loop.walk([&](Operation *op) {
    auto store = dyn_cast<memref::StoreOp>(op);
    forEachAccess(op, [&](Value, bool, bool write) {
      if (write)
        own &= store && isRowAccess(store.getMemRef(), store.getIndices(), t, loop);
    });
  });
  return own;
}

bool readsOnlyRow(Operation *scope, Value row, const llvm::DenseSet<Value> &rowWise) {
  bool own = true;
  scope->walk([&](Operation *op) {
    auto load = dyn_cast<memref::LoadOp>(op);
    forEachAccess(op, [&](Value buffer, bool read, bool write) {
      if (!read || write || !rowWise.contains(buffer))
        return; // an atomic update reads and writes: no other CTA's row
      own &= load && isRowAccess(load.getMemRef(), load.getIndices(), row, scope);
    });
  });
  return own;
}

namespace {

/// Writes of a routing loop that are not its own token's row (atomic counts).
llvm::SetVector<Value> writesAcrossRows(scf::ParallelOp loop) {
  llvm::SetVector<Value> across;
  const bool ownRows = writesOwnRows(loop);
  loop.walk([&](Operation *op) {
    const bool rowStore = ownRows && isa<memref::StoreOp>(op);
    forEachAccess(op, [&](Value buffer, bool, bool write) {
      if (write && !rowStore)
        across.insert(buffer);
    });
  });
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

} // namespace

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

int64_t tileTokensOf(Operation *op) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  auto attr = loop ? loop->getAttrOfType<IntegerAttr>(kTokenTilesAttr) : IntegerAttr();
  if (!attr || loop.getNumLoops() != 1 || !loop.getInitVals().empty() ||
      !isIndex(loop.getLowerBound()[0], 0) || !isIndex(loop.getStep()[0], 1))
    return 0;
  return attr.getInt();
}

bool isTileScan(Operation *op) {
  auto loop = dyn_cast<scf::ParallelOp>(op);
  return loop && loop->hasAttr(kTileScanAttr) && loop.getNumLoops() == 1 &&
         loop.getInitVals().empty();
}

namespace {

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

/// `type` as the IR spells it.
std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

} // namespace

FailureOr<LargeBatchPlan> planLargeBatch(Block &body, Value tokens, KernelRole role,
                                         WhyNot whyNot) {
  LargeBatchPlan plan;
  enum class Phase { TokenStage, Selection, Routing } phase = Phase::TokenStage;
  llvm::DenseSet<Value> touched;     // buffers earlier code accesses
  llvm::DenseSet<Value> foldResults; // buffers the folds' finishing code writes
  llvm::DenseSet<Value> acrossRows;  // buffers routing loops write outside their rows
  llvm::DenseSet<Value> kernel1Rows; // buffers kernel 1's token loops write, row-wise
  llvm::DenseSet<Value> routeRows;   // buffers routing loops write, row-wise
  llvm::DenseSet<Value> hoistedWrites;
  llvm::SetVector<Value> privatized;
  // Per-tile buffers written by kernel 1's tile loops (whole in kernel 2), and by
  // kernel 2's tile loops and scans (each CTA its own tiles' rows).
  llvm::DenseSet<Value> tileRows1, tileRows2;
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
      whyNot("'" + op.getName().getStringRef() +
             "' has memory effects the split cannot place");
      return failure();
    }
    if (plan.tailStart) {
      later.add(a);
      continue;
    }
    // A tile loop reads its own tiles' token rows and writes its own tile rows (or
    // scatters into outputs), by construction (TokenTiles.cpp).
    int64_t tileTokens = tileTokensOf(&op);
    if (tileTokens) {
      if (plan.tileTokens && plan.tileTokens != tileTokens) {
        whyNot("token tiles of different sizes");
        return failure();
      }
      plan.tileTokens = tileTokens;
    }
    if (phase == Phase::TokenStage && tileTokens &&
        writesOwnRows(cast<scf::ParallelOp>(op)) && !readsAny(a, foldResults) &&
        !readsAny(a, tileRows1)) {
      plan.kernel1.insert(&op);
      plan.tileLoops.push_back(cast<scf::ParallelOp>(op));
      tileRows1.insert(a.writes.begin(), a.writes.end());
      touch(a);
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
    // Kernel 2's tile scans (over the tiles kernel 1 made, each CTA up to its own) and
    // tile loops (each CTA its own tiles, reading only their rows of what kernel 2
    // wrote before).
    if (isTileScan(&op) && !readsAny(a, acrossRows) && !readsAny(a, tileRows2) &&
        !readsAny(a, routeRows)) {
      phase = Phase::Routing;
      plan.tileScans.push_back(cast<scf::ParallelOp>(op));
      tileRows2.insert(a.writes.begin(), a.writes.end());
      later.add(a);
      touch(a);
      continue;
    }
    if (tileTokens && !readsAny(a, acrossRows)) {
      phase = Phase::Routing;
      auto loop = cast<scf::ParallelOp>(op);
      plan.tileLoops.push_back(loop);
      if (writesOwnRows(loop))
        tileRows2.insert(a.writes.begin(), a.writes.end());
      else
        acrossRows.insert(a.writes.begin(), a.writes.end());
      later.add(a);
      touch(a);
      continue;
    }
    if (isTokenLoop(&op, tokens) && !readsAny(a, acrossRows) && !readsAny(a, tileRows2) &&
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
      whyNot("set selection writes a buffer of type " + typeText(type) +
             " (per-token or higher-rank), which each CTA cannot keep a copy of");
      return failure();
    }
    if (hoistedWrites.contains(buffer) || later.writes.contains(buffer)) {
      whyNot("a buffer set selection writes is also written by other phases");
      return failure();
    }
  }
  plan.privatized.assign(privatized.begin(), privatized.end());
  plan.kernel2HasWork =
      !plan.folds.empty() || !plan.routeLoops.empty() || plan.tailStart ||
      !plan.privatized.empty() || selectionOps || !plan.tileScans.empty() ||
      llvm::any_of(plan.tileLoops,
                   [&](scf::ParallelOp loop) { return !plan.kernel1.contains(loop); });
  if (role == KernelRole::Grid && (plan.kernel2HasWork || !plan.folds.empty() ||
                                   !plan.privatized.empty() || !plan.hoisted.empty())) {
    whyNot("the policy is not token loops only");
    return failure();
  }
  return plan;
}

} // namespace switchyard::moe
