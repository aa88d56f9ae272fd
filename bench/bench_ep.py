#!/usr/bin/env python3
"""Expert-parallel load-balance benchmark (not a test): no balancing, EPLB, Libra and
XShare-EP side by side on the same skewed routing traces, from the compiled shipped
rules and routers (policies/eplb.mlir, libra.mlir, xshare_ep.mlir, topk_softmax.mlir,
deepseek_v3.mlir) called through the switchyard package.

Traces (T tokens per step, --steps evaluated steps after one warm-up window):
  zipf-S   synthetic: a fixed Zipf(S) expert popularity (over a random expert order);
           logits = log(pop) + Gumbel noise, routed by the compiled topk_softmax policy,
           so every token draws k distinct experts with probability proportional to pop
           (Gumbel-top-k = sampling without replacement).  Two skews (--zipf).
  drift    "real routing statistics", DERIVED, NOT FROM A SERVED MODEL: logits from
           scripts/gen_trace.py's generator with its layers used as steps (fresh token
           states every step, --drift 1; the router matrix and the per-expert Zipf
           popularity bias drift from step to step with correlation 0.9), routed by the
           compiled deepseek_v3 policy (sigmoid + correction bias, 8 groups keep 4,
           top-8) - the routing a DeepSeek-style gate gives on such logits.
Shapes: E=64 k=8 with OLMoE-1B-7B's expert size (models/olmoe-1b-7b.json: hidden 2048,
expert FFN 1024), E=256 k=8 with DeepSeek-V3's (models/deepseek-v3.json: 7168, 2048);
4 ranks (one node) and 8 ranks (2 nodes x 4 GPUs).  Tokens live on rank t*N/T (the
batch split evenly, data-parallel attention).

Methods (per step s):
  none       contiguous placement, expert e on rank e // (E/N), plain routing;
  eplb       the compiled @eplb rule planning from step s-1's expert loads, slots =
             E + E/8 (E/(8N) redundant experts per rank), hierarchical over the nodes;
             a token's (token, expert) pair is split evenly over the expert's replicas;
  libra      the compiled @libra rule on step s's routing (an ORACLE lookahead: Libra's
             predictor is 70-80% accurate in the paper), extra_experts = the same
             E/(8N) replicas per rank as EPLB (--libra-extra), alpha 0.5, epsilon 0.05;
             per-rank loads from its placement and shard plan (locally held experts
             serve their own tokens, remote tokens go where the shard plan says);
  xshare_ep  the compiled @xshare_ep router (k0 1, device_budget 5) with the contiguous
             placement: it CHANGES the routing (tokens only go to the selected set).

Per method: imbalance = max/mean of per-rank routed (token, expert) pairs; peak per-rank
active experts (weight copies that receive tokens) at T tokens and in decode-sized
micro-batches (--decode-batch sizes, XShare-EP's setting: the paper's Table 2 has batch
8 and 16 with speculative tokens; plain routing and XShare-EP only); a MODELED step time
(one MoE layer).  Every count comes exactly from the compiled rules' and routers'
outputs; no time is measured, every time is the model:

  rank time = expert GEMMs: pairs * 3 GEMMs * 2*hidden*ffn FLOP / (989 TFLOP/s * 40%)
            + expert weights: active copies * 3*hidden*ffn * 2 B / 3.35 TB/s   (H100 SXM)
            + all-to-all: pairs moved * hidden * 2 B, dispatch and combine, each phase
              max(sent, received) over NVLink 450 GB/s within a node plus over IB
              50 GB/s between nodes (per GPU, per direction)
  step time = max over ranks (the slowest GPU sets the pace); no overlap of compute and
  communication, no per-rank deduplication of a token's copies (DeepEP sends once per
  rank), shared experts and attention left out (the same for every method).

Before a rule's outputs are used they are checked (EPLB: every expert has >= 1 replica,
slots per rank equal, phy2log / log2phy / replica_count agree, its reported per-GPU
loads equal ours; Libra: home copies kept, <= extra_experts imports per rank, shards only
where a replica is, every token served once, loads_after equal ours; routers: ids in
range and distinct, XShare-EP's ids inside its selected set).

    bench/bench_ep.py [--steps 4] [--tokens 4096] [--json docs/ep-balance.json]
                        [--plot docs/ep-balance.png]
"""
import argparse
import json
import os
import sys
import time

