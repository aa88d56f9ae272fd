#!/usr/bin/env python3
"""Router benchmark (not a test): compiled Switchyard routers vs PyTorch on the CPU vs the
Hugging Face transformers router modules, on the same logits, side by side in one run.

Policies and shapes (k = 2 at E = 8, else 8):
  topk_softmax  policies/topk_softmax.mlir
  deepseek_v3   policies/deepseek_v3.mlir, groups 4 keep 2 at E = 8, else 8 keep 4,
                a small random e_score_correction_bias, routed scaling factor 2.5

Variants, per (policy, E, T):
  sy route   switchyard.compile(..., outputs=["topk_ids", "topk_weights"]): route only
  sy all     switchyard.compile(...): every result of the policy (the shipped policies
             also count tokens per expert, compact the active experts and build vLLM's
             block-aligned token order)
  torch 1t   the routing written in torch (below), torch.set_num_threads(1)
  torch Nt   the same with torch's default thread count N
  HF 1t      the transformers router module, torch.set_num_threads(1):
               topk_softmax  modeling_mixtral.MixtralTopKRouter
               deepseek_v3   modeling_deepseek_v3.DeepseekV3TopkRouter
  HF Nt      the same with torch's default thread count N
The baseline of the printed ratios is each alternative at its faster thread count (1 or
N, chosen per row by the wall medians, and named in the table): torch/sy and HF/sy.
The torch functions, written from the definitions: topk_softmax = softmax (float32),
top-k, weights / their sum; deepseek_v3 = vLLM-style grouped_topk: sigmoid scores, + bias
for the choice only, group score = sum of the group's top-2, keep the top groups, top-k
experts among them, weights = the unbiased scores of those, renormalized, x 2.5.

Feeding the transformers modules the same logits: their forward starts with
`F.linear(hidden_states, self.weight)` to make the logits from hidden states. The module
is built with hidden_size = E and, for the whole run, the module-level name `F` of the
two modeling modules is replaced by a stand-in (`_LogitsPassThrough`) whose
`linear(x, w)` returns x and which forwards every other attribute to
torch.nn.functional; the logits passed as `hidden_states` then reach the routing
unchanged (checked: the module's returned router_logits equal the input). The original
`F` is restored at the end.

Checks, before timing: every variant's ids equal the route-only switchyard ids per row
as sets (torch's top-k order differs), and the weights matched by expert id agree within
1e-5. A row whose id sets differ only by experts of equal selection score is counted as
a tie, not a mismatch. A failed check prints a line and marks the table row with '!';
the run goes on.

Timing: the variants of one (policy, E, T) are interleaved round by round in an order
shuffled every round; a sample is the mean per call of a batch of calls lasting about
--batch-ms (at least one call; at T = 4096 that is usually one); the table shows the
median over --repeat samples of wall time (time.perf_counter) and of CPU time
(time.process_time: every thread of the process, so a multi-threaded variant can show
CPU > wall), in microseconds per call. The 'other' column is the share of the machine's
CPU time other processes used while the row was timed (from /proc/stat); a row over 5%
is marked '~': its numbers are inflated. After every batch the run waits, off the clock,
until the process is idle: OpenMP workers keep spinning after a parallel region (torch's
libgomp for milliseconds; the LLVM libomp that a build with threaded host loops links
into the compiled routers for KMP_BLOCKTIME, 200 ms by default), and on a small machine
that spinning would take a core from, and add CPU time to, whichever variant runs next.
The CPU time the process burns during that wait is recorded per batch ("after-batch CPU",
in the JSON; the table notes variants whose median is over 1 ms). Ratios are of wall
medians, "x / sy route": > 1 means Switchyard is faster. --json writes every sample,
the medians, the checks and the machine.

    .venv/bin/python bench/bench_routers.py [--experts 8,128,256] [--tokens 16,256,4096]
        [--policies topk_softmax,deepseek_v3] [--repeat 25] [--batch-ms 5]
        [--sy-input torch|numpy] [--build build] [--json OUT]
"""
import argparse
import contextlib
import json
import os
import time

import numpy as np
import torch
import transformers
from transformers.models.deepseek_v3 import modeling_deepseek_v3
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers.models.mixtral import modeling_mixtral
from transformers.models.mixtral.configuration_mixtral import MixtralConfig

import bench_common
from bench_common import NOISY_LOAD, ROOT, OtherLoad, Variant, interleave, settle, summarize
from policy_shapes import import_switchyard  # noqa: E402  (bench_common sets the path)

