//===- MoeToLoops.h - moe routers and rules -> loops on buffers -*- C++ -*-===//
#ifndef SWITCHYARD_CONVERSION_MOETOLOOPS_MOETOLOOPS_H
#define SWITCHYARD_CONVERSION_MOETOLOOPS_MOETOLOOPS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

namespace switchyard::moe {

#define GEN_PASS_DECL_MOELOWERTOLOOPS
#define GEN_PASS_DECL_MOENARROWINPUTS
#include "switchyard/Conversion/Passes.h.inc"

/// Token tiles (lib/Conversion/MoeToLoops/TokenTiles.cpp): the GPU form of the batch
/// outputs splits the batch into tiles of a fixed number of tokens. A parallel loop
/// over the tiles carries `kTokenTilesAttr` (the tokens per tile): iteration b reads
/// only the rows of tokens [b*S, (b+1)*S) of per-token buffers and writes only row b
/// of per-tile buffers (besides outputs it scatters into). A parallel loop over experts
/// that scans per-tile rows in tile order carries `kTileScanAttr`. The large-batch
/// kernels give each CTA its own tiles (moe-map-to-gpu).
inline constexpr llvm::StringLiteral kTokenTilesAttr =
    MoeDialect::TokenTilesAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kTileScanAttr =
    MoeDialect::TileScanAttrHelper::getNameStr();
/// Tokens per tile: the large-batch pair's tokens per CTA is a multiple of it.
inline constexpr int64_t kTileTokens = 8;

/// The element type an `--input-dtype NAME=DTYPE` names: bf16 / bfloat16, f16 /
/// float16, f32 / float32; null otherwise.
mlir::FloatType parseInputDtype(mlir::MLIRContext *context, llvm::StringRef dtype);
/// The short spelling ("bf16", "f16", "f32") of an input dtype given either way
/// ("bfloat16" or "bf16", ...), or none: the one table of --input-dtype's spellings.
std::optional<llvm::StringRef> canonicalInputDtype(llvm::StringRef dtype);

/// Attaches the loop lowering of every moe op (LoopLoweringOpInterface models, one
/// file per op family). moe-lower-to-loops registers them itself; tools that build
/// their own pipelines get them from switchyard::registerAllDialects.
void registerLoopLoweringModels(mlir::DialectRegistry &registry);

} // namespace switchyard::moe

#endif
