#!/usr/bin/env python3
"""The public routing traces in shared/traces/public/ (scripts/convert_public_trace.py
writes them there, from clones of their source repositories; they are not committed, so
without them the test reports skipped, exit 77): each
loads with switchyard.trace.load_trace, its meta.json carries a complete "provenance"
object (repository, 40-hex commit, paths with blob ids and sha256, license, what the
source holds and what was derived), its arrays have the documented shapes, its derived
logits reproduce the model's own top-2 ids and weights (two finite logits per row, at
the ids, softmax = the weights), and evaluating the native policy (topk_softmax) on it
gives the model's own numbers: the same experts active per step and all of the model's
top-2 mass kept. The traces' pinned sizes and model numbers are checked too, and, where
the source repositories' clones exist (shared/sources/OWNER+NAME), that the converter
reproduces the files byte for byte. Exit status: 0 passed, 1 failed, 77 skipped."""
import copy
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "test", "support"))
from checks import Checks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PUBLIC = os.path.join(ROOT, "shared", "traces", "public")
SOURCES = os.path.join(ROOT, "shared", "sources")
sys.dont_write_bytecode = True

# name -> (experts, top_k, tokens, layers, {phase: model_experts_active_mean averaged over
# layers}, whether the recorded weights are renormalized over the top-k)
EXPECTED = {
    "mixtral-8x7b-humaneval0": (8, 2, 94, list(range(32)), {"prefill": 8.0, "decode": 2.0},
                                True),
    "mixtral-8x7b-decode-4req": (8, 2, 585, [1, 5, 10, 12, 24, 26, 28], {"decode": 3.576},
                                 True),
    "qwen1.5-moe-gsm8k25-decode": (60, 4, 1600, [0, 8, 12, 18, 23], {"decode": 44.2},
                                   False),
}
PROVENANCE_TEXT = ("license", "source_contains", "logits_derived", "derived", "workload",
                   "step_grouping", "converter", "model", "engine", "recorder")


def check_meta(meta: dict, name: str):
    """Raises AssertionError naming the first missing or malformed provenance field."""
    prov = meta.get("provenance")
    assert isinstance(prov, dict), f"{name}: meta.json has no 'provenance' object"
    repo = prov.get("repository", "")
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", str(repo)), \
        f"{name}: provenance.repository {repo!r} is not a GitHub repository URL"
    assert re.fullmatch(r"[0-9a-f]{40}", str(prov.get("commit", ""))), \
        f"{name}: provenance.commit {prov.get('commit')!r} is not a full commit id"
    paths = prov.get("paths")
    assert isinstance(paths, list) and paths, f"{name}: provenance.paths is empty"
    for p in paths:
        assert isinstance(p, dict) and p.get("path"), f"{name}: a path entry lacks 'path'"
        assert re.fullmatch(r"[0-9a-f]{40}", str(p.get("blob", ""))), \
            f"{name}: {p.get('path')}: blob {p.get('blob')!r} is not a git blob id"
        assert re.fullmatch(r"[0-9a-f]{64}", str(p.get("sha256", ""))), \
            f"{name}: {p.get('path')}: sha256 {p.get('sha256')!r} malformed"
        assert isinstance(p.get("bytes"), int) and p["bytes"] > 0, \
            f"{name}: {p.get('path')}: bytes {p.get('bytes')!r}"
    for key in PROVENANCE_TEXT:
        assert isinstance(prov.get(key), str) and prov[key].strip(), \
            f"{name}: provenance.{key} missing or empty"
    assert meta.get("format") == "switchyard-trace" and meta.get("model"), \
        f"{name}: meta.json lacks format / model"


