"""Switchyard inside a real vLLM engine (vLLM's CPU build in .venv-vllm; the package
installed there registers the plugin). Small random Qwen3-MoE and Mixtral models with
locally built tokenizers (make_model.py); every engine run is a child process
(engine_child.py) because vLLM reads the plugin's settings once per process, forked
from a server that has imported vLLM once (an engine start is mostly imports).

  - topk_softmax through the plugin gives the same greedy tokens as vLLM's native
    router (float32), eager and torch.compile, on Qwen3-MoE and Mixtral, and so does
    deepseek_v3 on DeepSeek-V3 (the layer's e_score_correction_bias as the policy's
    bias; MLA attention); the recorded routing equals the numpy reference (exact
    ids, weights within 1e-5);
  - a bfloat16 model's logits are read in place by an entry compiled with
    --input-dtype logits=bf16, routing = the reference on the widened values;
  - XShare with budget 0 at batch 1 (empty slots) and 8, capacity-limited top-k at
    batch 8 (capacity drops), capacity_drop's Expanded Drop, top_p at p = 0.5 (fewer than
    k experts), MoE-Spec's budget on speculative verify steps: no crash, ids
    in [0, E), filled slots have weight 0 and an expert the token or the batch already
    uses, the rest equals the reference; XShare activates fewer experts than top-k;
    per-layer knobs (SWITCHYARD_KNOBS lists) route each MoE layer with its own value;
  - LYNX reads the phase vLLM's batches have (prefill 0, decode 1) and equals its
    reference per call, in compile mode; XShare-spec gets one request id per request,
    and under n-gram speculative decoding the draft tokens of each request marked;
  - per-request knobs (extra_args) reach the policy; a bad one fails that request
    while the engine keeps serving (the OpenAI server: test_soak.py, ctest vllm/soak);
  - SWITCHYARD_CAPTURE writes a routing trace (DIR/rank-*) that load_trace reads: the
    model's E and k, every MoE layer with tokens, ids in [0, E), equal to the routing
    the plugin returned; evaluate() of the native policy on it activates as many experts
    per layer and step as the trace's own ids; SWITCHYARD_CAPTURE_MAX_TOKENS bounds it;
  - bad settings (unknown policy, a malformed .mlir, unknown knob, bad JSON, a policy
    the model cannot feed) stop the engine at start-up with a message naming the
    policy (file:line:col for the malformed file).

Usage: .venv-vllm/bin/python test/vllm/test_vllm.py [--keep DIR] [--only NAME]
Exit 77 (skipped) when vLLM is not installed in this Python.
"""
import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "exec"))
import reference as ref  # noqa: E402

PROMPTS = ["the a of to and in", "water than call first who may down", "you that he was",
           "for on are with as I his they be at one have this from or had by hot word",
           "but what some we", "can out other were all there when up use your how said",
           "an each she which do their time if will way", "about many then them"]
FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


