#!/usr/bin/python3
"""Writes every number of the README and the book (docs/) from its source, so that no
number can go stale.

A number lives between two markers in the markdown:

    <!-- generated: NAME -->
    ...text this script writes...
    <!-- end -->

and NAME is one of the renderers below. Each renderer reads only

  * a committed JSON that a benchmark writes (docs/*.json: the benchmark's command is
    named next to its block), or
  * a live count of the tree or of the build: ctest entries (`ctest -N` in the build
    directory), lit files, verifier cases (`expected-error` in
    test/Dialect/Moe/errors.mlir), or the output of the demo (scripts/demo.py), which is
    deterministic.

    python3 scripts/update-numbers.py          # rewrite every block
    python3 scripts/update-numbers.py --check  # exit 1, with a diff, when a block is stale
    python3 scripts/update-numbers.py --list   # the renderers and their sources

ctest `docs/numbers` runs --check (test/docs/numbers.py). It also fails on an unknown
block name, an unclosed block, and a markdown table with a digit outside a block in the
pages that carry results (README.md, docs/results.md, docs/getting-started.md): a
result table is always generated. After adding a ctest entry, a lit file or a verifier
case, or after rerunning a benchmark, run this script and commit the pages it changed.
SWITCHYARD_BUILD_DIR (default build/) is the build directory; SWITCHYARD_DOCS_ROOT
overrides the checkout."""
import argparse
import difflib
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.environ.get("SWITCHYARD_DOCS_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"^(<!-- generated: ([A-Za-z0-9_-]+) -->\n)(.*?)^(<!-- end -->)$",
                   re.S | re.M)
OPEN = re.compile(r"^<!-- generated: (.*?) -->$", re.M)
# Pages where every table with a digit must be generated.
RESULT_PAGES = ("README.md", "docs/results.md", "docs/getting-started.md")


class SourceError(Exception):
    """A source (a JSON, the build, the demo) is missing or lacks what a block needs."""


def build_dir():
    return os.environ.get("SWITCHYARD_BUILD_DIR") or os.path.join(ROOT, "build")


class Sources:
    """The JSONs and live counts, each read once."""

    def __init__(self):
        self._json = {}
        self._demo = None
        self._ctest = None

    def json(self, name):
        if name not in self._json:
            path = os.path.join(ROOT, "docs", name)
            try:
                with open(path, encoding="utf-8") as f:
                    self._json[name] = json.load(f)
            except (OSError, ValueError) as e:
                raise SourceError(f"docs/{name}: {e}")
        return self._json[name]

    def ctest_names(self):
        if self._ctest is None:
            try:
                r = subprocess.run(["ctest", "-N"], cwd=build_dir(), capture_output=True,
                                   text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise SourceError(f"ctest -N in {build_dir()}: {e}")
            names = re.findall(r"^\s*Test\s+#\d+: (\S+)", r.stdout, re.M)
            if r.returncode != 0 or not names:
                raise SourceError(f"ctest -N in {build_dir()} listed no tests "
                                  f"(exit {r.returncode}): configure the build first")
            self._ctest = names
        return self._ctest

    def demo(self):
        """The demo's output (scripts/demo.py), run once."""
        if self._demo is None:
            venv = os.path.join(ROOT, ".venv", "bin", "python")
            python = venv if os.path.exists(venv) else sys.executable
            env = dict(os.environ, SWITCHYARD_BUILD_DIR=build_dir())
            try:
                r = subprocess.run([python, os.path.join(ROOT, "scripts", "demo.py")],
                                   cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise SourceError(f"scripts/demo.py: {e}")
            if r.returncode != 0:
                raise SourceError(f"scripts/demo.py exited {r.returncode}: "
                                  f"{r.stderr.strip()[-800:]}")
            self._demo = r.stdout.rstrip("\n")
        return self._demo

    def demo_routing(self):
        """policy -> (E, k, top-k active, policy active, reduction %, mass kept %)."""
        rows = {}
        for m in re.finditer(r"^(\w+)\s+(\d+)\s+(\d+)\s+([\d.]+) ->\s+([\d.]+)\s+([\d.]+)%"
                             r"\s+([\d.]+)%$", self.demo(), re.M):
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)),
                                float(m.group(5)), float(m.group(6)), float(m.group(7)))
        if not rows:
            raise SourceError("scripts/demo.py printed no routing table")
        return rows


def key(data, *path, source="a JSON"):
    """data[path[0]][path[1]]..., or a SourceError naming the missing key."""
    for p in path:
        try:
            data = data[p]
        except (KeyError, IndexError, TypeError):
            raise SourceError(f"{source}: no {'/'.join(str(x) for x in path)}")
    return data


def num(x, digits=1):
    """A measured value: `digits` decimals below 100, none from 1000 up."""
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}" if abs(x) >= 10000 else f"{x:.0f}"
    if abs(x) >= 100 and digits > 0:
        return f"{x:.0f}" if digits == 1 else f"{x:.{digits - 1}f}"
    return f"{x:.{digits}f}"


