// A router whose batch stage writes a per-token buffer sequentially (each token gets
// its request's summed scores): the large-batch split puts it in the last CTA's tail.
moe.router @per_request(%logits: tensor<?x16xf32>, %request_ids: tensor<?xi32>)
    -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
    attributes {experts = 16, top_k = 2} {
  %p = moe.softmax %logits : tensor<?x16xf32>
  %req = moe.segment_reduce sum %p by %request_ids : tensor<?x16xf32>, tensor<?xi32>
  %ids, %w = moe.route %req weights(%p : tensor<?x16xf32>) k = 2 renormalize
      : tensor<?x16xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  moe.yield %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
