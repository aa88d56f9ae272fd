#!/usr/bin/python3
"""Execution tests: every shipped router policy, compiled and run by `moe-run`, against
the independent numpy references in reference.py.

  test_policies.py --build BUILD_DIR --policy NAME     (NAME: topk_softmax, deepseek_v3,
                                                        lynx, xshare, xshare_spec,
                                                        xshare_ep, shapes, models,
                                                        or all)

The shipped policy files are generic: each case binds one to its shape with moe-run's
flags (--experts, --top-k, and --groups/--topk-groups, --devices/--slots where the
policy uses them; `shapes` runs every router at (E, k) = (8, 2), (60, 4), (64, 8),
(128, 8), (256, 8), `models` binds with --model models/*.json), the inputs are written
as .npy files, `moe-run` runs the compiled policy with the case's `--set` knobs,
and EVERY result file is compared with the reference: ids, sets, counts and lists
exactly (same shape and dtype), weights within atol 1e-5 (NaN matches NaN).

Prints one line per case (`ok   ...` / `FAIL ...`, with the first differing positions
under a failure), then `N passed, M failed`; exits 1 when M > 0.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference as R  # noqa: E402

ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
POLICY_DIR = os.path.join(ROOT, "policies")
MODEL_DIR = os.path.join(ROOT, "models")
F32 = np.float32
INF = np.inf
BLOCK = 64       # every shipped policy aligns blocks of 64 (moe.align_blocks)
WEIGHT_ATOL = 1e-5
POLICIES = ["topk_softmax", "top_p", "oea", "deepseek_v3", "lynx", "xshare", "xshare_spec",
            "xshare_ep", "capacity_topk", "capacity_drop", "moe_spec", "metro", "expert_choice"]
RESULTS = ["topk_ids", "topk_weights", "physical_ids", "device_experts", "selected",
           "expert_counts", "active_experts",
           "num_active", "sorted_token_ids", "expert_ids", "num_tokens_post_padded",
           "num_dropped", "expert_token_ids", "expert_token_weights", "expert_block_ids",
           "expert_tokens_post_padded", "num_unrouted"]
WEIGHT_RESULTS = ("topk_weights", "expert_token_weights")  # compared within WEIGHT_ATOL


def _load_gen_trace():
    spec = importlib.util.spec_from_file_location(
        "gen_trace", os.path.join(ROOT, "scripts", "gen_trace.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN_TRACE = _load_gen_trace()


# ---------------------------------------------------------------------------------------
# Binding the generic policy files to a shape
# ---------------------------------------------------------------------------------------

class Tools:
    def __init__(self, build, workdir):
        self.moe_run = os.path.join(build, "bin", "moe-run")
        self.moe_opt = os.path.join(build, "bin", "moe-opt")
        for tool in (self.moe_run, self.moe_opt):
            if not os.access(tool, os.X_OK):
                sys.exit("test_policies: %s is missing (build first)" % tool)
        self.workdir = workdir
        self.variants = {}
        self.lane_parallel = False

    def bind(self, case):
        """The policy file and the shape flags that bind it to the case's shape (checked
        once per shape: `moe-run --list` must report the bound experts and top_k)."""
        path = os.path.join(POLICY_DIR, case.policy + ".mlir")
        if case.path is not None:  # a test-only variant of a shipped policy
            path = os.path.join(ROOT, case.path)
        flags = ["--experts", str(case.E), "--top-k", str(case.k)]
        if case.model is not None:
            flags = ["--model", case.model]
        if case.groups is not None:
            flags += ["--groups", str(case.groups), "--topk-groups", str(case.topk_groups)]
        if case.devices is not None:
            flags += ["--devices", str(case.devices), "--slots", str(case.slots)]
        key = (case.policy,) + tuple(flags)
        if key not in self.variants:
            p = subprocess.run([self.moe_run, path, "--list"] + flags,
                               capture_output=True, text=True)
            info = json.loads(p.stdout)["entries"][0] if p.returncode == 0 else None
            if info is None or info["experts"] != case.E or info["top_k"] != case.k:
                raise RuntimeError("%s %s: --list says %s%s" % (
                    path, " ".join(flags), p.stdout[:400], p.stderr[:400]))
            self.variants[key] = True
        return path, flags


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------

def trace(T, E, seed, *extra):
    """scripts/gen_trace.py's correlated synthetic trace (logits, request_ids, bias)."""
    a = GEN_TRACE.parse_args(["--tokens", str(T), "--experts", str(E), "--seed", str(seed),
                              "--out", "-"] + [str(x) for x in extra])
    logits, rids, bias = GEN_TRACE.generate(a)
    return logits[0], rids, bias[0]


def normal(T, E, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal((T, E)) * scale).astype(F32)


def with_neg_inf(x, seed, frac=0.3):
    """Some -inf entries, one whole -inf row, one row with a single finite entry."""
    x = x.copy()
    rng = np.random.default_rng(seed)
    x[rng.random(x.shape) < frac] = -INF
    if x.shape[0] >= 2:
        x[1] = -INF
    if x.shape[0] >= 3:
        x[2] = -INF
        x[2, x.shape[1] - 1] = 0.5
    return x


def round_tie(T, E):
    """Logits 0 and 1e-8 whose probabilities round to one float32 (the logits rank
    expert 1 first, the probabilities would tie toward 0); the others well below."""
    x = np.full((T, E), -5.0, dtype=F32)
    x[:, 0] = 0.0
    x[:, 1] = 1e-8
    return x


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