class EngineServer:
    """engine_child.py --serve: vLLM imported once, each engine run a fork of it (an
    engine start is mostly imports: ~8 of its ~10 s)."""

    def __init__(self, directory):
        self.directory = directory
        self.runs = 0
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "engine_child.py"),
                                      "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, scenario, env, timeout):
        """(exit code, the child's output) of one engine run."""
        self.runs += 1
        output = os.path.join(self.directory, f"engine-{self.runs}.log")
        self.proc.stdin.write(json.dumps({"scenario": scenario, "env": env,
                                          "output": output, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the engine server exited ({self.proc.wait()})")
        with open(output, errors="replace") as f:
            return json.loads(answer)["exit"], f.read()


SERVER = []   # the EngineServer, started by main()


def run_engine(scenario, env=None, expect_failure=False, timeout=600):
    """Runs an engine_child.py scenario; returns (result dict or None, output text)."""
    child_env = dict(os.environ)
    for name in ("SWITCHYARD_POLICY", "SWITCHYARD_KNOBS", "SWITCHYARD_KNOBS_FILE",
                 "SWITCHYARD_CAPTURE", "SWITCHYARD_CAPTURE_MAX_TOKENS"):
        child_env.pop(name, None)
    child_env.update(env or {})
    start = time.time()
    code, output = SERVER[0].run(scenario, child_env, timeout)
    result = None
    for line in output.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    label = (env or {}).get("SWITCHYARD_POLICY", "native")
    print(f"  [{label}, {'eager' if scenario.get('eager', True) else 'compiled'}: "
          f"{time.time() - start:.0f} s, exit {code}]", flush=True)
    if code != 0 and not expect_failure:
        print(output[-6000:])
    return (result if code == 0 else None), output


def load_records(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def check_contract(records, E, what):
    ok = all(((r["ids"] >= 0) & (r["ids"] < E)).all() and r["ids"].dtype == np.int32
             and r["weights"].dtype == np.float32 for r in records)
    check(ok and len(records) > 0, f"{what}: {len(records)} routing calls, every id int32 in "
          f"[0, {E}), weights float32")


def check_against(records, reference, what, filled_ok=False):
    """Every recorded call equals `reference(record)` (ids exact, weights 1e-5); with
    filled_ok, a slot the reference leaves empty (-1) must hold weight 0 and an expert
    the token already uses or, for a token with none, one the batch uses."""
    bad = 0
    filled = 0
    for r in records:
        want = reference(r)
        ids, w = r["ids"], r["weights"]
        want_ids, want_w = want["topk_ids"], want["topk_weights"]
        empty = want_ids < 0
        if empty.any() and not filled_ok:
            bad += 1
            continue
        same = (ids[~empty] == want_ids[~empty]).all() and \
            np.allclose(w[~empty], want_w[~empty], atol=1e-5, rtol=0)
        batch_used = set(want_ids[~empty].tolist())
        for t in range(ids.shape[0]):
            own = set(want_ids[t][want_ids[t] >= 0].tolist())
            for j in np.flatnonzero(empty[t]):
                filled += 1
                allowed = own if own else (batch_used or {0})
                same = same and w[t, j] == 0 and int(ids[t, j]) in allowed
        bad += 0 if same else 1
    check(bad == 0, f"{what}: {len(records)} calls equal the reference"
          + (f" ({filled} empty slots filled with weight 0)" if filled_ok else "")
          + ("" if bad == 0 else f" -- {bad} differ"))
    return filled


def active_per_call(records):
    return float(np.mean([len(np.unique(r["ids"])) for r in records]))


# -- the checks --------------------------------------------------------------------------
# Engine runs that test_capture reads instead of starting engines of its own (an engine
# start costs more than the checks): mode -> (capture directory, record), when the
# native-policy check of that mode ran with SWITCHYARD_CAPTURE in this process.
CAPTURED = {}


def test_native_policy(models, tmp, arch, eager, policy="topk_softmax", reference=None,
                       capture=False):
    """The model's own routing as a policy gives vLLM's native greedy tokens
    (`capture`: the plugin's run also writes a SWITCHYARD_CAPTURE trace for
    test_capture)."""
    mode = "eager" if eager else "compiled"
    scenario = {"model": models[arch], "eager": eager, "prompts": PROMPTS, "max_tokens": 8}
    native, _ = run_engine(scenario)
    record = os.path.join(tmp, f"{policy}-{arch}-{mode}.pkl")
    env = {"SWITCHYARD_POLICY": policy}
    if capture:
        directory = os.path.join(tmp, f"capture-{mode}")
        shutil.rmtree(directory, ignore_errors=True)   # a kept directory's earlier run
        env["SWITCHYARD_CAPTURE"] = directory
    sy, _ = run_engine(dict(scenario, record=record if eager or capture else None), env=env)
    if capture and sy is not None:
        CAPTURED[mode] = (directory, record)
    check(native is not None and sy is not None and native["tokens"] == sy["tokens"],
          f"{arch} {mode}: {policy} through the plugin gives native's greedy tokens "
          f"({len(PROMPTS)} sequences)")
    if eager and sy is not None:
        records = load_records(record)
        k = records[0]["ids"].shape[1]
        reference = reference or (lambda r: ref.topk_softmax(r["logits"], k))
        check_contract(records, records[0]["logits"].shape[1], f"{arch} {policy}")
        check_against(records, reference, f"{arch} {policy}")


def deepseek_reference(r):
    """DeepSeek-V3's routing of make_model's config (4 groups, 2 kept), the layer's own
    e_score_correction_bias. vLLM applies routed_scaling_factor (2.5) to the layer's
    output and gives its router 1.0 (apply_routed_scale_to_output): the plugin binds
    what vLLM gives, so the routing weights are unscaled."""
    return ref.deepseek_v3(r["logits"], r["bias"], k=r["ids"].shape[1], groups=4,
                           topk_groups=2, scaling=1.0)


def test_bfloat16(models, tmp):
    """A bf16 model: its router logits reach an entry that reads bf16 in place."""
    record = os.path.join(tmp, "bf16.pkl")
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 16,
                "dtype": "bfloat16", "record": record}
    native, _ = run_engine(dict(scenario, record=None))
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "topk_softmax"})
    check(native is not None and sy is not None and native["tokens"] == sy["tokens"],
          f"bfloat16 model: topk_softmax through the plugin gives native's greedy tokens "
          f"({len(PROMPTS)} sequences; weights rounded to bf16 as vLLM's CPU router does)")
    if sy is None:
        return
    records = load_records(record)
    check(all(r["logits_dtype"] == "torch.bfloat16" and r["in_place"] for r in records),
          f"bfloat16 model: all {len(records)} calls had bf16 logits, read in place "
          "(--input-dtype logits=bf16)")
    k = records[0]["ids"].shape[1]
    check_against(records, lambda r: ref.topk_softmax(r["logits"], k),
                  "bfloat16 topk_softmax (reference on the widened logits)")


def test_xshare(models, tmp):
    """XShare with budget 0 at batch 1 and 8, two generate calls of one engine."""
    knobs = {"budget": 0, "k0": 1}
    records = {batch: os.path.join(tmp, f"xshare-{batch}.pkl") for batch in (1, 8)}
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS[:1], "max_tokens": 12,
                "record": records[1],
                "runs": [{"prompts": PROMPTS[:8], "max_tokens": 12, "record": records[8]}]}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "xshare",
                                      "SWITCHYARD_KNOBS": json.dumps(knobs)})
    results = {1: sy, 8: sy["runs"][0] if sy else None}
    for batch in (1, 8):
        run = results[batch]
        check(run is not None, f"xshare budget 0, batch {batch}: the engine generates "
              f"({sum(len(t) for t in run['tokens']) if run else 0} tokens)")
        if run is None:
            continue
        calls = load_records(records[batch])
        E, k = calls[0]["logits"].shape[1], calls[0]["ids"].shape[1]
        check_contract(calls, E, f"xshare batch {batch}")
        filled = check_against(calls, lambda r: ref.xshare(r["logits"], k, **knobs),
                               f"xshare batch {batch}", filled_ok=True)
        if batch == 1:
            check(filled > 0, f"xshare batch {batch}: the policy left slots empty ({filled})")
        else:
            native_active = np.mean([len(np.unique(ref.topk_softmax(r["logits"], k)["topk_ids"]))
                                     for r in calls])
            check(active_per_call(calls) < native_active,
                  f"xshare batch {batch}: experts active per call {active_per_call(calls):.1f} "
                  f"< top-k's {native_active:.1f}")


