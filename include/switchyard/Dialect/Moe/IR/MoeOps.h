//===- MoeOps.h - moe dialect types, attributes and ops ---------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"
#include "switchyard/Dialect/Moe/IR/MoeTraits.h"
#include "switchyard/Runtime/ScalarRange.h"

namespace switchyard::moe {

/// Limits that keep every size compiled code derives from a policy inside its integer
/// types: expert ids and counts are i32, buffers are allocated from static shapes.
/// The verifiers reject attributes, types and knob values beyond them.
constexpr int64_t kMaxExperts = int64_t(1) << 20;
/// The most elements in the static dimensions of one tensor (1 GiB of f32).
constexpr int64_t kMaxStaticElements = int64_t(1) << 28;
/// The most layers a rule counts (step sizes are computed exactly in f32).
constexpr int64_t kMaxLayers = int64_t(1) << 24;
/// The largest block size of moe.align_blocks.
constexpr int64_t kMaxBlockSize = int64_t(1) << 16;

/// What --moe-specialize binds a generic policy to, and the types its values were
/// written with (ShapeRefinementOpInterface reads both). A size the policy does not use
/// stays `?` (ShapedType::kDynamic).
struct ShapeBinding {
  int64_t experts = mlir::ShapedType::kDynamic;
  int64_t topK = mlir::ShapedType::kDynamic;
  /// Physical expert slots over all devices (a placement, EPLB's phy2log).
  int64_t slots = mlir::ShapedType::kDynamic;
  /// The model's hidden size (a gate's weight is [hidden, E]).
  int64_t hidden = mlir::ShapedType::kDynamic;
  /// Every refined value's type as written in the generic policy.
  llvm::DenseMap<mlir::Value, mlir::Type> writtenTypes;
  mlir::Type writtenType(mlir::Value value) const {
    auto it = writtenTypes.find(value);
    return it == writtenTypes.end() ? value.getType() : it->second;
  }
};

/// A rule a scalar operand (a knob or a constant) obeys: checked by the verifier on a
/// known value and, for a knob left tunable, by the generated code at run time (the
/// C entry returns a status naming the knob). One rule (runtime::ScalarRange), both
/// checks.
struct ScalarRule : switchyard::runtime::ScalarRange {
  mlir::Value value;
  std::string name; // the parameter's name in the op's syntax

  static ScalarRule intRange(mlir::Value v, llvm::StringRef name, int64_t lo,
                             std::optional<int64_t> hi = std::nullopt);
  static ScalarRule floatRange(mlir::Value v, llvm::StringRef name,
                               std::optional<double> min, bool minOpen,
                               std::optional<double> max, bool maxOpen);
  /// A requirement relating `v` to other operands (ScalarRange::relation): the op's
  /// verifier checks it on known values, the loop lowering at run time, naming `v`'s
  /// knob.
  static ScalarRule relational(mlir::Value v, llvm::StringRef name,
                               llvm::StringRef relation);
};

/// A size an op takes from the model it is bound to (ShapeRefinementOpInterface::
/// getSizeParameters): `name` is the binding's parameter ("experts", "top_k", "groups",
/// "topk_groups", "devices", "slots", "nodes", "hidden_size" - the tools' --flag of the
/// same name), `value` what the op has now (`?` = ShapedType::kDynamic in a generic
/// policy), `attr` the inherent attribute --moe-specialize writes the bound value to (empty
/// when the size lives in types only). A fixed value that differs from the binding is
/// an error unless `mayDiffer` (an op's own k next to the model's top-k).
struct SizeParameter {
  llvm::StringRef name;
  int64_t value;
  llvm::StringRef attr = {};
  bool mayDiffer = false;
};

/// The custom syntax of a size that a generic policy may leave as a parameter: an
/// integer, or `?` (stored as ShapedType::kDynamic).
mlir::ParseResult parseSizeOrParam(mlir::OpAsmParser &parser, mlir::IntegerAttr &attr);
void printSizeOrParam(mlir::OpAsmPrinter &printer, mlir::Operation *op,
                      mlir::IntegerAttr attr);

/// The shape parameters a router binds (`moe.param` names, --moe-specialize options).
llvm::ArrayRef<llvm::StringRef> getShapeParamNames();

namespace detail {
/// PolicyOpInterface's checks: experts >= 1, names, the signature.
mlir::LogicalResult verifyPolicyOp(mlir::Operation *op);
/// ShapeRefinementOpInterface's default (see its description).
mlir::LogicalResult refineByMatchingTypes(mlir::Operation *op, const ShapeBinding &binding,
                                          llvm::SmallVectorImpl<mlir::Type> &types);
/// ShapeRefinementOpInterface's default for arguments: expert dimensions (1 and up) of
/// a tensor are E.
mlir::Type bindScoreOperand(mlir::Operation *op, unsigned index,
                            const ShapeBinding &binding);
} // namespace detail
} // namespace switchyard::moe

#include "switchyard/Dialect/Moe/IR/MoeInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "switchyard/Dialect/Moe/IR/MoeOps.h.inc"

namespace switchyard::moe {

/// The value of a scalar parameter when it is statically known: an `arith.constant`
/// or a `moe.knob` (its current default). Verifiers check known values.
std::optional<int64_t> getKnownInt(mlir::Value value);
std::optional<double> getKnownFloat(mlir::Value value);

/// The value of a scalar parameter when it is a true constant (`arith.constant`, not
/// a knob: a knob may still be overridden). Folders use only these.
std::optional<int64_t> getConstantInt(mlir::Value value);
std::optional<double> getConstantFloat(mlir::Value value);

/// Every policy (router or rule) of `module`, in order.
llvm::SmallVector<PolicyOpInterface> getPolicyOps(mlir::ModuleOp module);

namespace detail {
/// The shared custom syntax and checks of the policy containers (Moe_PolicyContainerOp).
mlir::ParseResult parsePolicyOp(mlir::OpAsmParser &parser, mlir::OperationState &result);
void printPolicyOp(PolicyOpInterface op, mlir::OpAsmPrinter &p);
void nameBlockArguments(PolicyOpInterface op, mlir::Region &region,
                        mlir::OpAsmSetValueNameFn setNameFn);
/// The body's types are over the container's experts, knob names are unique.
mlir::LogicalResult verifyPolicyBody(PolicyOpInterface op);
} // namespace detail

} // namespace switchyard::moe

#endif
