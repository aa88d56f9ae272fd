//===- LargeBatchKernels.h - the two-kernel form for large batches -*- C++ -*-===//
//
// A batch too large for one CTA is routed by TWO launches of ceil(T / tokens-per-CTA)
// CTAs each (see LargeBatchKernels.cpp); a policy of token loops only also has a grid
// form, one launch for every batch size. This header turns a copy of a lowered router
// body (inside a gpu.func, before moe-map-to-gpu maps it onto threads) into one of
// those kernels, as the plan (LargeBatchPlan.h) divides the body.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHKERNELS_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHKERNELS_H

#include "LargeBatchPlan.h"
#include "switchyard/Conversion/MoeToGPU/GpuTargetInfo.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace switchyard::moe {

/// The workspace the pair reserves in front of the router's temporaries (the same
/// layout in both kernels): a ticket counter, per-CTA partials of the token folds and
/// per-CTA private copies of what set selection writes.
struct LargeBatchLayout {
  mlir::Value reservedBytes; // where the router's temporaries start (an index value)
  int64_t perTokenBytes = 0; // an upper bound of the reserved bytes: perToken * T
  int64_t fixedBytes = 0;    //   + fixed
  bool needsKernel2 = true;  // false: the token stage is the whole policy
};

/// Rewrites `kernel` (whose body is a clone of a lowered router, T its first argument,
/// the workspace its last) into the kernel `role` names, following the plan
/// (LargeBatchPlan.h) for its body:
///   - LargeFirst / LargeSecond: kernel 1 / 2 of the large-batch pair for batches of at
///     least `minTokens` tokens, `tokensPerCta` tokens per CTA. When the layout's
///     `needsKernel2` is false (a policy of token loops only), kernel 1 is the whole
///     policy and kernel 2 is not needed;
///   - Grid: one kernel whose CTAs split the batch evenly over the launch's grid
///     (ceil(T / gridDim) tokens each), for any batch size (`minTokens` 1;
///     `tokensPerCta` is not used); only a policy of token loops only has one.
/// The workspace the kernel reserves, or a failure said to `whyNot` (the kernel is then
/// unusable) when the policy does not split.
mlir::FailureOr<LargeBatchLayout> buildLargeBatchKernel(const GpuTargetInfo &target,
                                                        mlir::gpu::GPUFuncOp kernel,
                                                        KernelRole role,
                                                        int64_t tokensPerCta,
                                                        int64_t minTokens, WhyNot whyNot);

} // namespace switchyard::moe

#endif
