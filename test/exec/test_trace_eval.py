#!/usr/bin/python3
"""Routing traces (python/switchyard/trace, docs/traces.md): the format reads back what
it writes (float32 and bfloat16 logits, the plain layout) and names the file of every
malformation; evaluate() and moe-eval report each metric as an independent numpy
reference computes it. Run: python3 test/exec/test_trace_eval.py --build build"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

E, K, LAYERS, TOKENS, STEPS = 16, 2, [0, 2, 5], 40, 5


def synthetic_trace(sy_trace, seed=0):
    """E=16, k=2, 3 layers, 40 tokens over 5 steps (8 a step), prefill then decode."""
    rng = np.random.default_rng(seed)
    logits, ids, weights = {}, {}, {}
    for layer in LAYERS:
        x = rng.normal(size=(TOKENS, E)).astype(np.float32) * 2
        x[3, 5] = -np.inf  # an unknown logit
        logits[layer] = x
        top = np.argsort(-x, axis=1, kind="stable")[:, :K]
        ids[layer] = top.astype(np.uint8)
        weights[layer] = np.take_along_axis(x, top, 1).astype(np.float32)
    step = np.repeat(np.arange(STEPS, dtype=np.int32), TOKENS // STEPS)
    phase = (step >= 2).astype(np.uint8)
    return sy_trace.Trace(num_experts=E, top_k=K, logits=logits, ids=ids, weights=weights,
                          request_ids=np.arange(TOKENS, dtype=np.int32) % 4,
                          positions=np.arange(TOKENS, dtype=np.int32), phase=phase,
                          step=step, model="synthetic", source="test")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    os.environ["SWITCHYARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="trace-eval-cache-")
    sys.path.insert(0, os.path.join(ROOT, "test", "support"))
    from policy_shapes import import_switchyard
    sy = import_switchyard(args.build)
    import switchyard.trace as sy_trace

    from checks import Checks
    check = Checks()

    work = tempfile.mkdtemp(prefix="trace-eval-")
    try:
        trace = synthetic_trace(sy_trace)
        check_format(sy, sy_trace, trace, work, check)
        check_evaluate(sy, sy_trace, trace, work, check)
        check_balance(sy_trace, trace, check)
        check_hardware(sy, sy_trace, trace, check)
        check_memory(sy_trace, trace, check)
        check_details(sy, sy_trace, trace, check)
        check_bad_inputs(sy, sy_trace, trace, work, check)
        check_cli(args.build, sy_trace, trace, work, check)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return check.summary()


def check_format(sy, sy_trace, trace, work, check):
    # Round trip, float32.
    native = sy_trace.save_trace(trace, os.path.join(work, "native"))
    back = sy_trace.load_trace(native)
    check("round trip: layers, E, k", back.layers == LAYERS and back.num_experts == E
          and back.top_k == K)
    check("round trip: logits (with -inf) exact",
          all(np.array_equal(back.layer_logits(l), trace.logits[l]) for l in LAYERS))
    check("round trip: ids uint8 and weights exact",
          all(back.ids[l].dtype == np.uint8 and np.array_equal(back.ids[l], trace.ids[l])
              and np.array_equal(back.weights[l], trace.weights[l]) for l in LAYERS))
    check("round trip: per-token arrays",
          all(np.array_equal(getattr(back, n), getattr(trace, n))
              for n in ("request_ids", "positions", "phase", "step")))
    check("round trip: memory-mapped", isinstance(back.logits[0], np.memmap))
    meta = json.load(open(os.path.join(native, "meta.json")))
    check("meta.json: format, version, layers",
          meta["format"] == "switchyard-trace" and meta["version"] == 1
          and meta["layers"] == LAYERS and meta["dtype"] == "float32")

    # bfloat16 logits: stored as uint16 bits, widened exactly.
    bits = {l: sy_trace.format.float32_to_bf16_bits(trace.logits[l]) for l in LAYERS}
    bf = sy_trace.Trace(num_experts=E, top_k=K, logits=bits, step=trace.step)
    back = sy_trace.load_trace(sy_trace.save_trace(bf, os.path.join(work, "bf16")))
    widened = back.layer_logits(0)
    check("bfloat16: dtype in meta, within bf16 rounding, -inf kept",
          back.dtype == "bfloat16" and np.isneginf(widened[3, 5])
          and np.allclose(widened[np.isfinite(widened)],
                          trace.logits[0][np.isfinite(trace.logits[0])], rtol=1 / 128))

    # The plain layout.
    plain = os.path.join(work, "plain")
    os.makedirs(plain)
    np.save(os.path.join(plain, "router_logits.npy"),
            np.stack([trace.logits[l] for l in LAYERS]))
    np.save(os.path.join(plain, "step.npy"), trace.step)
    json.dump({"num_experts": E, "top_k": K}, open(os.path.join(plain, "meta.json"), "w"))
    back = sy_trace.load_trace(plain)
    check("plain layout: layers 0..L-1, step read, phase defaults to prefill",
          back.layers == [0, 1, 2] and np.array_equal(back.step, trace.step)
          and not back.phase.any() and np.array_equal(back.layer_logits(1), trace.logits[2]))

    # Malformed traces: FileFormatError naming the file.
    def broken(label, edit, needle, base=native):
        d = os.path.join(work, "broken")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(base, d)
        edit(d)
        try:
            sy_trace.load_trace(d)
        except sy.FileFormatError as e:
            check(f"malformed: {label}", os.path.join(d, needle) in str(e), f"({e})")
            return
        except Exception as e:  # noqa: BLE001 - any other exception is the failure
            check(f"malformed: {label}", False, f"({type(e).__name__}: {e})")
            return
        check(f"malformed: {label}", False, "(no error)")

    def save(name, array):
        return lambda d: np.save(os.path.join(d, name), array)

    def write_meta(obj):
        return lambda d: open(os.path.join(d, "meta.json"), "w").write(json.dumps(obj))

    nan = trace.logits[2].copy()
    nan[7, 1] = np.nan
    bad_ids = trace.ids[5].copy()
    bad_ids[0, 0] = E
    broken("missing logits file", lambda d: os.remove(os.path.join(d, "layer_2.logits.npy")),
           "layer_2.logits.npy")
    broken("missing meta.json", lambda d: os.remove(os.path.join(d, "meta.json")), "meta.json")
    broken("logits wrong shape", save("layer_0.logits.npy", trace.logits[0][:, :8]),
           "layer_0.logits.npy")
    broken("logits wrong dtype", save("layer_0.logits.npy", trace.logits[0].astype(np.float64)),
           "layer_0.logits.npy")
    broken("NaN logits", save("layer_2.logits.npy", nan), "layer_2.logits.npy")
    broken("ids out of [0, E)", save("layer_5.ids.npy", bad_ids), "layer_5.ids.npy")
    broken("ids wrong dtype", save("layer_5.ids.npy", trace.ids[5].astype(np.int64)),
           "layer_5.ids.npy")
    broken("weights wrong shape", save("layer_0.weights.npy", trace.weights[0][:, :1]),
           "layer_0.weights.npy")
    broken("meta.json not an object", write_meta([1, 2]), "meta.json")
    broken("meta.json without num_experts", write_meta({"top_k": K, "layers": LAYERS}),
           "meta.json")
    broken("meta.json without top_k", write_meta({"num_experts": E, "layers": LAYERS}),
           "meta.json")
    broken("meta.json not JSON", lambda d: open(os.path.join(d, "meta.json"), "w").write("{"),
           "meta.json")
    broken("T mismatch across layers", save("layer_5.logits.npy", trace.logits[5][:30]),
           "layer_5.logits.npy")
    broken("T mismatch: step.npy", save("step.npy", trace.step[:39]), "step.npy")
    broken("step.npy wrong dtype", save("step.npy", trace.step.astype(np.int64)), "step.npy")
    broken("phase out of range", save("phase.npy", np.full(TOKENS, 3, np.uint8)), "phase.npy")
    broken("not a .npy file",
           lambda d: open(os.path.join(d, "positions.npy"), "w").write("x"), "positions.npy")
    broken("plain: wrong shape", save("router_logits.npy", trace.logits[0]),
           "router_logits.npy", base=plain)
    broken("plain: NaN", save("router_logits.npy", np.stack([nan, nan])),
           "router_logits.npy", base=plain)
    unknown = trace.logits[2].copy()
    unknown[9] = -np.inf
    broken("a token with every logit -inf", save("layer_2.logits.npy", unknown),
           "layer_2.logits.npy")

    # What a fuzzer of the reader found crashing it (a Python exception other than
    # FileFormatError) or passing through it.
    def meta_with(**changes):
        def edit(d):
            meta = json.load(open(os.path.join(d, "meta.json")))
            meta.update(changes)
            open(os.path.join(d, "meta.json"), "w").write(json.dumps(meta))
        return edit

    def npz(name):
        def edit(d):
            with open(os.path.join(d, name), "wb") as f:
                np.savez(f, a=np.zeros(TOKENS, np.int32))
        return edit

    def header(name, old, new):   # a same-length edit of a .npy header
        def edit(d):
            data = open(os.path.join(d, name), "rb").read()
            open(os.path.join(d, name), "wb").write(data.replace(old, new, 1))
        return edit

    def replaced(name, make):   # the file replaced by make(path)
        def edit(d):
            os.remove(os.path.join(d, name))
            make(os.path.join(d, name))
        return edit

    broken("an .npz archive named .npy", npz("positions.npy"), "positions.npy")
    broken("a .npy header cut inside the shape", header("step.npy", b"(40,)", b"(40, "),
           "step.npy")
    broken("a directory in place of an optional file", replaced("step.npy", os.makedirs),
           "step.npy")
    broken("a dangling link in place of an optional file",
           replaced("phase.npy", lambda p: os.symlink(p + ".gone", p)), "phase.npy")
    broken("meta.json nested too deeply", lambda d: open(os.path.join(d, "meta.json"), "w")
           .write("[" * 100000 + "]" * 100000), "meta.json")
    broken("groups true", meta_with(groups=True), "meta.json")
    broken("groups > num_experts", meta_with(groups=E + 1), "meta.json")
    broken("layers repeated", meta_with(layers=[0, 0, 2]), "meta.json")
    broken("plain: layers not integers", meta_with(layers=["0", "1", "2"]), "meta.json",
           base=plain)
    broken("plain: a layer null", meta_with(layers=[0, None, 2]), "meta.json", base=plain)
    broken("plain: layers repeated", meta_with(layers=[0, 0, 1]), "meta.json", base=plain)
    broken("plain: no layers (L = 0)",
           save("router_logits.npy", np.zeros((0, TOKENS, E), np.float32)),
           "router_logits.npy", base=plain)
    broken("plain: router_logits.npy a dangling link",
           replaced("router_logits.npy", lambda p: os.symlink(p + ".gone", p)),
           "router_logits.npy", base=plain)
    json.dump({"num_experts": E, "top_k": K, "layers": None},
              open(os.path.join(plain, "meta.json"), "w"))
    try:
        layers = sy_trace.load_trace(plain).layers
    except sy.FileFormatError as e:
        layers = e
    check("plain layout: layers null reads as 0..L-1", layers == [0, 1, 2], f"({layers})")


# --- evaluate(): an independent reference, token by token in float64 ---------------------

PHASES = {0: "prefill", 1: "decode"}


def reference_metrics(trace, ids_of, ranks):
    """{layer: {phase: metrics}} from `ids_of(layer)` ([T, k'] ids, -1 empty), by loops."""
    out = {}
    for layer in LAYERS:
        ids = ids_of(layer)
        logits = trace.logits[layer].astype(np.float64)
        probs = np.exp(logits - logits.max(1, keepdims=True))
        probs /= probs.sum(1, keepdims=True)
        phases = {}
        for name in ["all"] + [PHASES[c] for c in sorted(set(trace.phase.tolist()))]:
            active, masses, tpe_mean, tpe_max, imbalance, peak = [], [], [], [], [], []
            for s in sorted(set(trace.step.tolist())):
                tokens = [t for t in range(TOKENS) if trace.step[t] == s
                          and (name == "all" or PHASES[int(trace.phase[t])] == name)]
                if not tokens:
                    continue
                counts = [0] * E
                for t in tokens:
                    chosen = {int(e) for e in ids[t] if e >= 0}
                    masses.append(sum(probs[t, e] for e in chosen))
                    for e in ids[t]:
                        if e >= 0:
                            counts[int(e)] += 1
                active.append(sum(1 for c in counts if c))
                tpe_mean.append(sum(counts) / max(sum(1 for c in counts if c), 1))
                tpe_max.append(max(counts))
                per = E // ranks
                loads = [sum(counts[r * per:(r + 1) * per]) for r in range(ranks)]
                if sum(loads):
                    imbalance.append(max(loads) / (sum(loads) / ranks))
                peak.append(max(sum(1 for c in counts[r * per:(r + 1) * per] if c)
                                for r in range(ranks)))
            ordered = sorted(active)
            pos = 0.99 * (len(ordered) - 1)
            lo, hi = math.floor(pos), math.ceil(pos)
            p99 = ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
            phases[name] = {"steps": len(active), "tokens": len(masses),
                            "experts_active_mean": sum(active) / len(active),
                            "experts_active_p99": p99,
                            "mass_kept_mean": sum(masses) / len(masses),
                            "tokens_per_expert_mean": sum(tpe_mean) / len(tpe_mean),
                            "tokens_per_expert_max": sum(tpe_max) / len(tpe_max),
                            "ep_imbalance": sum(imbalance) / len(imbalance),
                            "rank_experts_active_max": sum(peak) / len(peak)}
        out[str(layer)] = phases
    return out


def compare(check, label, got, want, model=None):
    """Counts exactly (up to the float64 mean of integers), masses to 1e-5."""
    ok, bad = True, []
    for layer, phases in want.items():
        for phase, metrics in phases.items():
            g = got[layer].get(phase)
            if g is None:
                ok = False
                bad.append(f"{layer}/{phase} missing")
                continue
            for key, value in metrics.items():
                tol = 1e-5 if key == "mass_kept_mean" else 1e-9
                if not abs(g[key] - value) <= tol * max(1.0, abs(value)):
                    ok = False
                    bad.append(f"{layer}/{phase}/{key}: {g[key]} != {value}")
            if model is not None:
                m = model[layer][phase]
                for key in ("experts_active_mean", "experts_active_p99", "mass_kept_mean"):
                    tol = 1e-5 if key == "mass_kept_mean" else 1e-9
                    if not abs(g["model_" + key] - m[key]) <= tol * max(1.0, abs(m[key])):
                        ok = False
                        bad.append(f"{layer}/{phase}/model_{key}: {g['model_' + key]} != "
                                   f"{m[key]}")
    check(label, ok and set(got) == set(want), "; ".join(bad[:6]))


def check_evaluate(sy, sy_trace, trace, work, check):
    native = os.path.join(work, "native")
    model_ref = reference_metrics(trace, lambda l: trace.ids[l].astype(np.int64), 4)

    # topk_softmax: the policy's ids are each token's top-2 logits (computed here).
    def top2(layer):
        return np.argsort(-trace.logits[layer], axis=1, kind="stable")[:, :K]

    report = sy_trace.evaluate(native, "topk_softmax", ranks=4)
    result = report["results"][0]
    compare(check, "evaluate topk_softmax: every metric (ranks 4) against the reference",
            result["layers"], reference_metrics(trace, top2, 4), model_ref)
    check("evaluate topk_softmax: phases all/prefill/decode, 5/2/3 steps",
          {p: m["steps"] for p, m in result["layers"]["0"].items()}
          == {"all": 5, "prefill": 2, "decode": 3})
    check("evaluate topk_softmax: the model's own routing is top-2 (same numbers)",
          all(abs(m["experts_active_mean"] - m["model_experts_active_mean"]) == 0
              and abs(m["mass_kept_mean"] - m["model_mass_kept_mean"]) < 1e-6
              for phases in result["layers"].values() for m in phases.values()))

    # xshare: the policy's ids from the router itself, one call per step; metrics by the
    # reference.
    router = sy.compile("xshare", experts=E, top_k=K)
    for budget in (0, 3):
        def xshare_ids(layer, budget=budget):
            ids = np.full((TOKENS, K), -1, np.int64)
            for s in range(STEPS):
                t = np.nonzero(trace.step == s)[0]
                ids[t] = router(logits=np.ascontiguousarray(trace.logits[layer][t]),
                                knobs={"budget": budget})["topk_ids"]
            return ids
        report = sy_trace.evaluate(trace, "xshare", knobs={"budget": budget}, ranks=2)
        compare(check, f"evaluate xshare budget={budget}: every metric (ranks 2)",
                report["results"][0]["layers"], reference_metrics(trace, xshare_ids, 2))

    # xshare_ep: the trace gives no bias (zeros) and the home placement (expert e in
    # slot e, `ranks` devices); the same ids as the router called with those.
    ep = sy.compile("xshare_ep", experts=E, top_k=K, devices=4, slots=E)
    feeds = {"bias": np.zeros(E, np.float32),
             "placement": np.arange(E, dtype=np.int32).reshape(E, 1)}

    def ep_ids(layer):
        ids = np.full((TOKENS, K), -1, np.int64)
        for s in range(STEPS):
            t = np.nonzero(trace.step == s)[0]
            ids[t] = ep(logits=np.ascontiguousarray(trace.logits[layer][t]),
                        knobs={"device_budget": 1}, **feeds)["topk_ids"]
        return ids
    report = sy_trace.evaluate(trace, "xshare_ep", knobs={"device_budget": 1}, ranks=4)
    compare(check, "evaluate xshare_ep device_budget=1: zero bias, home placement (ranks 4)",
            report["results"][0]["layers"], reference_metrics(trace, ep_ids, 4))

    # A sweep of xshare's budget: experts_active never decreases, and grows.
    report = sy_trace.evaluate(trace, "xshare", sweep="budget=0:8:2")
    budgets = [r["knobs"]["budget"] for r in report["results"]]
    check("sweep budget=0:8:2: settings 0, 2, 4, 6, 8", budgets == [0, 2, 4, 6, 8], budgets)
    series = {(l, p): [r["layers"][l][p]["experts_active_mean"] for r in report["results"]]
              for l in report["results"][0]["layers"]
              for p in report["results"][0]["layers"][l]}
    check("sweep: experts_active_mean monotone in budget (every layer and phase)",
          all(all(a <= b for a, b in zip(v, v[1:])) for v in series.values())
          and all(v[-1] > v[0] for v in series.values()), series)
    masses = [r["layers"]["0"]["all"]["mass_kept_mean"] for r in report["results"]]
    check("sweep: mass_kept_mean monotone in budget",
          all(a <= b + 1e-7 for a, b in zip(masses, masses[1:])), masses)

    # Bad arguments.
    for label, fn, needle in (
            ("ranks not dividing E", lambda: sy_trace.evaluate(trace, "xshare", ranks=3),
             "ranks"),
            ("sweep without a range", lambda: sy_trace.evaluate(trace, "xshare",
                                                                sweep="budget=4"),
             "budget=4"),
            ("unknown knob", lambda: sy_trace.evaluate(trace, "xshare", knobs={"nope": 1}),
             "nope"),
            ("a rule, not a router", lambda: sy_trace.evaluate(trace, "eplb"),
             "--balance")):
        try:
            fn()
            check(f"evaluate error: {label}", False, "(no error)")
        except sy.InputError as e:
            check(f"evaluate error: {label}", needle in str(e), f"({e})")


def steps_of(trace):
    return [np.nonzero(trace.step == s)[0] for s in range(STEPS)]


def top2_ids(trace, layer):
    return np.argsort(-trace.logits[layer], axis=1, kind="stable")[:, :K].astype(np.int64)


def expert_counts(ids):
    counts = np.zeros(E, np.int64)
    for e in ids.reshape(-1):
        if e >= 0:
            counts[e] += 1
    return counts


def check_balance(sy_trace, trace, check):
    """EPLB from history and Libra (oracle) against rules_reference.py's own EPLB and
    Libra, with the placement arithmetic written out here."""
    sys.path.insert(0, HERE)
    import rules_reference as rref
    ranks, window, redundant = 4, 2, 4
    report = sy_trace.evaluate(trace, "topk_softmax", ranks=ranks, balance="home,eplb,libra",
                               balance_window=window, redundant=redundant)
    bad = []
    for layer in LAYERS:
        ids = top2_ids(trace, layer)
        counts = [expert_counts(ids[t]) for t in steps_of(trace)]
        eplb, libra = [], []
        plan = None
        for i, tokens in enumerate(steps_of(trace)):
            if i and i % window == 0:
                history = np.sum(counts[i - window:i], axis=0).astype(np.float32)
                phy2log, _, replicas = rref.eplb(history, E + redundant, 1, 1, ranks)
                plan = (phy2log, replicas)
            if plan is None:
                loads = counts[i].reshape(ranks, -1).sum(1).astype(np.float64)
            else:
                per_slot = [counts[i][e] / plan[1][e] for e in plan[0]]
                loads = np.array(per_slot).reshape(ranks, -1).sum(1)
            eplb.append(loads.max() / loads.mean())
            req = rref.gpu_requests(ids[tokens], trace.request_ids[tokens] % ranks, ranks, E)
            M = rref.libra_replicate(req, 4, 0.5)
            _, after = rref.libra_shard(req, M, 0.05)
            libra.append(float(rref.imbalance(after)[0]))
        got = report["results"][0]["layers"][str(layer)]["all"]
        for key, want, tol in (("ep_imbalance_eplb", np.mean(eplb), 1e-9),
                               ("ep_imbalance_libra", np.mean(libra), 1e-5)):
            if not abs(got[key] - want) <= tol * max(1.0, want):
                bad.append(f"layer {layer} {key}: {got[key]} != {want}")
    check("balance: EPLB plans from the previous window and Libra's plan per step equal "
          "the references", not bad, "; ".join(bad))
    check("balance: EPLB replans (some layer's imbalance differs from home)",
          any(m["all"]["ep_imbalance_eplb"] != m["all"]["ep_imbalance"]
              for m in report["results"][0]["layers"].values()))
    check("balance: options recorded",
          report["options"]["balance"] == ["home", "eplb", "libra"])
    tuned = sy_trace.evaluate(trace, "topk_softmax", ranks=ranks, balance="libra",
                              balance_knobs={"extra_experts": 2, "alpha": 1.0})
    want = []
    for tokens in steps_of(trace):
        ids = top2_ids(trace, LAYERS[0])[tokens]
        req = rref.gpu_requests(ids, trace.request_ids[tokens] % ranks, ranks, E)
        _, after = rref.libra_shard(req, rref.libra_replicate(req, 2, 1.0), 0.05)
        want.append(float(rref.imbalance(after)[0]))
    got = tuned["results"][0]["layers"][str(LAYERS[0])]["all"]["ep_imbalance_libra"]
    check("balance: Libra's knobs (extra_experts 2, alpha 1) reach the rule",
          abs(got - np.mean(want)) <= 1e-5 and "ep_imbalance_eplb" not in
          tuned["results"][0]["layers"][str(LAYERS[0])]["all"], f"({got} != {np.mean(want)})")


def check_hardware(sy, sy_trace, trace, check):
    """Bytes read and the roofline time on the h100 profile, by hand; speedup vs batch
    size against loops over the same regrouped batches."""
    hidden, inter = 64, 32
    expert_bytes, flops = 3 * hidden * inter * 2, 2.0 * 3 * hidden * inter
    bw, peak = 3.35e12, 989e12
    model = {"hidden_size": hidden, "moe_intermediate_size": inter, "torch_dtype": "bfloat16"}
    report = sy_trace.evaluate(trace, "xshare", knobs={"k0": 1, "budget": 0}, hardware="h100",
                               model=model, batch_sizes=[1, 3, 8])
    router = sy.compile("xshare", experts=E, top_k=K)
    result = report["results"][0]
    bad = []

    def time_of(ids):
        counts = expert_counts(ids)
        return max((counts > 0).sum() * expert_bytes / bw, counts.sum() * flops / peak)

    for layer in LAYERS:
        got = result["layers"][str(layer)]["all"]
        steps = steps_of(trace)
        ids = [router(logits=np.ascontiguousarray(trace.logits[layer][t]),
                      knobs={"k0": 1, "budget": 0})["topk_ids"] for t in steps]
        active = np.mean([(expert_counts(i) > 0).sum() for i in ids])
        want_time = 1e6 * np.mean([time_of(i) for i in ids])
        model_time = 1e6 * np.mean([time_of(trace.ids[layer][t].astype(np.int64))
                                    for t in steps])
        for key, g, w in (("bytes_read_mean", got["bytes_read_mean"], active * expert_bytes),
                          ("modeled_time_us", got["modeled_time_us"]["h100"], want_time),
                          ("model_modeled_time_us", got["model_modeled_time_us"]["h100"],
                           model_time),
                          ("modeled_speedup", got["modeled_speedup"]["h100"],
                           model_time / want_time)):
            if not abs(g - w) <= 1e-9 * max(1.0, abs(w)):
                bad.append(f"layer {layer} {key}: {g} != {w}")
    check("hardware: bytes read, modeled time and speedup on h100 equal the roofline by "
          "hand", not bad, "; ".join(bad))
    decode = np.nonzero(trace.phase == 1)[0]
    curve = result["speedup_vs_batch"]
    want = []
    for size in (1, 3, 8):
        batches = [decode[i:i + size] for i in range(0, decode.size - size + 1, size)]
        policy_time = model_time = 0.0
        for layer in LAYERS:
            for b in batches:
                policy_time += time_of(router(logits=np.ascontiguousarray(
                    trace.logits[layer][b]), knobs={"k0": 1, "budget": 0})["topk_ids"])
                model_time += time_of(trace.ids[layer][b].astype(np.int64))
        want.append(model_time / policy_time)
    check("hardware: speedup vs batch size over regrouped decode tokens",
          curve["tokens"] == "decode" and curve["batch_sizes"] == [1, 3, 8]
          and np.allclose(curve["speedup"]["h100"], want, rtol=1e-9, atol=0),
          f"({curve} != {want})")
    check("hardware: batch 1 with one expert per token is twice as fast as top-2 "
          "(memory-bound)", abs(curve["speedup"]["h100"][0] - 2.0) < 1e-9,
          curve["speedup"]["h100"])
    same = sy_trace.evaluate(trace, "topk_softmax", hardware="a100", model=model,
                             batch_sizes=[4])
    check("hardware: the model's own top-k has speedup 1",
          same["results"][0]["speedup_vs_batch"]["speedup"]["a100"] == [1.0]
          and all(m["all"]["modeled_speedup"]["a100"] == 1.0
                  for m in same["results"][0]["layers"].values()))
    cpu = sy_trace.profiles("this-cpu")["this-cpu"]
    check("hardware: this-cpu is measured (bandwidth and FLOP rate positive)",
          cpu["bandwidth"] > 1e8 and cpu["flops"] > 1e8, cpu)


def check_memory(sy_trace, trace, check):
    """DynaExq and ExpertFlow replays against rules_reference.py's rules, stepped by the
    protocol of memory.py written out here."""
    sys.path.insert(0, HERE)
    import rules_reference as rref
    cache, geometry_bytes = 5, 3 * 64 * 32 * 2
    model = {"hidden_size": 64, "moe_intermediate_size": 32}
    report = sy_trace.evaluate(trace, "topk_softmax", memory="dynaexq,expertflow",
                               cache_experts=cache, model=model)
    bad = []
    for layer in LAYERS:
        ids = top2_ids(trace, layer)
        steps = steps_of(trace)
        # DynaExq, interval 1: the hi set in force when each step runs.
        hotness, current, hits, total = np.zeros(E, np.float32), np.zeros(E, bool), 0, 0
        for tokens in steps:
            chosen = ids[tokens].reshape(-1)
            hits += int(current[chosen].sum())
            total += chosen.size
            out = rref.dynaexq(hotness, expert_counts(ids[tokens]), current, 0.8, 1.0, cache)
            hotness, current = out["hotness_out"], out["hi_set"]
        # ExpertFlow: demand + prefetch after each step; stalls and overfetches as events.
        probs = np.exp(trace.logits[layer] - trace.logits[layer].max(1, keepdims=True))
        probs = (probs / probs.sum(1, keepdims=True)).astype(np.float32)
        resident, last_use = np.zeros(E, bool), np.full(E, -1, np.int32)
        step, stalls, over, prefetched = 0, 0, 0, np.zeros(E, bool)
        ef_hits = ef_total = 0
        stall_s = []
        for now, tokens in enumerate(steps):
            requested = np.zeros(E, bool)
            requested[ids[tokens].reshape(-1)] = True
            missed = requested & ~resident
            ef_hits += int((requested & resident).sum())
            ef_total += int(requested.sum())
            stall_s.append(missed.sum() * geometry_bytes / 2.5e10)
            events = [1] * int(missed.sum()) + [2] * int((prefetched & ~requested).sum())
            expected, ne = rref.expected_experts(probs[tokens].sum(0), 0.9)
            s0 = rref.step_size(ne, geometry_bytes, 2.5e10, 4e-4, len(LAYERS))
            step, stalls, over, _ = rref.step_feedback(step, s0, stalls, over, events, 4, 8,
                                                       len(LAYERS))
            lru = rref.two_level_lru(resident, last_use, requested, expected, now, step,
                                     cache)
            loads = lru["loads"][lru["loads"] >= 0]
            prefetched = np.zeros(E, bool)
            prefetched[loads] = True
            prefetched &= ~requested
            resident, last_use = lru["resident_out"], lru["last_use_out"]
        got = report["results"][0]["layers"][str(layer)]["all"]
        for key, want in (("dynaexq_hi_hit_rate", hits / total),
                          ("expertflow_hit_rate", ef_hits / ef_total),
                          ("expertflow_stall_ms_mean", 1e3 * np.mean(stall_s))):
            if not abs(got[key] - want) <= 1e-9 * max(1.0, want):
                bad.append(f"layer {layer} {key}: {got[key]} != {want}")
    check("memory: DynaExq and ExpertFlow replays equal the rules' references",
          not bad, "; ".join(bad))
    # 300 experts: DynaExq's default budget (Qwen3-30B-A3B's) cannot hold them, the replay
    # compiles the rule with the trace's own values.
    wide = sy_trace.Trace(num_experts=300, top_k=4, logits={0: np.random.default_rng(3)
                          .standard_normal((16, 300)).astype(np.float32)},
                          step=np.repeat(np.arange(4), 4).astype(np.int32))
    check.run("memory at E = 300: both replays run (DynaExq's default budget holds fewer "
              "experts)", lambda: sorted(
                  k for k in sy_trace.evaluate(wide, "topk_softmax", memory="dynaexq,expertflow",
                                               cache_experts=32)["results"][0]["layers"]["0"]
                  ["all"] if k.endswith("hit_rate")))
    # 2 experts: Libra's default replica count (4) is more than E.
    two = sy_trace.Trace(num_experts=2, top_k=1, logits={0: np.random.default_rng(4)
                         .standard_normal((16, 2)).astype(np.float32)},
                         step=np.repeat(np.arange(4), 4).astype(np.int32))
    check.run("balance at E = 2, 2 ranks: Libra runs (its default replica count capped at E)",
              lambda: sy_trace.evaluate(two, "topk_softmax", ranks=2, balance="libra")
              ["results"][0]["layers"]["0"]["all"]["ep_imbalance_libra"])
    for label, kwargs, needle in (
            ("memory without cache_experts", {"memory": "dynaexq"}, "cache_experts"),
            ("cache_experts above E", {"memory": "expertflow", "cache_experts": E + 1},
             "cache_experts"),
            ("unknown memory rule", {"memory": "lru", "cache_experts": 2}, "lru"),
            ("unknown balance rule", {"balance": "greedy", "ranks": 2}, "greedy"),
            ("unknown hardware", {"hardware": "tpu", "model": model}, "tpu"),
            ("hardware without expert sizes", {"hardware": "h100"}, "hidden_size"),
            ("batch sizes without hardware", {"batch_sizes": [4]}, "hardware")):
        try:
            sy_trace.evaluate(trace, "topk_softmax", **kwargs)
            check(f"evaluate error: {label}", False, "(no error)")
        except Exception as e:  # noqa: BLE001 - the class is checked too
            check(f"evaluate error: {label}",
                  type(e).__name__ == "InputError" and needle in str(e), f"({e!r})")


def check_details(sy, sy_trace, trace, check):
    """Relative mass, Libra without request ids, float sweeps, batch sizes on a trace
    without the model's ids."""
    sys.path.insert(0, HERE)
    import rules_reference as rref
    from switchyard.trace.evaluate import parse_sweep
    report = sy_trace.evaluate(trace, "xshare", knobs={"budget": 0})
    rel = [m["mass_kept_relative"] - m["mass_kept_mean"] / m["model_mass_kept_mean"]
           for phases in report["results"][0]["layers"].values() for m in phases.values()]
    check("mass_kept_relative = mass kept / the model's mass kept", max(map(abs, rel)) < 1e-12)

    anonymous = sy_trace.Trace(num_experts=E, top_k=K, logits=trace.logits, ids=trace.ids,
                               weights=trace.weights, phase=trace.phase, step=trace.step)
    got = sy_trace.evaluate(anonymous, "topk_softmax", ranks=4, balance="libra")
    want = []
    for tokens in steps_of(trace):
        req = rref.gpu_requests(top2_ids(trace, LAYERS[0])[tokens],
                                np.arange(tokens.size) % 4, 4, E)
        _, after = rref.libra_shard(req, rref.libra_replicate(req, 4, 0.5), 0.05)
        want.append(float(rref.imbalance(after)[0]))
    value = got["results"][0]["layers"][str(LAYERS[0])]["all"]["ep_imbalance_libra"]
    check("Libra on a trace without request ids: tokens round-robin over the ranks",
          abs(value - np.mean(want)) <= 1e-5
          and "no request ids" in got["options"]["libra_token_rank"], f"({value})")

    name, values = parse_sweep("alpha=0.1:0.7:0.2")
    check("float sweeps: 0.1, 0.3, 0.5, 0.7 (no 0.30000000000000004)",
          values == [0.1, 0.3, 0.5, 0.7], values)

    no_ids = sy_trace.Trace(num_experts=E, top_k=K, logits=trace.logits, phase=trace.phase,
                            step=trace.step)
    model = {"hidden_size": 64, "moe_intermediate_size": 32}
    curve = sy_trace.evaluate(no_ids, "topk_softmax", hardware="h100", model=model,
                              batch_sizes=[2])["results"][0]["speedup_vs_batch"]
    check("batch sizes without the model's ids: the top-k of the logits is the baseline",
          curve["speedup"]["h100"] == [1.0], curve)
    try:
        sy_trace.evaluate(trace, "topk_softmax", cache_experts=4)
        check("cache_experts without memory rules is an error", False, "(no error)")
    except sy.InputError as e:
        check("cache_experts without memory rules is an error", "--memory" in str(e), str(e))


def check_bad_inputs(sy, sy_trace, trace, work, check):
    """What a fuzzer found crashing evaluate() on traces load_trace accepts: an error
    naming the input, or a clean result."""
    import warnings

    from switchyard.trace.evaluate import softmax

    def error(label, call, needle):
        try:
            call()
        except sy.InputError as e:
            check(label, needle in str(e), f"({e})")
            return
        except Exception as e:  # noqa: BLE001 - any other exception is the failure
            check(label, False, f"({type(e).__name__}: {e})")
            return
        check(label, False, "(no error)")

    empty = sy_trace.Trace(num_experts=E, top_k=K,
                           logits={l: np.zeros((0, E), np.float32) for l in LAYERS})
    error("a trace of 0 tokens: nothing to evaluate",
          lambda: sy_trace.evaluate(empty, "topk_softmax"), "no tokens")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            probs = softmax(np.array([[3e38, -3e38, 0]], np.float32))
            check("softmax of logits +-3e38: no overflow warning, [1, 0, 0]",
                  probs.tolist() == [[1.0, 0.0, 0.0]], probs)
        except RuntimeWarning as w:
            check("softmax of logits +-3e38: no overflow warning, [1, 0, 0]", False, f"({w})")
    for label, meta in (("hidden_size -1", {"hidden_size": -1}),
                        ("torch_dtype a list", {"torch_dtype": ["bfloat16"]})):
        bad = sy_trace.Trace(num_experts=E, top_k=K, logits=trace.logits, step=trace.step,
                             meta={"hidden_size": 64, "moe_intermediate_size": 32, **meta})
        error(f"meta.json {label}: an error naming meta.json",
              lambda bad=bad: sy_trace.evaluate(bad, "topk_softmax"), "meta.json")
    bad = sy_trace.Trace(num_experts=E, top_k=K, logits=trace.logits, step=trace.step,
                         meta={"hidden_size": 64, "moe_intermediate_size": 0,
                               "intermediate_size": 32})
    error("meta.json moe_intermediate_size 0: an error, not intermediate_size instead",
          lambda: sy_trace.evaluate(bad, "topk_softmax"), "moe_intermediate_size = 0")

    # A Trace built in memory gets load_trace's checks, naming the attribute.
    out_of_range = {**trace.ids, 2: np.full((TOKENS, K), E, np.int64)}
    for label, changes, needle in (
            ("ids out of [0, E)", {"ids": out_of_range}, "Trace.ids[2]"),
            ("phase 7", {"phase": np.full(TOKENS, 7, np.uint8)}, "Trace.phase"),
            ("step shorter than the logits", {"step": trace.step[:5]}, "Trace.step"),
            ("layers of different lengths",
             {"logits": {**trace.logits, 5: trace.logits[5][:30]}}, "Trace.logits[5]"),
            ("1-d logits", {"logits": {**trace.logits, 0: trace.logits[0][0]}},
             "Trace.logits[0]"),
            ("NaN logits",
             {"logits": {**trace.logits, 2: np.full((TOKENS, E), np.nan, np.float32)}},
             "Trace.logits[2]")):
        fields = {"logits": trace.logits, "ids": trace.ids, "weights": trace.weights,
                  "step": trace.step, "phase": trace.phase, **changes}
        made = sy_trace.Trace(num_experts=E, top_k=K, **fields)
        error(f"evaluate(Trace) with {label}: an error naming {needle}",
              lambda made=made: sy_trace.evaluate(made, "topk_softmax"), needle)
    no_weights = sy_trace.Trace(num_experts=E, top_k=K, logits=trace.logits, ids=trace.ids)
    error("save_trace of ids without weights: an error naming Trace.weights",
          lambda: sy_trace.save_trace(no_weights, os.path.join(work, "no-weights")),
          "Trace.weights")
    config = os.path.join(work, "text-config.json")
    json.dump({"text_config": 5}, open(config, "w"))
    error("model config whose text_config is not an object: an error naming it",
          lambda: sy_trace.evaluate(trace, "topk_softmax", hardware="h100", model=config),
          config)


def check_cli(build, sy_trace, trace, work, check):
    native = os.path.join(work, "native")
    out, plots = os.path.join(work, "eval.json"), os.path.join(work, "plots")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    run = subprocess.run([sys.executable, "-m", "switchyard.trace", native, "--policy",
                          "xshare", "--set", "k0=1", "--sweep", "budget=0:4", "--ranks", "2",
                          "--json", out, "--plots", plots],
                         env=env, capture_output=True, text=True)
    check("moe-eval: exit 0", run.returncode == 0, run.stderr[-2000:])
    report = json.load(open(out)) if os.path.isfile(out) else {}
    results = report.get("results", [])
    check("moe-eval: JSON with 5 settings, knobs k0=1 and budget, 3 layers x 3 phases",
          len(results) == 5 and results[0]["knobs"] == {"k0": 1, "budget": 0}
          and set(results[0]["layers"]) == {"0", "2", "5"}
          and set(results[0]["layers"]["0"]) == {"all", "prefill", "decode"}
          and report["policy"] == "xshare" and report["trace"] == native, run.stdout)
    check("moe-eval --sweep budget: no warning about budget's default",
          "warning" not in run.stderr, run.stderr[-2000:])
    defaults = subprocess.run([sys.executable, "-m", "switchyard.trace", native, "--policy",
                               "xshare", "--plots", os.path.join(work, "plots-only")],
                              env=env, capture_output=True, text=True)
    check("moe-eval --plots without --json: exit 0, the plot written; the compiler's "
          "warning about budget's default (24 > E) as a moe-eval line",
          defaults.returncode == 0
          and os.path.isfile(os.path.join(work, "plots-only", "pareto.png"))
          and "moe-eval: " in defaults.stderr
          and "warning: knob 'budget' defaults to 24" in defaults.stderr
          and "CompileWarning" not in defaults.stderr, defaults.stderr[-2000:])
    nothing = subprocess.run([sys.executable, "-m", "switchyard.trace", native, "--policy",
                              "xshare"], env=env, capture_output=True, text=True)
    check("moe-eval without --json or --plots: exit 2, nothing to write",
          nothing.returncode == 2 and "nothing to write" in nothing.stderr, nothing.stderr)
    png = os.path.join(plots, "pareto.png")
    check("moe-eval: plot written (a PNG)", os.path.isfile(png)
          and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n")
    unwritable = subprocess.run(
        [sys.executable, "-m", "switchyard.trace", native, "--policy", "xshare", "--json",
         os.path.join(work, "no", "such", "dir", "out.json")],
        env=env, capture_output=True, text=True)
    check("moe-eval: an unwritable --json exits 2 naming it, before evaluating",
          unwritable.returncode == 2 and "--json" in unwritable.stderr
          and "Traceback" not in unwritable.stderr, unwritable.stderr)
    decode = subprocess.run(
        [sys.executable, "-m", "switchyard.trace", native, "--policy", "xshare", "--phase",
         "decode", "--json", out], env=env, capture_output=True, text=True)
    check("moe-eval --phase decode: the summary shows the model's and the relative mass",
          decode.returncode == 0 and "mass_kept_relative" in decode.stdout
          and "model_mass_kept_mean" in decode.stdout, decode.stdout + decode.stderr)
    for flags, needle in ((["--groups", "2"], "--groups 2 is not used"),
                          (["--shape", "topk_groups=1"], "--topk-groups 1 is not used")):
        unused = subprocess.run([sys.executable, "-m", "switchyard.trace", native, "--policy",
                                 "xshare", *flags, "--json", out],
                                env=env, capture_output=True, text=True)
        check(f"moe-eval {' '.join(flags)}: a size xshare has no use for exits 2 naming it",
              unused.returncode == 2 and needle in unused.stderr
              and "Traceback" not in unused.stderr, unused.stderr)
    bad = subprocess.run([sys.executable, "-m", "switchyard.trace", os.path.join(work, "none"),
                          "--policy", "xshare", "--json", out],
                         env=env, capture_output=True, text=True)
    check("moe-eval: a missing trace exits 2 naming it",
          bad.returncode == 2 and os.path.join(work, "none") in bad.stderr, bad.stderr)
    empty = os.path.join(work, "empty")
    sy_trace.save_trace(sy_trace.Trace(num_experts=E, top_k=K, logits={
        0: np.zeros((0, E), np.float32)}), empty)
    run = subprocess.run([sys.executable, "-m", "switchyard.trace", empty, "--policy",
                          "xshare", "--json", out], env=env, capture_output=True, text=True)
    check("moe-eval: a trace of 0 tokens exits 2 naming it",
          run.returncode == 2 and empty in run.stderr and "Traceback" not in run.stderr,
          run.stderr)
    # moe-exec --capture keeps only the logits of a layer whose policy left a slot empty
    partial = os.path.join(work, "partial-ids")
    sy_trace.save_trace(sy_trace.Trace(
        num_experts=E, top_k=K, logits=trace.logits, ids={l: trace.ids[l] for l in LAYERS[:2]},
        weights={l: trace.weights[l] for l in LAYERS[:2]}, step=trace.step, phase=trace.phase),
        partial)
    sizes = os.path.join(work, "sizes.json")
    json.dump({"hidden_size": 64, "moe_intermediate_size": 32}, open(sizes, "w"))
    run = subprocess.run([sys.executable, "-m", "switchyard.trace", partial, "--policy",
                          "topk_softmax", "--hardware", "h100", "--model", sizes, "--json",
                          out, "--plots", os.path.join(work, "partial-plots")],
                         env=env, capture_output=True, text=True)
    check("moe-eval --hardware --plots, the last layer without the model's ids: exit 0, "
          "the speedup of the layers with them",
          run.returncode == 0 and "modeled_speedup_h100 1.000" in run.stdout,
          run.stdout + run.stderr[-2000:])
    run = subprocess.run([sys.executable, "-m", "switchyard.trace", partial, "--policy",
                          "topk_softmax", "--json", out, "--plots",
                          os.path.join(work, "partial-plots")],
                         env=env, capture_output=True, text=True)
    check("moe-eval --plots, the last layer without the model's ids: exit 0 (the model's "
          "point from the layers with them)", run.returncode == 0, run.stderr[-2000:])


if __name__ == "__main__":
    sys.exit(main())
