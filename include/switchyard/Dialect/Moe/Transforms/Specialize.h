//===- Specialize.h - binding generic policies to a model shape -*- C++ -*-===//
//
// A policy is written once, generic in the number of experts E and top-k (and in the
// expert groups, devices/slots of a placement, the shared experts, the routed scaling
// factor and renormalization), and bound to a model here: the `--moe-specialize` pass,
// and the tools' `--experts/--top-k/--groups/... /--model config.json` flags, rewrite it
// into the fully static form the lowering compiles.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_SPECIALIZE_H
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_SPECIALIZE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>

namespace switchyard::moe {

/// A value to bind and where it came from, as diagnostics name it ("--experts 8",
/// "models/mixtral.json: num_local_experts = 8").
template <typename T>
struct Bound {
  T value;
  std::string source;
};

/// What to bind a module's policies to; unset parameters stay as the policy has them.
struct ShapeRequest {
  std::optional<Bound<int64_t>> experts, topK, groups, topkGroups, devices, slots,
      sharedExperts;
  std::optional<Bound<double>> scaling;
  std::optional<Bound<bool>> normTopkProb;

  bool empty() const {
    return !experts && !topK && !groups && !topkGroups && !devices && !slots &&
           !sharedExperts && !scaling && !normTopkProb;
  }
};

/// Binds every policy of `module`:
/// * a generic parameter (`?` expert dimensions, `k = ?`, `groups = ? keep = ?`, a
///   `?` in a placement, `shared_experts` left at 0) takes the requested value; one with
///   no value requested is an error (slots default to E, shared_experts to 0);
/// * a fixed parameter that differs from the request is an error naming both;
/// * a request no policy uses (e.g. groups without a `moe.group_limit`) is an error;
/// * `scaling` / `norm_topk_prob` are the model's: they set every `moe.route`'s
///   `scaling` / `renormalize`;
/// * `moe.param` values become constants.
/// Then every generic router takes its bound types (ShapeRefinementOpInterface) and a
/// `moe.fill` budget larger than E is reported as a warning. Errors are reported at
/// the policy's location; the caller verifies the result.
mlir::LogicalResult specializePolicies(mlir::ModuleOp module, const ShapeRequest &request);

/// moe-specialize binding `request` (what the tools' shape flags build).
std::unique_ptr<mlir::Pass> createSpecializePass(ShapeRequest request);

/// Whether any policy of `module` still has a parameter to bind.
bool hasUnboundParameters(mlir::ModuleOp module);

} // namespace switchyard::moe

#endif
