//===- MoeInterfaces.td - op roles and interfaces ----------*- tablegen -*-===//
//
// What the passes need to know about an op lives here, next to the op, not in lists
// kept by hand:
// * a ROLE trait says where an op runs in a fused policy (moe-form-stages groups ops
//   of one stage role; rule steps run on the host; structure ops hold the policy);
//   every op of the dialect has exactly one, given by its ODS base class;
// * `RowWise` marks ops that compute each token's row on its own (fused into one
//   token loop: one warp per token on GPU);
// * how moe-lower-to-loops writes an op is the conversion's interface
//   (include/switchyard/Conversion/MoeToLoops/LoopLoweringOpInterface.td), which the
//   conversion attaches to the ops: the dialect names no conversion type;
// * `ShapeRefinementOpInterface` is how a generic policy's op is bound to a shape;
// * `PolicyOpInterface` is the function-like container every tool binds by name: a
//   router or a rule.
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/FunctionInterfaces.td"

class Moe_Role<string name> : NativeOpTrait<name> {
  let cppNamespace = "::switchyard::moe::role";
}

// Stage roles: the fused stages (kernel phases) of a policy.
def Moe_TokenStage : Moe_Role<"TokenStage">;   // per token, independent rows
def Moe_BatchStage : Moe_Role<"BatchStage">;   // folds over every token of the batch
def Moe_SelectStage : Moe_Role<"SelectStage">; // expert-set selection (size E)
def Moe_RouteStage : Moe_Role<"RouteStage">;   // routing within the set, batch outputs
// A step of a rule (host scheduling code): outside the fused stages.
def Moe_RuleStep : Moe_Role<"RuleStep">;
// The policy's structure: containers, knobs, gates, stages, terminators.
def Moe_Structure : Moe_Role<"Structure">;
// Synchronisation the GPU mapping writes into a kernel (gpu.func): never in a policy.
def Moe_KernelSync : Moe_Role<"KernelSync">;

// Computes each token's row independently (inside the token loop of its stage).
def Moe_RowWise : Moe_Role<"RowWise">;

def Moe_ShapeRefinementOpInterface : OpInterface<"ShapeRefinementOpInterface"> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    How `--moe-specialize` binds an op of a generic policy: the model sizes it is
    written with (`getSizeParameters`), the types of the policy arguments it reads
    (`bindOperandType`) and its result types once its operands have theirs. By default a result takes the bound type of the first
    operand written with the same generic type (softmax, mask, fill, union, ...), an
    expert set is over the bound E, and a static type stays; an op whose results are
    shaped otherwise ([T, k] ids, [E] counts, ...) declares `refineResultTypes`.
  }];
  let methods = [
    InterfaceMethod<"The bound result types, given bound operands.",
      "::mlir::LogicalResult", "refineResultTypes",
      (ins "const ::switchyard::moe::ShapeBinding &":$binding,
           "::llvm::SmallVectorImpl<::mlir::Type> &":$types), [{}],
      [{ return ::switchyard::moe::detail::refineByMatchingTypes($_op, binding, types); }]>,
    InterfaceMethod<[{
        The bound type of a router argument used as operand `index` (by default: a
        [?, ?] score tensor is [T, E], other shapes stay).
      }],
      "::mlir::Type", "bindOperandType",
      (ins "unsigned":$index, "const ::switchyard::moe::ShapeBinding &":$binding), [{}],
      [{ return ::switchyard::moe::detail::bindScoreOperand($_op, index, binding); }]>,
    InterfaceMethod<[{
        The model sizes the op is written with (k, groups, devices, ...; none by
        default): --moe-specialize binds each `?` and checks each fixed value.
      }],
      "void", "getSizeParameters",
      (ins "::llvm::SmallVectorImpl<::switchyard::moe::SizeParameter> &":$params), [{}],
      [{ (void)params; }]>
  ];
}

def Moe_TokenSizedResultsOpInterface : OpInterface<"TokenSizedResultsOpInterface"> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    An op whose 1-D results are not one entry per token: their dynamic size is
    `ceil((a*T + b) / d)` in the token count T (vLLM's padded block layouts). The
    compiled ABI records the rule and the runtime sizes the buffers with it. Results
    of other ops are sized per token ({1, 0, 1}).
  }];
  let methods = [
    InterfaceMethod<"{a, b, d} of result `result`'s dynamic dimension 0.",
      "std::array<int64_t, 3>", "getDynamicSizeRule", (ins "::mlir::OpResult":$result)>
  ];
}

