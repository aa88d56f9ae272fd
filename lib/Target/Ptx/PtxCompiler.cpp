//===- PtxCompiler.cpp - PTX, cubin and launch metadata for a policy ------===//
#include "switchyard/Target/Ptx/PtxCompiler.h"
#include "LauncherSource.h"
#include "switchyard/Target/Ptx/LaunchMetadata.h"

#include "switchyard/Target/Cuda/CudaEmitter.h"
#include "switchyard/Target/Host/HostCompiler.h"

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;

namespace switchyard::ptx {

bool compileToPtx(ModuleOp module, StringRef name, StringRef arch,
                  const moe::MoeMapToGPUOptions &options, GpuArtifacts &out,
                  std::string &error, bool freezeKnobs,
                  llvm::ArrayRef<std::string> inputDtypes) {
  // The loop lowering and the GPU mapping run once: the launch metadata and the CUDA
  // C++ come from the mapped kernels, which then go on through NVVM to PTX.
  PassManager mapping(module.getContext());
  moe::buildGpuMappingPipeline(mapping, options, freezeKnobs, inputDtypes);
  if (failed(mapping.run(module))) {
    error = "mapping @" + name.str() + " onto the GPU failed";
    return false;
  }
  out.launch = LaunchMetadata::fromMappedModule(module, name, arch);
  if (out.launch.kernels.empty()) {
    error = "mapping @" + name.str() + " onto the GPU made no kernel";
    return false;
  }
  std::vector<AbiParam> abi = compiler::readAbi(module, name);
  std::vector<runtime::Knob> knobs = compiler::readKnobs(module, name);
  llvm::raw_string_ostream cudaStream(out.cuda);
  if (failed(cuda::translateToCuda(module, cudaStream))) {
    error = "the kernel has an op the CUDA C++ emitter does not handle";
    return false;
  }
  llvm::raw_string_ostream json(out.json);
  json << llvm::formatv("{0:2}", out.launch.toJson()) << "\n";

  PassManager pm(module.getContext());
  moe::buildNvvmPipeline(pm, arch);
  if (failed(pm.run(module))) {
    error = "compiling @" + name.str() + " to PTX failed";
    return false;
  }
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects())
      out.ptx += cast<gpu::ObjectAttr>(a).getObject().getValue().str();
  });
  if (out.ptx.empty()) {
    error = "no PTX was produced for @" + name.str();
    return false;
  }
  emitLauncher(abi, knobs, out.launch, out.ptx, out);
  out.abi = std::move(abi);
  return true;
}

