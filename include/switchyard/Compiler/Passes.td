//===- Passes.td - the host target's loop passes -----------*- tablegen -*-===//
//
// The passes of the host pipeline (moe-host-pipeline, HostPipeline.cpp) that run on
// the loops moe-lower-to-loops produced, around MLIR's convert-scf-to-openmp: which
// loops run on OpenMP threads. Implemented in lib/Compiler/HostThreads.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_COMPILER_PASSES_TD
#define SWITCHYARD_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeHostThreads : Pass<"moe-host-threads", "mlir::ModuleOp"> {
  let summary = "runs a router's token loops on OpenMP threads for large batches";
  let description = [{
    Prepares the host form of a router (after `moe-lower-to-loops`, whose
    `scf.parallel` loops have independent iterations) for `convert-scf-to-openmp`:

    * in a router (`moe.kind = "router"` with `moe.experts` = E and an ABI whose first
      argument is the token count), each outermost `scf.parallel` loop without
      reductions becomes
      `scf.if (num_tokens >= ceil(min-work / E)) { scf.parallel } else { scf.for }`,
      so that small batches stay single-threaded (an OpenMP fork and join costs
      microseconds; a token's row about E ns) and large ones are spread over the
      OpenMP threads (`OMP_NUM_THREADS`);
    * every other parallel loop (nested ones, all loops of rules) becomes a
      sequential `scf.for`; with `min-work=0` every loop does.

    Iterations are independent and integer atomics commute, so the results are
    bit-identical to the single-threaded code whatever the thread count. The tools
    set `min-work` from `--host-threads-min-work` (default 16384 scores T * E) and use
    0 when built without an OpenMP runtime.

    Example: `moe-opt --moe-host-threads="min-work=4096" lowered.mlir`
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", "::switchyard::moe::kDefaultThreadMinWork",
           "the batch size T * E from which a router's token loops are threaded "
           "(0: every loop sequential)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::scf::SCFDialect"];
}

def MoeInlineAllocaScopes : Pass<"moe-inline-alloca-scopes", "mlir::ModuleOp"> {
  let summary = "inlines the memref.alloca_scope ops that allocate nothing";
  let description = [{
    `convert-scf-to-openmp` wraps each loop body in a `memref.alloca_scope`, whose
    single block the control-flow lowering would split. The bodies of the host
    pipeline allocate nothing on the stack, so every scope without a `memref.alloca`
    is replaced by its body; one that allocates is left alone.
  }];
}

#endif // SWITCHYARD_COMPILER_PASSES_TD
