//===- MoeContainerOps.cpp - router, yield, knob, when --------------------===//
#include "MoeVerifyUtils.h"
#include "switchyard/Dialect/Moe/ShapeParameters.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace switchyard::moe;
using namespace switchyard::moe::detail;

/// Runtime input/output names and knob names become C identifiers, .npy file names
/// and JSON keys, so they are restricted to [A-Za-z_][A-Za-z0-9_]*.
static bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

//===----------------------------------------------------------------------===//
// Policy containers (PolicyOpInterface): RouterOp, ResidencyOp, BalanceOp, PrefetchOp
//===----------------------------------------------------------------------===//

/// `@name(%arg: type, ...) -> (name: type, ...) attributes {...} { body }`.
ParseResult switchyard::moe::detail::parsePolicyOp(OpAsmParser &parser,
                                                   OperationState &result) {
  StringAttr symName;
  if (parser.parseSymbolName(symName, SymbolTable::getSymbolAttrName(), result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> args;
  if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true, /*allowAttrs=*/false))
    return failure();

  SmallVector<Attribute> resultNames;
  SmallVector<Type> resultTypes;
  if (parser.parseArrow() ||
      parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, [&]() {
        std::string name;
        Type type;
        if (parser.parseKeywordOrString(&name) || parser.parseColonType(type))
          return failure();
        resultNames.push_back(parser.getBuilder().getStringAttr(name));
        resultTypes.push_back(type);
        return success();
      }))
    return failure();

  SMLoc attrLoc = parser.getCurrentLocation();
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  // As the generated parsers do: an inherent attribute of the wrong kind (`experts =
  // 1.5`) is an error here; op creation would drop it silently (and a default-valued
  // one would then be read as null).
  if (failed(result.name.verifyInherentAttrs(result.attributes, [&]() {
        return parser.emitError(attrLoc) << "'" << result.name << "' op ";
      })))
    return failure();

  Builder &b = parser.getBuilder();
  SmallVector<Attribute> argNames;
  SmallVector<Type> argTypes;
  for (OpAsmParser::Argument &arg : args) {
    argNames.push_back(b.getStringAttr(arg.ssaName.name.drop_front()));
    argTypes.push_back(arg.type);
  }
  result.addAttribute("arg_names", b.getArrayAttr(argNames));
  result.addAttribute("result_names", b.getArrayAttr(resultNames));
  result.addAttribute("function_type",
                      TypeAttr::get(b.getFunctionType(argTypes, resultTypes)));

  Region *body = result.addRegion();
  return parser.parseRegion(*body, args);
}

void switchyard::moe::detail::printPolicyOp(PolicyOpInterface op, OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(op.getSymName());
  p << '(';
  Region &body = op->getRegion(0);
  llvm::interleaveComma(body.front().getArguments(), p,
                        [&](BlockArgument arg) { p.printRegionArgument(arg); });
  p << ") -> (";
  llvm::interleaveComma(
      llvm::zip(op.getResultNames(), op.getResultTypes()), p, [&](auto nameAndType) {
        p.printKeywordOrString(cast<StringAttr>(std::get<0>(nameAndType)).getValue());
        p << ": " << std::get<1>(nameAndType);
      });
  p << ')';
  SmallVector<StringRef> elided = {SymbolTable::getSymbolAttrName(),
                                   "function_type",
                                   "arg_names",
                                   "result_names",
                                   "arg_attrs",
                                   "res_attrs"};
  if (op.getSharedExperts() == 0)
    elided.push_back("shared_experts");
  p.printOptionalAttrDictWithKeyword(op->getAttrs(), elided);
  p << ' ';
  p.printRegion(body, /*printEntryBlockArgs=*/false);
}

void switchyard::moe::detail::nameBlockArguments(PolicyOpInterface op, Region &region,
                                                 OpAsmSetValueNameFn setNameFn) {
  ArrayAttr names = op.getArgNames();
  if (&region != &op->getRegion(0) || names.size() != region.getNumArguments())
    return;
  for (auto [arg, name] : llvm::zip(region.getArguments(), names))
    setNameFn(arg, cast<StringAttr>(name).getValue());
}

