// RUN: moe-opt %s --moe-specialize="experts=8 top_k=2" | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s --check-prefix=GENERIC
// RUN: moe-opt %s --experts 8 --top-k 2 | FileCheck %s

// Sets, per-token top-k, bins, batch scores, a phase gate and moe.param.
// CHECK-LABEL: moe.router @gated(%logits: tensor<?x8xf32>, %phase: i32)
// CHECK-SAME: -> (topk_ids: tensor<?x2xi32>, selected: !moe.set<8>)
// CHECK: %[[K:.*]] = arith.constant 2 : i64
// CHECK: moe.when %logits : tensor<?x8xf32> phase(%phase : i32) max_tokens = 4 phases = [decode] -> (tensor<?x2xi32>, !moe.set<8>)
// CHECK: moe.topk %logits k = 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi32>
// CHECK: moe.bins %logits, %{{.*}}, %{{.*}} : tensor<?x8xf32> -> tensor<?x8xi32>
// CHECK: moe.bin_score %{{.*}}, %{{.*}} : tensor<?x8xi32>, tensor<?x2xi32> -> tensor<8xf32>
// CHECK: moe.fill %{{.*}} with %{{.*}} min_size(%[[K]] : i64) : tensor<8xf32> -> !moe.set<8>
// CHECK: moe.union_topk %logits, %[[K]] : tensor<?x8xf32> -> !moe.set<8>
moe.router @gated(%logits: tensor<?x?xf32>, %phase: i32)
    -> (topk_ids: tensor<?x?xi32>, selected: !moe.set<?>) {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  %k = moe.param "top_k" : i64
  %ids, %selected = moe.when %logits : tensor<?x?xf32> phase(%phase : i32)
      max_tokens = 4 phases = [decode] -> (tensor<?x?xi32>, !moe.set<?>) {
    %vals, %top = moe.topk %logits k = ? : tensor<?x?xf32> -> tensor<?x?xf32>, tensor<?x?xi32>
    %bins = moe.bins %logits, %alpha, %beta : tensor<?x?xf32> -> tensor<?x?xi32>
    %score = moe.bin_score %bins, %top : tensor<?x?xi32>, tensor<?x?xi32> -> tensor<?xf32>
    %none = moe.empty_set : !moe.set<?>
    %kept = moe.fill %none with %score min_size(%k : i64) : tensor<?xf32> -> !moe.set<?>
    %r, %w = moe.route %logits within %kept k = ? : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
    moe.yield %r, %kept : tensor<?x?xi32>, !moe.set<?>
  } else {
    %r, %w = moe.route %logits k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
    %used = moe.union_topk %logits, %k : tensor<?x?xf32> -> !moe.set<?>
    moe.yield %r, %used : tensor<?x?xi32>, !moe.set<?>
  }
  moe.yield %ids, %selected : tensor<?x?xi32>, !moe.set<?>
}
// GENERIC-LABEL: moe.router @gated(%logits: tensor<?x?xf32>, %phase: i32)
// GENERIC: moe.param "top_k" : i64
// GENERIC: moe.topk %logits k = ? : tensor<?x?xf32> -> tensor<?x?xf32>, tensor<?x?xi32>
