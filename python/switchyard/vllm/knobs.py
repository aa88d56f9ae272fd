"""Per-request knobs, checked where vLLM checks a request's parameters.

A request sets a policy knob through SamplingParams.extra_args {"switchyard.<knob>":
value} — the OpenAI server fills extra_args from the request body's `vllm_xargs`. The
plugin adds a check to vLLM's per-request parameter validation (the hook custom
logits processors use: a VLLMValidationError there is HTTP 400 on the server and an
exception from LLM.generate offline); the engine keeps serving. The check compiles
the policy for the served model's config once (the compile cache makes it a lookup)
and applies the knobs' own rules, so a value the policy would refuse never reaches
a step.
"""
import atexit
import functools
from typing import Any, Dict, List, Optional

from .._errors import SwitchyardError
from .._knobs import quoted
from .settings import KNOB_PREFIX, ROUTE_KEY, ROUTE_VALUES, request_knobs

# The validators' compiled routers (vLLM keeps the validators until the interpreter
# ends): dropped at exit, before the extension's types go away, so that a server's
# shutdown prints no nanobind leak report.
_states: List[Dict[str, Any]] = []
atexit.register(lambda: [state.clear() for state in _states])


def moe_layer_count(config) -> Optional[int]:
    """The MoE layers of a model config (a transformers config or dict; its
    text_config for multimodal models): every layer, except DeepSeek's first
    `first_k_dense_replace` ones and, for Qwen-MoE, `mlp_only_layers` and the layers off
    `decoder_sparse_step`; None when the config does not say."""
    config = config.to_dict() if hasattr(config, "to_dict") else dict(config or {})
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or layers <= 0:
        return None
    dense = config.get("first_k_dense_replace") or 0
    step = config.get("decoder_sparse_step") or 1
    frequency = config.get("moe_layer_freq") or 1
    only_mlp = set(config.get("mlp_only_layers") or ())
    return sum(1 for i in range(layers) if i >= dense and i % frequency == 0
               and (i + 1) % step == 0 and i not in only_mlp)


def check_request(router, extra_args, layers: Optional[int] = None) -> None:
    """Raises SwitchyardError naming the knob when `extra_args` set a knob `router`
    does not have, a value of the wrong type (_knobs.check_value: an integer knob takes
    an integer — not a bool, a string or a float) or one its rules refuse; or spell
    the prefix in another case ("Switchyard.budget": did you mean ...)."""
    for key in extra_args or {}:
        if isinstance(key, str) and not key.startswith(KNOB_PREFIX) \
                and key.lower().startswith(KNOB_PREFIX):
            meant = KNOB_PREFIX + key[len(KNOB_PREFIX):]
            raise SwitchyardError(f"extra_args: unknown key {quoted(key)} (did you mean "
                                  f"{quoted(meant)}? knob keys are case-sensitive)")
    if ROUTE_KEY in (extra_args or {}):
        check_route(extra_args[ROUTE_KEY])
    knobs = request_knobs(extra_args)
    if not knobs:
        return
    try:
        router.configured(knobs=knobs)
        if layers is not None:   # per-layer lists: one value per MoE layer
            from .._knobs import split_layers
            split_layers(knobs, layers=layers)
    except SwitchyardError as error:
        raise SwitchyardError(f"extra_args: {error}") from None


def check_route(value) -> None:
    """`switchyard.route` takes "policy" (the default) or "model" (the request's tokens
    routed by the model's own routing, on host routers)."""
    from .._knobs import describe
    if not isinstance(value, str) or value not in ROUTE_VALUES:
        raise SwitchyardError(f"extra_args: {ROUTE_KEY!r} takes \"policy\" or \"model\", "
                              f"got {describe(value)}")
    if value == "model" and _on_gpu():
        raise SwitchyardError(f"extra_args: {ROUTE_KEY!r} = \"model\": pinned requests are "
                              "routed on the host path only (vLLM's GPU build: not yet)")


def _on_gpu() -> bool:
    try:
        from vllm.platforms import current_platform
        return not current_platform.is_cpu()
    except ImportError:   # outside vLLM: the host path
        return False


def _router_for(settings, hf_config):
    from .._compile import compile as _compile
    config = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)
    return _compile(settings.policy, model=config, knobs=settings.knobs or None,
                    outputs=("topk_ids", "topk_weights"), allow_unused=True)


def install(settings) -> None:
    """Wraps the front end's per-request validator (InputProcessor) with the check."""
    from vllm.v1.engine import input_processor

    cls = input_processor.InputProcessor
    build = cls._build_logits_processors_params_validator
    if getattr(build, "switchyard_wrapped", False):
        return

    @functools.wraps(build)
    def _build_logits_processors_params_validator(self):
        validate = build(self)
        state: Dict[str, Any] = {}
        _states.append(state)

        def validate_with_knobs(params):
            validate(params)
            extra = getattr(params, "extra_args", None)
            if not any(isinstance(key, str) and key.lower().startswith(KNOB_PREFIX)
                       for key in extra or {}):
                return
            if "router" not in state:
                state["router"] = _router_for(settings, self.model_config.hf_config)
            try:
                if "layers" not in state:
                    state["layers"] = moe_layer_count(self.model_config.hf_config)
                check_request(state["router"], extra, state["layers"])
            except SwitchyardError as error:
                from vllm.exceptions import VLLMValidationError
                raise VLLMValidationError(str(error), parameter="extra_args") from None

        return validate_with_knobs

    _build_logits_processors_params_validator.switchyard_wrapped = True
    cls._build_logits_processors_params_validator = _build_logits_processors_params_validator
