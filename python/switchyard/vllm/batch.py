"""The step's batch metadata from vLLM's model runner, for batch-aware policies.

vLLM passes its router only the logits. The runner knows more: which request each
scheduled token belongs to (query_start_loc over the persistent batch), its position,
whether the request is still in its prompt (prefill) or generating (decode), and
which tokens are speculative drafts being verified. The plugin wraps the runner's
forward (GPUModelRunner._model_forward; vLLM's CPU runner inherits it) and sets, for
the whole step (this rank's global batch, padding rows included):

  request_ids  int32 [T]  the request's index in the step (padding rows: num_reqs)
  positions    int32 [T]  the token's position in its sequence
  draft_mask   int32 [T]  1 for a draft token being verified, else 0
  phase        int        0 every request in prefill, 1 all decode, 2 mixed
  knobs        dict       per-request knobs (SamplingParams.extra_args, see below)

vLLM's warm-up, profiling and compile runs (GPUModelRunner._dummy_run: no requests)
run under `warmup_step` metadata: one request, positions 0..T-1, no drafts, phase 1
for uniform-decode runs and 0 otherwise.

Per-request knobs: a request sets a policy knob with extra_args
{"switchyard.<knob>": value} (the OpenAI server fills extra_args from a request's
`vllm_xargs`). The knobs of a step are those its requests agree on; requests that
set different values are routed in groups of equal settings (switchyard._step).
A request with {"switchyard.route": "model"} is pinned: its tokens are routed by the
model's own routing (the layer's pinned router), whatever the policy and its batch-mates
(metadata `pinned_rows`); "policy" (the default) routes it by the policy.
"""
import functools
import json
import logging
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np

from .._metadata import batch_metadata
from . import router
from .settings import KNOBS_FILE_ENV, ROUTE_KEY, parse_knobs, pinned_request, request_knobs

# Under vLLM's own logger ("vllm"), so its handler (pid, timestamp) prints our lines.
logger = logging.getLogger("vllm.switchyard")


class EngineKnobs:
    """Engine-wide knobs from $SWITCHYARD_KNOBS_FILE (a JSON object), re-read when its
    CONTENT changes: read again at once when its (mtime, size, inode) change, and at
    least every RECHECK_SECONDS anyway, so a same-size rewrite within one mtime tick is
    not missed; knobs change without a restart. An applied reload is logged once at
    INFO through vLLM's logger (pid, time, the file, the knobs now in force); a bad,
    empty or half-written file is logged as an error naming the file, and the last good
    knobs stay."""

    RECHECK_SECONDS = 0.05

    def __init__(self, path: str):
        self.path = path
        self.stamp = None
        self.content: Optional[bytes] = None
        self.read_at = float("-inf")
        self.knobs: Dict[str, Any] = {}

    def current(self) -> Dict[str, Any]:
        try:
            stat = os.stat(self.path)
        except OSError:
            return self.knobs
        now = time.monotonic()
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if stamp == self.stamp and now - self.read_at < self.RECHECK_SECONDS:
            return self.knobs
        self.stamp, self.read_at = stamp, now
        try:
            with open(self.path, "rb") as f:
                content = f.read(1 << 20)
        except OSError:
            return self.knobs
        if content == self.content:
            return self.knobs
        self.content = content
        try:
            knobs = parse_knobs(content.decode("utf-8", errors="replace"), self.path,
                                allow_empty=False)
            for step in router.policy_steps():   # the policy's own rules, every layer shape
                step.check_knobs(knobs, layers=router.built_layers() or None)
            self.knobs = knobs
            logger.info("switchyard: engine knobs from %s now in force: %s", self.path,
                        json.dumps(self.knobs, sort_keys=True))
        except Exception as error:   # keep serving with the last good knobs
            message = str(error)
            if self.path not in message:   # a policy rule's message: name the file
                message = f"{self.path}: {message}"
            logger.error("switchyard: %s (keeping %s)", message,
                         json.dumps(self.knobs, sort_keys=True))
        return self.knobs


_engine_knobs = None
# SWITCHYARD_KNOBS's per-layer lists: applied every step, as the runtime picks a layer's
# value by the op's layer (the one-value knobs are the routers' compiled defaults).
static_layer_knobs: Dict[str, Any] = {}


_warned_unpinnable = False


def _pinnable() -> bool:
    """Whether the layers have the model's own routing to pin requests to (router.py);
    else, once, a warning: such requests are routed by the policy."""
    global _warned_unpinnable
    reason = router.unpinnable_reason()
    if reason and not _warned_unpinnable:
        _warned_unpinnable = True
        logger.warning("switchyard: a request asks for the model's own routing (%s = "
                       "\"model\"), but %s: it is routed by the policy", ROUTE_KEY, reason)
    return reason is None


