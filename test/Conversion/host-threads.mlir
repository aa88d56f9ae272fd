// moe-host-threads and moe-inline-alloca-scopes (include/switchyard/Compiler/Passes.td)
// through moe-opt. A router lowered to loops (E = 8): its outermost token loops run
// threaded from ceil(min-work / E) tokens and sequentially below; min-work = 0 leaves
// no parallel loop; the default min-work is 16384 (2048 tokens at E = 8).
// RUN: moe-opt --experts 8 --top-k 2 %policies/topk_softmax.mlir --moe-form-stages --moe-lower-to-loops --canonicalize --moe-host-threads=min-work=64 | FileCheck %s --check-prefix=THREADS
// THREADS: func.func @topk_softmax(%[[T:.*]]: index,
// (MLIR names an index constant by its value: %c8 is 8.)
// THREADS: %[[LARGE:.*]] = arith.cmpi sge, %[[T]], %{{c8(_[0-9]+)?}} : index
// THREADS-NEXT: scf.if %[[LARGE]] {
// THREADS-NEXT: scf.parallel (%{{.*}}) = (%{{.*}}) to (%[[T]])
// THREADS: } else {
// THREADS: scf.for %{{.*}} = %{{.*}} to %[[T]]
// RUN: moe-opt --experts 8 --top-k 2 %policies/topk_softmax.mlir --moe-form-stages --moe-lower-to-loops --canonicalize --moe-host-threads=min-work=0 | FileCheck %s --check-prefix=SEQUENTIAL
// SEQUENTIAL: func.func @topk_softmax
// SEQUENTIAL-NOT: scf.parallel
// SEQUENTIAL: scf.for
// RUN: moe-opt --experts 8 --top-k 2 %policies/topk_softmax.mlir --moe-form-stages --moe-lower-to-loops --canonicalize --moe-host-threads | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: arith.cmpi sge, %{{.*}}, %{{c2048(_[0-9]+)?}} : index

// A scope that allocates nothing is inlined; one that allocates stays.
// RUN: moe-opt %s --moe-inline-alloca-scopes | FileCheck %s --check-prefix=SCOPES
// SCOPES-LABEL: func.func @scopes
// SCOPES-NEXT: %[[SUM:.*]] = arith.addi %arg0, %arg0 : index
// SCOPES-NEXT: memref.alloca_scope
// SCOPES-NEXT: memref.alloca() : memref<4xf32>
// SCOPES: return %[[SUM]] : index
func.func @scopes(%n: index) -> index {
  %sum = memref.alloca_scope -> (index) {
    %s = arith.addi %n, %n : index
    memref.alloca_scope.return %s : index
  }
  memref.alloca_scope {
    %buffer = memref.alloca() : memref<4xf32>
  }
  return %sum : index
}
