// Every moe op and type prints in its custom form and parses back to the same IR, and
// the generic form parses back to the same IR too.
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s

// CHECK-LABEL: moe.router @token_ops
// CHECK-SAME: (%logits: tensor<?x16xf32>, %bias: tensor<16xf32>, %resident: !moe.set<16>)
// CHECK-SAME: -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, bins: tensor<?x16xi32>, values: tensor<?x3xf32>)
// CHECK-SAME: attributes {experts = 16 : i64, shared_experts = 2 : i64, top_k = 2 : i64}
moe.router @token_ops(%logits: tensor<?x16xf32>, %bias: tensor<16xf32>, %resident: !moe.set<16>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, bins: tensor<?x16xi32>,
        values: tensor<?x3xf32>)
    attributes {experts = 16, top_k = 2, shared_experts = 2} {
  // CHECK: %[[ALPHA:.*]] = moe.knob "alpha" = 2.000000e+00 : f32
  // CHECK: %[[BETA:.*]] = moe.knob "beta" = 4 : i64
  // CHECK: %[[BONUS:.*]] = moe.knob "bonus" = 5.000000e-02 : f32
  // CHECK: %[[TEMP:.*]] = arith.constant 5.000000e-01 : f32
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  %bonus = moe.knob "bonus" = 0.05 : f32
  %temp = arith.constant 0.5 : f32
  // CHECK: %[[P:.*]] = moe.softmax %logits : tensor<?x16xf32>
  %p = moe.softmax %logits : tensor<?x16xf32>
  // CHECK: %[[S:.*]] = moe.sigmoid %logits : tensor<?x16xf32>
  %s = moe.sigmoid %logits : tensor<?x16xf32>
  // CHECK: %[[B:.*]] = moe.add_bias %[[S]], %bias : tensor<?x16xf32>, tensor<16xf32>
  %b = moe.add_bias %s, %bias : tensor<?x16xf32>, tensor<16xf32>
  // CHECK: %[[SC:.*]] = moe.scale %[[B]], %[[TEMP]] : tensor<?x16xf32>
  %sc = moe.scale %b, %temp : tensor<?x16xf32>
  // CHECK: %[[G:.*]] = moe.group_limit %[[SC]] groups = 4 keep = 2 : tensor<?x16xf32>
  %g = moe.group_limit %sc groups = 4 keep = 2 : tensor<?x16xf32>
  // CHECK: moe.group_limit %[[SC]] groups = 4 keep = 3 group_topk = 1 : tensor<?x16xf32>
  %g1 = moe.group_limit %sc groups = 4 keep = 3 group_topk = 1 : tensor<?x16xf32>
  // CHECK: %[[V:.*]], %[[I:.*]] = moe.topk %[[G]] k = 3 : tensor<?x16xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  %v, %i = moe.topk %g k = 3 : tensor<?x16xf32> -> tensor<?x3xf32>, tensor<?x3xi32>
  // CHECK: %[[BINS:.*]] = moe.bins %logits, %[[ALPHA]], %[[BETA]] : tensor<?x16xf32> -> tensor<?x16xi32>
  %bins = moe.bins %logits, %alpha, %beta : tensor<?x16xf32> -> tensor<?x16xi32>
  // CHECK: %[[M:.*]] = moe.mask %[[P]], %resident : tensor<?x16xf32>, !moe.set<16>
  %m = moe.mask %p, %resident : tensor<?x16xf32>, !moe.set<16>
  // CHECK: %[[R:.*]] = moe.bias_resident %[[M]], %resident, %[[BONUS]] : tensor<?x16xf32>, !moe.set<16>
  %r = moe.bias_resident %m, %resident, %bonus : tensor<?x16xf32>, !moe.set<16>
  // CHECK: %topk_ids, %topk_weights = moe.route %[[R]] weights(%[[P]] : tensor<?x16xf32>) k = 2 renormalize scaling = 2.500000e+00 : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %ids, %w = moe.route %r weights(%p : tensor<?x16xf32>) k = 2 renormalize scaling = 2.5
      : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  // CHECK: moe.yield %topk_ids, %topk_weights, %[[BINS]], %[[V]] : tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x16xi32>, tensor<?x3xf32>
  moe.yield %ids, %w, %bins, %v : tensor<?x2xi32>, tensor<?x2xf32>, tensor<?x16xi32>, tensor<?x3xf32>
}