/// Checks a list of runtime names: identifiers, unique.
static LogicalResult verifyNames(Operation *op, ArrayAttr names, StringRef what) {
  llvm::StringSet<> seen;
  for (Attribute a : names) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (!isIdentifier(name))
      return op->emitOpError() << what << " name '" << name
                               << "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)";
    if (!seen.insert(name).second)
      return op->emitOpError() << "duplicate " << what << " name '" << name << "'";
  }
  return success();
}

/// The signature rules routers and rules share: names, one namespace, at least one
/// result, only dimension 0 dynamic.
static LogicalResult verifySignature(Operation *op, ArrayAttr argNames,
                                     ArrayAttr resultNames, ArrayRef<Type> argTypes,
                                     ArrayRef<Type> resultTypes, bool generic) {
  if (argNames.size() != argTypes.size())
    return op->emitOpError() << "has " << argTypes.size() << " arguments but "
                             << argNames.size() << " argument names";
  if (resultNames.size() != resultTypes.size())
    return op->emitOpError() << "has " << resultTypes.size() << " results but "
                             << resultNames.size() << " result names";
  if (failed(verifyNames(op, argNames, "argument")) ||
      failed(verifyNames(op, resultNames, "result")))
    return failure();
  // Inputs and outputs share one namespace: they become parameters of one C function
  // and keys of one JSON description.
  for (Attribute a : resultNames)
    if (llvm::is_contained(argNames, a))
      return op->emitOpError() << "result name '" << cast<StringAttr>(a).getValue()
                               << "' is also an argument name";
  if (resultTypes.empty())
    return op->emitOpError() << "must have at least one result";
  // The row count (tokens) is the only runtime size: it may appear as dimension 0 only
  // (a generic policy's `?` expert dimensions are bound before it is compiled).
  if (generic)
    return success();
  for (auto [i, type] : llvm::enumerate(argTypes))
    if (auto shaped = dyn_cast<ShapedType>(type))
      for (int64_t d = 1; d < shaped.getRank(); ++d)
        if (shaped.isDynamicDim(d))
          return op->emitOpError()
                 << "argument '" << cast<StringAttr>(argNames[i]).getValue()
                 << "' has a dynamic dimension " << d
                 << "; only dimension 0 (the tokens) may be dynamic";
  return success();
}

/// What the C entry point and the tools can pass: f32 / i32 tensors, expert sets,
/// placements (inputs only) and i32 / i64 scalars (inputs only). Checked after the body
/// (whose ops report wrong operand types more precisely).
static LogicalResult verifyAbiTypes(Operation *op) {
  auto f = cast<PolicyOpInterface>(op);
  ArrayAttr argNames = f.getArgNames(), resultNames = f.getResultNames();
  ArrayRef<Type> argTypes = f.getArgumentTypes(), resultTypes = f.getResultTypes();
  auto isDataTensor = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor &&
           (tensor.getElementType().isF32() || tensor.getElementType().isInteger(32));
  };
  for (auto [i, type] : llvm::enumerate(argTypes))
    if (!isDataTensor(type) && !isa<ExpertSetType, PlacementType>(type) &&
        !type.isInteger(32) && !type.isInteger(64))
      return op->emitOpError() << "argument '" << cast<StringAttr>(argNames[i]).getValue()
                               << "' has type " << type
                               << ", which compiled code cannot take (expected a ranked "
                                  "tensor of f32 or i32, an expert set, a placement, or "
                                  "an i32 / i64 scalar)";
  for (auto [i, type] : llvm::enumerate(resultTypes))
    if (!isDataTensor(type) && !isa<ExpertSetType>(type))
      return op->emitOpError() << "result '" << cast<StringAttr>(resultNames[i]).getValue()
                               << "' has type " << type
                               << ", which compiled code cannot return (expected a ranked "
                                  "tensor of f32 or i32, or an expert set)";
  return success();
}

