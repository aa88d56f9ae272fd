"""SwitchyardRouter: a vLLM FusedMoERouter whose routing is a compiled Switchyard
policy, and the router factory the plugin puts in place of vLLM's.

vLLM builds one router per FusedMoE layer through create_fused_moe_router(top_k,
global_num_experts, renormalize, use_grouped_topk, num_expert_group, topk_group,
scoring_func, routed_scaling_factor, e_score_correction_bias, ...). The plugin's
factory binds the policy to exactly that shape (compiled once per shape, when the
model is built) and keeps vLLM's BaseRouter for what follows routing (EPLB's
logical -> physical mapping, the index dtype, routed-experts capture).

Every parameter of vLLM's factory is accounted for (FACTORY_PARAMETERS, vLLM 0.32 and
0.33): what shapes the policy, what vLLM's BaseRouter keeps, what the plugin honours
(0.33's skip_padding: padding rows get id -1 and weight 0, vLLM's own convention for
it) and what it refuses (routing a policy does not replace). A factory parameter
outside the table is logged when the plugin installs: the plugin may not know what it
changes.
"""
import inspect
import logging
from typing import Any, Dict, Optional

import torch

from .._errors import SwitchyardError
from ..routing import bind
from . import capture, placement
from .knobs import moe_layer_count
from .settings import Settings

logger = logging.getLogger("vllm.switchyard")   # under vLLM's logger: its handler prints it

_steps: Dict[tuple, Any] = {}   # shape -> StepRouter (shared by the layers of a shape)


#: The parameters of vLLM's create_fused_moe_router the plugin knows, by what it does
#: with them.
FACTORY_PARAMETERS = {
    # the layer shape the policy is compiled for (_layer_shape)
    "shape": ("top_k", "global_num_experts", "renormalize", "use_grouped_topk",
              "num_expert_group", "topk_group", "routed_scaling_factor",
              "e_score_correction_bias"),
    # kept by vLLM's BaseRouter / ignored: the policy defines the scores (its .mlir
    # file), vLLM picks the index dtype and handles EPLB after routing
    "engine": ("eplb_state", "enable_eplb", "indices_type_getter", "scoring_func",
               "custom_routing_function", "shared_expert_weight", "image_sentinel_lo",
               "num_logical_experts"),
    # honoured by the plugin's router
    "honoured": ("skip_padding",),
    # refused when set: routing a policy does not replace
    "refused": ("zero_expert_type", "hash_indices_table", "bias_vl",
                "num_fused_shared_experts"),
}
_KNOWN_PARAMETERS = {name for names in FACTORY_PARAMETERS.values() for name in names}


def unknown_factory_parameters(factory) -> list:
    """Parameters of vLLM's factory the plugin does not know (FACTORY_PARAMETERS)."""
    return [name for name in inspect.signature(factory).parameters
            if name not in _KNOWN_PARAMETERS]


def _refused(kwargs: Dict[str, Any]) -> Optional[str]:
    """The factory argument that asks for routing a policy does not replace, if any."""
    for name in FACTORY_PARAMETERS["refused"]:
        value = kwargs.get(name)
        if value is not None and not (name == "num_fused_shared_experts" and value == 0):
            return name
    return None


