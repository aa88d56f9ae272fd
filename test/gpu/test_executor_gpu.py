#!/usr/bin/python3
"""The MoE executor on the GPU (`moe-exec --device cuda`) against the same executor on
the host, on small random checkpoints of every family: the policy's compiled kernels
give the host's expert ids and weights (within 1e-5), each block and the stack match
within 1e-4 (float32 GEMMs, no TF32), a replay on the GPU is bit-identical, and a
sequence of batches runs. Without a usable GPU it prints `skipped: ...` and exits 77,
which ctest reports as skipped.

    test_executor_gpu.py --build BUILD_DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.dont_write_bytecode = True
import moe_reference as ref  # noqa: E402
from make_checkpoint import make_checkpoint  # noqa: E402

POLICIES = [None, "lynx", "xshare", "xshare_spec"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    exe = os.path.join(os.path.abspath(args.build), "bin", "moe-exec")
    work = tempfile.mkdtemp(prefix="switchyard-gpu-exec-")
    env = dict(os.environ, SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
    failures, passed = [], 0

    def run(model, x, out, *flags):
        np.save(os.path.join(work, "x.npy"), x)
        return subprocess.run([exe, model, "--input", os.path.join(work, "x.npy"), "--out", out,
                               *flags], capture_output=True, text=True, env=env)

    def check(ok, what):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failures.append(what)
            print("FAIL", what)

    try:
        for arch in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3"):
            model = os.path.join(work, arch)
            config = make_checkpoint(arch, model, seed=2, dtype="bfloat16")
            rng = np.random.default_rng(4)
            for tokens in (1, 13, 300):
                x = rng.standard_normal((tokens, config["hidden_size"])).astype(np.float32)
                for policy in POLICIES:
                    flags = ["--block-only"]
                    if policy:
                        flags += ["--policy", os.path.join(ROOT, "policies", policy + ".mlir")]
                    host = run(model, x, os.path.join(work, "host"), *flags)
                    gpu = run(model, x, os.path.join(work, "gpu"), "--device", "cuda", *flags)
                    if any(reason in gpu.stderr for reason in (
                            "no usable GPU", "no CUDA support", "cannot load the CUDA layer")):
                        print(f"skipped: {gpu.stderr.strip()}")
                        return 77
                    what = f"{arch} T={tokens} {policy or 'native'}"
                    check(host.returncode == 0 and gpu.returncode == 0,
                          f"{what}: {host.stderr.strip()} {gpu.stderr.strip()}")
                    if host.returncode or gpu.returncode:
                        continue
                    for layer in ref.moe_layers(config):
                        def load(d, f, layer=layer):
                            return np.load(os.path.join(work, d, f"{f}_{layer}.npy"))

                        check(np.array_equal(load("host", "topk_ids"), load("gpu", "topk_ids")),
                              f"{what} layer {layer}: GPU expert ids differ from the host's")
                        dw = np.abs(load("host", "topk_weights") - load("gpu", "topk_weights"))
                        check(dw.max(initial=0) <= 1e-5,
                              f"{what} layer {layer}: weights {dw.max():.2e}")
                        db = np.abs(load("host", "block") - load("gpu", "block"))
                        check(db.max(initial=0) <= 1e-4,
                              f"{what} layer {layer}: block {db.max():.2e}")
            # The stack, and a replay of it on the GPU.
            x = rng.standard_normal((9, config["hidden_size"])).astype(np.float32)
            first = run(model, x, os.path.join(work, "g1"), "--device", "cuda")
            again = run(model, x, os.path.join(work, "g2"), "--device", "cuda", "--replay",
                        os.path.join(work, "g1"))
            host = run(model, x, os.path.join(work, "h1"))
            check(first.returncode == 0 and again.returncode == 0 and host.returncode == 0,
                  f"{arch} stack/replay: {first.stderr} {again.stderr} {host.stderr}")
            if not (first.returncode or again.returncode or host.returncode):
                a = np.load(os.path.join(work, "g1", "hidden.npy"))
                b = np.load(os.path.join(work, "g2", "hidden.npy"))
                h = np.load(os.path.join(work, "h1", "hidden.npy"))
                check(a.tobytes() == b.tobytes(), f"{arch}: GPU replay is not bit-identical")
                check(np.abs(a - h).max() <= 1e-4, f"{arch}: GPU stack differs from the host's")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} checks passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
