"""One vLLM engine run for test_vllm.py (a child process: vLLM reads the plugin's
settings once per process). argv[1]: a JSON scenario

  {"model": DIR, "eager": true, "prompts": [...], "max_tokens": 8,
   "extra_args": [{...} or null per prompt], "record": "out.npz" or null,
   "bad_extra_args": {...} or null,
   "knobs_file_contents": [text, ...] or null,   (written to $SWITCHYARD_KNOBS_FILE
                                                 before each generate)
   "speculative": {...} or null,
   "runs": [{"prompts", "max_tokens", "extra_args", "record"}, ...] or null}

or {"quality": {"model", "policy", "settings", "sequences", "batch"}}: moe-eval
--quality's vLLM measurement (switchyard.trace.quality.vllm_logprobs),

prints one JSON line: {"tokens": [[...] per prompt], "calls": N, "bad_request": msg};
with "runs", each run's {"tokens", "calls"} in "runs" instead: several generate calls
of one engine (an engine start costs more than its checks), each recorded apart.
The engine runs in this process (no engine-core or worker processes), so the routing
calls can be recorded: every StepRouter call's logits, metadata and results.

`engine_child.py --serve` is the same run, forked: it imports vLLM once (most of an
engine start's time), then reads one request per stdin line, {"scenario", "env",
"output", "timeout"}, forks a child that takes that environment, runs the scenario
with its output in the file `output`, and answers {"exit": code} per line. Each
engine still has a process of its own, so vLLM still reads the plugin's settings once
per engine.
"""
import json
import os
import sys

ENGINE_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}


def main(scenario):
    for name, value in ENGINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if "quality" in scenario:   # moe-eval --quality's measurement through this engine
        import numpy as np
        from switchyard.trace.quality import vllm_logprobs
        q = scenario["quality"]
        native, runs = vllm_logprobs(q["model"], q["policy"], q["settings"],
                                     np.asarray(q["sequences"]), q["batch"])
        print("RESULT " + json.dumps({"native": native.tolist(),
                                      "runs": [[k, lp.tolist()] for k, lp in runs]}),
              flush=True)
        return
    records = []
    runs = scenario.get("runs")
    if scenario.get("record") or any(r.get("record") for r in runs or []):
        import numpy as np
        from switchyard import _step
        from switchyard._metadata import current_metadata
        original = _step.StepRouter.__call__

        def recording(self, logits, layer_tensors, layer=-1):
            weights, ids = original(self, logits, layer_tensors, layer)
            metadata = dict(current_metadata() or {})
            records.append({
                "logits": logits.float().numpy().copy(), "ids": ids.numpy().copy(),
                "weights": weights.numpy().copy(),
                "bias": layer_tensors[0].float().numpy().copy() if layer_tensors else None,
                "phase": metadata.get("phase", -1),
                "request_ids": np.asarray(metadata.get("request_ids", [])),
                "draft_mask": np.asarray(metadata.get("draft_mask", [])),
                "knobs": json.dumps(metadata.get("knobs") or {}),
                "groups": len(metadata.get("knob_groups") or []),
                "pinned": np.asarray(metadata.get("pinned_rows", []), np.int64),
                "layer": layer,
                "logits_dtype": str(logits.dtype),
                "in_place": logits.dtype in self.in_place_dtypes})
            return weights, ids

        _step.StepRouter.__call__ = recording
        if not scenario.get("eager", True):
            record_compiled_calls(records)

    from vllm import LLM, SamplingParams
    kwargs = dict(model=scenario["model"], dtype=scenario.get("dtype", "float32"),
                  max_model_len=256, seed=0, distributed_executor_backend="uni",
                  max_num_seqs=scenario.get("max_num_seqs", 16))
    if scenario.get("eager", True):
        kwargs["enforce_eager"] = True
    if scenario.get("speculative"):
        kwargs["speculative_config"] = scenario["speculative"]
    llm = LLM(**kwargs)
    prompts = scenario["prompts"]
    extra = scenario.get("extra_args") or [None] * len(prompts)
    params = [SamplingParams(max_tokens=scenario.get("max_tokens", 8), temperature=0,
                             ignore_eos=True, extra_args=e) for e in extra]
    result = {}
    if scenario.get("bad_extra_args"):
        try:
            llm.generate(prompts[:1], SamplingParams(max_tokens=2,
                                                     extra_args=scenario["bad_extra_args"]),
                         use_tqdm=False)
            result["bad_request"] = None
        except Exception as error:   # the request fails, the engine keeps serving
            result["bad_request"] = f"{type(error).__name__}: {error}"
    rounds = scenario.get("knobs_file_contents") or [None]
    result["tokens"] = []
    for content in rounds:   # engine-wide knobs changed between generate calls
        if content is not None:
            with open(os.environ["SWITCHYARD_KNOBS_FILE"], "w") as f:
                f.write(content)
        outputs = llm.generate(prompts, params, use_tqdm=False)
        result["tokens"] += [list(o.outputs[0].token_ids) for o in outputs]
    result["calls"] = len(records)
    if scenario.get("record"):
        save(records, scenario["record"])
    if runs:
        result["runs"] = []
        for run in runs:   # the same engine, its calls recorded apart
            records.clear()
            params = [SamplingParams(max_tokens=run.get("max_tokens", 8), temperature=0,
                                     ignore_eos=True, extra_args=e)
                      for e in run.get("extra_args") or [None] * len(run["prompts"])]
            outputs = llm.generate(run["prompts"], params, use_tqdm=False)
            result["runs"].append({"tokens": [list(o.outputs[0].token_ids) for o in outputs],
                                   "calls": len(records)})
            if run.get("record"):
                save(records, run["record"])
    print("RESULT " + json.dumps(result), flush=True)


