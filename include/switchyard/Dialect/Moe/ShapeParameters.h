//===- ShapeParameters.h - the table of shape parameters --------*- C++ -*-===//
//
// ShapeParameters.def as data, for code that walks every parameter (the config reader,
// moe-specialize's checks, the tests). Code that needs a C++ member or type per
// parameter includes the .def itself.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_SHAPEPARAMETERS_H
#define SWITCHYARD_DIALECT_MOE_SHAPEPARAMETERS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace switchyard::moe {

/// How a shape parameter's value is written (the .def's KIND).
enum class ShapeKind { Int, Number, Bool };

/// The C++ type of a KIND (SHAPE_PARAMETER_TYPE(Int) is int64_t).
#define SHAPE_PARAMETER_TYPE(KIND) ::switchyard::moe::ShapeKindType##KIND
using ShapeKindTypeInt = int64_t;
using ShapeKindTypeNumber = double;
using ShapeKindTypeBool = bool;

/// One row of ShapeParameters.def (see there for the columns).
struct ShapeParameterInfo {
  llvm::StringRef name;
  ShapeKind kind;
  llvm::StringRef flag;
  llvm::StringRef valueDesc;
  /// Space-separated, in the order read.
  llvm::StringRef configKeys;
  /// A router may read it with `moe.param`.
  bool param;
  llvm::StringRef uses;
  llvm::StringRef help;
};

/// Every shape parameter, in the table's order.
inline llvm::ArrayRef<ShapeParameterInfo> getShapeParameters() {
  static const ShapeParameterInfo table[] = {
#define SHAPE_PARAMETER(FIELD, KIND, NAME, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM, USES,     \
                        HELP)                                                              \
  {NAME, ShapeKind::KIND, FLAG, VALUE_DESC, CONFIG_KEYS, PARAM != 0, USES, HELP},
#include "switchyard/Dialect/Moe/ShapeParameters.def"
  };
  return table;
}

/// The parameter called `name`, or null.
inline const ShapeParameterInfo *lookupShapeParameter(llvm::StringRef name) {
  for (const ShapeParameterInfo &info : getShapeParameters())
    if (info.name == name)
      return &info;
  return nullptr;
}

} // namespace switchyard::moe

#endif