// CHECK-LABEL: moe.router @batch_and_set_ops
// CHECK-SAME: %placement: !moe.placement<experts = 16, devices = 4, slots = 20>
moe.router @batch_and_set_ops(%logits: tensor<?x16xf32>, %request_ids: tensor<?xi32>,
                              %placement: !moe.placement<experts = 16, devices = 4, slots = 20>)
    -> (selected: !moe.set<16>, hits: tensor<16xi32>, peak: tensor<16xf32>,
        per_request: tensor<?x16xf32>, phys: tensor<?x2xi32>, expert_counts: tensor<16xi32>)
    attributes {experts = 16, top_k = 2} {
  %k0 = moe.knob "k0" = 1 : i64
  %m = moe.knob "budget" = 3 : i64
  %tau = moe.knob "tau" = 0.9 : f32
  %theta = moe.knob "theta" = 1.0 : f32
  %two = arith.constant 2 : i64
  %p = moe.softmax %logits : tensor<?x16xf32>
  // CHECK: %[[MASS:.*]] = moe.batch_reduce sum %{{.*}} : tensor<?x16xf32> -> tensor<16xf32>
  %mass = moe.batch_reduce sum %p : tensor<?x16xf32> -> tensor<16xf32>
  // CHECK: moe.batch_reduce max %{{.*}} over topk = 2 : tensor<?x16xf32> -> tensor<16xf32>
  %peak = moe.batch_reduce max %p over topk = 2 : tensor<?x16xf32> -> tensor<16xf32>
  // CHECK: moe.batch_reduce count %{{.*}} over topk = 2 : tensor<?x16xf32> -> tensor<16xi32>
  %hits = moe.batch_reduce count %p over topk = 2 : tensor<?x16xf32> -> tensor<16xi32>
  // CHECK: moe.segment_reduce sum %{{.*}} by %request_ids : tensor<?x16xf32>, tensor<?xi32>
  %req = moe.segment_reduce sum %p by %request_ids : tensor<?x16xf32>, tensor<?xi32>
  // CHECK: moe.segment_reduce max %{{.*}} by %request_ids : tensor<?x16xf32>, tensor<?xi32>
  %req_max = moe.segment_reduce max %req by %request_ids : tensor<?x16xf32>, tensor<?xi32>
  // CHECK: %[[NONE:.*]] = moe.empty_set : !moe.set<16>
  %none = moe.empty_set : !moe.set<16>
  // CHECK: %[[ALL:.*]] = moe.full_set : !moe.set<16>
  %all = moe.full_set : !moe.set<16>
  // CHECK: %[[WARM:.*]] = moe.union_topk %{{.*}}, %k0 : tensor<?x16xf32> -> !moe.set<16>
  %warm = moe.union_topk %p, %k0 : tensor<?x16xf32> -> !moe.set<16>
  // CHECK: moe.fill %[[WARM]] with %[[MASS]] budget(%budget : i64) : tensor<16xf32> -> !moe.set<16>
  %f1 = moe.fill %warm with %mass budget(%m : i64) : tensor<16xf32> -> !moe.set<16>
  // CHECK: moe.fill %{{.*}} with %[[MASS]] threshold(%tau : f32) : tensor<16xf32> -> !moe.set<16>
  %f2 = moe.fill %f1 with %mass threshold(%tau : f32) : tensor<16xf32> -> !moe.set<16>
  // CHECK: moe.fill %{{.*}} with %[[MASS]] min_size(%{{.*}} : i64) : tensor<16xf32> -> !moe.set<16>
  %f3 = moe.fill %f2 with %mass min_size(%two : i64) : tensor<16xf32> -> !moe.set<16>
  // CHECK: moe.fill_per_device %{{.*}} with %[[MASS]] on %placement budget(%budget : i64) : tensor<16xf32>, !moe.placement<experts = 16, devices = 4, slots = 20> -> !moe.set<16>
  %f4 = moe.fill_per_device %f3 with %mass on %placement budget(%m : i64)
      : tensor<16xf32>, !moe.placement<experts = 16, devices = 4, slots = 20> -> !moe.set<16>
  // CHECK: moe.segment_fill %{{.*}} by %request_ids warmup(%k0) budget(%budget) : tensor<?x16xf32>, tensor<?xi32> -> !moe.set<16>
  %sf = moe.segment_fill %p by %request_ids warmup(%k0) budget(%m)
      : tensor<?x16xf32>, tensor<?xi32> -> !moe.set<16>
  // CHECK: moe.threshold_set %[[MASS]], %theta : tensor<16xf32> -> !moe.set<16>
  %ts = moe.threshold_set %mass, %theta : tensor<16xf32> -> !moe.set<16>
  // CHECK: moe.drop_lowest %{{.*}} by %[[MASS]], %{{.*}} : tensor<16xf32> -> !moe.set<16>
  %dl = moe.drop_lowest %sf by %mass, %two : tensor<16xf32> -> !moe.set<16>
  // CHECK: moe.union %{{.*}}, %{{.*}} : !moe.set<16>
  %u = moe.union %f4, %dl : !moe.set<16>
  // CHECK: moe.intersect %{{.*}}, %{{.*}} : !moe.set<16>
  %x = moe.intersect %u, %ts : !moe.set<16>
  %u2 = moe.union %x, %none : !moe.set<16>
  %x2 = moe.intersect %u2, %all : !moe.set<16>
  // CHECK: %topk_ids, %topk_weights = moe.route %{{.*}} within %{{.*}} k = 2 : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  %ids, %w = moe.route %p within %x2 k = 2
      : tensor<?x16xf32>, !moe.set<16> -> tensor<?x2xi32>, tensor<?x2xf32>
  // CHECK: moe.remap_physical %topk_ids, %placement : tensor<?x2xi32>, !moe.placement<experts = 16, devices = 4, slots = 20>
  %phys = moe.remap_physical %ids, %placement
      : tensor<?x2xi32>, !moe.placement<experts = 16, devices = 4, slots = 20>
  // CHECK: moe.expert_counts %topk_ids : tensor<?x2xi32> -> tensor<16xi32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<16xi32>
  moe.yield %x2, %hits, %peak, %req_max, %phys, %counts
      : !moe.set<16>, tensor<16xi32>, tensor<16xf32>, tensor<?x16xf32>, tensor<?x2xi32>, tensor<16xi32>
}

