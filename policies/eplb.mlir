// eplb.mlir - DeepSeek's expert-parallel load balancer (EPLB, eplb.py
// `rebalance_experts`) as a balance rule, for one MoE layer:
//   1. pack the 8 expert groups onto the 2 nodes, balancing the groups' loads;
//   2. inside each node, give one more replica to the expert with the highest load per
//      replica until the node's 144 slots are used (32 redundant experts in all);
//   3. pack each node's replicas onto its 4 GPUs, balancing load/replica.
// Then the per-GPU loads with the default placement (expert e on GPU e / 32) and with
// the plan, and their imbalance ratios (max / mean).
// Ties (equal loads) go to the lower index everywhere; see `moe.eplb`.
//
// Shape: DeepSeek-V3, 256 routed experts in 8 groups, 288 physical slots on 2 nodes x
// 4 GPUs (36 slots per GPU).
// Inputs: loads f32 [256] (tokens per expert over the last window; finite, >= 0).
// Outputs: phy2log i32 [288], log2phy i32 [256, 33] (-1 padded; vLLM's
//          logical_to_physical_map), replica_count i32 [256], gpu_loads_before /
//          gpu_loads_after f32 [8], imbalance_before / imbalance_after f32 [1].
// Knobs: none (the shape is the plan's: groups, nodes, GPUs and slots are attributes).
moe.balance @eplb(%loads: tensor<256xf32>)
    -> (phy2log: tensor<288xi32>, log2phy: tensor<256x33xi32>,
        replica_count: tensor<256xi32>, gpu_loads_before: tensor<8xf32>,
        gpu_loads_after: tensor<8xf32>, imbalance_before: tensor<1xf32>,
        imbalance_after: tensor<1xf32>)
    attributes {experts = 256} {
  %phy2log, %log2phy, %count = moe.eplb %loads {groups = 8, nodes = 2, gpus = 8}
      : tensor<256xf32> -> tensor<288xi32>, tensor<256x33xi32>, tensor<256xi32>
  %before = moe.device_loads %loads {gpus = 8} : tensor<256xf32> -> tensor<8xf32>
  %after = moe.device_loads %loads placed(%phy2log, %count : tensor<288xi32>, tensor<256xi32>)
      {gpus = 8} : tensor<256xf32> -> tensor<8xf32>
  %ib = moe.imbalance %before : tensor<8xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<8xf32> -> tensor<1xf32>
  moe.yield %phy2log, %log2phy, %count, %before, %after, %ib, %ia
      : tensor<288xi32>, tensor<256x33xi32>, tensor<256xi32>, tensor<8xf32>,
        tensor<8xf32>, tensor<1xf32>, tensor<1xf32>
}