/// Where the fixed part of the launchers is (switchyard/Cuda/Launcher.h under
/// `includeDir`, `archive` libSwitchyardLauncher.a): beside this moe-compile first
/// (PREFIX/bin/moe-compile with PREFIX/include and PREFIX/lib, installed or in a wheel),
/// then the build and source trees it was built in.
static bool findLauncherRuntime(std::string &includeDir, std::string &archive,
                                std::string &error) {
  std::string exe = llvm::sys::fs::getMainExecutable(
      nullptr, reinterpret_cast<void *>(&findLauncherRuntime));
  SmallString<256> prefix(llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
  SmallString<256> installedInclude(prefix), installedArchive(prefix);
  llvm::sys::path::append(installedInclude, "include");
  llvm::sys::path::append(installedArchive, "lib", "libSwitchyardLauncher.a");
  auto hasHeader = [](StringRef dir) {
    SmallString<256> header(dir);
    llvm::sys::path::append(header, "switchyard", "Cuda", "Launcher.h");
    return llvm::sys::fs::exists(header);
  };
  if (!exe.empty() && hasHeader(installedInclude) &&
      llvm::sys::fs::exists(installedArchive)) {
    includeDir = installedInclude.str().str();
    archive = installedArchive.str().str();
    return true;
  }
  if (hasHeader(SWITCHYARD_LAUNCHER_INCLUDE_DIR) &&
      llvm::sys::fs::exists(SWITCHYARD_LAUNCHER_ARCHIVE)) {
    includeDir = SWITCHYARD_LAUNCHER_INCLUDE_DIR;
    archive = SWITCHYARD_LAUNCHER_ARCHIVE;
    return true;
  }
  error = "the fixed GPU launcher (libSwitchyardLauncher.a and switchyard/Cuda/Launcher.h) "
          "is neither in '" +
          prefix.str().str() + "' (lib/, include/) nor in the build tree ('" +
          SWITCHYARD_LAUNCHER_ARCHIVE + "')";
  return false;
}

bool linkLauncherLibrary(StringRef launcherSource, StringRef library, std::string &error) {
  StringRef include = SWITCHYARD_CUDA_INCLUDE_DIR, libDir = SWITCHYARD_CUDA_LIBRARY_DIR;
  if (include.empty() || libDir.empty()) {
    error = "no CUDA toolkit was found when Switchyard was configured";
    return false;
  }
  std::string launcherInclude, launcherArchive;
  if (!findLauncherRuntime(launcherInclude, launcherArchive, error))
    return false;
  auto cxx = llvm::sys::findProgramByName("c++");
  if (!cxx) {
    error = "no C++ compiler driver 'c++' on PATH";
    return false;
  }
  std::string includeFlag = "-I" + include.str(), libFlag = "-L" + libDir.str();
  std::string launcherFlag = "-I" + launcherInclude;
  std::string rpath = "-Wl,-rpath," + libDir.str();
  // The generated table and packing, then the fixed launcher, then cudart.
  SmallVector<StringRef> args{
      *cxx,         "-shared",      "-fPIC",         "-O2", "-std=c++17", includeFlag,
      launcherFlag, launcherSource, launcherArchive, "-o",  library,      libFlag,
      "-lcudart",   rpath};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cxx, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    error = "building '" + library.str() + "' failed (" +
            (message.empty() ? "exit code " + std::to_string(rc) : message) + ")";
    return false;
  }
  return true;
}

bool assemblePtx(StringRef ptxPath, StringRef arch, StringRef cubinPath, std::string &error,
                 std::string *resourceUsage) {
  // The toolkit CMake found at configure time first, then PATH.
  auto ptxas = llvm::sys::findProgramByName("ptxas", {SWITCHYARD_CUDA_BIN_DIR});
  if (!ptxas)
    ptxas = llvm::sys::findProgramByName("ptxas");
  if (!ptxas) {
    error = "ptxas not found";
    return false;
  }
  std::string archFlag = "-arch=" + arch.str();
  SmallVector<StringRef> args{*ptxas, archFlag, "-v", ptxPath, "-o", cubinPath};
  // ptxas -v reports registers, shared memory and spills on stderr.
  SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("ptxas", "log", log);
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt, StringRef(log)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0, 0, &message);
  // Per entry: "Compiling entry function 'NAME' for 'sm_90'" ... "Used N registers, ...".
  if (resourceUsage)
    if (auto buffer = llvm::MemoryBuffer::getFile(log)) {
      std::string function;
      // The entry's stack and spills come on a line of their own, without "info".
      for (StringRef line : llvm::split((*buffer)->getBuffer(), '\n')) {
        StringRef info = line.split("info    : ").second;
        if (info.consume_front("Compiling entry function '"))
          function = info.split('\'').first.str();
        else if (info.contains("Used"))
          *resourceUsage += function + ": " + info.trim().rtrim(',').str() + "; ";
        else if (!function.empty() && line.contains("bytes spill stores"))
          *resourceUsage += function + ": " + line.trim().rtrim(',').str() + "; ";
      }
    }
  llvm::sys::fs::remove(log);
  if (rc != 0) {
    error = "ptxas rejected the PTX (exit " + std::to_string(rc) + ")";
    return false;
  }
  return true;
}

} // namespace switchyard::ptx
