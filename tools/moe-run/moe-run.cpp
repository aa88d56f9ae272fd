//===- moe-run.cpp - compile a policy for the host and run it on .npy data ===//
//
//   moe-run FILE.mlir --entry NAME --arg name=path.npy ... --set knob=value ... --out DIR
//   moe-run FILE.mlir --list
//
// Compiles the router with the host pipeline and runs the compiled code (JIT through
// MLIR's ExecutionEngine, not an interpreter), binding inputs by argument name and
// writing every named result as DIR/<name>.npy. Every bad input is a one-line error
// naming the argument, and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/Transforms/Passes.h"
#include "switchyard/Host/Compiler.h"
#include "switchyard/Host/Policy.h"
#include "switchyard/Runtime/Npy.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/Path.h"

#include <map>

using namespace switchyard;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<policy.mlir>"),
                                      cl::Required);
static cl::opt<std::string> entry("entry", cl::desc("router to run (needed when the file "
                                                    "has several)"),
                                  cl::value_desc("name"));
static cl::list<std::string> args("arg", cl::desc("bind input <name> to a .npy file (or, "
                                                  "for a scalar, an integer)"),
                                  cl::value_desc("name=path.npy"));
static cl::list<std::string> knobs("set", cl::desc("override a policy knob"),
                                   cl::value_desc("knob=value"));
static cl::opt<std::string> outDir("out", cl::desc("directory for the <result>.npy files"),
                                   cl::value_desc("dir"));
static cl::opt<bool> laneParallel(
    "lane-parallel",
    cl::desc("compile the GPU (lane-parallel) form of the per-token code for the host"));
static cl::opt<bool> list("list", cl::desc("print every router's inputs, outputs and knobs "
                                           "as JSON and exit"));

/// The most tokens (rows of the dynamic dimension) one call takes, and the most bytes
/// one result buffer may need (sizes are computed in checked 64-bit arithmetic first).
static constexpr int64_t kMaxTokens = INT32_MAX;
static constexpr int64_t kMaxResultBytes = int64_t(1) << 34;

static int fail(const std::string &message) {
  llvm::errs() << "moe-run: error: " << message << "\n";
  return 1;
}

namespace {
/// What values an input may hold, beyond its dtype and shape: derived from how the
/// entry uses it (before lowering), checked when it is bound.
struct InputRule {
  bool phase = false;      // a moe.when phase: 0 prefill, 1 decode, 2 mixed
  int64_t idExperts = -1;  // expert ids (topk ids): -1 (no expert) or [0, E)
  bool finite = false;     // rule statistics: no NaN, no +-inf
};

/// Host buffers for one call of a compiled router.
struct Call {
  int64_t tokens = -1;
  std::string tokensFrom;
  std::vector<std::vector<uint8_t>> storage; // one per ABI parameter
  std::vector<void *> buffers;
  std::vector<int64_t> scalars;
};
} // namespace

/// The rules for each argument of `entry` (the only policy function left in `module`).
static std::map<std::string, InputRule> inputRules(mlir::ModuleOp module) {
  std::map<std::string, InputRule> rules;
  for (moe::PolicyFunction f : moe::getPolicyFunctions(module)) {
    mlir::Block &body = f.getBodyBlock();
    for (auto [name, arg] : llvm::zip(f.getArgNames(), body.getArguments())) {
      InputRule &rule = rules[mlir::cast<mlir::StringAttr>(name).getValue().str()];
      rule.finite = !f.isRouter();
      for (mlir::OpOperand &use : arg.getUses()) {
        mlir::Operation *user = use.getOwner();
        if (auto when = mlir::dyn_cast<moe::WhenOp>(user); when && when.getPhase() == arg)
          rule.phase = true;
        mlir::Value ids;
        if (auto op = mlir::dyn_cast<moe::ExpertCountsOp>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::AlignBlocksOp>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::RemapPhysicalOp>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::BinScoreOp>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::ConfidentTop1Op>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::GpuRequestsOp>(user))
          ids = op.getIds();
        else if (auto op = mlir::dyn_cast<moe::ResidentFirstOp>(user))
          ids = op.getIds();
        if (ids == arg)
          rule.idExperts = f.getExperts();
      }
    }
  }
  return rules;
}

