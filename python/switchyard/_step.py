"""Per-step routing for serving engines: a Router bound ONCE to what an engine's MoE
layer has (the router logits, the layer's own tensors such as DeepSeek-V3's
`e_score_correction_bias`, the step's batch metadata), then called every forward step
through one torch op:

    torch.ops.switchyard.route_step(Tensor logits, Tensor[] layer_inputs, int handle,
                                    int layer=-1)
        -> (Tensor topk_weights float32 [T, k], Tensor topk_ids int32 [T, k])

`handle` names a runtime::StepRouter made before tracing (an int is a constant in a
torch.compile graph; the op has a fake implementation, so Dynamo and Inductor see one
opaque node). A `layer` >= 0 (the MoE layer's index) is recorded when a routing-trace
capture has set the runtime's step recorder (SWITCHYARD_CAPTURE: set_step_recorder).
The op's CPU kernel is C++ (python/op/RouteStepOp.cpp, loaded from
libswitchyard_ops.so): a call does no Python, no name or shape work; the step's batch
metadata and knobs are the runtime's per-thread StepState, which
switchyard.set_batch_metadata / batch_metadata set once per step. bfloat16 / float16
logits go to an entry compiled to read them in place (--input-dtype logits=bf16) when
one is bound, else they are widened inside the call; never by a torch op.

The engine's routing contract holds in every result (vLLM's kernels take ids in [0, E)
only): a slot the policy left empty (-1) gets weight 0 and an expert the token already
uses, else the lowest one the batch routes to — inside the compiled code (bind compiles
with --fill-empty-slots: moe.fill_empty_slots), and in runtime::fillEmptySlots for a host
entry compiled without it.

On CUDA tensors the op's C++ kernel launches the policy's GPU launcher
(runtime::CudaStepRouter) on torch's current stream. What a CUDA graph would freeze is
kept out of the launch: the knobs (a struct) and the phase are device memory this router
owns (written by switchyard.set_batch_metadata when the step's values change, outside
the graph), and the per-token metadata are the device buffers the engine gives
set_batch_metadata (read by pointer: under CUDA graphs, the same persistent int32 buffers
every step).
"""
import atexit
import os
from typing import Dict, List, Sequence

import numpy as np
import torch

from . import _switchyard
from ._errors import InputError, SwitchyardError
from ._metadata import register_device_writer

#: Inputs a policy may declare that come from the step's batch metadata (per token,
#: except the phase: one value for the step).
METADATA_INPUTS = ("request_ids", "positions", "draft_mask", "phase")

# The runtime's element type of logits of each torch dtype.
_LOGITS_DTYPES = {torch.float16: _switchyard.DType.float16,
                torch.bfloat16: _switchyard.DType.bfloat16,
                torch.float32: _switchyard.DType.float32}
# A layer's tensors may also be int32 (the placement's tables).
_LAYER_DTYPES = {**_LOGITS_DTYPES, torch.int32: _switchyard.DType.int32}

_steps: Dict[int, "StepRouter"] = {}   # handle -> StepRouter
# Drop the Routers at exit, before the extension's types go away (the runtime keeps
# what its step routers need).
atexit.register(_steps.clear)

