// eplb.mlir - DeepSeek's expert-parallel load balancer (EPLB, eplb.py
// `rebalance_experts`) as a balance rule, for one MoE layer:
//   1. pack the expert groups onto the nodes, balancing the groups' loads;
//   2. inside each node, give one more replica to the expert with the highest load per
//      replica until the node's slots are used (slots - experts redundant experts);
//   3. pack each node's replicas onto its GPUs, balancing load/replica.
// Then the per-GPU loads with the default placement (expert e on GPU e / (E/GPUs)) and
// with the plan, and their imbalance ratios (max / mean).
// Ties (equal loads) go to the lower index everywhere; see `moe.eplb`.
//
// Shape: generic in E, the expert groups, the nodes, the GPUs and the physical slots
// P. DeepSeek-V3's deployment (--model models/deepseek-v3.json --nodes 2 --devices 8
// --slots 288): 256 routed experts in 8 groups, 288 slots on 2 nodes x 4 GPUs (36
// slots per GPU, 32 redundant experts).
// Inputs: loads f32 [E] (tokens per expert over the last window; finite, >= 0).
// Outputs: phy2log i32 [P], log2phy i32 [E, P - E + 1] (-1 padded; vLLM's
//          logical_to_physical_map), replica_count i32 [E], gpu_loads_before /
//          gpu_loads_after f32 [GPUs], imbalance_before / imbalance_after f32 [1].
// Knobs: none (the shape is the plan's).
moe.balance @eplb(%loads: tensor<?xf32>)
    -> (phy2log: tensor<?xi32>, log2phy: tensor<?x?xi32>,
        replica_count: tensor<?xi32>, gpu_loads_before: tensor<?xf32>,
        gpu_loads_after: tensor<?xf32>, imbalance_before: tensor<1xf32>,
        imbalance_after: tensor<1xf32>) {
  %phy2log, %log2phy, %count = moe.eplb %loads groups = ? nodes = ? gpus = ?
      : tensor<?xf32> -> tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>
  %before = moe.device_loads %loads gpus = ? : tensor<?xf32> -> tensor<?xf32>
  %after = moe.device_loads %loads placed(%phy2log, %count : tensor<?xi32>, tensor<?xi32>)
      gpus = ? : tensor<?xf32> -> tensor<?xf32>
  %ib = moe.imbalance %before : tensor<?xf32> -> tensor<1xf32>
  %ia = moe.imbalance %after : tensor<?xf32> -> tensor<1xf32>
  moe.yield %phy2log, %log2phy, %count, %before, %after, %ib, %ia
      : tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>, tensor<?xf32>,
        tensor<?xf32>, tensor<1xf32>, tensor<1xf32>
}
