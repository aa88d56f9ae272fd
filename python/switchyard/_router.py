"""Router: a compiled policy entry, called on NumPy arrays or torch tensors.

NumPy in -> NumPy out; torch in -> torch out. Torch tensors cross into the runtime through
DLPack with no copy (CPU tensors for the host target, CUDA tensors launched on the
current torch stream for the cuda target) and every result is a tensor torch allocated.
Inputs are checked as moe-run checks them (names, shapes, dtypes, values); float16 and
bfloat16 logits and int64 ids are accepted (converted, which copies), unless the entry was
compiled with input_dtypes={"logits": "bfloat16"} (or "float16"): it then reads that
dtype in place (no copy) and refuses float32 (narrowing would round).
"""
import copy
import sys
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from ._errors import InputError
from ._errors import KnobError
from . import _op_keys
from ._switchyard import DType
from ._knobs import checked_knobs, split_layers
from ._metadata import PHASES, current_metadata, knob_settings

# The NumPy dtype of each result's element type (a set's results are bool).
_NUMPY_DTYPES = {DType.float32: np.float32, DType.int32: np.int32, DType.int64: np.int64}


def _torch_compiling() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "__dlpack__")


def result_numpy_dtype(param) -> Any:
    """The NumPy dtype of a result parameter's array."""
    return np.bool_ if param.is_set else _NUMPY_DTYPES[param.dtype]


