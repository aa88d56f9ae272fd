"""Per-step routing for serving engines: a Router bound ONCE to what an engine's MoE
layer has (the router logits, the layer's own tensors such as DeepSeek-V3's
`e_score_correction_bias`, the step's batch metadata), then called every forward step
through one torch op:

    torch.ops.switchyard.route_step(Tensor logits, Tensor[] layer_inputs, int handle,
                                    int layer=-1)
        -> (Tensor topk_weights float32 [T, k], Tensor topk_ids int32 [T, k])

`handle` names a StepRouter made before tracing (an int is a constant in a
torch.compile graph; the op has a fake implementation, so Dynamo and Inductor see one
opaque node). A call does no name or shape work in Python: the runtime's bound call
(runtime::BoundCall) takes the token count, raw pointers and the knob struct packed
once. bfloat16 / float16 logits go to an entry compiled to read them in place
(--input-dtype logits=bf16) when one is bound, else they are widened inside the call;
never by a torch op.

The engine's routing contract is applied in the same call (vLLM's kernels take ids in
[0, E) only): a slot the policy left empty (-1) gets weight 0 and an expert the token
already uses, else one already active in the batch (runtime::fillEmptySlots).
"""
import atexit
import threading
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from ._errors import InputError, SwitchyardError
from ._metadata import PHASES, current_metadata

#: Inputs a policy may declare that come from the step's batch metadata (per token,
#: except the phase: one value for the step).
METADATA_INPUTS = ("request_ids", "positions", "draft_mask", "phase")

# npy::DType's codes (runtime/include/switchyard/Runtime/Npy.h).
_DTYPE_CODES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.int32: 6}

_steps: List["StepRouter"] = []
_lock = threading.Lock()
# Drop the bound calls at exit, before the extension's types go away.
atexit.register(_steps.clear)


