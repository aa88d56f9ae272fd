//===- LargeBatchPlan.h - how a router divides between the pair -*- C++ -*-===//
//
// The analysis half of the large-batch kernels (LargeBatchKernels.cpp rewrites): which
// top-level code of a lowered router body runs in kernel 1 (the token stage on each
// CTA's tokens and the token folds' partials), what CTA 0 runs once (initialisations),
// which loops route each CTA's tokens in kernel 2, where the last CTA's tail starts,
// and which buffers set selection writes (each CTA keeps a private copy). What the code
// reads and writes comes from MemoryEffectOpInterface, buffer by buffer (the root of
// each view); a row access (token t's row) is read off the load or store's indices.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHPLAN_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHPLAN_H

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/Twine.h"

#include <optional>

namespace switchyard::moe {

/// Which kernel of a size class beyond one CTA is built.
enum class KernelRole {
  /// One kernel for a policy of token loops only: its CTAs split any batch evenly over
  /// the launch's grid (ceil(T / gridDim) tokens each).
  Grid,
  /// Kernel 1 of the large-batch pair: the token stage and the folds' partials.
  LargeFirst,
  /// Kernel 2 of the pair: partials combined, set selection, routing, the tail.
  LargeSecond,
};

/// Says why a policy does not split (the one-CTA kernel then serves every batch).
using WhyNot = llvm::function_ref<void(const llvm::Twine &reason)>;

/// The buffer a memref value views: a kernel parameter or a memref.alloc.
mlir::Value rootOf(mlir::Value m);

/// The buffers (roots) code reads and writes.
struct Accesses {
  llvm::SetVector<mlir::Value> reads, writes;
  bool unknown = false; // an effect on no buffer the split can name
  void add(const Accesses &other);
};

/// What `op` and the ops nested in it read and write, from their memory effects;
/// allocations of fresh buffers are none.
Accesses accessesOf(mlir::Operation *op);

/// No regions and no memory effects.
bool isPure(mlir::Operation &op);

/// scf.parallel over [0, T) step 1 without reductions.
bool isTokenLoop(mlir::Operation *op, mlir::Value tokens);

/// Every write of token loop `loop` lands in its own token's row (plain stores at
/// [t, ...] or into a row view at t).
bool writesOwnRows(mlir::scf::ParallelOp loop);

/// `scope` reads the buffers in `rowWise` (written row by row by earlier loops of the
/// same kernel, each CTA its own tokens) at row `row` only: what other CTAs write in the
/// same kernel is not there yet. An atomic update of such a buffer reads nothing another
/// CTA's row holds for it.
bool readsOnlyRow(mlir::Operation *scope, mlir::Value row,
                  const llvm::DenseSet<mlir::Value> &rowWise);

/// An expert-parallel loop (scf.parallel over a static [0, C)) whose body is pure code,
/// one scf.for over [0, T) folding `acc = combine(acc, x)` from combine's identity while
/// only reading memory, and then finishing code that uses the fold (stores it).
struct TokenFold {
  mlir::scf::ParallelOp loop;
  mlir::scf::ForOp tokens;
  mlir::Operation *combine;
  int64_t extent;
  /// Accesses of the loop up to the fold (kernel 1) and of the finishing code (kernel 2).
  Accesses head, finish;
};

std::optional<TokenFold> asTokenFold(mlir::Operation *op, mlir::Value tokens);

/// A parallel loop over token tiles (kTokenTilesAttr, MoeToLoops.h): its tokens per
/// tile, or 0 when `op` is none.
int64_t tileTokensOf(mlir::Operation *op);
/// A scan over the tiles, parallel over experts (kTileScanAttr).
bool isTileScan(mlir::Operation *op);

/// How the router's top-level code divides between the two kernels.
struct LargeBatchPlan {
  llvm::SmallPtrSet<mlir::Operation *, 8> kernel1; // token loops and folds of the stage
  llvm::SmallVector<TokenFold> folds;
  llvm::SmallVector<mlir::Operation *> hoisted;        // run by CTA 0 of kernel 1
  llvm::SmallVector<mlir::scf::ParallelOp> routeLoops; // kernel 2, each CTA its tokens
  // Token tiles: each CTA runs its own tiles of a tile loop (kernel 1 when it is in
  // `kernel1`, else kernel 2), and stops a tile scan (kernel 2) at its own tiles.
  llvm::SmallVector<mlir::scf::ParallelOp> tileLoops;
  llvm::SmallVector<mlir::scf::ParallelOp> tileScans;
  int64_t tileTokens = 0;                    // tokens per tile (0: no tiles)
  mlir::Operation *tailStart = nullptr;      // kernel 2, the last CTA: this and later
  llvm::SmallVector<mlir::Value> privatized; // buffers set selection writes
  bool kernel2HasWork = false;               // folds, selection, routing or a tail
};

/// The plan for `body` (a router's top-level code, T = `tokens`) for kernel `role`; a
/// failure, said to `whyNot`, when the code does not split that way (Grid: when it is
/// not token loops only).
mlir::FailureOr<LargeBatchPlan> planLargeBatch(mlir::Block &body, mlir::Value tokens,
                                               KernelRole role, WhyNot whyNot);

} // namespace switchyard::moe

#endif
