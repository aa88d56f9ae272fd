//===- LargeBatchKernels.h - the two-kernel form for large batches -*- C++ -*-===//
//
// A batch too large for one CTA is routed by TWO launches of ceil(T / tokens-per-CTA)
// CTAs each (see LargeBatchKernels.cpp). This header turns a copy of a lowered router
// body (inside a gpu.func, before moe-map-to-gpu maps it onto threads) into kernel 1
// or kernel 2 of that pair.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHKERNELS_H
#define SWITCHYARD_LIB_CONVERSION_MOETOGPU_LARGEBATCHKERNELS_H

#include "switchyard/Conversion/MoeToGPU/GpuTargetInfo.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>

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
/// the workspace its last) into kernel `which` (1 or 2) of the large-batch pair for
/// batches of more than `minTokens - 1` tokens, `tokensPerCta` tokens per CTA. When
/// `layout.needsKernel2` comes back false (a policy of token loops only), kernel 1 is
/// the whole policy and kernel 2 is not needed. `tokensPerCta` = 0 asks for the GRID
/// form of a token-loops-only policy: one kernel whose CTAs split the batch evenly
/// over the launch's grid (ceil(T / gridDim) tokens each), for any batch size
/// (`minTokens` 1); it fails for a policy that is not token loops only.
/// Fails with `reason` (and leaves the kernel unusable) when the policy does not split.
mlir::LogicalResult buildLargeBatchKernel(const GpuTargetInfo &target,
                                          mlir::gpu::GPUFuncOp kernel, int which,
                                          int64_t tokensPerCta, int64_t minTokens,
                                          LargeBatchLayout &layout, std::string &reason);

} // namespace switchyard::moe

#endif
