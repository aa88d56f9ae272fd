"""Routing quality measured on a model: the held-out log-likelihood a policy's routing
gives, next to the experts it activates and the share of the model's top-k mass it
keeps (moe-eval --quality, docs/quality.md).

The text is cut into sequences of `context` tokens; `batch` of them make one forward
pass. `routing` says which tokens a batch-aware policy routes together:

* "decode" (engine hf): the `batch` tokens of one position, as batched decoding routes
  each step (teacher-forced: every position's tokens a routing call of their own, via
  `switchyard.hf.patch(token_groups=...)`);
* "prefill": all batch x context tokens of the forward pass in one call, as a prefill
  step routes them.

Every token's log-probability of the next token is compared with the model's own
routing on the same batches:

* engine "hf": transformers in this process, the policy through `switchyard.hf.patch`;
  the routing statistics come from the patched routers' outputs.
* engine "vllm": vLLM (its CPU build) with the plugin, teacher-forced prompt logprobs;
  every setting is a generate call whose requests carry the setting as per-request
  knobs, and the model's own routing is the same engine's `"switchyard.route":
  "model"` requests. The batch's prompts are scheduled in one step (max_num_seqs =
  batch, a token budget of batch x context, no prefix cache), so the routing batches
  are transformers'.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .._errors import InputError


def stdlib_sources():
    """The corpus of the trained test model (models/quality-moe, scripts/
    train_quality_model.py): this Python's standard library's top-level .py files, sorted,
    as (training files, held-out files): every 10th file is held out."""
    import glob
    import sysconfig
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    return ([f for i, f in enumerate(files) if i % 10 != 9],
            [f for i, f in enumerate(files) if i % 10 == 9])


def read_sources(files):
    """The files' text, joined by newlines."""
    parts = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            parts.append(f.read())
    return "\n".join(parts)


def held_out_text():
    """The trained test model's held-out text (what its quality is measured on)."""
    return read_sources(stdlib_sources()[1])


def load_sequences(model_dir, text, context=128, count=64):
    """[count, context] token ids of `text` (the model's tokenizer), cut consecutively."""
    from transformers import AutoTokenizer
    if context < 2 or count < 1:
        raise InputError(f"--context {context} / --sequences {count}: need context >= 2 "
                         "and at least one sequence")
    ids = AutoTokenizer.from_pretrained(model_dir)(text)["input_ids"]
    have = len(ids) // context
    if have < count:
        raise InputError(f"the text has {len(ids)} tokens: {have} sequences of {context}, "
                         f"fewer than the {count} asked for")
    return np.asarray(ids[: count * context], dtype=np.int64).reshape(count, context)


def _next_token_logprobs(logits, ids):
    """[B, L-1] log-probabilities of each next token (float64)."""
    import torch
    logp = torch.log_softmax(logits[:, :-1].double(), dim=-1)
    return logp.gather(-1, ids[:, 1:, None]).squeeze(-1)


class _RoutingStats:
    """Per MoE layer: the experts each forward pass activates (ids with weight > 0) and
    each token's share of the model's own top-k probability mass that its routing keeps."""

    def __init__(self, model, top_k, groups=None):
        from .. import hf
        self.top_k = top_k
        self.groups = groups   # token count -> the routing calls' token groups
        self.active = {}   # layer -> [experts active per forward]
        self.mass = {}     # layer -> [mass kept per token]
        self.handles = [module.register_forward_hook(self._hook(layer))
                        for layer, (_, module) in enumerate(hf.router_modules(model))]

    def _hook(self, layer):
        import torch

        def hook(module, args, output):
            logits, weights, ids = output[0], output[1], output[2]
            with torch.no_grad():
                probs = torch.softmax(logits.float(), dim=-1)
                used = weights.float() > 0
                chosen = torch.zeros_like(probs).scatter_(1, ids.long(), used.float())
                kept = (probs * (chosen > 0)).sum(-1)
                own = probs.topk(self.top_k, dim=-1).values.sum(-1)
                for index in (self.groups(len(ids)) if self.groups else [range(len(ids))]):
                    index = torch.as_tensor(index, dtype=torch.int64)
                    self.active.setdefault(layer, []).append(
                        int(ids[index][used[index]].unique().numel()))
                self.mass.setdefault(layer, []).extend((kept / own).tolist())
        return hook

    def close(self):
        for handle in self.handles:
            handle.remove()

    def summary(self):
        return {str(layer): {"experts_active_mean": float(np.mean(self.active[layer])),
                             "mass_kept_mean": float(np.mean(self.mass[layer]))}
                for layer in sorted(self.active)}


def position_groups(context):
    """token_groups for a [B, context] forward: the B tokens of each position."""
    def groups(tokens):
        rows = tokens // context
        return [np.arange(rows) * context + t for t in range(context)]
    return groups


