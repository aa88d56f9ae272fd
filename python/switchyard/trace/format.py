"""The routing trace format (docs/traces.md): a directory of .npy files and meta.json.

A trace holds, per MoE layer, the router logits [T, E] (float32, or bfloat16 stored as
its uint16 bit pattern) and the model's own top-k ids [T, k] (uint8 when E <= 256,
else uint16) and weights [T, k] (float32); per token the request id, the position, the
phase (0 prefill, 1 decode, 2 verify) and the step (the forward pass). The reader also
accepts the plain layout: router_logits.npy [L, T, E] float32 and optional per-token
arrays, and a chunked trace: a directory of complete traces chunk-000000, chunk-000001,
... (what the vLLM capture writes as it goes), read as one trace of their steps in
order; a chunk still being written (.chunk-*.partial) is not read, so a trace cut at
any chunk boundary reads. Every malformation raises FileFormatError naming the file."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

import numpy as np

from .._errors import FileFormatError, InputError

FORMAT_NAME = "switchyard-trace"
FORMAT_VERSION = 1
PHASE_NAMES = {0: "prefill", 1: "decode", 2: "verify"}

# Per-token arrays: file stem -> stored dtype.
TOKEN_ARRAYS = {"request_ids": np.int32, "positions": np.int32, "phase": np.uint8,
                "step": np.int32}


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values stored as uint16 bit patterns -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (round to nearest even; NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16
    return np.where(np.isnan(x), np.uint32(0x7FC0), rounded).astype(np.uint16)


def ids_dtype(num_experts: int):
    """The compact dtype of expert ids: uint8 for E <= 256, else uint16."""
    return np.uint8 if num_experts <= 256 else np.uint16


class Trace:
    """A routing trace in memory (arrays may be memory-mapped).

    logits[layer]: [T, E] float32 or uint16 (bfloat16 bits; see `layer_logits`).
    ids[layer] / weights[layer]: the model's own routing [T, k], or absent.
    request_ids, positions, step: [T] int32; phase: [T] uint8."""

    def __init__(self, *, num_experts: int, top_k: int, logits: Dict[int, np.ndarray],
                 ids: Optional[Dict[int, np.ndarray]] = None,
                 weights: Optional[Dict[int, np.ndarray]] = None,
                 request_ids=None, positions=None, phase=None, step=None,
                 model: str = "", source: str = "", groups: Optional[int] = None,
                 dtype: Optional[str] = None, meta: Optional[dict] = None):
        self.num_experts = int(num_experts)
        self.top_k = int(top_k)
        self.layers: List[int] = sorted(int(layer) for layer in logits)
        self.logits = {int(k): np.asanyarray(v) for k, v in logits.items()}
        self.ids = {int(k): np.asanyarray(v) for k, v in (ids or {}).items()}
        self.weights = {int(k): np.asanyarray(v) for k, v in (weights or {}).items()}
        tokens = self.num_tokens
        # Whether the trace says which request each token belongs to (else all 0).
        self.request_ids_known = request_ids is not None
        self.request_ids = _default(request_ids, np.zeros(tokens, np.int32), np.int32)
        self.positions = _default(positions, np.arange(tokens, dtype=np.int32), np.int32)
        self.phase = _default(phase, np.zeros(tokens, np.uint8), np.uint8)
        self.step = _default(step, np.zeros(tokens, np.int32), np.int32)
        self.model = model
        self.source = source
        self.groups = groups
        if dtype is None:
            first = self.logits[self.layers[0]] if self.layers else None
            dtype = "bfloat16" if first is not None and first.dtype == np.uint16 else "float32"
        self.dtype = dtype
        self.meta = dict(meta or {})

    @property
    def num_tokens(self) -> int:
        return int(self.logits[self.layers[0]].shape[0]) if self.layers else 0

    def layer_logits(self, layer: int) -> np.ndarray:
        """The layer's logits as float32 [T, E] (bfloat16 bits widened)."""
        x = self.logits[layer]
        return bf16_bits_to_float32(x) if x.dtype == np.uint16 else np.asarray(x, np.float32)

    def meta_json(self) -> dict:
        meta = dict(self.meta)
        meta.update({"format": FORMAT_NAME, "version": FORMAT_VERSION, "model": self.model,
                     "num_experts": self.num_experts, "top_k": self.top_k,
                     "source": self.source, "dtype": self.dtype, "layers": self.layers})
        if self.groups is not None:
            meta["groups"] = int(self.groups)
        return meta


def _default(value, fallback, dtype):
    return fallback if value is None else np.asarray(value, dtype=dtype)


