// xshare_ep.mlir - XShare expert-parallelism-aware selection, Algorithm 6 with the
// GPU-aware greedy of Algorithm 5 (../shared/papers/001_*.txt, §5):
//   1. warm-up: S0 = union of every token's top-k0 experts (by gating score);
//   2. GPU-aware greedy: while |S| < m_g * G, each GPU in turn adds its best remaining
//      expert by batch gating mass, so no GPU ends up with many more active experts
//      than another (MaxLoad(S) <= ceil(|S| / G) from an empty start);
//   3. every token is routed to its top-k within S.
// Scores follow DeepSeek-R1 (the paper's EP model): sigmoid gates select with the
// correction bias, weights are the unbiased gates renormalized times 2.5.
//
// Shape: DeepSeek-R1, 256 routed experts, top-8, 1 shared expert, on 8 GPUs.
// Inputs: logits f32 [T, 256], bias f32 [256], placement (the expert -> GPU map).
// Knobs: k0 (default 1), device_budget (m_g, default 5): (k0, m_g) = (1, 5) cut the
//        peak per-GPU load 3x at <1% accuracy cost in the paper (Table 2).
moe.router @xshare_ep(%logits: tensor<?x256xf32>, %bias: tensor<256xf32>,
                      %placement: !moe.placement<experts = 256, devices = 8, slots = 256>)
    -> (topk_ids: tensor<?x8xi32>, topk_weights: tensor<?x8xf32>,
        selected: !moe.set<256>, expert_counts: tensor<256xi32>,
        active_experts: tensor<256xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 256, top_k = 8, shared_experts = 1} {
  %k0 = moe.knob "k0" = 1 : i64
  %device_budget = moe.knob "device_budget" = 5 : i64
  %scores = moe.sigmoid %logits : tensor<?x256xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x256xf32>, tensor<256xf32>
  %warm = moe.union_topk %biased, %k0 : tensor<?x256xf32> -> !moe.set<256>
  %mass = moe.batch_reduce sum %scores : tensor<?x256xf32> -> tensor<256xf32>
  %selected = moe.fill_per_device %warm with %mass on %placement
      budget(%device_budget : i64)
      : tensor<256xf32>, !moe.placement<experts = 256, devices = 8, slots = 256>
      -> !moe.set<256>
  %ids, %weights = moe.route %biased within %selected
      weights(%scores : tensor<?x256xf32>) k = 8 renormalize scaling = 2.5
      : tensor<?x256xf32>, !moe.set<256> -> tensor<?x8xi32>, tensor<?x8xf32>
  %counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<256xi32>
  // What a grouped-GEMM launcher needs: the experts that received tokens and
  // vLLM's block-aligned token order (block size 64).
  %active, %num_active = moe.compact_active %counts
      : tensor<256xi32> -> tensor<256xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x8xi32>, tensor<256xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %selected, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x8xi32>, tensor<?x8xf32>, !moe.set<256>, tensor<256xi32>, tensor<256xi32>, tensor<1xi32>,
        tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
