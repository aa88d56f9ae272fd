//===- MoeBase.td - the moe dialect definition -------------*- tablegen -*-===//
//
// The `moe` dialect expresses Mixture-of-Experts routing policies (which experts each
// token of a batch uses) and, later, residency / balancing / prefetch rules.
//
//===----------------------------------------------------------------------===//

#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEBASE_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "switchyard/Dialect/Moe/IR/MoeInterfaces.td"

def Moe_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::switchyard::moe";
  let summary = "Mixture-of-Experts routing policies and expert placement rules";
  let description = [{
    The `moe` dialect is Switchyard's policy language. A `moe.router` holds one routing
    policy: its named arguments are the runtime inputs (router `logits` [T, E], optional
    `request_ids`, `resident` experts, a `placement`, a `phase`), its body is a dataflow
    graph of per-token ops, batch reductions and expert-set ops, and its `moe.yield`
    returns the named outputs (`topk_ids`, `topk_weights`, `selected`, ...).

    Conventions shared by every op:
    * Dense data lives in builtin tensors: scores are `tensor<?xExf32>` (T tokens, the
      batch dimension, is dynamic; E experts is static), ids are `tensor<?xKxi32>`.
    * Expert sets are `!moe.set<E>` values (a bitmask over E experts).
    * Every ranking in the dialect is by descending score with ties broken toward the
      lower expert id, and NaN ranks below every number.
    * Policy knobs (budgets, thresholds, warm-up sizes, LYNX alpha/beta, ...) are scalar
      SSA operands, usually produced by a named `moe.knob`, so tools can override them
      (`moe-opt --moe-set-knobs`, `moe-run --set`) without editing the policy. Shape
      defining parameters (k, experts, groups) are attributes.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
  // Every `moe.*` attribute the passes attach to other ops, declared once: each gets a
  // helper (MoeDialect::AbiAttrHelper, ...::getNameStr()) and is checked by
  // verifyOperationAttribute (its type, and the op it may sit on).
  let discardableAttrs = (ins
    // the router's C ABI on the function the lowering makes (and its GPU kernels)
    "::switchyard::moe::AbiAttr":$abi,
    // on that function: router / residency / balance / prefetch, and its shape
    "::mlir::StringAttr":$kind,
    "::mlir::IntegerAttr":$experts,
    "::mlir::IntegerAttr":$top_k,
    // a GPU kernel's launch (size class, grid, block, ...) and its launch cost model
    "::switchyard::moe::KernelLaunchAttr":$launch,
    "::mlir::DictionaryAttr":$launch_model,
    // a router (and its kernel) that routes this many knob groups in one launch
    "::mlir::IntegerAttr":$knob_groups,
    // token tiles of the GPU form of the batch outputs (on scf.parallel loops)
    "::mlir::IntegerAttr":$token_tiles,
    "::mlir::UnitAttr":$tile_scan,
    // a memref.view of the GPU workspace holding one temporary, its bytes its own
    "::mlir::UnitAttr":$workspace_temporary);
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  // `moe.*` attributes on other ops (what the lowering passes attach) are checked.
  let hasOperationAttrVerify = 1;
}

// A 64-bit integer attribute read back as a signed value, so that verifiers see a
// negative k or budget as negative (the builtin I64Attr reads back unsigned).
def Moe_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

// Every moe op rejects attributes it does not define (a misspelt `{capacity = 5}` would
// otherwise be accepted and ignored); see verifyNoUnknownAttributes in MoeTraits.h.
def Moe_NoUnknownAttributes : NativeOpTrait<"NoUnknownAttributes"> {
  let cppNamespace = "::switchyard::moe::role";
}

// Every dynamic dimension of the op's operands is the expert count E (rule steps over
// per-expert statistics: hotness, loads, last use). --moe-specialize binds a generic
// rule's arguments read by such an op to [E] (ShapeRefinementOpInterface).
def Moe_ExpertOperands : NativeOpTrait<"ExpertOperands"> {
  let cppNamespace = "::switchyard::moe::role";
}

// Every op derives from one of the role classes below, which gives it its role trait
// (MoeInterfaces.td); Moe_Op itself is not used directly.
class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic,
         !listconcat(traits, [Moe_NoUnknownAttributes, Moe_ShapeRefinementOpInterface,
                              Moe_ScalarRulesOpInterface])>;

// Containers, knobs, gates, stages, terminators.
class Moe_StructureOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Moe_Structure], traits)>;
// Per-token ops: each token's row on its own (the token stage).
class Moe_TokenStageOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, Moe_TokenStage, Moe_RowWise], traits)>;
// Folds over the tokens of the batch (the batch stage).
class Moe_BatchStageOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, Moe_BatchStage], traits)>;
// Expert-set selection (the select stage).
class Moe_SelectStageOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, Moe_SelectStage], traits)>;
// Routing within the selection and the batch outputs that follow (the route stage);
// per-token routing ops add Moe_RowWise.
class Moe_RouteStageOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, Moe_RouteStage], traits)>;
// Steps of a rule (host scheduling code, outside the fused stages).
class Moe_RuleStepOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Pure, Moe_RuleStep], traits)>;

// Synchronisation moe-map-to-gpu writes into the kernels it makes.
class Moe_KernelSyncOp<string mnemonic, list<Trait> traits = []>
    : Moe_Op<mnemonic, !listconcat([Moe_KernelSync], traits)>;

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEBASE_TD
