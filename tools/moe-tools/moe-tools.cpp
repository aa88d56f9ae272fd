//===- moe-tools.cpp - the compiler tools in one binary -------------------===//
//
// moe-compile, moe-opt, moe-run and moe-translate share one executable, so that LLVM
// and MLIR (linked statically: the package needs no LLVM installed) are in it once.
// The tool is chosen by the name it is run as (argv[0]: the launchers of
// ToolLauncher.cpp run it under the tool's name), or by a first argument:
//
//   moe-tools moe-compile policy.mlir -o out     (also: moe-tools compile ...)
//
//===----------------------------------------------------------------------===//
#include "switchyard/Compiler/ToolSetup.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace {
struct Tool {
  const char *name;
  int (*main)(int argc, char **argv);
};
constexpr Tool kTools[] = {{"moe-compile", switchyard::tools::moeCompileMain},
                           {"moe-opt", switchyard::tools::moeOptMain},
                           {"moe-run", switchyard::tools::moeRunMain},
                           {"moe-translate", switchyard::tools::moeTranslateMain}};

const Tool *findTool(llvm::StringRef name) {
  for (const Tool &tool : kTools)
    if (name == tool.name || ("moe-" + name).str() == tool.name)
      return &tool;
  return nullptr;
}
} // namespace

int main(int argc, char **argv) {
  llvm::StringRef self = llvm::sys::path::filename(argv[0]);
  if (const Tool *tool = findTool(self))
    return tool->main(argc, argv);
  if (argc >= 2)
    if (const Tool *tool = findTool(argv[1])) {
      argv[1] = const_cast<char *>(tool->name); // the tool sees its own name first
      return tool->main(argc - 1, argv + 1);
    }
  llvm::errs() << self << ": the Switchyard compiler tools in one binary; usage: " << self
               << " TOOL [options] (TOOL: moe-compile, moe-opt, moe-run, moe-translate)\n";
  return argc >= 2 ? 1 : 2;
}
