// moe-form-stages groups a policy's ops into token / batch / select / route stages.
// RUN: moe-opt %s --moe-form-stages -split-input-file | FileCheck %s

// XShare: one token stage, one batch stage (warm-up and mass share it), one select
// stage, one route stage with the per-expert outputs.
// CHECK-LABEL: moe.router @xshare
// CHECK:      %[[K0:.*]] = moe.knob "k0"
// CHECK:      %[[M:.*]] = moe.knob "budget"
// CHECK:      %[[P:.*]] = moe.stage token -> (tensor<?x16xf32>) {
// CHECK-NEXT:   moe.softmax
// CHECK-NEXT:   moe.yield
// CHECK:      %[[B:.*]]:2 = moe.stage batch -> (!moe.set<16>, tensor<16xf32>) {
// CHECK-NEXT:   moe.union_topk
// CHECK-NEXT:   moe.batch_reduce sum
// CHECK-NEXT:   moe.yield
// CHECK:      %[[S:.*]] = moe.stage select -> (!moe.set<16>) {
// CHECK-NEXT:   moe.fill %[[B]]#0 with %[[B]]#1 budget(%[[M]] : i64)
// CHECK:      moe.stage route -> (tensor<?x2xi32>, tensor<?x2xf32>, tensor<16xi32>) {
// CHECK-NEXT:   moe.route %logits within %[[S]] weights(%[[P]] : tensor<?x16xf32>)
// CHECK-NEXT:   moe.expert_counts
// CHECK-NEXT:   moe.yield
moe.router @xshare(%logits: tensor<?x16xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, selected: !moe.set<16>,
        expert_counts: tensor<16xi32>)
    attributes {experts = 16, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %p = moe.softmax %logits : tensor<?x16xf32>
  %warm = moe.union_topk %logits, %k0 : tensor<?x16xf32> -> !moe.set<16>
  %budget = moe.knob "budget" = 4 : i64
  %mass = moe.batch_reduce sum %p : tensor<?x16xf32> -> tensor<16xf32>
  %sel = moe.fill %warm with %mass budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %ids, %w = moe.route %logits within %sel weights(%p : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  moe.yield %ids, %w, %sel, %counts
      : tensor<?x2xi32>, tensor<?x2xf32>, !moe.set<16>, tensor<16xi32>
}

// -----

// Interleaved per-token ops fuse into one token stage even when a batch op sits
// between them in the source; values used only inside the stage are not results.
// CHECK-LABEL: moe.router @interleaved
// CHECK:      %[[T:.*]]:2 = moe.stage token -> (tensor<?x8xf32>, tensor<?x8xf32>) {
// CHECK-NEXT:   %[[S:.*]] = moe.sigmoid %x
// CHECK-NEXT:   %[[B:.*]] = moe.add_bias %[[S]], %bias
// CHECK-NEXT:   moe.group_limit %[[B]]
// CHECK-NEXT:   moe.yield
// CHECK:      moe.stage batch
// CHECK-NEXT:   moe.batch_reduce sum %[[T]]#0
// CHECK:      moe.stage route
moe.router @interleaved(%x: tensor<?x8xf32>, %bias: tensor<8xf32>)
    -> (mass: tensor<8xf32>, topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %s = moe.sigmoid %x : tensor<?x8xf32>
  %mass = moe.batch_reduce sum %s : tensor<?x8xf32> -> tensor<8xf32>
  %b = moe.add_bias %s, %bias : tensor<?x8xf32>, tensor<8xf32>
  %g = moe.group_limit %b groups = 4 keep = 2 : tensor<?x8xf32>
  %ids, %w = moe.route %g weights(%s : tensor<?x8xf32>) k = 2
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %mass, %ids, %w : tensor<8xf32>, tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A batch reduction never shares a stage with the producer of its input: the second
// reduction reads the first one's per-request rows.
// CHECK-LABEL: moe.router @chained_reductions
// CHECK:      moe.stage batch
// CHECK-NEXT:   moe.segment_reduce
// CHECK-NEXT:   moe.yield
// CHECK:      moe.stage batch
// CHECK-NEXT:   moe.batch_reduce max
moe.router @chained_reductions(%x: tensor<?x8xf32>, %r: tensor<?xi32>)
    -> (peak: tensor<8xf32>) attributes {experts = 8, top_k = 2} {
  %per_request = moe.segment_reduce sum %x by %r : tensor<?x8xf32>, tensor<?xi32>
  %peak = moe.batch_reduce max %per_request : tensor<?x8xf32> -> tensor<8xf32>
  moe.yield %peak : tensor<8xf32>
}

// -----

// Phase-gate regions are staged on their own.
// CHECK-LABEL: moe.router @gated
// CHECK:      moe.when
// CHECK:        moe.stage route
// CHECK:      } else {
// CHECK:        moe.stage token
// CHECK:        moe.stage route
moe.router @gated(%x: tensor<?x8xf32>, %phase: i32)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.when %x : tensor<?x8xf32> phase(%phase : i32) max_tokens = 16
      phases = [decode] -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %a, %b = moe.route %x k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %p = moe.softmax %x : tensor<?x8xf32>
    %a, %b = moe.route %p k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  }
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// Scalar arithmetic on knobs and the token count goes before the stages with the
// knobs, so it does not split the route stage (capacity admission joins the routing).
// CHECK-LABEL: moe.router @capacity_arith
// CHECK:      moe.knob "per"
// CHECK-NEXT: moe.num_tokens
// CHECK-NEXT: arith.ceildivsi
// CHECK-NEXT: moe.stage token
// CHECK:      moe.stage route
// CHECK-NEXT:   moe.route
// CHECK-NEXT:   moe.capacity
// CHECK-NEXT:   moe.yield
moe.router @capacity_arith(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %per = moe.knob "per" = 3 : i64
  %t = moe.num_tokens : i64
  %c = arith.ceildivsi %t, %per : i64
  %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %kept, %kw : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A row op never joins the stage of a whole op it reads: the stage's token loop runs
// before its whole ops. Capacity-aware admission masks the scores the route then reads,
// so the route opens a second route stage (with the counts and the alignment).
// CHECK-LABEL: moe.router @admit_then_route
// CHECK:      %[[A:.*]] = moe.stage route -> (tensor<?x8xf32>) {
// CHECK-NEXT:   moe.admit
// CHECK-NEXT:   moe.yield
// CHECK:      moe.stage route
// CHECK-NEXT:   moe.route %[[A]]
// CHECK-NEXT:   moe.expert_counts
// CHECK-NEXT:   moe.yield
moe.router @admit_then_route(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, counts: tensor<8xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.0 : f32
  %p = moe.softmax %logits : tensor<?x8xf32>
  %admitted = moe.admit %p capacity_factor(%cf : f32) k = 2 : tensor<?x8xf32>
  %ids, %w = moe.route %admitted k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  moe.yield %ids, %counts : tensor<?x2xi32>, tensor<8xi32>
}

// -----

// METRO: the replica choice reads the route's counts (after its token loop) and the
// remap reads the choice, so the remap is a route stage of its own.
// CHECK-LABEL: moe.router @metro_remap
// CHECK:      moe.stage route
// CHECK-NEXT:   moe.route
// CHECK-NEXT:   moe.expert_counts
// CHECK-NEXT:   moe.metro_replicas
// CHECK-NEXT:   moe.yield
// CHECK:      moe.stage route
// CHECK-NEXT:   moe.remap_physical
// CHECK-NEXT:   moe.yield
moe.router @metro_remap(%logits: tensor<?x8xf32>,
                        %placement: !moe.placement<experts = 8, devices = 4, slots = 12>)
    -> (physical_ids: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %slots, %per_gpu = moe.metro_replicas %counts on %placement
      : tensor<8xi32>, !moe.placement<experts = 8, devices = 4, slots = 12>
      -> tensor<8xi32>, tensor<4xi32>
  %phys = moe.remap_physical %ids, %placement replicas(%slots : tensor<8xi32>)
      : tensor<?x2xi32>, !moe.placement<experts = 8, devices = 4, slots = 12>
  moe.yield %phys : tensor<?x2xi32>
}
