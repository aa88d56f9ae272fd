//===- KnobGroups.h - one launch for a batch of knob groups -----*- C++ -*-===//
//
// An engine routes a step whose requests set different knobs (vLLM's per-request
// knobs) as a set of batches, one per knob group, each with its own knobs: that is how
// the host routes it (runtime::StepRouter). Under a CUDA graph the step is ONE
// captured launch whose groups change at every replay, so the GPU form routes all the
// groups inside one kernel: moe-map-to-gpu{knob-groups=G} first rewrites the lowered
// router into a loop over the G groups that
//   1. finds the token rows of group g (input `knob_group`, int32 per token; a value
//      outside [0, G) is group 0) on one thread,
//   2. gathers those rows of every per-token input into temporaries,
//   3. reads group g's knobs from struct g of the knob buffer (G NAME_knobs structs in
//      device memory; empty: the defaults),
//   4. runs the router on the gathered rows as a batch of their own (a group with no
//      tokens is skipped), and
//   5. scatters the group's results (every result is per token) back to its rows.
// The loop's steps then map onto the one-CTA kernel like any other router code.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_MOETOGPU_KNOBGROUPS_H
#define SWITCHYARD_CONVERSION_MOETOGPU_KNOBGROUPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace switchyard::moe {

/// The most knob groups one launch routes (moe-map-to-gpu{knob-groups}).
constexpr int64_t kMaxKnobGroups = 64;

/// The name of the per-token input that says each token's knob group.
constexpr llvm::StringLiteral kKnobGroupInput = "knob_group";

/// Rewrites lowered router `f` (moe-lower-to-loops) to route `groups` knob groups as
/// above: `f` takes `knob_group` after its inputs and one `memref<?xi8>` of knob
/// structs in place of its knob scalars, and carries moe.knob_groups. Fails with a
/// diagnostic on `f` when a result is not per token or `f` has no knobs.
mlir::LogicalResult routeKnobGroups(mlir::func::FuncOp f, int64_t groups);

} // namespace switchyard::moe

#endif
