//===- MoeDialect.h - the moe dialect ---------------------------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

// The dialect's enums and attributes come first: the dialect's accessors of its
// discardable attributes (`moe.abi`) name them.
#include "switchyard/Dialect/Moe/IR/MoeEnums.h.inc"

namespace switchyard::moe {
/// The size classes whose CTAs each take tokens_per_cta tokens from min_tokens on:
/// the large-batch pair and the cooperative kernel.
inline bool isPerCtaClass(SizeClass c) {
  return c == SizeClass::large || c == SizeClass::cooperative;
}
} // namespace switchyard::moe

#define GET_ATTRDEF_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeAttrs.h.inc"

#include "switchyard/Dialect/Moe/IR/MoeOpsDialect.h.inc"

namespace switchyard::moe {
/// The router's C ABI on `op` (the function the router lowering made, or a GPU kernel
/// mapped from it); null when it has none.
inline AbiAttr getAbi(mlir::Operation *op) {
  return op->getAttrOfType<AbiAttr>(MoeDialect::AbiAttrHelper::getNameStr());
}
inline void setAbi(mlir::Operation *op, AbiAttr abi) {
  op->setAttr(MoeDialect::AbiAttrHelper::getNameStr(), abi);
}
} // namespace switchyard::moe

#endif
