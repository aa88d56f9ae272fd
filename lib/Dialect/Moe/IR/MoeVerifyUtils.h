//===- MoeVerifyUtils.h - checks shared by the moe op verifiers -*- C++ -*-===//
//
// Every moe op checks the same few facts about its operands: the expert dimension is
// static and equals the enclosing router's `experts`, token dimensions agree, and a
// statically known scalar parameter lies in its range. These helpers word those
// diagnostics one way everywhere.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_LIB_IR_MOEVERIFYUTILS_H
#define SWITCHYARD_DIALECT_MOE_LIB_IR_MOEVERIFYUTILS_H

#include "switchyard/Dialect/Moe/IR/MoeOps.h"

namespace switchyard::moe::detail {

/// The enclosing router's or rule's `experts`, if the op is inside one.
std::optional<int64_t> enclosingExperts(mlir::Operation *op);

/// A size for diagnostics: the number, or "?" for a generic policy's parameter.
std::string describeSize(int64_t size);

/// Whether an expert count or k is a generic policy's parameter (`?`).
inline bool isParam(int64_t size) { return mlir::ShapedType::isDynamic(size); }

/// `size` when bound, else no bound (for range checks against E or k).
inline std::optional<int64_t> boundOf(int64_t size) {
  return isParam(size) ? std::nullopt : std::optional<int64_t>(size);
}

/// Whether `op` is inside a generic policy (experts still `?`).
bool inGenericPolicy(mlir::Operation *op);

/// "router", or "<kind> rule" for a rule container (for diagnostics).
std::string describeContainer(mlir::Operation *container);

/// Checks that `experts` (the expert dimension of the value described by `what`) is
/// static and matches the enclosing router.
mlir::LogicalResult verifyExpertCount(mlir::Operation *op, int64_t experts,
                                      llvm::StringRef what);

/// Expert dimension (dim 1) of a [T, E] tensor, after checking it as above.
mlir::FailureOr<int64_t> verifyScoreMatrix(mlir::Operation *op, mlir::Type type,
                                           llvm::StringRef what);

/// Expert dimension (dim 0) of an [E] tensor, after checking it as above.
mlir::FailureOr<int64_t> verifyExpertVector(mlir::Operation *op, mlir::Type type,
                                            llvm::StringRef what);

/// Checks that two values agree on the token dimension (dim 0) where both are static.
mlir::LogicalResult verifySameTokens(mlir::Operation *op, mlir::Type a,
                                     llvm::StringRef aName, mlir::Type b,
                                     llvm::StringRef bName);

/// Checks that an id tensor is [T, k] with a static k, returning k.
mlir::FailureOr<int64_t> verifyIdMatrix(mlir::Operation *op, mlir::Type type,
                                        llvm::StringRef what);

/// Checks a number of choices per token `k` (an attribute, `?` in a generic policy)
/// against the experts `e`: k in [1, E] where both are bound.
mlir::LogicalResult verifyChoices(mlir::Operation *op, int64_t k, int64_t experts);

/// Checks an expert set's size against `experts`.
mlir::LogicalResult verifySetSize(mlir::Operation *op, mlir::Type setType, int64_t experts,
                                  llvm::StringRef what);

/// Checks the model sizes an op is written with (ShapeRefinementOpInterface::
/// getSizeParameters): `?` only inside a generic policy, fixed values >= 1. Returns
/// whether the op still has a `?` size (`*generic`), for verifiers that check the
/// bound shape only once it is bound.
mlir::LogicalResult verifySizeParameters(mlir::Operation *op, bool *generic = nullptr);

/// Checks the op's ScalarRulesOpInterface rules on statically known values.
mlir::LogicalResult verifyScalarRules(mlir::Operation *op);

/// True when `value` is produced by `moe.full_set` / `moe.empty_set`.
bool isFullSet(mlir::Value value);
bool isEmptySet(mlir::Value value);

} // namespace switchyard::moe::detail

#endif
