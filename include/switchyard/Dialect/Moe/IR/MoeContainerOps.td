//===- MoeContainerOps.td - policy containers, knobs, gates -*- tablegen -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOECONTAINEROPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOECONTAINEROPS_TD

include "switchyard/Dialect/Moe/IR/MoeBase.td"
include "switchyard/Dialect/Moe/IR/MoeTypes.td"
include "switchyard/Dialect/Moe/IR/MoeAttrs.td"
include "switchyard/Dialect/Moe/IR/MoeInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

// The function-like containers (a router, the three rules): one custom syntax,
// `@name(%arg: type, ...) -> (name: type, ...) attributes {...} { body }`, and the
// checks of PolicyOpInterface (names, signature, body over the container's experts).
class Moe_PolicyContainerOp<string mnemonic, list<Trait> traits = []>
    : Moe_StructureOp<mnemonic, !listconcat([
        IsolatedFromAbove, Moe_PolicyOpInterface,
        DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>
      ], traits)> {
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    // CallableOpInterface (through FunctionOpInterface).
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() {
      return getFunctionType().getInputs();
    }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() {
      return getFunctionType().getResults();
    }
  }];
  let extraClassDefinition = [{
    ::mlir::ParseResult $cppClass::parse(::mlir::OpAsmParser &parser,
                                         ::mlir::OperationState &result) {
      return ::switchyard::moe::detail::parsePolicyOp(parser, result);
    }
    void $cppClass::print(::mlir::OpAsmPrinter &p) {
      ::switchyard::moe::detail::printPolicyOp(*this, p);
    }
    void $cppClass::getAsmBlockArgumentNames(::mlir::Region &region,
                                             ::mlir::OpAsmSetValueNameFn setNameFn) {
      ::switchyard::moe::detail::nameBlockArguments(*this, region, setNameFn);
    }
    ::mlir::LogicalResult $cppClass::verifyRegions() {
      return ::switchyard::moe::detail::verifyPolicyBody(*this);
    }
  }];
}