class Case:
    def __init__(self, policy, E, k, T, desc, inputs, knobs=None, devices=None, slots=None,
                 ref_args=None, expect_ids=None, groups=None, topk_groups=None, model=None,
                 path=None):
        self.policy, self.E, self.k, self.T = policy, E, k, T
        self.path = path              # the policy file, when not policies/POLICY.mlir
        self.groups, self.topk_groups = groups, topk_groups
        self.model = model            # a config.json that binds the shape (--model)
        self.desc = desc
        self.inputs = inputs          # name -> np.ndarray, or an int (scalar literal)
        self.knobs = knobs or {}
        self.devices, self.slots = devices, slots
        self.ref_args = ref_args or {}
        self.expect_ids = expect_ids  # an extra, reference-free check of topk_ids

    def label(self):
        parts = [self.policy, "E=%d" % self.E, "k=%d" % self.k, "T=%d" % self.T]
        if self.model is not None:
            parts.append("--model " + os.path.relpath(self.model, ROOT))
        if self.groups is not None:
            parts.append("groups=%d keep=%d" % (self.groups, self.topk_groups))
        if self.devices is not None:
            parts.append("devices=%d slots=%d" % (self.devices, self.slots))
        if self.path is not None:
            parts.append(os.path.basename(self.path))
        parts.append(self.desc)
        parts += ["%s=%s" % kv for kv in self.knobs.items()]
        return " ".join(p for p in parts if p)

    def reference(self):
        logits = self.inputs["logits"]
        kn = dict(self.ref_args)
        kn.update(self.knobs)
        p, k = self.policy, self.k
        if p == "topk_softmax":
            r = R.topk_softmax(logits, k, **kn)
        elif p == "top_p":
            r = R.top_p(logits, k, **kn)
        elif p == "oea":
            r = R.oea(logits, k, **kn)
        elif p == "deepseek_v3":
            r = R.deepseek_v3(logits, self.inputs["bias"], k=k, groups=self.groups,
                              topk_groups=self.topk_groups, **kn)
        elif p == "lynx":
            r = R.lynx(logits, self.inputs["phase"], k, **kn)
        elif p == "xshare":
            r = R.xshare(logits, k, **kn)
        elif p == "xshare_spec":
            r = R.xshare_spec(logits, self.inputs["request_ids"], k, **kn)
        elif p == "xshare_ep":
            r = R.xshare_ep(logits, self.inputs["bias"], self.inputs["placement"], k,
                            devices=self.devices, slots=self.slots, **kn)
        elif p == "moe_spec":
            r = R.moe_spec(logits, self.inputs["draft_mask"], k, **kn)
        elif p == "metro":
            r = R.metro(logits, self.inputs["placement"], k, devices=self.devices,
                        slots=self.slots, **kn)
        elif p in ("capacity_topk", "capacity_drop"):  # no active-expert list
            r = getattr(R, p)(logits, k, **kn)
            (r["sorted_token_ids"], r["expert_ids"],
             r["num_tokens_post_padded"]) = R.align_block_size(r["topk_ids"], self.E, BLOCK)
            return r
        elif p == "expert_choice":
            return R.expert_choice(logits, k, block_size=BLOCK, **kn)
        else:
            raise ValueError(p)
        r["active_experts"], r["num_active"] = R.active_experts(r["expert_counts"])
        (r["sorted_token_ids"], r["expert_ids"],
         r["num_tokens_post_padded"]) = R.align_block_size(r["topk_ids"], self.E, BLOCK)
        return r


def cases_topk_softmax():
    P = "topk_softmax"
    c = []
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 100 + T)[0]}))
    for T in (1, 16, 64, 1024):
        c.append(Case(P, 64, 8, T, "normal", {"logits": normal(T, 64, 200 + T)}))
    c.append(Case(P, 64, 8, 7, "trace", {"logits": trace(7, 64, 7, "--temperature", 0.3)[0]}))
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 8, 2, T, "normal", {"logits": normal(T, 8, 300 + T)}))
    # k = E.
    c.append(Case(P, 8, 8, 16, "normal k=E", {"logits": normal(16, 8, 17)}))
    c.append(Case(P, 8, 8, 7, "-inf k=E", {"logits": with_neg_inf(normal(7, 8, 18), 19)}))
    # Ties break toward the lower expert id: all-equal logits -> ids 0..k-1.
    for E, k, T in ((128, 8, 7), (8, 2, 1), (8, 8, 16), (64, 8, 64)):
        c.append(Case(P, E, k, T, "ties(all-equal)", {"logits": np.zeros((T, E), F32)},
                      expect_ids=np.tile(np.arange(k, dtype=np.int32), (T, 1))))
    c.append(Case(P, 64, 8, 16, "-inf", {"logits": with_neg_inf(normal(16, 64, 21), 22, 0.9)}))
    c.append(Case(P, 128, 8, 64, "-inf", {"logits": with_neg_inf(trace(64, 128, 23)[0], 24)}))
    c.append(Case(P, 8, 2, 16, "all -inf", {"logits": np.full((16, 8), -INF, F32)}))
    # Ranking by logits: probabilities that round to a tie / underflow to 0.
    c.append(Case(P, 8, 2, 7, "round-tie", {"logits": round_tie(7, 8)},
                  expect_ids=np.tile(np.array([1, 0], np.int32), (7, 1))))
    c.append(Case(P, 128, 8, 64, "normal*40 (underflowing p)",
                  {"logits": normal(64, 128, 25, scale=40.0)}))
    nan = normal(7, 64, 26)
    nan[3, 5] = np.nan
    c.append(Case(P, 64, 8, 7, "nan", {"logits": nan}))
    return c


def cases_top_p():
    P = "top_p"
    c = []
    for T in (1, 7, 64, 1024):
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 400 + T)[0]}))
    for p in (0.3, 0.5, 0.9, 1.0):
        c.append(Case(P, 64, 8, 64, "normal", {"logits": normal(64, 64, 410, scale=3.0)},
                      knobs={"p": p}))
    # k_min keeps slots past the mass; k_min = k is plain top-k.
    for k_min in (2, 8):
        c.append(Case(P, 64, 8, 16, "normal", {"logits": normal(16, 64, 420, scale=3.0)},
                      knobs={"p": 0.2, "k_min": k_min}))
    # One dominant expert: a single slot holds p.
    peaked = normal(7, 16, 430)
    peaked[:, 5] += 30.0
    c.append(Case(P, 16, 4, 7, "peaked", {"logits": peaked},
                  expect_ids=np.tile(np.array([5, -1, -1, -1], np.int32), (7, 1))))
    # Ties to the lower id; every expert alike needs ceil(p * E) of them (capped at k).
    c.append(Case(P, 8, 4, 5, "ties(all-equal)", {"logits": np.zeros((5, 8), F32)},
                  knobs={"p": 0.3},
                  expect_ids=np.tile(np.array([0, 1, 2, -1], np.int32), (5, 1))))
    c.append(Case(P, 64, 8, 16, "-inf", {"logits": with_neg_inf(normal(16, 64, 440), 441,
                                                                 0.95)}))
    return c


