//===- MoeRuleOps.td - residency and balancing decisions ---*- tablegen -*-===//
//
// The ops of rules (moe.residency / moe.balance / moe.prefetch bodies): hotness
// estimation, budget-feasible resident sets with hysteresis (DynaExq §3.3, §3.5),
// ranked set differences (promotion / demotion queues), DeepSeek's EPLB replication
// and packing, per-GPU loads and the imbalance ratio. They run on the host, once per
// scheduling interval, not per token.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOERULEOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOERULEOPS_TD

include "switchyard/Dialect/Moe/IR/MoeSetOps.td"

def Moe_EmaOp : Moe_RuleStepOp<"ema", [AllTypesMatch<["hotness", "result"]>,
                                       Moe_ExpertOperands]> {
  let summary = "hotness update: an exponential moving average of interval counters";
  let description = [{
    DynaExq §3.5, hotness estimation: at the end of an update interval,
    `S[e] <- alpha * S[e] + (1 - alpha) * c[e]` with `alpha` in [0, 1), where `c[e]` is
    the number of times expert e was selected during the interval. The rule runs once
    per interval (the engine calls it when its timer fires and then resets the
    counters); a time-based interval does not depend on batch composition.
    Counts must be >= 0 (a negative count is treated as 0).

    Example:
    ```mlir
    %s = moe.ema %hotness, %counts alpha(%a : f32) : tensor<64xf32>, tensor<64xi32>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$hotness, TensorRankOf<[I32], [1]>:$counts,
                       F32:$alpha);
  let results = (outs Moe_ExpertVector:$result);
  let assemblyFormat = [{
    $hotness `,` $counts `alpha` `(` $alpha `:` type($alpha) `)` attr-dict
    `:` type($hotness) `,` type($counts)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_HiCapacityOp : Moe_RuleStepOp<"hi_capacity"> {
  let summary = "DynaExq: high-precision experts per layer that a byte budget holds";
  let description = [{
    DynaExq §3.3 budget model: of the usable GPU memory `budget`, `fixed` bytes are
    reserved for non-expert state (KV cache, dense weights, activations, runtime);
    every expert of every layer keeps its low-precision version resident (`lo_bytes`
    each: the fallback the forward pass can always run); what remains holds
    high-precision copies (`hi_bytes` each), split evenly over `layers` layers:

      n_hi = min(experts, floor((budget - fixed - layers*experts*lo_bytes)
                                / (layers*hi_bytes)))

    The result is n_hi (i64); `experts` is the policy's E (`?` in a generic rule). A budget that cannot hold the low-precision experts plus
    one high-precision expert per layer is an error (reported by the verifier for
    known values). All sizes are bytes; `hi_bytes > 0`, `lo_bytes >= 0`, `layers >= 1`.

    Example:
    ```mlir
    %n = moe.hi_capacity budget(%b : i64) fixed(%f : i64) hi_bytes(%hi : i64)
        lo_bytes(%lo : i64) layers(%l : i64) experts = 128 -> i64
    ```
  }];
  let arguments = (ins I64:$budget, I64:$fixed, I64:$hi_bytes, I64:$lo_bytes, I64:$layers,
                       Moe_I64Attr:$experts);
  let results = (outs I64:$result);
  let assemblyFormat = [{
    `budget` `(` $budget `:` type($budget) `)` `fixed` `(` $fixed `:` type($fixed) `)`
    `hi_bytes` `(` $hi_bytes `:` type($hi_bytes) `)`
    `lo_bytes` `(` $lo_bytes `:` type($lo_bytes) `)`
    `layers` `(` $layers `:` type($layers) `)` `experts` `=` custom<SizeOrParam>($experts)
    attr-dict `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
  }];
}