class StepRouter:
    """`router` (a host Router with topk_ids / topk_weights results) bound to its
    inputs: `logits`, then `layer_inputs` (names of tensors the op receives, in
    order), then metadata inputs (METADATA_INPUTS) read from the step's metadata.
    Any other input is an error naming it."""

    def __init__(self, router, *, experts: int, layer_inputs: Sequence[str] = (),
                 cuda_router=None, label: str = "", narrow_routers=None):
        self.router = router
        self.experts = int(experts)
        self.label = label or f"@{router.entry}"
        if "logits" not in router.inputs:
            raise SwitchyardError(f"{self.label}: the policy takes no 'logits' input "
                                  f"(its inputs: {', '.join(router.inputs)})")
        missing = [n for n in ("topk_ids", "topk_weights") if n not in router.outputs]
        if missing:
            raise SwitchyardError(f"{self.label}: the policy returns no {missing[0]} (its "
                                  f"results: {', '.join(router.outputs)}): not a router "
                                  "an engine can run")
        self.layer_inputs = [n for n in layer_inputs if n in router.inputs]
        self.metadata_inputs = [n for n in router.inputs if n in METADATA_INPUTS]
        unknown = [n for n in router.inputs if n != "logits" and n not in self.layer_inputs
                   and n not in self.metadata_inputs]
        if unknown:
            given = ", ".join(["logits"] + list(layer_inputs) + list(METADATA_INPUTS))
            raise SwitchyardError(
                f"{self.label}: the policy needs input '{unknown[0]}', which the engine "
                f"does not give (given: {given})")
        self._scalar_names = [n for n in self.metadata_inputs if n in router._scalars]
        self._scalars = np.zeros(max(1, len(self._scalar_names)), dtype=np.int64)
        order = ["logits"] + self.layer_inputs + self.metadata_inputs
        self._bound = router._native.bind_call(order, ["topk_ids", "topk_weights"], True)
        # Entries compiled to read bfloat16 / float16 logits in place (--input-dtype):
        # logits of that dtype go to them, others to the float32 entry (which widens).
        self._bound_by_dtype = {torch.float32: self._bound}
        for dtype, narrow in (narrow_routers or {}).items():
            self._bound_by_dtype[dtype] = narrow._native.bind_call(
                order, ["topk_ids", "topk_weights"], True)
        ids = next(p for p in router._results if p["name"] == "topk_ids")
        self.top_k = int(ids["shape"][1])
        self._knobs = self._pack(router._default_knobs)
        self._knob_cache: Dict[tuple, Optional[bytes]] = {}
        self._cuda_router = cuda_router
        self._logits_only = not self.layer_inputs and not self.metadata_inputs
        with _lock:
            self.handle = len(_steps)
            _steps.append(self)

    def _pack(self, settings: List[str]) -> Optional[bytes]:
        return self.router._native.knob_struct(settings) if self.router.knobs else None

    def knob_struct(self, knobs: Optional[Dict[str, Any]]) -> Optional[bytes]:
        """The knob struct for the Router's defaults overridden by `knobs` (cached;
        a bad name or value raises KnobError / SwitchyardError naming it)."""
        if not knobs:
            return self._knobs
        key = tuple(sorted(knobs.items()))
        packed = self._knob_cache.get(key)
        if packed is None:
            packed = self._pack(self.router._default_knobs + self.router._knob_settings(knobs))
            if len(self._knob_cache) > 256:
                self._knob_cache.clear()
            self._knob_cache[key] = packed
        return packed

    # -- the call ------------------------------------------------------------------------
    def __call__(self, logits: torch.Tensor, layer_tensors: Sequence[torch.Tensor]):
        metadata = current_metadata()
        if self._logits_only and logits.device.type == "cpu" and \
                (metadata is None or not ("knobs" in metadata or "knob_groups" in metadata)):
            # The common case, kept short: logits alone, the bound knobs.
            dtype = _DTYPE_CODES.get(logits.dtype)
            if dtype is not None and logits.is_contiguous():
                tokens = logits.shape[0]
                ids = torch.empty((tokens, self.top_k), dtype=torch.int32)
                weights = torch.empty((tokens, self.top_k), dtype=torch.float32)
                bound = self._bound_by_dtype.get(logits.dtype, self._bound)
                bound.run_logits(tokens, logits.data_ptr(), dtype, ids.data_ptr(),
                                       weights.data_ptr(), self.experts, self._knobs)
                return weights, ids
        if logits.device.type != "cpu":
            return self._call_device(logits, layer_tensors)
        groups = metadata.get("knob_groups") if metadata is not None else None
        if groups:
            return self._call_groups(logits, layer_tensors, metadata, groups)
        return self._call_host(logits, layer_tensors, metadata)

    def _call_groups(self, logits, layer_tensors, metadata, groups):
        """Requests of the step set different knobs: each group of requests with the
        same settings is routed as its own batch (token rows gathered and scattered)."""
        tokens = logits.shape[0]
        ids = torch.empty((tokens, self.top_k), dtype=torch.int32)
        weights = torch.empty((tokens, self.top_k), dtype=torch.float32)
        covered = np.zeros(tokens, dtype=bool)
        for rows, knobs in groups:
            rows = np.asarray(rows, dtype=np.int64)
            covered[rows] = True
            sub = self._sub_metadata(metadata, rows, tokens, knobs)
            index = torch.from_numpy(rows)
            w, i = self._call_host(logits.index_select(0, index), layer_tensors, sub)
            ids.index_copy_(0, index, i)
            weights.index_copy_(0, index, w)
        rest = np.flatnonzero(~covered)          # padding rows: the step's defaults
        if rest.size:
            index = torch.from_numpy(rest)
            w, i = self._call_host(logits.index_select(0, index), layer_tensors,
                                   self._sub_metadata(metadata, rest, tokens, None))
            ids.index_copy_(0, index, i)
            weights.index_copy_(0, index, w)
        return weights, ids

    @staticmethod
    def _sub_metadata(metadata, rows, tokens, knobs):
        sub = {}
        for name, value in metadata.items():
            if name in ("knob_groups", "knobs"):
                continue
            if hasattr(value, "__len__") and not isinstance(value, str) and \
                    len(value) == tokens:
                value = value[torch.from_numpy(rows)] if isinstance(value, torch.Tensor) \
                    else np.asarray(value)[rows]
            sub[name] = value
        if knobs:
            sub["knobs"] = knobs
        return sub

    def _call_host(self, logits, layer_tensors, metadata):
        tokens = logits.shape[0]
        ids = torch.empty((tokens, self.top_k), dtype=torch.int32)
        weights = torch.empty((tokens, self.top_k), dtype=torch.float32)
        if not logits.is_contiguous():
            logits = logits.contiguous()
        pointers = [logits.data_ptr()]
        dtypes = [_DTYPE_CODES.get(logits.dtype, -1)]
        keep = []
        for tensor in layer_tensors:
            if not tensor.is_contiguous() or tensor.dtype not in _DTYPE_CODES:
                tensor = tensor.contiguous().float()
                keep.append(tensor)
            pointers.append(tensor.data_ptr())
            dtypes.append(_DTYPE_CODES[tensor.dtype])
        knobs = self._knobs
        if metadata is not None:
            if self.metadata_inputs:
                self._bind_metadata(metadata, tokens, pointers, dtypes, keep)
            step_knobs = metadata.get("knobs")
            if step_knobs:   # knobs for this step (engine-wide overrides)
                knobs = self.knob_struct(step_knobs)
        elif self.metadata_inputs:
            raise InputError(
                f"{self.label}: the policy needs {', '.join(self.metadata_inputs)} "
                "from the step's batch metadata, and none is set "
                "(switchyard.set_batch_metadata / the engine integration sets it)")
        if dtypes[0] < 0:
            raise InputError(f"{self.label}: logits of dtype {logits.dtype} (float32, "
                             "bfloat16 or float16)")
        bound = self._bound_by_dtype.get(logits.dtype, self._bound)
        bound.run(tokens, pointers, dtypes, [ids.data_ptr(), weights.data_ptr()],
                        self.experts, knobs)
        return weights, ids

    def _bind_metadata(self, metadata, tokens, pointers, dtypes, keep):
        scalar = 0
        for name in self.metadata_inputs:
            value = metadata.get(name)
            if value is None and metadata.get("warmup_step"):
                # An engine's warm-up / profiling run (no requests): one request, the
                # phase it states, positions 0..T-1, no drafts.
                value = np.arange(tokens, dtype=np.int32) if name == "positions" else \
                    np.zeros(tokens, dtype=np.int32)
            if value is None:
                raise InputError(f"{self.label}: the step's batch metadata has no '{name}'")
            if name in self._scalar_names:
                if isinstance(value, str):
                    value = PHASES[value]
                self._scalars[scalar] = int(value)
                pointers.append(self._scalars.ctypes.data + 8 * scalar)
                dtypes.append(7)
                scalar += 1
                continue
            if isinstance(value, torch.Tensor):
                array = value.to(torch.int32).contiguous() if value.dtype != torch.int32 \
                    else value.contiguous()
                count, address = array.numel(), array.data_ptr()
            else:
                array = np.ascontiguousarray(value, dtype=np.int32)
                count, address = array.size, array.ctypes.data
            if count != tokens:
                raise InputError(f"{self.label}: metadata '{name}' has {count} entries for "
                                 f"{tokens} tokens (one per token)")
            keep.append(array)
            pointers.append(address)
            dtypes.append(6)

    def _call_device(self, logits, layer_tensors):
        """CUDA tensors: the policy's GPU kernels on the current stream, then the
        routing contract as sync-free tensor ops (capturable in a CUDA graph)."""
        if self._cuda_router is None:
            raise InputError(f"{self.label}: logits on {logits.device}, but the policy was "
                             "bound for the host (bind it with a CUDA router)")
        inputs = {"logits": logits}
        inputs.update(zip(self.layer_inputs, layer_tensors))
        metadata = current_metadata() or {}
        for name in self.metadata_inputs:
            inputs[name] = metadata.get(name)
        out = self._cuda_router(**inputs, knobs=metadata.get("knobs") or None)
        ids, weights = fill_empty_slots(out["topk_ids"], out["topk_weights"], self.experts)
        return weights, ids


