#!/usr/bin/env python3
"""Kit step 0: builds what must be built on the GPU machine: the fixed launcher
(KIT/launcher/Launcher.cpp) once into an object, then every packed router's launcher
(NAME_launch.cpp: its kernel table with the PTX embedded, and its argument packing)
linked with it into libNAME_launch.so against the CUDA toolkit's cudart, in parallel.
Needs a C++ compiler ($CXX, else g++ / c++) and $CUDA_HOME (default /usr/local/cuda).

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


def launcher_include(kit, manifest):
    """The directory holding switchyard/Cuda/Launcher.h (and the kernel prelude)."""
    return os.path.join(kit, manifest["launcher"]["include"])


def build_fixed_launcher(cxx, kit, manifest):
    """Compiles the fixed launcher once (position independent, for every router's
    library); returns the object's path, or exits naming the compiler's complaint."""
    obj = os.path.join(kit, "launcher", "Launcher.o")
    cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-c", f"-I{launcher_include(kit, manifest)}",
           f"-I{os.path.join(cuda_home(), 'include')}",
           os.path.join(kit, manifest["launcher"]["source"]), "-o", obj]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: the fixed launcher does not compile:\n{done.stderr[-2000:]}")
    return obj


def build(cxx, kit, router, libdir, include, fixed):
    src = os.path.join(kit, router["dir"])
    out = launcher_path(kit, router)
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", f"-I{src}", f"-I{include}",
           f"-I{os.path.join(cuda_home(), 'include')}",
           os.path.join(src, f"{router['entry']}_launch.cpp"), fixed, f"-L{libdir}",
           "-lcudart", f"-Wl,-rpath,{libdir}", "-o", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return router["variant"], done.returncode, done.stderr[-2000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    args = ap.parse_args()
    kit = load_kit(args.kit)
    cxx, libdir = compiler(), cuda_lib_dir()
    if "launcher" not in kit:
        raise SystemExit(f"error: {args.kit}/kit.json has no fixed launcher (packed before "
                         "it was shipped): pack the kit again")
    include = launcher_include(args.kit, kit)
    fixed = build_fixed_launcher(cxx, args.kit, kit)
    print(f"built the fixed launcher {os.path.relpath(fixed, args.kit)}", flush=True)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for variant, rc, err in pool.map(
                lambda r: build(cxx, args.kit, r, libdir, include, fixed), kit["routers"]):
            print(f"{'built' if rc == 0 else 'FAILED'} {variant}" + (f":\n{err}" if rc else ""),
                  flush=True)
            failed += rc != 0
    print(f"{len(kit['routers']) - failed} launchers built with {cxx}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
