//===- Passes.td - conversions out of the moe dialect ------*- tablegen -*-===//
//
// The conversions every target's pipeline is built from: moe ops -> target-neutral
// loops (moe-lower-to-loops), loops -> GPU kernels (moe-map-to-gpu), and the flat C
// entry point on the LLVM dialect (moe-emit-c-entry).
//
//===----------------------------------------------------------------------===//
#ifndef SWITCHYARD_CONVERSION_PASSES_TD
#define SWITCHYARD_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeLowerToLoops : Pass<"moe-lower-to-loops", "mlir::ModuleOp"> {
  let summary = "lowers every router to a function of loops on buffers";
  let description = [{
    Replaces each `moe.router @name` with `func.func @name(%T: index, inputs...,
    outputs...)` on memrefs (destination-passing: the caller owns every buffer). The
    body is target-neutral loop IR (scf/arith/math/memref): a token stage is one
    `scf.parallel` over the tokens running all of its ops on one token's row, batch
    and set ops are loop nests, a phase gate is an `scf.if`. Knobs become constants
    (run `moe-set-knobs` first to choose their values). Run `moe-form-stages` first to
    fuse; without stages every per-token op gets its own token loop. In the host form
    a run of token and route stages whose earlier stages hold row ops only (softmax,
    then routing) shares ONE token loop: a row op reads only its token's rows.

    The function's `moe.abi` attribute lists its parameters for the C entry point.

    With `lane-parallel`, the per-token code is written in the GPU form that
    `moe-map-to-gpu` maps one warp per token onto: loops over a token's experts become
    nested `scf.parallel` loops, row maxima and sums `scf.reduce` reductions, and a
    top-k is k rounds of a parallel arg-max (score and id packed into one ordered i64
    key, so the reduction is a plain unsigned max with the same ties as the host form:
    higher score first, then the lower id, NaN below every number). The host pipeline
    runs this form too (sequentially), which is how the tests check it.
  }];
  let options = [
    Option<"keepRouters", "keep-routers", "bool", /*default=*/"false",
           "keep the moe.router ops next to the generated functions">,
    Option<"laneParallel", "lane-parallel", "bool", /*default=*/"false",
           "write per-token expert loops as nested parallel loops and reductions">
  ];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::memref::MemRefDialect"];
}

def MoeNarrowInputs : Pass<"moe-narrow-inputs", "mlir::ModuleOp"> {
  let summary = "reads chosen float inputs of the lowered routers as bf16 / f16 in place";
  let description = [{
    Runs after `moe-lower-to-loops`. For each `NAME=DTYPE` in `inputs` (DTYPE: bf16,
    f16 or f32), the input memref `NAME` of every lowered router that has it (a
    float32 tensor input in `moe.abi`) takes the element type DTYPE: the function's
    argument and its `moe.abi` type change, and every `memref.load` of it (directly or
    through a subview / cast) loads DTYPE and widens the value with `arith.extf` at the
    load. The policy keeps computing in f32; the caller's bf16 / f16 memory is read in
    place, with no f32 copy. An input used otherwise (copied whole into an output,
    passed to a call) is an error, as is a name no router takes or a non-float input.
  }];
  let options = [
    ListOption<"inputs", "inputs", "std::string",
               "NAME=bf16|f16|f32: the element type an input of the entry takes">
  ];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::memref::MemRefDialect"];
}

