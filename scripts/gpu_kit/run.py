#!/usr/bin/env python3
"""Runs the GPU kit (on the GPU machine; with --dry anywhere): builds the launchers, then
the checks and measurements in order of importance, each in its own process with a time
box, writing OUTDIR/gpu-results.json after every step (a time-out keeps what finished)
and the whole output to OUTDIR/gpu-kit.log.

  0 build      launchers against cudart                        (also --dry)
  - exec-plumbing  the executor bundle loads, one host moe-exec run (also --dry)
  - inputs     inputs regenerate to the packed hashes          (also --dry)
  1 routers    every router x T vs the host target; launch counts per size class
  2 memcheck   compute-sanitizer memcheck, T = 64 and 4096
  2 racecheck  compute-sanitizer racecheck, T = 64 and 4096
  3 graphs     CUDA-graph capture, replay, knobs written between replays
  - torch-op-plumbing  the op library loads, host-only routers route (also --dry)
  4 torch-op   the routing op on CUDA tensors: eager, torch.compile, CUDA graphs with
               knobs and phase written between replays; time per call
  5 executor   moe-exec --device cuda vs host (5 families); device expert memory
  - profile    Nsight Compute: per-kernel time, registers, occupancy limits, waves
  6 bench      time per call vs PyTorch and the floor
  7 baselines  topk_softmax vs the hand-written baselines (bench/gpu_baselines)
  - fit        the launch cost model's constants fitted to the bench (CPU)

    run.py --kit KIT [--dry] [--budget SECONDS] [--only a,b] OUTDIR
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cudart import Cudart, CudaError, cuda_home  # noqa: E402

SANITIZED_TOKENS = "64,4096"
# Per kernel: time, registers and what limits the resident CTAs per SM (the launch cost
# model's occupancy inputs), waves, achieved occupancy.
NCU_METRICS = ["gpu__time_duration.sum", "launch__grid_size", "launch__block_size",
               "launch__registers_per_thread", "launch__shared_mem_per_block_static",
               "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
               "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks",
               "launch__waves_per_multiprocessor",
               "sm__warps_active.avg.pct_of_peak_sustained_active",
               "smsp__inst_executed.sum", "dram__bytes.sum"]
# Steps the kit cannot run yet, and why.
NOT_IN_KIT = {}
NATIVE_VARIANTS = ("topk_softmax,deepseek_v3,lynx,xshare,xshare_spec,xshare_ep,libra_predict,"
                   "expertflow_route,capacity_topk,expert_choice")


def steps(kit, out, py, work):
    tool = shutil.which("compute-sanitizer") or os.path.join(cuda_home(), "bin",
                                                             "compute-sanitizer")
    routers = [py, os.path.join(HERE, "step_routers.py"), "--kit", kit]
    sanitized = routers + ["--tokens", SANITIZED_TOKENS, "--no-count"]
    # (name, needs a GPU, seconds, command, json written by the step)
    return [
        ("build", False, 180, [py, os.path.join(HERE, "build_kit.py"), "--kit", kit], None),
        ("exec-plumbing", False, 120, [py, os.path.join(HERE, "step_exec.py"), "--kit", kit,
                                       "--plumbing", "--json", f"{work}/exec-plumbing.json"],
         "exec-plumbing.json"),
        ("inputs", False, 120, [py, os.path.join(HERE, "step_inputs.py"), "--kit", kit,
                                "--json", f"{work}/inputs.json"], "inputs.json"),
        ("routers", True, 240, routers + ["--json", f"{work}/routers.json"], "routers.json"),
        ("memcheck", True, 150, [tool, "--tool", "memcheck", "--error-exitcode", "9",
                                 "--leak-check", "no"] + sanitized
         + ["--json", f"{work}/memcheck.json"], "memcheck.json"),
        ("racecheck", True, 150, [tool, "--tool", "racecheck", "--error-exitcode", "9"]
         + sanitized + ["--json", f"{work}/racecheck.json"], "racecheck.json"),
        ("graphs", True, 120, [py, os.path.join(HERE, "step_graphs.py"), "--kit", kit,
                               "--json", f"{work}/graphs.json"], "graphs.json"),
        ("torch-op-plumbing", False, 180, [py, os.path.join(HERE, "step_torch_op.py"),
                                           "--kit", kit, "--plumbing", "--json",
                                           f"{work}/torch-op-plumbing.json"],
         "torch-op-plumbing.json"),
        ("torch-op", True, 240, [py, os.path.join(HERE, "step_torch_op.py"), "--kit", kit,
                                 "--json", f"{work}/torch-op.json"], "torch-op.json"),
        ("executor", True, 240, [py, os.path.join(HERE, "step_exec.py"), "--kit", kit,
                                 "--json", f"{work}/executor.json"], "executor.json"),
        ("profile", True, 150, [shutil.which("ncu") or os.path.join(cuda_home(), "bin", "ncu"),
                                "--csv", "--log-file", f"{out}/profile.csv",
                                "--metrics", ",".join(NCU_METRICS)]
         + routers + ["--variants", NATIVE_VARIANTS, "--tokens", "1,64,4096", "--no-count",
                      "--json", f"{work}/profile.json"], None),
        ("bench", True, 300, [py, os.path.join(HERE, "step_bench.py"), "--kit", kit,
                              "--json", f"{work}/bench.json"], "bench.json"),
        ("baselines", True, 120, [py, os.path.join(HERE, "step_baselines.py"), "--kit", kit,
                                  "--json", f"{work}/baselines.json"], "baselines.json"),
        # CPU only, after the bench: the launch cost model's constants fitted to it.
        ("fit", True, 60, [py, os.path.join(HERE, "fit_model.py"), f"{work}/results-so-far.json",
                           "--kit", kit, "--json", f"{work}/fit.json"], "fit.json"),
    ]


def device_info():
    info = {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30)
        if q.returncode == 0 and q.stdout.strip():
            name, driver, memory = [s.strip() for s in q.stdout.splitlines()[0].split(",")]
            info.update(device=name, driver=driver, memory=memory)
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        cuda = Cudart()
        info.update(gpus=cuda.device_count(), cuda_runtime=cuda.runtime_version(),
                    cuda_driver_api=cuda.driver_version())
    except (OSError, CudaError) as e:
        info.update(gpus=0, cuda_error=str(e))
    for tool, flag in (("nvcc", "--version"), ("compute-sanitizer", "--version")):
        path = shutil.which(tool) or os.path.join(cuda_home(), "bin", tool)
        try:
            v = subprocess.run([path, flag], capture_output=True, text=True, timeout=30)
            info[tool] = (v.stdout.strip().splitlines() or [""])[-1]
        except (OSError, subprocess.TimeoutExpired):
            info[tool] = None
    try:
        import torch
        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    return info


class Log:
    def __init__(self, path):
        self.file = open(path, "a")

    def __call__(self, text):
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


def run_step(log, name, seconds, command, env):
    log(f"== {name} (time box {seconds} s): {' '.join(command)}")
    start = time.time()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True)
    timed_out = False
    try:
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = seconds - (time.time() - start)
            if left <= 0:
                timed_out = True
                break
            if sel.select(timeout=min(left, 5)):
                line = proc.stdout.readline()
                if not line:
                    break
                log(line.rstrip())
            elif proc.poll() is not None:
                break
        if not timed_out:   # output closed: give the process what is left to exit
            proc.wait(timeout=max(1.0, seconds - (time.time() - start)))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
    elapsed = time.time() - start
    status = "timeout" if timed_out else ("passed" if proc.returncode == 0 else "failed")
    log(f"== {name}: {status} in {elapsed:.1f} s (exit {proc.returncode})")
    return {"status": status, "seconds": round(elapsed, 1), "exit": proc.returncode}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--kit", required=True)
    ap.add_argument("--dry", action="store_true", help="no GPU: run what the CPU can")
    ap.add_argument("--budget", type=float, default=540,
                    help="seconds for the whole run; later steps get what is left")
    ap.add_argument("--only", default="", help="comma-separated steps (build always runs)")
    args = ap.parse_args()
    start = time.time()
    out, kit = os.path.abspath(args.outdir), os.path.abspath(args.kit)
    os.makedirs(out, exist_ok=True)
    log = Log(os.path.join(out, "gpu-kit.log"))
    with open(os.path.join(kit, "kit.json")) as f:
        packed = json.load(f)
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "kit_commit": packed.get("commit"), "dry": args.dry, **device_info(),
               "steps": {}}
    log(f"GPU kit of {packed.get('commit')} ({len(packed['routers'])} router builds): "
        f"{json.dumps({k: v for k, v in results.items() if k != 'steps'})}")
    has_gpu = results.get("gpus", 0) > 0 and not args.dry
    if not args.dry and not has_gpu:
        log(f"no usable GPU ({results.get('cuda_error', 'cudaGetDeviceCount found none')}): "
            "GPU steps are skipped; --dry says so on purpose")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    only = {s for s in args.only.split(",") if s}
    work = tempfile.mkdtemp(prefix="gpu-kit-")   # the steps' own JSON (merged below)
    for name, needs_gpu, seconds, command, produced in steps(kit, out, sys.executable, work):
        if only and name not in only and name != "build":
            continue
        if command is None:   # not in the kit yet: say so
            log(f"== {name}: skipped: {NOT_IN_KIT[name]}")
            results["steps"][name] = {"status": "skipped", "reason": NOT_IN_KIT[name]}
        elif needs_gpu and not has_gpu:
            log(f"== {name}: skipped: no GPU")
            results["steps"][name] = {"status": "skipped", "reason": "no GPU"}
        else:
            left = args.budget - (time.time() - start)
            if left < 10:
                results["steps"][name] = {"status": "skipped", "reason": "out of time"}
                log(f"== {name}: skipped: out of time")
                continue
            if name == "fit":   # reads the bench step's results
                with open(os.path.join(work, "results-so-far.json"), "w") as f:
                    json.dump(results, f)
            step = run_step(log, name, min(seconds, left), command, env)
            if produced and os.path.exists(os.path.join(work, produced)):
                with open(os.path.join(work, produced)) as f:
                    step["results"] = json.load(f)
            results["steps"][name] = step
            if name == "build" and step["status"] != "passed":
                log("the launchers did not build: nothing else can run")
                break
        with open(os.path.join(out, "gpu-results.json"), "w") as f:
            json.dump(results, f, indent=1)
    with open(os.path.join(out, "gpu-results.json"), "w") as f:
        json.dump(results, f, indent=1)
    bad = [n for n, s in results["steps"].items() if s["status"] in ("failed", "timeout")]
    log(f"GPU kit done in {time.time() - start:.0f} s: "
        + ", ".join(f"{n} {s['status']}" for n, s in results["steps"].items()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