def cases_oea():
    P = "oea"
    c = []
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 450 + T)[0]}))
    # The baseline's size, and how far a token may reach for a batch expert: max_rank
    # 0 (= k: only ever a subset of its own top-k), a wider bound, E (any batch expert).
    for k0 in (0, 1, 2, 8):
        c.append(Case(P, 64, 8, 16, "normal", {"logits": normal(16, 64, 460 + k0)},
                      knobs={"k0": k0}))
    for max_rank in (1, 4, 16, 64):
        c.append(Case(P, 64, 8, 64, "normal", {"logits": normal(64, 64, 470, scale=2.0)},
                      knobs={"k0": 2, "max_rank": max_rank}))
    # One token: its baseline is the whole set, so it keeps its top-k0 and nothing else.
    c.append(Case(P, 16, 4, 1, "one token", {"logits": normal(1, 16, 480)},
                  knobs={"k0": 2, "max_rank": 16}))
    # Ties to the lower id: every token alike, S = {0..k0-1}.
    c.append(Case(P, 8, 4, 5, "ties(all-equal)", {"logits": np.zeros((5, 8), F32)},
                  knobs={"k0": 2},
                  expect_ids=np.tile(np.array([0, 1, -1, -1], np.int32), (5, 1))))
    c.append(Case(P, 64, 8, 16, "-inf", {"logits": with_neg_inf(normal(16, 64, 490), 491,
                                                                 0.9)}, knobs={"k0": 2}))
    nan = normal(7, 64, 492)
    nan[3, 5] = np.nan
    c.append(Case(P, 64, 8, 7, "nan", {"logits": nan}, knobs={"k0": 2, "max_rank": 64}))
    return c


def cases_deepseek_v3():
    P = "deepseek_v3"
    c = []
    for T in (1, 7, 16, 64, 1024):
        lg, _, b = trace(T, 256, 400 + T, "--with-bias")
        c.append(Case(P, 256, 8, T, "trace", {"logits": lg, "bias": b}))
    for T in (1, 7, 64, 1024):
        lg, _, b = trace(T, 64, 500 + T, "--with-bias")
        c.append(Case(P, 64, 6, T, "trace", {"logits": lg, "bias": b}))
    rng = np.random.default_rng(31)
    for T in (16, 64):
        big_bias = (rng.standard_normal(256) * 0.5).astype(F32)
        c.append(Case(P, 256, 8, T, "normal big-bias",
                      {"logits": normal(T, 256, 600 + T), "bias": big_bias}))
    c.append(Case(P, 64, 6, 16, "normal zero-bias",
                  {"logits": normal(16, 64, 32), "bias": np.zeros(64, F32)}))
    # Ties: s = 0.5 everywhere -> groups 0..3 kept, ids 0..k-1.
    for E, k, T in ((256, 8, 7), (64, 6, 1)):
        c.append(Case(P, E, k, T, "ties(all-equal)",
                      {"logits": np.zeros((T, E), F32), "bias": np.zeros(E, F32)},
                      expect_ids=np.tile(np.arange(k, dtype=np.int32), (T, 1))))
    c.append(Case(P, 256, 8, 16, "-inf",
                  {"logits": with_neg_inf(normal(16, 256, 33), 34, 0.5),
                   "bias": np.zeros(256, F32)}))
    c.append(Case(P, 64, 6, 7, "-inf",
                  {"logits": with_neg_inf(normal(7, 64, 35), 36, 0.95),
                   "bias": (0.01 * normal(1, 64, 37)[0]).astype(F32)}))
    for cs in c:  # DeepSeek-V3's node-limited routing: 8 groups, 4 kept
        cs.groups, cs.topk_groups = 8, 4
    return c


def cases_lynx():
    P = "lynx"
    c = []
    for E, k in ((60, 4), (64, 8)):
        for T in (1, 7, 16, 64, 1024):
            lg = trace(T, E, 700 + T + E)[0]
            for phase in (0, 1, 2):
                c.append(Case(P, E, k, T, "trace phase=%d" % phase,
                              {"logits": lg, "phase": phase}))
    # max_tokens = 256: 256 decode tokens take the LYNX path, 257 do not.
    for T in (256, 257):
        c.append(Case(P, 60, 4, T, "trace phase=1",
                      {"logits": trace(T, 60, T)[0], "phase": 1}))
    # Knobs on decode batches.
    lg16 = trace(16, 60, 41, "--temperature", 0.5)[0]
    lg64 = trace(64, 64, 42)[0]
    for kn in ({"alpha": 1.0}, {"alpha": 4.5}, {"beta": 1}, {"beta": 8},
               {"theta": 0.5}, {"theta": 3.0}, {"theta": 100.0},
               {"alpha": 0.5, "beta": 2, "theta": 0.25}):
        c.append(Case(P, 60, 4, 16, "trace phase=1", {"logits": lg16, "phase": 1},
                      knobs=kn))
    for kn in ({"alpha": 3.0, "beta": 6}, {"theta": 2.0}):
        c.append(Case(P, 64, 8, 64, "trace phase=1", {"logits": lg64, "phase": 1},
                      knobs=kn))
    c.append(Case(P, 64, 8, 64, "trace phase=2", {"logits": lg64, "phase": 2},
                  knobs={"theta": 100.0}))
    # The phase from a .npy file instead of a literal.
    c.append(Case(P, 60, 4, 7, "phase.npy=1",
                  {"logits": trace(7, 60, 43)[0], "phase": np.array(1, np.int32)}))
    # Edge cases.
    for phase in (0, 1):
        c.append(Case(P, 60, 4, 7, "ties(all-equal) phase=%d" % phase,
                      {"logits": np.zeros((7, 60), F32), "phase": phase},
                      expect_ids=np.tile(np.arange(4, dtype=np.int32), (7, 1))))
        c.append(Case(P, 64, 8, 16, "-inf phase=%d" % phase,
                      {"logits": with_neg_inf(normal(16, 64, 44), 45, 0.9),
                       "phase": phase}))
        c.append(Case(P, 60, 4, 7, "round-tie phase=%d" % phase,
                      {"logits": round_tie(7, 60), "phase": phase}))
    c.append(Case(P, 60, 4, 1, "all -inf phase=1",
                  {"logits": np.full((1, 60), -INF, F32), "phase": 1}))
    c.append(Case(P, 64, 8, 64, "normal*10 phase=1",
                  {"logits": normal(64, 64, 46, scale=10.0), "phase": 1}))
    return c


