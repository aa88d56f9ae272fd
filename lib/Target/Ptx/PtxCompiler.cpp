//===- PtxCompiler.cpp - PTX, cubin and launch metadata for a policy ------===//
#include "switchyard/Target/Ptx/PtxCompiler.h"
#include "LauncherSource.h"

#include "switchyard/Target/Cuda/CudaEmitter.h"
#include "switchyard/Target/Host/HostCompiler.h"

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;

namespace switchyard::ptx {

/// The names of a kernel's ABI parameters (moe.abi, set by moe-map-to-gpu), in the
/// order of its arguments; the arguments after them are the workspace. The one place
/// that reads the attribute.
static std::vector<std::string> abiParamNames(gpu::GPUFuncOp kernel) {
  std::vector<std::string> names;
  for (moe::AbiParamAttr param : moe::getAbi(kernel).getParams())
    names.push_back(param.getName().str());
  return names;
}

/// The kernel's parameters as the PTX entry receives them: num_tokens, then per buffer
/// the expanded memref descriptor (allocated ptr, aligned ptr, offset, sizes, strides),
/// then the workspace descriptor.
static llvm::json::Array kernelParams(gpu::GPUFuncOp kernel) {
  llvm::json::Array params;
  std::vector<std::string> abi = abiParamNames(kernel);
  for (auto [i, type] : llvm::enumerate(kernel.getArgumentTypes())) {
    std::string name = i < abi.size() ? abi[i] : "workspace";
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref) {
      std::string t = type.isF32() ? "f32" : type.isInteger(32) ? "i32" : "i64";
      params.push_back(llvm::json::Object{{"name", name}, {"type", t}});
      continue;
    }
    params.push_back(llvm::json::Object{{"name", name + ".allocated"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".aligned"}, {"type", "ptr"}});
    params.push_back(llvm::json::Object{{"name", name + ".offset"}, {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(llvm::json::Object{{"name", name + ".size" + std::to_string(d)},
                                          {"type", "i64"}});
    for (int64_t d = 0; d < memref.getRank(); ++d)
      params.push_back(llvm::json::Object{{"name", name + ".stride" + std::to_string(d)},
                                          {"type", "i64"}});
  }
  return params;
}

/// moe.launch_model (LaunchCostModel::toAttr) as JSON.
static llvm::json::Value launchModelJson(DictionaryAttr model) {
  llvm::json::Object out;
  for (NamedAttribute field : model) {
    StringRef key = field.getName().strref();
    if (auto i = dyn_cast<IntegerAttr>(field.getValue()))
      out[key] = i.getInt();
    else if (auto f = dyn_cast<FloatAttr>(field.getValue()))
      out[key] = f.getValueAsDouble();
    else if (auto points = dyn_cast<ArrayAttr>(field.getValue())) {
      llvm::json::Array list; // of points: {tokens, us} or {tokens, instructions}
      for (Attribute point : points) {
        llvm::json::Object row;
        for (NamedAttribute value : cast<DictionaryAttr>(point)) {
          if (auto i = dyn_cast<IntegerAttr>(value.getValue()))
            row[value.getName().strref()] = i.getInt();
          else if (auto f = dyn_cast<FloatAttr>(value.getValue()))
            row[value.getName().strref()] = f.getValueAsDouble();
        }
        list.push_back(std::move(row));
      }
      out[key] = std::move(list);
    }
  }
  return out;
}

/// What a mapped kernel synchronises on, counted in its IR (NAME.json kernels[].sync):
/// CTA barriers (and how many of them sit in a loop, so run a data-dependent number of
/// times), warp barriers, warp shuffles, and device-scope fences (two per last-CTA
/// ticket, the kernel's grid-wide step). The CUDA-on-host emulation counts what one
/// call executes (test/gpu/test_kernel_budgets.py).
static llvm::json::Object syncCounts(gpu::GPUFuncOp kernel) {
  int64_t ctaBarriers = 0, inLoops = 0, warpBarriers = 0, shuffles = 0, fences = 0;
  kernel.walk([&](Operation *op) {
    if (isa<gpu::BarrierOp>(op)) {
      ++ctaBarriers;
      if (op->getParentOfType<LoopLikeOpInterface>())
        ++inLoops;
    } else if (isa<NVVM::SyncWarpOp>(op)) {
      ++warpBarriers;
    } else if (isa<gpu::ShuffleOp>(op)) {
      ++shuffles;
    } else if (isa<NVVM::MembarOp>(op)) {
      ++fences;
    }
  });
  return llvm::json::Object{
      {"cta_barriers", ctaBarriers},   {"cta_barriers_in_loops", inLoops},
      {"warp_barriers", warpBarriers}, {"shuffles", shuffles},
      {"device_fences", fences},       {"grid_steps", fences / 2}};
}

bool compileToPtx(ModuleOp module, StringRef name, StringRef arch,
                  const moe::MoeMapToGPUOptions &options, GpuArtifacts &out,
                  std::string &error, bool freezeKnobs,
                  llvm::ArrayRef<std::string> inputDtypes) {
  // Metadata comes from the kernels before they are compiled to PTX.
  PassManager mapping(module.getContext());
  moe::buildLoopPipeline(mapping, /*laneParallel=*/true, freezeKnobs, inputDtypes);
  mapping.addPass(moe::createMoeMapToGPU(options));
  OwningOpRef<ModuleOp> inspect(module.clone());
  if (failed(mapping.run(*inspect))) {
    error = "mapping @" + name.str() + " onto the GPU failed";
    return false;
  }
  llvm::json::Array kernels;
  std::vector<KernelLaunch> launches;
  llvm::json::Value launchModel = nullptr;
  inspect->walk([&](gpu::GPUFuncOp kernel) {
    KernelLaunch k;
    k.name = kernel.getName().str();
    auto workspace = cast<DenseI64ArrayAttr>(kernel->getAttr("moe.workspace"));
    k.perTokenBytes = workspace[0];
    k.fixedBytes = workspace[1];
    k.block = kernel.getKnownBlockSizeAttr() ? kernel.getKnownBlockSizeAttr()[0] : 0;
    k.sizeClass = cast<StringAttr>(kernel->getAttr("moe.size_class")).str();
    int64_t sharedBytes = 0; // static shared memory: the workgroup attributions
    for (BlockArgument a : kernel.getWorkgroupAttributions()) {
      auto m = cast<MemRefType>(a.getType());
      sharedBytes += m.getNumElements() * m.getElementTypeBitWidth() / 8;
    }
    llvm::json::Object entry{
        {"name", k.name},
        {"size_class", k.sizeClass},
        {"params", kernelParams(kernel)},
        {"block", llvm::json::Array{k.block, 1, 1}},
        {"shared_memory_bytes", sharedBytes},
        {"sync", syncCounts(kernel)},
        {"workspace_bytes",
         llvm::json::Object{{"per_token", k.perTokenBytes}, {"fixed", k.fixedBytes}}}};
    if (k.sizeClass == "decode") {
      k.maxTokens = cast<IntegerAttr>(kernel->getAttr("moe.max_tokens")).getInt();
      entry["grid"] = "[1, 1, 1]: one CTA holds the whole batch";
      entry["max_tokens"] = k.maxTokens ? llvm::json::Value(k.maxTokens) : nullptr;
    } else if (k.sizeClass == "grid") {
      int64_t warps = std::max<int64_t>(k.block / 32, 1);
      entry["grid"] = "[min(ceil(num_tokens / " + std::to_string(warps) +
                      "), SMs x resident blocks per SM), 1, 1]: block c takes tokens "
                      "[c*P, (c+1)*P), P = ceil(num_tokens / grid)";
      entry["warps_per_block"] = warps;
    } else {
      k.tokensPerCta = cast<IntegerAttr>(kernel->getAttr("moe.tokens_per_cta")).getInt();
      k.minTokens = cast<IntegerAttr>(kernel->getAttr("moe.min_tokens")).getInt();
      entry["grid"] = "[ceil(num_tokens / " + std::to_string(k.tokensPerCta) + "), 1, 1]";
      entry["tokens_per_cta"] = k.tokensPerCta;
      entry["min_tokens"] = k.minTokens;
    }
    if (auto model = kernel->getAttrOfType<DictionaryAttr>("moe.launch_model"))
      launchModel = launchModelJson(model);
    launches.push_back(k);
    kernels.push_back(std::move(entry));
  });
  // The size classes a launcher chooses between, each with its launches in order.
  llvm::json::Array classes;
  const KernelLaunch &decode = launches.front();
  llvm::json::Object one{{"name", decode.sizeClass},
                         {"launches", llvm::json::Array{decode.name}}};
  one["max_tokens"] = decode.maxTokens ? llvm::json::Value(decode.maxTokens) : nullptr;
  classes.push_back(std::move(one));
  if (launches.size() > 1) {
    llvm::json::Array large;
    for (const KernelLaunch &k : llvm::drop_begin(launches))
      large.push_back(k.name);
    classes.push_back(llvm::json::Object{{"name", "large"},
                                         {"min_tokens", launches[1].minTokens},
                                         {"launches", std::move(large)}});
  }
  llvm::raw_string_ostream cudaStream(out.cuda);
  if (failed(cuda::translateToCuda(*inspect, cudaStream))) {
    error = "the kernel has an op the CUDA C++ emitter does not handle";
    return false;
  }
  llvm::raw_string_ostream json(out.json);
  json << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                     {"router", name},
                                     {"arch", arch},
                                     {"size_classes", std::move(classes)},
                                     {"launch_model", std::move(launchModel)},
                                     {"kernels", std::move(kernels)}}))
       << "\n";

  PassManager pm(module.getContext());
  moe::buildPtxPipeline(pm, arch, options, freezeKnobs, inputDtypes);
  // The mapping above already reported its warnings; errors still go through.
  ScopedDiagnosticHandler quiet(module.getContext(), [](Diagnostic &d) {
    return success(d.getSeverity() == DiagnosticSeverity::Warning);
  });
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
  emitLauncher(name, arch, compiler::readAbi(*inspect, name),
               compiler::readKnobs(*inspect, name), launches, out.ptx, out);
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
