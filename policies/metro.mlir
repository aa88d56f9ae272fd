// metro.mlir - METRO, Minimum Expert Token ROuting (Yu, Ma et al., "Efficient MoE
// Serving in the Memory-Bound Regime: Balance Activated Experts, Not Tokens", arXiv
// 2512.09277): under expert parallelism with replicated experts (EPLB's redundant
// slots), a memory-bound decode step costs each GPU the experts it activates, not the
// tokens it computes, so spreading a hot expert's tokens over its replicas (EPLB's
// round robin) activates it on every GPU that holds one. METRO keeps the model's
// routing (here softmax top-k) and sends all of an activated expert's tokens to ONE of
// its replicas, chosen to balance the number of activated experts per GPU:
//   experts with fewer replicas first (less choice), then more tokens, then lower id;
//   each takes the replica whose GPU has the fewest activated experts so far (then the
//   fewest tokens, then the lower replica rank).
// Paper: 11-22% lower decode latency than EPLB (vLLM, 8 A100), up to 4.11x decode
// throughput at a fixed SLO.
//
// Choices (our reading of the paper's abstract; written here and in docs/traces.md):
// the greedy above stands for the paper's near-optimal GPU solver; one replica per
// activated expert (no split of a hot expert's tokens).
//
// Shape: generic in E, k and the placement (Qwen3-30B-A3B with 16 redundant slots on
//        8 GPUs: --model models/qwen3-30b-a3b.json --devices 8 --slots 144).
// Inputs: logits f32 [T, E], placement (EPLB's log2phy and replica counts).
// Outputs: the model's routing (logical ids and weights), each slot's physical replica,
//          the activated experts per GPU, and the launcher outputs.
moe.router @metro(%logits: tensor<?x?xf32>,
                  %placement: !moe.placement<experts = ?, devices = ?, slots = ?>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        physical_ids: tensor<?x?xi32>, device_experts: tensor<?xi32>,
        expert_counts: tensor<?xi32>, active_experts: tensor<?xi32>,
        num_active: tensor<1xi32>, sorted_token_ids: tensor<?xi32>,
        expert_ids: tensor<?xi32>, num_tokens_post_padded: tensor<1xi32>) {
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %replicas, %per_gpu = moe.metro_replicas %counts on %placement
      : tensor<?xi32>, !moe.placement<experts = ?, devices = ?, slots = ?>
      -> tensor<?xi32>, tensor<?xi32>
  %phys = moe.remap_physical %ids, %placement replicas(%replicas : tensor<?xi32>)
      : tensor<?x?xi32>, !moe.placement<experts = ?, devices = ?, slots = ?>
  %active, %num_active = moe.compact_active %counts
      : tensor<?xi32> -> tensor<?xi32>, tensor<1xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %phys, %per_gpu, %counts, %active, %num_active,
      %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xi32>,
        tensor<?xi32>, tensor<1xi32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}
