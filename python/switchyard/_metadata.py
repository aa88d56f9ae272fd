"""Batch metadata for batch-aware policies (LYNX's phase gate, XShare-spec's per-request
sets): no engine passes request ids or phases to its router, so the engine states them
once per forward step and every Switchyard router called inside reads what it declares.

    with switchyard.batch_metadata(request_ids=ids, phase="decode"):
        model(input_ids)                 # the patched routers see ids and the phase

    switchyard.set_batch_metadata(request_ids=ids, phase="mixed")   # or per step
    ...
    switchyard.set_batch_metadata()                                  # clear

An argument given to a router call explicitly wins over the metadata. Values are
per-token arrays/tensors (request_ids, positions, draft_mask) or a phase name / number.
"""
import contextlib
import contextvars
from typing import Any, Dict, Optional

_current: contextvars.ContextVar = contextvars.ContextVar("switchyard_batch_metadata",
                                                          default=None)

PHASES = {"prefill": 0, "decode": 1, "mixed": 2}


def set_batch_metadata(**values: Any) -> None:
    """Sets the metadata of the current step (no arguments: clears it)."""
    _current.set(dict(values) if values else None)


def current_metadata() -> Optional[Dict[str, Any]]:
    """The metadata set for the current step, or None."""
    return _current.get()


@contextlib.contextmanager
def batch_metadata(**values: Any):
    """The metadata of the forward passes run inside the `with` block."""
    token = _current.set(dict(values))
    try:
        yield
    finally:
        _current.reset(token)
