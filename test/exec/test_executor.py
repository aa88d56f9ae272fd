#!/usr/bin/python3
"""Execution tests of the MoE executor (`moe-exec`) on small random Hugging Face
checkpoints (test/support/make_checkpoint.py) against the numpy references of the models'
MoE blocks (test/exec/moe_reference.py):

  * native routing (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3; f32, f16, bf16,
    sharded): the same expert ids, weights within 1e-5, each block and the stack of
    layers within 1e-4;
  * every shipped router: each block equals the reference fed that policy's ids and
    weights; batch metadata (phase, request ids) reaches the policies that declare it;
  * replay reproduces a recorded run bit for bit, and replays what it is given;
  * malformed checkpoints, configs, inputs and flags fail with a clear message.

    test_executor.py --build BUILD_DIR [--only NAME]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.dont_write_bytecode = True
import moe_reference as ref  # noqa: E402
from make_checkpoint import make_checkpoint  # noqa: E402

TOL_WEIGHTS = 1e-5
TOL_LAYER = 1e-4
MARGIN = 1e-4  # tokens this close to a routing tie are not compared by id


class Suite:
    def __init__(self, build, work):
        self.exe = os.path.join(build, "bin", "moe-exec")
        self.work = work
        self.env = dict(os.environ, SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
        self.failures = []
        self.passed = 0
        self.models = {}

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL", what)

    def model(self, name, arch, **kwargs):
        if name not in self.models:
            path = os.path.join(self.work, name)
            make_checkpoint(arch, path, seed=kwargs.pop("seed", 1), **kwargs)
            self.models[name] = (path,) + ref.load_checkpoint(path)
        return self.models[name]

    def run(self, model_dir, x, out, *flags):
        os.makedirs(self.work, exist_ok=True)
        x_path = os.path.join(self.work, "x.npy")
        np.save(x_path, x)
        cmd = [self.exe, model_dir, "--input", x_path, "--out", out, *flags]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env)

    def exec_ok(self, what, model_dir, x, *flags):
        out = os.path.join(self.work, "out-" + str(len(os.listdir(self.work))))
        r = self.run(model_dir, x, out, *flags)
        self.check(r.returncode == 0, f"{what}: moe-exec failed: {r.stderr.strip()}")
        return out if r.returncode == 0 else None


def hidden(config, tokens, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((tokens, config["hidden_size"])).astype(np.float32)


def max_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


def check_native(s, name, arch, **kwargs):
    path, config, tensors = s.model(name, arch, **kwargs)
    x = hidden(config, 37, seed=3)
    out = s.exec_ok(f"{name} native blocks", path, x, "--block-only")
    if not out:
        return
    for layer in ref.moe_layers(config):
        ids, weights = ref.native_routing(config, tensors, layer, x)
        got_ids = np.load(f"{out}/topk_ids_{layer}.npy")
        got_w = np.load(f"{out}/topk_weights_{layer}.npy")
        clear = ref.routing_margin(config, tensors, layer, x) >= MARGIN
        s.check(np.array_equal(got_ids[clear], ids[clear]),
                f"{name} layer {layer}: native expert ids differ from the reference")
        s.check(max_err(got_w[clear], weights[clear]) <= TOL_WEIGHTS,
                f"{name} layer {layer}: native weights differ by {max_err(got_w, weights):.2e}")
        # The block against the reference fed the executor's own routing (robust to ties)
        # and, where no token is near a tie, against the reference's own routing.
        block = np.load(f"{out}/block_{layer}.npy")
        fed = ref.moe_block(config, tensors, layer, x, got_ids, got_w)
        s.check(max_err(block, fed) <= TOL_LAYER,
                f"{name} layer {layer}: block differs by {max_err(block, fed):.2e}")
        if clear.all():
            native = ref.moe_block(config, tensors, layer, x)
            s.check(max_err(block, native) <= TOL_LAYER,
                    f"{name} layer {layer}: block differs from the native reference")
    out = s.exec_ok(f"{name} native stack", path, x)
    if out:
        routing = {l: (np.load(f"{out}/topk_ids_{l}.npy"), np.load(f"{out}/topk_weights_{l}.npy"))
                   for l in ref.moe_layers(config)}
        h = ref.moe_stack(config, tensors, x, routing=routing)
        got = np.load(f"{out}/hidden.npy")
        s.check(max_err(got, h) <= TOL_LAYER, f"{name}: stack differs by {max_err(got, h):.2e}")
        metrics = json.load(open(f"{out}/metrics.json"))
        layers = metrics["layers"]
        s.check([m["layer"] for m in layers] == ref.moe_layers(config),
                f"{name}: metrics.json lists layers {[m['layer'] for m in layers]}")
        for m, l in zip(layers, ref.moe_layers(config)):
            counts = np.bincount(routing[l][0][routing[l][0] >= 0].ravel(),
                                 minlength=ref.num_experts(config))
            s.check(m["tokens_per_expert"] == counts.tolist() and
                    m["active_experts"] == int((counts > 0).sum()),
                    f"{name} layer {l}: metrics' tokens per expert differ from the routing")


def check_policy(s, model_name, arch, policy, *flags, tokens=24):
    path, config, tensors = s.model(model_name, arch)
    x = hidden(config, tokens, seed=5)
    what = f"{policy} on {model_name}"
    out = s.exec_ok(what, path, x, "--block-only", "--policy",
                    os.path.join(ROOT, "policies", policy + ".mlir"), *flags)
    if not out:
        return None
    routings = {}
    for layer in ref.moe_layers(config):
        ids = np.load(f"{out}/topk_ids_{layer}.npy")
        w = np.load(f"{out}/topk_weights_{layer}.npy")
        routings[layer] = (ids, w)
        block = np.load(f"{out}/block_{layer}.npy")
        fed = ref.moe_block(config, tensors, layer, x, ids, w)
        s.check(max_err(block, fed) <= TOL_LAYER,
                f"{what} layer {layer}: block differs from the reference fed the policy's "
                f"routing by {max_err(block, fed):.2e}")
    return routings


def active(routings):
    return sum(len(np.unique(ids[ids >= 0])) for ids, _ in routings.values())


def check_policies(s):
    for model_name, arch in (("mixtral", "mixtral"), ("qwen3", "qwen3_moe"),
                             ("deepseek", "deepseek_v3")):
        for policy in ("topk_softmax", "lynx", "xshare", "xshare_spec", "xshare_ep"):
            check_policy(s, model_name, arch, policy)
    check_policy(s, "deepseek", "deepseek_v3", "deepseek_v3")
    # LYNX acts on the batch's phase: a decode batch drops experts, a prefill batch does
    # not (its phase gate), so prefill touches at least as many experts.
    decode = check_policy(s, "qwen3", "qwen3_moe", "lynx", "--phase", "decode")
    prefill = check_policy(s, "qwen3", "qwen3_moe", "lynx", "--phase", "prefill")
    if decode and prefill:
        s.check(active(prefill) >= active(decode),
                f"lynx: prefill touched {active(prefill)} experts, decode {active(decode)}")
    # Knobs at run time: a smaller XShare budget touches fewer experts (3 tokens: their
    # top-1 experts leave room for the budget to matter).
    wide = check_policy(s, "qwen3", "qwen3_moe", "xshare", "--set", "budget=8", tokens=3)
    narrow = check_policy(s, "qwen3", "qwen3_moe", "xshare", "--set", "budget=0", tokens=3)
    if wide and narrow:
        s.check(active(narrow) < active(wide),
                f"xshare: budget=2 touched {active(narrow)} experts, budget=8 {active(wide)}")
    # XShare-spec selects per request: the batch's request ids reach it. Two verify
    # steps of 2 tokens (one accepted + one draft) each get one expert beyond their
    # tokens' top-1 (request_budget=1); as 4 single-token requests, each token does.
    rid = _save(s, "rid.npy", np.array([0, 0, 1, 1], np.int32))
    pos = _save(s, "pos.npy", np.array([10, 11, 20, 21], np.int32))
    spec = check_policy(s, "qwen3", "qwen3_moe", "xshare_spec", "--request-ids", rid,
                        "--positions", pos, "--set", "request_budget=1", tokens=4)
    one = check_policy(s, "qwen3", "qwen3_moe", "xshare_spec", "--set", "request_budget=1",
                       tokens=4)
    if spec and one:
        s.check(active(spec) < active(one),
                f"xshare_spec: 2 requests touched {active(spec)} experts, 4 requests "
                f"{active(one)}")


def check_replay(s):
    path, config, tensors = s.model("qwen2", "qwen2_moe")
    x = hidden(config, 19, seed=7)
    first = s.exec_ok("replay: record", path, x, "--policy",
                      os.path.join(ROOT, "policies", "xshare.mlir"))
    again = s.exec_ok("replay: replay", path, x, "--replay", first or "")
    if not (first and again):
        return
    a, b = np.load(f"{first}/hidden.npy"), np.load(f"{again}/hidden.npy")
    s.check(a.tobytes() == b.tobytes(), "replay: the replayed run is not bit-identical")
    # A replay uses what it is given: change one token's weights in a copy.
    edited = os.path.join(s.work, "edited")
    shutil.copytree(first, edited)
    layer = ref.moe_layers(config)[0]
    w = np.load(f"{edited}/topk_weights_{layer}.npy")
    w[0] = w[0][::-1]
    np.save(f"{edited}/topk_weights_{layer}.npy", w)
    changed = s.exec_ok("replay: edited", path, x, "--replay", edited)
    if changed:
        c = np.load(f"{changed}/hidden.npy")
        s.check(not np.array_equal(c[0], a[0]) and np.array_equal(c[1:], a[1:]),
                "replay: editing token 0's weights did not change exactly token 0")


def check_batches(s):
    """--batches runs each batch exactly as --input would, with its own structure."""
    path, config, _ = s.model("qwen3", "qwen3_moe")
    rng = np.random.default_rng(11)
    H = config["hidden_size"]
    batches = [  # decode steps of 5 requests, a prefill, a verify step of 2 requests
        (rng.standard_normal((5, H)), np.arange(5), np.full(5, 7)),
        (rng.standard_normal((12, H)), np.zeros(12), np.arange(12)),
        (rng.standard_normal((8, H)), np.repeat([3, 4], 4), np.tile(np.arange(20, 24), 2))]
    members = {}
    for i, (x, r, p) in enumerate(batches):
        members[f"hidden_{i}"] = x.astype(np.float32)
        members[f"request_ids_{i}"] = r.astype(np.int32)
        members[f"positions_{i}"] = p.astype(np.int32)
    npz = os.path.join(s.work, "batches.npz")
    np.savez_compressed(npz, **members)
    lynx = os.path.join(ROOT, "policies", "lynx.mlir")
    out = os.path.join(s.work, "batches-out")
    r = s.run(path, np.zeros((1, H), np.float32), out, "--policy", lynx)  # warm the cache
    r = subprocess.run([s.exe, path, "--batches", npz, "--out", out, "--policy", lynx],
                       capture_output=True, text=True, env=s.env)
    s.check(r.returncode == 0, f"--batches failed: {r.stderr.strip()}")
    if r.returncode:
        return
    table = r.stdout
    for phase in ("decode", "prefill"):
        s.check(phase in table, f"--batches: no {phase} batch in the table:\n{table}")
    for i, (x, req, pos) in enumerate(batches):
        alone = s.exec_ok(f"batch {i} alone", path, x.astype(np.float32), "--policy", lynx,
                          "--request-ids", _save(s, f"r{i}.npy", req.astype(np.int32)),
                          "--positions", _save(s, f"p{i}.npy", pos.astype(np.int32)))
        if alone:
            a = np.load(f"{out}/batch_{i}/hidden.npy")
            b = np.load(f"{alone}/hidden.npy")
            s.check(a.tobytes() == b.tobytes(), f"--batches: batch {i} differs from --input")
    for what, content, expected in (
            ("not a zip", b"nope", "as an .npz (zip) archive"),
            ("no hidden_0", {"hidden_1": np.zeros((1, H), np.float32)}, "no hidden_0"),
            ("stray member", {"hidden_0": np.zeros((1, H), np.float32),
                              "bias_0": np.zeros(3, np.float32)}, "members other than"),
            ("bad phase", {"hidden_0": np.zeros((1, H), np.float32),
                           "phase_0": np.int32(5)}, "0 (prefill), 1 (decode) or 2"),
            ("short ids", {"hidden_0": np.zeros((2, H), np.float32),
                           "request_ids_0": np.zeros(3, np.int32)}, "expected shape (2,)")):
        bad = os.path.join(s.work, "bad.npz")
        if isinstance(content, bytes):
            open(bad, "wb").write(content)
        else:
            np.savez(bad, **content)
        r = subprocess.run([s.exe, path, "--batches", bad, "--out", out],
                           capture_output=True, text=True, env=s.env)
        s.check(r.returncode == 1 and expected in r.stderr,
                f"--batches {what}: expected '{expected}', got {r.returncode}: {r.stderr.strip()}")


def write_safetensors(path, header, data=b""):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def check_errors(s):
    path, config, _ = s.model("mixtral", "mixtral")
    x = hidden(config, 4, seed=9)
    bad = os.path.join(s.work, "bad")

    def broken(mutate):
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(path, bad)
        mutate(bad)
        return bad

    def error(what, model_dir, expected, *flags, data=x):
        r = s.run(model_dir, data, os.path.join(s.work, "err-out"), *flags)
        s.check(r.returncode == 1 and expected in r.stderr and "moe-exec: error:" in r.stderr,
                f"{what}: expected exit 1 and '{expected}', got {r.returncode}: "
                f"{r.stderr.strip()[:300]}")

    st = "model.safetensors"
    blob = open(os.path.join(path, st), "rb").read()
    error("truncated file", broken(lambda d: open(f"{d}/{st}", "wb").write(blob[:len(blob) // 2])),
          "outside the")
    error("short file", broken(lambda d: open(f"{d}/{st}", "wb").write(b"abc")),
          "8-byte header length is missing")
    error("header past the end",
          broken(lambda d: open(f"{d}/{st}", "wb").write(struct.pack("<Q", 1 << 40) + b"{}")),
          "past the end")
    error("header not JSON",
          broken(lambda d: open(f"{d}/{st}", "wb").write(struct.pack("<Q", 5) + b"{oops")),
          "not a JSON object")
    error("unknown dtype", broken(lambda d: write_safetensors(
        f"{d}/{st}", {"t": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)),
        "unknown dtype 'F33'")
    error("size mismatch", broken(lambda d: write_safetensors(
        f"{d}/{st}", {"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 4]}}, b"\0" * 4)),
        "expected 12")
    error("overlap", broken(lambda d: write_safetensors(
        f"{d}/{st}", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
        b"\0" * 12)), "overlap")
    error("huge shape", broken(lambda d: write_safetensors(
        f"{d}/{st}", {"t": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 4]}},
        b"\0" * 4)), "too many elements")
    error("missing tensor", broken(lambda d: write_safetensors(
        f"{d}/{st}", {"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)),
        "has no tensor 'model.layers.0.block_sparse_moe.gate.weight'")

    def wrong_config(d, **changes):
        c = json.load(open(f"{d}/config.json"))
        c.update(changes)
        json.dump(c, open(f"{d}/config.json", "w"))
    error("tensor shape vs config", broken(lambda d: wrong_config(d, hidden_size=32)),
          "expected [8, 32] (from config.json)")
    error("unknown architecture",
          broken(lambda d: wrong_config(d, architectures=["LlamaForCausalLM"], model_type="llama")),
          "is not a MoE model the executor runs")
    error("bad config value", broken(lambda d: wrong_config(d, num_local_experts="8")),
          "num_local_experts must be an integer")
    error("top-k above E", broken(lambda d: wrong_config(d, num_experts_per_tok=9)),
          "is more than the 8 experts")
    error("config not JSON", broken(lambda d: open(f"{d}/config.json", "w").write("{")),
          "not a JSON object")
    error("no checkpoint", os.path.join(s.work, "nowhere"), "cannot open")
    error("index names a missing tensor", broken(lambda d: json.dump(
        {"weight_map": {"ghost": st}}, open(f"{d}/model.safetensors.index.json", "w"))),
        "tensor 'ghost' is listed in model.safetensors but not there")
    error("input width", path, "expected hidden states [T, 64]",
          data=np.zeros((4, 32), np.float32))
    error("input dtype", path, "float64", data=np.zeros((4, 64), np.float64))
    error("unknown flag", path, "unknown option '--frobnicate'", "--frobnicate")
    error("unknown knob", path, "unknown knob 'nope'", "--policy",
          os.path.join(ROOT, "policies", "xshare.mlir"), "--set", "nope=1")
    error("bad knob value", path, "budget", "--policy",
          os.path.join(ROOT, "policies", "xshare.mlir"), "--set", "budget=-3")
    error("knob on a knob-less policy", path, "has no run-time knobs", "--set", "budget=3")
    error("layer range", path, "is not a non-empty range", "--layers", "5:9")
    error("bad phase", path, "--phase 'warmup'", "--phase", "warmup")
    error("rule as router", path, "is a residency rule, not a router", "--policy",
          os.path.join(ROOT, "policies", "dynaexq.mlir"))
    error("missing policy", path, "cannot open policy", "--policy", "/nonexistent.mlir")
    error("request ids length", path, "expected shape (4,)", "--request-ids",
          _save(s, "rid3.npy", np.arange(3, dtype=np.int32)))
    error("positions out of order", path, "consecutive", "--request-ids",
          _save(s, "rid0.npy", np.zeros(4, np.int32)), "--positions",
          _save(s, "pos_bad.npy", np.array([0, 2, 1, 3], np.int32)))
    error("replay missing", path, "--replay", "--replay", os.path.join(s.work, "nowhere"))
    error("cuda without GPU support", path, "--device cuda", "--device", "cuda")


def _save(s, name, array):
    p = os.path.join(s.work, name)
    np.save(p, array)
    return p


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--only")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="switchyard-exec-")
    s = Suite(os.path.abspath(args.build), work)
    groups = {
        "native": lambda: [
            check_native(s, "mixtral", "mixtral"),
            check_native(s, "qwen2", "qwen2_moe"),
            check_native(s, "qwen3", "qwen3_moe"),
            check_native(s, "olmoe", "olmoe"),
            check_native(s, "deepseek", "deepseek_v3"),
            check_native(s, "qwen3-bf16-sharded", "qwen3_moe", dtype="bfloat16", shards=3),
            check_native(s, "mixtral-f16", "mixtral", dtype="float16"),
            check_native(s, "deepseek-bf16", "deepseek_v3", dtype="bfloat16", shards=2)],
        "policies": lambda: check_policies(s),
        "replay": lambda: [check_replay(s), check_batches(s)],
        "errors": lambda: check_errors(s),
    }
    try:
        for name, run in groups.items():
            if not args.only or args.only == name:
                run()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{s.passed} checks passed, {len(s.failures)} failed")
    sys.exit(1 if s.failures else 0)


if __name__ == "__main__":
    main()
