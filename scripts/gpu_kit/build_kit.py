#!/usr/bin/env python3
"""Kit step 0: builds what must be built on the GPU machine: every packed router's
launcher (NAME_launch.cpp, the PTX embedded) into libNAME_launch.so against the CUDA
toolkit's cudart, in parallel. Needs a C++ compiler ($CXX, else g++ / c++) and
$CUDA_HOME (default /usr/local/cuda).

    build_kit.py --kit KIT
"""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cases import launcher_path, load_kit  # noqa: E402
from cudart import cuda_home  # noqa: E402


def compiler():
    for name in (os.environ.get("CXX"), "g++", "c++", "g++-12", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise SystemExit("error: no C++ compiler (set CXX)")


def cuda_lib_dir():
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        if os.path.exists(os.path.join(cuda_home(), sub, "libcudart.so")):
            return os.path.join(cuda_home(), sub)
    raise SystemExit(f"error: no libcudart.so under {cuda_home()} (set CUDA_HOME)")


def build(cxx, kit, router, libdir):
    src = os.path.join(kit, router["dir"])
    out = launcher_path(kit, router)
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", f"-I{src}",
           f"-I{os.path.join(cuda_home(), 'include')}",
           os.path.join(src, f"{router['entry']}_launch.cpp"), f"-L{libdir}", "-lcudart",
           f"-Wl,-rpath,{libdir}", "-o", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return router["variant"], done.returncode, done.stderr[-2000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    args = ap.parse_args()
    kit = load_kit(args.kit)
    cxx, libdir = compiler(), cuda_lib_dir()
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for variant, rc, err in pool.map(lambda r: build(cxx, args.kit, r, libdir),
                                         kit["routers"]):
            print(f"{'built' if rc == 0 else 'FAILED'} {variant}" + (f":\n{err}" if rc else ""),
                  flush=True)
            failed += rc != 0
    print(f"{len(kit['routers']) - failed} launchers built with {cxx}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
