#!/usr/bin/python3
"""Checks the generated CUDA C++ (NAME.cu) on the CPU in the geometry that ships: every
GPU router (policy_shapes.GPU_ROUTERS, at its native shape) is compiled with
`moe-compile --target=all` and the default size classes (no --cta-tokens or
--tokens-per-cta: the launch cost model's thresholds, e.g. one CTA up to 8 tokens and 8
tokens per CTA beyond), and its kernel source is compiled as plain C++
(-DSWITCHYARD_CUDA_ON_HOST) and called with the PTX entry's parameters (expanded memref
descriptors + workspace), each launch given the <<<grid, block>>> NAME_launch.cpp would
use: the block is NAME.json's kernels[].block (checked equal to the block in the
launcher's kernel table, which switchyard/Cuda/Launcher.h launches and asks the
occupancy of; the emulated kernel refuses any block but the one it was built for),
i.e. 256 CPU threads = 8 warps per block, with real block and warp
barriers, shuffles through per-warp slots, and atomics; the grid is ceil(T /
tokens_per_cta) CTAs for the large-batch pair (kernel 1 then kernel 2) and 1 for the
one-CTA class; a grid's CTAs run one after another. All outputs must equal the host
target's (the sequential host form): ids and counts exactly, weights within 1e-5. This
covers the GPU mapping (one warp per token with butterfly reductions and lane-0
broadcasts, strided loops, thread-0 phases, per-CTA token ranges, batch partials, per-CTA
set selection, the ticket and the last CTA's tail, workspace layout) and the emitter
without a GPU.

Batch sizes: T in {1, 8, 9, 17, 64, 130} plus each router's one-CTA bound M, M + 1 and,
with P tokens per CTA, 2P + 1 when above M (M and P read from NAME.json: the cost
model's, per router), so that every size class runs, the largest one-CTA batch (several
tokens per warp where M > 8) and the smallest large batch, and up to 17 CTAs (P = 8: 9
and 17 leave a last CTA of one token, 64 fills 8 CTAs, 130 takes 17 with a last of 2);
XShare-spec's requests of 5 tokens straddle CTA boundaries, and the workspace starts
as garbage. A router without the coverage (every size class, a run of 3 CTAs or more)
fails. Policies of token loops only (libra's predictor, the route-only builds of
topk_softmax and deepseek_v3) have one kernel for every size, its grid chosen at
launch: here min(ceil(T / 8 warps), 3 emulated SMs), so that from T = 25 the blocks
take several tokens per warp. The
standard routers compiled with --input-dtype logits=bf16 (and topk_softmax with f16),
at T in {8, 130} and M, M + 1, take the logits as 16-bit values the kernel widens as it
loads them (syBf16ToFloat / syHalfToFloat): their outputs must equal the float32 host
router's on the widened values. A second pass compiles each router of a one-CTA class
with --cta-tokens=16 --tokens-per-cta=24 (same 256-thread block) and runs T = 60 on 3
CTAs: 3 tokens per warp in the large-batch pair, and a last CTA of 12 tokens whose warps
take 2 or 1. Routers with knobs also replay with knobs written between launches into
the device memory the kernels read (check_knob_replays). The engine builds of the
routers (topk_ids and topk_weights only, --fill-empty-slots) run once per size class:
the engine contract inside the kernels = the host's; for the per-token routers
(topk_softmax, deepseek_v3) a token's ids and weights are also the same bits in a batch
of its own as in the largest batch, in both forms (check_batch_invariance).

    test_cuda_on_host.py --build BUILD_DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_host import (EMULATED_RESIDENT, ROOT, SWITCHYARD_INCLUDE, compile_on_host,  # noqa: E402
                       cxx,
                       launch_block, launch_on_host, launcher_blocks)
from gpu_cases import (CaseTally, alternative_knobs, differing_outputs, entry_info,  # noqa: E402
                       example_inputs)
from policy_shapes import GPU_ROUTERS as POLICIES, import_switchyard, native_shape  # noqa: E402


# Batch sizes every case runs (with the one-CTA class's bound M and M + 1 added): one
# token; with 8 tokens per CTA, 9 and 17 tokens on 2 and 3 CTAs with a 1-token last CTA,
# 64 on 8 full CTAs and 130 on 17 (XShare-spec's 5-token requests straddle CTAs).
TOKENS = (1, 8, 9, 17, 64, 130)
NARROW_TOKENS = (8, 130)  # the 16-bit logits cases: one CTA and many
# The second pass: a geometry the flags give (one CTA up to 16 tokens, 24 per CTA
# beyond), T = 60 on 3 CTAs of 24, 24 and 12 tokens.
GEOMETRY = ("--cta-tokens=16", "--tokens-per-cta=24")
GEOMETRY_TOKENS = 60


def batch_sizes(meta, narrow):
    """The batch sizes a case runs: TOKENS (NARROW_TOKENS for 16-bit logits) and, where
    the router has a one-CTA class, its bound M (the largest one-CTA batch), M + 1 (the
    smallest large batch) and, with P tokens per CTA, 2P + 1 when more than M (3 CTAs,
    the last of one token)."""
    sizes = set(NARROW_TOKENS if narrow else TOKENS)
    bound = max([c["max_tokens"] for c in meta["size_classes"]
                 if c["name"] != "grid" and c.get("max_tokens")], default=None)
    if bound is not None:
        sizes |= {bound, bound + 1}
        per_cta = [k["tokens_per_cta"] for k in meta["kernels"] if k.get("tokens_per_cta")]
        if per_cta and not narrow and 2 * per_cta[0] + 1 > bound:
            sizes.add(2 * per_cta[0] + 1)
    return sorted(sizes)


def fail(tally, message):
    """A failed check that is not an output comparison."""
    tally.failed += 1
    print(f"FAIL {message}")


def bf16_bits(values):
    """Round-to-nearest-even bfloat16 patterns of float32 values."""
    u = values.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def run_case(build, switchyard, workdir, rng, tally, file, name, selected=None,
             narrow=None, geometry=(), tokens_list=None, engine=False):
    """Compiles one router (`geometry`: extra moe-compile flags, none for the shipped
    launch; `engine`: the build an engine runs, --fill-empty-slots) and runs its CUDA
    C++ on the CPU at each batch size (batch_sizes() unless `tokens_list`); returns its
    launch metadata (NAME.json)."""
    label = (f"{name}{' (ids, weights)' if selected else ''}"
             f"{' filled' if engine else ''}"
             f"{' logits=' + narrow if narrow else ''}"
             f"{' ' + ' '.join(geometry) if geometry else ''}")
    out = os.path.join(workdir, name + ("-route" if selected else "") +
                       ("-engine" if engine else "") +
                       (f"-{narrow}" if narrow else "") + ("-geometry" if geometry else ""))
    flags = list(geometry) + (["--outputs", ",".join(selected)] if selected else []) \
        + ([f"--input-dtype=logits={narrow}"] if narrow else []) \
        + (["--fill-empty-slots"] if engine else [])
    lib, meta = compile_on_host(build, out, file, name, flags)
    kernels = {k["name"]: k for k in meta["kernels"]}
    # The block the emulation runs is the launch metadata's, which must be the one
    # the shipped launcher launches with.
    for kernel, blocks in launcher_blocks(os.path.join(out, f"{name}_launch.cpp"), meta).items():
        if blocks != {launch_block(kernels[kernel])}:
            fail(tally, f"{label}: {name}_launch.cpp launches {kernel} with blocks "
                        f"{sorted(blocks)}, {name}.json says {kernels[kernel]['block']}")
    policy = os.path.join(ROOT, "policies", f"{file}.mlir")
    router = switchyard.compile(policy, entry=name, outputs=selected, fill_empty_slots=engine,
                                **native_shape(file))
    info = entry_info(switchyard, policy, name, **native_shape(file))
    ran = set()
    sizes = tokens_list or batch_sizes(meta, narrow)
    if engine:   # each size class once: the smallest, the class bounds, the largest
        sizes = sorted({sizes[0], sizes[-1]} | {t for t in sizes if t in
                       {c.get("max_tokens") for c in meta["size_classes"]} or
                       t - 1 in {c.get("max_tokens") for c in meta["size_classes"]}})
    runs = [(tokens, EMULATED_RESIDENT) for tokens in sizes]
    # A cooperative class whose smallest batch needs more CTAs than the emulated GPU
    # holds (LYNX: M + 1 = 257 tokens on 33 CTAs) also runs on a GPU that holds them.
    coop = [c for c in meta["size_classes"] if c["name"] == "cooperative"]
    if coop and not geometry and not narrow:
        first = coop[0]["min_tokens"]
        per_cta = kernels[coop[0]["launches"][0]]["tokens_per_cta"]
        if -(-first // per_cta) > EMULATED_RESIDENT:
            runs.append((first, -(-first // per_cta)))
    largest = None   # (tokens, inputs, outputs) of the largest batch run
    for tokens, resident in runs:
        started = time.time()
        inputs = example_inputs(info, tokens, rng)
        if "request_ids" in inputs:  # requests of 5 tokens straddle the CTAs
            inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
        bits = None
        if narrow:  # the 16-bit logits, and the float32 values they stand for
            if narrow == "bf16":
                bits = bf16_bits(inputs["logits"])
                inputs["logits"] = (bits.astype(np.uint32) << 16).view(np.float32)
            else:
                half = inputs["logits"].astype(np.float16)
                bits = half.view(np.uint16)
                inputs["logits"] = half.astype(np.float32)
        expected = router(**inputs)
        outputs, size_class, grid, counters = launch_on_host(lib, meta, router, info, inputs,
                                                             tokens, bits, resident=resident)
        if not narrow and (largest is None or tokens > largest[0]):
            largest = (tokens, inputs, outputs)
        launches = size_class["launches"]
        ran.add((size_class["name"], grid))
        tally.record(f"{label} T={tokens} ({size_class['name']}, {len(launches)} "
                     f"launch{'es' if len(launches) > 1 else ''} of {grid} x "
                     f"{launch_block(kernels[launches[0]])} threads, "
                     f"{time.time() - started:.1f} s)",
                     differing_outputs(expected, outputs))
    if engine and name in PER_TOKEN_ROUTERS and largest is not None:
        check_batch_invariance(lib, meta, router, info, tally, label, largest, sizes)
    if router.knobs and not geometry and not narrow and not engine:
        check_knob_replays(lib, meta, router, info, rng, tally, label,
                           [tokens for tokens, _ in runs])
    if not geometry and not narrow and not engine:  # every size class, many CTAs
        missing = {c["name"] for c in meta["size_classes"]} - {c for c, _ in ran}
        if missing or max(g for _, g in ran) < 3:
            fail(tally, f"{label}: " + (f"size classes {sorted(missing)} not run" if missing
                                        else "no run of 3 CTAs or more"))
    return meta


# The routers whose routing of a token depends on that token alone (docs/vllm.md,
# "Reproducibility"): its ids and weights must be the same bits in any batch.
PER_TOKEN_ROUTERS = ("topk_softmax", "deepseek_v3")


def check_batch_invariance(lib, meta, router, info, tally, label, largest, sizes):
    """A per-token router, host and GPU forms: the first t tokens of the largest batch,
    routed as a batch of their own (t = 1, 9, 64 and each smaller size run), get bit-identical ids
    and weights to those they got in the large batch (other size classes, grids and
    CTA splits included)."""
    big_tokens, big_inputs, big_outputs = largest
    host_big = router(**big_inputs)
    for tokens in sorted({t for t in set(sizes) | {1, 9, 64} if t < big_tokens}):
        subset = {name: value[:tokens] if name == "logits" else value
                  for name, value in big_inputs.items()}
        gpu, *_ = launch_on_host(lib, meta, router, info, subset, tokens)
        host = router(**subset)
        differing = [f"{form} {output}" for form, small, big in (("GPU", gpu, big_outputs),
                                                                 ("host", host, host_big))
                     for output in ("topk_ids", "topk_weights")
                     if np.asarray(small[output]).tobytes()
                     != np.asarray(big[output])[:tokens].tobytes()]
        tally.record(f"{label}: the first {tokens} of {big_tokens} tokens routed alone get "
                     f"the same bits (GPU and host forms)", differing)


def check_knob_replays(lib, meta, router, info, rng, tally, label, sizes):
    """A captured CUDA graph replays its kernels with the parameters of the capture, so
    the knobs live in device memory the kernels read (KnobBlock.h): launched twice with
    byte-identical parameters (the same knob struct buffer), the knobs written into that
    buffer between the launches must be the ones each launch routes with. At the
    smallest and largest batch of the case (one CTA and the large-batch kernels): a
    setting that changes the outputs, then the defaults written back = the host's."""
    for tokens in (min(sizes), max(sizes)):
        inputs = example_inputs(info, tokens, rng)
        if "request_ids" in inputs:
            inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
        defaults = router(**inputs)
        other, expected_other = alternative_knobs(router, inputs, defaults)
        struct = np.frombuffer(router.native.knob_struct(
            router.settings(other)), np.uint8).copy()
        outputs, size_class, *_ = launch_on_host(lib, meta, router, info, inputs, tokens,
                                                 knobs=struct)
        tally.record(f"{label} T={tokens} ({size_class['name']}): knobs {other} read from "
                     "device memory", differing_outputs(expected_other, outputs))
        struct[:] = np.frombuffer(router.native.knob_struct(router.default_settings),
                                  np.uint8)
        outputs, *_ = launch_on_host(lib, meta, router, info, inputs, tokens, knobs=struct)
        tally.record(f"{label} T={tokens}: the defaults written into the same buffer "
                     "before a replay", differing_outputs(defaults, outputs))


