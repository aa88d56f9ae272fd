//===- LoopLoweringOpInterface.td - how an op is written as loops -*- tablegen -*-===//
//
// The loop lowering's interface, owned by the conversion (as upstream MLIR's
// ConvertToLLVMPatternInterface is owned by its conversion): the moe dialect does not
// know it. lib/Conversion/MoeToLoops attaches an external model to every compute op of
// the dialect (OpLowerings.h, one file per op family) when its registration runs.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_MOETOLOOPS_LOOPLOWERINGOPINTERFACE_TD
#define SWITCHYARD_CONVERSION_MOETOLOOPS_LOOPLOWERINGOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def LoopLoweringOpInterface : OpInterface<"LoopLoweringOpInterface"> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    How moe-lower-to-loops writes an op as loops on buffers. An op with the `RowWise`
    trait is written for one token's row (`token`) inside the fused token loop of its
    stage; any other op is written whole (`token` is null). The conversion attaches
    the implementations (external models, one file per op family under
    lib/Conversion/MoeToLoops); a compute op without one cannot be compiled, which the
    dialect's unit test checks for every op.
  }];
  let methods = [
    InterfaceMethod<"Writes the op's loops (one token's row when `token` is set).",
      "::mlir::LogicalResult", "lowerToLoops",
      (ins "::switchyard::moe::RouterLowering &":$lowering, "::mlir::Value":$token)>
  ];
}

#endif
