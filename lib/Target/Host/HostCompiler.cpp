//===- Compiler.cpp - host code from a lowered policy ---------------------===//
#include "switchyard/Target/Host/HostCompiler.h"
#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Runtime/Binding.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

using namespace mlir;

namespace switchyard::host {

static void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

llvm::Expected<std::unique_ptr<ExecutionEngine>> jitCompile(ModuleOp lowered) {
  initNativeTarget();
  auto transformer = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  // Threaded host loops call the OpenMP runtime.
  SmallVector<StringRef, 1> libraries;
  if (!moe::openMPLibrary().empty())
    libraries.push_back(moe::openMPLibrary());
  options.sharedLibPaths = libraries;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(lowered, options);
  if (engine)
    (*engine)->initialize();
  return engine;
}

static std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  initNativeTarget();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(
      target->createTargetMachine(triple, "x86-64-v2", "", options, llvm::Reloc::PIC_,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
}

/// Adds `void NAME_packed(void **args)` calling entry `name`: MLIR's packed calling
/// convention (args[i] points at argument i, the last one at the result), which the
/// ExecutionEngine builds for moe-run's JIT. A shared library exports it so that the
/// runtime calls every entry the same way, whatever its parameter list.
static bool addPackedEntry(llvm::Module &module, StringRef name, std::string &error) {
  llvm::Function *entry = module.getFunction(name);
  if (!entry || entry->isDeclaration()) {
    error = "the lowered module has no entry '" + name.str() + "'";
    return false;
  }
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *ptr = llvm::PointerType::getUnqual(context);
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr}, false);
  auto *packed = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage,
                                        name + "_packed", module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "entry", packed));
  llvm::Value *args = packed->getArg(0);
  SmallVector<llvm::Value *> values;
  for (llvm::Argument &arg : entry->args()) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, args, arg.getArgNo());
    values.push_back(b.CreateLoad(arg.getType(), b.CreateLoad(ptr, slot)));
  }
  llvm::Value *result = b.CreateCall(entry, values);
  if (!entry->getReturnType()->isVoidTy()) {
    llvm::Value *slot = b.CreateConstGEP1_64(ptr, args, entry->arg_size());
    b.CreateStore(result, b.CreateLoad(ptr, slot));
  }
  b.CreateRetVoid();
  return true;
}

bool emitObjectFile(ModuleOp lowered, StringRef path, std::string &error,
                    StringRef packedEntry) {
  std::unique_ptr<llvm::TargetMachine> tm = hostTargetMachine(error);
  if (!tm)
    return false;
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = translateModuleToLLVMIR(lowered, context);
  if (!module) {
    error = "translation to LLVM IR failed";
    return false;
  }
  if (!packedEntry.empty() && !addPackedEntry(*module, packedEntry, error))
    return false;
  module->setDataLayout(tm->createDataLayout());
  module->setTargetTriple(tm->getTargetTriple());
  if (llvm::Error err = makeOptimizingTransformer(3, 0, tm.get())(module.get())) {
    error = llvm::toString(std::move(err));
    return false;
  }
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return false;
  }
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, out.os(), nullptr, llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return false;
  }
  pm.run(*module);
  out.keep();
  return true;
}

bool linkSharedLibrary(StringRef object, StringRef library, std::string &error) {
  auto cc = llvm::sys::findProgramByName("cc");
  if (!cc) {
    error = "no C compiler driver 'cc' on PATH to link the shared library";
    return false;
  }
  SmallVector<StringRef> args{*cc, "-shared", "-o", library, object, "-lm"};
  // Threaded host loops call the OpenMP runtime: link it, and find it where it was.
  std::string rpath;
  if (StringRef omp = moe::openMPLibrary(); !omp.empty()) {
    rpath = "-Wl,-rpath," + llvm::sys::path::parent_path(omp).str();
    args.append({omp, rpath});
  }
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0, &message);
  if (rc != 0) {
    error = "linking '" + library.str() + "' failed (" +
            (message.empty() ? "exit code " + std::to_string(rc) : message) + ")";
    return false;
  }
  return true;
}

std::string cParamType(const AbiParam &p) {
  std::string base = p.dtype == runtime::DType::F32   ? "float"
                     : p.dtype == runtime::DType::I32 ? "int32_t"
                     : p.dtype == runtime::DType::I64 ? "int64_t"
                     // bfloat16 / float16: the raw 16-bit values (uint16_t bits).
                     : p.isNarrowFloat() ? "uint16_t"
                                         : "uint8_t";
  if (p.kind == runtime::ParamKind::Scalar)
    return base;
  return (p.isOutput ? "" : "const ") + base + " *";
}