def check_trace(sy, name: str):
    path = os.path.join(PUBLIC, name)
    trace = sy.trace.load_trace(path)
    check_meta(trace.meta, name)
    experts, k, tokens, layers, model_active, renormalized = EXPECTED[name]
    assert (trace.num_experts, trace.top_k) == (experts, k), (trace.num_experts, trace.top_k)
    assert trace.num_tokens == tokens, f"{trace.num_tokens} tokens, expected {tokens}"
    assert trace.layers == layers, f"layers {trace.layers}, expected {layers}"
    for layer in trace.layers:
        logits = trace.layer_logits(layer)
        ids = np.asarray(trace.ids[layer]).astype(np.int64)
        weights = np.asarray(trace.weights[layer])
        assert logits.shape == (tokens, experts) and ids.shape == weights.shape == (tokens, k)
        finite = np.isfinite(logits)
        assert (finite.sum(axis=1) == k).all(), f"layer {layer}: a row without {k} logits"
        rows = np.arange(tokens)[:, None]
        assert finite[rows, ids].all(), f"layer {layer}: finite logits not at the ids"
        assert all(len(set(r)) == k for r in ids.tolist()), f"layer {layer}: repeated id"
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = shifted / shifted.sum(axis=1, keepdims=True)
        total = weights.sum(axis=1)
        assert np.allclose(probs[rows, ids], weights / total[:, None], atol=1e-6), \
            f"layer {layer}: softmax of the logits is not the recorded weights renormalized"
        if renormalized:
            assert np.allclose(total, 1.0, atol=1e-5), f"layer {layer}: weights do not sum to 1"
        else:
            assert (total < 1 + 1e-6).all(), f"layer {layer}: softmax weights sum above 1"
            mass = trace.meta["top_k_softmax_mass"][str(layer)]
            assert abs(mass - total.mean()) < 1e-4, (layer, mass, total.mean())
    phases = set(np.unique(trace.phase).tolist())
    assert phases == {0, 1} if "prefill" in model_active else phases == {1}, phases
    report = sy.trace.evaluate(path, "topk_softmax", ranks=4)
    res = report["results"][0]["layers"]
    for phase, want in model_active.items():
        got = []
        for layer in map(str, trace.layers):
            m = res[layer][phase]
            assert m["experts_active_mean"] == m["model_experts_active_mean"], \
                f"layer {layer} {phase}: topk_softmax active {m['experts_active_mean']} " \
                f"!= the model's {m['model_experts_active_mean']}"
            assert abs(m["mass_kept_mean"] - 1) < 1e-6 and \
                abs(m["model_mass_kept_mean"] - 1) < 1e-6, (layer, phase, m)
            got.append(m["model_experts_active_mean"])
        assert abs(np.mean(got) - want) < 5e-4, \
            f"{phase}: model experts active {np.mean(got):.4f}, expected {want}"
    return f"{tokens} tokens x {len(layers)} layers, provenance complete, topk_softmax = " \
           f"the model's routing"


def check_checker(sy):
    """check_meta rejects a meta.json with a missing or malformed provenance field."""
    meta = sy.trace.load_trace(os.path.join(PUBLIC, sorted(EXPECTED)[0])).meta
    for mutate, what in ((lambda m: m.pop("provenance"), "provenance"),
                         (lambda m: m["provenance"].update(commit="216e26e"), "commit"),
                         (lambda m: m["provenance"]["paths"][0].pop("sha256"), "sha256"),
                         (lambda m: m["provenance"].update(license=""), "license")):
        bad = copy.deepcopy(meta)
        mutate(bad)
        try:
            check_meta(bad, "mutated")
        except AssertionError as e:
            assert what in str(e), f"rejected for another reason: {e}"
        else:
            raise AssertionError(f"a meta.json without a valid {what} was accepted")
    return "rejects missing provenance, short commit, missing sha256, empty license"


def check_reproduces():
    sources = ("Mario928/speculative-moe", "weiran0129/vLLM-MoE-Logger")
    missing = [s for s in sources
               if not os.path.isdir(os.path.join(SOURCES, s.replace("/", "+")))]
    if missing:
        return f"skipped: no clone of {', '.join(missing)} in shared/sources"
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                       "convert_public_trace.py"), "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip().replace("\n", "; ")


def main():
    import switchyard as sy
    import switchyard.trace  # noqa: F401

    if not os.path.isdir(PUBLIC):
        print(f"skipped: no {PUBLIC} (scripts/convert_public_trace.py writes it from clones "
              f"of the source repositories; docs/public-traces.md)")
        return 77
    names = sorted(d for d in os.listdir(PUBLIC) if os.path.isdir(os.path.join(PUBLIC, d)))

    def listed():
        assert names == sorted(EXPECTED), \
            f"shared/traces/public holds {names}, the test knows {sorted(EXPECTED)}"
        return ", ".join(names)

    checks = [("listed", listed)]
    checks += [(name, lambda name=name: check_trace(sy, name)) for name in sorted(EXPECTED)]
    checks += [("provenance-checker", lambda: check_checker(sy)),
               ("reproduces", check_reproduces)]
    return Checks().run_all(checks)


if __name__ == "__main__":
    sys.exit(main())
