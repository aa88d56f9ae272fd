//===- ToolSetup.h - what the command-line tools share ----------*- C++ -*-===//
//
// moe-run and moe-compile take the same policy options (--entry, --set) and report
// errors the same way; their --help lists Switchyard's options only (LLVM's backend
// flags stay reachable through --help-hidden).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_TOOLSETUP_H
#define SWITCHYARD_COMPILER_TOOLSETUP_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <string>
#include <vector>

namespace switchyard::tools {

/// The category every Switchyard option belongs to (what --help shows).
llvm::cl::OptionCategory &category();

/// --entry NAME: the router or rule to use when the file has several.
const std::string &entryName();
/// --set knob=value ...: knob overrides.
std::vector<std::string> knobOverrides();

/// Parses the command line with --help restricted to Switchyard's options.
void parseCommandLine(int argc, char **argv, llvm::StringRef overview);

/// Prints "<tool>: error: <message>" on stderr and returns the exit code 1.
int fail(llvm::StringRef tool, const llvm::Twine &message);

} // namespace switchyard::tools

#endif
