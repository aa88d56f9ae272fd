#!/usr/bin/env python3
"""The effect in a real engine: vLLM's CPU build serving a random Qwen3-MoE model whose
MoE layers dominate the step, routed by vLLM's native router and by Switchyard
policies through the plugin (SWITCHYARD_POLICY), same model, same prompts, same run.

Measured per (router, batch): decode tokens/s (greedy, ignore_eos, every sequence
generates --tokens tokens; the median over --repeats timed llm.generate calls after a
warm-up generate, each run in the JSON as tokens_per_s_runs), and
the experts active per layer and decode step (distinct expert ids the routing gave
the step's tokens, counted in the routing call; native = Switchyard's topk_softmax,
which routes identically). vLLM's CPU MoE kernel (cpu_fused_moe) loops over the
experts that received tokens, so fewer active experts means fewer expert weight
matrices streamed from memory per step: that is where a batch-aware router pays.

    .venv-vllm/bin/python bench/bench_vllm_engine.py [--batches 1,8,32] [--json out.json]
    .venv-vllm/bin/python bench/bench_vllm_engine.py --request-knobs --batches 8,32

--request-knobs measures what per-request settings cost inside a step instead: XShare
(budget 8) with every request alike, with every other request setting budget 4 (two
knob groups, each routed as a batch of its own), and with every other request pinned
to the model's own routing (switchyard.route = "model"), next to native.
    .venv/bin/python bench/bench_vllm_engine.py --plot-from out.json --plot out.png

Each configuration runs in a child process (the plugin reads its settings once per
process); the model (bf16, --layers x --experts experts of width --intermediate,
hidden --hidden, top-8) is built once with transformers under --model-dir. Both routers
run in vLLM's own configuration (its CPU defaults, threads included); each child's
process wall and CPU seconds (every thread; start-up and the warm-up generate included)
are in the JSON rows (process_wall_s, process_cpu_s).
"""
import argparse
import json
import os
import statistics
import sys
import time

import bench_common

HERE = os.path.dirname(os.path.abspath(__file__))
# (name, SWITCHYARD_POLICY, SWITCHYARD_KNOBS, per-request extra_args cycled over the
# batch's requests or None)
ROUTERS = [("native", None, None, None),
           ("switchyard topk_softmax", "topk_softmax", None, None),
           ("LYNX", "lynx", None, None),
           ("XShare budget 8", "xshare", {"budget": 8}, None),
           ("XShare-spec", "xshare_spec", None, None)]
# --request-knobs: what per-request settings cost inside one step (docs/results.md).
REQUEST_KNOB_ROUTERS = [
    ("native", None, None, None),
    ("XShare budget 8", "xshare", {"budget": 8}, None),
    ("XShare, budgets 8 and 4", "xshare", {"budget": 8}, [None, {"switchyard.budget": 4}]),
    ("XShare, half pinned", "xshare", {"budget": 8}, [None, {"switchyard.route": "model"}])]
WORDS = "the of to and in is it you that he was for on are with as his they be at".split()