def test_layer_knobs(models, tmp):
    """Per-layer knobs: SWITCHYARD_KNOBS gives XShare's budget one value per MoE layer;
    a request's list of the wrong length fails that request."""
    record = os.path.join(tmp, "layer-knobs.pkl")
    with open(os.path.join(models["qwen3_moe"], "config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    budgets = [1 + 5 * (i % 2) for i in range(layers)]   # 1, 6, 1, ...
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 4,
                "record": record, "bad_extra_args": {"switchyard.budget": [1] * (layers + 1)}}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "xshare",
                                      "SWITCHYARD_KNOBS": json.dumps({"budget": budgets})})
    check(sy is not None and sy.get("bad_request")
          and f"the model has {layers} MoE layers" in sy["bad_request"],
          f"per-layer knobs: a request's list of {layers + 1} values fails that request "
          f"({(sy or {}).get('bad_request')})")
    if sy is None:
        return
    records = load_records(record)
    k = records[0]["ids"].shape[1]
    seen = sorted({r["layer"] for r in records})
    check(seen == list(range(layers)), f"per-layer knobs: every call names its MoE layer "
          f"({seen})")
    for layer in range(min(layers, 2)):
        check_against([r for r in records if r["layer"] == layer],
                      lambda r: ref.xshare(r["logits"], k, budget=budgets[layer]),
                      f"per-layer knobs: MoE layer {layer} routed with budget "
                      f"{budgets[layer]}", filled_ok=True)