POLICIES = ("topk_softmax", "deepseek_v3")
ROUTE = ("topk_ids", "topk_weights")
SCALING = 2.5          # DeepSeek-V3's routed scaling factor (the policy knob's default)
BIAS_SCALE = 0.01      # e_score_correction_bias ~ BIAS_SCALE * N(0, 1)
WEIGHT_TOLERANCE = 1e-5
DEFAULT_THREADS = torch.get_num_threads()
VARIANTS = ("sy_route", "sy_all", "torch_1t", "torch_nt", "hf_1t", "hf_nt")
# The alternatives, each at its faster thread count (per row, by wall median): the
# baseline the "best" ratios compare with.
ALTERNATIVES = {"torch": ("torch_1t", "torch_nt"), "hf": ("hf_1t", "hf_nt")}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experts", default="8,128,256")
    ap.add_argument("--tokens", default="16,256,4096")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--repeat", type=int, default=25,
                    help="samples per variant (interleaved rounds; at least 25 unless "
                         "--quick-repeat is given)")
    ap.add_argument("--batch-ms", type=float, default=5.0,
                    help="target length of the batch of calls one sample averages")
    ap.add_argument("--sy-input", choices=("torch", "numpy"), default="torch",
                    help="what the switchyard routers are called on: torch tensors "
                         "(torch in, torch out; the torch variants' own tensors) or the "
                         "NumPy arrays under them (NumPy in, NumPy out)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build", default=None,
                    help="the build tree (default: $SWITCHYARD_BUILD_DIR, else ROOT/build)")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--quick-repeat", action="store_true",
                    help="allow --repeat below 25 (smoke runs; the medians are rougher)")
    args = ap.parse_args()
    args.experts = [int(v) for v in args.experts.split(",") if v]
    args.tokens = [int(v) for v in args.tokens.split(",") if v]
    args.policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        ap.error(f"unknown policy {unknown[0]!r} (known: {', '.join(POLICIES)})")
    if args.repeat < 25 and not args.quick_repeat:
        ap.error("--repeat must be at least 25 (or pass --quick-repeat)")
    return args


def shape_for(policy, experts):
    """k and the groups of `policy` at `experts` (as bench/bench_route.py binds them)."""
    shape = {"top_k": 2 if experts <= 8 else 8}
    if policy == "deepseek_v3":
        shape.update(groups=4 if experts <= 8 else 8, topk_groups=2 if experts <= 8 else 4)
    return shape


