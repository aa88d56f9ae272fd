"""Routing traces from a vLLM engine: SWITCHYARD_CAPTURE=DIR (docs/traces.md, docs/vllm.md).

With the variable set, every routing call a SwitchyardRouter makes is recorded per MoE
layer (eager calls directly; under torch.compile the routing op records at run time,
through the runtime's step recorder, switchyard._step.set_step_recorder; CUDA graph
replays run no Python and are not recorded): the router logits [T, E] and the ids /
weights the policy returned, with the step's batch metadata (batch.py): request ids,
positions, phase (prefill 0, decode 1, draft tokens 2; in a mixed step a request
scheduling one token counts as decode, more as prefill) and step (this process's forward
counter). vLLM's warm-up and profiling runs (no requests) are not recorded. At most
SWITCHYARD_CAPTURE_MAX_TOKENS tokens per layer (default 65536): one warning when a step
would go past it, then nothing more.

Each process writes its own complete trace, DIR/rank-<rank> (the torch.distributed rank
while the engine runs, else the process id), at exit (atexit) or when `flush()` is
called. Unset, routers get no recorder: the only per-call cost is one `is None` check.
"""
import atexit
import logging
import os
from typing import Dict, List, Optional

import numpy as np

CAPTURE_ENV = "SWITCHYARD_CAPTURE"
MAX_TOKENS_ENV = "SWITCHYARD_CAPTURE_MAX_TOKENS"
DEFAULT_MAX_TOKENS = 65536

logger = logging.getLogger("vllm.switchyard")   # under vLLM's logger: its handler prints it
_recorder: Optional["Recorder"] = None


class Recorder:
    """The routing calls of one process; layers are numbered in the order vLLM builds
    their routers (MoE layer 0, 1, ...)."""

    def __init__(self, directory: str, max_tokens: int):
        self.directory = directory
        self.max_tokens = max_tokens
        self.num_layers = 0
        self.shape: Optional[tuple] = None   # (experts, top_k) of the layers
        self.step = -1
        self.last_layer: Optional[int] = None
        self.admitted = False                # the current step is recorded
        self.stopped = False
        self.recorded = 0
        self.rank: Optional[int] = None      # read while the engine runs
        # The served model's name and experts' sizes, read while vLLM builds the layers:
        # its current config is gone when the trace is written at exit.
        self.model: Optional[str] = None
        self.geometry: Optional[dict] = None
        self.tokens: Dict[str, List[np.ndarray]] = {"request_ids": [], "positions": [],
                                                    "phase": [], "step": []}
        self.layers: Dict[int, Dict[str, list]] = {}

    def new_layer(self, experts: int, top_k: int) -> int:
        if not self.model:
            self.model = _model_name()
        if not self.geometry:
            self.geometry = _geometry()
        layer = self.num_layers
        self.num_layers += 1
        if self.shape is None:
            self.shape = (experts, top_k)
        elif self.shape != (experts, top_k):
            logger.warning("switchyard: %s: MoE layer %d has %d experts, top-%d, unlike the "
                           "first layer's %s: it is not captured (a trace has one shape)",
                           CAPTURE_ENV, layer, experts, top_k, self.shape)
            return -1
        return layer

    def record(self, layer: int, logits, ids, weights) -> None:
        """One layer's routing call (eager, or the op inside a compiled graph; not in
        vLLM's warm-up runs)."""
        from .._metadata import current_metadata
        if self.stopped or layer < 0:
            return
        metadata = current_metadata() or {}
        if metadata.get("warmup_step") or "request_ids" not in metadata:
            return
        if self.last_layer is None or layer <= self.last_layer:   # a new forward pass
            self.step += 1
            self.admitted = False
            tokens = int(logits.shape[0])
            if self.recorded + tokens > self.max_tokens:
                self.stopped = True
                logger.warning("switchyard: %s=%d reached after %d tokens per layer; "
                               "recording stopped", MAX_TOKENS_ENV, self.max_tokens,
                               self.recorded)
                return
            if self.rank is None:
                self.rank = _rank()
            self._per_token(metadata, tokens)
            self.recorded += tokens
            self.admitted = True
        self.last_layer = layer
        if not self.admitted:
            return
        from ..trace.capture import _logits_numpy
        entry = self.layers.setdefault(layer, {"logits": [], "ids": [], "weights": []})
        entry["logits"].append(_logits_numpy(logits))
        entry["ids"].append(ids.detach().to("cpu").numpy().copy())
        entry["weights"].append(weights.detach().float().to("cpu").numpy().copy())

    def record_arrays(self, layer: int, logits: np.ndarray, ids: np.ndarray,
                      weights: np.ndarray, logits_dtype: str) -> None:
        """record() for the routing op's recorder (switchyard._step.set_step_recorder):
        NumPy views valid during the call; 16-bit logits as their uint16 bits."""
        import torch
        logits = torch.from_numpy(logits.copy())
        if logits_dtype in ("bfloat16", "float16"):
            logits = logits.view(getattr(torch, logits_dtype))
        self.record(layer, logits, torch.from_numpy(ids), torch.from_numpy(weights))

    def _per_token(self, metadata, tokens: int) -> None:
        request_ids = np.asarray(metadata["request_ids"], np.int32)[:tokens]
        positions = metadata.get("positions")
        positions = (np.arange(tokens, dtype=np.int32) if positions is None
                     else np.asarray(positions, np.int32)[:tokens])
        phase = int(metadata.get("phase", 0))
        if phase == 2:   # mixed: per request, one scheduled token = decode
            counts = np.bincount(request_ids, minlength=int(request_ids.max()) + 1)
            per_token = np.where(counts[request_ids] > 1, 0, 1).astype(np.uint8)
        else:
            per_token = np.full(tokens, phase, np.uint8)
        draft = metadata.get("draft_mask")
        if draft is not None:
            per_token[np.asarray(draft)[:tokens] > 0] = 2   # verified draft tokens
        self.tokens["request_ids"].append(request_ids.copy())
        self.tokens["positions"].append(positions.copy())
        self.tokens["phase"].append(per_token)
        self.tokens["step"].append(np.full(tokens, self.step, np.int32))

    def trace(self):
        """What was recorded as a Trace (None before the first recorded step)."""
        from ..trace.format import Trace, ids_dtype
        if not self.layers or self.shape is None:
            return None
        experts, top_k = self.shape
        tokens = {name: np.concatenate(parts) for name, parts in self.tokens.items()}
        count = tokens["step"].shape[0]
        layers = {layer: entry for layer, entry in self.layers.items()
                  if sum(len(x) for x in entry["logits"]) == count}
        return Trace(num_experts=experts, top_k=top_k,
                     logits={l: np.concatenate(e["logits"]) for l, e in layers.items()},
                     ids={l: np.concatenate(e["ids"]).astype(ids_dtype(experts))
                          for l, e in layers.items()},
                     weights={l: np.concatenate(e["weights"]).astype(np.float32)
                              for l, e in layers.items()},
                     model=self.model or _model_name(), source="vllm",
                     meta=dict(self.geometry or _geometry()), **tokens)

    def write(self) -> Optional[str]:
        from ..trace.format import save_trace
        trace = self.trace()
        if trace is None:
            return None
        rank = self.rank if self.rank is not None else _rank()
        path = os.path.join(self.directory, f"rank-{rank}")
        save_trace(trace, path)
        logger.info("switchyard: routing trace of %d tokens x %d MoE layers written to %s",
                    trace.num_tokens, len(trace.layers), path)
        return path