def test_capacity(models, tmp):
    """Capacity drops leave empty slots in every step of a batch of 8."""
    record = os.path.join(tmp, "capacity.pkl")
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 8,
                "record": record}
    knobs = {"capacity_factor": 0.5}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "capacity_topk",
                                      "SWITCHYARD_KNOBS": json.dumps(knobs)})
    check(sy is not None, "capacity_topk factor 0.5, batch 8: the engine generates")
    if sy is None:
        return
    records = load_records(record)
    k = records[0]["ids"].shape[1]
    check_contract(records, records[0]["logits"].shape[1], "capacity_topk batch 8")
    filled = check_against(records, lambda r: ref.capacity_topk(r["logits"], k, **knobs),
                           "capacity_topk batch 8", filled_ok=True)
    check(filled > 0, f"capacity_topk batch 8: capacity drops left slots empty ({filled})")
    # Capacity-aware Expanded Drop: twice k candidates, each expert admitting its best.
    record = os.path.join(tmp, "capacity_drop.pkl")
    knobs = {"capacity_factor": 0.5, "candidates": 4}
    sy, _ = run_engine(dict(scenario, record=record),
                       env={"SWITCHYARD_POLICY": "capacity_drop",
                            "SWITCHYARD_KNOBS": json.dumps(knobs)})
    check(sy is not None, "capacity_drop factor 0.5, 4 candidates, batch 8: the engine generates")
    if sy is None:
        return
    records = load_records(record)
    check_contract(records, records[0]["logits"].shape[1], "capacity_drop batch 8")
    filled = check_against(records, lambda r: ref.capacity_drop(r["logits"], k, **knobs),
                           "capacity_drop batch 8", filled_ok=True)
    check(filled > 0, f"capacity_drop batch 8: drops left slots empty ({filled})")


def test_top_p(models, tmp):
    """Dynamic k: top_p leaves the slots past the mass empty, and vLLM gets them filled
    (weight 0, an expert the token already uses)."""
    record = os.path.join(tmp, "top_p.pkl")
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 4,
                "record": record}
    knobs = {"p": 0.5}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "top_p",
                                      "SWITCHYARD_KNOBS": json.dumps(knobs)})
    check(sy is not None, "top_p p=0.5, batch 8: the engine generates")
    if sy is None:
        return
    records = load_records(record)
    k = records[0]["ids"].shape[1]
    check_contract(records, records[0]["logits"].shape[1], "top_p batch 8")
    filled = check_against(records, lambda r: ref.top_p(r["logits"], k, **knobs),
                           "top_p batch 8", filled_ok=True)
    check(filled > 0, f"top_p p=0.5: tokens took fewer than k experts ({filled} slots empty)")


def test_lynx_and_spec(models, tmp):
    record = os.path.join(tmp, "lynx.pkl")
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 6,
                "record": record}
    # vLLM's default compile mode (its warm-up runs have no requests: warmup_step).
    sy, _ = run_engine(dict(scenario, eager=False), env={"SWITCHYARD_POLICY": "lynx"})
    check(sy is not None, "lynx: the engine generates")
    if sy is not None:
        records = load_records(record)
        k = records[0]["ids"].shape[1]
        phases = {(len(r["ids"]) == len(PROMPTS), int(r["phase"])) for r in records}
        records = [r for r in records if len(r["request_ids"])]   # not warm-up runs
        prefill = [r for r in records if len(r["ids"]) > len(PROMPTS)]
        decode = [r for r in records if len(r["ids"]) == len(PROMPTS)]
        check(prefill and all(int(r["phase"]) == 0 for r in prefill) and decode and
              all(int(r["phase"]) == 1 for r in decode),
              f"lynx: phase 0 in the prefill step, 1 in decode steps (seen {sorted(phases)})")
        check_against(records, lambda r: ref.lynx(r["logits"], r["phase"], k), "lynx")
    record = os.path.join(tmp, "spec.pkl")
    sy, _ = run_engine(dict(scenario, record=record),
                       env={"SWITCHYARD_POLICY": "xshare_spec"})
    check(sy is not None, "xshare_spec: the engine generates")
    if sy is not None:
        records = load_records(record)
        k = records[0]["ids"].shape[1]
        decode = [r for r in records if len(r["ids"]) == len(PROMPTS)]
        check(all((r["request_ids"] == np.arange(len(PROMPTS))).all() for r in decode),
              "xshare_spec: a decode step's tokens carry one request id per request")
        check_against(records, lambda r: ref.xshare_spec(r["logits"], r["request_ids"], k),
                      "xshare_spec", filled_ok=True)


