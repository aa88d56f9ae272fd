// Folds and canonicalization patterns of the moe ops. Knobs never fold (their value
// can still be overridden); constants do.
// RUN: moe-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: moe.router @set_algebra
moe.router @set_algebra(%a: !moe.set<8>, %b: !moe.set<8>)
    -> (u1: !moe.set<8>, u2: !moe.set<8>, u3: !moe.set<8>, i1: !moe.set<8>, i2: !moe.set<8>,
        i3: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %none = moe.empty_set : !moe.set<8>
  %all = moe.full_set : !moe.set<8>
  %u1 = moe.union %a, %none : !moe.set<8>
  %u2 = moe.union %a, %a : !moe.set<8>
  %u3 = moe.union %b, %all : !moe.set<8>
  %i1 = moe.intersect %all, %a : !moe.set<8>
  %i2 = moe.intersect %b, %b : !moe.set<8>
  %i3 = moe.intersect %a, %none : !moe.set<8>
  // CHECK: %[[NONE:.*]] = moe.empty_set
  // CHECK: %[[ALL:.*]] = moe.full_set
  // CHECK-NOT: moe.union
  // CHECK-NOT: moe.intersect
  // CHECK: moe.yield %a, %a, %[[ALL]], %a, %b, %[[NONE]]
  moe.yield %u1, %u2, %u3, %i1, %i2, %i3
      : !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>
}

// -----

// CHECK-LABEL: moe.router @trivial_fills
moe.router @trivial_fills(%s: tensor<8xf32>, %init: !moe.set<8>,
                          %placement: !moe.placement<experts = 8, devices = 2, slots = 8>)
    -> (a: !moe.set<8>, b: !moe.set<8>, c: !moe.set<8>, d: !moe.set<8>, e: !moe.set<8>,
        f: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %zero = arith.constant 0 : i64
  %fzero = arith.constant 0.0 : f32
  %all = moe.full_set : !moe.set<8>
  %a = moe.fill %init with %s budget(%zero : i64) : tensor<8xf32> -> !moe.set<8>
  %b = moe.fill %init with %s threshold(%fzero : f32) : tensor<8xf32> -> !moe.set<8>
  %c = moe.fill %init with %s min_size(%zero : i64) : tensor<8xf32> -> !moe.set<8>
  %d = moe.fill_per_device %init with %s on %placement budget(%zero : i64)
      : tensor<8xf32>, !moe.placement<experts = 8, devices = 2, slots = 8> -> !moe.set<8>
  %e = moe.drop_lowest %init by %s, %zero : tensor<8xf32> -> !moe.set<8>
  %five = arith.constant 5 : i64
  %f = moe.fill %all with %s budget(%five : i64) : tensor<8xf32> -> !moe.set<8>
  // CHECK-NOT: moe.fill
  // CHECK-NOT: moe.drop_lowest
  // CHECK: %[[ALL:.*]] = moe.full_set
  // CHECK: moe.yield %init, %init, %init, %init, %init, %[[ALL]]
  moe.yield %a, %b, %c, %d, %e, %f
      : !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>, !moe.set<8>
}

// -----

// A knob is not a constant: `budget = 0` as a knob default must not fold.
// CHECK-LABEL: moe.router @knobs_do_not_fold
moe.router @knobs_do_not_fold(%s: tensor<8xf32>, %init: !moe.set<8>) -> (a: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %budget = moe.knob "budget" = 0 : i64
  // CHECK: moe.fill %init with %s budget(%budget : i64)
  %a = moe.fill %init with %s budget(%budget : i64) : tensor<8xf32> -> !moe.set<8>
  moe.yield %a : !moe.set<8>
}

// -----

