"""The shipped rules' knob defaults, for the replays that compile a rule with the trace's
own values in (moe-compile --freeze-knobs): a default written for one model (DynaExq's
budget, ExpertFlow's capacity, Libra's replica count) may not fit the trace's E, and
the verifier checks the values a rule is compiled with."""
from typing import Dict


def rule_defaults(name: str, top_k: int = 1, **shape) -> Dict[str, float]:
    """The knob defaults of the rule @name of policies/NAME.mlir, read from a compile at
    64 experts (a shape every shipped default fits)."""
    from .. import compile as _compile
    generic = _compile(name, entry=name, experts=max(64, top_k), top_k=top_k,
                       allow_unused=True, **shape)
    return {knob: k.default for knob, k in generic.knobs.items()}
