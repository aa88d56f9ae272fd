// xshare_spec.mlir - XShare speculative-decoding-aware selection, Algorithm 4 with
// Algorithm 3 per request (../shared/papers/001_*.txt, §4):
//   1. per request r (the tokens sharing a request id: the generating token and its
//      draft tokens): S_r = S0_r U top-m_r experts of the request's summed
//      probabilities outside S0_r, with S0_r the union of its tokens' top-k0;
//   2. S = U_r S_r, then the batch greedy adds `budget` more experts by batch mass;
//   3. every token is routed to its top-k within S, weights renormalized.
//
// Shape: generic in E and k (e.g. --model models/gpt-oss-120b.json: 128 experts, top-4).
// Inputs: logits f32 [T, E], request_ids i32 [T].
// Knobs: k0 (default 1), request_budget (m_r, default 4), budget (m, default 0):
//        (k0, m, m_r) = (1, 0, 4) is the paper's best setting (Fig. 5, +13-14% OTPS).
moe.router @xshare_spec(%logits: tensor<?x?xf32>, %request_ids: tensor<?xi32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %k0 = moe.knob "k0" = 1 : i64
  %request_budget = moe.knob "request_budget" = 4 : i64
  %budget = moe.knob "budget" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %per_request = moe.segment_fill %probs by %request_ids warmup(%k0)
      budget(%request_budget) : tensor<?x?xf32>, tensor<?xi32> -> !moe.set<?>
  %mass = moe.batch_reduce sum %probs : tensor<?x?xf32> -> tensor<?xf32>
  %selected = moe.fill %per_request with %mass budget(%budget : i64)
      : tensor<?xf32> -> !moe.set<?>
  %ids, %weights = moe.route %logits within %selected weights(%probs : tensor<?x?xf32>)
      k = ? renormalize
      : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
