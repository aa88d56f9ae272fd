"""Knob values as the request body wrote them: the OpenAI server's side of knobs.py.

vLLM's server parses a request with pydantic, whose lax mode turns a JSON `true` /
`false` in `vllm_xargs` (typed str | int | float | list) into 1 / 0 before any check can
see it. This ASGI middleware reads the raw JSON of a POST first and answers HTTP 400 in
the OpenAI error shape when a `switchyard.*` key of `vllm_xargs` holds a boolean (or a
list holding one), naming the knob; every other request passes through untouched, its
body replayed to the app. A body that does not mention the prefix is not parsed.

The plugin adds it to vLLM's app by itself (install(), in the API server's process);
`--middleware switchyard.vllm.middleware.StrictKnobsMiddleware` does the same by hand
where vLLM's app builder is not the one install() knows.
"""
import json
import logging
import re
import sys
from typing import Any, Optional

from .._knobs import quoted
from .settings import KNOB_PREFIX

logger = logging.getLogger("vllm.switchyard")
_MENTIONS_PREFIX = re.compile(re.escape(KNOB_PREFIX.encode()), re.IGNORECASE)
# vLLM's app builder, which calls init_entrypoints_middleware(args, app, tasks).
_APP_MODULE = "vllm.entrypoints.launchers.app"
_DOTTED_NAME = f"{__name__}.StrictKnobsMiddleware"


def _holds_bool(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, list)
                                       and any(isinstance(v, bool) for v in value))


def refused_knob(body: bytes) -> Optional[str]:
    """The message for a body whose vllm_xargs give a knob a JSON boolean; None for
    every other body (a malformed one is left to vLLM's own answer)."""
    if not _MENTIONS_PREFIX.search(body):
        return None
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    xargs = request.get("vllm_xargs") if isinstance(request, dict) else None
    if not isinstance(xargs, dict):
        return None
    for key, value in xargs.items():
        if key.lower().startswith(KNOB_PREFIX) and _holds_bool(value):
            knob = key[len(KNOB_PREFIX):]
            shown = json.dumps(value) if isinstance(value, bool) else "a list holding a boolean"
            takes = ('it takes "policy" or "model"' if key == KNOB_PREFIX + "route"
                     else f"knob {quoted(knob)} takes a number")
            return f"vllm_xargs: {quoted(key)} is {shown}: {takes}, not a JSON boolean"
    return None


class StrictKnobsMiddleware:
    """ASGI middleware: HTTP 400 for a knob given a JSON boolean (module docstring)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":   # the client left: nothing to answer
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        error = refused_knob(body)
        if error is not None:
            payload = json.dumps({"error": {"message": error, "type": "BadRequestError",
                                            "param": "vllm_xargs", "code": 400}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def install() -> None:
    """Adds StrictKnobsMiddleware to the app vLLM's OpenAI server builds, in the process
    that builds it (the module is imported there before plugins load; elsewhere this
    does nothing). Idempotent; a server given it through --middleware gets it once."""
    module = sys.modules.get(_APP_MODULE)
    original = getattr(module, "init_entrypoints_middleware", None)
    if original is None or getattr(original, "switchyard_wrapped", False):
        return

    def init_entrypoints_middleware(args, app, *rest, **kwargs):
        result = original(args, app, *rest, **kwargs)
        if _DOTTED_NAME not in (getattr(args, "middleware", None) or []):
            app.add_middleware(StrictKnobsMiddleware)
        return result

    init_entrypoints_middleware.switchyard_wrapped = True
    module.init_entrypoints_middleware = init_entrypoints_middleware
