// moe-lower-to-loops on the containers (RouterLowering.cpp): a moe.router, moe.balance,
// moe.residency or moe.prefetch becomes func.func @name(%T: index, inputs...,
// outputs..., knobs...) on memrefs, described parameter by parameter by #moe.abi;
// knobs left tunable are scalar parameters after the outputs (moe-freeze-knobs turns
// them into constants); a phase gate (moe.when) is an scf.if whose branches write shared
// buffers; moe-form-stages' stages set the loops (consecutive token-loop stages share
// one token loop on the host, one loop each in the lane-parallel form); moe.num_tokens
// and scalar arith are cloned. On the GPU the tunable knobs are one i8 struct buffer.
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s
// RUN: moe-opt %s --moe-freeze-knobs --moe-form-stages --moe-lower-to-loops --canonicalize | FileCheck %s --check-prefix=FROZEN
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize | FileCheck %s --check-prefix=LANES
// RUN: moe-opt %s --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=GPU
// RUN: moe-opt %s --moe-freeze-knobs --moe-form-stages --moe-lower-to-loops="lane-parallel=true" --canonicalize --moe-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=GPUFROZEN

// The signature and its ABI: T, then the inputs in order (a set as i8 flags, a placement
// as two buffers), then the outputs; T-sized tensors carry the size rule [a, b, d]
// (ceil((a*T + b) / d)): [1, 0, 1] for [T, ...], [2, 24, 1] and [2, 24, 4] for
// align_blocks' padded outputs; ids read as expert ids carry values/id_bound.
// CHECK-LABEL: func.func @abi(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[ALLOWED:[a-z0-9]+]]: memref<8xi8>,
// CHECK-SAME: %[[REPLICAS:[a-z0-9]+]]: memref<8xi32>, %[[L2P:[a-z0-9]+]]: memref<8x5xi32>,
// CHECK-SAME: %[[SORTED:[a-z0-9]+]]: memref<?xi32>, %[[BLOCKS:[a-z0-9]+]]: memref<?xi32>, %{{.*}}: memref<1xi32>, %[[PHYS:[a-z0-9]+]]: memref<?x2xi32>, %[[SELECTED:[a-z0-9]+]]: memref<8xi8>)
// CHECK-SAME: attributes {moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens, type = index>,
// CHECK-SAME: #moe.param<name = "logits", role = in, kind = tensor, type = memref<?x8xf32>, size = [1, 0, 1]>,
// CHECK-SAME: #moe.param<name = "ids_in", role = in, kind = tensor, type = memref<?x2xi32>, size = [1, 0, 1], values = "expert_ids", id_bound = 8>,
// CHECK-SAME: #moe.param<name = "allowed", role = in, kind = set, type = memref<8xi8>>,
// CHECK-SAME: #moe.param<name = "placement.replica_count", role = in, kind = placement_replicas, type = memref<8xi32>>,
// CHECK-SAME: #moe.param<name = "placement.log2phy", role = in, kind = placement_log2phy, type = memref<8x5xi32>>,
// CHECK-SAME: #moe.param<name = "sorted_token_ids", role = out, kind = tensor, type = memref<?xi32>, size = [2, 24, 1]>,
// CHECK-SAME: #moe.param<name = "expert_ids", role = out, kind = tensor, type = memref<?xi32>, size = [2, 24, 4]>,
// CHECK-SAME: #moe.param<name = "num_tokens_post_padded", role = out, kind = tensor, type = memref<1xi32>>,
// CHECK-SAME: #moe.param<name = "physical_ids", role = out, kind = tensor, type = memref<?x2xi32>, size = [1, 0, 1]>,
// CHECK-SAME: #moe.param<name = "selected", role = out, kind = set, type = memref<8xi8>>]>,
// CHECK-SAME: moe.experts = 8 : i64, moe.kind = "router", moe.top_k = 2 : i64}
// CHECK-NOT: = moe.
// The route stage: its row op (the remap) in the token loop first, then the whole ops
// (counts, alignment). Outputs are written in place; the counts only the alignment
// reads are a temporary.
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   memref.load %[[REPLICAS]]
// CHECK:   memref.load %[[L2P]]
// CHECK:   memref.store %{{.*}}, %[[PHYS]][%[[TOK]], %{{.*}}] : memref<?x2xi32>
// CHECK: %[[COUNTS:.*]] = memref.alloc() : memref<8xi32>
// CHECK: memref.atomic_rmw addi %c1_i32, %[[COUNTS]]
// CHECK: memref.store %{{.*}}, %[[SORTED]]
// CHECK: memref.store %{{.*}}, %[[BLOCKS]]
// An input returned as an output is copied at the end.
// CHECK: scf.for %[[E:.*]] = %c0 to %c8 step %c1 {
// CHECK:   %[[F:.*]] = memref.load %[[ALLOWED]][%[[E]]] : memref<8xi8>
// CHECK:   memref.store %[[F]], %[[SELECTED]][%[[E]]] : memref<8xi8>
// CHECK: memref.dealloc %[[COUNTS]]
// CHECK: return
moe.router @abi(%logits: tensor<?x8xf32>, %ids_in: tensor<?x2xi32>, %allowed: !moe.set<8>,
                %placement: !moe.placement<experts = 8, devices = 2, slots = 12>)
    -> (sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>, physical_ids: tensor<?x2xi32>, selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %counts = moe.expert_counts %ids_in : tensor<?x2xi32> -> tensor<8xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids_in, %counts block_size = 4
      : tensor<?x2xi32>, tensor<8xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  %phys = moe.remap_physical %ids_in, %placement
      : tensor<?x2xi32>, !moe.placement<experts = 8, devices = 2, slots = 12>
  moe.yield %sorted, %blocks, %padded, %phys, %allowed
      : tensor<?xi32>, tensor<?xi32>, tensor<1xi32>, tensor<?x2xi32>, !moe.set<8>
}