class StepRouter:
    """`router` (a host Router with topk_ids / topk_weights results) bound to its
    inputs as a runtime::StepRouter: `logits`, then `layer_inputs` (names of tensors the
    op receives, in order), then metadata inputs (METADATA_INPUTS) read from the step's
    metadata. Any other input is an error naming it."""

    def __init__(self, router, *, experts: int, layer_inputs: Sequence[str] = (),
                 cuda_router=None, label: str = "", narrow_routers=None, pinned=None):
        if router.layer_settings:
            raise InputError(f"{label or router.entry}: per-layer knob defaults: bind one "
                             "router per layer, or give per-layer values in the step's "
                             "knobs (set_batch_metadata(knobs=...), the runtime picks the "
                             "op's layer's)")
        self.router = router
        # The StepRouter of the model's own routing that routes pinned rows (metadata
        # `pinned_rows`: requests that asked for it), or None (such rows are refused).
        self.pinned = pinned
        self.experts = int(experts)
        self.label = label or f"@{router.entry}"
        # Entries compiled to read bfloat16 / float16 logits in place (--input-dtype):
        # logits of that dtype go to them, others to the float32 entry (which widens).
        narrow = dict(narrow_routers or {})
        #: Logits dtypes an entry reads in place (others are widened in the call).
        self.in_place_dtypes = {torch.float32, *narrow}
        # The GPU launcher's knob struct and phase, in device memory the kernels read.
        self._device_knobs = self._device_phase = None
        self._written_knobs = self._written_phase = None
        if cuda_router is not None:
            device = torch.device("cuda", torch.cuda.current_device())
            if router.knobs:
                size = len(router.native.knob_struct(router.default_settings))
                self._device_knobs = torch.empty(size, dtype=torch.uint8, device=device)
                self.write_device_state([], None)
            if "phase" in router.inputs:
                self._device_phase = torch.zeros(1, dtype=torch.int32, device=device)
        self.handle = router.native.bind_step_router(
            [r.native for r in narrow.values()], [_LOGITS_DTYPES[d] for d in narrow],
            list(layer_inputs), self.experts, router.default_settings, self.label,
            cuda=[cuda_router.native] if cuda_router is not None else [],
            cuda_dtypes=[_LOGITS_DTYPES[torch.float32]] if cuda_router is not None else [],
            device_knobs=self._device_knobs.data_ptr() if self._device_knobs is not None
            else 0,
            device_phase=self._device_phase.data_ptr() if self._device_phase is not None
            else 0, pinned=pinned.handle if pinned is not None else -1)
        self.top_k, self.layer_inputs, self.logits_width = \
            _switchyard.step_router_info(self.handle)
        self.metadata_inputs = [n for n in router.inputs if n in METADATA_INPUTS]
        self.on_cuda = cuda_router is not None
        if self._device_knobs is not None or self._device_phase is not None:
            register_device_writer(self.write_device_state)
        _steps[self.handle] = self

    def write_device_state(self, settings: List[str], phase) -> None:
        """Writes the knob struct of the defaults plus `settings`, and the phase (when
        given), into the device memory the GPU kernels read, where they changed: the
        next launch, or the next replay of a captured graph, routes with them. A setting
        the policy refuses raises KnobError."""
        if self._device_knobs is not None and self._written_knobs != tuple(settings):
            raw = self.router.native.knob_struct(self.router.default_settings +
                                                 list(settings))
            self._device_knobs.copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8),
                                     non_blocking=True)
            self._written_knobs = tuple(settings)
        if self._device_phase is not None and phase is not None and \
                phase != self._written_phase:
            self._device_phase.fill_(int(phase))
            self._written_phase = phase

    def check_knobs(self, knobs: Dict, layers=None) -> None:
        """Raises KnobError / SwitchyardError naming a knob the policy does not have or
        a value its rules refuse (a per-layer list: each layer's value; with `layers`,
        one value per MoE layer)."""
        from ._knobs import checked_knobs, split_layers
        from ._metadata import knob_settings
        router = self.router
        uniform, per_layer = split_layers(checked_knobs(knobs, router.knobs, router.entry),
                                          layers=layers)
        base = router.default_settings + knob_settings(uniform)
        for layer in per_layer or [{}]:
            router.native.check_knobs(base + knob_settings(layer))

    # -- the call ------------------------------------------------------------------------
    def __call__(self, logits: torch.Tensor, layer_tensors: Sequence[torch.Tensor],
                 layer: int = -1):
        """One layer's call (eager): the op's C++ kernel (runtime::StepRouter), whose
        errors are RuntimeErrors; without the op library, the same C++ through the
        extension. `layer`: the MoE layer's number (its per-layer knobs; recorded when
        a routing-trace capture is on), -1 when not known."""
        if NATIVE_OP:
            return _route_step_op(logits, list(layer_tensors), self.handle, layer)
        weights, ids = self._call_extension(logits, layer_tensors, layer)
        if layer >= 0 and _recorder is not None:
            _record(layer, logits, ids, weights)
        return weights, ids

    def _call_extension(self, logits, layer_tensors, layer: int):
        """The call through the extension (no op library): host or device."""
        if logits.device.type != "cpu":
            return self._call_device(logits, layer_tensors)
        dtype = _LOGITS_DTYPES.get(logits.dtype)
        if dtype is None:
            raise InputError(f"{self.label}: logits of dtype {logits.dtype} (float32, "
                             "bfloat16 or float16)")
        if logits.dim() != 2 or logits.shape[1] != self.logits_width:
            raise InputError(f"{self.label}: logits of shape {tuple(logits.shape)}, expected "
                             f"[tokens, {self.logits_width}]")
        if not logits.is_contiguous():
            logits = logits.contiguous()
        tokens = logits.shape[0]
        ids = torch.empty((tokens, self.top_k), dtype=torch.int32)
        weights = torch.empty((tokens, self.top_k), dtype=torch.float32)
        if len(layer_tensors) != len(self.layer_inputs):
            raise InputError(f"{self.label}: {len(layer_tensors)} layer tensors for the "
                             f"layer inputs {', '.join(self.layer_inputs)}")
        tensors = [t if t.dtype in _LAYER_DTYPES and t.is_contiguous() and
                   t.device.type == "cpu" else
                   t.to("cpu", torch.float32 if t.is_floating_point() else torch.int32)
                   .contiguous() for t in layer_tensors]
        _switchyard.step_route(self.handle, tokens, logits.data_ptr(), dtype,
                               [t.data_ptr() for t in tensors],
                               [_LAYER_DTYPES[t.dtype] for t in tensors],
                               ids.data_ptr(), weights.data_ptr(), moe_layer=layer)
        return weights, ids

    def _call_device(self, logits, layer_tensors):
        """CUDA tensors without the op library: the same runtime::CudaStepRouter launch
        through the extension (the GPU entry holds the routing contract: compiled with
        --fill-empty-slots)."""
        if not self.on_cuda:
            raise InputError(f"{self.label}: logits on {logits.device}, but the policy was "
                             "bound for the host (bind it with target=\"cuda\")")
        dtype = _LOGITS_DTYPES.get(logits.dtype)
        if dtype is None or logits.dim() != 2 or logits.shape[1] != self.logits_width:
            raise InputError(f"{self.label}: logits of dtype {logits.dtype} and shape "
                             f"{tuple(logits.shape)}, expected float32 / bfloat16 / "
                             f"float16 [tokens, {self.logits_width}]")
        logits = logits.contiguous()
        tokens, device = logits.shape[0], logits.device
        workspace_bytes, _ = _switchyard.step_router_cuda_info(self.handle, tokens, dtype)
        tensors = [(t.int() if not t.is_floating_point() else t.float()).contiguous()
                   for t in layer_tensors]
        ids = torch.empty((tokens, self.top_k), dtype=torch.int32, device=device)
        weights = torch.empty((tokens, self.top_k), dtype=torch.float32, device=device)
        workspace = torch.empty(max(workspace_bytes, 1), dtype=torch.uint8, device=device)
        _switchyard.step_route_cuda(self.handle, tokens, logits.data_ptr(), dtype,
                                    [t.data_ptr() for t in tensors], ids.data_ptr(),
                                    weights.data_ptr(), workspace.data_ptr(),
                                    torch.cuda.current_stream(device).cuda_stream)
        return weights, ids


