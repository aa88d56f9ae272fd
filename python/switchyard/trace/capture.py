"""Record a transformers MoE model's routing as a trace (docs/traces.md).

    with switchyard.trace.capture_hf(model, "trace/", max_tokens=100_000):
        model.generate(...)          # or any forward calls

Inside the context, a forward hook on every MoE router module (the modules
switchyard.hf patches) records, per forward pass, the router logits and the model's
own top-k ids / weights; the trace is written to the directory on exit. The hooks are
put before any other hook of the router (also before switchyard.hf.patch's), so the ids
and weights are the model's own routing even when a policy is patched in. Outside the
context nothing is hooked: no cost.

Per token: step = the forward call of `model` (0, 1, ...); request id = the batch row;
position = tokens of that row seen before in this capture; phase = prefill when the
call routes more than one token per row, else decode. `metadata` (a dict, or a callable
returning one, read at every forward call) overrides them with 'request_ids',
'positions' ([tokens] arrays, batch-major) and 'phase' (0/1/2 or "prefill" / "decode" /
"verify"). Recording stops, with one warning, before the forward pass that would go
past `max_tokens`."""
from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np

from .. import hf as _hf
from .._errors import InputError
from .format import Trace, ids_dtype, save_trace
from .hardware import geometry_meta

_PHASES = {"prefill": 0, "decode": 1, "verify": 2}


def _layer_index(name: str, position: int) -> int:
    """The MoE layer's index: the first integer in the module name (model.layers.3.mlp.gate
    -> 3), else the router's position in the model."""
    m = re.search(r"\.(\d+)(\.|$)", "." + name)
    return int(m.group(1)) if m else position


class _Recorder:
    def __init__(self, model, max_tokens, metadata):
        self.model = model
        self.max_tokens = max_tokens
        self.metadata = metadata
        self.recorded = 0
        self.stopped = False
        self.step = -1
        self.rows = None  # batch rows of the current forward call, when known
        self.admitted = False  # the current forward call is recorded
        self.row_seen = {}  # batch row -> tokens seen before (positions)
        self.tokens: dict[str, list] = {"request_ids": [], "positions": [], "phase": [],
                                        "step": []}
        self.layers: dict[int, dict[str, list]] = {}

    def forward_pre(self, module, args, kwargs):
        self.step += 1
        self.admitted = False
        x = kwargs.get("input_ids")
        if x is None:
            x = kwargs.get("inputs_embeds")
        if x is None and args:
            x = args[0]
        shape = getattr(x, "shape", None)
        self.rows = tuple(shape[:2]) if shape is not None and len(shape) >= 2 else None

    def _per_token(self, tokens):
        meta = self.metadata() if callable(self.metadata) else (self.metadata or {})
        if self.rows is not None and self.rows[0] * self.rows[1] == tokens:
            batch, seq = self.rows
        else:
            batch, seq = 1, tokens
        request_ids = np.repeat(np.arange(batch, dtype=np.int32), seq)
        positions = np.concatenate(
            [self.row_seen.get(r, 0) + np.arange(seq, dtype=np.int32) for r in range(batch)])
        for r in range(batch):
            self.row_seen[r] = self.row_seen.get(r, 0) + seq
        phase = np.full(tokens, 0 if seq > 1 else 1, np.uint8)
        for name, default in (("request_ids", request_ids), ("positions", positions)):
            value = meta.get(name)
            if value is not None:
                value = np.asarray(_numpy(value), dtype=np.int32).reshape(-1)
                if value.size != tokens:
                    raise InputError(f"switchyard.trace.capture_hf: metadata '{name}' has "
                                     f"{value.size} entries for {tokens} tokens")
                default[:] = value
        value = meta.get("phase")
        if value is not None:
            value = _PHASES.get(value, value) if isinstance(value, str) else _numpy(value)
            if isinstance(value, str) or not np.all(np.isin(value, (0, 1, 2))):
                raise InputError(f"switchyard.trace.capture_hf: metadata 'phase' must be 0/1/2 "
                                 f"or {sorted(_PHASES)}, got {value!r}")
            phase[:] = np.asarray(value, dtype=np.uint8).reshape(-1)
        return request_ids, positions, phase

    def router_hook(self, layer):
        def hook(module, args, output):
            if self.stopped:
                return None
            logits, weights, ids = output[0], output[1], output[2]
            tokens = int(logits.shape[0])
            if self.step < 0:  # a router called outside a forward call of the model
                self.step = 0
            if not self.admitted:
                if self.recorded + tokens > self.max_tokens:
                    self.stopped = True
                    warnings.warn(f"switchyard.trace.capture_hf: max_tokens = "
                                  f"{self.max_tokens} reached after {self.recorded} tokens; "
                                  f"recording stopped", stacklevel=2)
                    return None
                request_ids, positions, phase = self._per_token(tokens)
                self.tokens["request_ids"].append(request_ids)
                self.tokens["positions"].append(positions)
                self.tokens["phase"].append(phase)
                self.tokens["step"].append(np.full(tokens, self.step, np.int32))
                self.recorded += tokens
                self.admitted = True
            rec = self.layers.setdefault(layer, {"logits": [], "ids": [], "weights": []})
            rec["logits"].append(_logits_numpy(logits))
            rec["ids"].append(ids.detach().to("cpu").numpy())
            rec["weights"].append(weights.detach().float().to("cpu").numpy())
            return None
        return hook


