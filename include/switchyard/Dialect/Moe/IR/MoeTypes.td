//===- MoeTypes.td - moe dialect types ---------------------*- tablegen -*-===//
#ifndef SWITCHYARD_DIALECT_MOE_IR_MOETYPES_TD
#define SWITCHYARD_DIALECT_MOE_IR_MOETYPES_TD

include "switchyard/Dialect/Moe/IR/MoeBase.td"

class Moe_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Moe_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Moe_ExpertSetType : Moe_Type<"ExpertSet", "set"> {
  let summary = "a set of experts (a bitmask over E experts)";
  let description = [{
    A subset of the E routed experts of one MoE layer, e.g. the experts a batch
    activates. At runtime a set is a `bool[E]` array (`selected.npy` is one).

    Example: `!moe.set<128>`. In a policy generic in the number of experts the size is
    `?` (`!moe.set<?>`), bound by `--moe-specialize`.
  }];
  let parameters = (ins "int64_t":$experts);
  let assemblyFormat = "`<` custom<TypeSize>($experts) `>`";
  let genVerifyDecl = 1;
}

def Moe_PlacementType : Moe_Type<"Placement", "placement"> {
  let summary = "where each logical expert lives: its physical replicas on devices";
  let description = [{
    A placement of E logical experts onto `slots` physical expert slots spread evenly
    over `devices` GPUs (slot p lives on device `p / (slots / devices)`). At runtime a
    placement is two int32 arrays, the EPLB/vLLM convention:
    * `replica_count[E]`: how many physical replicas logical expert e has (>= 1);
    * `log2phy[E][R]` with `R = slots - experts + 1` (the most replicas any expert can
      have): the physical slots of expert e's replicas, the first `replica_count[e]`
      entries valid. `log2phy[e][0]` is the expert's primary copy; its device is the
      expert's home GPU for device-aware selection (`moe.fill_per_device`).

    Example: `!moe.placement<experts = 256, devices = 8, slots = 288>` (DeepSeek-V3 on
    8 GPUs with 32 redundant experts). A generic policy writes `?` for what the model
    and deployment bind (`!moe.placement<experts = ?, devices = ?, slots = ?>`).
  }];
  let parameters = (ins "int64_t":$experts, "int64_t":$devices, "int64_t":$slots);
  let assemblyFormat = [{
    `<` `experts` `=` custom<TypeSize>($experts) `,` `devices` `=` custom<TypeSize>($devices)
    `,` `slots` `=` custom<TypeSize>($slots) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The most physical replicas one logical expert can have.
    int64_t getMaxReplicas() const { return getSlots() - getExperts() + 1; }
    /// Physical slots hosted by each device.
    int64_t getSlotsPerDevice() const { return getSlots() / getDevices(); }
  }];
}

#endif // SWITCHYARD_DIALECT_MOE_IR_MOETYPES_TD
