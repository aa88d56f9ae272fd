"""SwitchyardRouter: a vLLM FusedMoERouter whose routing is a compiled Switchyard
policy, and the router factory the plugin puts in place of vLLM's.

vLLM builds one router per FusedMoE layer through create_fused_moe_router(top_k,
global_num_experts, renormalize, use_grouped_topk, num_expert_group, topk_group,
scoring_func, routed_scaling_factor, e_score_correction_bias, ...). The plugin's
factory binds the policy to exactly that shape (compiled once per shape, when the
model is built) and keeps vLLM's BaseRouter for what follows routing (EPLB's
logical -> physical mapping, the index dtype, routed-experts capture).
"""
import logging
from typing import Any, Dict, Optional

import torch

from .._errors import SwitchyardError
from . import bind, capture

logger = logging.getLogger("switchyard.vllm")

_steps: Dict[tuple, Any] = {}   # shape -> StepRouter (shared by the layers of a shape)


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


def step_router(settings, shape: Dict[str, Any], has_bias: bool, logits_dtypes=None):
    """The StepRouter of `settings.policy` for a layer shape (compiled at most once);
    `logits_dtypes`: the narrow logits read in place (default: the model's dtype)."""
    if logits_dtypes is None:
        logits_dtypes = (_model_dtype(),)
    key = tuple(sorted(shape.items())) + (has_bias, tuple(map(str, logits_dtypes)))
    step = _steps.get(key)
    if step is None:
        label = (f"SWITCHYARD_POLICY={settings.policy} ({shape['experts']} experts, "
                 f"top-{shape['top_k']})")
        target = "cuda" if torch.cuda.is_available() and not _cpu_platform() else "host"
        try:
            step = bind(settings.policy, knobs=settings.knobs or None,
                        layer_inputs=("bias",) if has_bias else (), target=target,
                        label=label, logits_dtypes=logits_dtypes, **shape)
        except SwitchyardError as error:
            message = str(error)
            raise type(error)(message if message.startswith(label) else
                              f"{label}: {message}") from None
        _steps[key] = step
        logger.info("switchyard: %s routes the MoE layers (%s)", label,
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
                     eplb_state=None, renormalize: bool = True):
            super().__init__(top_k=top_k, global_num_experts=global_num_experts,
                             eplb_state=eplb_state)
            self.step = step
            self.renormalize = renormalize
            # The layer's tensor (vLLM loads the checkpoint into it in place later).
            self.e_score_correction_bias = e_score_correction_bias
            self._layer_tensors = [e_score_correction_bias] if "bias" in step.layer_inputs \
                else []
            # SWITCHYARD_CAPTURE: this layer's recorder, else None (capture.py).
            self._capture = capture.recorder()
            self._capture_layer = -1
            if self._capture is not None:
                self._capture_layer = self._capture.new_layer(global_num_experts, top_k)
                _warn_if_graphs()

        @property
        def routing_method_type(self):
            from vllm.model_executor.layers.fused_moe.config import RoutingMethodType
            return RoutingMethodType.Custom

        def _compute_routing(self, hidden_states, router_logits, indices_type, *,
                             input_ids=None):
            if torch.compiler.is_compiling():   # one opaque node in the graph
                # (a capturing layer passes its index: the op records at run time)
                return torch.ops.switchyard.route_step(router_logits, self._layer_tensors,
                                                       self.step.handle, self._capture_layer)
            weights, ids = self.step(router_logits, self._layer_tensors)
            if self._capture is not None:
                self._capture.record(self._capture_layer, router_logits, ids, weights)
            return weights, ids

    return SwitchyardRouter


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
    original = router_factory.create_fused_moe_router

    def create_fused_moe_router(**kwargs):
        for unsupported in ("zero_expert_type", "hash_indices_table"):
            if kwargs.get(unsupported) is not None:
                raise SwitchyardError(
                    f"SWITCHYARD_POLICY={settings.policy}: this model's MoE layers use "
                    f"{unsupported} routing, which a Switchyard policy does not replace")
        bias = kwargs.get("e_score_correction_bias")
        shape = _layer_shape(kwargs)
        step = step_router(settings, shape, bias is not None)
        if "bias" in step.router.inputs and bias is None:
            raise SwitchyardError(
                f"SWITCHYARD_POLICY={settings.policy}: the policy needs input 'bias' "
                "(e_score_correction_bias), which this model's MoE layers do not have")
        return router_class(step, top_k=shape["top_k"],
                            global_num_experts=shape["experts"],
                            e_score_correction_bias=bias,
                            eplb_state=kwargs.get("eplb_state"),
                            renormalize=shape["renormalize"])

    create_fused_moe_router.switchyard_original = original
    router_factory.create_fused_moe_router = create_fused_moe_router
    fused_moe_layer.create_fused_moe_router = create_fused_moe_router