def Moe_ExpertIdsReaderOpInterface : OpInterface<"ExpertIdsReaderOpInterface"> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    An op that indexes per-expert data with the expert ids of its `ids` operand (-1 =
    no expert, else [0, E)). A policy argument read this way gets that value rule in
    the ABI, and the runtime checks it before the compiled code runs.
  }];
  let methods = [
    InterfaceMethod<"The operand holding expert ids.", "::mlir::Value", "getExpertIds",
      (ins), [{}], [{ return $_op.getIds(); }]>
  ];
}

def Moe_ScalarRulesOpInterface : OpInterface<"ScalarRulesOpInterface"> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    The rules an op's scalar operands (budgets, thresholds, warm-up sizes, ...) obey.
    The verifier checks them on statically known values (constants, knob defaults) and
    the lowering passes them on to the generated code, which checks a knob's run-time
    value against the same rule (moe-emit-c-entry). An op without scalar operands has
    none (the default).
  }];
  let methods = [
    InterfaceMethod<"Appends the op's scalar rules.", "void", "getScalarRules",
      (ins "::llvm::SmallVectorImpl<::switchyard::moe::ScalarRule> &":$rules), [{}],
      [{ (void)rules; }]>
  ];
}

def Moe_PolicyOpInterface : OpInterface<"PolicyOpInterface", [FunctionOpInterface]> {
  let cppNamespace = "::switchyard::moe";
  let description = [{
    A function-like policy container: a `moe.router` or a rule (`moe.residency`,
    `moe.balance`, `moe.prefetch`). Its arguments are runtime inputs bound by name
    (`arg_names`), its results are named (`result_names`), and `experts` is the number
    of routed experts every set, score vector and placement in the body is over.
    Everything that compiles, describes or runs a policy goes through this interface.
  }];
  let methods = [
    InterfaceMethod<"The names of the runtime inputs, in order.",
      "::mlir::ArrayAttr", "getArgNames">,
    InterfaceMethod<"The names of the results, in order.",
      "::mlir::ArrayAttr", "getResultNames">,
    InterfaceMethod<"The number of routed experts E (`?` in a generic policy).",
      "int64_t", "getExperts">,
    InterfaceMethod<"Binds E (--moe-specialize).", "void", "setExperts",
      (ins "int64_t":$experts)>,
    InterfaceMethod<"The router's k (0 for rules).", "int64_t", "getTopK", (ins), [{}],
      [{ return 0; }]>,
    InterfaceMethod<"The router's shared experts (0 for rules).", "int64_t",
      "getSharedExperts", (ins), [{}], [{ return 0; }]>,
  ];
  let extraClassDeclaration = [{
    ::llvm::StringRef getSymName() {
      return (*this)->template getAttrOfType<::mlir::StringAttr>(
          ::mlir::SymbolTable::getSymbolAttrName()).getValue();
    }
    /// "router", "residency", "balance" or "prefetch".
    ::llvm::StringRef getKind() { return (*this)->getName().stripDialect(); }
    bool isRouter() { return getKind() == "router"; }
    ::mlir::Block &getBodyBlock() { return (*this)->getRegion(0).front(); }
    /// The block argument bound to the runtime input `name`, or null.
    ::mlir::BlockArgument getArgumentByName(::llvm::StringRef name) {
      for (auto [i, n] : ::llvm::enumerate(getArgNames()))
        if (::llvm::cast<::mlir::StringAttr>(n).getValue() == name)
          return getBodyBlock().getArgument(i);
      return nullptr;
    }
    /// Index of the result named `name`, or -1.
    int64_t getResultIndex(::llvm::StringRef name) {
      for (auto [i, n] : ::llvm::enumerate(getResultNames()))
        if (::llvm::cast<::mlir::StringAttr>(n).getValue() == name)
          return i;
      return -1;
    }
  }];
  let verify = [{ return ::switchyard::moe::detail::verifyPolicyOp($_op); }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEINTERFACES_TD
