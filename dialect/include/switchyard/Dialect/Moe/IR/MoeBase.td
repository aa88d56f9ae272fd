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
  let extraClassDeclaration = [{
    void registerTypes();
  }];
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
// otherwise be accepted and ignored); see verifyNoUnknownAttributes in MoeOps.h.
def Moe_NoUnknownAttributes : NativeOpTrait<"NoUnknownAttributes"> {
  let cppNamespace = "::switchyard::moe";
}

class Moe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Moe_Dialect, mnemonic, !listconcat(traits, [Moe_NoUnknownAttributes])>;

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEBASE_TD
