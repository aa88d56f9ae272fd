// moe-fold-route-softmax: a renormalized route weighted by the softmax of its own
// scores weighs by the selected scores' exp (softmax_weights) and the softmax goes;
// every other route is left alone.
// RUN: moe-opt %s --moe-fold-route-softmax --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-fold-route-softmax --split-input-file | moe-opt --split-input-file | FileCheck %s

// CHECK-LABEL: moe.router @folds
// CHECK-NOT: moe.softmax
// CHECK: moe.route %{{.*}} k = 2 renormalize softmax_weights scaling = 2.500000e+00 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
// CHECK-NOT: moe.softmax
moe.router @folds(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%probs : tensor<?x8xf32>) k = 2 renormalize
      scaling = 2.5 : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// Within a set, too (the generic form, k = ?).
// CHECK-LABEL: moe.router @folds_within
// CHECK-NOT: moe.softmax
// CHECK: moe.route %[[L:.*]] within %{{.*}} k = ? renormalize softmax_weights :
moe.router @folds_within(%logits: tensor<?x?xf32>, %sel: !moe.set<?>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>) {
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %w = moe.route %logits within %sel weights(%probs : tensor<?x?xf32>) k = ?
      renormalize : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids, %w : tensor<?x?xi32>, tensor<?x?xf32>
}

// -----

// Without renormalize the weights are the full softmax's probabilities: kept.
// CHECK-LABEL: moe.router @no_renormalize
// CHECK: %[[P:.*]] = moe.softmax
// CHECK: moe.route %{{.*}} weights(%[[P]] : tensor<?x8xf32>) k = 2 :
// CHECK-NOT: softmax_weights
moe.router @no_renormalize(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%probs : tensor<?x8xf32>) k = 2
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// The softmax has another user (a batch reduction): kept.
// CHECK-LABEL: moe.router @softmax_shared
// CHECK: %[[P:.*]] = moe.softmax
// CHECK: moe.union_topk %[[P]]
// CHECK: moe.route %{{.*}} weights(%[[P]] : tensor<?x8xf32>) k = 2 renormalize :
// CHECK-NOT: softmax_weights
moe.router @softmax_shared(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %c4 = arith.constant 4 : i64
  %sel = moe.union_topk %probs, %c4 : tensor<?x8xf32> -> !moe.set<8>
  %ids, %w = moe.route %logits weights(%probs : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w, %sel : tensor<?x2xi32>, tensor<?x2xf32>, !moe.set<8>
}

// -----

// The softmax of another tensor (DeepSeek-style: ranked by biased scores): kept.
// CHECK-LABEL: moe.router @softmax_of_other
// CHECK: %[[P:.*]] = moe.softmax %logits
// CHECK: moe.route %{{.*}} weights(%[[P]] : tensor<?x8xf32>) k = 2 renormalize :
// CHECK-NOT: softmax_weights
moe.router @softmax_of_other(%logits: tensor<?x8xf32>, %bias: tensor<8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %biased = moe.add_bias %logits, %bias : tensor<?x8xf32>, tensor<8xf32>
  %ids, %w = moe.route %biased weights(%probs : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// Sigmoid weights (DeepSeek-V3) are not a softmax: kept.
// CHECK-LABEL: moe.router @sigmoid
// CHECK: %[[S:.*]] = moe.sigmoid
// CHECK: moe.route %{{.*}} weights(%[[S]] : tensor<?x8xf32>) k = 2 renormalize :
// CHECK-NOT: softmax_weights
moe.router @sigmoid(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %s = moe.sigmoid %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%s : tensor<?x8xf32>) k = 2 renormalize
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A top-p route truncates on the probabilities themselves: its softmax stays.
// CHECK-LABEL: moe.router @keeps_top_p
// CHECK: %[[P:.*]] = moe.softmax
// CHECK: moe.route %{{.*}} weights(%[[P]] : tensor<?x8xf32>) k = 2 renormalize top_p(
moe.router @keeps_top_p(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %top = moe.knob "p" = 0.9 : f32
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%probs : tensor<?x8xf32>) k = 2 renormalize
      top_p(%top : f32) : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}

// -----

// A max_rank route may empty the best slot, which the folded form scales by: its
// softmax stays.
// CHECK-LABEL: moe.router @keeps_max_rank
// CHECK: %[[P:.*]] = moe.softmax
// CHECK: moe.route %{{.*}} weights(%[[P]] : tensor<?x8xf32>) k = 2 renormalize max_rank(
moe.router @keeps_max_rank(%logits: tensor<?x8xf32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 8, top_k = 2} {
  %r = moe.knob "max_rank" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %ids, %w = moe.route %logits weights(%probs : tensor<?x8xf32>) k = 2 renormalize
      max_rank(%r : i64) : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
