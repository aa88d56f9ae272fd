#!/usr/bin/python3
"""Self-check of test/support/make_checkpoint.py and test/exec/moe_reference.py.

Checks the checkpoint generator and the numpy MoE references against each other and
against small cases worked out by hand with explicit loops, before any execution test
trusts them.  Plain python (no pytest): prints one line per check and a summary, exits
0 when every check passes, 1 otherwise.  Writes only under a temporary directory.

    /usr/bin/python3 test/exec/test_reference_selfcheck.py
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))

import numpy as np  # noqa: E402

import make_checkpoint as mc  # noqa: E402
import moe_reference as ref  # noqa: E402

F32 = np.float32
TMP = None
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def make(arch, name, **kw):
    d = os.path.join(TMP, name)
    cfg = mc.make_checkpoint(arch, d, **kw)
    return d, cfg


def files_bytes(d):
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}


def rand_x(H, T, seed):
    return np.random.default_rng(seed).standard_normal((T, H)).astype(F32)


def close(a, b, rtol=1e-5, atol=1e-6, what=""):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shapes {a.shape} vs {b.shape}")
    err = np.abs(a - b) - (atol + rtol * np.abs(b))
    if np.any(err > 0):
        i = np.unravel_index(np.argmax(err), err.shape)
        raise AssertionError(f"{what}: {a[i]!r} vs {b[i]!r} at {i}")


def st_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, json.loads(f.read(n))


# ---------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------

@check
def config_fields():
    """Each family's config.json carries that family's own Hugging Face field names."""
    want = {
        "mixtral": ("MixtralForCausalLM", ["num_local_experts", "num_experts_per_tok",
                                           "intermediate_size"]),
        "qwen2_moe": ("Qwen2MoeForCausalLM", [
            "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers"]),
        "qwen3_moe": ("Qwen3MoeForCausalLM", [
            "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "decoder_sparse_step", "mlp_only_layers"]),
        # OLMoE's expert width is intermediate_size (OlmoeConfig has no moe_intermediate_size).
        "olmoe": ("OlmoeForCausalLM", ["num_experts", "num_experts_per_tok",
                                       "intermediate_size", "norm_topk_prob"]),
        "deepseek_v3": ("DeepseekV3ForCausalLM", [
            "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "n_shared_experts", "n_group", "topk_group", "routed_scaling_factor",
            "first_k_dense_replace", "scoring_func", "topk_method", "norm_topk_prob",
            "moe_layer_freq"]),
    }
    for arch, (cls, fields) in want.items():
        d, cfg = make(arch, f"cfg_{arch}", dtype="float16")
        on_disk = json.load(open(os.path.join(d, "config.json")))
        assert on_disk == cfg, arch
        assert cfg["architectures"] == [cls] and cfg["model_type"] == arch, arch
        for k in ["hidden_size", "num_hidden_layers", "intermediate_size", "rms_norm_eps",
                  "torch_dtype"] + fields:
            assert k in cfg, f"{arch}: no {k}"
        assert cfg["torch_dtype"] == "float16"
        if arch == "olmoe":
            assert "moe_intermediate_size" not in cfg
    _, c = make("deepseek_v3", "cfg_ds2")
    assert (c["n_routed_experts"], c["num_experts_per_tok"], c["n_group"], c["topk_group"],
            c["n_shared_experts"], c["first_k_dense_replace"], c["num_hidden_layers"],
            c["routed_scaling_factor"], c["scoring_func"], c["topk_method"],
            c["norm_topk_prob"], c["moe_layer_freq"]) == \
        (16, 4, 4, 2, 1, 1, 3, 2.5, "sigmoid", "noaux_tc", True, 1), c
    _, c = make("qwen2_moe", "cfg_q2")
    assert c["norm_topk_prob"] is False and c["shared_expert_intermediate_size"] > 0
    assert (c["decoder_sparse_step"], c["mlp_only_layers"]) == (1, [])
    assert mc.make_checkpoint("qwen3_moe", os.path.join(TMP, "cfg_q3"))["norm_topk_prob"] is True
    assert mc.make_checkpoint("olmoe", os.path.join(TMP, "cfg_ol"))["norm_topk_prob"] is False


@check
def tensor_names_and_shapes():
    """The exact tensor names and [out, in] shapes of each family."""
    H, I, V = 64, 32, 128
    for arch in mc.ARCHS:
        d, cfg = make(arch, f"names_{arch}")
        _, t = ref.load_checkpoint(d)
        E = ref.num_experts(cfg)
        shp = {k: v.shape for k, v in t.items()}
        assert shp["model.embed_tokens.weight"] == (V, H)
        assert shp["lm_head.weight"] == (V, H) and shp["model.norm.weight"] == (H,)
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}"
            assert shp[f"{p}.input_layernorm.weight"] == (H,)
            assert shp[f"{p}.post_attention_layernorm.weight"] == (H,)
            assert shp[f"{p}.self_attn.q_proj.weight"] == (H, H)
        for l in ref.moe_layers(cfg):
            p = f"model.layers.{l}"
            if arch == "mixtral":
                q = f"{p}.block_sparse_moe"
                assert shp[f"{q}.gate.weight"] == (E, H)
                for e in range(E):
                    assert shp[f"{q}.experts.{e}.w1.weight"] == (I, H)
                    assert shp[f"{q}.experts.{e}.w3.weight"] == (I, H)
                    assert shp[f"{q}.experts.{e}.w2.weight"] == (H, I)
                continue
            q = f"{p}.mlp"
            assert shp[f"{q}.gate.weight"] == (E, H)
            for e in range(E):
                assert shp[f"{q}.experts.{e}.gate_proj.weight"] == (I, H)
                assert shp[f"{q}.experts.{e}.up_proj.weight"] == (I, H)
                assert shp[f"{q}.experts.{e}.down_proj.weight"] == (H, I)
            if arch == "qwen2_moe":
                S = cfg["shared_expert_intermediate_size"]
                assert shp[f"{q}.shared_expert.gate_proj.weight"] == (S, H)
                assert shp[f"{q}.shared_expert.up_proj.weight"] == (S, H)
                assert shp[f"{q}.shared_expert.down_proj.weight"] == (H, S)
                assert shp[f"{q}.shared_expert_gate.weight"] == (1, H)
            if arch == "deepseek_v3":
                assert shp[f"{q}.gate.e_score_correction_bias"] == (E,)
                S = cfg["n_shared_experts"] * cfg["moe_intermediate_size"]
                assert shp[f"{q}.shared_experts.gate_proj.weight"] == (S, H)
                assert shp[f"{q}.shared_experts.down_proj.weight"] == (H, S)
        if arch == "deepseek_v3":
            # Layer 0 is dense: a plain MLP and no router.
            assert shp["model.layers.0.mlp.gate_proj.weight"] == (cfg["intermediate_size"], H)
            assert shp["model.layers.0.mlp.down_proj.weight"] == (H, cfg["intermediate_size"])
            assert "model.layers.0.mlp.gate.weight" not in shp
            assert ref.moe_layers(cfg) == [1, 2]
        n_expert_tensors = sum(".experts." in k for k in t)
        assert n_expert_tensors == 3 * E * len(ref.moe_layers(cfg)), arch


@check
def determinism_by_seed():
    """Same arguments + seed => byte-identical files (function API and CLI); another
    seed => different weights."""
    for arch in mc.ARCHS:
        a, _ = make(arch, f"det_a_{arch}", seed=7)
        b, _ = make(arch, f"det_b_{arch}", seed=7)
        c, _ = make(arch, f"det_c_{arch}", seed=8)
        assert files_bytes(a) == files_bytes(b), arch
        assert files_bytes(a)["model.safetensors"] != files_bytes(c)["model.safetensors"]
    a, _ = make("deepseek_v3", "det_sh_a", seed=1, dtype="bfloat16", shards=3)
    cli = os.path.join(TMP, "det_sh_cli")
    subprocess.run([sys.executable, os.path.join(ROOT, "test", "support", "make_checkpoint.py"),
                    "--preset", "deepseek-v3-tiny", "--out", cli, "--seed", "1",
                    "--dtype", "bfloat16", "--shards", "3"], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert files_bytes(a) == files_bytes(cli)
    assert len([f for f in os.listdir(cli) if f.endswith(".safetensors")]) == 3


@check
def safetensors_layout():
    """Header length padding, contiguous offsets, alignment, index total_size."""
    for arch, dtype, shards in (("deepseek_v3", "bfloat16", 3), ("qwen2_moe", "float16", 1),
                                ("mixtral", "float32", 4)):
        d, _ = make(arch, f"fmt_{arch}", dtype=dtype, shards=shards)
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        if shards == 1:
            assert files == ["model.safetensors"]
            assert not os.path.exists(os.path.join(d, "model.safetensors.index.json"))
        else:
            assert files == [f"model-{k:05d}-of-{shards:05d}.safetensors"
                             for k in range(1, shards + 1)]
        total, names = 0, {}
        for f in files:
            path = os.path.join(d, f)
            n, h = st_header(path)
            assert (8 + n) % 8 == 0, f
            assert h["__metadata__"] == {"format": "pt"}
            off = 0
            for name, info in h.items():  # header order is the data order here
                if name == "__metadata__":
                    continue
                b, e = info["data_offsets"]
                size = {"F32": 4, "F16": 2, "BF16": 2}[info["dtype"]]
                assert b == off and e - b == size * int(np.prod(info["shape"])), name
                assert b % size == 0, f"{name} misaligned"
                off = e
                names[name] = f
            assert os.path.getsize(path) == 8 + n + off, f
            total += off
        if shards > 1:
            idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
            assert idx["metadata"]["total_size"] == total
            assert idx["weight_map"] == names


@check
def shards_match_single_file():
    """A sharded checkpoint holds exactly the tensors of the single-file one."""
    for arch, dtype, shards in (("deepseek_v3", "bfloat16", 3), ("mixtral", "float32", 5),
                                ("qwen2_moe", "float16", 2)):
        c1, t1 = ref.load_checkpoint(make(arch, f"sh1_{arch}", dtype=dtype)[0])
        cn, tn = ref.load_checkpoint(make(arch, f"shn_{arch}", dtype=dtype, shards=shards)[0])
        assert c1 == cn and sorted(t1) == sorted(tn), arch
        for k in t1:
            assert t1[k].dtype == F32 and np.array_equal(t1[k], tn[k]), k


@check
def dtype_round_trip():
    """bfloat16 / float16 checkpoints hold the float32 weights rounded to nearest; the
    DeepSeek correction bias stays float32."""
    _, t32 = ref.load_checkpoint(make("deepseek_v3", "rt32")[0])
    _, t16 = ref.load_checkpoint(make("deepseek_v3", "rt16", dtype="float16")[0])
    d, _ = make("deepseek_v3", "rtbf", dtype="bfloat16")
    _, tbf = ref.load_checkpoint(d)
    for k, a in t32.items():
        if k.endswith("e_score_correction_bias"):
            assert np.array_equal(a, tbf[k]) and np.array_equal(a, t16[k]), k
            continue
        # Round to nearest: relative error <= unit roundoff (bf16 2^-8, f16 2^-11, plus
        # f16's subnormal spacing 2^-24 / 2 as absolute error).
        assert np.all(np.abs(tbf[k] - a) <= np.abs(a) * 2.0 ** -8), k
        assert np.all(np.abs(t16[k] - a) <= np.abs(a) * 2.0 ** -11 + 2.0 ** -25), k
        assert not np.array_equal(tbf[k], a), f"{k} not rounded"
        # What was read back is exactly representable: re-rounding changes nothing.
        assert np.array_equal(mc.float32_to_bfloat16_bits(tbf[k]),
                              (tbf[k].view(np.uint32) >> 16).astype(np.uint16)), k
    _, h = st_header(os.path.join(d, "model.safetensors"))
    for name, info in h.items():
        if name != "__metadata__":
            assert info["dtype"] == ("F32" if name.endswith("bias") else "BF16"), name
    # Round-to-nearest-even on hand-picked float32 values.
    one = 1.0
    cases = [(one, 0x3F80),
             (one + 2 ** -8, 0x3F80),               # halfway, even below -> down
             (one + 3 * 2 ** -8, 0x3F82),           # halfway, even above -> up
             (one + 2 ** -8 + 2 ** -20, 0x3F81),    # just above halfway -> up
             (-1.5, 0xBFC0), (0.0, 0x0000), (-0.0, 0x8000),
             (3.4028234663852886e38, 0x7F80),       # FLT_MAX rounds up to +inf
             (float("inf"), 0x7F80), (1e-40, 0x0001)]  # 1e-40: subnormal, bits 0x000116C2
    got = mc.float32_to_bfloat16_bits(np.array([c[0] for c in cases], dtype=F32))
    for (v, want), g in zip(cases, got):
        assert int(g) == want, f"bf16({v!r}) = {int(g):#06x}, want {want:#06x}"
    nan = mc.float32_to_bfloat16_bits(np.array([np.nan], dtype=F32))[0]
    assert (int(nan) & 0x7FC0) == 0x7FC0


# ---------------------------------------------------------------------------------------
# References against hand-worked cases
# ---------------------------------------------------------------------------------------

def _silu(v):
    return v / (1.0 + math.exp(-v))


def _hand_mixtral(x, gate, experts, k):
    """One token through a Mixtral block, with explicit loops over plain floats."""
    E, H = len(gate), len(x)
    logits = [sum(gate[e][h] * x[h] for h in range(H)) for e in range(E)]
    m = max(logits)
    ex = [math.exp(z - m) for z in logits]
    p = [v / sum(ex) for v in ex]
    top = sorted(range(E), key=lambda e: (-p[e], e))[:k]
    tot = sum(p[e] for e in top)
    y = [0.0] * H
    for e in top:
        w1, w3, w2 = experts[e]
        I = len(w1)
        act = [_silu(sum(w1[i][h] * x[h] for h in range(H))) *
               sum(w3[i][h] * x[h] for h in range(H)) for i in range(I)]
        for h in range(H):
            y[h] += p[e] / tot * sum(w2[h][i] * act[i] for i in range(I))
    return top, [p[e] / tot for e in top], y


def _mixtral_tensors(gate, experts):
    t = {"model.layers.0.block_sparse_moe.gate.weight": np.array(gate, F32)}
    for e, (w1, w3, w2) in enumerate(experts):
        q = f"model.layers.0.block_sparse_moe.experts.{e}"
        t[f"{q}.w1.weight"] = np.array(w1, F32)
        t[f"{q}.w3.weight"] = np.array(w3, F32)
        t[f"{q}.w2.weight"] = np.array(w2, F32)
    return t


@check
def mixtral_hand_block():
    """A 1-token Mixtral block worked with explicit loops (E=2, k=1; E=3, k=2) and a
    generated checkpoint's token, against moe_block."""
    x = [0.5, -1.0]
    gate = [[1.0, -0.5], [-0.25, 0.75]]           # logits 1.0, -0.875 -> expert 0
    experts = [([[0.5, -0.25], [-1.0, 0.5]], [[1.0, 0.0], [0.25, -0.5]], [[1.0, -1.0], [0.5, 2.0]]),
               ([[0.0, 1.0], [1.0, 1.0]], [[-0.5, 0.5], [2.0, 0.0]], [[0.25, 0.0], [0.0, 0.25]])]
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 2,
           "num_hidden_layers": 1, "intermediate_size": 2, "num_local_experts": 2,
           "num_experts_per_tok": 1, "rms_norm_eps": 1e-5}
    t = _mixtral_tensors(gate, experts)
    top, w, y = _hand_mixtral(x, gate, experts, 1)
    assert top == [0] and w == [1.0]
    # By hand: gate(x) = w1 x = [0.5, -1.0], up(x) = w3 x = [0.5, 0.625];
    # act = [silu(0.5) * 0.5, silu(-1.0) * 0.625]; y = w2 act.
    a = [_silu(0.5) * 0.5, _silu(-1.0) * 0.625]
    assert np.allclose(y, [a[0] - a[1], 0.5 * a[0] + 2.0 * a[1]], rtol=1e-15)
    xa = np.array([x], F32)
    ids, ws = ref.native_routing(cfg, t, 0, xa)
    assert ids.tolist() == [[0]] and ws.tolist() == [[1.0]]
    close(ref.moe_block(cfg, t, 0, xa), [y], what="E=2 k=1")

    # E=3, k=2: renormalized softmax weights.
    gate3 = gate + [[0.5, 0.5]]
    experts3 = experts + [([[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [-1.0, 1.0]],
                           [[0.5, 0.5], [-0.5, 1.0]])]
    cfg3 = dict(cfg, num_local_experts=3, num_experts_per_tok=2)
    t3 = _mixtral_tensors(gate3, experts3)
    top, w, y = _hand_mixtral(x, gate3, experts3, 2)
    ids, ws = ref.native_routing(cfg3, t3, 0, xa)
    assert ids.tolist() == [top] and top == [0, 2], (ids, top)
    close(ws, [w], what="E=3 weights")
    close(ref.moe_block(cfg3, t3, 0, xa), [y], what="E=3 k=2")

    # A generated checkpoint, one token, every expert written out as loops.
    d, gcfg = make("mixtral", "hand_mx", seed=11, hidden=8, intermediate=4, experts=4)
    _, gt = ref.load_checkpoint(d)
    xr = rand_x(8, 1, 5)
    q = "model.layers.1.block_sparse_moe"
    G = gt[f"{q}.gate.weight"].astype(float).tolist()
    ex = [tuple(gt[f"{q}.experts.{e}.{w}.weight"].astype(float).tolist()
                for w in ("w1", "w3", "w2")) for e in range(4)]
    top, w, y = _hand_mixtral(xr[0].astype(float).tolist(), G, ex, 2)
    ids, ws = ref.native_routing(gcfg, gt, 1, xr)
    assert ids.tolist() == [top]
    close(ref.moe_block(gcfg, gt, 1, xr), [y], what="generated mixtral")


def _ds_case(bias):
    """DeepSeek-V3 router with gate = identity, so the logits are x itself:
    E = 8 in 4 groups of 2, keep 2 groups, top-2, scaling 2.5."""
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
           "hidden_size": 8, "num_hidden_layers": 1, "intermediate_size": 4,
           "moe_intermediate_size": 2, "first_k_dense_replace": 0, "moe_layer_freq": 1,
           "n_routed_experts": 8, "n_shared_experts": 0, "num_experts_per_tok": 2,
           "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
           "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
           "rms_norm_eps": 1e-6}
    t = {"model.layers.0.mlp.gate.weight": np.eye(8, dtype=F32),
         "model.layers.0.mlp.gate.e_score_correction_bias": np.array(bias, F32)}
    return cfg, t


