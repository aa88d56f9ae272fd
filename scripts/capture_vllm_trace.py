#!/usr/bin/env python3
"""Captures a routing trace from the vLLM engine with Switchyard as its router
(SWITCHYARD_CAPTURE, docs/traces.md) and writes it with its provenance:

    .venv-vllm/bin/python scripts/capture_vllm_trace.py traces/vllm/qwen3-moe-tiny

The model is the plugin tests' small Qwen3-MoE (test/vllm/make_model.py: 16 experts,
top-4, 4 layers, random weights with well separated router logits, built here from a
fixed seed; no model hub is reachable), served by vLLM's CPU build in eager mode with
the shipped topk_softmax policy (the model's own routing). Prompts: the 8 of the plugin
test, 24 new tokens each, batched by vLLM's scheduler (prefill, then decode steps).
The routing of a random-weight model is not a trained model's: this trace shows the
capture path end to end; shared/traces/public/ holds real models' routing (docs/public-traces.md).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VLLM_TESTS = os.path.join(ROOT, "test", "vllm")
PROMPTS = ["the a of to and in", "water than call first who may down", "you that he was",
           "for on are with as I his they be at one have this from or had by hot word",
           "but what some we", "can out other were all there when up use your how said",
           "an each she which do their time if will way", "about many then them"]
SIZES = dict(experts=16, top_k=4, layers=4, hidden=128, intermediate=64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the trace directory to write (replaced)")
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parser.parse_args()
    try:
        import vllm
    except ImportError as e:
        print(f"capture_vllm_trace: vLLM is not importable ({e}); run it with "
              f".venv-vllm/bin/python (scripts/setup.sh makes it)", file=sys.stderr)
        return 2
    sys.path.insert(0, VLLM_TESTS)
    from make_model import make_model

    work = tempfile.mkdtemp(prefix="capture-vllm-")
    try:
        model = make_model("qwen3_moe", os.path.join(work, "model"), seed=1, **SIZES)
        capture = os.path.join(work, "capture")
        scenario = {"model": model, "prompts": PROMPTS, "max_tokens": args.max_tokens}
        env = dict(os.environ, SWITCHYARD_POLICY="topk_softmax", SWITCHYARD_CAPTURE=capture)
        run = subprocess.run([sys.executable, os.path.join(VLLM_TESTS, "engine_child.py"),
                              json.dumps(scenario)], env=env, capture_output=True, text=True)
        ranks = sorted(os.listdir(capture)) if os.path.isdir(capture) else []
        if run.returncode != 0 or len(ranks) != 1:
            print(run.stdout[-3000:] + run.stderr[-3000:], file=sys.stderr)
            print(f"capture_vllm_trace: the engine run failed (exit {run.returncode}, "
                  f"trace directories {ranks})", file=sys.stderr)
            return 1
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.copytree(os.path.join(capture, ranks[0]), args.out)
        with open(os.path.join(model, "config.json")) as f:
            config = json.load(f)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta_path = os.path.join(args.out, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    meta["model"] = "test/vllm/make_model.py qwen3_moe (random weights, seed 1)"
    for key in ("hidden_size", "moe_intermediate_size"):   # older plugins do not record them
        meta.setdefault(key, config[key])
    meta["provenance"] = {
        "engine": f"vLLM {vllm.__version__} (CPU build), enforce_eager=True, float32, "
                  f"policy topk_softmax through the Switchyard plugin",
        "model": f"test/vllm/make_model.py qwen3_moe seed=1 {SIZES}",
        "prompts": PROMPTS, "max_tokens": args.max_tokens,
        "command": "python scripts/capture_vllm_trace.py " + " ".join(sys.argv[1:]),
        "note": "a random-weight model: the routing shows the capture path, not a "
                "trained model's expert preferences"}
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {meta.get('layers')} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
