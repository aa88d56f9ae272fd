//===- moe-run.cpp - compile a policy for the host and run it on .npy data ===//
//
//   moe-run FILE.mlir --entry NAME --arg name=path.npy ... --set knob=value ... --out DIR
//   moe-run FILE.mlir --list
//   (+ --experts E --top-k K ... or --model config.json to bind a generic policy)
//
// Compiles the router with the host pipeline and runs the compiled code (JIT through
// MLIR's ExecutionEngine, not an interpreter), binding inputs by argument name and
// writing every named result as DIR/<name>.npy. Every bad input is a one-line error
// naming the argument, and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Compiler/Policy.h"
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/Runtime/Binding.h"
#include "switchyard/Target/Host/HostCompiler.h"
#include <cmath>

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

using namespace switchyard;
namespace cl = llvm::cl;

namespace {
/// The tool's options: made when it runs (a multi-call binary registers only the
/// running tool's options with the command line).
struct Options {
  cl::opt<std::string> inputFile{cl::Positional, cl::desc("<policy.mlir>"), cl::Required,
                                 cl::cat(tools::category())};
  cl::list<std::string> args{"arg",
                             cl::desc("bind input <name> to a .npy file (or, "
                                      "for a scalar, an integer)"),
                             cl::value_desc("name=path.npy"), cl::cat(tools::category())};
  cl::opt<std::string> outDir{"out", cl::desc("directory for the <result>.npy files"),
                              cl::value_desc("dir"), cl::cat(tools::category())};
  cl::opt<bool> laneParallel{
      "lane-parallel",
      cl::desc("compile the GPU (lane-parallel) form of the per-token code for the host"),
      cl::cat(tools::category())};
  cl::opt<bool> list{"list",
                     cl::desc("print every router's inputs, outputs and knobs "
                              "as JSON and exit"),
                     cl::cat(tools::category())};
};
Options *opts = nullptr;
} // namespace

static int fail(const llvm::Twine &message) { return tools::fail("moe-run", message); }

static bool parseInteger(llvm::StringRef text, int64_t &value) {
  return !text.trim().getAsInteger(10, value);
}

/// Binds `--arg name=source`: a .npy file, or for a scalar an integer literal.
static bool bindArgument(runtime::CallBuffers &call, const std::string &name,
                         const std::string &source, std::string &error) {
  if (!call.isInput(name, error))
    return false;
  if (call.isScalar(name) && !llvm::sys::fs::exists(source)) {
    int64_t v;
    if (!parseInteger(source, v)) {
      const runtime::Signature &sig = call.signature();
      error = "argument '" + name + "': expected an integer (" +
              npy::dtypeName(sig.params[sig.findInput(name)].dtype) +
              ") or a .npy file holding one, got '" + source + "'";
      return false;
    }
    return call.bindScalar(name, v, error);
  }
  std::string what = "argument '" + name + "' (" + source + ")";
  npy::Array a;
  return npy::load(source, what, a, error) && call.bind(name, a, what, error);
}

static bool writeOutput(const runtime::CallBuffers &call, size_t index,
                        std::string &error) {
  llvm::SmallString<256> path(opts->outDir);
  llvm::sys::path::append(path, call.signature().params[index].name + ".npy");
  return npy::save(path.str().str(), call.output(index), error);
}

