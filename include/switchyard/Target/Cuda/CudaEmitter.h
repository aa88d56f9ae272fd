//===- CudaEmitter.h - CUDA C++ from the moe GPU kernels --------*- C++ -*-===//
//
// A translation (like mlir-translate's targets): the kernels moe-map-to-gpu makes,
// printed as CUDA C++ with the same parameters as the PTX entries, so one launcher
// serves both. `moe-translate --moe-to-cuda` runs it on a mapped module.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_TARGET_CUDA_CUDAEMITTER_H
#define SWITCHYARD_TARGET_CUDA_CUDAEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace switchyard::cuda {

/// Prints every kernel of `mapped` as CUDA C++ that includes the fixed prelude
/// (switchyard/Cuda/KernelPrelude.h in runtime/include, with the host emulation under
/// SWITCHYARD_CUDA_ON_HOST); fails with an error at the first op it has no CUDA C++
/// form for.
mlir::LogicalResult translateToCuda(mlir::ModuleOp mapped, llvm::raw_ostream &os);

/// Registers `--moe-to-cuda` with the translation registry (moe-translate).
void registerToCudaTranslation();

} // namespace switchyard::cuda

#endif