def test_speculative(models, tmp):
    """n-gram speculative decoding: verify steps carry draft tokens; XShare-spec sees one
    request id per request and the drafts marked, and equals its reference."""
    record = os.path.join(tmp, "spec-decode.pkl")
    prompts = ["the a of to the a of to the a of", "water than call water than call water",
               "you that he you that he you that"]
    scenario = {"model": models["qwen3_moe"], "prompts": prompts, "max_tokens": 12,
                "record": record,
                "speculative": {"method": "ngram", "num_speculative_tokens": 3,
                                "prompt_lookup_max": 3, "prompt_lookup_min": 1}}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "xshare_spec"})
    check(sy is not None, "speculative decoding (n-gram, 3 drafts) with xshare_spec: generates")
    if sy is None:
        return
    records = [r for r in load_records(record) if len(r["request_ids"])]
    verify = [r for r in records if r["draft_mask"].sum() > 0]
    shaped = True
    for r in verify:   # per request: its sampled token, then its drafts
        for rid in np.unique(r["request_ids"]):
            mask = r["draft_mask"][r["request_ids"] == rid]
            drafts = int(mask.sum())
            shaped = shaped and (mask[len(mask) - drafts:] == 1).all() and \
                (mask[:len(mask) - drafts] == 0).all()
    check(len(verify) > 0 and shaped,
          f"speculative decoding: {len(verify)} verify steps, each request's drafts marked "
          "after its sampled token")
    k = records[0]["ids"].shape[1]
    check_against(verify, lambda r: ref.xshare_spec(r["logits"], r["request_ids"], k),
                  "xshare_spec on verify steps", filled_ok=True)
    # MoE-Spec: the verify steps' draft tokens share a budget of 4 experts.
    record = os.path.join(tmp, "moe-spec.pkl")
    knobs = {"budget": 4}
    sy, _ = run_engine(dict(scenario, record=record),
                       env={"SWITCHYARD_POLICY": "moe_spec",
                            "SWITCHYARD_KNOBS": json.dumps(knobs)})
    check(sy is not None, "speculative decoding with moe_spec (budget 4): generates")
    if sy is None:
        return
    records = [r for r in load_records(record) if len(r["request_ids"])]
    verify = [r for r in records if r["draft_mask"].sum() > 0]
    check(len(verify) > 0, f"moe_spec: {len(verify)} verify steps")
    check_against(records, lambda r: ref.moe_spec(r["logits"], r["draft_mask"], k, **knobs),
                  "moe_spec on every step", filled_ok=True)


def test_request_knobs(models, tmp):
    record = os.path.join(tmp, "knobs.pkl")
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS[:5], "max_tokens": 4,
                "record": record,
                "extra_args": [{"switchyard.budget": 2}, {"switchyard.budget": 2},
                               {"switchyard.budget": 6}, None, {"switchyard.route": "model"}],
                "bad_extra_args": {"switchyard.budget": -1}}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "xshare"})
    check(sy is not None and sy.get("bad_request") and "budget" in sy["bad_request"],
          f"per-request knobs: a bad budget fails that request "
          f"({(sy or {}).get('bad_request')})")
    check(sy is not None and len(sy["tokens"]) == 5 and all(len(t) == 4 for t in sy["tokens"]),
          "per-request knobs: the engine keeps serving after the bad request")
    if sy is not None:
        records = load_records(record)
        check(any(r["groups"] == 3 for r in records),
              "per-request knobs: requests with budgets 2, 6 and the default are routed in "
              f"3 groups (seen {sorted({r['groups'] for r in records})})")
        pinned = [r for r in records if len(r["pinned"])]
        k = records[0]["ids"].shape[1]
        expected = [ref.topk_softmax(r["logits"][r["pinned"]], k) for r in pinned]
        exact = all(np.array_equal(r["ids"][r["pinned"]], e["topk_ids"])
                    and np.allclose(r["weights"][r["pinned"]], e["topk_weights"],
                                    atol=1e-5, rtol=0) for r, e in zip(pinned, expected))
        check(pinned and exact and all(len(set(r["request_ids"][r["pinned"]])) == 1
                                       for r in pinned),
              f"switchyard.route = \"model\": the pinned request's tokens routed by the "
              f"model's own top-k in the XShare steps ({len(pinned)} calls)")


