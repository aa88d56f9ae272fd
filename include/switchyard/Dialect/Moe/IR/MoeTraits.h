//===- MoeTraits.h - the role traits of moe ops ------------------*- C++ -*-===//
//
// The C++ side of the role traits declared in MoeInterfaces.td. They carry no
// methods: passes ask `op->hasTrait<role::TokenStage>()` and so on.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOETRAITS_H
#define SWITCHYARD_DIALECT_MOE_IR_MOETRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace switchyard::moe {
/// Verifies that `op` carries no attribute besides its own (inherent) ones, and those
/// in the namespace of another loaded dialect: a misspelt or unknown attribute on a
/// moe op would otherwise be accepted and silently ignored.
mlir::LogicalResult verifyNoUnknownAttributes(mlir::Operation *op);
} // namespace switchyard::moe

namespace switchyard::moe::role {

/// Every moe op (Moe_Op in MoeBase.td): no unknown attributes.
template <typename ConcreteType>
class NoUnknownAttributes
    : public mlir::OpTrait::TraitBase<ConcreteType, NoUnknownAttributes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyNoUnknownAttributes(op);
  }
};

/// Every dynamic dimension of the op's operands is E (see MoeBase.td).
template <typename ConcreteType>
class ExpertOperands : public mlir::OpTrait::TraitBase<ConcreteType, ExpertOperands> {};

/// A per-token op of the token stage.
template <typename ConcreteType>
class TokenStage : public mlir::OpTrait::TraitBase<ConcreteType, TokenStage> {};
/// A fold over the batch.
template <typename ConcreteType>
class BatchStage : public mlir::OpTrait::TraitBase<ConcreteType, BatchStage> {};
/// A expert-set selection.
template <typename ConcreteType>
class SelectStage : public mlir::OpTrait::TraitBase<ConcreteType, SelectStage> {};
/// A routing and the batch outputs that follow.
template <typename ConcreteType>
class RouteStage : public mlir::OpTrait::TraitBase<ConcreteType, RouteStage> {};
/// A step of a rule (host scheduling code).
template <typename ConcreteType>
class RuleStep : public mlir::OpTrait::TraitBase<ConcreteType, RuleStep> {};
/// A container, knob, gate, stage or terminator.
template <typename ConcreteType>
class Structure : public mlir::OpTrait::TraitBase<ConcreteType, Structure> {};
/// Synchronisation inside a GPU kernel (the mapping's, never a policy's).
template <typename ConcreteType>
class KernelSync : public mlir::OpTrait::TraitBase<ConcreteType, KernelSync> {};
/// A computes each token's row on its own.
template <typename ConcreteType>
class RowWise : public mlir::OpTrait::TraitBase<ConcreteType, RowWise> {};

} // namespace switchyard::moe::role

#endif
