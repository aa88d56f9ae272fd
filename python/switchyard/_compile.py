"""switchyard.compile: a policy (a file, policy text or a shipped policy's name) bound to
a model's shape, compiled once per (policy text, shape, target) by the runtime's policy
cache, loaded as a Router."""
import hashlib
import json
from collections.abc import Mapping
import os
import subprocess
import threading
import warnings
from typing import Any, Dict, Iterable, Optional, Union

from . import _layout
from . import _shapes
from . import _switchyard
from ._errors import CompileError, KnobError, SwitchyardError, compiler_warnings
from ._router import Router
from ._shapes import SHAPE_PARAMS  # noqa: F401  (switchyard.SHAPE_PARAMS)

# The compiler and the shipped policies of this copy of the package (the executor and
# the policy cache read these variables; a user's own setting wins).
os.environ.setdefault("SWITCHYARD_MOE_COMPILE", os.path.join(_layout.BIN_DIR, "moe-compile"))
os.environ.setdefault("SWITCHYARD_POLICY_DIR", _layout.POLICY_DIR)

TARGETS = ("host", "cuda")

_routers: Dict[tuple, Router] = {}
_lock = threading.Lock()


def shipped_policies() -> Dict[str, str]:
    """The shipped policies, name -> path."""
    return {name[:-5]: os.path.join(_layout.POLICY_DIR, name)
            for name in sorted(os.listdir(_layout.POLICY_DIR)) if name.endswith(".mlir")}


def cache_dir() -> str:
    """Where compiled policies are kept ($SWITCHYARD_CACHE_DIR, else ~/.cache/switchyard)."""
    return _switchyard.default_cache_dir()


def _stash(kind: str, text: str, suffix: str) -> str:
    """`text` in a file under the cache named by its hash (policy text, model configs)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = os.path.join(cache_dir(), kind)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, digest + suffix)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def policy_path(policy: Union[str, os.PathLike]) -> str:
    """The file of `policy`: a path, a shipped policy's name, or policy text."""
    policy = os.fspath(policy)
    if os.path.isfile(policy):
        return os.path.abspath(policy)
    shipped = shipped_policies()
    if policy in shipped:
        return shipped[policy]
    if "moe." in policy and ("\n" in policy or "{" in policy):
        return _stash("sources", policy, ".mlir")
    raise SwitchyardError(f"policy '{policy}' is not a file, policy text or a shipped "
                          f"policy (shipped: {', '.join(shipped)})")


def _model_path(model: Any) -> Optional[str]:
    if model is None:
        return None
    if hasattr(model, "to_dict"):   # a transformers PretrainedConfig
        model = model.to_dict()
    if isinstance(model, dict):
        return _stash("models", json.dumps(model, sort_keys=True, default=str), ".json")
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise SwitchyardError(f"model: '{path}' is not a config.json file")
    return os.path.abspath(path)


def _only_entry(directory: str) -> str:
    """The entry of an artifact directory holding exactly one (a router or a rule), else
    "" (the runtime then takes the only router, or says which to name)."""
    try:
        with open(os.path.join(directory, "manifest.json")) as f:
            entries = json.load(f)["entries"]
    except (OSError, ValueError, KeyError):
        return ""
    return entries[0]["entry"] if len(entries) == 1 else ""


def _dtype_name(dtype: Any) -> str:
    """The name of a dtype given as a string ("bfloat16", "bf16"), a torch dtype or a
    NumPy type; moe-compile's --input-dtype checks it (its one table of spellings)."""
    text = str(getattr(dtype, "__name__", dtype))
    return text[len("torch."):] if text.startswith("torch.") else text


def shape_flags(**shape: Any) -> list:
    """moe-compile's flags for a shape binding (experts=128 -> --experts 128, ...)."""
    return _shapes.shape_flags(shape, SwitchyardError, hint=", or model=")