// CHECK-LABEL: moe.router @warmup
moe.router @warmup(%p: tensor<?x8xf32>, %q: tensor<4x8xf32>)
    -> (none: !moe.set<8>, all_static: !moe.set<8>, all_dynamic: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %zero = arith.constant 0 : i64
  %eight = arith.constant 8 : i64
  // k0 = 0 selects nothing.
  %none = moe.union_topk %p, %zero : tensor<?x8xf32> -> !moe.set<8>
  // k0 = E selects everything, but only when the batch is known not to be empty.
  %all_static = moe.union_topk %q, %eight : tensor<4x8xf32> -> !moe.set<8>
  %all_dynamic = moe.union_topk %p, %eight : tensor<?x8xf32> -> !moe.set<8>
  // CHECK-DAG: %[[NONE:.*]] = moe.empty_set : !moe.set<8>
  // CHECK-DAG: %[[ALL:.*]] = moe.full_set : !moe.set<8>
  // CHECK-DAG: %[[DYN:.*]] = moe.union_topk %p
  // CHECK: moe.yield %[[NONE]], %[[ALL]], %[[DYN]]
  moe.yield %none, %all_static, %all_dynamic : !moe.set<8>, !moe.set<8>, !moe.set<8>
}

// -----

// CHECK-LABEL: moe.router @identities
moe.router @identities(%x: tensor<?x8xf32>, %resident: !moe.set<8>)
    -> (a: tensor<?x8xf32>, b: tensor<?x8xf32>, c: tensor<?x8xf32>, d: tensor<?x8xf32>,
        e: tensor<?x8xf32>)
    attributes {experts = 8, top_k = 2} {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %all = moe.full_set : !moe.set<8>
  %none = moe.empty_set : !moe.set<8>
  %bonus = arith.constant 0.5 : f32
  %a = moe.mask %x, %all : tensor<?x8xf32>, !moe.set<8>
  %b = moe.scale %x, %one : tensor<?x8xf32>
  %c = moe.bias_resident %x, %resident, %zero : tensor<?x8xf32>, !moe.set<8>
  %d = moe.bias_resident %x, %none, %bonus : tensor<?x8xf32>, !moe.set<8>
  // Keeping every group limits nothing.
  %e = moe.group_limit %x groups = 4 keep = 4 : tensor<?x8xf32>
  // CHECK-NOT: moe.mask
  // CHECK-NOT: moe.scale
  // CHECK-NOT: moe.bias_resident
  // CHECK-NOT: moe.group_limit
  // CHECK: moe.yield %x, %x, %x, %x, %x
  moe.yield %a, %b, %c, %d, %e
      : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// CHECK-LABEL: moe.router @reductions
moe.router @reductions(%x: tensor<?x8xf32>)
    -> (a: tensor<8xf32>, b: tensor<8xi32>) attributes {experts = 8, top_k = 2} {
  // A sum over every token's top-E is the plain sum.
  // CHECK: moe.batch_reduce sum %x : tensor<?x8xf32> -> tensor<8xf32>
  %a = moe.batch_reduce sum %x over topk = 8 : tensor<?x8xf32> -> tensor<8xf32>
  // A count keeps its top-k: it is defined by it.
  // CHECK: moe.batch_reduce count %x over topk = 8
  %b = moe.batch_reduce count %x over topk = 8 : tensor<?x8xf32> -> tensor<8xi32>
  moe.yield %a, %b : tensor<8xf32>, tensor<8xi32>
}

// -----

// CHECK-LABEL: moe.router @route_within_everything
moe.router @route_within_everything(%x: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %all = moe.full_set : !moe.set<8>
  // CHECK: moe.route %x k = 2 renormalize : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %ids, %w = moe.route %x within %all k = 2 renormalize
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// max_tokens = 0: no batch qualifies, the gate is its else region.
// CHECK-LABEL: moe.router @never_gated
moe.router @never_gated(%x: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  // CHECK-NOT: moe.when
  // CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route %x k = 2 renormalize
  // CHECK: moe.yield %[[IDS]], %[[W]]
  %ids, %w = moe.when %x : tensor<?x8xf32> max_tokens = 0
      -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %a, %b = moe.route %x k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %a, %b = moe.route %x k = 2 renormalize : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  }
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
