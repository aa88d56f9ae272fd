#!/usr/bin/python3
"""Independent numpy references for the sparse MoE blocks of Hugging Face checkpoints.

Written from the published model definitions -- the transformers modeling code of
MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock,
OlmoeSparseMoeBlock and DeepseekV3MoE / DeepseekV3TopkRouter, and the DeepSeek-V3
technical report (arXiv:2412.19437) §2.1.2 -- not from Switchyard's MLIR, so an
execution test that compares the executor's output with these functions checks the
whole compiler + runtime against the models.

Scope: the MoE block only.  A test feeds hidden states h [T, H] and compares
  moe_block(config, tensors, l, rmsnorm(h, post_attention_layernorm_l))
or, over several layers, moe_stack(...) = h + moe_block(rmsnorm(h)) per MoE layer.
Attention and the dense MLPs of DeepSeek-V3's first layers are the engine's business.

Arithmetic is float64 inside (the models compute the router softmax / sigmoid in
float32 and the experts in the checkpoint dtype; float64 is the exact value those
approximate), results are float32.  Weights are the checkpoint's values upcast to
float32 by load_checkpoint, so a bfloat16 checkpoint is referenced at its stored values.

Routing output convention (native_routing): topk_ids int32 [T, K], topk_weights float32
[T, K]; the ids of a row are in descending order of the selection score (ties: lower
id first).  The selection score is the router probability for the softmax routers and
sigmoid + e_score_correction_bias for DeepSeek-V3.
"""

import json
import os
import struct

import numpy as np

F32 = np.float32

KNOWN = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v3")
_REQUIRED = object()


# ---------------------------------------------------------------------------------------
# Checkpoint reader (safetensors, written from the format description)
# ---------------------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
              "F64": np.dtype("<f8")}


def _to_float32(raw, st_dtype):
    if st_dtype == "BF16":
        # bfloat16 = the upper 16 bits of a float32.
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float32)


