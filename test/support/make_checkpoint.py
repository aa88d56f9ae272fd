#!/usr/bin/python3
"""Small random Hugging Face-layout MoE checkpoints, deterministic by seed.

Tests must never download a model, so this writes a directory that looks like a real
Hugging Face checkpoint of one of the MoE families the executor runs -- `config.json`
with that family's own field names, and safetensors weights with that family's own
tensor names and PyTorch `nn.Linear` layout (weight [out_features, in_features]) -- but
with tiny random weights:

    make_checkpoint.py --arch qwen3_moe --out /tmp/q3 --seed 1
    make_checkpoint.py --preset mixtral-small --out /tmp/mx --dtype bfloat16 --shards 4

Same arguments + seed => byte-identical files.  Every tensor is drawn from its own
numpy Generator seeded by (seed, sha256(tensor name)), so a tensor's values do not
depend on the dtype, the number of shards or which other tensors exist; a float32 and
a bfloat16 checkpoint of one seed hold the same weights up to rounding.

Weights (l = layer, e = expert; names as in the transformers modeling code):
  every layer   model.layers.{l}.input_layernorm.weight [H]         (ignored by a MoE
                model.layers.{l}.self_attn.q_proj.weight [H, H]     executor)
                model.layers.{l}.post_attention_layernorm.weight [H]  (the MoE block's
                                                                        input norm)
  once          model.embed_tokens.weight [V, H], model.norm.weight [H], lm_head.weight [V, H]
  mixtral       model.layers.{l}.block_sparse_moe.gate.weight [E, H]
                ....block_sparse_moe.experts.{e}.w1.weight [I, H]  (gate proj)
                ....block_sparse_moe.experts.{e}.w3.weight [I, H]  (up proj)
                ....block_sparse_moe.experts.{e}.w2.weight [H, I]  (down proj)
  qwen2_moe,    model.layers.{l}.mlp.gate.weight [E, H]
  qwen3_moe,    model.layers.{l}.mlp.experts.{e}.{gate_proj,up_proj}.weight [I, H]
  olmoe         model.layers.{l}.mlp.experts.{e}.down_proj.weight [H, I]
  qwen2_moe     + mlp.shared_expert.{gate_proj,up_proj}.weight [S, H], .down_proj [H, S],
                  mlp.shared_expert_gate.weight [1, H]
  deepseek_v3   dense layers (l < first_k_dense_replace, or l % moe_layer_freq != 0):
                  mlp.{gate_proj,up_proj}.weight [intermediate_size, H], mlp.down_proj [H, .]
                MoE layers: mlp.gate.weight [E, H], mlp.gate.e_score_correction_bias [E]
                  (always float32, as in the released checkpoint), mlp.experts.{e}.*_proj,
                  mlp.shared_experts.*_proj with width n_shared_experts * moe_intermediate_size
  (Qwen layers listed in mlp_only_layers or off the decoder_sparse_step get the dense
  mlp.{gate,up,down}_proj of width intermediate_size instead of a MoE block.)

Initialization keeps activations O(1) for an input of RMS ~1: Linear weights are
N(0,1)/sqrt(fan_in); norm weights 1 + 0.1 N(0,1); router weights ROUTER_GAIN *
N(0,1)/sqrt(H), so router logits have standard deviation ~ROUTER_GAIN and the top-k
choice is well separated for almost every token (see moe_reference.routing_margin);
the correction bias is 0.1 N(0,1).

Safetensors (https://github.com/huggingface/safetensors, "Format"), written by hand:
  8-byte little-endian uint64 N | N bytes of UTF-8 JSON header | raw data.
  Header: {"__metadata__": {"format": "pt"}, name: {"dtype", "shape", "data_offsets":
  [begin, end]}, ...}, offsets relative to the start of the data, contiguous; the header
  is padded with spaces so that 8 + N is a multiple of 8.  Within a file the tensors are
  laid out widest dtype first (then model order), as the safetensors library does, so
  a float32 tensor in a bfloat16 file is still 4-byte aligned.
  --shards N > 1: model-0000k-of-0000N.safetensors (contiguous runs of tensors in model
  order, about equal bytes each) + model.safetensors.index.json
  {"metadata": {"total_size": <sum of tensor bytes>}, "weight_map": {name: file}}.
"""