def fill_empty_slots(ids: torch.Tensor, weights: torch.Tensor, experts: int):
    """runtime::fillEmptySlots as tensor ops with no host synchronisation (for device
    tensors and CUDA graphs): the same ids and weights."""
    valid = (ids >= 0) & (ids < experts)
    flat_valid = valid.reshape(-1)
    first = flat_valid.to(torch.int32).argmax()
    batch_any = ids.reshape(-1)[first]
    batch_any = torch.where(flat_valid[first], batch_any, torch.zeros_like(batch_any))
    own_index = valid.to(torch.int32).argmax(dim=1, keepdim=True)
    own = ids.gather(1, own_index)
    own = torch.where(valid.any(dim=1, keepdim=True), own, batch_any)
    ids = torch.where(valid, ids, own.expand_as(ids)).to(torch.int32)
    weights = torch.where(valid, weights, torch.zeros_like(weights)).to(torch.float32)
    return ids, weights


# hook(layer, logits, ids, weights), called after each op call with a layer >= 0: how a
# routing trace is recorded from a compiled graph, whose Python runs only inside the op
# (vllm/capture.py sets it under SWITCHYARD_CAPTURE).
capture_hook = None


def route_step(logits: torch.Tensor, layer_inputs: List[torch.Tensor], handle: int,
               layer: int = -1):
    """The op's implementation (CPU and CUDA)."""
    weights, ids = _steps[handle](logits, layer_inputs)
    if layer >= 0 and capture_hook is not None:
        capture_hook(layer, logits, ids, weights)
    return weights, ids


_library = torch.library.Library("switchyard", "FRAGMENT")
_library.define("route_step(Tensor logits, Tensor[] layer_inputs, int handle, "
                "int layer=-1) -> (Tensor, Tensor)")
_library.impl("route_step", route_step, "CPU")
_library.impl("route_step", route_step, "CUDA")


@torch.library.register_fake("switchyard::route_step")
def _route_step_fake(logits, layer_inputs, handle, layer=-1):
    k = _steps[handle].top_k
    tokens = logits.shape[0]
    return (logits.new_empty((tokens, k), dtype=torch.float32),
            logits.new_empty((tokens, k), dtype=torch.int32))
