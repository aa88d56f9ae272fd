#!/usr/bin/env python3
"""moe-eval --tune: per-layer knob values from a trace, against brute force (ctest
python/tune):

- on a 3-layer trace whose layers route with different sharpness, tune() picks per layer
  the budget a brute-force search picks (every value evaluated on its own: the fewest
  experts active among the values keeping >= the target mass; ties to more mass, then
  the smaller value), and the best single value for all layers;
- the per-layer choice keeps the target on every layer and activates no more experts
  than the best single value on any layer; evaluating the written knobs (per-layer
  lists) gives the same numbers;
- `moe-eval --tune budget --knobs-out F` writes a knobs file the vLLM plugin's parser
  (SWITCHYARD_KNOBS_FILE) takes unchanged; bad arguments exit 2 naming them.

Usage: test/python/test_tune.py --build BUILD
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

E, K, TARGET = 8, 2, 0.9


def make_trace(Trace):
    """3 layers of 6 steps x 8 tokens; layer l's logits scaled by 0.5, 2, 6 (flat to
    sharp routing), the model's own top-k ids and softmax weights."""
    rng = np.random.default_rng(11)
    logits, ids, weights = {}, {}, {}
    for layer, scale in enumerate((0.5, 2.0, 6.0)):
        x = (rng.standard_normal((48, E)) * scale).astype(np.float32)
        top = np.argsort(-x, axis=1, kind="stable")[:, :K]
        p = np.exp(x - x.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        w = np.take_along_axis(p, top, 1)
        logits[layer], ids[layer] = x, top.astype(np.uint8)
        weights[layer] = (w / w.sum(1, keepdims=True)).astype(np.float32)
    return Trace(num_experts=E, top_k=K, logits=logits, ids=ids, weights=weights,
                 step=np.repeat(np.arange(6, dtype=np.int32), 8),
                 request_ids=np.tile(np.arange(8, dtype=np.int32), 6))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    sy = import_switchyard(args.build)
    from switchyard.trace import Trace, evaluate, save_trace
    from switchyard.trace.tune import tune
    from switchyard.vllm.settings import parse_knobs
    check = Checks()
    trace = make_trace(Trace)
    base = {"k0": 0}
    report = tune(trace, "xshare", "budget", target_mass=TARGET, knobs=base)

    # Brute force: every budget on its own.
    brute = {}
    for value in range(E + 1):
        layers = evaluate(trace, "xshare", knobs={**base, "budget": value}
                          )["results"][0]["layers"]
        brute[value] = {int(layer): (m["all"]["experts_active_mean"],
                                     m["all"]["mass_kept_relative"])
                        for layer, m in layers.items()}
    expected = {}
    for layer in range(3):
        meets = [v for v in brute if brute[v][layer][1] >= TARGET]
        expected[layer] = min(meets, key=lambda v: (brute[v][layer][0], -brute[v][layer][1], v))
    uniform = min((v for v in brute if all(brute[v][layer][1] >= TARGET for layer in range(3))),
                  key=lambda v: (np.mean([brute[v][layer][0] for layer in range(3)]),
                                 -min(brute[v][layer][1] for layer in range(3)), v))
    chosen = {int(layer): row["value"] for layer, row in report["per_layer"]["layers"].items()}
    check(f"per-layer budgets = brute force's: {chosen} (brute force {expected})",
          chosen == expected)
    check(f"best single budget = brute force's: {report['uniform']['value']} ({uniform})",
          report["uniform"]["value"] == uniform)
    check("the layers differ: the per-layer choice is not one value (the test can fail)",
          len(set(chosen.values())) > 1)
    rows = report["per_layer"]["layers"]
    uniform_rows = report["uniform"]["layers"]
    check("every layer keeps the target, with no more experts than the single value's",
          all(rows[str(layer)]["mass_kept"] >= TARGET
              and rows[str(layer)]["objective"] <= uniform_rows[str(layer)]["objective"]
              for layer in range(3)),
          json.dumps(report["per_layer"]))
    check(f"the knobs: one value per MoE layer, {report['knobs']}",
          report["knobs"] == {**base, "budget": [expected[layer] for layer in range(3)]})
    replay = evaluate(trace, "xshare", knobs=report["knobs"])["results"][0]["layers"]
    check("evaluating the written per-layer knobs gives the per-layer numbers",
          all(abs(replay[str(layer)]["all"]["experts_active_mean"]
                  - rows[str(layer)]["objective"]) < 1e-9 for layer in range(3)))

    tmp = tempfile.mkdtemp(prefix="tune-")
    path = save_trace(trace, os.path.join(tmp, "trace"))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(sy.__file__)))

    def moe_eval(*argv):
        return subprocess.run([sys.executable, "-m", "switchyard.trace", path, "--policy",
                               "xshare", *argv], capture_output=True, text=True, env=env)

    knobs_file = os.path.join(tmp, "knobs.json")
    run = moe_eval("--set", "k0=0", "--tune", "budget", "--target-mass", str(TARGET),
                   "--json", os.path.join(tmp, "tune.json"), "--knobs-out", knobs_file)
    written = None
    if run.returncode == 0:
        with open(knobs_file) as f:
            written = parse_knobs(f.read(), knobs_file, allow_empty=False)
    check(f"moe-eval --tune budget --knobs-out: a knobs file the plugin takes ({written})"
          + ("" if run.returncode == 0 else f": {run.stderr[-300:]}"),
          written == report["knobs"] and "best single value budget=" in run.stdout)
    for argv, needle in ((["--tune", "nope", "--json", os.path.join(tmp, "x.json")],
                          "no such knob"),
                         (["--tune", "budget"], "nothing to write"),
                         (["--tune", "budget", "--set", "budget=2", "--json",
                           os.path.join(tmp, "x.json")], "not both"),
                         (["--knobs-out", knobs_file, "--json", os.path.join(tmp, "x.json")],
                          "give --tune KNOB")):
        run = moe_eval(*argv)
        check(f"moe-eval {' '.join(argv[:2])} ...: exit {run.returncode}, "
              f"{run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ''}",
              run.returncode == 2 and needle in run.stderr)
    message = None
    try:
        tune(trace, "top_p", "p", target_mass=TARGET)
    except sy.SwitchyardError as error:
        message = str(error)
    check(f"a float knob needs its values: {message}", message is not None
          and "--tune p=A:B:STEP" in message)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
