"""Python access to policies compiled by moe-compile (ctypes, no extra dependencies).

    from switchyard import CompiledRouter
    router = CompiledRouter("policies/xshare.mlir", experts=128, top_k=4)
                                                   # or model="models/gpt-oss-120b.json"
    out = router(logits=np.float32 array [T, E])   # dict: topk_ids, topk_weights, ...
    out = router(logits=..., knobs={"budget": 8})  # knobs at run time, no recompiling

The shipped policies are generic in the model's shape: `experts`, `top_k` (and `groups`,
`topk_groups`, `devices`, `slots`, `nodes`, `hidden_size`, `shared_experts`, `scaling`,
`norm_topk_prob` where a policy uses them) or `model` (a Hugging Face config.json) bind
it, as the tools' flags do.

The entry's parameters come from the NAME.abi.json that moe-compile writes next to the
library (the signature the C runtime binds against); every input is checked the way
`moe-run` checks it (names, shapes, dtypes, the token count, placements, finite rule
inputs, the phase) and every problem, including the compiler's own diagnostics, is a
SwitchyardError with the message the tools print. The calling convention is the one
moe-compile's header documents: num_tokens, then one pointer per input and output in
signature order (a placement as replica_count, log2phy), scalars by value.
"""
import ctypes
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SWITCHYARD_BUILD_DIR", os.path.join(ROOT, "build"))

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "int8": np.uint8,
           "bool": np.uint8}


class SwitchyardError(RuntimeError):
    """A compiler diagnostic or a bad input, worded as the command-line tools word it."""


def _tool(name):
    return os.path.join(BUILD, "bin", name)


def _run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip()
        raise SwitchyardError(message or f"{os.path.basename(cmd[0])} exited with "
                              f"{result.returncode}")
    return result.stdout


SHAPE_PARAMS = ("experts", "top_k", "groups", "topk_groups", "devices", "slots", "nodes",
                "hidden_size", "shared_experts", "scaling", "norm_topk_prob", "model")


# The model each shipped generic policy was written for (its header's example): what the
# demo, the benchmarks and the GPU tests bind it to.
NATIVE_SHAPES = {
    "topk_softmax": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "xshare": {"model": os.path.join(ROOT, "models", "gpt-oss-120b.json")},
    "xshare_spec": {"model": os.path.join(ROOT, "models", "gpt-oss-120b.json")},
    "lynx": {"experts": 60, "top_k": 4, "shared_experts": 4},
    "deepseek_v3": {"model": os.path.join(ROOT, "models", "deepseek-v3.json")},
    "xshare_ep": {"experts": 256, "top_k": 8, "shared_experts": 1, "devices": 8,
                  "slots": 256},
    "dynaexq": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "eplb": {"model": os.path.join(ROOT, "models", "deepseek-v3.json"), "nodes": 2,
             "devices": 8, "slots": 288},
    "libra": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json"), "devices": 8},
    "expertflow": {"experts": 64, "top_k": 6},
}


def native_shape(policy_name):
    """The shape binding of a shipped policy's own model ({} for a fixed-shape file)."""
    return dict(NATIVE_SHAPES.get(policy_name, {}))


def shape_flags(**shape):
    """The tools' flags for a shape binding (experts=128 -> --experts 128, ...); None
    values are left out, an unknown name is a SwitchyardError."""
    flags = []
    for name, value in shape.items():
        if name not in SHAPE_PARAMS:
            raise SwitchyardError(f"unknown shape parameter '{name}' (expected one of "
                                  f"{', '.join(SHAPE_PARAMS)})")
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"{flag}={'true' if value else 'false'}")
        else:
            flags += [flag, str(value)]
    return flags


def describe(policy_path, **shape):
    """The routers and rules of a policy file bound to `shape`, as moe-run --list prints
    them."""
    cmd = [_tool("moe-run"), policy_path, "--list"] + shape_flags(**shape)
    return json.loads(_run(cmd))["entries"]


# (policy file in policies/, router entry): every shipped router that compiles to a GPU
# kernel (the GPU tests run each of them).
GPU_ROUTERS = [("topk_softmax", "topk_softmax"), ("deepseek_v3", "deepseek_v3"),
               ("lynx", "lynx"), ("xshare", "xshare"), ("xshare_spec", "xshare_spec"),
               ("xshare_ep", "xshare_ep"), ("libra", "libra_predict"),
               ("expertflow", "expertflow_route")]


def _shape_text(param):
    return "[" + ", ".join("?" if d < 0 else str(d) for d in param["shape"]) + "]"