// A phase gate (decode or mixed, at most 16 tokens): the phase is a scalar input with
// the "phase" value rule; T <= 16 and (phase == 1 or phase == 2); the gated result read
// after the gate gets a [T, 2] buffer before the scf.if that both branches write; each
// branch allocates and frees its own temporaries (the softmax row only in the else).
// CHECK-LABEL: func.func @gate(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %[[PHASE:[a-z0-9]+]]: i32, %[[COUNTS:[a-z0-9]+]]: memref<8xi32>)
// CHECK-SAME: #moe.param<name = "phase", role = in, kind = scalar, type = i32, values = "phase">
// CHECK: %[[SMALL:.*]] = arith.cmpi ule, %[[T]], %c16 : index
// CHECK: %[[DECODE:.*]] = arith.cmpi eq, %[[PHASE]], %c1_i32 : i32
// CHECK: %[[MIXED:.*]] = arith.cmpi eq, %[[PHASE]], %c2_i32 : i32
// CHECK: %[[ANY:.*]] = arith.ori %[[DECODE]], %[[MIXED]] : i1
// CHECK: %[[COND:.*]] = arith.andi %[[SMALL]], %[[ANY]] : i1
// CHECK: %[[IDS:.*]] = memref.alloc(%[[T]]) : memref<?x2xi32>
// CHECK: scf.if %[[COND]] {
// CHECK:   %[[A1:.*]] = memref.alloc(%[[T]]) : memref<?x2xf32>
// CHECK:   scf.parallel
// CHECK-NOT: math.exp
// CHECK:     memref.store %{{.*}}, %[[IDS]][%{{.*}}, %{{.*}}] : memref<?x2xi32>
// CHECK-NOT: math.exp
// CHECK:   memref.dealloc %[[A1]]
// CHECK-NOT: math.exp
// CHECK: } else {
// CHECK:   %[[P:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK:   scf.parallel
// CHECK:     math.exp
// CHECK:     memref.store %{{.*}}, %[[IDS]][%{{.*}}, %{{.*}}] : memref<?x2xi32>
// CHECK:   memref.dealloc %[[P]]
// CHECK: }
// After the gate: the counts of the shared buffer, into the output.
// CHECK: scf.parallel
// CHECK:   memref.load %[[IDS]]
// CHECK:   memref.atomic_rmw addi %c1_i32, %[[COUNTS]]
// CHECK: memref.dealloc %[[IDS]]
moe.router @gate(%logits: tensor<?x8xf32>, %phase: i32)
    -> (expert_counts: tensor<8xi32>) attributes {experts = 8, top_k = 2} {
  %ids, %w = moe.when %logits : tensor<?x8xf32> phase(%phase : i32) max_tokens = 16
      phases = [decode, mixed] -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %a, %b = moe.route %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %p = moe.softmax %logits : tensor<?x8xf32>
    %a, %b = moe.route %p k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  }
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  moe.yield %counts : tensor<8xi32>
}

