#!/usr/bin/python3
"""Execution tests of the rules: the shipped rule policies (and variants of their
shapes) compiled and run by `moe-run`, against the numpy references of
test/exec/rules_reference.py. Plans must be identical (phy2log, log2phy, replica
counts, per-GPU loads, imbalance; hi sets, promotion/demotion queues, hotness bit for
bit), and bad inputs must fail with a clear message.

    test_rules.py --build BUILD_DIR
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
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
import rules_reference as ref  # noqa: E402
import policy_shapes  # noqa: E402


def shipped(name):
    """The text of a shipped (generic) policy file."""
    return open(os.path.join(ROOT, "policies", name + ".mlir")).read()


def native(name):
    """The shape a shipped policy's header documents (policy_shapes.NATIVE_SHAPES)."""
    return policy_shapes.native_shape(name)


def eplb_policy(E, P, G, N, D, force_global=False):
    R = max(P - E + 1, 1)  # (a well-formed type even for the P < E error case)
    flag = " global" if force_global else ""
    return f"""
moe.balance @eplb(%loads: tensor<{E}xf32>)
    -> (phy2log: tensor<{P}xi32>, log2phy: tensor<{E}x{R}xi32>,
        replica_count: tensor<{E}xi32>, gpu_loads_after: tensor<{D}xf32>,
        imbalance_after: tensor<1xf32>)
    attributes {{experts = {E}}} {{
  %p2l, %l2p, %cnt = moe.eplb %loads groups = {G} nodes = {N} gpus = {D}{flag}
      : tensor<{E}xf32> -> tensor<{P}xi32>, tensor<{E}x{R}xi32>, tensor<{E}xi32>
  %after = moe.device_loads %loads placed(%p2l, %cnt : tensor<{P}xi32>, tensor<{E}xi32>)
      gpus = {D} : tensor<{E}xf32> -> tensor<{D}xf32>
  %ia = moe.imbalance %after : tensor<{D}xf32> -> tensor<1xf32>
  moe.yield %p2l, %l2p, %cnt, %after, %ia : tensor<{P}xi32>, tensor<{E}x{R}xi32>,
      tensor<{E}xi32>, tensor<{D}xf32>, tensor<1xf32>
}}
"""


def residency_policy(slack=None):
    """dynaexq.mlir; rank slack instead of a margin if given (bound by --experts)."""
    text = shipped("dynaexq")
    if slack is not None:
        text = text.replace('%margin = moe.knob "margin" = 1.0 : f32',
                            f'%slack = moe.knob "rank_slack" = {slack} : i64')
        text = text.replace("margin(%margin : f32)", "rank_slack(%slack : i64)")
    return text