def cases_xshare():
    P = "xshare"
    c = []
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 128, 4, T, "trace", {"logits": trace(T, 128, 800 + T)[0]}))
    lg = trace(64, 128, 51)[0]
    for k0 in (0, 1, 2):
        for budget in (0, 8, 24, 1000):
            c.append(Case(P, 128, 4, 64, "trace", {"logits": lg},
                          knobs={"k0": k0, "budget": budget}))
    # The paper's Eq. 2 reading (|S_l| <= m_l): set_budget grows S0 to m_l in all; a
    # warm-up set already larger stays whole; with budget too, both apply in turn.
    for k0, budget, set_budget in ((1, 0, 24), (2, 0, 16), (0, 0, 12), (1, 4, 30),
                                   (1, 0, 128), (2, 0, 1)):
        c.append(Case(P, 128, 4, 64, "trace set_budget", {"logits": lg},
                      knobs={"k0": k0, "budget": budget, "set_budget": set_budget}))
    for T in (1, 64, 1024):
        c.append(Case(P, 256, 8, T, "trace", {"logits": trace(T, 256, 900 + T)[0]}))
    c.append(Case(P, 256, 8, 16, "trace", {"logits": trace(16, 256, 52)[0]},
                  knobs={"k0": 2, "budget": 8}))
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 8, 2, T, "normal", {"logits": normal(T, 8, 1000 + T)},
                      knobs={"k0": 1, "budget": 1}))
    x8 = normal(16, 8, 53)
    c.append(Case(P, 8, 2, 16, "normal budget>E", {"logits": x8},
                  knobs={"k0": 1, "budget": 1000}))
    c.append(Case(P, 8, 2, 16, "normal empty", {"logits": x8}, knobs={"k0": 0, "budget": 0}))
    c.append(Case(P, 8, 2, 16, "normal warm-up-only", {"logits": x8},
                  knobs={"k0": 0, "budget": 3}))
    c.append(Case(P, 8, 8, 7, "normal k=E", {"logits": normal(7, 8, 54)},
                  knobs={"k0": 2, "budget": 1}))
    c.append(Case(P, 128, 4, 7, "ties(all-equal)", {"logits": np.zeros((7, 128), F32)},
                  expect_ids=np.tile(np.arange(4, dtype=np.int32), (7, 1))))
    c.append(Case(P, 8, 2, 1, "ties(all-equal)", {"logits": np.zeros((1, 8), F32)},
                  knobs={"k0": 0, "budget": 2},
                  expect_ids=np.array([[0, 1]], np.int32)))
    c.append(Case(P, 128, 4, 16, "-inf", {"logits": with_neg_inf(normal(16, 128, 55), 56, 0.9)}))
    c.append(Case(P, 8, 2, 7, "-inf", {"logits": with_neg_inf(normal(7, 8, 57), 58)},
                  knobs={"k0": 2, "budget": 0}))
    c.append(Case(P, 8, 2, 7, "round-tie", {"logits": round_tie(7, 8)},
                  knobs={"k0": 1, "budget": 0}))
    return c