// Stages: a token stage (softmax) then a route stage. On the host they share ONE token
// loop (the softmax row, read across stages, still in a [T, 8] buffer); the
// lane-parallel form keeps one token loop per stage.
// CHECK-LABEL: func.func @stages(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>, %[[W:[a-z0-9]+]]: memref<?x2xf32>)
// CHECK: %[[P:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// CHECK: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// CHECK:   math.exp
// CHECK:   memref.store %{{.*}}, %[[P]][%[[TOK]], %{{.*}}] : memref<?x8xf32>
// CHECK-NOT: scf.parallel
// CHECK:   memref.load %[[P]][%[[TOK]], %{{.*}}] : memref<?x8xf32>
// CHECK:   memref.store %{{.*}}, %[[IDS]][%[[TOK]], %{{.*}}] : memref<?x2xi32>
// CHECK:   memref.store %{{.*}}, %[[W]][%[[TOK]], %{{.*}}] : memref<?x2xf32>
// CHECK: memref.dealloc %[[P]]
// LANES-LABEL: func.func @stages(
// LANES-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x8xf32>, %[[IDS:[a-z0-9]+]]: memref<?x2xi32>,
// LANES: %[[P:.*]] = memref.alloc(%[[T]]) : memref<?x8xf32>
// LANES: scf.parallel (%[[TOK:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// LANES:   math.exp
// LANES:   memref.store %{{.*}}, %[[P]][%[[TOK]], %{{.*}}] : memref<?x8xf32>
// LANES: scf.parallel (%[[TOK2:.*]]) = (%c0) to (%[[T]]) step (%c1) {
// LANES-NOT: math.exp
// LANES:   memref.load %[[P]][%[[TOK2]], %{{.*}}] : memref<?x8xf32>
// LANES:   memref.store %{{.*}}, %[[IDS]][%[[TOK2]], %{{.*}}] : memref<?x2xi32>
// LANES: memref.dealloc %[[P]]
moe.router @stages(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %p k = 2 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// moe.num_tokens is T as i64; scalar arith on it and on knobs is cloned; the result
// feeds the capacity, clamped to [0, T*2].
// CHECK-LABEL: func.func @scalars(
// CHECK-SAME: %[[T:[a-z0-9]+]]: index, {{.*}}, %[[PER:[a-z0-9]+]]: i64)
// CHECK-SAME: #moe.param<name = "per", role = knob, kind = scalar, type = i64, default_value = 3 : i64, rules = []>
// CHECK: %[[T64:.*]] = arith.index_cast %[[T]] : index to i64
// CHECK: %[[C:.*]] = arith.ceildivsi %[[T64]], %[[PER]] : i64
// CHECK: arith.cmpi slt, %[[C]], %c0_i64 : i64
// FROZEN-LABEL: func.func @scalars(
// FROZEN-SAME: %[[T:[a-z0-9]+]]: index, %{{.*}}: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>, %{{.*}}: memref<?x2xi32>)
// FROZEN-SAME: #moe.param<name = "kept_ids", role = out, kind = tensor, type = memref<?x2xi32>, size = [1, 0, 1]>]>
// FROZEN: %[[T64:.*]] = arith.index_cast %[[T]] : index to i64
// FROZEN: arith.ceildivsi %[[T64]], %c3_i64 : i64
moe.router @scalars(%ids: tensor<?x2xi32>, %w: tensor<?x2xf32>)
    -> (kept_ids: tensor<?x2xi32>) attributes {experts = 8, top_k = 2} {
  %per = moe.knob "per" = 3 : i64
  %t = moe.num_tokens : i64
  %c = arith.ceildivsi %t, %per : i64
  %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity(%c : i64)
      : tensor<?x2xi32>, tensor<?x2xf32>
      -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  moe.yield %kept : tensor<?x2xi32>
}

// A rule container: the same calling convention (T first), moe.kind from the container,
// top_k 0, no status result without run-time rules (lower-rule-ops.mlir has one).
// CHECK-LABEL: func.func @rule(
// CHECK-SAME: %{{.*}}: index, %[[LOADS:[a-z0-9]+]]: memref<8xf32>, %[[RATIO:[a-z0-9]+]]: memref<1xf32>) attributes
// CHECK-SAME: #moe.param<name = "loads", role = in, kind = tensor, type = memref<8xf32>>
// CHECK-SAME: moe.experts = 8 : i64, moe.kind = "balance", moe.top_k = 0 : i64}
// CHECK-NOT: scf.parallel
// CHECK: memref.store %{{.*}}, %[[RATIO]][%c0] : memref<1xf32>
// CHECK-NEXT: return{{$}}
moe.balance @rule(%loads: tensor<8xf32>) -> (ratio: tensor<1xf32>) attributes {experts = 8} {
  %r = moe.imbalance %loads : tensor<8xf32> -> tensor<1xf32>
  moe.yield %r : tensor<1xf32>
}

// Knobs: run-time scalar parameters after the outputs, in order, each described with
// its default and the rules of the ops that use it; frozen, they are constants and the
// signature has none. On the GPU the tunable knobs are ONE i8 buffer (the C knob
// struct: the f32 at 0, the i64 at 8) before the workspace, each read at the kernel's
// entry with its default when the buffer is empty; frozen, no knob buffer.
// CHECK-LABEL: func.func @knobs(
// CHECK-SAME: %{{.*}}: memref<?x2xf32>, %[[SCALE:[a-z0-9]+]]: f32, %[[BUDGET:[a-z0-9]+]]: i64)
// CHECK-SAME: #moe.param<name = "scale", role = knob, kind = scalar, type = f32, default_value = 5.000000e-01 : f32, rules = [#moe.rule<text = "scale must be finite and > 0", op = "scaled_by of moe.route at {{[^"]*}}"
// CHECK-SAME: #moe.param<name = "budget", role = knob, kind = scalar, type = i64, default_value = 3 : i64, rules = [#moe.rule<text = "budget must be in [0, inf]", op = "moe.fill at {{[^"]*}}", lo = 0>]>]>
// CHECK: arith.cmpi slt, %[[BUDGET]], %c0_i64 : i64
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// FROZEN-LABEL: func.func @knobs(
// FROZEN-SAME: %{{.*}}: memref<?x2xi32>, %{{.*}}: memref<?x2xf32>) attributes
// FROZEN-NOT: role = knob
// FROZEN-DAG: %[[THREE:.*]] = arith.constant 3 : index
// FROZEN-DAG: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// FROZEN: scf.while
// FROZEN:   arith.cmpi ult, %{{.*}}, %[[THREE]] : index
// FROZEN: scf.for %{{.*}} = %c0 to %[[THREE]] step %c1 {
// FROZEN: arith.mulf %{{.*}}, %[[HALF]] : f32
// GPU-LABEL: gpu.func @knobs(
// GPU-SAME: %{{.*}}: memref<?x2xf32>, %[[KNOBS:[a-z0-9]+]]: memref<?xi8>, %{{.*}}: memref<?xi8>)
// GPU: %[[SIZE:.*]] = memref.dim %[[KNOBS]], %c0
// GPU: %[[GIVEN:.*]] = arith.cmpi ne, %[[SIZE]], %c0
// GPU: scf.if %[[GIVEN]] -> (f32) {
// GPU:   memref.view %[[KNOBS]][%c0{{.*}}][] : memref<?xi8> to memref<1xf32>
// GPU: } else {
// GPU:   arith.constant 5.000000e-01 : f32
// GPU: scf.if %[[GIVEN]] -> (i64) {
// GPU:   memref.view %[[KNOBS]][%c8{{.*}}][] : memref<?xi8> to memref<1xi64>
// GPU: } else {
// GPU:   arith.constant 3 : i64
// GPU: gpu.thread_id x
// GPUFROZEN-LABEL: gpu.func @knobs(
// GPUFROZEN-SAME: %{{.*}}: memref<?x2xf32>, %{{.*}}: memref<?xi8>) workgroup
// GPUFROZEN-NOT: memref.dim
// GPUFROZEN: gpu.thread_id x
// GPUFROZEN: arith.constant 5.000000e-01 : f32
// GPUFROZEN: gpu.return
moe.router @knobs(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %scale = moe.knob "scale" = 0.5 : f32
  %budget = moe.knob "budget" = 3 : i64
  %none = moe.empty_set : !moe.set<8>
  %mass = moe.batch_reduce sum %logits : tensor<?x8xf32> -> tensor<8xf32>
  %sel = moe.fill %none with %mass budget(%budget : i64) : tensor<8xf32> -> !moe.set<8>
  %ids, %w = moe.route %logits within %sel k = 2 scaled_by(%scale : f32)
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
