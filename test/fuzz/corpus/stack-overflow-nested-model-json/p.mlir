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