def _layer_file(layer: int, what: str) -> str:
    return f"layer_{layer}.{what}.npy"


def check_trace(trace: Trace) -> None:
    """The checks load_trace makes of the files, on a Trace built in memory (evaluate and
    save_trace make them): InputError naming the attribute. In memory, logits and weights
    may have any float dtype and ids any integer dtype (save_trace stores the format's)."""
    experts, k = trace.num_experts, trace.top_k
    if not 0 < k <= experts:
        raise InputError(f"Trace: num_experts = {experts}, top_k = {k}: need 0 < top_k <= "
                         f"num_experts")
    tokens = None
    for layer in trace.layers:
        label, logits = f"Trace.logits[{layer}]", trace.logits[layer]
        if (logits.dtype.kind != "f" and logits.dtype != np.uint16) or logits.ndim != 2:
            raise InputError(f"{label}: {logits.dtype} {logits.shape}, expected floats (or "
                             f"bfloat16 bits, uint16) [tokens, num_experts]")
        _check_logits(label, logits, experts, tokens)
        tokens = tokens or (logits.shape[0], label)
        if layer not in trace.ids:
            continue
        ids, weights = trace.ids[layer], trace.weights.get(layer)
        if ids.dtype.kind not in "iu" or ids.shape != (tokens[0], k):
            raise InputError(f"Trace.ids[{layer}]: {ids.dtype} {ids.shape}, expected integers "
                             f"({tokens[0]}, {k}) = (tokens, top_k)")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= experts):
            raise InputError(f"Trace.ids[{layer}]: expert ids in [{int(ids.min())}, "
                             f"{int(ids.max())}], outside [0, {experts})")
        if weights is not None and (weights.dtype.kind != "f" or weights.shape != ids.shape
                                    or np.isnan(weights).any()):
            raise InputError(f"Trace.weights[{layer}]: {weights.dtype} {weights.shape}, "
                             f"expected float {ids.shape} without NaN")
    for name in TOKEN_ARRAYS:
        array = getattr(trace, name)
        if array.shape != (trace.num_tokens,):
            raise InputError(f"Trace.{name}: shape {array.shape}, expected "
                             f"({trace.num_tokens},) = (tokens,)")
    if trace.phase.size and int(trace.phase.max()) > 2:
        raise InputError(f"Trace.phase: phase {int(trace.phase.max())} (0 prefill, 1 decode, "
                         f"2 verify)")


def save_trace(trace: Trace, directory) -> str:
    """Write `trace` as a trace directory (created if needed); returns its path."""
    check_trace(trace)
    missing = sorted(set(trace.ids) - set(trace.weights))
    if missing:
        raise InputError(f"Trace.weights: layers {missing} have ids but no weights (the "
                         f"format stores both)")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    compact = ids_dtype(trace.num_experts)
    for layer in trace.layers:
        logits = trace.logits[layer]
        if logits.dtype != np.uint16:
            logits = np.asarray(logits, np.float32)
        np.save(os.path.join(directory, _layer_file(layer, "logits")), logits)
        if layer in trace.ids:
            np.save(os.path.join(directory, _layer_file(layer, "ids")),
                    np.asarray(trace.ids[layer]).astype(compact))
            np.save(os.path.join(directory, _layer_file(layer, "weights")),
                    np.asarray(trace.weights[layer], np.float32))
    for name, dtype in TOKEN_ARRAYS.items():
        np.save(os.path.join(directory, name + ".npy"),
                np.asarray(getattr(trace, name), dtype=dtype))
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump(trace.meta_json(), f, indent=2)
        f.write("\n")
    load_trace(directory)  # what was written reads back: a malformed trace fails here
    return directory


def read_json_object(path: str, missing: str = "missing") -> dict:
    """A JSON file holding an object, or FileFormatError naming it."""
    if not os.path.isfile(path):
        raise FileFormatError(f"{path}: {missing}")
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise FileFormatError(f"{path}: not readable JSON: {e}") from None
    except RecursionError:
        raise FileFormatError(f"{path}: not readable JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise FileFormatError(f"{path}: not a JSON object")
    return value


def _read_meta(directory: str) -> dict:
    path = os.path.join(directory, "meta.json")
    meta = read_json_object(path, "missing (a trace directory has a meta.json)")
    for key in ("num_experts", "top_k"):
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise FileFormatError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    if meta["top_k"] > meta["num_experts"]:
        raise FileFormatError(f"{path}: top_k {meta['top_k']} > num_experts "
                              f"{meta['num_experts']}")
    groups = meta.get("groups")
    if groups is not None and (not isinstance(groups, int) or isinstance(groups, bool)
                               or not 0 < groups <= meta["num_experts"]):
        raise FileFormatError(f"{path}: 'groups' must be an integer in [1, num_experts = "
                              f"{meta['num_experts']}] or null, got {groups!r}")
    return meta


def _layer_list(meta_path: str, layers, what: str) -> List[int]:
    """meta.json's 'layers': distinct MoE layer indices (integers), or FileFormatError."""
    if (not isinstance(layers, list) or not layers
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in layers)
            or len(set(layers)) != len(layers)):
        raise FileFormatError(f"{meta_path}: 'layers' must be a list of distinct MoE layer "
                              f"indices (integers), {what}; got {layers!r:.200}")
    return layers


