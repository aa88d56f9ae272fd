#!/usr/bin/env python3
"""The Python package (python/switchyard): compile + Router on NumPy arrays and torch
tensors (float32/bf16/f16 logits, int64 ids, torch-allocated results), typed errors
with the compiler's file:line:col, the torch custom op (opcheck, torch.compile with
fullgraph), the vLLM/SGLang routing functions, batch metadata, and the executor
bindings against moe-exec. Compared with numpy references written from the routing
definitions (exact ids, weights within 1e-5).

Run: python test/python/test_package.py --build build   (exit 77 without torch)
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402

check = Checks()


def raises(label, fn, error_type, needle):
    try:
        fn()
    except error_type as e:
        check(label, needle in str(e), f"(message: {e})")
        return e
    except Exception as e:  # noqa: BLE001 - the wrong type is the failure
        check(label, False, f"(raised {type(e).__name__}: {e})")
        return None
    check(label, False, "(no error)")
    return None


def softmax_topk(x, k, renormalize=True):
    """vLLM's fused_topk / Mixtral: softmax in float32, top-k, optional renormalize."""
    x = x.astype(np.float32)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.argsort(-x, axis=-1, kind="stable")[:, :k].astype(np.int32)
    w = np.take_along_axis(p, ids, -1)
    if renormalize:
        w = w / w.sum(-1, keepdims=True)
    return ids, w.astype(np.float32)


def same_routing(ids, weights, ref_ids, ref_weights):
    ids, weights = np.asarray(ids), np.asarray(weights)
    return (np.array_equal(ids, ref_ids) and
            np.allclose(weights, ref_weights, atol=1e-5, rtol=0))


LAZY_CHILD = r"""
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
HEAVY = ("torch", "transformers", "vllm", "sglang")
def loaded():
    return sorted(m for m in HEAVY if m in sys.modules)
import switchyard
seen = {"import switchyard": loaded()}
for name in ("hf", "trace", "vllm", "sglang"):
    module = getattr(switchyard, name)
    seen[name] = loaded()
    seen[name + " is the submodule"] = module is sys.modules["switchyard." + name]
seen["dir"] = sorted(n for n in ("hf", "ops", "sglang", "trace", "vllm")
                     if n in dir(switchyard))
try:
    switchyard.no_such_thing
    seen["unknown"] = None
except AttributeError as e:
    seen["unknown"] = str(e)
seen["torch installed"] = importlib.util.find_spec("torch") is not None
if seen["torch installed"]:
    switchyard.ops
    seen["ops"] = loaded()
print(json.dumps(seen))
"""


