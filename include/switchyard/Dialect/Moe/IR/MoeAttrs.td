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

//===----------------------------------------------------------------------===//
// The C ABI of a lowered router: what the lowering attaches as `moe.abi` and every
// consumer (the C entry, the GPU mapping, the PTX launcher, the manifest) reads.
//===----------------------------------------------------------------------===//

def Moe_AbiRole : I32EnumAttr<"AbiRole", "who writes a parameter of the C entry", [
    I32EnumAttrCase<"in", 0>,
    I32EnumAttrCase<"out", 1>,
    I32EnumAttrCase<"knob", 2>
  ]> {
  let cppNamespace = "::switchyard::moe";
  let genSpecializedAttr = 0;
}

def Moe_AbiKind : I32EnumAttr<"AbiKind", "what a parameter of the C entry carries", [
    I32EnumAttrCase<"tokens", 0>,
    I32EnumAttrCase<"tensor", 1>,
    I32EnumAttrCase<"set", 2>,
    I32EnumAttrCase<"scalar", 3>,
    I32EnumAttrCase<"placement_replicas", 4>,
    I32EnumAttrCase<"placement_log2phy", 5>
  ]> {
  let cppNamespace = "::switchyard::moe";
  let genSpecializedAttr = 0;
}

def Moe_SizeClass : I32EnumAttr<"SizeClass", "which batches a GPU kernel serves", [
    I32EnumAttrCase<"decode", 0>,
    I32EnumAttrCase<"grid", 1>,
    I32EnumAttrCase<"large", 2>,
    I32EnumAttrCase<"cooperative", 3>
  ]> {
  let cppNamespace = "::switchyard::moe";
  let genSpecializedAttr = 0;
}

class Moe_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Moe_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Moe_KnobRuleAttr : Moe_Attr<"KnobRule", "rule"> {
  let summary = "one rule a run-time knob must keep, as the C entry checks it";
  let description = [{
    What one op that reads a knob requires of it (a range, finiteness, a relation to
    another knob), with the text and the op (`name at file:line:col`) the runtime
    names when a value breaks it. `lo`/`hi` bound integer knobs; `min`/`max` (open when
    `min_open`/`max_open`) bound float knobs; `relation` is a rule between knobs.
  }];
  let parameters = (ins
    "::mlir::StringAttr":$text,
    "::mlir::StringAttr":$op,
    OptionalParameter<"::mlir::BoolAttr">:$is_float,
    "int64_t":$lo,
    OptionalParameter<"std::optional<int64_t>">:$hi,
    OptionalParameter<"::mlir::BoolAttr">:$finite,
    OptionalParameter<"::mlir::BoolAttr">:$not_nan,
    OptionalParameter<"::mlir::BoolAttr">:$nonzero,
    OptionalParameter<"::mlir::FloatAttr">:$min,
    OptionalParameter<"::mlir::FloatAttr">:$max,
    OptionalParameter<"::mlir::BoolAttr">:$min_open,
    OptionalParameter<"::mlir::BoolAttr">:$max_open,
    OptionalParameter<"::mlir::StringAttr">:$relation
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// A flag parameter: absent means false.
    static bool flag(::mlir::BoolAttr b) { return b && b.getValue(); }
  }];
}

def Moe_AbiParamAttr : Moe_Attr<"AbiParam", "param"> {
  let summary = "one parameter of a lowered router's C entry";
  let description = [{
    `name`, `role` (in / out / knob), `kind` (tokens, tensor, set, scalar, placement
    replicas or log2phy table) and the lowered `type` (a memref or a scalar). A memref
    with a dynamic batch dimension has a `size` rule `array<i64: a, b, d>`: the dimension
    is `(a * T + b) / d`. Inputs read as phases or expert ids carry `values` ("phase" or
    "expert_ids") and, for ids, `id_bound` (E). Knobs carry their `default` and `rules`
    (`#moe.rule`s).
  }];
  let parameters = (ins
    "::mlir::StringAttr":$name,
    "::switchyard::moe::AbiRole":$role,
    "::switchyard::moe::AbiKind":$kind,
    "::mlir::Type":$type,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$size,
    OptionalParameter<"::mlir::StringAttr">:$values,
    OptionalParameter<"std::optional<int64_t>">:$id_bound,
    OptionalParameter<"::mlir::Attribute">:$default_value,
    OptionalParameter<"::mlir::ArrayAttr">:$rules
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isKnob() const { return getRole() == ::switchyard::moe::AbiRole::knob; }
    bool isOutput() const { return getRole() == ::switchyard::moe::AbiRole::out; }
    /// The knob's rules (empty for other parameters).
    ::llvm::SmallVector<KnobRuleAttr> getKnobRules() const;
  }];
}

def Moe_AbiAttr : Moe_Attr<"Abi", "abi"> {
  let summary = "the C ABI of a lowered router: its parameters in order";
  let description = [{
    Attached by the router lowering to the function it makes (discardable attribute
    `moe.abi`) and kept on the GPU kernels mapped from it. The first parameter is the
    token count T (kind `tokens`, type `index`), then the inputs, the outputs and the
    run-time knobs in that order. Example:

    ```mlir
    moe.abi = #moe.abi<[#moe.param<name = "num_tokens", role = in, kind = tokens,
                                   type = index>,
                        #moe.param<name = "logits", role = in, kind = tensor,
                                   type = memref<?x8xf32>, size = array<i64: 1, 0, 1>>]>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"AbiParamAttr", "the parameters">:$params);
  let assemblyFormat = "`<` `[` qualified($params) `]` `>`";
  let genVerifyDecl = 1;
}

def Moe_KernelLaunchAttr : Moe_Attr<"KernelLaunch", "launch"> {
  let summary = "the launch contract of one GPU kernel of a router";
  let description = [{
    Attached by moe-map-to-gpu to every kernel it makes (discardable attribute
    `moe.launch`), and the one place the launch metadata (NAME.json, the generated
    launcher's kernel table, `moe-compile --report`, the GPU kit) is read from:

    * `size_class`: `decode`, one CTA holds the whole batch, for T in
      [`min_tokens`, `max_tokens`] (`max_tokens` = 0: any T, when the router has no
      large-batch kernels); `grid`, the only kernel of a router of token loops only,
      any T, its grid chosen at launch to fill the GPU; `large`, one kernel of the
      large-batch pair (launched in name order), T >= `min_tokens`, ceil(T /
      `tokens_per_cta`) CTAs; `cooperative`, the pair as ONE kernel (the two halves
      separated by a `moe.grid_barrier`) for the same T and CTAs, launched
      cooperatively when the GPU holds all its CTAs at once (the pair otherwise);
    * `workspace_per_token`, `workspace_fixed`: the workspace the kernel needs for T
      tokens is `workspace_per_token * T + workspace_fixed` bytes.

    ```mlir
    moe.launch = #moe.launch<size_class = large, min_tokens = 9, max_tokens = 0,
                             tokens_per_cta = 8, workspace_per_token = 564,
                             workspace_fixed = 4768>
    ```
  }];
  let parameters = (ins
    "::switchyard::moe::SizeClass":$size_class,
    "int64_t":$min_tokens,
    "int64_t":$max_tokens,
    "int64_t":$tokens_per_cta,
    "int64_t":$workspace_per_token,
    "int64_t":$workspace_fixed
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOEATTRS_TD
