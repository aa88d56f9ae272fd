#!/usr/bin/env python3
"""The Python package on a GPU (label gpu; exit 77 without one): routers compiled with
target="cuda" called on CUDA tensors (launched on the current torch stream, results
allocated by torch) give the host target's routing; bf16 logits; the vLLM function on
CUDA tensors; the custom op captured in a CUDA graph and under torch.compile.

Run: python test/gpu/test_python_gpu.py --build build
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True
failures = []


def check(label, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + label + ("" if ok else " " + detail))
    if not ok:
        failures.append(label)


def same(a, b):
    """Same routing: ids exact, float results within 1e-5."""
    a, b = a.cpu(), b.cpu()
    if a.dtype.is_floating_point:
        return bool((a - b).abs().max() <= 1e-5) if a.numel() else True
    return bool((a == b).all())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 77
    import switchyard as sy
    import switchyard.ops
    import switchyard.vllm

    gen = torch.Generator().manual_seed(0)
    cases = [
        ("topk_softmax", dict(experts=128, top_k=8), {}),
        ("deepseek_v3", dict(experts=256, top_k=8, groups=8, topk_groups=4),
         {"bias": 0.1 * torch.randn(256, generator=gen)}),
        ("xshare", dict(experts=128, top_k=4), {}),
        ("xshare_spec", dict(experts=128, top_k=4), "requests"),
        ("lynx", dict(experts=60, top_k=4), {"phase": 1}),
    ]
    for tokens in (5, 300, 2000):   # both GPU size classes
        for name, shape, extra in cases:
            host = sy.compile(name, **shape)
            cuda = sy.compile(name, target="cuda", **shape)
            logits = torch.randn(tokens, shape["experts"], generator=gen)
            inputs = {"request_ids": torch.arange(tokens) // 4} if extra == "requests" \
                else dict(extra)
            want = host(logits=logits, **inputs)
            got = cuda(logits=logits.cuda(), **{k: v.cuda() if hasattr(v, "cuda") else v
                                                 for k, v in inputs.items()})
            torch.cuda.synchronize()
            bad = [k for k in want if not same(want[k], got[k])]
            check(f"{name} T={tokens}: CUDA = host", not bad and
                  all(v.is_cuda for v in got.values()), f"(differs: {bad})")

    router = sy.compile("topk_softmax", experts=64, top_k=8, target="cuda",
                        outputs=("topk_ids", "topk_weights"))
    host = sy.compile("topk_softmax", experts=64, top_k=8)
    x = torch.randn(33, 64, generator=gen)
    xb = x.bfloat16()
    check("bf16 CUDA logits", same(router(logits=xb.cuda())["topk_ids"],
                                   host(logits=xb)["topk_ids"]))
    fn = switchyard.vllm.custom_routing_function("topk_softmax")
    w, ids = fn(None, x.cuda(), 8, True)
    check("vLLM function on CUDA tensors", ids.is_cuda and ids.dtype == torch.int32
          and same(ids, host(logits=x)["topk_ids"]) and same(w, host(logits=x)["topk_weights"]))

    static = x.cuda()
    for _ in range(2):   # warm up (loads the kernels) before capture
        switchyard.ops.route(router, logits=static)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured_ids, captured_w = switchyard.ops.route(router, logits=static)
    fresh = torch.randn(33, 64, generator=gen)
    static.copy_(fresh.cuda())
    graph.replay()
    torch.cuda.synchronize()
    check("the custom op replays in a CUDA graph",
          same(captured_ids, host(logits=fresh)["topk_ids"])
          and same(captured_w, host(logits=fresh)["topk_weights"]))

    compiled = torch.compile(lambda h: router(logits=h)["topk_ids"], fullgraph=True)
    check("torch.compile on CUDA", same(compiled(x.cuda()), host(logits=x)["topk_ids"]))
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
