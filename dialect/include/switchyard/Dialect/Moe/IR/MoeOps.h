//===- MoeOps.h - moe dialect types, attributes and ops ---------*- C++ -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H
#define SWITCHYARD_DIALECT_MOE_IR_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "switchyard/Dialect/Moe/IR/MoeDialect.h"

#include "switchyard/Dialect/Moe/IR/MoeEnums.h.inc"

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

/// Verifies that `op` carries no attribute besides its own (inherent) ones, and those
/// in the namespace of another loaded dialect: a misspelt or unknown attribute on a
/// moe op would otherwise be accepted and silently ignored.
mlir::LogicalResult verifyNoUnknownAttributes(mlir::Operation *op);

/// The trait every moe op has (Moe_Op in MoeBase.td): verifyNoUnknownAttributes.
template <typename ConcreteType>
class NoUnknownAttributes
    : public mlir::OpTrait::TraitBase<ConcreteType, NoUnknownAttributes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyNoUnknownAttributes(op);
  }
};

} // namespace switchyard::moe

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

/// A view of a function-like policy op: a `moe.router` or a rule (`moe.residency`,
/// `moe.balance`, `moe.prefetch`). Everything that compiles, describes or runs a
/// policy (lowering, C ABI, moe-run) goes through it.
class PolicyFunction {
public:
  /// The view of `op`, or nothing when it is not a policy function.
  static std::optional<PolicyFunction> get(mlir::Operation *op);

  mlir::Operation *getOperation() const { return op; }
  /// "router", "residency", "balance" or "prefetch".
  llvm::StringRef getKind() const { return op->getName().stripDialect(); }
  bool isRouter() const { return mlir::isa<RouterOp>(op); }
  llvm::StringRef getSymName() const;
  mlir::FunctionType getFunctionType() const;
  llvm::ArrayRef<mlir::Type> getArgumentTypes() const { return getFunctionType().getInputs(); }
  llvm::ArrayRef<mlir::Type> getResultTypes() const { return getFunctionType().getResults(); }
  mlir::ArrayAttr getArgNames() const;
  mlir::ArrayAttr getResultNames() const;
  int64_t getExperts() const;
  /// The router's k; 0 for rules.
  int64_t getTopK() const;
  /// The router's shared experts; 0 for rules.
  int64_t getSharedExperts() const;
  mlir::Block &getBodyBlock() const { return op->getRegion(0).front(); }
  mlir::Location getLoc() const { return op->getLoc(); }

private:
  explicit PolicyFunction(mlir::Operation *op) : op(op) {}
  mlir::Operation *op;
};

/// Every policy function of `module`, in order.
llvm::SmallVector<PolicyFunction> getPolicyFunctions(mlir::ModuleOp module);

} // namespace switchyard::moe

#endif
