#!/usr/bin/python3
"""The engine's CUDA routing path on a CPU: runtime::CudaStepRouter (what the routing op
launches on CUDA tensors) with each router's real GPU launcher (libNAME_gpu.so, built by
switchyard.compile(target="cuda")) loaded against an emulating cudart
(Inputs/cudart_stub.cpp with stub_emulate: each launch runs the kernel of the same name
from the router's NAME.cu compiled for the CPU, on CPU threads, with the launch's grid
and block). "Device memory" is host memory here, so the test reads results directly.

The CUDA-graph contract, checked as a replay would exercise it: every call of a router
passes byte-identical pointers (logits, layer tensors, metadata buffers, the knob struct,
outputs, workspace); between the calls only the MEMORY changes — other logits, other
request ids in the runner's metadata buffer, another phase in the router's device phase,
another knob struct written into the router's device knob memory — and each call's ids
and weights must equal the host
target's on that call's values (ids exactly, weights within 1e-5), both compiled as the
vLLM plugin compiles them (topk_ids and topk_weights only, --fill-empty-slots: capacity
drops come back as weight-0 slots of used experts). Also: the bfloat16
entry reads bf16 logits in place; an entry compiled with knob groups routes a batch
whose tokens belong to 4 groups in one launch, each group as the host routes its rows
alone with its knobs; a router without a set device metadata input says which; a GPU
entry with results other than topk_ids / topk_weights is refused at bind.

    test_cuda_step_router.py --build BUILD_DIR
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_host import SWITCHYARD_INCLUDE, cxx  # noqa: E402
from gpu_cases import CaseTally, alternative_knobs, differing_outputs, entry_info, \
    example_inputs, expected_by_groups  # noqa: E402
from policy_shapes import ROOT, import_switchyard, native_shape  # noqa: E402
from test_cuda_on_host import bf16_bits  # noqa: E402

CUDA_HOME = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
CUDA_INCLUDE = os.environ.get("SWITCHYARD_CUDA_INCLUDE") or os.path.join(CUDA_HOME, "include")
F32, BF16 = 2, 1   # npy::DType codes
# (policy file, entry, the layer inputs the engine passes).
ROUTERS = [("topk_softmax", "topk_softmax", []), ("deepseek_v3", "deepseek_v3", ["bias"]),
           ("lynx", "lynx", []), ("xshare", "xshare", []),
           ("xshare_spec", "xshare_spec", []), ("capacity_topk", "capacity_topk", [])]
TOKENS = 40   # one-CTA class or the grid for the first call, then fewer rows
ROUTE = ("topk_ids", "topk_weights")


def cudart_soname():
    """The SONAME of the toolkit's cudart, which the launchers link: the stub takes it,
    so that a launcher's NEEDED resolves to the stub already loaded."""
    path = os.path.join(CUDA_HOME, "lib64", "libcudart.so")
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    found = re.search(r"\(SONAME\).*\[(.*)\]", out)
    return found.group(1) if found else "libcudart.so"


def build_stub(build, work):
    path = os.path.join(work, "libcudart_emulated.so")
    subprocess.run([cxx(build), "-std=c++17", "-shared", "-fPIC", f"-I{CUDA_INCLUDE}",
                    os.path.join(HERE, "Inputs", "cudart_stub.cpp"),
                    f"-Wl,-soname,{cudart_soname()}", "-ldl", "-o", path], check=True)
    stub = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    stub.stub_configure(1, 9, 0, 4, 2)
    return stub


def build_kernels_on_host(build, directory, entry, work):
    """NAME.cu of the compiled artifacts as a CPU library (its KERNEL_params entries)."""
    path = os.path.join(work, f"lib{entry}_{os.path.basename(directory)}_cu.so")
    subprocess.run([cxx(build), "-x", "c++", "-std=c++20", "-O1", "-pthread",
                    "-DSWITCHYARD_CUDA_ON_HOST", f"-I{SWITCHYARD_INCLUDE}", "-shared", "-fPIC",
                    os.path.join(directory, f"{entry}.cu"), "-o", path], check=True)
    return path


def pointer(array):
    return array.ctypes.data


