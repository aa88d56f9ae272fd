// moe-lower-to-loops on LLEP's least-loaded assignment (LeastLoadedOps.cpp): host code,
// sequential loops in the order the algorithm states them.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @llep(
// CHECK-SAME: %[[LOADS:[a-z0-9]+]]: memref<16xi32>, %[[PLAN:[a-z0-9]+]]: memref<16x4xi32>,
// CHECK-SAME: %[[THRESHOLD:[a-z0-9]+]]: f32)
// CHECK-SAME: #moe.rule<text = "min_chunk must be in [0, inf]", op = "moe.least_loaded
// CHECK-SAME: #moe.rule<text = "threshold must be finite", op = "moe.least_loaded
// The GPUs' pending (native) and assigned loads in i64, the experts taken.
// CHECK: memref.alloc() : memref<4xi64>
// CHECK: memref.alloc() : memref<4xi64>
// CHECK: memref.alloc() : memref<16xi1>
// The capacity from the factor in double precision.
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// Plain EP below the threshold: max / mean of the native loads in f32.
// CHECK: %[[BELOW:.*]] = arith.cmpf olt, %{{.*}}, %[[THRESHOLD]] : f32
// CHECK: %[[ON:.*]] = arith.cmpf ogt, %[[THRESHOLD]], %{{.*}} : f32
// CHECK: %[[PLAIN:.*]] = arith.andi %[[ON]], %[[BELOW]] : i1
// CHECK: scf.if %[[PLAIN]] {
// CHECK:   scf.for %{{.*}} = %c0 to %c16 step %c1 {
// CHECK: } else {
// Heaviest expert first; while tokens remain, the least-loaded other GPU takes a chunk.
// CHECK:   scf.for %{{.*}} = %c0 to %c16 step %c1 {
// CHECK:     scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args
// CHECK:     scf.while
// CHECK:       scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args
// The weights moved: (expert, GPU) pairs off the native GPU with tokens.
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args
// CHECK:   scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args
// CHECK: return
moe.balance @llep(%loads: tensor<16xi32>)
    -> (plan: tensor<16x4xi32>, before: tensor<4xf32>, after: tensor<4xf32>,
        moved: tensor<1xi32>) attributes {experts = 16} {
  %a = moe.knob "capacity_factor" = 1.1 : f32
  %m = moe.knob "min_chunk" = 16 : i64
  %t = moe.knob "threshold" = 1.3 : f32
  %plan, %b, %after, %moved = moe.least_loaded %loads capacity_factor(%a : f32)
      min_chunk(%m : i64) threshold(%t : f32) gpus = 4
      : tensor<16xi32> -> tensor<16x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
  moe.yield %plan, %b, %after, %moved
      : tensor<16x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
}