import argparse
import hashlib
import json
import math
import os
import struct
import sys

import numpy as np

ARCHS = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3")

ARCHITECTURES = {
    "mixtral": "MixtralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "olmoe": "OlmoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}

# Size keywords (the function API's **sizes; the CLI flag is the same with '-').
#   layers, hidden, intermediate (expert width), experts, top_k, vocab,
#   shared_intermediate (qwen2_moe), dense_intermediate (qwen2/3 dense layers, deepseek
#   dense layers), n_shared, groups, topk_groups, first_dense, scaling (deepseek_v3),
#   norm_topk_prob (qwen2_moe, qwen3_moe, olmoe), sparse_step, mlp_only_layers (qwen).
_COMMON = dict(layers=2, hidden=64, intermediate=32, experts=8, top_k=2, vocab=128)
DEFAULTS = {
    "mixtral": dict(_COMMON),
    "qwen2_moe": dict(_COMMON, shared_intermediate=64, dense_intermediate=128,
                      norm_topk_prob=False, sparse_step=1, mlp_only_layers=()),
    "qwen3_moe": dict(_COMMON, dense_intermediate=128, norm_topk_prob=True,
                      sparse_step=1, mlp_only_layers=()),
    "olmoe": dict(_COMMON, norm_topk_prob=False),
    "deepseek_v3": dict(_COMMON, layers=3, experts=16, top_k=4, groups=4, topk_groups=2,
                        n_shared=1, first_dense=1, dense_intermediate=128, scaling=2.5),
}

# Presets.  "tiny" (or "<arch>-tiny") is just the defaults.  The "-small" presets keep a
# real model's hidden size and expert shape and scale the expert count / layer count
# so that the float32 checkpoint is ~1 GB (a realistic load for the executor's
# loading, memory and timing paths):
#   mixtral-small    Mixtral-8x7B: hidden 4096, 8 experts, top-2 (intermediate 14336
#                    cut to 2048: one expert is then 96 MiB), 1 layer      ~0.88 GB
#   qwen3-moe-small  Qwen3-30B-A3B: hidden 2048, moe_intermediate 768, top-8,
#                    norm_topk_prob (128 experts cut to 64), 1 layer       ~1.23 GB
PRESETS = {
    "mixtral-small": dict(arch="mixtral", layers=1, hidden=4096, intermediate=2048,
                          experts=8, top_k=2),
    "qwen3-moe-small": dict(arch="qwen3_moe", layers=1, hidden=2048, intermediate=768,
                            dense_intermediate=6144, experts=64, top_k=8),
    "tiny": {},
}
for _a in ARCHS:
    PRESETS[_a.replace("_", "-") + "-tiny"] = dict(arch=_a)

DTYPES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2)}

# Router logit standard deviation for an input of RMS 1 (see module docstring).
ROUTER_GAIN = 2.5


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------