# A block whose thread 0 alone waits at a barrier: the emulation must stop with a
# message, not hang or carry on.
DIVERGENT_BARRIER = r"""
#include "switchyard/Cuda/KernelPrelude.h"
static void body() {
  if (threadIdx.x == 0)
    __syncthreads();
}
SY_EXPORT void divergent() { syRunGrid("divergent", 0, false, [] { body(); }); }
"""


def check_divergent_barrier(build, workdir, tally):
    """A barrier only some threads reach stops the run with CudaOnHost.h's message."""
    source = os.path.join(workdir, "divergent.cu")
    with open(source, "w") as f:
        f.write(DIVERGENT_BARRIER)
    lib = os.path.join(workdir, "libdivergent.so")
    subprocess.run([cxx(build), "-x", "c++", "-std=c++20", "-DSWITCHYARD_CUDA_ON_HOST",
                    f"-I{SWITCHYARD_INCLUDE}", "-shared", "-fPIC", source, "-o", lib],
                   check=True)
    run = subprocess.run([sys.executable, "-c",
                          "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); "
                          "lib.switchyard_host_launch(1, 64); lib.divergent()", lib],
                         capture_output=True, text=True, timeout=60)
    if run.returncode != 0 and "deadlocked" in run.stderr:
        tally.record("a barrier in divergent code stops the run", [])
    else:
        fail(tally, f"a barrier in divergent code: exit {run.returncode}, stderr "
                    f"{run.stderr[-300:]!r}")