def Moe_HotSetOp : Moe_SetOp<"hot_set", Moe_RuleStep, [AllTypesMatch<["current", "result"]>,
                                           Moe_ExpertOperands, AttrSizedOperandSegments]> {
  let summary = "budget-feasible top-n set with hysteresis (DynaExq §3.5)";
  let description = [{
    The next high-precision (or resident) set: the top `capacity` experts by `scores`,
    changed from `current` only where the scores justify it. Exactly, with n =
    clamp(capacity, 0, E) and ranking by descending score, ties to the lower id:

    1. Budget first: while |H| > n, drop the lowest-ranked member of H (H = current).
    2. Free capacity is filled without a margin: while |H| < n, add the best-ranked
       expert outside H.
    3. Hysteresis, additive margin: while the best expert b outside H and the worst
       member w of H satisfy `s[b] > s[w] + margin`, swap them. An expert is thus
       promoted only if it beats the lowest-ranked member by the margin and evicted
       only if the best outsider beats it by the margin (DynaExq §3.5); at most n
       swaps happen.
    4. With `rank_slack(r)` (r >= 1) instead: a member stays while its rank among all
       experts is below n + r; only then are the freed places filled with the best
       outsiders (an expert must enter the wider top-(n+r) before it is kept).

    With margin 0 (and no slack) the result is TopN except at exact ties, which keep
    the current member. The result always holds min(n, E) experts (the budget holds).

    Example:
    ```mlir
    %hi = moe.hot_set %s, %cur capacity(%n : i64) margin(%m : f32)
        : tensor<128xf32> -> !moe.set<128>
    %hi2 = moe.hot_set %s, %cur capacity(%n : i64) rank_slack(%r : i64)
        : tensor<128xf32> -> !moe.set<128>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$scores, Moe_ExpertSetType:$current,
                       I64:$capacity, Optional<F32>:$margin, Optional<I64>:$rank_slack);
  let assemblyFormat = [{
    $scores `,` $current `capacity` `(` $capacity `:` type($capacity) `)`
    (`margin` `(` $margin^ `:` type($margin) `)`)?
    (`rank_slack` `(` $rank_slack^ `:` type($rank_slack) `)`)? attr-dict
    `:` type($scores) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_RankedOp : Moe_RuleStepOp<"ranked", [Moe_ExpertOperands]> {
  let summary = "the members of a set as a list ordered by score";
  let description = [{
    `ids` lists the members of `set` ordered by `scores` (descending by default,
    `ascending` for the coldest first; ties to the lower id either way), padded with
    -1 to E entries; `count[0]` is the number of members. Promotion and demotion
    queues are ranked differences: promotions = new \ current hottest first,
    demotions = current \ new coldest first (DynaExq §3.5: the candidates passed to
    the transition pipeline, in priority order).

    Example:
    ```mlir
    %ids, %n = moe.ranked %promote by %s : !moe.set<64>, tensor<64xf32>
        -> tensor<64xi32>, tensor<1xi32>
    %ids2, %n2 = moe.ranked %demote by %s ascending : !moe.set<64>, tensor<64xf32>
        -> tensor<64xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_ExpertSetType:$set, Moe_ExpertVector:$scores,
                       UnitAttr:$ascending);
  let results = (outs TensorRankOf<[I32], [1]>:$ids, TensorRankOf<[I32], [1]>:$count);
  let assemblyFormat = [{
    $set `by` $scores (`ascending` $ascending^)? attr-dict `:` qualified(type($set)) `,`
    type($scores) `->` type($ids) `,` type($count)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_EplbOp : Moe_RuleStepOp<"eplb", [Moe_ExpertOperands]> {
  let summary = "DeepSeek EPLB: replicate hot experts and pack replicas onto GPUs";
  let description = [{
    DeepSeek's expert-parallel load balancer (eplb.py, `rebalance_experts`) for one
    layer: E logical experts with `loads`, P physical slots (P >= E, from the result
    type) on `gpus` GPUs in `nodes` nodes, experts in `groups` groups.

    * Hierarchical mode (when `groups % nodes == 0` and not `global`): (1) pack the
      groups onto nodes by balanced packing of group loads; (2) inside each node,
      replicate: P/nodes slots for its E/nodes experts, repeatedly giving one more
      replica to the expert with the highest load / replica count; (3) pack each
      node's replicas (load / count each) onto its gpus/nodes GPUs by balanced packing.
    * Global mode (`global`, or groups not divisible by nodes): the same with one
      group and one node.

    Balanced packing, exactly: items sorted by load descending (ties: lower index
    first) go one by one to the pack with the least load among packs not yet full
    (ties: lower pack), each pack holding items/packs items. Replication ties go to
    the lower expert id. Float arithmetic is f32, accumulated in that order.

    Results: `phy2log[P]` (the logical expert of each slot; slots of GPU d are
    `d*P/gpus .. (d+1)*P/gpus - 1`), `log2phy[E][R]` (R = P - E + 1: expert e's slots,
    by replica rank, -1 padded) and `replica_count[E]`. Requirements (verified):
    `E % groups == 0` in hierarchical mode, `gpus % nodes == 0`, `P % gpus == 0`,
    `E <= P`, and per node at least as many slots as experts. Loads must be finite
    (moe-run rejects NaN loads).

    Example (DeepSeek-V3 shape):
    ```mlir
    %p2l, %l2p, %cnt = moe.eplb %loads groups = 8 nodes = 2 gpus = 8
        : tensor<256xf32> -> tensor<288xi32>, tensor<256x33xi32>, tensor<256xi32>
    ```

    In a generic balance rule, `groups`, `nodes`, `gpus` and the slots P may be `?`
    (bound by `--groups`, `--nodes`, `--devices`, `--slots`):
    ```mlir
    %p2l, %l2p, %cnt = moe.eplb %loads groups = ? nodes = ? gpus = ?
        : tensor<?xf32> -> tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$loads, Moe_I64Attr:$groups, Moe_I64Attr:$nodes,
                       Moe_I64Attr:$gpus, UnitAttr:$global);
  let results = (outs TensorRankOf<[I32], [1]>:$phy2log, TensorRankOf<[I32], [2]>:$log2phy,
                      TensorRankOf<[I32], [1]>:$replica_count);
  let assemblyFormat = [{
    $loads `groups` `=` custom<SizeOrParam>($groups) `nodes` `=` custom<SizeOrParam>($nodes)
    `gpus` `=` custom<SizeOrParam>($gpus) (`global` $global^)? attr-dict
    `:` type($loads) `->` type($phy2log) `,` type($log2phy) `,` type($replica_count)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when the plan is hierarchical (groups packed onto nodes first).
    bool isHierarchical() { return !getGlobal() && getGroups() % getNodes() == 0; }
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_DeviceLoadsOp : Moe_RuleStepOp<"device_loads", [AttrSizedOperandSegments]> {
  let summary = "per-GPU load of a placement";
  let description = [{
    The load each of the `gpus` GPUs receives when expert e's load is split evenly over
    its replicas: GPU d sums `loads[phy2log[p]] / replica_count[phy2log[p]]` over its
    slots p (slots of GPU d: `d*P/gpus .. (d+1)*P/gpus - 1`, in slot order). Without a
    placement, the default one: expert e alone on GPU `e / (E/gpus)` (E % gpus == 0).

    Example:
    ```mlir
    %before = moe.device_loads %loads gpus = 8 : tensor<256xf32> -> tensor<8xf32>
    %after = moe.device_loads %loads placed(%p2l, %cnt : tensor<288xi32>, tensor<256xi32>)
        gpus = 8 : tensor<256xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$loads, Optional<TensorRankOf<[I32], [1]>>:$phy2log,
                       Optional<TensorRankOf<[I32], [1]>>:$replica_count, Moe_I64Attr:$gpus);
  let results = (outs TensorRankOf<[F32], [1]>:$result);
  let assemblyFormat = [{
    $loads (`placed` `(` $phy2log^ `,` $replica_count `:` type($phy2log) `,`
    type($replica_count) `)`)? `gpus` `=` custom<SizeOrParam>($gpus) attr-dict
    `:` type($loads) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
    ::mlir::Type bindOperandType(unsigned index, const ShapeBinding &binding);
  }];
}

def Moe_ImbalanceOp : Moe_RuleStepOp<"imbalance"> {
  let summary = "imbalance ratio of per-GPU loads: max / mean";
  let description = [{
    `max(loads) / mean(loads)` (Libra §3's imbalance ratio; 1.0 is perfect balance),
    as a one-element tensor; 1.0 when every load is 0.

    Example: `%r = moe.imbalance %gpu_loads : tensor<8xf32> -> tensor<1xf32>`
  }];
  let arguments = (ins TensorRankOf<[F32], [1]>:$loads);
  let results = (outs TensorRankOf<[F32], [1]>:$result);
  let assemblyFormat = "$loads attr-dict `:` type($loads) `->` type($result)";
  let hasVerifier = 1;
}


def Moe_LeastLoadedOp : Moe_RuleStepOp<"least_loaded", [Moe_ExpertOperands]> {
  let summary = "LLEP: spill overloaded experts' tokens to the least-loaded GPUs";
  let description = [{
    Least-Loaded Expert Parallelism (Nguyen et al., arXiv 2601.17111), its least-loaded
    assignment for one layer and step: expert e's `loads[e]` tokens run on its native
    GPU `e / (E/gpus)` unless that GPU would exceed the capacity
    `C = max(1, int(capacity_factor * (L / gpus)))` (L = the total load, `L / gpus`
    integer division; C = L when that is 0); then the excess is spilled, with the
    expert's weights, to other GPUs. The routing itself is unchanged: only where the
    tokens are computed moves.

    When `threshold > 0` and the native placement's imbalance (max / mean of the GPUs'
    native loads, 1 when all are 0) is below `threshold`, nothing moves (plain EP).
    Otherwise the experts are taken by descending load (ties to the lower id, empty
    experts skipped). A GPU's effective load is what it was assigned so far plus the
    native load of its experts not yet taken. Expert e (its own native load first
    removed from its GPU's pending load) puts `min(load, max(0, C - effective(native)))`
    tokens on its native GPU; while tokens remain, the other GPU with the least
    effective load (ties to the lower id) takes `min(remaining, C - effective)` of them
    when that is positive and either all the remaining tokens or at least `min_chunk`
    (a GEMM worth moving weights for); when it is not, it takes all the remaining
    tokens. With one GPU everything stays native.

    Results: `plan[e][g]`, the tokens of expert e computed on GPU g; the GPUs' native
    loads (plain EP) and their loads under the plan, as f32 for `moe.imbalance`; and
    `transfers[0]`, the number of (expert, GPU) pairs that need the expert's weights
    moved (g not e's native GPU, `plan[e][g] > 0`). `E % gpus == 0`; `min_chunk >= 0`;
    `capacity_factor` finite and `> 0`; `threshold` finite.

    Example:
    ```mlir
    %plan, %native, %after, %moved = moe.least_loaded %loads
        capacity_factor(%alpha : f32) min_chunk(%m : i64) threshold(%lambda : f32)
        gpus = 8 : tensor<128xi32> -> tensor<128x8xi32>, tensor<8xf32>, tensor<8xf32>,
        tensor<1xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [1]>:$loads, F32:$capacity_factor, I64:$min_chunk,
                       F32:$threshold, Moe_I64Attr:$gpus);
  let results = (outs TensorRankOf<[I32], [2]>:$plan, TensorRankOf<[F32], [1]>:$native_loads,
                      TensorRankOf<[F32], [1]>:$gpu_loads, TensorRankOf<[I32], [1]>:$transfers);
  let assemblyFormat = [{
    $loads `capacity_factor` `(` $capacity_factor `:` type($capacity_factor) `)`
    `min_chunk` `(` $min_chunk `:` type($min_chunk) `)`
    `threshold` `(` $threshold `:` type($threshold) `)`
    `gpus` `=` custom<SizeOrParam>($gpus) attr-dict
    `:` type($loads) `->` type($plan) `,` type($native_loads) `,` type($gpu_loads) `,`
    type($transfers)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

//===----------------------------------------------------------------------===//
// Libra: lookahead prediction, locality-aware replication, token sharding
//===----------------------------------------------------------------------===//

def Moe_GateOp : Moe_TokenStageOp<"gate"> {
  let summary = "a gate's logits from hidden states: hidden x weight";
  let description = [{
    `logits[t, e] = sum_h hidden[t, h] * weight[h, e]` (f32, h in order). Libra's
    lookahead predictor (§3.2) applies the NEXT layer's gate to the CURRENT layer's
    hidden states (hidden states evolve slowly across layers); a router then takes
    the top-k of the predicted logits as the predicted expert ids.

    Example:
    ```mlir
    %next = moe.gate %hidden, %w : tensor<?x2048xf32>, tensor<2048x128xf32> -> tensor<?x128xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[F32], [2]>:$hidden, TensorRankOf<[F32], [2]>:$weight);
  let results = (outs TensorRankOf<[F32], [2]>:$result);
  let assemblyFormat = [{
    $hidden `,` $weight attr-dict `:` type($hidden) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
    ::mlir::Type bindOperandType(unsigned index, const ShapeBinding &binding);
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
  }];
}

def Moe_GpuRequestsOp : Moe_RuleStepOp<"gpu_requests", [Moe_ExpertIdsReaderOpInterface]> {
  let summary = "requests per (GPU, expert) from the tokens' expert ids";
  let description = [{
    `requests[g, e]` = the number of tokens held by GPU g (`token_gpu[t] == g`) that
    select expert e (`e` in `ids[t, :]`); ids -1 and tokens with a GPU outside
    [0, gpus) are skipped. Libra Alg. 1 line 1 (ExpertLoad[g, e] from the predicted
    ids of the upcoming tokens).

    Example:
    ```mlir
    %req = moe.gpu_requests %ids, %token_gpu gpus = 8
        : tensor<?x8xi32>, tensor<?xi32> -> tensor<8x128xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$ids, TensorRankOf<[I32], [1]>:$token_gpu,
                       Moe_I64Attr:$gpus);
  let results = (outs TensorRankOf<[I32], [2]>:$result);
  let assemblyFormat = [{
    $ids `,` $token_gpu `gpus` `=` custom<SizeOrParam>($gpus) attr-dict
    `:` type($ids) `,` type($token_gpu) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
    ::mlir::Type bindOperandType(unsigned index, const ShapeBinding &binding);
  }];
}

def Moe_ServedLoadsOp : Moe_RuleStepOp<"served_loads"> {
  let summary = "per-GPU load when each request is served locally if possible";
  let description = [{
    Libra's load model: expert e's home GPU is `e / (E/G)`; GPU g's requests for e are
    served on g when g hosts e (`placement[e, g] == 1`), otherwise on e's home GPU (a
    remote request). `loads[h]` counts the requests served on h. Without a placement,
    every expert is only on its home GPU. `E % G == 0`.

    Example:
    ```mlir
    %before = moe.served_loads %req : tensor<8x128xi32> -> tensor<8xf32>
    %after = moe.served_loads %req placed(%m : tensor<128x8xi32>) : tensor<8x128xi32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$requests,
                       Optional<TensorRankOf<[I32], [2]>>:$placement);
  let results = (outs TensorRankOf<[F32], [1]>:$result);
  let assemblyFormat = [{
    $requests (`placed` `(` $placement^ `:` type($placement) `)`)? attr-dict
    `:` type($requests) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_LibraReplicateOp : Moe_RuleStepOp<"libra_replicate"> {
  let summary = "Libra Alg. 1: locality-aware hot-expert replication plan";
  let description = [{
    Libra Appendix B, Algorithm 1 (Hierarchical Expert Prefetcher), for G GPUs and E
    experts (home GPU of e: `e / (E/G)`), with `requests[g, e]` (GPU g's predicted
    requests for e), `extra` = N (the most experts a GPU may import) and `alpha`
    (the share of N spent on locality). The result is the placement matrix
    `M[e, g]` (1: GPU g hosts a copy of e). Exactly:

    1. M holds every expert on its home GPU.
    2. Phase 1 (locality), L = floor(N * alpha): each GPU g in turn imports its top L
       remote experts by `requests[g, e]` (descending, ties to the lower id; experts
       it does not request are never imported).
    3. Loads as `moe.served_loads` with M; B = total requests / G.
    4. Phase 2 (balance), at most (N - L) * G steps: src = the most loaded GPU with
       load > B (ties lower id; none: stop); e = the expert homed on src with the most
       remote requests served there (ties lower id; none: stop); dst = the least
       loaded GPU other than src that does not host e and has imported fewer than N
       (ties lower id; none: stop). If `load[dst] + requests[dst, e] <= B`, dst
       imports e and its own requests for e move from src to dst; otherwise stop (the
       same state would repeat).

    Example:
    ```mlir
    %m = moe.libra_replicate %req extra(%n : i64) alpha(%a : f32)
        : tensor<8x128xi32> -> tensor<128x8xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$requests, I64:$extra, F32:$alpha);
  let results = (outs TensorRankOf<[I32], [2]>:$placement);
  let assemblyFormat = [{
    $requests `extra` `(` $extra `:` type($extra) `)` `alpha` `(` $alpha `:` type($alpha) `)`
    attr-dict `:` type($requests) `->` type($placement)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_LibraShardOp : Moe_RuleStepOp<"libra_shard"> {
  let summary = "Libra Alg. 2: greedy remote-token sharding with tolerance epsilon";
  let description = [{
    Libra Appendix C, Algorithm 2 (Adaptive Token Rebalancer) on the placement
    `M[e, g]` and the requests, with the load model of `moe.served_loads`: local loads
    `L[g]` (requests g serves itself), remote loads `R[h, e]` (remote requests for e,
    at e's home h), GPU loads `G[g] = L[g] + sum_e R[g, e]`, B = total / G.
    While `max G > (1 + epsilon) * B`: for each GPU g_s with `G > B` in descending load
    (ties lower id), for each e with `R[g_s, e] > 0` in descending R (ties lower id):
    the destination g_d is the least loaded other GPU hosting e (ties lower id); with
    `cap = floor(B - G[g_d]) >= 1` (whole tokens), `l = min(R[g_s, e], cap)` tokens of
    e move from g_s to g_d, and the search restarts from the top (§3.3: "after each
    successful transfer, the algorithm returns to the main loop"). It stops when no
    transfer is possible, or after 4*G*E transfers.

    Results: `shard_plan[g, e]` = the remote tokens of expert e that GPU g serves
    after sharding (R), and the final GPU loads.

    Example:
    ```mlir
    %plan, %loads = moe.libra_shard %req, %m epsilon(%eps : f32)
        : tensor<8x128xi32>, tensor<128x8xi32> -> tensor<8x128xi32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$requests, TensorRankOf<[I32], [2]>:$placement,
                       F32:$epsilon);
  let results = (outs TensorRankOf<[I32], [2]>:$shard_plan, TensorRankOf<[F32], [1]>:$loads);
  let assemblyFormat = [{
    $requests `,` $placement `epsilon` `(` $epsilon `:` type($epsilon) `)` attr-dict
    `:` type($requests) `,` type($placement) `->` type($shard_plan) `,` type($loads)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
    ::mlir::Type bindOperandType(unsigned index, const ShapeBinding &binding);
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

//===----------------------------------------------------------------------===//
// ExpertFlow: adaptive prefetch step, feedback counters, two-level LRU, ordering
//===----------------------------------------------------------------------===//

def Moe_ExpectedExpertsOp : Moe_RuleStepOp<"expected_experts", [Moe_ExpertOperands]> {
  let summary = "ExpertFlow: the experts a layer is expected to activate";
  let description = [{
    ExpertFlow §3.2.1: from the pre-gate's probability mass per expert (`scores`, >= 0,
    e.g. the batch sum of the next layer's gate probabilities), experts are taken in
    descending order (ties to the lower id) until their cumulative mass reaches
    `threshold` (in (0, 1]) of the total: the smallest such prefix (f32 sums in that
    order). Results: the set and its size N_e. A zero total gives the empty set.

    Example:
    ```mlir
    %expected, %ne = moe.expected_experts %mass threshold(%p : f32)
        : tensor<64xf32> -> !moe.set<64>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$scores, F32:$threshold);
  let results = (outs Moe_ExpertSetType:$set, TensorRankOf<[I32], [1]>:$count);
  let assemblyFormat = [{
    $scores `threshold` `(` $threshold `:` type($threshold) `)` attr-dict `:` type($scores)
    `->` qualified(type($set)) `,` type($count)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_StepSizeOp : Moe_RuleStepOp<"step_size"> {
  let summary = "ExpertFlow: the prefetch step size S = ceil(Ne*Es / (Cs*Tl))";
  let description = [{
    ExpertFlow §3.2.1: how many layers ahead to prefetch, from the expected experts
    per layer `count` (N_e), the expert size `expert_bytes` (E_s), the host-to-GPU
    bandwidth `bandwidth` (C_s, bytes per second) and the per-layer compute time
    `layer_time` (T_l, seconds): `S = ceil(Ne*Es / (Cs*Tl))` in f32, clamped to
    [1, layers]. `bandwidth > 0`, `layer_time > 0`, `layers >= 1`.

    Example:
    ```mlir
    %s = moe.step_size %ne expert_bytes(%es : i64) bandwidth(%cs : f32)
        layer_time(%tl : f32) layers(%n : i64) : tensor<1xi32> -> tensor<1xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [1]>:$count, I64:$expert_bytes, F32:$bandwidth,
                       F32:$layer_time, I64:$layers);
  let results = (outs TensorRankOf<[I32], [1]>:$result);
  let assemblyFormat = [{
    $count `expert_bytes` `(` $expert_bytes `:` type($expert_bytes) `)`
    `bandwidth` `(` $bandwidth `:` type($bandwidth) `)`
    `layer_time` `(` $layer_time `:` type($layer_time) `)`
    `layers` `(` $layers `:` type($layers) `)` attr-dict `:` type($count) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_StepFeedbackOp : Moe_RuleStepOp<"step_feedback"> {
  let summary = "ExpertFlow: stall / overfetch feedback counters that adjust S";
  let description = [{
    ExpertFlow §3.2.2's feedback loop over a sequence of `events` (1: a predicted
    expert was not resident when needed - a stall; 2: an expert was already loaded
    when needed - an overfetch; anything else is ignored), starting from the state
    `step` (S; 0 means not set yet, then `initial` is used, e.g. `moe.step_size`),
    `stall_count` and `overfetch_count`. Per event, literally: a stall increments the
    stall counter, and when it EXCEEDS `stall_threshold` the counter resets and S
    grows by 1; an overfetch increments the overfetch counter, and when it REACHES
    `overfetch_threshold` the counter resets and S shrinks by 1. S stays in
    [1, layers]. Results: the new S and counters, and S after each event (`trace`).

    Example:
    ```mlir
    %s, %stalls, %overs, %trace = moe.step_feedback %step, %init, %sc, %oc, %events
        stall_threshold(%a : i64) overfetch_threshold(%b : i64) layers(%n : i64)
        : tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
        -> tensor<1xi32>, tensor<1xi32>, tensor<1xi32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [1]>:$step, TensorRankOf<[I32], [1]>:$initial,
                       TensorRankOf<[I32], [1]>:$stall_count,
                       TensorRankOf<[I32], [1]>:$overfetch_count,
                       TensorRankOf<[I32], [1]>:$events, I64:$stall_threshold,
                       I64:$overfetch_threshold, I64:$layers);
  let results = (outs TensorRankOf<[I32], [1]>:$step_out, TensorRankOf<[I32], [1]>:$stall_out,
                      TensorRankOf<[I32], [1]>:$overfetch_out, TensorRankOf<[I32], [1]>:$trace);
  let assemblyFormat = [{
    $step `,` $initial `,` $stall_count `,` $overfetch_count `,` $events
    `stall_threshold` `(` $stall_threshold `:` type($stall_threshold) `)`
    `overfetch_threshold` `(` $overfetch_threshold `:` type($overfetch_threshold) `)`
    `layers` `(` $layers `:` type($layers) `)` attr-dict
    `:` type($step) `,` type($initial) `,` type($stall_count) `,` type($overfetch_count) `,`
    type($events) `->` type($step_out) `,` type($stall_out) `,` type($overfetch_out) `,`
    type($trace)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_TwoLevelLruOp : Moe_RuleStepOp<"two_level_lru", [Moe_ExpertOperands,
    Pure, AllTypesMatch<["resident", "requested", "predicted", "resident_out", "high"]>,
    AllTypesMatch<["last_use", "last_use_out", "loads", "evictions"]>]> {
  let summary = "ExpertFlow: two-level LRU expert cache step";
  let description = [{
    ExpertFlow §3.3: one step of the GPU expert cache of `capacity` experts, at time
    `now[0]` with step size `step[0]` (S). Exactly:

    1. Requested experts are used now: `last_use[e] = now`.
    2. Tiers follow S: an expert is HIGH when predicted for the coming layers
       (`predicted`) or used within the last S steps (`now - last_use < S`), else LOW.
    3. Missing experts are loaded in order: requested ones (ascending id), then
       predicted ones (prefetch, ascending id). With the cache full, the victim is the
       least recently used LOW resident expert that is not requested (ties: lower id;
       never used = -1 first); if none, the LRU HIGH resident that is neither
       requested nor predicted; a requested load may finally evict a predicted one;
       without a victim the load is skipped.

    Results: the resident set, the HIGH set (of the final residents), the new
    `last_use`, and the loads and evictions in order (-1 padded). `capacity >= 1`.

    Example:
    ```mlir
    %res, %high, %last, %loads, %evicted = moe.two_level_lru %resident, %last_use,
        %requested, %predicted, %now, %step capacity(%c : i64)
        : !moe.set<64>, tensor<64xi32>, tensor<1xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins Moe_ExpertSetType:$resident, TensorRankOf<[I32], [1]>:$last_use,
                       Moe_ExpertSetType:$requested, Moe_ExpertSetType:$predicted,
                       TensorRankOf<[I32], [1]>:$now, TensorRankOf<[I32], [1]>:$step,
                       I64:$capacity);
  let results = (outs Moe_ExpertSetType:$resident_out, Moe_ExpertSetType:$high,
                      TensorRankOf<[I32], [1]>:$last_use_out, TensorRankOf<[I32], [1]>:$loads,
                      TensorRankOf<[I32], [1]>:$evictions);
  let assemblyFormat = [{
    $resident `,` $last_use `,` $requested `,` $predicted `,` $now `,` $step
    `capacity` `(` $capacity `:` type($capacity) `)` attr-dict
    `:` qualified(type($resident)) `,` type($last_use) `,` type($now) `,` type($step)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_ResidentFirstOp : Moe_RouteStageOp<"resident_first", [Moe_ExpertIdsReaderOpInterface]> {
  let summary = "ExpertFlow: cache-aware execution order, ready tokens first";
  let description = [{
    ExpertFlow §3.4: the order in which to run the batch's tokens: first the tokens all
    of whose routed experts (`ids >= 0`) are resident, in token order, then the others
    in token order (their expert swap-ins overlap the first group's compute).
    `num_ready[0]` is the size of the first group. (The routing bonus for resident
    experts is `moe.bias_resident`.)

    Example:
    ```mlir
    %order, %ready = moe.resident_first %ids, %resident
        : tensor<?x8xi32>, !moe.set<64> -> tensor<?xi32>, tensor<1xi32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$ids, Moe_ExpertSetType:$resident);
  let results = (outs TensorRankOf<[I32], [1]>:$order, TensorRankOf<[I32], [1]>:$num_ready);
  let assemblyFormat = [{
    $ids `,` $resident attr-dict `:` type($ids) `,` qualified(type($resident)) `->`
    type($order) `,` type($num_ready)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOERULEOPS_TD
