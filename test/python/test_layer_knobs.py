#!/usr/bin/env python3
"""Per-layer knobs: a knob given a list takes one value per MoE layer, on every channel
(ctest python/layer-knobs; no vLLM needed):

- compile(knobs=) and a call's knobs=: layer=L routes with the list's L-th value,
  exactly as a router given that value alone; no layer, a layer past the list, lists
  of different lengths, a bad element (named by its index) are KnobErrors;
- the step's knobs (set_batch_metadata(knobs=...), what the vLLM plugin sets from
  SWITCHYARD_KNOBS, the knobs file and requests): the runtime picks MoE layer L's value
  by the routing op's layer, in knob groups too; a call of no layer or past the lists
  is refused naming the layers;
- SWITCHYARD_KNOBS / the knobs file parse lists of numbers only; a request's lists must
  have one value per MoE layer of the served model (moe_layer_count reads the config:
  DeepSeek's dense first layers, Qwen-MoE's sparse step and MLP-only layers);
- moe-eval --set budget=2,6 evaluates each trace layer with its own value.

Usage: test/python/test_layer_knobs.py --build BUILD
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402
from policy_shapes import import_switchyard  # noqa: E402

E, K, T = 16, 4, 24


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    sy = import_switchyard(args.build)
    import torch
    from switchyard.trace import Trace, evaluate, save_trace
    from switchyard.vllm import bind
    from switchyard.vllm.knobs import check_request, moe_layer_count
    from switchyard.vllm.settings import parse_knobs
    check = Checks()
    logits = np.random.default_rng(3).standard_normal((T, E)).astype(np.float32) * 2

    def error_of(fn):
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - the message is what is checked
            return f"{type(error).__name__}: {error}"
        return None

    def ids(out):
        return np.asarray(out["topk_ids"])

    alone = {b: sy.compile("xshare", experts=E, top_k=K, knobs={"budget": b})(logits)
             for b in (1, 2, 6)}
    check("the budgets differ on this batch (the test can fail)",
          not np.array_equal(ids(alone[2]), ids(alone[6])))
    per_layer = sy.compile("xshare", experts=E, top_k=K, knobs={"budget": [2, 6]})
    check("compile(knobs={'budget': [2, 6]}): layer=0 routes as budget 2, layer=1 as 6",
          np.array_equal(ids(per_layer(logits, layer=0)), ids(alone[2]))
          and np.array_equal(ids(per_layer(logits, layer=1)), ids(alone[6])))
    plain = sy.compile("xshare", experts=E, top_k=K)
    check("a call's knobs={'budget': [6, 1]} with layer=1 routes as budget 1",
          np.array_equal(ids(plain(logits, knobs={"budget": [6, 1]}, layer=1)),
                         ids(alone[1])))
    for label, fn, needle in (
            ("no layer", lambda: per_layer(logits), "call with layer="),
            ("a layer past the list", lambda: per_layer(logits, layer=2), "layer=2 has none"),
            ("lists of different lengths", lambda: plain(
                logits, knobs={"budget": [1, 2], "k0": [1]}, layer=0), "one value per"),
            ("a bool element", lambda: plain(logits, knobs={"budget": [1, True]}, layer=0),
             "'budget[1]'"),
            ("an empty list", lambda: plain(logits, knobs={"budget": []}, layer=0),
             "an empty list")):
        message = error_of(fn)
        check(f"refused, {label}: {message}", message is not None and needle in message)

    step = bind("xshare", experts=E, top_k=K)
    x = torch.from_numpy(logits)

    def routed(layer, **metadata):
        with sy.batch_metadata(request_ids=np.zeros(T, np.int32), **metadata):
            return step(x, [], layer)[1].numpy()

    knobs = {"budget": [2, 6]}
    check("the step's per-layer knobs: the op's layer picks each layer's value",
          np.array_equal(routed(0, knobs=knobs), ids(alone[2]))
          and np.array_equal(routed(1, knobs=knobs), ids(alone[6])))
    rows = np.arange(T // 2)
    grouped = routed(1, knob_groups=[(rows, {"budget": [2, 1]})], knobs={"budget": 6})
    group_alone = sy.compile("xshare", experts=E, top_k=K, knobs={"budget": 1})(
        logits[rows])
    check("a knob group's per-layer values: layer 1 of the group's rows routes as budget 1",
          np.array_equal(grouped[rows], ids(group_alone)))
    for label, layer, needle in (("a call of no layer", -1, "of no layer"),
                                 ("a layer past the lists", 2, "of MoE layer 2")):
        message = error_of(lambda: routed(layer, knobs=knobs))
        check(f"refused, {label}: {message}", message is not None and needle in message
              and "2 layers" in message)

    check("SWITCHYARD_KNOBS: a list of numbers is per-layer",
          parse_knobs('{"budget": [2, 6], "k0": 1}') == {"budget": [2, 6], "k0": 1})
    for text, needle in (('{"budget": [2, true]}', "the boolean true"),
                         ('{"budget": [2, 6], "k0": [1]}', "one value per MoE layer"),
                         ('{"budget": [[2]]}', "list")):
        message = error_of(lambda: parse_knobs(text))
        check(f"SWITCHYARD_KNOBS {text}: {message}", message is not None and needle in message)
    configs = {"mixtral": ({"num_hidden_layers": 4}, 4),
               "deepseek": ({"num_hidden_layers": 6, "first_k_dense_replace": 1}, 5),
               "qwen2-moe": ({"num_hidden_layers": 6, "decoder_sparse_step": 2,
                              "mlp_only_layers": [5]}, 2),
               "multimodal": ({"text_config": {"num_hidden_layers": 3}}, 3),
               "unknown": ({}, None)}
    counts = {name: moe_layer_count(config) for name, (config, _) in configs.items()}
    check(f"MoE layers of configs: {counts}",
          counts == {name: want for name, (_, want) in configs.items()})
    message = error_of(lambda: check_request(plain, {"switchyard.budget": [2, 6, 1]}, 2))
    check(f"a request's list of 3 values on a 2-MoE-layer model: {message}",
          message is not None and "the model has 2 MoE layers" in message)
    check("a request's list of one value per layer is taken",
          error_of(lambda: check_request(plain, {"switchyard.budget": [2, 6]}, 2)) is None)

    tmp = tempfile.mkdtemp(prefix="layer-knobs-")
    rng = np.random.default_rng(5)
    trace = Trace(num_experts=E, top_k=K,
                  logits={layer: rng.standard_normal((32, E)).astype(np.float32) * 2
                          for layer in (0, 1)},
                  step=np.repeat(np.arange(4, dtype=np.int32), 8))
    path = save_trace(trace, os.path.join(tmp, "trace"))
    report = os.path.join(tmp, "report.json")
    run = subprocess.run([sys.executable, "-m", "switchyard.trace", path, "--policy", "xshare",
                          "--set", "budget=2,6", "--json", report], capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=os.path.dirname(
                             os.path.dirname(sy.__file__))))
    if run.returncode == 0:
        with open(report) as f:
            layers = json.load(f)["results"][0]["layers"]
        each = {b: evaluate(trace, "xshare", knobs={"budget": b})["results"][0]["layers"]
                for b in (2, 6)}
        same = layers["0"] == each[2]["0"] and layers["1"] == each[6]["1"]
    check("moe-eval --set budget=2,6: layer 0 evaluated with budget 2, layer 1 with 6"
          + ("" if run.returncode == 0 else f" ({run.stderr[-300:]})"),
          run.returncode == 0 and same)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