std::string knobDefaultText(const runtime::Knob &k) {
  if (k.isFloat()) {
    std::string v = runtime::ScalarRange::number(k.floatDefault);
    return v + (v.find_first_of(".en") == std::string::npos ? ".0f" : "f");
  }
  return k.intDefault == INT64_MIN ? "INT64_MIN" : std::to_string(k.intDefault) + "LL";
}

std::string knobCheckText(const runtime::Knob &k, const std::string &v) {
  std::string bad;
  auto add = [&](const std::string &c) { bad += (bad.empty() ? "" : " || ") + c; };
  for (const runtime::KnobRule &rule : k.rules) {
    const runtime::ScalarRange &r = rule.range;
    if (!r.relation.empty()) // checked by the compiled code, where every value is known
      continue;
    if (!r.isFloat) {
      if (r.lo != INT64_MIN)
        add(v + " < " + std::to_string(r.lo) + "LL");
      if (r.hi)
        add(v + " > " + std::to_string(*r.hi) + "LL");
      continue;
    }
    // Comparisons that fail on NaN: NaN breaks every range, as the verifier says.
    if (r.finite)
      add("!(" + v + " - " + v + " == 0)");
    if (r.notNaN)
      add(v + " != " + v);
    if (r.nonzero)
      add(v + " == 0");
    if (r.min)
      add("!(" + v + (r.minOpen ? " > " : " >= ") + runtime::ScalarRange::number(*r.min) +
          ")");
    if (r.max)
      add("!(" + v + (r.maxOpen ? " < " : " <= ") + runtime::ScalarRange::number(*r.max) +
          ")");
  }
  return bad.empty() ? "0" : bad;
}

void emitKnobStruct(llvm::raw_ostream &os, const std::string &n,
                    const std::vector<runtime::Knob> &knobs) {
  if (knobs.empty())
    return;
  std::string guard = "SWITCHYARD_" + llvm::StringRef(n).upper() + "_KNOBS";
  os << "#ifndef " << guard << "\n#define " << guard << "\n"
     << "/* The knobs, tunable per call: pass a struct (NULL: the defaults below). Each\n"
     << "   value is checked against the rules of the ops that use it. */\n"
     << "struct " << n << "_knobs {\n";
  for (const runtime::Knob &k : knobs) {
    os << "  " << (k.isFloat() ? "float" : "int64_t") << " " << k.name << "; /*";
    for (const runtime::KnobRule &r : k.rules) {
      // A rule names the knob; where the op calls the parameter otherwise, its place
      // says so ("min_size of moe.fill at ...": RouterLowering's knobRuleAttr).
      os << " " << r.text;
      if (llvm::StringRef(r.op).contains(" of "))
        os << " (" << r.op << ")";
      os << ";";
    }
    os << " default "
       << (k.isFloat() ? runtime::ScalarRange::number(k.floatDefault)
                       : std::to_string(k.intDefault))
       << " */\n";
  }
  os << "};\n\nstatic inline struct " << n << "_knobs " << n << "_knobs_default(void) {\n"
     << "  struct " << n << "_knobs k;\n";
  for (const runtime::Knob &k : knobs)
    os << "  k." << k.name << " = " << knobDefaultText(k) << ";\n";
  os << "  return k;\n}\n#endif\n\n";
}

/// `struct NAME_knobs`, its defaults and the entry's status messages.
static void emitKnobDeclarations(llvm::raw_ostream &os, const RouterInfo &info,
                                 const std::vector<runtime::Knob> &knobs) {
  const std::string &n = info.name;
  emitKnobStruct(os, n, knobs);
  os << "/* What a non-zero status of " << n << "() means. */\n"
     << "static inline const char *" << n << "_status_message(int32_t status) {\n"
     << "  switch (status) {\n  case 0: return \"ok\";\n"
     << "  case 1: return \"num_tokens must be in [0, " << INT32_MAX << "]\";\n";
  runtime::Signature sig;
  sig.knobs = knobs;
  for (size_t j = 0; j < knobs.size(); ++j) {
    std::string text = runtime::statusMessage(sig, static_cast<int32_t>(2 + j));
    std::string escaped;
    for (char c : text)
      escaped += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    os << "  case " << 2 + j << ": return \"" << escaped << "\";\n";
  }
  os << "  default: return \"unknown status\";\n  }\n}\n\n";
}