# -- torch routing, written from the definitions ---------------------------------------------
def torch_topk_softmax(logits, k):
    """Softmax in float32, the k most probable experts, their probabilities / their sum."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, k, dim=-1)
    return ids, weights / weights.sum(dim=-1, keepdim=True)


def torch_grouped_topk(logits, bias, k, groups, topk_groups, scaling):
    """DeepSeek-V3 routing as vLLM's grouped_topk computes it (with the correction bias)."""
    tokens, experts = logits.shape
    scores = torch.sigmoid(logits.float())
    choice = scores + bias                      # the bias decides the choice only
    group_scores = choice.view(tokens, groups, -1).topk(2, dim=-1).values.sum(dim=-1)
    kept = group_scores.topk(topk_groups, dim=-1, sorted=False).indices
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
    expert_mask = group_mask.unsqueeze(-1).expand(tokens, groups, experts // groups) \
        .reshape(tokens, experts)
    ids = choice.masked_fill(~expert_mask, float("-inf")).topk(k, dim=-1, sorted=False).indices
    weights = scores.gather(1, ids)
    return ids, weights / weights.sum(dim=-1, keepdim=True) * scaling


def selection_scores(policy, logits, bias):
    """The scores a policy ranks experts by (to tell a tie from a mismatch)."""
    if policy == "topk_softmax":
        return torch.softmax(logits, dim=-1, dtype=torch.float32)
    return torch.sigmoid(logits) + bias


# -- transformers router modules on logits ---------------------------------------------------
class _LogitsPassThrough:
    """Stands in for `torch.nn.functional` (imported as F) inside a transformers modeling
    module: `F.linear(x, weight)` returns x, so the router's input is taken as its logits;
    every other name is torch.nn.functional's."""

    @staticmethod
    def linear(x, weight, bias=None):
        return x

    def __getattr__(self, name):
        return getattr(torch.nn.functional, name)


@contextlib.contextmanager
def logits_pass_through(*modules):
    """Replace the module-level `F` of `modules` by _LogitsPassThrough while inside."""
    saved = [(module, module.F) for module in modules]
    try:
        for module, _ in saved:
            module.F = _LogitsPassThrough()
        yield
    finally:
        for module, original in saved:
            module.F = original


def hf_router(policy, experts, shape, bias):
    """The transformers router module of `policy` taking E-wide 'hidden states' (the
    logits, once F.linear is passed through)."""
    if policy == "topk_softmax":
        config = MixtralConfig(hidden_size=experts, num_local_experts=experts,
                               num_experts_per_tok=shape["top_k"])
        module = modeling_mixtral.MixtralTopKRouter(config)
    else:
        config = DeepseekV3Config(hidden_size=experts, n_routed_experts=experts,
                                  num_experts_per_tok=shape["top_k"], n_group=shape["groups"],
                                  topk_group=shape["topk_groups"],
                                  routed_scaling_factor=SCALING, norm_topk_prob=True)
        module = modeling_deepseek_v3.DeepseekV3TopkRouter(config)
        module.e_score_correction_bias.copy_(bias)
    # The weight is bypassed; without grad nothing in the forward is recorded by autograd.
    return module.eval().requires_grad_(False)


# -- checks ----------------------------------------------------------------------------------
def compare(ids, weights, ref_ids, ref_weights, selection):
    """Per row: the same set of experts as the reference (or a tie: both sets have the same
    selection scores), and the same weight per expert within WEIGHT_TOLERANCE."""
    ids, ref_ids = torch.as_tensor(ids).long(), torch.as_tensor(ref_ids).long()
    weights, ref_weights = torch.as_tensor(weights), torch.as_tensor(ref_weights)
    mine, mine_order = ids.sort(dim=1)
    theirs, theirs_order = ref_ids.sort(dim=1)
    differ = (mine != theirs).any(dim=1)
    ties = mismatches = 0
    for row in differ.nonzero().flatten().tolist():
        if torch.equal(selection[row, ids[row]].sort().values,
                       selection[row, ref_ids[row]].sort().values):
            ties += 1
        else:
            mismatches += 1
    same = ~differ
    error = 0.0
    if same.any():
        error = (weights.gather(1, mine_order) - ref_weights.gather(1, theirs_order))[same] \
            .abs().max().item()
    return {"rows": int(ids.shape[0]), "mismatch_rows": mismatches, "tie_rows": ties,
            "max_weight_error": error,
            "ok": mismatches == 0 and error <= WEIGHT_TOLERANCE}


# -- timing ----------------------------------------------------------------------------------
# -- one (policy, E, T) ----------------------------------------------------------------------
def run_config(switchyard, args, policy, experts, tokens):
    shape = shape_for(policy, experts)
    path = os.path.join(ROOT, "policies", f"{policy}.mlir")
    full = switchyard.compile(path, experts=experts, **shape)
    route = switchyard.compile(path, experts=experts, **shape, outputs=list(ROUTE))

    rng = np.random.default_rng([args.seed, POLICIES.index(policy), experts, tokens])
    logits_np = rng.standard_normal((tokens, experts)).astype(np.float32)
    bias_np = (BIAS_SCALE * rng.standard_normal(experts)).astype(np.float32)
    logits, bias = torch.from_numpy(logits_np), torch.from_numpy(bias_np)  # same memory
    sy_inputs = {"logits": logits_np if args.sy_input == "numpy" else logits}
    if policy == "deepseek_v3":
        sy_inputs["bias"] = bias_np if args.sy_input == "numpy" else bias

    k = shape["top_k"]
    if policy == "topk_softmax":
        def torch_call():
            return torch_topk_softmax(logits, k)
    else:
        def torch_call():
            return torch_grouped_topk(logits, bias, k, shape["groups"],
                                      shape["topk_groups"], SCALING)
    hf = hf_router(policy, experts, shape, bias)

    def hf_call():
        return hf(logits)

    def from_sy(out):
        return out["topk_ids"], out["topk_weights"]

    def from_hf(out):
        return out[2], out[1]   # (router_logits, weights, ids)

    # name: (the timed call, its (ids, weights), torch threads)
    variants = {
        "sy_route": (lambda: route(**sy_inputs), from_sy, 1),
        "sy_all": (lambda: full(**sy_inputs), from_sy, 1),
        "torch_1t": (torch_call, lambda out: out, 1),
        "torch_nt": (torch_call, lambda out: out, DEFAULT_THREADS),
        "hf_1t": (hf_call, from_hf, 1),
        "hf_nt": (hf_call, from_hf, DEFAULT_THREADS),
    }

    # Checks before timing: everything against the route-only router.
    torch.set_num_threads(1)
    hf_out = hf_call()
    if not torch.equal(hf_out[0], logits):
        raise RuntimeError(f"{type(hf).__name__}: router_logits differ from its input: the "
                           "F.linear pass-through no longer reaches this forward")
    ref_ids, ref_weights = from_sy(route(**sy_inputs))
    selection = selection_scores(policy, logits, bias)
    checks, problems = {}, []
    for name, (call, extract, threads) in variants.items():
        torch.set_num_threads(threads)
        ids, weights = extract(call())
        checks[name] = compare(ids, weights, ref_ids, ref_weights, selection)
        c = checks[name]
        if not c["ok"]:
            problems.append(f"!! {policy} E={experts} T={tokens}: {name} vs sy route: "
                            f"{c['mismatch_rows']} of {c['rows']} rows choose other experts, "
                            f"max weight error {c['max_weight_error']:.3g}")
    torch.set_num_threads(DEFAULT_THREADS)
    settle()
    for line in problems:
        print(line, flush=True)

    timed = {name: Variant(call, args.batch_ms * 1e-3,
                           before=lambda t=threads: torch.set_num_threads(t))
             for name, (call, _, threads) in variants.items()}
    load = OtherLoad()
    load.start()
    samples = interleave(timed, args.repeat, seed=f"{args.seed}/{policy}/{experts}/{tokens}")
    other_load = load.stop()
    torch.set_num_threads(DEFAULT_THREADS)

    row = {"policy": policy, "experts": experts, "tokens": tokens, **shape,
           "checks": checks, "ok": not problems, "other_load": other_load,
           "variants": {name: summarize(samples[name], timed[name].n) for name in timed}}
    base = row["variants"]["sy_route"]
    row["ratios"] = {
        f"{name}_over_sy_route": {
            clock: row["variants"][name][clock]["median"] / base[clock]["median"]
            for clock in ("wall_us", "cpu_us")}
        for name in ("torch_1t", "torch_nt", "hf_1t", "hf_nt", "sy_all")}
    for alt, names in ALTERNATIVES.items():
        best = min(names, key=lambda name: row["variants"][name]["wall_us"]["median"])
        row["ratios"][f"{alt}_best_over_sy_route"] = dict(
            row["ratios"][f"{best}_over_sy_route"], variant=best)
    return row


# -- output ----------------------------------------------------------------------------------
def fmt(us):
    return f"{us:.1f}" if us < 100 else f"{us:.0f}"


def print_table(policy, rows):
    n = DEFAULT_THREADS
    hf_name = "HF Mixtral" if policy == "topk_softmax" else "HF DSv3"
    labels = {"sy_route": "sy route", "sy_all": "sy all", "torch_1t": "torch 1t",
              "torch_nt": f"torch {n}t", "hf_1t": f"{hf_name} 1t", "hf_nt": f"{hf_name} {n}t"}
    threads = {"torch_1t": "1t", "torch_nt": f"{n}t", "hf_1t": "1t", "hf_nt": f"{n}t"}
    ratios = [("torch_best", "torch/sy"), ("hf_best", "HF/sy")]
    width = 16
    head = f"{'E':>4} {'k':>2} {'T':>5} " + "".join(f"{labels[v]:>{width}}" for v in VARIANTS) \
        + "".join(f"{label:>12}" for _, label in ratios) + f"{'other':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r['experts']:>4} {r['top_k']:>2} {r['tokens']:>5} "
        for name in VARIANTS:
            v = r["variants"][name]
            cell = f"{fmt(v['wall_us']['median'])} ({fmt(v['cpu_us']['median'])})"
            line += f"{cell:>{width}}"
        for name, _ in ratios:
            best = r["ratios"][f"{name}_over_sy_route"]
            line += f"{best['wall_us']:>7.2f}x {threads[best['variant']]:>3}"
        other = r["other_load"]
        line += f"{'?' if other is None else f'{100 * other:.0f}%':>7}"
        if other is not None and other > NOISY_LOAD:
            line += " ~"
        if not r["ok"]:
            line += "  !"
        print(line, flush=True)
    tails = sorted({labels[name] for r in rows for name in VARIANTS
                    if r["variants"][name]["after_batch_cpu_us"]["median"] > 1000})
    if any(r["other_load"] is not None and r["other_load"] > NOISY_LOAD for r in rows):
        print(f"   ~ other processes used over {100 * NOISY_LOAD:.0f}% of the machine while "
              f"the row was timed ('other'): its numbers are inflated, torch {DEFAULT_THREADS}t "
              f"most")
    print(f"   torch/sy, HF/sy: wall time of the alternative at its faster thread count "
          f"(1 or {n}, per row, named) over 'sy route' (> 1: Switchyard faster)")
    if tails:
        print(f"   after-batch CPU (threads still spinning once the batch returned, waited "
              f"out off the clock) over 1 ms in some rows for: {', '.join(tails)}; see "
              f"the JSON's after_batch_cpu_us")


def machine(switchyard):
    return bench_common.machine(
        torch=torch.__version__, transformers=transformers.__version__,
        numpy=np.__version__, switchyard=switchyard.__version__,
        torch_default_threads=DEFAULT_THREADS)


def main():
    args = parse_args()
    switchyard = import_switchyard(args.build)
    host = machine(switchyard)
    print(f"Routers on the CPU: Switchyard (compiled, called with {args.sy_input} inputs) vs "
          f"torch vs transformers, same logits, same run.\n"
          f"{host['cpu']}, {host['usable_cores']} usable cores, torch {torch.__version__} "
          f"(default {DEFAULT_THREADS} threads), transformers {transformers.__version__}, "
          f"{host['date']}.\n"
          f"Median over {args.repeat} interleaved samples (each ~{args.batch_ms:g} ms of "
          f"calls), us per call: wall (CPU, all threads). Ratios: wall time of torch / HF at "
          f"its faster thread count over 'sy route' (> 1: Switchyard faster).\n"
          f"sy route = outputs topk_ids/topk_weights only, sy all = every result; torch 1t / "
          f"{DEFAULT_THREADS}t = torch.set_num_threads(1) / default; HF = the "
          f"transformers router module (1t / {DEFAULT_THREADS}t likewise), F.linear passed "
          f"through.")
    print(bench_common.load_line(host, "the multi-threaded torch variant most"))
    started = time.perf_counter()
    rows = []
    with logits_pass_through(modeling_mixtral, modeling_deepseek_v3):
        for policy in args.policies:
            policy_rows = []
            for experts in args.experts:
                for tokens in args.tokens:
                    policy_rows.append(run_config(switchyard, args, policy, experts, tokens))
            extra = " groups 4 keep 2 at E=8, else 8 keep 4, bias ~ %g N(0,1), x%g" \
                % (BIAS_SCALE, SCALING) if policy == "deepseek_v3" else ""
            print(f"\n{policy}{extra}:")
            print_table(policy, policy_rows)
            rows.extend(policy_rows)
    elapsed = time.perf_counter() - started
    bad = [r for r in rows if not r["ok"]]
    ties = sum(c["tie_rows"] for r in rows for c in r["checks"].values())
    worst = max(c["max_weight_error"] for r in rows for c in r["checks"].values())
    print(f"\nChecks vs sy route: {len(rows) - len(bad)} of {len(rows)} configurations agree "
          f"(ids per row as sets, weights by id within {WEIGHT_TOLERANCE:g}; max weight "
          f"error {worst:.2g}; tie rows {ties}). {elapsed:.0f} s.")

    if args.json:
        settings = {k: getattr(args, k) for k in ("experts", "tokens", "policies", "repeat",
                                                  "batch_ms", "sy_input", "seed")}
        host["load_average_end"] = bench_common.load_average()
        result = {"machine": host, "settings": settings,
                  "notes": {"units": "microseconds per call",
                            "cpu_us": "time.process_time: all threads of the process",
                            "ratios": "variant median / sy_route median, per clock",
                            "hf_1t": "transformers router module, F.linear passed through, "
                                     "torch.set_num_threads(1)",
                            "hf_nt": "the same with torch's default thread count",
                            "best": "torch_best / hf_best: the alternative at its faster "
                                    "thread count (by wall median, per row): the baseline",
                            "after_batch_cpu_us": "after every batch the run waits "
                                                  "(unclocked) until the process is idle; "
                                                  "the CPU it burns meanwhile (OpenMP "
                                                  "workers spinning), per batch",
                            "elapsed_s": elapsed},
                  "rows": rows}
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    raise SystemExit(bench_common.guarded("bench_routers", main))
