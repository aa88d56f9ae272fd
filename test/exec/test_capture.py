#!/usr/bin/python3
"""moe-exec --capture DIR: the executor's routing as a routing trace (docs/traces.md),
read back with switchyard.trace.load_trace, on small random checkpoints
(test/support/make_checkpoint.py):

  * the logits are the router GEMM of each layer's input (x @ gate.T with --block-only,
    RMSNorm_l(h) @ gate.T in the stack), the ids / weights moe-exec's own topk outputs;
    meta.json, shapes and dtypes as the format says (uint16 ids past 256 experts);
  * --batches: one step per batch, per-token request ids, positions and phases
    (prefill, decode, verify); --capture-max-tokens stops before the step that would
    pass it, with one warning; the results are the same with and without --capture;
  * mpirun -np 2 --ep 2: rank 0 writes the same trace as one rank;
  * bad --capture directories and flag combinations fail with a message naming them.

    test_capture.py --build BUILD_DIR
"""
import argparse
import os
import shutil
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
from policy_shapes import import_switchyard  # noqa: E402

TOL = 1e-5


class Suite:
    def __init__(self, build, work):
        self.exe = os.path.join(build, "bin", "moe-exec")
        self.work = work
        self.env = dict(os.environ, SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
        self.failed = []
        self.passed = 0
        self.runs = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
            print("FAIL", what)

    def path(self, name):
        self.runs += 1
        return os.path.join(self.work, f"{name}-{self.runs}")

    def run(self, model, *flags):
        cmd = [self.exe, model, *flags]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env)


def max_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def gate(tensors, config, layer):
    return ref._tensor(tensors, ref._prefix(config, layer) + ".gate.weight").astype(np.float32)


def check_meta(s, what, trace, config, model, tokens):
    s.check(trace.meta.get("format") == "switchyard-trace" and trace.meta.get("version") == 1,
            f"{what}: meta.json format/version {trace.meta}")
    s.check(trace.source == "moe-exec" and trace.model == model and trace.dtype == "float32",
            f"{what}: source/model/dtype {trace.source!r} {trace.model!r} {trace.dtype!r}")
    sizes = {key: trace.meta.get(key) for key in ("hidden_size", "moe_intermediate_size",
                                                   "torch_dtype")}
    want = {"hidden_size": config["hidden_size"],
            "moe_intermediate_size": config.get("moe_intermediate_size",
                                                config.get("intermediate_size")),
            "torch_dtype": config.get("dtype", config.get("torch_dtype"))}
    s.check(sizes == want, f"{what}: the experts' sizes and dtype {sizes}, config {want}")
    s.check(trace.num_experts == ref.num_experts(config)
            and trace.top_k == config["num_experts_per_tok"],
            f"{what}: num_experts/top_k {trace.num_experts}/{trace.top_k}")
    s.check(trace.layers == ref.moe_layers(config),
            f"{what}: layers {trace.layers}, expected {ref.moe_layers(config)}")
    s.check(trace.num_tokens == tokens, f"{what}: {trace.num_tokens} tokens, expected {tokens}")
    e, k = trace.num_experts, trace.top_k
    compact = np.uint8 if e <= 256 else np.uint16
    for layer in trace.layers:
        s.check(trace.logits[layer].dtype == np.float32
                and trace.logits[layer].shape == (tokens, e),
                f"{what} layer {layer}: logits {trace.logits[layer].dtype} "
                f"{trace.logits[layer].shape}")
        s.check(trace.ids[layer].dtype == compact and trace.ids[layer].shape == (tokens, k),
                f"{what} layer {layer}: ids {trace.ids[layer].dtype} {trace.ids[layer].shape}")
        s.check(trace.weights[layer].dtype == np.float32
                and trace.weights[layer].shape == (tokens, k),
                f"{what} layer {layer}: weights {trace.weights[layer].dtype}")
    for name, dtype in (("request_ids", np.int32), ("positions", np.int32),
                        ("phase", np.uint8), ("step", np.int32)):
        a = getattr(trace, name)
        s.check(a.dtype == dtype and a.shape == (tokens,),
                f"{what}: {name}.npy {a.dtype} {a.shape}")


