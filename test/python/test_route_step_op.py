"""torch.ops.switchyard.route_step, the C++ routing op (python/op/RouteStepOp.cpp over
runtime::StepRouter), against the papers' numpy references (test/exec/reference.py)
and vLLM's routing contract: the kernel is C++ with no Python in the library, results
match at T = 0, 1, 37, bfloat16 logits and layer tensors, the step's batch metadata and
knobs (per-thread, nested, per-request knob groups), torch.compile and opcheck, clear
errors, the trace recorder, the same library loaded by another torch (.venv-vllm), and
the library on its own (load_step_router, knob_struct, set_device_step; no package).
Exit 77 (skipped) without torch."""
import os
import subprocess
import sys
import threading

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
from checks import Checks  # noqa: E402
import reference  # noqa: E402

check = Checks()

try:
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

import switchyard as sy  # noqa: E402
import switchyard.vllm as sv  # noqa: E402
from switchyard import _step  # noqa: E402


def routed(result):
    return result["topk_ids"], result["topk_weights"]


def same(got, want_ids, want_weights, experts):
    w, i = got
    want_ids, want_weights = reference.engine_contract(want_ids, want_weights, experts)
    return (i.dtype == torch.int32 and w.dtype == torch.float32
            and np.array_equal(i.numpy(), want_ids)
            and np.allclose(w.numpy(), want_weights, atol=1e-5, rtol=0))


def raises(label, fn, needle):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        return check(label, needle in str(e), f"(message: {e})")
    return check(label, False, "(no error)")


op = torch.ops.switchyard.route_step
rng = np.random.default_rng(5)


def library():
    path = os.path.join(os.path.dirname(_step.__file__), "libswitchyard_ops.so")
    check("the op library was built and loaded", _step.NATIVE_OP and os.path.exists(path),
          f"({path})")
    dump = torch._C._dispatch_dump("switchyard::route_step")
    check("route_step's CPU kernel is the C++ one",
          "CPU: registered at" in dump and "RouteStepOp.cpp" in dump.split("CPU:")[1]
          .splitlines()[0], dump)
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    needed = " ".join(line.split("[")[-1].rstrip("]") for line in dynamic.splitlines()
                      if "(NEEDED)" in line)
    check("the op library links the runtime, neither Python nor nanobind",
          "libSwitchyardRuntime" in needed and "python" not in needed.lower()
          and "nanobind" not in needed, f"(NEEDED: {needed})")
    return path


def topk_softmax():
    step = sv.bind("topk_softmax", experts=64, top_k=8)
    for tokens in (0, 1, 37):
        x = rng.standard_normal((tokens, 64)).astype(np.float32)
        ids, w = routed(reference.topk_softmax(x, 8))
        check(f"topk_softmax, T = {tokens}: the op = the reference",
              same(op(torch.from_numpy(x), [], step.handle), ids, w, 64))
    x = torch.randn(37, 64).to(torch.bfloat16)
    ids, w = routed(reference.topk_softmax(x.float().numpy(), 8))
    check("bfloat16 logits route as their float32 values",
          same(op(x, [], step.handle), ids, w, 64))
    wide = torch.randn(64, 37).t()   # [37, 64], not contiguous
    ids, w = routed(reference.topk_softmax(wide.contiguous().numpy(), 8))
    check("a non-contiguous logits view = its contiguous copy",
          same(op(wide, [], step.handle), ids, w, 64))
    return step


def deepseek():
    step = sv.bind("deepseek_v3", experts=64, top_k=6, groups=8, topk_groups=3,
                   scaling=2.5, layer_inputs=("bias",))
    x = rng.standard_normal((19, 64)).astype(np.float32)
    bias = (rng.standard_normal(64) * 0.1).astype(np.float32)
    ids, w = routed(reference.deepseek_v3(x, bias, k=6, groups=8, topk_groups=3, scaling=2.5))
    check("deepseek_v3 with the layer's bias tensor = the reference",
          same(op(torch.from_numpy(x), [torch.from_numpy(bias)], step.handle), ids, w, 64))
    b16 = torch.from_numpy(bias).to(torch.bfloat16)
    ids, w = routed(reference.deepseek_v3(x, b16.float().numpy(), k=6, groups=8, topk_groups=3,
                                   scaling=2.5))
    check("a bfloat16 bias is read as its values",
          same(op(torch.from_numpy(x), [b16], step.handle), ids, w, 64))
    raises("a missing layer tensor names the count",
           lambda: op(torch.from_numpy(x), [], step.handle), "0 layer tensors for 1")


