"""Batch metadata for batch-aware policies (LYNX's phase gate, XShare-spec's per-request
sets): no engine passes request ids or phases to its router, so the engine states them
once per forward step and every Switchyard router called inside reads what it declares.

    with switchyard.batch_metadata(request_ids=ids, phase="decode"):
        model(input_ids)                 # the patched routers see ids and the phase

    switchyard.set_batch_metadata(request_ids=ids, phase="mixed")   # or per step
    ...
    switchyard.set_batch_metadata()                                  # clear

An argument given to a router call explicitly wins over the metadata. Values are
per-token arrays/tensors (request_ids, positions, draft_mask) or a phase name / number;
`knobs` (a dict) overrides knobs for the step, `knob_groups` ([(token rows, knobs)])
per group of requests, `pinned_rows` (token rows) are routed by the router's pinned
router — the model's own routing — instead of the policy (requests that asked for it;
host routers only), `warmup_step` marks an engine's warm-up run.

The metadata is also handed to the runtime (runtime::StepState, this thread's), where
the routing op switchyard::route_step reads it with no Python in the call.
"""
import contextlib
import contextvars
import weakref
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _switchyard
from ._errors import InputError, KnobError
from ._knobs import split_layers

# (the metadata dict, its runtime::StepState) of the current step, or None.
_current: contextvars.ContextVar = contextvars.ContextVar("switchyard_batch_metadata",
                                                          default=None)

PHASES = {"prefill": 0, "decode": 1, "mixed": 2}
_PER_TOKEN = ("request_ids", "positions", "draft_mask")


def set_batch_metadata(**values: Any) -> None:
    """Sets the metadata of the current step (no arguments: clears it)."""
    entry = _entry(dict(values)) if values else None
    _current.set(entry)
    _apply(entry)


#: StepRouters' writers of their GPU state (write(settings, phase)): called when a
#: step's metadata is set; weakly held (a router that is gone drops out).
_device_writers: List[weakref.WeakMethod] = []


def register_device_writer(write) -> None:
    """`write(settings, phase)` (a bound method) is called with the step's knob settings
    and phase (a number, or None) each time batch metadata is set: the GPU path's knob
    struct and phase live in device memory the kernels read."""
    _device_writers[:] = [w for w in _device_writers if w() is not None]
    _device_writers.append(weakref.WeakMethod(write))


def _apply(entry) -> None:
    """Hands `entry` (or nothing) to the runtime: the host StepState, the device
    metadata pointers, and the step's knobs and phase into every GPU router's device
    memory."""
    _switchyard.set_step_state(entry[1] if entry else None)
    pointers, phase, groups = entry[2] if entry else ((0, 0, 0), None, False)
    _switchyard.set_device_step(*pointers, phase is not None, groups)
    if _device_writers:
        if entry and entry[0].get("pinned_rows") is not None and len(entry[0]["pinned_rows"]):
            raise InputError("pinned_rows: the GPU path does not route pinned requests "
                             "(the model's own routing) yet; only host routers do")
        knobs = (entry[0].get("knobs") or {}) if entry else {}
        if any(isinstance(v, (list, tuple)) for v in knobs.values()):
            raise InputError("knobs: per-layer knob values are not routed on the GPU path "
                             "yet; only host routers take them")
        settings = knob_settings(knobs)
        for method in list(_device_writers):
            write = method()
            if write is not None:
                write(settings, phase)


def current_metadata() -> Optional[Dict[str, Any]]:
    """The metadata set for the current step, or None."""
    entry = _current.get()
    return entry[0] if entry is not None else None


@contextlib.contextmanager
def batch_metadata(**values: Any):
    """The metadata of the forward passes run inside the `with` block."""
    entry = _entry(dict(values))
    token = _current.set(entry)
    _apply(entry)
    try:
        yield
    finally:
        _current.reset(token)
        _apply(_current.get())


def phase_number(value: Any) -> int:
    """A phase given by name or number."""
    if isinstance(value, str):
        if value not in PHASES:
            raise InputError(f"phase: '{value}' is not prefill, decode or mixed")
        return PHASES[value]
    return int(value)


def knob_settings(knobs: Dict[str, Any], what: str = "knobs") -> List[str]:
    """`name=value` settings of a knob dict, as the runtime parses them (a policy's own
    rules check names and values where the knobs are used)."""
    if not isinstance(knobs, Mapping):
        raise KnobError(f"{what}: expected a dict of knob name -> value, got "
                        f"{type(knobs).__name__}")
    return [f"{name}={int(value) if isinstance(value, bool) else value}"
            for name, value in knobs.items()]


def _layer_settings(knobs: Dict[str, Any], what: str = "knobs"):
    """(settings for every layer, [settings of MoE layer 0, 1, ...]) of a knob dict
    whose values may be per-layer lists (the runtime picks a layer's by the op's
    layer)."""
    if not isinstance(knobs, Mapping):
        raise KnobError(f"{what}: expected a dict of knob name -> value, got "
                        f"{type(knobs).__name__}")
    uniform, per_layer = split_layers(knobs, f"{what}: ")
    return knob_settings(uniform, what), [knob_settings(layer, what) for layer in per_layer]


def _int32(name: str, value: Any) -> np.ndarray:
    if hasattr(value, "detach"):   # a torch tensor on the host
        value = value.detach().numpy()
    array = np.asarray(value)
    if array.ndim != 1:
        raise InputError(f"batch metadata '{name}': expected one value per token, got shape "
                         f"{array.shape}")
    return np.ascontiguousarray(array, dtype=np.int32)


def _on_device(value: Any) -> bool:
    return hasattr(value, "is_cuda") and value.is_cuda


def _device_pointer(name: str, value: Any) -> int:
    """A CUDA tensor's memory, which the GPU kernels read in place (no copy: a CUDA
    graph's replays read the buffer the engine writes)."""
    import torch
    if value.dim() != 1 or value.dtype != torch.int32 or not value.is_contiguous():
        raise InputError(f"batch metadata '{name}': a CUDA tensor must be a contiguous "
                         f"int32 vector (one value per token), got {value.dtype} of shape "
                         f"{tuple(value.shape)}")
    return value.data_ptr()


def _entry(values: Dict[str, Any]) -> Tuple[Dict[str, Any], Any, Tuple]:
    # Per-token metadata on a CUDA device stays there (the GPU path reads it by
    # pointer); on the host it is the runtime's copy.
    device = tuple(_device_pointer(name, values[name]) if _on_device(values.get(name))
                   else 0 for name in _PER_TOKEN)
    per_token = {name: _int32(name, values[name])
                 if values.get(name) is not None and not _on_device(values[name]) else None
                 for name in _PER_TOKEN}
    phase = values.get("phase")
    groups = []
    for rows, knobs in values.get("knob_groups") or ():
        uniform, per_layer = _layer_settings(knobs, "knob_groups")
        groups.append((np.ascontiguousarray(rows, dtype=np.int64), uniform, False, per_layer))
    pinned = values.get("pinned_rows")
    if pinned is not None and len(pinned):
        groups.append((np.ascontiguousarray(pinned, dtype=np.int64), [], True, []))
    uniform, per_layer = _layer_settings(values.get("knobs") or {})
    state = _switchyard.make_step_state(
        per_token["request_ids"], per_token["positions"], per_token["draft_mask"],
        None if phase is None else phase_number(phase), bool(values.get("warmup_step")),
        uniform, groups, per_layer)
    return values, state, (device, None if phase is None else phase_number(phase),
                           bool(groups))
