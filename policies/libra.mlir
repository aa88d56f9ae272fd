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
// Experts live on home GPU e / (E/G) (e.g. 128 experts over 8 GPUs: e / 16); requests
// are served locally when the GPU holds the expert, otherwise at its home (see
// moe.served_loads).
//
// Shape: generic in E, top-k, the GPUs G and the hidden size H; Qwen3-30B-A3B on 8
// GPUs is --model models/qwen3-30b-a3b.json --devices 8 (H = 2048, E = 128, top-8).
// Inputs: @libra_predict: hidden f32 [T, H], next_gate f32 [H, E];
//         @libra: next_topk_ids i32 [T, k] (from @libra_predict), token_gpu i32 [T].
// Outputs: placement i32 [E, G] (1: GPU g holds expert e), shard_plan i32 [G, E]
//          (remote tokens of e each GPU serves), loads_* f32 [G], imbalance_* f32 [1].
// Knobs: extra_experts (N, 4), alpha (0.5), epsilon (0.05).
moe.router @libra_predict(%hidden: tensor<?x?xf32>, %next_gate: tensor<?x?xf32>)
    -> (next_topk_ids: tensor<?x?xi32>) {
  %logits = moe.gate %hidden, %next_gate
      : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?x?xf32>
  %ids, %weights = moe.route %logits k = ?
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids : tensor<?x?xi32>
}

moe.balance @libra(%next_topk_ids: tensor<?x?xi32>, %token_gpu: tensor<?xi32>)
    -> (placement: tensor<?x?xi32>, shard_plan: tensor<?x?xi32>,
        loads_before: tensor<?xf32>, loads_replicated: tensor<?xf32>,
        loads_after: tensor<?xf32>, imbalance_before: tensor<1xf32>,
        imbalance_replicated: tensor<1xf32>, imbalance_after: tensor<1xf32>) {
  %extra = moe.knob "extra_experts" = 4 : i64
  %alpha = moe.knob "alpha" = 0.5 : f32
  %epsilon = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %next_topk_ids, %token_gpu gpus = ?
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?x?xi32>
  %m = moe.libra_replicate %req extra(%extra : i64) alpha(%alpha : f32)
      : tensor<?x?xi32> -> tensor<?x?xi32>
  %plan, %after = moe.libra_shard %req, %m epsilon(%epsilon : f32)
      : tensor<?x?xi32>, tensor<?x?xi32> -> tensor<?x?xi32>, tensor<?xf32>
  %before = moe.served_loads %req : tensor<?x?xi32> -> tensor<?xf32>
  %replicated = moe.served_loads %req placed(%m : tensor<?x?xi32>)
      : tensor<?x?xi32> -> tensor<?xf32>
  %ib = moe.imbalance %before : tensor<?xf32> -> tensor<1xf32>
  %ir = moe.imbalance %replicated : tensor<?xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<?xf32> -> tensor<1xf32>
  moe.yield %m, %plan, %before, %replicated, %after, %ib, %ir, %ia
      : tensor<?x?xi32>, tensor<?x?xi32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>,
        tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

// @libra_shard (balance rule, host): Alg. 2 alone, on a placement already in place -
// the replicas @libra planned from the lookahead and copied while the previous layer
// ran - and the layer's ACTUAL routing: what the executor runs on the CPU while
// MoE_local computes (§3.1). Inputs: topk_ids i32 [T, k], token_gpu i32 [T],
// placement i32 [E, G]. Outputs as @libra's.
moe.balance @libra_shard(%topk_ids: tensor<?x?xi32>, %token_gpu: tensor<?xi32>,
                         %placement: tensor<?x?xi32>)
    -> (shard_plan: tensor<?x?xi32>, loads_after: tensor<?xf32>,
        imbalance_after: tensor<1xf32>) {
  %epsilon = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %topk_ids, %token_gpu gpus = ?
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?x?xi32>
  %plan, %after = moe.libra_shard %req, %placement epsilon(%epsilon : f32)
      : tensor<?x?xi32>, tensor<?x?xi32> -> tensor<?x?xi32>, tensor<?xf32>
  %ia = moe.imbalance %after : tensor<?xf32> -> tensor<1xf32>
  moe.yield %plan, %after, %ia : tensor<?x?xi32>, tensor<?xf32>, tensor<1xf32>
}
