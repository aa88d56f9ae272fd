#!/usr/bin/python3
"""Routing traces (python/switchyard/trace, docs/traces.md): the format reads back what
it writes (float32 and bfloat16 logits, the plain layout) and names the file of every
malformation; evaluate() and moe-eval report each metric as an independent numpy
reference computes it. Run: python3 test/exec/test_trace_eval.py --build build"""
import argparse
import json
import os
import shutil
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
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from policy_shapes import import_switchyard
    sy = import_switchyard(args.build)
    import switchyard.trace as sy_trace

    passed = failed = 0

    def check(label, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {label}")
        else:
            failed += 1
            print(f"FAIL {label} {detail}")

    work = tempfile.mkdtemp(prefix="trace-eval-")
    try:
        trace = synthetic_trace(sy_trace)
        check_format(sy, sy_trace, trace, work, check)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


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


if __name__ == "__main__":
    sys.exit(main())