/// Checks values against an input's rule; `what` names the argument.
static bool checkInts(const std::vector<int32_t> &v, const InputRule &rule,
                      const std::string &what, std::string &error) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (rule.phase && (v[i] < 0 || v[i] > 2)) {
      error = what + ": phase " + std::to_string(v[i]) +
              " is not one of 0 (prefill), 1 (decode), 2 (mixed)";
      return false;
    }
    if (rule.idExperts >= 0 && (v[i] < -1 || v[i] >= rule.idExperts)) {
      error = what + ": expert id " + std::to_string(v[i]) + " at flat index " +
              std::to_string(i) + " is outside [-1, " + std::to_string(rule.idExperts) +
              ") (-1: no expert)";
      return false;
    }
  }
  return true;
}

/// Records the token count an input implies, or reports a disagreement.
static bool noteTokens(Call &call, int64_t tokens, const std::string &what,
                       std::string &error) {
  // Token indices are i32 in the compiled code (sorted_token_ids, orders).
  if (tokens > kMaxTokens) {
    error = what + ": " + std::to_string(tokens) + " tokens (rows) is more than the " +
            std::to_string(kMaxTokens) + " a call supports";
    return false;
  }
  if (call.tokens < 0) {
    call.tokens = tokens;
    call.tokensFrom = what;
    return true;
  }
  if (call.tokens == tokens)
    return true;
  error = what + ": has " + std::to_string(tokens) + " tokens but " + call.tokensFrom +
          " has " + std::to_string(call.tokens);
  return false;
}

/// Checks a loaded array's shape against the ABI shape (dim 0 may be the tokens).
static bool checkShape(const npy::Array &a, const host::AbiParam &p, const std::string &what,
                       Call &call, std::string &error) {
  auto expected = [&] {
    std::string s = std::string(p.dtype == "int8" ? "bool" : p.dtype) + " [";
    for (size_t i = 0; i < p.shape.size(); ++i)
      s += (i ? ", " : "") + (p.shape[i] < 0 ? std::string("?") : std::to_string(p.shape[i]));
    return s + "]";
  };
  bool ok = a.shape.size() == p.shape.size();
  for (size_t i = 0; ok && i < p.shape.size(); ++i)
    ok = p.shape[i] < 0 || a.shape[i] == p.shape[i];
  if (!ok) {
    error = what + ": expected " + expected() + ", got shape " + npy::formatShape(a.shape);
    return false;
  }
  if (!p.shape.empty() && p.shape[0] < 0)
    return noteTokens(call, a.shape[0], what, error);
  return true;
}

static bool parseInteger(llvm::StringRef text, int64_t &value) {
  return !text.trim().getAsInteger(10, value);
}

/// Loads a scalar input: an integer literal, or a .npy file holding one integer.
static bool bindScalar(const host::AbiParam &p, const std::string &source, Call &call,
                       size_t index, const InputRule &rule, std::string &error) {
  int64_t v;
  bool isInt32 = p.dtype == "int32";
  auto inRange = [&](int64_t x) {
    return !isInt32 || (x >= INT32_MIN && x <= INT32_MAX);
  };
  if (!llvm::sys::fs::exists(source)) {
    if (!parseInteger(source, v)) {
      error = "argument '" + p.name + "': expected an integer (" + p.dtype +
              ") or a .npy file holding one, got '" + source + "'";
      return false;
    }
    if (!inRange(v)) {
      error = "argument '" + p.name + "': " + source + " does not fit in " + p.dtype;
      return false;
    }
    if (!checkInts({static_cast<int32_t>(v)}, rule, "argument '" + p.name + "'", error))
      return false;
    call.scalars[index] = v;
    return true;
  }
  std::string what = "argument '" + p.name + "' (" + source + ")";
  npy::Array a;
  std::vector<int32_t> ints;
  if (!npy::load(source, what, a, error) || !npy::toInt32(a, what, ints, error))
    return false;
  if (ints.size() != 1) {
    error = what + ": expected one integer, got shape " + npy::formatShape(a.shape);
    return false;
  }
  if (!checkInts(ints, rule, what, error))
    return false;
  call.scalars[index] = ints[0];
  return true;
}

