//===- LauncherSource.h - the generated half of a GPU launcher -*- C++ -*-===//
//
// Internal to lib/Target/Ptx: what PtxCompiler.cpp knows of a router's kernels, and the
// launcher source it writes from them.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_LIB_TARGET_PTX_LAUNCHERSOURCE_H
#define SWITCHYARD_LIB_TARGET_PTX_LAUNCHERSOURCE_H

#include "switchyard/Compiler/Policy.h"
#include "switchyard/Target/Host/HostCompiler.h"
#include "switchyard/Target/Ptx/PtxCompiler.h"

#include <string>
#include <vector>

namespace switchyard::ptx {

using host::cParamType;
using host::emitKnobStruct;
using host::knobCheckText;
using host::knobDefaultText;

/// The C ABI launcher: NAME_launch.h and NAME_launch.cpp. The source holds only what is
/// particular to the router, its kernel table and the packing of its arguments (and
/// the knob checks); loading the embedded PTX with cudart (cudaLibraryLoadData, never
/// -lcuda), picking the size class, the grids and the launches on the stream are
/// switchyard::launch::Launcher (runtime/lib/Cuda/Launcher.cpp), compiled once into
/// libSwitchyardLauncher.a and linked with it (linkLauncherLibrary).
void emitLauncher(const std::vector<AbiParam> &abi, const std::vector<runtime::Knob> &knobs,
                  const LaunchMetadata &launch, llvm::StringRef ptx, GpuArtifacts &out);

} // namespace switchyard::ptx

#endif
