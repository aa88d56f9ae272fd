"""Routing traces from a vLLM engine: SWITCHYARD_CAPTURE=DIR (docs/traces.md, docs/vllm.md).

With the variable set, every routing call a SwitchyardRouter makes is recorded per MoE
layer (eager calls directly; under torch.compile the routing op records at run time,
through the runtime's step recorder, switchyard._step.set_step_recorder; CUDA graph
replays run no Python and are not recorded): the router logits [T, E] and the ids /
weights the policy returned, with the step's batch metadata (batch.py): request ids,
positions, phase (prefill 0, decode 1, draft tokens 2; in a mixed step a request
scheduling one token counts as decode) and step (this process's forward counter).
vLLM's warm-up and profiling runs (no requests) are not recorded. At most
SWITCHYARD_CAPTURE_MAX_TOKENS tokens per layer (default 65536): one warning when a step
would go past it, then nothing more.

The trace is written as it is recorded, so that a worker killed without warning (vLLM's
API server SIGKILLs its engine at shutdown by default) leaves what it routed: each
process writes DIR/rank-<rank> (the torch.distributed rank while the engine runs, else
the process id) as numbered chunks, chunk-000000, chunk-000001, ..., each a complete
trace of whole steps written to a temporary directory and renamed into place (a reader
never sees half a chunk; load_trace joins them). A background thread writes a chunk
when SWITCHYARD_CAPTURE_CHUNK_TOKENS tokens per layer are waiting (default 4096) or the
oldest waiting step is SWITCHYARD_CAPTURE_FLUSH_SECONDS old (default 2), at once when
the token limit is reached, and the rest at exit, on SIGTERM / SIGINT, or on flush().
The forward pass only hands finished steps to the thread. Unset, routers get no
recorder: the only per-call cost is one `is None` check.
"""
import atexit
import logging
import os
import queue
import shutil
import signal
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

CAPTURE_ENV = "SWITCHYARD_CAPTURE"
MAX_TOKENS_ENV = "SWITCHYARD_CAPTURE_MAX_TOKENS"
CHUNK_TOKENS_ENV = "SWITCHYARD_CAPTURE_CHUNK_TOKENS"
FLUSH_SECONDS_ENV = "SWITCHYARD_CAPTURE_FLUSH_SECONDS"
DEFAULT_MAX_TOKENS = 65536
DEFAULT_CHUNK_TOKENS = 4096
DEFAULT_FLUSH_SECONDS = 2.0
# At exit or on a signal, how long to wait for the writer to put the last chunk down.
FINAL_WAIT_SECONDS = 30.0

logger = logging.getLogger("vllm.switchyard")   # under vLLM's logger: its handler prints it
_recorder: Optional["Recorder"] = None