import numpy as np

import bench_common
from bench_common import ROOT
import gen_trace  # noqa: E402  (scripts/ and test/support: bench_common sets the path)
from policy_shapes import import_switchyard  # noqa: E402

# ----------------------------------------------------------------------- model constants
GPU = {
    "name": "H100 SXM (modeled)",
    "bf16_dense_peak_flops": 989e12,
    "gemm_efficiency": 0.40,          # -> ~396 TFLOP/s effective for the grouped GEMMs
    "hbm_bytes_per_s": 3.35e12,
    "nvlink_bytes_per_s": 450e9,      # per GPU per direction, within a node
    "ib_bytes_per_s": 50e9,           # per GPU per direction (400 Gb/s NIC), between nodes
    "gpus_per_node": 4,               # 4 ranks: one node; 8 ranks: 2 nodes x 4
    "bytes_per_element": 2,           # bf16 activations and weights
}
SHAPES = {  # E -> expert size (from the repository's model configs)
    64: {"model": "olmoe-1b-7b.json", "label": "E=64 k=8 (OLMoE-1B-7B expert size)"},
    256: {"model": "deepseek-v3.json", "label": "E=256 k=8 (DeepSeek-V3 expert size)"},
}
METHODS = ("none", "eplb", "libra", "xshare_ep")
TOP_K = 8


class Inconsistent(RuntimeError):
    """A compiled rule's output failed a consistency check."""


def need(ok, what):
    if not ok:
        raise Inconsistent(what)


def model_dims(E):
    with open(os.path.join(ROOT, "models", SHAPES[E]["model"])) as f:
        cfg = json.load(f)
    ffn = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    return {"hidden": cfg["hidden_size"], "ffn": ffn, "model": SHAPES[E]["model"]}


# ------------------------------------------------------------------------------- traces
def zipf_logits(E, T, steps, s, rng):
    """log(pop) + Gumbel: top-k of it samples k distinct experts proportional to pop."""
    pop = np.empty(E)
    pop[rng.permutation(E)] = 1.0 / np.arange(1, E + 1, dtype=np.float64) ** s
    pop /= pop.sum()
    g = rng.gumbel(size=(steps, T, E))
    return (np.log(pop)[None, None, :] + g).astype(np.float32), np.zeros(E, np.float32)


def drift_logits(E, T, steps, seed):
    """scripts/gen_trace.py's generator, its layers used as steps (see the docstring)."""
    a = gen_trace.parse_args(["--tokens", str(T), "--experts", str(E), "--layers", str(steps),
                              "--zipf", "1.0", "--skew", "1.0", "--drift", "1.0",
                              "--router-corr", "0.9", "--seed", str(seed), "--with-bias",
                              "--out", os.devnull])
    logits, _, bias = gen_trace.generate(a)
    # One layer's correction bias for every step (it is a trained constant).
    return logits, bias[0]


def check_ids(ids, E, what):
    need(ids.min() >= 0 and ids.max() < E, f"{what}: expert id out of range")
    s = np.sort(ids, axis=1)
    need(not (s[:, 1:] == s[:, :-1]).any(), f"{what}: an expert twice in one token's top-k")


