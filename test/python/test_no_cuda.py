#!/usr/bin/env python3
"""Imports without CUDA: `import switchyard`, host routing and the host executor work on a
machine with no CUDA library, and asking for the GPU there is a clear error, not a crash.

The CUDA parts (the --device cuda layer: cudart + cuBLAS; the NCCL communicator: cudart +
NCCL) are plug-ins, libSwitchyardExecutorCuda.so / libSwitchyardCommNccl.so, loaded on
first use. This test checks that:

  1. neither the extension (_switchyard*.so) nor libSwitchyard{Runtime,Executor,Comm}.so
     needs libcudart / libcublas / libnccl / libcuda, directly (readelf -d: DT_NEEDED) or
     through another library (ldd);
  2. in a child process where the CUDA libraries cannot be loaded at all -- an LD_AUDIT
     library (built here) refuses every libcudart*, libcublas*, libnccl*, libcuda.so*,
     whatever the path (RUNPATH, LD_LIBRARY_PATH, torch's site-packages/nvidia); CUDA and
     nvidia directories dropped from LD_LIBRARY_PATH; torch never imported -- the package
     imports, compiles topk_softmax and routes numpy logits on the host (= reference), the
     Executor runs a small checkpoint on the host (= numpy reference), and
     Executor(..., device="cuda"), `moe-exec --device cuda` and loading a policy's GPU
     launcher (compile(target="cuda")) fail with an error that names the missing library
     and how to get it (or says the build has no CUDA);
  3. no CUDA library got mapped into that child.

Both the build tree (build/python, build/runtime) and, where scripts/build.sh installed it,
the pip-installed package (site-packages/switchyard with its lib/) are checked.

Run: python test/python/test_no_cuda.py --build build [--cc gcc]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA_LIB = re.compile(r"lib(cudart|cublas|cublasLt|nccl|cuda)\.so")

# glibc's rtld-audit interface: la_objsearch() returning NULL for a name makes the
# dynamic loader skip it, so the CUDA libraries are "not installed" for this process and
# its children, wherever they are on disk.
AUDIT_SOURCE = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stddef.h>
#include <string.h>

unsigned int la_version(unsigned int version) { return version ? LAV_CURRENT : 0; }

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  static const char *hidden[] = {"libcudart", "libcublas", "libnccl", "libcuda.so", 0};
  for (int i = 0; hidden[i]; ++i)
    if (strncmp(base, hidden[i], strlen(hidden[i])) == 0)
      return NULL;
  return (char *)name;
}
"""

