moe.router @xshare_ep(%logits: tensor<?x256xf32>, %bias: tensor<256xf32>,
                      %placement: !moe.placement<experts = 256, devices = 8, slots = 288>)
    -> (topk_ids: tensor<?x8xi32>, topk_weights: tensor<?x8xf32>,
        num_tokens_post_padded: tensor<1xi32>)
    attributes {experts = 256, top_k = 8, shared_experts = 0.0} {
  %k0 = moe.knob "k0" = 1 : i64
  %device_budget = moe.knob "device_budget" = 5 : i64
  %scores = moe.sigmoid %logits : tensor<?x256xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x256xf32>, tensor<256xf32>
  %warm = moe.union_topk %biased, %k0 : tensor<?x256xf32> -> !moe.set<256>
  %mass = moe.batch_reduce sum %scores : tensor<?x256xf32> -> tensor<256xf32>
  %selected = moe.fill_per_device %warm with %mass on %placement
      budget(%device_budget : i64)
      : tensor<256xf32>, !moe.placement<experts = 256, devices = 8, slots = 288>
      -> !moe.set<256>
  %ids, %weights = moe.route %biased within %selected
      weights(%scores : tensor<?x256xf32>) k = 8 renormalize scaling = 2.5
      : tensor<?x256xf32>, !moe.set<256> -> tensor<?x8xi32>, tensor<?x8xf32>
}
moe.balance @eplb(%loads: tensor<256xf32>)
    -> (phy2log: tensor<288xi32>, log2phy: tensor<256x33xi32>,
        imbalance_after: tensor<1xf32>)
    attributes {experts = 256} {
  %phy2log, %log2phy, %count = moe.eplb %loads groups = 8 nodes = 2 gpus = 8
      : tensor<256xf32> -> tensor<288xi32>, tensor<256x33xi32>, tensor<256xi32>
  %after = moe.device_loads %loads placed(%phy2log, %count : tensor<288xi32>, tensor<256xi32>)
      gpus = 8 : tensor<256xf32> -> tensor<8xf32>
  moe.yield %phy2log, %log2phy, %count, %before, %after, %ib, %ia
      : tensor<288xi32>, tensor<256x33xi32>, tensor<256xi32>, tensor<8xf32>,
        tensor<8xf32>, tensor<1xf32>, tensor<1xf32>
}
moe.router @libra_predict(%hidden: tensor<?x7168xf32>, %next_gate: tensor<7168x256xf32>)
    -> (next_topk_ids: tensor<?x8xi32>) attributes {experts = 256, top_k = 8} {
  %logits = moe.gate %hidden, %next_gate
      : tensor<?x7168xf32>, tensor<7168x256xf32> -> tensor<?x256xf32>
  %ids, %weights = moe.route %logits k = 8
      : tensor<?x256xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
}
moe.balance @libra(%next_topk_ids: tensor<?x8xi32>, %token_gpu: tensor<?xi32>)
    -> (placement: tensor<256x8xi32>, shard_plan: tensor<8x256xi32>,
        imbalance_replicated: tensor<1xf32>, imbalance_after: tensor<1xf32>)
    attributes {experts = 256} {
  %extra = moe.knob "extra_experts" = 4 : i64
  %epsilon = moe.knob "epsilon" = 0.05 : f32
  %req = moe.gpu_requests %next_topk_ids, %token_gpu gpus = 8
      : tensor<?x8xi32>, tensor<?xi32> -> tensor<8x256xi32>
  %m = moe.libra_replicate %req extra(%extra : i64) alpha(%alpha : f32)
      : tensor<8x256xi32> -> tensor<256x8xi32>
  %plan, %after = moe.libra_shard %req, %m epsilon(%epsilon : f32)
      : tensor<8x256xi32>, tensor<256x8xi32> -> tensor<8x256xi32>, tensor<8xf32>
  %before = moe.served_loads %req : tensor<8x256xi32> -> tensor<8xf32>
  %replicated = moe.served_loads %req placed(%m : tensor<256x8xi32>)
      : tensor<8x256xi32> -> tensor<8xf32>
  %ib = moe.imbalance %before : tensor<8xf32> -> tensor<1xf32>
  %ir = moe.imbalance %replicated : tensor<8xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<8xf32> -> tensor<1xf32>
  moe.yield %m, %plan, %before, %replicated, %after, %ib, %ir, %ia
      : tensor<256x8xi32>, tensor<8x256xi32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
        tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}
moe.residency @dynaexq(%hotness: tensor<256xf32>, %counts: tensor<256xi32>,
                       %current: !moe.set<256>)
    -> (hotness_out: tensor<256xf32>, hi_set: !moe.set<256>,
        demotions: tensor<256xi32>, num_demotions: tensor<1xi32>)
    attributes {experts = 256} {
  %alpha = moe.knob "alpha" = 0.8 : f32
  %margin = moe.knob "margin" = 1.0 : f32
  %budget = moe.knob "budget_bytes" = 51539607552 : i64
  %fixed = moe.knob "fixed_bytes" = 21474836480 : i64
  %hi_bytes = moe.knob "hi_bytes" = 9437184 : i64
  %lo_bytes = moe.knob "lo_bytes" = 2359296 : i64
  %layers = moe.knob "layers" = 48 : i64
  %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<256xf32>, tensor<256xi32>
  %n = moe.hi_capacity budget(%budget : i64) fixed(%fixed : i64) hi_bytes(%hi_bytes : i64)
      lo_bytes(%lo_bytes : i64) layers(%layers : i64) experts = 256 -> i64
  %hi = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
      : tensor<256xf32> -> !moe.set<256>
  %up = moe.difference %hi, %current : !moe.set<256>
  %down = moe.difference %current, %hi : !moe.set<256>
  %promotions, %num_up = moe.ranked %up by %s : !moe.set<256>, tensor<256xf32>
      -> tensor<256xi32>, tensor<1xi32>
  %demotions, %num_down = moe.ranked %down by %s ascending : !moe.set<256>, tensor<256xf32>
      -> tensor<256xi32>, tensor<1xi32>
  moe.yield %s, %hi, %promotions, %num_up, %demotions, %num_down
      : tensor<256xf32>, !moe.set<256>, tensor<256xi32>, tensor<1xi32>, tensor<256xi32>,
        tensor<1xi32>
}