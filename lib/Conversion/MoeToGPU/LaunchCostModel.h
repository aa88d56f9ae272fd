//===- LaunchCostModel.h - which size class runs a batch fastest -*- C++ -*-===//
//
// A static model of a router's GPU time, used to pick its launch thresholds (the most
// tokens the one-CTA kernel serves, the tokens per CTA of the large-batch pair) when
// the user does not set them, and shown by `moe-compile --report`. It is a MODEL, not a
// measurement; the GPU kit (scripts/gpu-kit.sh) measures the same routers and fits its
// constants (scripts/gpu_kit/fit_model.py), which is where the FITTED values below
// come from.
//
// Counted from the router's lane-parallel loops (exact, per router):
//   I     warp instructions per token: the ops of the token loops, a lane-strided loop
//         over E experts counted ceil(E/32) times, a sequential loop its trip count
//         times (8 when data-dependent);
//   B(T)  warp instructions of the whole-batch phases (set selection, compaction, block
//         alignment, capacity admission, batch folds) for a batch of T tokens, run by
//         one CTA after the token work: loops bounded by T (or an expression of it) run
//         T times; ASSUMED: a data-dependent loop there (an expert's entries, a scan)
//         runs T times; B1 with the batch folds (one CTA), B2 without (the pair folds
//         per-CTA partials instead);
//   C     values a CTA combines per other CTA in kernel 2 (E per batch fold);
//   W     warps per block.
// The machine (H100/H200 SXM, sm_90; hardware limits, not fitted): S = 132 SMs,
//   f = 1.755 GHz, 2048 threads, 65536 registers, 228 KiB shared memory and 32 CTAs
//   per SM, 4 warp instructions issued per cycle per SM.
// STATED: r = 64 registers per thread, what the kernels' launch bounds (.minnctapersm,
//   1024 threads of CTAs per SM; MapToGPU.cpp) let ptxas use (it uses 55-64).
// ASSUMED: 1 KiB of static shared memory per CTA (768 B measured).
// MEASURED: L = 3.6 us, one empty kernel's time on the GPU timeline (H200).
// ASSUMED: g = 1 us, one grid barrier of the cooperative kernel (the kit's T = 32 -> 33
//   step measures it).
// FITTED (H200, 2026-11-26, the kit's fit step: 90 measurements of 15 router builds,
//   log least squares): c = 16.5 cycles per warp instruction of the token work (latency
//   bound: few warps per SM scheduler), cB = 0.4 cycles per counted warp instruction of
//   the whole-batch phases. The fit is loose (rms log error 0.74: typically within 2x;
//   worst xshare_spec 9x under, libra_predict 5x under, the P = 128 variants 7x over at
//   T = 16): what is serial in the whole-batch phases is decided by the GPU mapping,
//   after this model runs, and a loop bound the counter cannot evaluate is taken as T.
//   It ranks one router's size classes (it picks P = 8, the fastest measured) rather
//   than predicting its time: the kit measures that.
//
//   resident CTAs per SM   R = min(2048 / 32W, 65536 / (32W r), 228K / smem, 32)
//   one CTA (decode):      t1(T)    = L + (ceil(T / W) I c + B1(T) cB) / f
//   two launches (large):  t2(T, P) = 2L + (waves(T,P) k1(P) + ceil(n C / (32 W)) c
//                                     + B2(T) cB) / f,   n = ceil(T / P) CTAs,
//                          waves = ceil(n / (S R)),
//                          k1(P) = max(ceil(P / W) I c,  m W ceil(P / W) I / 4),
//                          m = min(R, ceil(n / S)) CTAs sharing an SM's issue slots
//   cooperative (the pair as one launch, when n <= S R): tc(T, P) = t2(T, P) - L + g;
//                          the large batches' time tl = tc, or t2 beyond S R CTAs
//   grid (token loops only): tg(T) = L + waves ceil(T / (G W)) I c / f,
//                          G = min(ceil(T / W), S R) CTAs
//
// P minimises tl at T = 4096 over W, 2W, 4W, ..., 256; the one-CTA bound is the
// largest multiple of W up to 1024 below the first batch where tl < t1.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_LAUNCHCOSTMODEL_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_LAUNCHCOSTMODEL_H

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <utility>
#include <vector>

namespace switchyard::moe {

struct LaunchCostModel {
  // The GPU: hardware limits of sm_90 (H100/H200 SXM).
  double clockGHz = 1.755;
  int64_t sms = 132, threadsPerSm = 2048, registersPerSm = 65536,
          sharedBytesPerSm = 228 * 1024, ctasPerSm = 32, issuePerCycle = 4;
  // Per kernel: the registers its launch bounds allow, the shared memory assumed.
  int64_t registersPerThread = 64, sharedBytesPerCta = 1024;
  // Fitted to the kit's measurements (LaunchCostModel.h says where).
  double launchUs = 3.6, cyclesPerInstr = 16.5, batchCyclesPerInstr = 0.4;
  // Assumed until measured (LaunchCostModel.h says where).
  double gridBarrierUs = 1.0;
  // The router.
  int64_t warps = 8;         // W, per block
  double tokenInstr = 0;     // I
  int64_t combineValues = 0; // C
  /// B1(T) and B2(T) sampled at powers of two (tokens, warp instructions); linear in
  /// between.
  std::vector<std::pair<int64_t, double>> batchOneCta, batchPair;
  // The thresholds it picks.
  int64_t ctaTokens = 1024, tokensPerCta = 256;

  int64_t residentCtasPerSm() const;
  double oneCtaUs(int64_t tokens) const;
  double pairUs(int64_t tokens, int64_t perCta) const;
  /// A large batch: the cooperative kernel while the GPU holds its CTAs, the pair beyond.
  double largeUs(int64_t tokens, int64_t perCta) const;
  double gridUs(int64_t tokens) const;
  /// The model's inputs and numbers as `moe.launch_model` (what --report prints and
  /// what the GPU kit fits the constants to), for the size classes the router got:
  /// grid alone, decode alone (the policy does not split), or decode and large.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *ctx,
                              llvm::ArrayRef<SizeClass> classes) const;
};

/// The model of `f` (a router lowered to loops in the lane-parallel form, T its first
/// argument) for blocks of `blockSize` threads, with its thresholds chosen.
LaunchCostModel modelLaunches(mlir::func::FuncOp f, int64_t blockSize);

} // namespace switchyard::moe

#endif
