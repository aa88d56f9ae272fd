//===- Policy.h - load, describe and lower policy files ---------*- C++ -*-===//
//
// What moe-run and moe-compile share: reading a policy file with diagnostics at
// file:line:col, describing its routers (named inputs, outputs and knobs, as moe-run
// --list prints them), and reading back the C ABI (`moe.abi`) of a lowered router.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_POLICY_H
#define SWITCHYARD_COMPILER_POLICY_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Dialect/Moe/Transforms/Specialize.h"
#include "switchyard/Runtime/Signature.h"

#include <array>
#include <string>
#include <vector>

namespace switchyard::compiler {

/// Every dialect, interface and translation a policy goes through on the host path.
void registerDialects(mlir::DialectRegistry &registry);

/// A context with every dialect of the host and GPU paths loaded that prints one line
/// per diagnostic (no IR dumps): what the command-line tools use.
std::unique_ptr<mlir::MLIRContext> makeToolContext();

/// A parsed policy file. While it lives, every diagnostic of the context (parser,
/// verifier, passes) is printed as `file:line:col: error: ...` with the source line.
struct PolicyFile {
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<mlir::SourceMgrDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Rejects buffer `bufferId` of `mgr` unless it can be a policy: UTF-8 text without NUL
/// or other control bytes (except tab, newline, carriage return, form feed) that holds
/// more than whitespace and `//` comments. (MLIR's lexer skips NUL bytes, so a file of
/// NULs would otherwise parse as an empty module.) Prints `file:line:col: error: ...`;
/// false when rejected.
bool checkPolicyText(llvm::SourceMgr &mgr, unsigned bufferId);

/// Parses and verifies `path`; null (after printing the errors) when it is invalid.
std::unique_ptr<PolicyFile> loadPolicy(mlir::MLIRContext &context, llvm::StringRef path);

/// One named input or output of a router, as a caller sees it.
struct Port {
  std::string name;
  std::string kind;                         // tensor, set, scalar, placement
  std::string dtype;                        // float32, int32, bool, placement
  std::vector<int64_t> shape;               // -1: dynamic (see sizeRule)
  std::string shapeText;                    // "[?, 128]", "[T*8 + 8064]", ...
  std::array<int64_t, 3> sizeRule{1, 0, 1}; // dynamic dim 0: ceil((a*T + b) / d)
};

struct KnobInfo {
  std::string name, type, value;
};

struct RouterInfo {
  std::string name;
  runtime::EntryKind kind = runtime::EntryKind::Router;
  int64_t experts = 0, topK = 0, sharedExperts = 0;
  std::vector<Port> inputs, outputs;
  std::vector<KnobInfo> knobs;
};

std::vector<RouterInfo> describeRouters(mlir::ModuleOp module);
std::string routersToJson(const std::vector<RouterInfo> &routers);

/// One parameter of the flat C entry point of a lowered router (after num_tokens):
/// the runtime's description, which the compiler fills from `moe.abi`.
using AbiParam = runtime::Param;

/// The C ABI of the lowered router `name` (its `moe.abi` attribute), or an empty
/// vector when the module has no such entry.
std::vector<AbiParam> readAbi(mlir::ModuleOp lowered, llvm::StringRef name);

/// Binds the module's policies to `request` (moe-specialize: a generic policy takes the
/// shape, a fixed one is checked against it) and re-verifies; false after printing
/// errors. Nothing to do when the request is empty and every policy is bound.
bool bindShape(mlir::ModuleOp module, const moe::ShapeRequest &request);

/// The run-time knobs of the lowered router `name` (its `moe.abi` "knob" entries; empty
/// when the knobs were frozen).
std::vector<runtime::Knob> readKnobs(mlir::ModuleOp lowered, llvm::StringRef name);

/// Applies `name=value` knob overrides (moe-set-knobs) and re-verifies the policy, so
/// an invalid value is reported by the op that uses it; false after printing errors.
bool applyKnobs(mlir::ModuleOp module, llvm::ArrayRef<std::string> overrides);

/// Both, knob values first: the bound shape is then checked with the values asked for
/// (a default it would reject - ExpertFlow's 32-expert cache on an 8-expert model - is
/// no error when --set replaces it), and a bad value is reported against the bound
/// shape ("capacity must be in [1, 8]").
bool bindShapeWithKnobs(mlir::ModuleOp module, const moe::ShapeRequest &request,
                        llvm::ArrayRef<std::string> overrides);

/// Runs the host pipeline: stages, loops, LLVM dialect, C entries; `laneParallel`
/// compiles the GPU form of the per-token code (moe-lower-to-loops); knobs become
/// run-time parameters unless `freezeKnobs` compiles their values in; a router's
/// token loops run on OpenMP threads from T * E >= `threadMinWork` (0: never);
/// `inputDtypes` ("NAME=bf16", --input-dtype) narrows float inputs (moe-narrow-inputs).
mlir::LogicalResult lowerToLLVM(mlir::ModuleOp module, bool laneParallel = false,
                                bool freezeKnobs = false,
                                int64_t threadMinWork = moe::kDefaultThreadMinWork,
                                llvm::ArrayRef<std::string> inputDtypes = {});

/// Checks `--input-dtype NAME=DTYPE` requests against the router `info`: NAME one of
/// its float32 tensor inputs, DTYPE bf16 / f16 / f32 (bfloat16, float16, float32 too);
/// the normalized "NAME=bf16" list in `out`. False with `error` naming the flag.
bool checkInputDtypes(const RouterInfo &info, llvm::ArrayRef<std::string> requests,
                      std::vector<std::string> &out, std::string &error);

/// Keeps only the router `name`; false (and a message) when there is none.
bool selectRouter(mlir::ModuleOp module, llvm::StringRef name, std::string &error);

} // namespace switchyard::compiler

#endif
