#!/usr/bin/python3
"""The Python package (python/switchyard, this build's copy in BUILD/python) on NumPy
arrays: switchyard.compile + Router check every input the way moe-run does, check knobs
by their rules (compile(knobs=) defaults and per-call knobs), raise the compiler's own
diagnostics as CompileError, and leave nothing half-written in the policy cache (a
fresh SWITCHYARD_CACHE_DIR here). Run: python3 test/exec/test_python_api.py --build build"""
import argparse
import os
import shutil
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
    # A private policy cache: every compile below is a miss, and what a failed compile
    # leaves behind shows.
    cache = tempfile.mkdtemp(prefix="python-api-cache-")
    os.environ["SWITCHYARD_CACHE_DIR"] = cache
    sys.path.insert(0, os.path.join(ROOT, "test", "support"))
    from policy_shapes import import_switchyard, native_shape
    sy = import_switchyard(args.build)

    from checks import Checks
    check = Checks()

    def raises(label, fn, needle, kind=None):
        """`fn` raises a SwitchyardError (of `kind`, when given) whose message holds
        `needle`; returns the error."""
        kind = kind or sy.SwitchyardError
        try:
            fn()
        except sy.SwitchyardError as e:
            check(label, isinstance(e, kind) and needle in str(e),
                  f"({type(e).__name__}: {e})")
            return e
        except Exception as e:  # noqa: BLE001 - any other exception is the failure
            check(label, False, f"(raised {type(e).__name__}: {e})")
            return None
        check(label, False, "(no error)")
        return None

    def cache_entries():
        """The cache's artifact directories, and whether each is complete."""
        return {name: os.path.isfile(os.path.join(cache, name, "manifest.json"))
                for name in os.listdir(cache) if name not in ("sources", "models")}

    xshare = sy.compile(os.path.join(POLICIES, "xshare.mlir"), experts=128, top_k=4)
    spec = sy.compile(os.path.join(POLICIES, "xshare_spec.mlir"),
                      model=os.path.join(MODELS, "gpt-oss-120b.json"))
    ep = sy.compile(os.path.join(POLICIES, "xshare_ep.mlir"), experts=256, top_k=8, devices=8)
    # A file whose only entry is a rule: the rule is named.
    eplb = sy.compile(os.path.join(POLICIES, "eplb.mlir"), entry="eplb", **native_shape("eplb"))
    check("compiled policies land in SWITCHYARD_CACHE_DIR", sy.cache_dir() == cache and
          len(cache_entries()) == 4 and all(cache_entries().values()), f"{cache_entries()}")
    check("compiling the same policy and shape again reuses it",
          sy.compile(os.path.join(POLICIES, "xshare.mlir"), experts=128, top_k=4) is xshare
          and len(cache_entries()) == 4)

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((6, 128)).astype(np.float32)
    out = xshare(logits=logits)
    check("a call returns every output", out["topk_ids"].shape == (6, 4) and
          out["selected"].dtype == bool and out["expert_counts"].sum() == 24)

    raises("unknown input name", lambda: xshare(logits=logits, logit=logits),
           "unknown argument 'logit' for @xshare (its arguments: logits)", sy.InputError)
    raises("missing input", lambda: xshare(),
           "missing required argument 'logits' (float32 [?, 128])", sy.InputError)
    raises("wrong expert count", lambda: xshare(logits=logits[:, :64]),
           "argument 'logits': expected float32 [?, 128], got shape (6, 64)", sy.InputError)
    raises("wrong rank", lambda: xshare(logits=logits[0]),
           "argument 'logits': expected float32 [?, 128], got shape (128,)", sy.InputError)
    raises("float64 is not narrowed", lambda: xshare(logits=logits.astype(np.float64)),
           "float64 data is not narrowed implicitly", sy.InputError)
    raises("integers are not logits", lambda: xshare(logits=np.zeros((6, 128), np.int32)),
           "argument 'logits': expected float32, float16 or bfloat16 data, got int32",
           sy.InputError)

    raises("token counts must agree", lambda: spec(logits=logits,
                                                   request_ids=np.zeros(5, np.int32)),
           "argument 'request_ids': has 5 tokens but argument 'logits' has 6", sy.InputError)

    ep_inputs = {"logits": rng.standard_normal((4, 256)).astype(np.float32),
                 "bias": np.zeros(256, np.float32),
                 "placement": np.arange(256, dtype=np.int32).reshape(256, 1)}
    out = ep(**ep_inputs)
    check("placement binds", out["topk_ids"].shape == (4, 8))
    shared = ep_inputs["placement"].copy()
    shared[7, 0] = 3
    raises("a slot held twice", lambda: ep(**{**ep_inputs, "placement": shared}),
           "argument 'placement': slot 3 holds both expert 3 and expert 7", sy.InputError)
    raises("a placement of the wrong size",
           lambda: ep(**{**ep_inputs, "placement": np.arange(8, dtype=np.int32)}),
           "expected an int32 log2phy table [256, <=1] (or [256])", sy.InputError)

    lynx = sy.compile(os.path.join(POLICIES, "lynx.mlir"), experts=60, top_k=4)
    lynx_logits = rng.standard_normal((3, 60)).astype(np.float32)
    check("a phase binds", lynx(logits=lynx_logits, phase=1)["topk_ids"].shape == (3, 4))
    check("a phase by name binds", np.array_equal(lynx(logits=lynx_logits, phase="decode")[
        "topk_ids"], lynx(logits=lynx_logits, phase=1)["topk_ids"]))
    raises("a phase outside {0, 1, 2}", lambda: lynx(logits=lynx_logits, phase=3),
           "argument 'phase': phase 3 is not one of 0 (prefill), 1 (decode), 2 (mixed)",
           sy.InputError)
    raises("a phase that is not an integer", lambda: lynx(logits=lynx_logits, phase=1.5),
           "argument 'phase': expected an integer (int32), got 1.5", sy.InputError)
    raises("a NumPy float phase is not truncated",
           lambda: lynx(logits=lynx_logits, phase=np.float64(1.5)),
           "argument 'phase': expected an integer (int32), got", sy.InputError)

    loads = (rng.random(256) * 10).astype(np.float32)
    plan = eplb(loads=loads)
    check("a rule runs", plan["phy2log"].shape[0] >= 256)
    bad = loads.copy()
    bad[5] = np.inf
    raises("rule inputs must be finite", lambda: eplb(loads=bad),
           "argument 'loads': holds +inf at flat index 5", sy.InputError)
    bad[5] = np.nan
    raises("rule inputs must not be NaN", lambda: eplb(loads=bad),
           "argument 'loads': holds NaN at flat index 5", sy.InputError)

    # A knob default the compiler rejects (policy text): its diagnostic, file:line:col.
    broken = open(os.path.join(POLICIES, "xshare.mlir")).read().replace(
        'moe.knob "budget" = 24', 'moe.knob "budget" = -1')
    error = raises("compiler diagnostics surface", lambda: sy.compile(broken, experts=8, top_k=2),
                   "error: 'moe.fill' op budget must be in [0, inf], got -1", sy.CompileError)
    check("a CompileError's diagnostics carry file:line:col",
          error is not None and [(d.line, d.column, d.severity) for d in error.diagnostics]
          == [(31, 12, "error")], f"({error.diagnostics if error else None})")
    raises("compile(knobs=) defaults are checked by their rules", lambda: sy.compile(
        os.path.join(POLICIES, "xshare.mlir"), knobs={"budget": -1}, experts=8, top_k=2),
        "knob 'budget': budget must be in [0, inf], got -1 (moe.fill at xshare.mlir:31:12)",
        sy.KnobError)
    raises("unknown knob", lambda: sy.compile(os.path.join(POLICIES, "xshare.mlir"),
                                              knobs={"budgte": 3}, experts=8, top_k=2),
           "unknown knob 'budgte' for @xshare (its knobs: k0, budget, set_budget)", sy.KnobError)
    raises("a generic policy needs its shape", lambda: sy.compile(
        os.path.join(POLICIES, "xshare.mlir")), "router @xshare is generic in experts",
        sy.CompileError)
    raises("a shape a policy does not use", lambda: sy.compile(
        os.path.join(POLICIES, "xshare.mlir"), experts=8, top_k=2, groups=4),
        "--groups 4 is not used by this policy file", sy.CompileError)
    # One exception class per runtime status code, chosen by the code, not the message.
    from switchyard import _errors
    check("every runtime status code has one exception class",
          set(sy._switchyard.STATUS_CODES) == set(_errors.ERROR_CLASSES))
    bad_model = tempfile.mkdtemp(prefix="python-api-model-")
    with open(os.path.join(bad_model, "config.json"), "w") as f:
        f.write('{"model_type": 3}')
    raises("a malformed config.json is a FileFormatError", lambda: sy.Executor(bad_model),
           "model_type", sy.FileFormatError)
    raises("a missing model directory is a FileFormatError", lambda: sy.Executor(
        os.path.join(bad_model, "nope")), "nope", sy.FileFormatError)
    raises("an unknown shape parameter", lambda: sy.compile(
        os.path.join(POLICIES, "xshare.mlir"), expert=8), "unknown shape parameter 'expert'")
    libra = sy.compile(os.path.join(POLICIES, "libra.mlir"), entry="libra",
                       **native_shape("libra"))
    ids = rng.integers(0, 128, (6, 8)).astype(np.int32)
    gpus = rng.integers(0, 8, 6).astype(np.int32)
    check("expert ids bind", libra(next_topk_ids=ids, token_gpu=gpus) is not None)
    ids[2, 3] = 128
    raises("expert ids out of range", lambda: libra(next_topk_ids=ids, token_gpu=gpus),
           "argument 'next_topk_ids': expert id 128 at flat index 19 is outside [-1, 128)",
           sy.InputError)
    raises("unknown entry", lambda: sy.compile(os.path.join(POLICIES, "libra.mlir"),
                                               entry="nope", **native_shape("libra")),
           "no router or rule @nope in the policy (entries: libra_predict, libra, libra_shard)",
           sy.CompileError)
    # Knobs at run time: one compiled library, called with different knob values,
    # matches the reference at each setting (no recompiling).
    sys.path.insert(0, HERE)
    import reference as R  # noqa: E402
    tune = sy.compile(os.path.join(POLICIES, "xshare.mlir"), experts=64, top_k=4)
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
    ds = sy.compile(os.path.join(POLICIES, "deepseek_v3.mlir"), experts=64, top_k=6,
                    groups=8, topk_groups=4)
    ds_x = rng.standard_normal((8, 64)).astype(np.float32)
    ds_b = (0.1 * rng.standard_normal(64)).astype(np.float32)
    for factor in (1.0, 2.827):
        got = ds(logits=ds_x, bias=ds_b, knobs={"routed_scaling_factor": factor})
        ref = R.deepseek_v3(ds_x, ds_b, k=6, groups=8, topk_groups=4, scaling=factor)
        check(f"the routed scaling factor {factor} at run time matches the reference",
              np.array_equal(got["topk_ids"], ref["topk_ids"]) and
              np.allclose(got["topk_weights"], ref["topk_weights"], atol=1e-5, rtol=0))
    # A knob's own rules are checked before the call; the value and the op are named
    # (a NaN never reaches them: a float knob takes finite numbers, switchyard/_knobs.py).
    raises("a knob that breaks its rule", lambda: tune(logits=x, knobs={"budget": -1}),
           "knob 'budget': budget must be in [0, inf], got -1 (moe.fill at xshare.mlir:31:12)",
           sy.KnobError)
    raises("a float knob that breaks its rule", lambda: lynx(logits=lynx_x, phase=1,
                                                             knobs={"alpha": float("nan")}),
           "knob 'alpha' takes a finite number, got nan", sy.KnobError)
    # A rule relating several knobs (DynaExq: the byte budget holds one high-precision
    # expert per layer), checked by the compiled code at run time; the entry's status
    # names the first knob of the relation, and a budget that holds five experts per
    # layer gives five.
    dyn = sy.compile(os.path.join(POLICIES, "dynaexq.mlir"), entry="dynaexq", experts=128)
    zeros = dict(hotness=np.zeros(128, np.float32), counts=np.zeros(128, np.int32),
                 current=np.zeros(128, bool))
    for knobs in ({"budget_bytes": 1000}, {"layers": 100000}, {"hi_bytes": 10**12}):
        raises(f"a relation of knobs broken at run time ({knobs})",
               lambda: dyn(knobs=knobs, **zeros),
               "status 4: knob 'budget_bytes' breaks a rule: budget_bytes must be in [0, "
               "inf] (budget of moe.hi_capacity at dynaexq.mlir:38:8); budget >= fixed + "
               "layers * experts * lo_bytes + layers * hi_bytes", sy.KnobError)
    five = 21474836480 + 48 * 128 * 2359296 + 48 * 9437184 * 5
    check("a relation of knobs that holds at run time",
          dyn(knobs={"budget_bytes": five}, **zeros)["hi_set"].sum() == 5)
    raises("an unknown run-time knob", lambda: tune(logits=x, knobs={"budgte": 1}),
           "unknown knob 'budgte' for @xshare (its knobs: k0, budget, set_budget)", sy.KnobError)
    try:
        frozen = sy.compile(os.path.join(POLICIES, "xshare.mlir"), experts=64, top_k=4,
                            knobs={"budget": 7, "k0": 2}, freeze_knobs=True)
        check("frozen knobs compile the values in", frozen.knobs == {} and np.array_equal(
            frozen(logits=x)["topk_ids"],
            tune(logits=x, knobs={"budget": 7, "k0": 2})["topk_ids"]))
    except Exception as e:  # noqa: BLE001
        check("frozen knobs compile the values in", False, f"({type(e).__name__}: {e})")

    # Threaded host loops: the same results on threads and without (T * E = 32768).
    big = np.random.default_rng(5).standard_normal((512, 64)).astype(np.float32)
    threaded = sy.compile(os.path.join(POLICIES, "topk_softmax.mlir"), experts=64, top_k=8)
    single = sy.compile(os.path.join(POLICIES, "topk_softmax.mlir"), experts=64, top_k=8,
                        host_threads_min_work=0)
    a, b = threaded(logits=big), single(logits=big)
    check("threaded and single-threaded host code agree bit for bit",
          all(np.array_equal(a[n], b[n]) for n in ("topk_ids", "topk_weights", "expert_counts")))
    raises("a negative threading threshold",
           lambda: sy.compile(os.path.join(POLICIES, "topk_softmax.mlir"), experts=8, top_k=2,
                              host_threads_min_work=-1),
           "host_threads_min_work must be an integer >= 0, got -1", sy.SwitchyardError)

    entries = cache_entries()
    check("failed compilations leave nothing behind in the cache",
          all(entries.values()) and not any(n.startswith("tmp-") for n in entries),
          f"{sorted(n for n, complete in entries.items() if not complete)}")

    shutil.rmtree(cache, ignore_errors=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
