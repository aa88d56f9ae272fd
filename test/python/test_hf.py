#!/usr/bin/env python3
"""switchyard.hf on tiny random Hugging Face MoE models (no download).

For Mixtral, Qwen3-MoE (norm_topk_prob true and false), OLMoE, Qwen2-MoE, GPT-OSS and
DeepSeek-V3 (grouped routing, a nonzero e_score_correction_bias): the model patched with
its native policy gives the unpatched logits (max abs diff <= 1e-4, float32) and routes
every token to the same experts; after unpatch the logits are bit-identical to before.
XShare (policies/xshare.mlir, small budgets) deviates from the native logits and routes
the batch to no more distinct experts than top-k does (and no more than its warm-up set
plus the budget), counted from the ids the experts modules receive. Errors: a model
without MoE blocks, patching twice, an unknown policy file, unpatching an unpatched model,
a batch-aware policy without its metadata or with metadata of the wrong length.

Usage: test_hf.py [--fake]
  --fake (or SWITCHYARD_HF_TEST_FAKE=1): a torch stand-in for switchyard.compile, defined
  below, instead of the compiled package (to test the patching logic alone).
Exit status: 0 all passed, 1 a check failed, 77 torch or transformers not importable.
"""

import math
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SWITCHYARD_SOURCE_DIR", os.path.normpath(os.path.join(HERE, "..", "..")))
POLICIES = os.path.join(SOURCE, "policies")

TOLERANCE = 1e-4


# --- a stand-in for switchyard.compile (only with --fake) ---------------------------

class FakeSwitchyardError(Exception):
    pass


