#!/usr/bin/env python3
"""Python package benchmark (not a test): what calling a compiled policy from Python and
PyTorch costs, and how the compiled routing compares with torch's own implementation of
the same routing. One run prints:

  1. per-call overhead at small T (topk_softmax, T = 1 and 16): the C entry called from
     C++ (the examples/engine program, built here against the installed package) and
     each Python path (NumPy, torch, torch with only ids/weights, the torch custom op,
     the vLLM routing function, a torch.compile'd function), and each path's cost over
     the C++ call;
  2. routing time vs torch on the CPU: topk_softmax vs vLLM's fused_topk in torch
     (softmax in float32, top-k, renormalize), DeepSeek-V3 grouped top-k vs vLLM's
     grouped_topk in torch; torch single-threaded and with its default threads
     (the faster of the two is the baseline of the ratios); the
     ids and weights are checked equal before timing (and the CUDA target vs torch on
     the GPU where one is available);
  3. where the torch path's time goes at T = 1 (the pieces timed one by one).

Timings: variants are interleaved round by round (in a shuffled order), each sample is
the mean of a batch of calls lasting about --batch-ms; the median over --repeat rounds is
printed (the JSON has min and all samples too, the process CPU time per call and the CPU
burnt after each batch by threads still spinning, waited out off the clock:
bench_common.Variant). Ratios against torch use torch at its faster thread count (1 or
its default, per row); the JSON keeps both.

    bench/bench_python.py [--build build] [--repeat 21] [--tokens 1,16,256,4096]
                            [--experts 64,128] [--top-k 8] [--json OUT]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bench_common
from bench_common import ROOT, Variant, children_cpu, interleave


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build",
                    help="the build tree (relative to the repository root or absolute)")
    ap.add_argument("--python-dir", default=None,
                    help="where the switchyard package is (default: BUILD/python)")
    ap.add_argument("--engine", default=None,
                    help="an already built examples/engine binary (default: install the "
                         "build into a temporary prefix and build the example there)")
    ap.add_argument("--repeat", type=int, default=21, help="interleaved rounds per variant")
    ap.add_argument("--batch-ms", type=float, default=8.0,
                    help="target length of one timed batch of calls")
    ap.add_argument("--tokens", default="1,16,256,4096")
    ap.add_argument("--experts", default="64,128")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--json", default=None, help="write every number here")
    args = ap.parse_args()
    args.tokens = [int(v) for v in args.tokens.split(",") if v]
    args.experts = [int(v) for v in args.experts.split(",") if v]
    if not os.path.isabs(args.build):
        args.build = os.path.join(ROOT, args.build)
    args.build = os.path.abspath(args.build)
    if args.python_dir is None:
        args.python_dir = os.path.join(args.build, "python")
    if args.engine is not None and not (os.path.isfile(args.engine)
                                        and os.access(args.engine, os.X_OK)):
        ap.error(f"--engine {args.engine}: not an executable file (the built "
                 "examples/engine program; leave it out to build one)")
    return args


ARGS = parse_args()
sys.path.insert(0, os.path.abspath(ARGS.python_dir))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import switchyard  # noqa: E402
import switchyard.vllm  # noqa: E402

try:
    import switchyard.ops as sy_ops  # noqa: E402
    OPS_ERROR = None
except Exception as error:  # the custom op could not be registered
    sy_ops = None
    OPS_ERROR = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"

# The shipped policies compute more than torch's routing does (topk_softmax: the union of
# the top-k sets, expert counts, the active experts and vLLM's block-aligned order;
# deepseek_v3: all but the union). These copies keep only the routing itself (the same
# ops as the shipped policy up to moe.route), so torch is also compared on equal work.
ROUTE_ONLY = {
    "topk_softmax": """moe.router @topk_softmax_route(%logits: tensor<?x?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>) {
  %probs = moe.softmax %logits : tensor<?x?xf32>
  %ids, %weights = moe.route %logits weights(%probs : tensor<?x?xf32>) k = ? renormalize
      : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids, %weights : tensor<?x?xi32>, tensor<?x?xf32>
}
""",
    "deepseek_v3": """moe.router @deepseek_v3_route(%logits: tensor<?x?xf32>, %bias: tensor<?xf32>)
    -> (topk_ids: tensor<?x?xi32>, topk_weights: tensor<?x?xf32>) {
  %scale = moe.knob "routed_scaling_factor" = 2.5 : f32
  %scores = moe.sigmoid %logits : tensor<?x?xf32>
  %biased = moe.add_bias %scores, %bias : tensor<?x?xf32>, tensor<?xf32>
  %limited = moe.group_limit %biased groups = ? keep = ? : tensor<?x?xf32>
  %ids, %weights = moe.route %limited weights(%scores : tensor<?x?xf32>) k = ?
      renormalize scaled_by(%scale : f32) : tensor<?x?xf32> -> tensor<?x?xi32>, tensor<?x?xf32>
  moe.yield %ids, %weights : tensor<?x?xi32>, tensor<?x?xf32>
}
""",
}

DEFAULT_THREADS = torch.get_num_threads()
ROUTING = ("topk_ids", "topk_weights")
DSV3 = dict(experts=256, groups=8, topk_groups=4)


# -- timing ---------------------------------------------------------------------------------
def PyVariant(fn, before=None, sync=None):
    """A Python callable timed in batches (n calibrated to --batch-ms); every batch is
    followed, off the clock, by bench_common.settle (the CPU that threads still spinning
    after it burn is recorded: a multi-threaded torch call's libgomp workers, compiled
    code's OpenMP team)."""
    return Variant(fn, ARGS.batch_ms * 1e-3, before=before, sync=sync)


class EngineVariant:
    """The engine example in a fresh process: `--repeat N` calls, its mean per call."""

    def __init__(self, engine, experts, top_k, logits_path):
        self.base = [engine, "--experts", str(experts), "--top-k", str(top_k),
                     "--logits", logits_path]
        self.n = None

    def run(self, repeat, extra=()):
        cpu = children_cpu()
        out = subprocess.run(self.base + ["--repeat", str(repeat), *extra],
                             capture_output=True, text=True, check=True).stdout
        self.cpu_per_call = (children_cpu() - cpu) / repeat   # the process's, start-up too
        match = re.search(r"per call: ([0-9.]+) us", out)
        if not match:
            raise RuntimeError(f"engine printed no per-call time:\n{out}")
        return float(match.group(1)) * 1e-6, out

    def measure(self):
        if self.n is None:
            rough, _ = self.run(200)
            # A process per sample: at least 20 ms of calls so the cold start amortizes.
            self.n = max(200, int(max(ARGS.batch_ms * 1e-3, 0.02) / max(rough, 1e-7)))
        wall = self.run(self.n)[0]
        return wall, self.cpu_per_call, 0.0


def rounds(variants):
    """bench_common.interleave with a seed of this run's shape."""
    return interleave(variants, ARGS.repeat, seed=len(variants) * 1009 + ARGS.repeat)


def stats(samples):
    """[(wall, cpu, after-batch cpu) per round] -> medians: wall (median_us, min_us,
    samples_us), process CPU per call (cpu_median_us: every thread) and the CPU burnt
    after a batch by threads still spinning (after_batch_cpu_us, per batch)."""
    wall, cpu, after = (list(v) for v in zip(*samples))
    us = [s * 1e6 for s in wall]
    return {"median_us": statistics.median(us), "min_us": min(us), "samples_us": us,
            "cpu_median_us": statistics.median(cpu) * 1e6,
            "after_batch_cpu_us": statistics.median(after) * 1e6}


def fmt(us):
    if us is None:
        return "n/a"
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


# -- machine --------------------------------------------------------------------------------
def machine():
    return bench_common.machine(
        torch=torch.__version__, numpy=np.__version__, switchyard=switchyard.__version__,
        torch_default_threads=DEFAULT_THREADS,
        cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)


# -- the engine example ---------------------------------------------------------------------
def build_engine(workdir):
    prefix = os.path.join(workdir, "prefix")
    binary_dir = os.path.join(workdir, "eb")
    compiler = shutil.which("g++-12")
    steps = [
        ["cmake", "--install", ARGS.build, "--prefix", prefix, "--component", "switchyard"],
        ["cmake", "-S", os.path.join(ROOT, "examples", "engine"), "-B", binary_dir,
         f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"]
        + ([f"-DCMAKE_CXX_COMPILER={compiler}"] if compiler else []),
        ["cmake", "--build", binary_dir],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{' '.join(step)} failed:\n{done.stdout}\n{done.stderr}")
    return os.path.join(binary_dir, "engine")


# -- torch references -----------------------------------------------------------------------
def torch_fused_topk(gating_output, k, renormalize=True):
    """vLLM's fused_topk semantics: softmax in float32, top-k, weights / sum."""
    scores = torch.softmax(gating_output, dim=-1, dtype=torch.float32)
    topk_weights, topk_ids = torch.topk(scores, k, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids.to(torch.int32)


def torch_grouped_topk(gating_output, bias, k, groups, topk_groups, scaling):
    """vLLM's grouped_topk with e_score_correction_bias (DeepSeek-V3): sigmoid scores,
    + bias for the selection only, group score = sum of the group's top-2, keep the
    top-`topk_groups` groups, top-k; weights = unbiased scores renormalized x scaling."""
    tokens, experts = gating_output.shape
    scores = gating_output.float().sigmoid()
    biased = scores + bias.unsqueeze(0)
    group_scores = biased.view(tokens, groups, -1).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=topk_groups, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(tokens, groups, experts // groups) \
        .reshape(tokens, -1)
    masked = biased.masked_fill(~score_mask.bool(), float("-inf"))
    topk_ids = torch.topk(masked, k=k, dim=-1, sorted=False)[1]
    topk_weights = scores.gather(1, topk_ids)
    topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    topk_weights = topk_weights * scaling
    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


def check_same(what, ids, weights, ref_ids, ref_weights, selection):
    """Per row: the same set of experts (a row whose selection scores are the same
    multiset is a tie and accepted), the same weight per expert within 1e-5."""
    ids, ref_ids = ids.cpu().long(), ref_ids.cpu().long()
    weights, ref_weights = weights.cpu(), ref_weights.cpu()
    selection = selection.cpu()
    a, ia = ids.sort(dim=1)
    b, ib = ref_ids.sort(dim=1)
    differ = (a != b).any(dim=1)
    ties = 0
    for t in differ.nonzero().flatten().tolist():
        mine = selection[t, ids[t]].sort().values
        theirs = selection[t, ref_ids[t]].sort().values
        if not torch.equal(mine, theirs):
            raise AssertionError(f"{what}: token {t}: experts {a[t].tolist()} vs torch "
                                 f"{b[t].tolist()}")
        ties += 1
    same = ~differ
    error = (weights.gather(1, ia) - ref_weights.gather(1, ib))[same].abs().max().item() \
        if same.any() else 0.0
    if not error <= 1e-5:
        raise AssertionError(f"{what}: weights differ from torch's by {error:.3g}")
    return {"rows": int(ids.shape[0]), "tie_rows": ties, "max_weight_error": error}


# -- 1. per-call overhead -------------------------------------------------------------------
def compiled_fn(router):
    def route(x):
        out = router(logits=x)
        return out["topk_ids"], out["topk_weights"]
    return torch.compile(route, fullgraph=True, dynamic=False)


def overhead_table(engine, workdir, results):
    k = ARGS.top_k
    small = [t for t in ARGS.tokens if t <= 16] or [1, 16]
    rows = []
    labels = [
        ("a", "C entry from C++ (engine example: bind + run)"),
        ("b", "router(logits=ndarray)  NumPy, all results"),
        ("c", "router(logits=tensor)  torch, all results"),
        ("d", "compile(outputs=(ids, weights))(logits=tensor)"),
        ("e", "switchyard.ops.route(router_ids_w, logits=t)"),
        ("e'", "  the same under torch.inference_mode()"),
        ("f", "vllm.custom_routing_function(...)(h, g, k, True)"),
        ("g", "torch.compile'd fn calling router_ids_w"),
        ("g'", "  the same under torch.inference_mode()"),
    ]
    print("\n== 1. Per-call overhead, topk_softmax, k=%d, CPU (median us per call over %d "
          "interleaved rounds; +us = over the C++ call (a)) ==" % (k, ARGS.repeat))
    if OPS_ERROR:
        print(f"   switchyard.ops failed to import ({OPS_ERROR}): (e), (g) n/a")
    compile_seconds = {}
    for experts in ARGS.experts:
        router = switchyard.compile("topk_softmax", experts=experts, top_k=k)
        routing = switchyard.compile("topk_softmax", experts=experts, top_k=k,
                                     outputs=ROUTING)
        vllm_fn = switchyard.vllm.custom_routing_function("topk_softmax")
        for tokens in small:
            rng = np.random.default_rng(tokens * 1000 + experts)
            x = rng.standard_normal((tokens, experts)).astype(np.float32)
            path = os.path.join(workdir, f"logits_{tokens}x{experts}.npy")
            np.save(path, x)
            t = torch.from_numpy(x.copy())
            hidden = torch.zeros(tokens, 16)
            variants = {}
            engine_ids = router(logits=x)["topk_ids"]
            if engine:
                variants["a"] = EngineVariant(engine, experts, k, path)
                # The engine's ids = every Python path's ids (the same compiled entry).
                ids_path = os.path.join(workdir, f"ids_{tokens}x{experts}.npy")
                variants["a"].run(1, ["--out-ids", ids_path])
                np.testing.assert_array_equal(np.load(ids_path), engine_ids)
            np.testing.assert_array_equal(engine_ids, routing(logits=t)["topk_ids"].numpy())
            np.testing.assert_array_equal(engine_ids, vllm_fn(hidden, t, k, True)[1].numpy())
            variants["b"] = PyVariant(lambda: router(logits=x))
            variants["c"] = PyVariant(lambda: router(logits=t))
            variants["d"] = PyVariant(lambda: routing(logits=t))
            if sy_ops is not None:
                ids = sy_ops.route(routing, logits=t)[0]
                np.testing.assert_array_equal(engine_ids, ids.numpy())
                variants["e"] = PyVariant(lambda: sy_ops.route(routing, logits=t))

                def op_inference():
                    with torch.inference_mode():
                        sy_ops.route(routing, logits=t)
                variants["e'"] = PyVariant(op_inference)
            variants["f"] = PyVariant(lambda: vllm_fn(hidden, t, k, True))
            if sy_ops is not None:
                fn = compiled_fn(routing)
                start = time.perf_counter()
                ids = fn(t)[0]
                compile_seconds[f"T={tokens},E={experts}"] = time.perf_counter() - start
                np.testing.assert_array_equal(engine_ids, ids.numpy())
                with torch.inference_mode():
                    fn(t)  # grad mode is guarded: compiled again for inference mode
                variants["g"] = PyVariant(lambda: fn(t))

                def compiled_inference():
                    with torch.inference_mode():
                        fn(t)
                variants["g'"] = PyVariant(compiled_inference)
            samples = rounds(variants)
            row = {"tokens": tokens, "experts": experts, "top_k": k,
                   "engine_repeat": variants["a"].n if "a" in variants else None}
            for key, _ in labels:
                row[key] = stats(samples[key]) if key in samples else None
            rows.append(row)

    header = f"{'':54s}" + "".join(f"{'T=%d E=%d' % (r['tokens'], r['experts']):>17s}"
                                   for r in rows)
    print(header)
    for key, label in labels:
        line = f"({key}){'' if len(key) > 1 else ' '} {label:49s}"
        for r in rows:
            cell = r[key]
            if cell is None:
                line += f"{'n/a':>17s}"
            elif key == "a" or r["a"] is None:
                line += f"{fmt(cell['median_us']):>17s}"
            else:
                extra = cell["median_us"] - r["a"]["median_us"]
                line += f"{fmt(cell['median_us']) + ' (+' + fmt(extra) + ')':>17s}" \
                    if extra >= 0 else f"{fmt(cell['median_us']) + ' (' + fmt(extra) + ')':>17s}"
        print(line)
    if engine:
        print("   (a) runs in a fresh process per sample (its mean over --repeat N calls, "
              "N: %s); every path's ids were checked equal to the engine's."
              % ", ".join(str(r["engine_repeat"]) for r in rows))
    results["overhead"] = {"rows": rows, "labels": dict(labels), "ops_error": OPS_ERROR,
                           "torch_compile_seconds": compile_seconds}


# -- 2. routing vs torch --------------------------------------------------------------------
def set_threads(n):
    return lambda: torch.set_num_threads(n)


def vs_torch_rows(make_routers, make_inputs, reference, selection_of, configs, device):
    rows = []
    sync = torch.cuda.synchronize if device == "cuda" else None
    for tokens, experts in configs:
        routing, full, route_only = make_routers(experts)
        inputs = make_inputs(tokens, experts)
        ref_w, ref_ids = reference(inputs)
        check = {}
        for router in (routing, route_only):
            out = router(**inputs)
            check[router.entry] = check_same(
                f"{router.entry} T={tokens} E={experts}", out["topk_ids"],
                out["topk_weights"], ref_ids, ref_w, selection_of(inputs))
        variants = {
            "sy_ids_w": PyVariant(lambda: routing(**inputs), sync=sync),
            "sy_all": PyVariant(lambda: full(**inputs), sync=sync),
            "sy_route_only": PyVariant(lambda: route_only(**inputs), sync=sync),
        }
        if device == "cpu":
            variants["torch_1t"] = PyVariant(lambda: reference(inputs),
                                             before=set_threads(1))
            variants["torch_nt"] = PyVariant(lambda: reference(inputs),
                                             before=set_threads(DEFAULT_THREADS))
        else:
            variants["torch_gpu"] = PyVariant(lambda: reference(inputs), sync=sync)
        samples = rounds(variants)
        torch.set_num_threads(DEFAULT_THREADS)
        row = {"tokens": tokens, "experts": experts, "check": check}
        row.update({name: stats(s) for name, s in samples.items()})
        rows.append(row)
    return rows


def print_vs_torch(title, rows, device):
    """The table; the baseline of the ratios is torch at its faster thread count (1 or
    the default, per row by the wall median, named in the table): torch/sy > 1 means
    Switchyard is faster than the best torch configuration measured."""
    print(title)
    sy = [("sy_ids_w", "sy ids,w"), ("sy_all", "sy all"), ("sy_route_only", "sy route")]
    if device == "cpu":
        ref = [("torch_1t", "torch 1t"), ("torch_nt", f"torch {DEFAULT_THREADS}t")]
    else:
        ref = [("torch_gpu", "torch")]
    cols = sy + ref
    head = f"{'T':>6s} {'E':>5s}" + "".join(f"{c[1]:>17s}" for c in cols)
    head += f"{'best torch':>11s}{'torch/ids,w':>13s}{'torch/route':>13s}"
    print(head)
    for r in rows:
        line = f"{r['tokens']:>6d} {r['experts']:>5d}"
        line += "".join(
            f"{fmt(r[c[0]]['median_us']) + ' (' + fmt(r[c[0]]['cpu_median_us']) + ')':>17s}"
            for c in cols)
        for torch_key, _ in ref:   # every torch column over both sy variants (JSON)
            for sy_key in ("sy_ids_w", "sy_route_only"):
                r[f"{torch_key}_over_{sy_key}"] = \
                    r[torch_key]["median_us"] / r[sy_key]["median_us"]
        best = min((t for t, _ in ref), key=lambda t: r[t]["median_us"])
        r["torch_best"] = best
        line += f"{dict(ref)[best][6:] or 'gpu':>11s}"
        for sy_key in ("sy_ids_w", "sy_route_only"):
            r[f"torch_best_over_{sy_key}"] = r[f"{best}_over_{sy_key}"]
            line += f"{r[f'{best}_over_{sy_key}']:>12.2f}x"
        print(line)


def vs_torch(results, device):
    k = ARGS.top_k
    target = "host" if device == "cpu" else "cuda"
    configs = [(t, e) for e in ARGS.experts for t in ARGS.tokens]

    def softmax_routers(experts):
        return (switchyard.compile("topk_softmax", experts=experts, top_k=k, target=target,
                                   outputs=ROUTING),
                switchyard.compile("topk_softmax", experts=experts, top_k=k, target=target),
                switchyard.compile(ROUTE_ONLY["topk_softmax"], experts=experts, top_k=k,
                                   target=target))

    def softmax_inputs(tokens, experts):
        g = torch.Generator().manual_seed(tokens * 7 + experts)
        return {"logits": torch.randn(tokens, experts, generator=g).to(device)}

    softmax = vs_torch_rows(softmax_routers, softmax_inputs,
                            lambda x: torch_fused_topk(x["logits"], k),
                            lambda x: x["logits"], configs, device)

    dsv3 = switchyard.compile("deepseek_v3", top_k=k, target=target, **DSV3)
    knob = [kn for kn in dsv3.list()["knobs"] if "scal" in kn["name"]]
    assert len(knob) == 1, dsv3.list()["knobs"]
    knob_name, scaling = knob[0]["name"], float(knob[0]["default"])

    dsv3_route = switchyard.compile(ROUTE_ONLY["deepseek_v3"], top_k=k, target=target,
                                    **DSV3)
    assert [kn["name"] for kn in dsv3_route.list()["knobs"]] == [knob_name]

    def dsv3_routers(experts):
        return (dsv3.configured(outputs=ROUTING), dsv3, dsv3_route)

    def dsv3_inputs(tokens, experts):
        g = torch.Generator().manual_seed(tokens * 13 + experts)
        return {"logits": torch.randn(tokens, experts, generator=g).to(device),
                "bias": (0.1 * torch.randn(experts, generator=g)).to(device)}

    def dsv3_reference(x):
        return torch_grouped_topk(x["logits"], x["bias"], k, DSV3["groups"],
                                  DSV3["topk_groups"], scaling)

    grouped = vs_torch_rows(dsv3_routers, dsv3_inputs, dsv3_reference,
                            lambda x: torch.sigmoid(x["logits"].float()) + x["bias"],
                            [(t, DSV3["experts"]) for t in ARGS.tokens], device)
    name = "CPU" if device == "cpu" else "GPU"
    threads = (f"; torch 1t = torch.set_num_threads(1), torch {DEFAULT_THREADS}t = its "
               f"default {DEFAULT_THREADS} threads" if device == "cpu" else "")
    print(f"\n== 2. Routing vs torch, {name} (median us per call; sy = the compiled policy "
          f"via the torch path, 'ids,w' = outputs=(topk_ids, topk_weights), 'all' = every "
          f"result, 'route' = a copy of the policy reduced to its routing (no union / "
          f"counts / block alignment), ids and weights{threads}; torch/sy: torch at its "
          f"faster thread count ('best torch', per row) over sy, > 1: Switchyard faster) ==")
    print("   cells: wall us (process CPU us, every thread: a threaded call shows CPU > wall)")
    print_vs_torch(f"topk_softmax k={k} vs torch fused_topk (softmax f32, topk, /sum):",
                   softmax, device)
    print_vs_torch(f"deepseek_v3 E={DSV3['experts']} k={k} groups={DSV3['groups']} "
                   f"topk_groups={DSV3['topk_groups']} {knob_name}={scaling} vs torch "
                   f"grouped_topk (sigmoid, +bias, top-2 group sums):", grouped, device)
    spinning = sorted({name for r in softmax + grouped for name, v in r.items()
                       if isinstance(v, dict) and v.get("after_batch_cpu_us", 0) > 1000})
    if spinning:
        print(f"   after a batch, threads went on spinning for over 1 ms of CPU (median, "
              f"waited out off the clock, JSON after_batch_cpu_us) in: {', '.join(spinning)}")
    checks = [c for r in softmax + grouped for c in r["check"].values()]
    print("   every sy variant's ids equal torch's per row (as sets; tie rows: %d), weights "
          "within 1e-5 (max error %.2g)" % (sum(c["tie_rows"] for c in checks),
                                             max(c["max_weight_error"] for c in checks)))
    results[f"vs_torch_{device}"] = {"topk_softmax": softmax, "deepseek_v3": grouped,
                                     "scaling_knob": knob_name, "scaling": scaling}


# -- 3. where the torch path's time goes ----------------------------------------------------
def profile(results):
    from switchyard import _torch as sy_torch
    experts, k, tokens = ARGS.experts[0], ARGS.top_k, 1
    t = torch.randn(tokens, experts)
    rows = {}

    def arguments(router):
        inputs = router._gather((), {"logits": t})
        tensors = {n: sy_torch._prepare(router, n, v, t.device) for n, v in inputs.items()}
        return router.tokens(tensors)

    print(f"\n== 3. Where the torch path's time goes, T={tokens} E={experts} k={k} "
          "(median us, each piece timed alone) ==")
    for label, router in (("all results", switchyard.compile("topk_softmax", experts=experts,
                                                             top_k=k)),
                          ("ids,w", switchyard.compile("topk_softmax", experts=experts,
                                                       top_k=k, outputs=ROUTING))):
        sel = router.selected_params
        shapes = [router.result_shape(p, tokens) for p in sel]
        dtypes = [sy_torch.result_dtype(p) for p in sel]
        outs = {p["name"]: torch.empty(s, dtype=d) for p, s, d in zip(sel, shapes, dtypes)}
        np_outs = {n: v.numpy() for n, v in outs.items()}
        x = t.numpy()
        pieces = {
            "full call router(logits=t)": lambda: router(logits=t),
            "arguments: _gather + _prepare + _tokens": lambda: arguments(router),
            "result_shape + result_dtype per result":
                lambda: [(router.result_shape(p, tokens), sy_torch.result_dtype(p))
                         for p in sel],
            "torch.empty per result": lambda: [torch.empty(s, dtype=d)
                                               for s, d in zip(shapes, dtypes)],
            "tensor.__dlpack__() per tensor (in + results)":
                lambda: [v.__dlpack__() for v in [t, *outs.values()]],
            "native.run, torch tensors (DLPack import + C++)":
                lambda: router.native.run({"logits": t}, outs, []),
            "native.run, NumPy arrays (same memory)":
                lambda: router.native.run({"logits": x}, np_outs, []),
        }
        samples = rounds({name: PyVariant(fn) for name, fn in pieces.items()})
        rows[label] = {"results": len(sel)}
        print(f"-- {label} ({len(sel)} results)")
        for name in pieces:
            rows[label][name] = stats(samples[name])["median_us"]
            print(f"   {name:52s} {fmt(rows[label][name]):>8s}")

    @torch.library.custom_op("swbench::noop", mutates_args=())
    def noop(xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [xs[0].new_empty(xs[0].shape)]

    @noop.register_fake
    def _(xs):
        return [torch.empty_like(xs[0])]

    def noop_fn(x):
        return torch.ops.swbench.noop([x])[0]
    compiled_noop = torch.compile(noop_fn, fullgraph=True, dynamic=False)
    floors = {"torch custom op that allocates one tensor (dispatcher floor)":
              lambda: torch.ops.swbench.noop([t]),
              "the same op in a torch.compile'd function": lambda: compiled_noop(t)}
    print("-- torch's floors on this machine")
    compiled_noop(t)
    samples = rounds({name: PyVariant(fn) for name, fn in floors.items()})
    rows["floors"] = {}
    for name in floors:
        rows["floors"][name] = stats(samples[name])["median_us"]
        print(f"   {name:62s} {fmt(rows['floors'][name]):>8s}")
    results["profile"] = rows


def main():
    started = time.perf_counter()
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores ({info['usable_cores']} usable), "
          f"torch {info['torch']} ({DEFAULT_THREADS} threads by default), numpy "
          f"{info['numpy']}, python {info['python']}, switchyard {info['switchyard']}, "
          f"{info['date']}, load average {info['load_average'][0]}")
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    results = {"machine": info, "args": {k: v for k, v in vars(ARGS).items()}}
    workdir = tempfile.mkdtemp(prefix="bench_python.")
    try:
        engine = ARGS.engine
        if engine is None:
            t0 = time.perf_counter()
            try:
                engine = build_engine(workdir)
                results["engine_build_seconds"] = time.perf_counter() - t0
            except (OSError, RuntimeError) as error:
                print(f"engine example: not built, (a) n/a ({str(error).splitlines()[0]})")
                results["engine_error"] = str(error)
        overhead_table(engine, workdir, results)
        vs_torch(results, "cpu")
        if torch.cuda.is_available():
            vs_torch(results, "cuda")
        else:
            print("GPU: not available")
        profile(results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["seconds"] = time.perf_counter() - started
    print(f"\n(total {results['seconds']:.0f} s)")
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {ARGS.json}")


if __name__ == "__main__":
    main()