def route_step(logits: torch.Tensor, layer_inputs: List[torch.Tensor], handle: int,
               layer: int = -1):
    """The op's Python implementation (CUDA tensors; CPU too where the C++ op library
    was not built)."""
    return _steps[handle](logits, layer_inputs, layer)


def _record(layer, logits, ids, weights) -> None:
    """Hands a call to the step recorder as the C++ op does."""
    from .trace.capture import _logits_numpy   # float32, or bfloat16 as its bits
    array = _logits_numpy(logits)
    _recorder(layer, array, ids.detach().cpu().numpy(), weights.detach().float().cpu().numpy(),
              "bfloat16" if array.dtype == np.uint16 else "float32")


_recorder = None


def set_step_recorder(recorder) -> None:
    """recorder(layer, logits, ids, weights, logits_dtype) gets each op call with a layer
    >= 0 (NumPy arrays valid during the call; 16-bit logits as their uint16 bits); None
    stops recording."""
    global _recorder
    _recorder = recorder
    _switchyard.set_step_recorder(recorder)


def _load_op_library() -> bool:
    """Loads the C++ op (libswitchyard_ops.so beside this file) if it was built."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libswitchyard_ops.so")
    if not os.path.exists(path):
        return False
    try:
        torch.ops.load_library(path)
    except OSError as error:
        raise SwitchyardError(f"{path}: the routing op library did not load: {error}") \
            from None
    return True


#: True when route_step's CPU kernel is the C++ op (else it is route_step above).
NATIVE_OP = _load_op_library()
_library = torch.library.Library("switchyard", "FRAGMENT")
if NATIVE_OP:   # CPU and CUDA kernels in C++
    _route_step_op = torch.ops.switchyard.route_step.default
else:
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
