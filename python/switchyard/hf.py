"""Run a Hugging Face transformers MoE model with a compiled Switchyard routing policy.

`patch(model, policy)` compiles `policy` for the model's MoE shape (read from
`model.config`) and makes the router of every MoE block return the policy's routing
instead of the model's own; `unpatch(model)` restores the model exactly. Only the
router's routing changes: the router logits are the model's own (the same gate weight,
computed by the original module), and the experts module, attention, norms and
everything else are untouched.

Example::

    import torch, switchyard.hf
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("mistralai/Mixtral-8x7B-v0.1")
    ids = torch.tensor([[1, 415, 2936, 9060, 285, 1142]])

    # The model's own routing as a compiled policy: the same logits (within float
    # rounding of the expert sums).
    switchyard.hf.patch(model, switchyard.hf.native_policy(model.config))
    same = model(ids).logits
    switchyard.hf.unpatch(model)

    # XShare: the batch shares a small expert set (the union of every token's top-1
    # plus `budget` experts by batch mass); tokens are routed within it.
    switchyard.hf.patch(model, "xshare", knobs={"budget": 2})
    shared = model(ids).logits
    switchyard.hf.unpatch(model)

    # Batch-aware policies read per-token metadata: a dict the caller updates between
    # forward calls (or a callable returning one).
    meta = {"request_ids": torch.zeros(ids.numel(), dtype=torch.int32)}
    switchyard.hf.patch(model, "xshare_spec", metadata=meta)
    model(ids)
    meta["request_ids"] = ...   # next batch's ids, one per token (batch-major)

Supported models (transformers 5.x): Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3
(and Kimi-K2, same modules) and GPT-OSS. Each MoE block's router module (`block.gate`,
GPT-OSS `block.router`) returns `(router_logits, top_k_weights, top_k_index)`; the patch
is a forward hook on that module which keeps its `router_logits` and replaces the
weights and indices by the policy's `topk_weights` / `topk_ids`, in the dtypes and on
the device of the original outputs (indices int64; weights float32 for Mixtral and
DeepSeek-V3, the logits' dtype for the others). The router's class, parameters,
state dict and other hooks (e.g. `output_router_logits`) are unchanged.

Inputs of the compiled router, bound by name:

* `logits`: the original router logits, as float32 ([tokens, experts]).
* `bias`: DeepSeek-V3's `e_score_correction_bias` of the patched block (each layer its
  own), when the router module has one.
* anything else (`request_ids` for XShare-spec: int32, one per token; `phase` for LYNX:
  0/1/2 or "prefill"/"decode"/"mixed"): from `metadata` (a dict, an object with those
  attributes, or a callable returning either, read at every forward call), overridden
  by `switchyard.current_metadata()` where the package provides it (its
  `batch_metadata(...)` context). An input nobody supplies is an error naming it.

A slot the policy leaves empty (id -1, weight 0: fewer eligible experts than k) is
given to the token's first routed expert (expert 0 if it has none) with weight 0. Not
transformers' sentinel index (== number of experts): its grouped_mm experts leave a
sentinel row uninitialised outside expert parallelism, and 0 * NaN poisons the output.
The routing weights are not differentiable (inference only).
A router compiled for the host (`target="host"`, the default) runs on the CPU: logits on
a GPU are copied there and the routing back; with `target="cuda"` it runs on the logits'
GPU.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

__all__ = ["patch", "unpatch", "native_policy", "is_patched", "SUPPORTED_ROUTERS"]

# Router module classes this module patches (matched by class name along the MRO, so
# that transformers need not import every model): how the original routing is made.
#   weights: the dtype of the original top-k weights ("float32" or "logits").
SUPPORTED_ROUTERS = {
    "MixtralTopKRouter": {"family": "Mixtral", "weights": "float32"},
    "Qwen2MoeTopKRouter": {"family": "Qwen2-MoE", "weights": "logits"},
    "Qwen3MoeTopKRouter": {"family": "Qwen3-MoE", "weights": "logits"},
    "OlmoeTopKRouter": {"family": "OLMoE", "weights": "logits"},
    "DeepseekV3TopkRouter": {"family": "DeepSeek-V3", "weights": "float32"},
    "GptOssTopKRouter": {"family": "GPT-OSS", "weights": "logits"},
}

_PHASES = {"prefill": 0, "decode": 1, "mixed": 2}
_STATE_ATTR = "_switchyard_hf_patch"


def _package():
    # Resolved at call time: the package's compile / SwitchyardError / current_metadata.
    return importlib.import_module(__package__ or "switchyard")


def _error(message: str) -> Exception:
    cls = getattr(_package(), "SwitchyardError", None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(message)
    return RuntimeError(message)


def _config_dict(config) -> dict:
    if isinstance(config, Mapping):
        return dict(config)
    text = getattr(config, "get_text_config", None)
    if callable(text):
        config = text(decoder=True)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    raise TypeError(f"expected a transformers config or a dict, got {type(config).__name__}")


def native_policy(config) -> str:
    """The shipped policy that is the model's own routing: "deepseek_v3" for DeepSeek-V3
    (and Kimi-K2: model_type deepseek_v3), else "topk_softmax" (softmax top-k; the
    model's norm_topk_prob / routed_scaling_factor bind its renormalization / scaling).
    `config`: a transformers config (or a model) or its dict."""
    if hasattr(config, "config") and not isinstance(config, Mapping):
        config = config.config  # a model
    model_type = _config_dict(config).get("model_type")
    return "deepseek_v3" if model_type == "deepseek_v3" else "topk_softmax"


def _router_kind(module):
    for cls in type(module).__mro__:
        kind = SUPPORTED_ROUTERS.get(cls.__name__)
        if kind is not None:
            return kind
    return None


def _find_routers(model):
    found = []
    for name, module in model.named_modules():
        kind = _router_kind(module)
        if kind is not None:
            found.append((name, module, kind))
    return found


def router_modules(model):
    """[(module name, router module)] of every MoE block's router, in model order: the
    modules `patch` hooks. Each returns (router_logits, top_k_weights, top_k_index);
    after `patch`, the policy's weights and ids (a forward hook registered after the
    patch sees them)."""
    return [(name, module) for name, module, _ in _find_routers(model)]


class _Patch:
    """What `patch` did to one model: the compiled router and one hook per MoE block."""

    def __init__(self, router, metadata, policy, token_groups=None):
        self.router = router
        self.policy = policy
        self.metadata = metadata
        self.token_groups = token_groups
        self.layers = []  # (module name, router module, hook handle)
        # The last routing of each patched block (module name -> the router's outputs).
        self.last_outputs: dict[str, dict] = {}


def is_patched(model) -> bool:
    return getattr(model, _STATE_ATTR, None) is not None


def _lookup(source, name):
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _metadata_sources(state):
    sources = []
    meta = state.metadata
    if callable(meta) and not isinstance(meta, Mapping):
        meta = meta()
    sources.append(meta)
    current = getattr(_package(), "current_metadata", None)
    if callable(current):
        current = current()
    sources.append(current)  # the batch_metadata(...) context wins over patch's
    return sources


def _metadata_value(state, name, tokens, device):
    value = None
    for source in _metadata_sources(state):
        v = _lookup(source, name)
        if v is not None:
            value = v
    if value is None:
        raise _error(
            f"switchyard.hf: policy '{state.policy}' needs input '{name}' and no metadata "
            f"gives it: pass patch(..., metadata={{'{name}': ...}}) (a dict updated between "
            f"forward calls, or a callable returning one)"
        )
    import torch

    if name == "phase":
        if isinstance(value, str):
            if value not in _PHASES:
                raise _error(f"switchyard.hf: phase must be one of {sorted(_PHASES)} or 0/1/2, "
                             f"got '{value}'")
            value = _PHASES[value]
        if isinstance(value, torch.Tensor):
            value = int(value.reshape(-1)[0].item()) if value.numel() == 1 else value
        return value
    if name == "request_ids":
        ids = torch.as_tensor(value).detach().reshape(-1).to(device=device, dtype=torch.int32)
        if ids.numel() != tokens:
            raise _error(
                f"switchyard.hf: metadata 'request_ids' has {ids.numel()} entries, but this "
                f"forward call routes {tokens} tokens (one id per token, batch-major)"
            )
        return ids
    return value


def _route(state, feed, tokens):
    """The router on `feed`; with `token_groups`, each group of tokens routed as a batch
    of its own (its per-token inputs sliced, the others whole) and the routing put back
    in token order."""
    import torch
    groups = state.token_groups(tokens) if state.token_groups is not None else None
    if groups is None or tokens == 0:
        return state.router(**feed)
    groups = [torch.as_tensor(index, dtype=torch.int64).reshape(-1) for index in groups]
    covered = torch.cat(groups).sort().values if groups else torch.zeros(0, dtype=torch.int64)
    if not torch.equal(covered, torch.arange(tokens)):
        raise _error(f"switchyard.hf: token_groups({tokens}) must cover every token once")
    ids = weights = None
    for index in groups:
        part = {n: (v[index] if torch.is_tensor(v) and v.dim() >= 1 and v.shape[0] == tokens
                    and n != "bias" else v) for n, v in feed.items()}
        out = state.router(**part)
        part_ids = torch.as_tensor(out["topk_ids"])
        part_w = torch.as_tensor(out["topk_weights"])
        if ids is None:
            ids = torch.full((tokens, part_ids.shape[1]), -1, dtype=part_ids.dtype)
            weights = torch.zeros((tokens, part_w.shape[1]), dtype=part_w.dtype)
        ids[index], weights[index] = part_ids, part_w
    return {"topk_ids": ids, "topk_weights": weights}


def _make_hook(state, name, module, kind):
    import torch

    inputs = list(state.router.inputs)
    has_bias = hasattr(module, "e_score_correction_bias")
    extra = [n for n in inputs if n != "logits" and not (n == "bias" and has_bias)]
    weights_dtype = kind["weights"]
    on_gpu = getattr(state.router, "target", "host") == "cuda"

    def hook(mod, args, output):
        router_logits, orig_weights, orig_ids = output
        tokens, experts = router_logits.shape
        device = orig_ids.device
        # A router compiled for CUDA runs on the logits' GPU; a host router on the CPU.
        run_on = router_logits.device if on_gpu and router_logits.is_cuda else torch.device("cpu")
        with torch.no_grad():
            feed = {"logits": router_logits.detach().to(device=run_on,
                                                         dtype=torch.float32).contiguous()}
            if "bias" in inputs and "bias" not in extra:
                feed["bias"] = mod.e_score_correction_bias.detach().to(
                    device=run_on, dtype=torch.float32).contiguous()
            for n in extra:
                feed[n] = _metadata_value(state, n, tokens, run_on)
            out = _route(state, feed, tokens)
            if "topk_ids" not in out or "topk_weights" not in out:
                raise _error(
                    f"switchyard.hf: policy '{state.policy}' returns no topk_ids / topk_weights "
                    f"(results: {sorted(out)}): it is not a router a model can run"
                )
            ids = torch.as_tensor(out["topk_ids"])
            w = torch.as_tensor(out["topk_weights"])
            if ids.dim() != 2 or ids.shape[0] != tokens or tuple(w.shape) != tuple(ids.shape):
                raise _error(
                    f"switchyard.hf: {name}: the policy routed {tuple(ids.shape)} ids / "
                    f"{tuple(w.shape)} weights for {tokens} tokens"
                )
            ids = ids.to(dtype=torch.int64)
            empty = ids < 0
            if bool(empty.any()):
                # A real expert with weight 0: the token's first routed one (or 0). Every
                # experts implementation computes it and adds 0 (see the module notes).
                w = torch.where(empty, torch.zeros_like(w), w)
                first = ids[:, :1].clamp(min=0)
                ids = torch.where(empty, first.expand_as(ids), ids)
            ids = ids.to(device=device, dtype=orig_ids.dtype)
            dtype = torch.float32 if weights_dtype == "float32" else orig_weights.dtype
            w = w.to(device=orig_weights.device, dtype=dtype)
        state.last_outputs[name] = out
        return (router_logits, w, ids) + tuple(output[3:])

    return hook, extra


def patch(model, policy, *, knobs=None, target="host", metadata=None, token_groups=None,
          **shape):
    """Route every MoE block of `model` with `policy`; returns `model`.

    `policy`: a shipped policy's name ("topk_softmax", "xshare", "deepseek_v3", ...), a
    path to a .mlir file, policy text, or an already compiled router. It is compiled
    for `model.config` (`switchyard.compile(policy, model=config dict, ...)`), with
    `knobs`, `target` and `**shape` (e.g. `top_k=`) passed on. `metadata`: per-token
    inputs of batch-aware policies (see the module documentation). `token_groups`: a
    function of a routing call's token count returning index arrays that cover every
    token once; each group is routed as a batch of its own (e.g. the tokens of one
    position across a [B, L] forward: what batched decoding routes per step). Raises
    `switchyard.SwitchyardError` for a model with no supported MoE router, a model
    already patched, a policy that does not compile, or an input nobody supplies; the
    model is left unchanged then."""
    if is_patched(model):
        raise _error(
            f"switchyard.hf: {type(model).__name__} is already patched (policy "
            f"'{getattr(model, _STATE_ATTR).policy}'): unpatch(model) first"
        )
    routers = _find_routers(model)
    if not routers:
        raise _error(
            f"switchyard.hf: {type(model).__name__} has no MoE router to patch (no module of "
            f"class {', '.join(SUPPORTED_ROUTERS)}): not a supported MoE model"
        )
    for name, module, _ in routers:
        if getattr(module, "_switchyard_hf_hooked", False):
            raise _error(f"switchyard.hf: router '{name}' is already patched (through another "
                         "model object)")

    if (callable(policy) and hasattr(policy, "inputs")
            and not isinstance(policy, (str, os.PathLike))):
        if knobs is not None or shape:
            raise _error("switchyard.hf: knobs / shape arguments go with a policy to compile, "
                         "not a compiled router")
        router, policy_name = policy, getattr(policy, "name", type(policy).__name__)
    else:
        config = getattr(model, "config", None)
        if config is None:
            raise _error(f"switchyard.hf: {type(model).__name__} has no config to bind the "
                         "policy to")
        router = _package().compile(
            os.fspath(policy) if isinstance(policy, os.PathLike) else policy,
            model=_config_dict(config), target=target, knobs=knobs, **shape,
        )
        policy_name = os.fspath(policy) if isinstance(policy, os.PathLike) else str(policy)
        if "\n" in policy_name or len(policy_name) > 200:
            policy_name = "<policy text>"

    state = _Patch(router, metadata, policy_name, token_groups)
    hooks = [(name, module, _make_hook(state, name, module, kind))
             for name, module, kind in routers]

    # Inputs neither the model nor any metadata can give: an error now, not at the first
    # forward call.
    extra = sorted({n for _, _, (_, ex) in hooks for n in ex})
    if extra and metadata is None and getattr(_package(), "current_metadata", None) is None:
        raise _error(
            f"switchyard.hf: policy '{policy_name}' needs input{'s' if len(extra) > 1 else ''} "
            f"{', '.join(repr(n) for n in extra)}, which the model does not give: pass "
            f"patch(..., metadata={{{', '.join(repr(n) + ': ...' for n in extra)}}})"
        )

    for name, module, (hook, _) in hooks:
        handle = module.register_forward_hook(hook)
        module._switchyard_hf_hooked = True
        state.layers.append((name, module, handle))
    setattr(model, _STATE_ATTR, state)
    return model


def unpatch(model):
    """Undo `patch`: removes the hooks (the model is exactly as before); returns `model`.
    Raises `switchyard.SwitchyardError` for a model that is not patched."""
    state = getattr(model, _STATE_ATTR, None)
    if state is None:
        raise _error(f"switchyard.hf: {type(model).__name__} is not patched")
    for _, module, handle in state.layers:
        handle.remove()
        try:
            del module._switchyard_hf_hooked
        except AttributeError:
            pass
    delattr(model, _STATE_ATTR)
    return model
