//===- NvvmTargetInfo.cpp - the GPU mapping's hooks for NVVM --------------===//
#include "switchyard/Conversion/MoeToGPU/GpuTargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

namespace switchyard::moe {
namespace {

class NvvmTargetInfo final : public GpuTargetInfo {
public:
  int32_t getWarpSize() const override { return 32; }
  void createWarpBarrier(OpBuilder &b, Location loc) const override {
    NVVM::SyncWarpOp::create(b, loc, arith::ConstantIntOp::create(b, loc, -1, 32));
  }
  void createDeviceFence(OpBuilder &b, Location loc) const override {
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
  }
  bool runsOnEveryThread(Operation *op) const override {
    return isa<NVVM::MembarOp, gpu::BarrierOp>(op);
  }
  bool isWarpBarrier(Operation *op) const override { return isa<NVVM::SyncWarpOp>(op); }
};

} // namespace

const GpuTargetInfo &getNvvmTargetInfo() {
  static const NvvmTargetInfo info;
  return info;
}

} // namespace switchyard::moe
