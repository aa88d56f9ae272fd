#!/usr/bin/env python3
"""Expert parallelism (moe-exec --ep N under mpirun, MPI on the host): the stack's output
of 2- and 4-rank runs equals the single-rank executor's within 1e-5 (float summation
order) with the same routing, for Mixtral, Qwen2-MoE (gated shared expert) and
DeepSeek-V3 (grouped top-k with bias, shared experts, a dense first layer) layouts, with
native routing and with batch-aware policies that route the GLOBAL batch (XShare-spec
with request ids, LYNX with a phase); replay under EP; live EPLB (outputs unchanged
through placement swaps, imbalance down); live Libra (outputs unchanged, tokens only to
ranks holding the expert or a replica, imbalance down on a skewed batch); XShare-EP
routing with the job's placement (= the numpy reference for 4 devices); and the failure
modes: a world size that is not --ep, one rank that fails to start (every rank says
which), options EP does not take, bad balancer settings.

Run: python test/exec/test_ep.py --build build
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
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from make_checkpoint import make_checkpoint  # noqa: E402
sys.path.insert(0, HERE)

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
failures = []


def check(label, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else " " + detail))
    if not ok:
        failures.append(label)


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def skewed_steps(model, steps, tokens, rng):
    """Hidden states whose tokens all prefer experts 0 and 1 of every layer (rank 0's
    block under the default placement): a direction along those experts' gate rows."""
    import moe_reference as ref
    config, tensors = ref.load_checkpoint(model)
    width = config["hidden_size"]
    routers = [t for name, t in tensors.items()
               if name.endswith(".gate.weight") and t.shape[0] == ref.num_experts(config)]
    direction = sum(r[e].astype(np.float32) for r in routers for e in (0, 1))
    direction /= np.linalg.norm(direction)
    return {f"hidden_{i}": (8 * np.sqrt(width) * direction +
                            rng.standard_normal((tokens, width))).astype(np.float32)
            for i in range(steps)}


def eplb_trace(work, exe, model, rng):
    import json
    steps = skewed_steps(model, 8, 16, rng)
    npz = os.path.join(work, "skew.npz")
    np.savez(npz, **steps)
    one = os.path.join(work, "skew-1")
    rc, out = run([exe, model, "--batches", npz, "--out", one])
    if rc != 0:
        check("live EPLB: single-rank run", False, out[-2000:])
        return
    for label, extra in (("one plan per window", []),
                         ("1 byte per step: one expert per step", ["--eplb-step-bytes", "1"])):
        two = os.path.join(work, "skew-2-" + str(len(extra)))
        rc, out = run(MPIRUN + ["-np", "2", exe, model, "--batches", npz, "--ep", "2",
                                "--eplb", "2", "--out", two] + extra)
        if rc != 0:
            check(f"live EPLB ({label})", False, out[-2000:])
            continue
        diff, versions, moved, imbalance = 0.0, [], 0, []
        for i in range(8):
            a = np.load(os.path.join(one, f"batch_{i}", "hidden.npy"))
            b = np.load(os.path.join(two, f"batch_{i}", "hidden.npy"))
            diff = max(diff, float(np.abs(a - b).max()))
            with open(os.path.join(two, f"batch_{i}", "metrics.json")) as f:
                ep = [m["ep"] for m in json.load(f)["layers"]]
            versions.append(ep[0]["placement_version"])
            moved += sum(e["weight_bytes_moved"] for e in ep)
            imbalance.append(max(e["imbalance"] for e in ep))
        check(f"live EPLB ({label}): outputs = one rank through every swap (max diff "
              f"{diff:.1e})", diff <= 1e-5)
        check(f"live EPLB ({label}): imbalance {imbalance[0]:.2f} -> {imbalance[-1]:.2f}, "
              f"placements {versions}, {moved} weight bytes moved",
              imbalance[0] >= 1.9 and imbalance[-1] <= 1.1 and versions[-1] >= 1 and moved > 0
              and versions == sorted(versions))


