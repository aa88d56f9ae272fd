//===- ToolSetup.h - what the command-line tools share ----------*- C++ -*-===//
//
// moe-run and moe-compile take the same policy options (--entry, --set, the shape
// flags that bind a generic policy, --model) and report
// errors the same way; their --help lists Switchyard's options only (LLVM's backend
// flags stay reachable through --help-hidden).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_TOOLSETUP_H
#define SWITCHYARD_COMPILER_TOOLSETUP_H

#include "switchyard/Dialect/Moe/Transforms/Specialize.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"

#include <string>
#include <vector>

namespace switchyard::tools {

/// The category every Switchyard option belongs to (what --help shows).
llvm::cl::OptionCategory &category();

/// Registers the shape flags and --model (shapeRequest), and the policy options
/// (--entry, --set, --outputs, ...), with the command line. A tool calls what it takes
/// before parsing (parseCommandLine registers both): the tools share one multi-call
/// binary, where an option made at load time would be every tool's.
void registerShapeOptions();
void registerPolicyOptions();

/// --entry NAME: the router or rule to use when the file has several.
const std::string &entryName();
/// --freeze-knobs: compile the knobs' values in instead of taking them at run time.
bool freezeKnobs();
/// --fill-empty-slots: the engine contract in the generated code (moe-fill-empty-slots).
bool fillEmptySlots();
/// --host-threads-min-work: the batch size (T * E) from which host code is threaded.
int64_t hostThreadMinWork();
/// --set knob=value ...: knob overrides.
std::vector<std::string> knobOverrides();

/// --input-dtype NAME=bf16|f16|f32 ...: the element type float tensor inputs of the
/// compiled entry take (checked per router with compiler::checkInputDtypes).
std::vector<std::string> inputDtypes();

/// --outputs: the results to compile (empty: all).
std::vector<std::string> outputNames();

/// What the shape flags (--experts, --top-k, --groups, --topk-groups, --devices,
/// --slots, --shared-experts, --scaling, --norm-topk-prob) and --model config.json
/// bind a generic policy to; false with `error` set when the config file is malformed
/// or a flag contradicts it.
bool shapeRequest(moe::ShapeRequest &request, std::string &error);

/// Registers the shape and policy options and parses the command line, with --help
/// restricted to Switchyard's options.
void parseCommandLine(int argc, char **argv, llvm::StringRef overview);

/// Prints "<tool>: error: <message>" on stderr and returns the exit code 1.
int fail(llvm::StringRef tool, const llvm::Twine &message);

/// The tools' entry points: the multi-call binary moe-tools runs one, chosen by the
/// name it is run as (tools/moe-tools).
int moeCompileMain(int argc, char **argv);
int moeOptMain(int argc, char **argv);
int moeRunMain(int argc, char **argv);
int moeTranslateMain(int argc, char **argv);

} // namespace switchyard::tools

#endif