def read_safetensors(path):
    """name -> float32 array of one .safetensors file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise ValueError(f"{path}: header length {n} runs past the end of the file")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: bad safetensors header: {e}") from None
    data_len = size - 8 - n
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n, shape=(data_len,)) \
        if data_len else np.zeros(0, np.uint8)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info.get("dtype")
        if dt not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {dt!r} is not one of "
                             f"{', '.join(_ST_DTYPES)}")
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        want = _ST_DTYPES[dt].itemsize * int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= data_len or end - begin != want:
            raise ValueError(f"{path}: tensor {name}: data_offsets [{begin}, {end}] do not "
                             f"hold {dt} {list(shape)} in {data_len} data bytes")
        raw = np.frombuffer(data[begin:end], dtype=_ST_DTYPES[dt]).reshape(shape)
        out[name] = _to_float32(raw, dt)
    return out


def load_checkpoint(directory):
    """(config dict, {name: float32 array}) of a Hugging Face checkpoint directory:
    config.json plus model.safetensors, or model.safetensors.index.json and its shards."""
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(directory, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise ValueError(f"{directory}: no model.safetensors or model.safetensors.index.json")
    tensors = {}
    for fname in files:
        part = read_safetensors(os.path.join(directory, fname))
        dup = set(part) & set(tensors)
        if dup:
            raise ValueError(f"{directory}: tensor {sorted(dup)[0]} is in two shards")
        tensors.update(part)
    return config, tensors


# ---------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------

def _family(config):
    if not isinstance(config, dict):
        raise ValueError("config must be a dict (the checkpoint's config.json)")
    mt = config.get("model_type")
    if mt not in KNOWN:
        raise ValueError(f"model_type {mt!r} is not a MoE family this reference knows "
                         f"({', '.join(KNOWN)})")
    return mt


def _get(config, key, default=_REQUIRED):
    if key in config and config[key] is not None:
        return config[key]
    if default is _REQUIRED:
        raise ValueError(f"config of {config.get('model_type')} has no {key!r}")
    return default


# The expert count's spellings per family, as moe-exec reads them (MoeConfig.cpp): the
# family's own key (the hub's checkpoints) and transformers' standard name for it (its
# config's attribute_map; transformers 5 saves Qwen3-MoE's count as num_local_experts).
EXPERT_COUNT_KEYS = {"mixtral": ("num_local_experts", "num_experts"),
                     "qwen2_moe": ("num_experts", "num_local_experts"),
                     "qwen3_moe": ("num_experts", "num_local_experts"),
                     "olmoe": ("num_experts", "num_local_experts"),
                     "deepseek_v3": ("n_routed_experts", "num_local_experts")}


def num_experts(config):
    key, alias = EXPERT_COUNT_KEYS[_family(config)]
    values = {k: int(config[k]) for k in (key, alias) if config.get(k) is not None}
    if not values:
        raise ValueError(f"config of {config.get('model_type')} has no {key!r} "
                         f"(or {alias!r})")
    if len(set(values.values())) > 1:
        raise ValueError(f"config of {config.get('model_type')}: {alias} = {values[alias]} "
                         f"disagrees with {key} = {values[key]}")
    return next(iter(values.values()))


def moe_layers(config):
    """Indices of the decoder layers whose MLP is a sparse MoE block."""
    fam = _family(config)
    L = int(_get(config, "num_hidden_layers"))
    if fam == "deepseek_v3":
        # DeepseekV3DecoderLayer (DeepSeek's modeling_deepseek.py): MoE iff
        # n_routed_experts is set, layer_idx >= first_k_dense_replace and
        # layer_idx % moe_layer_freq == 0; the first layers keep a dense MLP.
        first = int(_get(config, "first_k_dense_replace", 0))
        freq = int(_get(config, "moe_layer_freq", 1))
        return [l for l in range(L) if l >= first and l % freq == 0]
    if fam in ("qwen2_moe", "qwen3_moe"):
        # Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: sparse iff layer_idx not in
        # mlp_only_layers and num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0.
        only = set(int(l) for l in _get(config, "mlp_only_layers", []))
        step = int(_get(config, "decoder_sparse_step", 1))
        if num_experts(config) <= 0:
            return []
        return [l for l in range(L) if l not in only and (l + 1) % step == 0]
    return list(range(L))  # Mixtral, OLMoE: every layer


def _prefix(config, layer):
    if layer not in moe_layers(config):
        raise ValueError(f"layer {layer} of this {config['model_type']} model has no MoE "
                         f"block (MoE layers: {moe_layers(config)})")
    sub = "block_sparse_moe" if config["model_type"] == "mixtral" else "mlp"
    return f"model.layers.{layer}.{sub}"


def _tensor(tensors, name):
    if name not in tensors:
        raise ValueError(f"checkpoint has no tensor {name}")
    t = tensors[name]
    if not isinstance(t, np.ndarray) or t.dtype != F32:
        raise ValueError(f"tensor {name} must be a float32 numpy array "
                         f"(got {getattr(t, 'dtype', type(t))})")
    return t.astype(np.float64)


def _check_x(config, x, what="x"):
    if not isinstance(x, np.ndarray) or x.dtype != F32:
        raise ValueError(f"{what} must be a float32 numpy array "
                         f"(got {getattr(x, 'dtype', type(x).__name__)})")
    H = int(_get(config, "hidden_size"))
    if x.ndim != 2 or x.shape[1] != H:
        raise ValueError(f"{what} must be [T, hidden_size = {H}] (got {list(x.shape)})")
    return x.astype(np.float64)


# ---------------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------------

def _rank(score):
    """Per row, column indices by descending score, ties to the lower index (a stable
    sort of -score)."""
    return np.argsort(-score, axis=1, kind="stable")


def _sigmoid(z):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


def router_logits(config, tensors, layer, x):
    """Router logits [T, E] (float64) of MoE layer `layer` for normed hidden states x:
    gate(x) = x @ gate.weight^T (every family's router is a bias-free nn.Linear)."""
    xd = _check_x(config, x)
    W = _tensor(tensors, _prefix(config, layer) + ".gate.weight")
    if W.shape != (num_experts(config), xd.shape[1]):
        raise ValueError(f"router weight of layer {layer} is {list(W.shape)}, expected "
                         f"[{num_experts(config)}, {xd.shape[1]}]")
    return xd @ W.T


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _deepseek_select(config, tensors, layer, logits):
    """DeepSeek-V3 node-limited, auxiliary-loss-free top-k (technical report §2.1.2;
    transformers DeepseekV3TopkRouter.get_topk_indices, topk_method "noaux_tc").

    Returns (scores s [T,E], choice scores [T,E] with dropped groups at -inf,
    ids [T,K] best first, group scores [T,G])."""
    E = logits.shape[1]
    if _get(config, "scoring_func", "sigmoid") != "sigmoid":
        raise ValueError("DeepSeek-V3 reference supports scoring_func = sigmoid only")
    if _get(config, "topk_method", "noaux_tc") != "noaux_tc":
        raise ValueError("DeepSeek-V3 reference supports topk_method = noaux_tc only")
    K = int(_get(config, "num_experts_per_tok"))
    G = int(_get(config, "n_group", 1))
    TG = int(_get(config, "topk_group", G))
    if G < 1 or E % G or not 1 <= TG <= G:
        raise ValueError(f"n_group = {G} must divide {E} experts and be >= topk_group = {TG}")
    bias = _tensor(tensors, _prefix(config, layer) + ".gate.e_score_correction_bias")
    # §2.1.2 eq. (15): s_{i,t} = Sigmoid(u_t^T e_i).
    s = _sigmoid(logits)
    # §2.1.2.1: the bias b_i is added to s for the top-k SELECTION only.
    choice = s + bias.reshape(1, E)
    # Node-limited routing: a group's score is the sum of its 2 best choice scores
    # (HF: scores_for_choice.view(-1, n_group, E // n_group).topk(2).sum(-1)); keep the
    # topk_group best groups.
    T, gsize = choice.shape[0], E // G
    grouped = -np.sort(-choice.reshape(T, G, gsize), axis=2)
    gscore = grouped[:, :, :min(2, gsize)].sum(axis=2)
    keep = _rank(gscore)[:, :TG]
    kept = np.zeros((T, G), dtype=bool)
    np.put_along_axis(kept, keep, True, axis=1)
    # Experts of dropped groups cannot be chosen.  (transformers masks them with 0.0,
    # vLLM with -inf; the two agree whenever at least K kept experts have a positive
    # choice score -- the normal case, sigmoid > 0 and a small bias; no token of 4096
    # in the generated checkpoints has fewer -- and -inf is the report's definition.)
    masked = np.where(np.repeat(kept, gsize, axis=1), choice, -np.inf)
    ids = _rank(masked)[:, :K]
    return s, masked, ids, gscore


def native_routing(config, tensors, layer, x):
    """The model's own routing of normed hidden states x [T,H] float32 at MoE layer
    `layer`: (topk_ids int32 [T,K], topk_weights float32 [T,K])."""
    fam = _family(config)
    K = int(_get(config, "num_experts_per_tok"))
    logits = router_logits(config, tensors, layer, x)
    if fam == "deepseek_v3":
        s, _, ids, _ = _deepseek_select(config, tensors, layer, logits)
        w = np.take_along_axis(s, ids, axis=1)  # unbiased scores (report eq. 13)
        if _get(config, "norm_topk_prob", True):
            w = w / (w.sum(axis=1, keepdims=True) + 1e-20)  # HF DeepseekV3MoE
        # routed_scaling_factor applies whether or not the weights were normalized.
        w = w * float(_get(config, "routed_scaling_factor", 1.0))
        return ids.astype(np.int32), w.astype(F32)
    # Mixtral / Qwen2-MoE / Qwen3-MoE / OLMoE: routing_weights = softmax(router_logits)
    # then torch.topk(routing_weights, top_k).  Ranking by the logits gives the same
    # order as by the probabilities, exactly.
    p = _softmax(logits)
    ids = _rank(logits)[:, :K]
    w = np.take_along_axis(p, ids, axis=1)
    # MixtralSparseMoeBlock always renormalizes the top-k; the Qwen / OLMoE blocks only
    # when config.norm_topk_prob (whose config-class default is False).
    renorm = True if fam == "mixtral" else bool(_get(config, "norm_topk_prob", False))
    if renorm:
        w = w / w.sum(axis=1, keepdims=True)
    return ids.astype(np.int32), w.astype(F32)


def routing_margin(config, tensors, layer, x):
    """Per token, how far the native top-k choice is from changing: float32 [T].

    Softmax families: p_(K) - p_(K+1), the gap between the K-th and (K+1)-th largest
    router probability.  DeepSeek-V3: the smaller of the gap at the K-th choice score
    among the kept groups and the gap between the topk_group-th and next group score.
    +inf where nothing could change (K = E, topk_group = n_group).  A test comparing a
    compiled policy's ids with native_routing's should skip tokens whose margin is
    below what its arithmetic can resolve (e.g. 1e-4)."""
    fam = _family(config)
    K = int(_get(config, "num_experts_per_tok"))
    logits = router_logits(config, tensors, layer, x)
    if fam == "deepseek_v3":
        _, masked, _, gscore = _deepseek_select(config, tensors, layer, logits)
        srt = -np.sort(-masked, axis=1)
        m = srt[:, K - 1] - srt[:, K] if K < srt.shape[1] else np.full(len(srt), np.inf)
        TG = int(_get(config, "topk_group", gscore.shape[1]))
        if TG < gscore.shape[1]:
            g = -np.sort(-gscore, axis=1)
            m = np.minimum(m, g[:, TG - 1] - g[:, TG])
        return m.astype(F32)
    p = -np.sort(-_softmax(logits), axis=1)
    if K >= p.shape[1]:
        return np.full(p.shape[0], np.inf, dtype=F32)
    return (p[:, K - 1] - p[:, K]).astype(F32)


# ---------------------------------------------------------------------------------------
# MoE block
# ---------------------------------------------------------------------------------------

def _swiglu(x, gate_w, up_w, down_w):
    """down(silu(gate(x)) * up(x)): MixtralBlockSparseTop2MLP (w2(silu(w1 x) * w3 x)),
    Qwen2MoeMLP, Qwen3MoeMLP, OlmoeMLP, DeepseekV3MLP (hidden_act = silu)."""
    g = x @ gate_w.T
    return ((g * _sigmoid(g)) * (x @ up_w.T)) @ down_w.T


def _expert_names(config, layer, e):
    p = _prefix(config, layer)
    if config["model_type"] == "mixtral":
        q = f"{p}.experts.{e}"
        return f"{q}.w1.weight", f"{q}.w3.weight", f"{q}.w2.weight"
    q = f"{p}.experts.{e}"
    return f"{q}.gate_proj.weight", f"{q}.up_proj.weight", f"{q}.down_proj.weight"


def _check_routing(config, x, topk_ids, topk_weights):
    if (topk_ids is None) != (topk_weights is None):
        raise ValueError("give both topk_ids and topk_weights, or neither")
    ids = np.asarray(topk_ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"topk_ids must be an integer array (got {ids.dtype})")
    if not isinstance(topk_weights, np.ndarray) or topk_weights.dtype != F32:
        raise ValueError(f"topk_weights must be a float32 numpy array "
                         f"(got {getattr(topk_weights, 'dtype', type(topk_weights).__name__)})")
    if ids.ndim != 2 or ids.shape[0] != x.shape[0] or topk_weights.shape != ids.shape:
        raise ValueError(f"topk_ids {list(ids.shape)} and topk_weights "
                         f"{list(topk_weights.shape)} must both be [T = {x.shape[0]}, K]")
    E = num_experts(config)
    if ids.size and (ids.min() < -1 or ids.max() >= E):
        raise ValueError(f"topk_ids must be in [-1, {E}) (-1 = no expert)")
    return ids.astype(np.int64), topk_weights.astype(np.float64)


def moe_block(config, tensors, layer, x, topk_ids=None, topk_weights=None):
    """Forward of MoE layer `layer`'s sparse MoE block on normed hidden states x [T,H]
    float32 -> y [T,H] float32 (the block's output, before the residual add).

    topk_ids / topk_weights (e.g. a compiled policy's routing) replace the native
    routing when given; an id of -1 is an empty slot and contributes nothing."""
    fam = _family(config)
    xd = _check_x(config, x)
    if topk_ids is None and topk_weights is None:
        topk_ids, topk_weights = native_routing(config, tensors, layer, x)
    ids, w = _check_routing(config, x, topk_ids, topk_weights)
    y = np.zeros_like(xd)
    # Routed experts: y_t = sum_k w_{t,k} * Expert_{ids[t,k]}(x_t)  (the HF blocks loop
    # over experts and index_add_ their weighted outputs; the sum is the same).
    for e in np.unique(ids[ids >= 0]):
        tok, slot = np.nonzero(ids == e)
        g, u, d = (_tensor(tensors, n) for n in _expert_names(config, layer, int(e)))
        y[tok] += w[tok, slot][:, None] * _swiglu(xd[tok], g, u, d)
    p = _prefix(config, layer)
    if fam == "qwen2_moe" and int(_get(config, "shared_expert_intermediate_size", 0)) > 0:
        # Qwen2MoeSparseMoeBlock: shared_expert_output =
        #   sigmoid(shared_expert_gate(x)) * shared_expert(x), added to the routed output.
        q = f"{p}.shared_expert"
        shared = _swiglu(xd, _tensor(tensors, f"{q}.gate_proj.weight"),
                         _tensor(tensors, f"{q}.up_proj.weight"),
                         _tensor(tensors, f"{q}.down_proj.weight"))
        gate = _sigmoid(xd @ _tensor(tensors, f"{p}.shared_expert_gate.weight").T)  # [T,1]
        y += gate * shared
    if fam == "deepseek_v3" and int(_get(config, "n_shared_experts", 0)) > 0:
        # DeepseekV3MoE: y = routed + shared_experts(x), ungated (report eq. 12).
        q = f"{p}.shared_experts"
        y += _swiglu(xd, _tensor(tensors, f"{q}.gate_proj.weight"),
                     _tensor(tensors, f"{q}.up_proj.weight"),
                     _tensor(tensors, f"{q}.down_proj.weight"))
    return y.astype(F32)


# ---------------------------------------------------------------------------------------
# Norm and stack
# ---------------------------------------------------------------------------------------

def rmsnorm(x, weight, eps):
    """MixtralRMSNorm / Qwen2MoeRMSNorm / ... : weight * (x * rsqrt(mean(x^2) + eps)),
    computed in (at least) float32 whatever the input dtype, as the HF norms upcast."""
    if not isinstance(x, np.ndarray) or x.dtype != F32:
        raise ValueError(f"x must be a float32 numpy array (got {getattr(x, 'dtype', type(x))})")
    w = np.asarray(weight)
    if w.dtype != F32 or w.shape != x.shape[-1:]:
        raise ValueError(f"weight must be float32 [{x.shape[-1]}] (got {w.dtype} {list(w.shape)})")
    xd = x.astype(np.float64)
    var = np.mean(xd * xd, axis=-1, keepdims=True)
    return (w.astype(np.float64) * (xd / np.sqrt(var + float(eps)))).astype(F32)


def moe_stack(config, tensors, x, layers=None, routing=None):
    """h = x; for each MoE layer l (all of moe_layers(config), or `layers`, in order):
        h = h + moe_block(rmsnorm(h, model.layers.{l}.post_attention_layernorm.weight))
    -> h float32 [T,H].  Attention and dense layers are skipped (not this reference's).

    routing: None (native), a dict layer -> (topk_ids, topk_weights), or a callable
    (layer, normed_x) -> (topk_ids, topk_weights) or None (native for that layer)."""
    _family(config)
    h = _check_x(config, x).astype(F32)
    eps = float(_get(config, "rms_norm_eps"))
    todo = moe_layers(config) if layers is None else [int(l) for l in layers]
    for l in todo:
        xn = rmsnorm(h, _tensor(tensors, f"model.layers.{l}.post_attention_layernorm.weight")
                     .astype(F32), eps)
        r = None
        if callable(routing):
            r = routing(l, xn)
        elif routing is not None:
            r = routing.get(l)
        ids, w = (None, None) if r is None else r
        h = (h.astype(np.float64) + moe_block(config, tensors, l, xn, ids, w)).astype(F32)
    return h