def step_metadata(runner, num_tokens: int, positions) -> Dict[str, Any]:
    """The metadata of the step the runner is about to run (see the module doc)."""
    batch = runner.input_batch
    num_reqs = batch.num_reqs
    starts = runner.query_start_loc.np[: num_reqs + 1]
    counts = np.diff(starts).astype(np.int64)
    request_ids = np.full(num_tokens, num_reqs, dtype=np.int32)
    request_ids[: int(starts[-1])] = np.repeat(np.arange(num_reqs, dtype=np.int32), counts)
    prefill = batch.num_computed_tokens_cpu[:num_reqs] < batch.num_prompt_tokens[:num_reqs]
    phase = 0 if prefill.all() else 1 if not prefill.any() else 2
    draft_mask = np.zeros(num_tokens, dtype=np.int32)
    scheduled = getattr(runner, "_switchyard_scheduler_output", None)
    spec = getattr(scheduled, "scheduled_spec_decode_tokens", None) or {}
    engine = {**static_layer_knobs,
              **(_engine_knobs.current() if _engine_knobs is not None else {})}
    knob_sets: List[tuple] = []   # (request index, its knobs) of the unpinned requests
    pinned: List[int] = []   # requests routed by the model's own routing
    for index, req_id in enumerate(batch.req_ids[:num_reqs]):
        drafts = len(spec.get(req_id, ()))
        if drafts:
            end = int(starts[index + 1])
            draft_mask[end - drafts:end] = 1
        state = runner.requests.get(req_id)
        extra = getattr(getattr(state, "sampling_params", None), "extra_args", None)
        if pinned_request(extra) and _pinnable():
            pinned.append(index)
            continue
        knob_sets.append((index, {**engine, **request_knobs(extra)}))
    metadata: Dict[str, Any] = {"request_ids": request_ids, "draft_mask": draft_mask,
                                "phase": phase}
    if positions is not None:
        if positions.dim() == 2:   # M-RoPE: [3, T], the first row is the text position
            positions = positions[0]
        metadata["positions"] = positions.to("cpu").numpy().astype(np.int32, copy=False)
    if engine and not num_reqs:
        metadata["knobs"] = engine
    def rows(members):
        return np.concatenate([np.arange(starts[i], starts[i + 1]) for i in members]
                              ).astype(np.int64)

    if any(knobs for _, knobs in knob_sets):
        # Requests alike in their knobs (values may be per-layer lists: keyed as JSON).
        groups: Dict[str, tuple] = {}
        for index, knobs in knob_sets:
            key = json.dumps(knobs, sort_keys=True)
            groups.setdefault(key, (knobs, []))[1].append(index)
        if len(groups) == 1:
            metadata["knobs"] = knob_sets[0][1]
        else:
            metadata["knob_groups"] = [(rows(members), knobs)
                                       for knobs, members in groups.values()]
    elif engine:   # every request pinned: the padding rows take the engine's knobs
        metadata["knobs"] = engine
    if pinned:
        metadata["pinned_rows"] = rows(pinned)
    return metadata


def install(settings=None) -> None:
    """Wraps the model runner so every forward step runs under its batch metadata;
    `settings`' per-layer knob lists apply to every step."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    global _engine_knobs
    if settings is not None:
        static_layer_knobs.update({name: value for name, value in settings.knobs.items()
                                   if isinstance(value, list)})
    path = os.environ.get(KNOBS_FILE_ENV, "").strip()
    if path and _engine_knobs is None:
        _engine_knobs = EngineKnobs(path)
    if getattr(GPUModelRunner._model_forward, "switchyard_wrapped", False):
        return
    forward = GPUModelRunner._model_forward
    execute = GPUModelRunner.execute_model

    @functools.wraps(forward)
    def _model_forward(self, input_ids=None, positions=None, *args, **kwargs):
        tokens = None
        for tensor in (input_ids, positions, kwargs.get("inputs_embeds")):
            if tensor is not None:
                tokens = tensor.shape[0]
                break
        if tokens is None or not hasattr(self, "input_batch"):
            return forward(self, input_ids, positions, *args, **kwargs)
        with batch_metadata(**step_metadata(self, tokens, positions)):
            return forward(self, input_ids, positions, *args, **kwargs)

    @functools.wraps(execute)
    def execute_model(self, scheduler_output, *args, **kwargs):
        self._switchyard_scheduler_output = scheduler_output
        return execute(self, scheduler_output, *args, **kwargs)

    dummy_run = GPUModelRunner._dummy_run

    @functools.wraps(dummy_run)
    def _dummy_run(self, num_tokens, *args, **kwargs):
        # Warm-up, profiling and compile runs call the model directly with no requests:
        # they state it (phase decode for uniform-decode runs, else prefill).
        phase = 1 if kwargs.get("uniform_decode") else 0
        with batch_metadata(warmup_step=True, phase=phase):
            return dummy_run(self, num_tokens, *args, **kwargs)

    _model_forward.switchyard_wrapped = True
    GPUModelRunner._model_forward = _model_forward
    GPUModelRunner.execute_model = execute_model
    GPUModelRunner._dummy_run = _dummy_run