def _numpy(value):
    detach = getattr(value, "detach", None)
    return detach().to("cpu").numpy() if callable(detach) else value


def _logits_numpy(logits):
    import torch

    x = logits.detach().to("cpu")
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(np.uint16)  # the bit patterns
    return x.float().numpy()


@contextlib.contextmanager
def capture_hf(model, directory, *, max_tokens=1_000_000, metadata=None):
    """Record `model`'s routing inside the `with` block; writes the trace to `directory`
    on a normal exit and yields the recorder (its `recorded` counts tokens)."""
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        raise InputError(f"switchyard.trace.capture_hf: max_tokens must be a positive "
                         f"integer, got {max_tokens!r}")
    routers = _hf._find_routers(model)
    if not routers:
        raise InputError(f"switchyard.trace.capture_hf: {type(model).__name__} has no MoE "
                         f"router to capture (no module of class "
                         f"{', '.join(_hf.SUPPORTED_ROUTERS)})")
    config = _hf._config_dict(model.config)
    experts = _first(config, "num_local_experts", "num_experts", "n_routed_experts")
    recorder = _Recorder(model, max_tokens, metadata)
    handles = [model.register_forward_pre_hook(recorder.forward_pre, with_kwargs=True)]
    layers = []
    for position, (name, module, _) in enumerate(routers):
        layer = _layer_index(name, position)
        layers.append(layer)
        handles.append(module.register_forward_hook(recorder.router_hook(layer), prepend=True))
    if len(set(layers)) != len(layers):  # names without distinct indices: number them
        for h in handles[1:]:
            h.remove()
        handles = handles[:1] + [m.register_forward_hook(recorder.router_hook(i), prepend=True)
                                 for i, (_, m, _) in enumerate(routers)]
    try:
        yield recorder
    finally:
        for h in handles:
            h.remove()
    if not recorder.layers:
        raise InputError("switchyard.trace.capture_hf: no forward pass was recorded (nothing "
                         "ran in the block, or max_tokens is below one pass): no trace written")
    k = None
    logits, ids, weights = {}, {}, {}
    compact = ids_dtype(experts or 0)
    for layer, rec in recorder.layers.items():
        logits[layer] = np.concatenate(rec["logits"])
        ids[layer] = np.concatenate(rec["ids"]).astype(compact)
        weights[layer] = np.concatenate(rec["weights"]).astype(np.float32)
        k = ids[layer].shape[1]
        if experts is None:
            experts = logits[layer].shape[1]
    groups = config.get("n_group")
    trace = Trace(num_experts=experts, top_k=k, logits=logits, ids=ids, weights=weights,
                  model=str(config.get("_name_or_path") or config.get("model_type") or ""),
                  source="transformers", groups=groups if groups and groups > 1 else None,
                  meta=geometry_meta(config),
                  **{n: np.concatenate(v) for n, v in recorder.tokens.items()})
    save_trace(trace, directory)


def _first(config, *keys):
    for key in keys:
        if config.get(key) is not None:
            return int(config[key])
    return None
