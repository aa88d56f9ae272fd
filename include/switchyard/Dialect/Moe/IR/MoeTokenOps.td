//===- MoeTokenOps.td - per-token (row-wise) ops -----------*- tablegen -*-===//
//
// Ops that transform each token's row of expert scores independently of the other
// tokens of the batch. They lower to one token-parallel loop (one warp per row on GPU).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOETOKENOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOETOKENOPS_TD

include "switchyard/Dialect/Moe/IR/MoeBase.td"
include "switchyard/Dialect/Moe/IR/MoeTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A score matrix: tokens x experts, f32.
def Moe_ScoreTensor : TensorRankOf<[F32], [2]>;
// Per-token expert ids: tokens x k, i32 (-1 marks an empty slot).
def Moe_IdTensor : TensorRankOf<[I32], [2]>;
// One value per expert.
def Moe_ExpertVector : TensorRankOf<[F32], [1]>;

class Moe_TokenOp<string mnemonic, list<Trait> traits = []>
    : Moe_TokenStageOp<mnemonic, traits> {
  let hasVerifier = 1;
}

def Moe_SoftmaxOp : Moe_TokenOp<"softmax", [SameOperandsAndResultType]> {
  let summary = "row-wise softmax over the experts";
  let description = [{
    `p[t,e] = exp(x[t,e] - max_e x[t,e]) / sum_e' exp(x[t,e'] - max_e x[t,e'])`, computed
    with the row maximum subtracted first. A row whose entries are all `-inf` gives all
    zeros (no NaN). Mixtral/Qwen-style routers score experts with it.

    Example: `%probs = moe.softmax %logits : tensor<?x128xf32>`
  }];
  let arguments = (ins Moe_ScoreTensor:$input);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Moe_SigmoidOp : Moe_TokenOp<"sigmoid", [SameOperandsAndResultType]> {
  let summary = "elementwise logistic sigmoid";
  let description = [{
    `s[t,e] = 1 / (1 + exp(-x[t,e]))` (DeepSeek-V3 gate scores; `-inf` gives 0).

    Example: `%scores = moe.sigmoid %logits : tensor<?x256xf32>`
  }];
  let arguments = (ins Moe_ScoreTensor:$input);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Moe_AddBiasOp : Moe_TokenOp<"add_bias", [AllTypesMatch<["input", "result"]>]> {
  let summary = "adds a per-expert bias to every token's scores";
  let description = [{
    `y[t,e] = x[t,e] + bias[e]`: DeepSeek-V3's auxiliary-loss-free score-correction bias,
    which steers which experts are *selected* while the routing weights keep coming from
    the unbiased scores (pass those to `moe.route ... weights(...)`).

    Example:
    `%biased = moe.add_bias %scores, %bias : tensor<?x256xf32>, tensor<256xf32>`
  }];
  let arguments = (ins Moe_ScoreTensor:$input, Moe_ExpertVector:$bias);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = "$input `,` $bias attr-dict `:` type($input) `,` type($bias)";
  let extraClassDeclaration = [{
    ::mlir::Type bindOperandType(unsigned index, const ShapeBinding &binding);
  }];
}

def Moe_ScaleOp : Moe_TokenOp<"scale", [AllTypesMatch<["input", "result"]>]> {
  let summary = "multiplies every score by a scalar";
  let description = [{
    `y[t,e] = factor * x[t,e]` (e.g. a temperature before a softmax). The factor must be
    finite and non-zero when it is a known value.

    Example:
    ```mlir
    %temp = moe.knob "inv_temperature" = 0.5 : f32
    %y = moe.scale %logits, %temp : tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$input, F32:$factor);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($input)";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

def Moe_TopKOp : Moe_TokenOp<"topk"> {
  let summary = "each token's k highest scores and their expert ids";
  let description = [{
    For every token, the k largest scores in descending order and their expert ids; ties
    go to the lower expert id, NaN ranks last. `1 <= k <= E`.

    Example:
    ```mlir
    %vals, %ids = moe.topk %logits k = 8
        : tensor<?x64xf32> -> tensor<?x8xf32>, tensor<?x8xi32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$input, Moe_I64Attr:$k);
  let results = (outs Moe_ScoreTensor:$values, Moe_IdTensor:$indices);
  let assemblyFormat = [{
    $input `k` `=` custom<SizeOrParam>($k) attr-dict `:` type($input) `->` type($values)
    `,` type($indices)
  }];
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_GroupLimitOp : Moe_TokenOp<"group_limit", [AllTypesMatch<["input", "result"]>]> {
  let summary = "DeepSeek-V3 node-limited routing: keep each token's best expert groups";
  let description = [{
    Splits the E experts into `groups` contiguous groups of E/groups experts. A group's
    score for a token is the sum of its `group_topk` (default 2) highest expert scores;
    each token keeps its `topk_groups` best groups (ties toward the lower group index)
    and every expert outside them gets score `-inf`, so a later `moe.route` cannot pick
    it (DeepSeek-V3 technical report §2.1.2, vLLM `grouped_topk`).

    Constraints: `groups >= 1` divides E, `1 <= topk_groups <= groups`,
    `1 <= group_topk <= E / groups`. With `topk_groups = groups` the op is the identity.

    Example:
    ```mlir
    %limited = moe.group_limit %biased groups = 8 keep = 4 : tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$input, Moe_I64Attr:$groups, Moe_I64Attr:$topk_groups,
                       DefaultValuedAttr<Moe_I64Attr, "2">:$group_topk);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = [{
    $input `groups` `=` custom<SizeOrParam>($groups) `keep` `=` custom<SizeOrParam>($topk_groups)
    (`group_topk` `=` $group_topk^)? attr-dict `:` type($input)
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getSizeParameters(::llvm::SmallVectorImpl<SizeParameter> &params);
  }];
}

def Moe_BinsOp : Moe_TokenOp<"bins"> {
  let summary = "LYNX confidence binning of each token's experts";
  let description = [{
    LYNX §3.1.1 and Appendix A. For each token t with top-1 logit `z[t,top1]` (its row
    maximum):
    `q[t,e] = min(floor(alpha * (z[t,top1] - z[t,e])), beta)` and `bin[t,e] = -q[t,e]`,
    an integer in `[-beta, 0]`. Bin 0 holds the experts whose probability is within a
    factor `e^(1/alpha)` of the top-1 probability; every expert at or beyond
    `beta / alpha` nats below the top-1 shares bin `-beta` (a `-inf` logit included).
    Apply it to logits (pre-softmax, or pre-sigmoid scores for sigmoid gates).

    `alpha` (f32) must be finite and `> 0`, `beta` (i64) `>= 0`.

    Example:
    ```mlir
    %alpha = moe.knob "alpha" = 2.0 : f32
    %beta = moe.knob "beta" = 4 : i64
    %bins = moe.bins %logits, %alpha, %beta : tensor<?x64xf32> -> tensor<?x64xi32>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$logits, F32:$alpha, I64:$beta);
  let results = (outs TensorRankOf<[I32], [2]>:$bins);
  let assemblyFormat = [{
    $logits `,` $alpha `,` $beta attr-dict `:` type($logits) `->` type($bins)
  }];
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_MaskOp : Moe_TokenOp<"mask", [AllTypesMatch<["input", "result"]>]> {
  let summary = "restricts every token's scores to a set of experts";
  let description = [{
    `y[t,e] = x[t,e]` if `e` is in `set`, `-inf` otherwise. Masking by the full set is the
    identity (folded).

    Example: `%r = moe.mask %scores, %sel : tensor<?x128xf32>, !moe.set<128>`
  }];
  let arguments = (ins Moe_ScoreTensor:$input, Moe_ExpertSetType:$set);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = "$input `,` $set attr-dict `:` type($input) `,` qualified(type($set))";
  let hasFolder = 1;
}

def Moe_BiasResidentOp : Moe_TokenOp<"bias_resident", [AllTypesMatch<["input", "result"]>]> {
  let summary = "cache-aware routing bonus for experts already resident on the GPU";
  let description = [{
    ExpertFlow §3.4 (cache-aware routing): `y[t,e] = x[t,e] + bonus` if expert `e` is in
    the `resident` set, `x[t,e]` otherwise, so that near-ties are broken toward experts
    whose weights need no transfer. `bonus` (f32) must be finite and `>= 0`; a bonus of 0
    is the identity (folded).

    Example:
    ```mlir
    %bonus = moe.knob "resident_bonus" = 0.05 : f32
    %y = moe.bias_resident %probs, %resident, %bonus
        : tensor<?x64xf32>, !moe.set<64>
    ```
  }];
  let arguments = (ins Moe_ScoreTensor:$input, Moe_ExpertSetType:$resident, F32:$bonus);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = [{
    $input `,` $resident `,` $bonus attr-dict `:` type($input) `,` qualified(type($resident))
  }];
  let hasFolder = 1;
  let extraClassDeclaration = [{
    void getScalarRules(::llvm::SmallVectorImpl<ScalarRule> &rules);
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOETOKENOPS_TD
