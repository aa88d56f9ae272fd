//===- moe-translate.cpp - translations out of the moe GPU kernels --------===//
//
// mlir-translate for Switchyard: `moe-translate --moe-to-cuda mapped.mlir` prints the
// kernels of a module mapped by moe-map-to-gpu as CUDA C++ (what moe-compile writes as
// NAME.cu), so the emitter is tested on its own with FileCheck.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Target/Cuda/CudaEmitter.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  switchyard::cuda::registerToCudaTranslation();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "Switchyard translations")) ? 1
                                                                                      : 0;
}
