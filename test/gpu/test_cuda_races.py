#!/usr/bin/python3
"""The GPU kernels' races, checked without a GPU: every shipped GPU router's generated
CUDA C++ (NAME.cu) built for the CPU with ThreadSanitizer and run by the CUDA-on-host
emulation (cuda_host.py: each block's 256 threads are real threads, __syncthreads and
__syncwarp real barriers), in the shipped geometry, at T = 1 and a large batch of two
CTAs or more. A missing barrier (two threads of a block touching one address,
one writing, with no barrier between) is a ThreadSanitizer report; any report fails the
test, and every run's outputs must equal the host target's. This is compute-sanitizer's
racecheck for what the CPU can see: within a block, and across the blocks of the
cooperative kernel, which run at once (a grid barrier between its halves); the other
launches' blocks run one after another. The kernel of an entry built with per-request
knob groups runs too (4 groups in one launch, each equal to the host routing its rows
alone). The GPU kit runs racecheck itself.

The script re-runs itself with the toolchain's libtsan preloaded (an instrumented
library loaded into an uninstrumented Python needs the runtime from the start), and
once more on a copy of topk_softmax's kernel with two barriers removed, which must be
reported (the check can fail).

    test_cuda_races.py --build BUILD_DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cuda_host import ROOT, compile_on_host, cxx, launch_on_host  # noqa: E402
from gpu_cases import CaseTally, alternative_knobs, differing_outputs, entry_info, \
    example_inputs, expected_by_groups  # noqa: E402
from policy_shapes import GPU_ROUTERS, import_switchyard, native_shape  # noqa: E402

RACES_EXIT = 66  # the exit status ThreadSanitizer gives a run that reported races
# Entries built with per-request knob groups (--knob-groups): one CTA routes each group's
# rows as a batch of its own, reading its group's knob struct.
GROUPED = [("xshare", "xshare"), ("lynx", "lynx"), ("xshare_spec", "xshare_spec")]
GROUPS = 4
ROUTE = ("topk_ids", "topk_weights")


def batch_sizes(meta):
    """T = 1 and a large batch of 2 CTAs or more, its last of one token (the cooperative
    kernel: real threads of both CTAs at once, so cross-CTA races show; or, for a grid
    kernel, 24 tokens on 3 blocks)."""
    bound = max([c.get("max_tokens") or 0 for c in meta["size_classes"]
                 if c["name"] == "decode"], default=0)
    per_cta = [k["tokens_per_cta"] for k in meta["kernels"] if k.get("tokens_per_cta")]
    if not bound or not per_cta:
        return [1, 24]
    return [1, max(bound + 1, per_cta[0] + 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    runtime = subprocess.run([cxx(args.build), "-print-file-name=libtsan.so"],
                             capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(runtime) or not os.path.exists(runtime):
        print(f"FAIL no ThreadSanitizer runtime for {cxx(args.build)} ({runtime!r})")
        return 1
    if not os.environ.get("SWITCHYARD_TSAN_CHILD"):
        def child(mode, **kw):
            env = dict(os.environ, LD_PRELOAD=runtime, SWITCHYARD_TSAN_CHILD=mode,
                       TSAN_OPTIONS=f"halt_on_error=0 exitcode={RACES_EXIT} "
                                    "report_signal_unsafe=0 history_size=2")
            return subprocess.run([sys.executable, *sys.argv], env=env, **kw).returncode
        broken = child("broken", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if broken != RACES_EXIT:
            print(f"FAIL a kernel without two of its barriers ran without a race report "
                  f"(exit {broken}): the check cannot fail")
            print("0 passed, 1 failed")
            return 1
        print("ok   a kernel without two of its barriers is reported")
        rc = child("all")
        if rc == RACES_EXIT:
            print("FAIL ThreadSanitizer reported races (above)")
            print("0 passed, 1 failed")
            return 1
        return rc
    # This process has the runtime now; the tools it starts (moe-compile) must not.
    os.environ.pop("LD_PRELOAD", None)
    switchyard = import_switchyard(args.build)
    workdir = tempfile.mkdtemp(prefix="switchyard-races-")
    rng = np.random.default_rng(5)
    tally = CaseTally()
    if os.environ["SWITCHYARD_TSAN_CHILD"] == "broken":
        routers = [("topk_softmax", "topk_softmax")]
        edit = lambda text: text.replace("__syncthreads();", "/* removed */", 2)  # noqa: E731
    else:
        routers, edit = GPU_ROUTERS, None
    for file, name in routers:
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        lib, meta = compile_on_host(args.build, os.path.join(workdir, name), file, name,
                                    sanitize="thread", edit=edit)
        router = switchyard.compile(policy, entry=name, **native_shape(file))
        info = entry_info(switchyard, policy, name, **native_shape(file))
        for tokens in batch_sizes(meta) if not edit else [8]:
            inputs = example_inputs(info, tokens, rng)
            if "request_ids" in inputs:
                inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
            expected = router(**inputs)
            outputs, size_class, grid, _ = launch_on_host(lib, meta, router, info, inputs,
                                                          tokens)
            tally.record(f"{name} T={tokens} ({size_class['name']}, {grid} CTAs) under "
                         "ThreadSanitizer", differing_outputs(expected, outputs))
    if not edit:
        check_knob_groups(switchyard, args.build, workdir, rng, tally)
    return tally.finish()


def check_knob_groups(switchyard, build, workdir, rng, tally, tokens=40):
    """The grouped kernel (moe-map-to-gpu{knob-groups}) under ThreadSanitizer: a batch
    whose tokens belong to 4 groups (two with another knob setting, ids outside [0, 4)
    in group 0), each group routed as the host routes its rows alone with its knobs."""
    for file, name in GROUPED:
        policy = os.path.join(ROOT, "policies", f"{file}.mlir")
        shape = native_shape(file)
        lib, meta = compile_on_host(
            build, os.path.join(workdir, name + "-groups"), file, name, sanitize="thread",
            flags=[f"--knob-groups={GROUPS}", "--outputs", ",".join(ROUTE),
                   "--fill-empty-slots"])
        host = switchyard.compile(policy, entry=name, outputs=ROUTE, fill_empty_slots=True,
                                  **shape)
        info = entry_info(switchyard, policy, name, **shape)
        inputs = example_inputs(info, tokens, rng)
        if "request_ids" in inputs:
            inputs["request_ids"] = (np.arange(tokens) // 5).astype(np.int32)
        other, _ = alternative_knobs(host, inputs, host(**inputs))
        settings = [{}, other, {}, other]
        group_of = rng.choice([0, 1, 1, 2, 3, -1, 7], size=tokens).astype(np.int32)
        structs = np.concatenate([np.frombuffer(host.native.knob_struct(
            host.settings(knobs)), np.uint8)
            for knobs in settings])
        outputs, size_class, grid, _ = launch_on_host(lib, meta, host, info, inputs, tokens,
                                                      knobs=structs, knob_group=group_of)
        expected = expected_by_groups(host, inputs, group_of, settings, GROUPS)
        tally.record(f"{name} T={tokens} in {GROUPS} knob groups ({size_class['name']}, "
                     f"{grid} CTA) under ThreadSanitizer", differing_outputs(expected, outputs))


if __name__ == "__main__":
    sys.exit(main())