LogicalResult switchyard::moe::detail::verifyPolicyOp(Operation *op) {
  auto policy = cast<PolicyOpInterface>(op);
  bool generic = ShapedType::isDynamic(policy.getExperts());
  if (!generic && policy.getExperts() < 1)
    return op->emitOpError() << "experts must be >= 1, got " << policy.getExperts();
  if (!generic && policy.getExperts() > kMaxExperts)
    return op->emitOpError() << "experts must be <= " << kMaxExperts << ", got "
                             << policy.getExperts();
  return verifySignature(op, policy.getArgNames(), policy.getResultNames(),
                         policy.getArgumentTypes(), policy.getResultTypes(), generic);
}

/// Expert sets and placements anywhere in a router or rule must be over its experts.
static LogicalResult verifyExpertTypes(Operation *container, Type type, int64_t experts,
                                       Location loc) {
  int64_t n;
  if (auto set = dyn_cast<ExpertSetType>(type))
    n = set.getExperts();
  else if (auto placement = dyn_cast<PlacementType>(type))
    n = placement.getExperts();
  else
    return success();
  if (n != experts)
    return emitError(loc) << type << " is over " << describeSize(n)
                          << " experts but the enclosing " << describeContainer(container)
                          << " has " << describeSize(experts)
                          << (ShapedType::isDynamic(experts)
                                  ? " (a generic policy writes every expert count as ?)"
                                  : "");
  return success();
}

/// Static sizes that fit the buffers compiled code allocates: at most
/// kMaxStaticElements elements in the static dimensions of any tensor.
static LogicalResult verifyStaticSize(Type type, Location loc) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped)
    return success();
  int64_t elements = 1;
  for (int64_t d : shaped.getShape()) {
    if (ShapedType::isDynamic(d))
      continue;
    if (d > kMaxStaticElements || (d && elements > kMaxStaticElements / d))
      return emitError(loc) << type
                            << " is too large: its static dimensions hold more "
                               "than "
                            << kMaxStaticElements << " elements";
    elements *= d;
  }
  return success();
}

/// Whether the host and GPU lowerings can compile `op` inside a router or rule body:
/// a moe op (but no nested router or rule), a scalar `arith.constant`, or (in a router)
/// scalar `arith` arithmetic on knobs, constants and `moe.num_tokens`. Anything else
/// would pass the verifier and fail in the middle of the pipeline.
static LogicalResult verifyLowerable(Operation *container, Operation *op) {
  if (op->getDialect() && isa<MoeDialect>(op->getDialect()))
    return success();
  auto scalar = [](Type t) { return t.isIntOrIndexOrFloat(); };
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    if (scalar(cst.getType()))
      return success();
    return op->emitOpError() << "of type " << cst.getType() << " cannot be compiled in a "
                             << describeContainer(container)
                             << ": only scalar constants (integers and floats) can";
  }
  if (isa<RouterOp>(container) && op->getDialect() &&
      isa<arith::ArithDialect>(op->getDialect())) {
    if (llvm::all_of(op->getOperandTypes(), scalar) &&
        llvm::all_of(op->getResultTypes(), scalar))
      return success();
    return op->emitOpError() << "cannot be compiled in a " << describeContainer(container)
                             << ": arith ops in a router compute on scalars only";
  }
  return op->emitOpError() << "cannot be compiled in a " << describeContainer(container)
                           << ": a policy body holds moe ops, moe.knob, scalar "
                              "arith.constant ops and (in a router) scalar arith ops only";
}