def spec_ids(kind, T, rng):
    if kind == "spec3":                    # 1 + 3 drafts, contiguous
        return (np.arange(T) // 4).astype(np.int32)
    if kind == "own":                      # every token its own request
        return np.arange(T, dtype=np.int32)
    if kind == "interleaved":              # non-contiguous requests
        R_ = max(1, T // 5)
        return rng.permutation(np.arange(T) % R_).astype(np.int32)
    if kind == "one":                      # one request for the whole batch
        return np.full(T, 7, np.int32)
    if kind == "sparse-ids":               # arbitrary (large, negative) id values
        pool = np.array([-5, 2 ** 31 - 1, 123456789, 0, -(2 ** 31)], np.int64)
        return pool[rng.integers(0, len(pool), T)].astype(np.int32)
    raise ValueError(kind)


def cases_xshare_spec():
    P = "xshare_spec"
    c = []
    rng = np.random.default_rng(61)
    for E, k in ((64, 4), (128, 4)):
        for T in (1, 7, 16, 64, 1024):
            lg, rid, _ = trace(T, E, 1100 + T + E, "--spec-len", 3)
            c.append(Case(P, E, k, T, "trace spec-len=3",
                          {"logits": lg, "request_ids": rid}))
    lg, rid, _ = trace(64, 128, 62, "--requests", 9)
    for kn in ({"k0": 0, "request_budget": 0, "budget": 0},
               {"k0": 0, "request_budget": 4, "budget": 0},
               {"k0": 1, "request_budget": 1, "budget": 0},
               {"k0": 2, "request_budget": 8, "budget": 4},
               {"k0": 1, "request_budget": 0, "budget": 16},
               {"k0": 1, "request_budget": 4, "budget": 1000},
               # m_r is bounded by E (moe.segment_fill: k0, m_r in [0, E]).
               {"k0": 1, "request_budget": 128, "budget": 0}):
        c.append(Case(P, 128, 4, 64, "trace requests=9 (interleaved)",
                      {"logits": lg, "request_ids": rid}, knobs=kn))
    for kind in ("own", "interleaved", "one", "sparse-ids"):
        for E, T in ((64, 16), (128, 64)):
            lg = trace(T, E, 1200 + T + E)[0]
            c.append(Case(P, E, 4, T, "trace ids=%s" % kind,
                          {"logits": lg, "request_ids": spec_ids(kind, T, rng)},
                          knobs={"k0": 1, "request_budget": 2, "budget": 0}))
    c.append(Case(P, 64, 4, 1024, "trace ids=own", {
        "logits": trace(1024, 64, 63)[0], "request_ids": spec_ids("own", 1024, rng)}))
    c.append(Case(P, 64, 4, 1, "trace ids=own", {
        "logits": trace(1, 64, 64)[0], "request_ids": spec_ids("own", 1, rng)},
        knobs={"k0": 0, "request_budget": 0, "budget": 0}))
    c.append(Case(P, 64, 4, 7, "ties(all-equal)", {
        "logits": np.zeros((7, 64), F32), "request_ids": spec_ids("interleaved", 7, rng)},
        expect_ids=np.tile(np.arange(4, dtype=np.int32), (7, 1))))
    c.append(Case(P, 128, 4, 16, "-inf", {
        "logits": with_neg_inf(normal(16, 128, 65), 66, 0.9),
        "request_ids": spec_ids("interleaved", 16, rng)}))
    c.append(Case(P, 64, 4, 7, "round-tie", {
        "logits": round_tie(7, 64), "request_ids": spec_ids("own", 7, rng)},
        knobs={"k0": 1, "request_budget": 0, "budget": 0}))
    return c


def placement(E, slots, rng, replicate=0, width=None, shuffle=True):
    """log2phy [E, width] padded with -1: column 0 = the primary slot (a random
    permutation of the slots when shuffle), `replicate` experts get extra replicas on the
    spare slots (some get two)."""
    width = width or (slots - E + 1)
    l2p = np.full((E, width), -1, np.int32)
    perm = rng.permutation(slots) if shuffle else np.arange(slots)
    l2p[:, 0] = perm[:E]
    spare = list(perm[E:])
    owners = rng.choice(E, size=min(replicate, E), replace=False)
    for i, e in enumerate(owners):
        for col in range(1, 3 if i % 2 == 0 else 2):
            if spare and col < width:
                l2p[e, col] = spare.pop()
    return l2p


def cases_xshare_ep():
    P = "xshare_ep"
    c = []
    rng = np.random.default_rng(71)
    # DeepSeek-R1 shape: 256 experts, top-8, 8 devices, slots = 256.
    ident = np.arange(256, dtype=np.int32).reshape(256, 1)
    for T in (1, 7, 16, 64, 1024):
        lg, _, b = trace(T, 256, 1300 + T, "--with-bias")
        c.append(Case(P, 256, 8, T, "trace identity", {"logits": lg, "bias": b,
                                                       "placement": ident},
                      devices=8, slots=256))
    lg, _, b = trace(64, 256, 72, "--with-bias")
    perm = placement(256, 256, rng)
    for kn in ({"k0": 0, "device_budget": 0}, {"k0": 0, "device_budget": 1},
               {"k0": 1, "device_budget": 0}, {"k0": 2, "device_budget": 5},
               {"k0": 1, "device_budget": 40}):
        c.append(Case(P, 256, 8, 64, "trace permuted", {"logits": lg, "bias": b,
                                                        "placement": perm},
                      knobs=kn, devices=8, slots=256))
    # Replicated experts: slots = 288 (36 per device), 20 experts with 1-2 replicas.
    rep = placement(256, 288, rng, replicate=20, width=3)
    c.append(Case(P, 256, 8, 64, "trace replicated", {"logits": lg, "bias": b,
                                                      "placement": rep},
                  knobs={"k0": 1, "device_budget": 6}, devices=8, slots=288))
    # 64 experts, top-4, 4 devices.
    for T in (1, 7, 16, 64, 1024):
        lg, _, b = trace(T, 64, 1400 + T, "--with-bias")
        c.append(Case(P, 64, 4, T, "trace permuted", {"logits": lg, "bias": b,
                                                      "placement": placement(64, 64, rng)},
                      devices=4, slots=64))
    lg = normal(16, 64, 73)
    big_bias = (0.3 * normal(1, 64, 74)[0]).astype(F32)
    for kn in ({"k0": 0, "device_budget": 3}, {"k0": 1, "device_budget": 100}):
        c.append(Case(P, 64, 4, 16, "normal big-bias", {"logits": lg, "bias": big_bias,
                                                        "placement": placement(64, 64, rng)},
                      knobs=kn, devices=4, slots=64))
    # Replicated: slots = 80 (20 per device), log2phy [64, 17] padded with -1.
    for kn in ({"k0": 1, "device_budget": 5}, {"k0": 0, "device_budget": 2}):
        c.append(Case(P, 64, 4, 16, "normal replicated",
                      {"logits": lg, "bias": big_bias,
                       "placement": placement(64, 80, rng, replicate=12)},
                      knobs=kn, devices=4, slots=80))
    # Unbalanced primary slots: device 0 holds few experts (exhausts early).
    l2p = np.full((64, 17), -1, np.int32)
    l2p[:, 0] = np.concatenate([np.arange(0, 4), np.arange(20, 80)])
    c.append(Case(P, 64, 4, 16, "normal skewed-placement",
                  {"logits": lg, "bias": big_bias, "placement": l2p},
                  knobs={"k0": 0, "device_budget": 6}, devices=4, slots=80))
    # 1-D placement [E] (one slot per expert).
    c.append(Case(P, 64, 4, 7, "normal placement[E]",
                  {"logits": normal(7, 64, 75), "bias": np.zeros(64, F32),
                   "placement": rng.permutation(64).astype(np.int32)},
                  devices=4, slots=64))
    c.append(Case(P, 64, 4, 7, "ties(all-equal)",
                  {"logits": np.zeros((7, 64), F32), "bias": np.zeros(64, F32),
                   "placement": np.arange(64, dtype=np.int32).reshape(64, 1)},
                  knobs={"k0": 4, "device_budget": 0},
                  expect_ids=np.tile(np.arange(4, dtype=np.int32), (7, 1))))
    c.append(Case(P, 64, 4, 16, "-inf",
                  {"logits": with_neg_inf(normal(16, 64, 76), 77, 0.9),
                   "bias": np.zeros(64, F32), "placement": placement(64, 64, rng)},
                  knobs={"k0": 1, "device_budget": 2}, devices=4, slots=64))
    for cs in c:
        if cs.devices is None:
            cs.devices, cs.slots = 4, 64
    return c


def cases_models():
    """`--model config.json` for every config under models/: the shape, the routed
    scaling factor and renormalization (OLMoE's norm_topk_prob = false) come from the
    file; the reference reads the same file."""
    c = []
    for name in sorted(os.listdir(MODEL_DIR)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(MODEL_DIR, name)
        with open(path) as f:
            cfg = json.load(f)
        E = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg["n_routed_experts"]
        k = cfg.get("num_experts_per_tok") or cfg["experts_per_token"]
        for T in (1, 64):
            lg, _, b = trace(T, E, 1700 + E + k + T, "--with-bias")
            if "n_group" in cfg:
                c.append(Case("deepseek_v3", E, k, T, "model", {"logits": lg, "bias": b},
                              model=path, groups=cfg["n_group"],
                              topk_groups=cfg["topk_group"],
                              ref_args={"scaling": cfg["routed_scaling_factor"]}))
            else:
                c.append(Case("topk_softmax", E, k, T, "model", {"logits": lg}, model=path,
                              ref_args={"renormalize": cfg.get("norm_topk_prob", True)}))
    return c


# The model shapes every router is checked at (issue: one policy file for any model).
SHAPES = ((8, 2), (60, 4), (64, 8), (128, 8), (256, 8))


def deepseek_groups(E):
    """Groups / kept groups for DeepSeek-style routing at E experts: the most groups
    (<= 8) that divide E into groups of at least 2 (a group scores its top-2), keeping
    half: 8 / 4 for 64-256 experts, 6 / 3 for 60, 4 / 2 for 8."""
    g = max(d for d in range(1, 9) if E % d == 0 and E // d >= 2)
    return g, max(1, g // 2)


def cases_shapes():
    """Every router at every model shape of SHAPES, on a trace batch."""
    c = []
    rng = np.random.default_rng(91)
    for E, k in SHAPES:
        for T in (1, 64):
            lg, rids, b = trace(T, E, 1500 + 7 * E + k + T, "--with-bias")
            c.append(Case("topk_softmax", E, k, T, "shape", {"logits": lg}))
            g, keep = deepseek_groups(E)
            c.append(Case("deepseek_v3", E, k, T, "shape", {"logits": lg, "bias": b},
                          groups=g, topk_groups=keep))
            c.append(Case("lynx", E, k, T, "shape decode", {"logits": lg, "phase": 1}))
            c.append(Case("xshare", E, k, T, "shape", {"logits": lg}))
            c.append(Case("xshare_spec", E, k, T, "shape",
                          {"logits": lg, "request_ids": rids.astype(np.int32)}))
            c.append(Case("xshare_ep", E, k, T, "shape",
                          {"logits": lg, "bias": b, "placement": placement(E, E, rng)},
                          devices=4 if E % 4 == 0 else 2, slots=E))
    return c


def skewed(T, E, seed):
    """Logits with a few hot experts (a popularity bias decaying over the ids, shuffled),
    so that capacities overflow and experts compete for the same tokens."""
    rng = np.random.default_rng(seed)
    hot = (3.0 * np.exp(-np.arange(E) / 2.0))[rng.permutation(E)]
    return (rng.standard_normal((T, E)) + hot).astype(F32)


def cases_capacity_topk():
    P = "capacity_topk"
    c = []
    for T in (1, 7, 64, 1024, 4096):
        c.append(Case(P, 8, 2, T, "normal", {"logits": normal(T, 8, 2100 + T)}))
        c.append(Case(P, 8, 2, T, "skewed", {"logits": skewed(T, 8, 2200 + T)}))
    for T in (7, 64, 1024):
        c.append(Case(P, 64, 8, T, "skewed", {"logits": skewed(T, 64, 2300 + T)}))
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 2400 + T)[0]}))
    for factor in (0.25, 0.5, 2.0, 100.0):
        c.append(Case(P, 8, 2, 64, "skewed", {"logits": skewed(64, 8, 2500)},
                      knobs={"capacity_factor": factor}))
    c.append(Case(P, 8, 2, 7, "-inf", {"logits": with_neg_inf(normal(7, 8, 2501), 2502)}))
    c.append(Case(P, 8, 2, 16, "ties(all-equal)", {"logits": np.zeros((16, 8), F32)}))
    # The absolute form with C from the token count (moe.num_tokens + arith) and the
    # weights renormalized over the kept slots.
    for T in (1, 7, 64, 1024):
        for per in (1, 3, 40):
            c.append(Case(P, 8, 2, T, "skewed", {"logits": skewed(T, 8, 2600 + T)},
                          knobs={"tokens_per_slot": per}, ref_args={"tokens_per_slot": per},
                          path="test/exec/Inputs/capacity_absolute.mlir"))
    return c


def cases_capacity_drop():
    P = "capacity_drop"
    c = []
    for T in (1, 7, 64, 1024):
        c.append(Case(P, 8, 2, T, "skewed", {"logits": skewed(T, 8, 3200 + T)}))
    for T in (7, 64, 1024):
        c.append(Case(P, 64, 8, T, "skewed", {"logits": skewed(T, 64, 3300 + T)}))
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 3400 + T)[0]}))
    # Token Drop at several capacities; Expanded Drop: more candidates than k, up to E.
    for factor in (0.25, 0.5, 2.0, 100.0):
        c.append(Case(P, 8, 2, 64, "skewed", {"logits": skewed(64, 8, 3500)},
                      knobs={"capacity_factor": factor}))
    for candidates in (1, 4, 16, 64):
        c.append(Case(P, 64, 8, 64, "skewed", {"logits": skewed(64, 64, 3510)},
                      knobs={"candidates": candidates, "capacity_factor": 0.75}))
    # Equal scores: every token proposes experts 0..k-1, each admits the first C tokens.
    c.append(Case(P, 8, 2, 16, "ties(all-equal)", {"logits": np.zeros((16, 8), F32)}))
    c.append(Case(P, 8, 2, 64, "ties(repeated rows)",
                  {"logits": np.repeat(normal(8, 8, 3520), 8, axis=0)},
                  knobs={"candidates": 4}))
    c.append(Case(P, 8, 2, 7, "-inf", {"logits": with_neg_inf(normal(7, 8, 3521), 3522)},
                  knobs={"candidates": 8}))
    return c


