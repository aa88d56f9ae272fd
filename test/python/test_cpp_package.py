#!/usr/bin/env python3
"""The C++ package: `cmake --install` of this build (component switchyard) gives a prefix
with the tools, the runtime libraries, the headers, the shipped policies and
SwitchyardConfig.cmake; examples/engine builds against it with find_package(Switchyard)
and routes a batch on the host exactly as the softmax top-k reference does. Without a
GPU, --device cuda is a clear error, never a crash.

Run: python test/python/test_cpp_package.py --build build
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return result.returncode, result.stdout + result.stderr


def build_compiler(build):
    """The C++ compiler this build was configured with (its CMakeCache.txt)."""
    with open(os.path.join(build, "CMakeCache.txt")) as cache:
        for line in cache:
            if line.startswith("CMAKE_CXX_COMPILER:"):
                return line.split("=", 1)[1].strip()
    return "c++"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="sy-cpp-package-")
    prefix, engine_build = os.path.join(work, "prefix"), os.path.join(work, "engine")
    failures = []

    def check(label, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + label + ("" if ok else " " + detail))
        if not ok:
            failures.append(label)

    rc, out = run(["cmake", "--install", build, "--prefix", prefix, "--component", "switchyard"])
    check("cmake --install", rc == 0, out[-2000:])
    for path in ("bin/moe-compile", "bin/moe-exec", "lib/libSwitchyardRuntime.so",
                 "include/switchyard/Runtime/HostPolicy.h",
                 "lib/cmake/Switchyard/SwitchyardConfig.cmake",
                 "share/switchyard/policies/xshare.mlir",
                 "share/switchyard/models/deepseek-v3.json"):
        check(f"installed {path}", os.path.exists(os.path.join(prefix, path)))
    # The CUDA plug-ins (built with the toolkit) sit beside the libraries that load them.
    for plugin in ("libSwitchyardExecutorCuda.so", "libSwitchyardCommNccl.so"):
        if os.path.exists(os.path.join(build, "runtime", plugin)):
            installed = os.path.join(prefix, "lib", plugin)
            rc, out = run(["readelf", "-d", installed]) if os.path.exists(installed) else (1, "")
            check(f"installed lib/{plugin} (RUNPATH $ORIGIN)", rc == 0 and "$ORIGIN" in out,
                  out[-500:])
    rc, out = run([os.path.join(prefix, "bin", "moe-opt"), os.path.join(prefix, "share",
                   "switchyard", "policies", "xshare.mlir"), "--experts", "8", "--top-k", "2"])
    check("the installed tools run (outside the build tree)", rc == 0, out[-1000:])

    rc, out = run(["cmake", "-S", os.path.join(ROOT, "examples", "engine"), "-B", engine_build,
                   "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}",
                   f"-DCMAKE_CXX_COMPILER={build_compiler(build)}"])
    check("examples/engine configures with find_package(Switchyard)", rc == 0, out[-3000:])
    rc, out = run(["cmake", "--build", engine_build])
    check("examples/engine builds against Switchyard::runtime", rc == 0, out[-3000:])
    engine = os.path.join(engine_build, "engine")
    if not os.path.exists(engine):
        print(f"{len(failures)} failed")
        return 1

    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 32)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    env = dict(os.environ, SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
    env.pop("SWITCHYARD_MOE_COMPILE", None)
    rc, out = run([engine, "--logits", os.path.join(work, "x.npy"), "--experts", "32",
                   "--top-k", "4", "--out-ids", os.path.join(work, "ids.npy")], env=env)
    check("the engine compiles (installed moe-compile) and routes", rc == 0 and "compiled" in out,
          out[-2000:])
    if rc == 0:
        ids = np.load(os.path.join(work, "ids.npy"))
        ref = np.argsort(-x, axis=-1, kind="stable")[:, :4]
        check("the engine's experts = top-k reference", np.array_equal(ids, ref))
    rc, out = run([engine, "--experts", "32", "--top-k", "4"], env=env)
    check("a second run hits the policy cache", rc == 0 and "(cached)" in out, out[-1000:])
    rc, out = run([engine, "--experts", "32", "--top-k", "4", "--set", "budget=3"], env=env)
    check("a knob the policy lacks is an error", rc == 1 and "no run-time knobs" in out,
          out[-1000:])
    rc, out = run([engine, "--help"], env=env)
    check("engine --help prints its usage, exit 0", rc == 0 and "usage: engine" in out,
          out[-1000:])
    rc, out = run([engine, "--expert", "32"], env=env)
    check("an unknown option names it and prints the usage, exit 1",
          rc == 1 and "unknown option '--expert'" in out and "usage: engine" in out,
          out[-1000:])
    rc, out = run([engine, "--device", "cuda", "--experts", "32", "--top-k", "4"], env=env)
    gpu = shutil.which("nvidia-smi") and run(["nvidia-smi", "-L"])[0] == 0
    if gpu:
        check("--device cuda routes on the GPU", rc == 0 and "(GPU)" in out, out[-2000:])
    else:
        check("--device cuda without a GPU: a clear error, exit 1", rc == 1 and
              ("no CUDA device" in out or "without the CUDA toolkit" in out), out[-2000:])
    linked = os.path.join(engine_build, "linked_launcher")
    if os.path.exists(linked):   # built where the CUDA toolkit is: the launcher linked in
        rc, out = run([linked], env=env)
        if gpu:
            check("linked_launcher: the linked GPU launcher = host", rc == 0, out[-2000:])
        else:
            check("linked_launcher without a GPU: the reason, exit 1",
                  rc == 1 and "no usable GPU" in out, out[-2000:])
    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
