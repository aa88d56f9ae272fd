// resident_first_topk.mlir - an example of a new policy built from the moe ops: top-k
// routing that prefers experts already resident on the GPU (ExpertFlow §3.4's
// cache-aware routing), written in a dozen lines and verified by moe-opt.
//
//   1. probabilities by softmax;
//   2. a small bonus for resident experts breaks near-ties toward them;
//   3. tokens whose top-1 is resident keep it: the batch set is the warm-up set of
//      top-1 experts plus every resident expert;
//   4. every token is routed to its top-k within that set, weights from the unbiased
//      probabilities, renormalized.
//
// Shape: Mixtral-8x7B, 8 experts, top-2.
// Inputs: logits f32 [T, 8], resident bool [8].
// Knobs: resident_bonus (default 0.05).
//
// Try: moe-opt examples/resident_first_topk.mlir --moe-set-knobs="values=resident_bonus=0.1"
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