class Binding:
    """One router bound as the engine binds it: a host StepRouter with the GPU
    launchers attached, and the fixed "device" buffers every call passes."""

    def __init__(self, sy, stub, kernels, host, gpu, dtype, layer_names, tokens, experts,
                 knob_bytes):
        self.sy, self.stub, self.kernels = sy, stub, kernels
        self.knobs = np.zeros(max(knob_bytes, 1), np.uint8)   # the device knob struct
        self.phase = np.zeros(1, np.int32)                    # the device phase
        self.handle = host.native.bind_step_router(
            [], [], layer_names, experts, [], f"@{host.entry}", cuda=[gpu.native],
            cuda_dtypes=[dtype], device_knobs=pointer(self.knobs) if knob_bytes else 0,
            device_phase=pointer(self.phase))
        workspace, size = sy._switchyard.step_router_cuda_info(self.handle, tokens, dtype)
        assert size == knob_bytes, (size, knob_bytes)
        self.workspace = np.full(max(workspace, 1), 0x5A, np.uint8)
        self.dtype = dtype

    def route(self, tokens, logits, layer, k):
        ids = np.full((tokens, k), -7, np.int32)
        weights = np.full((tokens, k), np.nan, np.float32)
        if self.stub.stub_emulate(self.kernels.encode()) != 0:
            raise SystemExit(f"{self.kernels} does not load")
        self.sy._switchyard.step_route_cuda(self.handle, tokens, pointer(logits), self.dtype,
                                            [pointer(t) for t in layer], pointer(ids),
                                            pointer(weights), pointer(self.workspace), 0)
        return {"topk_ids": ids, "topk_weights": weights}


