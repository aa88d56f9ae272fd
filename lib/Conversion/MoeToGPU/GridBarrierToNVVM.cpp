//===- GridBarrierToNVVM.cpp - moe.grid_barrier -> NVVM -------------------===//
//
// Cooperative groups' grid sync (cooperative_groups::this_grid().sync(), sm_70 and
// later), written in NVVM and LLVM dialect ops: see the pass description
// (Passes.td). The barrier word is the driver's: a cooperative launch puts the
// address of its grid workspace {u32 size; u32 barrier} in %envreg1 (low) and
// %envreg2 (high), the ABI every CUDA binary using grid sync relies on.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Conversion/MoeToGPU/MoeToGPU.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace switchyard::moe {
#define GEN_PASS_DEF_MOEGRIDBARRIERTONVVM
#include "switchyard/Conversion/Passes.h.inc"
} // namespace switchyard::moe

using namespace mlir;

namespace {

/// The address of the driver's grid barrier word as a generic pointer.
Value barrierWord(OpBuilder &b, Location loc) {
  Type i64 = b.getI64Type();
  Value lo =
      arith::ExtUIOp::create(b, loc, i64, NVVM::EnvReg1Op::create(b, loc, b.getI32Type()));
  Value hi =
      arith::ExtUIOp::create(b, loc, i64, NVVM::EnvReg2Op::create(b, loc, b.getI32Type()));
  Value workspace = arith::OrIOp::create(
      b, loc,
      arith::ShLIOp::create(b, loc, hi, arith::ConstantIntOp::create(b, loc, 32, 64)), lo);
  Value word =
      arith::AddIOp::create(b, loc, workspace, arith::ConstantIntOp::create(b, loc, 4, 64));
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), word);
}

void lowerGridBarrier(switchyard::moe::GridBarrierOp barrier) {
  OpBuilder b(barrier);
  Location loc = barrier.getLoc();
  Type i32 = b.getI32Type();
  auto i32Of = [&](Value index) {
    return arith::IndexCastUIOp::create(b, loc, i32, index);
  };
  auto c32 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); };
  gpu::BarrierOp::create(b, loc);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value master = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  auto ifMaster = scf::IfOp::create(b, loc, master, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifMaster.thenBlock()->getTerminator());
    Value word = barrierWord(b, loc);
    Value cta = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value ctas = i32Of(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    // CTA 0 adds 2^31 - (G - 1), the others 1: the top bit flips at the last arrival.
    Value first = arith::SubIOp::create(b, loc, c32(int64_t(0x80000000)),
                                        arith::SubIOp::create(b, loc, ctas, c32(1)));
    Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, cta, zero);
    Value add = arith::SelectOp::create(b, loc, isFirst, first, c32(1));
    // Release: what the CTA wrote before (ordered by the CTA barrier) is visible to
    // the CTA that sees this arrival. (A release fence, then a relaxed add: the NVPTX
    // backend emits an atomicrmw release as a plain atom.add.)
    LLVM::FenceOp::create(b, loc, LLVM::AtomicOrdering::release, "device");
    Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, word, add,
                                          LLVM::AtomicOrdering::monotonic, "device",
                                          /*alignment=*/4);
    Value topBit = c32(int64_t(0x80000000));
    scf::WhileOp::create(
        b, loc, TypeRange{}, ValueRange{},
        [&](OpBuilder &nb, Location nl, ValueRange) {
          Value now = LLVM::LoadOp::create(nb, nl, i32, word, /*alignment=*/4,
                                           /*isVolatile=*/false, /*isNonTemporal=*/false,
                                           /*isInvariant=*/false,
                                           /*isInvariantGroup=*/false,
                                           LLVM::AtomicOrdering::acquire, "device");
          Value flipped = arith::AndIOp::create(
              nb, nl, arith::XOrIOp::create(nb, nl, old, now), topBit);
          Value waiting =
              arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, flipped,
                                    arith::ConstantIntOp::create(nb, nl, 0, 32));
          scf::ConditionOp::create(nb, nl, waiting, ValueRange{});
        },
        [&](OpBuilder &nb, Location nl, ValueRange) { scf::YieldOp::create(nb, nl); });
  }
  gpu::BarrierOp::create(b, loc);
  barrier.erase();
}

struct MoeGridBarrierToNVVMPass
    : switchyard::moe::impl::MoeGridBarrierToNVVMBase<MoeGridBarrierToNVVMPass> {
  void runOnOperation() override {
    SmallVector<switchyard::moe::GridBarrierOp> barriers;
    getOperation().walk([&](switchyard::moe::GridBarrierOp op) { barriers.push_back(op); });
    for (switchyard::moe::GridBarrierOp barrier : barriers)
      lowerGridBarrier(barrier);
  }
};

} // namespace