// CHECK-LABEL: moe.router @lynx_ops
moe.router @lynx_ops(%logits: tensor<4x16xf32>) -> (selected: !moe.set<16>, score: tensor<16xf32>)
    attributes {experts = 16, top_k = 2} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 3 : i64
  %v, %i = moe.topk %logits k = 2 : tensor<4x16xf32> -> tensor<4x2xf32>, tensor<4x2xi32>
  %bins = moe.bins %logits, %alpha, %beta : tensor<4x16xf32> -> tensor<4x16xi32>
  // CHECK: moe.bin_score %{{.*}}, %{{.*}} : tensor<4x16xi32>, tensor<4x2xi32> -> tensor<16xf32>
  %score = moe.bin_score %bins, %i : tensor<4x16xi32>, tensor<4x2xi32> -> tensor<16xf32>
  // CHECK: moe.confident_top1 %{{.*}}, %{{.*}} : tensor<4x16xi32>, tensor<4x2xi32> -> !moe.set<16>
  %anchors = moe.confident_top1 %bins, %i : tensor<4x16xi32>, tensor<4x2xi32> -> !moe.set<16>
  moe.yield %anchors, %score : !moe.set<16>, tensor<16xf32>
}

// CHECK-LABEL: moe.router @phase_gate
moe.router @phase_gate(%logits: tensor<?x16xf32>, %phase: i32)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 16, top_k = 2} {
  // CHECK: %{{.*}}:2 = moe.when %logits : tensor<?x16xf32> phase(%phase : i32) max_tokens = 64 phases = [decode, mixed] -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  // CHECK: } else {
  %ids, %w = moe.when %logits : tensor<?x16xf32> phase(%phase : i32) max_tokens = 64
      phases = [decode, mixed] -> (tensor<?x2xi32>, tensor<?x2xf32>) {
    %a, %b = moe.route %logits k = 2 : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  } else {
    %a, %b = moe.route %logits k = 2 renormalize : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
    moe.yield %a, %b : tensor<?x2xi32>, tensor<?x2xf32>
  }
  // A gate on the token count alone, with no results.
  // CHECK: moe.when %logits : tensor<?x16xf32> max_tokens = 8 {
  moe.when %logits : tensor<?x16xf32> max_tokens = 8 {
  } else {
  }
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// Rules: residency (DynaExq), balance (EPLB), prefetch containers and their ops.
// CHECK-LABEL: moe.residency @residency
// CHECK-SAME: (%hotness: tensor<8xf32>, %counts: tensor<8xi32>, %current: !moe.set<8>)
// CHECK-SAME: -> (hot: tensor<8xf32>, hi: !moe.set<8>, up: tensor<8xi32>, n_up: tensor<1xi32>, down: tensor<8xi32>, n_down: tensor<1xi32>, slack: !moe.set<8>)
// CHECK-SAME: attributes {experts = 8 : i64}
// CHECK: %[[S:.*]] = moe.ema %hotness, %counts alpha(%{{.*}} : f32) : tensor<8xf32>, tensor<8xi32>
// CHECK: %[[N:.*]] = moe.hi_capacity budget(%{{.*}} : i64) fixed(%{{.*}} : i64) hi_bytes(%{{.*}} : i64) lo_bytes(%{{.*}} : i64) layers(%{{.*}} : i64) experts = 8 -> i64
// CHECK: %[[H:.*]] = moe.hot_set %[[S]], %current capacity(%[[N]] : i64) margin(%{{.*}} : f32) : tensor<8xf32> -> !moe.set<8>
// CHECK: moe.hot_set %[[S]], %current capacity(%[[N]] : i64) rank_slack(%{{.*}} : i64) : tensor<8xf32> -> !moe.set<8>
// CHECK: %[[UP:.*]] = moe.difference %[[H]], %current : !moe.set<8>
// CHECK: moe.ranked %[[UP]] by %[[S]] : !moe.set<8>, tensor<8xf32> -> tensor<8xi32>, tensor<1xi32>
// CHECK: moe.ranked %{{.*}} by %[[S]] ascending : !moe.set<8>, tensor<8xf32> -> tensor<8xi32>, tensor<1xi32>
moe.residency @residency(%hotness: tensor<8xf32>, %counts: tensor<8xi32>, %current: !moe.set<8>)
    -> (hot: tensor<8xf32>, hi: !moe.set<8>, up: tensor<8xi32>, n_up: tensor<1xi32>,
        down: tensor<8xi32>, n_down: tensor<1xi32>, slack: !moe.set<8>)
    attributes {experts = 8} {
  %alpha = moe.knob "alpha" = 0.8 : f32
  %margin = moe.knob "margin" = 1.0 : f32
  %r = moe.knob "rank_slack" = 2 : i64
  %budget = moe.knob "budget" = 1000000 : i64
  %fixed = arith.constant 1000 : i64
  %hi_b = arith.constant 100 : i64
  %lo_b = arith.constant 25 : i64
  %layers = arith.constant 4 : i64
  %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<8xf32>, tensor<8xi32>
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi_b : i64)
      lo_bytes(%lo_b : i64) layers(%layers : i64) experts = 8 -> i64
  %hi = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
      : tensor<8xf32> -> !moe.set<8>
  %hi2 = moe.hot_set %s, %current capacity(%n : i64) rank_slack(%r : i64)
      : tensor<8xf32> -> !moe.set<8>
  %up = moe.difference %hi, %current : !moe.set<8>
  %down = moe.difference %current, %hi : !moe.set<8>
  %ids, %nu = moe.ranked %up by %s : !moe.set<8>, tensor<8xf32> -> tensor<8xi32>, tensor<1xi32>
  %ids2, %nd = moe.ranked %down by %s ascending : !moe.set<8>, tensor<8xf32>
      -> tensor<8xi32>, tensor<1xi32>
  moe.yield %s, %hi, %ids, %nu, %ids2, %nd, %hi2 : tensor<8xf32>, !moe.set<8>, tensor<8xi32>,
      tensor<1xi32>, tensor<8xi32>, tensor<1xi32>, !moe.set<8>
}

