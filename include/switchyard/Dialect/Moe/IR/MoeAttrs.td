//===- MoeAttrs.td - moe dialect enums and attributes ------*- tablegen -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEATTRS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEATTRS_TD

include "switchyard/Dialect/Moe/IR/MoeBase.td"
include "mlir/IR/EnumAttr.td"

def Moe_ReduceKind : I32EnumAttr<"ReduceKind", "how a reduction combines values", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"count", 2>
  ]> {
  let cppNamespace = "::switchyard::moe";
}

def Moe_FillMode : I32EnumAttr<"FillMode", "when a greedy fill stops", [
    I32EnumAttrCase<"budget", 0>,
    I32EnumAttrCase<"threshold", 1>,
    I32EnumAttrCase<"min_size", 2>
  ]> {
  let cppNamespace = "::switchyard::moe";
}

def Moe_Phase : I32EnumAttr<"Phase", "the inference phase of a batch", [
    I32EnumAttrCase<"prefill", 0>,
    I32EnumAttrCase<"decode", 1>,
    I32EnumAttrCase<"mixed", 2>
  ]> {
  let cppNamespace = "::switchyard::moe";
}
def Moe_StageKind : I32EnumAttr<"StageKind", "what a fused stage iterates over", [
    I32EnumAttrCase<"token", 0>,
    I32EnumAttrCase<"batch", 1>,
    I32EnumAttrCase<"select", 2>,
    I32EnumAttrCase<"route", 3>
  ]> {
  let cppNamespace = "::switchyard::moe";
}

def Moe_PhaseArrayAttr : TypedArrayAttrBase<Moe_Phase, "array of phases">;

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEATTRS_TD
