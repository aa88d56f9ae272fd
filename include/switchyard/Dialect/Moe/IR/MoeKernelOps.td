//===- MoeKernelOps.td - synchronisation inside GPU kernels -*- tablegen -*-===//
//
// Ops moe-map-to-gpu writes into the kernels it makes (never found in a policy): what
// no upstream GPU dialect has an op for.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD

def Moe_GridBarrierOp : Moe_KernelSyncOp<"grid_barrier"> {
  let summary = "a barrier of every thread of the grid (cooperative launches only)";
  let description = [{
    Every thread of every CTA of the launch waits here until all have arrived; what
    each wrote to global memory before it is visible to all after it (a kernel
    boundary inside one launch). Only a kernel launched cooperatively (every CTA
    resident at once, or the launch fails) may run one: the launch contract's
    `cooperative` size class. The NVVM lowering is cooperative groups' grid sync on
    the driver's per-launch barrier word (`%envreg1`/`%envreg2`): an arrival of thread
    0 per CTA with release semantics, CTA 0 adding 2^31 - (G - 1) and the others 1 so
    that the top bit flips when the last one arrives, then an acquire poll, between
    two CTA barriers; the word needs no reset between launches. The CUDA C++ form is
    `cooperative_groups::this_grid().sync()`.

    It has no memory-effect interface: passes treat it as touching every buffer.

    ```mlir
    moe.grid_barrier
    ```
  }];
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEKERNELOPS_TD
