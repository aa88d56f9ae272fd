#!/usr/bin/env python3
"""Expert memory in the executor (moe-exec --memory MODE --budget B, host emulation):
every mode runs within its budget with the store's invariants checked at every step
(--memory-check), and its outputs are what its versions say:

  resident, offload, on-demand  bit-identical to the run without --memory (high
                                precision everywhere, whatever was loaded when);
  static-lo, dynaexq            the numpy MoE stack (test/exec/moe_reference.py) with
                                each expert's weights replaced, step by step, by the
                                version metrics.json says it ran - int8 per output
                                channel or int4 group-wise, quantised here in numpy
                                from the formats' definitions - within 1e-4;

with injected copy failures and delays too; DynaExq promotes the experts a skewed trace
uses; cache-aware routing (expertflow_route's resident bonus) stalls less; and bad
settings (budgets that cannot hold a mode, unknown modes, knobs, flags) are one-line
errors.

Run: python test/exec/test_memory.py --build build
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, HERE)
from make_checkpoint import make_checkpoint  # noqa: E402
import moe_reference as ref  # noqa: E402

F32 = np.float32
failures = []


def check(label, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else " " + str(detail)[-3000:]))
    if not ok:
        failures.append(label)


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


# ----------------------------------------------------------------------------- formats

def quantize(w, precision, group):
    """The low-precision version of w [rows, cols] dequantised (symmetric, round half to
    even): int8 one scale per row (max|row| / 127), int4 one per `group` elements of a
    row (max|group| / 7)."""
    w = np.asarray(w, F32)
    if precision == "int8":
        scale = (np.abs(w).max(axis=1, keepdims=True) / F32(127)).astype(F32)
        q = np.clip(np.rint(np.where(scale > 0, w / np.where(scale > 0, scale, 1), 0)), -127, 127)
        return (q.astype(F32) * scale).astype(F32)
    rows, cols = w.shape
    g = w.reshape(rows, cols // group, group)
    scale = (np.abs(g).max(axis=2, keepdims=True) / F32(7)).astype(F32)
    q = np.clip(np.rint(np.where(scale > 0, g / np.where(scale > 0, scale, 1), 0)), -7, 7)
    return (q.astype(F32) * scale).astype(F32).reshape(rows, cols)


def int4_group(hidden, inter):
    """The executor's automatic group: the largest power of two <= 128 dividing every
    row (gate and up rows are `hidden` wide, down rows `inter`)."""
    group = 128
    for cols in (hidden, hidden, inter):
        while group > 2 and cols % group:
            group //= 2
    return group


def reference_step(config, tensors, x, versions, low, cache):
    """The stack on x with every expert at the version `versions` names ({"layer":
    [2 high / 1 low / 0 none per expert]})."""
    group = int4_group(config["hidden_size"], config.get("moe_intermediate_size",
                                                         config.get("intermediate_size")))
    patched = dict(tensors)
    for layer, per_expert in versions.items():
        for e, v in enumerate(per_expert):
            if v != 1:
                continue
            for name in ref._expert_names(config, int(layer), e):
                key = (name, low)
                if key not in cache:
                    cache[key] = quantize(tensors[name], low, group)
                patched[name] = cache[key]
    return ref.moe_stack(config, patched, x)


# ----------------------------------------------------------------------------- runs

def steps_npz(work, name, config, rng, steps, tokens, skew=None):
    width = config["hidden_size"]
    arrays = {}
    for i in range(steps):
        x = rng.standard_normal((tokens, width)).astype(F32)
        if skew is not None:
            x += skew
        arrays[f"hidden_{i}"] = x.astype(F32)
    path = os.path.join(work, name + ".npz")
    np.savez(path, **arrays)
    return path, arrays


def metrics_of(out, i):
    with open(os.path.join(out, f"batch_{i}", "metrics.json")) as f:
        return json.load(f)["memory"]


def expert_bytes(config, dtype_bytes):
    inter = config.get("moe_intermediate_size", config.get("intermediate_size"))
    return 3 * config["hidden_size"] * inter * dtype_bytes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    exe = os.path.join(os.path.abspath(args.build), "bin", "moe-exec")
    work = tempfile.mkdtemp(prefix="sy-memory-")
    rng = np.random.default_rng(0)
    cases = [("mixtral", "float32"), ("qwen2_moe", "bfloat16"), ("deepseek_v3", "float32")]
    for arch, dtype in cases:
        model = os.path.join(work, arch)
        make_checkpoint(arch, model, seed=3, dtype=dtype)
        config, tensors = ref.load_checkpoint(model)
        layers = len(ref.moe_layers(config))
        E = ref.num_experts(config)
        hi = expert_bytes(config, 4 if dtype == "float32" else 2)
        npz, batches = steps_npz(work, arch, config, rng, 5, 7)
        plain = os.path.join(work, arch + "-plain")
        rc, out = run([exe, model, "--batches", npz, "--out", plain])
        if rc != 0:
            check(f"{arch}: plain run", False, out)
            continue
        total_hi = layers * E * hi
        # Low versions against float32 bytes: int8 a quarter, int4 an eighth (+ scales).
        total_f32 = layers * E * expert_bytes(config, 4)
        int8, int4 = total_f32 // 3, total_f32 // 6
        faults = ["--inject-copy-failures", "0.3", "--inject-copy-delay", "0.001"]
        eager = ["--memory-set", "margin=0"]  # promote on any traffic
        modes = [("resident", total_hi, []),
                 ("offload", int(0.4 * total_hi), []),
                 ("on-demand", int(0.4 * total_hi), []),
                 ("static-lo", int8, ["--lo", "int8"]),
                 ("static-lo", int4, ["--lo", "int4"]),
                 ("dynaexq", int4 + int(0.3 * total_hi), ["--lo", "int4"] + eager),
                 ("dynaexq", int8 + int(0.3 * total_hi), ["--lo", "int8"] + eager + faults),
                 ("offload", int(0.4 * total_hi), faults)]
        cache = {}
        for mode, budget, extra in modes:
            label = f"{arch} ({dtype}) --memory {mode} --budget {budget} {' '.join(extra)}".strip()
            out_dir = os.path.join(work, f"{arch}-{mode}-{len(extra)}-{budget}")
            rc, out = run([exe, model, "--batches", npz, "--out", out_dir, "--memory", mode,
                           "--budget", str(budget), "--memory-check", "--link-bandwidth", "2e8"]
                          + extra)
            if rc != 0:
                check(label, False, out)
                continue
            problems, totals = [], {}
            for i in range(len(batches)):
                m = metrics_of(out_dir, i)
                for k in ("promotions", "admitted_promotions", "demotions", "loads", "stalls",
                          "failed_copies", "evictions"):
                    totals[k] = totals.get(k, 0) + m[k]
                if m["used"] > budget or m["peak"] > budget:
                    problems.append(f"step {i}: used {m['used']} peak {m['peak']} > {budget}")
                got = np.load(os.path.join(out_dir, f"batch_{i}", "hidden.npy"))
                if mode in ("resident", "offload", "on-demand"):
                    want = np.load(os.path.join(plain, f"batch_{i}", "hidden.npy"))
                    if not np.array_equal(got, want):
                        problems.append(f"step {i}: differs from the plain run by "
                                        f"{np.abs(got - want).max():.2e}")
                else:
                    want = reference_step(config, tensors, batches[f"hidden_{i}"], m["versions"],
                                          m["low"], cache)
                    diff = float(np.abs(got - want).max())
                    if diff > 1e-4:
                        problems.append(f"step {i}: {diff:.2e} from the reference with the "
                                        f"versions {m['versions']}")
            if "--inject-copy-failures" in extra and totals.get("failed_copies", 0) == 0:
                problems.append("no copy failed although failures were injected")
            # Admitted at a step boundary (deterministic); how many land before the run
            # ends depends on the copy thread's timing.
            if mode == "dynaexq" and totals.get("admitted_promotions", 0) == 0:
                problems.append("no promotion was admitted")
            check(f"{label}: outputs = its versions, within the budget ({totals})", not problems,
                  "; ".join(problems))

    # DynaExq follows the traffic: a trace whose tokens prefer experts 0 and 1 of every
    # layer gets them promoted, within the budget.
    model = os.path.join(work, "mixtral")
    config, tensors = ref.load_checkpoint(model)
    E, layers = ref.num_experts(config), len(ref.moe_layers(config))
    routers = [tensors[f"model.layers.{l}.block_sparse_moe.gate.weight"] for l in range(layers)]
    direction = sum(r[e] for r in routers for e in (0, 1))
    skew = 6 * np.sqrt(config["hidden_size"]) * direction / np.linalg.norm(direction)
    npz, batches = steps_npz(work, "skewed", config, rng, 12, 8, skew)
    hi = expert_bytes(config, 4)
    budget = layers * E * (hi // 4 + 256) + layers * 2 * hi + hi // 2  # lo + 2 hi per layer
    out_dir = os.path.join(work, "dynaexq-skewed")
    rc, out = run([exe, model, "--batches", npz, "--out", out_dir, "--memory", "dynaexq",
                   "--budget", str(budget), "--memory-check", "--lo", "int4",
                   "--memory-set", "margin=0.5", "--update-steps", "2"])
    if rc != 0:
        check("dynaexq on a skewed trace", False, out)
    else:
        # Promotions publish when their copies have landed: some step boundary after the
        # plan (the copy thread's timing decides which).
        last = metrics_of(out_dir, len(batches) - 1)
        seen = [metrics_of(out_dir, i)["versions"] for i in range(len(batches))]
        hot = all(any(v[str(l)][0] == 2 and v[str(l)][1] == 2 for v in seen)
                  for l in range(layers))
        first = metrics_of(out_dir, 0)
        check(f"dynaexq promotes the hot experts 0 and 1 of every layer (step 0 "
              f"{first['versions']}, last {last['versions']}), used {last['used']} <= {budget}",
              hot and all(v == 1 for l in first["versions"].values() for v in l)
              and last["used"] <= budget, out[-1500:])

    # Cache-aware routing: expertflow_route with a resident bonus prefers experts in the
    # cache, so fewer routed experts miss; with no bonus it is plain softmax top-k.
    npz, batches = steps_npz(work, "cache", config, rng, 10, 4)
    stalls = {}
    for bonus in (0.0, 8.0):
        out_dir = os.path.join(work, f"cache-{bonus}")
        rc, out = run([exe, model, "--batches", npz, "--out", out_dir, "--memory", "offload",
                       "--budget", str(int(0.5 * layers * E * hi)), "--memory-check",
                       "--policy", os.path.join(ROOT, "policies", "expertflow.mlir"),
                       "--entry", "expertflow_route", "--set", f"bonus={bonus}"])
        if rc != 0:
            check(f"cache-aware routing (bonus {bonus})", False, out)
            return 1
        stalls[bonus] = sum(metrics_of(out_dir, i)["loads"] for i in range(len(batches)))
    plain = os.path.join(work, "cache-plain")
    rc, out = run([exe, model, "--batches", npz, "--out", plain])
    same = rc == 0 and all(np.array_equal(
        np.load(os.path.join(work, "cache-0.0", f"batch_{i}", "topk_ids_0.npy")),
        np.load(os.path.join(plain, f"batch_{i}", "topk_ids_0.npy"))) for i in range(len(batches)))
    check(f"cache-aware routing: bonus 0 routes as plain top-k; bonus 8 loads fewer experts "
          f"({stalls[8.0]} vs {stalls[0.0]})", same and stalls[8.0] < stalls[0.0], out[-1000:])

    # Bad settings: one-line errors.
    x = os.path.join(work, "x.npy")
    np.save(x, rng.standard_normal((3, config["hidden_size"])).astype(F32))
    bad = os.path.join(work, "bad")
    # The low versions' bytes, from a static-lo run's metrics.
    rc, out = run([exe, model, "--input", x, "--out", bad, "--memory", "static-lo",
                   "--budget", "1G"])
    with open(os.path.join(bad, "metrics.json")) as f:
        low_total = json.load(f)["memory"]["used"]
    for flags, message in (
            (["--memory", "resident", "--budget", str(hi)], "holds 1 of the"),
            (["--memory", "static-lo", "--budget", "100"], "int4 expert versions"),
            (["--memory", "dynaexq", "--budget", str(low_total + hi)],  # < one hi per layer
             "budget"),
            (["--memory", "offload", "--budget", str(hi)], "fewer than one per MoE layer"),
            (["--memory", "dynaexq"], "--memory needs --budget"),
            (["--budget", "1G"], "give both"),
            (["--memory", "swap", "--budget", "1G"], "is not resident, static-lo"),
            (["--memory", "static-lo", "--budget", "1G", "--lo", "int3"], "is not int4 or int8"),
            (["--memory", "static-lo", "--budget", "-5"], "not a positive byte count"),
            (["--memory", "dynaexq", "--budget", "1G", "--memory-set", "nope=1"], "nope"),
            (["--memory", "static-lo", "--budget", "1G", "--memory-set", "alpha=1"],
             "runs no rule"),
            (["--memory", "offload", "--budget", "1G", "--inject-copy-failures", "1.5"],
             "a probability in [0, 1)")):
        rc, out = run([exe, model, "--input", x, "--out", bad] + flags)
        check(f"{' '.join(flags)}: an error naming it", rc == 1 and message in out and
              "Traceback" not in out and out.count("\n") <= 3, out)

    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
