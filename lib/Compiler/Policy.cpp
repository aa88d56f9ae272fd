//===- Policy.cpp - load, describe and lower policy files -----------------===//
#include "switchyard/Compiler/Policy.h"
#include "llvm/ADT/StringSet.h"

#include "switchyard/Compiler/Pipelines.h"
#include "switchyard/Conversion/MoeToLoops/MoeToLoops.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"
#include "switchyard/Dialect/Moe/IR/MoeStages.h"

#include "switchyard/InitAllDialects.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace switchyard::compiler {

void registerDialects(DialectRegistry &registry) { registerAllDialects(registry); }

std::unique_ptr<MLIRContext> makeToolContext() {
  DialectRegistry registry;
  registerDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  context->printOpOnDiagnostic(false);
  return context;
}

bool bindShape(ModuleOp module, const moe::ShapeRequest &request) {
  if (request.empty() && !moe::hasUnboundParameters(module))
    return true;
  return succeeded(moe::specializePolicies(module, request)) && succeeded(verify(module));
}

bool applyKnobs(ModuleOp module, ArrayRef<std::string> overrides) {
  if (overrides.empty())
    return true;
  return succeeded(moe::setKnobs(module, overrides)) && succeeded(verify(module));
}

bool bindShapeWithKnobs(ModuleOp module, const moe::ShapeRequest &request,
                        ArrayRef<std::string> overrides) {
  if (!overrides.empty() && failed(moe::setKnobs(module, overrides)))
    return false;
  if (!request.empty() || moe::hasUnboundParameters(module))
    return succeeded(moe::specializePolicies(module, request)) && succeeded(verify(module));
  return overrides.empty() || succeeded(verify(module));
}

bool checkPolicyText(llvm::SourceMgr &mgr, unsigned bufferId) {
  const llvm::MemoryBuffer *buffer = mgr.getMemoryBuffer(bufferId);
  StringRef text = buffer->getBuffer();
  auto error = [&](const char *at, const Twine &message) {
    auto [line, column] = mgr.getLineAndColumn(SMLoc::getFromPointer(at), bufferId);
    llvm::errs() << buffer->getBufferIdentifier() << ":" << line << ":" << column
                 << ": error: " << message << "\n";
    return false;
  };
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  const auto *end = reinterpret_cast<const llvm::UTF8 *>(text.end());
  for (const llvm::UTF8 *p = begin; p != end;) {
    unsigned char c = *p;
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c == 0x7f)
        return error(reinterpret_cast<const char *>(p),
                     "byte 0x" + llvm::utohexstr(c, /*LowerCase=*/true, /*Width=*/2) +
                         (c == 0 ? " (NUL)" : " (a control character)") +
                         ": a policy file must be UTF-8 text");
      ++p;
      continue;
    }
    unsigned length = llvm::getNumBytesForUTF8(c);
    if (length > static_cast<unsigned>(end - p) ||
        !llvm::isLegalUTF8Sequence(p, p + length))
      return error(reinterpret_cast<const char *>(p),
                   "invalid UTF-8 (byte 0x" + llvm::utohexstr(c, true, 2) +
                       "): a policy file must be UTF-8 text");
    p += length;
  }
  // Something besides whitespace and comments.
  for (StringRef rest = text; !rest.empty();) {
    rest = rest.ltrim();
    if (rest.starts_with("//")) {
      rest = rest.drop_until([](char c) { return c == '\n'; });
      continue;
    }
    if (!rest.empty())
      return true;
  }
  auto [line, column] = mgr.getLineAndColumn(SMLoc::getFromPointer(text.end()), bufferId);
  llvm::errs() << buffer->getBufferIdentifier() << ":" << line << ":" << column
               << ": error: the file holds no operations (an empty policy)\n";
  return false;
}

std::unique_ptr<PolicyFile> loadPolicy(MLIRContext &context, StringRef path) {
  auto policy = std::make_unique<PolicyFile>();
  std::string error;
  auto file = openInputFile(path, &error);
  if (!file) {
    llvm::errs() << "error: cannot open policy '" << path << "': " << error << "\n";
    return nullptr;
  }
  unsigned id = policy->sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  if (!checkPolicyText(policy->sourceMgr, id))
    return nullptr;
  policy->handler =
      std::make_unique<SourceMgrDiagnosticHandler>(policy->sourceMgr, &context);
  policy->module = parseSourceFile<ModuleOp>(policy->sourceMgr, &context);
  if (!policy->module || failed(verify(*policy->module)))
    return nullptr;
  return policy;
}