/// A placement file: int32 log2phy [E, R'] padded with -1 (vLLM's
/// logical_to_physical_map), or [E] with one slot per expert.
static bool bindPlacement(const std::vector<host::AbiParam> &abi, size_t index,
                          const std::string &source, Call &call, std::string &error) {
  const host::AbiParam &replicas = abi[index], &table = abi[index + 1];
  std::string name = replicas.name.substr(0, replicas.name.find('.'));
  std::string what = "argument '" + name + "' (" + source + ")";
  npy::Array a;
  std::vector<int32_t> ints;
  if (!npy::load(source, what, a, error) || !npy::toInt32(a, what, ints, error))
    return false;
  int64_t experts = table.shape[0], maxReplicas = table.shape[1];
  int64_t cols = a.shape.size() == 2 ? a.shape[1] : 1;
  if ((a.shape.size() != 1 && a.shape.size() != 2) || a.shape[0] != experts ||
      cols > maxReplicas || cols < 1) {
    error = what + ": expected an int32 log2phy table [" + std::to_string(experts) +
            ", <=" + std::to_string(maxReplicas) + "] (or [" + std::to_string(experts) +
            "]), got shape " + npy::formatShape(a.shape);
    return false;
  }
  int64_t slots = experts + maxReplicas - 1;
  std::vector<int32_t> count(experts, 0), phys(experts * maxReplicas, -1);
  std::vector<int64_t> owner(slots, -1);
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r = 0; r < cols; ++r) {
      int32_t slot = ints[e * cols + r];
      if (slot < 0)
        break;
      if (slot >= slots) {
        error = what + ": expert " + std::to_string(e) + " replica " + std::to_string(r) +
                " is slot " + std::to_string(slot) + ", outside [0, " +
                std::to_string(slots) + ")";
        return false;
      }
      if (owner[slot] >= 0) {
        error = what + ": slot " + std::to_string(slot) + " holds both expert " +
                std::to_string(owner[slot]) + " and expert " + std::to_string(e);
        return false;
      }
      owner[slot] = e;
      phys[e * maxReplicas + r] = slot;
      ++count[e];
    }
    for (int64_t r = count[e]; r < cols; ++r)
      if (ints[e * cols + r] >= 0) {
        error = what + ": expert " + std::to_string(e) +
                " has a replica after a -1; replicas must come first";
        return false;
      }
    if (count[e] == 0) {
      error = what + ": expert " + std::to_string(e) + " has no replica";
      return false;
    }
  }
  auto put = [&](size_t i, const std::vector<int32_t> &v) {
    call.storage[i].resize(v.size() * 4);
    std::memcpy(call.storage[i].data(), v.data(), v.size() * 4);
  };
  put(index, count);
  put(index + 1, phys);
  return true;
}

/// A rule's statistics (loads, hotness) must be finite numbers: a NaN or an infinity
/// would silently decide a plan (sums become inf or NaN). (Routers take NaN and
/// infinite logits: NaN ranks below every number, -inf masks an expert.)
static bool rejectNonFinite(const std::vector<float> &v, const std::string &what,
                            std::string &error) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      error = what + ": holds " +
              (std::isnan(v[i]) ? std::string("NaN") : v[i] > 0 ? "+inf" : "-inf") +
              " at flat index " + std::to_string(i) + "; a rule's inputs must be finite";
      return false;
    }
  return true;
}

