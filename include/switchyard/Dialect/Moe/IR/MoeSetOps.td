//===- MoeSetOps.td - expert-set construction and algebra --*- tablegen -*-===//
//
// Ops that build the set of experts a batch may use. Sets are small (E bits); on GPU
// their selection runs in one block over E.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOESETOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOESETOPS_TD

include "switchyard/Dialect/Moe/IR/MoeTokenOps.td"

// An op that makes an expert set; `role` says where it runs: set selection, a fold
// over the batch (union of top-k, per-request sets), or a rule step.
class Moe_SetOp<string mnemonic, Trait role, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, role], traits)> {
  let results = (outs Moe_ExpertSetType:$result);
}

def Moe_EmptySetOp : Moe_SetOp<"empty_set", Moe_SelectStage> {
  let summary = "the empty expert set";
  let description = "Example: `%none = moe.empty_set : !moe.set<128>`";
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Moe_FullSetOp : Moe_SetOp<"full_set", Moe_SelectStage> {
  let summary = "the set of all E experts";
  let description = "Example: `%all = moe.full_set : !moe.set<128>`";
  let assemblyFormat = "attr-dict `:` qualified(type($result))";
}

def Moe_UnionTopKOp : Moe_SetOp<"union_topk", Moe_BatchStage> {
  let summary = "warm-up set: the union of every token's top-k0 experts";
  let description = [{
    XShare Alg. 2 warm-up: `S0 = U_t TopK0(scores[t])` (ties to the lower id). `k0` (i64)
    is in `[0, E]`: `k0 = 0` is the empty set and `k0 = E` the full set (both folded
    when `k0` is a constant, not a knob). For an empty batch the set is empty.

    Example:
    ```mlir
    %k0 = moe.knob "k0" = 1 : i64
    %warm = moe.union_topk %probs, %k0 : tensor<?x128xf32> -> !moe.set<128>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$scores, I64:$k0);
  let assemblyFormat = "$scores `,` $k0 attr-dict `:` type($scores) `->` qualified(type($result))";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_FillOp : Moe_SetOp<"fill", Moe_SelectStage, [AllTypesMatch<["init", "result"]>]> {
  let summary = "greedy fill: grow a set by descending expert score";
  let description = [{
    Starting from `init`, adds the experts not yet in the set in descending order of
    `scores[e]` (ties to the lower id). Because the XShare objective
    `f(S) = sum_{e in S} scores[e]` is modular (XShare Prop. 3.2), this greedy is optimal
    (Cor. 3.3). The mode says when to stop:
    * `budget(m : i64)`: after adding `m` experts beyond `init` (XShare Alg. 2: "budget
      m_l counts experts added beyond the warm-up set"), or when the set is full;
      `m >= 0`, `m = 0` is the identity (folded);
    * `threshold(tau : f32)`: XShare Alg. 1: while `f(S) < tau * f(E)`; `tau` in [0, 1],
      `tau = 0` keeps `init`; the scores are expected to be non-negative masses;
    * `min_size(n : i64)`: until the set holds at least `n` experts (LYNX: the kept set
      is grown by descending score until it holds at least k experts); `0 <= n <= E`.

    Example (XShare Alg. 2):
    ```mlir
    %sel = moe.fill %warm with %mass budget(%m : i64)
        : tensor<128xf32> -> !moe.set<128>
    ```
  }];
  let arguments = (ins Moe_ExpertSetType:$init, Moe_ExpertVector:$scores,
                       Moe_FillMode:$mode, AnyTypeOf<[I64, F32]>:$amount);
  let assemblyFormat = [{
    $init `with` $scores $mode `(` $amount `:` type($amount) `)` attr-dict
    `:` type($scores) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_FillPerDeviceOp : Moe_SetOp<"fill_per_device", Moe_SelectStage, [AllTypesMatch<["init", "result"]>]> {
  let summary = "GPU-aware greedy fill: round-robin over devices (XShare Alg. 5)";
  let description = [{
    XShare Alg. 5, literally: `S = init; while |S| < m_g * G: for g in 0..G-1: add the
    highest-scoring expert hosted on GPU g that is not in S (ties to the lower id; a GPU
    with no expert left is skipped)`, stopping also when a whole round adds nothing. The
    size check is made once per round, as in the paper, so the result may exceed
    `m_g * G` by at most G - 1 experts. An expert's GPU is the device of its primary
    copy in `placement` (`log2phy[e][0] / (slots / devices)`), G is `devices`.
    `m_g` (i64) is `>= 0`; `m_g = 0` is the identity (folded).

    Example (XShare Alg. 6):
    ```mlir
    %sel = moe.fill_per_device %warm with %mass on %placement budget(%mg : i64)
        : tensor<256xf32>, !moe.placement<experts = 256, devices = 8, slots = 256>
        -> !moe.set<256>
    ```
  }];
  let arguments = (ins Moe_ExpertSetType:$init, Moe_ExpertVector:$scores,
                       Moe_PlacementType:$placement, I64:$budget);
  let assemblyFormat = [{
    $init `with` $scores `on` $placement `budget` `(` $budget `:` type($budget) `)` attr-dict
    `:` type($scores) `,` qualified(type($placement)) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_SegmentFillOp : Moe_SetOp<"segment_fill", Moe_BatchStage> {
  let summary = "per-request greedy selection, united over the batch (XShare Alg. 3/4)";
  let description = [{
    For every request r (the tokens t sharing one `request_ids[t]`), XShare Alg. 3:
    `S0_r = U_{t in r} TopK0(scores[t])`, `agg_r[e] = sum_{t in r} scores[t,e]`,
    `S_r = S0_r U Top_{m_r}(agg_r, E \ S0_r)` (ties to the lower id); the result is
    `U_r S_r`, the set Alg. 4 hands to its batch-level greedy (`moe.fill`).
    `k0` (i64) is in `[0, E]`, `m_r` (i64) is `>= 0` (beyond E it takes every expert).

    Example:
    ```mlir
    %per_req = moe.segment_fill %probs by %request_ids warmup(%k0) budget(%mr)
        : tensor<?x128xf32>, tensor<?xi32> -> !moe.set<128>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$scores, TensorRankOf<[I32], [1]>:$request_ids,
                       I64:$k0, I64:$budget);
  let assemblyFormat = [{
    $scores `by` $request_ids `warmup` `(` $k0 `)` `budget` `(` $budget `)` attr-dict
    `:` type($scores) `,` type($request_ids) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_ThresholdSetOp : Moe_SetOp<"threshold_set", Moe_SelectStage> {
  let summary = "the experts whose score reaches a threshold";
  let description = [{
    `{e : scores[e] >= theta}` (LYNX keeps every expert whose batch score reaches theta,
    1 by default: at least one top-1 vote). `theta` (f32) must not be NaN.

    Example:
    ```mlir
    %theta = moe.knob "theta" = 1.0 : f32
    %strong = moe.threshold_set %s, %theta : tensor<64xf32> -> !moe.set<64>
    ```
  }];
  let arguments = (ins Moe_ExpertVector:$scores, F32:$theta);
  let assemblyFormat = "$scores `,` $theta attr-dict `:` type($scores) `->` qualified(type($result))";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_DropLowestOp : Moe_SetOp<"drop_lowest", Moe_SelectStage, [AllTypesMatch<["set", "result"]>]> {
  let summary = "removes a set's n lowest-scoring experts";
  let description = [{
    Removes from `set` its `n` members with the lowest `scores[e]` (among equal scores the
    higher id goes first, consistent with ties ranking the lower id higher); with
    `n >= |set|` the result is empty. This is LYNX-Lat's fixed drop count, as described by
    XShare §2. `n` (i64) is `>= 0`; `n = 0` is the identity (folded).

    Example:
    `%kept = moe.drop_lowest %sel by %s, %n : tensor<64xf32> -> !moe.set<64>`
  }];
  let arguments = (ins Moe_ExpertSetType:$set, Moe_ExpertVector:$scores, I64:$count);
  let assemblyFormat = [{
    $set `by` $scores `,` $count attr-dict `:` type($scores) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_UnionOp : Moe_SetOp<"union", Moe_SelectStage, [Commutative, SameOperandsAndResultType]> {
  let summary = "set union";
  let description = [{
    `a U b`. Folds `a U a = a`, `a U {} = a`, `a U E = E`.

    Example: `%s = moe.union %a, %b : !moe.set<64>`
  }];
  let arguments = (ins Moe_ExpertSetType:$lhs, Moe_ExpertSetType:$rhs);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($result))";
  let hasFolder = 1;
}

def Moe_IntersectOp : Moe_SetOp<"intersect", Moe_SelectStage, [Commutative, SameOperandsAndResultType]> {
  let summary = "set intersection";
  let description = [{
    `a n b`. Folds `a n a = a`, `a n E = a`, `a n {} = {}`.

    Example: `%s = moe.intersect %a, %resident : !moe.set<64>`
  }];
  let arguments = (ins Moe_ExpertSetType:$lhs, Moe_ExpertSetType:$rhs);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($result))";
  let hasFolder = 1;
}

def Moe_DifferenceOp : Moe_SetOp<"difference", Moe_RuleStep, [SameOperandsAndResultType]> {
  let summary = "set difference";
  let description = [{
    `a \ b`: the members of `a` not in `b` (promotions = new \ current, demotions =
    current \ new). Folds `a \ a = {}`, `a \ {} = a`.

    Example: `%promote = moe.difference %hi, %current : !moe.set<64>`
  }];
  let arguments = (ins Moe_ExpertSetType:$lhs, Moe_ExpertSetType:$rhs);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` qualified(type($result))";
  let hasFolder = 1;
}

def Moe_ConfidentTop1Op : Moe_SetOp<"confident_top1", Moe_BatchStage,
                                     [Moe_ExpertIdsReaderOpInterface]> {
  let summary = "LYNX: the top-1 experts of the batch's high-confidence tokens";
  let description = [{
    LYNX §3.2.1 / Insight 2: a high-confidence token keeps its first choice. Token t is
    high-confidence when its second choice lies at least one bin below its top-1, i.e.
    `bins[t, ids[t,1]] <= -1` (q >= 1). The result is `{ids[t,0] : t high-confidence}`.
    `ids` must hold at least 2 choices per token (sorted, as `moe.topk` gives them).

    Example:
    ```mlir
    %anchors = moe.confident_top1 %bins, %ids
        : tensor<?x64xi32>, tensor<?x8xi32> -> !moe.set<64>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$bins, Moe_IdTensor:$ids);
  let assemblyFormat = [{
    $bins `,` $ids attr-dict `:` type($bins) `,` type($ids) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOESETOPS_TD
