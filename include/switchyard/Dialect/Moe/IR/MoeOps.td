//===- MoeOps.td - all moe dialect ops ---------------------*- tablegen -*-===//
//
// The umbrella file that add_mlir_dialect generates the dialect, types and ops from.
// Each family of ops lives in its own file.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD

include "switchyard/Dialect/Moe/IR/MoeBase.td"
include "switchyard/Dialect/Moe/IR/MoeTypes.td"
include "switchyard/Dialect/Moe/IR/MoeAttrs.td"
include "switchyard/Dialect/Moe/IR/MoeContainerOps.td"
include "switchyard/Dialect/Moe/IR/MoeTokenOps.td"
include "switchyard/Dialect/Moe/IR/MoeBatchOps.td"
include "switchyard/Dialect/Moe/IR/MoeSetOps.td"
include "switchyard/Dialect/Moe/IR/MoeRouteOps.td"
include "switchyard/Dialect/Moe/IR/MoeRuleOps.td"
include "switchyard/Dialect/Moe/IR/MoeKernelOps.td"

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEOPS_TD
