//===- LaunchCostModel.h - which size class runs a batch fastest -*- C++ -*-===//
//
// A static model of a router's GPU time, used to pick its launch thresholds (the most
// tokens the one-CTA kernel serves, the tokens per CTA of the large-batch pair) when
// the user does not set them, and shown by `moe-compile --report`. It is a MODEL,
// not a measurement:
//
//   I      warp instructions per token: the ops of the router's token loops in the
//          lane-parallel form, a lane-strided loop over E experts counted ceil(E/32)
//          times, a sequential loop its trip count times (8 when data-dependent);
//   c      cycles per warp instruction when a block's 8 warps share an SM (latency
//          bound: 4);
//   f      SM clock (H100 SXM: 1.755 GHz);  L  launch latency (3 us, back-to-back on
//          a stream);  S  SMs (132);  W  warps per block;  C  values a CTA combines per
//          other CTA in kernel 2 (E per batch fold).
//
//   one CTA (decode):        t1(T)    = L + ceil(T / W) * I * c / f
//   two launches (large):    t2(T, P) = 2L + ceil(P / W) * I * c / f
//                                       + ceil(ceil(T / P) * C / (32 W)) * c / f
//   grid (token loops only): tg(T)    = L + ceil(T / (G W)) * I * c / f,
//                            G = min(ceil(T / W), 8 S)
//
// P minimises t2 at T = 4096 over W, 2W, 4W, ..., 256; the one-CTA bound is the
// largest multiple of W up to 1024 where t1 <= t2. Whole-batch phases (set selection,
// compaction, alignment, capacity admission) run on one CTA in both classes and are
// left out of both.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_LAUNCHCOSTMODEL_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_LAUNCHCOSTMODEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace switchyard::moe {

struct LaunchCostModel {
  // The GPU the model describes (H100 SXM).
  double clockGHz = 1.755, launchUs = 3.0, cyclesPerInstr = 4.0;
  int64_t sms = 132, residentBlocksPerSm = 8;
  // The router.
  int64_t warps = 8;           // per block
  double tokenInstr = 0;       // I
  int64_t combineValues = 0;   // C
  // The thresholds it picks.
  int64_t ctaTokens = 1024, tokensPerCta = 256;

  double oneCtaUs(int64_t tokens) const;
  double pairUs(int64_t tokens, int64_t perCta) const;
  double gridUs(int64_t tokens) const;
  /// Which kernels the router got: the grid kernel, the one-CTA kernel alone (the
  /// policy does not split), or the one-CTA kernel and the pair.
  enum class Classes { Grid, OneCta, Pair };
  /// The model's numbers as `moe.launch_model` (what --report prints).
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *ctx, Classes classes) const;
};

/// The model of `f` (a router lowered to loops in the lane-parallel form, T its first
/// argument) for blocks of `blockSize` threads, with its thresholds chosen.
LaunchCostModel modelLaunches(mlir::func::FuncOp f, int64_t blockSize);

} // namespace switchyard::moe

#endif