class FakeRouter:
    """The shipped policies' semantics in torch: what the compiled routers compute."""

    INPUTS = {
        "topk_softmax": ["logits"],
        "deepseek_v3": ["logits", "bias"],
        "xshare": ["logits"],
        "xshare_spec": ["logits", "request_ids"],
        "lynx": ["logits", "phase"],
    }
    KNOBS = {
        "topk_softmax": {},
        "deepseek_v3": {"routed_scaling_factor": 2.5},
        "xshare": {"k0": 1, "budget": 24},
        "xshare_spec": {"k0": 1, "request_budget": 4, "budget": 0},
        "lynx": {"alpha": 2.0, "beta": 4, "theta": 1.0},
    }

    def __init__(self, name, config, knobs, top_k):
        def first(*keys):
            for key in keys:
                if config.get(key) is not None:
                    return config[key]
            return None

        self.name = name
        self.experts = first("num_local_experts", "num_experts", "n_routed_experts")
        self.k = top_k or first("num_experts_per_tok", "experts_per_token")
        if self.experts is None or self.k is None:
            raise FakeSwitchyardError("no expert count / top-k")
        groups = first("n_group")
        if groups not in (None, 1) and name != "deepseek_v3":
            raise FakeSwitchyardError(f"n_group = {groups} is not used by this policy file")
        self.groups, self.keep = groups or 1, first("topk_group") or 1
        norm = config.get("norm_topk_prob")
        self.renormalize = True if norm is None else bool(norm)
        self.scaling = config.get("routed_scaling_factor")
        self.knobs = dict(self.KNOBS[name])
        if name == "deepseek_v3" and self.scaling is not None:
            self.knobs["routed_scaling_factor"] = self.scaling
        for key, value in (knobs or {}).items():
            if key not in self.knobs:
                raise FakeSwitchyardError(f"unknown knob '{key}'")
            self.knobs[key] = value
        self.inputs = list(self.INPUTS[name])

    def _route(self, rank, probs, allowed=None):
        import torch

        if allowed is not None:
            rank = rank.masked_fill(~allowed, float("-inf"))
        vals, ids = torch.topk(rank, self.k, dim=-1)
        w = probs.gather(1, ids)
        empty = torch.isinf(vals) & (vals < 0)
        w = w.masked_fill(empty, 0.0)
        if self.renormalize:
            w = w / w.sum(-1, keepdim=True).clamp_min(1e-20)
        ids = ids.masked_fill(empty, -1)
        return ids.to(torch.int32), w.float()

    def __call__(self, knobs=None, **inputs):
        import torch

        if sorted(inputs) != sorted(self.inputs):
            raise FakeSwitchyardError(f"inputs {sorted(inputs)} != {self.inputs}")
        logits = torch.as_tensor(inputs["logits"]).float()
        T, E = logits.shape
        if self.name == "deepseek_v3":
            scores = logits.sigmoid()
            choice = scores + torch.as_tensor(inputs["bias"]).float()
            g = choice.view(T, self.groups, E // self.groups).topk(2, dim=-1)[0].sum(-1)
            keep = torch.zeros_like(g).scatter_(1, g.topk(self.keep, dim=-1)[1], 1).bool()
            allowed = keep.unsqueeze(-1).expand(T, self.groups, E // self.groups).reshape(T, E)
            ids, w = self._route(choice, scores, allowed)
            w = w * self.knobs["routed_scaling_factor"]
        elif self.name == "xshare":
            probs = logits.softmax(-1)
            selected = torch.zeros(E, dtype=torch.bool)
            selected[logits.topk(self.knobs["k0"], dim=-1)[1].reshape(-1)] = True
            mass = probs.sum(0).masked_fill(selected, float("-inf"))
            budget = min(int(self.knobs["budget"]), int((~selected).sum()))
            if budget > 0:
                selected[mass.topk(budget)[1]] = True
            ids, w = self._route(logits, probs, selected.expand(T, E))
        else:  # topk_softmax; xshare_spec and lynx only as plumbing (plain top-k)
            ids, w = self._route(logits, logits.softmax(-1))
            if self.scaling is not None:
                w = w * self.scaling
        return {"topk_ids": ids, "topk_weights": w}


def fake_compile(policy, *, model=None, experts=None, top_k=None, target="host",
                 knobs=None, entry=None, **shape):
    name = str(policy)
    if name.endswith(".mlir"):
        if not os.path.exists(name):
            raise FakeSwitchyardError(f"cannot read '{name}'")
        name = os.path.splitext(os.path.basename(name))[0]
    if name not in FakeRouter.INPUTS:
        raise FakeSwitchyardError(f"unknown policy '{name}'")
    config = dict(model or {})
    if experts is not None:
        config["num_experts"] = experts
    return FakeRouter(name, config, knobs, top_k)


# --- tiny models ----------------------------------------------------------------------

def tiny_model(model_type, seed=0, **overrides):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    common = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128)
    per_type = {
        "mixtral": dict(intermediate_size=96, num_local_experts=8, num_experts_per_tok=2),
        "qwen3_moe": dict(intermediate_size=96, moe_intermediate_size=48, num_experts=8,
                          num_experts_per_tok=2, head_dim=16, decoder_sparse_step=1,
                          mlp_only_layers=[]),
        "qwen2_moe": dict(intermediate_size=96, moe_intermediate_size=48, num_experts=8,
                          num_experts_per_tok=2, shared_expert_intermediate_size=64,
                          decoder_sparse_step=1, mlp_only_layers=[]),
        "olmoe": dict(intermediate_size=96, num_experts=8, num_experts_per_tok=2, eos_token_id=1),
        "gpt_oss": dict(intermediate_size=64, num_local_experts=8, num_experts_per_tok=2,
                        head_dim=16),
        "deepseek_v3": dict(intermediate_size=96, moe_intermediate_size=32, n_routed_experts=16,
                            n_group=4, topk_group=2, num_experts_per_tok=4, n_shared_experts=1,
                            first_k_dense_replace=1, num_hidden_layers=3, q_lora_rank=32,
                            kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
                            v_head_dim=16, num_key_value_heads=4),
        "llama": dict(intermediate_size=96),
    }
    kwargs = dict(common, **per_type[model_type])
    kwargs.update(overrides)
    config = AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval()
    # Spread the routing and make the experts matter: gate logits of order 1 (distinct,
    # no ties), expert outputs of order 1 (a different routing shows in the logits).
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in model.modules():
            cls = type(module).__name__
            if cls.endswith(("TopKRouter", "TopkRouter")):
                module.weight.copy_(torch.randn(module.weight.shape, generator=g) * 0.3)
                if hasattr(module, "bias") and isinstance(module.bias, torch.Tensor):
                    module.bias.copy_(torch.randn(module.bias.shape, generator=g) * 0.1)
                if hasattr(module, "e_score_correction_bias"):
                    b = module.e_score_correction_bias
                    b.copy_(torch.randn(b.shape, generator=g) * 0.05)
            elif cls.endswith("Experts"):
                for pname, p in module.named_parameters(recurse=False):
                    fan_in = p.shape[-1] if p.dim() == 3 else 1
                    if p.dim() == 3 and model_type == "gpt_oss":  # transposed [E, in, out]
                        fan_in = p.shape[-2]
                    scale = (1.0 if p.dim() == 3 else 0.1) / math.sqrt(fan_in)
                    p.copy_(torch.randn(p.shape, generator=g) * scale)
    return model


def input_ids(batch, seq, seed=0):
    import torch

    g = torch.Generator().manual_seed(100 + seed)
    return torch.randint(0, 128, (batch, seq), generator=g)


class RoutingProbe:
    """Forward hooks: the ids every experts module receives and every router's logits."""

    def __init__(self, model):
        self.handles, self.ids, self.logits, self.dtypes = [], {}, {}, {}
        for name, module in model.named_modules():
            cls = type(module).__name__
            if cls.endswith("Experts"):
                self.handles.append(module.register_forward_hook(self._experts(name)))
            elif cls.endswith(("TopKRouter", "TopkRouter")):
                self.handles.append(module.register_forward_hook(self._router(name)))

    def _experts(self, name):
        def hook(module, args, out):
            self.ids[name.rsplit(".", 1)[0]] = args[1].detach().clone()
            self.dtypes[name.rsplit(".", 1)[0]] = (args[1].dtype, args[2].dtype)
        return hook

    def _router(self, name):
        def hook(module, args, out):
            self.logits[name.rsplit(".", 1)[0]] = out[0].detach().float().clone()
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()


def run(model, ids):
    import torch

    with torch.no_grad():
        return model(ids).logits.float()


def distinct(ids, experts):
    return sorted({int(e) for e in ids.reshape(-1).tolist() if 0 <= e < experts})


# --- checks ---------------------------------------------------------------------------

def check_native(sy, hf, model_type, dtype=None, **overrides):
    import torch

    model = tiny_model(model_type, **overrides)
    if dtype is not None:
        model.to(dtype)
    ids = input_ids(2, 7)
    probe = RoutingProbe(model)
    before = run(model, ids)
    native_ids, native_dtypes = dict(probe.ids), dict(probe.dtypes)
    policy = hf.native_policy(model.config)
    want = "deepseek_v3" if model_type == "deepseek_v3" else "topk_softmax"
    assert policy == want, f"native_policy: {policy} != {want}"

    if model_type == "deepseek_v3":
        # The correction bias decides the routing here: without it the logits differ,
        # so equal logits below mean the policy got each layer's bias.
        saved = {}
        for name, m in model.named_modules():
            if hasattr(m, "e_score_correction_bias"):
                saved[name] = m.e_score_correction_bias.clone()
                m.e_score_correction_bias.zero_()
        unbiased = run(model, ids)
        for name, m in model.named_modules():
            if name in saved:
                m.e_score_correction_bias.copy_(saved[name])
        gap = (unbiased - before).abs().max().item()
        assert gap > 1e-3, f"the correction bias changes nothing ({gap:.3g}): a weak test"

    hf.patch(model, policy)
    assert hf.is_patched(model)
    patched = run(model, ids)
    patched_ids, patched_dtypes = dict(probe.ids), dict(probe.dtypes)
    hf.unpatch(model)
    after = run(model, ids)
    probe.remove()

    diff = (patched - before).abs().max().item()
    # bfloat16: the same routing, weights equal to float32 rounding, then products and
    # sums rounded to bfloat16 (8 bits): a looser bound.
    tolerance = TOLERANCE if dtype in (None, torch.float32) else 5e-2
    assert diff <= tolerance, f"patched with {policy}: max abs diff {diff:.3g} > {tolerance}"
    assert native_dtypes == patched_dtypes, \
        f"expert inputs' dtypes {patched_dtypes} != {native_dtypes}"
    assert native_ids.keys() == patched_ids.keys() and native_ids, "experts modules not seen"
    for layer in native_ids:
        a = native_ids[layer].sort(dim=-1).values
        b = patched_ids[layer].sort(dim=-1).values
        assert torch.equal(a, b), f"{layer}: the native policy routes differently"
    assert torch.equal(after, before), "after unpatch: logits not bit-identical"
    layers = len(native_ids)
    return f"{policy}, {layers} MoE layer(s), max abs diff {diff:.3g}"


def check_xshare(sy, hf, model_type, budget, seq=5, **overrides):
    model = tiny_model(model_type, **overrides)
    ids = input_ids(1, seq, seed=3)
    probe = RoutingProbe(model)
    native = run(model, ids)
    native_ids = dict(probe.ids)
    E = model.config.to_dict().get("num_local_experts") or model.config.to_dict().get("num_experts")
    k = model.config.num_experts_per_tok

    hf.patch(model, os.path.join(POLICIES, "xshare.mlir"), knobs={"budget": budget, "k0": 1})
    shared = run(model, ids)
    shared_ids = dict(probe.ids)
    logits = dict(probe.logits)
    hf.unpatch(model)
    probe.remove()

    # Empty slots reach the experts as real experts (weight 0), never as transformers'
    # sentinel E: its grouped_mm experts leave that row uninitialised (0 * NaN = NaN).
    for layer, routed in shared_ids.items():
        assert bool(((routed >= 0) & (routed < E)).all()), \
            f"{layer}: ids outside [0, {E}) reach the experts: {routed.tolist()}"
    deviation = (shared - native).abs().max().item()
    assert deviation > 10 * TOLERANCE, \
        f"XShare (budget {budget}) equals top-k ({deviation:.3g}): no deviation shown"
    counts = []
    for layer, routed in shared_ids.items():
        used = distinct(routed, E)
        topk_used = distinct(native_ids[layer], E)
        warm = distinct(logits[layer].topk(1, dim=-1)[1], E)  # S0: every token's top-1
        assert len(used) <= len(topk_used), \
            f"{layer}: XShare uses {len(used)} experts > top-{k}'s {len(topk_used)}"
        assert len(used) <= len(warm) + budget, \
            f"{layer}: {len(used)} experts > |S0| {len(warm)} + budget {budget}"
        assert set(warm) <= set(used), f"{layer}: an S0 expert got no token"
        counts.append(f"{len(used)}/{len(topk_used)}")
    return (f"budget {budget}, {seq} tokens: distinct experts XShare/top-{k} per layer "
            f"{' '.join(counts)}, max logit deviation {deviation:.3g}")


def expect_error(sy, fn, *needles):
    try:
        fn()
    except sy.SwitchyardError as e:
        text = str(e)
        for needle in needles:
            assert needle in text, f"error '{text}' does not mention '{needle}'"
        return text
    raise AssertionError(f"no SwitchyardError (wanted one mentioning {needles})")


def check_errors(sy, hf):
    import torch

    llama = tiny_model("llama")
    msg = expect_error(sy, lambda: hf.patch(llama, "topk_softmax"), "no MoE router")
    assert not hf.is_patched(llama)

    model = tiny_model("mixtral")
    missing = os.path.join(POLICIES, "no_such_policy.mlir")
    expect_error(sy, lambda: hf.patch(model, missing))
    assert not hf.is_patched(model), "a failed patch left the model patched"
    expect_error(sy, lambda: hf.unpatch(model), "not patched")

    hf.patch(model, "topk_softmax")
    expect_error(sy, lambda: hf.patch(model, "topk_softmax"), "already patched")
    hf.unpatch(model)

    # A batch-aware policy: request_ids must come from somewhere.
    if getattr(sy, "current_metadata", None) is None:
        expect_error(sy, lambda: hf.patch(model, "xshare_spec"), "request_ids")
        assert not hf.is_patched(model)
    ids = input_ids(2, 4)
    meta = {"request_ids": torch.tensor([0] * 4 + [1] * 4, dtype=torch.int32)}
    hf.patch(model, "xshare_spec", metadata=meta)
    out = run(model, ids)
    assert torch.isfinite(out).all()
    meta["request_ids"] = torch.zeros(3, dtype=torch.int32)  # 3 ids for 8 tokens
    expect_error(sy, lambda: run(model, ids), "request_ids", "8 tokens")
    meta["request_ids"] = None
    expect_error(sy, lambda: run(model, ids), "request_ids")
    hf.unpatch(model)

    # The package's batch_metadata(...) context, where it has one.
    if callable(getattr(sy, "current_metadata", None)) and hasattr(sy, "batch_metadata"):
        hf.patch(model, "xshare_spec")
        with sy.batch_metadata(request_ids=torch.tensor([0] * 4 + [1] * 4, dtype=torch.int32)):
            in_context = run(model, ids)
        assert torch.isfinite(in_context).all()
        expect_error(sy, lambda: run(model, ids), "request_ids")
        hf.unpatch(model)

    # LYNX's phase: a callable giving it at every call.
    phase = {"phase": "decode"}
    hf.patch(model, "lynx", metadata=lambda: phase)
    decode = run(model, input_ids(4, 1))
    phase["phase"] = 0
    prefill = run(model, input_ids(4, 1))
    assert torch.isfinite(decode).all() and torch.isfinite(prefill).all()
    hf.unpatch(model)
    return f"e.g. {msg}"


def main():
    try:
        import torch
        import transformers
    except Exception as e:  # noqa: BLE001
        print(f"skip: torch / transformers not importable: {e}")
        return 77

    fake = "--fake" in sys.argv[1:] or os.environ.get("SWITCHYARD_HF_TEST_FAKE") == "1"
    try:
        import switchyard
    except ImportError:
        if not fake:
            print("FAIL import: switchyard is not importable (PYTHONPATH=build/python, or --fake)")
            traceback.print_exc(file=sys.stdout)
            return 1
        # The source tree's package without its native extension: a bare package
        # module over python/switchyard, so that only switchyard.hf is loaded from it.
        import types
        switchyard = types.ModuleType("switchyard")
        switchyard.__path__ = [os.path.join(SOURCE, "python", "switchyard")]
        switchyard.__file__ = os.path.join(switchyard.__path__[0], "__init__.py")
        sys.modules["switchyard"] = switchyard
    if fake:
        switchyard.compile = fake_compile
        switchyard.SwitchyardError = FakeSwitchyardError
        if not hasattr(switchyard, "current_metadata"):
            switchyard.current_metadata = None
    elif not hasattr(switchyard, "compile"):
        print(f"FAIL import: {switchyard.__path__} has no compile (not the built package; "
              f"PYTHONPATH=build/python, or --fake)")
        return 1
    import switchyard.hf as hf

    torch.set_num_threads(1)
    print(f"switchyard: {'torch stand-in (--fake)' if fake else switchyard.__file__}; "
          f"torch {torch.__version__}, transformers {transformers.__version__}")

    checks = [
        ("native_mixtral", lambda: check_native(switchyard, hf, "mixtral")),
        ("native_mixtral_bf16",
         lambda: check_native(switchyard, hf, "mixtral", dtype=torch.bfloat16)),
        ("native_qwen3_moe_bf16",
         lambda: check_native(switchyard, hf, "qwen3_moe", dtype=torch.bfloat16,
                              norm_topk_prob=True)),
        ("native_qwen3_moe_norm",
         lambda: check_native(switchyard, hf, "qwen3_moe", norm_topk_prob=True)),
        ("native_qwen3_moe_nonorm",
         lambda: check_native(switchyard, hf, "qwen3_moe", norm_topk_prob=False)),
        ("native_olmoe", lambda: check_native(switchyard, hf, "olmoe")),
        ("native_qwen2_moe",
         lambda: check_native(switchyard, hf, "qwen2_moe", norm_topk_prob=False)),
        ("native_gpt_oss", lambda: check_native(switchyard, hf, "gpt_oss")),
        ("native_deepseek_v3", lambda: check_native(switchyard, hf, "deepseek_v3")),
        ("xshare_mixtral_budget0", lambda: check_xshare(switchyard, hf, "mixtral", 0)),
        ("xshare_mixtral_budget1", lambda: check_xshare(switchyard, hf, "mixtral", 1)),
        ("xshare_qwen3_moe_budget1",
         lambda: check_xshare(switchyard, hf, "qwen3_moe", 1, norm_topk_prob=False)),
        ("errors", lambda: check_errors(switchyard, hf)),
    ]
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    failed = 0
    for name, fn in checks:
        if only and not any(o in name for o in only):
            continue
        try:
            detail = fn()
            print(f"ok {name}: {detail}")
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
