"""The vLLM general plugin (entry point `vllm.general_plugins`: switchyard =
switchyard.vllm.plugin:register). vLLM calls register() in every process it starts
(front end, engine core, workers) before it builds a model.

With SWITCHYARD_POLICY set, register():
  1. reads the settings (policy, SWITCHYARD_KNOBS) — bad JSON stops the engine here;
  2. replaces vLLM's router factory (create_fused_moe_router, called by every FusedMoE
     layer as it is built) with one that returns a SwitchyardRouter: the policy
     compiled for that layer's shape when the model loads, never inside a traced
     forward, so eager and torch.compile runs see the same single op;
  3. adds the check of per-request knobs to vLLM's request validation (knobs.py);
  4. wraps the model runner's forward (GPUModelRunner._model_forward, which vLLM's
     CPU runner inherits) so each step's batch metadata — per-token request ids and
     positions, the phase, draft tokens — is set for the policies that read it.
With SWITCHYARD_CAPTURE=DIR also set, the routers record what they route as a routing
trace per process (capture.py).
Unset, it does nothing and vLLM is untouched.
"""
import json
import os
from typing import Any, Dict, Optional

POLICY_ENV = "SWITCHYARD_POLICY"
KNOBS_ENV = "SWITCHYARD_KNOBS"
#: A JSON file of engine-wide knobs, re-read when it changes (no restart).
KNOBS_FILE_ENV = "SWITCHYARD_KNOBS_FILE"

_installed = False


class Settings:
    """The plugin's settings, from the environment."""

    def __init__(self, policy: str, knobs: Dict[str, Any]):
        self.policy = policy
        self.knobs = knobs

    @classmethod
    def from_environment(cls) -> Optional["Settings"]:
        policy = os.environ.get(POLICY_ENV, "").strip()
        if not policy:
            return None
        return cls(policy, parse_knobs(os.environ.get(KNOBS_ENV, "")))


def parse_knobs(text: str, source: str = KNOBS_ENV, allow_empty: bool = True) -> Dict[str, Any]:
    """A JSON object of knob name -> number, or -> a list of numbers with one value per
    MoE layer: SWITCHYARD_KNOBS, or the knobs file
    `source`. Numbers only (no bools, strings, NaN or Infinity; the policy's own types —
    integers for integer knobs — are checked where the routers are bound); an empty
    text is {} unless `allow_empty` is false (a knobs file caught half-written). Errors
    name `source` and quote at most _knobs.QUOTE_LIMIT characters."""
    from .._errors import KnobError
    from .._knobs import describe, quoted
    if not text.strip():
        if allow_empty:
            return {}
        raise KnobError(f"{source}: empty; write a JSON object such as "
                        '\'{"budget": 8}\' (\'{}\' for no knobs)')

    def refuse_constant(name):
        raise ValueError(f"{name} is not a number a knob takes")

    try:
        knobs = json.loads(text, parse_constant=refuse_constant)
    except ValueError as error:
        raise KnobError(f"{source}: not JSON ({quoted(str(error))}); expected an object "
                        'such as \'{"budget": 8}\'') from None
    if not isinstance(knobs, dict):
        raise KnobError(f"{source}: expected a JSON object of knob values, got "
                        f"{type(knobs).__name__}")
    for name, value in knobs.items():
        values = value if isinstance(value, list) else [value]
        for item in values:   # a list: one value per MoE layer
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise KnobError(f"{source}: knob {quoted(name)} takes a number or a list of "
                                f"numbers (one per MoE layer), got {describe(item)}")
    from .._knobs import split_layers
    split_layers(knobs, f"{source}: ")   # lists of one length
    return knobs


def register() -> None:
    """vLLM's entry point. Idempotent (vLLM may call it more than once)."""
    global _installed
    settings = Settings.from_environment()
    if settings is None or _installed:
        return
    from . import batch, knobs, middleware, router
    router.install(settings)
    batch.install(settings)
    knobs.install(settings)
    middleware.install()
    _installed = True
