#!/usr/bin/python3
"""Planning-time benchmark of the compiled rules (not a test): each rule compiled by
moe-compile and called through the switchyard package (a Router on NumPy arrays), side
by side in the same run with the straightforward Python/numpy reference of
test/exec/rules_reference.py on the same inputs (and checked equal to it). Median of
repeated calls, microseconds.

    bench_rules.py [--build build] [--repeat 200]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))


def median_us(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e6 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--repeat", type=int, default=200)
    a = ap.parse_args()
    from policy_shapes import import_switchyard
    switchyard = import_switchyard(a.build)
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
        compiled = median_us(lambda: rule(loads=loads), a.repeat)
        p2l, _, cnt = ref.eplb(loads, slots, 8, nodes, gpus)
        assert np.array_equal(outputs["phy2log"], p2l), "compiled EPLB differs from the reference"
        reference = median_us(lambda: ref.eplb(loads, slots, 8, nodes, gpus),
                              max(3, a.repeat // 20))
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
        compiled = median_us(lambda: rule(hotness=hot, counts=counts, current=cur), a.repeat)
        n = ref.hi_capacity(51539607552, 21474836480, 9437184, 2359296, 48, E)
        want = ref.dynaexq(hot, counts, cur, 0.8, 1.0, n)
        assert np.array_equal(outputs["hi_set"].astype(bool), want["hi_set"])
        reference = median_us(lambda: ref.dynaexq(hot, counts, cur, 0.8, 1.0, n),
                              max(3, a.repeat // 20))
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
        compiled = median_us(lambda: rule(next_topk_ids=ids, token_gpu=token_gpu), a.repeat)
        req = ref.gpu_requests(ids, token_gpu, gpus, E)
        m = ref.libra_replicate(req, 4, 0.5)
        plan, after = ref.libra_shard(req, m, 0.05)
        assert np.array_equal(outputs["placement"], m), "compiled Libra plan differs"
        assert np.array_equal(outputs["shard_plan"], plan), "compiled Libra sharding differs"

        def reference():
            r = ref.gpu_requests(ids, token_gpu, gpus, E)
            mm = ref.libra_replicate(r, 4, 0.5)
            return ref.libra_shard(r, mm, 0.05)
        ref_us = median_us(reference, max(3, a.repeat // 50))
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
    compiled = median_us(lambda: rule(**inputs), a.repeat)
    want = expertflow_reference(inputs, {})
    assert np.array_equal(outputs["loads"], want["loads"]), "compiled ExpertFlow differs"
    ref_us = median_us(lambda: expertflow_reference(inputs, {}), max(3, a.repeat // 20))
    rows.append(("ExpertFlow prefetch step, 64 experts, cache 32", compiled, ref_us,
                 f"S = {outputs['step_size'][0]}, {int((outputs['loads'] >= 0).sum())} loads"))

    print("%-44s %12s %14s %8s  %s" % ("rule", "compiled us", "reference us", "speedup", ""))
    for name, c, r, note in rows:
        print("%-44s %12.1f %14.1f %7.0fx  %s" % (name, c, r, r / c, note))


if __name__ == "__main__":
    main()