def Moe_RouterOp : Moe_PolicyContainerOp<"router"> {
  let summary = "a routing policy: named runtime inputs to named routing outputs";
  let description = [{
    A `moe.router` is one routing policy for one MoE layer shape. It is function-like:
    its arguments are the runtime inputs, bound by name (the SSA names written in the
    signature are kept as `arg_names`), and its results are named in the signature and
    returned by the body's `moe.yield` in order.

    Attributes:
    * `experts`: the number of routed experts E (every `!moe.set` and every score
      tensor's expert dimension in the body must equal it);
    * `top_k`: the model's k, the number of experts each token is routed to (every
      `moe.route` in the body uses it);
    * `shared_experts` (default 0): experts that every token uses in addition to its
      k routed ones (DeepSeek/Qwen style). They are outside the E routed experts, are
      never selected or dropped by a policy, and are always active (LYNX §3.2.1 keeps
      shared experts in every batch's set).

    A router that leaves `experts` (and `top_k`) out is *generic*: its expert dimensions
    are `?` (`tensor<?x?xf32>` scores, `!moe.set<?>`, `tensor<?xi32>` counts), its
    `moe.route` has `k = ?`, and `--moe-specialize` (the tools' `--experts`, `--top-k`,
    `--model`) binds them, giving the static form above. A generic router cannot be
    compiled before it is bound.

    Conventional argument names: `logits` (f32 [T, E]), `request_ids` (i32 [T]),
    `bias` (f32 [E]), `resident` (a set), `placement`, `phase` (i32: 0 prefill,
    1 decode, 2 mixed). Conventional results: `topk_ids` (i32 [T, k]), `topk_weights`
    (f32 [T, k]), `selected` (a set), `expert_counts` (i32 [E]).

    Example (plain softmax top-k):
    ```mlir
    moe.router @topk_softmax(%logits: tensor<?x8xf32>)
        -> (topk_ids: tensor<?x2xi32>, topk_weights: tensor<?x2xf32>)
        attributes {experts = 8 : i64, top_k = 2 : i64} {
      %probs = moe.softmax %logits : tensor<?x8xf32>
      %ids, %weights = moe.route %probs k = 2 renormalize
          : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
      moe.yield %ids, %weights : tensor<?x2xi32>, tensor<?x2xf32>
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<FunctionType>:$function_type,
    StrArrayAttr:$arg_names,
    StrArrayAttr:$result_names,
    DefaultValuedAttr<Moe_I64Attr, "::mlir::ShapedType::kDynamic">:$experts,
    DefaultValuedAttr<Moe_I64Attr, "::mlir::ShapedType::kDynamic">:$top_k,
    DefaultValuedAttr<Moe_I64Attr, "0">:$shared_experts,
    OptionalAttr<DictArrayAttr>:$arg_attrs,
    OptionalAttr<DictArrayAttr>:$res_attrs
  );
  let hasVerifier = 1; // top_k and shared_experts; the rest is PolicyOpInterface's
}

// Rules: host scheduling decisions (where expert weights live, at which precision, on
// which GPU, when they move). Function-like like a router, over the same E experts,
// without a token count contract: a rule's inputs are statistics (counters, loads,
// hotness) and its outputs plans (sets, placements, queues).
class Moe_RuleContainerOp<string mnemonic, string what, string example>
    : Moe_PolicyContainerOp<mnemonic> {
  let summary = "a " # what # " rule: named runtime inputs to a named plan";
  let description = !strconcat([{
    A rule compiled to host scheduling code with a C ABI, like a router: its
    arguments are runtime inputs bound by name (`arg_names`), its results are named in
    the signature and returned by the body's `moe.yield`. `experts` is the number of
    logical experts E every set, score vector and placement in the body is over. Only
    dimension 0 of an argument may be dynamic (rows: tokens or layers); knobs
    (`moe.knob`) are overridable by name as in routers. A rule that leaves `experts`
    out is generic, as a router can be: its expert dimensions (and the devices, slots,
    groups of its ops) are `?` until `--moe-specialize` binds them.

    Example:
    ```mlir
}], example, [{
    ```
  }]);
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<FunctionType>:$function_type,
    StrArrayAttr:$arg_names,
    StrArrayAttr:$result_names,
    DefaultValuedAttr<Moe_I64Attr, "::mlir::ShapedType::kDynamic">:$experts,
    OptionalAttr<DictArrayAttr>:$arg_attrs,
    OptionalAttr<DictArrayAttr>:$res_attrs
  );
}

def Moe_ResidencyOp : Moe_RuleContainerOp<"residency", "residency (precision / placement in memory)", [{
    moe.residency @dynaexq(%hotness: tensor<64xf32>, %counts: tensor<64xi32>,
                           %current: !moe.set<64>)
        -> (hi_set: !moe.set<64>) attributes {experts = 64 : i64} {
      %alpha = moe.knob "alpha" = 0.8 : f32
      %n = moe.knob "capacity" = 16 : i64
      %margin = moe.knob "margin" = 0.5 : f32
      %s = moe.ema %hotness, %counts alpha(%alpha : f32) : tensor<64xf32>, tensor<64xi32>
      %hi = moe.hot_set %s, %current capacity(%n : i64) margin(%margin : f32)
          : tensor<64xf32> -> !moe.set<64>
      moe.yield %hi : !moe.set<64>
    }
}]>;

def Moe_BalanceOp : Moe_RuleContainerOp<"balance", "load-balancing (replication / placement)", [{
    moe.balance @eplb(%loads: tensor<64xf32>)
        -> (phy2log: tensor<72xi32>, log2phy: tensor<64x9xi32>, replica_count: tensor<64xi32>)
        attributes {experts = 64 : i64} {
      %p2l, %l2p, %cnt = moe.eplb %loads groups = 8 nodes = 2 gpus = 8
          : tensor<64xf32> -> tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
      moe.yield %p2l, %l2p, %cnt : tensor<72xi32>, tensor<64x9xi32>, tensor<64xi32>
    }
}]>;

def Moe_PrefetchOp : Moe_RuleContainerOp<"prefetch", "prefetch (when weights move)", [{
    moe.prefetch @ahead(%hotness: tensor<64xf32>, %current: !moe.set<64>)
        -> (hi_set: !moe.set<64>) attributes {experts = 64 : i64} {
      %n = moe.knob "capacity" = 8 : i64
      %zero = moe.knob "margin" = 0.0 : f32
      %hi = moe.hot_set %hotness, %current capacity(%n : i64) margin(%zero : f32)
          : tensor<64xf32> -> !moe.set<64>
      moe.yield %hi : !moe.set<64>
    }
}]>;

def Moe_YieldOp : Moe_StructureOp<"yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["RouterOp", "ResidencyOp", "BalanceOp", "PrefetchOp", "WhenOp", "StageOp"]>
  ]> {
  let summary = "returns the outputs of a router, a rule, a phase-gate region or a stage";
  let description = [{
    Terminates a `moe.router` or rule body (the operands are its named results, in
    signature order, with the signature's types), one region of a `moe.when` or a
    `moe.stage` (the operands become the op's results).

    Example: `moe.yield %ids, %weights : tensor<?x8xi32>, tensor<?x8xf32>`
  }];
  let arguments = (ins Variadic<AnyType>:$operands);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, ::mlir::ValueRange()); }]>];
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let hasVerifier = 1;
}

def Moe_KnobOp : Moe_StructureOp<"knob", [
    Pure, DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    AllTypesMatch<["value", "result"]>
  ]> {
  let summary = "a named, overridable policy parameter";
  let description = [{
    Declares a tunable parameter of the enclosing policy with its default value. Ops
    that take a scalar parameter (a budget, a threshold, a warm-up size, LYNX's alpha
    and beta, ...) take it as an operand, usually a knob, so that the value can be
    changed without editing the policy: `moe-opt --moe-set-knobs="values=budget=12"`
    rewrites the default (and re-verifies the policy, so an invalid value is reported
    by the op that uses it), and `moe-run --set budget=12` does the same before
    compiling. `moe-opt --moe-freeze-knobs` turns every knob into an `arith.constant`.

    Knob names are unique within a router. Integer knobs are `i64`, real knobs `f32`.

    Example:
    ```mlir
    %budget = moe.knob "budget" = 24 : i64
    %alpha = moe.knob "alpha" = 2.0 : f32
    ```
  }];
  let arguments = (ins StrAttr:$name, TypedAttrInterface:$value);
  let results = (outs AnyTypeOf<[I64, F32]>:$result);
  let assemblyFormat = "$name `=` $value attr-dict";
  let hasVerifier = 1;
}

def Moe_ParamOp : Moe_StructureOp<"param", [Pure]> {
  let summary = "a shape parameter of the enclosing router as a value";
  let description = [{
    The router's `top_k` or `experts` as an i64 value, for
    ops that take a count as an operand (e.g. the warm-up size of `moe.union_topk` when
    it is the model's k). A generic policy binds it with `--moe-specialize`, which
    replaces it with an `arith.constant`; in a bound router it is that constant.

    Example: `%k = moe.param "top_k" : i64`
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs I64:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Moe_NumTokensOp : Moe_StructureOp<"num_tokens", [Pure]> {
  let summary = "the batch's token count T as a value";
  let description = [{
    T, the number of tokens of the batch being routed, as an i64 value for scalar
    arithmetic on knobs inside a router (`arith` ops on integer and float scalars are
    compiled with the policy on both targets), e.g. a capacity computed by hand:

    ```mlir
    %t = moe.num_tokens : i64
    %per = moe.knob "tokens_per_expert_slot" = 4 : i64
    %c = arith.ceildivsi %t, %per : i64
    %kept, %kw, %counts, %dropped = moe.capacity %ids, %w capacity(%c : i64) : ...
    ```
  }];
  let results = (outs I64:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Moe_WhenOp : Moe_StructureOp<"when", [
    RecursiveMemoryEffects, NoRegionArguments,
    SingleBlockImplicitTerminator<"YieldOp">
  ]> {
  let summary = "phase gate: a policy for memory-bound batches, another otherwise";
  let description = [{
    LYNX's phase-aware optimizer (§3.3.1): batch-level expert reduction only pays off
    (and only preserves accuracy) on memory-bound decode batches. `moe.when` runs its
    first region when the batch qualifies and its `else` region otherwise; both yield
    the op's results.

    A batch qualifies when its token count (dimension 0 of `tokens`) is at most
    `max_tokens` and, if `phases` is given, the runtime `phase` operand (an i32:
    0 prefill, 1 decode, 2 mixed, the executor's classification of the batch) is one of
    `phases`. `max_tokens = 0` never qualifies (the gate canonicalizes to its `else`
    region).

    Example:
    ```mlir
    %ids, %w = moe.when %logits : tensor<?x64xf32> phase(%phase : i32)
        max_tokens = 256 phases = [decode] -> (tensor<?x8xi32>, tensor<?x8xf32>) {
      ... batch-aware routing ...
      moe.yield %ids0, %w0 : tensor<?x8xi32>, tensor<?x8xf32>
    } else {
      ... plain top-k ...
      moe.yield %ids1, %w1 : tensor<?x8xi32>, tensor<?x8xf32>
    }
    ```
  }];
  let arguments = (ins
    AnyRankedTensor:$tokens,
    Optional<I32>:$phase,
    Moe_I64Attr:$max_tokens,
    OptionalAttr<Moe_PhaseArrayAttr>:$phases
  );
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$gated, SizedRegion<1>:$fallback);
  let assemblyFormat = [{
    $tokens `:` type($tokens) (`phase` `(` $phase^ `:` type($phase) `)`)?
    `max_tokens` `=` $max_tokens (`phases` `=` custom<PhaseList>($phases)^)?
    (`->` `(` type($results)^ `)`)? $gated `else` $fallback attr-dict
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    ::mlir::LogicalResult refineResultTypes(const ShapeBinding &binding,
                                            ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
}

def Moe_StageOp : Moe_StructureOp<"stage", [
    RecursiveMemoryEffects, NoRegionArguments,
    SingleBlockImplicitTerminator<"YieldOp">
  ]> {
  let summary = "a fused stage: ops that become one loop nest / one kernel phase";
  let description = [{
    Made by `--moe-form-stages`: the explicit kernel boundaries of a policy. The body's
    ops all iterate over the same domain, given by `kind`:
    * `token`: per-token ops; one token-parallel loop (one warp per token on GPU), the
      values that do not leave the stage stay in per-token (row) storage;
    * `batch`: reductions over the tokens of the batch (block reductions on GPU);
    * `select`: expert-set selection over the E experts (one block over E on GPU);
    * `route`: per-token routing plus the per-expert counts, the compacted
      active-expert list and the block-aligned token order that follow from it.
    The stage's results are the body's values used after it, returned by `moe.yield`.

    Example:
    ```mlir
    %probs = moe.stage token -> (tensor<?x64xf32>) {
      %p = moe.softmax %logits : tensor<?x64xf32>
      moe.yield %p : tensor<?x64xf32>
    }
    ```
  }];
  let arguments = (ins Moe_StageKind:$kind);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind (`->` `(` type($results)^ `)`)? $body attr-dict";
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOECONTAINEROPS_TD