def _load(path: str, dtypes, ndim: int, required: bool = True) -> Optional[np.ndarray]:
    if not os.path.isfile(path):
        if os.path.lexists(path):   # a directory or a dangling link is not an absent file
            raise FileFormatError(f"{path}: not a regular file (a directory or a broken "
                                  f"link)")
        if required:
            raise FileFormatError(f"{path}: missing")
        return None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - a malformed header fails in many ways in numpy
        raise FileFormatError(f"{path}: not a readable .npy file: "
                              f"{type(e).__name__}: {e}") from None
    if not isinstance(array, np.ndarray):   # np.load opens a .npz archive as well
        array.close()
        raise FileFormatError(f"{path}: not a .npy file (an .npz archive?)")
    if array.dtype not in [np.dtype(d) for d in dtypes]:
        allowed = " or ".join(np.dtype(d).name for d in dtypes)
        raise FileFormatError(f"{path}: dtype {array.dtype}, expected {allowed}")
    if array.ndim != ndim:
        raise FileFormatError(f"{path}: shape {array.shape}, expected {ndim} dimensions")
    return array


def _check_logits(path: str, logits: np.ndarray, experts: int, tokens):
    if logits.shape[-1] != experts:
        raise FileFormatError(f"{path}: shape {logits.shape}: last dimension is not "
                              f"num_experts = {experts}")
    if tokens is not None and logits.shape[-2] != tokens[0]:
        raise FileFormatError(f"{path}: {logits.shape[-2]} tokens, {tokens[1]} has "
                              f"{tokens[0]}")
    values = bf16_bits_to_float32(logits) if logits.dtype == np.uint16 else logits
    if np.isnan(values).any():
        raise FileFormatError(f"{path}: NaN logits (write -inf for an unknown logit)")
    if np.isposinf(values).any():
        raise FileFormatError(f"{path}: +inf logits")
    unknown = np.argwhere(np.isneginf(values).all(axis=-1))
    if unknown.size:
        where = " of layer row ".join(str(int(i)) for i in unknown[0][::-1])
        raise FileFormatError(f"{path}: token {where} has no finite logit (every expert "
                              f"-inf)")


CHUNK_PREFIX = "chunk-"


def _chunk_names(directory: str) -> List[str]:
    """The chunk directories of a chunked trace, in order (none for a one-piece trace)."""
    names = sorted(name for name in os.listdir(directory) if name.startswith(CHUNK_PREFIX))
    for index, name in enumerate(names):
        if name != f"{CHUNK_PREFIX}{index:06d}":
            raise FileFormatError(f"{os.path.join(directory, name)}: expected "
                                  f"{CHUNK_PREFIX}{index:06d} here (chunks are numbered "
                                  f"from 000000 without gaps)")
    return names


def _load_chunked(directory: str, names: List[str]) -> Trace:
    """The chunks of a chunked trace as one Trace (concatenated in memory)."""
    chunks = [load_trace(os.path.join(directory, name)) for name in names]
    first = chunks[0]
    for name, chunk in zip(names[1:], chunks[1:]):
        for what in ("num_experts", "top_k", "layers", "dtype", "model"):
            if getattr(chunk, what) != getattr(first, what):
                raise FileFormatError(
                    f"{os.path.join(directory, name, 'meta.json')}: {what} "
                    f"{getattr(chunk, what)!r:.100}, {names[0]} has {getattr(first, what)!r:.100}")
        if set(chunk.ids) != set(first.ids):
            raise FileFormatError(f"{os.path.join(directory, name)}: ids of layers "
                                  f"{sorted(chunk.ids)}, {names[0]} has {sorted(first.ids)}")

    def joined(part: str) -> Dict[int, np.ndarray]:
        return {layer: np.concatenate([getattr(c, part)[layer] for c in chunks])
                for layer in getattr(first, part)}

    per_token = {name: np.concatenate([getattr(c, name) for c in chunks])
                 for name in TOKEN_ARRAYS}
    meta = dict(first.meta, chunks=len(chunks))
    return Trace(num_experts=first.num_experts, top_k=first.top_k, logits=joined("logits"),
                 ids=joined("ids"), weights=joined("weights"), model=first.model,
                 source=first.source, groups=first.groups, dtype=first.dtype, meta=meta,
                 **per_token)