class _Step:
    """One recorded forward pass: its per-token arrays and, per layer, the NumPy copies
    (logits, ids, weights) of its routing call."""
    __slots__ = ("tokens", "count", "layers")

    def __init__(self, tokens: Dict[str, np.ndarray], count: int):
        self.tokens = tokens
        self.count = count
        self.layers: Dict[int, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


class _Flush:
    """Asks the writer to write what waits now; `done` is set once it is on disk."""

    def __init__(self, final: bool):
        self.final = final
        self.done = threading.Event()


class Recorder:
    """The routing calls of one process; layers are numbered in the order vLLM builds
    their routers (MoE layer 0, 1, ...).

    The forward pass (record) only builds steps and hands each finished one to a queue;
    the writer thread alone groups them into chunks and writes. Nothing is shared but
    the queue, so a signal handler that flushes in the middle of a record() call cannot
    deadlock and never writes half a step."""

    def __init__(self, directory: str, max_tokens: int,
                 chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
                 flush_seconds: float = DEFAULT_FLUSH_SECONDS):
        self.directory = directory
        self.max_tokens = max_tokens
        self.chunk_tokens = chunk_tokens
        self.flush_seconds = flush_seconds
        self.shape: Optional[tuple] = None   # (experts, top_k) of the layers
        self.capturable: Set[int] = set()    # layers new_layer admitted
        self.num_layers = 0
        self.step = -1
        self.last_layer: Optional[int] = None
        self.current: Optional[_Step] = None  # the step being recorded
        self.stopped = False
        self.recorded = 0
        self.rank: Optional[int] = None      # read while the engine runs
        # The served model's name and experts' sizes, read while vLLM builds the layers:
        # its current config is gone when the last chunk is written at exit.
        self.model: Optional[str] = None
        self.geometry: Optional[dict] = None
        # The writer thread's own state.
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._writer: Optional[threading.Thread] = None
        self._layout: Optional[List[int]] = None   # the layers every chunk holds
        self._path: Optional[str] = None
        self.chunks_written = 0
        self.tokens_written = 0
        self._warned_partial = False

    def new_layer(self, layer: int, experts: int, top_k: int) -> bool:
        """MoE layer `layer` (the router's number) is built: captured when it has the
        first layer's shape (a trace has one); returns whether it is."""
        if not self.model:
            self.model = _model_name()
        if not self.geometry:
            self.geometry = _geometry()
        self.num_layers += 1
        if self.shape is None:
            self.shape = (experts, top_k)
        elif self.shape != (experts, top_k):
            logger.warning("switchyard: %s: MoE layer %d has %d experts, top-%d, unlike the "
                           "first layer's %s: it is not captured (a trace has one shape)",
                           CAPTURE_ENV, layer, experts, top_k, self.shape)
            return False
        self.capturable.add(layer)
        return True

    def record(self, layer: int, logits, ids, weights) -> None:
        """One layer's routing call (eager, or the op inside a compiled graph; not in
        vLLM's warm-up runs)."""
        from .._metadata import current_metadata
        if self.stopped or layer not in self.capturable:
            return
        metadata = current_metadata() or {}
        if metadata.get("warmup_step") or "request_ids" not in metadata:
            return
        if self.last_layer is None or layer <= self.last_layer:   # a new forward pass
            self._finish_step()
            self.step += 1
            tokens = int(logits.shape[0])
            if self.recorded + tokens > self.max_tokens:
                self.stopped = True
                logger.warning("switchyard: %s=%d reached after %d tokens per layer; "
                               "recording stopped", MAX_TOKENS_ENV, self.max_tokens,
                               self.recorded)
                self._hand(_Flush(final=False))   # what was recorded goes to disk now
                return
            if self.rank is None:
                self.rank = _rank()
            self.current = _Step(self._per_token(metadata, tokens), tokens)
            self.recorded += tokens
        self.last_layer = layer
        step = self.current
        if step is None or int(logits.shape[0]) != step.count:
            return
        from ..trace.capture import _logits_numpy
        step.layers[layer] = (_logits_numpy(logits), ids.detach().to("cpu").numpy().copy(),
                              weights.detach().float().to("cpu").numpy().copy())
        if len(step.layers) == len(self.capturable):   # every layer: the step is whole
            self._finish_step()

    def record_arrays(self, layer: int, logits: np.ndarray, ids: np.ndarray,
                      weights: np.ndarray, logits_dtype: str) -> None:
        """record() for the routing op's recorder (switchyard._step.set_step_recorder):
        NumPy views valid during the call; 16-bit logits as their uint16 bits."""
        import torch
        logits = torch.from_numpy(logits.copy())
        if logits_dtype in ("bfloat16", "float16"):
            logits = logits.view(getattr(torch, logits_dtype))
        self.record(layer, logits, torch.from_numpy(ids), torch.from_numpy(weights))

    def _per_token(self, metadata, tokens: int) -> Dict[str, np.ndarray]:
        request_ids = np.asarray(metadata["request_ids"], np.int32)[:tokens].copy()
        positions = metadata.get("positions")
        positions = (np.arange(tokens, dtype=np.int32) if positions is None
                     else np.asarray(positions, np.int32)[:tokens].copy())
        from .._metadata import phase_number
        phase = phase_number(metadata.get("phase", 0))
        if phase == 2:   # mixed: per request, one scheduled token = decode
            counts = np.bincount(request_ids, minlength=int(request_ids.max()) + 1)
            per_token = np.where(counts[request_ids] > 1, 0, 1).astype(np.uint8)
        else:
            per_token = np.full(tokens, phase, np.uint8)
        draft = metadata.get("draft_mask")
        if draft is not None:
            per_token[np.asarray(draft)[:tokens] > 0] = 2   # verified draft tokens
        return {"request_ids": request_ids, "positions": positions, "phase": per_token,
                "step": np.full(tokens, self.step, np.int32)}

    # -- handing steps to the writer ---------------------------------------------------

    def _finish_step(self, whole_only: bool = False) -> None:
        """Hands the step being recorded to the writer (with `whole_only`, only when every
        layer has recorded it: a flush in the middle of a forward pass keeps it)."""
        step = self.current
        if step is None or not step.layers:
            return
        if whole_only and len(step.layers) != len(self.capturable):
            return
        self.current = None
        self._hand(step)

    def _hand(self, item) -> None:
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                            name="switchyard-capture")
            self._writer.start()
        self._queue.put(item)   # SimpleQueue.put is safe in a signal handler

    def flush(self, final: bool = False, wait: float = FINAL_WAIT_SECONDS) -> Optional[str]:
        """Writes every whole step recorded so far as a chunk and waits (at most `wait`
        seconds) until it is on disk; `final` also ends recording and the writer.
        Returns the trace's directory, or None when nothing was written."""
        if self._writer is None and self.current is None:
            return self._path
        self._finish_step(whole_only=True)
        if final:
            self.stopped = True
        request = _Flush(final)
        self._hand(request)
        if not request.done.wait(wait):
            logger.error("switchyard: %s: the routing trace's last chunk was not written "
                         "within %.0f s", CAPTURE_ENV, wait)
        return self._path

    # -- the writer thread -------------------------------------------------------------

    def _write_loop(self) -> None:
        waiting: List[_Step] = []
        oldest = 0.0
        while True:
            timeout = (None if not waiting
                       else max(0.0, oldest + self.flush_seconds - time.monotonic()))
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None   # the oldest waiting step is flush_seconds old
            if isinstance(item, _Step):
                if not waiting:
                    oldest = time.monotonic()
                waiting.append(item)
                if sum(step.count for step in waiting) < self.chunk_tokens:
                    continue
            if waiting:
                self._write_chunk(waiting)
                waiting = []
            if isinstance(item, _Flush):
                item.done.set()
                if item.final:
                    if self.chunks_written:
                        logger.info("switchyard: routing trace of %d tokens x %d MoE layers "
                                    "in %d chunks written to %s", self.tokens_written,
                                    len(self._layout or ()), self.chunks_written, self._path)
                    return

    def _write_chunk(self, steps: List[_Step]) -> None:
        from ..trace.format import save_trace
        try:
            trace = self._chunk(steps)
            if trace is None:
                return
            directory = self._directory()
            name = f"chunk-{self.chunks_written:06d}"
            partial = os.path.join(directory, f".{name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            save_trace(trace, partial)
            os.rename(partial, os.path.join(directory, name))   # atomic: whole or absent
        except Exception as error:   # the engine keeps serving; say it once per chunk
            logger.error("switchyard: %s: %d steps of the routing trace were not written: "
                         "%s", CAPTURE_ENV, len(steps), error)
            return
        if not self.chunks_written:
            logger.info("switchyard: writing the routing trace to %s (a chunk per %d tokens "
                        "or %g s)", directory, self.chunk_tokens, self.flush_seconds)
        self.chunks_written += 1
        self.tokens_written += trace.num_tokens

    def _directory(self) -> str:
        """DIR/rank-<rank>, made on the first chunk (an earlier run's trace there is
        replaced, with a warning)."""
        if self._path is None:
            rank = self.rank if self.rank is not None else _rank()
            path = os.path.join(self.directory, f"rank-{rank}")
            if os.path.lexists(path):
                logger.warning("switchyard: %s: %s held an earlier trace; replacing it",
                               CAPTURE_ENV, path)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            os.makedirs(path)
            self._path = path
        return self._path

    def _chunk(self, steps: List[_Step]):
        """Whole steps as one Trace: the layers of the first step ever written, so that
        every chunk has the same (steps missing one of them are left out, with a
        warning)."""
        from ..trace.format import Trace, ids_dtype
        if self._layout is None:
            self._layout = sorted(steps[0].layers)
        whole = [step for step in steps if all(layer in step.layers for layer in self._layout)]
        if len(whole) < len(steps) and not self._warned_partial:
            self._warned_partial = True
            logger.warning("switchyard: %s: a step did not route every MoE layer %s; such "
                           "steps are left out of the trace", CAPTURE_ENV, self._layout)
        if not whole:
            return None
        experts, top_k = self.shape

        def joined(part: int, dtype=None):
            return {layer: np.concatenate([step.layers[layer][part] for step in whole])
                    .astype(dtype or whole[0].layers[layer][part].dtype, copy=False)
                    for layer in self._layout}

        tokens = {name: np.concatenate([step.tokens[name] for step in whole])
                  for name in whole[0].tokens}
        return Trace(num_experts=experts, top_k=top_k, logits=joined(0),
                     ids=joined(1, ids_dtype(experts)), weights=joined(2, np.float32),
                     model=self.model or "", source="vllm", meta=dict(self.geometry or {}),
                     **tokens)


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


def _positive(name: str, default, kind=int, what: str = ""):
    """The environment variable `name` as a positive `kind`, `default` when unset;
    InputError naming it otherwise."""
    from .._errors import InputError
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if not value > 0 or value == float("inf"):
        raise InputError(f"{name}={text!r}: expected a positive "
                         f"{'integer' if kind is int else 'number'} ({what})")
    return value


def recorder() -> Optional[Recorder]:
    """This process's recorder when SWITCHYARD_CAPTURE is set (created on first use, with
    its exit and signal flushes), else None."""
    global _recorder
    directory = os.environ.get(CAPTURE_ENV, "").strip()
    if not directory:
        return None
    if _recorder is None:
        _recorder = Recorder(
            directory, _positive(MAX_TOKENS_ENV, DEFAULT_MAX_TOKENS, int, "tokens per MoE layer"),
            _positive(CHUNK_TOKENS_ENV, DEFAULT_CHUNK_TOKENS, int, "tokens per chunk"),
            _positive(FLUSH_SECONDS_ENV, DEFAULT_FLUSH_SECONDS, float,
                      "seconds a recorded step may wait before it is written"))
        atexit.register(_flush_at_exit)
        _flush_on_signals()
        from .. import _step   # compiled graphs record from inside the routing op
        _step.set_step_recorder(_recorder.record_arrays)
    return _recorder


def flush() -> Optional[str]:
    """Writes what this process recorded so far (whole steps, as a new chunk of
    DIR/rank-<rank>) and waits for it; returns the trace's directory, or None when
    nothing was recorded."""
    return _recorder.flush() if _recorder is not None else None


def _flush_at_exit() -> None:
    try:
        if _recorder is not None:
            _recorder.flush(final=True)
    except Exception as error:   # exiting: say it, do not raise
        logger.error("switchyard: %s: the routing trace was not written: %s", CAPTURE_ENV,
                     error)


def _flush_on_signals() -> None:
    """On SIGTERM / SIGINT: write what was recorded, then do what the signal did before
    (vLLM's handler, Python's KeyboardInterrupt, or the default: end the process). Only
    the main thread may set handlers; elsewhere exit and chunks are the safety net."""
    if threading.current_thread() is not threading.main_thread():
        return
    for number in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(number)

        def handler(signum, frame, previous=previous):
            try:
                if _recorder is not None:
                    _recorder.flush()
            except Exception as error:
                logger.error("switchyard: %s: the routing trace was not written on signal "
                             "%d: %s", CAPTURE_ENV, signum, error)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:   # the default (or one set outside Python)
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(number, handler)
