#!/usr/bin/env python3
"""Convert public routing traces of real MoE models into Switchyard's trace layout
(docs/traces.md), one directory per trace under traces/public/, with a "provenance"
object in each meta.json that names the source repository, commit, paths (with git blob
ids and sha256 of the bytes read), the license, what the source holds and what this
script derived. traces/public/README.md describes the traces and the metrics that are
meaningful on them.

Where the data comes from
-------------------------
Every trace below is read from one public GitHub repository, at a pinned commit:

  https://github.com/Mario928/speculative-moe   (no license file at any commit)
  commit 216e26eb86ee09fa46bb0e8c000be7e9758e10b6 ("Reorganize repo: add
  profiling_moe_code, routing_data_collected, analysis/deep_analysis", 2025-12-09),
  the last commit before the repository moved its .jsonl files to Git LFS (later
  commits hold LFS pointers only).

It holds routing decisions of neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8 (Mixtral
8x7B Instruct, FP8 expert weights; 32 MoE layers, 8 experts, top-2), recorded in vLLM
(enforce_eager=True, one GPU, temperature 0, max_tokens 256; the repository's
profiling_moe_code/collect_data.py at that commit) by a hook on vLLM's
FusedMoE.select_experts (profiling_moe_code/custom_profiling/routing_profiler.py):
per token and MoE layer, the top-2 expert ids and their top-2 weights (the softmax of
the router logits renormalized over the two chosen experts), one JSON line each. The
hook skips every (token, layer) whose two weights are exactly [0.5, 0.5] (meant for
vLLM's dummy padding tokens; real tokens whose top-2 router logits tie in bfloat16 are
skipped too: 2.7% of the records), so a few (token, layer) records are missing.

  mixtral-8x7b-humaneval0        analysis/deep_analysis/routing_raw.jsonl: the hook's raw
                                 output for HumanEval/0 (one request): the prefill
                                 (135 prompt tokens, one forward pass) and 83 decode
                                 passes, in execution order, every layer.
  mixtral-8x7b-decode-4req       routing_data_collected/humaneval_2_routing.jsonl and
                                 gsm8k_2_routing.jsonl: the repository's post-processed
                                 decode records (prefill removed, grouped by layer) of
                                 HumanEval/0, HumanEval/1 (HumanEval test split) and
                                 GSM8K test questions 0 and 1: 83, 255, 168 and 79 decode
                                 passes, each request run alone.

What is derived
---------------
  logits   the source has no router logits. For each recorded (token, layer) with
           experts (a, b) and weights (pa, pb) the trace's logits are log(pa) at a,
           log(pb) at b and -inf (unknown) at the other six experts: the softmax of
           that row is the model's own top-2 weights, and the true logits equal these
           up to a per-token constant on {a, b}. So mass_kept is the fraction of the
           model's top-2 combine weight a policy keeps (the model's own routing keeps
           1.0), not a fraction of the full 8-expert softmax.
  ids      the recorded experts, as they are; weights the recorded top-2 weights.
  tokens   a trace holds the same tokens in every layer. mixtral-8x7b-humaneval0: the
           raw file's execution order gives every record its forward pass (a new pass
           starts where the layer index falls) and, in the prefill, its prompt
           position (the hook's batch index counts skipped tokens too), so a token is
           identified exactly; a token is kept iff all 32 layers recorded it (94 of
           218: 59 of 135 prefill tokens, 35 of 83 decode passes). mixtral-8x7b-
           decode-4req: the post-processed files renumber each layer's records after
           the skipped ones, so a layer's i-th record is the i-th decode pass only in
           a layer that skipped none; such a layer has the request's largest record
           count. The trace keeps the layers complete in all four requests
           (1, 5, 10, 12, 24, 26, 28) and all 585 decode tokens.
  steps    mixtral-8x7b-humaneval0: the recorded forward passes (step 0 the prefill,
           steps 1..83 the decode passes; steps whose token was dropped are absent).
           mixtral-8x7b-decode-4req: SIMULATED batching: step i groups decode pass i
           of every request that is still generating (4 requests, then fewer). The
           source ran each request alone; Mixtral routes each token from its own
           hidden state, so the routing of a token does not depend on the batch it is
           in, but the batches themselves are this script's, not an engine's.
  positions / phase   humaneval0: prompt positions 0..134, decode pass s at 135+s-1;
           decode-4req: the decode pass index (prompt lengths are not in the source).

Usage
-----
  scripts/convert_public_trace.py                   # all traces -> traces/public/
  scripts/convert_public_trace.py --check           # reconvert and compare with the
                                                    # committed traces (exit 1 on a diff)
  scripts/convert_public_trace.py --repo Mario928/speculative-moe=/path/to/clone

The source repository is read with git (`git show COMMIT:PATH`) from a clone or mirror
that holds the commit: by default /work/.mirror/Mario928+speculative-moe/repo (the
session tool `fetch github:Mario928/speculative-moe` puts it there), else
`git clone https://github.com/Mario928/speculative-moe` and pass --repo. The git blob id
of every file read is checked against the one recorded here, so a conversion reads
exactly the bytes the committed trace came from.
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
DEFAULT_OUT = os.path.join(ROOT, "traces", "public")
DEFAULT_MIRROR_ROOT = "/work/.mirror"

REPO = "Mario928/speculative-moe"
COMMIT = "216e26eb86ee09fa46bb0e8c000be7e9758e10b6"
# path -> git blob id at COMMIT (checked on every read)
BLOBS = {
    "analysis/deep_analysis/routing_raw.jsonl": "436638bbb8807e5fd3933c4f9903b66afb88066e",
    "routing_data_collected/humaneval_2_routing.jsonl":
        "bdd16e7e589e4ef52f498439b96161ffc7197600",
    "routing_data_collected/gsm8k_2_routing.jsonl": "ab67860b812ffde42d090b28c2db09441d15016a",
}
MODEL = "neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8"
NUM_EXPERTS, TOP_K, NUM_LAYERS = 8, 2, 32

COMMON = {
    "repository": f"https://github.com/{REPO}",
    "commit": COMMIT,
    "license": "none stated (the repository has no license file at any commit)",
    "model": MODEL + " (Mixtral 8x7B Instruct with FP8 expert weights; the source's "
             "README states the router gate is not quantized)",
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
    "metrics_meaningful": [
        "model_experts_active_mean/_p99, experts_active_* of any policy",
        "tokens_per_expert_*, ep_imbalance (the model's ids are exact)",
        "mass_kept_mean as the fraction of the model's top-2 combine weight kept "
        "(1.0 for the model's own routing)",
    ],
    "metrics_not_meaningful": [
        "mass_kept_mean as a fraction of the full softmax (the other six logits are "
        "unknown), or compared with traces that hold real logits",
        "the choice among experts outside a token's top-2 (all -inf here)",
    ],
    "converter": "scripts/convert_public_trace.py",
}


def _import_format():
    """switchyard.trace.format (numpy only) from the build tree, else an installed one."""
    path = os.path.join(ROOT, "build", "python")
    if os.path.isfile(os.path.join(path, "switchyard", "__init__.py")):
        sys.path.insert(0, path)
    from switchyard.trace import format as fmt
    return fmt


class Source:
    """A git repository (clone or mirror) holding COMMIT; reads files at it."""

    def __init__(self, git_dir: str):
        if not os.path.isdir(git_dir):
            sys.exit(f"error: {git_dir}: no such directory; fetch github:{REPO} (or git "
                     f"clone https://github.com/{REPO}) and pass --repo {REPO}=PATH")
        self.git_dir = git_dir
        self.read_files = []

    def _git(self, *args) -> bytes:
        try:
            return subprocess.run(["git", "-C", self.git_dir, *args], check=True,
                                  capture_output=True).stdout
        except subprocess.CalledProcessError as e:
            sys.exit(f"error: git {' '.join(args)} in {self.git_dir}: "
                     f"{e.stderr.decode(errors='replace').strip()}")

    def read(self, path: str) -> bytes:
        blob = self._git("rev-parse", f"{COMMIT}:{path}").decode().strip()
        if blob != BLOBS[path]:
            sys.exit(f"error: {path} at {COMMIT} is blob {blob}, expected {BLOBS[path]}")
        data = self._git("cat-file", "blob", blob)
        self.read_files.append({"path": path, "blob": blob, "bytes": len(data),
                                "sha256": hashlib.sha256(data).hexdigest()})
        return data


def _records(data: bytes, path: str):
    out = []
    for n, line in enumerate(data.decode().splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        ids, w = r["experts"], r["gating_probs"]
        if (len(ids) != TOP_K or len(w) != TOP_K or len(set(ids)) != TOP_K
                or not all(0 <= e < NUM_EXPERTS for e in ids)
                or not 0 <= r["layer"] < NUM_LAYERS or not all(0 < x <= 1 for x in w)):
            sys.exit(f"error: {path}:{n}: unexpected record {line[:120]}")
        out.append(r)
    return out


def _logits_row(ids, weights):
    row = np.full(NUM_EXPERTS, -np.inf, dtype=np.float32)
    row[list(ids)] = np.log(np.asarray(weights, dtype=np.float64)).astype(np.float32)
    return row


def _build(fmt, tokens, layers, entry, request_ids, positions, phase, step, meta):
    """tokens: keys in trace order; entry[(layer, key)] = (ids, weights)."""
    logits, ids, weights = {}, {}, {}
    for layer in layers:
        rows = [entry[(layer, t)] for t in tokens]
        logits[layer] = np.stack([_logits_row(i, w) for i, w in rows])
        ids[layer] = np.array([i for i, _ in rows], dtype=np.uint8)
        weights[layer] = np.array([w for _, w in rows], dtype=np.float32)
    return fmt.Trace(num_experts=NUM_EXPERTS, top_k=TOP_K, logits=logits, ids=ids,
                     weights=weights, request_ids=request_ids, positions=positions,
                     phase=phase, step=step, model=MODEL,
                     source=f"public:{REPO}@{COMMIT[:12]}", dtype="float32", meta=meta)


def convert_humaneval0(fmt, src: Source):
    path = "analysis/deep_analysis/routing_raw.jsonl"
    recs = _records(src.read(path), path)
    # Forward passes: the hook writes layer 0's records, then layer 1's, ... per pass;
    # a new pass starts where the layer index falls.
    passes, prev = [], NUM_LAYERS
    for r in recs:
        if r["layer"] < prev:
            passes.append([])
        passes[-1].append(r)
        prev = r["layer"]
    prefill = passes[0]
    prompt = 1 + max(r["token_pos"] for r in prefill)
    for layer in range(NUM_LAYERS):
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
            key = (s, r["token_pos"])
            entry[(r["layer"], key)] = (r["experts"], r["gating_probs"])
    every = [(0, i) for i in range(prompt)] + [(s, 0) for s in range(1, len(passes))]
    kept = [t for t in every if all((layer, t) in entry for layer in range(NUM_LAYERS))]
    decode_all = len(passes) - 1
    kept_prefill = sum(1 for t in kept if t[0] == 0)
    steps = np.array([t[0] for t in kept], dtype=np.int32)
    positions = np.array([t[1] if t[0] == 0 else prompt + t[0] - 1 for t in kept],
                         dtype=np.int32)
    phase = (steps > 0).astype(np.uint8)
    meta = {"provenance": dict(
        COMMON, paths=list(src.read_files),
        workload=f"HumanEval/0 (openai_humaneval test split, problem 0), one request: "
                 f"prefill of {prompt} prompt tokens, then {decode_all} decode passes",
        derived=(
            f"forward passes from the raw file's execution order (a new pass where the "
            f"layer index falls): pass 0 the prefill, passes 1..{decode_all} one decode "
            f"token each; prefill position = the hook's batch index. Kept: the tokens "
            f"that all {NUM_LAYERS} layers recorded: {len(kept)} of {len(every)} "
            f"({kept_prefill} of {prompt} prefill tokens, {len(kept) - kept_prefill} of "
            f"{decode_all} decode passes); {len(every) * NUM_LAYERS - len(entry)} of "
            f"{len(every) * NUM_LAYERS} (token, layer) records were skipped by the "
            f"recorder. step = forward pass, phase 0 prefill / 1 decode, request 0, "
            f"decode position = {prompt} + pass - 1."),
        step_grouping="recorded (the engine's forward passes)")}
    return _build(fmt, kept, list(range(NUM_LAYERS)), entry,
                  np.zeros(len(kept), np.int32), positions, phase, steps, meta)


def convert_decode_4req(fmt, src: Source):
    files = [("humaneval", "routing_data_collected/humaneval_2_routing.jsonl"),
             ("gsm8k", "routing_data_collected/gsm8k_2_routing.jsonl")]
    requests = []  # (label, {layer: [(ids, weights), ...]})
    for dataset, path in files:
        per = defaultdict(lambda: defaultdict(list))
        for r in _records(src.read(path), path):
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
        n = max(len(layers[layer]) for layer in range(NUM_LAYERS))
        lengths.append(n)
        complete.append({layer for layer in range(NUM_LAYERS) if len(layers[layer]) == n})
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
        COMMON, paths=list(src.read_files),
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
    return _build(fmt, tokens, keep_layers, entry, req, pos,
                  np.ones(len(tokens), np.uint8), pos.copy(), meta)


CONVERTERS = {
    "mixtral-8x7b-humaneval0": convert_humaneval0,
    "mixtral-8x7b-decode-4req": convert_decode_4req,
}


def _compare(a: str, b: str):
    """Differences between two trace directories (file names, .npy contents, meta)."""
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
    ap.add_argument("names", nargs="*", help=f"traces (default all: {', '.join(CONVERTERS)})")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output root (default traces/public)")
    ap.add_argument("--repo", action="append", default=[], metavar="OWNER/NAME=PATH",
                    help=f"a git clone or mirror of {REPO} (default "
                         f"{DEFAULT_MIRROR_ROOT}/{REPO.replace('/', '+')}/repo)")
    ap.add_argument("--check", action="store_true",
                    help="convert into a temporary directory and compare with --out")
    args = ap.parse_args(argv)
    git_dir = os.path.join(DEFAULT_MIRROR_ROOT, REPO.replace("/", "+"), "repo")
    for spec in args.repo:
        name, sep, path = spec.partition("=")
        if not sep or name != REPO:
            ap.error(f"--repo {spec!r}: expected {REPO}=PATH")
        git_dir = path
    names = args.names or list(CONVERTERS)
    for name in names:
        if name not in CONVERTERS:
            ap.error(f"unknown trace {name!r} (known: {', '.join(CONVERTERS)})")
    fmt = _import_format()
    work = tempfile.mkdtemp(prefix="public-traces-") if args.check else args.out
    failed = 0
    try:
        for name in names:
            trace = CONVERTERS[name](fmt, Source(git_dir))
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
                line += ": " + ("matches the committed trace" if not diffs
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
