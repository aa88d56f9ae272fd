"""moe-eval --quality on the trained model (models/quality-moe, scripts/
train_quality_model.py), through transformers:

  - the model's own routing as a policy (topk_softmax) changes no token's
    log-probability (|delta| < 1e-4 nats), keeps all of the top-k mass, and activates
    as many experts per forward as the model's top-k ids do (counted here from the
    router logits, independently of the measurement's hooks);
  - with decode routing (each position's 8 tokens a routing call): top_p at p = 0.5
    activates fewer experts and keeps less mass than at p = 0.9 and loses more
    log-likelihood; OEA at k0 = 1 activates fewer experts than at k0 = 2, which
    activates fewer than the model's top-k, and loses more;
  - bad invocations exit 2 with a message (no --text, a trace and --quality, too few
    tokens).

The same measurement through vLLM with the plugin: vllm/engine, section quality.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "models", "quality-moe")
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402

CHECK = Checks()


def expect(ok, label):
    """One check, condition first (the long labels read better last)."""
    return CHECK(label, ok)


def independent_active(sequences, batch):
    """Experts the model's own top-k activates per layer and decode step: the top-k ids
    of one position's tokens across the batch (router logits read by hooks of this
    test's own)."""
    import torch
    from transformers import AutoModelForCausalLM
    from switchyard import hf
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    k = model.config.num_experts_per_tok
    counts = {}
    handles = []
    for layer, (_, module) in enumerate(hf.router_modules(model)):
        def hook(mod, args, output, layer=layer):
            ids = output[0].topk(k, dim=-1).indices.view(-1, sequences.shape[1], k)
            for t in range(ids.shape[1]):
                counts.setdefault(layer, []).append(int(ids[:, t].unique().numel()))
        handles.append(module.register_forward_hook(hook))
    with torch.no_grad():
        for start in range(0, len(sequences), batch):
            model(input_ids=torch.as_tensor(sequences[start:start + batch]))
    for handle in handles:
        handle.remove()
    return float(np.mean([np.mean(v) for v in counts.values()]))


def main():
    from switchyard.trace.quality import held_out_text, load_sequences, quality
    text = held_out_text()
    shape = dict(context=64, count=16, batch=8)
    native = quality(MODEL, "topk_softmax", [{}], text, engine="hf", **shape)
    own = native["results"][0]
    expect(abs(own["delta_loglik_mean"]) < 1e-6 and own["tokens_changed"] == 0.0,
                f"topk_softmax: delta loglik {own['delta_loglik_mean']:.2e}, "
                f"{own['tokens_changed']:.0%} of tokens changed by more than 1e-4")
    expect(abs(own["mass_kept_mean"] - 1.0) < 1e-6,
                f"topk_softmax: mass kept {own['mass_kept_mean']:.6f}")
    sequences = load_sequences(MODEL, text, shape["context"], shape["count"])
    expected = independent_active(sequences, shape["batch"])
    expect(abs(own["experts_active_mean"] - expected) < 1e-9,
                f"topk_softmax: experts active {own['experts_active_mean']:.3f} = the "
                f"model's top-k {expected:.3f}")
    expect(native["native"]["perplexity"] < 40,
                f"the trained model predicts held-out text: perplexity "
                f"{native['native']['perplexity']:.2f} (512-token vocabulary)")
    top_p = quality(MODEL, "top_p", [{"p": 0.5}, {"p": 0.9}], text, engine="hf", **shape)
    half, most = top_p["results"]
    expect(half["experts_active_mean"] < most["experts_active_mean"]
                < own["experts_active_mean"] + 1e-9,
                f"top_p: experts active {half['experts_active_mean']:.2f} (p 0.5) < "
                f"{most['experts_active_mean']:.2f} (p 0.9) <= top-k's")
    expect(half["delta_loglik_mean"] < most["delta_loglik_mean"]
                and abs(most["delta_loglik_mean"]) < 0.01
                and half["mass_kept_mean"] < most["mass_kept_mean"] < 1.0,
                f"top_p: delta loglik {half['delta_loglik_mean']:+.4f} (p 0.5) < "
                f"{most['delta_loglik_mean']:+.4f} (p 0.9, within 0.01), mass kept "
                f"{half['mass_kept_mean']:.3f} < {most['mass_kept_mean']:.3f} < 1")
    one, two = quality(MODEL, "oea", [{"k0": 1}, {"k0": 2}], text, engine="hf",
                       **shape)["results"]
    expect(one["experts_active_mean"] < two["experts_active_mean"]
           < own["experts_active_mean"]
           and one["delta_loglik_mean"] < two["delta_loglik_mean"] < 0,
           f"oea: experts active {one['experts_active_mean']:.2f} (k0 1) < "
           f"{two['experts_active_mean']:.2f} (k0 2) < {own['experts_active_mean']:.2f}, "
           f"delta loglik {one['delta_loglik_mean']:+.4f} < {two['delta_loglik_mean']:+.4f}"
           " < 0")

    work = tempfile.mkdtemp(prefix="switchyard-quality-")
    text_file = os.path.join(work, "held-out.py")
    with open(text_file, "w") as f:
        f.write(text)
    cli = [sys.executable, "-m", "switchyard.trace"]
    out = os.path.join(work, "q.json")
    run = subprocess.run(cli + ["--quality", MODEL, "--policy", "top_p", "--sweep",
                                "p=0.5:0.9:0.4", "--text", text_file, "--context", "64",
                                "--sequences", "8", "--json", out],
                         capture_output=True, text=True)
    report = json.load(open(out)) if run.returncode == 0 else {}
    expect(run.returncode == 0 and [r["knobs"] for r in report["results"]]
                == [{"p": 0.5}, {"p": 0.9}] and "delta loglik" in run.stdout,
                f"moe-eval --quality --sweep p=0.5:0.9:0.4: two settings "
                f"({run.stdout.strip().splitlines()[-1:] or run.stderr[-200:]})")
    for argv, expected in (
            (["--quality", MODEL, "--policy", "top_p", "--json", out], "--text"),
            (["trace-dir", "--quality", MODEL, "--policy", "top_p", "--text", text_file],
             "give no trace"),
            (["--quality", MODEL, "--policy", "top_p", "--text", text_file,
              "--sequences", "100000", "--json", out], "fewer than the 100000")):
        run = subprocess.run(cli + argv, capture_output=True, text=True)
        expect(run.returncode == 2 and expected in run.stderr,
                    f"moe-eval {' '.join(a for a in argv if a != MODEL)[:60]}: exit 2, "
                    f"says '{expected}' ({run.stderr.strip()[-120:]})")
    return CHECK.summary()


if __name__ == "__main__":
    sys.exit(main())
