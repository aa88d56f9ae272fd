//===- Workspace.cpp - temporaries as views into the workspace --------------===//
//
// A kernel cannot allocate: every temporary of the lowered router becomes a view into
// the caller-provided i8 workspace at a 16-byte aligned offset, and the kernel records
// the bytes it needs (per token and fixed) as `moe.workspace`.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe::gpu_mapping {

void KernelBuilder::replaceAlloc(memref::AllocOp alloc) {
  b.setInsertionPoint(alloc);
  MemRefType type = alloc.getType();
  Type elem = type.getElementType();
  int64_t elemBytes =
      elem.isIndex() ? 8 : std::max<int64_t>(1, elem.getIntOrFloatBitWidth() / 8);
  int64_t staticElems = 1;
  for (int64_t d : type.getShape())
    if (!ShapedType::isDynamic(d))
      staticElems *= d;
  Value bytes = arith::ConstantIndexOp::create(b, loc, staticElems * elemBytes);
  // A temporary's one dynamic dimension is the token count (the caller checks there is
  // at most one); the workspace formula counts it per token.
  if (type.getNumDynamicDims() == 1)
    bytes = arith::MulIOp::create(b, loc, bytes, alloc.getDynamicSizes()[0]);
  (type.getNumDynamicDims() ? perTokenBytes : fixedBytes) += staticElems * elemBytes;
  fixedBytes += 16;
  Value offset =
      workspaceOffset ? workspaceOffset : arith::ConstantIndexOp::create(b, loc, 0);
  auto view =
      memref::ViewOp::create(b, loc, type, workspace, offset, alloc.getDynamicSizes());
  // Next offset: rounded up to 16 bytes.
  Value end = arith::AddIOp::create(b, loc, offset, bytes);
  Value c15 = arith::ConstantIndexOp::create(b, loc, 15);
  Value c16 = arith::ConstantIndexOp::create(b, loc, 16);
  workspaceOffset = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, arith::AddIOp::create(b, loc, end, c15), c16),
      c16);
  alloc.replaceAllUsesWith(view.getResult());
  alloc.erase();
}

} // namespace switchyard::moe::gpu_mapping