def check_missing_barrier(build, switchyard, workdir, tally):
    """topk_softmax's kernel with its second barrier removed must differ from the host:
    the emulation runs every other launch's threads last to first, so a read of what
    another thread writes with no barrier between sees the stale value."""
    def edit(text):
        first, second, rest = text.split("__syncthreads();", 2)
        return first + "__syncthreads();" + second + "/* removed */" + rest
    out = os.path.join(workdir, "topk_softmax-missing-barrier")
    lib, meta = compile_on_host(build, out, "topk_softmax", "topk_softmax", edit=edit)
    policy = os.path.join(ROOT, "policies", "topk_softmax.mlir")
    router = switchyard.compile(policy, entry="topk_softmax", **native_shape("topk_softmax"))
    info = entry_info(switchyard, policy, "topk_softmax", **native_shape("topk_softmax"))
    caught = []
    for tokens in (1, 8):
        inputs = example_inputs(info, tokens, np.random.default_rng(tokens))
        outputs, *_ = launch_on_host(lib, meta, router, info, inputs, tokens)
        caught += differing_outputs(router(**inputs), outputs)
    if caught:
        tally.record("a kernel with a barrier removed differs from the host", [])
    else:
        fail(tally, "topk_softmax with its second barrier removed still equals the host")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)

    workdir = tempfile.mkdtemp(prefix="switchyard-cuda-host-")
    rng = np.random.default_rng(1)
    tally = CaseTally()
    common = (args.build, switchyard, workdir, rng, tally)
    check_divergent_barrier(args.build, workdir, tally)
    check_missing_barrier(args.build, switchyard, workdir, tally)
    # The shipped geometry: every GPU router, and the route-only builds of the two
    # standard routers (token loops only: the grid size class, one launch at every size).
    metas = {}
    for file, name in POLICIES:
        metas[name] = run_case(*common, file, name)
    for file in ("topk_softmax", "deepseek_v3"):
        run_case(*common, file, file, selected=("topk_ids", "topk_weights"))
    # The builds engines run: only the routing results, every slot an expert
    # (--fill-empty-slots: moe.fill_empty_slots in the kernels), at every size class.
    for file, name in POLICIES:
        if name != "libra_predict":
            run_case(*common, file, name, selected=("topk_ids", "topk_weights"), engine=True)
    # Logits read in place as bfloat16 / float16 (--input-dtype).
    for file in ("topk_softmax", "deepseek_v3", "xshare", "lynx"):
        run_case(*common, file, file, narrow="bf16")
    run_case(*common, "topk_softmax", "topk_softmax", narrow="f16")
    # Second pass, the routers of a one-CTA class in a geometry the flags give: several
    # tokens per warp in the large-batch pair (3 on 8 warps), and a last CTA whose warps
    # take 2 or 1.
    for file, name in POLICIES:
        if any(c["name"] != "grid" for c in metas[name]["size_classes"]):
            run_case(*common, file, name, geometry=GEOMETRY, tokens_list=[GEOMETRY_TOKENS])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