def lazy_submodules(build):
    """switchyard.hf / .trace / .vllm / .sglang / .ops are attributes after a bare
    `import switchyard` (module __getattr__), and neither that import nor reaching
    hf, trace, vllm or sglang loads torch, transformers or vLLM; .ops (the torch custom
    op) loads torch. In a fresh interpreter: this test imports torch itself."""
    import json
    done = subprocess.run([sys.executable, "-c", LAZY_CHILD, os.path.join(build, "python")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        check("lazy submodules (fresh interpreter)", False, done.stderr.strip()[-2000:])
        return
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    check("import switchyard loads no torch / transformers / vLLM",
          seen["import switchyard"] == [], f"(loaded: {seen['import switchyard']})")
    for name in ("hf", "trace", "vllm", "sglang"):
        check(f"switchyard.{name} is reachable without torch / transformers / vLLM",
              seen[name] == [] and seen[f"{name} is the submodule"], f"(loaded: {seen[name]})")
    check("dir(switchyard) lists the lazy submodules",
          seen["dir"] == ["hf", "ops", "sglang", "trace", "vllm"], f"(listed: {seen['dir']})")
    check("an unknown attribute is still AttributeError",
          seen["unknown"] == "module 'switchyard' has no attribute 'no_such_thing'",
          f"(got: {seen['unknown']!r})")
    if seen["torch installed"]:
        check("switchyard.ops (the torch custom op) loads torch on access",
              "torch" in seen["ops"], f"(loaded: {seen['ops']})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    sys.path.insert(0, os.path.join(build, "python"))
    lazy_submodules(build)
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (scripts/setup.sh installs it into .venv)")
        return 77
    import switchyard
    sy = switchyard   # switchyard.ops / .vllm / .sglang below: lazy attributes

    rng = np.random.default_rng(0)
    x = rng.standard_normal((37, 64)).astype(np.float32)
    ref_ids, ref_w = softmax_topk(x, 8)

    # -- compile and call ---------------------------------------------------------------
    router = sy.compile("topk_softmax", experts=64, top_k=8)
    check("shipped policies by name", "xshare" in sy.shipped_policies()
          and os.path.isfile(sy.policy_path("xshare")))
    check("the same compile is one Router", sy.compile("topk_softmax", experts=64, top_k=8)
          is router)
    out = router(logits=x)
    check("numpy in, numpy out", isinstance(out["topk_ids"], np.ndarray)
          and out["topk_ids"].dtype == np.int32 and out["topk_weights"].dtype == np.float32)
    check("numpy routing = softmax top-k reference",
          same_routing(out["topk_ids"], out["topk_weights"], ref_ids, ref_w))
    check("positional logits", np.array_equal(router(x)["topk_ids"], ref_ids))
    listed = router.list()
    check("list(): arguments, results, knobs", listed["entry"] == "topk_softmax" and
          listed["arguments"] == [{"name": "logits", "dtype": "float32", "shape": "[?, 64]"}]
          and listed["results"][0]["name"] == "topk_ids" and listed["knobs"] == [])
    entries = sy.list_entries("libra", model=os.path.join(ROOT, "models", "qwen3-30b-a3b.json"),
                              devices=8)
    check("list_entries: every router and rule of a file",
          [e["name"] for e in entries] == ["libra_predict", "libra", "libra_shard"])
    t = torch.from_numpy(x)
    tout = router(logits=t)
    check("torch in, torch out (torch-allocated results)",
          isinstance(tout["topk_ids"], torch.Tensor) and tout["topk_ids"].dtype == torch.int32
          and tout["topk_weights"].dtype == torch.float32
          and tout["selected"].dtype == torch.bool)
    check("torch routing = reference",
          same_routing(tout["topk_ids"].numpy(), tout["topk_weights"].numpy(), ref_ids, ref_w))
    noncontig = torch.from_numpy(np.asfortranarray(x))
    check("a non-contiguous tensor is made contiguous",
          np.array_equal(router(logits=noncontig)["topk_ids"].numpy(), ref_ids))
    for dtype in (torch.bfloat16, torch.float16):
        low = t.to(dtype)
        r_ids, r_w = softmax_topk(low.float().numpy(), 8)
        got = router(logits=low)
        check(f"{dtype} logits are widened exactly",
              same_routing(got["topk_ids"].numpy(), got["topk_weights"].numpy(), r_ids, r_w))
    empty = router(logits=torch.zeros((0, 64)))
    check("zero tokens", tuple(empty["topk_ids"].shape) == (0, 8))
    slim = sy.compile("topk_softmax", experts=64, top_k=8, outputs=("topk_ids", "topk_weights"))
    sout = slim(logits=t)
    check("outputs= returns only the results asked for", sorted(sout) ==
          ["topk_ids", "topk_weights"] and np.array_equal(sout["topk_ids"].numpy(), ref_ids))
    no_renorm = sy.compile("topk_softmax", experts=64, top_k=8, norm_topk_prob=False)
    r_ids, r_w = softmax_topk(x, 8, renormalize=False)
    nout = no_renorm(logits=x)
    check("norm_topk_prob=False: softmax weights, not renormalized",
          same_routing(nout["topk_ids"], nout["topk_weights"], r_ids, r_w))

    # model= as a path, a dict, a transformers config
    mixtral = os.path.join(ROOT, "models", "mixtral-8x7b.json")
    by_path = sy.compile("topk_softmax", model=mixtral)
    import json
    with open(mixtral) as f:
        config = json.load(f)
    by_dict = sy.compile("topk_softmax", model=config)
    x8 = rng.standard_normal((5, 8)).astype(np.float32)
    check("model= a config.json path and the same config as a dict",
          np.array_equal(by_path(x8)["topk_ids"], by_dict(x8)["topk_ids"])
          and by_path(x8)["topk_ids"].shape == (5, 2))
    text = open(sy.policy_path("topk_softmax")).read()
    check("policy text compiles too",
          np.array_equal(sy.compile(text, experts=64, top_k=8)(x)["topk_ids"], ref_ids))

    # -- errors -------------------------------------------------------------------------
    bad = "moe.router @bad(%logits: tensor<?x8xf32>) -> (ids: tensor<?x2xi32>) {\n" \
          "  %p = moe.softmax %logits : tensor<?x8xf32>\n  moe.frobnicate %p\n}\n"
    e = raises("a bad policy is a CompileError", lambda: sy.compile(bad), sy.CompileError,
               "error:")
    check("CompileError.diagnostics carry file:line:col",
          e is not None and e.diagnostics and e.diagnostics[0].line == 3
          and e.diagnostics[0].column == 3 and e.diagnostics[0].severity == "error",
          f"({e.diagnostics if e else None})")
    # A compiler warning reaches Python: xshare's default budget (24) exceeds 16 experts.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sy.compile("xshare", experts=16, top_k=4)
    ours = [w for w in caught if issubclass(w.category, sy.CompileWarning)]
    check("a compiler warning is a CompileWarning with its file:line:col and source line",
          len(ours) == 1 and "knob 'budget' defaults to 24, more than the 16 experts"
          in str(ours[0].message) and ours[0].message.knob == "budget"
          and ours[0].message.diagnostic.file.endswith("xshare.mlir")
          and ours[0].message.diagnostic.severity == "warning"
          and "moe.fill" in str(ours[0].message) and ours[0].filename == __file__,
          f"({[str(w.message) for w in caught]})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sy.compile("xshare", experts=12, top_k=4, knobs={"budget": 4})
    check("no warning about a knob default the Router's knobs= replace",
          not [w for w in caught if issubclass(w.category, sy.CompileWarning)],
          f"({[str(w.message) for w in caught]})")
    raises("an unknown policy name", lambda: sy.compile("nope"), sy.SwitchyardError,
           "policy 'nope' is not a file, policy text or a shipped policy")
    raises("an unknown target", lambda: sy.compile("topk_softmax", experts=8, top_k=2,
                                                   target="tpu"), sy.SwitchyardError,
           "target 'tpu' is not one of host, cuda")
    raises("an unknown shape parameter", lambda: sy.compile("xshare", expert=8),
           sy.SwitchyardError, "unknown shape parameter 'expert'")
    raises("a generic policy needs its shape", lambda: sy.compile("xshare"), sy.CompileError,
           "generic in experts")
    raises("wrong expert count (InputError)", lambda: router(logits=t[:, :32]), sy.InputError,
           "argument 'logits': expected float32 [?, 64], got shape (37, 32)")
    raises("an unknown argument", lambda: router(logits=t, logit=t), sy.InputError,
           "unknown argument 'logit' for @topk_softmax (its arguments: logits)")
    raises("a missing argument", lambda: router(), sy.InputError,
           "missing required argument 'logits'")
    raises("float64 is not narrowed", lambda: router(logits=t.double()), sy.InputError,
           "float64 data is not narrowed implicitly")
    raises("an unknown result in outputs=", lambda: sy.compile(
        "topk_softmax", experts=64, top_k=8, outputs=("topk_idz",)), sy.CompileError,
        "none of the outputs asked for (topk_idz) is a result of @topk_softmax")
    raises("a knob the policy does not have",
           lambda: sy.compile("topk_softmax", experts=64, top_k=8).__call__(
               logits=t, knobs={"budget": 1}), sy.KnobError, "unknown knob 'budget'")

    # -- knobs --------------------------------------------------------------------------
    xshare = sy.compile("xshare", experts=64, top_k=4)
    check("knobs listed", set(xshare.knobs) == {"k0", "budget", "set_budget"})
    base = xshare(logits=t)
    tight = xshare(logits=t, knobs={"budget": 0})
    check("run-time knobs change the routing without recompiling",
          int(tight["selected"].sum()) <= int(base["selected"].sum()))
    preset = sy.compile("xshare", experts=64, top_k=4, knobs={"budget": 0})
    check("compile(knobs=) sets the defaults",
          torch.equal(preset(logits=t)["selected"], tight["selected"]))
    raises("a knob out of range (KnobError)", lambda: xshare(logits=t, knobs={"budget": -1}),
           sy.KnobError, "budget must be in [0, inf]")
    raises("an unknown knob", lambda: xshare(logits=t, knobs={"budgte": 1}), sy.KnobError,
           "unknown knob 'budgte' for @xshare (its knobs: k0, budget, set_budget)")
    frozen = sy.compile("xshare", experts=64, top_k=4, knobs={"budget": 0}, freeze_knobs=True)
    check("freeze_knobs compiles the values in", frozen.knobs == {} and
          torch.equal(frozen(logits=t)["selected"], tight["selected"]))

    # -- batch metadata -----------------------------------------------------------------
    spec = sy.compile("xshare_spec", experts=64, top_k=4)
    ids = torch.arange(37) // 4   # requests of 4 tokens (int64: converted)
    direct = spec(logits=t, request_ids=ids)
    with sy.batch_metadata(request_ids=ids):
        through = spec(logits=t)
    check("batch_metadata feeds request_ids", torch.equal(direct["topk_ids"], through["topk_ids"]))
    raises("without metadata the input is missing", lambda: spec(logits=t), sy.InputError,
           "missing required argument 'request_ids'")
    other = torch.zeros(37, dtype=torch.int32)
    with sy.batch_metadata(request_ids=ids):
        explicit = spec(logits=t, request_ids=other)
    check("an explicit argument wins over metadata",
          torch.equal(explicit["topk_ids"], spec(logits=t, request_ids=other)["topk_ids"]))
    lynx = sy.compile("lynx", experts=64, top_k=4)
    check("phase by name", torch.equal(lynx(logits=t, phase="decode")["topk_ids"],
                                       lynx(logits=t, phase=1)["topk_ids"]))
    raises("an unknown phase name", lambda: lynx(logits=t, phase="verify"), sy.InputError,
           "'verify' is not prefill, decode or mixed")

    # -- the torch custom op ------------------------------------------------------------
    ids_op, w_op = switchyard.ops.route(slim, logits=t)
    check("ops.route = the direct call", torch.equal(ids_op, sout["topk_ids"])
          and torch.equal(w_op, sout["topk_weights"]))
    key = switchyard.ops.register(slim)
    try:
        torch.library.opcheck(torch.ops.switchyard.route.default, (key, [t], [], ""))
        check("torch.library.opcheck (schema, fake tensor, autograd registration)", True)
    except Exception as e:  # noqa: BLE001
        check("torch.library.opcheck (schema, fake tensor, autograd registration)", False,
              f"({type(e).__name__}: {e})")

    def moe_route(h):
        out = slim(logits=h * 2.0)
        return out["topk_ids"], out["topk_weights"]

    compiled = torch.compile(moe_route, fullgraph=True, dynamic=True)
    eager_ids, eager_w = moe_route(t)
    try:
        c_ids, c_w = compiled(t)
        c2_ids, _ = compiled(t[:5])
        check("torch.compile(fullgraph=True): one graph, same routing as eager",
              torch.equal(c_ids, eager_ids) and torch.equal(c_w, eager_w)
              and torch.equal(c2_ids, moe_route(t[:5])[0]))
    except Exception as e:  # noqa: BLE001
        check("torch.compile(fullgraph=True): one graph, same routing as eager", False,
              f"({type(e).__name__}: {e})")

    # -- engine adapters ----------------------------------------------------------------
    fn = switchyard.vllm.custom_routing_function("topk_softmax")
    hidden = torch.zeros(37, 16)
    weights, vids = fn(hidden, t, 8, True)
    check("vLLM signature: (topk_weights f32, topk_ids i32)", weights.dtype == torch.float32
          and vids.dtype == torch.int32 and tuple(vids.shape) == (37, 8))
    check("vLLM routing function = fused_topk reference",
          same_routing(vids.numpy(), weights.numpy(), ref_ids, ref_w))
    weights, vids = fn(hidden, t, 2, False)
    r_ids, r_w = softmax_topk(x, 2, renormalize=False)
    check("vLLM: E and k from the call, renormalize=False",
          same_routing(vids.numpy(), weights.numpy(), r_ids, r_w))
    s_w, s_ids = switchyard.sglang.custom_routing_function("topk_softmax")(
        hidden_states=hidden, gating_output=t, topk=8, renormalize=True)
    check("SGLang select_experts hook (keyword call)",
          same_routing(s_ids.numpy(), s_w.numpy(), ref_ids, ref_w))
    spec_fn = switchyard.vllm.custom_routing_function("xshare_spec")
    with sy.batch_metadata(request_ids=ids):
        sw, sids = spec_fn(hidden, t, 4, True)
    check("vLLM + batch metadata: XShare-spec = the direct call",
          torch.equal(sids, direct["topk_ids"]) and torch.equal(sw, direct["topk_weights"]))

    # The shape given up front: compiled before tracing, one opaque op under
    # torch.compile(fullgraph=True); the same routing as eager.
    bound_fn = switchyard.vllm.custom_routing_function("topk_softmax", experts=64, top_k=8,
                                                       renormalize=True)
    try:
        graph_fn = torch.compile(lambda h, g: bound_fn(h, g, 8, True), fullgraph=True)
        gw, gids = graph_fn(hidden, t)
        check("vLLM routing function under torch.compile(fullgraph=True) = eager",
              same_routing(gids.numpy(), gw.numpy(), ref_ids, ref_w))
    except Exception as e:  # noqa: BLE001
        check("vLLM routing function under torch.compile(fullgraph=True) = eager", False,
              f"({type(e).__name__}: {e})")
    lazy_fn = switchyard.vllm.custom_routing_function("topk_softmax")
    try:
        torch.compile(lambda h, g: lazy_fn(h, g, 4, True), fullgraph=True)(hidden, t)
        check("vLLM routing function with no shape inside torch.compile: a clear error",
              False, "(no error)")
    except Exception as e:  # noqa: BLE001
        check("vLLM routing function with no shape inside torch.compile: a clear error",
              "experts=, top_k=" in str(e), f"({type(e).__name__}: {str(e)[:200]})")
    # bfloat16 logits are read as they are (widened in the native call): the routing
    # of their float32 values.
    t16 = t.to(torch.bfloat16)
    b_w, b_ids = bound_fn(hidden, t16, 8, True)
    r16_ids, r16_w = softmax_topk(t16.float().numpy(), 8)
    check("vLLM: bfloat16 logits route as their float32 values",
          same_routing(b_ids.numpy(), b_w.numpy(), r16_ids, r16_w))
    # vLLM's contract: empty slots (-1) get weight 0 and an expert the token, else the
    # batch, already uses — inside the compiled code (bind compiles --fill-empty-slots)
    # and in the runtime for entries compiled without it: both = the numpy reference.
    sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
    from reference import engine_contract
    cap = sy.compile("capacity_topk", experts=8, top_k=2, knobs={"capacity_factor": 0.25})
    cap_filled = sy.compile("capacity_topk", experts=8, top_k=2, fill_empty_slots=True,
                            knobs={"capacity_factor": 0.25})
    cap_step = switchyard.vllm.bind("capacity_topk", experts=8, top_k=2,
                                    knobs={"capacity_factor": 0.25})
    x8 = torch.randn(32, 8)
    dropped = cap(logits=x8)
    want_ids, want_w = engine_contract(dropped["topk_ids"].numpy(),
                                       dropped["topk_weights"].numpy(), 8)
    filled = cap_filled(logits=x8)
    check("capacity drops, compiled with --fill-empty-slots: = the reference contract",
          bool((dropped["topk_ids"] < 0).any()) and
          np.array_equal(filled["topk_ids"].numpy(), want_ids) and
          np.allclose(filled["topk_weights"].numpy(), want_w, atol=1e-6))
    choice = sy.compile("expert_choice", experts=8, top_k=2)
    choice_filled = sy.compile("expert_choice", experts=8, top_k=2, fill_empty_slots=True)
    unchosen = choice(logits=x8)
    want_c_ids, want_c_w = engine_contract(unchosen["topk_ids"].numpy(),
                                           unchosen["topk_weights"].numpy(), 8)
    got = choice_filled(logits=x8)
    check("expert choice, compiled with --fill-empty-slots: = the reference contract",
          bool((unchosen["topk_ids"] < 0).any()) and
          np.array_equal(got["topk_ids"].numpy(), want_c_ids) and
          np.allclose(got["topk_weights"].numpy(), want_c_w, atol=1e-6))
    c_w, c_ids = cap_step(x8, [])
    check("capacity drops through the bound call: ids in [0, E), = the reference",
          np.array_equal(c_ids.numpy(), want_ids) and
          np.allclose(c_w.numpy(), want_w, atol=1e-6))

    # (The GPU path of a bound call, runtime::CudaStepRouter, runs through an emulated
    # cudart in exec/cuda-step-router.)

    # -- the executor -------------------------------------------------------------------
    work = tempfile.mkdtemp(prefix="sy-package-")
    ckpt = os.path.join(work, "ckpt")
    subprocess.run([sys.executable, os.path.join(ROOT, "test", "support", "make_checkpoint.py"),
                    "--preset", "mixtral-tiny", "--out", ckpt, "--seed", "3"], check=True,
                   stdout=subprocess.DEVNULL)
    ex = sy.Executor(ckpt)
    info = ex.info
    h = rng.standard_normal((6, info["hidden_size"])).astype(np.float32)
    np.save(os.path.join(work, "h.npy"), h)
    cli = os.path.join(work, "cli")
    subprocess.run([os.path.join(build, "bin", "moe-exec"), ckpt, "--input",
                    os.path.join(work, "h.npy"), "--out", cli], check=True,
                   stdout=subprocess.DEVNULL)
    result = ex.run(h)
    check("Executor.run = moe-exec (bit for bit)",
          np.array_equal(result.output, np.load(os.path.join(cli, "hidden.npy"))))
    layer = info["moe_layers"][0]
    check("routing per layer = moe-exec's replay files",
          np.array_equal(result.routing[layer][0],
                         np.load(os.path.join(cli, f"topk_ids_{layer}.npy"))))
    check("metrics per layer", len(result.metrics["layers"]) == len(info["moe_layers"])
          and "seconds" in result.metrics["layers"][0])
    replayed = sy.Executor(ckpt, "xshare", knobs={"budget": 0}).run(h, replay=result.routing)
    check("replay: another policy replaying the routing gives the same output",
          np.array_equal(replayed.output, result.output))
    blocks = ex.run(torch.from_numpy(h), block_only=True)
    check("block_only: one output per MoE layer", sorted(blocks.output) ==
          sorted(info["moe_layers"]))
    raises("executor: wrong hidden size", lambda: ex.run(h[:, :5]), sy.SwitchyardError,
           "hidden: expected [T, ")
    raises("executor: a missing checkpoint", lambda: sy.Executor(os.path.join(work, "none")),
           sy.SwitchyardError, "none")

    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