def _layer_shape(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """moe-compile's binding for the layer the factory is asked for."""
    shape: Dict[str, Any] = {
        "experts": int(kwargs["global_num_experts"]),
        "top_k": int(kwargs["top_k"]),
        "renormalize": bool(kwargs.get("renormalize", True)),
    }
    if kwargs.get("use_grouped_topk"):
        if kwargs.get("num_expert_group") is not None:
            shape["groups"] = int(kwargs["num_expert_group"])
        if kwargs.get("topk_group") is not None:
            shape["topk_groups"] = int(kwargs["topk_group"])
    # Always bound (1.0 included): vLLM passes 1.0 when the runner scales the layer's
    # output instead, and a policy's own default must not apply twice.
    scaling = kwargs.get("routed_scaling_factor", 1.0)
    shape["scaling"] = 1.0 if scaling is None else float(scaling)
    return shape


def _check_layer_lists(settings, layer: int) -> None:
    """SWITCHYARD_KNOBS's per-layer lists against the model: one value per MoE layer
    (checked when the first layer is built, against the config's MoE layer count when
    it tells; then each layer must have its value)."""
    from .._knobs import split_layers
    if not any(isinstance(v, list) for v in (settings.knobs or {}).values()):
        return
    layers = None
    if layer == 0:
        try:
            from vllm.config import get_current_vllm_config
            layers = moe_layer_count(get_current_vllm_config().model_config.hf_config)
        except Exception:   # outside a vLLM model build
            layers = None
    _, per_layer = split_layers(settings.knobs, "SWITCHYARD_KNOBS: ", layers)
    if layer >= len(per_layer):
        raise SwitchyardError(f"SWITCHYARD_KNOBS: per-layer knobs give {len(per_layer)} "
                              f"values, one per MoE layer, and the model has MoE layer "
                              f"{layer}")


def _native_softmax_topk(kwargs: Dict[str, Any]) -> bool:
    """Whether vLLM would route the layer with its plain softmax top-k (no grouping, no
    custom function, softmax scoring)."""
    return (not kwargs.get("use_grouped_topk")
            and kwargs.get("custom_routing_function") is None
            and str(kwargs.get("scoring_func", "softmax")) == "softmax")


# Why some MoE layer has no pinned router (the model's own routing as a shipped
# policy), or None: requests asking for it are then routed by the policy (batch.py).
_unpinnable: Optional[str] = None


def unpinnable_reason() -> Optional[str]:
    return _unpinnable


def _model_routing(kwargs: Dict[str, Any]) -> Optional[str]:
    """The shipped policy that routes as vLLM's own router would for the layer the
    factory is asked for: topk_softmax for its plain softmax top-k, deepseek_v3 for
    grouped top-k with sigmoid scores and a correction bias; None otherwise."""
    if _native_softmax_topk(kwargs):
        return "topk_softmax"
    if (kwargs.get("use_grouped_topk") and kwargs.get("custom_routing_function") is None
            and str(kwargs.get("scoring_func")) == "sigmoid"
            and kwargs.get("e_score_correction_bias") is not None):
        return "deepseek_v3"
    return None


def pinned_router(kwargs: Dict[str, Any], shape: Dict[str, Any], layer_inputs):
    """The StepRouter of the model's own routing for the layer (host target; it routes
    the requests pinned to it), or None, with the reason kept for batch.py."""
    global _unpinnable
    policy = _model_routing(kwargs)
    if policy is None or "placement" in layer_inputs:
        _unpinnable = ("this model's MoE layers route in a way no shipped policy "
                       "reproduces" if policy is None else
                       "expert-parallel layers have no pinned router")
        return None
    return step_router(Settings(policy, {}), shape, layer_inputs, target="host", pin=True,
                       label=f"the model's own routing, {policy} ({shape['experts']} "
                             f"experts, top-{shape['top_k']})",
                       purpose="routes the requests pinned to it (switchyard.route = "
                               "\"model\")")


def step_router(settings, shape: Dict[str, Any], layer_inputs=(), logits_dtypes=None,
                target=None, pinned=None, label=None,
                purpose="routes the MoE layers", pin=False):
    """The StepRouter of `settings.policy` for a layer shape (compiled at most once);
    `layer_inputs`: what the layer has ("bias", "placement"); `logits_dtypes`: the
    narrow logits read in place (default: the model's dtype); `target`: "host" or
    "cuda" (default: the platform's); `pinned`: the StepRouter of the model's own
    routing (pinned_router); `label` prefixes its errors, `purpose` its log line; `pin`:
    this is a pinned router (not the policy's: engine knobs are not its)."""
    if logits_dtypes is None:
        logits_dtypes = (_model_dtype(),)
    if target is None:
        target = "cuda" if torch.cuda.is_available() and not _cpu_platform() else "host"
    key = (settings.policy, target, id(pinned)) + tuple(sorted(shape.items())) + (
        tuple(layer_inputs), tuple(map(str, logits_dtypes)))
    step = _steps.get(key)
    if step is None:
        label = label or (f"SWITCHYARD_POLICY={settings.policy} ({shape['experts']} "
                          f"experts, top-{shape['top_k']})")
        # One-value knobs are the compiled defaults; per-layer lists apply per step.
        uniform = {k: v for k, v in (settings.knobs or {}).items() if not isinstance(v, list)}
        try:
            step = bind(settings.policy, knobs=uniform or None,
                        layer_inputs=tuple(layer_inputs), target=target,
                        label=label, logits_dtypes=logits_dtypes, pinned=pinned, **shape)
        except SwitchyardError as error:
            message = str(error)
            if "'placement'" in message or "generic in devices" in message:
                message += (" (vLLM gives the expert placement when the MoE layers run "
                            "expert-parallel: --enable-expert-parallel)")
            raise type(error)(message if message.startswith(label) else
                              f"{label}: {message}") from None
        _steps[key] = step
        if not pin:
            _policy_steps.append(step)
        logger.info("switchyard: %s %s (%s)", label, purpose,
                    ", ".join(f"{k}={v}" for k, v in sorted(shape.items())))
    return step


def _model_dtype():
    """The served model's dtype (its router logits' dtype, unless a model keeps its
    gate in float32): a bf16 / f16 model gets an entry reading its logits in place."""
    try:
        from vllm.config import get_current_vllm_config
        return get_current_vllm_config().model_config.dtype
    except Exception:   # outside a vLLM model build: float32 only
        return torch.float32


def _cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform
        return current_platform.is_cpu()
    except ImportError:  # pragma: no cover - outside vLLM
        return True


def make_router_class():
    """SwitchyardRouter, built on vLLM's BaseRouter (imported only inside vLLM)."""
    from vllm.model_executor.layers.fused_moe.router.base_router import BaseRouter

    class SwitchyardRouter(BaseRouter):
        """Routes with a compiled policy: one torch.ops.switchyard.route_step call per
        layer and step (traceable: an opaque op with a fake implementation)."""

        def __init__(self, step, *, top_k: int, global_num_experts: int,
                     e_score_correction_bias: Optional[torch.Tensor] = None,
                     eplb_state=None, renormalize: bool = True,
                     skip_padding: bool = False, placement=None,
                     softmax_weights: bool = False):
            super().__init__(top_k=top_k, global_num_experts=global_num_experts,
                             eplb_state=eplb_state)
            # The weights' precision of the native router this one replaces: vLLM's
            # CPU softmax top-k (cpu_router._softmax_topk) computes them in the logits'
            # dtype, so 16-bit logits give weights rounded to 16 bits (returned as
            # float32). Its grouped top-k and the CUDA kernels compute in float32.
            self.softmax_weights = softmax_weights
            # vLLM 0.33: padding rows the forward context marks get id -1, weight 0
            # (with VLLM_MOE_SKIP_PADDING, as its grouped top-k router does).
            self.skip_padding = skip_padding
            self.step = step
            self.renormalize = renormalize
            # The layer's tensor (vLLM loads the checkpoint into it in place later).
            self.e_score_correction_bias = e_score_correction_bias
            # The tensors of the layer inputs the policy binds, in its order: the
            # correction bias, the expert placement's tables (EP).
            given = dict(placement or {}, bias=e_score_correction_bias)
            self._layer_tensors = [given[name] for name in step.layer_inputs]
            # The MoE layer's number: the order vLLM builds the routers (per pipeline
            # stage), which per-layer knobs and routing traces index by.
            self.layer = _built[0]
            _built[0] += 1
            # SWITCHYARD_CAPTURE: the process's recorder, else None (capture.py); the
            # routing op hands it each call of a layer it captures.
            self._capture = capture.recorder()
            if self._capture is not None:
                self._capture.new_layer(self.layer, global_num_experts, top_k)
                _warn_if_graphs()

        @property
        def routing_method_type(self):
            from vllm.model_executor.layers.fused_moe.config import RoutingMethodType
            return RoutingMethodType.Custom

        def _compute_routing(self, hidden_states, router_logits, indices_type, *,
                             input_ids=None):
            if torch.compiler.is_compiling():   # one opaque node in the graph
                weights, ids = torch.ops.switchyard.route_step(
                    router_logits, self._layer_tensors, self.step.handle, self.layer)
            else:
                weights, ids = self.step(router_logits, self._layer_tensors, self.layer)
            if (self.softmax_weights and router_logits.dtype in _HALF_DTYPES
                    and router_logits.device.type == "cpu"):
                weights = weights.to(router_logits.dtype).float()   # as the native router's
            if self.skip_padding:
                weights, ids = _skip_padding(weights, ids)
            return weights, ids

    return SwitchyardRouter


_HALF_DTYPES = (torch.bfloat16, torch.float16)
# The policy's step routers (every layer shape; not the pinned routers): what engine
# knobs are checked against.
_policy_steps: list = []


def policy_steps() -> list:
    return list(_policy_steps)


# The MoE layers built so far (a router's number is the count before it).
_built = [0]


def built_layers() -> int:
    """How many MoE layers this process built (its routers)."""
    return _built[0]


def _skip_padding(weights, ids):
    """vLLM 0.33's skip_padding convention: rows the forward context marks as padding
    get id -1 and weight 0 (only with VLLM_MOE_SKIP_PADDING set)."""
    from vllm import envs
    from vllm.forward_context import get_forward_context, is_forward_context_available
    if not getattr(envs, "VLLM_MOE_SKIP_PADDING", False) or \
            not is_forward_context_available():
        return weights, ids
    padding = getattr(get_forward_context(), "is_padding", None)
    if padding is None:
        return weights, ids
    padding = padding[: ids.shape[0]].unsqueeze(1)
    return weights.masked_fill(padding, 0), ids.masked_fill(padding, -1)


_warned_graphs = False


def _warn_if_graphs() -> None:
    """SWITCHYARD_CAPTURE records eager calls and compiled graphs' op calls, but a CUDA
    graph replay runs no Python: say so once when the engine may replay CUDA graphs."""
    global _warned_graphs
    try:
        from vllm.config import get_current_vllm_config
        eager = get_current_vllm_config().model_config.enforce_eager
    except Exception:   # outside a vLLM model build
        eager = True
    if not eager and torch.cuda.is_available() and not _warned_graphs:
        _warned_graphs = True
        logger.warning("switchyard: %s: steps vLLM replays as CUDA graphs are not "
                       "captured (enforce_eager=True / --enforce-eager captures every "
                       "step)", capture.CAPTURE_ENV)


def install(settings) -> None:
    """Puts the Switchyard factory in place of vLLM's create_fused_moe_router (where
    FusedMoE's module looks it up)."""
    from vllm.model_executor.layers.fused_moe import layer as fused_moe_layer
    from vllm.model_executor.layers.fused_moe.router import router_factory

    router_class = make_router_class()
    original = getattr(router_factory.create_fused_moe_router, "switchyard_original",
                       router_factory.create_fused_moe_router)
    unknown = unknown_factory_parameters(original)
    if unknown:
        logger.warning("switchyard: vLLM's create_fused_moe_router takes %s, which the "
                       "plugin does not know: it routes as if they were at their defaults",
                       ", ".join(unknown))

    def create_fused_moe_router(**kwargs):
        refused = _refused(kwargs)
        if refused is not None:
            raise SwitchyardError(
                f"SWITCHYARD_POLICY={settings.policy}: this model's MoE layers use "
                f"{refused} routing, which a Switchyard policy does not replace")
        _check_layer_lists(settings, built_layers())
        bias = kwargs.get("e_score_correction_bias")
        shape = _layer_shape(kwargs)
        layer_inputs = ["bias"] if bias is not None else []
        tables = {}
        ep = placement.expert_parallel()
        if ep is not None:   # the expert placement, for policies that take one
            tables, slots = placement.placement_tables(shape["experts"], *ep)
            shape.update(devices=ep[0], slots=slots)
            layer_inputs.append("placement")
        step = step_router(settings, shape, layer_inputs,
                           pinned=pinned_router(kwargs, shape, layer_inputs))
        if "bias" in step.router.inputs and bias is None:
            raise SwitchyardError(
                f"SWITCHYARD_POLICY={settings.policy}: the policy needs input 'bias' "
                "(e_score_correction_bias), which this model's MoE layers do not have")
        return router_class(step, top_k=shape["top_k"],
                            global_num_experts=shape["experts"],
                            e_score_correction_bias=bias, placement=tables,
                            eplb_state=kwargs.get("eplb_state"),
                            renormalize=shape["renormalize"],
                            skip_padding=bool(kwargs.get("skip_padding", False)),
                            softmax_weights=_native_softmax_topk(kwargs))

    create_fused_moe_router.switchyard_original = original
    router_factory.create_fused_moe_router = create_fused_moe_router
    fused_moe_layer.create_fused_moe_router = create_fused_moe_router