def _rank() -> int:
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:   # pragma: no cover - torch without distributed
        pass
    return os.getpid()


def _geometry() -> dict:
    """hidden_size / moe_intermediate_size of the served model's config, and torch_dtype:
    the dtype vLLM serves it in (`dtype=`), else the config's."""
    from ..trace.hardware import DTYPE_BYTES, geometry_meta
    try:
        from vllm.config import get_current_vllm_config
        model_config = get_current_vllm_config().model_config
        config = model_config.hf_config
        text = getattr(config, "text_config", None) or config
        geometry = geometry_meta(text.to_dict())
    except Exception:
        return {}
    served = str(getattr(model_config, "dtype", "")).replace("torch.", "")
    if served in DTYPE_BYTES:
        geometry["torch_dtype"] = served
    return geometry


def _model_name() -> str:
    try:
        from vllm.config import get_current_vllm_config
        return str(get_current_vllm_config().model_config.model)
    except Exception:
        return ""


def _max_tokens() -> int:
    from .._errors import InputError
    text = os.environ.get(MAX_TOKENS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_TOKENS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise InputError(f"{MAX_TOKENS_ENV}={text!r}: expected a positive integer (tokens "
                         "per MoE layer)")
    return value


def recorder() -> Optional[Recorder]:
    """This process's recorder when SWITCHYARD_CAPTURE is set (created on first use, with
    its atexit writer), else None."""
    global _recorder
    directory = os.environ.get(CAPTURE_ENV, "").strip()
    if not directory:
        return None
    if _recorder is None:
        _recorder = Recorder(directory, _max_tokens())
        atexit.register(_write_at_exit)
        from .. import _step   # compiled graphs record from inside the routing op
        _step.set_step_recorder(_recorder.record_arrays)
    return _recorder


def flush() -> Optional[str]:
    """Writes this process's trace so far (DIR/rank-<rank>, a complete trace; later calls
    rewrite it); returns its path, or None when nothing was recorded."""
    return _recorder.write() if _recorder is not None else None


def _write_at_exit() -> None:
    try:
        flush()
    except Exception as error:   # exiting: say it, do not raise
        logger.error("switchyard: %s: the routing trace was not written: %s", CAPTURE_ENV,
                     error)
