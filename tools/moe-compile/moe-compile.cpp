//===- moe-compile.cpp - compile policies to native artifacts -------------===//
//
//   moe-compile POLICY.mlir --target=host -o DIR [--entry NAME] [--set knob=value ...]
//
// For every router @NAME in the policy (or the one chosen with --entry) writes:
//   DIR/NAME.h      the C ABI: int32_t NAME(int64_t num_tokens, <buffers>...)
//   DIR/NAME.o      the host object file (x86-64, PIC, -O3)
//   DIR/libNAME.so  a shared library holding it
//   DIR/NAME.ll     the LLVM IR, for inspection
//   DIR/manifest.json  every entry: signature, bound sizes, host library and packed
//                      symbol, PTX / cubin, launcher library and launch size classes
//                      (runtime::Manifest)
//   DIR/diagnostics.json  every diagnostic of the compile as data: severity, file, line,
//                      column, message and, for a warning about a knob, the knob
// With --target=ptx|cuda|all also NAME.ptx, NAME.cubin, NAME.json, NAME_launch.h/.cpp
// and with --launcher-library libNAME_gpu.so (the launcher, for the runtime).
// Knobs are run-time parameters of the host entry (`const struct NAME_knobs *`, NULL: the
// defaults, which --set changes) and kernel parameters of the GPU launcher (the same
// struct); --freeze-knobs compiles them in.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Compiler/Policy.h"
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/KnobDiagnostics.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/Runtime/Manifest.h"
#include "switchyard/Target/Host/HostCompiler.h"
#include "switchyard/Target/Ptx/PtxCompiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>

using namespace switchyard;
namespace cl = llvm::cl;

namespace {
/// The tool's options: made when it runs (a multi-call binary registers only the
/// running tool's options with the command line).
struct Options {
  cl::opt<std::string> inputFile{cl::Positional, cl::desc("<policy.mlir>"), cl::Required,
                                 cl::cat(tools::category())};
  cl::opt<std::string> outDir{"o", cl::desc("output directory"), cl::value_desc("dir"),
                              cl::Required, cl::cat(tools::category())};
  cl::opt<std::string> target{"target", cl::desc("host | ptx | cuda | all"),
                              cl::init("host"), cl::cat(tools::category())};
  cl::opt<std::string> gpuArch{"gpu-arch",
                               cl::desc("GPU architecture (sm_80, sm_90, "
                                        "sm_100)"),
                               cl::init("sm_90"), cl::cat(tools::category())};
  cl::opt<bool> laneParallel{
      "lane-parallel",
      cl::desc("compile the GPU (lane-parallel) form of the per-token code for the host"),
      cl::cat(tools::category())};
  cl::opt<int64_t> ctaTokens{
      "cta-tokens",
      cl::desc("the most tokens one CTA (one launch) serves; larger batches take the "
               "two-kernel large-batch path (1..1024; default: per router, from the launch "
               "cost model --report shows)"),
      cl::init(0), cl::cat(tools::category())};
  cl::opt<int64_t> tokensPerCta{
      "tokens-per-cta",
      cl::desc("tokens per CTA in the large-batch kernels (1..65536; default: per router, "
               "from the launch cost model)"),
      cl::init(0), cl::cat(tools::category())};
  cl::opt<bool> launcherLibrary{
      "launcher-library",
      cl::desc("with a GPU target, also build the launcher into libNAME_gpu.so (c++ and "
               "cudart from the CUDA toolkit): what the runtime loads for --device cuda"),
      cl::cat(tools::category())};
  cl::opt<bool> assembleCubin{
      "cubin",
      cl::desc("with a GPU target, assemble NAME.cubin with ptxas (--cubin=false: NAME.ptx "
               "only, which the driver compiles when it loads it)"),
      cl::init(true), cl::cat(tools::category())};
  cl::opt<int64_t> knobGroups{
      "knob-groups",
      cl::desc("with a GPU target, route up to this many knob groups in one launch: the "
               "launcher takes input knob_group (each token's group) and that many knob "
               "structs, each group routed as a batch of its own (an engine's per-request "
               "knobs under CUDA graphs; needs --outputs of per-token results)"),
      cl::init(0), cl::cat(tools::category())};
  cl::opt<bool> verbose{"v", cl::desc("print what was written and how long it took"),
                        cl::cat(tools::category())};
  cl::opt<bool> report{"report",
                       cl::desc("print a static cost report per router: "
                                "kernels, launch shape, registers and "
                                "shared memory (ptxas -v), workspace and "
                                "bytes moved per token"),
                       cl::cat(tools::category())};
};
Options *opts = nullptr;
} // namespace