// CHECK-LABEL: moe.balance @balance
// CHECK: moe.eplb %loads groups = 4 nodes = 2 gpus = 4 : tensor<16xf32> -> tensor<24xi32>, tensor<16x9xi32>, tensor<16xi32>
// CHECK: moe.eplb %loads groups = 4 nodes = 2 gpus = 4 global :
// CHECK: moe.device_loads %loads gpus = 4 : tensor<16xf32> -> tensor<4xf32>
// CHECK: moe.device_loads %loads placed(%{{.*}}, %{{.*}} : tensor<24xi32>, tensor<16xi32>) gpus = 4 : tensor<16xf32> -> tensor<4xf32>
// CHECK: moe.imbalance %{{.*}} : tensor<4xf32> -> tensor<1xf32>
moe.balance @balance(%loads: tensor<16xf32>)
    -> (phy2log: tensor<24xi32>, log2phy: tensor<16x9xi32>, count: tensor<16xi32>,
        before: tensor<4xf32>, ratio: tensor<1xf32>, global_p2l: tensor<24xi32>)
    attributes {experts = 16} {
  %p, %l, %c = moe.eplb %loads groups = 4 nodes = 2 gpus = 4
      : tensor<16xf32> -> tensor<24xi32>, tensor<16x9xi32>, tensor<16xi32>
  %gp, %gl, %gc = moe.eplb %loads groups = 4 nodes = 2 gpus = 4 global
      : tensor<16xf32> -> tensor<24xi32>, tensor<16x9xi32>, tensor<16xi32>
  %b = moe.device_loads %loads gpus = 4 : tensor<16xf32> -> tensor<4xf32>
  %a = moe.device_loads %loads placed(%p, %c : tensor<24xi32>, tensor<16xi32>) gpus = 4
      : tensor<16xf32> -> tensor<4xf32>
  %r = moe.imbalance %a : tensor<4xf32> -> tensor<1xf32>
  moe.yield %p, %l, %c, %b, %r, %gp : tensor<24xi32>, tensor<16x9xi32>, tensor<16xi32>,
      tensor<4xf32>, tensor<1xf32>, tensor<24xi32>
}

