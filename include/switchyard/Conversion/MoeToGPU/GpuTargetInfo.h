//===- GpuTargetInfo.h - target hooks of the GPU mapping --------*- C++ -*-===//
//
// moe-map-to-gpu writes target-neutral gpu/scf/arith/memref code except for the few
// operations a GPU dialect owns: the warp barrier after lane-0 steps and the
// device-scope fence around the large-batch ticket. They go through this interface
// (as Triton's TargetInfoBase), so another target (e.g. ROCDL) implements the same
// hooks instead of editing the mapping.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_MOETOGPU_GPUTARGETINFO_H
#define SWITCHYARD_CONVERSION_MOETOGPU_GPUTARGETINFO_H

#include "mlir/IR/Builders.h"

namespace switchyard::moe {

class GpuTargetInfo {
public:
  virtual ~GpuTargetInfo() = default;
  /// Lanes per warp (the shuffles' width).
  virtual int32_t getWarpSize() const = 0;
  /// A barrier among the lanes of the current warp (memory written before it is
  /// visible to the warp after it).
  virtual void createWarpBarrier(mlir::OpBuilder &b, mlir::Location loc) const = 0;
  /// A device-scope memory fence (orders this thread's global accesses for every CTA).
  virtual void createDeviceFence(mlir::OpBuilder &b, mlir::Location loc) const = 0;
  /// True for the fences and barriers every thread runs (never inside a thread-0 run).
  virtual bool runsOnEveryThread(mlir::Operation *op) const = 0;
  /// True for a barrier among one warp's lanes (createWarpBarrier's op): it orders
  /// nothing between warps, so a CTA barrier's need is decided without it.
  virtual bool isWarpBarrier(mlir::Operation *op) const = 0;
};

/// NVIDIA GPUs through the NVVM dialect: bar.warp.sync, membar.gl.
const GpuTargetInfo &getNvvmTargetInfo();

} // namespace switchyard::moe

#endif