class Router:
    """One compiled router (or rule) entry. Call it with its inputs by name:

        out = router(logits=x)                     # {"topk_ids": ..., "topk_weights": ...}
        out = router(logits=x, request_ids=r, phase="decode", knobs={"budget": 8})

    `inputs`, `outputs` and `knobs` name what the entry takes, returns and lets you tune
    (`knobs`: name -> the runtime's Knob: dtype, default, rules); `signature` is the
    runtime's own description of the entry (switchyard.Signature: typed parameters,
    kinds and dtypes as enums); `list()` describes all three as plain data.

    What engine adapters (switchyard.ops, the torch bridge, step routers) read is
    public and read-only: `native` (the loaded entry), `result_params` /
    `selected_params` (the results' Params, all / selected; `selected_names`), `tensor_inputs`,
    `scalar_inputs` and `token_inputs` (input names), `input_dtypes`,
    `default_settings` / `layer_settings` (the configured knobs as "name=value"),
    `op_key`, `settings()`, `tokens()` and `run()`.
    """

    def __init__(self, native, target: str, source: str):
        self.native = native
        self.signature = native.signature
        self.target = target
        self.source = source
        self.entry: str = self.signature.entry
        self.kind = self.signature.kind
        params = list(self.signature.params)
        self.params = params
        self.inputs: List[str] = []
        for p in params:
            if not p.is_output and p.input_name not in self.inputs:
                self.inputs.append(p.input_name)
        self.scalar_inputs = [p.name for p in params if p.is_scalar]
        self.tensor_inputs = [n for n in self.inputs if n not in self.scalar_inputs]
        #: Each input's element type (bfloat16 / float16: compiled with input_dtypes).
        self.input_dtypes = {p.name: p.dtype for p in params if not p.is_output}
        self.result_params = [p for p in params if p.is_output]
        self.outputs: List[str] = [p.name for p in self.result_params]
        #: Inputs whose first dimension is the tokens (the token count comes from one).
        self.token_inputs = [p.name for p in params if not p.is_output and p.shape
                             and p.shape[0] < 0 and tuple(p.size_rule) == (1, 0, 1)]
        self.knobs: Dict[str, Any] = {k.name: k for k in self.signature.knobs}
        #: The configured knobs (configured(knobs=...)) as "name=value" settings.
        self.default_settings: List[str] = []
        #: Per-layer defaults (configured(knobs=) with lists): MoE layer i's settings.
        self.layer_settings: List[List[str]] = []
        self.selected_params = list(self.result_params)
        #: Their names (plain strings: what a torch.compile trace reads).
        self.selected_names = list(self.outputs)
        self._new_op_key()

    def _new_op_key(self) -> None:
        #: This Router's key in torch.ops.switchyard.route's calls (switchyard.ops).
        self.op_key = _op_keys.new_key(self, self.entry)

    # -- configuration ------------------------------------------------------------------
    def configured(self, knobs: Optional[Dict[str, Any]] = None,
                   outputs: Optional[Iterable[str]] = None) -> "Router":
        """This router with default knob values and a selection of results."""
        if not knobs and outputs is None:
            return self
        clone = copy.copy(self)
        clone._new_op_key()
        if knobs:
            uniform, per_layer = split_layers(checked_knobs(knobs, self.knobs, self.entry))
            clone.default_settings = knob_settings(uniform)
            clone.layer_settings = [knob_settings(layer) for layer in per_layer]
            for layer in clone.layer_settings or [[]]:
                self.native.check_knobs(clone.default_settings + layer)
        if outputs is not None:
            wanted = list(outputs)
            unknown = [n for n in wanted if n not in self.outputs]
            if unknown:
                raise InputError(f"unknown result '{unknown[0]}' of @{self.entry} (its "
                                 f"results: {', '.join(self.outputs)})")
            clone.selected_params = [p for p in self.result_params if p.name in wanted]
            clone.selected_names = [p.name for p in clone.selected_params]
        return clone

    def list(self) -> Dict[str, Any]:
        """The entry, its arguments, results and knobs (as `moe-run --list` prints them)."""
        def describe(p):
            return {"name": p.name, "dtype": p.dtype.name, "shape": p.shape_text}
        return {
            "entry": self.entry, "kind": self.kind.name, "target": self.target,
            "arguments": [describe(p) for p in self.params if not p.is_output],
            "results": [describe(p) for p in self.result_params],
            "knobs": [{"name": k.name, "dtype": k.dtype.name, "default": k.default,
                       "rules": [r.text for r in k.rules]} for k in self.knobs.values()],
        }

    def __repr__(self) -> str:
        return (f"<switchyard.Router @{self.entry} ({self.target}) inputs={self.inputs} "
                f"outputs={self.selected_names}>")

    # -- calls --------------------------------------------------------------------------
    def _knob_settings(self, knobs: Dict[str, Any], layer: Optional[int] = None) -> List[str]:
        """`name=value` settings of `knobs`, each name and value checked strictly
        (_knobs.checked_knobs: integers for integer knobs, finite numbers for float
        ones); a per-layer list gives MoE layer `layer`'s value. The policy's rules are
        checked where the settings are packed."""
        uniform, per_layer = split_layers(checked_knobs(knobs, self.knobs, self.entry))
        return knob_settings(uniform) + (
            knob_settings(self._of_layer(per_layer, layer, knobs)) if per_layer else [])

    def _of_layer(self, per_layer: List[Any], layer: Optional[int], knobs) -> Any:
        """MoE layer `layer`'s entry of per-layer knobs (KnobError without a layer, or
        one past their end)."""
        names = ", ".join(sorted({name for entry in per_layer for name in entry}
                                 if isinstance(per_layer[0], dict) else
                                 {s.split("=")[0] for entry in per_layer for s in entry}))
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise KnobError(f"@{self.entry}: knobs {names} give one value per MoE layer: "
                            "call with layer= (the MoE layer's number)")
        if not 0 <= layer < len(per_layer):
            raise KnobError(f"@{self.entry}: knobs {names} give {len(per_layer)} values, one "
                            f"per MoE layer; layer={layer} has none")
        return per_layer[layer]

    def settings(self, knobs: Optional[Dict[str, Any]] = None,
                 layer: Optional[int] = None) -> List[str]:
        """The "name=value" settings of a call: the defaults (the layer's own, for
        per-layer defaults), then the call's knobs."""
        settings = list(self.default_settings)
        if self.layer_settings:
            settings += self._of_layer(self.layer_settings, layer, None)
        return settings + (self._knob_settings(knobs, layer) if knobs else [])

    def result_shape(self, name_or_param, tokens: int) -> List[int]:
        """The shape of a result for `tokens` tokens."""
        p = name_or_param
        if isinstance(p, str):
            p = next(q for q in self.result_params if q.name == p)
        a, b, d = p.size_rule
        return [-(-(a * tokens + b) // d) if s < 0 else s for s in p.shape]

    def tokens(self, inputs: Dict[str, Any]) -> int:
        """The token count of a call's inputs (the first dimension of a token input)."""
        for name in self.token_inputs:
            value = inputs.get(name)
            if value is not None and hasattr(value, "shape") and len(value.shape):
                return int(value.shape[0])
        return 0

    def _gather(self, args, inputs: Dict[str, Any]) -> Dict[str, Any]:
        if args:
            if len(args) > 1 or self.inputs[0] in inputs:
                raise InputError(f"@{self.entry} takes one positional argument "
                                 f"({self.inputs[0]}); pass the others by name")
            inputs[self.inputs[0]] = args[0]
        missing = [n for n in self.inputs if n not in inputs]
        if missing:
            metadata = current_metadata()
            if metadata:
                for name in missing:
                    if name in metadata:
                        inputs[name] = metadata[name]
        missing = [n for n in self.inputs if inputs.get(n) is None]
        if missing:   # named as a Python caller passes it (moe-run's advice is --arg)
            p = next(q for q in self.params
                     if not q.is_output and q.input_name == missing[0])
            shape = "" if p.is_scalar else " " + p.shape_text
            hint = " or set it for the step with switchyard.batch_metadata(...)" \
                if missing[0] in ("request_ids", "positions", "draft_mask", "phase") else ""
            raise InputError(f"@{self.entry}: missing required argument '{missing[0]}' "
                             f"({p.dtype.name}{shape}): pass {missing[0]}=...{hint}")
        phase = inputs.get("phase")
        if isinstance(phase, str):
            if phase not in PHASES:
                raise InputError(f"argument 'phase': '{phase}' is not prefill, decode or mixed")
            inputs["phase"] = PHASES[phase]
        for name in self.scalar_inputs:
            value = inputs.get(name)
            if value is None or (isinstance(value, int) and not isinstance(value, bool)):
                continue
            item = value.item() if hasattr(value, "item") and getattr(value, "size", 1) == 1 \
                else value
            if isinstance(item, bool) or not isinstance(item, (int, float)) or \
                    (isinstance(item, float) and not item.is_integer()):
                raise InputError(f"argument '{name}': expected an integer (int32), got {item!r}")
            inputs[name] = int(item)
        return inputs

    def __call__(self, *args, knobs: Optional[Dict[str, Any]] = None,
                 layer: Optional[int] = None, **inputs) -> Dict[str, Any]:
        """Routes a batch: inputs by name (the first may be positional); `knobs` for
        this call; `layer`, the MoE layer's number, picks per-layer knob values."""
        if _torch_compiling():  # one node in the graph: the custom op
            if args:
                inputs[self.inputs[0]] = args[0]
            if layer is not None or self.layer_settings or any(
                    isinstance(v, (list, tuple)) for v in (knobs or {}).values()):
                raise KnobError(f"@{self.entry}: per-layer knobs under torch.compile: bind "
                                "the router per layer (configured(knobs=the layer's values))")
            from . import ops
            results = ops.route(self, knobs=knobs, **inputs)
            return dict(zip(self.selected_names, results))
        inputs = self._gather(args, inputs)
        return self.run(inputs, self.settings(knobs, layer))

    def run(self, inputs: Dict[str, Any], settings: List[str]) -> Dict[str, Any]:
        """Runs the entry eagerly on gathered inputs (every input present, by name) with
        "name=value" knob settings: the selected results by name."""
        tensor = next((v for v in inputs.values() if _is_torch(v)), None)
        if tensor is not None:
            from . import _torch
            return _torch.call(self, inputs, settings, tensor)
        return self._call_numpy(inputs, settings)

    def _call_numpy(self, inputs: Dict[str, Any], settings: List[str]) -> Dict[str, Any]:
        if self.target != "host":
            raise InputError(f"@{self.entry} was compiled for {self.target}: call it with "
                             "CUDA tensors (NumPy arrays live on the host)")
        arrays = {}
        for name, value in inputs.items():
            if isinstance(value, (int, np.integer)) and name in self.scalar_inputs:
                arrays[name] = int(value)
            else:
                arrays[name] = np.ascontiguousarray(value)
        tokens = self.tokens(arrays)
        outputs = {p.name: np.empty(self.result_shape(p, tokens), result_numpy_dtype(p))
                   for p in self.selected_params}
        self.native.run(arrays, outputs, settings)
        return outputs