static std::string dtypeOf(Type type) {
  if (type.isF32())
    return "float32";
  if (type.isBF16())
    return "bfloat16";
  if (type.isF16())
    return "float16";
  if (type.isInteger(32))
    return "int32";
  if (type.isInteger(64))
    return "int64";
  if (type.isInteger(8))
    return "int8";
  if (type.isInteger(1))
    return "bool";
  std::string s;
  llvm::raw_string_ostream(s) << type;
  return s;
}

static std::string shapeText(ArrayRef<int64_t> shape, std::array<int64_t, 3> rule) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    if (d >= 0) {
      s += std::to_string(d);
      continue;
    }
    if (rule == std::array<int64_t, 3>{1, 0, 1}) {
      s += "?";
      continue;
    }
    std::string n = "T*" + std::to_string(rule[0]) + " + " + std::to_string(rule[1]);
    s += rule[2] == 1 ? n : "ceil((" + n + ") / " + std::to_string(rule[2]) + ")";
  }
  return s + "]";
}

static Port portFor(StringRef name, Type type, std::array<int64_t, 3> rule) {
  Port port{name.str(), "tensor", "", {}, "", rule};
  if (auto set = dyn_cast<moe::ExpertSetType>(type)) {
    port.kind = "set";
    port.dtype = "bool";
    port.shape = {set.getExperts()};
  } else if (auto placement = dyn_cast<moe::PlacementType>(type)) {
    port.kind = "placement";
    port.dtype = "int32";
    port.shape = {placement.getExperts(), placement.getMaxReplicas()};
    port.shapeText = "[" + std::to_string(placement.getExperts()) +
                     ", <=" + std::to_string(placement.getMaxReplicas()) +
                     "] log2phy, -1 padded";
    return port;
  } else if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    port.dtype = dtypeOf(tensor.getElementType());
    for (int64_t d : tensor.getShape())
      port.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  } else {
    port.kind = "scalar";
    port.dtype = dtypeOf(type);
  }
  port.shapeText = shapeText(port.shape, rule);
  return port;
}

std::vector<RouterInfo> describeRouters(ModuleOp module) {
  std::vector<RouterInfo> routers;
  for (moe::PolicyOpInterface router : moe::getPolicyOps(module)) {
    RouterInfo info;
    info.name = router.getSymName().str();
    info.kind =
        runtime::parseEntryKind(router.getKind()).value_or(runtime::EntryKind::Router);
    info.experts = router.getExperts();
    info.topK = router.getTopK();
    info.sharedExperts = router.getSharedExperts();
    for (auto [name, type] : llvm::zip(router.getArgNames(), router.getArgumentTypes()))
      info.inputs.push_back(portFor(cast<StringAttr>(name).getValue(), type, {1, 0, 1}));
    auto yield = cast<moe::YieldOp>(router.getBodyBlock().getTerminator());
    for (auto [name, type, value] :
         llvm::zip(router.getResultNames(), router.getResultTypes(), yield.getOperands()))
      info.outputs.push_back(
          portFor(cast<StringAttr>(name).getValue(), type, moe::getDynamicSizeRule(value)));
    router.getOperation()->walk([&](moe::KnobOp knob) {
      std::string value;
      llvm::raw_string_ostream os(value);
      if (auto i = dyn_cast<IntegerAttr>(knob.getValue()))
        os << i.getValue().getSExtValue();
      else
        os << cast<FloatAttr>(knob.getValue()).getValueAsDouble();
      info.knobs.push_back({knob.getName().str(), dtypeOf(knob.getType()), value});
    });
    routers.push_back(std::move(info));
  }
  return routers;
}