// CHECK-LABEL: moe.prefetch @prefetch
moe.prefetch @prefetch(%hotness: tensor<8xf32>, %current: !moe.set<8>) -> (next: !moe.set<8>)
    attributes {experts = 8} {
  %n = arith.constant 3 : i64
  %m = arith.constant 0.0 : f32
  %next = moe.hot_set %hotness, %current capacity(%n : i64) margin(%m : f32)
      : tensor<8xf32> -> !moe.set<8>
  moe.yield %next : !moe.set<8>
}

// CHECK-LABEL: moe.router @lookahead
// CHECK: moe.gate %hidden, %weight : tensor<?x32xf32>, tensor<32x16xf32> -> tensor<?x16xf32>
// CHECK: moe.resident_first %{{.*}}, %resident : tensor<?x2xi32>, !moe.set<16> -> tensor<?xi32>, tensor<1xi32>
moe.router @lookahead(%hidden: tensor<?x32xf32>, %weight: tensor<32x16xf32>, %resident: !moe.set<16>)
    -> (ids: tensor<?x2xi32>, order: tensor<?xi32>, ready: tensor<1xi32>)
    attributes {experts = 16, top_k = 2} {
  %logits = moe.gate %hidden, %weight : tensor<?x32xf32>, tensor<32x16xf32> -> tensor<?x16xf32>
  %ids, %w = moe.route %logits k = 2 : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %order, %ready = moe.resident_first %ids, %resident
      : tensor<?x2xi32>, !moe.set<16> -> tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %order, %ready : tensor<?x2xi32>, tensor<?xi32>, tensor<1xi32>
}

