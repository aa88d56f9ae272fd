#!/usr/bin/env python3
"""switchyard.trace.capture_hf on tiny random transformers MoE models (no download):
the captured router logits equal hidden_states @ gate.weight.T recomputed from each
router's input and gate weight, the captured ids / weights equal what transformers'
experts modules receive (the model's own routing, also while switchyard.hf.patch routes
the model with another policy), the per-token step / phase / request ids / positions
follow the forward calls, evaluating the model's native policy on its trace gives the
model's own numbers, max_tokens stops the recording with one warning, and the hooks
are gone after the block. Exit status: 0 passed, 1 failed, 77 torch / transformers
missing."""
import os
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "support"))
from checks import Checks  # noqa: E402
sys.dont_write_bytecode = True


class Probe:
    """Each router's input hidden states and each experts module's ids / weights, per
    forward call, keyed by the decoder layer's index."""

    def __init__(self, model):
        self.hidden, self.ids, self.weights, self.gates, self.handles = {}, {}, {}, {}, []
        for name, module in model.named_modules():
            cls = type(module).__name__
            layer = next((int(p) for p in name.split(".") if p.isdigit()), None)
            if cls.endswith(("TopKRouter", "TopkRouter")):
                self.gates[layer] = module
                self.handles.append(module.register_forward_pre_hook(self._router(layer)))
            elif cls.endswith("Experts"):
                self.handles.append(module.register_forward_hook(self._experts(layer)))

    def _router(self, layer):
        def hook(module, args):
            self.hidden.setdefault(layer, []).append(args[0].detach().float().clone())
        return hook

    def _experts(self, layer):
        def hook(module, args, out):
            self.ids.setdefault(layer, []).append(args[1].detach().clone())
            self.weights.setdefault(layer, []).append(args[2].detach().float().clone())
        return hook

    def remove(self):
        for h in self.handles:
            h.remove()


def check_capture(sy, model_type, patch_policy=None, **overrides):
    import torch
    from test_hf import input_ids, tiny_model

    model = tiny_model(model_type, **overrides)
    probe = Probe(model)
    if patch_policy:
        sy.hf.patch(model, patch_policy, knobs={"budget": 0})
        # The experts modules then see the policy's routing: the model's own is the
        # unpatched model's (same inputs, same hidden states up to the first MoE block).
    out = tempfile.mkdtemp(prefix="trace-capture-")
    prefill, decode = input_ids(2, 5), input_ids(2, 1, seed=1)
    with torch.no_grad(), sy.trace.capture_hf(model, out, max_tokens=1000) as rec:
        model(prefill)
        model(decode)
    if patch_policy:
        sy.hf.unpatch(model)
    trace = sy.trace.load_trace(out)
    assert rec.recorded == 12, f"recorded {rec.recorded} tokens, expected 12"
    assert trace.num_tokens == 12 and trace.layers == sorted(probe.gates), \
        f"layers {trace.layers}, tokens {trace.num_tokens}"
    assert trace.num_experts == 8 and trace.top_k == 2, (trace.num_experts, trace.top_k)
    expert_size = getattr(model.config, "moe_intermediate_size", None) \
        or model.config.intermediate_size
    assert trace.meta.get("hidden_size") == model.config.hidden_size and \
        (trace.meta.get("moe_intermediate_size") or trace.meta.get("intermediate_size")) \
        == expert_size, f"meta.json lacks the experts' sizes: {trace.meta}"
    assert trace.step.tolist() == [0] * 10 + [1] * 2, trace.step
    assert trace.phase.tolist() == [0] * 10 + [1] * 2, trace.phase
    assert trace.request_ids.tolist() == [0] * 5 + [1] * 5 + [0, 1], trace.request_ids
    assert trace.positions.tolist() == list(range(5)) * 2 + [5, 5], trace.positions
    for layer, gate in probe.gates.items():
        hidden = np.concatenate([h.reshape(-1, h.shape[-1]).numpy() for h in probe.hidden[layer]])
        w = gate.weight.detach().float().numpy()
        want = hidden.astype(np.float64) @ w.T.astype(np.float64)
        if getattr(gate, "bias", None) is not None:
            want = want + gate.bias.detach().float().numpy()
        got = trace.layer_logits(layer)
        err = np.abs(got - want).max()
        assert err < 1e-5, f"layer {layer}: logits differ from hidden @ W.T by {err:.3g}"
        if patch_policy:
            # The model's own routing: softmax top-2 of the logits, renormalized (Mixtral).
            order = np.argsort(-want, axis=1)[:, :2]
            assert np.array_equal(np.sort(trace.ids[layer], 1), np.sort(order, 1)), \
                f"layer {layer}: captured ids are not the model's own top-2"
            experts_ids = np.concatenate([i.numpy() for i in probe.ids[layer]])
            assert not np.array_equal(np.sort(experts_ids, 1), np.sort(order, 1)), \
                "the patched policy routes as the model does: a weak test"
            continue
        ids = np.concatenate([i.numpy() for i in probe.ids[layer]])
        weights = np.concatenate([x.numpy() for x in probe.weights[layer]])
        assert np.array_equal(trace.ids[layer], ids), f"layer {layer}: ids differ"
        assert np.allclose(trace.weights[layer], weights, atol=1e-6), \
            f"layer {layer}: weights differ"
    probe.remove()
    if not patch_policy and model_type == "mixtral":
        # The loop closes: the model's native policy on its own trace routes as it did.
        report = sy.trace.evaluate(out, sy.hf.native_policy(model.config))
        for layer, phases in report["results"][0]["layers"].items():
            for phase, m in phases.items():
                assert m["experts_active_mean"] == m["model_experts_active_mean"] and \
                    abs(m["mass_kept_mean"] - m["model_mass_kept_mean"]) < 1e-6, \
                    f"evaluate native on the capture: layer {layer} {phase}: {m}"
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    assert hooks == 0, f"{hooks} hooks left after the block"
    return f"{len(trace.layers)} layers, 12 tokens over 2 steps"


def check_bound(sy):
    import torch
    from test_hf import input_ids, tiny_model

    model = tiny_model("mixtral")
    out = tempfile.mkdtemp(prefix="trace-capture-")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad(), sy.trace.capture_hf(model, out, max_tokens=12) as rec:
            for seed in range(4):  # 5 tokens each: the third pass would go past 12
                model(input_ids(1, 5, seed=seed))
    ours = [w for w in caught if "max_tokens" in str(w.message)]
    trace = sy.trace.load_trace(out)
    assert len(ours) == 1, f"{len(ours)} max_tokens warnings, expected 1"
    assert rec.recorded == 10 and trace.num_tokens == 10, (rec.recorded, trace.num_tokens)
    assert trace.step.tolist() == [0] * 5 + [1] * 5, trace.step
    return "stopped at 10 of max 12 tokens, one warning"


def main():
    try:
        import torch
        import transformers  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print(f"skip: torch / transformers not importable: {e}")
        return 77
    import switchyard as sy
    import switchyard.hf  # noqa: F401
    import switchyard.trace  # noqa: F401

    torch.set_num_threads(1)
    checks = [
        ("mixtral", lambda: check_capture(sy, "mixtral")),
        ("qwen3_moe", lambda: check_capture(sy, "qwen3_moe", norm_topk_prob=True)),
        ("olmoe", lambda: check_capture(sy, "olmoe")),
        ("mixtral_patched_xshare", lambda: check_capture(sy, "mixtral", patch_policy="xshare")),
        ("max_tokens", lambda: check_bound(sy)),
    ]
    return Checks().run_all(checks)


if __name__ == "__main__":
    sys.exit(main())