def load_trace(directory) -> Trace:
    """Read a trace directory (the native, plain or chunked layout); arrays
    memory-mapped (a chunked trace's joined in memory)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileFormatError(f"{directory}: not a trace directory")
    if not os.path.lexists(os.path.join(directory, "meta.json")):
        chunks = _chunk_names(directory)
        if chunks:
            return _load_chunked(directory, chunks)
        partial = [n for n in os.listdir(directory) if n.startswith("." + CHUNK_PREFIX)]
        if partial:
            raise FileFormatError(f"{directory}: no complete chunk yet (only {partial[0]}, "
                                  f"still being written or cut off)")
    meta = _read_meta(directory)
    experts, k = meta["num_experts"], meta["top_k"]
    plain = os.path.join(directory, "router_logits.npy")
    logits, ids, weights = {}, {}, {}
    tokens = None
    meta_path = os.path.join(directory, "meta.json")
    if os.path.lexists(plain):
        stacked = _load(plain, [np.float32], 3)
        _check_logits(plain, stacked, experts, None)
        if stacked.shape[0] == 0:
            raise FileFormatError(f"{plain}: shape {stacked.shape}: no layers (L = 0)")
        layers = meta.get("layers")
        layers = list(range(stacked.shape[0])) if layers is None else _layer_list(
            meta_path, layers, f"{stacked.shape[0]} of them (router_logits.npy's L)")
        if len(layers) != stacked.shape[0]:
            raise FileFormatError(f"{meta_path}: 'layers' lists {len(layers)} layer indices, "
                                  f"router_logits.npy has L = {stacked.shape[0]}")
        logits = {layer: stacked[i] for i, layer in enumerate(layers)}
        tokens = (stacked.shape[1], "router_logits.npy")
    else:
        layers = _layer_list(meta_path, meta.get("layers"),
                             "at least one (or the directory holds router_logits.npy)")
        for layer in layers:
            path = os.path.join(directory, _layer_file(layer, "logits"))
            array = _load(path, [np.float32, np.uint16], 2)
            _check_logits(path, array, experts, tokens)
            tokens = tokens or (array.shape[0], os.path.basename(path))
            logits[layer] = array
            ids_path = os.path.join(directory, _layer_file(layer, "ids"))
            w_path = os.path.join(directory, _layer_file(layer, "weights"))
            layer_ids = _load(ids_path, [ids_dtype(experts)], 2, required=False)
            if layer_ids is None:
                continue
            layer_w = _load(w_path, [np.float32], 2)
            for path, array in ((ids_path, layer_ids), (w_path, layer_w)):
                if array.shape != (tokens[0], k):
                    raise FileFormatError(f"{path}: shape {array.shape}, expected "
                                          f"({tokens[0]}, {k}) = (tokens, top_k)")
            if layer_ids.size and int(layer_ids.max()) >= experts:
                raise FileFormatError(f"{ids_path}: expert id {int(layer_ids.max())} out of "
                                      f"[0, {experts})")
            if np.isnan(layer_w).any():
                raise FileFormatError(f"{w_path}: NaN weights")
            ids[layer], weights[layer] = layer_ids, layer_w
    per_token = {}
    for name, dtype in TOKEN_ARRAYS.items():
        path = os.path.join(directory, name + ".npy")
        array = _load(path, [dtype], 1, required=False)
        if array is not None and array.shape[0] != tokens[0]:
            raise FileFormatError(f"{path}: {array.shape[0]} tokens, {tokens[1]} has "
                                  f"{tokens[0]}")
        per_token[name] = array
    phase = per_token["phase"]
    if phase is not None and phase.size and int(phase.max()) > 2:
        raise FileFormatError(f"{os.path.join(directory, 'phase.npy')}: phase "
                              f"{int(phase.max())} (0 prefill, 1 decode, 2 verify)")
    dtype = meta.get("dtype")
    return Trace(num_experts=experts, top_k=k, logits=logits, ids=ids, weights=weights,
                 model=str(meta.get("model", "")), source=str(meta.get("source", "")),
                 groups=meta.get("groups"), dtype=dtype if isinstance(dtype, str) else None,
                 meta=meta, **per_token)