def test_engine_knobs_file(models, tmp):
    record = os.path.join(tmp, "knobs-file.pkl")
    path = os.path.join(tmp, "knobs.json")
    with open(path, "w") as f:
        f.write('{"budget": 2}')
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS[:4], "max_tokens": 4,
                "record": record,
                "knobs_file_contents": ['{"budget": 2}', '{"budget": 5}', '{"budget": -3}']}
    sy, _ = run_engine(scenario, env={"SWITCHYARD_POLICY": "xshare",
                                      "SWITCHYARD_KNOBS_FILE": path})
    check(sy is not None and len(sy["tokens"]) == 12,
          "engine knobs file: three generate rounds, the file changed between them")
    if sy is not None:
        seen = [json.loads(r["knobs"]).get("budget") for r in load_records(record)
                if len(r["request_ids"])]
        order = [b for i, b in enumerate(seen) if i == 0 or seen[i - 1] != b]
        check(order == [2, 5], f"engine knobs file: budget 2, then 5 without a restart; the "
              f"bad value -3 kept 5 (seen {order})")


def test_capture(models, tmp):
    """SWITCHYARD_CAPTURE=DIR: the engine's routing as a trace moe-eval reads (from the
    topk-qwen3 runs when they captured, else from engines of its own)."""
    from switchyard.trace import evaluate, load_trace
    bounded = os.path.join(tmp, "capture-bounded")
    shutil.rmtree(bounded, ignore_errors=True)   # a kept directory's earlier run
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS, "max_tokens": 6}

    def captured(mode):
        """(engine ran, capture directory, record) of the topk_softmax run in `mode`."""
        if mode in CAPTURED:
            return True, *CAPTURED[mode]
        directory = os.path.join(tmp, f"capture-{mode}")
        shutil.rmtree(directory, ignore_errors=True)
        record = os.path.join(tmp, f"capture-{mode}.pkl")
        sy, _ = run_engine(dict(scenario, eager=mode == "eager", record=record),
                           env={"SWITCHYARD_POLICY": "topk_softmax",
                                "SWITCHYARD_CAPTURE": directory})
        return sy is not None, directory, record

    ran, directory, record = captured("eager")
    ranks = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    check(ran and len(ranks) == 1 and ranks[0].startswith("rank-"),
          f"capture: the engine process wrote one trace directory ({ranks})")
    if not ran or len(ranks) != 1:
        return
    trace = load_trace(os.path.join(directory, ranks[0]))
    with open(os.path.join(models["qwen3_moe"], "config.json")) as f:
        config = json.load(f)
    E, k = config["num_local_experts"], config["num_experts_per_tok"]
    L = config["num_hidden_layers"]
    calls = [r for r in load_records(record) if len(r["request_ids"])]   # not warm-up runs
    check(trace.num_experts == E and trace.top_k == k and trace.layers == list(range(L))
          and trace.source == "vllm",
          f"capture: E = {trace.num_experts}, k = {trace.top_k}, layers {trace.layers} "
          f"(the model: E = {E}, k = {k}, {L} MoE layers)")
    sizes = {name: trace.meta.get(name) for name in ("hidden_size", "moe_intermediate_size",
                                                      "torch_dtype")}
    check(trace.model == models["qwen3_moe"]
          and sizes == {"hidden_size": config["hidden_size"],
                        "moe_intermediate_size": config["moe_intermediate_size"],
                        "torch_dtype": "float32"},
          f"capture: meta.json names the served model and its experts' sizes in the served "
          f"dtype (model {trace.model!r}, {sizes})")
    check(trace.num_tokens > 0 and all(trace.ids[l].shape == (trace.num_tokens, k) and
                                       int(trace.ids[l].max()) < E for l in trace.layers),
          f"capture: T = {trace.num_tokens} tokens in every layer, ids in [0, {E})")
    routed = np.concatenate([r["ids"] for r in calls])
    captured_ids = np.concatenate([trace.ids[l][trace.step == s]
                                   for s in np.unique(trace.step)
                                   for l in trace.layers])   # call order: per step, per layer
    check(routed.shape == captured_ids.shape and (routed == captured_ids).all(),
          f"capture: the ids are the plugin's routing ({len(calls)} calls)")
    steps = int(trace.step.max()) + 1
    phases = sorted(set(trace.phase.tolist()))
    check(phases == [0, 1] and (trace.request_ids < len(PROMPTS)).all(),
          f"capture: {steps} steps, phases {phases}, request ids of {len(PROMPTS)} requests")
    report = evaluate(trace, "topk_softmax")
    layers = report["results"][0]["layers"]
    same = {l: (m["all"]["experts_active_mean"], m["all"]["model_experts_active_mean"])
            for l, m in layers.items()}
    check(all(abs(a - b) < 1e-9 for a, b in same.values()),
          "capture: evaluate(topk_softmax) experts_active_mean = the model's, per layer "
          + ", ".join(f"{l}: {a:.2f}/{b:.2f}" for l, (a, b) in same.items()))
    # torch.compile (vLLM's default mode): the routing op records from inside the graph.
    ran, compiled_dir, compiled_record = captured("compiled")
    ranks = sorted(os.listdir(compiled_dir)) if os.path.isdir(compiled_dir) else []
    compiled = load_trace(os.path.join(compiled_dir, ranks[0])) if ran and ranks else None
    if compiled is not None:
        calls = [r for r in load_records(compiled_record) if len(r["request_ids"])]
        routed = np.concatenate([r["ids"] for r in calls]) if calls else np.zeros((0, k))
        captured_ids = np.concatenate([compiled.ids[l][compiled.step == s]
                                       for s in np.unique(compiled.step)
                                       for l in compiled.layers])
    check(compiled is not None and compiled.layers == list(range(L))
          and routed.shape == captured_ids.shape and (routed == captured_ids).all()
          and compiled.num_tokens == trace.num_tokens,
          f"capture under torch.compile: every step recorded from the graph's routing op "
          f"({compiled.num_tokens if compiled is not None else None} tokens, eager "
          f"{trace.num_tokens})")
    sy, output = run_engine(dict(scenario, prompts=PROMPTS[:2], record=None),
                            env={"SWITCHYARD_POLICY": "topk_softmax",
                                 "SWITCHYARD_CAPTURE": bounded,
                                 "SWITCHYARD_CAPTURE_MAX_TOKENS": "20"})
    ranks = sorted(os.listdir(bounded)) if os.path.isdir(bounded) else []
    small = load_trace(os.path.join(bounded, ranks[0])) if sy is not None and ranks else None
    check(small is not None and 0 < small.num_tokens <= 20
          and output.count("SWITCHYARD_CAPTURE_MAX_TOKENS=20 reached") == 1,
          f"capture: SWITCHYARD_CAPTURE_MAX_TOKENS=20 keeps "
          f"{small.num_tokens if small else None} tokens, one warning")


