//===- MoeAttrs.cpp - the moe dialect's attributes ------------------------===//
//
// The router's C ABI (`#moe.abi`, `#moe.param`, `#moe.rule`): what the router lowering
// attaches and the C entry, the GPU mapping, the PTX launcher and the manifest read.
// The verifiers here are the one place its shape is checked.
//
//===----------------------------------------------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace switchyard::moe;

#define GET_ATTRDEF_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeAttrs.cpp.inc"

void MoeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "switchyard/Dialect/Moe/IR/MoeAttrs.cpp.inc"
      >();
}

LogicalResult KernelLaunchAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                       SizeClass sizeClass, int64_t minTokens,
                                       int64_t maxTokens, int64_t tokensPerCta,
                                       int64_t workspacePerToken, int64_t workspaceFixed) {
  if (minTokens < 1 || maxTokens < 0 || (maxTokens && maxTokens < minTokens))
    return emitError() << "a kernel serves T in [min_tokens >= 1, max_tokens] (max_tokens "
                          "0: unbounded), got ["
                       << minTokens << ", " << maxTokens << "]";
  if (isPerCtaClass(sizeClass) != (tokensPerCta > 0) || tokensPerCta < 0)
    return emitError() << "tokens_per_cta must be positive for a large-batch kernel "
                          "(large, cooperative) and 0 "
                          "otherwise, got "
                       << tokensPerCta << " for size class "
                       << stringifySizeClass(sizeClass);
  if (sizeClass != SizeClass::decode && maxTokens != 0)
    return emitError() << "only a decode kernel has a max_tokens bound";
  if (workspacePerToken < 0 || workspaceFixed < 0)
    return emitError() << "workspace bytes must be non-negative";
  return success();
}

LogicalResult AbiParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringAttr name, AbiRole role, AbiKind kind, Type type,
                                   DenseI64ArrayAttr size, StringAttr values,
                                   std::optional<int64_t> idBound, Attribute defaultValue,
                                   ArrayAttr rules) {
  auto fail = [&]() {
    return emitError() << "ABI parameter '" << (name ? name.getValue() : "") << "' ";
  };
  if (!name || name.getValue().empty())
    return emitError() << "an ABI parameter needs a non-empty name";
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref && !type.isIntOrIndexOrFloat())
    return fail() << "must be a memref or a scalar, not " << type;
  if (kind == AbiKind::tokens && (role != AbiRole::in || !type.isIndex()))
    return fail() << "of kind tokens must be an input of type index";
  if (size && (size.size() != 3 || size[0] < 0 || size[1] < 0 || size[2] < 1))
    return fail() << "has a size rule that is not array<i64: a, b, d> with a, b >= 0 "
                     "and d >= 1";
  if (memref && !memref.hasStaticShape() && !size)
    return fail() << "has a dynamic shape and needs a size rule array<i64: a, b, d>";
  if (values) {
    if (role != AbiRole::in)
      return fail() << "is not an input and cannot carry a value rule";
    if (values.getValue() != "phase" && values.getValue() != "expert_ids")
      return fail() << "has values \"" << values.getValue()
                    << "\" (expected \"phase\" or \"expert_ids\")";
  }
  if (idBound && (!values || values.getValue() != "expert_ids" || *idBound < 0))
    return fail() << "has an id_bound without values = \"expert_ids\" (or a negative one)";
  bool knob = role == AbiRole::knob;
  if (knob != bool(defaultValue) || knob != bool(rules))
    return fail() << (knob ? "is a knob and needs a default_value and rules"
                           : "is not a knob and cannot carry a default_value or rules");
  if (!knob)
    return success();
  if (kind != AbiKind::scalar || memref)
    return fail() << "is a knob and must be a scalar";
  auto typed = dyn_cast<TypedAttr>(defaultValue);
  if (!isa<IntegerAttr, FloatAttr>(defaultValue) || typed.getType() != type)
    return fail() << "has a default of another type than " << type;
  for (Attribute rule : rules)
    if (!isa<KnobRuleAttr>(rule))
      return fail() << "has a rule that is not a #moe.rule: " << rule;
  return success();
}

SmallVector<KnobRuleAttr> AbiParamAttr::getKnobRules() const {
  SmallVector<KnobRuleAttr> rules;
  if (ArrayAttr list = getRules())
    for (Attribute rule : list)
      rules.push_back(cast<KnobRuleAttr>(rule));
  return rules;
}

LogicalResult AbiAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              ArrayRef<AbiParamAttr> params) {
  if (params.empty() || params.front().getKind() != AbiKind::tokens)
    return emitError() << "a router's ABI starts with its token count (kind tokens)";
  // In order: inputs, outputs, knobs; names unique (they key the runtime's bindings).
  llvm::StringSet<> names;
  int last = 0;
  for (AbiParamAttr p : params) {
    if (!names.insert(p.getName().getValue()).second)
      return emitError() << "ABI parameter '" << p.getName().getValue()
                         << "' appears twice";
    int rank = static_cast<int>(p.getRole());
    if (rank < last)
      return emitError() << "ABI parameter '" << p.getName().getValue()
                         << "' is out of order (inputs, then outputs, then knobs)";
    last = rank;
  }
  return success();
}
