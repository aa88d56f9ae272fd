// RUN: moe-opt %s --moe-specialize="experts=8" -split-input-file -verify-diagnostics
// Binding errors of rules: a size the request does not give, and a `?` outside a
// generic policy.

moe.balance @eplb_unbound(%loads: tensor<?xf32>) -> (phy2log: tensor<?xi32>) {
  // expected-error @+1 {{'moe.eplb' in balance rule @eplb_unbound is generic in groups: bind it (--groups or --model)}}
  %p2l, %l2p, %cnt = moe.eplb %loads groups = ? nodes = ? gpus = ?
      : tensor<?xf32> -> tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>
  moe.yield %p2l : tensor<?xi32>
}

// -----

moe.balance @eplb_fixed(%loads: tensor<8xf32>) -> (after: tensor<4xf32>)
    attributes {experts = 8} {
  // expected-error @+1 {{'moe.device_loads' op gpus = ? is only allowed in a generic policy}}
  %after = moe.device_loads %loads gpus = ? : tensor<8xf32> -> tensor<4xf32>
  moe.yield %after : tensor<4xf32>
}

// -----

// A rule reading [T, k] ids takes k from its file's router or --top-k.
moe.balance @libra_k(%ids: tensor<?x?xi32>, %token_gpu: tensor<?xi32>) -> (requests: tensor<?x?xi32>) {
  // expected-error @+1 {{'moe.gpu_requests' in balance rule @libra_k is generic in top_k: bind it (--top-k or --model)}}
  %req = moe.gpu_requests %ids, %token_gpu gpus = 4
      : tensor<?x?xi32>, tensor<?xi32> -> tensor<?x?xi32>
  moe.yield %req : tensor<?x?xi32>
}