def _resolve_sizes(arch, sizes):
    """Defaults of `arch`, then the preset (if any), then explicit sizes."""
    sizes = {k: v for k, v in sizes.items() if v is not None}
    preset = sizes.pop("preset", None)
    merged = dict(DEFAULTS[arch])
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        p = dict(PRESETS[preset])
        if p.pop("arch", arch) != arch:
            raise ValueError(f"preset {preset!r} is a {PRESETS[preset]['arch']} preset, "
                             f"not {arch}")
        merged.update(p)
    unknown = sorted(set(sizes) - set(DEFAULTS[arch]))
    if unknown:
        raise ValueError(f"{arch} has no size(s) {', '.join(unknown)} "
                         f"(it takes: {', '.join(sorted(DEFAULTS[arch]))})")
    merged.update(sizes)
    s = merged
    for k in ("layers", "hidden", "intermediate", "experts", "top_k", "vocab"):
        if int(s[k]) < 1:
            raise ValueError(f"{k} must be >= 1 (got {s[k]})")
    if s["top_k"] > s["experts"]:
        raise ValueError(f"top_k = {s['top_k']} is more than the {s['experts']} experts")
    if arch == "deepseek_v3":
        E, G, TG = s["experts"], s["groups"], s["topk_groups"]
        if G < 1 or E % G != 0:
            raise ValueError(f"groups = {G} must divide the {E} experts")
        if not 1 <= TG <= G:
            raise ValueError(f"topk_groups = {TG} must be in [1, groups = {G}]")
        if TG * (E // G) < s["top_k"]:
            raise ValueError(f"topk_groups * experts/groups = {TG * (E // G)} kept experts "
                             f"are fewer than top_k = {s['top_k']}")
        if not 0 <= s["first_dense"] <= s["layers"]:
            raise ValueError(f"first_dense = {s['first_dense']} must be in [0, layers]")
        if s["n_shared"] < 0:
            raise ValueError("n_shared must be >= 0")
    if arch in ("qwen2_moe", "qwen3_moe"):
        if s["sparse_step"] < 1:
            raise ValueError("sparse_step must be >= 1")
        s["mlp_only_layers"] = sorted(int(l) for l in s["mlp_only_layers"])
    if arch == "qwen2_moe" and s["shared_intermediate"] < 0:
        raise ValueError("shared_intermediate must be >= 0")
    return s


def _heads(hidden):
    """An attention shape consistent with q_proj [H, H] (config fluff, never used)."""
    head_dim = 128 if hidden >= 1024 else 16
    if hidden % head_dim:
        head_dim = hidden
    return hidden // head_dim, head_dim


def build_config(arch, dtype, s):
    """config.json of `arch`, with the field names of that family's Hugging Face config
    class (MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, OlmoeConfig, DeepseekV3Config)."""
    H, L = s["hidden"], s["layers"]
    heads, head_dim = _heads(H)
    c = {"architectures": [ARCHITECTURES[arch]], "model_type": arch,
         "hidden_size": H, "num_hidden_layers": L}
    if arch == "mixtral":
        # MixtralConfig: the expert width is intermediate_size (every MLP is an expert).
        c.update(intermediate_size=s["intermediate"],
                 num_attention_heads=heads, num_key_value_heads=heads,
                 num_local_experts=s["experts"], num_experts_per_tok=s["top_k"],
                 hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-05,
                 rope_theta=1000000.0, router_aux_loss_coef=0.02,
                 output_router_logits=False, sliding_window=None)
    elif arch in ("qwen2_moe", "qwen3_moe"):
        # Qwen2MoeConfig / Qwen3MoeConfig: intermediate_size is the width of the dense
        # MLP of mlp_only_layers; the experts' width is moe_intermediate_size.
        c.update(intermediate_size=s["dense_intermediate"],
                 moe_intermediate_size=s["intermediate"])
        if arch == "qwen2_moe":
            c["shared_expert_intermediate_size"] = s["shared_intermediate"]
        c.update(num_attention_heads=heads, num_key_value_heads=heads)
        if arch == "qwen3_moe":
            c["head_dim"] = head_dim
        c.update(num_experts=s["experts"], num_experts_per_tok=s["top_k"],
                 norm_topk_prob=bool(s["norm_topk_prob"]),
                 decoder_sparse_step=s["sparse_step"],
                 mlp_only_layers=list(s["mlp_only_layers"]),
                 hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-06,
                 rope_theta=1000000.0, router_aux_loss_coef=0.001,
                 output_router_logits=False)
    elif arch == "olmoe":
        # OlmoeConfig has NO moe_intermediate_size: OlmoeMLP (every expert) is
        # config.intermediate_size wide (OLMoE-1B-7B: intermediate_size 1024).
        c.update(intermediate_size=s["intermediate"],
                 num_attention_heads=heads, num_key_value_heads=heads,
                 num_experts=s["experts"], num_experts_per_tok=s["top_k"],
                 norm_topk_prob=bool(s["norm_topk_prob"]), clip_qkv=None,
                 hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-05,
                 rope_theta=10000.0, router_aux_loss_coef=0.01,
                 output_router_logits=False)
    else:  # deepseek_v3
        # DeepseekV3Config.  q_lora_rank null means MLA uses a plain q_proj [H, H] here
        # (heads * (qk_nope_head_dim + qk_rope_head_dim) = H).
        c.update(intermediate_size=s["dense_intermediate"],
                 moe_intermediate_size=s["intermediate"],
                 first_k_dense_replace=s["first_dense"], moe_layer_freq=1,
                 num_attention_heads=heads, num_key_value_heads=heads,
                 n_routed_experts=s["experts"], n_shared_experts=s["n_shared"],
                 num_experts_per_tok=s["top_k"], n_group=s["groups"],
                 topk_group=s["topk_groups"], routed_scaling_factor=float(s["scaling"]),
                 scoring_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True,
                 kv_lora_rank=max(1, H // 4), q_lora_rank=None,
                 qk_nope_head_dim=head_dim - head_dim // 4,
                 qk_rope_head_dim=head_dim // 4, v_head_dim=head_dim,
                 hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-06,
                 rope_theta=10000)
    c.update(tie_word_embeddings=False, vocab_size=s["vocab"], torch_dtype=dtype)
    return c


def _is_moe_layer(arch, s, l):
    """Which layers get a sparse MoE block (mirrors the modeling code's decoder layer)."""
    if arch in ("qwen2_moe", "qwen3_moe"):
        # Qwen2MoeDecoderLayer: sparse iff not in mlp_only_layers and
        # num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0.
        return l not in s["mlp_only_layers"] and (l + 1) % s["sparse_step"] == 0
    if arch == "deepseek_v3":
        # DeepSeek-V3 modeling_deepseek.py: MoE iff layer_idx >= first_k_dense_replace
        # and layer_idx % moe_layer_freq == 0 (moe_layer_freq is 1 here).
        return l >= s["first_dense"]
    return True


# ---------------------------------------------------------------------------------------
# Tensor list
# ---------------------------------------------------------------------------------------

def tensor_specs(arch, s):
    """[(name, shape, init)] in model order.  init: 'linear' (N/sqrt(fan_in)),
    'norm' (1 + 0.1 N), 'router' (ROUTER_GAIN N/sqrt(H)), 'bias' (0.1 N, float32),
    'embed' (N)."""
    H, I, E, V = s["hidden"], s["intermediate"], s["experts"], s["vocab"]
    out = [("model.embed_tokens.weight", (V, H), "embed")]

    def mlp(prefix, width, names=("gate_proj", "up_proj", "down_proj")):
        g, u, d = names
        return [(f"{prefix}.{g}.weight", (width, H), "linear"),
                (f"{prefix}.{u}.weight", (width, H), "linear"),
                (f"{prefix}.{d}.weight", (H, width), "linear")]

    for l in range(s["layers"]):
        p = f"model.layers.{l}"
        out += [(f"{p}.input_layernorm.weight", (H,), "norm"),
                (f"{p}.self_attn.q_proj.weight", (H, H), "linear"),
                (f"{p}.post_attention_layernorm.weight", (H,), "norm")]
        if not _is_moe_layer(arch, s, l):
            out += mlp(f"{p}.mlp", s["dense_intermediate"])
            continue
        if arch == "mixtral":
            out.append((f"{p}.block_sparse_moe.gate.weight", (E, H), "router"))
            for e in range(E):
                # MixtralBlockSparseTop2MLP: w1 = gate proj, w3 = up proj, w2 = down proj.
                out += mlp(f"{p}.block_sparse_moe.experts.{e}", I, ("w1", "w3", "w2"))
            continue
        out.append((f"{p}.mlp.gate.weight", (E, H), "router"))
        if arch == "deepseek_v3":
            out.append((f"{p}.mlp.gate.e_score_correction_bias", (E,), "bias"))
        for e in range(E):
            out += mlp(f"{p}.mlp.experts.{e}", I)
        if arch == "qwen2_moe" and s["shared_intermediate"] > 0:
            out += mlp(f"{p}.mlp.shared_expert", s["shared_intermediate"])
            out.append((f"{p}.mlp.shared_expert_gate.weight", (1, H), "linear"))
        if arch == "deepseek_v3" and s["n_shared"] > 0:
            out += mlp(f"{p}.mlp.shared_experts", s["n_shared"] * I)
    out += [("model.norm.weight", (H,), "norm"), ("lm_head.weight", (V, H), "linear")]
    return out


def _values(seed, name, shape, init, hidden):
    """The float32 values of one tensor: a Generator of its own, seeded by (seed, name)."""
    words = np.frombuffer(hashlib.sha256(name.encode()).digest()[:16], dtype="<u4")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [int(seed)] + [int(w) for w in words])))
    v = rng.standard_normal(shape, dtype=np.float32)
    if init == "linear":
        v *= np.float32(1.0 / math.sqrt(shape[-1]))
    elif init == "router":
        v *= np.float32(ROUTER_GAIN / math.sqrt(hidden))
    elif init == "norm":
        v *= np.float32(0.1)
        v += np.float32(1.0)
    elif init == "bias":
        v *= np.float32(0.1)
    return v