def check_own_routing(s, what, trace, out, rows=None):
    """The trace's ids / weights are moe-exec's topk_ids / topk_weights outputs."""
    for layer in trace.layers:
        ids = np.load(f"{out}/topk_ids_{layer}.npy")
        w = np.load(f"{out}/topk_weights_{layer}.npy")
        got_ids, got_w = trace.ids[layer], trace.weights[layer]
        if rows is not None:
            got_ids, got_w = got_ids[rows], got_w[rows]
        s.check(np.array_equal(got_ids.astype(np.int64), ids.astype(np.int64)),
                f"{what} layer {layer}: ids differ from moe-exec's topk_ids_{layer}.npy")
        s.check(np.array_equal(got_w, w),
                f"{what} layer {layer}: weights differ from topk_weights_{layer}.npy")


def check_blocks(s, sy_trace, name, arch, **sizes):
    """--block-only: every layer routes x itself, logits = x @ gate.T."""
    model = os.path.join(s.work, name)
    make_checkpoint(arch, model, seed=2, **sizes)
    config, tensors = ref.load_checkpoint(model)
    x = np.random.default_rng(7).standard_normal((37, config["hidden_size"])).astype(np.float32)
    x_path = s.path("x") + ".npy"
    np.save(x_path, x)
    out, trace_dir = s.path("out"), s.path("trace")
    r = s.run(model, "--input", x_path, "--out", out, "--block-only", "--capture", trace_dir)
    s.check(r.returncode == 0, f"{name} blocks: moe-exec --capture failed: {r.stderr.strip()}")
    if r.returncode:
        return
    s.check(f"captured {trace_dir}: 37 tokens, 1 steps" in r.stdout,
            f"{name} blocks: no capture line in {r.stdout!r}")
    trace = sy_trace.load_trace(trace_dir)
    check_meta(s, f"{name} blocks", trace, config, model, 37)
    groups = sizes.get("groups")
    s.check(trace.groups == groups, f"{name}: groups {trace.groups}, expected {groups}")
    for layer in trace.layers:
        want = x @ gate(tensors, config, layer).T
        err = max_err(trace.logits[layer], want)
        s.check(err <= TOL, f"{name} layer {layer}: logits differ from x @ gate.T by {err:.2e}")
    check_own_routing(s, f"{name} blocks", trace, out)
    # One request per token at position 0 (no batch metadata given): 37 decode tokens.
    s.check(np.array_equal(trace.request_ids, np.arange(37)) and not trace.positions.any()
            and (trace.phase == 1).all() and not trace.step.any(),
            f"{name} blocks: per-token arrays {trace.request_ids[:4]} {trace.positions[:4]} "
            f"{trace.phase[:4]} {trace.step[:4]}")


def batches(config):
    """Three batches: a prefill (8 tokens), a verify step and a decode (5), a mixed one
    (4 prefill, 1 decode, 1 + 2 draft tokens of a verify: 8)."""
    rng = np.random.default_rng(11)
    h = config["hidden_size"]
    meta = [
        (np.zeros(8, np.int32), np.arange(8, dtype=np.int32), [0] * 8),
        (np.array([3, 3, 3, 4, 5], np.int32), np.array([10, 11, 12, 7, 9], np.int32),
         [1, 2, 2, 1, 1]),
        (np.array([6, 6, 6, 6, 7, 8, 8, 8], np.int32),
         np.array([0, 1, 2, 3, 20, 5, 6, 7], np.int32), [0, 0, 0, 0, 1, 1, 2, 2]),
    ]
    arrays, phases, xs = {}, [], []
    for i, (rid, pos, phase) in enumerate(meta):
        x = rng.standard_normal((len(rid), h)).astype(np.float32)
        arrays[f"hidden_{i}"], arrays[f"request_ids_{i}"] = x, rid
        arrays[f"positions_{i}"] = pos
        xs.append(x)
        phases.append(phase)
    return arrays, xs, meta, phases


