//===- ToolSetup.cpp - what the command-line tools share ------------------===//
#include "switchyard/Compiler/ToolSetup.h"
#include "switchyard/Compiler/Pipelines.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace cl = llvm::cl;

namespace switchyard::tools {

namespace {
/// --entry, --set and the other policy options: made by registerPolicyOptions() (a
/// multi-call binary registers only what the running tool takes).
struct PolicyOptions {
  cl::opt<std::string> entry{"entry",
                             cl::desc("the router or rule to use (needed when the "
                                      "file has several)"),
                             cl::value_desc("name"), cl::cat(category())};
  cl::list<std::string> knobs{"set", cl::desc("override a policy knob"),
                              cl::value_desc("knob=value"), cl::cat(category())};
  cl::list<std::string> outputs{
      "outputs", cl::CommaSeparated,
      cl::desc(
          "compile only these results (and what feeds them), e.g. topk_ids,topk_weights"),
      cl::value_desc("name,..."), cl::cat(category())};
  cl::list<std::string> inputDtypeFlags{
      "input-dtype",
      cl::desc("read a float32 tensor input of the router as bfloat16 or float16 in place "
               "(the compiled entry takes that dtype and widens at each load; repeatable)"),
      cl::value_desc("name=bf16|f16|f32"), cl::cat(category())};
  cl::opt<bool> fill{
      "fill-empty-slots",
      cl::desc("return every slot of topk_ids as an expert (a serving engine's contract: a "
               "slot the policy leaves empty gets weight 0 and an expert the token or the "
               "batch already uses)"),
      cl::cat(category())};
  cl::opt<bool> freeze{"freeze-knobs",
                       cl::desc("compile the knobs' values in (no run-time knob struct)"),
                       cl::cat(category())};
  cl::opt<int64_t> threadMinWork{
      "host-threads-min-work",
      cl::desc("host code: run a router's token loops on OpenMP threads (OMP_NUM_THREADS) "
               "for batches of at least this many scores T * E (default 16384; 0: always "
               "single-threaded)"),
      cl::init(moe::kDefaultThreadMinWork), cl::cat(category())};
};
} // namespace

static PolicyOptions &policyOptions() {
  static PolicyOptions options;
  return options;
}

void registerPolicyOptions() { (void)policyOptions(); }

const std::string &entryName() { return policyOptions().entry; }

int64_t hostThreadMinWork() { return policyOptions().threadMinWork; }

bool freezeKnobs() { return policyOptions().freeze; }

bool fillEmptySlots() { return policyOptions().fill; }

std::vector<std::string> outputNames() {
  const cl::list<std::string> &outputs = policyOptions().outputs;
  return std::vector<std::string>(outputs.begin(), outputs.end());
}

std::vector<std::string> inputDtypes() {
  const cl::list<std::string> &flags = policyOptions().inputDtypeFlags;
  return std::vector<std::string>(flags.begin(), flags.end());
}

std::vector<std::string> knobOverrides() {
  const cl::list<std::string> &knobs = policyOptions().knobs;
  return std::vector<std::string>(knobs.begin(), knobs.end());
}

void parseCommandLine(int argc, char **argv, llvm::StringRef overview) {
  registerShapeOptions();
  registerPolicyOptions();
  cl::HideUnrelatedOptions(category());
  cl::ParseCommandLineOptions(argc, argv, overview);
  if (int64_t threadMinWork = policyOptions().threadMinWork; threadMinWork < 0) {
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