static bool bindBuffer(const host::AbiParam &p, const std::string &source, Call &call,
                       size_t index, const InputRule &rule, std::string &error) {
  std::string what = "argument '" + p.name + "' (" + source + ")";
  npy::Array a;
  if (!npy::load(source, what, a, error) || !checkShape(a, p, what, call, error))
    return false;
  std::vector<uint8_t> &bytes = call.storage[index];
  if (p.kind == "set") {
    std::vector<uint8_t> flags;
    if (!npy::toBool(a, what, flags, error))
      return false;
    bytes = std::move(flags);
  } else if (p.dtype == "float32") {
    std::vector<float> v;
    if (!npy::toFloat32(a, what, v, error) ||
        (rule.finite && !rejectNonFinite(v, what, error)))
      return false;
    bytes.resize(v.size() * 4);
    if (!v.empty()) // memcpy's pointers must not be null, even for 0 bytes
      std::memcpy(bytes.data(), v.data(), bytes.size());
  } else if (p.dtype == "int32") {
    std::vector<int32_t> v;
    if (!npy::toInt32(a, what, v, error) || !checkInts(v, rule, what, error))
      return false;
    bytes.resize(v.size() * 4);
    if (!v.empty())
      std::memcpy(bytes.data(), v.data(), bytes.size());
  } else {
    error = what + ": inputs of type " + p.dtype + " are not supported";
    return false;
  }
  return true;
}

/// The size in bytes of result `p` for `tokens` tokens, in checked 64-bit arithmetic;
/// nothing when it overflows or a dimension exceeds INT32_MAX (compiled code indexes
/// tokens and padded rows with i32 values).
static std::optional<int64_t> resultBytes(const host::AbiParam &p, int64_t tokens) {
  int64_t bytes = p.elementBytes();
  for (int64_t d : p.shape) {
    if (d < 0) {
      auto [a, b, divisor] = p.sizeRule;
      std::optional<int64_t> n = llvm::checkedMul(a, tokens);
      if (n)
        n = llvm::checkedAdd(*n, b);
      if (n)
        n = llvm::checkedAdd(*n, divisor - 1);
      if (!n || divisor < 1 || *n / divisor > INT32_MAX)
        return std::nullopt;
      d = *n / divisor;
    }
    std::optional<int64_t> next = llvm::checkedMul(bytes, d);
    if (!next)
      return std::nullopt;
    bytes = *next;
  }
  return bytes;
}

