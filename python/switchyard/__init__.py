"""Switchyard: MoE routing policies written once in the `moe` dialect, compiled to host
code and GPU kernels, called from Python and PyTorch.

    import switchyard
    router = switchyard.compile("xshare", model="config.json")   # or experts=, top_k=
    out = router(logits=x, knobs={"budget": 8})   # numpy in -> numpy out, torch -> torch
    out["topk_ids"], out["topk_weights"]

Engines: switchyard.routing (bind, custom_routing_function: engine-neutral; re-exported
by switchyard.vllm / switchyard.sglang), switchyard.hf
(patch a transformers model), switchyard.ops (the torch custom op), batch metadata with
switchyard.batch_metadata(...). The executor: switchyard.Executor(model_dir, policy).
Routing traces: switchyard.trace. The engine submodules are attributes of the package,
imported on first access (module __getattr__): `import switchyard` loads neither torch
nor transformers nor vLLM; switchyard.ops needs torch, switchyard.hf imports
transformers only when a model is patched, switchyard.vllm imports vLLM only in its
plugin and router (when an engine uses them).
"""
import importlib as _importlib

from ._switchyard import (DType, EntryKind, Knob, KnobRule, Param, ParamKind, Signature,
                          SwitchyardError, ValueSet)
from ._errors import (CompileError, CompileWarning, DeviceError, Diagnostic, FileFormatError,
                      InputError, KnobError)
from ._metadata import batch_metadata, current_metadata, set_batch_metadata
from ._router import Router
from ._compile import (SHAPE_PARAMS, cache_dir, compile, list_entries, policy_path,
                       shape_flags, shipped_policies)
from ._executor import ExecResult, Executor
from . import _layout

__version__ = "0.5.0"

#: Where this copy of the package keeps the compiler, the shipped policies and the
#: installed C++ package (find_package(Switchyard) with CMAKE_PREFIX_PATH=cmake_prefix_path).
compiler_dir = _layout.BIN_DIR
policy_dir = _layout.POLICY_DIR
model_dir = _layout.MODEL_DIR

__all__ = ["SwitchyardError", "CompileError", "CompileWarning", "Diagnostic", "InputError",
           "KnobError", "FileFormatError", "DeviceError",
           "Router", "compile", "list_entries", "policy_path", "shape_flags", "shipped_policies",
           "cache_dir", "SHAPE_PARAMS", "batch_metadata", "current_metadata",
           "set_batch_metadata", "Executor", "ExecResult",
           # a compiled entry's signature, as the runtime describes it (Router.signature)
           "Signature", "Param", "Knob", "KnobRule", "DType", "ParamKind", "ValueSet",
           "EntryKind"]

#: Submodules imported on first access as attributes (switchyard.vllm, ...): they need
#: torch, transformers or vLLM when used, never at `import switchyard`.
_LAZY_SUBMODULES = ("hf", "ops", "routing", "sglang", "trace", "vllm")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        # import_module binds the submodule as an attribute of the package, so this
        # runs once per submodule.
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