def ratio(x):
    return f"{x:.2f}x"


def span(values, fmt=ratio):
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def wrap(text, width=92):
    """Prose paragraphs and bullets wrapped to the pages' width; tables, fenced blocks
    and other lines starting with markup are left as they are."""
    out, fenced = [], False
    for para in text.split("\n\n"):
        if para.startswith("```"):
            fenced = True
        if fenced or para.lstrip().startswith(("|", "<", "#", "!")):
            out.append(para)
        else:
            items = re.split(r"\n(?=\* )", para)
            wrapped = []
            for item in items:
                bullet = item.startswith("* ")
                wrapped.append(textwrap.fill(" ".join(item.split()), width,
                                             subsequent_indent="  " if bullet else "",
                                             break_on_hyphens=False, break_long_words=False))
            out.append("\n".join(wrapped))
        if para.rstrip().endswith("```") and para.count("```") % 2 == 0:
            fenced = False
    return "\n\n".join(out)


def table(header, rows, align=None):
    align = align or ["---"] * len(header)
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# --- live counts -------------------------------------------------------------------------

def count_verifier_cases():
    path = os.path.join(ROOT, "test", "Dialect", "Moe", "errors.mlir")
    with open(path, encoding="utf-8") as f:
        return len(re.findall(r"expected-error", f.read()))


def counts(src):
    names = src.ctest_names()
    return {"entries": len(names),
            "lit": sum(1 for n in names if n.startswith("lit/")),
            "verifier": count_verifier_cases(),
            "gpu": sum(1 for n in names if n.startswith("gpu/")),
            "policies": len(glob.glob(os.path.join(ROOT, "policies", "*.mlir")))}


def r_test_counts(src):
    c = counts(src)
    return (f"`ctest` in `build/` runs {c['entries']} entries: {c['lit']} lit files (the "
            f"dialect's verifier alone has {c['verifier']} cases in "
            f"`test/Dialect/Moe/errors.mlir`), the GoogleTest units, the execution suites "
            f"against numpy references, the executor, Python, vLLM, fuzz-corpus and docs "
            f"checks; the {c['gpu']} `gpu/*` entries that need a GPU report skipped without "
            f"one.")


def r_readme_test_counts(src):
    c = counts(src)
    return (f"`bash scripts/test.sh` runs `ctest` in `build/`: {c['entries']} entries, "
            f"{c['lit']} of them lit files ({c['verifier']} verifier cases in "
            f"`test/Dialect/Moe/errors.mlir` alone), and every shipped policy "
            f"({c['policies']} files in `policies/`) against independent numpy references "
            f"on the host and through the GPU form of its code.")


# --- the tools' options (live --help) --------------------------------------------------

def tool_help(argv, section=None, env=None):
    try:
        # argparse wraps its help to $COLUMNS: fixed, so that the text is the same anywhere.
        r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env=dict(env or os.environ, COLUMNS="92"))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SourceError(f"{' '.join(argv)}: {e}")
    text = (r.stdout or r.stderr).rstrip("\n")
    if not text:
        raise SourceError(f"{' '.join(argv)} printed nothing (exit {r.returncode})")
    if section:
        if section not in text:
            raise SourceError(f"{' '.join(argv)}: no '{section}' in its help")
        text = text.split(section, 1)[1].strip("\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return "```text\n" + text + "\n```"


def native_tool(name, section=None):
    return lambda src: tool_help([os.path.join(build_dir(), "bin", name), "--help"], section)


def r_help_moe_opt_passes(src):
    """The `--moe-*` passes and pipelines of moe-opt --help, with their options; the shape
    flags it shares with moe-compile and moe-run."""
    argv = [os.path.join(build_dir(), "bin", "moe-opt"), "--help"]
    text = tool_help(argv)[len("```text\n"):-len("\n```")]
    out, keep = [], False
    for line in text.split("\n"):
        m = re.match(r"^( *)--", line)
        if m and len(m.group(1)) == 6:  # a pass or pipeline
            keep = line.lstrip().startswith("--moe-")
        elif not m or len(m.group(1)) < 6:
            keep = False
        if keep:  # "--name   -   what": a pass flush left, its options indented by two
            indent = "" if len(m.group(1)) == 6 else "  "
            out.append(indent + re.sub(r"\s{2,}-\s+", "  ", line.strip()))
    if not out:
        raise SourceError("moe-opt --help lists no --moe- pass")
    return "```text\n" + "\n".join(out) + "\n```"


def r_help_moe_eval(src):
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    python = venv if os.path.exists(venv) else sys.executable
    # The build's copy of the package (what the other help blocks' tools are), not a
    # wheel installed into .venv before the last change to the tool.
    env = dict(os.environ)
    package = os.path.join(build_dir(), "python")
    if os.path.isdir(os.path.join(package, "switchyard")):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package, env.get("PYTHONPATH")]))
    return tool_help([python, "-m", "switchyard.trace", "--help"], env=env)


# --- the demo ----------------------------------------------------------------------------

def r_demo_output(src):
    return "```text\n" + src.demo() + "\n```"


