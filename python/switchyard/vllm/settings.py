"""The plugin's settings and the spelling of its knobs, shared by every part of the
plugin (router, batch, knobs, middleware); it imports no other part of it.

  SWITCHYARD_POLICY       the policy: a shipped policy's name or a .mlir file
  SWITCHYARD_KNOBS        engine-wide knobs, a JSON object (numbers, or per-layer lists)
  SWITCHYARD_KNOBS_FILE   a JSON file of engine-wide knobs, re-read when it changes
  extra_args              per-request knobs {"switchyard.<knob>": value}, and
                          {"switchyard.route": "model"} to pin a request to the model's
                          own routing
"""
import json
import os
from typing import Any, Dict, Optional

from .._errors import KnobError
from .._knobs import describe, quoted, split_layers

POLICY_ENV = "SWITCHYARD_POLICY"
KNOBS_ENV = "SWITCHYARD_KNOBS"
#: A JSON file of engine-wide knobs, re-read when it changes (no restart).
KNOBS_FILE_ENV = "SWITCHYARD_KNOBS_FILE"


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
    split_layers(knobs, f"{source}: ")   # lists of one length
    return knobs


KNOB_PREFIX = "switchyard."
#: The per-request setting that pins a request to the model's own routing; not a knob.
ROUTE_KEY = KNOB_PREFIX + "route"
ROUTE_VALUES = ("policy", "model")


def request_knobs(extra_args: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The knobs a request's extra_args set ({"switchyard.budget": 4} -> {"budget": 4})."""
    if not extra_args:
        return {}
    return {key[len(KNOB_PREFIX):]: value for key, value in extra_args.items()
            if isinstance(key, str) and key.startswith(KNOB_PREFIX) and key != ROUTE_KEY}


def pinned_request(extra_args: Optional[Dict[str, Any]]) -> bool:
    """Whether a request's extra_args ask for the model's own routing."""
    return bool(extra_args) and extra_args.get(ROUTE_KEY) == "model"
