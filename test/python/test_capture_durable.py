#!/usr/bin/env python3
"""The vLLM capture's recorder writes as it goes (ctest python/capture-durable; no vLLM
needed: switchyard.vllm.capture records whatever calls it, here made-up steps):

- in one process: chunks of whole steps, each written atomically; flush() and the token
  limit put what waits on disk at once; load_trace joins the chunks into exactly the
  steps recorded; a flush in the middle of a forward pass keeps that step for later;
- a worker SIGKILLed mid-run leaves the chunks written before it (bounded by the flush
  interval), which load_trace and `moe-eval` read;
- SIGTERM and SIGINT write every whole step before the process ends;
- the reader: a chunk still being written is not read, a gap in the numbering and
  chunks that disagree are FileFormatErrors naming the file.

Usage: test/python/test_capture_durable.py --build BUILD
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402
from policy_shapes import import_switchyard  # noqa: E402

E, K, LAYERS = 8, 2, 3


def step_data(step: int, layer: int):
    """The routing of MoE layer `layer` in forward pass `step`: 1 to 3 tokens, logits
    from a seed, the top-k ids and their softmax weights (all reproducible)."""
    tokens = 1 + step % 3
    logits = np.random.default_rng(step * 31 + layer).normal(size=(tokens, E))
    logits = logits.astype(np.float32)
    ids = np.argsort(-logits, axis=1, kind="stable")[:, :K].astype(np.int32)
    weights = np.take_along_axis(logits, ids, 1)
    return logits, ids, np.exp(weights) / np.exp(weights).sum(1, keepdims=True)


def feed(recorder, steps, stop_after_layer=None):
    """Records forward passes `steps` (every layer; with `stop_after_layer`, the last
    step stops after that layer, as a signal in the middle of a pass would find it)."""
    import switchyard
    import torch
    for step in steps:
        tokens = 1 + step % 3
        switchyard.set_batch_metadata(request_ids=np.arange(tokens, dtype=np.int32) + step,
                                      positions=np.full(tokens, step, np.int32),
                                      phase="decode" if step % 2 else "prefill")
        for layer in range(LAYERS):
            logits, ids, weights = step_data(step, layer)
            recorder.record(layer, torch.from_numpy(logits), torch.from_numpy(ids),
                            torch.from_numpy(weights))
            if step == steps[-1] and layer == stop_after_layer:
                return
    switchyard.set_batch_metadata()


def expected_steps(trace):
    """The step numbers a trace holds, in order, each checked against step_data: the
    ids, weights and logits exactly, the per-token arrays as feed() set them."""
    steps = [int(s) for s in np.unique(trace.step)]
    for step in steps:
        rows = trace.step == step
        tokens = 1 + step % 3
        assert rows.sum() == tokens, f"step {step}: {rows.sum()} tokens, fed {tokens}"
        assert (trace.request_ids[rows] == np.arange(tokens) + step).all()
        assert (trace.positions[rows] == step).all()
        assert (trace.phase[rows] == step % 2).all()
        for layer in range(LAYERS):
            logits, ids, weights = step_data(step, layer)
            assert (trace.layer_logits(layer)[rows] == logits).all(), f"logits {step}/{layer}"
            assert (trace.ids[layer][rows] == ids).all(), f"ids {step}/{layer}"
            assert np.allclose(trace.weights[layer][rows], weights, atol=1e-7, rtol=0)
    return steps


CHILD = r"""
import os, sys, time
sys.path[:0] = {paths!r}
import test_capture_durable as t
from switchyard.vllm import capture
recorder = capture.recorder()
for layer in range(t.LAYERS):
    recorder.new_layer(layer, t.E, t.K)
if {endless!r}:
    step = 0
    while True:   # until killed: one forward pass every 10 ms
        t.feed(recorder, [step])
        print(f"STEP {{step}}", flush=True)
        step += 1
        time.sleep(0.01)
t.feed(recorder, list(range(5)))
t.feed(recorder, [5], stop_after_layer=0)   # a forward pass in progress
print("READY", flush=True)
while True:
    time.sleep(0.05)
