//===- Workspace.cpp - temporaries as views into the workspace --------------===//
//
// A kernel cannot allocate: every temporary of the lowered router becomes a view into
// the caller-provided i8 workspace at a 16-byte aligned offset, and the kernel records
// the bytes it needs (per token and fixed), which moe-map-to-gpu records in the
// kernel's #moe.launch.
//
//===----------------------------------------------------------------------===//
#include "KernelBuilder.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace switchyard::moe::gpu_mapping {

/// S when `rows` is ceil(T / S) = (T + S - 1) / S for the kernel's token count T, else 1.
int64_t KernelBuilder::tokensPerRow(Value rows) const {
  auto div = rows.getDefiningOp<arith::DivUIOp>();
  auto sum = div ? div.getLhs().getDefiningOp<arith::AddIOp>() : arith::AddIOp();
  std::optional<int64_t> s = div ? getConstantIntValue(div.getRhs()) : std::nullopt;
  std::optional<int64_t> c = sum ? getConstantIntValue(sum.getRhs()) : std::nullopt;
  if (!s || !c || *s <= 1 || *c != *s - 1 || sum.getLhs() != tokens)
    return 1;
  return *s;
}

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
  // A temporary's one dynamic dimension (the caller checks there is at most one) is
  // the token count, or the count of tiles of S tokens, ceil(T / S) <= T / S + 1 (a
  // [tiles, E] histogram, TokenTiles.cpp); the workspace formula counts it per token.
  int64_t rowBytes = staticElems * elemBytes;
  if (type.getNumDynamicDims() == 1) {
    Value rows = alloc.getDynamicSizes()[0];
    bytes = arith::MulIOp::create(b, loc, bytes, rows);
    if (int64_t tile = tokensPerRow(rows); tile > 1) {
      perTokenBytes += (rowBytes + tile - 1) / tile;
      fixedBytes += rowBytes;
    } else {
      perTokenBytes += rowBytes;
    }
  } else {
    fixedBytes += rowBytes;
  }
  fixedBytes += 16;
  Value offset =
      workspaceOffset ? workspaceOffset : arith::ConstantIndexOp::create(b, loc, 0);
  auto view =
      memref::ViewOp::create(b, loc, type, workspace, offset, alloc.getDynamicSizes());
  view->setAttr(kWorkspaceTemporaryAttr, b.getUnitAttr());
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
