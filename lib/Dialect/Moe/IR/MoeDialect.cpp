//===- MoeDialect.cpp - moe dialect registration --------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace switchyard::moe;

#include "switchyard/Dialect/Moe/IR/MoeOpsDialect.cpp.inc"
#include "switchyard/Dialect/Moe/IR/MoeEnums.cpp.inc"

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "switchyard/Dialect/Moe/IR/MoeOps.cpp.inc"
      >();
  registerTypes();
}
