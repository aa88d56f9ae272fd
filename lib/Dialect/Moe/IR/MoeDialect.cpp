//===- MoeDialect.cpp - moe dialect registration --------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace switchyard::moe;

#include "switchyard/Dialect/Moe/IR/MoeEnums.cpp.inc"
#include "switchyard/Dialect/Moe/IR/MoeOpsDialect.cpp.inc"

//===----------------------------------------------------------------------===//
// Attributes: unknown ones on moe ops, and moe.* attributes on other ops
//===----------------------------------------------------------------------===//

LogicalResult switchyard::moe::verifyNoUnknownAttributes(Operation *op) {
  for (NamedAttribute attr : op->getDiscardableAttrs()) {
    StringRef name = attr.getName().strref();
    // An attribute in the namespace of another loaded dialect belongs to that dialect
    // (which verifies it); everything else is a misspelling or a parameter the op does
    // not have, and would be silently ignored.
    auto [prefix, rest] = name.split('.');
    if (!rest.empty() && prefix != MoeDialect::getDialectNamespace() &&
        op->getContext()->getLoadedDialect(prefix))
      continue;
    InFlightDiagnostic diag = op->emitOpError() << "has no attribute '" << name << "'";
    ArrayRef<StringAttr> known;
    if (std::optional<RegisteredOperationName> info = op->getRegisteredInfo())
      known = info->getAttributeNames();
    diag << " (its attributes: ";
    if (known.empty())
      diag << "none";
    llvm::interleaveComma(known, diag, [&](StringAttr a) { diag << a.getValue(); });
    return diag << ")";
  }
  return success();
}

/// The `moe.*` attributes the lowering passes put on the functions and kernels they
/// make; a policy that spells one by hand must give it the shape the passes read.
LogicalResult MoeDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  auto check = [&](bool ok, const Twine &what) -> LogicalResult {
    if (ok)
      return success();
    return op->emitError() << "attribute '" << name << "' must be " << what;
  };
  if (name == KindAttrHelper::getNameStr())
    return check(isa<StringAttr>(value), "a string");
  if (name == LaunchAttrHelper::getNameStr())
    return check(isa<KernelLaunchAttr>(value), "a #moe.launch<...> (a kernel's launch)");
  if (name == TopKAttrHelper::getNameStr() || name == ExpertsAttrHelper::getNameStr()) {
    auto i = dyn_cast<IntegerAttr>(value);
    return check(i && i.getType().isInteger(64) && !i.getValue().isNegative(),
                 "a non-negative i64 integer");
  }
  // Token tiles of the GPU form of the batch outputs (MoeToLoops.h): on an scf.parallel
  // over the tiles, the tokens per tile; on one over experts scanning the tiles, unit.
  if (name == TokenTilesAttrHelper::getNameStr()) {
    auto i = dyn_cast<IntegerAttr>(value);
    return check(op->getName().getStringRef() == "scf.parallel" && i &&
                     i.getType().isInteger(64) && i.getValue().isStrictlyPositive(),
                 "a positive i64 integer on an scf.parallel (tokens per tile)");
  }
  if (name == TileScanAttrHelper::getNameStr())
    return check(op->getName().getStringRef() == "scf.parallel" && isa<UnitAttr>(value),
                 "a unit attribute on an scf.parallel");
  // A memref.view of the GPU workspace that holds one temporary, its bytes its own
  // (lib/Conversion/MoeToGPU/Workspace.cpp; the barrier elimination reads it).
  if (name == WorkspaceTemporaryAttrHelper::getNameStr())
    return check(op->getName().getStringRef() == "memref.view" && isa<UnitAttr>(value),
                 "a unit attribute on a memref.view");
  if (name == LaunchModelAttrHelper::getNameStr())
    return check(isa<DictionaryAttr>(value), "a dictionary (the launch cost model)");
  // A router (and its kernel) that routes this many knob groups in one launch
  // (lib/Conversion/MoeToGPU/KnobGroups.h).
  if (name == KnobGroupsAttrHelper::getNameStr()) {
    auto i = dyn_cast<IntegerAttr>(value);
    return check(i && i.getType().isInteger(64) && i.getValue().isStrictlyPositive(),
                 "a positive i64 integer (the knob groups of one launch)");
  }
  if (name == MoeDialect::AbiAttrHelper::getNameStr())
    return check(isa<AbiAttr>(value), "a #moe.abi<[...]> (the router's C ABI)");
  return op->emitError() << "unknown attribute '" << name << "' in the moe namespace";
}

void MoeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "switchyard/Dialect/Moe/IR/MoeOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}