def check_router(sy, build, stub, work, tally, file, entry, layer_names, rng):
    policy = os.path.join(ROOT, "policies", f"{file}.mlir")
    shape = native_shape(file)
    # As switchyard.vllm.bind compiles them: the routing results, every slot an expert.
    host = sy.compile(policy, entry=entry, outputs=ROUTE, fill_empty_slots=True, **shape)
    gpu = sy.compile(policy, entry=entry, outputs=ROUTE, target="cuda", fill_empty_slots=True,
                     **shape)
    info = entry_info(sy, policy, entry, **shape)
    kernels = build_kernels_on_host(build, gpu.native.directory, entry, work)
    experts, k = info["experts"], info["top_k"]
    knob_bytes = len(host.native.knob_struct(host.default_settings)) if host.knobs else 0
    binding = Binding(sy, stub, kernels, host, gpu, F32, layer_names, TOKENS, experts,
                      knob_bytes)
    inputs = example_inputs(info, TOKENS, rng)
    # The runner's fixed buffers: logits (T rows at most), the layer's tensors, the
    # per-token metadata; each call writes new values into them.
    logits = np.zeros((TOKENS, experts), np.float32)
    layer = [np.ascontiguousarray(inputs[n]) for n in layer_names]
    request_ids = np.zeros(TOKENS, np.int32)
    sy._switchyard.set_device_step(pointer(request_ids), 0, 0, "phase" in inputs)

    def call(label, tokens, values, knobs=None):
        logits[:tokens] = values["logits"]
        for buffer, name in zip(layer, layer_names):
            buffer[...] = values[name]
        if "request_ids" in values:
            request_ids[:tokens] = values["request_ids"]
        if "phase" in values:
            binding.phase[0] = values["phase"]
        if host.knobs:
            binding.knobs[:] = np.frombuffer(host.native.knob_struct(
                host.settings(knobs or {})), np.uint8)
        expected = host(**values, knobs=knobs)
        got = binding.route(tokens, logits, layer, k)
        tally.record(f"{entry} {label}", differing_outputs(
            {n: np.asarray(expected[n]) for n in ROUTE}, got))
        return expected

    defaults = call(f"T={TOKENS}", TOKENS, inputs)
    if host.knobs:
        other, _ = alternative_knobs(host, inputs, defaults)
        call(f"T={TOKENS}, knobs {other} written into the device struct", TOKENS, inputs,
             other)
        call(f"T={TOKENS}, the defaults written back", TOKENS, inputs)
    smaller = example_inputs(info, TOKENS // 2 + 3, rng)
    if "request_ids" in smaller:   # requests of 3 tokens now: other metadata values
        smaller["request_ids"] = (np.arange(TOKENS // 2 + 3) // 3).astype(np.int32)
    if "phase" in smaller:   # prefill now: LYNX's gate takes its other branch
        smaller["phase"] = 0
    call(f"T={TOKENS // 2 + 3}, new logits and metadata in the same buffers",
         TOKENS // 2 + 3, smaller)


def check_bf16(sy, build, stub, work, tally, rng):
    """The entry compiled to read bfloat16 logits, chosen for bf16 logits."""
    policy = os.path.join(ROOT, "policies", "topk_softmax.mlir")
    shape = native_shape("topk_softmax")
    host = sy.compile(policy, outputs=ROUTE, **shape)
    gpu = sy.compile(policy, outputs=ROUTE, target="cuda", input_dtypes={"logits": "bf16"},
                     **shape)
    info = entry_info(sy, policy, "topk_softmax", **shape)
    kernels = build_kernels_on_host(build, gpu.native.directory, "topk_softmax", work)
    binding = Binding(sy, stub, kernels, host, gpu, BF16, [], TOKENS, info["experts"], 0)
    values = rng.standard_normal((TOKENS, info["experts"])).astype(np.float32)
    bits = bf16_bits(values)
    expected = host(logits=(bits.astype(np.uint32) << 16).view(np.float32))
    got = binding.route(TOKENS, bits, [], info["top_k"])
    tally.record("topk_softmax bf16 logits read in place",
                 differing_outputs({n: np.asarray(expected[n]) for n in ROUTE}, got))


# Routers with knobs whose batch-level choices differ by group: set selection with a
# budget, LYNX's bins (with the phase), XShare-spec's per-request sets (request ids).
GROUPED = [("xshare", "xshare"), ("lynx", "lynx"), ("xshare_spec", "xshare_spec")]
GROUPS = 4


def check_knob_groups(sy, build, stub, work, tally, rng):
    """Knob groups in ONE launch (compile(target="cuda", knob_groups=4)): the runner's
    knob memory holds 4 structs and its knob_group buffer each token's group; each call
    equals the host routing every group's rows as a batch of its own with its knobs.
    Two calls with byte-identical pointers and other groups, knobs and logits in the
    same memory (a graph's replays)."""
    for file, entry in GROUPED:
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        shape = native_shape(file)
        host = sy.compile(policy, entry=entry, outputs=ROUTE, fill_empty_slots=True, **shape)
        gpu = sy.compile(policy, entry=entry, outputs=ROUTE, target="cuda",
                         fill_empty_slots=True, knob_groups=GROUPS, **shape)
        info = entry_info(sy, policy, entry, **shape)
        kernels = build_kernels_on_host(build, gpu.native.directory, entry, work)
        struct = len(host.native.knob_struct(host.default_settings))
        binding = Binding(sy, stub, kernels, host, gpu, F32, [], TOKENS, info["experts"],
                          struct * GROUPS)
        logits = np.zeros((TOKENS, info["experts"]), np.float32)
        request_ids = np.zeros(TOKENS, np.int32)
        group_of = np.zeros(TOKENS, np.int32)
        for call in range(2):
            inputs = example_inputs(info, TOKENS, rng)
            default_out = host(**inputs)
            other, _ = alternative_knobs(host, inputs, default_out)
            # group 0 the step's knobs, 1 another setting, 2 the defaults written again,
            # 3 no tokens (call 0) or a few (call 1); ids outside [0, 4) are group 0.
            settings = [{}, other, {}, other]
            group_of[:] = rng.choice([0, 1, 1, 2, -1, 7] + [3] * call, size=TOKENS)
            logits[:] = inputs["logits"]
            if "request_ids" in inputs:
                request_ids[:] = inputs["request_ids"]
            if "phase" in inputs:
                binding.phase[0] = inputs["phase"]
            for g, knobs in enumerate(settings):
                binding.knobs[g * struct:(g + 1) * struct] = np.frombuffer(
                    host.native.knob_struct(host.settings(knobs)),
                    np.uint8)
            sy._switchyard.set_device_step(pointer(request_ids), 0, 0, "phase" in inputs,
                                           True, pointer(group_of))
            expected = expected_by_groups(host, inputs, group_of, settings, GROUPS)
            # (The groups must matter, or the check could not fail: routing the batch
            # whole with the step's knobs gives other ids.)
            whole = np.asarray(default_out["topk_ids"])
            tally.record(f"{entry} call {call}: routing by groups differs from the whole "
                         f"batch's", [] if not np.array_equal(whole, expected["topk_ids"])
                         else ["the same ids: the case cannot tell"])
            got = binding.route(TOKENS, logits, [], expected["topk_ids"].shape[1])
            used = sorted(set(np.where((group_of >= 0) & (group_of < GROUPS), group_of, 0)))
            tally.record(f"{entry} knob groups {used} in one launch (call {call}, groups 1 "
                         f"and 3: {other})", differing_outputs(expected, got))
        sy._switchyard.set_device_step(pointer(request_ids), 0, 0, True, True, 0)
        try:
            binding.route(TOKENS, logits, [], 1)
            tally.record(f"{entry}: a grouped entry without knob_group is an error",
                         ["no error"])
        except Exception as error:   # noqa: BLE001 - the message is what is checked
            tally.record(f"{entry}: a grouped entry without knob_group is an error ({error})",
                         [] if "knob_group" in str(error) else ["message"])
    sy._switchyard.set_device_step(0, 0, 0)


def check_errors(sy, tally):
    """Clear errors: a GPU entry with other results, a missing device metadata input, a
    step with per-request knob groups."""
    policy = os.path.join(ROOT, "policies", "xshare_spec.mlir")
    shape = native_shape("xshare_spec")
    host = sy.compile(policy, outputs=ROUTE, **shape)
    full = sy.compile(policy, target="cuda", **shape)
    experts = entry_info(sy, policy, "xshare_spec", **shape)["experts"]
    try:
        host.native.bind_step_router([], [], [], experts, [], "@xshare_spec",
                                      cuda=[full.native], cuda_dtypes=[F32])
        tally.record("a GPU entry with more results is refused", ["no error"])
    except Exception as error:   # noqa: BLE001 - the message is what is checked
        ok = "topk_ids and topk_weights" in str(error)
        tally.record(f"a GPU entry with more results is refused ({error})",
                     [] if ok else ["message"])
    gpu = sy.compile(policy, outputs=ROUTE, target="cuda", **shape)
    handle = host.native.bind_step_router([], [], [], experts, [], "@xshare_spec",
                                           cuda=[gpu.native], cuda_dtypes=[F32])
    sy._switchyard.set_device_step(0, 0, 0)
    try:
        sy._switchyard.step_route_cuda(handle, 4, 1, F32, [], 1, 1, 1, 0)
        tally.record("a missing request_ids buffer is an error", ["no error"])
    except Exception as error:   # noqa: BLE001
        ok = "request_ids" in str(error)
        tally.record(f"a missing request_ids buffer is an error ({error})",
                     [] if ok else ["message"])
    # Per-request knob groups are not routed by the GPU path yet: refused by name, never
    # routed with the step's knobs instead.
    ids = np.zeros(4, np.int32)
    sy._switchyard.set_device_step(pointer(ids), 0, 0, False, True)
    try:
        sy._switchyard.step_route_cuda(handle, 4, 1, F32, [], 1, 1, 1, 0)
        tally.record("a step with knob groups is refused on the GPU path", ["no error"])
    except Exception as error:   # noqa: BLE001
        ok = "knob groups" in str(error)
        tally.record(f"a step with knob groups is refused on the GPU path ({error})",
                     [] if ok else ["message"])
    sy._switchyard.set_device_step(0, 0, 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="switchyard-cuda-step-")
    stub = build_stub(args.build, work)   # before any launcher loads
    sy = import_switchyard(args.build)
    rng = np.random.default_rng(5)
    tally = CaseTally()
    for file, entry, layer_names in ROUTERS:
        check_router(sy, args.build, stub, work, tally, file, entry, layer_names, rng)
    check_bf16(sy, args.build, stub, work, tally, rng)
    check_knob_groups(sy, args.build, stub, work, tally, rng)
    check_errors(sy, tally)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