def record_compiled_calls(records):
    """Under torch.compile the routing op's C++ kernel runs without Python: the plugin
    passes every layer's number, so the op hands each call to the runtime's step
    recorder; record there (no layer tensors: none of the compiled scenarios has one).
    Under SWITCHYARD_CAPTURE its recorder gets every call too."""
    import numpy as np
    from switchyard import _step
    from switchyard._metadata import current_metadata

    def record(layer, logits, ids, weights, dtype):
        if dtype == "bfloat16":
            logits = (logits.astype(np.uint32) << 16).view(np.float32)
        elif dtype == "float16":
            logits = logits.view(np.float16).astype(np.float32)
        metadata = dict(current_metadata() or {})
        records.append({
            "logits": logits.copy(), "ids": ids.copy(), "weights": weights.copy(),
            "bias": None, "phase": metadata.get("phase", -1),
            "request_ids": np.asarray(metadata.get("request_ids", [])),
            "draft_mask": np.asarray(metadata.get("draft_mask", [])),
            "knobs": json.dumps(metadata.get("knobs") or {}),
            "groups": len(metadata.get("knob_groups") or []),
            "pinned": np.asarray(metadata.get("pinned_rows", []), np.int64),
            "layer": layer,
            "logits_dtype": f"torch.{dtype}", "in_place": None})

    set_recorder = _step.set_step_recorder

    def set_with_ours(theirs):   # the capture's recorder, chained after ours
        def both(*args):
            record(*args)
            if theirs is not None:
                theirs(*args)
        set_recorder(both)

    _step.set_step_recorder = set_with_ours
    set_with_ours(None)


def save(records, path):
    import pickle
    with open(path, "wb") as f:
        pickle.dump(records, f)


def serve():
    """The fork server (see the module's docstring)."""
    import signal
    import traceback
    for name, value in ENGINE_DEFAULTS.items():
        os.environ.setdefault(name, value)
    import vllm  # noqa: F401  (what every child would import: loaded once, here)
    from vllm import LLM, SamplingParams  # noqa: F401
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fd = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.environ.clear()
                os.environ.update(request["env"])
                signal.alarm(int(request.get("timeout", 600)))   # a hung engine dies
                main(request["scenario"])
                code = 0
            except SystemExit as error:
                code = error.code if isinstance(error.code, int) else 1
            except BaseException:   # noqa: BLE001  (the child reports, the server goes on)
                traceback.print_exc()
            # A normal interpreter exit, as a process of its own would end: threads
            # joined, exit handlers run (the capture's last chunk is written there).
            sys.exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(json.loads(sys.argv[1]))