def metadata_and_knobs():
    spec = sv.bind("xshare_spec", experts=32, top_k=4)
    x = rng.standard_normal((24, 32)).astype(np.float32)
    t = torch.from_numpy(x)
    rids = np.arange(24) // 6
    raises("no metadata: the error names the input",
           lambda: op(t, [], spec.handle), "needs request_ids from the step's batch metadata")
    ids, w = routed(reference.xshare_spec(x, rids, 4))
    with sy.batch_metadata(request_ids=torch.from_numpy(rids)):   # int64: converted
        check("request_ids from batch_metadata = the reference",
              same(op(t, [], spec.handle), ids, w, 32))
        inner = np.zeros(24, np.int32)
        with sy.batch_metadata(request_ids=inner):
            ids1, w1 = routed(reference.xshare_spec(x, inner, 4))
            check("a nested batch_metadata is the one in force",
                  same(op(t, [], spec.handle), ids1, w1, 32))
        check("leaving it restores the outer metadata",
              same(op(t, [], spec.handle), ids, w, 32))
    raises("after the block no metadata is set", lambda: op(t, [], spec.handle),
           "none is set")
    sy.set_batch_metadata(request_ids=rids[:10])
    raises("metadata of another length is refused, naming it",
           lambda: op(t, [], spec.handle), "metadata 'request_ids' has 10 entries for 24")
    sy.set_batch_metadata()

    xshare = sv.bind("xshare", experts=32, top_k=4)
    ids, w = routed(reference.xshare(x, 4, budget=2))
    with sy.batch_metadata(knobs={"budget": 2}):
        check("step knobs from the metadata = the reference with them",
              same(op(t, [], xshare.handle), ids, w, 32))
    with sy.batch_metadata(knobs={"budgte": 2}):
        raises("an unknown step knob is named", lambda: op(t, [], xshare.handle), "budgte")
    with sy.batch_metadata(knobs={"budget": -1}):
        raises("a knob its rule refuses is named", lambda: op(t, [], xshare.handle),
               "budget must be in [0, inf]")
    # Requests that set different knobs: each group is a batch of its own; rows in no
    # group (padding) take the step's knobs (none here: the defaults).
    a, b = np.arange(0, 10), np.arange(10, 20)
    rest = np.arange(20, 24)
    want_ids = np.zeros((24, 4), np.int32)
    want_w = np.zeros((24, 4), np.float32)
    for rows, budget in ((a, 1), (b, 6), (rest, 24)):
        gi, gw = routed(reference.xshare(x[rows], 4, budget=budget))
        gi, gw = reference.engine_contract(gi, gw, 32)
        want_ids[rows], want_w[rows] = gi, gw
    with sy.batch_metadata(knob_groups=[(a, {"budget": 1}), (b, {"budget": 6})]):
        w_got, i_got = op(t, [], xshare.handle)
    check("knob groups: each group routed with its knobs, the rest with the step's",
          np.array_equal(i_got.numpy(), want_ids)
          and np.allclose(w_got.numpy(), want_w, atol=1e-5, rtol=0))
    with sy.batch_metadata(knob_groups=[(np.array([30]), {"budget": 1})]):
        raises("a knob group past the batch is refused", lambda: op(t, [], xshare.handle),
               "token row 30 of a 24-token batch")

    lynx = sv.bind("lynx", experts=32, top_k=4)
    with sy.batch_metadata(phase="decode"):
        by_name = op(t, [], lynx.handle)
    with sy.batch_metadata(phase=1):
        by_number = op(t, [], lynx.handle)
    check("phase by name = by number", torch.equal(by_name[1], by_number[1]))
    with sy.batch_metadata(warmup_step=True, phase=0):
        w_up = op(t, [], spec.handle)
    ids, w = routed(reference.xshare_spec(x, np.zeros(24), 4))
    check("a warm-up step: one request", same(w_up, ids, w, 32))

    # The state is per thread: two threads with their own metadata route at once.
    results = {}

    def route_in_thread(name, request_ids):
        with sy.batch_metadata(request_ids=request_ids):
            for _ in range(50):
                results[name] = op(t, [], spec.handle)

    threads = [threading.Thread(target=route_in_thread, args=("one", rids)),
               threading.Thread(target=route_in_thread, args=("all", np.zeros(24)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids_one, w_one = routed(reference.xshare_spec(x, rids, 4))
    ids_all, w_all = routed(reference.xshare_spec(x, np.zeros(24), 4))
    check("each thread routes with its own batch metadata",
          same(results["one"], ids_one, w_one, 32) and same(results["all"], ids_all, w_all, 32))

    cap = sv.bind("capacity_topk", experts=8, top_k=2, knobs={"capacity_factor": 0.25})
    x8 = rng.standard_normal((32, 8)).astype(np.float32)
    ids, w = routed(reference.capacity_topk(x8, 2, capacity_factor=0.25))
    check("capacity drops: ids in [0, E), weight 0 (vLLM's contract)",
          (np.asarray(ids) < 0).any() and same(op(torch.from_numpy(x8), [], cap.handle),
                                                ids, w, 8))


def graphs_and_errors(step):
    x = torch.randn(37, 64)
    fn = torch.compile(lambda h: op(h * 2.0, [], step.handle), fullgraph=True, dynamic=True)
    check("torch.compile(fullgraph=True, dynamic=True) = eager",
          torch.equal(fn(x)[1], op(x * 2.0, [], step.handle)[1])
          and torch.equal(fn(x[:5])[1], op(x[:5] * 2.0, [], step.handle)[1]))
    check.run("torch.library.opcheck (schema, fake, dispatch)",
              lambda: torch.library.opcheck(op.default, (x, [], step.handle, -1)) and None)
    raises("logits of the wrong width", lambda: op(torch.randn(3, 32), [], step.handle),
           "logits of shape [3, 32], expected [tokens, 64]")
    raises("integer logits", lambda: op(torch.zeros(3, 64, dtype=torch.int32), [],
                                        step.handle), "float32, bfloat16 or float16")
    raises("an unknown handle", lambda: op(x, [], 10 ** 6), "no step router has handle")


def recorder(step):
    seen = []

    def record(layer, logits, ids, weights, dtype):
        seen.append((layer, logits.copy(), ids.copy(), weights.copy(), dtype))

    x = torch.randn(5, 64).to(torch.bfloat16)
    _step.set_step_recorder(record)
    try:
        w, i = op(x, [], step.handle, 3)
        op(x, [], step.handle)   # layer -1: not recorded
    finally:
        _step.set_step_recorder(None)
    op(x, [], step.handle, 4)   # no recorder: nothing
    ok = len(seen) == 1 and seen[0][0] == 3 and seen[0][4] == "bfloat16" and \
        np.array_equal(seen[0][1], x.view(torch.int16).numpy().view(np.uint16)) and \
        np.array_equal(seen[0][2], i.numpy()) and np.array_equal(seen[0][3], w.numpy())
    check("the step recorder gets layer >= 0 calls (bf16 logits as their bits)", ok,
          f"({[(s[0], s[4]) for s in seen]})")

    def failing(*args):
        raise ValueError("recorder broke")

    _step.set_step_recorder(failing)
    try:
        w2, i2 = op(x, [], step.handle, 3)
        check("a failing recorder does not fail the routing", torch.equal(i2, i))
    finally:
        _step.set_step_recorder(None)


def other_torch(path):
    """The stable ABI: the library built against this torch's headers (targeting an
    older one) loads into vLLM's torch, another version."""
    python = os.path.join(ROOT, ".venv-vllm", "bin", "python")
    if not os.path.exists(python):
        print("skip another torch: no .venv-vllm")
        return
    code = ("import torch, sys; torch.ops.load_library(sys.argv[1]); "
            "print(torch.__version__, torch.ops.switchyard.route_step.default._schema)")
    run = subprocess.run([python, "-c", code, path], capture_output=True, text=True)
    mine = torch.__version__.split("+")[0]
    theirs = run.stdout.split(" ")[0].split("+")[0] if run.stdout else "?"
    check(f"the library (built with torch {mine}) loads into torch {theirs}",
          run.returncode == 0 and "route_step" in run.stdout, run.stderr[-500:])


STANDALONE = r"""
import json, sys
import numpy as np, torch
torch.ops.load_library(sys.argv[1])
args = json.loads(sys.argv[2])
ops = torch.ops.switchyard
result = {"torch": torch.__version__}
handle = ops.load_step_router(args["directory"], args["entry"], "", "", [], 16,
                              ["capacity_factor=0.5"], "@capacity_topk", None, None)
x = torch.from_numpy(np.load(args["logits"]))
w, i = ops.route_step(x, [], handle)
np.savez(args["out"], ids=i.numpy(), weights=w.numpy(),
         knobs=ops.knob_struct(handle, ["capacity_factor=2.0"]).numpy())
errors = {}
for name, call in [
        ("bad_knob", lambda: ops.knob_struct(handle, ["capacity_factor=-1"])),
        ("unknown_knob", lambda: ops.knob_struct(handle, ["nope=1"])),
        ("no_directory", lambda: ops.load_step_router("/nonexistent", "x", "", "", [], 16,
                                                      [], "", None, None)),
        ("cpu_metadata", lambda: ops.set_device_step(torch.zeros(4, dtype=torch.int32),
                                                     None, None, False, False))]:
    try:
        call()
        errors[name] = ""
    except RuntimeError as error:
        errors[name] = str(error)
result["errors"] = errors
print(json.dumps(result))
"""


def standalone(path):
    """The op library on its own, in another torch with no Switchyard package imported:
    a router compiled ahead of time (switchyard.compile's artifact directory) loaded by
    switchyard::load_step_router and routed by route_step = the package's routing; its
    knob structs = the package's; bad input is a RuntimeError naming it."""
    python = os.path.join(ROOT, ".venv-vllm", "bin", "python")
    if not os.path.exists(python):
        python = sys.executable
    import json
    import tempfile
    router = sy.compile("capacity_topk", experts=16, top_k=4, fill_empty_slots=True,
                        outputs=("topk_ids", "topk_weights"), host_threads_min_work=0,
                        knobs={"capacity_factor": 0.5})
    work = tempfile.mkdtemp(prefix="sy-standalone-")
    x = np.random.default_rng(3).standard_normal((37, 16)).astype(np.float32)
    np.save(os.path.join(work, "logits.npy"), x)
    args = {"directory": router.native.directory, "entry": "capacity_topk",
            "logits": os.path.join(work, "logits.npy"), "out": os.path.join(work, "out.npz")}
    run = subprocess.run([python, "-c", STANDALONE, path, json.dumps(args)],
                         capture_output=True, text=True)
    if not check("the op library alone (no switchyard import) loads and routes",
                 run.returncode == 0, run.stderr[-800:]):
        return
    result = json.loads(run.stdout.strip().splitlines()[-1])
    got = np.load(args["out"])
    want = router(logits=x)
    check(f"load_step_router + route_step in torch {result['torch']} = the package",
          np.array_equal(got["ids"], want["topk_ids"]) and
          np.allclose(got["weights"], want["topk_weights"], atol=1e-6))
    check("knob_struct = the package's knob struct",
          bytes(got["knobs"]) == router.native.knob_struct(
              router.default_settings + ["capacity_factor=2.0"]))
    errors = result["errors"]
    check("a knob its rule refuses is an error naming it",
          "capacity_factor" in errors["bad_knob"], errors["bad_knob"])
    check("an unknown knob is an error naming it", "nope" in errors["unknown_knob"],
          errors["unknown_knob"])
    check("a missing artifact directory is an error naming it",
          "/nonexistent" in errors["no_directory"], errors["no_directory"])
    check("metadata on the CPU for the device step is an error",
          "CUDA tensors" in errors["cpu_metadata"], errors["cpu_metadata"])


def main():
    path = library()
    step = topk_softmax()
    deepseek()
    metadata_and_knobs()
    graphs_and_errors(step)
    recorder(step)
    other_torch(path)
    standalone(path)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
