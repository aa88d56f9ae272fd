//===- MoeTypes.cpp - moe dialect types -----------------------------------===//
#include "switchyard/Dialect/Moe/IR/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace switchyard::moe;

/// A size, or `?` for a parameter a generic policy leaves to --moe-specialize.
static ParseResult parseTypeSize(AsmParser &parser, int64_t &value) {
  if (succeeded(parser.parseOptionalQuestion())) {
    value = ShapedType::kDynamic;
    return success();
  }
  return parser.parseInteger(value);
}

static void printTypeSize(AsmPrinter &printer, int64_t value) {
  if (ShapedType::isDynamic(value))
    printer << "?";
  else
    printer << value;
}

#define GET_TYPEDEF_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeOpsTypes.cpp.inc"

void MoeDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "switchyard/Dialect/Moe/IR/MoeOpsTypes.cpp.inc"
      >();
}

LogicalResult ExpertSetType::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t experts) {
  if (ShapedType::isDynamic(experts))
    return success();
  if (experts < 1)
    return emitError() << "an expert set needs at least one expert, got " << experts;
  if (experts > kMaxExperts)
    return emitError() << "an expert set holds at most " << kMaxExperts << " experts, got "
                       << experts;
  return success();
}

LogicalResult PlacementType::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t experts, int64_t devices, int64_t slots) {
  // A generic placement: only the parts already bound are checked.
  if (ShapedType::isDynamic(experts) || ShapedType::isDynamic(devices) ||
      ShapedType::isDynamic(slots)) {
    if (!ShapedType::isDynamic(devices) && devices < 1)
      return emitError() << "a placement needs at least one device, got " << devices;
    return success();
  }
  if (experts < 1)
    return emitError() << "a placement needs at least one expert, got " << experts;
  if (devices < 1)
    return emitError() << "a placement needs at least one device, got " << devices;
  if (slots < experts)
    return emitError() << "a placement needs at least one slot per expert: slots (" << slots
                       << ") < experts (" << experts << ")";
  if (slots % devices != 0)
    return emitError() << "slots (" << slots << ") must be a multiple of devices ("
                       << devices << ") so that every device hosts the same number";
  // The runtime form is replica_count[E] and log2phy[E][slots - E + 1] of i32 slot ids.
  if (experts > kMaxExperts)
    return emitError() << "a placement holds at most " << kMaxExperts << " experts, got "
                       << experts;
  if (slots > INT32_MAX || slots - experts + 1 > kMaxStaticElements / experts)
    return emitError() << "a placement of " << experts << " experts over " << slots
                       << " slots is too large (its log2phy table of experts x (slots - "
                          "experts + 1) entries must hold at most "
                       << kMaxStaticElements << ")";
  return success();
}
