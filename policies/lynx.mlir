// lynx.mlir - LYNX: dynamic, workload-agnostic batch-level expert reduction
// (Gupta et al.; ../shared/papers/000_*.txt, §3.1-3.5 and Appendix A).
//
// On memory-bound decode batches (the phase-aware optimizer, §3.3.1) the policy:
//   1. bins each token's experts by their logit gap to the top-1 (confidence analyzer,
//      §3.1.1 / App. A): q = min(floor(alpha * (z_top1 - z_e)), beta), bin = -q;
//   2. scores every expert over the batch (adaptive expert scorer, §3.2.1), with the
//      batch size B as the base: s[e] = sum over tokens t with e in top-k(t) of B^bin;
//   3. keeps {top-1 of every high-confidence token (second choice q >= 1)}
//      U {e : s[e] >= theta}, grown by descending s until it holds at least k experts
//      (shared experts are outside the routed set and always run);
//   4. remaps every token to its top-k within the kept set, weights renormalized
//      (expert remapper, §3.4).
// Other batches (prefill, mixed, or more than max_tokens tokens) use plain top-k.
//
// Shape: Qwen1.5-MoE-A2.7B style, 60 routed experts, top-4, 4 shared experts.
// Inputs: logits f32 [T, 60], phase i32 (0 prefill, 1 decode, 2 mixed).
// Knobs: alpha (bin width 1/alpha nats, default 2), beta (number of bins, default 4;
//        beta/alpha = 2 as the paper suggests), theta (batch score a kept expert
//        reaches, default 1 = one top-1 vote).
moe.router @lynx(%logits: tensor<?x60xf32>, %phase: i32)
    -> (topk_ids: tensor<?x4xi32>, topk_weights: tensor<?x4xf32>,
        selected: !moe.set<60>, expert_counts: tensor<60xi32>,
        active_experts: tensor<60xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 60, top_k = 4, shared_experts = 4} {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  %theta = moe.knob "theta" = 1.0 : f32
  %k = arith.constant 4 : i64
  %probs = moe.softmax %logits : tensor<?x60xf32>
  %ids, %weights, %selected = moe.when %logits : tensor<?x60xf32> phase(%phase : i32)
      max_tokens = 256 phases = [decode]
      -> (tensor<?x4xi32>, tensor<?x4xf32>, !moe.set<60>) {
    %top_vals, %top_ids = moe.topk %logits k = 4
        : tensor<?x60xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
    %bins = moe.bins %logits, %alpha, %beta : tensor<?x60xf32> -> tensor<?x60xi32>
    %score = moe.bin_score %bins, %top_ids
        : tensor<?x60xi32>, tensor<?x4xi32> -> tensor<60xf32>
    %anchors = moe.confident_top1 %bins, %top_ids
        : tensor<?x60xi32>, tensor<?x4xi32> -> !moe.set<60>
    %strong = moe.threshold_set %score, %theta : tensor<60xf32> -> !moe.set<60>
    %core = moe.union %anchors, %strong : !moe.set<60>
    %kept = moe.fill %core with %score min_size(%k : i64) : tensor<60xf32> -> !moe.set<60>
    %r_ids, %r_weights = moe.route %logits within %kept weights(%probs : tensor<?x60xf32>)
        k = 4 renormalize
        : tensor<?x60xf32>, !moe.set<60> -> tensor<?x4xi32>, tensor<?x4xf32>
    moe.yield %r_ids, %r_weights, %kept : tensor<?x4xi32>, tensor<?x4xf32>, !moe.set<60>
  } else {
    %p_ids, %p_weights = moe.route %logits weights(%probs : tensor<?x60xf32>) k = 4
        renormalize : tensor<?x60xf32> -> tensor<?x4xi32>, tensor<?x4xf32>
    %used = moe.union_topk %logits, %k : tensor<?x60xf32> -> !moe.set<60>
    moe.yield %p_ids, %p_weights, %used : tensor<?x4xi32>, tensor<?x4xf32>, !moe.set<60>
  }
  %counts = moe.expert_counts %ids : tensor<?x4xi32> -> tensor<60xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<60xi32> -> tensor<60xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x4xi32>, tensor<60xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x4xi32>, tensor<?x4xf32>, !moe.set<60>, tensor<60xi32>, tensor<60xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