def r_demo_reduction(src):
    rows = src.demo_routing()

    def cut(name):
        r = key(rows, name, source="scripts/demo.py")
        return f"{r[4]:.0f}% ({r[5]:.1f}%)"
    return (f"On the demo's synthetic 32-token decode batches (`bash scripts/demo.sh`, "
            f"8 layers), the batch-aware policies activate fewer experts per batch than "
            f"plain top-k (in brackets: the gating mass kept): XShare {cut('xshare')}, its "
            f"speculative variant {cut('xshare_spec')}, LYNX {cut('lynx')}, and XShare-EP on "
            f"DeepSeek-style routing {cut('xshare_ep')}.")


# --- GPU (docs/gpu-results.json, the GPU kit) -------------------------------------------

GPU = "docs/gpu-results.json"


def gpu_steps(src):
    return key(src.json("gpu-results.json"), "steps", source=GPU)


def r_gpu_header(src):
    d = src.json("gpu-results.json")
    return (f"The GPU kit on an {key(d, 'device', source=GPU)} (driver "
            f"{key(d, 'driver', source=GPU)}, PyTorch {key(d, 'torch', source=GPU)}, "
            f"{key(d, 'date', source=GPU)[:10]}, kit of commit "
            f"{key(d, 'kit_commit', source=GPU)}):")


def gpu_router_cases(src):
    cases = key(gpu_steps(src), "routers", "results", "cases", source=GPU)
    return sum(1 for c in cases if c.get("ok")), len(cases)


def r_gpu_checks(src):
    steps = gpu_steps(src)
    ok, n = gpu_router_cases(src)
    mem = key(steps, "memcheck", "results", "cases", source=GPU)
    race = key(steps, "racecheck", "results", "cases", source=GPU)
    graphs = key(steps, "graphs", "results", "cases", source=GPU)
    execu = key(steps, "executor", "results", source=GPU)
    rows = [
        ("every GPU router × batch sizes vs the host target", f"{ok} / {n} equal"),
        ("`compute-sanitizer` memcheck / racecheck cases",
         f"{sum(c.get('ok', False) for c in mem)} / {len(mem)}, "
         f"{sum(c.get('ok', False) for c in race)} / {len(race)} clean"),
        ("CUDA graphs: replay, knobs re-set with `cudaGraphExecKernelNodeSetParams`",
         f"{sum(c.get('ok', False) for c in graphs)} / {len(graphs)}"),
        ("CUDA executor layer and device expert memory (test runs)",
         f"{execu.get('passed', 0)} passed, {execu.get('failed', 0)} failed"),
    ]
    return table(["check", "result"], rows)


def gpu_bench(src):
    rows = key(gpu_steps(src), "bench", "results", "rows", source=GPU)
    by = {}
    for r in rows:
        base = r.get("baselines") or {}
        # The same routing in torch: transformers' grouped top-k where there is one.
        name = next((n for n in base if "grouped" in n), next(iter(base), None))
        torch_us = base[name].get("graph_us") if name else None
        by.setdefault(r["variant"], {})[r["tokens"]] = (r.get("ours_graph_us"), torch_us)
    return by


def r_gpu_times(src):
    by = gpu_bench(src)
    sizes = [1, 64, 1024, 4096]
    rows = []
    for variant, cells in by.items():
        if not all(t in cells for t in sizes):
            continue
        rows.append([variant] + [f"{num(cells[t][0], 0)} / {num(cells[t][1], 0)}"
                                 for t in sizes])
    return table(["router (µs, graph replay: ours / PyTorch)"] + [f"T = {t}" for t in sizes],
                 rows, ["---"] + ["---:"] * len(sizes))


def one_token(src):
    """The routers' time for one token: median and range over the shipped routers at
    their own shapes (the kit's variants with a suffix are the same routers at other
    sizes or tokens per CTA)."""
    by = gpu_bench(src)
    one = [c[1][0] for v, c in by.items() if 1 in c and c[1][0] and not re.search(
        r"_(e\d+k\d+|p\d+)$", v)]
    return (f"{num(statistics.median(one), 0)} µs (median over {len(one)} routers; "
            f"{span(one, lambda x: num(x, 0))} µs)")


def r_gpu_floor(src):
    bench = key(gpu_steps(src), "bench", "results", source=GPU)
    fit = key(gpu_steps(src), "fit", "results", source=GPU)
    return (f"One token costs {one_token(src)} per call (graph replay); "
            f"the floor, one empty kernel, is {num(bench['empty_kernel_us'])} µs. The launch "
            f"cost model's constants fitted to this run leave an rms log error of "
            f"{fit['rms_log_error']:.2f}.")