def check_batches(s, sy_trace):
    model = os.path.join(s.work, "mixtral-batches")
    make_checkpoint("mixtral", model, seed=3)
    config, tensors = ref.load_checkpoint(model)
    arrays, xs, meta, phases = batches(config)
    npz = s.path("batches") + ".npz"
    np.savez(npz, **arrays)

    # Stack, every step recorded: layer 0's logits are RMSNorm_0(x) @ gate.T.
    out, trace_dir = s.path("out"), s.path("trace")
    r = s.run(model, "--batches", npz, "--out", out, "--capture", trace_dir)
    s.check(r.returncode == 0, f"batches: moe-exec --capture failed: {r.stderr.strip()}")
    if r.returncode:
        return
    s.check("warning" not in r.stderr, f"batches: unexpected warning {r.stderr!r}")
    trace = sy_trace.load_trace(trace_dir)
    total = sum(len(x) for x in xs)
    check_meta(s, "batches", trace, config, model, total)
    layer0 = ref.moe_layers(config)[0]
    norm = ref._tensor(tensors, f"model.layers.{layer0}.post_attention_layernorm.weight")
    want = np.concatenate([ref.rmsnorm(x, norm.astype(np.float32), config["rms_norm_eps"])
                           for x in xs]) @ gate(tensors, config, layer0).T
    err = max_err(trace.logits[layer0], want)
    s.check(err <= 1e-4, f"batches stack layer {layer0}: logits differ by {err:.2e}")
    start = 0
    for i, (rid, pos, _) in enumerate(meta):
        rows = slice(start, start + len(rid))
        check_own_routing(s, f"batches step {i}", trace, f"{out}/batch_{i}", rows)
        s.check(np.array_equal(trace.request_ids[rows], rid)
                and np.array_equal(trace.positions[rows], pos),
                f"batches step {i}: request ids / positions differ")
        s.check(trace.phase[rows].tolist() == phases[i],
                f"batches step {i}: phases {trace.phase[rows].tolist()}, expected {phases[i]}")
        s.check((trace.step[rows] == i).all(), f"batches step {i}: step {trace.step[rows]}")
        start += len(rid)

    # The same run without --capture writes the same results.
    plain = s.path("out")
    r = s.run(model, "--batches", npz, "--out", plain)
    s.check(r.returncode == 0, f"batches without --capture failed: {r.stderr.strip()}")
    for i in range(len(xs)):
        same = all(np.array_equal(np.load(f"{out}/batch_{i}/{f}"),
                                  np.load(f"{plain}/batch_{i}/{f}"))
                   for f in ["hidden.npy"] + [f"topk_ids_{l}.npy" for l in trace.layers])
        s.check(same, f"batch {i}: results differ with --capture")

    # --capture-max-tokens 14: steps 0 (8) and 1 (5) fit, step 2 (8) would pass 14.
    out, trace_dir = s.path("out"), s.path("trace")
    r = s.run(model, "--batches", npz, "--out", out, "--block-only", "--capture", trace_dir,
              "--capture-max-tokens", "14")
    s.check(r.returncode == 0, f"max-tokens: moe-exec failed: {r.stderr.strip()}")
    if r.returncode:
        return
    s.check(r.stderr.count("warning") == 1 and "--capture-max-tokens 14" in r.stderr,
            f"max-tokens: expected one warning naming the bound, got {r.stderr!r}")
    trace = sy_trace.load_trace(trace_dir)
    s.check(trace.num_tokens == 13 and trace.step.tolist() == [0] * 8 + [1] * 5,
            f"max-tokens: {trace.num_tokens} tokens, steps {trace.step.tolist()}")
    x01 = np.concatenate(xs[:2])
    err = max_err(trace.logits[layer0], x01 @ gate(tensors, config, layer0).T)
    s.check(err <= TOL, f"max-tokens blocks: logits differ by {err:.2e}")

    # A bound below the first step: an empty trace that still loads.
    trace_dir = s.path("trace")
    r = s.run(model, "--batches", npz, "--out", s.path("out"), "--capture", trace_dir,
              "--capture-max-tokens", "3")
    s.check(r.returncode == 0 and r.stderr.count("warning") == 1,
            f"max-tokens 3: rc {r.returncode}, stderr {r.stderr!r}")
    if r.returncode == 0:
        trace = sy_trace.load_trace(trace_dir)
        s.check(trace.num_tokens == 0 and trace.layers == ref.moe_layers(config)
                and trace.top_k == 2, f"max-tokens 3: {trace.num_tokens} tokens")


