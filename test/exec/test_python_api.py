#!/usr/bin/python3
"""scripts/switchyard.py (the ctypes binding of compiled policies) checks every input
the way moe-run does, raises the compiler's own diagnostics, and leaves no temporary
directory behind. Run: python3 test/exec/test_python_api.py --build build"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
POLICIES = os.path.join(ROOT, "policies")
MODELS = os.path.join(ROOT, "models")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    os.environ["SWITCHYARD_BUILD_DIR"] = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import switchyard as sy

    passed = failed = 0

    def check(label, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {label}")
        else:
            failed += 1
            print(f"FAIL {label} {detail}")

    def raises(label, fn, needle):
        try:
            fn()
        except sy.SwitchyardError as e:
            check(label, needle in str(e), f"(message: {e})")
            return
        check(label, False, "(no error)")

    # A private temporary root: other tests running in parallel make their own
    # switchyard-* directories in the system one.
    root = tempfile.mkdtemp(prefix="python-api-")
    tempfile.tempdir = root
    before = set(os.listdir(root))
    xshare = sy.CompiledRouter(os.path.join(POLICIES, "xshare.mlir"), experts=128, top_k=4)
    spec = sy.CompiledRouter(os.path.join(POLICIES, "xshare_spec.mlir"),
                             model=os.path.join(MODELS, "gpt-oss-120b.json"))
    ep = sy.CompiledRouter(os.path.join(POLICIES, "xshare_ep.mlir"), experts=256, top_k=8,
                           devices=8)
    eplb = sy.CompiledRouter(os.path.join(POLICIES, "eplb.mlir"), **sy.native_shape("eplb"))
    after = set(os.listdir(root))
    check("no temporary directory left behind", after <= before, f"{sorted(after - before)}")

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 128)).astype(np.float32)
    out = xshare(logits=logits)
    check("a call returns every output", out["topk_ids"].shape == (6, 4) and
          out["selected"].dtype == bool and out["expert_counts"].sum() == 24)

    raises("unknown input name", lambda: xshare(logits=logits, logit=logits),
           "unknown argument 'logit' for @xshare (its arguments: logits)")
    raises("missing input", lambda: xshare(), "missing required argument 'logits' (float32 [?, 128])")
    raises("wrong expert count", lambda: xshare(logits=logits[:, :64]),
           "argument 'logits': expected float32 [?, 128], got shape (6, 64)")
    raises("wrong rank", lambda: xshare(logits=logits[0]),
           "argument 'logits': expected float32 [?, 128], got shape (128,)")
    raises("float64 is not narrowed", lambda: xshare(logits=logits.astype(np.float64)),
           "float64 data is not narrowed implicitly")
    raises("integers are not logits", lambda: xshare(logits=np.zeros((6, 128), np.int32)),
           "expected float32 data, got int32")

    raises("token counts must agree", lambda: spec(logits=logits,
                                                   request_ids=np.zeros(5, np.int32)),
           "argument 'request_ids': has 5 tokens but argument 'logits' has 6")

    ep_inputs = {"logits": rng.standard_normal((4, 256)).astype(np.float32),
                 "bias": np.zeros(256, np.float32),
                 "placement": np.arange(256, dtype=np.int32).reshape(256, 1)}
    out = ep(**ep_inputs)
    check("placement binds", out["topk_ids"].shape == (4, 8))
    shared = ep_inputs["placement"].copy()
    shared[7, 0] = 3
    raises("a slot held twice", lambda: ep(**{**ep_inputs, "placement": shared}),
           "argument 'placement': slot 3 holds both expert 3 and expert 7")
    raises("a placement of the wrong size", lambda: ep(**{**ep_inputs,
                                                          "placement": np.arange(8, dtype=np.int32)}),
           "expected an int32 log2phy table [256, <=1] (or [256])")

    lynx = sy.CompiledRouter(os.path.join(POLICIES, "lynx.mlir"), experts=60, top_k=4)
    lynx_logits = rng.standard_normal((3, 60)).astype(np.float32)
    check("a phase binds", lynx(logits=lynx_logits, phase=1)["topk_ids"].shape == (3, 4))
    raises("a phase outside {0, 1, 2}", lambda: lynx(logits=lynx_logits, phase=3),
           "argument 'phase': phase 3 is not one of 0 (prefill), 1 (decode), 2 (mixed)")
    raises("a phase that is not an integer", lambda: lynx(logits=lynx_logits, phase=1.5),
           "argument 'phase': expected an integer (int32), got 1.5")

    loads = (rng.random(256) * 10).astype(np.float32)
    plan = eplb(loads=loads)
    check("a rule runs", plan["phy2log"].shape[0] >= 256)
    bad = loads.copy()
    bad[5] = np.inf
    raises("rule inputs must be finite", lambda: eplb(loads=bad),
           "argument 'loads': holds +inf at flat index 5")
    bad[5] = np.nan
    raises("rule inputs must not be NaN", lambda: eplb(loads=bad),
           "argument 'loads': holds NaN at flat index 5")

    raises("compiler diagnostics surface", lambda: sy.CompiledRouter(
        os.path.join(POLICIES, "xshare.mlir"), knobs={"budget": -1}, experts=8, top_k=2),
        "budget must be in [0, inf]")
    raises("unknown knob", lambda: sy.CompiledRouter(os.path.join(POLICIES, "xshare.mlir"),
                                                     knobs={"budgte": 3}, experts=8, top_k=2),
           "budgte")
    raises("a generic policy needs its shape", lambda: sy.CompiledRouter(
        os.path.join(POLICIES, "xshare.mlir")), "router @xshare is generic in experts")
    raises("a shape a policy does not use", lambda: sy.CompiledRouter(
        os.path.join(POLICIES, "xshare.mlir"), experts=8, top_k=2, groups=4),
        "--groups 4 is not used by this policy file")
    raises("an unknown shape parameter", lambda: sy.CompiledRouter(
        os.path.join(POLICIES, "xshare.mlir"), expert=8), "unknown shape parameter 'expert'")
    libra = sy.CompiledRouter(os.path.join(POLICIES, "libra.mlir"), entry="libra",
                              **sy.native_shape("libra"))
    ids = rng.integers(0, 128, (6, 8)).astype(np.int32)
    gpus = rng.integers(0, 8, 6).astype(np.int32)
    check("expert ids bind", libra(next_topk_ids=ids, token_gpu=gpus) is not None)
    ids[2, 3] = 128
    raises("expert ids out of range", lambda: libra(next_topk_ids=ids, token_gpu=gpus),
           "argument 'next_topk_ids': expert id 128 at flat index 19 is outside [-1, 128)")
    raises("unknown entry", lambda: sy.CompiledRouter(os.path.join(POLICIES, "libra.mlir"),
                                                      entry="nope", **sy.native_shape("libra")),
           "no router or rule @nope")
    # Knobs at run time: one compiled library, called with different knob structs,
    # matches the reference at each setting (no recompiling).
    sys.path.insert(0, HERE)
    import reference as R  # noqa: E402
    tune = sy.CompiledRouter(os.path.join(POLICIES, "xshare.mlir"), experts=64, top_k=4)
    x = rng.standard_normal((48, 64)).astype(np.float32)
    for knobs in ({}, {"budget": 0}, {"budget": 7, "k0": 2}, {"k0": 0, "budget": 64}):
        got = tune(logits=x, knobs=knobs)
        ref = R.xshare(x, 4, **{"k0": 1, "budget": 24, **knobs})
        same = (np.array_equal(got["topk_ids"], ref["topk_ids"]) and
                np.array_equal(got["selected"], ref["selected"]) and
                np.allclose(got["topk_weights"], ref["topk_weights"], atol=1e-5, rtol=0))
        check(f"run-time knobs {knobs or 'defaults'} match the reference", same)
    lynx_x = rng.standard_normal((16, 60)).astype(np.float32)
    for knobs in ({"alpha": 0.5}, {"alpha": 8.0, "beta": 2, "theta": 3.0}):
        got = lynx(logits=lynx_x, phase=1, knobs=knobs)
        ref = R.lynx(lynx_x, 1, 4, **knobs)
        check(f"run-time float knobs {knobs} match the reference",
              np.array_equal(got["topk_ids"], ref["topk_ids"]) and
              np.allclose(got["topk_weights"], ref["topk_weights"], atol=1e-5, rtol=0))
    ds = sy.CompiledRouter(os.path.join(POLICIES, "deepseek_v3.mlir"), experts=64, top_k=6,
                           groups=8, topk_groups=4)
    ds_x = rng.standard_normal((8, 64)).astype(np.float32)
    ds_b = (0.1 * rng.standard_normal(64)).astype(np.float32)
    for factor in (1.0, 2.827):
        got = ds(logits=ds_x, bias=ds_b, knobs={"routed_scaling_factor": factor})
        ref = R.deepseek_v3(ds_x, ds_b, k=6, groups=8, topk_groups=4, scaling=factor)
        check(f"the routed scaling factor {factor} at run time matches the reference",
              np.array_equal(got["topk_ids"], ref["topk_ids"]) and
              np.allclose(got["topk_weights"], ref["topk_weights"], atol=1e-5, rtol=0))
    raises("a knob the C entry rejects", lambda: tune(logits=x, knobs={"budget": -1}),
           "status 3: knob 'budget' breaks a rule: budget must be in [0, inf] (moe.fill at")
    raises("a float knob the C entry rejects", lambda: lynx(logits=lynx_x, phase=1,
                                                            knobs={"alpha": float("nan")}),
           "knob 'alpha' breaks a rule: alpha must be finite and > 0")
    # A rule relating several knobs (DynaExq: the byte budget holds one high-precision
    # expert per layer), checked by the compiled code at run time; the entry's status
    # names the first knob of the relation, and a budget that holds five experts per
    # layer gives five.
    dyn = sy.CompiledRouter(os.path.join(POLICIES, "dynaexq.mlir"), experts=128)
    zeros = dict(hotness=np.zeros(128, np.float32), counts=np.zeros(128, np.int32),
                 current=np.zeros(128, bool))
    for knobs in ({"budget_bytes": 1000}, {"layers": 100000}, {"hi_bytes": 10**12}):
        raises(f"a relation of knobs broken at run time ({knobs})",
               lambda: dyn(knobs=knobs, **zeros),
               "status 4: knob 'budget_bytes' breaks a rule: budget must be in [0, inf] "
               "(moe.hi_capacity at dynaexq.mlir:38:8); budget >= fixed + layers * experts "
               "* lo_bytes + layers * hi_bytes")
    five = 21474836480 + 48 * 128 * 2359296 + 48 * 9437184 * 5
    check("a relation of knobs that holds at run time",
          dyn(knobs={"budget_bytes": five}, **zeros)["hi_set"].sum() == 5)
    raises("an unknown run-time knob", lambda: tune(logits=x, knobs={"budgte": 1}),
           "unknown knob 'budgte' (the policy's knobs: k0, budget)")
    frozen = sy.CompiledRouter(os.path.join(POLICIES, "xshare.mlir"), experts=64, top_k=4,
                               knobs={"budget": 7, "k0": 2}, freeze_knobs=True)
    check("frozen knobs compile the values in", frozen.knobs == [] and np.array_equal(
        frozen(logits=x)["topk_ids"], tune(logits=x, knobs={"budget": 7, "k0": 2})["topk_ids"]))

    final = set(os.listdir(root))
    check("failed compilations leave nothing behind", final <= before, f"{sorted(final - before)}")

    os.rmdir(root)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
