//===- Passes.h - conversions out of the moe dialect ------------*- C++ -*-===//
//
// Every conversion pass (declared in Passes.td, one folder each under
// lib/Conversion): MoeToLoops, MoeToGPU and MoeToLLVM.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_PASSES_H
#define SWITCHYARD_CONVERSION_PASSES_H

#include "switchyard/Conversion/MoeToGPU/MoeToGPU.h"
#include "switchyard/Conversion/MoeToLLVM/MoeToLLVM.h"
#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"

namespace switchyard::moe {

#define GEN_PASS_REGISTRATION
#include "switchyard/Conversion/Passes.h.inc"

} // namespace switchyard::moe

#endif