std::string emitHeader(const RouterInfo &info, const std::vector<AbiParam> &abi,
                       const std::vector<runtime::Knob> &knobs) {
  std::string guard = "SWITCHYARD_POLICY_" + llvm::StringRef(info.name).upper() + "_H";
  std::string h;
  llvm::raw_string_ostream os(h);
  bool router = info.kind == runtime::EntryKind::Router;
  os << "// Generated by moe-compile from "
     << (router ? std::string("router")
                : runtime::spelling(info.kind) + std::string(" rule"))
     << " @" << info.name << ". Do not edit.\n"
     << "//\n";
  if (router)
    os << "// " << info.experts << " routed experts, top_k = " << info.topK;
  else
    os << "// A host scheduling rule over " << info.experts
       << " experts; T (num_tokens) is the size of its `?` dimension (0 when none)";
  if (info.sharedExperts)
    os << ", " << info.sharedExperts << " shared expert(s) (always active, not routed)";
  if (knobs.empty()) {
    os << ".\n// Knobs compiled in:";
    if (info.knobs.empty())
      os << " none";
    for (auto [i, k] : llvm::enumerate(info.knobs))
      os << (i ? ", " : " ") << k.name << " = " << k.value;
  } else {
    os << ".\n// Knobs at run time: struct " << info.name << "_knobs (defaults:";
    for (auto [i, k] : llvm::enumerate(info.knobs))
      os << (i ? ", " : " ") << k.name << " = " << k.value;
    os << ")";
  }
  os << "\n//\n// Buffers are C-order; T is num_tokens. Sets are one byte per expert "
        "(0/1).\n"
     << "// A placement is passed as replica_count[E] and log2phy[E][R] (-1 padded).\n"
     << "// Returns 0, or a status (" << info.name
     << "_status_message) when num_tokens or a\n"
     << "// knob is out of range. Thread-safe; allocates only temporaries.\n"
     << "#ifndef " << guard << "\n#define " << guard << "\n\n#include <stdint.h>\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  emitKnobDeclarations(os, info, knobs);
  os << "int32_t " << info.name << "(\n    int64_t num_tokens";
  for (const AbiParam &p : abi) {
    std::string cname = p.name;
    std::replace(cname.begin(), cname.end(), '.', '_');
    os << ",\n    " << cParamType(p) << (cParamType(p).back() == '*' ? "" : " ") << cname
       << " /* " << (p.isOutput ? "out " : "in ")
       << (p.isSet() ? "bool" : npy::dtypeName(p.dtype)) << " " << shapeText(p) << " */";
  }
  if (!knobs.empty())
    os << ",\n    const struct " << info.name << "_knobs *knobs /* NULL: the defaults */";
  os << ");\n\n";
  for (const AbiParam &p : abi)
    if (p.shape.size() && p.shape[0] < 0 && p.sizeRule != std::array<int64_t, 3>{1, 0, 1}) {
      std::string cname = p.name;
      std::replace(cname.begin(), cname.end(), '.', '_');
      os << "/* Entries of " << cname
         << " for num_tokens tokens. */\nstatic inline int64_t " << info.name << "_"
         << cname << "_size(int64_t num_tokens) {\n  return (num_tokens * " << p.sizeRule[0]
         << " + " << p.sizeRule[1] + p.sizeRule[2] - 1 << ") / " << p.sizeRule[2]
         << ";\n}\n\n";
    }
  os << "#ifdef __cplusplus\n}\n#endif\n\n#endif // " << guard << "\n";
  return h;
}

std::string shapeText(const AbiParam &p) {
  std::string s = "[";
  for (size_t i = 0; i < p.shape.size(); ++i) {
    if (i)
      s += ", ";
    if (p.shape[i] >= 0)
      s += std::to_string(p.shape[i]);
    else if (p.sizeRule == std::array<int64_t, 3>{1, 0, 1})
      s += "T";
    else
      s += "size(T)";
  }
  return s + "]";
}

bool invokeEntry(ExecutionEngine &engine, StringRef name, int64_t tokens,
                 const std::vector<AbiParam> &abi, std::vector<void *> &buffers,
                 const std::vector<int64_t> &scalars, std::string &error,
                 const runtime::Signature *signature, void *knobs) {
  runtime::Signature described{name.str(), runtime::EntryKind::Router, abi};
  if (signature)
    described.knobs = signature->knobs;
  runtime::PackedArguments call(described, tokens, buffers, scalars, knobs);
  if (llvm::Error err = engine.invokePacked(name, call.arguments())) {
    error = llvm::toString(std::move(err));
    return false;
  }
  if (call.status() != 0) {
    error = "the compiled entry returned status " + std::to_string(call.status()) +
            (signature ? ": " + runtime::statusMessage(*signature, call.status()) : "");
    return false;
  }
  return true;
}

} // namespace switchyard::host