def _frozen_value(name: str, value: Any) -> str:
    """A knob value freeze_knobs compiles in: a number (the compiler checks it against
    the knob's dtype and rules), never a bool, a string, NaN / inf or a per-layer list;
    KnobError naming the knob otherwise."""
    import math
    from ._knobs import describe, quoted
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        what = "a list (per-layer values are run-time knobs)" if isinstance(
            value, (list, tuple)) else describe(value)
        raise KnobError(f"freeze_knobs: knob {quoted(name)} takes a number, got {what}")
    if isinstance(value, float) and not math.isfinite(value):
        raise KnobError(f"freeze_knobs: knob {quoted(name)} takes a finite number, got "
                        f"{value!r}")
    return repr(value) if isinstance(value, float) else str(value)


def compile(policy: Union[str, os.PathLike], *, model: Any = None,
            experts: Optional[int] = None, top_k: Optional[int] = None,
            target: str = "host", knobs: Optional[Dict[str, Any]] = None,
            entry: Optional[str] = None, outputs: Optional[Iterable[str]] = None,
            allow_unused: Optional[bool] = None, freeze_knobs: bool = False,
            host_threads_min_work: Optional[int] = None,
            input_dtypes: Optional[Dict[str, Any]] = None, fill_empty_slots: bool = False,
            knob_groups: Optional[int] = None, **shape: Any) -> Router:
    """Compiles `policy` for `target` ("host" or "cuda") bound to a model's shape and
    returns a Router.

    policy   a .mlir file, policy text, or a shipped policy's name ("xshare", ...)
    model    a Hugging Face config.json path, a dict, or a transformers config object
    experts, top_k, groups, topk_groups, devices, slots, nodes, hidden_size,
    shared_experts, scaling, norm_topk_prob
             the shape, as moe-compile's flags (override the model's values)
    knobs    default run-time knob values of the Router (a call may override them)
    entry    the router or rule of a file with several
    outputs  the results to compile (moe-compile --outputs: what feeds only the others
             is not compiled; default: all)
    allow_unused
             accept model sizes the policy has no use for (default: when model= is
             given, as a config describes more than one policy needs)
    freeze_knobs
             compile `knobs` into the code as constants (moe-compile --set k=v
             --freeze-knobs): the entry then has no run-time knobs
    host_threads_min_work
             host target: the batch size T * E from which the router's token loops
             run on OpenMP threads (OMP_NUM_THREADS; default 16384, 0: never)
    input_dtypes
             {"logits": "bfloat16"}: the element type float32 tensor inputs of the
             compiled entry take ("bfloat16"/"bf16", "float16"/"f16", "float32"/"f32",
             or torch.bfloat16 / torch.float16; moe-compile --input-dtype NAME=DTYPE).
             The entry reads that memory in place, widening each value to float32 as it
             loads it: bf16 torch tensors (CPU or CUDA) and float16 arrays bind with no
             copy; a float32 tensor for such an input is an InputError (narrowing rounds)

    fill_empty_slots
             a serving engine's contract in the compiled code (moe-compile
             --fill-empty-slots): every slot of topk_ids an expert in [0, E), a slot
             the policy leaves empty with weight 0 and an expert the token (or else the
             batch) already uses

    knob_groups
             target "cuda" only: route up to this many knob groups (1..64) in one
             launch (moe-compile --knob-groups): the router takes input `knob_group`
             (int32 per token) and a knob memory of that many structs, each group's
             tokens routed as a batch of their own with its struct; every result must
             be per token (outputs=("topk_ids", "topk_weights"))

    Compiling is cached on disk (cache_dir()) and in the process: the same policy text,
    shape and target compile once.
    """
    if target not in TARGETS:
        raise SwitchyardError(f"target '{target}' is not one of {', '.join(TARGETS)}")
    path = policy_path(policy)
    flags = shape_flags(experts=experts, top_k=top_k, **shape)
    model_file = _model_path(model)
    if model_file:
        flags += ["--model", model_file]
    if allow_unused if allow_unused is not None else model_file is not None:
        flags.append("--allow-unused-sizes")
    if entry:
        flags += ["--entry", entry]
    if outputs is not None:  # compiled out: the code that feeds only the others is gone
        outputs = list(outputs)
        flags += ["--outputs", ",".join(outputs)]
    if host_threads_min_work is not None:
        if isinstance(host_threads_min_work, bool) or not isinstance(host_threads_min_work, int) \
                or host_threads_min_work < 0:
            raise SwitchyardError("host_threads_min_work must be an integer >= 0, got "
                                  f"{host_threads_min_work!r}")
        flags.append(f"--host-threads-min-work={host_threads_min_work}")
    if fill_empty_slots:
        flags.append("--fill-empty-slots")
    for name, dtype in sorted((input_dtypes or {}).items()):
        flags += ["--input-dtype", f"{name}={_dtype_name(dtype)}"]
    if knobs is not None and not isinstance(knobs, Mapping):
        raise KnobError(f"knobs: expected a dict of knob name -> value, got "
                        f"{type(knobs).__name__}")
    if freeze_knobs:
        for name, value in (knobs or {}).items():
            flags += ["--set", f"{name}={_frozen_value(name, value)}"]
        flags.append("--freeze-knobs")
        knobs = None
    compile_target = "host"
    if target == "cuda":
        compile_target = "all"
        flags.append("--launcher-library")
    if knob_groups is not None:
        if isinstance(knob_groups, bool) or not isinstance(knob_groups, int) \
                or not 1 <= knob_groups <= 64:
            raise SwitchyardError(f"knob_groups must be an integer in [1, 64], got "
                                  f"{knob_groups!r}")
        if target != "cuda":
            raise SwitchyardError("knob_groups builds a GPU entry (target=\"cuda\"); the "
                                  "host routes knob groups by rows (batch_metadata)")
        flags.append(f"--knob-groups={knob_groups}")
        compile_target = "cuda"   # the GPU entry alone: it takes one more input
    with open(path, "rb") as f:
        text_key = hashlib.sha256(f.read()).hexdigest()
    key = (text_key, tuple(flags), target)
    with _lock:
        loaded = _routers.get(key)
    if loaded is None:
        directory, _ = _switchyard.compile(path, flags, compile_target)
        native = _switchyard.Policy(directory, entry or _only_entry(directory),
                                    target == "cuda")
        _warn_compiler_warnings(directory, set(knobs or {}))
        loaded = Router(native, target, path)
        with _lock:
            _routers.setdefault(key, loaded)
    return loaded.configured(knobs=knobs, outputs=outputs)


