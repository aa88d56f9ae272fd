// expertflow.mlir - ExpertFlow's adaptive prefetch and cache-aware routing for one
// MoE layer (../shared/papers/004_*.txt, §2.3, §3.2-3.4):
//   @expertflow_route (router, GPU) - cache-aware routing (§3.4): an optional score
//     bonus for experts already resident (`bonus`, 0 = off), top-k within all experts,
//     and the execution order that runs the tokens whose experts are all resident
//     first (their compute overlaps the other tokens' swap-ins);
//   @expertflow (prefetch rule, host):
//     1. expected experts: from the pre-gate mass of the coming layer, the smallest
//        best-first set holding `threshold` of the mass (N_e = its size);
//     2. step size S = ceil(N_e * E_s / (C_s * T_l)), clamped to [1, layers];
//     3. feedback: a stall counter (predicted expert missing when needed) above
//        `stall_threshold` resets and grows S by one; an overfetch counter (expert
//        loaded before it was needed) reaching `overfetch_threshold` resets and
//        shrinks S by one (S from step 2 is the start value until S is set);
//     4. two-level LRU: experts predicted or used within the last S steps are the
//        high tier, the rest the low tier; misses are loaded (demand first, then the
//        predicted prefetch), evicting the least recently used low-tier expert first.
//
// Shape: generic in E and top-k. The knobs' defaults are DeepSeek-V2-Lite's (--experts
// 64 --top-k 6: 26 MoE layers; BF16 experts of 16.5 MiB), a cache of 32 experts, PCIe
// at 25 GB/s, 0.4 ms per layer.
// Inputs (rule): pregate_mass f32 [E] (sum over the batch of the pre-gate
//   probabilities), requested / resident bool [E], last_use i32 [E] (-1 = never),
//   now i32 [1] (step counter), step / stalls / overfetches i32 [1] (the feedback
//   state, step 0 = not set), events i32 [n] (1 = stall, 2 = overfetch, in order).
// Outputs (rule): expected bool [E], num_expected, initial_step, step_size,
//   stalls_out, overfetches_out, step_trace [n], resident_out, high_tier, last_use_out,
//   loads / evictions i32 [E] (in order, -1 padded).
// Knobs: threshold (0.9), expert_bytes, bandwidth (bytes/s), layer_time (s), layers,
//   stall_threshold (4), overfetch_threshold (8), capacity (32 experts; must hold one),
//   bonus (router, 0.0).
moe.router @expertflow_route(%logits: tensor<?x?xf32>, %resident: !moe.set<?>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>,
        expert_counts: tensor<?xi32>, order: tensor<?xi32>, num_ready: tensor<1xi32>) {
  %bonus = moe.knob "bonus" = 0.0 : f32
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %biased = moe.bias_resident %logits, %resident, %bonus : tensor<?x?xf32>, !moe.set<?>
  %ids, %weights = moe.route %biased weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %counts = moe.expert_counts %ids : tensor<?x?xi32> -> tensor<?xi32>
  %order, %ready = moe.resident_first %ids, %resident
      : tensor<?x?xi32>, !moe.set<?> -> tensor<?xi32>, tensor<1xi32>
  moe.yield %ids, %weights, %counts, %order, %ready
      : tensor<?x?xi32>, tensor<?x?xf32>, tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
}

moe.prefetch @expertflow(%pregate_mass: tensor<?xf32>, %requested: !moe.set<?>,
                         %resident: !moe.set<?>, %last_use: tensor<?xi32>,
                         %now: tensor<1xi32>, %step: tensor<1xi32>, %stalls: tensor<1xi32>,
                         %overfetches: tensor<1xi32>, %events: tensor<?xi32>)
    -> (expected: !moe.set<?>, num_expected: tensor<1xi32>, initial_step: tensor<1xi32>,
        step_size: tensor<1xi32>, stalls_out: tensor<1xi32>, overfetches_out: tensor<1xi32>,
        step_trace: tensor<?xi32>, resident_out: !moe.set<?>, high_tier: !moe.set<?>,
        last_use_out: tensor<?xi32>, loads: tensor<?xi32>, evictions: tensor<?xi32>) {
  %threshold = moe.knob "threshold" = 0.9 : f32
  %expert_bytes = moe.knob "expert_bytes" = 17301504 : i64
  %bandwidth = moe.knob "bandwidth" = 2.5e10 : f32
  %layer_time = moe.knob "layer_time" = 4.0e-04 : f32
  %layers = moe.knob "layers" = 26 : i64
  %stall_threshold = moe.knob "stall_threshold" = 4 : i64
  %overfetch_threshold = moe.knob "overfetch_threshold" = 8 : i64
  %capacity = moe.knob "capacity" = 32 : i64
  %expected, %ne = moe.expected_experts %pregate_mass threshold(%threshold : f32)
      : tensor<?xf32> -> !moe.set<?>, tensor<1xi32>
  %s0 = moe.step_size %ne expert_bytes(%expert_bytes : i64) bandwidth(%bandwidth : f32)
      layer_time(%layer_time : f32) layers(%layers : i64) : tensor<1xi32> -> tensor<1xi32>
  %s, %st, %ov, %trace = moe.step_feedback %step, %s0, %stalls, %overfetches, %events
      stall_threshold(%stall_threshold : i64) overfetch_threshold(%overfetch_threshold : i64)
      layers(%layers : i64)
      : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
      -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
  %res, %high, %last, %loads, %evicted = moe.two_level_lru %resident, %last_use, %requested,
      %expected, %now, %s capacity(%capacity : i64)
      : !moe.set<?>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
  moe.yield %expected, %ne, %s0, %s, %st, %ov, %trace, %res, %high, %last, %loads, %evicted
      : !moe.set<?>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>,
        tensor<1xi32>, tensor<?xi32>, !moe.set<?>, !moe.set<?>, tensor<?xi32>,
        tensor<?xi32>, tensor<?xi32>
}
