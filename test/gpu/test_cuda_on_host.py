#!/usr/bin/python3
"""Checks the generated CUDA C++ (NAME.cu) on the CPU: every shipped policy's kernel
source is compiled as plain C++ (-DSWITCHYARD_CUDA_ON_HOST: 64 CPU threads = 2 warps
run the block, with real block and warp barriers, shuffles through per-warp slots, and
atomics) and called with the PTX entry's parameters (expanded memref descriptors +
workspace); all outputs must equal the host target's (the sequential host form), ids
and counts exactly, weights within 1e-5. This covers the GPU mapping (one warp per
token with butterfly reductions and lane-0 broadcasts, strided loops, thread-0 phases,
workspace layout) and the emitter without a GPU. Batches beyond the one-CTA size class
run the large-batch pair (kernel 1 then kernel 2, each over ceil(T / tokens_per_cta)
CTAs, the CTAs one after another): per-CTA token ranges, batch partials, per-CTA set
selection, the ticket and the last CTA's tail. Policies of token loops only (libra's
predictor, the route-only builds of topk_softmax and deepseek_v3) have one kernel for
every size, its grid chosen at launch: here min(ceil(T / warps), 3 emulated SMs), so
that the blocks take several tokens per warp. The policies are compiled with small
size classes (one CTA up to 64 tokens, 48 tokens per CTA beyond) so that the CPU
emulation stays quick: T = 130 and 300 run on 3 and 7 CTAs; XShare-spec's requests of
5 tokens straddle CTA boundaries, and the workspace starts as garbage. The standard
routers compiled with --input-dtype logits=bf16 (and topk_softmax with f16) take the
logits as 16-bit values the kernel widens as it loads them (syBf16ToFloat /
syHalfToFloat): their outputs must equal the float32 host router's on the widened values.

    test_cuda_on_host.py --build BUILD_DIR
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
from gpu_cases import (CaseTally, abi_buffers, differing_outputs, entry_info,  # noqa: E402
                       example_inputs)
from policy_shapes import (GPU_ROUTERS as POLICIES, import_switchyard, native_shape,  # noqa: E402
                           shape_flags)


EMULATED_SMS = 3  # the grid size class's SM count in the emulation


def descriptor(arr):
    """The expanded memref descriptor of a C-order array: ptr, ptr, 0, sizes, strides."""
    ptr = ctypes.c_void_p(arr.ctypes.data)
    sizes = list(arr.shape) or [1]
    strides = [s // arr.itemsize for s in arr.strides] or [1]
    return [ptr, ptr, ctypes.c_int64(0)] + [ctypes.c_int64(s) for s in sizes] + \
           [ctypes.c_int64(s) for s in strides]


def size_class_for(meta, tokens):
    """The size class NAME_launch picks for a batch of `tokens` tokens."""
    for size_class in meta["size_classes"]:
        if tokens >= size_class.get("min_tokens", 0) and \
                tokens <= (size_class.get("max_tokens") or tokens):
            return size_class
    raise SystemExit(f"no size class of {meta['router']} takes T={tokens}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)

    workdir = tempfile.mkdtemp(prefix="switchyard-cuda-host-")
    rng = np.random.default_rng(1)
    tally = CaseTally()
    # Every GPU router, and the route-only builds of the two standard routers (token
    # loops only: the grid size class, one launch at every size).
    cases = [(file, name, None, None) for file, name in POLICIES]
    cases += [(file, file, ("topk_ids", "topk_weights"), None)
              for file in ("topk_softmax", "deepseek_v3")]
    # Logits read in place as bfloat16 / float16 (--input-dtype).
    cases += [(file, file, None, "bf16") for file in ("topk_softmax", "deepseek_v3", "xshare", "lynx")]
    cases += [("topk_softmax", "topk_softmax", None, "f16")]
    for file, name, selected, narrow in cases:
        out = os.path.join(workdir, name + ("-route" if selected else "") +
                           (f"-{narrow}" if narrow else ""))
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        subprocess.run([os.path.join(args.build, "bin", "moe-compile"), policy, "--target=all",
                        "--entry", name, "--cta-tokens=64", "--tokens-per-cta=48", "-o", out]
                       + (["--outputs", ",".join(selected)] if selected else [])
                       + ([f"--input-dtype=logits={narrow}"] if narrow else [])
                       + shape_flags(**native_shape(file)), check=True, capture_output=True)
        lib_path = os.path.join(out, f"lib{name}_cu.so")
        subprocess.run(["g++-12", "-x", "c++", "-std=c++20", "-O1", "-pthread",
                        "-DSWITCHYARD_CUDA_ON_HOST", "-shared", "-fPIC",
                        os.path.join(out, f"{name}.cu"), "-o", lib_path], check=True)
        lib = ctypes.CDLL(lib_path)
        meta = json.load(open(os.path.join(out, f"{name}.json")))
        kernels = {k["name"]: k for k in meta["kernels"]}
        router = switchyard.compile(policy, entry=name, outputs=selected, **native_shape(file))
        info = entry_info(switchyard, policy, name, **native_shape(file))
        for tokens in (1, 7, 64, 130, 300) if not narrow else (7, 130):
            inputs = example_inputs(info, tokens, rng)
            if "request_ids" in inputs:  # requests of 5 tokens straddle the CTAs
                inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
            bits = None
            if narrow:  # the 16-bit logits, and the float32 values they stand for
                if narrow == "bf16":
                    u = inputs["logits"].view(np.uint32).astype(np.uint64)
                    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
                    inputs["logits"] = (bits.astype(np.uint32) << 16).view(np.float32)
                else:
                    half = inputs["logits"].astype(np.float16)
                    bits = half.view(np.uint16)
                    inputs["logits"] = half.astype(np.float32)
            expected = router(**inputs)
            _, keep, outputs = abi_buffers(router, inputs)
            if narrow:  # logits is the first buffer of every standard router
                assert info["arguments"][0]["name"] == "logits"
                keep[0] = np.ascontiguousarray(bits)
            call = [ctypes.c_int64(tokens)]
            k = 0
            for port in info["arguments"]:
                if port["kind"] == "scalar":
                    call.append(ctypes.c_int32(int(inputs[port["name"]])))
                    continue
                for _ in range(2 if port["kind"] == "placement" else 1):
                    call += descriptor(keep[k])
                    k += 1
            for arr in outputs.values():
                call += descriptor(arr)
            # Kernel parameters after the outputs: the knobs' defaults.
            for knob in router.knobs.values():
                ctype = ctypes.c_float if knob["dtype"] == "float32" else ctypes.c_int64
                call.append(ctype(knob["default"]))
            size_class = size_class_for(meta, tokens)
            launches = [kernels[k] for k in size_class["launches"]]
            workspace = np.zeros(max(k["workspace_bytes"]["per_token"] * tokens +
                                     k["workspace_bytes"]["fixed"] for k in launches),
                                 dtype=np.int8)
            # Garbage, not zeros: code that reads what it has not written (or what another
            # CTA has not written yet) shows.
            workspace.fill(0x7f)
            call += descriptor(workspace)
            per_cta = launches[0].get("tokens_per_cta")
            if size_class["name"] == "grid":
                # The launcher's min(ceil(T / warps), SMs x blocks per SM) on a GPU
                # of EMULATED_SMS one-block SMs: several tokens per warp from T = 7.
                grid = min(-(-tokens // launches[0]["warps_per_block"]), EMULATED_SMS)
            else:
                grid = -(-tokens // per_cta) if per_cta else 1
            lib.switchyard_host_grid(ctypes.c_uint(grid))
            for k in launches:
                getattr(lib, k["name"])(*call)
            tally.record(f"{name}{' (ids, weights)' if selected else ''}"
                         f"{' logits=' + narrow if narrow else ''} T={tokens} "
                         f"({size_class['name']}, "
                         f"{len(launches)} launch{'es' if len(launches) > 1 else ''})",
                         differing_outputs(expected, outputs))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
