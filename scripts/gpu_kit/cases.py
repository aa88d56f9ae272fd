"""A packed router on the GPU: its launcher library, a case's inputs regenerated from
the kit's recipe (checked against the packed SHA-256), device buffers laid out in the
launcher's ABI order, and the call (`NAME_launch(num_tokens, inputs..., results...,
[knobs (a device pointer),] workspace, stream)`)."""
import ctypes
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
from gpu_cases import abi_arrays, differing_outputs, example_inputs, result_shape  # noqa: E402
from kit_common import input_digest  # noqa: E402


def load_kit(kit):
    with open(os.path.join(kit, "kit.json")) as f:
        return json.load(f)


def launcher_path(kit, router):
    return os.path.join(kit, router["dir"], f"lib{router['entry']}_launch.so")


def launch_metadata(kit, router):
    """The router's GPU launch metadata: its manifest entry's "launch" object."""
    with open(os.path.join(kit, router["dir"], "manifest.json")) as f:
        entries = json.load(f)["entries"]
    return next(e["launch"] for e in entries if e["entry"] == router["entry"])


def size_classes(meta, tokens):
    """The classes that take a batch of `tokens`: one, or the large pair and the
    cooperative kernel (the launcher picks the latter when the GPU holds its CTAs)."""
    taking = [c for c in meta["size_classes"]   # a bound may be absent or null: unbounded
              if (c.get("min_tokens") or 0) <= tokens <= (c.get("max_tokens") or 1 << 62)]
    if not taking:
        raise ValueError(f"no size class for T={tokens}")
    return taking


def size_class(meta, tokens):
    """The class of the fewest launches that takes `tokens` (the launcher's choice
    when the GPU holds its CTAs)."""
    return min(size_classes(meta, tokens), key=lambda c: len(c["launches"]))


class CaseInputs:
    """A case's host arrays: ABI inputs (checked against the pack) and expected results."""

    def __init__(self, kit, router, case):
        info = {"experts": router["experts"], "arguments": router["arguments"]}
        inputs = example_inputs(info, case["tokens"], np.random.default_rng(case["seed"]))
        self.tokens, self.arrays, self.outputs = abi_arrays(router["params"], result_shape,
                                                            inputs)
        digest = input_digest(self.tokens, self.arrays)
        if digest != case["inputs_sha256"]:
            raise ValueError(f"{router['variant']} T={case['tokens']}: the regenerated inputs "
                             "differ from the packed ones (another NumPy random stream?)")
        self.scalars = case["scalars"]
        self.expected = dict(np.load(os.path.join(kit, case["expected"])))


class DeviceCall:
    """Device buffers for one case and the launcher call on them."""

    def __init__(self, cuda, lib, router, case_inputs, knobs_hex=None):
        self.cuda, self.lib, self.router = cuda, lib, router
        entry = router["entry"]
        self.tokens = ctypes.c_int64(case_inputs.tokens)
        self.inputs = [cuda.to_device(a) for a in case_inputs.arrays]
        self.outputs = {k: (cuda.malloc(v.nbytes), v) for k, v in case_inputs.outputs.items()}
        ws = getattr(lib, f"{entry}_workspace_bytes")
        ws.restype = ctypes.c_int64
        self.workspace_bytes = ws(self.tokens)
        self.workspace = cuda.malloc(self.workspace_bytes)
        cuda.fill(self.workspace, 0xA5, self.workspace_bytes)   # starts as garbage
        self.launch_fn = getattr(lib, f"{entry}_launch")
        self.launch_fn.restype = ctypes.c_int32
        self.knob_device = None   # the knob struct in device memory (None: NULL)
        if router["knobs"]:
            self.set_knobs(knobs_hex)
        args, k = [self.tokens], 0
        for port in router["arguments"]:
            if port["kind"] == "scalar":   # a device pointer to the value
                value = cuda.to_device(np.array([case_inputs.scalars[port["name"]]], np.int32))
                self.inputs.append(value)
                args.append(value)
                continue
            count = 2 if port["kind"] == "placement" else 1
            args += self.inputs[k:k + count]
            k += count
        args += [ptr for ptr, _ in self.outputs.values()]
        self.args = args

    def set_knobs(self, knobs_hex):
        """Writes the knob struct into the device memory the kernels read (allocated at
        the first struct; None before that: NULL, the defaults). A captured graph's
        replays read what was written last."""
        if knobs_hex is None:
            return
        raw = np.frombuffer(bytes.fromhex(knobs_hex), np.uint8)
        if self.knob_device is None:
            self.knob_device = self.cuda.malloc(raw.nbytes)
        self.cuda.upload(self.knob_device, raw)

    def launch(self, stream=None):
        extra = [self.knob_device or ctypes.c_void_p(0)] if self.router["knobs"] else []
        status = self.launch_fn(*self.args, *extra, self.workspace,
                                stream if stream is not None else ctypes.c_void_p(0))
        if status != 0:
            raise RuntimeError(f"{self.router['entry']}_launch returned {status}")

    def clear_outputs(self):
        for ptr, host in self.outputs.values():
            self.cuda.fill(ptr, 0xFF, host.nbytes)

    def results(self):
        return {k: self.cuda.to_host(ptr, np.empty_like(host))
                for k, (ptr, host) in self.outputs.items()}

    def free(self):
        for ptr in self.inputs + [p for p, _ in self.outputs.values()] + [self.workspace] \
                + ([self.knob_device] if self.knob_device is not None else []):
            self.cuda.free(ptr)


def compare(expected, got):
    """(names that differ, largest weight difference)."""
    bad = differing_outputs(expected, got)
    worst = 0.0
    for k, want in expected.items():
        if np.issubdtype(want.dtype, np.floating) and got[k].shape == want.shape:
            worst = max(worst, float(np.abs(got[k] - want).max(initial=0)))
    return bad, worst


def load_launcher(kit, router):
    return ctypes.CDLL(launcher_path(kit, router))
