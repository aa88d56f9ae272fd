#!/usr/bin/python3
"""The GPU kit's hand-written baselines (bench/gpu_baselines/topk_softmax_baselines.cu)
checked on the CPU: compiled as plain C++ (-DSWITCHYARD_CUDA_ON_HOST, CPU threads for
the blocks) and run at several batch sizes against Switchyard's host target of
policies/topk_softmax.mlir at its native shape (Qwen3-30B-A3B: 128 experts, top-8).
`best` must give every output exactly (weights within 1e-5), the block-aligned order
included; `prod3` (atomic cursors, the production kernels' structure) the same except
the order of the slots within an expert's segment, which must hold the same slots.
The GPU kit times both beside the generated kernels; a baseline that is wrong here
would make that comparison meaningless.

    test_gpu_baselines.py --build BUILD_DIR
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_host import ROOT, SWITCHYARD_INCLUDE, cxx  # noqa: E402
from gpu_cases import CaseTally, baseline_differences as differences  # noqa: E402
from policy_shapes import import_switchyard, native_shape  # noqa: E402

SOURCE = os.path.join(ROOT, "bench", "gpu_baselines", "topk_softmax_baselines.cu")
TOKENS = (1, 31, 33, 300)  # one token; within one CTA of 32; two CTAs; ten
EXPERTS, TOP_K, BLOCK = 128, 8, 64


def build(build_dir, workdir):
    lib = os.path.join(workdir, "libbaselines.so")
    subprocess.run([cxx(build_dir), "-x", "c++", "-std=c++20", "-O1", "-pthread",
                    "-DSWITCHYARD_CUDA_ON_HOST", f"-I{SWITCHYARD_INCLUDE}", "-shared", "-fPIC",
                    SOURCE, "-o", lib], check=True)
    return ctypes.CDLL(lib)


def run(lib, name, logits, sizes):
    """The baseline's nine outputs for `logits` ([T, E] float32), the sorted ids and
    block ids the sizes the router's own outputs have (`sizes`)."""
    tokens = logits.shape[0]
    sorted_size = sizes["sorted_token_ids"]
    out = {
        "topk_ids": np.full((tokens, TOP_K), -7, np.int32),
        "topk_weights": np.full((tokens, TOP_K), np.nan, np.float32),
        "selected": np.full(EXPERTS, 7, np.int8),
        "expert_counts": np.full(EXPERTS, -7, np.int32),
        "active_experts": np.full(EXPERTS, -7, np.int32),
        "num_active": np.full(1, -7, np.int32),
        "sorted_token_ids": np.full(sorted_size, -7, np.int32),
        "expert_ids": np.full(sizes["expert_ids"], -7, np.int32),
        "num_tokens_post_padded": np.full(1, -7, np.int32),
    }
    lib.sy_baseline_workspace_bytes.restype = ctypes.c_int64
    workspace = np.full(lib.sy_baseline_workspace_bytes(ctypes.c_int64(tokens)), 0x7f, np.int8)
    p = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    getattr(lib, f"sy_baseline_{name}")(
        ctypes.c_int64(tokens), p(logits), p(out["topk_ids"]), p(out["topk_weights"]),
        p(out["selected"]), p(out["expert_counts"]), p(out["active_experts"]),
        p(out["num_active"]), p(out["sorted_token_ids"]),
        ctypes.c_int64(sorted_size), p(out["expert_ids"]),
        ctypes.c_int64(out["expert_ids"].size), p(out["num_tokens_post_padded"]),
        p(workspace), ctypes.c_void_p(0))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)
    router = switchyard.compile(os.path.join(ROOT, "policies", "topk_softmax.mlir"),
                                **native_shape("topk_softmax"))
    lib = build(args.build, tempfile.mkdtemp(prefix="switchyard-baselines-"))
    rng = np.random.default_rng(3)
    tally = CaseTally()
    for tokens in TOKENS:
        logits = rng.standard_normal((tokens, EXPERTS)).astype(np.float32)
        expected = {k: np.asarray(v) for k, v in router(logits=logits).items()}
        sizes = {k: v.size for k, v in expected.items()}
        for name in ("best", "prod3"):
            bad = differences(name, expected, run(lib, name, logits, sizes))
            tally.record(f"{name} T={tokens}", [f"{k}: {m}" for k, m in bad])
    # The comparison can fail: a baseline given one wrong id is caught.
    logits = rng.standard_normal((33, EXPERTS)).astype(np.float32)
    expected = {k: np.asarray(v) for k, v in router(logits=logits).items()}
    broken = run(lib, "best", logits, {k: v.size for k, v in expected.items()})
    broken["topk_ids"][5, 3] = (broken["topk_ids"][5, 3] + 1) % EXPERTS
    tally.record("a wrong id is caught", [] if differences("best", expected, broken)
                 else ["the comparison missed it"])
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