CHILD = r"""
import json, os, subprocess, sys
import numpy as np

bindir, ckpt, work = sys.argv[1], sys.argv[2], sys.argv[3]
results = {}

def record(label, ok, detail=""):
    results[label] = [bool(ok), str(detail)[-1500:]]

import ctypes
try:
    ctypes.CDLL("libcudart.so." + (os.environ.get("SY_CUDA_MAJOR") or "13"))
    record("the CUDA runtime is hidden in this process", False, "libcudart loaded")
except OSError as error:
    record("the CUDA runtime is hidden in this process", True, error)

import switchyard as sy
record("import switchyard", True)
record("the copy under test", os.path.realpath(sy.__file__).startswith(
    os.path.realpath(os.environ["SY_PACKAGE"])), sy.__file__)
record("torch is not imported", "torch" not in sys.modules)

rng = np.random.default_rng(0)
x = rng.standard_normal((11, 16)).astype(np.float32)
router = sy.compile("topk_softmax", experts=16, top_k=2)
out = router(logits=x)
e = np.exp(x - x.max(-1, keepdims=True))
p = e / e.sum(-1, keepdims=True)
ids = np.argsort(-p, axis=-1, kind="stable")[:, :2]
w = np.take_along_axis(p, ids, -1)
w = w / w.sum(-1, keepdims=True)
record("topk_softmax on the host = reference",
       np.array_equal(out["topk_ids"], ids) and np.allclose(out["topk_weights"], w, atol=1e-5),
       (out["topk_ids"], ids))

sys.path.insert(0, os.path.join(os.environ["SY_ROOT"], "test", "exec"))
import moe_reference as ref
ex = sy.Executor(ckpt)
h = rng.standard_normal((6, ex.info["hidden_size"])).astype(np.float32)
result = ex.run(h)
config, tensors = ref.load_checkpoint(ckpt)
expect = ref.moe_stack(config, tensors, h, routing=result.routing)
err = float(np.abs(result.output - expect).max())
record("Executor on the host = numpy reference", err <= 1e-4, f"max error {err:.2e}")
np.save(os.path.join(work, "h.npy"), h)

def gpu_error(text):
    # Either the plug-in's dependency is named with how to get it, or the build has none.
    return ("no CUDA support" in text or
            ("libcudart" in text and "LD_LIBRARY_PATH" in text and "cannot load" in text))

try:
    sy.Executor(ckpt, device="cuda")
    record("Executor(device='cuda'): a clear error", False, "no error")
except sy.SwitchyardError as error:
    record("Executor(device='cuda'): a clear error", gpu_error(str(error)), error)
    print("Executor(device='cuda'):", error)
except Exception as error:
    record("Executor(device='cuda'): a clear error", False, repr(error))

if os.environ.get("SY_CUDA_MAJOR"):  # built with the toolkit: a GPU launcher compiles
    try:
        sy.compile("topk_softmax", experts=16, top_k=2, target="cuda")
        record("a GPU launcher without cudart: a clear error", False, "no error")
    except sy.SwitchyardError as error:
        text = str(error)
        record("a GPU launcher without cudart: a clear error",
               "libcudart" in text and "LD_LIBRARY_PATH" in text, text)
        print("compile(target='cuda'):", text)

run = subprocess.run([os.path.join(bindir, "moe-exec"), ckpt, "--input",
                      os.path.join(work, "h.npy"), "--out", os.path.join(work, "out"),
                      "--device", "cuda"], capture_output=True, text=True)
record("moe-exec --device cuda: a clear error, exit 1",
       run.returncode == 1 and gpu_error(run.stdout + run.stderr),
       f"exit {run.returncode}: {run.stdout + run.stderr}")
print("moe-exec --device cuda:", (run.stdout + run.stderr).strip())

run = subprocess.run([os.path.join(bindir, "moe-exec"), ckpt, "--input",
                      os.path.join(work, "h.npy"), "--out", os.path.join(work, "host")],
                     capture_output=True, text=True)
record("moe-exec on the host runs", run.returncode == 0, run.stdout + run.stderr)

with open("/proc/self/maps") as f:
    mapped = sorted({line.split()[-1] for line in f
                     if any(n in line for n in ("libcudart", "libcublas", "libnccl",
                                                "libcuda.so"))})
record("no CUDA library is mapped", not mapped, mapped)
print("RESULTS " + json.dumps(results))
"""


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return result.returncode, result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--cc", default="")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    failures = []

    def check(label, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + label + ("" if ok else " " + str(detail)))
        if not ok:
            failures.append(label)

    package = os.path.join(build, "python", "switchyard")
    if not glob.glob(os.path.join(package, "_switchyard*.so")):
        print(f"skipped: {package} has no _switchyard extension (nanobind missing?)")
        return 77
    # The build tree, and the pip-installed copy where there is one (scripts/build.sh).
    found = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "s = u.find_spec('switchyard'); print(s.origin if s else '')"],
                           capture_output=True, text=True, cwd="/",
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    trees = [("build tree", package, os.path.join(build, "runtime"), os.path.join(build, "bin"),
              os.path.join(build, "python"))]
    origin = found.stdout.strip()
    if origin and os.path.isdir(os.path.join(os.path.dirname(origin), "lib")):
        site = os.path.dirname(origin)
        trees.append(("installed", site, os.path.join(site, "lib"), os.path.join(site, "bin"),
                      None))
    else:
        print("note: switchyard is not pip-installed for this Python; the build tree only")

    work = tempfile.mkdtemp(prefix="sy-no-cuda-")
    cc = args.cc or shutil.which("cc") or shutil.which("gcc") or shutil.which("gcc-12")
    audit = os.path.join(work, "hide_cuda.so")
    with open(os.path.join(work, "hide_cuda.c"), "w") as f:
        f.write(AUDIT_SOURCE)
    rc, out = run([cc or "cc", "-shared", "-fPIC", "-O1", "-o", audit,
                   os.path.join(work, "hide_cuda.c")])
    check("the LD_AUDIT library that hides CUDA builds", rc == 0, out[-1000:])
    if rc != 0:
        print(f"{len(failures)} failed")
        return 1
    ckpt = os.path.join(work, "ckpt")
    subprocess.run([sys.executable, os.path.join(ROOT, "test", "support", "make_checkpoint.py"),
                    "--preset", "mixtral-tiny", "--out", ckpt, "--seed", "4"], check=True,
                   stdout=subprocess.DEVNULL)

    def no_cuda_dirs(value):
        return os.pathsep.join(p for p in value.split(os.pathsep)
                               if p and "cuda" not in p.lower() and "nvidia" not in p.lower())

    for tree, package, libdir, bindir, pythonpath in trees:
        # 1. What the libraries ask the dynamic loader for.
        extension = sorted(glob.glob(os.path.join(package, "_switchyard*.so")))
        libs = [os.path.join(libdir, f"libSwitchyard{n}.so")
                for n in ("Runtime", "Executor", "Comm")]
        for path in extension + libs:
            name = f"{tree}: {os.path.basename(path)}"
            rc, out = run(["readelf", "-d", path])
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
            check(f"{name}: readelf -d", rc == 0 and needed, out[-500:])
            cuda = [n for n in needed if CUDA_LIB.search(n)]
            check(f"{name}: no DT_NEEDED on a CUDA library", not cuda, cuda)
            rc, out = run(["ldd", path])
            cuda = [line.strip() for line in out.splitlines() if CUDA_LIB.search(line)]
            check(f"{name}: ldd: no CUDA library pulled in", rc == 0 and not cuda,
                  cuda or out[-500:])
        cuda_major = ""
        if os.path.exists(os.path.join(build, "runtime", "libSwitchyardExecutorCuda.so")):
            # Built with the toolkit: the plug-ins ship beside the libraries.
            for plugin in ("libSwitchyardExecutorCuda.so", "libSwitchyardCommNccl.so"):
                check(f"{tree}: {plugin} beside libSwitchyardExecutor.so",
                      os.path.exists(os.path.join(libdir, plugin)))
            rc, out = run(["readelf", "-d", os.path.join(libdir, "libSwitchyardExecutorCuda.so")])
            m = re.search(r"Shared library: \[libcudart\.so\.(\d+)\]", out)
            check(f"{tree}: the CUDA layer plug-in links cudart", bool(m), out[-500:])
            cuda_major = m.group(1) if m else ""

        # 2. A child process where the CUDA libraries cannot be loaded.
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "LD_AUDIT", "CUDA_HOME", "CUDA_PATH", "PYTHONPATH",
                            "SWITCHYARD_MOE_COMPILE", "SWITCHYARD_POLICY_DIR")}
        env["LD_LIBRARY_PATH"] = no_cuda_dirs(env.get("LD_LIBRARY_PATH", ""))
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        env["LD_AUDIT"] = audit
        env["SWITCHYARD_CACHE_DIR"] = os.path.join(work, "cache-" + tree.replace(" ", "-"))
        env["SY_ROOT"] = ROOT
        env["SY_PACKAGE"] = package
        env["SY_CUDA_MAJOR"] = cuda_major
        result = subprocess.run([sys.executable, "-c", CHILD, bindir, ckpt, work],
                                capture_output=True, text=True, env=env, cwd=work)
        text = result.stdout + result.stderr
        print("\n".join("  | " + line for line in text.strip().splitlines()[-25:]
                        if not line.startswith("RESULTS ")))
        check(f"{tree}: the child (CUDA hidden) exits 0, no crash", result.returncode == 0,
              f"exit {result.returncode}")
        found = [line for line in result.stdout.splitlines() if line.startswith("RESULTS ")]
        if found:
            for label, (ok, detail) in json.loads(found[-1][len("RESULTS "):]).items():
                check(f"{tree} without CUDA: {label}", ok, detail)
        else:
            check(f"{tree}: the child reports its checks", False, text[-3000:])

    shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
