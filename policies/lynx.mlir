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
// Versions: this follows v2 of the paper (arXiv 2411.08982v2, the project's copy).
// v3 (May 2026) names step 1's binning of each expert's affinity to the token's top-1
// "AffinityBinning" and reports up to 1.30x (v2: 1.23x); its abstract describes the
// same mechanism (low-affinity token-to-expert assignments remapped within the batch),
// and no v3 variant is shipped. Only v3's abstract could be read here: a difference
// in its full text would need a second policy beside this one.
//
// Shape: generic in E and k (the paper's Qwen1.5-MoE-A2.7B: --experts 60 --top-k 4
//        --shared-experts 4).
// Inputs: logits f32 [T, E], phase i32 (0 prefill, 1 decode, 2 mixed).
// Knobs: alpha (bin width 1/alpha nats, default 2), beta (number of bins, default 4;
//        beta/alpha = 2 as the paper suggests), theta (batch score a kept expert
//        reaches, default 1 = one top-1 vote).
moe.router @lynx(%logits: tensor<?x?xf32>, %phase: i32)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %alpha = moe.knob "alpha" = 2.0 : f32
  %beta = moe.knob "beta" = 4 : i64
  %theta = moe.knob "theta" = 1.0 : f32
  %k = moe.param "top_k" : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights, %selected = moe.when %logits : tensor<?x?xf32> phase(%phase : i32)
      max_tokens = 256 phases = [decode]
      -> (tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>) {
    %top_vals, %top_ids = moe.topk %logits k = ?
        : tensor<?x?xf32> -> tensor<?x?xf32>, tensor<?x?xi32>
    %bins = moe.bins %logits, %alpha, %beta : tensor<?x?xf32> -> tensor<?x?xi32>
    %score = moe.bin_score %bins, %top_ids
        : tensor<?x?xi32>, tensor<?x?xi32> -> tensor<?xf32>
    %anchors = moe.confident_top1 %bins, %top_ids
        : tensor<?x?xi32>, tensor<?x?xi32> -> !moe.set<?>
    %strong = moe.threshold_set %score, %theta : tensor<?xf32> -> !moe.set<?>
    %core = moe.union %anchors, %strong : !moe.set<?>
    %kept = moe.fill %core with %score min_size(%k : i64) : tensor<?xf32> -> !moe.set<?>
    %r_ids, %r_weights = moe.route %logits within %kept weights(%probs : tensor<?x?xf32>)
        k = ? renormalize
        : tensor<?x?xf32>, !moe.set<?> -> tensor<?x?xi32>, tensor<?x?xf32>
    moe.yield %r_ids, %r_weights, %kept : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>
  } else {
    %p_ids, %p_weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ?
        renormalize : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
    %used = moe.union_topk %logits, %k : tensor<?x?xf32> -> !moe.set<?>
    moe.yield %p_ids, %p_weights, %used : tensor<?x?xi32>, tensor<?x?xf32>, !moe.set<?>
  }
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