def test_quality(models, tmp):
    """moe-eval --quality through vLLM agrees with transformers on the trained model:
    the same held-out sequences in the same batches, per-token log-probabilities with
    the model's own routing and with OEA (k0 = 1)."""
    from switchyard.trace.quality import held_out_text, hf_logprobs, load_sequences
    model = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models", "quality-moe")
    sequences = load_sequences(model, held_out_text(), context=64, count=16)
    settings = [{"k0": 1}]
    (hf_native, _), hf_runs = hf_logprobs(model, "oea", settings, sequences, batch=8,
                                          routing="prefill")
    result, _ = run_engine({"quality": {"model": model, "policy": "oea",
                                        "settings": settings,
                                        "sequences": sequences.tolist(), "batch": 8}})
    check(result is not None, "quality: vLLM measured the held-out sequences")
    if result is None:
        return
    native = np.asarray(result["native"])
    oea = np.asarray(result["runs"][0][1])
    gap = float(np.abs(native - hf_native).max())
    check(native.shape == hf_native.shape and gap < 2e-3,
          f"quality: the model's own routing, vLLM's log-probabilities = transformers' "
          f"({native.size} tokens, largest difference {gap:.1e})")
    hf_delta = float((hf_runs[0][1] - hf_native).mean())
    delta = float((oea - native).mean())
    check(abs(delta - hf_delta) < 1e-3 and abs(delta) > 1e-5,
          f"quality: OEA k0=1 through the plugin changes the log-likelihood by "
          f"{delta:+.4f} nats/token, transformers by {hf_delta:+.4f} (prefill routing)")


