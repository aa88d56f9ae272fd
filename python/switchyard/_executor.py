"""switchyard.Executor: the MoE layers of a Hugging Face checkpoint with a compiled policy
in the forward pass (the engine moe-exec runs), from Python."""
import json
from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from . import _compile  # noqa: F401  (sets the compiler and policy directories)
from . import _switchyard
from . import _errors  # noqa: F401  (registers the exception class of each status code)
from ._metadata import current_metadata


class ExecResult(NamedTuple):
    """What one batch produced: `output` (the stack's hidden states [T, H], or with
    block_only a dict layer -> MoE_l(x)), `routing` (layer -> (topk_ids, topk_weights),
    replayable) and `metrics` (moe-exec's metrics.json: per layer active experts, tokens
    per expert, bytes read, FLOPs, seconds per stage)."""
    output: Any
    routing: Dict[int, Tuple[np.ndarray, np.ndarray]]
    metrics: Dict[str, Any]


class Executor:
    """A checkpoint's MoE layers:

        ex = switchyard.Executor("ckpt/", policy="xshare", knobs={"budget": 16})
        result = ex.run(hidden, request_ids=ids, positions=pos)
        again = ex.run(hidden, replay=result.routing)   # the same routing, bit for bit

    model_dir  a directory with config.json and *.safetensors (Mixtral, Qwen2-MoE,
               Qwen3-MoE, OLMoE, DeepSeek-V3)
    policy     a .mlir file, policy text or a shipped policy's name (default: the
               model's native routing)
    layers     (first, last): the checkpoint's layer range [first, last)
    device     "host", "cuda" or "cuda:N"
    """

    def __init__(self, model_dir: str, policy: Optional[str] = None, *,
                 knobs: Optional[Dict[str, Any]] = None, entry: Optional[str] = None,
                 layers: Optional[Tuple[int, int]] = None, device: str = "host"):
        path = _compile.policy_path(policy) if policy else ""
        settings = [f"{k}={int(v) if isinstance(v, bool) else v}"
                    for k, v in (knobs or {}).items()]
        self._native = _switchyard.Executor(str(model_dir), path, entry or "", settings,
                                            layers, device)
        self.info = self._native.describe()

    def run(self, hidden, *, request_ids=None, positions=None, phase: Optional[str] = None,
            block_only: bool = False, replay=None) -> ExecResult:
        """Runs one batch of hidden states [T, H] (float32; other float dtypes are
        converted). Request ids / positions default to the current batch metadata."""
        metadata = current_metadata() or {}
        if request_ids is None:
            request_ids = metadata.get("request_ids")
        if positions is None:
            positions = metadata.get("positions")
        if phase is None and isinstance(metadata.get("phase"), str):
            phase = metadata["phase"]
        hidden = _host_array(hidden)
        output, routing, metrics = self._native.run(
            hidden, _host_array(request_ids), _host_array(positions), phase or "",
            block_only, replay)
        return ExecResult(output, dict(routing), json.loads(metrics))


def _host_array(value):
    if value is None:
        return None
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().contiguous()
        if value.dtype.is_floating_point and value.dtype != value.new_empty(0).float().dtype:
            value = value.float()
        return value.numpy()
    return np.ascontiguousarray(value)
