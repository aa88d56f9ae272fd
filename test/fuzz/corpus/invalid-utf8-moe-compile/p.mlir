//      probÿbilities, renormalized.
moe.router @resident_first_topk(%logits: tensor<?x8xf32>, %resident: !moe.set<8>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>, selected: !moe.set<8>)
    attributes {experts = 8, top_k = 2} {
  %bonus = moe.knob "resident_bonus" = 0.05 : f32
  %one = arith.constant 1 : i64
  %probs = moe.softmax %logits : tensor<?x8xf32>
  %preferred = moe.bias_resident %probs, %resident, %bonus : tensor<?x8xf32>, !moe.set<8>
  %top1 = moe.union_topk %preferred, %one : tensor<?x8xf32> -> !moe.set<8>
  %selected = moe.union %top1, %resident : !moe.set<8>
  %ids, %weights = moe.route %preferred within %selected weights(%probs : tensor<?x8xf32>)
      k = 2 renormalize : tensor<?x8xf32>, !moe.set<8> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %weights, %selected : tensor<?x2xi32>, tensor<?x2xf32>, !moe.set<8>
}