"""


def child(switchyard, directory, endless, **env):
    paths = [HERE, os.path.dirname(os.path.dirname(switchyard.__file__))]
    environment = dict(os.environ, SWITCHYARD_CAPTURE=directory, **env)
    return subprocess.Popen([sys.executable, "-c",
                             CHILD.format(paths=paths, endless=endless)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environment)


def wait_for_chunks(worker, path, count, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline and worker.poll() is None:
        if os.path.isdir(path) and sum(n.startswith("chunk-") for n in os.listdir(path)) >= count:
            return True
        time.sleep(0.05)
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build")
    args = parser.parse_args()
    switchyard = import_switchyard(args.build)
    from switchyard import FileFormatError
    from switchyard.trace import load_trace
    from switchyard.vllm import capture
    check = Checks()
    tmp = tempfile.mkdtemp(prefix="capture-durable-")

    def in_process():
        directory = os.path.join(tmp, "in-process")
        recorder = capture.Recorder(directory, max_tokens=40, chunk_tokens=6,
                                    flush_seconds=1000)
        for layer in range(LAYERS):
            recorder.new_layer(layer, E, K)
        feed(recorder, list(range(4)))        # 1+2+3+1 tokens: one chunk of 6, 1 waits
        path = recorder.flush()
        chunks = sorted(os.listdir(path))
        assert chunks == ["chunk-000000", "chunk-000001"], chunks
        feed(recorder, [4, 5], stop_after_layer=1)   # step 5 in progress
        recorder.flush()
        assert expected_steps(load_trace(path)) == [0, 1, 2, 3, 4], "step 5 was written"
        feed(recorder, [5])                   # a new pass of step 5's numbers: step 6
        feed(recorder, list(range(6, 40)))    # past max_tokens = 40: stops, flushed
        recorder.flush(final=True)
        trace = load_trace(path)
        steps = [int(s) for s in np.unique(trace.step)]
        assert trace.num_tokens <= 40 and trace.meta.get("chunks", 0) >= 3, trace.meta
        return f"{len(os.listdir(path))} chunks, {trace.num_tokens} tokens, steps {steps}"

    check.run("in one process: chunks of whole steps, flush(), the token limit", in_process)

    def sigkill():
        directory = os.path.join(tmp, "killed")
        worker = child(switchyard, directory, True, SWITCHYARD_CAPTURE_CHUNK_TOKENS="4",
                       SWITCHYARD_CAPTURE_FLUSH_SECONDS="0.2")
        path = None
        try:
            deadline = time.time() + 60
            while path is None and time.time() < deadline and worker.poll() is None:
                found = os.listdir(directory) if os.path.isdir(directory) else []
                path = os.path.join(directory, found[0]) if found else None
                time.sleep(0.05)
            assert path and wait_for_chunks(worker, path, 3), "no 3 chunks within 60 s"
        finally:
            worker.send_signal(signal.SIGKILL)
            out, err = worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL, (worker.returncode, err[-2000:])
        last = max(int(line.split()[1]) for line in out.splitlines()
                   if line.startswith("STEP"))
        trace = load_trace(path)
        steps = expected_steps(trace)
        assert steps == list(range(len(steps))), f"steps {steps[:5]}... not 0, 1, ..."
        report = os.path.join(tmp, "killed.json")
        package = os.path.dirname(os.path.dirname(switchyard.__file__))   # this build's
        run = subprocess.run([sys.executable, "-m", "switchyard.trace", path, "--policy",
                              "topk_softmax", "--json", report], capture_output=True,
                             text=True, timeout=300, env=dict(os.environ, PYTHONPATH=package))
        assert run.returncode == 0, run.stderr[-2000:]
        with open(report) as f:
            layers = json.load(f)["results"][0]["layers"]
        assert len(layers) == LAYERS, layers.keys()
        return (f"{len(steps)} whole steps of the {last + 1} the worker routed read back "
                f"exactly; moe-eval reads the cut trace")

    check.run("SIGKILL mid-run: the chunks written before it read, also by moe-eval", sigkill)

    for number in (signal.SIGTERM, signal.SIGINT):
        def on_signal(number=number):
            directory = os.path.join(tmp, signal.Signals(number).name)
            worker = child(switchyard, directory, False,
                           SWITCHYARD_CAPTURE_FLUSH_SECONDS="1000")
            try:
                assert worker.stdout.readline().strip() == "READY", worker.stderr.read()
                assert not os.path.isdir(directory), "written before the signal"
                worker.send_signal(number)
                out, err = worker.communicate(timeout=60)
            finally:
                worker.kill()
            (rank,) = os.listdir(directory)
            steps = expected_steps(load_trace(os.path.join(directory, rank)))
            assert steps == list(range(5)), f"steps {steps}"
            return f"exit status {worker.returncode}, steps {steps} written"

        check.run(f"{signal.Signals(number).name}: every whole step written", on_signal)

    def reader():
        path = os.path.join(tmp, "in-process", os.listdir(os.path.join(tmp, "in-process"))[0])
        cut = os.path.join(tmp, "cut")
        shutil.copytree(path, cut)
        last = sorted(n for n in os.listdir(cut) if n.startswith("chunk-"))[-1]
        os.rename(os.path.join(cut, last), os.path.join(cut, "." + last + ".partial"))
        whole = load_trace(path).num_tokens
        cut_tokens = load_trace(cut).num_tokens
        assert 0 < cut_tokens < whole, (cut_tokens, whole)
        shutil.rmtree(os.path.join(cut, "chunk-000001"))
        messages = []
        for breakage in ("gap", "disagree", "only-partial"):
            try:
                if breakage == "disagree":
                    shutil.copytree(os.path.join(path, "chunk-000001"),
                                    os.path.join(cut, "chunk-000001"))
                    meta = os.path.join(cut, "chunk-000001", "meta.json")
                    with open(meta) as f:
                        value = json.load(f)
                    value["model"] = "another-model"
                    with open(meta, "w") as f:
                        json.dump(value, f)
                if breakage == "only-partial":
                    for name in os.listdir(cut):
                        if name.startswith("chunk-"):
                            shutil.rmtree(os.path.join(cut, name))
                load_trace(cut)
                messages.append(f"{breakage}: read")
            except FileFormatError as error:
                messages.append(str(error))
        expected = ["chunk-000002: expected chunk-000001", "chunk-000001",
                    "no complete chunk yet"]
        assert all(e in m for e, m in zip(expected, messages)), messages
        return f"cut at a chunk boundary: {cut_tokens} of {whole} tokens; " + " | ".join(
            m.replace(tmp, "TMP") for m in messages)

    check.run("the reader: a chunk being written is skipped, gaps and disagreements named",
              reader)
    shutil.rmtree(tmp, ignore_errors=True)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