def _size(param, tokens):
    a, b, d = param["size_rule"]
    return tuple((a * tokens + b + d - 1) // d if s < 0 else s for s in param["shape"])


def _as_float32(name, array):
    if array.dtype == np.float32:
        return array
    if array.dtype == np.float16:
        return array.astype(np.float32)
    if array.dtype == np.float64:
        raise SwitchyardError(f"{name}: float64 data is not narrowed implicitly (the "
                              "conversion is lossy); pass float32")
    raise SwitchyardError(f"{name}: expected float32 data, got {array.dtype}")


def _as_int32(name, array):
    if array.dtype in (np.int32, np.int8, np.uint8):
        return array.astype(np.int32)
    if array.dtype == np.int64:
        if array.size and (array.min() < -2**31 or array.max() >= 2**31):
            raise SwitchyardError(f"{name}: int64 values do not all fit in int32")
        return array.astype(np.int32)
    raise SwitchyardError(f"{name}: expected int32 data, got {array.dtype}")


def _as_flags(name, array):
    if array.dtype == np.bool_:
        return array.astype(np.uint8)
    if array.dtype in (np.int8, np.uint8, np.int32, np.int64):
        if np.any((array != 0) & (array != 1)):
            raise SwitchyardError(f"{name}: {array.dtype} set flags must be 0 or 1")
        return array.astype(np.uint8)
    raise SwitchyardError(f"{name}: expected bool data (or integers that are all 0 or 1), "
                          f"got {array.dtype}")


def _placement_arrays(name, value, replicas_param, table_param):
    """An int32 log2phy table [E, <=R] padded with -1 (or [E]): replica counts and the
    padded table, checked as moe-run checks them."""
    experts, width = table_param["shape"]
    table = _as_int32(f"argument '{name}'", np.asarray(value))
    if table.ndim == 1:
        table = table.reshape(-1, 1)
    if table.ndim != 2 or table.shape[0] != experts or not 1 <= table.shape[1] <= width:
        raise SwitchyardError(f"argument '{name}': expected an int32 log2phy table "
                              f"[{experts}, <={width}] (or [{experts}]), got shape "
                              f"{tuple(np.shape(value))}")
    slots = experts + width - 1
    owner = {}
    counts = np.zeros(experts, dtype=np.int32)
    padded = np.full((experts, width), -1, dtype=np.int32)
    for e in range(experts):
        row = table[e]
        live = row[: np.argmax(row < 0)] if np.any(row < 0) else row
        if np.any(row[len(live):] >= 0):
            raise SwitchyardError(f"argument '{name}': expert {e} has a replica after a -1; "
                                  "replicas must come first")
        if len(live) == 0:
            raise SwitchyardError(f"argument '{name}': expert {e} has no replica")
        for r, slot in enumerate(live):
            if slot >= slots:
                raise SwitchyardError(f"argument '{name}': expert {e} replica {r} is slot "
                                      f"{slot}, outside [0, {slots})")
            if int(slot) in owner:
                raise SwitchyardError(f"argument '{name}': slot {slot} holds both expert "
                                      f"{owner[int(slot)]} and expert {e}")
            owner[int(slot)] = e
        counts[e] = len(live)
        padded[e, :len(live)] = live
    return counts, padded


def _check_values(param, what, values):
    """The value rule the compiler records for an input (NAME.abi.json "values")."""
    flat = np.asarray(values).reshape(-1)
    if param.get("values") == "phase":
        bad = np.flatnonzero((flat < 0) | (flat > 2))
        if bad.size:
            raise SwitchyardError(f"{what}: phase {flat[bad[0]]} is not one of 0 (prefill), "
                                  "1 (decode), 2 (mixed)")
    elif param.get("values") == "expert_ids":
        bound = param["id_bound"]
        bad = np.flatnonzero((flat < -1) | (flat >= bound))
        if bad.size:
            raise SwitchyardError(f"{what}: expert id {flat[bad[0]]} at flat index {bad[0]} "
                                  f"is outside [-1, {bound}) (-1: no expert)")


class CompiledRouter:
    """One router (or rule) of a policy, compiled to a shared library and callable on
    numpy arrays."""

    def __init__(self, policy_path, entry=None, knobs=None, workdir=None, lane_parallel=False,
                 freeze_knobs=False, **shape):
        """Compiles `entry` of `policy_path` bound to `shape` (experts=, top_k=, model=,
        ...). `knobs` become the defaults of the run-time knobs (or, with freeze_knobs,
        are compiled in)."""
        flags = shape_flags(**shape)
        entries = describe(policy_path, **shape)
        names = [e["name"] for e in entries]
        if entry is None:
            if len(entries) != 1:
                raise SwitchyardError(f"{policy_path} has several entries ({', '.join(names)});"
                                      " pass entry=")
            entry = names[0]
        if entry not in names:
            raise SwitchyardError(f"no router or rule @{entry} in {policy_path} (entries: "
                                  f"{', '.join(names)})")
        self.info = next(e for e in entries if e["name"] == entry)
        self.name = entry
        # Without a workdir the artifacts live in a temporary directory only until the
        # library is loaded (a loaded library stays mapped after its file is removed).
        out = workdir or tempfile.mkdtemp(prefix="switchyard-")
        try:
            cmd = [_tool("moe-compile"), policy_path, "-o", out, "--entry", entry] + flags
            for key, value in (knobs or {}).items():
                cmd += ["--set", f"{key}={value}"]
            if freeze_knobs:
                cmd.append("--freeze-knobs")
            if lane_parallel:  # the GPU form of the per-token code, run on the host
                cmd.append("--lane-parallel")
            _run(cmd)
            with open(os.path.join(out, f"{entry}.abi.json")) as f:
                self.signature = json.load(f)
            self._lib = ctypes.CDLL(os.path.join(out, f"lib{entry}.so"))
        finally:
            if workdir is None:
                shutil.rmtree(out, ignore_errors=True)
        self._fn = getattr(self._lib, entry)
        self._fn.restype = ctypes.c_int32
        self._params = self.signature["params"]
        self._is_rule = self.signature["kind"] != "router"
        # Knobs left tunable: the entry takes `const struct NAME_knobs *` last.
        self.knobs = self.signature.get("knobs", [])
        self._knob_type = type(f"{entry}_knobs", (ctypes.Structure,), {"_fields_": [
            (k["name"], ctypes.c_float if k["dtype"] == "float32" else ctypes.c_int64)
            for k in self.knobs]})

    def knob_struct(self, knobs=None):
        """`struct NAME_knobs` with the defaults, then `knobs` (name -> value); None when
        the entry has no run-time knobs (compiled with --freeze-knobs)."""
        if not self.knobs:
            if knobs:
                raise SwitchyardError(f"@{self.name} has no run-time knobs (compiled with "
                                      f"--freeze-knobs or none declared)")
            return None
        struct = self._knob_type(*[k["default"] for k in self.knobs])
        names = [k["name"] for k in self.knobs]
        for name, value in (knobs or {}).items():
            if name not in names:
                raise SwitchyardError(f"unknown knob '{name}' (the policy's knobs: "
                                      f"{', '.join(names)})")
            setattr(struct, name, value)
        return struct

    def status_message(self, status):
        """What a non-zero status of the entry means (the header's NAME_status_message)."""
        if status == 1:
            return "num_tokens must be in [0, 2147483647]"
        if 2 <= status < 2 + len(self.knobs):
            knob = self.knobs[status - 2]
            rules = "; ".join(f"{r['text']} ({r['op']})" for r in knob["rules"])
            return f"knob '{knob['name']}' breaks a rule: {rules}"
        return f"unknown status {status}"

    def _input_names(self):
        names = []
        for p in self._params:
            base = p["name"].split(".")[0]
            if p["role"] == "in" and base not in names:
                names.append(base)
        return names

    def prepare(self, knobs=None, **inputs):
        """Checks and binds inputs, allocates outputs; returns (args, outputs) for call().
        `knobs` (name -> value) are passed at run time in the entry's knob struct."""
        struct = self.knob_struct(knobs)
        names = self._input_names()
        for name in inputs:
            if name not in names:
                raise SwitchyardError(f"unknown argument '{name}' for @{self.name} (its "
                                      f"arguments: {', '.join(names)})")
        for p in self._params:
            base = p["name"].split(".")[0]
            if p["role"] == "in" and base not in inputs:
                shape = "" if p["kind"] == "scalar" else " " + _shape_text(p)
                raise SwitchyardError(f"missing required argument '{base}' ({p['dtype']}"
                                      f"{shape}): pass {base}=...")
        tokens, tokens_from = None, None
        args, keep = [None], []
        params = iter(enumerate(self._params))
        for i, p in params:
            if p["role"] != "in":
                continue
            name = p["name"].split(".")[0]
            what = f"argument '{name}'"
            value = inputs[name]
            if p["kind"] == "scalar":
                if isinstance(value, (bool, np.bool_)) or not float(value).is_integer():
                    raise SwitchyardError(f"{what}: expected an integer ({p['dtype']}), got "
                                          f"{value!r}")
                value = int(value)
                if p["dtype"] == "int32" and not -2**31 <= value < 2**31:
                    raise SwitchyardError(f"{what}: {value} does not fit in int32")
                _check_values(p, what, np.array([value]))
                args.append((ctypes.c_int64 if p["dtype"] == "int64" else ctypes.c_int32)(value))
                continue
            if p["kind"] == "placement_replicas":
                _, table_param = next(params)
                for arr in _placement_arrays(name, value, p, table_param):
                    keep.append(arr)
                    args.append(arr.ctypes.data_as(ctypes.c_void_p))
                continue
            array = np.asarray(value)
            shape = p["shape"]
            if array.ndim != len(shape) or any(d >= 0 and a != d
                                               for a, d in zip(array.shape, shape)):
                dtype = "bool" if p["kind"] == "set" else p["dtype"]
                raise SwitchyardError(f"{what}: expected {dtype} {_shape_text(p)}, got shape "
                                      f"{tuple(array.shape)}")
            if shape and shape[0] < 0:
                if tokens is None:
                    tokens, tokens_from = array.shape[0], what
                elif array.shape[0] != tokens:
                    raise SwitchyardError(f"{what}: has {array.shape[0]} tokens but "
                                          f"{tokens_from} has {tokens}")
            if p["kind"] == "set":
                array = _as_flags(what, array)
            elif p["dtype"] == "float32":
                array = _as_float32(what, array)
                if self._is_rule and not np.all(np.isfinite(array)):
                    flat = int(np.flatnonzero(~np.isfinite(array))[0])
                    x = array.flat[flat]
                    kind = "NaN" if np.isnan(x) else "+inf" if x > 0 else "-inf"
                    raise SwitchyardError(f"{what}: holds {kind} at flat index {flat}; a "
                                          "rule's inputs must be finite")
            else:
                array = _as_int32(what, array)
                _check_values(p, what, array)
            array = np.ascontiguousarray(array)
            keep.append(array)
            args.append(array.ctypes.data_as(ctypes.c_void_p))
        tokens = tokens or 0
        args[0] = ctypes.c_int64(tokens)
        outputs = {}
        for p in self._params:
            if p["role"] != "out":
                continue
            arr = np.zeros(_size(p, tokens), dtype=_DTYPES[p["dtype"]])
            outputs[p["name"]] = arr
            args.append(arr.ctypes.data_as(ctypes.c_void_p))
        if struct is not None:
            keep.append(struct)
            args.append(ctypes.byref(struct))
        return (args, keep), outputs

    def call(self, prepared):
        args, _ = prepared
        status = self._fn(*args)
        if status != 0:
            raise SwitchyardError(f"@{self.name} returned status {status}: "
                                  f"{self.status_message(status)}")

    def __call__(self, knobs=None, **inputs):
        """Runs the entry on `inputs` with `knobs` (name -> value; unset ones keep their
        defaults) and returns the named outputs."""
        prepared, outputs = self.prepare(knobs, **inputs)
        self.call(prepared)
        for p in self._params:
            if p["role"] == "out" and p["kind"] == "set":
                outputs[p["name"]] = outputs[p["name"]].astype(bool)
        return outputs


def example_inputs(info, tokens, rng):
    """Random inputs for every argument of a router (`info` as describe() returns it):
    normal logits, a small correction bias, requests of 4 tokens, decode phase, and
    the identity placement (expert e on slot e)."""
    experts = info["experts"]
    values = {"logits": rng.standard_normal((tokens, experts)).astype(np.float32),
              "resident": rng.random(experts) < 0.5,
              "bias": (0.01 * rng.standard_normal(experts)).astype(np.float32),
              "request_ids": (np.arange(tokens) // 4).astype(np.int32),
              "phase": 1,
              "placement": np.arange(experts, dtype=np.int32).reshape(experts, 1)}
    for p in info["arguments"]:  # dense inputs of other shapes (hidden states, weights)
        if p["name"] not in values and p["dtype"] == "float32":
            shape = tuple(tokens if d == "?" else d for d in p["shape"])
            values[p["name"]] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    return {p["name"]: values[p["name"]] for p in info["arguments"]}


def differing_outputs(expected, got):
    """Names of the outputs that differ: exactly, except weights (within 1e-5)."""
    bad = []
    for key, want in expected.items():
        have = np.asarray(got[key]).astype(want.dtype)
        same = (np.allclose(have, want, atol=1e-5) if key == "topk_weights"
                else have.shape == want.shape and np.array_equal(have, want))
        if not same:
            bad.append(key)
    return bad


class CaseTally:
    """Prints one line per checked case and the closing `N passed, M failed` line."""

    def __init__(self):
        self.passed = self.failed = 0

    def record(self, label, bad):
        if bad:
            self.failed += 1
            print(f"FAIL {label}: {', '.join(bad)} differ from the host target")
        else:
            self.passed += 1
            print(f"ok   {label}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