def r_gpu_kit_report(src):
    """docs/gpu-kit.md's results: what scripts/gpu_kit/report.py prints."""
    script = os.path.join(ROOT, "scripts", "gpu_kit", "report.py")
    path = os.path.join(ROOT, "docs", "gpu-results.json")
    try:
        r = subprocess.run([sys.executable, script, path, "--variants", "all"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SourceError(f"scripts/gpu_kit/report.py: {e}")
    if r.returncode != 0:
        raise SourceError(f"scripts/gpu_kit/report.py {GPU} exited {r.returncode}: "
                          f"{r.stderr.strip()[-500:]}")
    return r.stdout


def r_gpu_executor(src):
    d = src.json("gpu-results.json")
    runs = key(gpu_steps(src), "executor", "results", "runs", source=GPU)
    tails = " ".join(r.get("tail", "") for r in runs)
    m = re.search(r"(\d+) checks passed, (\d+) failed", tails)
    if not m:
        raise SourceError(f"{GPU}: the executor step reports no 'N checks passed' line")
    return (f"on an {d['device']} (the GPU kit, {d['date'][:10]}) {m.group(1)} checks pass "
            f"and {m.group(2)} fail.")


def r_expert_memory_gpu(src):
    d = src.json("expert-memory-gpu.json")
    src_name = "docs/expert-memory-gpu.json"
    checks = key(d, "checks", source=src_name)
    mig = key(d, "migration", source=src_name)
    return (f"on {key(d, 'device', source=src_name)}, {sum(c['passed'] for c in checks)} of "
            f"{len(checks)} checks pass; a {mig['bytes'] / 2**20:.0f} MiB expert migrates "
            f"host -> device at {mig['gb_per_s']:.1f} GB/s, and `migrate()` returns in at "
            f"most {mig['max_issue_seconds'] * 1e6:.1f} µs (the copy runs on its stream).")


# --- the GPU kernels' static cost (live: moe-compile --report) --------------------------

GPU_ROUTERS = (("topk_softmax", None), ("topk_softmax", "topk_ids,topk_weights"),
               ("deepseek_v3", None), ("deepseek_v3", "topk_ids,topk_weights"),
               ("lynx", None), ("xshare", None), ("xshare_spec", None), ("xshare_ep", None),
               ("libra", None), ("expertflow", None), ("capacity_topk", None),
               ("expert_choice", None))


def gpu_report(policy, outputs):
    """moe-compile --target=ptx --report of a shipped policy at its own model's shape."""
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    python = venv if os.path.exists(venv) else sys.executable
    flags = subprocess.run([python, os.path.join(ROOT, "scripts", "native_shape.py"), policy],
                           capture_output=True, text=True, timeout=60)
    if flags.returncode != 0:
        raise SourceError(f"scripts/native_shape.py {policy}: {flags.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="switchyard-report-") as out:
        argv = [os.path.join(build_dir(), "bin", "moe-compile"),
                os.path.join(ROOT, "policies", policy + ".mlir"), *flags.stdout.split(),
                "--target=ptx", "--gpu-arch=sm_90", "--report", "-o", out]
        if outputs:
            argv.append("--outputs=" + outputs)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SourceError(f"moe-compile --report {policy}: {e}")
    if r.returncode != 0:
        raise SourceError(f"moe-compile --report {policy}: {r.stderr.strip()[-500:]}")
    return r.stdout


def r_gpu_kernels(src):
    rows = []
    for policy, outputs in GPU_ROUTERS:
        text = gpu_report(policy, outputs)
        name = re.search(r"^report @(\w+)", text, re.M)
        if not name:
            raise SourceError(f"moe-compile --report {policy}: no 'report @NAME' line")
        label = name.group(1) + (" (ids, weights)" if outputs else "")
        classes = re.findall(r"^  (decode|large|grid) \(([^)]*)\): (\d+) launch", text, re.M)
        launches = "; ".join(f"{n} at {when}" for _, when, n in classes)
        instr = re.search(r"(\d+) warp instructions per token", text)
        regs = re.findall(r"ptxas (\w+): Used (\d+) registers", text)
        regs = " / ".join(n for _, n in sorted(regs))
        ws = re.search(r"one CTA holds the whole batch, block \d+, workspace ([^\n]+)", text) \
            or re.search(r"workspace ([^\n]+)", text)
        io = re.search(r"inputs\+outputs = (\d+) B/token", text)
        modeled = re.search(r"modeled: (.*)$", text, re.M)
        times = " / ".join(re.findall(r"T=\d+: ([\d.]+) us", modeled.group(1))) if modeled else ""
        rows.append([label, launches, instr.group(1) if instr else "", regs,
                     ws.group(1).strip() if ws else "", io.group(1) if io else "", times])
    return table(["router", "launches", "warp instructions / token", "registers per kernel",
                  "workspace (first kernel)", "inputs+outputs B/token",
                  "modeled µs at T = 1 / 64 / 1024 / 4096 / 65536"], rows)


# --- the executor on the host (docs/exec-layer-host.json) -------------------------------

NAMES = {"topk_softmax": "top-k", "lynx": "LYNX", "xshare": "XShare",
         "xshare_spec": "XShare-spec"}


def r_exec_layer(src):
    d = src.json("exec-layer-host.json")
    rows = []
    for r in key(d, "rows", source="docs/exec-layer-host.json"):
        loop = r.get("loop", r.get("eager"))  # the Python-loop reference ("eager" before)
        rows.append([r["batch"], NAMES.get(r["policy"], r["policy"]), r["experts"],
                     f"{r['bytes'] / 1e6:.0f}", f"{r['flops'] / 1e9:.2f}",
                     num(r["seconds"] * 1e3), ratio(r["vs_topk"]),
                     f"{num(r['bound'] * 1e3)} ({r['bound_by']})",
                     num(loop * 1e3) if loop else "", ratio(loop / r["seconds"]) if loop else ""])
    machine = (f"Machine, measured in the same run with numpy on OpenBLAS: read bandwidth "
               f"{d['read_bandwidth'] / 1e9:.1f} GB/s, float32 GEMM "
               f"{d['gemm_rate'] / 1e9:.1f} GFLOP/s.")
    return machine + "\n\n" + table(
        ["batch", "policy", "experts", "MB read", "GFLOP", "ms", "vs top-k", "bound ms (by)",
         "Python loop ms", "loop / exec"], rows)


# --- routing from Python (docs/bench-python-host.json) ---------------------------------

def r_python_overhead(src):
    name = "docs/bench-python-host.json"
    o = key(src.json("bench-python-host.json"), "overhead", source=name)
    labels, rows = key(o, "labels", source=name), key(o, "rows", source=name)
    out = []
    for letter, label in labels.items():
        if letter not in rows[0]:
            continue
        cells = []
        for r in rows:
            us = r[letter]["median_us"]
            base = r["a"]["median_us"] if "a" in r else None
            cells.append(num(us) if letter == "a" or base is None
                         else f"{num(us)} (+{us - base:.0f})")
        out.append([" ".join(label.split())] + cells)
    header = ["path (µs per call; in brackets: over the C entry)"] + [
        f"T={r['tokens']}, E={r['experts']}" for r in rows]
    return table(header, out)


# --- compiled routers vs torch (docs/bench-routers.json) --------------------------------

def routers_rows(src):
    return key(src.json("bench-routers.json"), "rows", source="docs/bench-routers.json")


def med(row, variant):
    return key(row, "variants", variant, "wall_us", "median", source="docs/bench-routers.json")


def torch_best(row, lib="torch"):
    """torch (or HF) at its faster thread count (the fair baseline): (time, "1t" / "nt")."""
    return min((med(row, f"{lib}_1t"), "1t"), (med(row, f"{lib}_nt"), "nt"))


def r_bench_routers(src):
    rows, last = [], None
    for r in routers_rows(src):
        name = r["policy"] if r["policy"] != last else ""
        last = r["policy"]
        sy = med(r, "sy_route")
        best, threads = torch_best(r)
        hf, hf_threads = torch_best(r, "hf")
        rows.append([name, r["experts"], r["tokens"], num(sy), num(med(r, "sy_all")),
                     num(med(r, "torch_1t")), num(med(r, "torch_nt")), num(med(r, "hf_1t")),
                     num(med(r, "hf_nt")), f"{ratio(best / sy)} ({threads})",
                     f"{ratio(hf / sy)} ({hf_threads})"])
    return table(["policy", "E", "T", "sy route", "sy all", "torch 1t", "torch nt", "HF 1t",
                  "HF nt", "torch best / sy", "HF best / sy"], rows)


def headline_routers(src):
    rs = routers_rows(src)
    ds = [torch_best(r)[0] / med(r, "sy_route") for r in rs if r["policy"] == "deepseek_v3"]
    big = [torch_best(r)[0] / med(r, "sy_route") for r in rs
           if r["policy"] == "topk_softmax" and r["tokens"] >= 4096]
    return (f"torch at its faster thread count takes {span(ds)} the time of the compiled "
            f"DeepSeek-V3 grouped top-k, at every size, and {span(big)} that of the compiled "
            f"softmax top-k at T = 4096 (small batches are faster in torch) "
            f"([results](docs/results.md#compiled-routers-vs-pytorch-and-transformers-on-the-cpu)).")


def r_bench_routers_summary(src):
    out = []
    for policy in ("deepseek_v3", "topk_softmax"):
        rs = [r for r in routers_rows(src) if r["policy"] == policy]
        every = [torch_best(r)[0] / med(r, "sy_route") for r in rs]
        big = [torch_best(r)[0] / med(r, "sy_route") for r in rs if r["tokens"] >= 256]
        out.append(f"`{policy}`: torch best / sy {span(every)} over all sizes, {span(big)} "
                   f"from T = 256")
    return ("Ratios above 1: Switchyard faster; torch at its faster thread count (1t or nt "
            "per row). " + "; ".join(out) + ".")


# --- expert parallelism (docs/ep-balance.json, docs/ep-live.json) -----------------------

METHODS = ("none", "eplb", "libra", "xshare_ep")


def r_ep_balance(src):
    d = src.json("ep-balance.json")
    rows = key(d, "rows", source="docs/ep-balance.json")
    cases = []
    for r in rows:
        c = (r["trace"], r["experts"], r["ranks"])
        if c not in cases:
            cases.append(c)
    out = []
    for c in cases:
        by = {r["method"]: r for r in rows if (r["trace"], r["experts"], r["ranks"]) == c}
        if not all(m in by for m in METHODS):
            continue
        imb = " / ".join(f"{by[m]['imbalance']:.2f}" for m in METHODS)
        step = [ratio(key(by[m], "modeled", "speedup_vs_none", source="docs/ep-balance.json"))
                for m in METHODS[1:]]
        out.append([f"{c[0]}, {c[1]}, {c[2]}", imb, " / ".join(step)])
    return table(["trace, E, ranks", "imbalance: none / EPLB / Libra / XShare-EP",
                  "modeled step speed-up vs none: EPLB / Libra / XShare-EP"], out)


def live_rows(src):
    return key(src.json("ep-live.json"), "rows", source="docs/ep-live.json")


def r_ep_live(src):
    rows = live_rows(src)
    out = []
    for ranks in sorted({r["ranks"] for r in rows}):
        by = {r["method"]: r for r in rows if r["ranks"] == ranks}
        if not all(m in by for m in METHODS):
            continue
        imb = (f"{by['none']['imbalance_mean']:.2f} / {by['eplb']['imbalance_mean']:.2f} / "
               f"{by['libra']['imbalance_after_first_layer']:.2f} / "
               f"{by['xshare_ep']['imbalance_mean']:.2f}")
        moved = (f"{by['eplb']['weight_bytes_moved'] / 2**20:.0f} / "
                 f"{by['libra']['weight_bytes_moved'] / 2**20:.0f} MiB")
        active = (f"{by['none']['active_experts_mean']:.1f} / "
                  f"{by['xshare_ep']['active_experts_mean']:.1f}")
        out.append([ranks, imb, moved, f"{by['libra']['libra_prediction_hit_rate']:.2f}",
                    active])
    return table(["ranks", "imbalance none / EPLB / Libra (layers >= 1) / XShare-EP",
                  "expert weights moved: EPLB / Libra", "Libra hit rate",
                  "active experts per layer: none / XShare-EP"], out)


# --- expert memory (docs/memory-modes.json) ---------------------------------------------

def r_memory_modes(src):
    d = src.json("memory-modes.json")
    rows = key(d, "rows", source="docs/memory-modes.json")
    ref = rows[0]
    out = []
    for r in rows:
        moved = "—"
        if r["mode"] in ("offload", "on-demand"):
            moved = f"{r['loads']} loads / {r['prefetches']} prefetches"
        elif r["mode"] == "dynaexq":
            moved = f"{r['promotions']} promotions"
        out.append([r["mode"], f"{r['budget'] / 2**20:.1f}", num(r["throughput_tok_s"], 0),
                    f"{num(r['decode_ms_p50'])} / {num(r['decode_ms_p99'])}",
                    f"{num(r['prefill_ms_p50'])} / {num(r['prefill_ms_p99'])}",
                    f"{r['stall_seconds']:.2f}", moved,
                    "0" if not r["rel_rms_vs_resident"] else f"{r['rel_rms_vs_resident']:.2e}"])
    del ref
    return table(["mode", "budget MiB", "tok/s", "decode p50 / p99 ms", "prefill p50 / p99 ms",
                  "stall s", "moved", "output rel. RMS vs resident"], out)


def r_memory_summary(src):
    t = key(src.json("memory-modes.json"), "targets", source="docs/memory-modes.json")
    v = t["dynaexq_vs_offload"]
    return (f"DynaExq runs at {ratio(v['throughput_tok_s'])} offloading's throughput "
            f"({ratio(v['decode_tok_s'])} on decode steps, {ratio(v['prefill_tok_s'])} on "
            f"prefill); ExpertFlow's stalls are {t['expertflow_stall_fraction']:.0%} of "
            f"on-demand loading's here (its target, < 0.1%, "
            f"{'met' if t['expertflow_target_met'] else 'not met'}).")


# --- vLLM (docs/vllm-route.json, docs/vllm-engine.json) ---------------------------------

def r_vllm_route(src):
    d = src.json("vllm-route.json")
    rows = key(d, "rows", source="docs/vllm-route.json")
    shapes, tokens = [], []
    for r in rows:
        s = (r["dtype"], r["experts"], r["top_k"])
        if s not in shapes:
            shapes.append(s)
        if r["tokens"] not in tokens:
            tokens.append(r["tokens"])

    def eager(r, router):
        """Each router at its faster thread count where the run timed both."""
        return r.get(f"{router}_best_us", r[f"{router}_us"])
    out = []
    for s in shapes:
        cells = []
        for t in tokens:
            r = next((r for r in rows if (r["dtype"], r["experts"], r["top_k"]) == s
                      and r["tokens"] == t), None)
            cells.append("" if r is None else
                         f"{num(eager(r, 'native'))} / {num(eager(r, 'switchyard'))} / "
                         f"{num(r['native_compiled_us'])} / {num(r['switchyard_compiled_us'])}")
        out.append(list(s) + cells)
    faster = sum(eager(r, "switchyard") < eager(r, "native") for r in rows)
    faster_c = sum(r["switchyard_compiled_us"] < r["native_compiled_us"] for r in rows)
    threads = d["threads"]
    setting = (f"eager each router at its faster of {' or '.join(map(str, threads))} torch "
               f"threads" if isinstance(threads, list) else f"{threads} torch thread")
    return (table(["dtype", "E", "k"] + [f"T={t}" for t in tokens], out) +
            f"\n\nEager, Switchyard is faster than native in {faster} of {len(rows)} cases; "
            f"under `torch.compile` in {faster_c} of {len(rows)} (vLLM {d['vllm']}, torch "
            f"{d['torch']}, {setting}).")


def engine_table(src, name="vllm-engine.json"):
    d = src.json(name)
    rows = key(d, "rows", source=f"docs/{name}")
    batches = sorted({r["batch"] for r in rows})
    routers = []
    for r in rows:
        if r["router"] not in routers:
            routers.append(r["router"])
    native = {r["batch"]: r["tokens_per_s"] for r in rows if r["router"] == "native"}
    out = []
    for name in routers:
        cells = []
        for b in batches:
            r = next((r for r in rows if r["router"] == name and r["batch"] == b), None)
            active = r and r.get("active_per_layer_step")
            cells.append("" if r is None else
                         f"{r['tokens_per_s']:.0f} ({ratio(r['tokens_per_s'] / native[b])}, "
                         f"{'—' if active is None else f'{active:.1f}'})")
        out.append([name] + cells)
    m = d["model"]
    caption = (f"vLLM {d['vllm']} on {d['cpus']} CPU cores, a random {m['arch']} "
               f"({m['layers']} layers, {m['experts']} experts of width {m['intermediate']}, "
               f"hidden {m['hidden']}, top-{m['top_k']}, {m['dtype']}), {d['tokens']} generated "
               f"tokens per sequence; each cell tokens/s (vs native, experts active per layer "
               f"and decode step):")
    return caption + "\n\n" + table(["router"] + [f"batch {b}" for b in batches], out)


def r_vllm_engine(src):
    return engine_table(src)


def r_vllm_request_knobs(src):
    return engine_table(src, "vllm-request-knobs.json")


# --- the README's headlines -------------------------------------------------------------

def r_readme_headlines(src):
    d = src.json("gpu-results.json")
    ok, n = gpu_router_cases(src)
    lines = [
        "* **Fewer experts per batch**: " + r_demo_reduction(src),
        f"* **On a GPU** ({d['device']}, the GPU kit): {ok} / {n} router × batch-size cases "
        f"equal the host target; routing one token costs {one_token(src)} in a CUDA graph "
        f"([results](docs/results.md#on-a-gpu)).",
        "* **On the CPU, against torch** (`bench/bench_routers.py`): "
        + headline_routers(src),
        "* **Expert memory** (`bench/bench_memory.py`): " + r_memory_summary(src),
    ]
    return "\n".join(lines)


# --- the seed systems on real routing traces (bench/eval_traces.py) ----------------------

def _eval_traces():
    """bench/eval_traces.py's table renderers (they read only the JSON)."""
    # (this checkout's bench/, also when ROOT is a scratch copy of the pages)
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import eval_traces
    return eval_traces


def r_trace_results(src):
    return _eval_traces().markdown(src.json("trace-results.json"))


def r_readme_trace_results(src):
    return "\n".join(_eval_traces().summary(src.json("trace-results.json")))


def r_ep_policies(src):
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_ep_policies
    return bench_ep_policies.markdown(src.json("ep-policies.json"))


def r_quality_results(src):
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import eval_quality
    return eval_quality.markdown(src.json("quality-results.json"))


RENDERERS = {
    "help-moe-run": (native_tool("moe-run", "Switchyard options:"), "build/bin/moe-run --help"),
    "help-moe-compile": (native_tool("moe-compile", "Switchyard options:"),
                         "build/bin/moe-compile --help"),
    "help-moe-exec": (native_tool("moe-exec"), "build/bin/moe-exec --help"),
    "help-moe-opt-passes": (r_help_moe_opt_passes, "build/bin/moe-opt --help (--moe-*)"),
    "help-moe-eval": (r_help_moe_eval, "python -m switchyard.trace --help"),
    "test-counts": (r_test_counts, "ctest -N, test/Dialect/Moe/errors.mlir"),
    "readme-test-counts": (r_readme_test_counts, "ctest -N, errors.mlir, policies/"),
    "demo-output": (r_demo_output, "scripts/demo.py (live)"),
    "demo-reduction": (r_demo_reduction, "scripts/demo.py (live)"),
    "gpu-header": (r_gpu_header, GPU),
    "gpu-checks": (r_gpu_checks, GPU),
    "gpu-times": (r_gpu_times, GPU),
    "gpu-floor": (r_gpu_floor, GPU),
    "gpu-executor": (r_gpu_executor, GPU),
    "gpu-kit-report": (r_gpu_kit_report, "scripts/gpu_kit/report.py docs/gpu-results.json"),
    "expert-memory-gpu": (r_expert_memory_gpu, "docs/expert-memory-gpu.json"),
    "gpu-kernels": (r_gpu_kernels, "moe-compile --target=ptx --report (live) per router"),
    "python-overhead": (r_python_overhead, "docs/bench-python-host.json"),
    "exec-layer": (r_exec_layer, "docs/exec-layer-host.json"),
    "bench-routers": (r_bench_routers, "docs/bench-routers.json"),
    "bench-routers-summary": (r_bench_routers_summary, "docs/bench-routers.json"),
    "ep-balance": (r_ep_balance, "docs/ep-balance.json"),
    "ep-live": (r_ep_live, "docs/ep-live.json"),
    "memory-modes": (r_memory_modes, "docs/memory-modes.json"),
    "memory-summary": (r_memory_summary, "docs/memory-modes.json"),
    "vllm-route": (r_vllm_route, "docs/vllm-route.json"),
    "vllm-engine": (r_vllm_engine, "docs/vllm-engine.json"),
    "readme-vllm-engine": (r_vllm_engine, "docs/vllm-engine.json"),
    "vllm-request-knobs": (r_vllm_request_knobs, "docs/vllm-request-knobs.json"),
    "trace-results": (r_trace_results, "docs/trace-results.json (bench/eval_traces.py)"),
    "readme-trace-results": (r_readme_trace_results,
                             "docs/trace-results.json (bench/eval_traces.py)"),
    "ep-policies": (r_ep_policies, "docs/ep-policies.json (bench/bench_ep_policies.py)"),
    "quality-results": (r_quality_results, "docs/quality-results.json (bench/eval_quality.py)"),
    "readme-headlines": (r_readme_headlines, "scripts/demo.py, docs/gpu-results.json, "
                         "docs/bench-routers.json, docs/memory-modes.json"),
}


def pages():
    out = [os.path.join(ROOT, "README.md")]
    out += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return out


def render_page(path, text, src, problems):
    """The page with every block rewritten; problems collects what cannot be."""
    name_of = os.path.relpath(path, ROOT)
    opened = OPEN.findall(text)
    closed = [m.group(2) for m in BLOCK.finditer(text)]
    if len(opened) != len(closed):
        problems.append(f"{name_of}: a `<!-- generated: NAME -->` without its `<!-- end -->`")
        return text

    def one(m):
        name = m.group(2)
        if name not in RENDERERS:
            problems.append(f"{name_of}: unknown block `{name}` (known: "
                            f"{', '.join(sorted(RENDERERS))})")
            return m.group(0)
        try:
            body = wrap(RENDERERS[name][0](src)).rstrip("\n") + "\n"
        except SourceError as e:
            problems.append(f"{name_of}: block `{name}`: {e}")
            return m.group(0)
        return m.group(1) + body + m.group(4)
    return BLOCK.sub(one, text)


def hand_written_tables(path, text):
    """Lines of markdown tables with a digit outside generated blocks."""
    stripped = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    stripped = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), stripped,
                      flags=re.S | re.M)
    bad = []
    for i, line in enumerate(stripped.split("\n"), 1):
        if line.startswith("|") and re.search(r"\d", re.sub(r"`[^`]*`", "", line)):
            bad.append(f"{os.path.relpath(path, ROOT)}:{i}: a table row with a number outside "
                       f"a generated block: {line[:80]}")
    return bad


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a block differs from its source")
    parser.add_argument("--list", action="store_true", help="print the renderers")
    parser.add_argument("--pages", nargs="+", metavar="PAGE",
                        help="only these pages (paths relative to the checkout)")
    args = parser.parse_args(argv)
    if args.list:
        for name, (_, source) in sorted(RENDERERS.items()):
            print(f"{name:24} {source}")
        return 0
    src = Sources()
    problems, stale, used = [], [], set()
    chosen = pages()
    if args.pages:
        chosen = [os.path.join(ROOT, p) for p in args.pages]
        missing = [p for p in chosen if not os.path.isfile(p)]
        if missing:
            print(f"error: no page {os.path.relpath(missing[0], ROOT)}", file=sys.stderr)
            return 2
    for path in chosen:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        used.update(m.group(2) for m in BLOCK.finditer(text))
        new = render_page(path, text, src, problems)
        if os.path.relpath(path, ROOT) in RESULT_PAGES:
            problems.extend(hand_written_tables(path, new))
        if new != text:
            stale.append(os.path.relpath(path, ROOT))
            if args.check:
                sys.stdout.writelines(difflib.unified_diff(
                    text.splitlines(True), new.splitlines(True),
                    "a/" + stale[-1], "b/" + stale[-1], n=1))
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    for p in problems:
        print(f"error: {p}")
    if args.check:
        for p in stale:
            print(f"stale: {p}: its numbers differ from their sources; run "
                  f"python3 scripts/update-numbers.py and commit the result")
        print(f"{len(used)} kinds of generated blocks checked; "
              f"{len(stale)} stale pages, {len(problems)} errors")
        return 1 if stale or problems else 0
    for p in stale:
        print(f"updated {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
