"""Hardware profiles and the expert cost model of the trace evaluator (docs/traces.md,
"Bytes read and modeled layer time").

A MoE layer's routed experts are SwiGLU MLPs: gate and up [inter, hidden] and down
[hidden, inter], so one expert holds 3 * hidden * inter parameters, and one token
routed to it costs 2 * 3 * hidden * inter FLOPs. A forward pass (step) reads the
weights of every distinct expert it activates once, so the modeled layer time is the
roofline bound

    time = max(active_experts * expert_bytes / bandwidth, assignments * flops / flop_rate)

(weights only: activations, the router, attention and launch overheads are left out;
it is a model of the expert GEMMs' memory- vs compute-bound regimes, not a measurement).

The GPU profiles are the vendors' published peaks (dense BF16 tensor-core FLOP/s, HBM
bandwidth) of the SXM parts; `this-cpu` is measured at run time with numpy: read
bandwidth as the time to sum a 256 MiB float32 array, FLOP rate as a 2048^3 float32
matmul (numpy's BLAS), the best of a few runs each.
"""
from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np

from .._errors import InputError

# name -> (memory bandwidth B/s, dense BF16 FLOP/s, source)
PUBLISHED = {
    "h100": (3.35e12, 989e12, "NVIDIA H100 SXM5 80 GB datasheet: HBM3 3.35 TB/s, "
             "BF16 tensor 989 TFLOP/s dense"),
    "h200": (4.8e12, 989e12, "NVIDIA H200 SXM 141 GB datasheet: HBM3e 4.8 TB/s, "
             "BF16 tensor 989 TFLOP/s dense"),
    "a100": (2.039e12, 312e12, "NVIDIA A100 SXM4 80 GB datasheet: HBM2e 2.039 TB/s, "
             "BF16 tensor 312 TFLOP/s dense"),
}
PROFILE_NAMES = tuple(PUBLISHED) + ("this-cpu",)

_measured: Optional[dict] = None

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8": 1, "fp8": 1,
               "int8": 1, "int4": 0.5, "mxfp4": 0.53125}


def measure_this_cpu(repeats: int = 3) -> dict:
    """This machine's read bandwidth and float32 matmul rate, measured once per process."""
    global _measured
    if _measured is None:
        data = np.ones(64 << 20, dtype=np.float32)  # 256 MiB
        best_read = min(_timed(data.sum) for _ in range(repeats))
        n = 2048
        a = np.ones((n, n), np.float32)
        b = np.ones((n, n), np.float32)
        best_mm = min(_timed(lambda: a @ b) for _ in range(repeats))
        _measured = {"bandwidth": data.nbytes / best_read, "flops": 2.0 * n ** 3 / best_mm,
                     "source": "measured here: numpy sum of 256 MiB float32 (read "
                               "bandwidth), 2048^3 float32 matmul (FLOP rate)"}
    return dict(_measured)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def profiles(names) -> Dict[str, dict]:
    """{name: {"bandwidth", "flops", "source"}} for names from PROFILE_NAMES."""
    if isinstance(names, str):
        names = [n for n in names.split(",") if n]
    out = {}
    for name in names:
        if name in PUBLISHED:
            bandwidth, flops, source = PUBLISHED[name]
            out[name] = {"bandwidth": bandwidth, "flops": flops, "source": source}
        elif name == "this-cpu":
            out[name] = measure_this_cpu()
        else:
            raise InputError(f"hardware '{name}': not a profile (known: "
                             f"{', '.join(PROFILE_NAMES)})")
    return out


def expert_geometry(trace, model=None, expert_dtype: Optional[str] = None) -> Optional[dict]:
    """{"hidden_size", "moe_intermediate_size", "dtype", "expert_bytes", "flops_per_token"}
    from `model` (a config.json path or dict: hidden_size and moe_intermediate_size, or
    intermediate_size when the model has no separate expert size) or else the trace's
    meta.json keys of the same names; None when neither gives both sizes."""
    config = _config(model) if model is not None else dict(trace.meta)
    where = f"model config {model}: " if isinstance(model, str) else \
        "model config: " if model is not None else "the trace's meta.json: "
    hidden = config.get("hidden_size")
    inter = config.get("moe_intermediate_size")
    inter = config.get("intermediate_size") if inter is None else inter
    if hidden is None or inter is None:
        if model is not None:
            raise InputError(f"model config {model if isinstance(model, str) else ''}: "
                             f"needs hidden_size and moe_intermediate_size (or "
                             f"intermediate_size) for the bytes / time model")
        return None
    for name, value in (("hidden_size", hidden), ("moe_intermediate_size", inter)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{where}{name} = {value!r}: must be a positive integer")
    dtype = expert_dtype or config.get("expert_dtype") or config.get("torch_dtype") \
        or config.get("dtype") or "bfloat16"
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise InputError(f"{where if not expert_dtype else ''}expert dtype {dtype!r}: not "
                         f"one of {', '.join(DTYPE_BYTES)}")
    params = 3 * hidden * inter
    return {"hidden_size": hidden, "moe_intermediate_size": inter, "dtype": dtype,
            "expert_bytes": params * DTYPE_BYTES[dtype], "flops_per_token": 2.0 * params}


def geometry_meta(config: dict) -> dict:
    """The keys of a model config that expert_geometry reads, for a trace's meta.json
    (captures record them so that moe-eval --hardware needs no --model)."""
    out = {}
    for key in ("hidden_size", "moe_intermediate_size", "intermediate_size"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[key] = value
    dtype = config.get("torch_dtype") or config.get("dtype")
    if isinstance(dtype, str) and dtype in DTYPE_BYTES:
        out["torch_dtype"] = dtype
    return out


def _config(model) -> dict:
    from .format import read_json_object
    config = model if isinstance(model, dict) else read_json_object(
        str(model), "missing (the model config.json giving the experts' sizes)")
    text = config.get("text_config")
    return text if "hidden_size" not in config and isinstance(text, dict) else config


def layer_time(active: float, assignments: float, geometry: dict, profile: dict) -> float:
    """The roofline time in seconds of one step's experts (module documentation)."""
    memory = active * geometry["expert_bytes"] / profile["bandwidth"]
    compute = assignments * geometry["flops_per_token"] / profile["flops"]
    return max(memory, compute)
