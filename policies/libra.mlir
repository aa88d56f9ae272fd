// libra.mlir - Libra's expert-parallel load balancing for one MoE layer
// (../shared/papers/003_*.txt, §3.2, §3.3, Appendix B Alg. 1, Appendix C Alg. 2):
//   @libra_predict (router, GPU): the lookahead predictor - the NEXT layer's gate
//     applied to the CURRENT layer's hidden states, top-8 = the predicted expert ids
//     of the upcoming tokens (hidden states evolve slowly across layers);
//   @libra (balance rule, host):
//     1. requests[g, e]: predicted tokens on GPU g that select expert e;
//     2. locality-aware replication (Alg. 1): each GPU imports its top
//        L = floor(N*alpha) remote experts, then iterative duplication of the most
//        loaded GPU's hottest remote expert onto the least loaded GPU with capacity
//        (at most N imports per GPU) while that keeps it under the mean load;
//     3. greedy remote-token sharding (Alg. 2): remote tokens move from overloaded
//        GPUs to the least loaded GPU holding a replica, until max load <=
//        (1+epsilon) * mean;
//     and the per-GPU loads and imbalance ratios (max / mean) before replication,
//     after replication and after sharding.
// Experts live on home GPU e / 16 (128 experts over 8 GPUs); requests are served
// locally when the GPU holds the expert, otherwise at its home (see moe.served_loads).
//
// Shape: Qwen3-30B-A3B (hidden 2048, 128 experts, top-8) on 8 GPUs.
// Inputs: @libra_predict: hidden f32 [T, 2048], next_gate f32 [2048, 128];
//         @libra: next_topk_ids i32 [T, 8] (from @libra_predict), token_gpu i32 [T].
// Outputs: placement i32 [128, 8] (1: GPU g holds expert e), shard_plan i32 [8, 128]
//          (remote tokens of e each GPU serves), loads_* f32 [8], imbalance_* f32 [1].
// Knobs: extra_experts (N, 4), alpha (0.5), epsilon (0.05).
moe.router @libra_predict(%hidden: tensor<?x2048xf32>, %next_gate: tensor<2048x128xf32>)
    -> (next_topk_ids: tensor<?x8xi32>) attributes {experts = 128, top_k = 8} {
  %logits = moe.gate %hidden, %next_gate
      : tensor<?x2048xf32>, tensor<2048x128xf32> -> tensor<?x128xf32>
  %ids, %weights = moe.route %logits k = 8
      : tensor<?x128xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
  moe.yield %ids : tensor<?x8xi32>
}

moe.balance @libra(%next_topk_ids: tensor<?x8xi32>, %token_gpu: tensor<?xi32>)
    -> (placement: tensor<128x8xi32>, shard_plan: tensor<8x128xi32>,
        loads_before: tensor<8xf32>, loads_replicated: tensor<8xf32>,
        loads_after: tensor<8xf32>, imbalance_before: tensor<1xf32>,
        imbalance_replicated: tensor<1xf32>, imbalance_after: tensor<1xf32>)
    attributes {experts = 128} {
  %extra = moe.knob "extra_experts" = 4 : i64
  %alpha = moe.knob "alpha" = 0.5 : f32
  %epsilon = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %next_topk_ids, %token_gpu {gpus = 8}
      : tensor<?x8xi32>, tensor<?xi32> -> tensor<8x128xi32>
  %m = moe.libra_replicate %req extra(%extra : i64) alpha(%alpha : f32)
      : tensor<8x128xi32> -> tensor<128x8xi32>
  %plan, %after = moe.libra_shard %req, %m epsilon(%epsilon : f32)
      : tensor<8x128xi32>, tensor<128x8xi32> -> tensor<8x128xi32>, tensor<8xf32>
  %before = moe.served_loads %req : tensor<8x128xi32> -> tensor<8xf32>
  %replicated = moe.served_loads %req placed(%m : tensor<128x8xi32>)
      : tensor<8x128xi32> -> tensor<8xf32>
  %ib = moe.imbalance %before : tensor<8xf32> -> tensor<1xf32>
  %ir = moe.imbalance %replicated : tensor<8xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<8xf32> -> tensor<1xf32>
  moe.yield %m, %plan, %before, %replicated, %after, %ib, %ir, %ia
      : tensor<128x8xi32>, tensor<8x128xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
        tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}