def libra_checks(label, run_dir, layers, ranks, experts):
    """Libra's invariants from a run's metrics and routing: every remote slot went to a
    rank holding its expert (home block or a replica imported for the layer), and the
    local / remote split counted independently from topk_ids and the token slices."""
    import json
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = {m["layer"]: m["ep"] for m in json.load(f)["layers"]}
    problems = []
    per_rank = experts // ranks
    for layer in layers:
        ep = metrics[layer]
        lib = ep["libra"]
        ids = np.load(os.path.join(run_dir, f"topk_ids_{layer}.npy"))
        T = ids.shape[0]
        owner = np.array([r for r in range(ranks)
                          for _ in range(T * (r + 1) // ranks - T * r // ranks)])
        holds = np.zeros((ranks, experts), bool)
        for g in range(ranks):
            holds[g, g * per_rank:(g + 1) * per_rank] = True
            holds[g, lib["replicas"][g]] = True
        remote = np.array(lib["remote_slots"])
        if np.any((remote > 0) & ~holds):
            problems.append(f"layer {layer}: remote slots on a rank without the expert")
        local_pairs = np.zeros(ranks, np.int64)
        remote_pairs = np.zeros(experts, np.int64)
        for t in range(T):
            for e in ids[t]:
                if e < 0:
                    continue
                if holds[owner[t], e]:
                    local_pairs[owner[t]] += 1
                else:
                    remote_pairs[e] += 1
        if not np.array_equal(remote.sum(axis=0), remote_pairs):
            problems.append(f"layer {layer}: remote slots per expert {remote.sum(axis=0)} != "
                            f"routed {remote_pairs}")
        if lib["local_slots"] != local_pairs.sum():
            problems.append(f"layer {layer}: local slots {lib['local_slots']} != "
                            f"{local_pairs.sum()}")
        if not np.array_equal(np.array(ep["slots_per_rank"]), local_pairs + remote.sum(axis=1)):
            problems.append(f"layer {layer}: slots per rank {ep['slots_per_rank']}")
    check(f"{label}: tokens go only to ranks holding the expert or a replica; local/remote "
          "slots match the routing", not problems, "; ".join(problems))
    return metrics


def libra_runs(work, exe, models, rng, compare):
    import json
    # Outputs: the single-rank ones, whatever the replicas and the sharding.
    for arch, ranks, extra in (("mixtral", 2, []),
                               ("deepseek_v3", 4, ["--libra-set", "extra_experts=2"]),
                               ("qwen2_moe", 2, ["--libra-set", "alpha=1",
                                                 "--libra-set", "epsilon=0"])):
        many = compare(f"{arch} libra", models[arch], ranks, [], tokens=13,
                       ep_only=["--libra"] + extra)
        if many:
            with open(os.path.join(models[arch], "config.json")) as f:
                config = json.load(f)
            E = (config.get("num_local_experts") or config.get("n_routed_experts")
                 or config["num_experts"])
            layers = sorted(int(f[9:-4]) for f in os.listdir(many) if f.startswith("topk_ids_"))
            libra_checks(f"{arch} libra {ranks} ranks", many, layers, ranks, E)
    # A skewed batch: every token prefers rank 0's experts. The first layer runs on the
    # home placement; the second on the replicas planned from the first one's input.
    model = models["mixtral"]
    x = skewed_steps(model, 1, 32, rng)["hidden_0"]
    src = os.path.join(work, "libra-skew.npy")
    np.save(src, x)
    runs = {}
    for name, extra in (("one", None), ("none", []), ("libra", ["--libra"])):
        out = os.path.join(work, f"libra-skew-{name}")
        cmd = ([exe, model, "--input", src, "--out", out] if extra is None else
               MPIRUN + ["-np", "2", exe, model, "--input", src, "--ep", "2", "--out", out] + extra)
        rc, text = run(cmd)
        if rc != 0:
            check(f"libra skewed batch ({name})", False, text[-2000:])
            return
        runs[name] = out
    diff = float(np.abs(np.load(os.path.join(runs["one"], "hidden.npy")) -
                        np.load(os.path.join(runs["libra"], "hidden.npy"))).max())
    metrics = libra_checks("libra skewed batch", runs["libra"], [0, 1], 2, 8)
    with open(os.path.join(runs["none"], "metrics.json")) as f:
        none = {m["layer"]: m["ep"] for m in json.load(f)["layers"]}
    lib = metrics[1]["libra"]
    check(f"libra skewed batch: outputs = one rank (max diff {diff:.1e}); layer 1 imbalance "
          f"{none[1]['imbalance']:.2f} without balancing -> {metrics[1]['imbalance']:.2f} with "
          f"Libra (replicas {lib['replicas']}, {metrics[1]['weight_bytes_moved']} bytes moved, "
          f"prediction hit rate {lib['prediction_hit_rate']:.2f})",
          diff <= 1e-5 and none[1]["imbalance"] >= 1.5 and metrics[1]["imbalance"] <= 1.1
          and any(lib["replicas"]) and metrics[1]["weight_bytes_moved"] > 0
          and 0.5 <= lib["prediction_hit_rate"] <= 1.0
          and metrics[0]["libra"]["replicas"] == [[], []])


def xshare_ep_live_placement(work, exe, model, rng):
    """XShare-EP under --ep 4 routes with the job's placement (expert e on rank e // 2):
    the routing equals the reference's Alg. 5/6 for 4 devices, not for one."""
    import moe_reference as mref
    import reference as rref
    config, tensors = mref.load_checkpoint(model)
    x = rng.standard_normal((12, config["hidden_size"])).astype(np.float32)
    src = os.path.join(work, "xs-ep-x.npy")
    np.save(src, x)
    out = os.path.join(work, "xs-ep-4")
    knobs = ["--set", "device_budget=1", "--set", "k0=0"]
    rc, text = run(MPIRUN + ["-np", "4", exe, model, "--input", src, "--ep", "4", "--out", out,
                             "--policy", os.path.join(ROOT, "policies", "xshare_ep.mlir")] + knobs)
    if rc != 0:
        check("xshare_ep under --ep 4", False, text[-2000:])
        return
    normed = mref.rmsnorm(x, tensors["model.layers.0.post_attention_layernorm.weight"]
                          .astype(np.float32), config["rms_norm_eps"])
    logits = mref.router_logits(config, tensors, 0, normed)
    E, k = 8, config["num_experts_per_tok"]
    zeros = np.zeros(E, np.float32)
    log2phy = np.arange(E, dtype=np.int32).reshape(E, 1)
    want = rref.xshare_ep(logits, zeros, log2phy, k, k0=0, device_budget=1, devices=4, slots=E)
    alone = rref.xshare_ep(logits, zeros, log2phy, k, k0=0, device_budget=1, devices=1, slots=E)
    got = np.load(os.path.join(out, "topk_ids_0.npy"))
    want_ids = np.sort(want["topk_ids"], axis=1)
    check("xshare_ep under --ep 4 routes with the live 4-rank placement (= reference for 4 "
          "devices, != for 1)", np.array_equal(np.sort(got, axis=1), want_ids)
          and not np.array_equal(want_ids, np.sort(alone["topk_ids"], axis=1)),
          f"got {got.tolist()} want {want_ids.tolist()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    exe = os.path.join(os.path.abspath(args.build), "bin", "moe-exec")
    if not shutil.which("mpirun"):
        print("skipped: mpirun is not installed (scripts/setup.sh installs openmpi-bin)")
        return 77
    work = tempfile.mkdtemp(prefix="sy-ep-")
    rng = np.random.default_rng(0)
    models = {}
    for arch in ("mixtral", "qwen2_moe", "deepseek_v3"):
        path = os.path.join(work, arch)
        make_checkpoint(arch, path, seed=5)
        models[arch] = path

    def compare(label, model, ranks, extra, tokens=11, hidden=None, ep_only=()):
        import json
        with open(os.path.join(model, "config.json")) as f:
            width = json.load(f)["hidden_size"]
        if hidden is None:
            hidden = rng.standard_normal((tokens, width)).astype(np.float32)
        x = hidden
        src = os.path.join(work, f"{label}-x.npy")
        np.save(src, x)
        one, many = os.path.join(work, f"{label}-1"), os.path.join(work, f"{label}-{ranks}")
        rc1, out1 = run([exe, model, "--input", src, "--out", one] + extra)
        rcn, outn = run(MPIRUN + ["-np", str(ranks), exe, model, "--input", src, "--ep",
                                  str(ranks), "--out", many] + extra + list(ep_only))
        if rc1 != 0 or rcn != 0:
            check(label, False, (out1 + outn)[-3000:])
            return None
        a, b = np.load(os.path.join(one, "hidden.npy")), np.load(os.path.join(many, "hidden.npy"))
        ids_same = all(np.array_equal(np.load(os.path.join(one, f)), np.load(os.path.join(many, f)))
                       for f in os.listdir(one) if f.startswith("topk_ids_"))
        diff = float(np.abs(a - b).max())
        check(f"{label}: {ranks} ranks = 1 rank (max diff {diff:.1e}), same routing",
              a.shape == b.shape and diff <= 1e-5 and ids_same)
        with open(os.path.join(many, "metrics.json")) as f:
            layers = json.load(f)["layers"]
        slots = [int((np.load(os.path.join(many, f"topk_ids_{m['layer']}.npy")) >= 0).sum())
                 for m in layers]
        check(f"{label}: per-rank metrics (slots per rank sum to the routed slots, "
              f"imbalance >= 1, bytes and seconds per rank)",
              all(m["ep"]["ranks"] == ranks and sum(m["ep"]["slots_per_rank"]) == s
                  and m["ep"]["imbalance"] >= 1.0 and len(m["ep"]["bytes_sent_per_rank"]) == ranks
                  and len(m["ep"]["seconds_per_rank"]) == ranks for m, s in zip(layers, slots)),
              str(layers[0].get("ep")))
        return many

    for arch, model in models.items():
        for ranks in (2, 4):
            compare(f"{arch} native", model, ranks, [])
    # Batch-aware policies see the global batch: the same routing as one rank.
    requests = np.repeat(np.arange(4), 4).astype(np.int32)   # 4 verify steps of 4 tokens
    positions = np.tile(np.arange(10, 14), 4).astype(np.int32)
    np.save(os.path.join(work, "req.npy"), requests)
    np.save(os.path.join(work, "pos.npy"), positions)
    meta = ["--request-ids", os.path.join(work, "req.npy"), "--positions",
            os.path.join(work, "pos.npy")]
    compare("xshare_spec global batch", models["mixtral"], 4,
            ["--policy", os.path.join(ROOT, "policies", "xshare_spec.mlir"), "--set",
             "budget=1"] + meta, tokens=16)
    compare("lynx with a phase", models["qwen2_moe"], 2,
            ["--policy", os.path.join(ROOT, "policies", "lynx.mlir"), "--phase", "decode"],
            tokens=9)
    # Replay under EP: a recorded routing replayed by 2 ranks gives the recorded run.
    recorded = compare("deepseek_v3 for replay", models["deepseek_v3"], 2, [], tokens=7)
    if recorded:
        x = os.path.join(work, "deepseek_v3 for replay-x.npy")
        again = os.path.join(work, "replayed")
        rc, out = run(MPIRUN + ["-np", "2", exe, models["deepseek_v3"], "--input", x, "--ep", "2",
                                "--replay", recorded, "--out", again])
        check("replay under --ep 2 reproduces the run bit for bit", rc == 0 and np.array_equal(
            np.load(os.path.join(recorded, "hidden.npy")),
            np.load(os.path.join(again, "hidden.npy"))), out[-2000:])

    # A sequence of batches (decode steps, a prefill, a verify step) under EP.
    import json
    with open(os.path.join(models["deepseek_v3"], "config.json")) as f:
        width = json.load(f)["hidden_size"]
    steps = {"hidden_0": rng.standard_normal((4, width)).astype(np.float32),
             "hidden_1": rng.standard_normal((9, width)).astype(np.float32),
             "positions_1": np.arange(9).astype(np.int32),
             "request_ids_1": np.zeros(9, np.int32),
             "hidden_2": rng.standard_normal((3, width)).astype(np.float32)}
    npz = os.path.join(work, "steps.npz")
    np.savez(npz, **steps)
    one, many = os.path.join(work, "steps-1"), os.path.join(work, "steps-4")
    rc1, out1 = run([exe, models["deepseek_v3"], "--batches", npz, "--out", one])
    rcn, outn = run(MPIRUN + ["-np", "4", exe, models["deepseek_v3"], "--batches", npz,
                              "--ep", "4", "--out", many])
    same = rc1 == 0 and rcn == 0 and all(
        np.abs(np.load(os.path.join(one, f"batch_{i}", "hidden.npy")) -
               np.load(os.path.join(many, f"batch_{i}", "hidden.npy"))).max() <= 1e-5
        for i in range(3))
    check("--batches under --ep 4 (3 is fewer tokens than ranks) = one rank", same,
          (out1 + outn)[-3000:])

    # Live EPLB: a trace whose tokens all prefer experts 0 and 1 (rank 0's block under the
    # default placement); the compiled eplb rule re-plans every 2 steps and the weights of
    # the replicas move to rank 1. Outputs stay the single-rank ones; imbalance drops.
    eplb_trace(work, exe, models["mixtral"], rng)
    # Libra live, and XShare-EP fed the job's placement.
    libra_runs(work, exe, models, rng, compare)
    xshare_ep_live_placement(work, exe, models["mixtral"], rng)

    # Failure modes: clear errors, never a hang.
    x = os.path.join(work, "mixtral native-x.npy")
    rc, out = run(MPIRUN + ["-np", "2", exe, models["mixtral"], "--input", x, "--ep", "4",
                            "--out", os.path.join(work, "bad")])
    check("mpirun -np 2 with --ep 4: an error on every rank",
          rc != 0 and out.count("asks for 4 ranks but the job has 2") == 2, out[-2000:])
    rc, out = run(MPIRUN + ["-np", "1", exe, models["mixtral"], "--input", x, "--ep", "2",
                            "--out", os.path.join(work, "bad2"), ":", "-np", "1", exe,
                            os.path.join(work, "no-such-model"), "--input", x, "--ep", "2",
                            "--out", os.path.join(work, "bad2")])
    check("a rank that fails to start: every rank names it",
          rc != 0 and out.count("rank 1 failed to start") >= 2 and "no-such-model" in out,
          out[-2000:])
    rc, out = run(MPIRUN + ["-np", "2", exe, models["mixtral"], "--input", x, "--ep", "2",
                            "--block-only", "--out", os.path.join(work, "bad3")])
    check("--ep with --block-only is refused", rc != 0 and "--block-only is single-rank" in out,
          out[-1000:])
    rc, out = run([exe, models["mixtral"], "--input", x, "--ep", "0", "--out",
                   os.path.join(work, "bad4")])
    check("--ep 0 is refused", rc == 1 and "--ep '0' is not a rank count" in out, out[-1000:])
    rc, out = run([exe, models["mixtral"], "--input", x, "--eplb", "2", "--out",
                   os.path.join(work, "bad5")])
    check("--eplb without --ep is refused", rc == 1 and "use it with --ep N" in out, out[-1000:])
    rc, out = run(MPIRUN + ["-np", "2", exe, models["mixtral"], "--input", x, "--ep", "2",
                            "--eplb", "2", "--eplb-slots", "9",
                            "--out", os.path.join(work, "bad6")])
    check("--eplb-slots that the ranks cannot split is refused on every rank",
          rc != 0 and out.count("must be at least the 8 experts and a multiple of --ep 2") >= 2,
          out[-2000:])

    rc, out = run([exe, models["mixtral"], "--input", x, "--libra", "--out",
                   os.path.join(work, "bad7")])
    check("--libra without --ep is refused", rc == 1 and "use it with --ep N" in out, out[-1000:])
    for label, ranks, extra, message in (
            ("--libra with --eplb", 2, ["--libra", "--eplb", "2"], "choose one"),
            ("--libra-set of an unknown knob", 2, ["--libra", "--libra-set", "nope=1"],
             "has no such knob"),
            ("--libra-set breaking a rule", 2, ["--libra", "--libra-set", "alpha=2"],
             "alpha must be in [0, 1]"),
            ("--libra over ranks that do not split the experts", 3, ["--libra"],
             "must split evenly over --ep 3")):
        rc, out = run(MPIRUN + ["-np", str(ranks), exe, models["mixtral"], "--input", x, "--ep",
                                str(ranks), "--out", os.path.join(work, "bad8")] + extra)
        check(f"{label} is refused on every rank", rc != 0 and out.count(message) >= ranks,
              out[-2000:])

    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