# ---------------------------------------------------------------------------------------
# Safetensors writer
# ---------------------------------------------------------------------------------------

def float32_to_bfloat16_bits(a):
    """uint16 bfloat16 bit patterns of float32 values: round to nearest, ties to even.

    bf16 is the upper half of the float32 bits.  Adding 0x7FFF plus the lowest kept bit
    and truncating rounds to nearest with ties to the even upper half; a carry into the
    exponent is exactly the rounding-up to the next binade (or to infinity).  NaN keeps
    its sign and becomes a quiet NaN (rounding could turn a NaN payload into infinity).
    """
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16).astype(np.uint16) & 0x8000) | 0x7FC0
    return rounded


def _encode(values, st_dtype):
    if st_dtype == "F32":
        return values.astype("<f4", copy=False).tobytes()
    if st_dtype == "F16":
        return values.astype("<f2").tobytes()  # numpy rounds to nearest even
    return float32_to_bfloat16_bits(values).astype("<u2", copy=False).tobytes()


_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def _write_file(path, entries, seed, hidden):
    """entries: [(name, shape, init, st_dtype)], written widest dtype first (stable)."""
    entries = sorted(entries, key=lambda t: -_ITEMSIZE[t[3]])  # sorted() is stable
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, shape, _, dt in entries:
        n = _ITEMSIZE[dt] * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)  # 8 + N is a multiple of 8
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape, init, dt in entries:
            f.write(_encode(_values(seed, name, shape, init, hidden), dt))
    os.replace(tmp, path)
    return off


