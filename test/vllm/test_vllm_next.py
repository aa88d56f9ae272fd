"""The vLLM plugin against the newest vLLM's router factory, at unit level: vLLM 0.33
has no CPU build to run an engine with, so its Python files (.vllm-next, installed by
scripts/setup.sh) are imported over .venv-vllm's packages and the plugin's factory is
put in place of 0.33's create_fused_moe_router. Checked:

- every parameter of 0.33's factory is one the plugin knows (FACTORY_PARAMETERS): a
  new one fails here, not silently in a user's engine;
- routers built through 0.33's factory with the arguments 0.33's FusedMoE passes
  (eplb_state None, skip_padding, shared_expert_weight, ...) are 0.33 BaseRouters whose
  select_experts equals 0.33's own CPURouter (its torch code) and the numpy reference:
  softmax top-k (Qwen3-MoE) and DeepSeek-V3's grouped top-k with its bias (each
  token's experts and weights: 0.33's router leaves the slots unsorted);
- 0.33's conventions: skip_padding (padding rows id -1, weight 0), the routed-experts
  capture callback (set_capture_fn) sees the logical ids;
- refused: bias_vl (DeepSeek-V4 vision routing), fused shared experts;
- expert parallelism, at unit level (vLLM's CPU build does not run EP ranks here): with
  enable_expert_parallel in vLLM's config, xshare_ep gets vLLM's expert placement
  (determine_expert_map, round_robin over TP x DP ranks) and routes as the numpy
  reference on that placement; without EP it is refused, naming the flag.

Run with .venv-vllm's Python and PYTHONPATH=.vllm-next (the ctest entry vllm/next-factory);
exit 77 (skipped) when either is missing."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
from checks import Checks  # noqa: E402
import reference  # noqa: E402

check = Checks()


def expected_version():
    path = os.path.join(ROOT, "python", "requirements-vllm.txt")
    for line in open(path):
        if line.startswith("# vllm-next=="):
            return line.split("==")[1].strip()
    return None


try:
    import torch
    import vllm
except ImportError as error:
    print(f"skipped: {error} (scripts/setup.sh installs .venv-vllm and .vllm-next)")
    sys.exit(77)
if vllm.__version__ != expected_version():
    print(f"skipped: vLLM {vllm.__version__} is imported, not {expected_version()} "
          "(run with PYTHONPATH=.vllm-next)")
    sys.exit(77)

from vllm.model_executor.layers.fused_moe import layer as fused_moe_layer  # noqa: E402
from vllm.model_executor.layers.fused_moe.router import router_factory  # noqa: E402
from vllm.model_executor.layers.fused_moe.router.base_router import BaseRouter  # noqa: E402
from vllm.model_executor.layers.fused_moe.router.cpu_router import CPURouter  # noqa: E402

from switchyard._errors import SwitchyardError  # noqa: E402
from switchyard.vllm import router as plugin_router, settings  # noqa: E402

rng = np.random.default_rng(7)


def factory_arguments(**overrides):
    """What 0.33's FusedMoE passes to create_fused_moe_router (layer.py)."""
    arguments = dict(top_k=4, global_num_experts=16, eplb_state=None, renormalize=True,
                     use_grouped_topk=False, num_expert_group=None, topk_group=None,
                     custom_routing_function=None, scoring_func="softmax",
                     routed_scaling_factor=1.0, e_score_correction_bias=None,
                     num_fused_shared_experts=0, skip_padding=False,
                     shared_expert_weight=1.0)
    arguments.update(overrides)
    return arguments


def install(policy):
    plugin_router.install(settings.Settings(policy, {}))
    return fused_moe_layer.create_fused_moe_router


def by_id(weights, ids):
    """A token's (expert, weight) pairs in id order: 0.33's CPURouter returns its top-k
    unsorted (torch.topk(sorted=False)); the slot order means nothing to the MoE."""
    ids = ids.to(torch.int64)
    order = ids.argsort(dim=1)
    return weights.float().gather(1, order), ids.gather(1, order)


def same(a, b):
    (wa, ia), (wb, ib) = by_id(*a), by_id(*b)
    return torch.equal(ia, ib) and torch.allclose(wa, wb, atol=1e-5, rtol=0)


def signature():
    unknown = plugin_router.unknown_factory_parameters(
        router_factory.create_fused_moe_router)
    check(f"every parameter of vLLM {vllm.__version__}'s router factory is known to the "
          "plugin", not unknown, f"(unknown: {unknown})")


def softmax_topk():
    factory = install("topk_softmax")
    router = factory(**factory_arguments())
    check("the factory in FusedMoE's module is the plugin's, building a 0.33 BaseRouter",
          type(router).__name__ == "SwitchyardRouter" and isinstance(router, BaseRouter))
    native = CPURouter(top_k=4, global_num_experts=16, renormalize=True)
    logits = torch.from_numpy(rng.standard_normal((37, 16)).astype(np.float32))
    hidden = torch.zeros(37, 8)
    ours = router.select_experts(hidden, logits)
    ref = reference.topk_softmax(logits.numpy(), 4)
    check("topk_softmax through 0.33's factory = 0.33's CPURouter",
          same(ours, native.select_experts(hidden, logits)))
    check("... = the numpy reference",
          np.array_equal(ours[1].numpy(), ref["topk_ids"])
          and np.allclose(ours[0].numpy(), ref["topk_weights"], atol=1e-5, rtol=0))
    captured = []
    router.set_capture_fn(captured.append)
    weights, ids = router.select_experts(hidden, logits)
    check("0.33's routed-experts capture sees the logical ids",
          len(captured) == 1 and torch.equal(captured[0], ids))
    router.set_capture_fn(None)
    return router, logits, hidden


