// RUN: moe-opt %s --moe-specialize="experts=16 top_k=2 groups=4 nodes=2 devices=4 slots=24 hidden_size=32" | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s --check-prefix=GENERIC

// Rules are bound like routers: per-expert statistics take E (ExpertOperands), EPLB its
// groups, nodes, GPUs and physical slots, Libra its GPUs, a gate its hidden size, a
// rule reading [T, k] ids the top-k.

// CHECK-LABEL: moe.residency @residency(%hotness: tensor<16xf32>, %counts: tensor<16xi32>, %current: !moe.set<16>)
// CHECK-SAME: -> (hi_set: !moe.set<16>, promotions: tensor<16xi32>, num_promotions: tensor<1xi32>) attributes {experts = 16 : i64}
// CHECK: moe.ema %hotness, %counts alpha(%{{.*}} : f32) : tensor<16xf32>, tensor<16xi32>
// CHECK: moe.hi_capacity {{.*}} experts = 16 -> i64
// CHECK: moe.ranked %{{.*}} by %{{.*}} : !moe.set<16>, tensor<16xf32> -> tensor<16xi32>, tensor<1xi32>
// GENERIC-LABEL: moe.residency @residency(%hotness: tensor<?xf32>, %counts: tensor<?xi32>, %current: !moe.set<?>)
// GENERIC: moe.hi_capacity {{.*}} experts = ? -> i64
moe.residency @residency(%hotness: tensor<?xf32>, %counts: tensor<?xi32>, %current: !moe.set<?>)
    -> (hi_set: !moe.set<?>, promotions: tensor<?xi32>, num_promotions: tensor<1xi32>) {
  %alpha = moe.knob "alpha" = 0.8 : f32
  %margin = moe.knob "margin" = 1.0 : f32
  %budget = moe.knob "budget_bytes" = 1000000 : i64
  %fixed = moe.knob "fixed_bytes" = 1000 : i64
  %hi = moe.knob "hi_bytes" = 1000 : i64
  %lo = moe.knob "lo_bytes" = 100 : i64
  %layers = moe.knob "layers" = 4 : i64
  %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<?xf32>, tensor<?xi32>
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi : i64)
      lo_bytes(%lo : i64) layers(%layers : i64) experts = ? -> i64
  %set = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
      : tensor<?xf32> -> !moe.set<?>
  %up = moe.difference %set, %current : !moe.set<?>
  %ids, %count = moe.ranked %up by %s : !moe.set<?>, tensor<?xf32>
      -> tensor<?xi32>, tensor<1xi32>
  moe.yield %set, %ids, %count : !moe.set<?>, tensor<?xi32>, tensor<1xi32>
}


// CHECK-LABEL: moe.balance @eplb(%loads: tensor<16xf32>) -> (phy2log: tensor<24xi32>, log2phy: tensor<16x9xi32>, replica_count: tensor<16xi32>, after: tensor<4xf32>)
// CHECK: moe.eplb %loads groups = 4 nodes = 2 gpus = 4 : tensor<16xf32> -> tensor<24xi32>, tensor<16x9xi32>, tensor<16xi32>
// CHECK: moe.device_loads %loads placed(%{{.*}}, %{{.*}} : tensor<24xi32>, tensor<16xi32>) gpus = 4 : tensor<16xf32> -> tensor<4xf32>
// GENERIC: moe.eplb %loads groups = ? nodes = ? gpus = ? : tensor<?xf32> -> tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>
moe.balance @eplb(%loads: tensor<?xf32>)
    -> (phy2log: tensor<?xi32>, log2phy: tensor<?x?xi32>, replica_count: tensor<?xi32>,
        after: tensor<?xf32>) {
  %p2l, %l2p, %cnt = moe.eplb %loads groups = ? nodes = ? gpus = ?
      : tensor<?xf32> -> tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>
  %after = moe.device_loads %loads placed(%p2l, %cnt : tensor<?xi32>, tensor<?xi32>) gpus = ?
      : tensor<?xf32> -> tensor<?xf32>
  moe.yield %p2l, %l2p, %cnt, %after : tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xf32>
}


// CHECK-LABEL: moe.router @predict(%hidden: tensor<?x32xf32>, %gate: tensor<32x16xf32>) -> (ids: tensor<?x2xi32>)
// CHECK: moe.gate %hidden, %gate : tensor<?x32xf32>, tensor<32x16xf32> -> tensor<?x16xf32>
// CHECK-LABEL: moe.balance @libra(%ids: tensor<?x2xi32>, %token_gpu: tensor<?xi32>) -> (placement: tensor<16x4xi32>, plan: tensor<4x16xi32>, loads: tensor<4xf32>)
// CHECK: moe.gpu_requests %ids, %token_gpu gpus = 4 : tensor<?x2xi32>, tensor<?xi32> -> tensor<4x16xi32>
// CHECK: moe.libra_replicate %{{.*}} : tensor<4x16xi32> -> tensor<16x4xi32>
// CHECK: moe.libra_shard {{.*}} : tensor<4x16xi32>, tensor<16x4xi32> -> tensor<4x16xi32>, tensor<4xf32>
moe.router @predict(%hidden: tensor<?x?xf32>, %gate: tensor<?x?xf32>) -> (ids: tensor<?x?xi32>) {
  %logits = moe.gate %hidden, %gate : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  %ids, %w = moe.route %logits k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids : tensor<?x?xi32>
}
moe.balance @libra(%ids: tensor<?x?xi32>, %token_gpu: tensor<?xi32>)
    -> (placement: tensor<?x?xi32>, plan: tensor<?x?xi32>, loads: tensor<?xf32>) {
  %extra = moe.knob "extra_experts" = 2 : i64
  %alpha = moe.knob "alpha" = 0.5 : f32
  %eps = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %ids, %token_gpu gpus = ? : tensor<?x?xi32>, tensor<?xi32> -> tensor<?x?xi32>
  %m = moe.libra_replicate %req extra(%extra : i64) alpha(%alpha : f32)
      : tensor<?x?xi32> -> tensor<?x?xi32>
  %plan, %loads = moe.libra_shard %req, %m epsilon(%eps : f32)
      : tensor<?x?xi32>, tensor<?x?xi32> -> tensor<?x?xi32>, tensor<?xf32>
  moe.yield %m, %plan, %loads : tensor<?x?xi32>, tensor<?x?xi32>, tensor<?xf32>
}
