//===- MoeBatchOps.td - reductions over the batch ----------*- tablegen -*-===//
//
// Ops that combine the rows of all tokens of the batch (or of one request) into one
// value per expert. They lower to block reductions (one CTA) or partials + a combine.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEBATCHOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEBATCHOPS_TD

include "switchyard/Dialect/Moe/IR/MoeTokenOps.td"

def Moe_BatchReduceOp : Moe_BatchStageOp<"batch_reduce"> {
  let summary = "reduces a score matrix over the tokens of the batch";
  let description = [{
    One value per expert from the whole batch:
    * `sum`:   `s[e] = sum_t x[t,e]` (XShare §3.2: with softmax probabilities this is the
               expert's gating mass f({e}), the marginal gain of the greedy fill);
    * `max`:   `s[e] = max_t x[t,e]` (`-inf` for an empty batch);
    * `count`: `s[e] = |{t : e in topk(t)}|`, the number of tokens that pick `e`
               (requires `over topk`; the result is i32).
    With `over topk = k`, only the entries in each token's own top-k (by `x`, ties to the
    lower id) contribute; the others count as absent. `1 <= k <= E`; a `sum` or `max`
    over `topk = E` is the plain reduction (folded). With `rows(%mask : tensor<?xi32>)`
    only the tokens whose `mask[t]` is nonzero contribute (MoE-Spec ranks experts by the
    draft tokens' mass: `rows(%draft_mask ...)`).

    Examples:
    ```mlir
    %mass = moe.batch_reduce sum %probs : tensor<?x128xf32> -> tensor<128xf32>
    %hits = moe.batch_reduce count %probs over topk = 8
        : tensor<?x128xf32> -> tensor<128xi32>
    %draft_mass = moe.batch_reduce sum %probs rows(%draft_mask : tensor<?xi32>)
        : tensor<?x128xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Moe_ReduceKind:$kind, Moe_ScoreTensor:$input,
                       OptionalAttr<Moe_I64Attr>:$topk,
                       Optional<TensorRankOf<[I32], [1]>>:$rows);
  let results = (outs TensorRankOf<[F32, I32], [1]>:$result);
  let assemblyFormat = [{
    $kind $input (`over` `topk` `=` $topk^)? (`rows` `(` $rows^ `:` type($rows) `)`)?
    attr-dict `:` type($input) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_SegmentReduceOp : Moe_BatchStageOp<"segment_reduce", [AllTypesMatch<["input", "result"]>]> {
  let summary = "reduces a score matrix over the tokens of each request";
  let description = [{
    For speculative decoding, where the tokens of one request (the generating token and
    its draft tokens) are strongly correlated (XShare §4.1). Row t of the result is the
    reduction over every token t' with `request_ids[t'] == request_ids[t]` (the tokens of
    a request need not be contiguous):
    * `sum`: `y[t,e] = sum_{t' in req(t)} x[t',e]` (the per-request proxy f_l(.; r), eq. 3);
    * `max`: `y[t,e] = max_{t' in req(t)} x[t',e]`.
    `count` is rejected (it needs a top-k; use `sum` over a 0/1 matrix).

    Example:
    ```mlir
    %req = moe.segment_reduce sum %probs by %request_ids
        : tensor<?x64xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Moe_ReduceKind:$kind, Moe_ScoreTensor:$input,
                       TensorRankOf<[I32], [1]>:$request_ids);
  let results = (outs Moe_ScoreTensor:$result);
  let assemblyFormat = [{
    $kind $input `by` $request_ids attr-dict `:` type($input) `,` type($request_ids)
  }];
  let hasVerifier = 1;
}

def Moe_BinScoreOp : Moe_BatchStageOp<"bin_score", [Moe_ExpertIdsReaderOpInterface]> {
  let summary = "LYNX batch-wide bin-weighted expert scores";
  let description = [{
    LYNX §3.2.1 (adaptive expert scorer), with B the number of tokens in the batch:
    `s[e] = sum over tokens t with e in ids[t] of B ^ bins[t,e]`.
    A token's top-1 (bin 0) adds 1; an expert q bins below the token's top-1 adds B^-q,
    so one top-1 vote outweighs any number of low-affinity votes from the same batch.
    `ids` is each token's top-k (from `moe.topk` on the same logits); `-1` entries are
    skipped. `bins` comes from `moe.bins`.

    Example:
    ```mlir
    %s = moe.bin_score %bins, %ids
        : tensor<?x64xi32>, tensor<?x8xi32> -> tensor<64xf32>
    ```
  }];
  let arguments = (ins TensorRankOf<[I32], [2]>:$bins, Moe_IdTensor:$ids);
  let results = (outs Moe_ExpertVector:$result);
  let assemblyFormat = [{
    $bins `,` $ids attr-dict `:` type($bins) `,` type($ids) `->` qualified(type($result))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEBATCHOPS_TD
