// RUN: moe-opt %s --moe-specialize="experts=8 top_k=2" -split-input-file -verify-diagnostics
// Binding errors: each names the request and the policy.

// expected-error @+1 {{experts=8 conflicts with router @fixed, which fixes experts = 16}}
moe.router @fixed(%logits: tensor<?x16xf32>) -> (topk_ids: tensor<?x2xi32>)
    attributes {experts = 16, top_k = 2} {
  %ids, %w = moe.route %logits k = 2 : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids : tensor<?x2xi32>
}

// -----

// expected-error @+1 {{top_k=2 conflicts with router @fixed_k, which fixes top_k = 4}}
moe.router @fixed_k(%logits: tensor<?x8xf32>) -> (topk_ids: tensor<?x4xi32>)
    attributes {experts = 8, top_k = 4} {
  %ids, %w = moe.route %logits k = 4 : tensor<?x8xf32> -> tensor<?x4xi32>, tensor<?x4xf32>
  moe.yield %ids : tensor<?x4xi32>
}

// -----

moe.router @groups(%logits: tensor<?x?xf32>) -> (topk_ids: tensor<?x?xi32>) {
  // expected-error @+1 {{'moe.group_limit' in router @groups is generic in groups: bind it (--groups or --model)}}
  %l = moe.group_limit %logits groups = ? keep = ? : tensor<?x?xf32>
  %ids, %w = moe.route %l k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids : tensor<?x?xi32>
}

// -----

// expected-error @+1 {{router @placed is generic in devices: bind it (--devices or --model)}}
moe.router @placed(%logits: tensor<?x?xf32>,
                   %placement: !moe.placement<experts = ?, devices = ?, slots = ?>)
    -> (topk_ids: tensor<?x?xi32>) {
  %ids, %w = moe.route %logits k = ? : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  %phys = moe.remap_physical %ids, %placement : tensor<?x?xi32>,
      !moe.placement<experts = ?, devices = ?, slots = ?>
  moe.yield %phys : tensor<?x?xi32>
}

// -----

moe.router @big_budget(%logits: tensor<?x?xf32>) -> (selected: !moe.set<?>) {
  %budget = moe.knob "budget" = 24 : i64
  %none = moe.empty_set : !moe.set<?>
  %mass = moe.batch_reduce sum %logits : tensor<?x?xf32> -> tensor<?xf32>
  // expected-warning @+1 {{knob 'budget' defaults to 24, more than the 8 experts: by default the policy selects every expert}}
  %s = moe.fill %none with %mass budget(%budget : i64) : tensor<?xf32> -> !moe.set<?>
  moe.yield %s : !moe.set<?>
}