def _split(sizes, shards):
    """Cut a list of byte sizes into `shards` contiguous non-empty runs of ~equal bytes."""
    n, total = len(sizes), sum(sizes)
    cuts, prefix = [0], [0]
    for b in sizes:
        prefix.append(prefix[-1] + b)
    for k in range(1, shards):
        i = cuts[-1] + 1
        while i < n - (shards - k) and prefix[i] < k * total / shards:
            i += 1
        cuts.append(i)
    cuts.append(n)
    return [range(cuts[k], cuts[k + 1]) for k in range(shards)]


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------

def make_checkpoint(arch, out, seed=0, dtype="float32", shards=1, **sizes):
    """Write a random `arch` checkpoint into directory `out`; returns its config dict.

    sizes: layers, hidden, intermediate, experts, top_k, vocab, preset, and per arch
    shared_intermediate, dense_intermediate, n_shared, groups, topk_groups, first_dense,
    scaling, norm_topk_prob, sparse_step, mlp_only_layers (see DEFAULTS).
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r} (known: {', '.join(ARCHS)})")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if int(seed) < 0:
        raise ValueError("seed must be >= 0")
    s = _resolve_sizes(arch, sizes)
    config = build_config(arch, dtype, s)
    st_dtype = DTYPES[dtype][0]
    # The correction bias stays float32 whatever the dtype (as in DeepSeek-V3's release).
    entries = [(n, sh, init, "F32" if init == "bias" else st_dtype)
               for n, sh, init in tensor_specs(arch, s)]
    shards = int(shards)
    if not 1 <= shards <= len(entries):
        raise ValueError(f"shards must be in [1, {len(entries)}] (the number of tensors)")
    os.makedirs(out, exist_ok=True)
    for stale in os.listdir(out):  # never leave a previous run's shards behind
        if stale.endswith(".safetensors") or stale == "model.safetensors.index.json":
            os.remove(os.path.join(out, stale))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    if shards == 1:
        _write_file(os.path.join(out, "model.safetensors"), entries, seed, s["hidden"])
        return config
    nbytes = [_ITEMSIZE[dt] * int(np.prod(sh, dtype=np.int64)) for _, sh, _, dt in entries]
    weight_map, total = {}, 0
    for k, run in enumerate(_split(nbytes, shards)):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = [entries[i] for i in run]
        total += _write_file(os.path.join(out, fname), part, seed, s["hidden"])
        for e in part:
            weight_map[e[0]] = fname
    index = {"metadata": {"total_size": total},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return config


def _bool(text):
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write a small random Hugging Face-layout MoE checkpoint "
                    "(deterministic by seed).")
    ap.add_argument("--arch", choices=ARCHS, help="model family (implied by a -small preset)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--intermediate", type=int, help="expert (moe) intermediate size")
    ap.add_argument("--dense-intermediate", type=int,
                    help="dense MLP width (deepseek_v3 dense layers, qwen mlp_only_layers)")
    ap.add_argument("--experts", type=int)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--shared-intermediate", type=int, help="qwen2_moe shared expert width")
    ap.add_argument("--n-shared", type=int, help="deepseek_v3 n_shared_experts")
    ap.add_argument("--groups", type=int, help="deepseek_v3 n_group")
    ap.add_argument("--topk-groups", type=int, help="deepseek_v3 topk_group")
    ap.add_argument("--first-dense", type=int, help="deepseek_v3 first_k_dense_replace")
    ap.add_argument("--scaling", type=float, help="deepseek_v3 routed_scaling_factor")
    ap.add_argument("--norm-topk-prob", type=_bool, help="qwen2_moe/qwen3_moe/olmoe")
    ap.add_argument("--sparse-step", type=int, help="qwen decoder_sparse_step")
    ap.add_argument("--mlp-only-layers", type=lambda t: [int(x) for x in t.split(",") if x],
                    help="qwen mlp_only_layers, comma-separated")
    a = ap.parse_args(argv)
    preset_arch = PRESETS.get(a.preset or "tiny", {}).get("arch")
    arch = a.arch or preset_arch
    if arch is None:
        ap.error("--arch is required (or a preset that names one)")
    if preset_arch and a.arch and a.arch != preset_arch:
        ap.error(f"--preset {a.preset} is a {preset_arch} preset, not {a.arch}")
    sizes = {k: getattr(a, k) for k in (
        "layers", "hidden", "intermediate", "dense_intermediate", "experts", "top_k",
        "vocab", "shared_intermediate", "n_shared", "groups", "topk_groups", "first_dense",
        "scaling", "norm_topk_prob", "sparse_step", "mlp_only_layers", "preset")}
    try:
        config = make_checkpoint(arch, a.out, seed=a.seed, dtype=a.dtype, shards=a.shards,
                                 **sizes)
    except ValueError as e:
        ap.error(str(e))
    nbytes = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out)
                 if f.endswith(".safetensors"))
    print(f"{a.out}: {config['architectures'][0]}, {config['num_hidden_layers']} layers, "
          f"hidden {config['hidden_size']}, {a.dtype}, {a.shards} shard(s), "
          f"{nbytes / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
