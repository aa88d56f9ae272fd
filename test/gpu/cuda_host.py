"""Runs the generated CUDA C++ of a router (NAME.cu, compiled as plain C++ with
-DSWITCHYARD_CUDA_ON_HOST) on CPU threads, launched as NAME_launch.cpp would launch it:
each kernel of the batch's size class with its <<<grid, block>>>, the PTX entry's
parameters (expanded memref descriptors, the knobs, the workspace). Shared by
test_cuda_on_host.py (outputs = the host target's) and test_kernel_budgets.py (what
each launch's threads did: barriers, shuffles, memory operations).
"""
import ctypes
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# What NAME.cu includes: switchyard/Cuda/KernelPrelude.h (and CudaOnHost.h on the CPU).
SWITCHYARD_INCLUDE = os.path.join(ROOT, "runtime", "include")
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from toolchain import cxx  # noqa: E402
from gpu_cases import abi_buffers  # noqa: E402
from policy_shapes import native_shape, shape_flags  # noqa: E402

EMULATED_SMS = 3  # the grid size class's SM count in the emulation
# The CTAs the emulated GPU holds at once, for the cooperative class: 8 (the large pair
# beyond), so that the tests' batch sizes run both.
EMULATED_RESIDENT = 8
WORKSPACE_GUARD = 1 << 16  # bytes after the workspace that must stay untouched
# CudaOnHost.h's SyCounter, in order: per launch, each one's maximum over the threads
# (CTA barriers: over the CTAs).
COUNTERS = ("cta_barriers", "warp_barriers", "shuffles", "global_ops", "shared_ops",
            "fences", "atomics", "grid_barriers")


