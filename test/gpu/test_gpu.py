#!/usr/bin/python3
"""GPU execution tests (ctest label `gpu`): every shipped policy compiled with
moe-compile --target=all, its generated launcher built against cudart, run on the GPU
and compared with the host target on the same inputs (ids, sets, counts and block
layouts exactly, weights within 1e-5).

Without a usable GPU it prints `skipped: no GPU (...)` and exits 77, which ctest
reports as skipped.

    test_gpu.py --build BUILD_DIR
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from toolchain import cxx  # noqa: E402
sys.path.insert(0, HERE)
from gpu_cases import (CaseTally, abi_buffers, differing_outputs, entry_info,  # noqa: E402
                       example_inputs)
from policy_shapes import (GPU_ROUTERS as POLICIES, import_switchyard, native_shape,  # noqa: E402
                           shape_flags)
# Where the CUDA toolkit's headers and cudart are (CMake's FindCUDAToolkit passes them).
CUDA_INCLUDE = os.environ.get("SWITCHYARD_CUDA_INCLUDE") or "/usr/local/cuda/include"
CUDA_LIB = os.environ.get("SWITCHYARD_CUDA_LIB") or "/usr/local/cuda/lib64"
SKIP = 77


def build_launcher(name, workdir, build):
    """The generated table and packing (NAME_launch.cpp) linked with the fixed launcher
    (switchyard/Cuda/Launcher.h, the build's libSwitchyardLauncher.a) and cudart."""
    lib = os.path.join(workdir, f"lib{name}_launch.so")
    subprocess.run([cxx(build), "-std=c++17", "-O2", "-shared", "-fPIC", f"-I{workdir}",
                    f"-I{CUDA_INCLUDE}", f"-I{os.path.join(ROOT, 'runtime', 'include')}",
                    os.path.join(workdir, f"{name}_launch.cpp"),
                    os.path.join(build, "lib", "libSwitchyardLauncher.a"),
                    f"-L{CUDA_LIB}", "-lcudart", f"-Wl,-rpath,{CUDA_LIB}", "-o", lib],
                   check=True)
    return ctypes.CDLL(lib)


class Cuda:
    def __init__(self):
        self.rt = ctypes.CDLL(os.path.join(CUDA_LIB, "libcudart.so"))

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed with cudaError {status}")

    def to_device(self, array):
        ptr = ctypes.c_void_p()
        self.check(self.rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(array.nbytes, 1))),
                   "cudaMalloc")
        self.check(self.rt.cudaMemcpy(ptr, array.ctypes.data_as(ctypes.c_void_p),
                                      ctypes.c_size_t(array.nbytes), 1), "cudaMemcpy H2D")
        return ptr

    def to_host(self, ptr, array):
        self.check(self.rt.cudaMemcpy(array.ctypes.data_as(ctypes.c_void_p), ptr,
                                      ctypes.c_size_t(array.nbytes), 2), "cudaMemcpy D2H")


def run_on_gpu(cuda, launcher, router, info, inputs):
    """Binds like the host router (same ABI order), on device buffers."""
    tokens, keep, outputs = abi_buffers(router, inputs)
    tokens = ctypes.c_int64(tokens)
    device = [cuda.to_device(arr) for arr in keep]
    out_ptrs = [cuda.to_device(arr) for arr in outputs.values()]
    args, k = [tokens], 0
    for port in info["arguments"]:
        if port["kind"] == "scalar":   # a device pointer to the value
            value = cuda.to_device(np.array([int(inputs[port["name"]])], dtype=np.int32))
            device.append(value)
            args.append(value)
            continue
        count = 2 if port["kind"] == "placement" else 1
        args += device[k:k + count]
        k += count
    args += out_ptrs
    fn = getattr(launcher, f"{router.entry}_workspace_bytes")
    fn.restype = ctypes.c_int64
    workspace = cuda.to_device(np.zeros(fn(tokens), dtype=np.uint8))
    launch = getattr(launcher, f"{router.entry}_launch")
    launch.restype = ctypes.c_int32
    if router.knobs:  # const struct NAME_knobs *: NULL, the defaults
        args.append(ctypes.c_void_p(0))
    cuda.check(launch(*args, workspace, ctypes.c_void_p(0)), "launch")
    cuda.check(cuda.rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
    for ptr, (key, arr) in zip(out_ptrs, outputs.items()):
        cuda.to_host(ptr, arr)
    for ptr in device + out_ptrs + [workspace]:
        cuda.rt.cudaFree(ptr)
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)

    workdir = tempfile.mkdtemp(prefix="switchyard-gpu-")
    compile_tool = os.path.join(args.build, "bin", "moe-compile")

    def launcher(file, name):
        out = os.path.join(workdir, name)
        subprocess.run([compile_tool, os.path.join(ROOT, "policies", f"{file}.mlir"),
                        "--target=all", "--entry", name, "-o", out]
                       + shape_flags(**native_shape(file)), check=True, capture_output=True)
        return build_launcher(name, out, args.build)

    # The first launcher asks for a GPU; without one the others are not built (every
    # router's launcher builds against cudart in gpu/kit's dry run).
    first_file, first = POLICIES[0]
    launchers = {first: launcher(first_file, first)}
    message = ctypes.create_string_buffer(256)
    if getattr(launchers[first], f"{first}_gpu_available")(message, 256) == 0:
        print(f"skipped: no GPU ({message.value.decode()}); {first}'s launcher was built "
              "against cudart")
        return SKIP
    for file, name in POLICIES[1:]:
        launchers[name] = launcher(file, name)

    cuda, rng = Cuda(), np.random.default_rng(0)
    tally = CaseTally()
    for file, name in POLICIES:
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        router = switchyard.compile(policy, entry=name, **native_shape(file))
        info = entry_info(switchyard, policy, name, **native_shape(file))
        # Both size classes: one launch up to 1024 tokens, the two-kernel pair beyond.
        for tokens in (1, 16, 64, 1024, 1025, 4096):
            inputs = example_inputs(info, tokens, rng)
            host = router(**inputs)
            gpu = run_on_gpu(cuda, launchers[name], router, info, inputs)
            tally.record(f"{name} T={tokens}", differing_outputs(host, gpu))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
