#!/usr/bin/python3
"""Python access to policies compiled by moe-compile (ctypes, no extra dependencies).

    from switchyard import CompiledRouter
    router = CompiledRouter("policies/xshare.mlir", knobs={"budget": 8})
    out = router(logits=np.float32 array [T, E])   # dict: topk_ids, topk_weights, ...

The router's inputs, outputs and their shapes come from `moe-run --list`; the calling
convention is the one moe-compile's header documents: num_tokens, then one pointer per
input and output in signature order (a placement as replica_count, log2phy), scalars
by value.
"""
import ctypes
import json
import os
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SWITCHYARD_BUILD_DIR", os.path.join(ROOT, "build"))

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.uint8}


def _tool(name):
    return os.path.join(BUILD, "bin", name)


def describe(policy_path):
    """The routers of a policy file, as moe-run --list prints them."""
    text = subprocess.run([_tool("moe-run"), policy_path, "--list"], check=True,
                          capture_output=True, text=True).stdout
    return json.loads(text)["entries"]


# (policy file in policies/, router entry): every shipped router that compiles to a GPU
# kernel (the GPU tests run each of them).
GPU_ROUTERS = [("topk_softmax", "topk_softmax"), ("deepseek_v3", "deepseek_v3"),
               ("lynx", "lynx"), ("xshare", "xshare"), ("xshare_spec", "xshare_spec"),
               ("xshare_ep", "xshare_ep"), ("libra", "libra_predict"),
               ("expertflow", "expertflow_route")]


class CompiledRouter:
    """One router of a policy, compiled to a shared library and callable on numpy arrays."""

    def __init__(self, policy_path, entry=None, knobs=None, workdir=None, lane_parallel=False):
        entries = describe(policy_path)
        if entry is None:
            if len(entries) != 1:
                raise ValueError(f"{policy_path} has several routers; pass entry=")
            entry = entries[0]["name"]
        self.info = next(e for e in entries if e["name"] == entry)
        self.name = entry
        self._workdir = workdir or tempfile.mkdtemp(prefix="switchyard-")
        cmd = [_tool("moe-compile"), policy_path, "-o", self._workdir, "--entry", entry]
        for key, value in (knobs or {}).items():
            cmd += ["--set", f"{key}={value}"]
        if lane_parallel:  # the GPU form of the per-token code, run on the host
            cmd.append("--lane-parallel")
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        self._lib = ctypes.CDLL(os.path.join(self._workdir, f"lib{entry}.so"))
        self._fn = getattr(self._lib, entry)
        self._fn.restype = ctypes.c_int32

    @staticmethod
    def _shape(port, tokens):
        a, b, d = port["size_rule"]
        return tuple((a * tokens + b + d - 1) // d if s == "?" else s for s in port["shape"])

    def prepare(self, **inputs):
        """Binds inputs and allocates outputs; returns (args, outputs) for call()."""
        tokens = None
        for port in self.info["arguments"]:
            if port["shape"] and port["shape"][0] == "?":
                tokens = np.asarray(inputs[port["name"]]).shape[0]
                break
        tokens = tokens or 0
        args, keep = [ctypes.c_int64(tokens)], []
        for port in self.info["arguments"]:
            value = inputs[port["name"]]
            if port["kind"] == "scalar":
                args.append(ctypes.c_int32(int(value)))
                continue
            if port["kind"] == "placement":
                table = np.asarray(value, dtype=np.int32)
                table = table.reshape(table.shape[0], -1)
                replicas = np.ascontiguousarray((table >= 0).sum(axis=1), dtype=np.int32)
                padded = np.full(port["shape"], -1, dtype=np.int32)
                padded[:, :table.shape[1]] = table
                for arr in (replicas, padded):
                    keep.append(arr)
                    args.append(arr.ctypes.data_as(ctypes.c_void_p))
                continue
            arr = np.ascontiguousarray(value, dtype=_DTYPES[port["dtype"]])
            keep.append(arr)
            args.append(arr.ctypes.data_as(ctypes.c_void_p))
        outputs = {}
        for port in self.info["results"]:
            arr = np.zeros(self._shape(port, tokens), dtype=_DTYPES[port["dtype"]])
            outputs[port["name"]] = arr
            args.append(arr.ctypes.data_as(ctypes.c_void_p))
        return (args, keep), outputs

    def call(self, prepared):
        args, _ = prepared
        status = self._fn(*args)
        if status != 0:
            raise RuntimeError(f"{self.name} returned {status}")

    def __call__(self, **inputs):
        prepared, outputs = self.prepare(**inputs)
        self.call(prepared)
        for port in self.info["results"]:
            if port["dtype"] == "bool":
                outputs[port["name"]] = outputs[port["name"]].astype(bool)
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
