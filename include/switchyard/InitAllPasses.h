//===- InitAllPasses.h - every pass and pipeline moe-opt offers -*- C++ -*-===//
#ifndef SWITCHYARD_INITALLPASSES_H
#define SWITCHYARD_INITALLPASSES_H

#include "switchyard/Compiler/Pipelines.h"

#include "mlir/Transforms/Passes.h"

namespace switchyard {

inline void registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
  moe::registerMoePasses();           // dialect transforms
  moe::registerMoeConversionPasses(); // conversions
  moe::registerMoeHostPasses();       // the host pipeline's loop passes
  moe::registerHostPipeline();
  moe::registerPtxPipeline();
}

} // namespace switchyard

#endif
