//===- Passes.td - moe dialect passes ----------------------*- tablegen -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD
#define SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeSpecialize : Pass<"moe-specialize", "mlir::ModuleOp"> {
  let summary = "binds generic policies to a model's shape";
  let description = [{
    Rewrites every generic policy of the module (routers and rules) into the static
    form the lowering compiles: `?` expert dimensions become `experts`, `k = ?` becomes
    `top_k`, `groups = ? keep = ?` the expert groups, a placement's `?` its devices and
    slots (slots default to the expert count), `gpus = ?` the devices, EPLB's slots
    and nodes, a gate's hidden size, and `moe.param` values constants; result types
    follow (ShapeRefinementOpInterface). `scaling` and `norm_topk_prob` set the routed
    scaling factor and renormalization of every `moe.route`.

    A parameter the policy fixes to another value, a value no policy uses, and a
    generic parameter left unbound are errors; a `moe.fill` budget larger than the
    experts is a warning (the policy would select every expert). The tools bind the
    same way from `--experts`, `--top-k`, `--groups`, `--topk-groups`, `--devices`,
    `--slots`, `--nodes`, `--hidden-size`, `--shared-experts`, `--scaling`,
    `--norm-topk-prob` and `--model config.json`.

    Example: `moe-opt --moe-specialize="experts=8 top_k=2" policies/xshare.mlir`
  }];
  let options = [
    Option<"experts", "experts", "int64_t", "-1", "the number of routed experts E">,
    Option<"topK", "top_k", "int64_t", "-1", "experts per token k">,
    Option<"groups", "groups", "int64_t", "-1", "expert groups (moe.group_limit, moe.eplb)">,
    Option<"topkGroups", "topk_groups", "int64_t", "-1", "groups each token keeps">,
    Option<"devices", "devices", "int64_t", "-1", "devices (GPUs) of a placement or plan">,
    Option<"slots", "slots", "int64_t", "-1",
           "physical expert slots (a placement, EPLB's phy2log)">,
    Option<"nodes", "nodes", "int64_t", "-1", "nodes of an EPLB plan">,
    Option<"hidden", "hidden_size", "int64_t", "-1", "the model's hidden size (moe.gate)">,
    Option<"sharedExperts", "shared_experts", "int64_t", "-1", "shared experts">,
    Option<"scaling", "scaling", "double", "0.0", "routed scaling factor (> 0)">,
    Option<"normTopkProb", "norm_topk_prob", "std::string", "\"\"",
           "renormalize the top-k weights (true/false)">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def MoeSetKnobs : Pass<"moe-set-knobs", "mlir::ModuleOp"> {
  let summary = "overrides the defaults of named policy knobs";
  let description = [{
    Rewrites the default of every `moe.knob` named in `values` (a list of
    `name=value`), in every router of the module. The value is parsed as the knob's
    type (i64 or f32). An unknown knob name, a value that does not parse, or a value
    that makes an op invalid (the module is verified after the pass) is an error.

    Example: `moe-opt --moe-set-knobs="values=budget=12,k0=2" policies/xshare.mlir`
  }];
  let options = [
    ListOption<"values", "values", "std::string",
               "knob overrides, each as name=value">
  ];
}

def MoeFreezeKnobs : Pass<"moe-freeze-knobs", "mlir::ModuleOp"> {
  let summary = "turns every knob into a constant";
  let description = [{
    Replaces every `moe.knob` with an `arith.constant` of its current default, so that
    canonicalization can fold by the knob's value (e.g. a budget of 0). Run it after
    `moe-set-knobs` when the compiled policy need not be tunable any more.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

def MoeFormStages : Pass<"moe-form-stages", "mlir::ModuleOp"> {
  let summary = "groups a policy's ops into fused stages (the kernel boundaries)";
  let description = [{
    Wraps the ops of every router (and of every phase-gate region) in `moe.stage` ops
    of kind token / batch / select / route. Ops of one kind whose inputs are ready are
    fused into one stage even when the source interleaves them; a batch reduction never
    shares a stage with the producer of its input. A router that already has stages is
    left alone.

    Example: XShare becomes token(softmax) -> batch(union_topk, batch_reduce) ->
    select(fill) -> route(route, expert_counts, ...).
  }];
}

def MoeSelectOutputs : Pass<"moe-select-outputs", "mlir::ModuleOp"> {
  let summary = "keeps only the named results of each policy and the ops that feed them";
  let description = [{
    Pay only for what you use: every router and rule of the module keeps the results
    named in `names` (in their original order) and drops the others from its yield,
    its function type and its `result_names`; the ops that then have no use and no
    side effect are erased (knobs stay, so a policy's knob struct does not change with
    the results asked for). A name no policy has, or a policy left without a result, is
    an error listing the results it has.

    Example: `moe-opt --moe-select-outputs="names=topk_ids,topk_weights"
    policies/topk_softmax.mlir` leaves the route alone, without the counts, the active
    list and the block alignment.
  }];
  let options = [
    ListOption<"names", "names", "std::string", "the results to keep">
  ];
}

def MoeFillEmptySlots : Pass<"moe-fill-empty-slots", "mlir::ModuleOp"> {
  let summary = "a serving engine's contract in the generated code: every slot an expert";
  let description = [{
    Engines' MoE kernels take expert ids in `[0, E)` only. Every router returning
    `topk_ids` and `topk_weights` returns them through `moe.fill_empty_slots`: a slot
    the policy left empty gets weight 0 and an expert the token already uses, or (a
    token left with none) the lowest expert the batch routes to. A route over all
    experts (no `within`) fills from the token's own row only, so a policy of token loops
    stays one (the GPU's grid kernel); other producers also take the batch's
    `moe.expert_counts`. Run on bound routers (after `moe-specialize`);
    `moe-compile --fill-empty-slots` runs it after `--outputs`.

    Example: `moe-opt --moe-fill-empty-slots policies/capacity_topk.mlir --experts 64
    --top-k 2` (bound first).
  }];
}

def MoeFoldRouteSoftmax : Pass<"moe-fold-route-softmax", "mlir::ModuleOp"> {
  let summary = "weighs a renormalized route by its selected scores' softmax";
  let description = [{
    With `renormalize`, a route's weights are `p[j] / sum_selected p`; when `p` is
    `moe.softmax %scores` of the route's own scores, that is
    `exp(s[j] - m) / sum_selected exp(s - m)` for any m: the softmax over the k
    selected scores, which needs k `exp` per token instead of the E of a full softmax.
    Every `moe.route` with `renormalize` whose `weights` is a `moe.softmax` of its
    `scores` and which is that softmax's only user becomes a route with
    `softmax_weights` and no `weights`, and the softmax is erased. Other routes (no
    `renormalize`, a softmax with other users, a softmax of another tensor, sigmoid
    weights) are left alone. The results are the same up to rounding; where the full
    softmax underflows for every selected expert (a set excluding the row's best
    expert by more than ~87) the folded route still weighs them.

    The compile pipelines run it after `--outputs` pruning (moe-select-outputs), so a
    softmax whose other users were pruned folds too.

    Example: `%p = moe.softmax %logits` then `moe.route %logits weights(%p : ...) k = 8
    renormalize` becomes `moe.route %logits k = 8 renormalize softmax_weights`.
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_TRANSFORMS_PASSES_TD
