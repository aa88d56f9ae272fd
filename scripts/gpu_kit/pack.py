#!/usr/bin/env python3
"""Packs the GPU kit (here, where LLVM/MLIR and the built package are): every shipped
GPU router compiled for sm_90 (PTX, cubin, launcher sources, launch metadata, CUDA C++)
at its native shape, a test shape and two tokens-per-CTA variants used to fit the
launch cost model; in KIT/launcher the fixed launcher every generated one links
(runtime/lib/Cuda/Launcher.cpp, and runtime/include/switchyard/Cuda, the headers
NAME_launch.cpp and NAME.cu include); for every case (router, T) the recipe of its
inputs (a seed; the run regenerates them and checks their SHA-256) and the host
target's outputs; for the
routers with knobs a second setting and its outputs (for the CUDA-graph step). The
kit needs on the GPU machine only what its image has: Python with NumPy (and PyTorch
for the baselines), a C++ compiler and the CUDA toolkit.

    pack.py KIT_DIR [--build BUILD] [--max-mib 60] [--no-exec]
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
from gpu_cases import (abi_arrays, alternative_knobs, entry_info, example_inputs,  # noqa: E402
                       result_shape)
from policy_shapes import GPU_ROUTERS, import_switchyard, native_shape, shape_flags  # noqa: E402
from kit_common import (BASELINE_TOKENS, BASELINE_VARIANT, CASE_TOKENS, GRAPH_TOKENS,  # noqa: E402
                        input_digest)
from pack_exec import pack_exec  # noqa: E402

# Extra builds beside the native ones: (variant, policy file, entry, shape, extra
# moe-compile flags). The test shape is the small-expert one the executor tests use;
# the tokens-per-CTA variants measure how a large batch's time depends on P.
EXTRA_VARIANTS = [
    ("topk_softmax_e8k2", "topk_softmax", "topk_softmax", {"experts": 8, "top_k": 2}, []),
    ("topk_softmax_p32", "topk_softmax", "topk_softmax", None, ["--tokens-per-cta", "32"]),
    ("topk_softmax_p128", "topk_softmax", "topk_softmax", None, ["--tokens-per-cta", "128"]),
    ("deepseek_v3_p32", "deepseek_v3", "deepseek_v3", None, ["--tokens-per-cta", "32"]),
    ("deepseek_v3_p128", "deepseek_v3", "deepseek_v3", None, ["--tokens-per-cta", "128"]),
]
KEEP_SUFFIXES = ("_launch.cpp", "_launch.h", ".ptx", ".json", ".cu")
# The fixed part of the launchers, built once on the GPU machine (build_kit.py).
LAUNCHER_SOURCE = os.path.join("runtime", "lib", "Cuda", "Launcher.cpp")
LAUNCHER_HEADERS = os.path.join("runtime", "include", "switchyard", "Cuda")
BASELINES_SOURCE = os.path.join("bench", "gpu_baselines", "topk_softmax_baselines.cu")


def pack_launcher(kit):
    """KIT/launcher: Launcher.cpp and include/switchyard/Cuda/*.h; returns the kit's
    record of it (kit.json "launcher")."""
    out = os.path.join(kit, "launcher")
    headers = os.path.join(out, "include", "switchyard", "Cuda")
    os.makedirs(headers)
    shutil.copy2(os.path.join(ROOT, LAUNCHER_SOURCE), os.path.join(out, "Launcher.cpp"))
    for name in sorted(os.listdir(os.path.join(ROOT, LAUNCHER_HEADERS))):
        shutil.copy2(os.path.join(ROOT, LAUNCHER_HEADERS, name), os.path.join(headers, name))
    # The hand-written baselines step_baselines.py builds with nvcc there.
    os.makedirs(os.path.join(kit, "baselines"))
    shutil.copy2(os.path.join(ROOT, BASELINES_SOURCE), os.path.join(kit, "baselines"))
    return {"source": "launcher/Launcher.cpp", "include": "launcher/include",
            "baselines": "baselines/" + os.path.basename(BASELINES_SOURCE)}


def seed_of(entry, shape_key, tokens):
    """The seed of a case's inputs: the same router, shape and T give the same inputs
    in every variant (so their outputs are comparable)."""
    return [zlib.crc32(f"{entry}:{shape_key}".encode()), tokens]


def pack_variant(sy, kit, variant, file, entry, shape, flags, build):
    policy = os.path.join(ROOT, "policies", f"{file}.mlir")
    shape = shape or native_shape(file)
    out = os.path.join(kit, "routers", variant)
    os.makedirs(out, exist_ok=True)
    # (PTX only: the GPU step loads the PTX, and the host outputs come from `sy`)
    subprocess.run([os.path.join(build, "bin", "moe-compile"), policy, "--target=cuda",
                    "--cubin=false", "--entry", entry, "-o", out] + shape_flags(**shape)
                   + flags, check=True, capture_output=True)
    for name in os.listdir(out):   # the manifest stays here
        if not name.endswith(KEEP_SUFFIXES) or name == "manifest.json":
            os.remove(os.path.join(out, name))
    router = sy.compile(policy, entry=entry, **shape)
    info = entry_info(sy, policy, entry, **shape)
    params = json.loads(router.signature.to_json())["params"]   # the manifest's form
    shape_key = json.dumps({k: os.path.basename(str(v)) for k, v in sorted(shape.items())})
    cases = []
    tokens_list = set(CASE_TOKENS) | (set(BASELINE_TOKENS) if variant == BASELINE_VARIANT
                                      else set())
    for tokens in sorted(tokens_list):
        seed = seed_of(entry, shape_key, tokens)
        inputs = example_inputs(info, tokens, np.random.default_rng(seed))
        _, arrays, outputs = abi_arrays(params, result_shape, inputs)
        digest = input_digest(tokens, arrays)
        expected = os.path.join("expected", f"{digest[:20]}.npz")
        host = None
        if not os.path.exists(os.path.join(kit, expected)):
            host = router(**inputs)
            np.savez_compressed(os.path.join(kit, expected),
                                **{k: np.asarray(host[k]) for k in outputs})
        case = {"tokens": tokens, "seed": seed, "inputs_sha256": digest,
                "expected": expected, "scalars": {p["name"]: int(inputs[p["name"]])
                                                  for p in info["arguments"]
                                                  if p["kind"] == "scalar"}}
        if router.knobs and tokens in GRAPH_TOKENS:
            host = host or router(**inputs)
            knobs, alt = alternative_knobs(router, inputs, host)
            alt_file = os.path.join("expected", f"{digest[:20]}_knobs.npz")
            np.savez_compressed(os.path.join(kit, alt_file),
                                **{k: np.asarray(alt[k]) for k in outputs})
            case["knobs"] = {"values": knobs, "expected": alt_file,
                             "struct_hex": router.native.knob_struct(
                                 router.settings(knobs)).hex(),
                             "default_struct_hex": router.native.knob_struct(
                                 router.default_settings).hex()}
        cases.append(case)
    ids = next((p for p in params if p["name"] == "topk_ids" and p["role"] == "out"), None)
    grouped = None
    if entry == "deepseek_v3":   # transformers' router is the PyTorch baseline
        with open(shape["model"]) as f:
            cfg = json.load(f)
        grouped = {"n_group": cfg["n_group"], "topk_group": cfg["topk_group"],
                   "scaling": cfg["routed_scaling_factor"]}
    return {"variant": variant, "policy": file, "entry": entry, "flags": flags,
            "top_k": int(ids["shape"][1]) if ids else None, "grouped": grouped,
            "shape": {k: os.path.basename(str(v)) for k, v in shape.items()},
            "dir": os.path.join("routers", variant), "params": params,
            "arguments": info["arguments"], "experts": info["experts"],
            "knobs": list(router.knobs),
            "cases": cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kit")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--max-mib", type=float, default=60)
    ap.add_argument("--no-exec", action="store_true",
                    help="leave out the executor bundle (routers only)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    sy = import_switchyard(args.build)
    kit = os.path.abspath(args.kit)
    shutil.rmtree(kit, ignore_errors=True)
    os.makedirs(os.path.join(kit, "expected"))
    launcher = pack_launcher(kit)
    routers = []
    for file, entry in GPU_ROUTERS:
        routers.append(pack_variant(sy, kit, entry, file, entry, None, [], args.build))
        print(f"packed {entry}", flush=True)
    for variant, file, entry, shape, flags in EXTRA_VARIANTS:
        routers.append(pack_variant(sy, kit, variant, file, entry, shape, flags, args.build))
        print(f"packed {variant}", flush=True)
    if not args.no_exec:
        print(f"packed {os.path.basename(pack_exec(kit, args.build))} (executor, expert "
              "memory, their libraries, precompiled policies)", flush=True)
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip()
    manifest = {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "commit": git, "numpy": np.__version__, "launcher": launcher,
                "routers": routers}
    with open(os.path.join(kit, "kit.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(kit) for n in ns)
    print(f"kit {kit}: {len(routers)} router builds, "
          f"{sum(len(r['cases']) for r in routers)} cases, {size / 2**20:.1f} MiB")
    if size > args.max_mib * 2**20:
        print(f"error: the kit is {size / 2**20:.1f} MiB, over {args.max_mib} MiB",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