/// Types over the container's experts, static sizes in bounds, only ops the lowering
/// knows, unique knob names.
static LogicalResult verifyBody(Operation *container, StringRef symName, Block &block,
                                ArrayRef<Type> argTypes, int64_t experts) {
  if (block.getArgumentTypes() != argTypes)
    return container->emitOpError() << "entry block arguments do not match the signature";
  for (auto [i, type] : llvm::enumerate(argTypes))
    if (failed(
            verifyExpertTypes(container, type, experts, block.getArgument(i).getLoc())) ||
        failed(verifyStaticSize(type, block.getArgument(i).getLoc())))
      return failure();
  for (Type type :
       cast<FunctionType>(container->getAttrOfType<TypeAttr>("function_type").getValue())
           .getResults())
    if (failed(verifyStaticSize(type, container->getLoc())))
      return failure();

  if (failed(verifyAbiTypes(container)))
    return failure();

  llvm::StringSet<> knobs;
  WalkResult walk = block.walk([&](Operation *op) {
    if (failed(verifyLowerable(container, op)))
      return WalkResult::interrupt();
    for (Value v : op->getResults())
      if (failed(verifyExpertTypes(container, v.getType(), experts, op->getLoc())) ||
          failed(verifyStaticSize(v.getType(), op->getLoc())))
        return WalkResult::interrupt();
    if (auto knob = dyn_cast<KnobOp>(op))
      if (!knobs.insert(knob.getName()).second) {
        knob.emitOpError() << "duplicate knob name '" << knob.getName() << "' in "
                           << container->getName().stripDialect() << " @" << symName;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult switchyard::moe::detail::verifyPolicyBody(PolicyOpInterface op) {
  return verifyBody(op, op.getSymName(), op.getBodyBlock(), op.getArgumentTypes(),
                    op.getExperts());
}

LogicalResult RouterOp::verify() {
  bool genericExperts = ShapedType::isDynamic(getExperts());
  if (!genericExperts && ShapedType::isDynamic(getTopK()))
    return emitOpError() << "has experts = " << getExperts()
                         << " but no top_k: a router binds both or neither";
  if (!ShapedType::isDynamic(getTopK()) && getTopK() < 1)
    return emitOpError() << "top_k must be >= 1, got " << getTopK();
  if (!genericExperts && getTopK() > getExperts())
    return emitOpError() << "top_k must be in [1, experts = " << getExperts() << "], got "
                         << getTopK();
  if (getSharedExperts() < 0)
    return emitOpError() << "shared_experts must be >= 0, got " << getSharedExperts();
  if (getSharedExperts() > kMaxExperts)
    return emitOpError() << "shared_experts must be <= " << kMaxExperts << ", got "
                         << getSharedExperts();
  return success();
}

SmallVector<PolicyOpInterface> switchyard::moe::getPolicyOps(ModuleOp module) {
  SmallVector<PolicyOpInterface> all;
  for (Operation &op : *module.getBody())
    if (auto policy = dyn_cast<PolicyOpInterface>(&op))
      all.push_back(policy);
  return all;
}

//===----------------------------------------------------------------------===//
// YieldOp
//===----------------------------------------------------------------------===//

LogicalResult YieldOp::verify() {
  Operation *parent = (*this)->getParentOp();
  TypeRange expected = parent->getResultTypes();
  if (auto policy = dyn_cast<PolicyOpInterface>(parent))
    expected = policy.getResultTypes();
  if (getOperands().getTypes() != expected) {
    auto diag = emitOpError() << "returns (" << getOperands().getTypes()
                              << ") but the enclosing '" << parent->getName()
                              << "' expects (" << expected << ")";
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// KnobOp
//===----------------------------------------------------------------------===//

void KnobOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getName());
}

LogicalResult KnobOp::verify() {
  if (!isIdentifier(getName()))
    return emitOpError() << "knob name '" << getName()
                         << "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)";
  Attribute value = getValue();
  if (!isa<IntegerAttr, FloatAttr>(value))
    return emitOpError() << "default must be an integer or float literal";
  if (auto f = dyn_cast<FloatAttr>(value); f && !std::isfinite(f.getValueAsDouble()))
    return emitOpError() << "default must be finite";
  return success();
}

//===----------------------------------------------------------------------===//
// Shape parameters
//===----------------------------------------------------------------------===//

ParseResult switchyard::moe::parseSizeOrParam(OpAsmParser &parser, IntegerAttr &attr) {
  int64_t value = ShapedType::kDynamic;
  if (failed(parser.parseOptionalQuestion()) && parser.parseInteger(value))
    return failure();
  attr = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

void switchyard::moe::printSizeOrParam(OpAsmPrinter &printer, Operation *,
                                       IntegerAttr attr) {
  int64_t value = attr.getValue().getSExtValue();
  if (ShapedType::isDynamic(value))
    printer << "?";
  else
    printer << value;
}

ArrayRef<StringRef> switchyard::moe::getShapeParamNames() {
  // ShapeParameters.def's rows with PARAM = 1.
  static const SmallVector<StringRef> names = [] {
    SmallVector<StringRef> list;
    for (const ShapeParameterInfo &info : getShapeParameters())
      if (info.param)
        list.push_back(info.name);
    return list;
  }();
  return names;
}

LogicalResult ParamOp::verify() {
  if (!llvm::is_contained(getShapeParamNames(), getName()))
    return emitOpError() << "unknown shape parameter '" << getName() << "' (expected "
                         << llvm::join(getShapeParamNames(), ", ") << ")";
  if (!(*this)->getParentOfType<RouterOp>())
    return emitOpError() << "is only allowed in a router";
  return success();
}

//===----------------------------------------------------------------------===//
// WhenOp
//===----------------------------------------------------------------------===//

static ParseResult parsePhaseList(OpAsmParser &parser, ArrayAttr &phases) {
  SmallVector<Attribute> list;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() {
        StringRef keyword;
        SMLoc loc = parser.getCurrentLocation();
        if (parser.parseKeyword(&keyword))
          return failure();
        std::optional<Phase> phase = symbolizePhase(keyword);
        if (!phase)
          return LogicalResult(parser.emitError(loc)
                               << "unknown phase '" << keyword
                               << "' (expected prefill, decode or mixed)");
        list.push_back(PhaseAttr::get(parser.getContext(), *phase));
        return success();
      }))
    return failure();
  phases = parser.getBuilder().getArrayAttr(list);
  return success();
}

static void printPhaseList(OpAsmPrinter &p, WhenOp, ArrayAttr phases) {
  p << '[';
  llvm::interleaveComma(
      phases, p, [&](Attribute a) { p << stringifyPhase(cast<PhaseAttr>(a).getValue()); });
  p << ']';
}

LogicalResult WhenOp::verify() {
  if (getTokens().getType().getRank() < 1)
    return emitOpError() << "tokens must have a token dimension (rank >= 1), got "
                         << getTokens().getType();
  if (getMaxTokens() < 0)
    return emitOpError() << "max_tokens must be >= 0, got " << getMaxTokens();
  if (getPhases() && !getPhase())
    return emitOpError() << "phases need a phase operand to compare against";
  if (getPhase() && !getPhases())
    return emitOpError() << "a phase operand needs the list of phases it must be in";
  for (Type type : getResultTypes())
    if (!isa<RankedTensorType, ExpertSetType>(type))
      return emitOpError() << "results must be tensors or expert sets (what a phase gate "
                              "can hold in a buffer), got "
                           << type;
  if (auto phases = getPhases()) {
    if (phases->empty())
      return emitOpError() << "phases must not be empty";
    llvm::SmallDenseSet<Phase> seen;
    for (Attribute a : *phases)
      if (!seen.insert(cast<PhaseAttr>(a).getValue()).second)
        return emitOpError() << "phase '" << stringifyPhase(cast<PhaseAttr>(a).getValue())
                             << "' is listed twice";
  }
  return success();
}

namespace {
/// `max_tokens = 0`: no batch qualifies, so the gate is its `else` region.
struct InlineNeverTakenGate : OpRewritePattern<WhenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WhenOp op, PatternRewriter &rewriter) const override {
    if (op.getMaxTokens() != 0)
      return failure();
    Block &block = op.getFallback().front();
    auto yield = cast<YieldOp>(block.getTerminator());
    SmallVector<Value> results(yield.getOperands());
    rewriter.inlineBlockBefore(&block, op);
    rewriter.eraseOp(yield);
    rewriter.replaceOp(op, results);
    return success();
  }
};
} // namespace

void WhenOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<InlineNeverTakenGate>(context);
}

#include "switchyard/Dialect/Moe/IR/MoeInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeOps.cpp.inc"