def cases_moe_spec():
    P = "moe_spec"
    c = []

    def drafts(T, every, seed):
        """A verification step: every `every`-th token a request's own token, the rest
        its drafts; a few tokens of other requests (mask 0) mixed in."""
        mask = (np.arange(T) % every != 0).astype(np.int32)
        rng = np.random.default_rng(seed)
        mask[rng.random(T) < 0.1] = 0
        return mask

    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 128, 8, T, "trace drafts", {"logits": trace(T, 128, 3600 + T)[0],
                                                     "draft_mask": drafts(T, 4, T)}))
    # Truncation (max_rank 0 = k), bounded and full substitution, and budgets from none
    # to every expert.
    lg = trace(64, 64, 3650)[0]
    for kn in ({"budget": 8}, {"budget": 8, "max_rank": 16}, {"budget": 8, "max_rank": 64},
               {"budget": 0}, {"budget": 0, "max_rank": 64}, {"budget": 64},
               {"budget": 1000, "max_rank": 64}):
        c.append(Case(P, 64, 8, 64, "trace drafts", {"logits": lg,
                                                     "draft_mask": drafts(64, 5, 1)},
                      knobs=kn))
    # No draft token: every token routes by its own top-k; every token a draft.
    c.append(Case(P, 64, 8, 16, "no drafts", {"logits": normal(16, 64, 3660),
                                             "draft_mask": np.zeros(16, np.int32)},
                  knobs={"budget": 4}))
    c.append(Case(P, 64, 8, 16, "all drafts", {"logits": normal(16, 64, 3661),
                                              "draft_mask": np.ones(16, np.int32)},
                  knobs={"budget": 4, "max_rank": 64}))
    # Ties: every token alike; the budget keeps experts 0..B-1.
    c.append(Case(P, 8, 4, 5, "ties(all-equal)",
                  {"logits": np.zeros((5, 8), F32),
                   "draft_mask": np.array([0, 1, 1, 1, 1], np.int32)},
                  knobs={"budget": 2},
                  expect_ids=np.array([[0, 1, 2, 3]] + [[0, 1, -1, -1]] * 4, np.int32)))
    c.append(Case(P, 64, 8, 16, "-inf", {"logits": with_neg_inf(normal(16, 64, 3670), 3671,
                                                                 0.9),
                                         "draft_mask": drafts(16, 3, 2)},
                  knobs={"budget": 12, "max_rank": 64}))
    return c


