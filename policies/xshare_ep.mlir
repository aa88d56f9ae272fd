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
// Shape: generic in E, k and the placement (e.g. DeepSeek-R1 on 8 GPUs: --model
//        models/deepseek-v3.json is not enough, as it has no groups to bind; use
//        --experts 256 --top-k 8 --devices 8 [--slots 288]).
// Inputs: logits f32 [T, E], bias f32 [E], placement (the expert -> GPU map).
// Knobs: k0 (default 1), device_budget (m_g, default 5): (k0, m_g) = (1, 5) cut the
//        peak per-GPU load 3x at <1% accuracy cost in the paper (Table 2);
//        routed_scaling_factor (2.5, DeepSeek-R1's; --scaling sets another).
moe.router @xshare_ep(%logits: tensor<?x?xf32>, %bias: tensor<?xf32>,
                      %placement: !moe.placement<experts = ?, devices = ?, slots = ?>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        selected: !moe.set<?>, expert_counts: tensor<?xi32>,
        active_experts: tensor<?xi32>, num_active: tensor<1xi32>,
        sorted_token_ids: tensor<?xi32>, expert_ids: tensor<?xi32>,
        num_tokens_post_padded: tensor<1xi32>) {
  %k0 = moe.knob "k0" = 1 : i64
  %device_budget = moe.knob "device_budget" = 5 : i64
  // The routed scaling factor: the model's (DeepSeek-V3: 2.5), tunable at run time.
  %scale = moe.knob "routed_scaling_factor" = 2.5 : f32
  %scores = moe.sigmoid %logits : tensor<?x?xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x?xf32>, tensor<?xf32>
  %warm = moe.union_topk %biased, %k0 : tensor<?x?xf32> -> !moe.set<?>
  %mass = moe.batch_reduce sum %scores : tensor<?x?xf32> -> tensor<?xf32>
  %selected = moe.fill_per_device %warm with %mass on %placement
      budget(%device_budget : i64)
      : tensor<?xf32>, !moe.placement<experts = ?, devices = ?, slots = ?>
      -> !moe.set<?>
  %ids, %weights = moe.route %biased within %selected
      weights(%scores : tensor<?x?xf32>) k = ? renormalize
      scaled_by(%scale : f32)
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