def test_bad_settings(models, tmp):
    scenario = {"model": models["qwen3_moe"], "prompts": PROMPTS[:1], "max_tokens": 2}
    broken = os.path.join(tmp, "broken.mlir")
    with open(broken, "w") as f:
        f.write("moe.router @broken(%logits: tensor<?x?xf32>) -> (topk_ids: tensor<?x?xi32>) {\n"
                "  %x = moe.bogus\n}\n")
    # One engine per way of failing (the router factory's compile, the settings' parse,
    # the factory's refusal); an engine start costs ~10 s, so the settings that fail in
    # the same compile as the malformed file are checked on the factory's compile alone.
    cases = [({"SWITCHYARD_POLICY": broken}, "broken.mlir:2:"),
             ({"SWITCHYARD_POLICY": "xshare", "SWITCHYARD_KNOBS": "{budget: 1}"},
              "SWITCHYARD_KNOBS: not JSON"),
             ({"SWITCHYARD_POLICY": "deepseek_v3"}, "SWITCHYARD_POLICY=deepseek_v3")]
    for env, expected in cases:
        result, output = run_engine(scenario, env=env, expect_failure=True)
        check(result is None and expected in output,
              f"bad settings {env}: the engine does not start and says '{expected}'")
    from switchyard import SwitchyardError
    from switchyard.vllm.settings import Settings
    from switchyard.vllm.router import step_router
    shape = {"experts": 16, "top_k": 4, "renormalize": True, "scaling": 1.0}
    for policy, knobs, expected in (("no_such_policy", {}, "no_such_policy"),
                                    ("xshare", {"nope": 1}, "unknown knob 'nope'")):
        try:
            step_router(Settings(policy, knobs), shape, logits_dtypes=("float32",))
            message = "no error"
        except SwitchyardError as error:
            message = str(error)
        check(expected in message, f"bad settings (policy {policy}, knobs {knobs}): the "
              f"router factory's compile says '{expected}' ({message[:120]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", help="keep models and records in this directory")
    ap.add_argument("--only", help="run only the checks whose name contains this")
    args = ap.parse_args()
    try:
        import vllm  # noqa: F401
        import switchyard  # noqa: F401
    except ImportError as error:
        print(f"skipped: {error} (scripts/setup.sh installs vLLM into .venv-vllm)")
        return 77
    tmp = args.keep or tempfile.mkdtemp(prefix="sy-vllm-")
    os.makedirs(tmp, exist_ok=True)
    sys.path.insert(0, HERE)
    from make_model import make_model
    models = {}
    for arch, sizes in (("qwen3_moe", dict(experts=16, top_k=4)),
                        ("mixtral", dict(experts=8, top_k=2)),
                        ("deepseek_v3", dict(experts=16, top_k=4))):
        path = os.path.join(tmp, arch)
        if not os.path.exists(os.path.join(path, "config.json")):
            make_model(arch, path, seed=1, **sizes)
        models[arch] = path
    tests = [("topk-qwen3-eager",
              lambda: test_native_policy(models, tmp, "qwen3_moe", True, capture=True)),
             ("topk-mixtral-eager", lambda: test_native_policy(models, tmp, "mixtral", True)),
             ("topk-qwen3-compiled",
              lambda: test_native_policy(models, tmp, "qwen3_moe", False, capture=True)),
             ("deepseek-v3-eager",
              lambda: test_native_policy(models, tmp, "deepseek_v3", True, "deepseek_v3",
                                         deepseek_reference)),
             ("bf16", lambda: test_bfloat16(models, tmp)),
             ("xshare-1-8", lambda: test_xshare(models, tmp)),
             ("layer-knobs", lambda: test_layer_knobs(models, tmp)),
             ("capacity-8", lambda: test_capacity(models, tmp)),
             ("top-p", lambda: test_top_p(models, tmp)),
             ("lynx-spec", lambda: test_lynx_and_spec(models, tmp)),
             ("speculative", lambda: test_speculative(models, tmp)),
             ("request-knobs", lambda: test_request_knobs(models, tmp)),
             ("knobs-file", lambda: test_engine_knobs_file(models, tmp)),
             ("capture", lambda: test_capture(models, tmp)),
             ("quality", lambda: test_quality(models, tmp)),
             ("bad-settings", lambda: test_bad_settings(models, tmp))]
    SERVER.append(EngineServer(tmp))
    for name, test in tests:
        if args.only and args.only not in name:
            continue
        print(f"== {name}", flush=True)
        start = time.monotonic()
        test()
        print(f"   {name}: {time.monotonic() - start:.0f} s", flush=True)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