def cases_metro():
    P = "metro"
    c = []
    rng = np.random.default_rng(81)
    # Qwen3-30B-A3B shape: 128 experts, top-8, 8 GPUs, 16 redundant slots.
    for T in (1, 7, 16, 64, 1024):
        c.append(Case(P, 128, 8, T, "trace replicated",
                      {"logits": trace(T, 128, 3700 + T)[0],
                       "placement": placement(128, 144, rng, replicate=12, width=3)},
                      devices=8, slots=144))
    # No redundant slot: every expert on its one replica (the identity placement too).
    c.append(Case(P, 64, 4, 16, "normal identity",
                  {"logits": normal(16, 64, 3710),
                   "placement": np.arange(64, dtype=np.int32).reshape(64, 1)},
                  devices=4, slots=64))
    # Many replicas: 64 experts on 4 GPUs with 64 spare slots, hot experts.
    for T in (16, 64):
        c.append(Case(P, 64, 4, T, "skewed many replicas",
                      {"logits": skewed(T, 64, 3720 + T),
                       "placement": placement(64, 128, rng, replicate=40, width=5)},
                      devices=4, slots=128))
    c.append(Case(P, 8, 2, 16, "ties(all-equal)",
                  {"logits": np.zeros((16, 8), F32),
                   "placement": placement(8, 16, rng, replicate=8, width=5)},
                  devices=4, slots=16))
    return c


def cases_expert_choice():
    P = "expert_choice"
    c = []
    for T in (1, 7, 64, 1024, 4096):
        c.append(Case(P, 8, 2, T, "normal", {"logits": normal(T, 8, 2700 + T)}))
        c.append(Case(P, 8, 2, T, "skewed", {"logits": skewed(T, 8, 2800 + T)}))
    for T in (7, 64, 1024):
        c.append(Case(P, 64, 8, T, "skewed", {"logits": skewed(T, 64, 2900 + T)}))
        c.append(Case(P, 128, 8, T, "trace", {"logits": trace(T, 128, 3000 + T)[0]}))
    for factor in (0.1, 0.5, 2.0, 8.0):
        c.append(Case(P, 8, 2, 64, "skewed", {"logits": skewed(64, 8, 3100)},
                      knobs={"capacity_factor": factor}))
    # Equal scores: every expert takes the first c tokens.
    c.append(Case(P, 8, 2, 16, "ties(all-equal)", {"logits": np.zeros((16, 8), F32)}))
    c.append(Case(P, 8, 2, 64, "ties(repeated rows)",
                  {"logits": np.repeat(normal(8, 8, 3101), 8, axis=0)}))
    c.append(Case(P, 8, 2, 7, "-inf", {"logits": with_neg_inf(normal(7, 8, 3102), 3103)}))
    nan = normal(16, 8, 3104)
    nan[3, 5] = np.nan
    c.append(Case(P, 8, 2, 16, "nan", {"logits": nan}))
    return c


