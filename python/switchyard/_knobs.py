"""Knob values as every channel takes them — `compile(knobs=)`, a router call's `knobs=`,
SWITCHYARD_KNOBS, the engine's knobs file, a request's extra_args — checked in one place,
strictly, with messages of bounded size:

- an integer knob (int64) takes an integer (a JSON integer) in [-2**63, 2**63): not a
  bool, not a string, not a float, not even 8.0;
- a float knob (float32) takes an integer or a float, finite (NaN and infinities are
  refused: no shipped rule allows them);
- an unknown name is refused with the policy's knobs, and a name that differs from one
  only in case or separators says which it means;
- a quoted name or value is cut to QUOTE_LIMIT characters, with its length;
- a knob may take one value per MoE layer: a list, indexed by the MoE layer's number
  (0, 1, ... in the order the model's MoE layers run; split_layers), every list of a
  setting as long as the others and, where the model is known, one value per MoE layer.

The policy's own rules (`budget must be in [0, inf]`) are checked after these, by the
compiled code's rule checks (Router.configured / the runtime's knob packing).
"""
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._errors import KnobError

#: The most characters of a name or value a message quotes.
QUOTE_LIMIT = 100
INT64_MIN, INT64_END = -2 ** 63, 2 ** 63


def quoted(value: Any) -> str:
    """repr(value), cut to QUOTE_LIMIT characters with its length when longer."""
    text = repr(value)
    if len(text) <= QUOTE_LIMIT:
        return text
    return f"{text[:QUOTE_LIMIT]}... ({len(text)} characters)"


def describe(value: Any) -> str:
    """What a refused value is, for a message ("the boolean true", "the string '8'")."""
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    if isinstance(value, str):
        return f"the string {quoted(value)}"
    if isinstance(value, float):
        return f"the number {quoted(value)}"
    if value is None:
        return "null"
    return f"{type(value).__name__} {quoted(value)}"


def _spelling(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def did_you_mean(name: str, known) -> str:
    """' (did you mean 'budget'?)' when `name` differs from a known name only in case
    or separators; '' otherwise."""
    matches = [k for k in known if _spelling(k) == _spelling(str(name))]
    return f" (did you mean {quoted(matches[0])}?)" if matches else ""


def check_value(name: str, value: Any, spec: Any, where: str = "") -> Any:
    """`value` for knob `name` (`spec`: the runtime's Knob, float32 or int64) as the
    compiled code takes it; KnobError naming the knob otherwise. `where` prefixes the
    message (the channel)."""
    if spec.is_float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KnobError(f"{where}knob '{name}' takes a number, got {describe(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise KnobError(f"{where}knob '{name}' takes a finite number, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise KnobError(f"{where}knob '{name}' takes an integer, got {describe(value)}")
    if not INT64_MIN <= value < INT64_END:
        raise KnobError(f"{where}knob '{name}' = {quoted(value)} is outside the 64-bit "
                        "integers [-2**63, 2**63)")
    return value


def split_layers(knobs: Mapping[str, Any], where: str = "",
                 layers: Optional[int] = None) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """(the knobs with one value, [the per-layer knobs of MoE layer 0, 1, ...]) of a
    knob dict whose values may be lists (one value per MoE layer); KnobError naming the
    knob for an empty list, lists of different lengths, or (with `layers`, the model's
    MoE layer count) a list that is not one value per MoE layer."""
    uniform = {name: value for name, value in knobs.items()
               if not isinstance(value, (list, tuple))}
    lists = {name: list(value) for name, value in knobs.items()
             if isinstance(value, (list, tuple))}
    if not lists:
        return uniform, []
    first, count = next(iter(lists.items()))[0], len(next(iter(lists.values())))
    for name, values in lists.items():
        if not values:
            raise KnobError(f"{where}knob {quoted(name)}: an empty list (a per-layer knob "
                            "has one value per MoE layer)")
        if len(values) != count:
            raise KnobError(f"{where}knob {quoted(name)} gives {len(values)} value"
                            f"{'' if len(values) == 1 else 's'} and {quoted(first)} {count}: "
                            "per-layer knobs have one value per MoE layer")
        if layers is not None and len(values) != layers:
            raise KnobError(f"{where}knob {quoted(name)} gives {len(values)} values, one per "
                            f"MoE layer, and the model has {layers} MoE layers")
    return uniform, [{name: values[i] for name, values in lists.items()}
                     for i in range(count)]


def checked_knobs(knobs: Any, specs: Mapping[str, Any], entry: str,
                  where: str = "") -> Dict[str, Any]:
    """`knobs` (name -> value, or -> a list of values, one per MoE layer) checked
    against a router's knob specs (Router.knobs); KnobError naming the first bad name
    or value."""
    if not isinstance(knobs, Mapping):
        raise KnobError(f"{where}knobs: expected a dict of knob name -> value, got "
                        f"{type(knobs).__name__}")
    checked = {}
    for name, value in knobs.items():
        if not isinstance(name, str) or name not in specs:
            known = ", ".join(specs) or "none"
            raise KnobError(f"{where}unknown knob {quoted(name)} for @{entry} (its knobs: "
                            f"{known}){did_you_mean(name, specs)}")
        if isinstance(value, (list, tuple)):
            checked[name] = [check_value(f"{name}[{i}]", v, specs[name], where)
                             for i, v in enumerate(value)]
        else:
            checked[name] = check_value(name, value, specs[name], where)
    split_layers(checked, where)   # lists of one length
    return checked