# ---------------------------------------------------------------------------- the model
class Layout:
    def __init__(self, E, N, T):
        self.E, self.N, self.T = E, N, T
        self.home = np.arange(E) // (E // N)                   # contiguous placement
        self.Home = np.zeros((E, N))
        self.Home[np.arange(E), self.home] = 1.0
        self.token_rank = (np.arange(T) * N // T).astype(np.int32)
        self.node = np.arange(N) // GPU["gpus_per_node"]

    def pairs(self, ids, token_rank=None):
        """P[src rank, expert]: routed (token, expert) pairs."""
        tr = self.token_rank if token_rank is None else token_rank
        P = np.zeros((self.N, self.E))
        np.add.at(P, (np.repeat(tr, ids.shape[1]), ids.ravel()), 1.0)
        return P


def step_model(F, active, dims, layout):
    """Per-rank modeled time from the flow F[src, dst] of (token, expert) pairs."""
    H, I = dims["hidden"], dims["ffn"]
    b = GPU["bytes_per_element"]
    load = F.sum(axis=0)
    gemm = load * 3 * 2 * H * I / (GPU["bf16_dense_peak_flops"] * GPU["gemm_efficiency"])
    weights = active * 3 * H * I * b / GPU["hbm_bytes_per_s"]
    off = F * (1 - np.eye(layout.N))
    same = layout.node[:, None] == layout.node[None, :]
    comm = np.zeros(layout.N)
    for mask, bw in ((same, GPU["nvlink_bytes_per_s"]), (~same, GPU["ib_bytes_per_s"])):
        sent, recv = (off * mask).sum(axis=1), (off * mask).sum(axis=0)
        # dispatch (hidden vectors out) + combine (results back): each max(sent, received)
        comm += 2 * np.maximum(sent, recv) * H * b / bw
    total = gemm + weights + comm
    r = int(np.argmax(total))
    return {"step_us": 1e6 * float(total[r]), "slowest_rank": r,
            "gemm_us": 1e6 * float(gemm[r]), "weights_us": 1e6 * float(weights[r]),
            "comm_us": 1e6 * float(comm[r]),
            "moved_fraction": float(off.sum() / max(F.sum(), 1.0))}


def imbalance(load):
    m = load.mean()
    return float(load.max() / m) if m > 0 else 1.0


# ------------------------------------------------------------------------------ methods
def run_none(P, L):
    F = P @ L.Home
    active = ((P.sum(axis=0) > 0)[:, None] * L.Home).sum(axis=0)
    return F, active


def check_eplb(plan, E, N, slots, prev_loads):
    p2l, l2p, cnt = plan["phy2log"], plan["log2phy"], plan["replica_count"]
    need(slots % N == 0, "EPLB: slots per rank differ")
    need(p2l.shape == (slots,) and p2l.min() >= 0 and p2l.max() < E, "EPLB: phy2log range")
    need(cnt.min() >= 1, "EPLB: an expert without a replica")
    need(int(cnt.sum()) == slots, "EPLB: replica counts do not sum to the slots")
    need(np.array_equal(np.bincount(p2l, minlength=E), cnt), "EPLB: phy2log vs replica_count")
    for e in range(E):
        row = l2p[e]
        need((row[:cnt[e]] >= 0).all() and (row[cnt[e]:] == -1).all()
             and (p2l[row[:cnt[e]]] == e).all(), f"EPLB: log2phy row of expert {e}")
    Rep = np.zeros((E, N))
    np.add.at(Rep, (p2l, np.arange(slots) // (slots // N)), 1.0)
    ours = (prev_loads / cnt) @ Rep
    need(np.allclose(ours, plan["gpu_loads_after"], rtol=1e-4, atol=1e-2),
         "EPLB: its gpu_loads_after differ from the plan's loads")
    return Rep, cnt


def run_eplb(P, Rep, cnt):
    F = P @ (Rep / cnt[:, None])
    active = ((P.sum(axis=0) > 0)[:, None] * Rep).sum(axis=0)
    return F, active


def run_libra(P, out, L, extra):
    M, R = out["placement"].astype(float), out["shard_plan"].astype(float)
    E, N = L.E, L.N
    need(M.shape == (E, N) and R.shape == (N, E), "Libra: output shapes")
    need((M[np.arange(E), L.home] == 1).all(), "Libra: an expert lost its home copy")
    need(((M.sum(axis=0) - L.Home.sum(axis=0)) <= extra).all(), "Libra: too many imports")
    need(((R > 0) <= (M.T > 0)).all(), "Libra: tokens sharded to a rank without a replica")
    remote = P * (1 - M.T)                                    # [src, e] not held at src
    need(np.array_equal(R.sum(axis=0), remote.sum(axis=0)), "Libra: remote tokens not served once")
    local = P * M.T
    load = local.sum(axis=1) + R.sum(axis=1)
    need(np.allclose(load, out["loads_after"]), "Libra: its loads_after differ from the plan")
    need(load.sum() == P.sum(), "Libra: tokens lost")
    # Flow: local pairs stay; remote pairs of e reach the servers R[:, e] in proportion.
    share = np.divide(remote, remote.sum(axis=0, keepdims=True),
                      out=np.zeros_like(remote), where=remote.sum(axis=0, keepdims=True) > 0)
    F = np.diag(local.sum(axis=1)) + share @ R.T              # [src, e] @ [e, dst]
    need(np.allclose(F.sum(axis=0), load), "Libra: flow does not match the loads")
    active = ((local.T + R.T) > 0).sum(axis=0).astype(float)
    return F, active


def check_xshare(out, E, what):
    ids, sel = out["topk_ids"], out["selected"].astype(bool)
    check_ids(ids, E, what)
    need(sel[ids].all(), f"{what}: a token routed outside the selected set")
    need(np.array_equal(np.bincount(ids.ravel(), minlength=E), out["expert_counts"]),
         f"{what}: expert_counts")
    return ids


def peak_active(ids, L):
    used = np.zeros(L.E, bool)
    used[ids.ravel()] = True
    return int(np.bincount(L.home[used], minlength=L.N).max())


# --------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    ap.add_argument("--build", default=None, help="build tree (default: build/)")
    ap.add_argument("--tokens", type=int, default=4096, help="T, tokens per step")
    ap.add_argument("--steps", type=int, default=4, help="evaluated steps (plus 1 warm-up)")
    ap.add_argument("--experts", default="64,256")
    ap.add_argument("--ranks", default="4,8")
    ap.add_argument("--zipf", default="0.8,1.2", help="the synthetic traces' skews")
    ap.add_argument("--decode-batch", default="16,64",
                    help="decode micro-batch sizes for the active-expert metric (XShare's "
                         "Table 2: 8 and 16 requests; 64 = 16 requests x (1 + 3 drafts))")
    ap.add_argument("--decode-batches", type=int, default=16,
                    help="decode micro-batches per step and size")
    ap.add_argument("--libra-extra", type=int, default=None,
                    help="Libra's extra_experts (default: EPLB's redundant slots per rank)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    t0 = time.time()
    sy = import_switchyard(a.build)
    T, S = a.tokens, a.steps
    experts = [int(x) for x in a.experts.split(",")]
    ranks = [int(x) for x in a.ranks.split(",")]
    skews = [float(x) for x in a.zipf.split(",")]
    a.decode_batch = [int(x) for x in a.decode_batch.split(",")]
    unknown = [E for E in experts if E not in SHAPES]
    if unknown:
        ap.error(f"--experts {unknown[0]}: the modeled shapes are E in "
                 f"{{{', '.join(map(str, SHAPES))}}}")
    bad = [(E, n) for E in experts for n in ranks if n < 1 or E % (8 * n)]
    if bad:
        ap.error(f"--ranks {bad[0][1]}: must divide E/8 = {bad[0][0] // 8} (EPLB's E/8 "
                 f"redundant slots are spread evenly over the ranks)")
    rng = np.random.default_rng(a.seed)
    policy = lambda n: os.path.join(ROOT, "policies", n + ".mlir")  # noqa: E731

    rows, targets = [], []
    for E in experts:
        dims = model_dims(E)
        topk = sy.compile(policy("topk_softmax"), experts=E, top_k=TOP_K,
                          outputs=("topk_ids",))
        ds = sy.compile(policy("deepseek_v3"), experts=E, top_k=TOP_K, groups=8,
                        topk_groups=4, scaling=2.5, outputs=("topk_ids", "expert_counts"))
        traces = [(f"zipf-{s:g}", "synthetic: Zipf(%g) popularity, Gumbel-top-k via compiled "
                   "topk_softmax" % s) + zipf_logits(E, T, S + 1, s, rng) + (topk,)
                  for s in skews]
        traces.append(("drift", "derived (not a served model): gen_trace logits, drifting "
                       "popularity bias, routed by compiled deepseek_v3")
                      + drift_logits(E, T, S + 1, a.seed + E) + (ds,))
        for name, desc, logits, bias, router in traces:
            extra_in = {"bias": bias} if "bias" in router.inputs else {}
            ids = []
            for s in range(S + 1):
                i = router(logits=np.ascontiguousarray(logits[s]), **extra_in)["topk_ids"]
                check_ids(i, E, f"{name} routing")
                ids.append(i)
            counts = [np.bincount(i.ravel(), minlength=E).astype(np.float32) for i in ids]
            for N in ranks:
                L = Layout(E, N, T)
                nodes = max(1, N // GPU["gpus_per_node"])
                slots = E + E // 8
                extra = a.libra_extra if a.libra_extra is not None else (slots - E) // N
                eplb = sy.compile(policy("eplb"), entry="eplb", experts=E, groups=8,
                                  nodes=nodes, devices=N, slots=slots)
                libra = sy.compile(policy("libra"), entry="libra", experts=E, top_k=TOP_K,
                                   devices=N, hidden_size=dims["hidden"],
                                   knobs={"extra_experts": extra, "alpha": 0.5,
                                          "epsilon": 0.05})
                xs = sy.compile(policy("xshare_ep"), experts=E, top_k=TOP_K, devices=N,
                                slots=E, scaling=2.5, knobs={"k0": 1, "device_budget": 5})
                placement = np.arange(E, dtype=np.int32).reshape(E, 1)
                acc = {m: {"imb": [], "peak": [], "act": [], "model": [], "extra": [], "same": [],
                           "dec": {B: [] for B in a.decode_batch}} for m in METHODS}
                for s in range(1, S + 1):
                    P = L.pairs(ids[s])
                    results = {"none": run_none(P, L)}
                    plan = eplb(loads=counts[s - 1])
                    Rep, cnt = check_eplb(plan, E, N, slots, counts[s - 1])
                    results["eplb"] = run_eplb(P, Rep, cnt)
                    acc["eplb"]["extra"].append(
                        {"replicated_experts": int((cnt > 1).sum()),
                         "rule_imbalance_on_planning_window": float(plan["imbalance_after"][0])})
                    lo = libra(next_topk_ids=ids[s], token_gpu=L.token_rank)
                    results["libra"] = run_libra(P, lo, L, extra)
                    acc["libra"]["extra"].append(
                        {"imbalance_before": float(lo["imbalance_before"][0]),
                         "imbalance_replicated": float(lo["imbalance_replicated"][0]),
                         "imbalance_after": float(lo["imbalance_after"][0]),
                         "imports": int(lo["placement"].sum() - E)})
                    xo = xs(logits=np.ascontiguousarray(logits[s]), bias=bias,
                            placement=placement)
                    xids = check_xshare(xo, E, f"{name} xshare_ep")
                    results["xshare_ep"] = run_none(L.pairs(xids), L)
                    # Pairs XShare-EP keeps from the unrestricted top-k of its own
                    # selection score (sigmoid + bias; on the drift trace that also drops
                    # DeepSeek's group limit, which the trace's routing has).
                    own = np.argsort(-(1 / (1 + np.exp(-logits[s].astype(np.float64))) + bias),
                                     axis=1, kind="stable")[:, :TOP_K]
                    acc["xshare_ep"]["same"].append(float(
                        (xids[:, :, None] == own[:, None, :]).any(axis=2).mean()))
                    acc["xshare_ep"]["extra"].append(
                        {"selected": int(xo["selected"].sum()),
                         "num_active": int(xo["num_active"][0])})
                    for m, (F, active) in results.items():
                        need(abs(F.sum() - T * TOP_K) < 1e-3 * T, f"{m}: pairs lost")
                        load = F.sum(axis=0)
                        acc[m]["imb"].append(imbalance(load))
                        acc[m]["peak"].append(float(load.max()))
                        acc[m]["act"].append(float(active.max()))
                        acc[m]["model"].append(step_model(F, active, dims, L))
                    # Decode-sized micro-batches: peak per-rank active experts, plain
                    # routing vs XShare-EP (EPLB / Libra are prefill-time plans).
                    for B in a.decode_batch:
                        for j in range(min(a.decode_batches, T // B)):
                            sl = slice(j * B, (j + 1) * B)
                            acc["none"]["dec"][B].append(peak_active(ids[s][sl], L))
                            xo = xs(logits=np.ascontiguousarray(logits[s][sl]), bias=bias,
                                    placement=placement)
                            acc["xshare_ep"]["dec"][B].append(
                                peak_active(check_xshare(xo, E, "xshare_ep decode"), L))
                base_step = np.mean([x["step_us"] for x in acc["none"]["model"]])
                for m in METHODS:
                    d = acc[m]
                    mod = {k: float(np.mean([x[k] for x in d["model"]]))
                           for k in ("step_us", "gemm_us", "weights_us", "comm_us",
                                     "moved_fraction")}
                    rows.append({
                        "trace": name, "trace_kind": desc, "experts": E, "top_k": TOP_K,
                        "ranks": N, "nodes": nodes, "method": m, "tokens": T, "steps": S,
                        "hidden": dims["hidden"], "ffn": dims["ffn"],
                        "slots": slots if m == "eplb" else (E + N * extra if m == "libra" else E),
                        "imbalance": float(np.mean(d["imb"])),
                        "imbalance_max": float(np.max(d["imb"])),
                        "peak_rank_pairs": float(np.mean(d["peak"])),
                        "peak_active_experts": float(np.mean(d["act"])),
                        "routing_same": float(np.mean(d["same"])) if d["same"] else 1.0,
                        "peak_active_experts_decode": {str(B): float(np.mean(v))
                                                       for B, v in d["dec"].items() if v},
                        "modeled": dict(mod, speedup_vs_none=float(base_step / mod["step_us"])),
                        "per_step": {"imbalance": d["imb"], "peak_active_experts": d["act"],
                                     "step_us": [x["step_us"] for x in d["model"]],
                                     "rule": d["extra"]},
                    })
                r = {m: rows[-len(METHODS) + i] for i, m in enumerate(METHODS)}
                li, ei = r["libra"]["imbalance"], r["eplb"]["imbalance"]
                xa, na = r["xshare_ep"]["peak_active_experts"], r["none"]["peak_active_experts"]
                xd = r["xshare_ep"]["peak_active_experts_decode"]
                nd = r["none"]["peak_active_experts_decode"]
                dred = {B: nd[B] / xd[B] for B in nd}
                targets.append({
                    "trace": name, "experts": E, "ranks": N, "libra_extra_experts": extra,
                    "libra_imbalance": li, "eplb_imbalance": ei,
                    "libra_le_1.05": li <= 1.05, "libra_below_eplb": li < ei,
                    "xshare_active_reduction": na / xa,
                    "xshare_active_reduction_decode": dred,
                    "xshare_div3": na / xa >= 3.0,
                    "xshare_div3_decode": {B: v >= 3.0 for B, v in dred.items()}})
    elapsed = time.time() - t0
    print_table(rows, targets, a, elapsed)
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({
                "what": "EP load balance of the compiled EPLB / Libra / XShare-EP rules on "
                        "skewed routing traces, one MoE layer",
                "measured": "nothing is timed: loads, imbalance, active experts and bytes "
                            "moved are exact counts from the compiled rules' and routers' "
                            "outputs; every *_us number is the model below",
                "model": {**GPU, "step": "max over ranks of gemm + weights + comm",
                          "gemm": "pairs * 3 GEMMs * 2*hidden*ffn FLOP / (peak * efficiency)",
                          "weights": "active expert copies * 3*hidden*ffn*2 B / HBM",
                          "comm": "dispatch + combine: each max(sent, received) pairs * "
                                  "hidden * 2 B over NVLink (same node) + IB (other node)",
                          "not_modeled": "compute/communication overlap, DeepEP per-rank "
                                         "deduplication, shared experts, attention"},
                "config": {"tokens": T, "steps": S, "warmup_windows": 1, "top_k": TOP_K,
                           "zipf": skews, "decode_batch": a.decode_batch,
                           "decode_batches_per_step": a.decode_batches, "seed": a.seed,
                           "libra": "extra_experts = EPLB's redundant slots per rank unless "
                                    "--libra-extra; alpha 0.5, epsilon 0.05; oracle lookahead "
                                    "(the step's own routing)",
                           "eplb": "slots = E + E/8, groups 8, plan from the previous step's "
                                   "loads, pairs split evenly over replicas",
                           "xshare_ep": "k0 1, device_budget 5, contiguous placement",
                           "shapes": {str(E): model_dims(E) for E in experts}},
                "targets": targets, "rows": rows, "seconds": elapsed}, f, indent=1)
        print(f"wrote {a.json}")
    if a.plot:
        plot(rows, a.plot, T)
        print(f"wrote {a.plot}")


def print_table(rows, targets, a, elapsed):
    g = GPU
    print(f"EP balance, one MoE layer, T={a.tokens} tokens/step, {a.steps} steps (+1 warm-up "
          f"window), top-{TOP_K}; counts exact from the compiled rules, times MODELED")
    print(f"model: {g['bf16_dense_peak_flops'] / 1e12:.0f} TFLOP/s x {g['gemm_efficiency']:.0%}"
          f" GEMM, HBM {g['hbm_bytes_per_s'] / 1e12:.2f} TB/s, NVLink "
          f"{g['nvlink_bytes_per_s'] / 1e9:.0f} GB/s, IB {g['ib_bytes_per_s'] / 1e9:.0f} GB/s, "
          f"{g['gpus_per_node']} GPUs/node, bf16; step = max over ranks (gemm + weights + a2a)")
    dec = "".join(f"{'act@' + str(B):>7}" for B in a.decode_batch)
    hdr = (f"{'trace':<9}{'E':>4}{'N':>3} {'method':<10}{'slots':>6}{'imbal':>7}{'(max)':>7}"
           f"{'act@T':>7}{dec}{'step us':>9}{'gemm':>7}{'wts':>6}{'a2a':>7}{'moved':>7}"
           f"{'x none':>8}{'same':>6}")
    print(hdr)
    print("-" * len(hdr))
    prev = None
    for r in rows:
        key = (r["trace"], r["experts"], r["ranks"])
        if prev is not None and key != prev:
            print()
        prev = key
        m = r["modeled"]
        d = r["peak_active_experts_decode"]
        dec = "".join(f"{(f'{d[str(B)]:.1f}' if str(B) in d else '-'):>7}"
                      for B in a.decode_batch)
        print(f"{r['trace']:<9}{r['experts']:>4}{r['ranks']:>3} {r['method']:<10}{r['slots']:>6}"
              f"{r['imbalance']:>7.3f}{r['imbalance_max']:>7.3f}{r['peak_active_experts']:>7.1f}"
              f"{dec}{m['step_us']:>9.0f}{m['gemm_us']:>7.0f}{m['weights_us']:>6.0f}"
              f"{m['comm_us']:>7.0f}{m['moved_fraction']:>7.0%}{m['speedup_vs_none']:>7.2f}x"
              f"{r['routing_same']:>6.0%}")
    print("\ncolumns: imbal = mean over steps of max/mean per-rank routed (token, expert) pairs, "
          "(max) its worst step;\n  act@T / act@B = peak per-rank active expert copies at T "
          "tokens / in B-token decode micro-batches\n  (plain routing and XShare-EP only); "
          "step, gemm, wts, a2a = MODELED us of the slowest rank; moved = pairs\n  leaving their "
          "token's rank; x none = modeled speed-up over none; same = XShare-EP's pairs that\n  "
          "its unrestricted top-k (sigmoid + bias, no group limit) also picks")
    print("\ntargets (seeds): Libra imbalance <= 1.05 and below EPLB's; XShare-EP peak per-GPU "
          "active experts / 3 vs top-k")
    for t in targets:
        ok = lambda b: "met" if b else "NOT met"  # noqa: E731
        dec = ", ".join(f"/{v:.2f} at {B} [{ok(t['xshare_div3_decode'][B])}]"
                        for B, v in t["xshare_active_reduction_decode"].items())
        print(f"  {t['trace']:<9}E={t['experts']:<4}N={t['ranks']}  Libra (extra "
              f"{t['libra_extra_experts']}) {t['libra_imbalance']:.3f} "
              f"{'<=' if t['libra_le_1.05'] else '>'} 1.05 [{ok(t['libra_le_1.05'])}], "
              f"{'<' if t['libra_below_eplb'] else '>='} EPLB {t['eplb_imbalance']:.3f} "
              f"[{ok(t['libra_below_eplb'])}];  XShare-EP active "
              f"/{t['xshare_active_reduction']:.2f} at T [{ok(t['xshare_div3'])}], {dec}")
    print(f"\n{elapsed:.1f} s")


def plot(rows, path, T):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = []
    for r in rows:
        key = (r["trace"], r["experts"], r["ranks"])
        if key not in groups:
            groups.append(key)
    by = {(r["trace"], r["experts"], r["ranks"], r["method"]): r for r in rows}
    fig, axes = plt.subplots(2, 1, figsize=(max(10, 0.9 * len(groups) + 2), 8), sharex=True)
    width = 0.8 / len(METHODS)
    x = np.arange(len(groups))
    colors = {"none": "#888888", "eplb": "#1f77b4", "libra": "#2ca02c", "xshare_ep": "#d62728"}
    for i, m in enumerate(METHODS):
        imb = [by[g + (m,)]["imbalance"] for g in groups]
        rel = [by[g + (m,)]["modeled"]["step_us"] / by[g + ("none",)]["modeled"]["step_us"]
               for g in groups]
        off = (i - (len(METHODS) - 1) / 2) * width
        axes[0].bar(x + off, imb, width, label=m, color=colors[m])
        axes[1].bar(x + off, rel, width, label=m, color=colors[m])
    axes[0].axhline(1.05, color="k", ls=":", lw=1, label="1.05 (Libra's target)")
    axes[0].set_ylabel("imbalance: max/mean per-rank load\n(exact, from the compiled rules)")
    top = max(r["imbalance"] for r in rows)
    axes[0].set_ylim(1.0, 1.0 + 1.2 * (top - 1.0))
    axes[0].legend(ncol=5, fontsize=9, loc="upper left")
    axes[1].set_ylabel("modeled step time / none's\n(H100 model, not measured)")
    lo = min(p.get_height() for p in axes[1].patches)
    axes[1].set_ylim(max(0.0, lo - 0.1), 1.12)
    for j, g in enumerate(groups):
        ms = by[g + ("none",)]["modeled"]["step_us"] / 1000
        axes[1].text(j, 1.01, f"none\n{ms:.2f} ms", ha="center", va="bottom", fontsize=7)
    axes[1].set_xticks(x)
    axes[1].set_xticklabels([f"{t}\nE={e} N={n}" for t, e, n in groups], fontsize=8)
    axes[0].set_title(f"EP balance of one MoE layer, T={T} tokens per step: imbalance (top) "
                      "and modeled step time (bottom)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(bench_common.guarded("bench_ep", main))