static bool writeOutput(const host::AbiParam &p, const std::vector<uint8_t> &bytes,
                        int64_t tokens, std::string &error) {
  std::vector<int64_t> shape = p.shapeFor(tokens);
  npy::Array a;
  if (p.kind == "set")
    a = npy::makeBool(shape, bytes.data());
  else if (p.dtype == "float32")
    a = npy::makeF32(shape, reinterpret_cast<const float *>(bytes.data()));
  else
    a = npy::makeI32(shape, reinterpret_cast<const int32_t *>(bytes.data()));
  llvm::SmallString<256> path(outDir);
  llvm::sys::path::append(path, p.name + ".npy");
  return npy::save(path.str().str(), a, error);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Switchyard: compile a policy for the host and "
                                          "run it on .npy inputs\n");
  std::unique_ptr<mlir::MLIRContext> context = host::makeToolContext();
  std::unique_ptr<host::PolicyFile> policy = host::loadPolicy(*context, inputFile);
  if (!policy)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> &module = policy->module;
  if (list) {
    llvm::outs() << host::routersToJson(host::describeRouters(*module)) << "\n";
    return 0;
  }
  if (outDir.empty())
    return fail("--out DIR is required (where the results are written)");

  std::string error;
  if (!host::selectRouter(*module, entry, error))
    return fail(error);
  host::RouterInfo info = host::describeRouters(*module).front();
  if (!host::applyKnobs(*module, std::vector<std::string>(knobs.begin(), knobs.end())))
    return 1;

  // Arguments by name.
  std::map<std::string, std::string> sources;
  for (const std::string &a : args) {
    auto [name, path] = llvm::StringRef(a).split('=');
    if (path.empty() || !llvm::StringRef(a).contains('='))
      return fail("--arg '" + a + "' is not of the form name=path.npy");
    bool known = llvm::any_of(info.inputs, [&](const host::Port &p) { return p.name == name; });
    if (!known) {
      std::string names;
      for (const host::Port &p : info.inputs)
        names += (names.empty() ? "" : ", ") + p.name;
      return fail("unknown argument '" + name.str() + "' for @" + info.name +
                  " (its arguments: " + names + ")");
    }
    if (!sources.emplace(name.str(), path.str()).second)
      return fail("argument '" + name.str() + "' is given twice");
  }
  for (const host::Port &p : info.inputs)
    if (!sources.count(p.name))
      return fail("missing required argument '" + p.name + "' (" + p.dtype + " " +
                  p.shapeText + "): pass --arg " + p.name + "=path.npy");

  std::map<std::string, InputRule> rules = inputRules(*module);
  if (failed(host::lowerToLLVM(*module, laneParallel)))
    return 1;
  std::vector<host::AbiParam> abi = host::readAbi(*module, info.name);

  Call call;
  call.storage.resize(abi.size());
  call.scalars.resize(abi.size());
  for (size_t i = 0; i < abi.size(); ++i) {
    const host::AbiParam &p = abi[i];
    if (p.isOutput)
      continue;
    if (p.kind == "placement_replicas") {
      if (!bindPlacement(abi, i, sources[p.name.substr(0, p.name.find('.'))], call, error))
        return fail(error);
      ++i;
      continue;
    }
    const InputRule &rule = rules[p.name];
    bool ok = p.kind == "scalar" ? bindScalar(p, sources[p.name], call, i, rule, error)
                                 : bindBuffer(p, sources[p.name], call, i, rule, error);
    if (!ok)
      return fail(error);
  }
  if (call.tokens < 0)
    call.tokens = 0;
  for (size_t i = 0; i < abi.size(); ++i)
    if (abi[i].isOutput) {
      std::optional<int64_t> bytes = resultBytes(abi[i], call.tokens);
      if (!bytes || *bytes > kMaxResultBytes)
        return fail("result '" + abi[i].name + "' for " + std::to_string(call.tokens) +
                    " tokens would need more than " + std::to_string(kMaxResultBytes) +
                    " bytes");
      call.storage[i].assign(*bytes, 0);
    }
  call.buffers.resize(abi.size());
  for (size_t i = 0; i < abi.size(); ++i)
    call.buffers[i] = call.storage[i].data();

  auto engine = host::jitCompile(*module);
  if (!engine)
    return fail("JIT compilation failed: " + llvm::toString(engine.takeError()));
  if (!host::invokeEntry(**engine, info.name, call.tokens, abi, call.buffers, call.scalars,
                         error))
    return fail(error);

  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    return fail("cannot create '" + outDir + "': " + ec.message());
  for (size_t i = 0; i < abi.size(); ++i)
    if (abi[i].isOutput && !writeOutput(abi[i], call.storage[i], call.tokens, error))
      return fail(error);
  llvm::outs() << "moe-run: @" << info.name;
  if (info.kind == "router")
    llvm::outs() << " on " << call.tokens << " tokens";
  else
    llvm::outs() << " (" << info.kind << " rule)";
  llvm::outs() << " -> " << outDir << "/{";
  bool first = true;
  for (const host::AbiParam &p : abi)
    if (p.isOutput) {
      llvm::outs() << (first ? "" : ",") << p.name;
      first = false;
    }
  llvm::outs() << "}.npy\n";
  return 0;
}
