// capacity_drop.mlir - capacity-aware inference (He et al., "Capacity-Aware Inference:
// Mitigating the Straggler Effect in Mixture of Experts", ICLR 2026, arXiv 2503.05066):
// under expert parallelism the most loaded expert sets the layer's latency, so
//   1. every token proposes its `candidates` best experts by softmax probability
//      (0 = the model's k: Token Drop; more than k: Expanded Drop, which lets
//      under-loaded experts pick up tokens the overloaded ones turn away);
//   2. every expert admits, of the tokens proposing it, the C = ceil(capacity_factor *
//      T * k / E) with the highest probability for it (ties to the lower token index);
//      the rest are dropped (their residual carries them);
//   3. every token keeps its best k admitted experts, weights = their probabilities
//      renormalized over them when the model renormalizes; slots it cannot fill stay
//      empty (id -1, weight 0; an engine build fills them with weight 0).
// Paper: Token Drop 30% faster at 0.9% degradation on OLMoE; Expanded Drop 1.85x on
// Mixtral-8x7B-Instruct at +0.2% average accuracy.
//
// Choices (our reading, from the paper's text and its public code; written here and in
// docs/traces.md): the capacity is per expert (the paper's C = gamma * T * k / E, never
// below 1); Expanded Drop's extra candidates are the token's next best experts by
// probability (the code's "overselect": k * rounds candidates), not a device-local set,
// since the policy routes without a placement. Ranked by probability, ties to the lower
// id, as every policy here.
//
// Shape: generic in E and k (--experts E --top-k K, or --model config.json).
// Knobs: capacity_factor (gamma, 1.0; > 0), candidates (0 = k; in [0, E]).
// Outputs: the routing, per-expert counts and vLLM's block-aligned order.
moe.router @capacity_drop(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>, sorted_token_ids: tensor<?xi32>,
        expert_ids: tensor<?xi32>, num_tokens_post_padded: tensor<1xi32>) {
  %capacity_factor = moe.knob "capacity_factor" = 1.0 : f32
  %candidates = moe.knob "candidates" = 0 : i64
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %admitted = moe.admit %probs candidates(%candidates : i64)
      capacity_factor(%capacity_factor : f32) k = ? : tensor<?x?xf32>
  %ids, %weights = moe.route %admitted k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %sorted, %blocks, %padded
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>,
        tensor<1xi32>
}
