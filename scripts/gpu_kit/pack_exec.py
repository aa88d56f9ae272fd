"""The executor part of the GPU kit: moe-exec and expert-memory-gpu with the shared
libraries they need beyond a CUDA image (Switchyard's runtime, executor and CUDA layer;
OpenBLAS, libzip, MPI, libomp...), the policies the GPU executor test compiles,
precompiled here for the test's checkpoints (scripts/gpu_kit/moe-compile-replay serves
them there), and the routing op's library and cases (pack_torch_op.py). Everything goes
into one compressed tarball, KIT/exec.tar.xz.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
sys.path.insert(0, HERE)
from compile_cache import record  # noqa: E402
from pack_torch_op import pack_torch_op  # noqa: E402

# What a CUDA image has (or must have): the C/C++ runtime and CUDA's own libraries.
SYSTEM = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libstdc++", "libgcc_s",
          "libpthread", "libdl.so", "librt.so", "libcudart", "libcublas", "libnccl",
          "libcuda.so")
# The GPU executor test's cases (test/gpu/test_executor_gpu.py).
ARCHS = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3")
POLICIES = (None, "lynx", "xshare", "xshare_spec")
BINARIES = ("moe-exec", "expert-memory-gpu")


def dependencies(paths):
    deps = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split("=>")
            if len(parts) == 2 and parts[1].strip().startswith("/"):
                lib = parts[1].split()[0]
                if not any(os.path.basename(lib).startswith(s) for s in SYSTEM):
                    deps.add(lib)
    return deps


def compile_requests(store, compiler, work):
    """Precompiles every (checkpoint, policy, host/GPU) request the executor test makes."""
    from make_checkpoint import make_checkpoint
    import moe_reference as ref
    keys = []
    for arch in ARCHS:
        model = os.path.join(work, arch)
        config = make_checkpoint(arch, model, seed=2, dtype="bfloat16")
        experts = ref.num_experts(config)
        native = "deepseek_v3" if config.get("model_type") == "deepseek_v3" else "topk_softmax"
        for policy in POLICIES:
            path = os.path.join(ROOT, "policies", f"{policy or native}.mlir")
            flags = ["--model", os.path.join(model, "config.json"), "--devices", "1",
                     "--slots", str(experts), "--allow-unused-sizes"]
            keys.append(record(store, compiler, path, flags, "host"))
            keys.append(record(store, compiler, path, flags + ["--launcher-library"], "all"))
    return keys


def pack_exec(kit, build):
    stage = tempfile.mkdtemp(prefix="switchyard-kit-exec-")
    for sub in ("bin", "lib", "compiled"):
        os.makedirs(os.path.join(stage, sub))
    bins = [os.path.join(build, "bin", b) for b in BINARIES]
    for b in bins:
        shutil.copy2(b, os.path.join(stage, "bin"))
    runtime = [os.path.join(build, "runtime", n) for n in sorted(os.listdir(
        os.path.join(build, "runtime"))) if n.endswith(".so")]
    keys = compile_requests(os.path.join(stage, "compiled"),
                            os.path.join(build, "bin", "moe-compile"), tempfile.mkdtemp())
    artifacts = [os.path.join(stage, "compiled", k, n) for k in set(keys)
                 for n in os.listdir(os.path.join(stage, "compiled", k)) if n.endswith(".so")]
    # The routing op's library and cases (its runtime is the one copied below).
    torch_op = pack_torch_op(stage, build)
    for lib in sorted(set(runtime) | dependencies(bins + runtime + artifacts)):
        shutil.copy2(lib, os.path.join(stage, "lib", os.path.basename(lib)))
    with open(os.path.join(stage, "exec.json"), "w") as f:
        json.dump({"binaries": list(BINARIES), "archs": list(ARCHS),
                   "policies": [p or "native" for p in POLICIES],
                   "libraries": sorted(os.listdir(os.path.join(stage, "lib"))),
                   "requests": len(set(keys)),
                   "torch_op_cases": len(torch_op) if torch_op is not None else None},
                  f, indent=1)
    out = os.path.join(kit, "exec.tar.xz")
    # (preset 1: a third of preset 6's time for 13 MiB instead of 9, well inside the
    # transfer budget)
    with tarfile.open(out, "w:xz", preset=1) as tar:
        tar.add(stage, arcname="exec")
    shutil.rmtree(stage, ignore_errors=True)
    return out
