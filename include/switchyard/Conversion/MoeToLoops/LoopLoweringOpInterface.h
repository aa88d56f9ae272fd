//===- LoopLoweringOpInterface.h - how an op is written as loops -*- C++ -*-===//
//
// The conversion's interface (LoopLoweringOpInterface.td): `lowerToLoops(RouterLowering
// &, Value token)`, attached to the moe ops by registerLoopLoweringModels (MoeToLoops.h).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_MOETOLOOPS_LOOPLOWERINGOPINTERFACE_H
#define SWITCHYARD_CONVERSION_MOETOLOOPS_LOOPLOWERINGOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

namespace switchyard::moe {
/// The state of the loop lowering of one policy (lib/Conversion/MoeToLoops).
class RouterLowering;
} // namespace switchyard::moe

#include "switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.h.inc"

#endif