def descriptor(arr):
    """The expanded memref descriptor of a C-order array: ptr, ptr, 0, sizes, strides."""
    ptr = ctypes.c_void_p(arr.ctypes.data)
    sizes = list(arr.shape) or [1]
    strides = [s // arr.itemsize for s in arr.strides] or [1]
    return [ptr, ptr, ctypes.c_int64(0)] + [ctypes.c_int64(s) for s in sizes] + \
           [ctypes.c_int64(s) for s in strides]


def size_class_for(meta, tokens, resident=EMULATED_RESIDENT):
    """The size class NAME_launch picks for a batch of `tokens` tokens on a GPU that
    holds `resident` CTAs at once: the last class that takes T; a cooperative class
    only when its grid is resident, else the class before it (the pair)."""
    taking = [c for c in meta["size_classes"]
              if c.get("min_tokens", 0) <= tokens <= (c.get("max_tokens") or tokens)]
    if not taking:
        raise SystemExit(f"no size class of {meta['router']} takes T={tokens}")
    chosen = taking[-1]
    if chosen["name"] == "cooperative" and len(taking) > 1:
        kernel = next(k for k in meta["kernels"] if k["name"] == chosen["launches"][0])
        if -(-tokens // kernel["tokens_per_cta"]) > resident:
            chosen = taking[-2]
    return chosen


def launch_block(kernel):
    """The threads per block of a kernel's launch (NAME.json kernels[].block: x, 1, 1)."""
    block = kernel["block"]
    if len(block) != 3 or block[1:] != [1, 1] or block[0] <= 0 or block[0] % 32:
        raise SystemExit(f"{kernel['name']}: unexpected block {block}")
    return block[0]


def launcher_blocks(path, meta):
    """Kernel name -> the set of block sizes NAME_launch.cpp launches it with: the rows
    {"NAME", BLOCK} of its kernel table (kKernels), which the fixed launcher
    (switchyard/Cuda/Launcher.h) passes to cudaLaunchKernel and the occupancy query."""
    src = open(path).read()
    table = re.search(r"kKernels\[\d+\] = \{(.*?)\n\};", src, re.S)
    blocks = {}
    for name, block in re.findall(r'\{"([^"]+)", (\d+)\}', table.group(1) if table else ""):
        blocks.setdefault(name, set()).add(int(block))
    if sorted(blocks) != sorted(k["name"] for k in meta["kernels"]):
        raise SystemExit(f"{path}: launches {sorted(blocks)}, NAME.json lists "
                         f"{[k['name'] for k in meta['kernels']]}")
    return blocks




@functools.lru_cache(maxsize=None)
def _host_headers_digest():
    """A digest of the headers every NAME.cu includes on the host (switchyard/Cuda), read
    once per process."""
    digest = hashlib.sha256()
    folder = os.path.join(SWITCHYARD_INCLUDE, "switchyard", "Cuda")
    for header in sorted(os.listdir(folder)):
        with open(os.path.join(folder, header), "rb") as f:
            digest.update(header.encode() + b"\0" + f.read())
    return digest.hexdigest()


def build_host_library(build, command, source, lib_path):
    """Runs `command` + [source, -o, lib_path], once per distinct (command, source text,
    headers): the library is kept in BUILD/cuda-on-host-cache under that digest, which
    the tests that compile the same kernels (test_cuda_on_host.py and
    test_kernel_budgets.py build each shipped router the same way) and later runs
    share. A lock per key makes a second asker wait for the first compile; the write
    is atomic (a rename), so no test sees half a library."""
    with open(source, "rb") as f:
        text = f.read()
    key = hashlib.sha256("\0".join(command).encode() + b"\0" + text + b"\0" +
                         _host_headers_digest().encode()).hexdigest()
    cache = os.path.join(build, "cuda-on-host-cache")
    cached = os.path.join(cache, f"{key}.so")
    os.makedirs(cache, exist_ok=True)
    # One compile per key: a test that asks while another compiles it waits for it.
    with open(os.path.join(cache, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(cached):
            fd, partial = tempfile.mkstemp(dir=cache, suffix=".so.partial")
            os.close(fd)
            try:
                subprocess.run(command + [source, "-o", partial], check=True)
                os.replace(partial, cached)
            finally:
                if os.path.exists(partial):
                    os.remove(partial)
    shutil.copyfile(cached, lib_path)   # each caller loads its own copy (dlopen by path)


def compile_on_host(build, out, file, name, flags=(), sanitize=None, edit=None):
    """moe-compile --target=cuda of policies/FILE.mlir's router NAME at its native shape
    into OUT (`flags`: more moe-compile flags), and its NAME.cu built as a shared
    library for the CPU (`sanitize`: a -fsanitize= value, e.g. "thread"; `edit`: a
    function of the source text, to break it on purpose); returns (the library,
    NAME.json). moe-compile's output is kept in OUT/moe-compile.log; PTX is not
    assembled into a cubin unless `flags` ask for --report (ptxas -v)."""
    policy = os.path.join(ROOT, "policies", f"{file}.mlir")
    cubin = [] if "--report" in flags else ["--cubin=false"]
    compiled = subprocess.run([os.path.join(build, "bin", "moe-compile"), policy,
                               "--target=cuda", "--entry", name, "-o", out, *flags, *cubin]
                              + shape_flags(**native_shape(file)),
                              check=True, capture_output=True, text=True)
    with open(os.path.join(out, "moe-compile.log"), "w") as f:
        f.write(compiled.stdout)
    lib_path = os.path.join(out, f"lib{name}_cu.so")
    if edit:
        source = os.path.join(out, f"{name}.cu")
        with open(source) as f:
            text = edit(f.read())
        with open(source, "w") as f:
            f.write(text)
    # -Wall -Werror: the emitter's source is warning-free (no unused values). -O0 where
    # no sanitizer runs: the kernels run in well under a second either way, and the
    # compile takes half as long (ThreadSanitizer's runs want -O1).
    command = [cxx(build), "-x", "c++", "-std=c++20", "-O1" if sanitize else "-O0",
               "-pthread", "-Wall", "-Werror",
               "-DSWITCHYARD_CUDA_ON_HOST", f"-I{SWITCHYARD_INCLUDE}", "-shared", "-fPIC"]
    # (the emulated __threadfence is a fence ThreadSanitizer does not model: the blocks
    # of a grid run one after another, joined)
    # (-g1: the line tables a sanitizer's report needs, a third faster than -g)
    command += [f"-fsanitize={sanitize}", "-g1", "-Wno-tsan"] if sanitize else []
    # ThreadSanitizer sees races between real threads only (CudaOnHost.h: fibers
    # otherwise)
    command += ["-DSWITCHYARD_HOST_THREADS"] if sanitize == "thread" else []
    build_host_library(build, command, os.path.join(out, f"{name}.cu"), lib_path)
    return ctypes.CDLL(lib_path), json.load(open(os.path.join(out, f"{name}.json")))


def launch_on_host(lib, meta, router, info, inputs, tokens, logits_bits=None,
                   emulated_sms=EMULATED_SMS, resident=EMULATED_RESIDENT, knobs=None,
                   knob_group=None):
    """Runs the kernels of the size class that takes `tokens` on `inputs` (logits given
    as `logits_bits`, 16-bit patterns, when the router reads them narrow; `knobs`, a
    uint8 array holding the knob struct the kernels read, None for the defaults; with
    `knob_group`, each token's group for an entry built with --knob-groups, whose knob
    memory then holds one struct per group), as
    NAME_launch would on a GPU of `emulated_sms` one-block SMs (the grid class) that
    holds `resident` CTAs at once (the cooperative class when its CTAs fit, the pair
    otherwise); returns (outputs, size class, grid, [each
    launch's counters])."""
    kernels = {k["name"]: k for k in meta["kernels"]}
    _, keep, outputs = abi_buffers(router, inputs)
    if logits_bits is not None:  # logits is the first buffer of every standard router
        assert info["arguments"][0]["name"] == "logits"
        keep[0] = np.ascontiguousarray(logits_bits)
    call, scalars = [ctypes.c_int64(tokens)], []
    k = 0
    for port in info["arguments"]:
        if port["kind"] == "scalar":   # its value in (emulated) device memory
            scalars.append(np.array([int(inputs[port["name"]])], dtype=np.int32))
            call += descriptor(scalars[-1])
            continue
        for _ in range(2 if port["kind"] == "placement" else 1):
            call += descriptor(keep[k])
            k += 1
    if knob_group is not None:  # a grouped entry: after the inputs (kept alive below)
        groups = np.ascontiguousarray(knob_group, dtype=np.int32)
        call += descriptor(groups)
    for arr in outputs.values():
        call += descriptor(arr)
    # After the outputs: the knob struct in (emulated) device memory, which the kernels
    # read when they run; an empty buffer is the launcher's NULL, the defaults.
    if router.knobs:
        call += descriptor(np.zeros(0, np.uint8) if knobs is None else knobs)
    size_class = size_class_for(meta, tokens, resident)
    launches = [kernels[k] for k in size_class["launches"]]
    needed = max(k["workspace_bytes"]["per_token"] * tokens + k["workspace_bytes"]["fixed"]
                 for k in launches)
    # Garbage, not zeros: code that reads what it has not written (or what another
    # CTA has not written yet) shows. A guard region after the bytes the launch
    # metadata asks for must stay untouched (a workspace formula that is too small).
    workspace = np.full(needed + WORKSPACE_GUARD, 0x7f, dtype=np.int8)
    call += descriptor(workspace[:needed])
    per_cta = launches[0].get("tokens_per_cta")
    if size_class["name"] == "grid":
        # The launcher's min(ceil(T / warps), SMs x blocks per SM) on a GPU of
        # `emulated_sms` one-block SMs (3: several tokens per warp from T = 25).
        warps = launch_block(launches[0]) // 32
        assert launches[0]["warps_per_block"] == warps, launches[0]
        grid = min(-(-tokens // warps), emulated_sms)
    else:
        grid = -(-tokens // per_cta) if per_cta else 1
    counted = (ctypes.c_int64 * len(COUNTERS))()
    lib.switchyard_host_counters(counted, len(COUNTERS))  # cleared
    counters = []
    for k in launches:  # <<<grid, block>>> as NAME_launch launches it
        lib.switchyard_host_launch(ctypes.c_uint(grid), ctypes.c_uint(launch_block(k)))
        getattr(lib, k["name"])(*call)
        lib.switchyard_host_counters(counted, len(COUNTERS))
        counters.append(dict(zip(COUNTERS, counted)))
    if (workspace[needed:] != 0x7f).any():
        raise SystemExit(f"{meta['router']} T={tokens}: the kernels wrote past the "
                         f"{needed} workspace bytes NAME.json asks for")
    return outputs, size_class, grid, counters