def check_ep(s, sy_trace):
    """mpirun -np 2 moe-exec --ep 2 --capture: rank 0 records the global routing, the
    same trace as one rank's."""
    if not shutil.which("mpirun"):
        print("skipped: --ep --capture (mpirun is not installed)")
        return
    model = os.path.join(s.work, "mixtral-ep")
    make_checkpoint("mixtral", model, seed=5)
    config, _ = ref.load_checkpoint(model)
    x_path = s.path("x") + ".npy"
    x = np.random.default_rng(13).standard_normal((11, config["hidden_size"]))
    np.save(x_path, x.astype(np.float32))
    one, two = s.path("trace"), s.path("trace")
    r1 = s.run(model, "--input", x_path, "--out", s.path("out"), "--capture", one)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", s.exe, model,
           "--input", x_path, "--out", s.path("out"), "--ep", "2", "--capture", two]
    r2 = subprocess.run(cmd, capture_output=True, text=True, env=s.env)
    s.check(r1.returncode == 0 and r2.returncode == 0,
            f"ep: moe-exec failed: {r1.stderr.strip()} {r2.stderr.strip()}")
    if r1.returncode or r2.returncode:
        return
    a, b = sy_trace.load_trace(one), sy_trace.load_trace(two)
    s.check(a.num_tokens == b.num_tokens == 11 and a.layers == b.layers,
            f"ep: {b.num_tokens} tokens, layers {b.layers}")
    for layer in a.layers:
        err = max_err(a.logits[layer], b.logits[layer])
        s.check(err <= TOL and np.array_equal(a.ids[layer], b.ids[layer]),
                f"ep layer {layer}: the --ep 2 trace differs (logits by {err:.2e})")


def check_errors(s):
    model = os.path.join(s.work, "mixtral-errors")
    make_checkpoint("mixtral", model, seed=4)
    config, _ = ref.load_checkpoint(model)
    x_path = s.path("x") + ".npy"
    np.save(x_path, np.ones((4, config["hidden_size"]), np.float32))
    a_file = s.path("file")
    open(a_file, "w").close()
    missing_parent = os.path.join(s.path("missing"), "trace")
    replay = s.path("out")
    r = s.run(model, "--input", x_path, "--out", replay)
    s.check(r.returncode == 0, f"errors: plain run failed: {r.stderr.strip()}")
    cases = [
        (["--capture", a_file], ["--capture", a_file, "not a directory"]),
        (["--capture", missing_parent], ["--capture", missing_parent, "cannot create"]),
        (["--capture", s.path("t"), "--replay", replay], ["--capture", "--replay"]),
        (["--capture", s.path("t"), "--capture-max-tokens", "0"],
         ["--capture-max-tokens '0'", "positive integer"]),
        (["--capture", s.path("t"), "--capture-max-tokens", "x1"],
         ["--capture-max-tokens 'x1'"]),
        (["--capture-max-tokens", "5"], ["--capture-max-tokens", "--capture DIR"]),
        (["--capture", s.path("t"), "--device", "cuda"], ["--capture", "--device host"]),
        (["--capture"], ["--capture needs a value"]),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        locked = s.path("locked")
        os.makedirs(locked)
        os.chmod(locked, 0o555)
        cases.append((["--capture", locked], ["--capture", locked, "not a writable"]))
    for flags, needles in cases:
        r = s.run(model, "--input", x_path, "--out", s.path("out"), *flags)
        ok = r.returncode == 1 and all(n in r.stderr for n in needles) \
            and "Traceback" not in r.stderr and r.stderr.startswith("moe-exec: error:")
        s.check(ok, f"errors {flags}: rc {r.returncode}, stderr {r.stderr.strip()!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    import_switchyard(args.build)
    import switchyard.trace as sy_trace

    with tempfile.TemporaryDirectory(prefix="capture-") as work:
        s = Suite(args.build, work)
        check_blocks(s, sy_trace, "mixtral", "mixtral")
        check_blocks(s, sy_trace, "deepseek-v3", "deepseek_v3", groups=4)
        check_blocks(s, sy_trace, "mixtral-300", "mixtral", experts=300, hidden=16,
                     intermediate=8, layers=1)
        check_batches(s, sy_trace)
        check_ep(s, sy_trace)
        check_errors(s)
    print(f"{s.passed} checks passed, {len(s.failed)} failed")
    return 1 if s.failed else 0


if __name__ == "__main__":
    sys.exit(main())
