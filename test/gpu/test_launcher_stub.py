#!/usr/bin/python3
"""The fixed GPU launcher (runtime/lib/Cuda/Launcher.cpp) with generated kernel tables,
on a CPU: each router's NAME_launch.cpp is linked with libSwitchyardLauncher.a against
a recording stand-in for cudart (Inputs/cudart_stub.cpp), and every launch is checked
against the launch metadata (NAME.json): the kernels of the size class of T in order,
their grid (1; ceil(T / tokens per CTA); min(ceil(T / warps per block), SMs x resident
blocks per SM)) and block, and every parameter slot by its name in the PTX entry
(num_tokens, each buffer's expanded memref descriptor with row-major strides, the
knob struct's device pointer with sizeof(struct NAME_knobs) bytes, or 0 bytes for NULL,
the workspace of NAME_workspace_bytes(T)). Also: the PTX loads once, the
occupancy is asked once per device (by a launcher with a grid or cooperative class,
which runs the pair when the cooperative grid is larger than the GPU holds), a token
count outside [0, 2^31 - 1] returns -1 with nothing launched, NAME_check_knobs passes
the header's defaults and names a bad knob (2 + j), NAME_gpu_available reports a machine
without a GPU, and a GPU older than the PTX's sm_XY gets cudaErrorNoKernelImageForDevice
(209) without a load.

    test_launcher_stub.py --build BUILD_DIR
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from toolchain import cxx  # noqa: E402
from policy_shapes import native_shape, shape_flags  # noqa: E402

CUDA_INCLUDE = os.environ.get("SWITCHYARD_CUDA_INCLUDE") or "/usr/local/cuda/include"
INCLUDE = os.path.join(ROOT, "runtime", "include")
NO_KERNEL_IMAGE = 209  # cudaErrorNoKernelImageForDevice
# (policy file, entry, extra flags): a one-CTA class and a pair of launches beyond, with
# knobs; a router of token loops only (one kernel, the grid filling the GPU).
ROUTERS = [("xshare", "xshare", []),
           ("topk_softmax", "topk_softmax", ["--outputs", "topk_ids,topk_weights"])]


class Failures(list):
    def check(self, what, ok, detail=""):
        if not ok:
            self.append(f"{what}{': ' + str(detail) if detail else ''}")
            print(f"FAIL {what} {detail}")


def build(build_dir, work, file, entry, flags):
    """Compiles the router for the GPU and links its launcher against the stub."""
    out = os.path.join(work, entry)
    subprocess.run([os.path.join(build_dir, "bin", "moe-compile"),
                    os.path.join(ROOT, "policies", f"{file}.mlir"), "--target=ptx",
                    "--entry", entry, "-o", out] + flags + shape_flags(**native_shape(file)),
                   check=True, capture_output=True)
    stub = os.path.join(work, "stub")
    lib = os.path.join(out, f"lib{entry}_launch.so")
    subprocess.run([cxx(build_dir), "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{out}",
                    f"-I{INCLUDE}", f"-I{CUDA_INCLUDE}", os.path.join(out, f"{entry}_launch.cpp"),
                    os.path.join(build_dir, "lib", "libSwitchyardLauncher.a"), f"-L{stub}",
                    "-lcudart", f"-Wl,-rpath,{stub}", "-o", lib], check=True)
    with open(os.path.join(out, f"{entry}.json")) as f:
        return lib, json.load(f)


def expected_launches(meta, tokens, sms, per_sm):
    """[(kernel, grid, block, cooperative)] the metadata says a batch of `tokens` takes:
    the last class whose min_tokens it reaches; a cooperative class only when the GPU
    holds its grid at once (sms x per_sm), else the class before it."""
    kernels = {k["name"]: k for k in meta["kernels"]}
    classes = meta["size_classes"]
    chosen = 0
    for i, c in enumerate(classes[1:], 1):
        if tokens >= c["min_tokens"]:
            chosen = i
    if classes[chosen]["name"] == "cooperative":
        per_cta = kernels[classes[chosen]["launches"][0]]["tokens_per_cta"]
        if -(-tokens // per_cta) > sms * per_sm:
            chosen -= 1
    chosen = classes[chosen]
    out = []
    for name in chosen["launches"]:
        k = kernels[name]
        block = k["block"][0]
        if chosen["name"] == "decode":
            grid = 1
        elif chosen["name"] == "grid":
            grid = max(1, min(-(-tokens // k["warps_per_block"]), sms * per_sm))
        else:
            grid = -(-tokens // k["tokens_per_cta"])
        out.append((name, grid, block, chosen["name"] == "cooperative"))
    return out


def expected_slots(meta, signature_buffers, tokens, workspace, workspace_bytes):
    """Parameter name -> value of every slot of the PTX entry."""
    values, params = {}, meta["kernels"][0]["params"]
    buffers = dict(signature_buffers, workspace=(workspace, [workspace_bytes]))
    for p in params:
        name, _, field = p["name"].rpartition(".")
        if not name:   # a scalar: num_tokens
            values[p["name"]] = tokens
            continue
        pointer, sizes = buffers[name]
        if field in ("allocated", "aligned"):
            values[p["name"]] = pointer
        elif field == "offset":
            values[p["name"]] = 0
        elif field.startswith("size"):
            values[p["name"]] = sizes[int(field[4:])]
        else:
            d = int(field[6:])
            stride = 1
            for s in sizes[d + 1:]:
                stride *= s
            values[p["name"]] = stride
    return values


def slot_value(raw, kind):
    """A recorded 8-byte slot as the parameter type reads it."""
    if kind == "i32":
        return ctypes.c_int32(raw & 0xffffffff).value
    if kind == "f32":
        return ctypes.c_float.from_buffer_copy((raw & 0xffffffff).to_bytes(4, "little")).value
    return ctypes.c_int64(raw).value if kind == "i64" else raw


def check_router(fail, stub, lib_path, meta, entry, sms, per_sm):
    lib = ctypes.CDLL(lib_path)
    launch = getattr(lib, f"{entry}_launch")
    launch.restype = ctypes.c_int32
    workspace_bytes = getattr(lib, f"{entry}_workspace_bytes")
    workspace_bytes.restype = ctypes.c_int64
    workspace_bytes.argtypes = [ctypes.c_int64]
    params = meta["kernels"][0]["params"]
    stub.stub_expect_args(len(params))
    header = open(os.path.join(os.path.dirname(lib_path), f"{entry}_launch.h")).read()
    buffers = [p["name"].rpartition(".")[0] for p in params
               if p["name"].endswith(".allocated") and not p["name"].startswith("workspace")]
    ranks = {b: sum(1 for p in params if p["name"].startswith(b + ".size")) for b in buffers}
    buffers = [b for b in buffers if b != "knobs"]
    has_knobs = f"struct {entry}_knobs *knobs" in header
    fail.check(f"{entry}: the launcher's knob parameter matches the PTX entry's knob struct",
               has_knobs == any(p["name"] == "knobs.allocated" for p in params))
    fields = knob_fields(header, entry)
    struct_bytes = struct_size(fields)
    for tokens, knob_pointer in ((0, 0), (1, 0x8000000), (8, 0), (9, 0x8000000), (17, 0),
                                 (64, 0x8000000), (1000, 0), (4096, 0x8000000)):
        stub.stub_clear()
        # Fake device pointers, distinct per buffer; the shapes as the PTX entry reads
        # them (sizes from the metadata's names, the launcher's own rules).
        pointers = {b: 0x10000 * (i + 1) for i, b in enumerate(buffers)}
        args = [ctypes.c_int64(tokens)] + [ctypes.c_void_p(pointers[b]) for b in buffers]
        if has_knobs:   # the struct in device memory, or NULL (the defaults: 0 bytes)
            args.append(ctypes.c_void_p(knob_pointer))
        args += [ctypes.c_void_p(0x7000000), ctypes.c_void_p(0)]
        status = launch(*args)
        fail.check(f"{entry} T={tokens}: status 0", status == 0, status)
        got = [(stub.stub_launch_kernel(i).decode(), stub.stub_launch_grid(i),
                stub.stub_launch_block(i), bool(stub.stub_launch_cooperative(i)))
               for i in range(stub.stub_launch_count())]
        want = expected_launches(meta, tokens, sms, per_sm)
        fail.check(f"{entry} T={tokens}: launches", got == want, f"{got} != {want}")
        for i in range(stub.stub_launch_count()):
            slots = {p["name"]: slot_value(stub.stub_launch_arg(i, j), p["type"])
                     for j, p in enumerate(params)}
            sizes = {b: [slots[f"{b}.size{d}"] for d in range(ranks[b])] for b in buffers}
            described = {b: (pointers[b], sizes[b]) for b in buffers}
            if has_knobs:
                described["knobs"] = (knob_pointer, [struct_bytes if knob_pointer else 0])
            want_slots = expected_slots(meta, described, tokens, 0x7000000,
                                        workspace_bytes(tokens))
            bad = {k: (slots[k], v) for k, v in want_slots.items() if slots[k] != v}
            fail.check(f"{entry} T={tokens} {got[i][0]}: parameter slots", not bad, bad)
            dynamic = [b for b in buffers if ranks[b] and sizes[b][0] == tokens]
            fail.check(f"{entry} T={tokens}: some buffer has T rows", tokens == 0 or dynamic)
    stub.stub_clear()
    for tokens in (-1, 2**31):
        args = [ctypes.c_int64(tokens)] + [ctypes.c_void_p(1)] * len(buffers)
        args += ([ctypes.c_void_p(0)] if has_knobs else []) + [ctypes.c_void_p(1),
                                                               ctypes.c_void_p(0)]
        fail.check(f"{entry} T={tokens}: -1, nothing launched",
                   launch(*args) == -1 and stub.stub_launch_count() == 0)
    if has_knobs:
        check = getattr(lib, f"{entry}_check_knobs")
        check.restype = ctypes.c_int32
        defaults = pack_knobs(fields, {name: value for _, name, value in fields})
        fail.check(f"{entry}: the header's defaults pass {entry}_check_knobs",
                   check(defaults) == 0, check(defaults))
        # Every knob -1: the first knob with a rule that refuses it.
        bad = pack_knobs(fields, {name: -1 for _, name, _ in fields})
        fail.check(f"{entry}: a knob breaking its rule is 2 + j", check(bad) >= 2, check(bad))


def knob_fields(header, entry):
    """(C type, name, default) of each field of struct NAME_knobs in NAME_launch.h."""
    body = re.search(r"struct %s_knobs \{\n(.*?)\n\};" % entry, header, re.S)
    return [(ctype, name, float(default) if ctype == "float" else int(default))
            for ctype, name, default in re.findall(
                r"^\s+(int64_t|float) (\w+); /\*.*? default (\S+) \*/$",
                body.group(1) if body else "", re.M)]


def struct_size(fields):
    """sizeof(struct NAME_knobs): each field aligned to its size."""
    class Knobs(ctypes.Structure):
        _fields_ = [(name, ctypes.c_float if ctype == "float" else ctypes.c_int64)
                    for ctype, name, _ in fields]
    return ctypes.sizeof(Knobs) if fields else 0


def pack_knobs(fields, values):
    """A struct NAME_knobs in host memory holding `values`."""
    class Knobs(ctypes.Structure):
        _fields_ = [(name, ctypes.c_float if ctype == "float" else ctypes.c_int64)
                    for ctype, name, _ in fields]
    return ctypes.byref(Knobs(**values))


def old_gpu(args):
    """In a process of its own (the PTX loads once per process): a GPU older than sm_90."""
    stub = ctypes.CDLL(os.path.join(args.work, "stub", "libcudart.so"), mode=ctypes.RTLD_GLOBAL)
    stub.stub_configure(1, 8, 0, 4, 2)
    lib = ctypes.CDLL(os.path.join(args.work, "topk_softmax", "libtopk_softmax_launch.so"))
    status = lib.topk_softmax_launch(ctypes.c_int64(4), *([ctypes.c_void_p(1)] * 3),
                                     ctypes.c_void_p(0))
    print(f"sm_80 device: status {status}, {stub.stub_loads()} loads")
    return 0 if status == NO_KERNEL_IMAGE and stub.stub_loads() == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("--old-gpu", dest="work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.work:
        return old_gpu(args)
    work = tempfile.mkdtemp(prefix="switchyard-launcher-")
    os.makedirs(os.path.join(work, "stub"))
    subprocess.run([cxx(args.build), "-std=c++17", "-shared", "-fPIC", f"-I{CUDA_INCLUDE}",
                    os.path.join(HERE, "Inputs", "cudart_stub.cpp"), "-o",
                    os.path.join(work, "stub", "libcudart.so")], check=True)
    built = [(entry, *build(args.build, work, file, entry, flags))
             for file, entry, flags in ROUTERS]
    stub = ctypes.CDLL(os.path.join(work, "stub", "libcudart.so"), mode=ctypes.RTLD_GLOBAL)
    stub.stub_launch_kernel.restype = ctypes.c_char_p
    stub.stub_launch_arg.restype = ctypes.c_uint64
    sms, per_sm = 4, 2
    stub.stub_configure(1, 9, 0, sms, per_sm)
    fail = Failures()
    for entry, lib, meta in built:
        check_router(fail, stub, lib, meta, entry, sms, per_sm)
    fail.check("each launcher loads its PTX once", stub.stub_loads() == len(built),
               stub.stub_loads())
    asking = sum(1 for _, _, meta in built
                 if any(c["name"] in ("grid", "cooperative") for c in meta["size_classes"]))
    fail.check("each launcher with a grid or cooperative class asks the occupancy once "
               "(one device)", stub.stub_occupancy_queries() == asking,
               f"{stub.stub_occupancy_queries()} != {asking}")
    available = getattr(ctypes.CDLL(built[0][1]), f"{built[0][0]}_gpu_available")
    message = ctypes.create_string_buffer(128)
    fail.check("gpu_available: 1 device", available(message, 128) == 1)
    stub.stub_configure(0, 9, 0, sms, per_sm)
    fail.check("gpu_available without a GPU: 0 and why",
               available(message, 128) == 0 and b"no usable GPU" in message.value, message.value)
    old = subprocess.run([sys.executable, __file__, "--build", args.build, "--old-gpu", work])
    fail.check("a GPU older than the PTX: cudaErrorNoKernelImageForDevice, no load",
               old.returncode == 0)
    print(f"{'FAILED' if fail else 'passed'}: {len(fail)} failures")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
