"""A small random Hugging Face MoE model with a locally built tokenizer, as a vLLM
engine loads it (config.json + model.safetensors written by transformers'
save_pretrained, tokenizer.json by the tokenizers library): no model hub.

    python make_model.py --arch qwen3_moe --out DIR [--layers 2 --experts 16 --top-k 4]
"""
import argparse
import json
import os

ARCHS = ("qwen3_moe", "mixtral", "deepseek_v3")
WORDS = ("the a of to and in is it you that he was for on are with as I his they be at "
         "one have this from or had by hot word but what some we can out other were all "
         "there when up use your how said an each she which do their time if will way "
         "about many then them write would like so these her long make thing see him two "
         "has look more day could go come did number sound no most people my over know "
         "water than call first who may down side been now find").split()


def build_tokenizer(out: str) -> int:
    """A word-level tokenizer over WORDS plus special tokens; returns its vocab size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    vocab = {tok: i for i, tok in enumerate(specials + list(dict.fromkeys(WORDS)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")   # joins words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(out)
    return len(vocab)


def build_config(arch: str, vocab: int, a):
    import transformers
    common = dict(vocab_size=vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                  num_experts_per_tok=a.top_k, bos_token_id=1, eos_token_id=2,
                  pad_token_id=3, tie_word_embeddings=False)
    if arch == "qwen3_moe":
        return transformers.Qwen3MoeConfig(
            intermediate_size=2 * a.intermediate, moe_intermediate_size=a.intermediate,
            num_experts=a.experts, norm_topk_prob=True, head_dim=a.hidden // 2,
            decoder_sparse_step=1, **common)
    if arch == "mixtral":
        return transformers.MixtralConfig(intermediate_size=a.intermediate,
                                          num_local_experts=a.experts, **common)
    config = transformers.DeepseekV3Config(
        intermediate_size=2 * a.intermediate, moe_intermediate_size=a.intermediate,
        n_routed_experts=a.experts, n_shared_experts=1, n_group=4, topk_group=2,
        first_k_dense_replace=0, routed_scaling_factor=2.5, norm_topk_prob=True,
        q_lora_rank=None, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=32,
        v_head_dim=32, **common)
    # As the hub's DeepSeek-V3 config.json states them (vLLM reads both).
    config.topk_method = "noaux_tc"
    config.scoring_func = "sigmoid"
    return config


def make_model(arch: str, out: str, seed: int = 0, **sizes) -> str:
    import torch
    import transformers
    a = argparse.Namespace(layers=2, hidden=128, intermediate=64, experts=16, top_k=4)
    for key, value in sizes.items():
        if value is not None:
            setattr(a, key, value)
    os.makedirs(out, exist_ok=True)
    vocab = build_tokenizer(out)
    config = build_config(arch, vocab, a)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():   # well separated router logits: a stable greedy top-k
        for name, p in model.named_parameters():
            if name.endswith("gate.weight") and p.dim() == 2 and p.shape[0] == a.experts:
                p.normal_(0.0, 3.0 / a.hidden ** 0.5)
            if name.endswith("e_score_correction_bias"):
                p.normal_(0.0, 0.1)
    model.save_pretrained(out, safe_serialization=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", choices=ARCHS, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    for name in ("layers", "hidden", "intermediate", "experts", "top-k"):
        ap.add_argument(f"--{name}", type=int)
    a = ap.parse_args()
    make_model(a.arch, a.out, a.seed, layers=a.layers, hidden=a.hidden,
               intermediate=a.intermediate, experts=a.experts, top_k=a.top_k)
    print(json.dumps({"model": a.out}))


if __name__ == "__main__":
    main()
