"""The routing op's part of the GPU kit (the `torch-op` step): the op library
(libswitchyard_ops.so, PyTorch's stable ABI: it loads into the image's torch and Python
with no Switchyard package), precompiled engine builds of a few routers (what
switchyard.vllm.bind compiles: the routing results only, --fill-empty-slots; a host
artifact and a GPU launcher each) and their cases: inputs, the host target's outputs with
the default knobs, with another knob setting and, for LYNX, in the other phase. They go
into the executor bundle's staging directory (its lib/ holds the runtime the op library
links; compiled/ the artifacts), under torch_op/.
"""
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
sys.path.insert(0, os.path.join(ROOT, "test", "gpu"))
sys.path.insert(0, HERE)
from compile_cache import record  # noqa: E402
from gpu_cases import alternative_knobs  # noqa: E402
from policy_shapes import import_switchyard, native_shape, shape_flags  # noqa: E402

# (policy file, entry): a router of token loops (the grid kernel), a set policy (the
# one-CTA kernel and the large pair) with knobs, and the phase-gated one.
ROUTERS = (("topk_softmax", "topk_softmax"), ("xshare", "xshare"), ("lynx", "lynx"))
TOKENS = (1, 64, 1024)
ENGINE_FLAGS = ["--outputs", "topk_ids,topk_weights", "--fill-empty-slots",
                "--host-threads-min-work=0"]


def pack_torch_op(stage, build):
    """Adds the op library, the engine builds and their cases to `stage` (the executor
    bundle's staging directory); returns the case list, or None without the library."""
    library = os.path.join(build, "python", "switchyard", "libswitchyard_ops.so")
    if not os.path.exists(library):
        return None
    shutil.copy2(library, os.path.join(stage, "lib"))
    sy = import_switchyard(build)
    compiler = os.path.join(build, "bin", "moe-compile")
    out = os.path.join(stage, "torch_op")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    cases = []
    for file, entry in ROUTERS:
        shape = native_shape(file)
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        flags = ["--entry", entry] + shape_flags(**shape) + ENGINE_FLAGS
        host_key = record(os.path.join(stage, "compiled"), compiler, policy, flags, "host")
        cuda_key = record(os.path.join(stage, "compiled"), compiler, policy,
                          flags + ["--launcher-library"], "all")
        router = sy.compile(policy, entry=entry, outputs=("topk_ids", "topk_weights"),
                            fill_empty_slots=True, host_threads_min_work=0, **shape)
        experts = next(p for p in router.params if p.name == "logits").shape[1]
        knob_bytes = len(router.native.knob_struct(router.default_settings)) \
            if router.knobs else 0
        for tokens in TOKENS:
            logits = rng.standard_normal((tokens, experts)).astype(np.float32)
            inputs = {"logits": logits}
            if "phase" in router.inputs:
                inputs["phase"] = 1
            arrays = {"logits": logits}
            expected = router(**inputs)
            arrays.update(ids=expected["topk_ids"], weights=expected["topk_weights"])
            case = {"router": entry, "host": host_key, "cuda": cuda_key, "experts": experts,
                    "tokens": tokens, "knob_bytes": knob_bytes,
                    "file": f"{entry}_{tokens}.npz"}
            if router.knobs:
                other, alt = alternative_knobs(router, inputs, expected)
                case["knobs"] = router.settings(other)
                arrays.update(alt_ids=alt["topk_ids"], alt_weights=alt["topk_weights"])
            if "phase" in router.inputs:   # the graph replayed as prefill
                prefill = router(**dict(inputs, phase=0))
                case["phase"] = True
                arrays.update(prefill_ids=prefill["topk_ids"],
                              prefill_weights=prefill["topk_weights"])
            np.savez(os.path.join(out, case["file"]), **arrays)
            cases.append(case)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return cases
