//===- MoeKernelOps.cpp - synchronisation inside GPU kernels -------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

using namespace mlir;

namespace switchyard::moe {

LogicalResult GridBarrierOp::verify() {
  // (by name: the dialect does not depend on the GPU dialect)
  for (Operation *p = (*this)->getParentOp(); p; p = p->getParentOp())
    if (p->getName().getStringRef() == "gpu.func")
      return success();
  return emitOpError() << "must be inside a GPU kernel (gpu.func)";
}

} // namespace switchyard::moe
