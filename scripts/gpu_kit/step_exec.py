#!/usr/bin/env python3
"""Kit step 5: the CUDA executor layer and device expert memory, from the kit's
exec.tar.xz (binaries, their libraries, precompiled policies): test/gpu/
test_executor_gpu.py (moe-exec --device cuda against the host executor on random
checkpoints of five families, 1e-4; ids exact, weights 1e-5; a replay bit-identical) and
expert-memory-gpu (migrations at every precision, dequantisation, the expert FFN through
cuBLAS, GB/s). With --plumbing (no GPU needed): one host moe-exec run through the same
libraries and precompiled policies, so that a dry run shows the bundle loads here.

    step_exec.py --kit KIT --json FILE [--plumbing]
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from cudart import cuda_home  # noqa: E402
from kit_common import finish, step_arguments  # noqa: E402


def unpack(kit):
    work = tempfile.mkdtemp(prefix="switchyard-kit-exec-")
    with tarfile.open(os.path.join(kit, "exec.tar.xz")) as tar:
        tar.extractall(work)
    exe = os.path.join(work, "exec")
    cuda_lib = next((os.path.join(cuda_home(), d) for d in ("lib64", "lib")
                     if os.path.isdir(os.path.join(cuda_home(), d))), "")
    env = dict(os.environ,
               LD_LIBRARY_PATH=":".join(p for p in (os.path.join(exe, "lib"), cuda_lib,
                                                     os.environ.get("LD_LIBRARY_PATH")) if p),
               SWITCHYARD_MOE_COMPILE=os.path.join(HERE, "moe-compile-replay"),
               SWITCHYARD_KIT_COMPILED=os.path.join(exe, "compiled"),
               SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
    return exe, env, work


def run(cmd, env, log):
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    text = (done.stdout + done.stderr).strip()
    print(text, flush=True)
    log.append({"command": " ".join(cmd), "exit": done.returncode, "tail": text[-3000:]})
    return done.returncode


def plumbing(exe, env, work, log):
    """One host moe-exec run on a test checkpoint through the replayed compiler."""
    from make_checkpoint import make_checkpoint
    import numpy as np
    model = os.path.join(work, "mixtral")
    config = make_checkpoint("mixtral", model, seed=2, dtype="bfloat16")
    x = np.random.default_rng(4).standard_normal((3, config["hidden_size"])).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    return run([os.path.join(exe, "bin", "moe-exec"), model, "--input",
                os.path.join(work, "x.npy"), "--out", os.path.join(work, "out"),
                "--block-only"], env, log)


def main():
    ap = step_arguments()
    ap.add_argument("--plumbing", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.kit, "exec.tar.xz")):
        print("skipped: the kit was packed without exec.tar.xz (pack.py --no-exec)")
        return 0
    exe, env, work = unpack(args.kit)
    log, results = [], {}
    if args.plumbing:
        rc = plumbing(exe, env, work, log)
        results = {"passed": int(rc == 0), "failed": int(rc != 0), "runs": log}
    else:
        rc_exec = run([sys.executable, os.path.join(ROOT, "test", "gpu", "test_executor_gpu.py"),
                       "--build", exe], env, log)
        memory_json = os.path.join(work, "expert-memory.json")
        rc_mem = run([os.path.join(exe, "bin", "expert-memory-gpu"), "--json", memory_json],
                     env, log)
        results = {"passed": int(rc_exec == 0) + int(rc_mem == 0),
                   "failed": int(rc_exec not in (0,)) + int(rc_mem not in (0,)),
                   "executor_exit": rc_exec, "expert_memory_exit": rc_mem, "runs": log}
        if os.path.exists(memory_json):
            with open(memory_json) as f:
                results["expert_memory"] = json.load(f)
    return finish(args.json, results)


if __name__ == "__main__":
    sys.exit(main())