std::string routersToJson(const std::vector<RouterInfo> &routers) {
  llvm::json::Array entries;
  auto ports = [](const std::vector<Port> &list) {
    llvm::json::Array out;
    for (const Port &p : list) {
      llvm::json::Array shape;
      for (int64_t d : p.shape)
        shape.push_back(d < 0 ? llvm::json::Value("?") : llvm::json::Value(d));
      out.push_back(llvm::json::Object{
          {"name", p.name},
          {"kind", p.kind},
          {"dtype", p.dtype},
          {"shape", std::move(shape)},
          {"shape_text", p.shapeText},
          {"size_rule", llvm::json::Array{p.sizeRule[0], p.sizeRule[1], p.sizeRule[2]}}});
    }
    return out;
  };
  for (const RouterInfo &r : routers) {
    llvm::json::Array knobs;
    for (const KnobInfo &k : r.knobs) {
      llvm::json::Value value = k.value;
      if (k.type == "int64")
        value = std::stoll(k.value);
      else
        value = std::stod(k.value);
      knobs.push_back(
          llvm::json::Object{{"name", k.name}, {"type", k.type}, {"default", value}});
    }
    entries.push_back(llvm::json::Object{{"name", r.name},
                                         {"kind", runtime::spelling(r.kind)},
                                         {"experts", r.experts},
                                         {"top_k", r.topK},
                                         {"shared_experts", r.sharedExperts},
                                         {"arguments", ports(r.inputs)},
                                         {"results", ports(r.outputs)},
                                         {"knobs", std::move(knobs)}});
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv(
      "{0:2}", llvm::json::Value(llvm::json::Object{{"entries", std::move(entries)}}));
  return text;
}

/// The typed ABI of the lowered router `name` (null when there is none).
static moe::AbiAttr abiOf(ModuleOp lowered, StringRef name) {
  Operation *fn = lowered.lookupSymbol(name);
  return fn ? moe::getAbi(fn) : moe::AbiAttr();
}

/// The runtime's element type of a lowered entry's parameter.
static runtime::DType abiDtype(Type type) {
  if (auto memref = dyn_cast<MemRefType>(type))
    type = memref.getElementType();
  if (type.isBF16())
    return runtime::DType::BF16;
  if (type.isF16())
    return runtime::DType::F16;
  if (type.isInteger(32))
    return runtime::DType::I32;
  if (type.isInteger(64))
    return runtime::DType::I64;
  if (type.isInteger(8) || type.isInteger(1))
    return runtime::DType::I8;
  assert(type.isF32() && "moe.abi parameters are f32, bf16, f16, i64, i32 or i8");
  return runtime::DType::F32;
}

/// The runtime's kind of a lowered entry's parameter (moe::AbiKind past the IR).
static runtime::ParamKind abiKind(moe::AbiKind kind) {
  switch (kind) {
  case moe::AbiKind::set:
    return runtime::ParamKind::Set;
  case moe::AbiKind::scalar:
    return runtime::ParamKind::Scalar;
  case moe::AbiKind::placement_replicas:
    return runtime::ParamKind::PlacementReplicas;
  case moe::AbiKind::placement_log2phy:
    return runtime::ParamKind::PlacementLog2Phy;
  case moe::AbiKind::tensor:
  case moe::AbiKind::tokens:
    break;
  }
  return runtime::ParamKind::Tensor;
}

std::vector<runtime::Knob> readKnobs(ModuleOp lowered, StringRef name) {
  std::vector<runtime::Knob> knobs;
  moe::AbiAttr abi = abiOf(lowered, name);
  if (!abi)
    return knobs;
  auto flag = [](BoolAttr b) { return moe::KnobRuleAttr::flag(b); };
  for (moe::AbiParamAttr param : abi.getParams()) {
    if (!param.isKnob())
      continue;
    runtime::Knob k;
    k.name = param.getName().str();
    if (auto f = dyn_cast<FloatAttr>(param.getDefaultValue())) {
      k.dtype = runtime::DType::F32;
      k.floatDefault = f.getValueAsDouble();
    } else {
      k.dtype = runtime::DType::I64;
      k.intDefault = cast<IntegerAttr>(param.getDefaultValue()).getValue().getSExtValue();
    }
    for (moe::KnobRuleAttr r : param.getKnobRules()) {
      runtime::KnobRule rule;
      rule.text = r.getText().str();
      rule.op = r.getOp().str();
      rule.range.isFloat = flag(r.getIsFloat());
      rule.range.lo = r.getLo();
      rule.range.hi = r.getHi();
      rule.range.finite = flag(r.getFinite());
      rule.range.notNaN = flag(r.getNotNan());
      rule.range.nonzero = flag(r.getNonzero());
      if (FloatAttr min = r.getMin())
        rule.range.min = min.getValueAsDouble();
      if (FloatAttr max = r.getMax())
        rule.range.max = max.getValueAsDouble();
      rule.range.minOpen = flag(r.getMinOpen());
      rule.range.maxOpen = flag(r.getMaxOpen());
      k.rules.push_back(std::move(rule));
    }
    knobs.push_back(std::move(k));
  }
  return knobs;
}

std::vector<AbiParam> readAbi(ModuleOp lowered, StringRef name) {
  std::vector<AbiParam> params;
  moe::AbiAttr abi = abiOf(lowered, name);
  if (!abi)
    return params;
  for (moe::AbiParamAttr param : abi.getParams().drop_front()) {
    if (param.isKnob())
      continue; // passed in the knob struct (readKnobs)
    AbiParam p;
    p.name = param.getName().str();
    p.isOutput = param.isOutput();
    p.kind = abiKind(param.getKind());
    p.dtype = abiDtype(param.getType());
    if (auto memref = dyn_cast<MemRefType>(param.getType()))
      for (int64_t d : memref.getShape())
        p.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
    if (DenseI64ArrayAttr rule = param.getSize())
      p.sizeRule = {rule[0], rule[1], rule[2]};
    if (StringAttr values = param.getValues())
      p.values = runtime::parseValueSet(values.getValue()).value_or(runtime::ValueSet::Any);
    if (std::optional<int64_t> bound = param.getIdBound())
      p.idBound = *bound;
    params.push_back(std::move(p));
  }
  return params;
}

LogicalResult lowerToLLVM(ModuleOp module, bool laneParallel, bool freezeKnobs,
                          int64_t threadMinWork, llvm::ArrayRef<std::string> inputDtypes) {
  PassManager pm(module.getContext());
  moe::buildHostPipeline(pm, laneParallel, freezeKnobs, threadMinWork, inputDtypes);
  return pm.run(module);
}

bool checkInputDtypes(const RouterInfo &info, llvm::ArrayRef<std::string> requests,
                      std::vector<std::string> &out, std::string &error) {
  out.clear();
  llvm::StringSet<> seen;
  for (const std::string &request : requests) {
    auto [name, dtype] = StringRef(request).split('=');
    std::string flag = "--input-dtype " + request;
    std::optional<StringRef> canonical = moe::canonicalInputDtype(dtype);
    if (name.empty() || !StringRef(request).contains('=') || !canonical) {
      error = flag + ": expected NAME=bf16, NAME=f16 or NAME=f32 (NAME an input of @" +
              info.name + ")";
      return false;
    }
    const Port *port = nullptr;
    std::string names;
    for (const Port &p : info.inputs) {
      names += (names.empty() ? "" : ", ") + p.name;
      if (p.name == name)
        port = &p;
    }
    if (!port) {
      error = flag + ": @" + info.name + " has no input '" + name.str() +
              "' (its inputs: " + (names.empty() ? "none" : names) + ")";
      return false;
    }
    if (port->kind != "tensor" || port->dtype != "float32") {
      error = flag + ": input '" + name.str() + "' of @" + info.name + " is " + port->kind +
              " " + port->dtype + "; only float32 tensor inputs take bf16 / f16";
      return false;
    }
    if (!seen.insert(name).second) {
      error = flag + ": input '" + name.str() + "' is given twice";
      return false;
    }
    out.push_back(name.str() + "=" + canonical->str());
  }
  return true;
}

bool selectRouter(ModuleOp module, StringRef name, std::string &error) {
  SmallVector<moe::PolicyOpInterface> routers = moe::getPolicyOps(module);
  std::string known;
  for (moe::PolicyOpInterface r : routers)
    known += (known.empty() ? "" : ", ") + r.getSymName().str();
  if (name.empty()) {
    if (routers.size() == 1)
      return true;
    error = "the policy has " + std::to_string(routers.size()) +
            " entries (routers and rules); choose one with --entry (" + known + ")";
    return false;
  }
  bool found = false;
  for (moe::PolicyOpInterface r : routers) {
    if (r.getSymName() == name)
      found = true;
    else
      r.getOperation()->erase();
  }
  if (!found)
    error = "no router or rule @" + name.str() +
            " in the policy (entries: " + (known.empty() ? "none" : known) + ")";
  return found;
}

} // namespace switchyard::compiler