static int fail(const llvm::Twine &message) { return tools::fail("moe-compile", message); }

/// A diagnostic as diagnostics.json has it: {"severity", "file", "line", "column",
/// "message", "knob"?}.
static llvm::json::Value describeDiagnostic(mlir::Diagnostic &diag) {
  const char *severity = diag.getSeverity() == mlir::DiagnosticSeverity::Error ? "error"
                         : diag.getSeverity() == mlir::DiagnosticSeverity::Warning
                             ? "warning"
                         : diag.getSeverity() == mlir::DiagnosticSeverity::Note ? "note"
                                                                                : "remark";
  llvm::json::Object entry{{"severity", severity}, {"message", diag.str()}};
  if (auto loc = diag.getLocation()->findInstanceOf<mlir::FileLineColLoc>()) {
    entry["file"] = loc.getFilename().str();
    entry["line"] = int64_t(loc.getLine());
    entry["column"] = int64_t(loc.getColumn());
  }
  if (llvm::StringRef knob = moe::getDiagnosticKnob(diag); !knob.empty())
    entry["knob"] = knob.str();
  return entry;
}

static bool writeText(llvm::StringRef path, llvm::StringRef text, std::string &error) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  out.os() << text;
  out.keep();
  return true;
}

static std::string path(llvm::StringRef dir, llvm::StringRef file) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, file);
  return std::string(p);
}

/// The launch size classes of a GPU entry, from the launcher metadata JSON.
/// The manifest's size classes of a router's GPU launch.
static std::vector<runtime::SizeClass>
describeSizeClasses(const ptx::LaunchMetadata &launch) {
  std::vector<runtime::SizeClass> classes;
  for (const ptx::SizeClassMetadata &c : launch.sizeClasses) {
    runtime::SizeClass sizeClass;
    sizeClass.name = moe::stringifySizeClass(c.sizeClass).str();
    sizeClass.minTokens = c.minTokens;
    sizeClass.maxTokens = c.maxTokens ? c.maxTokens : -1;
    sizeClass.launches = c.launches.size();
    classes.push_back(sizeClass);
  }
  return classes;
}