def _hf_pass(model, sequences, batch, top_k, groups):
    import torch
    stats = _RoutingStats(model, top_k, groups)
    logprobs = []
    try:
        with torch.no_grad():
            for start in range(0, len(sequences), batch):
                ids = torch.as_tensor(sequences[start:start + batch])
                logprobs.append(_next_token_logprobs(model(input_ids=ids).logits, ids))
    finally:
        stats.close()
    return torch.cat(logprobs).numpy(), stats.summary()


def hf_logprobs(model_dir, policy, settings, sequences, batch, routing="decode"):
    """engine "hf": (the model's own [N, L-1] logprobs and routing, [(knobs, logprobs,
    routing)] per setting)."""
    import torch
    from transformers import AutoModelForCausalLM

    from .. import hf
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    top_k = model.config.num_experts_per_tok
    groups = position_groups(sequences.shape[1]) if routing == "decode" else None
    native = _hf_pass(model, sequences, batch, top_k, groups)
    runs = []
    for knobs in settings:
        hf.patch(model, policy, knobs=knobs, token_groups=groups)
        try:
            runs.append((knobs,) + _hf_pass(model, sequences, batch, top_k, groups))
        finally:
            hf.unpatch(model)
    return native, runs


def vllm_logprobs(model_dir, policy, settings, sequences, batch, routing="prefill"):
    """engine "vllm": the same measurement through a vLLM engine with the plugin
    (routing statistics are transformers'; here only the logprobs). Prompt logprobs
    come from prefill steps: routing "prefill" only."""
    if routing != "prefill":
        raise InputError(f"--engine vllm measures prompt logprobs, routed as prefill: "
                         f"--routing-batch {routing} is transformers' only")
    os.environ["SWITCHYARD_POLICY"] = policy
    for name in ("SWITCHYARD_KNOBS", "SWITCHYARD_KNOBS_FILE"):
        os.environ.pop(name, None)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    context = sequences.shape[1]
    llm = LLM(model=model_dir, dtype="float32", enforce_eager=True, seed=0,
              max_model_len=context + 1, max_num_seqs=batch,
              max_num_batched_tokens=max(batch * context, context + 1),
              enable_prefix_caching=False, distributed_executor_backend="uni")

    def run(extra):
        out = []
        for start in range(0, len(sequences), batch):
            chunk = sequences[start:start + batch]
            params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0,
                                    extra_args=extra)
            results = llm.generate([TokensPrompt(prompt_token_ids=[int(t) for t in s])
                                    for s in chunk], params, use_tqdm=False)
            for seq, result in zip(chunk, results):
                out.append([entry[int(token)].logprob for token, entry in
                            zip(seq[1:], result.prompt_logprobs[1:])])
        return np.asarray(out, dtype=np.float64)

    native = run({"switchyard.route": "model"})
    runs = [(knobs, run({f"switchyard.{k}": v for k, v in knobs.items()}))
            for knobs in settings]
    return native, runs


def quality(model_dir, policy, settings, text, context=128, count=64, batch=8,
            engine="hf", routing="decode"):
    """The quality report: per setting, the mean next-token log-likelihood (nats per
    token), its change from the model's own routing, perplexity, and (engine hf) the
    experts active and mass kept per layer."""
    if engine not in ("hf", "vllm"):
        raise InputError(f"--engine {engine}: expected hf or vllm")
    if batch < 1:
        raise InputError(f"--quality-batch {batch}: need at least 1")
    if routing not in ("decode", "prefill"):
        raise InputError(f"--routing-batch {routing}: expected decode or prefill")
    sequences = load_sequences(model_dir, text, context, count)
    settings = settings or [{}]
    measure = hf_logprobs if engine == "hf" else vllm_logprobs
    native, runs = measure(model_dir, policy, settings, sequences, batch, routing)
    native_lp = native[0] if engine == "hf" else native
    report = {"model": model_dir, "policy": policy, "engine": engine, "routing": routing,
              "sequences": int(count), "context": int(context), "batch": int(batch),
              "tokens": int(native_lp.size),
              "native": {"loglik_mean": float(native_lp.mean()),
                         "perplexity": math.exp(-float(native_lp.mean()))},
              "results": []}
    if engine == "hf":
        report["native"]["layers"] = native[1]
    for run in runs:
        knobs, logprobs = run[0], run[1]
        delta = logprobs - native_lp
        entry = {"knobs": knobs, "loglik_mean": float(logprobs.mean()),
                 "delta_loglik_mean": float(delta.mean()),
                 "perplexity": math.exp(-float(logprobs.mean())),
                 "tokens_changed": float(np.mean(np.abs(delta) > 1e-4))}
        if engine == "hf":
            layers = run[2]
            entry["layers"] = layers
            entry["experts_active_mean"] = float(np.mean(
                [m["experts_active_mean"] for m in layers.values()]))
            entry["mass_kept_mean"] = float(np.mean(
                [m["mass_kept_mean"] for m in layers.values()]))
        report["results"].append(entry)
    return report
