#!/usr/bin/python3
"""Planning-time benchmark of the compiled rules (not a test): each rule compiled by
moe-compile and called through the switchyard package (a Router on NumPy arrays), side
by side in the same run with the Python reference of test/exec/rules_reference.py on the
same inputs (and checked equal to it). Median of repeated calls, microseconds.

THE REFERENCE IS A DELIBERATELY SIMPLE ORACLE, NOT A COMPETITOR: plain Python loops over
float32 scalars (so that every sum happens in the documented order), transcribed from
the papers and from DeepSeek's published eplb.py. The "vs loop ref" ratio is not a
speedup over an engine's planner (vLLM's and DeepSeek's EPLB run the same algorithm in
torch; they are not timed here).

Timing (bench_common.Variant): batches of calls of about 5 ms, the compiled rule's
rounds, then the reference's; per call wall and process CPU time (cores = CPU /
wall: the compiled code's threads), and the CPU that threads still spinning burn after
a batch (waited out off the clock; spin ms, per batch). --repeat rounds for the compiled
rule, fewer for the slow reference (at least 3).

    bench_rules.py [--build build] [--repeat 25] [--json OUT]
"""
import argparse
import json
import os

import numpy as np

import bench_common
from bench_common import ROOT, Variant, interleave, summarize


class Timer:
    """compiled / reference timings of one row: (wall us, cores, spin ms) each."""

    def __init__(self, repeat):
        self.repeat = repeat

    def __call__(self, compiled, reference, rounds_divisor):
        samples = interleave({"compiled": Variant(compiled, 5e-3)}, self.repeat, seed=0)
        samples.update(interleave({"reference": Variant(reference, 5e-3)},
                                  max(3, self.repeat // rounds_divisor), seed=0))
        out = {}
        for name, values in samples.items():
            s = summarize(values)
            wall = s["wall_us"]["median"]
            out[name] = (wall, s["cpu_us"]["median"] / wall,
                         s["after_batch_cpu_us"]["median"] / 1e3)
        return out["compiled"], out["reference"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=25,
                    help="rounds of ~5 ms batches for the compiled rules")
    ap.add_argument("--json", default=None, help="write every number here")
    a = ap.parse_args()
    from policy_shapes import import_switchyard
    switchyard = import_switchyard(a.build)
    timed = Timer(a.repeat)
    import rules_reference as ref
    from test_rules import expertflow_reference, predicted_ids

    rng = np.random.default_rng(0)
    rows = []

    def policy(name):  # the shipped generic policies, bound by shape flags below
        return os.path.join(ROOT, "policies", name + ".mlir")

    # EPLB: 256 experts on 8 GPUs (2 nodes, 288 slots) and on 64 GPUs (8 nodes, 320
    # slots); loads are per-expert token counts of a 4096-token batch with top-8
    # routing, skewed (Zipf) as in real traces.
    for gpus, nodes, slots in [(8, 2, 288), (64, 8, 320)]:
        E = 256
        rule = switchyard.compile(policy("eplb"), entry="eplb", experts=E, groups=8,
                                  nodes=nodes, devices=gpus, slots=slots)
        hot = rng.zipf(1.3, E).astype(np.float64)
        loads = np.floor(4096 * 8 * hot / hot.sum()).astype(np.float32)
        outputs = rule(loads=loads)
        p2l, _, cnt = ref.eplb(loads, slots, 8, nodes, gpus)
        assert np.array_equal(outputs["phy2log"], p2l), "compiled EPLB differs from the reference"
        compiled, reference = timed(lambda: rule(loads=loads),
                                    lambda: ref.eplb(loads, slots, 8, nodes, gpus), 20)
        before = ref.imbalance(ref.device_loads(loads, gpus))[0]
        after = outputs["imbalance_after"][0]
        rows.append((f"EPLB 256 experts, {gpus} GPUs, {slots} slots",
                     compiled, reference, f"imbalance {before:.2f} -> {after:.3f}"))

    # DynaExq residency: 128 and 256 experts per layer.
    for E in (128, 256):
        rule = switchyard.compile(policy("dynaexq"), entry="dynaexq", experts=E)
        hot = rng.gamma(1.0, 10.0, E).astype(np.float32)
        counts = rng.poisson(8, E).astype(np.int32)
        cur = np.zeros(E, bool)
        cur[rng.choice(E, 34, replace=False)] = True
        outputs = rule(hotness=hot, counts=counts, current=cur)
        n = ref.hi_capacity(51539607552, 21474836480, 9437184, 2359296, 48, E)
        want = ref.dynaexq(hot, counts, cur, 0.8, 1.0, n)
        assert np.array_equal(outputs["hi_set"].astype(bool), want["hi_set"])
        compiled, reference = timed(lambda: rule(hotness=hot, counts=counts, current=cur),
                                    lambda: ref.dynaexq(hot, counts, cur, 0.8, 1.0, n), 20)
        rows.append((f"DynaExq residency, {E} experts (n_hi = {n})", compiled, reference,
                     f"{want['num_promotions'][0]} promotions"))

    # Libra: 4096 tokens with top-8 predictions over 256 experts, on 8 and 64 GPUs.
    for gpus in (8, 64):
        E, T, k = 256, 4096, 8
        rule = switchyard.compile(policy("libra"), entry="libra", experts=E, top_k=k,
                                  devices=gpus, hidden_size=64)
        ids = predicted_ids(T, E, k, rng, 1.1)
        token_gpu = (np.arange(T) * gpus // T).astype(np.int32)
        outputs = rule(next_topk_ids=ids, token_gpu=token_gpu)
        req = ref.gpu_requests(ids, token_gpu, gpus, E)
        m = ref.libra_replicate(req, 4, 0.5)
        plan, after = ref.libra_shard(req, m, 0.05)
        assert np.array_equal(outputs["placement"], m), "compiled Libra plan differs"
        assert np.array_equal(outputs["shard_plan"], plan), "compiled Libra sharding differs"

        def reference():
            r = ref.gpu_requests(ids, token_gpu, gpus, E)
            mm = ref.libra_replicate(r, 4, 0.5)
            return ref.libra_shard(r, mm, 0.05)
        compiled, ref_us = timed(lambda: rule(next_topk_ids=ids, token_gpu=token_gpu),
                                 reference, 50)
        rows.append((f"Libra 256 experts, {gpus} GPUs, 4096 tokens", compiled, ref_us,
                     "imbalance %.2f -> %.2f -> %.3f" % (outputs["imbalance_before"][0],
                                                         outputs["imbalance_replicated"][0],
                                                         outputs["imbalance_after"][0])))

    # ExpertFlow prefetch step: 64 experts, a cache of 32, 16 feedback events.
    rule = switchyard.compile(policy("expertflow"), entry="expertflow", experts=64, top_k=6)
    E = 64
    mass = (rng.dirichlet(np.full(E, 0.3)) * 32).astype(np.float32)
    requested = np.zeros(E, bool)
    requested[rng.choice(E, 6, replace=False)] = True
    resident = np.zeros(E, bool)
    resident[rng.choice(E, 32, replace=False)] = True
    inputs = {"pregate_mass": mass, "requested": requested, "resident": resident,
              "last_use": rng.integers(-1, 10, E).astype(np.int32),
              "now": np.array([10], np.int32), "step": np.array([4], np.int32),
              "stalls": np.zeros(1, np.int32), "overfetches": np.zeros(1, np.int32),
              "events": rng.integers(0, 3, 16).astype(np.int32)}
    outputs = rule(**inputs)
    want = expertflow_reference(inputs, {})
    assert np.array_equal(outputs["loads"], want["loads"]), "compiled ExpertFlow differs"
    compiled, ref_us = timed(lambda: rule(**inputs), lambda: expertflow_reference(inputs, {}),
                             20)
    rows.append(("ExpertFlow prefetch step, 64 experts, cache 32", compiled, ref_us,
                 f"S = {outputs['step_size'][0]}, {int((outputs['loads'] >= 0).sum())} loads"))

    host = bench_common.machine(numpy=np.__version__, switchyard=switchyard.__version__)
    print(f"Compiled rules vs the test suite's Python reference (plain loops: a simple "
          f"oracle, NOT an optimized planner), same inputs; {host['cpu']}, "
          f"{host['usable_cores']} usable cores.\ncores = compiled CPU / wall per call; spin "
          f"ms = CPU burnt after a batch by threads still spinning (off the clock).")
    print(bench_common.load_line(host, "the threaded compiled calls most"))
    print("%-44s %12s %6s %8s %14s %12s  %s" % ("rule", "compiled us", "cores", "spin ms",
                                                "loop ref us", "vs loop ref", ""))
    for name, c, r, note in rows:
        print("%-44s %12.1f %6.2f %8.1f %14.1f %11.0fx  %s"
              % (name, c[0], c[1], c[2], r[0], r[0] / c[0], note))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": host, "repeat": a.repeat,
                       "notes": {"loop_reference": "test/exec/rules_reference.py: plain "
                                                   "Python loops, a simple oracle, not an "
                                                   "optimized planner"},
                       "rows": [{"rule": name, "compiled_us": c[0], "compiled_cores": c[1],
                                 "compiled_after_batch_cpu_ms": c[2], "loop_reference_us": r[0],
                                 "loop_reference_over_compiled": r[0] / c[0], "note": note}
                                for name, c, r, note in rows]}, f, indent=1)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    raise SystemExit(bench_common.guarded("bench_rules", main))
