//===- MoeDialect.h - the moe dialect ---------------------------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Dialect.h"

#include "switchyard/Dialect/Moe/IR/MoeOpsDialect.h.inc"

#endif