def MoeEmitCEntry : Pass<"moe-emit-c-entry", "mlir::ModuleOp"> {
  let summary = "adds the flat C entry point of every lowered router";
  let description = [{
    Runs on the LLVM dialect. For every function lowered from a router (it carries
    `moe.abi`), renames the function to `<name>__impl` (private) and adds the exported
    `int32_t <name>(int64_t num_tokens, <one pointer per buffer, in signature order;
    two for a placement: replica_count then log2phy; scalars by value>)` that builds
    the memref descriptors (sizes from the token count) and calls it. It returns 0.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def MoeMapToGPU : Pass<"moe-map-to-gpu", "mlir::ModuleOp"> {
  let summary = "maps each lowered router onto GPU kernels: one launch for decode-size "
                "batches, one cooperative launch (or two) for larger ones";
  let description = [{
    For every function made by `moe-lower-to-loops`, adds `gpu.module @<name>_kernels`
    holding kernels with the function's parameters plus an i8 workspace, except the
    knobs: a kernel takes them as ONE i8 buffer holding the C entry's `NAME_knobs`
    struct in device memory (empty: the defaults) and reads its fields at entry, and
    each scalar input (LYNX's phase) as a one-element buffer, so that a captured CUDA
    graph routes with the values written there before each replay.

    A policy of token loops only (every token's outputs from its own row: softmax
    top-k reduced to ids and weights, DeepSeek-V3's grouped top-k, a predictor) gets
    ONE kernel, `gpu.func @<name>` of size class `grid`, for every batch size: the
    launcher picks G = min(ceil(T / warps per block), SMs x resident blocks per SM)
    blocks and block c takes tokens [c*P, (c+1)*P), P = ceil(T / G), one warp per
    token as below: the whole GPU from T = warps x SMs on, a few tokens per warp
    beyond, one launch.

    Otherwise `gpu.func @<name>` (size class `decode`, up to `cta-tokens` tokens) is the whole
    policy in ONE launch of ONE block. A token loop in the lane-parallel form
    (`moe-lower-to-loops{lane-parallel}`) becomes one warp per token: its loops over the
    experts are lane-strided, its reductions end in butterfly `gpu.shuffle xor`s, its
    remaining sequential row code runs on lane 0 and is broadcast with
    `gpu.shuffle idx`, and `nvvm.bar.warp.sync` follows each step that wrote memory.
    Other parallel loops (over tokens or experts) become block-strided loops, one
    thread per iteration. Set selection — a loop of rounds around expert-sized
    (static-bound) parallel reductions: fill, union, difference, per-device fills —
    runs on warp 0 alone as warp code (lane-strided partials, butterflies, lane 0 marks
    the winners), with no CTA barrier per round, and its results reach the block
    through shared memory; any other parallel reduction outside token loops becomes a
    block reduction: thread-strided partials, warp butterflies, per-warp partials in a
    96 x i64 workgroup buffer that every thread combines in warp order; loops around
    them run on every thread. Remaining
    sequential code runs on thread 0 and broadcasts the values later code uses
    through the same buffer; a loop over token tiles (`moe.token_tiles`: expert counts
    and block alignment) runs one warp per tile; barriers separate the phases, and a
    barrier of the kernel body or of a phase gate's branch is then erased when no
    access since the last kept barrier conflicts with one before the next, or becomes
    a warp barrier when every conflicting pair is warp 0's (the same buffer, one a
    write; each
    workspace temporary, tagged `moe.workspace_temporary`, is a buffer of its own);
    temporaries live in the workspace. Every kernel carries its launch contract as
    one typed attribute, `moe.launch = #moe.launch<size_class = decode | grid |
    large | cooperative, min_tokens, max_tokens, tokens_per_cta, workspace_per_token,
    workspace_fixed>`, which the launch metadata (NAME.json, the launcher's kernel
    table, `moe-compile --report`) is read from.

    `@<name>_large_k1` and `@<name>_large_k2` (size class `large`, more than
    `cta-tokens` tokens) run the policy in TWO launches of ceil(T / tokens-per-cta)
    blocks, CTA c owning tokens [c*P, (c+1)*P): kernel 1 runs the token stage on its
    tokens and stores each token fold's partial (batch scores, union of top-k) per
    CTA; kernel 2 combines the partials in CTA order and recomputes the set selection
    in every CTA (into CTA-private copies) and routes its tokens. Tokens per CTA are
    whole token tiles: each CTA runs its own tiles of a tile loop (kernel 1 when the
    ids it reads are made there) and stops a tile scan (`moe.tile_scan`) at its own
    tiles, so counts and block alignment of ids made in kernel 1 need no last CTA.
    What is left over the whole batch runs in the last CTA to take the ticket
    (device-scope fences around it). Phase gates that the size class decides
    (`max_tokens` <= `cta-tokens`) are folded away. A policy whose code does not split
    this way gets a warning saying why, and its one-CTA kernel serves every size.

    `@<name>_large_coop` (size class `cooperative`, the same batches and CTAs) is the
    pair as ONE kernel: kernel 1's mapped body, `moe.grid_barrier`, kernel 2's. The
    launcher launches it cooperatively when the GPU holds all its CTAs at once, the
    pair otherwise. Every kernel states its launch bounds (`nvvm.reqntid`, the block;
    `nvvm.minctasm`, 1024 threads of CTAs per SM: 64 registers a thread).

    Unless `cta-tokens` / `tokens-per-cta` are given, each router's come from a
    static launch cost model (lib/Conversion/MoeToGPU/LaunchCostModel.h: warp
    instructions per token counted in its token loops, the whole-batch phases'
    instructions as a function of T, the values kernel 2 combines per CTA, sm_90's
    occupancy limits and waves, constants fitted to GPU measurements): the one-CTA
    kernel serves batches up to the first size where the pair is modeled faster. The kernels carry the model
    (`moe.launch_model`: its inputs, the thresholds and modeled times), which
    `moe-compile --report` prints.

    With `knob-groups` = G > 0 (an engine's per-request knobs under CUDA graphs), each
    router first becomes a loop over G knob groups (KnobGroups.h): the function takes
    one more input, `knob_group` (int32 per token: its group in [0, G); anything else
    is group 0), and its knob buffer holds G `NAME_knobs` structs, struct g for the
    tokens of group g. Group by group, one CTA gathers the group's token rows into the
    workspace, routes them as a batch of their own with the group's knobs (the batch
    reductions and sets over those tokens only) and scatters their results back: ONE
    launch routes a batch whose requests set different knobs, as the host routes each
    group on its own. Every result must be per token (`--outputs
    topk_ids,topk_weights`); the one-CTA kernel then serves every batch size.

    The host function is left in place.

    Example: `moe-opt --moe-lower-to-loops=lane-parallel
    --moe-map-to-gpu="block-size=256 cta-tokens=1024 tokens-per-cta=256"`.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "threads per block (fixed at compile time)">,
    Option<"ctaTokens", "cta-tokens", "int64_t", /*default=*/"0",
           "the most tokens the one-CTA kernel serves (the decode size class); 0: "
           "chosen per router by the launch cost model">,
    Option<"tokensPerCta", "tokens-per-cta", "int64_t", /*default=*/"0",
           "tokens per CTA in the large-batch kernels; 0: chosen per router by the "
           "launch cost model">,
    Option<"largeBatch", "large-batch", "bool", /*default=*/"true",
           "also build the two-kernel form for batches beyond cta-tokens">,
    Option<"knobGroups", "knob-groups", "int64_t", /*default=*/"0",
           "route per-token knob groups (0..G-1, input knob_group) in one launch, each "
           "group a batch of its own with its knob struct (0: no groups)">
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
}

def MoeGridBarrierToNVVM : Pass<"moe-grid-barrier-to-nvvm", "mlir::gpu::GPUModuleOp"> {
  let summary = "lower moe.grid_barrier to NVVM: cooperative groups' grid sync";
  let description = [{
    Each `moe.grid_barrier` of a cooperative kernel becomes the grid sync of CUDA's
    cooperative groups, on the same per-launch barrier word the driver gives a
    cooperative launch (its address in `%envreg1`/`%envreg2`, the word at byte 4):

    - a CTA barrier;
    - thread 0 of each CTA adds 1 to the word (CTA 0 adds 2^31 - (G - 1)) with release
      semantics at GPU scope, then polls it with acquire loads until its top bit
      differs from what the add returned (the last arrival flips it);
    - a CTA barrier.

    Each barrier adds exactly 2^31, so the word is ready for the next barrier and the
    next launch without a reset. Runs before the SCF and GPU lowering to NVVM (it
    writes `scf.if`, `scf.while`, `gpu.barrier` and LLVM atomics).
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::NVVM::NVVMDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect",
                           "mlir::arith::ArithDialect"];
}

#endif // SWITCHYARD_CONVERSION_PASSES_TD
