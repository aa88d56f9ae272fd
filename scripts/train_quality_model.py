#!/usr/bin/env python3
"""Trains the small MoE language model that routing quality is measured on
(docs/quality.md): a Qwen3-MoE (4 layers, 16 experts, top-4) on the Python standard
library's source, so that its routing is learned rather than random. About 4 minutes
on 2 CPU cores, seeded (bit-identical weights need the same PyTorch, thread count and
standard library).

    python scripts/train_quality_model.py --out models/quality-moe [--steps 1200]

Data: the .py files directly under this Python's standard library directory, sorted;
every 10th file is held out (switchyard.trace.quality.stdlib_sources: the held-out text
is what the quality measurements read). Tokenizer: byte-level BPE with 512 tokens,
trained here on the training files. Weights are saved as bfloat16 (a few MB); train.json records the
settings, the data's hash and the loss curve.
"""
import argparse
import hashlib
import json
import math
import os
import time

VOCAB = 512
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]


def train_tokenizer(text, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(out)
    return fast


def build_model(vocab):
    import transformers
    config = transformers.Qwen3MoeConfig(
        vocab_size=vocab, hidden_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, intermediate_size=192, moe_intermediate_size=96,
        num_experts=16, num_experts_per_tok=4, norm_topk_prob=True, decoder_sparse_step=1,
        max_position_embeddings=256, tie_word_embeddings=True, output_router_logits=True,
        router_aux_loss_coef=0.01, bos_token_id=1, eos_token_id=2, pad_token_id=3)
    return transformers.Qwen3MoeForCausalLM(config)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the model directory to write")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=16, help="sequences per step")
    ap.add_argument("--context", type=int, default=128, help="tokens per sequence")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    from switchyard.trace.quality import read_sources, stdlib_sources
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    train_files, held_files = stdlib_sources()
    text = read_sources(train_files)
    tokenizer = train_tokenizer(text, args.out)
    ids = torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
    held = torch.tensor(tokenizer(read_sources(held_files))["input_ids"], dtype=torch.long)
    model = build_model(len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(args.seed)
    span = args.context + 1
    curve = []
    start = time.time()
    model.train()
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step /
                                                                   args.steps))
        for group in optimizer.param_groups:
            group["lr"] = lr
        offsets = torch.randint(0, len(ids) - span, (args.batch,), generator=generator)
        batch = torch.stack([ids[o:o + span] for o in offsets.tolist()])
        out = model(input_ids=batch[:, :-1], labels=batch[:, :-1].clone())
        optimizer.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0 or step == args.steps - 1:
            curve.append({"step": step, "loss": round(float(out.loss), 4)})
            print(f"step {step}: loss {float(out.loss):.3f} ({time.time() - start:.0f} s)",
                  flush=True)
    model.eval()
    with torch.no_grad():
        chunks = held[: (len(held) // args.context) * args.context].view(-1, args.context)
        chunks = chunks[:64]
        held_loss = float(model(input_ids=chunks, labels=chunks.clone()).loss)
    print(f"held-out loss {held_loss:.3f} nats/token ({len(chunks)} sequences)")
    model.config.output_router_logits = False
    model.to(torch.bfloat16).save_pretrained(args.out)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    with open(os.path.join(args.out, "train.json"), "w") as f:
        json.dump({"script": "scripts/train_quality_model.py", "args": vars(args),
                   "train_files": len(train_files), "held_out_files": len(held_files),
                   "train_tokens": len(ids), "held_out_tokens": len(held),
                   "train_text_sha256": digest, "held_out_loss": round(held_loss, 4),
                   "seconds": round(time.time() - start), "curve": curve}, f, indent=1)


if __name__ == "__main__":
    main()