def _warn_compiler_warnings(directory: str, knobs_set=frozenset()) -> None:
    """The compiler's warnings (the cache entry's diagnostics.json, which moe-compile
    writes) as CompileWarnings: what moe-opt / moe-compile would have printed, less
    those about the default of a knob in `knobs_set` (the Router's own defaults replace
    it)."""
    try:
        with open(os.path.join(directory, "diagnostics.json"), errors="replace") as f:
            entries = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return
    if not isinstance(entries, list):
        return
    for warning in compiler_warnings([e for e in entries if isinstance(e, dict)]):
        if warning.knob not in knobs_set:
            warnings.warn(warning, stacklevel=3)


def list_entries(policy: Union[str, os.PathLike], *, model: Any = None,
                 allow_unused: Optional[bool] = None, **shape: Any) -> list:
    """Every router and rule of a policy file bound to a shape: name, kind, arguments,
    results and knobs (what `moe-run --list` prints). Errors are CompileErrors."""
    flags = shape_flags(**shape)
    model_file = _model_path(model)
    if model_file:
        flags += ["--model", model_file]
    if allow_unused if allow_unused is not None else model_file is not None:
        flags.append("--allow-unused-sizes")
    moe_run = os.path.join(os.path.dirname(os.environ["SWITCHYARD_MOE_COMPILE"]), "moe-run")
    result = subprocess.run([moe_run, policy_path(policy), "--list"] + flags,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise CompileError((result.stderr or result.stdout).strip()
                           or f"moe-run --list exited with {result.returncode}")
    return json.loads(result.stdout)["entries"]
