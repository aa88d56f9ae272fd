//===- LaunchMetadata.h - a router's GPU launch contract, as one record -*- C++ -*-===//
//
// What moe-map-to-gpu decided for a router's kernels (each kernel's #moe.launch, its
// parameters, barriers and the launch cost model), read once from the mapped module
// into one record that everything after it reads: NAME.json (toJson), the generated
// launcher's kernel table (LauncherSource.cpp), `moe-compile --report` and the
// manifest's size classes. The runtime (no LLVM) reads the JSON.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_TARGET_PTX_LAUNCHMETADATA_H
#define SWITCHYARD_TARGET_PTX_LAUNCHMETADATA_H

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace switchyard::ptx {

/// What a kernel synchronises on, counted in its IR: CTA barriers (those in a loop run
/// a data-dependent number of times), warp barriers, shuffles, device-scope fences
/// (two per last-CTA ticket, a grid-wide step) and grid barriers (moe.grid_barrier,
/// the cooperative kernel's grid-wide step).
struct KernelSync {
  int64_t ctaBarriers = 0, ctaBarriersInLoops = 0, warpBarriers = 0, shuffles = 0,
          deviceFences = 0, gridBarriers = 0;
  int64_t gridSteps() const { return deviceFences / 2 + gridBarriers; }
};

/// One kernel: its #moe.launch, block, static shared memory, PTX parameters.
struct KernelMetadata {
  std::string name;
  moe::SizeClass sizeClass = moe::SizeClass::decode;
  int64_t block = 0, minTokens = 1, maxTokens = 0, tokensPerCta = 0;
  int64_t perTokenBytes = 0, fixedBytes = 0, sharedBytes = 0;
  KernelSync sync;
  llvm::json::Array params; // as the PTX entry receives them (expanded descriptors)
  /// The grid rule in words (NAME.json's "grid", --report).
  std::string gridText() const;
};

/// A size class: the batches it serves and its kernels, launched in order.
struct SizeClassMetadata {
  moe::SizeClass sizeClass = moe::SizeClass::decode;
  int64_t minTokens = 0, maxTokens = 0; // maxTokens 0: unbounded
  std::vector<std::string> launches;
  /// Per call: launch boundaries plus last-CTA tickets.
  int64_t gridSteps = 0;
  /// The workspace of the class: the most any of its kernels needs.
  int64_t perTokenBytes = 0, fixedBytes = 0;
};

struct LaunchMetadata {
  std::string router, arch;
  /// The decode or grid kernel, then the pair, then the cooperative kernel.
  std::vector<KernelMetadata> kernels;
  std::vector<SizeClassMetadata> sizeClasses;
  llvm::json::Value launchModel = nullptr; // moe.launch_model, or null
  /// Knob groups one launch routes (moe-map-to-gpu{knob-groups}): the knob buffer holds
  /// that many structs and the kernel reads input knob_group; 0 without.
  int64_t knobGroups = 0;

  /// The record of the kernels moe-map-to-gpu made in `mapped` (before NVVM); an
  /// empty record when there are none.
  static LaunchMetadata fromMappedModule(mlir::ModuleOp mapped, llvm::StringRef router,
                                         llvm::StringRef arch);
  /// NAME.json (also the manifest entry's "launch").
  llvm::json::Value toJson() const;
  const KernelMetadata *kernel(llvm::StringRef name) const;
};

} // namespace switchyard::ptx

#endif