CASES = {
    "topk_softmax": cases_topk_softmax,
    "top_p": cases_top_p,
    "oea": cases_oea,
    "deepseek_v3": cases_deepseek_v3,
    "lynx": cases_lynx,
    "xshare": cases_xshare,
    "xshare_spec": cases_xshare_spec,
    "xshare_ep": cases_xshare_ep,
    "capacity_topk": cases_capacity_topk,
    "capacity_drop": cases_capacity_drop,
    "moe_spec": cases_moe_spec,
    "metro": cases_metro,
    "expert_choice": cases_expert_choice,
    "shapes": cases_shapes,
    "models": cases_models,
}


# ---------------------------------------------------------------------------------------
# Running and comparing
# ---------------------------------------------------------------------------------------

def run_case(tools, case, index):
    """Writes the inputs, runs moe-run; returns (returncode, output, out_dir)."""
    d = os.path.join(tools.workdir, "case%03d" % index)
    os.makedirs(d)
    policy, flags = tools.bind(case)
    cmd = [tools.moe_run, policy] + flags
    for name, value in case.inputs.items():
        if isinstance(value, int):
            cmd += ["--arg", "%s=%d" % (name, value)]
        else:
            path = os.path.join(d, name + ".npy")
            np.save(path, value)
            cmd += ["--arg", "%s=%s" % (name, path)]
    for knob, value in case.knobs.items():
        cmd += ["--set", "%s=%s" % (knob, value)]
    if tools.lane_parallel:
        cmd.append("--lane-parallel")
    out = os.path.join(d, "out")
    cmd += ["--out", out]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:  # e.g. the binary is being rebuilt
        return -1, "cannot run moe-run: %s" % exc, out, cmd
    return p.returncode, (p.stdout + p.stderr).strip(), out, cmd


def first_diffs(got, exp, bad, limit=5):
    idx = np.argwhere(bad)[:limit]
    return ", ".join("%s: got %s expected %s" % (tuple(int(i) for i in ix),
                                                 got[tuple(ix)], exp[tuple(ix)])
                     for ix in idx)


def compare(case, out_dir, ref):
    """Returns a list of problem lines (empty: the case passed)."""
    problems = []
    expected_names = [n for n in RESULTS if n in ref]
    present = sorted(f[:-4] for f in os.listdir(out_dir) if f.endswith(".npy"))
    if sorted(expected_names) != present:
        problems.append("result files %s, expected %s" % (present, sorted(expected_names)))
    for name in expected_names:
        path = os.path.join(out_dir, name + ".npy")
        if not os.path.exists(path):
            continue
        try:
            got = np.load(path, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001
            problems.append("%s: unreadable (%s)" % (name, exc))
            continue
        exp = np.asarray(ref[name])
        if got.shape != exp.shape or got.dtype != exp.dtype:
            problems.append("%s: got %s %s, expected %s %s"
                            % (name, got.dtype, got.shape, exp.dtype, exp.shape))
            continue
        if name in WEIGHT_RESULTS:
            g, e = got.astype(np.float64), exp.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~((np.abs(g - e) <= WEIGHT_ATOL) | (np.isnan(g) & np.isnan(e)))
        else:
            bad = got != exp
        if np.any(bad):
            problems.append("%s: %d differ; first at %s"
                            % (name, int(np.count_nonzero(bad)), first_diffs(got, exp, bad)))
    if case.expect_ids is not None and "topk_ids" in present:
        got = np.load(os.path.join(out_dir, "topk_ids.npy"))
        if got.shape != case.expect_ids.shape or not np.array_equal(got, case.expect_ids):
            problems.append("topk_ids: ties must break toward the lower id: got %s, "
                            "expected %s" % (got[:2].tolist(), case.expect_ids[:2].tolist()))
    return problems


def run_policy(tools, policy, jobs, verbose):
    cases = CASES[policy]()
    passed = failed = 0
    # Bind every shape first (serially), so that a policy that does not bind or verify
    # fails loudly before anything runs.
    for case in cases:
        tools.bind(case)
    base = len(os.listdir(tools.workdir))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_case, tools, case, base + i)
                   for i, case in enumerate(cases)]
        for case, fut in zip(cases, futures):
            try:
                ref = case.reference()
            except Exception as exc:  # noqa: BLE001
                ref, ref_error = None, "reference raised %s: %s" % (type(exc).__name__, exc)
            rc, output, out_dir, cmd = fut.result()
            if rc != 0:
                lines = output.splitlines()
                if len(lines) > 12:  # e.g. an IR dump: keep its head and tail
                    lines = lines[:6] + ["..."] + lines[-5:]
                problems = ["moe-run exited %d: %s" % (rc, "\n       ".join(
                    l[:300] for l in lines))]
            elif ref is None:
                problems = [ref_error]
            else:
                problems = compare(case, out_dir, ref)
            if problems:
                failed += 1
                print("FAIL %s" % case.label())
                for line in problems:
                    print("     %s" % line)
                print("     command: %s" % " ".join(cmd))
            else:
                passed += 1
                print("ok   %s" % case.label())
            if verbose and not problems:
                print("     command: %s" % " ".join(cmd))
            sys.stdout.flush()
    return passed, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="build directory (holds bin/moe-run)")
    ap.add_argument("--policy", action="append", required=True,
                    choices=POLICIES + ["shapes", "models", "all"],
                    help="policy to test (repeatable)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel moe-run calls")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--lane-parallel", action="store_true",
                    help="run the GPU (lane-parallel) form of the per-token code")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command")
    a = ap.parse_args(argv)
    policies = POLICIES + ["shapes", "models"] if "all" in a.policy else a.policy
    workdir = tempfile.mkdtemp(prefix="switchyard-exec-")
    passed = failed = 0
    try:
        tools = Tools(os.path.abspath(a.build), workdir)
        tools.lane_parallel = a.lane_parallel
        for policy in policies:
            start = time.time()
            p, f = run_policy(tools, policy, a.jobs, a.verbose)
            passed += p
            failed += f
            if len(policies) > 1:
                print("-- %s: %d passed, %d failed in %.1f s"
                      % (policy, p, f, time.time() - start))
    finally:
        if a.keep:
            print("kept %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
