#!/usr/bin/env python3
"""The GPU kit's results as Markdown: the machine, each step's outcome, and the time per
call of every native router next to PyTorch and the floor (what docs/gpu-kit.md and the
README's GPU table show).

    report.py gpu-results.json [--variants all]
"""
import argparse
import json
import sys

STEP_WHAT = {
    "build": "launchers built against cudart",
    "exec-plumbing": "the executor bundle loads; one host moe-exec run through it",
    "inputs": "inputs regenerated to the packed hashes",
    "routers": "every router × T vs the host target (ids exact, weights ≤ 1e-5), "
               "launches per size class counted in a captured graph",
    "memcheck": "compute-sanitizer memcheck, T = 64 and 4096",
    "racecheck": "compute-sanitizer racecheck, T = 64 and 4096",
    "graphs": "graph capture + replay; knobs written to device memory between replays",
    "torch-op-plumbing": "the op library loads in this torch; host-only routers route",
    "torch-op": "the routing op on CUDA tensors: eager, torch.compile, CUDA graphs with "
                "knobs and phase written between replays",
    "executor": "CUDA executor layer vs host executor (5 families); device expert memory",
    "profile": "Nsight Compute: per-kernel time, registers, occupancy limits",
    "bench": "time per call vs PyTorch and the floor",
    "baselines": "topk_softmax vs the hand-written baselines (outputs = host, then timed)",
    "fit": "the launch cost model's constants fitted to the bench",
}


def summary(step):
    res = step.get("results") or {}
    if "passed" in res:
        return f"{res['passed']} passed, {res['failed']} failed"
    if "rms_log_error" in res:
        return (f"c = {res['cycles_per_instruction']:.1f}, cB = "
                f"{res['batch_cycles_per_instruction']:.1f} cycles per warp instruction, rms log "
                f"error {res['rms_log_error']:.2f}")
    if "rows" in res:
        return f"{len(res['rows'])} rows"
    return step.get("reason", "")


def machine(r):
    cuda = r.get("cuda_runtime") or 0
    return (f"{r.get('device', '?')}, driver {r.get('driver', '?')}, CUDA "
            f"{cuda // 1000}.{cuda % 1000 // 10}, PyTorch {r.get('torch')}, "
            f"{r['date'][:10]}, kit of commit {r.get('kit_commit')}")


def compact(bench, tokens=(1, 64, 1024, 4096)):
    rows = {}
    for row in bench["rows"]:
        if "_p" in row["variant"] or "_e8" in row["variant"] or "error" in row:
            continue
        base = list(row.get("baselines", {}).values())[-1:]
        rows.setdefault(row["variant"], {})[row["tokens"]] = (
            row["ours_graph_us"], base[0]["graph_us"] if base else None)
    print("| router (µs, graph replay: ours / PyTorch) | "
          + " | ".join(f"T = {t}" for t in tokens) + " |")
    print("| --- |" + " ---: |" * len(tokens))
    for name, by_t in rows.items():
        cells = []
        for t in tokens:
            ours, theirs = by_t.get(t, (None, None))
            cells.append("–" if ours is None else
                         f"{ours:.0f} / {theirs:.0f}" if theirs else f"{ours:.0f} / –")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


def baselines_table(results):
    """topk_softmax beside the hand-written baselines (step_baselines.py), µs."""
    print("\ntopk_softmax beside the hand-written baselines (bench/gpu_baselines; µs, "
          "one-call graph replay):\n")
    print("| T | ours | best (2 launches) | prod3 (3 launches) | ours / best |\n"
          "| ---: | ---: | ---: | ---: | ---: |")
    for row in results["rows"]:
        ours = row.get("ours_graph_us")
        cells = []
        for name in ("best", "prod3"):
            b = row.get(name, {})
            cells.append(f"{b['graph_us']:.1f}" if "graph_us" in b
                         else f"wrong: {b['error']}" if "error" in b else "–")
        best = row.get("best", {}).get("graph_us")
        ratio = f"{ours / best:.2f}×" if ours and best else "–"
        print(f"| {row['tokens']} | {f'{ours:.1f}' if ours else '–'} | {cells[0]} | "
              f"{cells[1]} | {ratio} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--variants", default="native", help="native or all")
    ap.add_argument("--compact", action="store_true",
                    help="one row per router: ours / PyTorch (graph replays) at a few T")
    args = ap.parse_args()
    with open(args.results) as f:
        r = json.load(f)
    print(f"Machine: {machine(r)}.\n")
    print("| step | what | result |\n| --- | --- | --- |")
    for name, step in r["steps"].items():
        print(f"| {name} | {STEP_WHAT.get(name, '')} | {step['status']}"
              f"{': ' + summary(step) if summary(step) else ''} |")
    against = (r["steps"].get("baselines") or {}).get("results")
    if against and against.get("rows"):
        baselines_table(against)
    bench = (r["steps"].get("bench") or {}).get("results")
    if not bench:
        return 0
    print(f"\nTime per call, µs (median of 200 CUDA-event-timed calls; HBM "
          f"{bench['hbm_bytes_per_s'] / 1e12:.2f} TB/s measured, empty kernel "
          f"{bench['empty_kernel_us']:.2f} µs):\n")
    if args.compact:
        return compact(bench)
    print("| router | T | ours | ours, graph | PyTorch, graph | ours / PyTorch | floor |"
          " model |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in bench["rows"]:
        native = "_p" not in row["variant"] and "_e8" not in row["variant"]
        if args.variants == "native" and not native:
            continue
        if "error" in row:
            print(f"| {row['variant']} | {row['tokens']} | error: {row['error']} |||||")
            continue
        base = list(row.get("baselines", {}).items())[-1:]   # the most specific
        base = base[0] if base else None
        torch_us = base[1]["graph_us"] if base else None
        ratio = f"{row['ours_graph_us'] / torch_us:.2f}×" if torch_us else "–"
        model = f"{row['modeled_us']:.1f}" if row.get("modeled_us") else "–"
        print(f"| {row['variant']} | {row['tokens']} | {row['ours_us']:.1f} | "
              f"{row['ours_graph_us']:.1f} | {f'{torch_us:.1f}' if torch_us else '–'} | "
              f"{ratio} | {row['floor_us']:.1f} | {model} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
