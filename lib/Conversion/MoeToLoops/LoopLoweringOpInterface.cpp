//===- LoopLoweringOpInterface.cpp - the conversion's op interface --------===//
#include "switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.h"

#include "switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.cpp.inc"
