#!/usr/bin/env python3
"""Convert public routing traces of real MoE models into Switchyard's trace layout
(docs/traces.md), one directory per trace under shared/traces/public/ (git-ignored), with
a "provenance" object in each meta.json that names the source repository, commit, paths
(with git blob ids and sha256 of the bytes read), the license, what the source holds and
what this script derived. docs/public-traces.md describes the traces and the metrics that
are meaningful on them.

Where the data comes from
-------------------------
Two public GitHub repositories, each read at a pinned commit. Neither states a license
(no license file at any commit).

(1) https://github.com/Mario928/speculative-moe, commit
    216e26eb86ee09fa46bb0e8c000be7e9758e10b6 (2025-12-09, "Reorganize repo: add
    profiling_moe_code, routing_data_collected, analysis/deep_analysis"), the last
    commit before the repository moved its .jsonl files to Git LFS (later commits hold
    LFS pointers only). Routing of neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8 (Mixtral
    8x7B Instruct, FP8 expert weights; 32 MoE layers, 8 experts, top-2) recorded in vLLM
    (enforce_eager=True, one GPU, temperature 0, max_tokens 256, one request at a time;
    profiling_moe_code/collect_data.py at the commit) by a hook on vLLM's
    FusedMoE.select_experts (profiling_moe_code/custom_profiling/routing_profiler.py):
    per token and layer the top-2 expert ids and top-2 weights (softmax renormalized
    over the two), one JSON line each. The hook skips every (token, layer) whose two
    weights are exactly [0.5, 0.5] (meant for vLLM's padding tokens; real tokens whose
    top-2 router logits tie in bfloat16 are skipped too: 2.7% of the records).

  mixtral-8x7b-humaneval0     analysis/deep_analysis/routing_raw.jsonl: the hook's raw
                              output for HumanEval/0 (one request): the prefill (135
                              prompt tokens, one forward pass) and 83 decode passes, in
                              execution order, every layer.
  mixtral-8x7b-decode-4req    routing_data_collected/humaneval_2_routing.jsonl and
                              gsm8k_2_routing.jsonl: the repository's post-processed
                              decode records (prefill removed, grouped by layer) of
                              HumanEval/0, HumanEval/1 and GSM8K test questions 0 and 1:
                              83, 255, 168 and 79 decode passes, each request run alone.

(2) https://github.com/weiran0129/vLLM-MoE-Logger, commit
    2c3c87c10e045aea0c495044d9b4f94cf16675b2 (2025-11-28; the logs were added in
    43d608127447b9e1bd2ec87e503f934d6f95e195). Routing of Qwen/Qwen1.5-MoE-A2.7B-Chat
    (24 MoE layers, 60 routed experts, top-4, softmax router without renormalization,
    plus a shared expert that is not routed) in vLLM 0.11.2.dev344+g35657bcd7
    (enforce_eager=True while logging, max_model_len 512, temperature 0, max_tokens 128;
    run_generate.py) on the first 25 questions of GSM8K's test split (make_prompts.py;
    plain questions, one LLM.generate call, so vLLM batches them). A hook after
    fused_topk in vLLM's FusedMoE.select_experts (layer.py, moe_logger.py) writes, for
    ONE layer per run (VLLM_MOE_LAYER), per forward call and token: the top-4 ids and
    weights (the full softmax probabilities of those experts), token_idx = the token's
    index in the forward call. Logs/moe_layer{0,8,12,18,23}.jsonl are five runs of the
    same workload, one layer each; their 131 forward calls have identical sizes.

  qwen1.5-moe-gsm8k25-decode  the first 64 of the 127 decode calls (25 requests in every
                              one of them; 1600 tokens), layers 0, 8, 12, 18, 23.
  qwen1.5-moe-gsm8k25-full    (5 MB; written only when named) every real
                              forward call: the prefill calls (65 and 1406 tokens) and
                              all 127 decode calls (4357 tokens).

What is derived
---------------
  logits   neither source has router logits. For each recorded (token, layer) with
           experts e_i and weights w_i the trace's logits are log(w_i) at e_i and -inf
           (unknown) at the other experts: the softmax of that row is the recorded
           weights renormalized over the recorded experts. Mixtral's weights are already
           renormalized over its top-2; Qwen's are full-softmax probabilities, so
           log(w_i) is the exact log-softmax of the true logits there (the true logits
           minus the token's log-sum-exp), and the top-4's share of the full softmax is
           the row sum of weights.npy. Either way mass_kept is the fraction of the
           model's top-k gate mass a policy keeps (1.0 for the model's own routing), not
           a fraction of the full softmax.
  ids      the recorded experts, as they are; weights the recorded weights.
  tokens   a trace holds the same tokens in every layer.
           mixtral-8x7b-humaneval0: the raw file's execution order gives every record
           its forward pass (a new pass starts where the layer index falls) and, in the
           prefill, its prompt position (the hook's batch index counts skipped tokens
           too), so a token is identified exactly; a token is kept iff all 32 layers
           recorded it (94 of 218: 59 of 135 prefill tokens, 35 of 83 decode passes).
           mixtral-8x7b-decode-4req: the post-processed files renumber each layer's
           records after the skipped ones, so a layer's i-th record is the i-th decode
           pass only in a layer that skipped none (such a layer has the request's
           largest record count); the trace keeps the layers complete in all four
           requests (1, 5, 10, 12, 24, 26, 28) and all 585 decode tokens.
           qwen1.5-moe-*: a forward call starts where token_idx is 0; the calls whose
           every token has the same routing in every layer are vLLM's dummy profiling
           runs (all-identical input tokens: 8192 and 256 tokens) and are dropped; the
           five runs' remaining calls are aligned by (call, index in the call), which
           their identical call sizes support but cannot prove token by token.
  steps    mixtral-8x7b-humaneval0: the recorded forward passes (step 0 the prefill,
           steps 1..83 the decode passes; steps whose token was dropped are absent).
           mixtral-8x7b-decode-4req: SIMULATED batching: step i groups decode pass i of
           every request still generating (4, then fewer). The source ran each request
           alone; Mixtral routes each token from its own hidden state, so a token's
           routing does not depend on its batch, but the batches are this script's.
           qwen1.5-moe-*: the engine's forward calls (real vLLM batches), numbered from
           0 at the first call after the dummy runs.
  per-token arrays
           mixtral-8x7b-humaneval0: request 0; prompt positions 0..134, decode pass s at
           135+s-1. mixtral-8x7b-decode-4req: request 0..3 (HumanEval/0, /1, GSM8K 0,
           1); position = the decode pass index (prompt lengths are not in the source).
           qwen1.5-moe-*: phase 0 for the calls holding prefill tokens (more tokens than
           the 25 requests: calls 0 and 1), else 1 (decode); request id = the token's
           index in a decode call (each decode token of a call is a distinct request;
           the index is not a stable request id across calls) and 0 in prefill calls
           (unknown); position = the index in a prefill call, the decode call's index
           among the decode calls in decode (prompt lengths are not in the source).

Usage
-----
  scripts/convert_public_trace.py                   # the listed traces -> shared/traces/public/
  scripts/convert_public_trace.py --check           # reconvert and compare with the
                                                    # traces there (exit 1 on a diff)
  scripts/convert_public_trace.py qwen1.5-moe-gsm8k25-full --out /tmp/traces
  scripts/convert_public_trace.py --repo OWNER/NAME=/path/to/clone ...

Each source repository is read with git (`git cat-file` of COMMIT:PATH) from a clone
that holds the commit: by default shared/sources/OWNER+NAME (`git clone
https://github.com/OWNER/NAME shared/sources/OWNER+NAME`), else --repo OWNER/NAME=PATH.
The git blob id of every file read is checked against the one pinned here, so a
conversion reads exactly the bytes the documented traces came from.

The converted traces are not committed: they are derived from other people's data
(whose repositories state no license), so they live in the checkout's git-ignored
shared/ folder; the repository carries this converter, the provenance and the results
measured on them (docs/public-traces.md, docs/results-traces.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(ROOT, "shared", "traces", "public")
DEFAULT_SOURCES = os.path.join(ROOT, "shared", "sources")
NO_LICENSE = "none stated (the repository has no license file at any commit)"

MIXTRAL_REPO = "Mario928/speculative-moe"
QWEN_REPO = "weiran0129/vLLM-MoE-Logger"
# repository -> (commit, {path: git blob id at the commit}); every read is checked.
SOURCES = {
    MIXTRAL_REPO: ("216e26eb86ee09fa46bb0e8c000be7e9758e10b6", {
        "analysis/deep_analysis/routing_raw.jsonl": "436638bbb8807e5fd3933c4f9903b66afb88066e",
        "routing_data_collected/humaneval_2_routing.jsonl":
            "bdd16e7e589e4ef52f498439b96161ffc7197600",
        "routing_data_collected/gsm8k_2_routing.jsonl":
            "ab67860b812ffde42d090b28c2db09441d15016a",
    }),
    QWEN_REPO: ("2c3c87c10e045aea0c495044d9b4f94cf16675b2", {
        "Logs/moe_layer0.jsonl": "2b65cd23a062b40927d3ce688f71184526f5a48f",
        "Logs/moe_layer8.jsonl": "69a388898ed7039f9263d029927a3282db324996",
        "Logs/moe_layer12.jsonl": "1f40a16291a6316880c5e9ac8387d9c9372b950f",
        "Logs/moe_layer18.jsonl": "3cdd7080717bfd1b8963f8fb3b8e1a0a82104ec1",
        "Logs/moe_layer23.jsonl": "10aef751900ec64623324521052cd0cb3886536f",
    }),
}

MIXTRAL_MODEL = "neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8"
MIXTRAL_E, MIXTRAL_K, MIXTRAL_LAYERS = 8, 2, 32
QWEN_MODEL = "Qwen/Qwen1.5-MoE-A2.7B-Chat"
QWEN_E, QWEN_K, QWEN_LAYERS, QWEN_REQUESTS = 60, 4, (0, 8, 12, 18, 23), 25
QWEN_DECODE_KEPT = 64  # decode calls in the default trace (of 127)


def _metrics(k: int, absolute: str) -> dict:
    return {
        "metrics_meaningful": [
            "model_experts_active_mean/_p99, experts_active_* of any policy",
            "tokens_per_expert_*, ep_imbalance (the model's ids are exact)",
            f"mass_kept_mean as the fraction of the model's top-{k} gate mass kept (1.0 "
            f"for the model's own routing)",
        ],
        "metrics_not_meaningful": [
            f"mass_kept_mean as a fraction of the full softmax ({absolute}), or compared "
            f"with traces that hold real logits",
            f"the choice among experts outside a token's top-{k} (all -inf here)",
        ],
    }


MIXTRAL_PROVENANCE = dict({
    "repository": f"https://github.com/{MIXTRAL_REPO}",
    "commit": SOURCES[MIXTRAL_REPO][0],
    "license": NO_LICENSE,
    "model": MIXTRAL_MODEL + " (Mixtral 8x7B Instruct with FP8 expert weights; the "
             "source's README states the router gate is not quantized)",
    "engine": "vLLM, enforce_eager=True, tensor_parallel_size=1, temperature 0, "
              "max_tokens 256 (profiling_moe_code/collect_data.py at the commit)",
    "recorder": "a hook on vLLM FusedMoE.select_experts "
                "(profiling_moe_code/custom_profiling/routing_profiler.py at the commit): "
                "per token and layer the top-2 expert ids and top-2 weights (softmax "
                "renormalized over the two); (token, layer) records whose weights are "
                "exactly [0.5, 0.5] are skipped (tied bfloat16 router logits)",
    "source_contains": "top-2 expert ids and renormalized top-2 weights per token and "
                       "layer; no router logits",
    "logits_derived": "log(weight) at the two recorded experts, -inf (unknown) at the "
                      "other six: softmax of a row = the model's top-2 weights; the true "
                      "logits differ by a per-token constant on the two and are lower "
                      "elsewhere",
    "converter": "scripts/convert_public_trace.py",
}, **_metrics(2, "the other six logits are unknown"))

QWEN_PROVENANCE = dict({
    "repository": f"https://github.com/{QWEN_REPO}",
    "commit": SOURCES[QWEN_REPO][0],
    "license": NO_LICENSE,
    "model": QWEN_MODEL + " (24 MoE layers, 60 routed experts, top-4, softmax router "
             "without renormalization of the top-4, plus an unrouted shared expert)",
    "engine": "vLLM 0.11.2.dev344+g35657bcd7 (the logs' meta headers), enforce_eager=True "
              "while logging, max_model_len 512, temperature 0, max_tokens 128, the 25 "
              "prompts in one LLM.generate call (run_generate.py at the commit)",
    "recorder": "a hook after fused_topk in vLLM FusedMoE.select_experts (layer.py, "
                "moe_logger.py at the commit): for one layer per run (VLLM_MOE_LAYER), "
                "per forward call and token, the top-4 expert ids and weights (full "
                "softmax probabilities) and the token's index in the call",
    "source_contains": "top-4 expert ids and their full-softmax probabilities per token "
                       "of one layer per run, 5 runs (layers 0, 8, 12, 18, 23); no router "
                       "logits",
    "logits_derived": "log(weight) at the four recorded experts, -inf (unknown) at the "
                      "other 56: the exact log-softmax of the router logits at the four "
                      "(the true logits minus the token's log-sum-exp); the top-4's share "
                      "of the full softmax is the row sum of weights.npy",
    "workload": "the first 25 questions of GSM8K's test split (make_prompts.py at the "
                "commit), plain text, batched by vLLM",
    "converter": "scripts/convert_public_trace.py",
}, **_metrics(4, "the full-softmax top-4 mass is the row sum of weights.npy instead"))


def _import_format():
    """switchyard.trace.format (numpy only) from the build tree, else an installed one."""
    path = os.path.join(ROOT, "build", "python")
    if os.path.isfile(os.path.join(path, "switchyard", "__init__.py")):
        sys.path.insert(0, path)
    from switchyard.trace import format as fmt
    return fmt


class Source:
    """A git clone or mirror of `repo` holding its pinned commit; reads files at it."""

    def __init__(self, repo: str, git_dir: str):
        if not os.path.isdir(git_dir):
            sys.exit(f"error: {git_dir}: no such directory; git clone "
                     f"https://github.com/{repo} there, or pass --repo {repo}=PATH")
        self.repo, self.git_dir = repo, git_dir
        self.commit, self.blobs = SOURCES[repo]
        self.read_files = []

    def _git(self, *args) -> bytes:
        try:
            return subprocess.run(["git", "-C", self.git_dir, *args], check=True,
                                  capture_output=True).stdout
        except subprocess.CalledProcessError as e:
            sys.exit(f"error: git {' '.join(args)} in {self.git_dir}: "
                     f"{e.stderr.decode(errors='replace').strip()}")

    def read(self, path: str) -> bytes:
        blob = self._git("rev-parse", f"{self.commit}:{path}").decode().strip()
        if blob != self.blobs[path]:
            sys.exit(f"error: {self.repo} {path} at {self.commit} is blob {blob}, "
                     f"expected {self.blobs[path]}")
        data = self._git("cat-file", "blob", blob)
        self.read_files.append({"path": path, "blob": blob, "bytes": len(data),
                                "sha256": hashlib.sha256(data).hexdigest()})
        return data


def _check_route(ids, weights, experts, k, where, line):
    if (len(ids) != k or len(weights) != k or len(set(ids)) != k
            or not all(isinstance(e, int) and 0 <= e < experts for e in ids)
            or not all(0 < w <= 1 for w in weights)):
        sys.exit(f"error: {where}: unexpected record {line[:120]}")


def _mixtral_records(data: bytes, path: str):
    out = []
    for n, line in enumerate(data.decode().splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        _check_route(r["experts"], r["gating_probs"], MIXTRAL_E, MIXTRAL_K, f"{path}:{n}",
                     line)
        if not 0 <= r["layer"] < MIXTRAL_LAYERS:
            sys.exit(f"error: {path}:{n}: layer {r['layer']}")
        out.append(r)
    return out


# The experts' sizes for moe-eval --hardware (hidden x expert intermediate, the weights'
# dtype), from each model's published config.json (not part of the routing sources).
MODEL_SIZES = {
    "mixtral": {"hidden_size": 4096, "moe_intermediate_size": 14336, "expert_dtype": "float8",
                "sizes_from": "Mixtral-8x7B's config.json (hidden_size 4096, intermediate_size "
                              "14336); FP8 expert weights as the source's model name says"},
    "qwen": {"hidden_size": 2048, "moe_intermediate_size": 1408, "expert_dtype": "bfloat16",
             "sizes_from": "Qwen1.5-MoE-A2.7B's config.json (hidden_size 2048, "
                           "moe_intermediate_size 1408; the shared expert is not routed)"},
}


def _build(fmt, experts, k, model, src, tokens, layers, entry, request_ids, positions,
           phase, step, meta):
    """tokens: keys in trace order; entry[(layer, key)] = (ids, weights)."""
    meta = dict(meta, **MODEL_SIZES["mixtral" if src.repo == MIXTRAL_REPO else "qwen"])
    logits, ids, weights = {}, {}, {}
    for layer in layers:
        rows = [entry[(layer, t)] for t in tokens]
        ids[layer] = np.array([i for i, _ in rows], dtype=np.uint8)
        weights[layer] = np.array([w for _, w in rows], dtype=np.float32)
        lg = np.full((len(tokens), experts), -np.inf, dtype=np.float32)
        lg[np.arange(len(tokens))[:, None], ids[layer]] = np.log(
            np.array([w for _, w in rows], dtype=np.float64)).astype(np.float32)
        logits[layer] = lg
    return fmt.Trace(num_experts=experts, top_k=k, logits=logits, ids=ids, weights=weights,
                     request_ids=request_ids, positions=positions, phase=phase, step=step,
                     model=model, source=f"public:{src.repo}@{src.commit[:12]}",
                     dtype="float32", meta=meta)


def convert_mixtral_humaneval0(fmt, src: Source):
    path = "analysis/deep_analysis/routing_raw.jsonl"
    recs = _mixtral_records(src.read(path), path)
    # Forward passes: the hook writes layer 0's records, then layer 1's, ... per pass;
    # a new pass starts where the layer index falls.
    passes, prev = [], MIXTRAL_LAYERS
    for r in recs:
        if r["layer"] < prev:
            passes.append([])
        passes[-1].append(r)
        prev = r["layer"]
    prefill = passes[0]
    prompt = 1 + max(r["token_pos"] for r in prefill)
    for layer in range(MIXTRAL_LAYERS):
        pos = [r["token_pos"] for r in prefill if r["layer"] == layer]
        if pos != sorted(set(pos)):
            sys.exit(f"error: {path}: prefill positions of layer {layer} not increasing")
    for s, p in enumerate(passes[1:], 1):
        layers = [r["layer"] for r in p]
        if any(r["token_pos"] != 0 for r in p) or len(layers) != len(set(layers)):
            sys.exit(f"error: {path}: forward pass {s} is not one decode token per layer")
    entry = {}
    for s, p in enumerate(passes):
        for r in p:
            entry[(r["layer"], (s, r["token_pos"]))] = (r["experts"], r["gating_probs"])
    every = [(0, i) for i in range(prompt)] + [(s, 0) for s in range(1, len(passes))]
    kept = [t for t in every
            if all((layer, t) in entry for layer in range(MIXTRAL_LAYERS))]
    decode_all = len(passes) - 1
    kept_prefill = sum(1 for t in kept if t[0] == 0)
    steps = np.array([t[0] for t in kept], dtype=np.int32)
    positions = np.array([t[1] if t[0] == 0 else prompt + t[0] - 1 for t in kept],
                         dtype=np.int32)
    phase = (steps > 0).astype(np.uint8)
    records = len(every) * MIXTRAL_LAYERS
    meta = {"provenance": dict(
        MIXTRAL_PROVENANCE, paths=list(src.read_files),
        workload=f"HumanEval/0 (openai_humaneval test split, problem 0), one request: "
                 f"prefill of {prompt} prompt tokens, then {decode_all} decode passes",
        derived=(
            f"forward passes from the raw file's execution order (a new pass where the "
            f"layer index falls): pass 0 the prefill, passes 1..{decode_all} one decode "
            f"token each; prefill position = the hook's batch index. Kept: the tokens "
            f"that all {MIXTRAL_LAYERS} layers recorded: {len(kept)} of {len(every)} "
            f"({kept_prefill} of {prompt} prefill tokens, {len(kept) - kept_prefill} of "
            f"{decode_all} decode passes); {records - len(entry)} of {records} (token, "
            f"layer) records were skipped by the recorder. step = forward pass, phase 0 "
            f"prefill / 1 decode, request 0, decode position = {prompt} + pass - 1."),
        step_grouping="recorded (the engine's forward passes)")}
    return _build(fmt, MIXTRAL_E, MIXTRAL_K, MIXTRAL_MODEL, src, kept,
                  list(range(MIXTRAL_LAYERS)), entry, np.zeros(len(kept), np.int32),
                  positions, phase, steps, meta)


def convert_mixtral_decode_4req(fmt, src: Source):
    files = [("humaneval", "routing_data_collected/humaneval_2_routing.jsonl"),
             ("gsm8k", "routing_data_collected/gsm8k_2_routing.jsonl")]
    requests = []  # (label, {layer: [(ids, weights), ...]})
    for dataset, path in files:
        per = defaultdict(lambda: defaultdict(list))
        for r in _mixtral_records(src.read(path), path):
            if r["dataset"] != dataset:
                sys.exit(f"error: {path}: dataset {r['dataset']!r}, expected {dataset!r}")
            records = per[r["problem_id"]][r["layer"]]
            if r["token_idx"] != len(records):
                sys.exit(f"error: {path}: problem {r['problem_id']} layer {r['layer']}: "
                         f"token_idx {r['token_idx']} out of order")
            records.append((r["experts"], r["gating_probs"]))
        for problem in sorted(per):
            requests.append((f"{dataset}/{problem}", per[problem]))
    lengths, complete = [], []
    for label, layers in requests:
        n = max(len(layers[layer]) for layer in range(MIXTRAL_LAYERS))
        lengths.append(n)
        complete.append({layer for layer in range(MIXTRAL_LAYERS)
                         if len(layers[layer]) == n})
    keep_layers = sorted(set.intersection(*complete))
    if not keep_layers:
        sys.exit("error: no layer recorded every decode pass of every request")
    tokens, entry = [], {}
    for i in range(max(lengths)):  # simulated batch: decode pass i of every request
        for r, ((label, layers), n) in enumerate(zip(requests, lengths)):
            if i < n:
                tokens.append((r, i))
                for layer in keep_layers:
                    entry[(layer, (r, i))] = layers[layer][i]
    req = np.array([t[0] for t in tokens], dtype=np.int32)
    pos = np.array([t[1] for t in tokens], dtype=np.int32)
    summary = ", ".join(f"{label}: {n} decode passes, {len(c)} complete layers"
                        for (label, _), n, c in zip(requests, lengths, complete))
    meta = {"requests": [label for label, _ in requests], "provenance": dict(
        MIXTRAL_PROVENANCE, paths=list(src.read_files),
        workload="decode passes of 4 requests, each run alone: HumanEval/0, HumanEval/1 "
                 "(openai_humaneval test split), GSM8K test questions 0 and 1 "
                 "(request ids 0..3 in that order)",
        derived=(
            f"the source's post-processed files drop the prefill and renumber each "
            f"layer's records after skipped ones, so a layer's i-th record is decode pass "
            f"i only in a layer that skipped none (its record count is the request's "
            f"largest). {summary}. Kept: the layers complete in all four requests "
            f"({', '.join(map(str, keep_layers))}), all {len(tokens)} decode tokens. "
            f"step i = decode pass i of every request still generating (SIMULATED "
            f"batching: the source ran each request alone; Mixtral's routing of a token "
            f"does not depend on its batch). position = decode pass index (prompt "
            f"lengths are not in the source); phase 1 (decode)."),
        step_grouping="simulated (decode pass i of every request)")}
    return _build(fmt, MIXTRAL_E, MIXTRAL_K, MIXTRAL_MODEL, src, tokens, keep_layers,
                  entry, req, pos, np.ones(len(tokens), np.uint8), pos.copy(), meta)


def _qwen_calls(src: Source):
    """layer -> list of forward calls, each a list of (ids, weights); checked."""
    out = {}
    for layer in QWEN_LAYERS:
        path = f"Logs/moe_layer{layer}.jsonl"
        lines = src.read(path).decode().splitlines()
        head = json.loads(lines[0])
        if (head.get("type") != "meta" or head.get("model_id") != QWEN_MODEL
                or head.get("layers_logged") != [layer] or head.get("top_k") != QWEN_K):
            sys.exit(f"error: {path}:1: unexpected meta header {lines[0][:160]}")
        calls = []
        for n, line in enumerate(lines[1:], 2):
            r = json.loads(line)
            if r.get("type") != "route" or r.get("layer") != layer:
                sys.exit(f"error: {path}:{n}: not a route record of layer {layer}")
            _check_route(r["topk_ids"], r["topk_weights"], QWEN_E, QWEN_K, f"{path}:{n}",
                         line)
            if r["token_idx"] == 0:
                calls.append([])
            elif not calls or r["token_idx"] != len(calls[-1]):
                sys.exit(f"error: {path}:{n}: token_idx {r['token_idx']} out of order")
            calls[-1].append((r["topk_ids"], r["topk_weights"]))
        out[layer] = calls
    sizes = {layer: [len(c) for c in calls] for layer, calls in out.items()}
    if len({tuple(s) for s in sizes.values()}) != 1:
        sys.exit("error: the five runs' forward calls differ in size: layers not alignable")
    return out


def convert_qwen(fmt, src: Source, full: bool):
    calls = _qwen_calls(src)
    count = len(calls[QWEN_LAYERS[0]])

    def dummy(c):  # every token routed alike in every layer: identical input tokens
        return all(len({tuple(i) for i, _ in calls[layer][c]}) == 1 and len(calls[layer][c])
                   > 1 for layer in QWEN_LAYERS)

    dummies = [c for c in range(count) if dummy(c)]
    if dummies != list(range(len(dummies))):
        sys.exit(f"error: dummy (constant-routing) calls {dummies} are not the leading ones")
    real = list(range(len(dummies), count))
    size = [len(calls[QWEN_LAYERS[0]][c]) for c in real]
    prefill = [i for i, n in enumerate(size) if n > QWEN_REQUESTS]
    if prefill != list(range(len(prefill))):
        sys.exit(f"error: calls with more than {QWEN_REQUESTS} tokens are not the first "
                 f"real ones: {prefill}")
    decode = [i for i in range(len(real)) if i not in prefill]
    kept = list(range(len(real))) if full else decode[:QWEN_DECODE_KEPT]
    tokens, entry, req, pos, phase = [], {}, [], [], []
    for i in kept:
        is_prefill = i in prefill
        for j in range(size[i]):
            tokens.append((i, j))
            req.append(0 if is_prefill else j)
            pos.append(j if is_prefill else decode.index(i))
            phase.append(0 if is_prefill else 1)
            for layer in QWEN_LAYERS:
                entry[(layer, (i, j))] = calls[layer][real[i]][j]
    step = np.array([t[0] for t in tokens], dtype=np.int32)
    top_mass = {str(layer): round(float(np.mean([sum(entry[(layer, t)][1]) for t in tokens])),
                                  4) for layer in QWEN_LAYERS}
    prefill_sizes = ", ".join(str(size[i]) for i in prefill)
    kept_text = (f"every real call: {len(prefill)} prefill calls ({prefill_sizes} tokens) "
                 f"and all {len(decode)} decode calls" if full else
                 f"SUBSAMPLED to keep the data small: the first "
                 f"{QWEN_DECODE_KEPT} of the {len(decode)} decode calls (all "
                 f"{QWEN_REQUESTS} requests run in each; `--full`, i.e. the trace "
                 f"qwen1.5-moe-gsm8k25-full, writes every call)")
    meta = {"top_k_softmax_mass": top_mass, "provenance": dict(
        QWEN_PROVENANCE, paths=list(src.read_files),
        derived=(
            f"a forward call starts where token_idx is 0: {count} calls in every run, of "
            f"identical sizes; dropped: the leading {len(dummies)} calls whose every token "
            f"has the same routing in every layer (vLLM's dummy profiling runs, "
            f"{', '.join(str(len(calls[QWEN_LAYERS[0]][c])) for c in dummies)} tokens). "
            f"Layers {', '.join(map(str, QWEN_LAYERS))} come from five separate runs of "
            f"the same workload, aligned by (call, index in the call). Kept: {kept_text}; "
            f"{len(tokens)} tokens. step = the call's index after the dummy calls; phase "
            f"0 for calls with more than {QWEN_REQUESTS} tokens (prefill), else 1; "
            f"request id = index in a decode call (not stable across calls), 0 in "
            f"prefill calls (unknown); position = index in a prefill call, decode-call "
            f"index in decode. top_k_softmax_mass: per layer, the mean row sum of "
            f"weights.npy (the model's top-4 share of the full softmax)."),
        step_grouping="recorded (the engine's forward calls)")}
    return _build(fmt, QWEN_E, QWEN_K, QWEN_MODEL, src, tokens, list(QWEN_LAYERS), entry,
                  np.array(req, np.int32), np.array(pos, np.int32),
                  np.array(phase, np.uint8), step, meta)


# name -> (source repository, converter, written by default)
CONVERTERS = {
    "mixtral-8x7b-humaneval0": (MIXTRAL_REPO, convert_mixtral_humaneval0, True),
    "mixtral-8x7b-decode-4req": (MIXTRAL_REPO, convert_mixtral_decode_4req, True),
    "qwen1.5-moe-gsm8k25-decode": (QWEN_REPO, lambda f, s: convert_qwen(f, s, False), True),
    "qwen1.5-moe-gsm8k25-full": (QWEN_REPO, lambda f, s: convert_qwen(f, s, True), False),
}


def _compare(a: str, b: str):
    """Differences between two trace directories (file names, .npy contents, meta)."""
    if not os.path.isdir(b):
        return [f"{b}: missing"]
    diffs = []
    fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
    if fa != fb:
        diffs.append(f"files differ: {sorted(set(fa) ^ set(fb))}")
    for name in sorted(set(fa) & set(fb)):
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        if name.endswith(".npy"):
            x, y = np.load(pa), np.load(pb)
            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
                diffs.append(f"{name}: contents differ")
        else:
            with open(pa, "rb") as f, open(pb, "rb") as g:
                if f.read() != g.read():
                    diffs.append(f"{name}: contents differ")
    return diffs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    committed = [n for n, (_, _, c) in CONVERTERS.items() if c]
    ap.add_argument("names", nargs="*",
                    help=f"traces (default: {', '.join(committed)}; "
                         f"also: {', '.join(n for n in CONVERTERS if n not in committed)})")
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="output root (default shared/traces/public)")
    ap.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=PATH",
                    help="a git clone of a source repository (default "
                         "shared/sources/OWNER+NAME)")
    ap.add_argument("--check", action="store_true",
                    help="convert into a temporary directory and compare with --out")
    args = ap.parse_args(argv)
    git_dirs = {repo: os.path.join(DEFAULT_SOURCES, repo.replace("/", "+")) for repo in SOURCES}
    for spec in args.repo:
        name, sep, path = spec.partition("=")
        if not sep or name not in SOURCES:
            ap.error(f"--repo {spec!r}: expected OWNER/NAME=PATH with OWNER/NAME one of "
                     f"{', '.join(SOURCES)}")
        git_dirs[name] = path
    names = args.names or committed
    for name in names:
        if name not in CONVERTERS:
            ap.error(f"unknown trace {name!r} (known: {', '.join(CONVERTERS)})")
    fmt = _import_format()
    work = tempfile.mkdtemp(prefix="public-traces-") if args.check else args.out
    failed = 0
    try:
        for name in names:
            repo, convert, _ = CONVERTERS[name]
            trace = convert(fmt, Source(repo, git_dirs[repo]))
            target = os.path.join(work, name)
            if os.path.isdir(target):
                shutil.rmtree(target)
            fmt.save_trace(trace, target)
            size = sum(os.path.getsize(os.path.join(target, f)) for f in os.listdir(target))
            line = (f"{name}: {trace.num_tokens} tokens x {len(trace.layers)} layers, "
                    f"{size / 1024:.0f} KiB")
            if args.check:
                diffs = _compare(target, os.path.join(args.out, name))
                failed += bool(diffs)
                line += ": " + ("matches the trace in --out" if not diffs
                                else "DIFFERS: " + "; ".join(diffs))
            else:
                line += f" -> {target}"
            print(line)
    finally:
        if args.check:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
