//===- ToolSetup.cpp - what the command-line tools share ------------------===//
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Compiler/Pipelines.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace cl = llvm::cl;

namespace switchyard::tools {

static cl::opt<std::string> entry("entry",
                                  cl::desc("the router or rule to use (needed when the "
                                           "file has several)"),
                                  cl::value_desc("name"), cl::cat(category()));
static cl::list<std::string> knobs("set", cl::desc("override a policy knob"),
                                   cl::value_desc("knob=value"), cl::cat(category()));

static cl::list<std::string> outputs(
    "outputs", cl::CommaSeparated,
    cl::desc(
        "compile only these results (and what feeds them), e.g. topk_ids,topk_weights"),
    cl::value_desc("name,..."), cl::cat(category()));

static cl::list<std::string> inputDtypeFlags(
    "input-dtype",
    cl::desc("read a float32 tensor input of the router as bfloat16 or float16 in place "
             "(the compiled entry takes that dtype and widens at each load; repeatable)"),
    cl::value_desc("name=bf16|f16|f32"), cl::cat(category()));

static cl::opt<bool> fill(
    "fill-empty-slots",
    cl::desc("return every slot of topk_ids as an expert (a serving engine's contract: a "
             "slot the policy leaves empty gets weight 0 and an expert the token or the "
             "batch already uses)"),
    cl::cat(category()));

static cl::opt<bool>
    freeze("freeze-knobs",
           cl::desc("compile the knobs' values in (no run-time knob struct)"),
           cl::cat(category()));

static cl::opt<int64_t> threadMinWork(
    "host-threads-min-work",
    cl::desc("host code: run a router's token loops on OpenMP threads (OMP_NUM_THREADS) "
             "for batches of at least this many scores T * E (default 16384; 0: always "
             "single-threaded)"),
    cl::init(moe::kDefaultThreadMinWork), cl::cat(category()));

const std::string &entryName() { return entry; }

int64_t hostThreadMinWork() { return threadMinWork; }

bool freezeKnobs() { return freeze; }

bool fillEmptySlots() { return fill; }

std::vector<std::string> outputNames() {
  return std::vector<std::string>(outputs.begin(), outputs.end());
}

std::vector<std::string> inputDtypes() {
  return std::vector<std::string>(inputDtypeFlags.begin(), inputDtypeFlags.end());
}

std::vector<std::string> knobOverrides() {
  return std::vector<std::string>(knobs.begin(), knobs.end());
}

void parseCommandLine(int argc, char **argv, llvm::StringRef overview) {
  cl::HideUnrelatedOptions(category());
  cl::ParseCommandLineOptions(argc, argv, overview);
  if (threadMinWork < 0) {
    llvm::errs() << llvm::sys::path::filename(argv[0])
                 << ": error: --host-threads-min-work=" << threadMinWork
                 << " must be >= 0 (0: single-threaded)\n";
    std::exit(1);
  }
}

int fail(llvm::StringRef tool, const llvm::Twine &message) {
  llvm::errs() << tool << ": error: " << message << "\n";
  return 1;
}

} // namespace switchyard::tools