int switchyard::tools::moeRunMain(int argc, char **argv) {
  Options options;
  opts = &options;
  llvm::InitLLVM init(argc, argv);
  tools::parseCommandLine(argc, argv,
                          "Switchyard: compile a policy for the host and "
                          "run it on .npy inputs\n");
  std::unique_ptr<mlir::MLIRContext> context = compiler::makeToolContext();
  std::unique_ptr<compiler::PolicyFile> policy =
      compiler::loadPolicy(*context, opts->inputFile);
  if (!policy)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> &module = policy->module;
  std::string error;
  moe::ShapeRequest shape;
  if (!tools::shapeRequest(shape, error))
    return ::fail(error);
  // Knob values before the shape (as moe-compile): the shape checks the values asked for.
  if (!compiler::bindShapeWithKnobs(*module, shape, tools::knobOverrides()) ||
      failed(moe::selectOutputs(*module, tools::outputNames(), tools::entryName())) ||
      (tools::fillEmptySlots() && failed(moe::fillEmptySlots(*module, tools::entryName()))))
    return 1;
  if (opts->list) {
    llvm::outs() << compiler::routersToJson(compiler::describeRouters(*module)) << "\n";
    return 0;
  }
  if (opts->outDir.empty())
    return ::fail("--out DIR is required (where the results are written)");

  if (!compiler::selectRouter(*module, tools::entryName(), error))
    return ::fail(error);
  compiler::RouterInfo info = compiler::describeRouters(*module).front();
  // --set values are checked by the verifier (on a copy: messages at the op that uses
  // the knob) and, unless --freeze-knobs compiles them in, passed at run time in the
  // entry's knob struct: the compiled code is the same for any values.
  bool freeze = tools::freezeKnobs();
  mlir::OwningOpRef<mlir::ModuleOp> probe(module->clone());
  if (!compiler::applyKnobs(freeze ? *module : *probe, tools::knobOverrides()))
    return 1;

  std::vector<std::string> inputDtypes;
  if (!compiler::checkInputDtypes(info, tools::inputDtypes(), inputDtypes, error))
    return ::fail(error);
  if (failed(compiler::lowerToLLVM(*module, opts->laneParallel, freeze,
                                   tools::hostThreadMinWork(), inputDtypes)))
    return 1;
  std::vector<compiler::AbiParam> abi = compiler::readAbi(*module, info.name);
  runtime::Signature signature{info.name, info.kind, abi};
  signature.knobs = compiler::readKnobs(*module, info.name);
  std::vector<uint8_t> knobStruct;
  if (!freeze &&
      !runtime::packKnobs(signature.knobs, tools::knobOverrides(), knobStruct, error))
    return ::fail(error);
  runtime::CallBuffers call(signature);

  // Arguments by name, checked against the entry's signature.
  for (const std::string &a : opts->args) {
    auto [name, source] = llvm::StringRef(a).split('=');
    if (source.empty() || !llvm::StringRef(a).contains('='))
      return ::fail("--arg '" + a + "' is not of the form name=path.npy");
    if (!bindArgument(call, name.str(), source.str(), error))
      return ::fail(error);
  }
  if (!call.finish(error))
    return ::fail(error);

  auto engine = host::jitCompile(*module);
  if (!engine)
    return ::fail("JIT compilation failed: " + llvm::toString(engine.takeError()));
  if (!host::invokeEntry(**engine, info.name, call.tokens(), abi, call.buffers(),
                         call.scalars(), error, &signature,
                         knobStruct.empty() ? nullptr : knobStruct.data()))
    return ::fail(error);

  if (std::error_code ec = llvm::sys::fs::create_directories(opts->outDir))
    return ::fail("cannot create '" + opts->outDir + "': " + ec.message());
  for (size_t i = 0; i < abi.size(); ++i)
    if (abi[i].isOutput && !writeOutput(call, i, error))
      return ::fail(error);
  llvm::outs() << "moe-run: @" << info.name;
  if (info.kind == runtime::EntryKind::Router)
    llvm::outs() << " on " << call.tokens() << " tokens";
  else
    llvm::outs() << " (" << runtime::spelling(info.kind) << " rule)";
  llvm::outs() << " -> " << llvm::StringRef(opts->outDir).rtrim('/') << "/{";
  bool first = true;
  for (const compiler::AbiParam &p : abi)
    if (p.isOutput) {
      llvm::outs() << (first ? "" : ",") << p.name;
      first = false;
    }
  llvm::outs() << "}.npy\n";
  return 0;
}