def deepseek():
    factory = install("deepseek_v3")
    bias = torch.from_numpy((rng.standard_normal(16) * 0.1).astype(np.float32))
    arguments = factory_arguments(use_grouped_topk=True, num_expert_group=4, topk_group=2,
                                  scoring_func="sigmoid", routed_scaling_factor=2.5,
                                  e_score_correction_bias=bias)
    router = factory(**arguments)
    native = CPURouter(top_k=4, global_num_experts=16, use_grouped_topk=True,
                       num_expert_group=4, topk_group=2, renormalize=True,
                       scoring_func="sigmoid", routed_scaling_factor=2.5,
                       e_score_correction_bias=bias)
    logits = torch.from_numpy(rng.standard_normal((29, 16)).astype(np.float32))
    hidden = torch.zeros(29, 8)
    ours = router.select_experts(hidden, logits)
    ref = reference.deepseek_v3(logits.numpy(), bias.numpy(), k=4, groups=4, topk_groups=2,
                                scaling=2.5)
    check("deepseek_v3 through 0.33's factory (grouped, sigmoid, bias, scaling) = 0.33's "
          "CPURouter", same(ours, native.select_experts(hidden, logits)))
    check("... = the numpy reference", np.array_equal(ours[1].numpy(), ref["topk_ids"])
          and np.allclose(ours[0].numpy(), ref["topk_weights"], atol=1e-5, rtol=0))


def skip_padding():
    """0.33's convention with skip_padding: the rows the forward context marks as
    padding get id -1 and weight 0 (VLLM_MOE_SKIP_PADDING, on by default)."""
    import vllm.forward_context as forward_context
    factory = install("topk_softmax")
    router = factory(**factory_arguments(skip_padding=True))
    plain = factory(**factory_arguments())
    logits = torch.from_numpy(rng.standard_normal((6, 16)).astype(np.float32))
    hidden = torch.zeros(6, 8)
    padding = torch.tensor([False, False, False, False, True, True, True, True])

    class Context:
        is_padding = padding

    saved = (forward_context.get_forward_context,
             forward_context.is_forward_context_available)
    forward_context.get_forward_context = lambda: Context()
    forward_context.is_forward_context_available = lambda: True
    try:
        weights, ids = router.select_experts(hidden, logits)
    finally:
        (forward_context.get_forward_context,
         forward_context.is_forward_context_available) = saved
    want_w, want_ids = plain.select_experts(hidden, logits)
    check("skip_padding: padding rows id -1 and weight 0, the others routed",
          bool((ids[4:] == -1).all()) and bool((weights[4:] == 0).all())
          and torch.equal(ids[:4], want_ids[:4]) and torch.equal(weights[:4], want_w[:4]))
    weights, ids = router.select_experts(hidden, logits)   # no forward context
    check("skip_padding without a forward context: every row routed",
          torch.equal(ids, want_ids))


def refusals():
    factory = install("topk_softmax")
    for name, value in (("bias_vl", torch.zeros(16)), ("num_fused_shared_experts", 1)):
        try:
            factory(**factory_arguments(**{name: value}))
            check(f"{name} is refused", False, "(no error)")
        except SwitchyardError as error:
            check(f"{name} is refused, named", name in str(error), f"({error})")


def expert_parallel():
    import types

    import vllm.config
    from switchyard.vllm import placement
    parallel = types.SimpleNamespace(enable_expert_parallel=True, tensor_parallel_size=2,
                                     data_parallel_size=2,
                                     expert_placement_strategy="round_robin")
    config = types.SimpleNamespace(parallel_config=parallel,
                                   model_config=types.SimpleNamespace(dtype=torch.float32))
    check("EP ranks from vLLM's config: TP x DP",
          placement.expert_parallel(config) == (4, "round_robin"))
    tables, slots = placement.placement_tables(16, 4, "round_robin")
    replicas, log2phy = tables["placement.replica_count"], tables["placement.log2phy"]
    homes = [int(log2phy[e, 0]) // 4 for e in range(16)]
    check("the placement is vLLM's round robin: expert e on rank e % 4",
          slots == 16 and homes == [e % 4 for e in range(16)]
          and bool((replicas == 1).all()))
    factory = install("xshare_ep")
    bias = torch.from_numpy((rng.standard_normal(16) * 0.1).astype(np.float32))
    arguments = factory_arguments(scoring_func="sigmoid", routed_scaling_factor=2.5,
                                  e_score_correction_bias=bias)
    try:
        factory(**arguments)
        check("xshare_ep without expert parallelism is refused", False, "(no error)")
    except SwitchyardError as error:
        check("xshare_ep without expert parallelism is refused, naming the flag",
              "--enable-expert-parallel" in str(error), f"({error})")
    saved = vllm.config.get_current_vllm_config
    vllm.config.get_current_vllm_config = lambda: config
    try:
        router = factory(**arguments)
    finally:
        vllm.config.get_current_vllm_config = saved
    logits = torch.from_numpy(rng.standard_normal((23, 16)).astype(np.float32))
    weights, ids = router.select_experts(torch.zeros(23, 8), logits)
    ref = reference.xshare_ep(logits.numpy(), bias.numpy(), log2phy.numpy(), 4, devices=4,
                              slots=16, scaling=2.5)
    want_ids, want_weights = reference.engine_contract(ref["topk_ids"], ref["topk_weights"],
                                                       16)
    check("xshare_ep under EP (4 ranks) = the reference on vLLM's placement",
          np.array_equal(ids.numpy(), want_ids)
          and np.allclose(weights.numpy(), want_weights, atol=1e-5, rtol=0))


def main():
    print(f"vLLM {vllm.__version__} from {os.path.dirname(vllm.__file__)}")
    signature()
    softmax_topk()
    deepseek()
    skip_padding()
    refusals()
    expert_parallel()
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