class Runner:
    def __init__(self, build, workdir):
        self.moe_run = os.path.join(build, "bin", "moe-run")
        self.workdir = workdir
        self.count = 0
        self.passed = self.failed = 0

    def run(self, policy_text, inputs, knobs=None, shape=None, entry=None):
        """Runs the policy (bound to `shape`, policy_shapes.shape_flags' names; `entry` of
        a file with several); returns (returncode, output text, {result: array})."""
        self.count += 1
        d = os.path.join(self.workdir, "case%03d" % self.count)
        os.makedirs(d)
        path = os.path.join(d, "policy.mlir")
        with open(path, "w") as f:
            f.write(policy_text)
        cmd = [self.moe_run, path, "--out", os.path.join(d, "out")]
        cmd += policy_shapes.shape_flags(**(shape or {}))
        if entry:
            cmd += ["--entry", entry]
        for name, value in inputs.items():
            np.save(os.path.join(d, name + ".npy"), value)
            cmd += ["--arg", f"{name}={os.path.join(d, name + '.npy')}"]
        for k, v in (knobs or {}).items():
            cmd += ["--set", f"{k}={v}"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        outs = {}
        if p.returncode == 0:
            for f in os.listdir(os.path.join(d, "out")):
                outs[f[:-4]] = np.load(os.path.join(d, "out", f))
        return p.returncode, (p.stdout + p.stderr).strip(), outs

    def check(self, label, problems):
        if problems:
            self.failed += 1
            print("FAIL " + label)
            for line in problems[:6]:
                print("     " + line)
        else:
            self.passed += 1
            print("ok   " + label)


def compare(expected, got):
    problems = []
    for name, want in expected.items():
        have = got.get(name)
        if have is None:
            problems.append(f"{name}: missing")
        elif have.shape != np.asarray(want).shape or not np.array_equal(have, want):
            bad = np.flatnonzero(np.asarray(have).ravel() != np.asarray(want).ravel())[:5]
            problems.append(f"{name}: differs at {list(bad)}: got "
                            f"{np.asarray(have).ravel()[bad]}, "
                            f"want {np.asarray(want).ravel()[bad]}")
    return problems


def loads_for(kind, E, rng):
    if kind == "uniform":
        return rng.uniform(0, 1000, E).astype(np.float32)
    if kind == "skewed":  # a few very hot experts (Zipf), as in real routing traces
        return (rng.zipf(1.3, E).clip(max=10**5) * 7).astype(np.float32)
    if kind == "equal":
        return np.full(E, 64.0, np.float32)
    if kind == "zeros":
        return np.zeros(E, np.float32)
    if kind == "sparse":
        x = np.zeros(E, np.float32)
        x[rng.choice(E, max(1, E // 10), replace=False)] = rng.uniform(1, 100, max(1, E // 10))
        return x.astype(np.float32)
    raise ValueError(kind)


def test_eplb(r, rng):
    shapes = [  # E, P, G, N, D, global
        (256, 288, 8, 2, 8, False),   # DeepSeek-V3 on 2 nodes
        (256, 320, 8, 4, 32, False),  # 4 nodes x 8 GPUs
        (256, 288, 8, 1, 8, False),   # one node
        (256, 288, 8, 3, 6, False),   # groups not divisible by nodes: global mode
        (64, 72, 8, 2, 8, True),      # forced global
        (16, 24, 4, 2, 4, False),
        (64, 64, 4, 2, 8, False),     # no redundant slot
    ]
    for E, P, G, N, D, glob in shapes:
        # The shipped generic eplb.mlir bound by flags; `global` needs its own text, and
        # so does a shape whose default placement (the "before" loads) does not exist.
        text, shape = ((eplb_policy(E, P, G, N, D, glob), None) if glob or E % D else
                       (shipped("eplb"), {"experts": E, "slots": P, "groups": G, "nodes": N,
                                          "devices": D}))
        for kind in ("uniform", "skewed", "equal", "zeros", "sparse"):
            loads = loads_for(kind, E, rng)
            rc, out, got = r.run(text, {"loads": loads}, shape=shape)
            label = f"eplb E={E} P={P} G={G} N={N} D={D}{' global' if glob else ''} {kind}"
            if rc != 0:
                r.check(label, [f"moe-run exited {rc}: {out}"])
                continue
            p2l, l2p, cnt = ref.eplb(loads, P, G, N, D, glob)
            after = ref.device_loads(loads, D, p2l, cnt)
            want = {"phy2log": p2l, "log2phy": l2p, "replica_count": cnt,
                    "gpu_loads_after": after, "imbalance_after": ref.imbalance(after)}
            problems = compare(want, got)
            # The contract the issue states: the same max per-GPU load as the reference.
            if not problems and got["gpu_loads_after"].max() != after.max():
                problems.append("max per-GPU load differs")
            # Sanity of any plan: every expert placed, counts add up to the slots.
            if not problems and (got["replica_count"].sum() != P or
                                 sorted(set(got["phy2log"].tolist())) != list(range(E))):
                problems.append("plan does not cover every expert exactly")
            r.check(label, problems)
    # The shipped policy, with the before/after numbers.
    loads = loads_for("skewed", 256, rng)
    rc, out, got = r.run(shipped("eplb"), {"loads": loads}, shape=native("eplb"))
    before = ref.device_loads(loads, 8)
    p2l, l2p, cnt = ref.eplb(loads, 288, 8, 2, 8)
    after = ref.device_loads(loads, 8, p2l, cnt)
    want = {"phy2log": p2l, "log2phy": l2p, "replica_count": cnt, "gpu_loads_before": before,
            "gpu_loads_after": after, "imbalance_before": ref.imbalance(before),
            "imbalance_after": ref.imbalance(after)}
    r.check("policies/eplb.mlir skewed (imbalance %.3f -> %.3f)"
            % (ref.imbalance(before)[0], ref.imbalance(after)[0]),
            [f"moe-run exited {rc}: {out}"] if rc else compare(want, got))


def test_llep(r, rng):
    shape = {"experts": 128, "devices": 8}
    for kind in ("skewed", "uniform", "equal", "zeros", "sparse"):
        for knobs in ({}, {"threshold": 0.0}, {"threshold": 0.0, "min_chunk": 0},
                      {"threshold": 0.0, "min_chunk": 16, "capacity_factor": 1.0},
                      {"threshold": 0.0, "capacity_factor": 1.5, "min_chunk": 200}):
            loads = np.rint(loads_for(kind, 128, rng)).astype(np.int32)
            rc, out, got = r.run(shipped("llep"), {"loads": loads}, knobs, shape=shape)
            label = f"llep E=128 D=8 {kind} {knobs}"
            if rc != 0:
                r.check(label, [f"moe-run exited {rc}: {out}"])
                continue
            plan, before, after, moved = ref.least_loaded(loads, 8, **knobs)
            want = {"plan": plan, "gpu_loads_before": before, "gpu_loads_after": after,
                    "imbalance_before": ref.imbalance(before),
                    "imbalance_after": ref.imbalance(after), "weight_transfers": moved}
            problems = compare(want, got)
            # Any plan computes every routed token exactly once.
            if not problems and not np.array_equal(got["plan"].sum(axis=1), loads):
                problems.append("plan does not cover every token exactly once")
            r.check(label + " (imbalance %.3f -> %.3f, %d moved)"
                    % (ref.imbalance(before)[0], ref.imbalance(after)[0], moved[0]), problems)
    # One GPU: nothing can move; GPUs = experts.
    for E, D in ((16, 1), (16, 16)):
        loads = np.rint(loads_for("skewed", E, rng)).astype(np.int32)
        rc, out, got = r.run(shipped("llep"), {"loads": loads}, {"threshold": 0.0},
                             shape={"experts": E, "devices": D})
        plan, before, after, moved = ref.least_loaded(loads, D, threshold=0.0)
        r.check(f"llep E={E} D={D} skewed",
                [f"moe-run exited {rc}: {out}"] if rc else
                compare({"plan": plan, "gpu_loads_after": after, "weight_transfers": moved},
                        got))

def dynaexq_inputs(E, rng, current_size):
    hot = rng.gamma(1.0, 10.0, E).astype(np.float32)
    counts = rng.poisson(8, E).astype(np.int32)
    cur = np.zeros(E, bool)
    cur[rng.choice(E, current_size, replace=False)] = True
    return hot, counts, cur


def test_dynaexq(r, rng):
    text = shipped("dynaexq")
    shape = {"experts": 128}
    capacity = ref.hi_capacity(51539607552, 21474836480, 9437184, 2359296, 48, 128)
    for alpha, margin, size in [(0.8, 1.0, 34), (0.5, 0.0, 34), (0.9, 5.0, 20),
                                (0.0, 2.0, 50), (0.8, 1.0, 0)]:
        hot, counts, cur = dynaexq_inputs(128, rng, size)
        rc, out, got = r.run(text, {"hotness": hot, "counts": counts, "current": cur},
                             {"alpha": alpha, "margin": margin}, shape=shape)
        want = ref.dynaexq(hot, counts, cur, alpha, margin, capacity)
        r.check(f"dynaexq alpha={alpha} margin={margin} |current|={size}",
                [f"moe-run exited {rc}: {out}"] if rc else compare(want, got))
    # A smaller budget: fewer high-precision experts (n from the byte model).
    hot, counts, cur = dynaexq_inputs(128, rng, 34)
    budget = 21474836480 + 48 * 128 * 2359296 + 48 * 9437184 * 5 + 17
    rc, out, got = r.run(text, {"hotness": hot, "counts": counts, "current": cur},
                         {"budget_bytes": budget}, shape=shape)
    n = ref.hi_capacity(budget, 21474836480, 9437184, 2359296, 48, 128)
    want = ref.dynaexq(hot, counts, cur, 0.8, 1.0, n)
    problems = [f"moe-run exited {rc}: {out}"] if rc else compare(want, got)
    if not problems and got["hi_set"].sum() != 5:
        problems.append(f"hi set has {got['hi_set'].sum()} experts, want 5")
    r.check("dynaexq budget for 5 hi experts per layer", problems)

    # No churn when scores move within the margin: start from the reference's steady
    # set, then perturb the counts so that S moves by less than margin / 2.
    margin = 4.0
    hot = (rng.permutation(128) * 3.0).astype(np.float32)  # distinct, gaps of 3
    zero = np.zeros(128, np.int32)
    steady = ref.dynaexq(hot, zero, np.zeros(128, bool), 0.5, margin, capacity)
    s = steady["hotness_out"]
    cur = steady["hi_set"]
    jitter = rng.integers(0, 4, 128).astype(np.int32)  # (1-alpha)*c moves S by < 2
    rc, out, got = r.run(text, {"hotness": s * 2, "counts": jitter, "current": cur},
                         {"alpha": 0.5, "margin": margin}, shape=shape)
    problems = [f"moe-run exited {rc}: {out}"] if rc else []
    if not problems:
        want = ref.dynaexq(s * 2, jitter, cur, 0.5, margin, capacity)
        problems = compare(want, got)
        if not problems and (got["num_promotions"][0] or not np.array_equal(got["hi_set"], cur)):
            problems.append("churn within the margin")
    r.check("dynaexq no churn within the margin", problems)
    # The same jitter without a margin does churn (the test can fail).
    rc, out, got = r.run(text, {"hotness": s * 2, "counts": jitter * 40, "current": cur},
                         {"alpha": 0.5, "margin": 0.0}, shape=shape)
    want = ref.dynaexq(s * 2, jitter * 40, cur, 0.5, 0.0, capacity)
    problems = [f"moe-run exited {rc}: {out}"] if rc else compare(want, got)
    if not problems and got["num_promotions"][0] == 0:
        problems.append("expected churn without a margin")
    r.check("dynaexq churns without a margin (%d promotions)"
            % (got.get("num_promotions", [0])[0]), problems)

    # Rank slack instead of a margin, other expert counts.
    for E, slack, size in [(64, 2, 20), (128, 0, 34), (128, 8, 34), (256, 4, 34)]:
        hot, counts, cur = dynaexq_inputs(E, rng, size)
        capacity_e = ref.hi_capacity(51539607552, 21474836480, 9437184, 2359296, 48, E)
        rc, out, got = r.run(residency_policy(slack),
                             {"hotness": hot, "counts": counts, "current": cur},
                             shape={"experts": E})
        s = ref.ema(hot, counts, 0.8)
        hi = ref.hot_set(s, cur, capacity_e, rank_slack=slack)
        flags = np.zeros(E, bool)
        flags[sorted(hi)] = True
        r.check(f"dynaexq E={E} rank_slack={slack}",
                [f"moe-run exited {rc}: {out}"] if rc else compare({"hi_set": flags}, got))


def libra_shape(E, G, k):
    """policies/libra.mlir bound to E experts, G GPUs, top-k ids (the hidden size only
    matters to @libra_predict)."""
    return {"experts": E, "top_k": k, "devices": G, "hidden_size": 64}


def predicted_ids(T, E, k, rng, skew):
    p = 1.0 / np.arange(1, E + 1) ** skew
    p = p[rng.permutation(E)] / p.sum()
    return np.stack([rng.choice(E, k, replace=False, p=p) for _ in range(T)]).astype(np.int32)


def test_libra(r, rng):
    for E, G, k, T, skew, N, alpha, eps, layout in [
            (128, 8, 8, 512, 1.1, 4, 0.5, 0.05, "blocks"),
            (128, 8, 8, 512, 1.1, 4, 0.0, 0.05, "blocks"),
            (128, 8, 8, 512, 1.1, 4, 1.0, 0.05, "blocks"),
            (128, 8, 8, 256, 0.0, 2, 0.5, 0.0, "random"),
            (64, 4, 4, 300, 1.5, 8, 0.25, 0.1, "random"),
            (256, 8, 8, 1024, 1.2, 6, 0.5, 0.02, "blocks"),
            (16, 4, 2, 40, 2.0, 3, 0.5, 0.0, "blocks"),
            (64, 8, 4, 1, 1.0, 2, 0.5, 0.05, "blocks"),
            (128, 8, 8, 512, 1.1, 0, 0.5, 0.05, "blocks")]:
        ids = predicted_ids(T, E, k, rng, skew)
        if layout == "blocks":
            token_gpu = (np.arange(T) * G // T).astype(np.int32)
        else:
            token_gpu = rng.integers(0, G, T).astype(np.int32)
        rc, out, got = r.run(shipped("libra"),
                             {"next_topk_ids": ids, "token_gpu": token_gpu},
                             {"extra_experts": N, "alpha": alpha, "epsilon": eps},
                             shape=libra_shape(E, G, k), entry="libra")
        label = f"libra E={E} G={G} k={k} T={T} skew={skew} N={N} alpha={alpha} eps={eps} {layout}"
        if rc != 0:
            r.check(label, [f"moe-run exited {rc}: {out}"])
            continue
        req = ref.gpu_requests(ids, token_gpu, G, E)
        M = ref.libra_replicate(req, N, alpha)
        plan, after = ref.libra_shard(req, M, eps)
        before = np.array(ref.served_loads(req), np.float32)
        replicated = np.array(ref.served_loads(req, M), np.float32)
        want = {"placement": M, "shard_plan": plan, "loads_before": before,
                "loads_replicated": replicated, "loads_after": after,
                "imbalance_before": ref.imbalance(before),
                "imbalance_replicated": ref.imbalance(replicated),
                "imbalance_after": ref.imbalance(after)}
        problems = compare(want, got)
        if not problems and (got["placement"].sum(axis=0) > E // G + N).any():
            problems.append("a GPU imported more than N experts")
        if not problems and got["loads_after"].sum() != before.sum():
            problems.append("sharding lost or created tokens")
        r.check(label + " (imbalance %.3f -> %.3f -> %.3f)"
                % (ref.imbalance(before)[0], ref.imbalance(replicated)[0],
                   ref.imbalance(after)[0]), problems)
    # @libra_shard: Alg. 2 alone on a given placement (the replicas of a prediction)
    # and the ACTUAL routing, which differs from the prediction.
    for E, G, k, T, N, eps in [(64, 4, 4, 300, 4, 0.05), (128, 8, 8, 512, 2, 0.0),
                               (16, 4, 2, 40, 0, 0.1)]:
        predicted = predicted_ids(T, E, k, rng, 1.2)
        actual = predicted_ids(T, E, k, rng, 1.2)
        token_gpu = (np.arange(T) * G // T).astype(np.int32)
        M = ref.libra_replicate(ref.gpu_requests(predicted, token_gpu, G, E), N, 0.5)
        rc, out, got = r.run(shipped("libra"),
                             {"topk_ids": actual, "token_gpu": token_gpu, "placement": M},
                             {"epsilon": eps}, shape=libra_shape(E, G, k), entry="libra_shard")
        label = f"libra_shard E={E} G={G} k={k} T={T} N={N} eps={eps} (actual != predicted)"
        if rc != 0:
            r.check(label, [f"moe-run exited {rc}: {out}"])
            continue
        plan, after = ref.libra_shard(ref.gpu_requests(actual, token_gpu, G, E), M, eps)
        r.check(label, compare({"shard_plan": plan, "loads_after": after,
                                "imbalance_after": ref.imbalance(after)}, got))
    # The lookahead predictor: the next layer's gate on the current hidden states.
    H, E, T = 2048, 128, 33
    hidden = rng.standard_normal((T, H)).astype(np.float32)
    gate = (0.02 * rng.standard_normal((H, E))).astype(np.float32)
    rc, out, got = r.run(shipped("libra"), {"hidden": hidden, "next_gate": gate},
                         shape=native("libra"), entry="libra_predict")
    problems = [f"moe-run exited {rc}: {out}"] if rc else []
    if not problems:
        logits = np.zeros((T, E), np.float32)
        for t in range(T):  # f32, h in order
            acc = np.zeros(E, np.float32)
            for h in range(H):
                acc = (acc + hidden[t, h] * gate[h]).astype(np.float32)
            logits[t] = acc
        want = np.array([sorted(range(E), key=lambda e: (-float(logits[t, e]), e))[:8]
                         for t in range(T)], np.int32)
        problems = compare({"next_topk_ids": want}, got)
    r.check("libra_predict: next layer's gate on the current hidden states", problems)


EF_DEFAULTS = {"threshold": 0.9, "expert_bytes": 17301504, "bandwidth": 2.5e10,
               "layer_time": 4.0e-04, "layers": 26, "stall_threshold": 4,
               "overfetch_threshold": 8, "capacity": 32}


def expertflow_reference(inputs, knobs):
    k = dict(EF_DEFAULTS, **knobs)
    expected, ne = ref.expected_experts(inputs["pregate_mass"], k["threshold"])
    s0 = ref.step_size(ne, k["expert_bytes"], k["bandwidth"], k["layer_time"], k["layers"])
    s, st, ov, trace = ref.step_feedback(int(inputs["step"][0]), s0, int(inputs["stalls"][0]),
                                         int(inputs["overfetches"][0]),
                                         inputs["events"].tolist(), k["stall_threshold"],
                                         k["overfetch_threshold"], k["layers"])
    out = ref.two_level_lru(inputs["resident"], inputs["last_use"], inputs["requested"],
                            expected, int(inputs["now"][0]), s, k["capacity"])
    out.update({"expected": expected, "num_expected": np.array([ne], np.int32),
                "initial_step": np.array([s0], np.int32), "step_size": np.array([s], np.int32),
                "stalls_out": np.array([st], np.int32),
                "overfetches_out": np.array([ov], np.int32),
                "step_trace": np.array(trace, np.int32)})
    return out


def test_expertflow(r, rng):
    full, shape = shipped("expertflow"), native("expertflow")
    E = 64
    # A scripted run: each call's outputs are the next call's state.
    for knobs, seed_events in [({"bandwidth": 1.0e11, "layer_time": 1.0e-3}, "stalls"),
                               ({}, "stalls"), ({"stall_threshold": 1, "overfetch_threshold": 2,
                                                "capacity": 12}, "mixed"),
                               ({"threshold": 0.5, "bandwidth": 8.0e9, "capacity": 8}, "overfetch"),
                               ({"layers": 3, "stall_threshold": 0}, "stalls")]:
        state = {"step": np.zeros(1, np.int32), "stalls": np.zeros(1, np.int32),
                 "overfetches": np.zeros(1, np.int32), "resident": np.zeros(E, bool),
                 "last_use": np.full(E, -1, np.int32)}
        problems, steps = [], []
        for now in range(10):
            mass = (rng.dirichlet(np.full(E, 0.3)) * 32).astype(np.float32)
            requested = np.zeros(E, bool)
            requested[rng.choice(E, 6, replace=False, p=mass / mass.sum())] = True
            n_ev = int(rng.integers(0, 9))
            if seed_events == "stalls":
                events = np.ones(n_ev, np.int32)
            elif seed_events == "overfetch":
                events = np.full(n_ev, 2, np.int32)
            else:
                events = rng.integers(0, 3, n_ev).astype(np.int32)
            inputs = dict(state, pregate_mass=mass, requested=requested,
                          now=np.array([now], np.int32), events=events)
            rc, out, got = r.run(full, inputs, knobs, shape=shape, entry="expertflow")
            if rc != 0:
                problems = [f"moe-run exited {rc}: {out}"]
                break
            want = expertflow_reference(inputs, knobs)
            problems = compare(want, got)
            if problems:
                problems.insert(0, f"at step {now}")
                break
            steps.append(int(got["step_size"][0]))
            state = {"step": got["step_size"], "stalls": got["stalls_out"],
                     "overfetches": got["overfetches_out"], "resident": got["resident_out"],
                     "last_use": got["last_use_out"]}
        r.check(f"expertflow 10 scripted steps, {seed_events} events, knobs {knobs} "
                f"(S: {steps})", problems)
    # The step formula alone over bandwidths (S from scratch: step 0, no events).
    for bandwidth, layer_time in [(2.5e10, 4e-4), (6.4e10, 4e-4), (1.0e9, 1e-3), (1e12, 1e-4)]:
        mass = (rng.dirichlet(np.full(E, 0.5)) * 10).astype(np.float32)
        inputs = {"pregate_mass": mass, "requested": np.zeros(E, bool),
                  "resident": np.zeros(E, bool), "last_use": np.full(E, -1, np.int32),
                  "now": np.zeros(1, np.int32), "step": np.zeros(1, np.int32),
                  "stalls": np.zeros(1, np.int32), "overfetches": np.zeros(1, np.int32),
                  "events": np.zeros(0, np.int32)}
        knobs = {"bandwidth": bandwidth, "layer_time": layer_time}
        rc, out, got = r.run(full, inputs, knobs, shape=shape, entry="expertflow")
        want = expertflow_reference(inputs, knobs)
        r.check(f"expertflow step size at {bandwidth:.0e} B/s, {layer_time} s/layer "
                f"(S = {want['step_size'][0]})",
                [f"moe-run exited {rc}: {out}"] if rc else compare(want, got))
    # Cache-aware routing: ready tokens first, optional resident bonus.
    for T, bonus, n_res in [(16, 0.0, 40), (33, 0.0, 20), (7, 2.0, 32), (1, 0.0, 64)]:
        logits = rng.standard_normal((T, E)).astype(np.float32)
        resident = np.zeros(E, bool)
        resident[rng.choice(E, n_res, replace=False)] = True
        rc, out, got = r.run(full, {"logits": logits, "resident": resident},
                             {"bonus": bonus}, shape=shape, entry="expertflow_route")
        problems = [f"moe-run exited {rc}: {out}"] if rc else []
        if not problems:
            biased = (logits + np.float32(bonus) * resident).astype(np.float32)
            ids = np.array([sorted(range(E), key=lambda e: (-float(biased[t, e]), e))[:6]
                            for t in range(T)], np.int32)
            z = logits - logits.max(axis=1, keepdims=True)
            p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
            w = np.take_along_axis(p, ids, axis=1)
            w = w / w.sum(axis=1, keepdims=True)
            order, ready = ref.resident_first(ids, resident)
            problems = compare({"topk_ids": ids, "order": order, "num_ready": ready}, got)
            if not problems and np.abs(got["topk_weights"] - w).max() > 1e-5:
                problems.append("weights differ by more than 1e-5")
        r.check(f"expertflow_route T={T} bonus={bonus} resident={n_res} "
                f"(ready {got.get('num_ready', [0])[0]})", problems)


def test_errors(r):
    # (label, (text, shape, entry), inputs, knobs, message)
    dynaexq = (shipped("dynaexq"), {"experts": 128}, None)
    dyn_inputs = {"hotness": np.zeros(128, np.float32), "counts": np.zeros(128, np.int32),
                  "current": np.zeros(128, bool)}
    cases = [
        ("EPLB: groups not dividing experts", (eplb_policy(64, 72, 5, 1, 8), None, None),
         {}, {}, "groups (5) must divide the 64 experts in hierarchical mode"),
        ("EPLB: fewer slots than experts", (eplb_policy(64, 56, 8, 1, 8), None, None), {}, {},
         "phy2log must have a static number of slots >= experts (64)"),
        ("EPLB: NaN loads", (eplb_policy(16, 24, 4, 2, 4), None, None),
         {"loads": np.array([1.0] * 7 + [np.nan] + [1.0] * 8, np.float32)}, {},
         "holds NaN at flat index 7"),
        ("EPLB (generic): slots not split over the GPUs",
         (shipped("eplb"), dict(native("eplb"), slots=300), None),
         {"loads": np.ones(256, np.float32)}, {}, "the 300 slots must split evenly over 8 gpus"),
        ("EPLB (generic): nodes unbound",
         (shipped("eplb"), dict(native("eplb"), nodes=None), None),
         {"loads": np.ones(256, np.float32)}, {}, "generic in nodes: bind it (--nodes"),
        ("DynaExq: budget below one expert", dynaexq, dyn_inputs, {"budget_bytes": 1000},
         "a budget of 1000 bytes cannot hold"),
        ("DynaExq: alpha out of range", dynaexq, dyn_inputs, {"alpha": 1.0},
         "alpha must be in [0, 1)"),
        ("DynaExq: unknown knob", dynaexq, dyn_inputs, {"alpah": 0.5}, "alpah"),
        ("DynaExq: hotness of another expert count", dynaexq,
         dict(dyn_inputs, hotness=np.zeros(64, np.float32)), {}, "hotness"),
    ]
    libra = (shipped("libra"), libra_shape(128, 8, 8), "libra")
    ok_ids = {"next_topk_ids": np.zeros((4, 8), np.int32), "token_gpu": np.zeros(4, np.int32)}
    cases += [
        ("Libra: experts not split evenly over GPUs",
         (shipped("libra"), libra_shape(60, 8, 8), "libra"), ok_ids, {},
         "the 60 experts must split evenly over the 8 GPUs"),
        ("Libra: alpha above 1", libra, ok_ids, {"alpha": 1.5}, "alpha must be in [0, 1]"),
        ("Libra: more imports than experts", libra, ok_ids, {"extra_experts": 500},
         "extra must be in [0, 128], got 500"),
        ("Libra: negative epsilon", libra, ok_ids, {"epsilon": -0.1},
         "epsilon must be >= 0, got -1.000000e-01"),
        ("Libra: token_gpu length", libra,
         {"next_topk_ids": np.zeros((4, 8), np.int32), "token_gpu": np.zeros(5, np.int32)}, {},
         "token_gpu"),
        ("Libra: ids of another top-k", libra,
         {"next_topk_ids": np.zeros((4, 6), np.int32), "token_gpu": np.zeros(4, np.int32)}, {},
         "next_topk_ids"),
    ]
    ef = (shipped("expertflow"), native("expertflow"), "expertflow")
    ef_inputs = {"pregate_mass": np.ones(64, np.float32), "requested": np.zeros(64, bool),
                 "resident": np.zeros(64, bool), "last_use": np.full(64, -1, np.int32),
                 "now": np.zeros(1, np.int32), "step": np.zeros(1, np.int32),
                 "stalls": np.zeros(1, np.int32), "overfetches": np.zeros(1, np.int32),
                 "events": np.zeros(3, np.int32)}
    nan_mass = dict(ef_inputs, pregate_mass=np.array([np.nan] + [1.0] * 63, np.float32))
    cases += [
        ("ExpertFlow: a cache that cannot hold one expert", ef, ef_inputs, {"capacity": 0},
         "capacity must be in [1, 64], got 0"),
        ("ExpertFlow: zero bandwidth", ef, ef_inputs, {"bandwidth": 0.0},
         "bandwidth must be > 0, got 0.000000e+00"),
        ("ExpertFlow: threshold 0", ef, ef_inputs, {"threshold": 0.0},
         "threshold must be in (0, 1]"),
        ("ExpertFlow: NaN pre-gate mass", ef, nan_mass, {}, "holds NaN at flat index 0"),
        ("ExpertFlow: wrong state shape", ef, dict(ef_inputs, now=np.zeros(2, np.int32)), {},
         "now"),
    ]
    for label, (text, shape, entry), inputs, knobs, message in cases:
        if not inputs:
            E = int(text.split("tensor<")[1].split("x")[0])
            inputs = {"loads": np.ones(E, np.float32)}
        rc, out, _ = r.run(text, inputs, knobs, shape=shape, entry=entry)
        problems = []
        if rc == 0:
            problems.append("expected a non-zero exit")
        if message not in out:
            problems.append(f"expected {message!r} in: {out}")
        if "Stack dump" in out or "PLEASE submit" in out:
            problems.append("crashed")
        r.check("error: " + label, problems)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="switchyard-rules-")
    r = Runner(os.path.abspath(a.build), workdir)
    rng = np.random.default_rng(7)
    try:
        test_eplb(r, rng)
        test_llep(r, rng)
        test_dynaexq(r, rng)
        test_libra(r, rng)
        test_expertflow(r, rng)
        test_errors(r)
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