def child(args):
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    active = []
    if os.environ.get("SWITCHYARD_POLICY"):
        import numpy as np
        from switchyard import _step
        call = _step.StepRouter.__call__

        def counting(self, logits, layer_tensors, layer=-1):
            weights, ids = call(self, logits, layer_tensors, layer)
            if logits.shape[0] <= args.batch:          # decode steps only
                active.append(len(np.unique(ids.numpy())))
            return weights, ids

        _step.StepRouter.__call__ = counting
    from vllm import LLM, SamplingParams
    llm = LLM(model=args.model_dir, dtype="bfloat16", max_model_len=256, seed=0,
              distributed_executor_backend="uni", max_num_seqs=max(args.batch, 1))
    prompts = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(16))
               for i in range(args.batch)]
    extra = json.loads(args.extra) if args.extra else [None]
    params = [SamplingParams(max_tokens=args.tokens, temperature=0, ignore_eos=True,
                             extra_args=extra[i % len(extra)]) for i in range(args.batch)]
    llm.generate(prompts, SamplingParams(max_tokens=4, temperature=0, ignore_eos=True),
                 use_tqdm=False)
    active.clear()
    rates = []
    for _ in range(args.repeats):   # the median of several timed generates
        start = time.perf_counter()
        out = llm.generate(prompts, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        rates.append(sum(len(o.outputs[0].token_ids) for o in out) / seconds)
    result = {"tokens_per_s": statistics.median(rates), "tokens_per_s_runs": rates,
              "active_per_layer_step": (sum(active) / len(active)) if active else None}
    print("RESULT " + json.dumps(result), flush=True)


def build_model(args):
    if os.path.exists(os.path.join(args.model_dir, "config.json")):
        return
    sys.path.insert(0, os.path.join(HERE, "..", "test", "vllm"))
    from make_model import make_model
    make_model("qwen3_moe", args.model_dir, seed=0, layers=args.layers, hidden=args.hidden,
               intermediate=args.intermediate, experts=args.experts, top_k=8)


def plot(json_path, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(json_path) as f:
        data = json.load(f)
    rows, model = data["rows"], data["model"]
    batches = sorted({r["batch"] for r in rows})
    names = list(dict.fromkeys(r["router"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        mine = [next(r for r in rows if r["batch"] == b and r["router"] == name)
                for b in batches]
        xs = [j + i * width for j in range(len(batches))]
        axes[0].bar(xs, [r["tokens_per_s"] for r in mine], width, label=name)
        axes[1].bar(xs, [r["active_per_layer_step"] or 0 for r in mine], width, label=name)
    for ax, title in zip(axes, ("decode tokens/s", "experts active per layer and step")):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(batches))])
        ax.set_xticklabels([f"batch {b}" for b in batches])
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"vLLM {data['vllm']} CPU, random Qwen3-MoE ({model['layers']} layers, "
                 f"{model['experts']} experts x {model['intermediate']}, hidden "
                 f"{model['hidden']}, top-{model['top_k']}, {model['dtype']})")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed generates per configuration (the median is reported)")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--model-dir", default="/tmp/switchyard-bench-qwen3moe")
    ap.add_argument("--request-knobs", action="store_true",
                    help="measure per-request settings instead: XShare with one knob "
                         "setting, with two (budget 8 and 4 in turn), with every other "
                         "request pinned to the model's routing (switchyard.route)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--plot-from", help="only plot this JSON (written by --json)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--extra", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.plot_from:
        plot(args.plot_from, args.plot)
        return 0
    build_model(args)
    rows = []
    print(f"{'router':<26} {'batch':>5} {'tokens/s':>9} {'vs native':>9} "
          f"{'experts/layer/step':>19}")
    for batch in [int(b) for b in args.batches.split(",")]:
        native = None
        for name, policy, knobs, extra in (REQUEST_KNOB_ROUTERS if args.request_knobs
                                           else ROUTERS):
            env = dict(os.environ)
            env.pop("SWITCHYARD_POLICY", None)
            env.pop("SWITCHYARD_KNOBS", None)
            if policy:
                env["SWITCHYARD_POLICY"] = policy
                if knobs:
                    env["SWITCHYARD_KNOBS"] = json.dumps(knobs)
            run = bench_common.run_tool(
                [sys.executable, __file__, "--child", "--batch", str(batch),
                 "--tokens", str(args.tokens), "--repeats", str(args.repeats),
                 "--model-dir", args.model_dir]
                + (["--extra", json.dumps(extra)] if extra else []),
                f"{name} at batch {batch}", timeout_s=3600, env=env, check=False)
            proc = run.result
            line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                print(proc.stdout[-3000:] + proc.stderr[-3000:])
                raise SystemExit(f"{name} at batch {batch} failed")
            r = json.loads(line[0][len("RESULT "):])
            r.update(router=name, policy=policy, knobs=knobs, extra_args=extra, batch=batch,
                     **run.json())
            if policy is None:
                native = r
            rows.append(r)
            active = r["active_per_layer_step"]
            print(f"{name:<26} {batch:>5} {r['tokens_per_s']:>9.1f} "
                  f"{r['tokens_per_s'] / native['tokens_per_s']:>9.2f} "
                  f"{'' if active is None else f'{active:.1f}':>19}", flush=True)
    # Native routes exactly as topk_softmax: its active experts are that run's.
    for r in rows:
        if r["policy"] is None:
            twin = next((x for x in rows
                         if x["batch"] == r["batch"] and x["policy"] == "topk_softmax"), None)
            r["active_per_layer_step"] = twin and twin["active_per_layer_step"]
    if args.json:
        import platform
        import vllm
        with open(args.json, "w") as f:
            json.dump({"model": {"arch": "qwen3_moe", "layers": args.layers,
                                 "hidden": args.hidden, "experts": args.experts,
                                 "intermediate": args.intermediate, "top_k": 8,
                                 "dtype": "bfloat16"},
                       "tokens": args.tokens, "repeats": args.repeats,
                       "vllm": vllm.__version__,
                       "cpus": os.cpu_count(), "machine": platform.machine(),
                       "host": bench_common.machine(vllm=vllm.__version__),
                       "rows": rows}, f, indent=1)
    if args.plot:
        try:
            plot(args.json, args.plot)
        except ImportError:   # vLLM's environment has no matplotlib
            print(f"matplotlib is not installed here: plot with "
                  f".venv/bin/python {__file__} --plot-from {args.json} --plot {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