int switchyard::tools::moeCompileMain(int argc, char **argv) {
  Options options;
  opts = &options;
  llvm::InitLLVM init(argc, argv);
  tools::parseCommandLine(argc, argv, "Switchyard: compile MoE routing policies\n");
  if (opts->target != "host" && opts->target != "ptx" && opts->target != "all" &&
      opts->target != "cuda")
    return ::fail("unknown --target=" + opts->target + " (host, ptx, cuda or all)");
  static const llvm::StringSet<> arches = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100"};
  if (!arches.contains(opts->gpuArch))
    return ::fail("unsupported --gpu-arch=" + opts->gpuArch +
                  " (sm_80, sm_86, sm_89, sm_90, sm_100)");
  if (opts->ctaTokens.getNumOccurrences() &&
      (opts->ctaTokens < 1 || opts->ctaTokens > 1024))
    return ::fail("--cta-tokens=" + std::to_string(opts->ctaTokens) +
                  " is outside [1, 1024]");
  if (opts->tokensPerCta.getNumOccurrences() &&
      (opts->tokensPerCta < 1 || opts->tokensPerCta > 65536))
    return ::fail("--tokens-per-cta=" + std::to_string(opts->tokensPerCta) +
                  " is outside [1, 65536]");
  if (opts->knobGroups.getNumOccurrences() &&
      (opts->knobGroups < 1 || opts->knobGroups > 64))
    return ::fail("--knob-groups=" + std::to_string(opts->knobGroups) +
                  " is outside [1, 64]");
  if (opts->knobGroups > 0 && opts->target != "cuda" && opts->target != "ptx")
    return ::fail("--knob-groups builds a GPU entry with one more input (knob_group): use "
                  "--target=cuda or --target=ptx (the host routes knob groups by rows)");
  moe::MoeMapToGPUOptions mapping;
  mapping.knobGroups = opts->knobGroups;
  mapping.ctaTokens = opts->ctaTokens;
  mapping.tokensPerCta = opts->tokensPerCta;
  bool wantHost = opts->target == "host" || opts->target == "all";
  bool wantPtx = opts->target == "ptx" || opts->target == "all" || opts->target == "cuda";

  std::unique_ptr<mlir::MLIRContext> context = compiler::makeToolContext();
  std::unique_ptr<compiler::PolicyFile> policy =
      compiler::loadPolicy(*context, opts->inputFile);
  // Every diagnostic of the compile, as data (DIR/diagnostics.json): severity, location,
  // message and the knob it is about; the policy's handler still prints it.
  llvm::json::Array diagnostics;
  mlir::ScopedDiagnosticHandler recorder(context.get(), [&](mlir::Diagnostic &diag) {
    diagnostics.push_back(describeDiagnostic(diag));
    return mlir::failure();
  });
  if (!policy)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> &module = policy->module;
  moe::ShapeRequest shape;
  std::string shapeError;
  if (!tools::shapeRequest(shape, shapeError))
    return tools::fail("moe-compile", shapeError);
  // A router asked for by --entry does not fail because of the file's other entries (a
  // rule whose knob defaults do not suit this model): when the whole file does not bind
  // (tried quietly on a copy), the router is compiled alone. (A rule keeps its file's
  // routers: it may take its top-k from them.)
  if (const std::string &wanted = tools::entryName(); !wanted.empty()) {
    bool bindsWhole;
    {
      mlir::OwningOpRef<mlir::ModuleOp> trial(module->clone());
      mlir::ScopedDiagnosticHandler quiet(
          context.get(), [](mlir::Diagnostic &) { return mlir::success(); });
      bindsWhole = compiler::bindShapeWithKnobs(*trial, shape, tools::knobOverrides());
    }
    for (moe::PolicyOpInterface p : moe::getPolicyOps(*module))
      if (!bindsWhole && p.getSymName() == wanted && p.isRouter()) {
        std::string ignored;
        compiler::selectRouter(*module, wanted, ignored);
        break;
      }
  }
  // Knob values first: a default that the bound shape would reject (ExpertFlow's cache of
  // 32 experts on an 8-expert model) is then checked with the value asked for.
  if (!compiler::bindShapeWithKnobs(*module, shape, tools::knobOverrides()) ||
      failed(moe::selectOutputs(*module, tools::outputNames(), tools::entryName())) ||
      (tools::fillEmptySlots() && failed(moe::fillEmptySlots(*module, tools::entryName()))))
    return 1;

  std::vector<compiler::RouterInfo> routers = compiler::describeRouters(*module);
  if (routers.empty())
    return ::fail("'" + opts->inputFile + "' has no moe.router to compile");
  const std::string &entry = tools::entryName();
  if (!entry.empty() && llvm::none_of(routers, [&](const compiler::RouterInfo &r) {
        return r.name == entry;
      })) {
    std::string error;
    compiler::selectRouter(*module, tools::entryName(), error);
    return ::fail(error);
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(opts->outDir))
    return ::fail("cannot create '" + opts->outDir + "': " + ec.message());

  runtime::Manifest manifest;
  manifest.policy = opts->inputFile;
  manifest.target = opts->target;
  manifest.command.assign(argv, argv + argc);
  for (const compiler::RouterInfo &info : routers) {
    if (!entry.empty() && info.name != entry)
      continue;
    runtime::ManifestEntry described;
    described.experts = info.experts;
    described.topK = info.topK;
    described.sharedExperts = info.sharedExperts;
    auto start = std::chrono::steady_clock::now();
    std::string error;
    auto path = [&](llvm::StringRef file) { return ::path(opts->outDir, file); };
    // Rules are host scheduling code: they get the host artifacts whatever the target.
    bool isRule = info.kind != runtime::EntryKind::Router;
    std::vector<std::string> inputDtypes; // --input-dtype, checked against this entry
    if (!compiler::checkInputDtypes(info, tools::inputDtypes(), inputDtypes, error))
      return ::fail(error);
    if (wantPtx && isRule && !wantHost)
      llvm::outs() << "moe-compile: @" << info.name << " is a "
                   << runtime::spelling(info.kind) << " rule: host code only\n";
    std::vector<compiler::AbiParam> gpuAbi; // the launcher's, with knob groups
    if (wantPtx && !isRule) {
      mlir::OwningOpRef<mlir::ModuleOp> gpu(module->clone());
      if (!compiler::selectRouter(*gpu, info.name, error))
        return ::fail(error);
      ptx::GpuArtifacts artifacts;
      if (!ptx::compileToPtx(*gpu, info.name, opts->gpuArch, mapping, artifacts, error,
                             tools::freezeKnobs(), inputDtypes))
        return ::fail(error);
      if (opts->knobGroups > 0)
        gpuAbi = artifacts.abi;
      std::string ptx = path(info.name + ".ptx"), json = path(info.name + ".json");
      std::string launchH = path(info.name + "_launch.h");
      std::string launchCpp = path(info.name + "_launch.cpp");
      std::string cu = path(info.name + ".cu");
      if ((opts->target == "cuda" || opts->target == "all") &&
          !writeText(cu, artifacts.cuda, error))
        return ::fail(error);
      if (!writeText(ptx, artifacts.ptx, error) ||
          !writeText(json, artifacts.json, error) ||
          !writeText(launchH, artifacts.launchHeader, error) ||
          !writeText(launchCpp, artifacts.launchSource, error))
        return ::fail(error);
      llvm::outs() << "moe-compile: @" << info.name << " -> " << ptx << ", " << json << ", "
                   << launchH << ", " << launchCpp;
      std::string cubin = path(info.name + ".cubin"), usage;
      described.ptx = info.name + ".ptx";
      described.gpuArch = opts->gpuArch;
      described.launchMetadata = info.name + ".json"; // a copy of described.launch
      described.launch = artifacts.json;
      if (!opts->assembleCubin) {
        llvm::outs() << " (no cubin: --cubin=false)";
      } else if (ptx::assemblePtx(ptx, opts->gpuArch, cubin, error, &usage)) {
        llvm::outs() << ", " << cubin;
        described.cubin = info.name + ".cubin";
      } else {
        llvm::outs() << " (no cubin: " << error << ")";
      }
      llvm::outs() << "\n";
      described.sizeClasses = describeSizeClasses(artifacts.launch);
      // The launcher as a library the runtime can dlopen.
      if (opts->launcherLibrary) {
        std::string gpuLibrary = path("lib" + info.name + "_gpu.so");
        if (!ptx::linkLauncherLibrary(launchCpp, gpuLibrary, error))
          return ::fail(error);
        described.gpuLibrary = "lib" + info.name + "_gpu.so";
        described.gpuSymbol = info.name + "_launch_packed";
        described.workspaceSymbol = info.name + "_workspace_bytes";
        llvm::outs() << "moe-compile: @" << info.name << " -> " << gpuLibrary << "\n";
      }
      if (opts->report) {
        // Bytes each token moves through the kernel: its inputs and outputs (per-token
        // rows) plus its workspace rows; per-batch data (sets, counts) is not per token.
        int64_t perTokenIo = 0;
        for (const compiler::Port &port : info.inputs) {
          bool narrow = llvm::is_contained(inputDtypes, port.name + "=bf16") ||
                        llvm::is_contained(inputDtypes, port.name + "=f16");
          if (!port.shape.empty() && port.shape[0] < 0)
            perTokenIo += (port.dtype == "bool" ? 1
                           : narrow             ? 2
                                                : 4) *
                          (port.shape.size() > 1 ? port.shape[1] : 1);
        }
        for (const compiler::Port &port : info.outputs)
          if (!port.shape.empty() && port.shape[0] < 0)
            perTokenIo += 4 * (port.shape.size() > 1 ? port.shape[1] : port.sizeRule[0]);
        const ptx::LaunchMetadata &launch = artifacts.launch;
        llvm::outs() << "report @" << info.name << " (" << opts->gpuArch
                     << "): " << launch.kernels.size()
                     << " kernels; inputs+outputs = " << perTokenIo << " B/token\n";
        // Per size class and call: a grid-wide step is a launch boundary or a last-CTA
        // ticket; the barriers are the kernels' static sites (those in loops run more
        // often).
        for (const ptx::SizeClassMetadata &c : launch.sizeClasses) {
          int64_t ctaBarriers = 0, inLoops = 0, warpBarriers = 0;
          for (const std::string &name : c.launches) {
            const ptx::KernelSync &sync = launch.kernel(name)->sync;
            ctaBarriers += sync.ctaBarriers;
            inLoops += sync.ctaBarriersInLoops;
            warpBarriers += sync.warpBarriers;
          }
          llvm::outs() << "  " << moe::stringifySizeClass(c.sizeClass) << " ("
                       << (moe::isPerCtaClass(c.sizeClass)
                               ? "T >= " + std::to_string(c.minTokens)
                           : c.maxTokens ? "T <= " + std::to_string(c.maxTokens)
                                         : std::string("any T"))
                       << "): " << c.launches.size() << " launch(es), " << c.gridSteps
                       << " grid-wide step(s), " << ctaBarriers << " CTA barrier sites ("
                       << inLoops << " in loops), " << warpBarriers
                       << " warp barrier sites, workspace " << c.perTokenBytes
                       << " B/token\n";
        }
        for (const ptx::KernelMetadata &k : launch.kernels) {
          llvm::outs() << "  " << k.name << ": grid " << k.gridText() << ", block "
                       << k.block << ", workspace " << k.perTokenBytes << " B/token + "
                       << k.fixedBytes << " B\n";
        }
        if (const llvm::json::Object *model = launch.launchModel.getAsObject()) {
          // Modeled, not measured (LaunchCostModel.h: sm_90's limits, constants fitted
          // to the GPU kit's measurements on an H200).
          llvm::outs() << llvm::formatv(
              "  launch model (modeled sm_90, not measured; constants fitted on an H200): "
              "{0:F0} warp instructions per token, {1} values combined per CTA, {2} "
              "resident "
              "CTAs per SM",
              model->getNumber("token_instructions").value_or(0),
              model->getInteger("combine_values").value_or(0),
              model->getInteger("resident_ctas_per_sm").value_or(0));
          if (std::optional<int64_t> cta = model->getInteger("cta_tokens"))
            llvm::outs() << "; cta-tokens " << *cta << ", tokens-per-cta "
                         << model->getInteger("tokens_per_cta").value_or(0);
          llvm::outs() << "\n    modeled:";
          for (const llvm::json::Value &point : *model->getArray("modeled")) {
            const llvm::json::Object &p = *point.getAsObject();
            llvm::outs() << llvm::formatv(" T={0}: {1:F1} us",
                                          p.getInteger("tokens").value_or(0),
                                          p.getNumber("us").value_or(0));
          }
          llvm::outs() << "\n";
        }
        for (llvm::StringRef line : llvm::split(llvm::StringRef(usage).rtrim("; "), "; "))
          llvm::outs() << "  ptxas " << line << "\n";
      }
    }
    // The host lowering gives the entry's signature; a GPU-only target records it in
    // the manifest too (the launcher takes the same buffers).
    mlir::OwningOpRef<mlir::ModuleOp> copy(module->clone());
    if (!compiler::selectRouter(*copy, info.name, error))
      return ::fail(error);
    if (failed(compiler::lowerToLLVM(*copy, opts->laneParallel, tools::freezeKnobs(),
                                     tools::hostThreadMinWork(), inputDtypes)))
      return 1;
    std::vector<compiler::AbiParam> abi = compiler::readAbi(*copy, info.name);
    std::vector<runtime::Knob> knobs = compiler::readKnobs(*copy, info.name);
    described.signature = runtime::Signature{info.name, info.kind, abi};
    described.signature.knobs = knobs;
    if (!gpuAbi.empty()) { // the GPU entry alone (--knob-groups): its own parameters
      described.signature.params = gpuAbi;
      described.signature.knobGroups = opts->knobGroups;
    }
    if (wantPtx && !isRule && !wantHost) {
      manifest.entries.push_back(std::move(described));
      continue;
    }
    described.hostLibrary = "lib" + info.name + ".so";
    described.hostSymbol = info.name + "_packed";
    manifest.entries.push_back(described);

    std::string header = path(info.name + ".h"), object = path(info.name + ".o");
    std::string library = path("lib" + info.name + ".so"), ir = path(info.name + ".ll");
    if (!writeText(header, host::emitHeader(info, abi, knobs), error) ||
        !host::emitObjectFile(*copy, object, error, info.name) ||
        !host::linkSharedLibrary(object, library, error))
      return ::fail(error);
    {
      llvm::LLVMContext llvmContext;
      auto llvmModule = mlir::translateModuleToLLVMIR(*copy, llvmContext);
      std::string text;
      llvm::raw_string_ostream os(text);
      llvmModule->print(os, nullptr);
      if (!writeText(ir, text, error))
        return ::fail(error);
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    llvm::outs() << "moe-compile: @" << info.name << " -> " << header << ", " << object
                 << ", " << library;
    if (opts->verbose)
      llvm::outs() << " (" << llvm::format("%.0f", ms) << " ms)";
    llvm::outs() << "\n";
  }
  std::string error;
  std::string diagnosticsText;
  llvm::raw_string_ostream(diagnosticsText)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(diagnostics)));
  // The size and SHA-256 of every artifact: the runtime checks a library against them
  // before loading it.
  if (!writeText(path(opts->outDir, "diagnostics.json"), diagnosticsText, error) ||
      !runtime::recordFileDigests(opts->outDir, manifest, error) ||
      !writeText(path(opts->outDir, "manifest.json"), runtime::toJson(manifest), error))
    return ::fail(error);
  return 0;
}