// CHECK-LABEL: moe.balance @libra
// CHECK: moe.gpu_requests %ids, %token_gpu gpus = 4 : tensor<?x2xi32>, tensor<?xi32> -> tensor<4x16xi32>
// CHECK: moe.libra_replicate %{{.*}} extra(%{{.*}} : i64) alpha(%{{.*}} : f32) : tensor<4x16xi32> -> tensor<16x4xi32>
// CHECK: moe.libra_shard %{{.*}}, %{{.*}} epsilon(%{{.*}} : f32) : tensor<4x16xi32>, tensor<16x4xi32> -> tensor<4x16xi32>, tensor<4xf32>
// CHECK: moe.served_loads %{{.*}} : tensor<4x16xi32> -> tensor<4xf32>
// CHECK: moe.served_loads %{{.*}} placed(%{{.*}} : tensor<16x4xi32>) : tensor<4x16xi32> -> tensor<4xf32>
moe.balance @libra(%ids: tensor<?x2xi32>, %token_gpu: tensor<?xi32>)
    -> (m: tensor<16x4xi32>, plan: tensor<4x16xi32>, after: tensor<4xf32>, before: tensor<4xf32>,
        replicated: tensor<4xf32>)
    attributes {experts = 16} {
  %n = moe.knob "extra_experts" = 2 : i64
  %a = moe.knob "alpha" = 0.5 : f32
  %eps = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %ids, %token_gpu gpus = 4 : tensor<?x2xi32>, tensor<?xi32> -> tensor<4x16xi32>
  %m = moe.libra_replicate %req extra(%n : i64) alpha(%a : f32) : tensor<4x16xi32> -> tensor<16x4xi32>
  %plan, %after = moe.libra_shard %req, %m epsilon(%eps : f32)
      : tensor<4x16xi32>, tensor<16x4xi32> -> tensor<4x16xi32>, tensor<4xf32>
  %before = moe.served_loads %req : tensor<4x16xi32> -> tensor<4xf32>
  %rep = moe.served_loads %req placed(%m : tensor<16x4xi32>) : tensor<4x16xi32> -> tensor<4xf32>
  moe.yield %m, %plan, %after, %before, %rep : tensor<16x4xi32>, tensor<4x16xi32>, tensor<4xf32>,
      tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: moe.prefetch @expertflow
// CHECK: moe.expected_experts %mass threshold(%{{.*}} : f32) : tensor<16xf32> -> !moe.set<16>, tensor<1xi32>
// CHECK: moe.step_size %{{.*}} expert_bytes(%{{.*}} : i64) bandwidth(%{{.*}} : f32) layer_time(%{{.*}} : f32) layers(%{{.*}} : i64) : tensor<1xi32> -> tensor<1xi32>
// CHECK: moe.step_feedback %step, %{{.*}}, %stalls, %overs, %events stall_threshold(%{{.*}} : i64) overfetch_threshold(%{{.*}} : i64) layers(%{{.*}} : i64)
// CHECK: moe.two_level_lru %resident, %last_use, %requested, %{{.*}}, %now, %{{.*}} capacity(%{{.*}} : i64) : !moe.set<16>, tensor<16xi32>, tensor<1xi32>, tensor<1xi32>
moe.prefetch @expertflow(%mass: tensor<16xf32>, %requested: !moe.set<16>, %resident: !moe.set<16>,
                         %last_use: tensor<16xi32>, %now: tensor<1xi32>, %step: tensor<1xi32>,
                         %stalls: tensor<1xi32>, %overs: tensor<1xi32>, %events: tensor<?xi32>)
    -> (s: tensor<1xi32>, trace: tensor<?xi32>, res: !moe.set<16>, loads: tensor<16xi32>)
    attributes {experts = 16} {
  %p = arith.constant 0.9 : f32
  %es = arith.constant 1000 : i64
  %cs = arith.constant 1.0e6 : f32
  %tl = arith.constant 1.0e-3 : f32
  %layers = arith.constant 8 : i64
  %t1 = arith.constant 2 : i64
  %t2 = arith.constant 3 : i64
  %cap = arith.constant 4 : i64
  %set, %ne = moe.expected_experts %mass threshold(%p : f32) : tensor<16xf32> -> !moe.set<16>, tensor<1xi32>
  %s0 = moe.step_size %ne expert_bytes(%es : i64) bandwidth(%cs : f32) layer_time(%tl : f32)
      layers(%layers : i64) : tensor<1xi32> -> tensor<1xi32>
  %s, %st, %ov, %trace = moe.step_feedback %step, %s0, %stalls, %overs, %events
      stall_threshold(%t1 : i64) overfetch_threshold(%t2 : i64) layers(%layers : i64)
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
      -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
  %r, %h, %lu, %loads, %ev = moe.two_level_lru %resident, %last_use, %requested, %set, %now, %s
      capacity(%cap : i64) : !moe.set<16>, tensor<16xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %s, %trace, %r, %loads : tensor<1xi32>, tensor<?xi32>, !moe.set<16>, tensor<16xi32>
}

// Capacity-limited and expert-choice routing; the token count and scalar arithmetic.
// CHECK-LABEL: moe.router @capacity_ops
// CHECK: %[[T:.*]] = moe.num_tokens : i64
// CHECK: %[[C:.*]] = arith.ceildivsi %[[T]], %{{.*}} : i64
// CHECK: moe.capacity %{{.*}}, %{{.*}} capacity_factor(%{{.*}} : f32) : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
// CHECK: moe.capacity %{{.*}}, %{{.*}} capacity(%[[C]] : i64) renormalize_after_drop
// CHECK: moe.admit %{{.*}} candidates(%{{.*}} : i64) capacity_factor(%{{.*}} : f32) k = 2 : tensor<?x8xf32>
// CHECK: moe.admit %{{.*}} capacity(%[[C]] : i64) k = 2 : tensor<?x8xf32>
// CHECK: moe.expert_choice %{{.*}} capacity_factor(%{{.*}} : f32) k = 2 max_experts = 3 block_size = 16 : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
moe.router @capacity_ops(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, counts: tensor<8xi32>,
        dropped: tensor<1xi32>, ec_ids: tensor<?x3xi32>, ec_tokens: tensor<?xi32>)
    attributes {experts = 8, top_k = 2} {
  %cf = moe.knob "capacity_factor" = 1.25 : f32
  %per = moe.knob "per" = 3 : i64
  %t = moe.num_tokens : i64
  %c = arith.ceildivsi %t, %per : i64
  %p = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%p : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity_factor(%cf : f32)
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  %kept2, %kw2, %counts2, %dropped2 = moe.capacity %kept, %kw capacity(%c : i64)
      renormalize_after_drop
      : tensor<?x2xi32>, tensor<?x2xf32> -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>
  %m = moe.knob "candidates" = 4 : i64
  %adm = moe.admit %p candidates(%m : i64) capacity_factor(%cf : f32) k = 2 : tensor<?x8xf32>
  %adm2 = moe.admit %adm capacity(%c : i64) k = 2 : tensor<?x8xf32>
  %eids, %ew, %etok, %etw, %eblocks, %epad, %eun = moe.expert_choice %adm2
      capacity_factor(%cf : f32) k = 2 max_experts = 3 block_size = 16
      : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %kept2, %kw2, %counts2, %dropped2, %eids, %etok
      : tensor<?x2xi32>, tensor<?x2xf32>, tensor<8xi32>, tensor<1xi32>, tensor<?x3xi32>, tensor<?xi32>
}

// This year's routing ideas: MoE-Spec's row-masked reduction and route, METRO's replica
// choice, LLEP's least-loaded plan.
// CHECK-LABEL: moe.router @spec_and_metro
// CHECK: moe.batch_reduce sum %{{.*}} rows(%{{.*}} : tensor<?xi32>) : tensor<?x8xf32> -> tensor<8xf32>
// CHECK: moe.route %{{.*}} within %{{.*}} k = 2 renormalize max_rank(%{{.*}} : i64) rows(%{{.*}} : tensor<?xi32>)
// CHECK: moe.metro_replicas %{{.*}} on %{{.*}} : tensor<8xi32>, !moe.placement<experts = 8, devices = 4, slots = 12> -> tensor<8xi32>, tensor<4xi32>
// CHECK: moe.remap_physical %{{.*}}, %{{.*}} replicas(%{{.*}} : tensor<8xi32>) : tensor<?x2xi32>
moe.router @spec_and_metro(%logits: tensor<?x8xf32>, %draft_mask: tensor<?xi32>,
                           %placement: !moe.placement<experts = 8, devices = 4, slots = 12>)
    -> (topk_ids: tensor<?x2xi32>, physical_ids: tensor<?x2xi32>, per_gpu: tensor<4xi32>)
    attributes {experts = 8, top_k = 2} {
  %b = moe.knob "budget" = 4 : i64
  %r = moe.knob "max_rank" = 0 : i64
  %p = moe.softmax %logits : tensor<?x8xf32>
  %mass = moe.batch_reduce sum %p rows(%draft_mask : tensor<?xi32>)
      : tensor<?x8xf32> -> tensor<8xf32>
  %none = moe.empty_set : !moe.set<8>
  %s = moe.fill %none with %mass budget(%b : i64) : tensor<8xf32> -> !moe.set<8>
  %ids, %w = moe.route %logits within %s k = 2 renormalize max_rank(%r : i64)
      rows(%draft_mask : tensor<?xi32>)
      : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  %counts = moe.expert_counts %ids : tensor<?x2xi32> -> tensor<8xi32>
  %slots, %per_gpu = moe.metro_replicas %counts on %placement
      : tensor<8xi32>, !moe.placement<experts = 8, devices = 4, slots = 12>
      -> tensor<8xi32>, tensor<4xi32>
  %phys = moe.remap_physical %ids, %placement replicas(%slots : tensor<8xi32>)
      : tensor<?x2xi32>, !moe.placement<experts = 8, devices = 4, slots = 12>
  moe.yield %ids, %phys, %per_gpu : tensor<?x2xi32>, tensor<?x2xi32>, tensor<4xi32>
}

// CHECK-LABEL: moe.balance @llep_plan
// CHECK: moe.least_loaded %{{.*}} capacity_factor(%{{.*}} : f32) min_chunk(%{{.*}} : i64) threshold(%{{.*}} : f32) gpus = 4 : tensor<16xi32> -> tensor<16x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
moe.balance @llep_plan(%loads: tensor<16xi32>)
    -> (plan: tensor<16x4xi32>, after: tensor<4xf32>, moved: tensor<1xi32>)
    attributes {experts = 16} {
  %a = moe.knob "capacity_factor" = 1.1 : f32
  %m = moe.knob "min_chunk" = 16 : i64
  %t = moe.knob "threshold" = 1.3 : f32
  %plan, %before, %after, %moved = moe.least_loaded %loads capacity_factor(%a : f32)
      min_chunk(%m : i64) threshold(%t : f32) gpus = 4
      : tensor<16xi32> -> tensor<16x4xi32>, tensor<4xf32>, tensor<4xf32>, tensor<1xi32>
  moe.yield %plan, %after, %moved : tensor<16x4xi32>, tensor<4xf32>, tensor<1xi32>
}
