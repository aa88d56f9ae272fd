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
Unset, it does nothing and vLLM is untouched. The settings themselves are settings.py's.
"""
from .settings import Settings

_installed = False


def register() -> None:
    """vLLM's entry point. Idempotent (vLLM may call it more than once)."""
    global _installed
    settings = Settings.from_environment()
    if settings is None or _installed:
        return
    from . import batch, knobs, middleware, router   # vLLM and torch: only when enabled
    router.install(settings)
    batch.install(settings)
    knobs.install(settings)
    middleware.install()
    _installed = True
