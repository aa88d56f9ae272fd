// llep.mlir - Least-Loaded Expert Parallelism (Nguyen et al., "Least-Loaded Expert
// Parallelism: Load Balancing An Imbalanced Mixture-of-Experts", arXiv 2601.17111), a
// balance rule run once per step on the step's per-expert token counts (a router's
// `expert_counts`): experts live on their native GPU (e / (E / GPUs)); when the native
// placement is imbalanced (max / mean of the GPUs' loads at least `threshold`, lambda),
// the experts are taken heaviest first and every GPU is held to C = alpha x the mean
// load: what an expert's native GPU cannot take is spilled, with the expert's
// weights, to the other GPU with the least effective load, in chunks of at least
// `min_chunk` tokens (m) unless the chunk is all that is left. The routing is not
// changed: only where the tokens are computed. Paper: ~1.9x end to end on
// gpt-oss-120b, up to 5x on an imbalanced MoE layer.
//
// Choices (our reading of the paper and its public code; written here and in
// docs/traces.md): a GPU's effective load counts the native load of its experts not yet
// taken (the code's "pending native load"); tokens no GPU has room for go to the
// least-loaded other GPU.
//
// Shape: generic in E and GPUs (--experts E --devices G, or --model config.json
//        --devices G).
// Inputs: loads i32 [E] (tokens routed to each expert this step).
// Knobs: capacity_factor (alpha, 1.1; > 0), min_chunk (m, 1024 tokens; >= 0),
//        threshold (lambda, 1.3; <= 0: always spill).
// Outputs: plan[e][g] (tokens of expert e computed on GPU g), the GPUs' loads before
//          (native) and after, their imbalance, and how many expert weights move.
moe.balance @llep(%loads: tensor<?xi32>)
    -> (plan: tensor<?x?xi32>, gpu_loads_before: tensor<?xf32>,
        gpu_loads_after: tensor<?xf32>, imbalance_before: tensor<1xf32>,
        imbalance_after: tensor<1xf32>, weight_transfers: tensor<1xi32>) {
  %alpha = moe.knob "capacity_factor" = 1.1 : f32
  %min_chunk = moe.knob "min_chunk" = 1024 : i64
  %lambda = moe.knob "threshold" = 1.3 : f32
  %plan, %before, %after, %moved = moe.least_loaded %loads capacity_factor(%alpha : f32)
      min_chunk(%min_chunk : i64) threshold(%lambda : f32) gpus = ?
      : tensor<?xi32> -> tensor<?x?xi32>, tensor<?xf32>, tensor<?xf32>, tensor<1xi32>
  %ib = moe.imbalance %before : tensor<?xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<?xf32> -> tensor<1xf32>
  moe.yield %plan, %before, %after, %ib, %ia, %moved
      : tensor<?x?xi32>, tensor<?xf32>, tensor<?xf32>, tensor<1xf32>, tensor<1xf32>,
        tensor<1xi32>
}
