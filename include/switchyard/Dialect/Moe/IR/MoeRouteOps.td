//===- MoeRouteOps.td - routing outputs --------------------*- tablegen -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEROUTEOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEROUTEOPS_TD

include "switchyard/Dialect/Moe/IR/MoeTokenOps.td"

def Moe_RouteOp : Moe_RouteStageOp<"route", [Moe_RowWise, AttrSizedOperandSegments]> {
  let summary = "routes every token to its top-k experts within a set";
  let description = [{
    For every token t, the eligible experts are those in `within` (all E when absent)
    whose `scores[t,e]` is neither `-inf` nor NaN. The token goes to its k eligible
    experts with the highest `scores` (descending, ties to the lower id). When fewer
    than k are eligible the remaining slots get id `-1` and weight 0 (XShare's
    "refinement": top-k within the selected set).

    Weights come from `weights` when given (DeepSeek-V3 selects with biased scores but
    weighs with the unbiased ones), else from `scores`. With `renormalize`, the k
    weights are divided by their sum (when the sum is > 0). `softmax_weights` (only
    with `renormalize` and without `weights`) weighs each selected expert by the
    exponential of its score (computed as `exp(scores[t,e] - m)`, m the best selected
    score), which the renormalization turns into the softmax over the k selected
    scores: the weights of `weights(moe.softmax %scores)` with `renormalize`, from k
    `exp` per token instead of E (`--moe-fold-route-softmax` makes this form).
    Finally every weight is multiplied by `scaling` (default 1; DeepSeek-V3's routed
    scaling factor is 2.5), or by the value of `scaled_by(%f : f32)`, usually a knob
    (`moe.knob "routed_scaling_factor"`), so that engines set it at run time.

    `top_p(%p : f32)` truncates each token's slots to the shortest prefix (best first)
    whose weights, before renormalization, add up to at least `p`, keeping at least
    `min_k(%m : i64)` slots (default 1): a later slot becomes empty (id `-1`, weight 0)
    once the slots before it hold `p`. The weights must be probabilities for this to be
    top-p routing: `weights(moe.softmax %logits)` (not with `softmax_weights`; the
    compiler keeps such a route's softmax). Renormalization, when asked, divides by the
    kept slots' sum. `p` must be in `(0, 1]` and `min_k` in `[1, k]` (run-time values,
    usually knobs, checked like every knob rule).

    `max_rank(%r : i64)` empties (id `-1`, weight 0) every selected slot whose expert is
    not among the token's `r` highest `scores` over all E experts, eligible or not (ties
    to the lower id, NaN last); `r = 0` means `k`. With `within`, this is OEA's
    piggy-backing: a token takes an expert the batch already runs only when the expert is
    among its own top `r`. It applies before `top_p`; `r` must be in `[0, E]`.

    `rows(%mask : tensor<?xi32>)` restricts only the tokens whose `mask[t]` is nonzero:
    the others route over all experts, without `within` and `max_rank` (MoE-Spec
    budgets the draft tokens of a verification step: `rows(%draft_mask ...)`).

    `k` must equal the enclosing router's `top_k` and be in `[1, E]` (`k = ?` in a
    generic router: bound to `top_k` by `--moe-specialize`); `scaling` must be finite
    and `> 0`. `renormalize` and `scaling` are the model's (`norm_topk_prob`,
    `routed_scaling_factor`): binding a model (`--model`, `--scaling`) sets them. Routing within the full set is routing without a set (folded).

    Example:
    ```mlir
    %ids, %w = moe.route %biased within %sel weights(%scores : tensor<?x256xf32>) k = 8
        renormalize
        scaling = 2.5 : tensor<?x256xf32>, !moe.set<256>
        -> tensor<?x8xi32>, tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$scores, Optional<Moe_ExpertSetType>:$within,
                       Optional<Moe_ScoreTensor>:$weights, Moe_I64Attr:$k,
                       UnitAttr:$renormalize, UnitAttr:$softmax_weights,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scaling,
                       Optional<F32>:$scaling_factor, Optional<F32>:$top_p,
                       Optional<I64>:$min_k, Optional<I64>:$max_rank,
                       Optional<TensorRankOf<[I32], [1]>>:$rows);
  let results = (outs Moe_IdTensor:$topk_ids, Moe_ScoreTensor:$topk_weights);
  let assemblyFormat = [{
    $scores (`within` $within^)? (`weights` `(` $weights^ `:` type($weights) `)`)? `k` `=` custom<SizeOrParam>($k)
    (`renormalize` $renormalize^)? (`softmax_weights` $softmax_weights^)?
    (`scaling` `=` $scaling^)?
    (`scaled_by` `(` $scaling_factor^ `:` type($scaling_factor) `)`)?
    (`max_rank` `(` $max_rank^ `:` type($max_rank) `)`)?
    (`top_p` `(` $top_p^ `:` type($top_p) `)`)? (`min_k` `(` $min_k^ `:` type($min_k) `)`)?
    (`rows` `(` $rows^ `:` type($rows) `)`)?
    attr-dict
    `:` type($scores) (`,` qualified(type($within))^)? `->` type($topk_ids) `,` type($topk_weights)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_RemapPhysicalOp : Moe_RouteStageOp<"remap_physical", [Moe_RowWise,
    AllTypesMatch<["ids", "result"]>, Moe_ExpertIdsReaderOpInterface]> {
  let summary = "maps logical expert ids to physical replica slots";
  let description = [{
    EPLB/Libra replication: logical expert `e = ids[t,j]` has `replica_count[e]` physical
    replicas `log2phy[e][0..replica_count[e])` (see `!moe.placement`). Token t uses
    replica `t mod replica_count[e]`, spreading a hot expert's tokens evenly over its
    copies: `phys[t,j] = log2phy[e][t mod replica_count[e]]`. `-1` stays `-1`. With
    `replicas(%r : tensor<?xi32>)` (one physical slot per expert, e.g. from
    `moe.metro_replicas`) every token of expert e goes to `r[e]` instead (the round
    robin where `r[e] < 0`).

    Example:
    ```mlir
    %phys = moe.remap_physical %ids, %placement : tensor<?x8xi32>,
        !moe.placement<experts = 256, devices = 8, slots = 288>
    ```
  }];
  let arguments = (ins Moe_IdTensor:$ids, Moe_PlacementType:$placement,
                       Optional<TensorRankOf<[I32], [1]>>:$replicas);
  let results = (outs Moe_IdTensor:$result);
  let assemblyFormat = [{
    $ids `,` $placement (`replicas` `(` $replicas^ `:` type($replicas) `)`)? attr-dict
    `:` type($ids) `,` qualified(type($placement))
  }];
  let hasVerifier = 1;
}

def Moe_MetroReplicasOp : Moe_RouteStageOp<"metro_replicas"> {
  let summary = "METRO: one replica per activated expert, balancing activated experts per GPU";
  let description = [{
    METRO's replica choice (Yu, Ma et al., arXiv 2512.09277): under expert parallelism
    with replicated experts, a memory-bound step costs each GPU the experts it
    activates, so every expert the batch activates (`counts[e] > 0`, e.g.
    `moe.expert_counts`) runs on ONE of its replicas (`placement`), the replicas chosen
    to balance the activated experts per GPU. Greedily: experts with fewer replicas
    first (less choice), then more tokens, then the lower id; each takes the replica
    whose GPU (slot p on GPU `p / (slots / devices)`) has the fewest activated experts
    so far, then the fewest tokens, then the lower replica rank.

    Results: `replicas[e]`, the physical slot expert e runs on (`-1` when the batch does
    not activate it), for `moe.remap_physical ... replicas(...)`; `device_experts[g]`,
    the experts GPU g activates.

    Example:
    ```mlir
    %slot, %per_gpu = moe.metro_replicas %counts on %placement
        : tensor<128xi32>, !moe.placement<experts = 128, devices = 8, slots = 144>
        -> tensor<128xi32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [1]>:$counts, Moe_PlacementType:$placement);
  let results = (outs TensorRankOf<[I32], [1]>:$replicas,
                      TensorRankOf<[I32], [1]>:$device_experts);
  let assemblyFormat = [{
    $counts `on` $placement attr-dict `:` type($counts) `,` qualified(type($placement))
    `->` type($replicas) `,` type($device_experts)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_FillEmptySlotsOp : Moe_RouteStageOp<"fill_empty_slots", [
    AllTypesMatch<["ids", "result_ids"]>, AllTypesMatch<["weights", "result_weights"]>]> {
  let summary = "a serving engine's routing contract: every slot names an expert";
  let description = [{
    Engines' MoE kernels take expert ids in `[0, E)` only (vLLM's fused MoE, its
    block alignment). Every slot `(t, j)` whose id is outside `[0, experts)` (a slot a
    policy left empty: `-1` below k within a set, a capacity drop, a token no expert
    chose) gets weight 0 and the token's first valid id; a token with no valid id gets
    the lowest expert the batch routes to (`batch(%counts)`, the batch's
    `moe.expert_counts`), so that no expert is newly activated, or expert 0 when no
    counts are given or the batch routes nothing. Valid slots are unchanged.

    `moe-compile --fill-empty-slots` (the engine integrations' builds) appends it to
    a router's `topk_ids` / `topk_weights`: inside the generated code, host and GPU.

    Example:
    ```mlir
    %counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<64xi32>
    %ids2, %w2 = moe.fill_empty_slots %ids, %w batch(%counts : tensor<64xi32>)
        experts = 64 : tensor<?x8xi32>, tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Moe_IdTensor:$ids, Moe_ScoreTensor:$weights,
                       Optional<TensorRankOf<[I32], [1]>>:$counts, Moe_I64Attr:$experts);
  let results = (outs Moe_IdTensor:$result_ids, Moe_ScoreTensor:$result_weights);
  let assemblyFormat = [{
    $ids `,` $weights (`batch` `(` $counts^ `:` type($counts) `)`)? `experts` `=` $experts
    attr-dict `:` type($ids) `,` type($weights)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertCountsOp : Moe_RouteStageOp<"expert_counts", [Moe_ExpertIdsReaderOpInterface]> {
  let summary = "how many tokens each expert receives";
  let description = [{
    `counts[e] = |{(t, j) : ids[t,j] == e}|`; `-1` entries are not counted. E is the
    result's size. On GPU this is computed inside the routing kernel.

    Example:
    `%counts = moe.expert_counts %ids : tensor<?x8xi32> -> tensor<128xi32>`
  }];
  let arguments = (ins Moe_IdTensor:$ids);
  let results = (outs TensorRankOf<[I32], [1]>:$counts);
  let assemblyFormat = "$ids attr-dict `:` type($ids) `->` type($counts)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_CompactActiveOp : Moe_RouteStageOp<"compact_active"> {
  let summary = "the compacted list of experts that receive tokens";
  let description = [{
    `active` lists, in ascending order, the experts with `counts[e] > 0`, padded with
    `-1` to E entries; `num_active[0]` is how many there are. A grouped-GEMM launcher
    iterates over exactly these experts (the 4th LYNX kernel compacts the same list).

    Example:
    ```mlir
    %active, %n = moe.compact_active %counts
        : tensor<128xi32> -> tensor<128xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [1]>:$counts);
  let results = (outs TensorRankOf<[I32], [1]>:$active,
                      TensorRankOf<[I32], [1]>:$num_active);
  let assemblyFormat = [{
    $counts attr-dict `:` type($counts) `->` type($active) `,` type($num_active)
  }];
  let hasVerifier = 1;
}

def Moe_AlignBlocksOp : Moe_RouteStageOp<"align_blocks", [Moe_ExpertIdsReaderOpInterface,
    DeclareOpInterfaceMethods<Moe_TokenSizedResultsOpInterface>]> {
  let summary = "vLLM-style block-aligned token order for a grouped GEMM";
  let description = [{
    The contract of vLLM's `moe_align_block_size`, for T tokens with k slots each
    (flattened slot index `t*k + j`), E experts and block size `block_size`:
    * `sorted_token_ids` has `T*k + E*(block_size-1)` entries: the slots of expert 0
      in ascending slot order, padded to a multiple of `block_size` with the sentinel
      `T*k`, then expert 1's, and so on; experts without tokens take no room; the tail
      is filled with `T*k`. Slots with id `-1` are skipped.
    * `expert_ids` has `ceil((T*k + E*(block_size-1)) / block_size)` entries: the
      expert of each block, `-1` for blocks past the end.
    * `num_tokens_post_padded[0]` is the padded length actually used.
    `counts` are the per-expert slot counts (`moe.expert_counts` of the same ids);
    `block_size >= 1`.

    Example:
    ```mlir
    %sorted, %blocks, %padded = moe.align_blocks %ids, %counts block_size = 64
        : tensor<?x8xi32>, tensor<128xi32> -> tensor<?xi32>, tensor<?xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_IdTensor:$ids, TensorRankOf<[I32], [1]>:$counts,
                       Moe_I64Attr:$block_size);
  let results = (outs TensorRankOf<[I32], [1]>:$sorted_token_ids,
                      TensorRankOf<[I32], [1]>:$expert_ids,
                      TensorRankOf<[I32], [1]>:$num_tokens_post_padded);
  let assemblyFormat = [{
    $ids `,` $counts `block_size` `=` $block_size attr-dict `:` type($ids) `,` type($counts)
    `->` type($sorted_token_ids) `,` type($expert_ids) `,` type($num_tokens_post_padded)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_CapacityOp : Moe_RouteStageOp<"capacity", [Moe_ExpertIdsReaderOpInterface,
    AttrSizedOperandSegments, AllTypesMatch<["ids", "kept_ids"]>,
    AllTypesMatch<["weights", "kept_weights"]>]> {
  let summary = "capacity-limited routing (GShard / Switch Transformer): drops overflow slots";
  let description = [{
    Admits the routed slots `(t, j)` of `ids` / `weights` ([T, k], e.g. the softmax
    top-k of `moe.route`) into experts that accept at most C slots each, in GShard's
    priority order: every token's first choice in token order (`j = 0`, `t = 0..T-1`),
    then every second choice, and so on. A slot that finds its expert full is DROPPED:
    its id becomes `-1` and its weight 0. Slots with id `-1` (or outside `[0, E)`) are
    not routed and stay `-1` / 0 without counting as drops.

    The capacity is `C = ceil(capacity_factor * T * k / E)` (computed in double
    precision: `ceil(double(factor) * double(T * k) / double(E))`) with
    `capacity_factor(%f : f32)`, usually a knob, or an absolute `capacity(%c : i64)`;
    exactly one of the two. T is the batch's token count, k the columns of `ids` and E
    the experts (the size of `counts`).

    Kept slots keep their weights, unless `renormalize_after_drop`: then each token's
    kept weights are divided by their sum (when it is > 0).

    `counts[e]` is the number of slots expert e admitted (at most C); `dropped[0]` the
    number of dropped slots.

    Example (Switch-style top-2 with capacity factor 1.25):
    ```mlir
    %cf = moe.knob "capacity_factor" = 1.25 : f32
    %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity_factor(%cf : f32)
        : tensor<?x2xi32>, tensor<?x2xf32>
        -> tensor<?x2xi32>, tensor<?x2xf32>, tensor<64xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_IdTensor:$ids, Moe_ScoreTensor:$weights,
                       Optional<F32>:$capacity_factor, Optional<I64>:$capacity,
                       UnitAttr:$renormalize_after_drop);
  let results = (outs Moe_IdTensor:$kept_ids, Moe_ScoreTensor:$kept_weights,
                      TensorRankOf<[I32], [1]>:$counts, TensorRankOf<[I32], [1]>:$dropped);
  let assemblyFormat = [{
    $ids `,` $weights
    (`capacity_factor` `(` $capacity_factor^ `:` type($capacity_factor) `)`)?
    (`capacity` `(` $capacity^ `:` type($capacity) `)`)?
    (`renormalize_after_drop` $renormalize_after_drop^)? attr-dict
    `:` type($ids) `,` type($weights) `->` type($kept_ids) `,` type($kept_weights) `,`
    type($counts) `,` type($dropped)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_AdmitOp : Moe_RouteStageOp<"admit", [AttrSizedOperandSegments,
    AllTypesMatch<["scores", "result"]>]> {
  let summary = "capacity-aware admission (He et al., ICLR 2026): each expert admits its best candidates";
  let description = [{
    Capacity-Aware Token Drop and Expanded Drop (arXiv 2503.05066). Every token t
    proposes its `candidates` best experts by `scores[t,e]` (ties to the lower id, NaN
    last; `candidates(%m : i64)`, `0` or absent meaning `k`: Token Drop; more than k:
    Expanded Drop). Every expert e then admits, among the tokens that propose it, the C
    with the highest `scores[t,e]` (ties to the lower token index), C from
    `capacity_factor(%f : f32)` as `moe.capacity` (`ceil(f * T * k / E)`, double
    precision) or an absolute `capacity(%c : i64)`. The result keeps `scores[t,e]`
    where expert e admitted token t and is `-inf` elsewhere, so that a following
    `moe.route ... k = ?` takes each token's best k admitted experts (fewer leave empty
    slots). NaN scores are never admitted.

    `k` is the model's top-k (`k = ?` binds to it), the number of slots per token the
    capacity is sized for; `candidates` must be in `[0, E]`.

    Example (Token Drop at capacity factor 1.0, then each token's top-k of what its
    experts admitted, renormalized):
    ```mlir
    %probs = moe.softmax %logits : tensor<?x64xf32>
    %admitted = moe.admit %probs capacity_factor(%cf : f32) k = 8 : tensor<?x64xf32>
    %ids, %w = moe.route %admitted k = 8 renormalize
        : tensor<?x64xf32> -> tensor<?x8xi32>, tensor<?x8xf32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$scores, Optional<I64>:$candidates,
                       Optional<F32>:$capacity_factor, Optional<I64>:$capacity,
                       Moe_I64Attr:$k);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = [{
    $scores (`candidates` `(` $candidates^ `:` type($candidates) `)`)?
    (`capacity_factor` `(` $capacity_factor^ `:` type($capacity_factor) `)`)?
    (`capacity` `(` $capacity^ `:` type($capacity) `)`)?
    `k` `=` custom<SizeOrParam>($k) attr-dict `:` type($scores)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_ExpertChoiceOp : Moe_RouteStageOp<"expert_choice", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<Moe_TokenSizedResultsOpInterface>]> {
  let summary = "expert-choice routing (Zhou et al. 2022): each expert picks its tokens";
  let description = [{
    Every expert e takes the `c` tokens with the highest `scores[t, e]` (usually the
    softmax over experts), ties going to the lower token index; a token may be taken
    by 0..E experts. NaN ranks below every number. `c = min(T, C)` with
    `C = ceil(capacity_factor * T * k / E)` (double precision, as `moe.capacity`) from
    `capacity_factor(%f : f32)`, or an absolute `capacity(%c : i64)`; `k` is the
    model's top-k (`k = ?` binds to it), the average number of experts per token the
    capacity is sized for. A token's weight for an expert is its score.

    Outputs:
    * the per-token view `topk_ids` / `topk_weights` ([T, M], M = `max_experts`): a
      token's experts by descending score (ties to the lower id), the first M of them,
      then `-1` / 0;
    * the grouped layout a grouped-GEMM launcher consumes, block-aligned as
      `moe.align_blocks` (vLLM's `moe_align_block_size`) but over TOKEN ids:
      `sorted_token_ids` holds expert 0's tokens in ascending order, padded to a
      multiple of `block_size` with the sentinel T, then expert 1's, ...; the tail is
      T. `sorted_weights` holds the matching weights (0 for padding). Both have
      `E*T + E*(block_size-1)` entries (every expert can take every token);
      `expert_ids` has `ceil((E*T + E*(block_size-1)) / block_size)` entries, the
      expert of each block, `-1` past the end; `num_tokens_post_padded[0]` is the
      padded length used;
    * `num_unrouted[0]`: the number of tokens no expert took.

    Example:
    ```mlir
    %ids, %w, %sorted, %sw, %blocks, %padded, %unrouted = moe.expert_choice %probs
        capacity_factor(%cf : f32) k = 2 max_experts = 4 block_size = 64
        : tensor<?x64xf32> -> tensor<?x4xi32>, tensor<?x4xf32>, tensor<?xi32>,
          tensor<?xf32>, tensor<?xi32>, tensor<1xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$scores, Optional<F32>:$capacity_factor,
                       Optional<I64>:$capacity, Moe_I64Attr:$k, Moe_I64Attr:$max_experts,
                       Moe_I64Attr:$block_size);
  let results = (outs Moe_IdTensor:$topk_ids, Moe_ScoreTensor:$topk_weights,
                      TensorRankOf<[I32], [1]>:$sorted_token_ids,
                      TensorRankOf<[F32], [1]>:$sorted_weights,
                      TensorRankOf<[I32], [1]>:$expert_ids,
                      TensorRankOf<[I32], [1]>:$num_tokens_post_padded,
                      TensorRankOf<[I32], [1]>:$num_unrouted);
  let assemblyFormat = [{
    $scores (`capacity_factor` `(` $capacity_factor^ `:` type($capacity_factor) `)`)?
    (`capacity` `(` $capacity^ `:` type($capacity) `)`)?
    `k` `=` custom<SizeOrParam>($k) `max_experts` `=` $max_experts
    `block_size` `=` $block_size attr-dict
    `:` type($scores) `->` type($topk_ids) `,` type($topk_weights) `,`
    type($sorted_token_ids) `,` type($sorted_weights) `,` type($expert_ids) `,`
    type($num_tokens_post_padded) `,` type($num_unrouted)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEROUTEOPS_TD