@check
def deepseek_group_limiting():
    """Experts of dropped groups are never chosen, even the single best one; the bias
    moves the choice but not the weights."""
    sig = lambda z: 1.0 / (1.0 + math.exp(-z))  # noqa: E731
    # Groups (0,1) (2,3) (4,5) (6,7); top-2 group sums with zero bias:
    #   g0 = s(4) + s(-4) = 1.000, g1 = 2 s(1) = 1.462, g2 = 2 s(0.5) = 1.245,
    #   g3 = 2 s(-1) = 0.538  -> keep g1, g2.  Expert 0 has the best score (0.982) but its
    #   group is dropped; the best kept are 2 and 3 (a tie -> lower id first).
    x = np.array([[4.0, -4.0, 1.0, 1.0, 0.5, 0.5, -1.0, -1.0]], F32)
    cfg, t = _ds_case([0.0] * 8)
    ids, w = ref.native_routing(cfg, t, 0, x)
    assert ids.tolist() == [[2, 3]], ids
    close(w, [[1.25, 1.25]], what="equal weights x scaling")
    all_groups = dict(cfg, topk_group=4)
    ids, w = ref.native_routing(all_groups, t, 0, x)
    assert ids.tolist() == [[0, 2]], ids
    s0, s2 = sig(4.0), sig(1.0)
    close(w, [[2.5 * s0 / (s0 + s2), 2.5 * s2 / (s0 + s2)]], what="all groups")
    # Bias +0.5 on expert 4: its choice score 1.122 lifts g2 to 1.745 and makes 4 the
    # first choice, but its weight is its unbiased score s(0.5).
    cfg, t = _ds_case([0, 0, 0, 0, 0.5, 0, 0, 0])
    ids, w = ref.native_routing(cfg, t, 0, x)
    assert ids.tolist() == [[4, 2]], ids
    s4 = sig(0.5)
    close(w, [[2.5 * s4 / (s4 + s2), 2.5 * s2 / (s4 + s2)]], what="biased choice")
    # Experts 2 and 3 tie for the second slot: zero margin.
    assert ref.routing_margin(cfg, t, 0, x).tolist() == [0.0]
    # Logit 0.8 for expert 3: g1 = s(1) + s(0.8) = 1.421, kept choices 0.731, 0.690,
    # 0.622, 0.622 -> margin = min(s(0.8) - s(0.5), g2 - g0 = 2 s(0.5) - 1).
    cfg, t = _ds_case([0.0] * 8)
    x2 = np.array([[4.0, -4.0, 1.0, 0.8, 0.5, 0.5, -1.0, -1.0]], F32)
    assert ref.native_routing(cfg, t, 0, x2)[0].tolist() == [[2, 3]]
    want = min(sig(0.8) - sig(0.5), 2 * sig(0.5) - 1.0)
    close(ref.routing_margin(cfg, t, 0, x2), [want], rtol=1e-6, what="margin")

    # A generated checkpoint: every token's experts lie in <= topk_group groups, and for
    # some tokens the best-scoring expert overall is excluded by its group.
    d, gcfg = make("deepseek_v3", "ds_gen", seed=3)
    _, gt = ref.load_checkpoint(d)
    G, TG, E = gcfg["n_group"], gcfg["topk_group"], gcfg["n_routed_experts"]
    x = rand_x(64, 256, 9)
    excluded = 0
    for l in ref.moe_layers(gcfg):
        ids, w = ref.native_routing(gcfg, gt, l, x)
        assert ids.shape == (256, 4) and ids.dtype == np.int32
        close(w.sum(axis=1), np.full(256, 2.5), what="sum = routed_scaling_factor")
        for row in ids:
            assert len(set(row.tolist())) == 4 and len({e // (E // G) for e in row}) <= TG
        logits = x.astype(np.float64) @ gt[f"model.layers.{l}.mlp.gate.weight"].T
        best = np.argmax(1 / (1 + np.exp(-logits)) +
                         gt[f"model.layers.{l}.mlp.gate.e_score_correction_bias"], axis=1)
        excluded += int(np.sum([b not in r for b, r in zip(best, ids)]))
        free, _ = ref.native_routing(dict(gcfg, topk_group=G), gt, l, x)
        assert np.array_equal(free[:, 0], best)  # ungrouped top-1 is the overall best
    assert excluded > 0, "group limiting never excluded the overall best expert"
    try:
        ref.moe_block(gcfg, gt, 0, x)
        raise AssertionError("dense DeepSeek layer 0 accepted as MoE")
    except ValueError:
        pass
    print(f"    (deepseek_v3: group limit excluded the overall best expert for "
          f"{excluded} of {256 * 2} token-layers)")


def _swiglu64(x, g, u, d):
    a = x @ g.T
    return ((a / (1 + np.exp(-a))) * (x @ u.T)) @ d.T


@check
def qwen2_shared_expert_gate():
    """Qwen2-MoE adds sigmoid(shared_expert_gate(x)) * shared_expert(x) to the routed sum."""
    d, cfg = make("qwen2_moe", "q2_shared", seed=4)
    _, t = ref.load_checkpoint(d)
    x = rand_x(64, 16, 2)
    y = ref.moe_block(cfg, t, 1, x).astype(np.float64)
    routed = ref.moe_block(dict(cfg, shared_expert_intermediate_size=0), t, 1, x)
    q = "model.layers.1.mlp.shared_expert"
    xd = x.astype(np.float64)
    shared = _swiglu64(xd, t[f"{q}.gate_proj.weight"].astype(float),
                       t[f"{q}.up_proj.weight"].astype(float),
                       t[f"{q}.down_proj.weight"].astype(float))
    gate = 1 / (1 + np.exp(-(xd @ t["model.layers.1.mlp.shared_expert_gate.weight"].T)))
    assert gate.shape == (16, 1) and gate.min() < 0.4 and gate.max() > 0.6, gate.ravel()
    close(y, routed + gate * shared, what="gated shared expert")
    # Not ungated: the gate visibly changes the output.
    assert np.abs(y - (routed + shared)).max() > 1e-2
    # Routed part by hand for token 0.
    ids, w = ref.native_routing(cfg, t, 1, x)
    r0 = sum(w[0, j] * _swiglu64(xd[:1], *(t[f"model.layers.1.mlp.experts.{ids[0, j]}.{p}"
                                              f".weight"].astype(float)
                                            for p in ("gate_proj", "up_proj", "down_proj")))
             for j in range(ids.shape[1]))
    close(routed[:1], r0, what="routed token 0")


@check
def norm_topk_prob():
    """norm_topk_prob false keeps the raw top-k softmax probabilities (Qwen2-MoE, OLMoE);
    true renormalizes them to sum 1 (Qwen3-MoE, Mixtral always); the ids are the same."""
    x = rand_x(64, 32, 3)
    for arch, norm in (("qwen2_moe", False), ("olmoe", False), ("qwen3_moe", True),
                       ("mixtral", True)):
        d, cfg = make(arch, f"norm_{arch}", seed=5)
        _, t = ref.load_checkpoint(d)
        ids, w = ref.native_routing(cfg, t, 0, x)
        sums = w.astype(np.float64).sum(axis=1)
        gw = t["model.layers.0." + ("block_sparse_moe" if arch == "mixtral" else "mlp") +
               ".gate.weight"].astype(np.float64)
        z = x.astype(np.float64) @ gw.T
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        assert np.array_equal(ids, np.argsort(-p, axis=1, kind="stable")[:, :2].astype(np.int32))
        raw = np.take_along_axis(p, ids.astype(int), axis=1)
        # Ids in descending probability order.
        assert np.all(raw[:, 0] >= raw[:, 1])
        if norm:
            close(sums, np.ones(32), what=f"{arch} sums")
            close(w, raw / raw.sum(1, keepdims=True), what=f"{arch} renormalized")
        else:
            assert np.all(sums < 1 - 1e-3), arch
            close(w, raw, what=f"{arch} raw")
            ids2, w2 = ref.native_routing(dict(cfg, norm_topk_prob=True), t, 0, x)
            assert np.array_equal(ids, ids2)
            close(w2, raw / raw.sum(1, keepdims=True), what=f"{arch} flipped")
            y1 = ref.moe_block(cfg, t, 0, x)
            y2 = ref.moe_block(dict(cfg, norm_topk_prob=True), t, 0, x)
            assert np.abs(y1 - y2).max() > 1e-3


@check
def explicit_routing_and_empty_slots():
    """Given ids/weights replace native routing; id -1 contributes nothing."""
    d, cfg = make("olmoe", "explicit", seed=6)
    _, t = ref.load_checkpoint(d)
    x = rand_x(64, 8, 4)
    ids, w = ref.native_routing(cfg, t, 1, x)
    close(ref.moe_block(cfg, t, 1, x, ids, w), ref.moe_block(cfg, t, 1, x), what="same")
    ids_m = ids.copy()
    ids_m[:, 1] = -1
    w0 = w.copy()
    w0[:, 1] = 0
    y_empty = ref.moe_block(cfg, t, 1, x, ids_m, w)        # weight ignored for -1
    close(y_empty, ref.moe_block(cfg, t, 1, x, ids, w0), what="-1 == weight 0")
    close(y_empty, ref.moe_block(cfg, t, 1, x, ids[:, :1], w[:, :1]), what="-1 == K=1")
    none = ref.moe_block(cfg, t, 1, x, np.full((8, 2), -1, np.int32), w)
    assert np.array_equal(none, np.zeros_like(none))
    # Slot order does not matter.
    close(ref.moe_block(cfg, t, 1, x, ids[:, ::-1].copy(), w[:, ::-1].copy()),
          ref.moe_block(cfg, t, 1, x), what="slot order")


@check
def stack_and_layers():
    """moe_stack = residual loop over the MoE layers; Qwen decoder_sparse_step /
    mlp_only_layers and DeepSeek's dense first layers are respected by both the
    generator and moe_layers."""
    d, cfg = make("qwen3_moe", "q3_sparse", seed=2, layers=4, sparse_step=2,
                  mlp_only_layers=[3])
    _, t = ref.load_checkpoint(d)
    assert ref.moe_layers(cfg) == [1]  # (l+1) % 2 == 0 -> 1, 3; 3 is mlp-only
    for l in (0, 2, 3):
        assert f"model.layers.{l}.mlp.gate_proj.weight" in t
        assert f"model.layers.{l}.mlp.gate.weight" not in t
    assert "model.layers.1.mlp.experts.0.gate_proj.weight" in t

    d, cfg = make("deepseek_v3", "ds_stack", seed=8)
    _, t = ref.load_checkpoint(d)
    x = rand_x(64, 12, 6)
    eps = cfg["rms_norm_eps"]
    h = x.copy()
    routes = {}
    for l in (1, 2):
        xn = ref.rmsnorm(h, t[f"model.layers.{l}.post_attention_layernorm.weight"], eps)
        routes[l] = ref.native_routing(cfg, t, l, xn)
        h = (h.astype(np.float64) + ref.moe_block(cfg, t, l, xn)).astype(F32)
    close(ref.moe_stack(cfg, t, x), h, what="stack")
    close(ref.moe_stack(cfg, t, x, routing=routes), h, what="dict routing")
    close(ref.moe_stack(cfg, t, x, routing=lambda l, xn: None), h, what="callable None")
    one = ref.moe_stack(cfg, t, x, layers=[2])
    assert np.abs(one - h).max() > 1e-3
    # rmsnorm by hand for one row.
    w = t["model.layers.1.post_attention_layernorm.weight"]
    r = x[0].astype(float)
    want = w * (r / math.sqrt(sum(v * v for v in r) / len(r) + eps))
    close(ref.rmsnorm(x[:1], w, eps), [want], what="rmsnorm")
    assert np.abs(h).max() < 50, "activations should stay O(1)"


@check
def errors_are_valueerrors():
    d, cfg = make("mixtral", "errs")
    _, t = ref.load_checkpoint(d)
    x = rand_x(64, 3, 1)
    ids, w = ref.native_routing(cfg, t, 0, x)
    bad = [
        lambda: ref.moe_block(cfg, t, 0, x.astype(np.float64)),
        lambda: ref.moe_block(cfg, t, 0, x[:, :32]),
        lambda: ref.moe_block(dict(cfg, model_type="llama"), t, 0, x),
        lambda: ref.native_routing({"model_type": "gpt_oss"}, t, 0, x),
        lambda: ref.moe_block(cfg, t, 0, x, ids, None),
        lambda: ref.moe_block(cfg, t, 0, x, ids, w.astype(np.float64)),
        lambda: ref.moe_block(cfg, t, 0, x, ids + 8, w),
        lambda: ref.moe_block(cfg, t, 5, x),
        lambda: ref.moe_block(cfg, {k: v.astype(np.float16) for k, v in t.items()}, 0, x),
        lambda: ref.rmsnorm(x.astype(np.float16), t["model.norm.weight"], 1e-5),
        lambda: mc.make_checkpoint("llama", os.path.join(TMP, "e1")),
        lambda: mc.make_checkpoint("mixtral", os.path.join(TMP, "e2"), dtype="int8"),
        lambda: mc.make_checkpoint("mixtral", os.path.join(TMP, "e3"), groups=2),
        lambda: mc.make_checkpoint("deepseek_v3", os.path.join(TMP, "e4"), groups=3),
        lambda: mc.make_checkpoint("olmoe", os.path.join(TMP, "e5"), top_k=9),
    ]
    for i, f in enumerate(bad):
        try:
            f()
        except ValueError:
            continue
        raise AssertionError(f"case {i} did not raise ValueError")


@check
def router_separation():
    """Generated routers separate the top-k choice: few tokens within 1e-4 of a tie."""
    for arch in mc.ARCHS:
        d, cfg = make(arch, f"sep_{arch}", seed=0)
        _, t = ref.load_checkpoint(d)
        x = rand_x(64, 512, 13)
        worst, near = np.inf, 0
        for l in ref.moe_layers(cfg):
            xn = ref.rmsnorm(x, t[f"model.layers.{l}.post_attention_layernorm.weight"],
                             cfg["rms_norm_eps"])
            m = ref.routing_margin(cfg, t, l, xn)
            worst, near = min(worst, float(m.min())), near + int(np.sum(m < 1e-4))
        n = 512 * len(ref.moe_layers(cfg))
        print(f"    ({arch}: {near}/{n} token-layers with margin < 1e-4, min {worst:.2e})")
        assert near <= 0.01 * n, arch


def main():
    global TMP
    t0 = time.time()
    TMP = tempfile.mkdtemp(prefix="moe_ref_selfcheck_")
    failed = []
    try:
        for fn in CHECKS:
            try:
                fn()
                print(f"PASS {fn.__name__}")
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                failed.append(fn.__name__)
                print(f"FAIL {fn.__name__}: {type(e).__name__}: {e}")
                traceback.print_exc(limit=3)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{len(CHECKS) - len(failed)}/{len(CHECKS)} checks passed "
          f"in {time.time() - t0:.1f} s" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
