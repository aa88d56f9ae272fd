#!/usr/bin/python3
"""Hugging Face configs as the hub's checkpoints have them and as transformers writes
them: every config.json reader of Switchyard (moe-exec's MoeConfig.cpp, moe-compile
--model's ModelConfig.cpp, the Python package's switchyard.compile(model=...), the numpy
reference's num_experts) takes both spellings and gives the same result.

  * moe-exec runs a checkpoint of every family (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE,
    DeepSeek-V3) with the config as the hub has it, as transformers saves it
    (TRANSFORMERS_SAVES below), and with the other spelling transformers reads (its
    attribute_map): the outputs are bit for bit the same;
  * two spellings that disagree, or no expert count, are errors naming the file and key;
  * moe-compile --model and switchyard.compile(model=...) bind the same shape from
    either spelling (dict, file, and a transformers config object);
  * with every transformers this machine has (this interpreter's, .venv's, .venv-vllm's,
    and $SWITCHYARD_TRANSFORMERS_PYTHONS, colon-separated interpreters): the hub config
    loaded by AutoConfig and saved by save_pretrained keeps each MoE value under the
    spelling recorded in TRANSFORMERS_SAVES (a new transformers that renames one fails
    here: record it and teach the readers), and that saved config runs through moe-exec
    to the same outputs.

    test_config_spellings.py --build BUILD_DIR
"""
import argparse
import glob
import json
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
from make_checkpoint import ARCHS, make_checkpoint  # noqa: E402

# What save_pretrained writes for a config loaded from the hub's spelling: hub key ->
# the key transformers saves it under (keys not listed keep their name). Recorded from
# transformers 5.19.0, 5.23.0 and 5.24.0, which all write the same (Qwen3MoeConfig's
# attribute_map maps num_experts to num_local_experts since transformers 5; torch_dtype
# and rope_theta become dtype and rope_parameters in every family, and no reader of
# Switchyard uses those two).
TRANSFORMERS_SAVES = {
    "mixtral": {},
    "qwen2_moe": {},
    "qwen3_moe": {"num_experts": "num_local_experts"},
    "olmoe": {},
    "deepseek_v3": {},
}
TRANSFORMERS_VERSIONS_RECORDED = ("5.19.0", "5.23.0", "5.24.0")
# The other spelling of the expert count that each family's transformers config reads
# (attribute_map: MixtralConfig num_experts -> num_local_experts, OlmoeConfig and
# DeepseekV3Config num_local_experts -> num_experts / n_routed_experts). Qwen2MoeConfig
# has none; the readers take num_local_experts there too, as the standard name.
OTHER_SPELLING = {
    "mixtral": {"num_local_experts": "num_experts"},
    "qwen2_moe": {"num_experts": "num_local_experts"},
    "qwen3_moe": {"num_experts": "num_local_experts"},
    "olmoe": {"num_experts": "num_local_experts"},
    "deepseek_v3": {"n_routed_experts": "num_local_experts"},
}
# The config keys the readers use (MoeConfig.cpp, ModelConfig.cpp, moe_reference.py).
READ_KEYS = ["architectures", "model_type", "hidden_size", "num_hidden_layers",
             "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
             "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
             "norm_topk_prob", "rms_norm_eps", "decoder_sparse_step", "mlp_only_layers",
             "n_shared_experts", "n_group", "topk_group", "routed_scaling_factor",
             "first_k_dense_replace", "moe_layer_freq", "scoring_func"]
NATIVE = {"deepseek_v3": "deepseek_v3"}  # the shipped policy of each family's routing


def renamed(config, names):
    return {names.get(k, k): v for k, v in config.items()}


class Suite:
    def __init__(self, build, work):
        self.build = build
        self.bin = os.path.join(build, "bin")
        self.work = work
        self.env = dict(os.environ, SWITCHYARD_CACHE_DIR=os.path.join(work, "cache"))
        self.failures = []
        self.passed = 0
        self.hub = {}  # arch -> checkpoint directory with the hub's spelling

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL", what)

    def tool(self, name, *args):
        return subprocess.run([os.path.join(self.bin, name), *args], capture_output=True,
                              text=True, env=self.env)

    def checkpoint(self, arch):
        if arch not in self.hub:
            self.hub[arch] = os.path.join(self.work, arch)
            make_checkpoint(arch, self.hub[arch], seed=2)
        return self.hub[arch]

    def variant(self, arch, name, config):
        """The hub checkpoint of `arch` with `config` as its config.json."""
        d = os.path.join(self.work, f"{arch}-{name}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in os.listdir(self.checkpoint(arch)):
            if f != "config.json":
                os.symlink(os.path.join(self.checkpoint(arch), f), os.path.join(d, f))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        return d

    def execute(self, model_dir, x, *flags):
        """moe-exec's outputs ({file: array}), or the failed process."""
        out = tempfile.mkdtemp(dir=self.work, prefix="out-")
        x_path = os.path.join(out, "x.npy")
        np.save(x_path, x)
        r = self.tool("moe-exec", model_dir, "--input", x_path, "--out", out, *flags)
        if r.returncode != 0:
            return r
        return {os.path.basename(p): np.load(p)
                for p in sorted(glob.glob(os.path.join(out, "*.npy"))) if p != x_path}


def hub_config(s, arch):
    with open(os.path.join(s.checkpoint(arch), "config.json")) as f:
        return json.load(f)


def same_outputs(s, what, got, want):
    if not isinstance(got, dict):
        s.check(False, f"{what}: moe-exec failed: {got.stderr.strip()[:400]}")
        return
    s.check(sorted(got) == sorted(want), f"{what}: outputs {sorted(got)} vs {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        s.check(got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name]),
                f"{what}: {name} differs from the hub spelling's")


def x_for(config, seed=3, tokens=19):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((tokens, config["hidden_size"])).astype(np.float32)


# ------------------------------------------------------------------------------ moe-exec
def check_executor(s):
    for arch in ARCHS:
        config = hub_config(s, arch)
        x = x_for(config)
        E = ref.num_experts(config)
        base = {flags: s.execute(s.checkpoint(arch), x, *flags)
                for flags in [("--block-only",), ()]}
        if not all(isinstance(b, dict) for b in base.values()):
            s.check(False, f"{arch}: moe-exec failed on the hub spelling")
            continue
        variants = {"transformers": renamed(config, TRANSFORMERS_SAVES[arch]),
                    "other": renamed(config, OTHER_SPELLING[arch])}
        key = next(iter(OTHER_SPELLING[arch]))
        variants["both"] = dict(config, **{OTHER_SPELLING[arch][key]: config[key]})
        for name, cfg in variants.items():
            s.check(ref.num_experts(cfg) == E, f"{arch} {name}: moe_reference.num_experts "
                                               f"= {ref.num_experts(cfg)}, not {E}")
            d = s.variant(arch, name, cfg)
            for flags, want in base.items():
                same_outputs(s, f"{arch} with the {name} spelling {' '.join(flags)}",
                             s.execute(d, x, *flags), want)


def check_executor_errors(s):
    def error(what, config, expected):
        d = s.variant(config["model_type"], "bad", config)
        r = s.execute(d, x_for(config))
        ok = not isinstance(r, dict) and r.returncode == 1 and expected in r.stderr \
            and "moe-exec: error:" in r.stderr
        got = "outputs" if isinstance(r, dict) else (r.returncode, r.stderr.strip()[:300])
        s.check(ok, f"{what}: expected exit 1 and '{expected}', got {got}")

    for arch in ARCHS:
        config = hub_config(s, arch)
        key, alias = next(iter(OTHER_SPELLING[arch].items()))
        E = config[key]
        cfg = os.path.join(s.work, f"{arch}-bad", "config.json")
        error(f"{arch}: two spellings that disagree", dict(config, **{alias: E * 2}),
              f"{cfg}: {alias} = {E * 2} disagrees with {key} = {E}")
        error(f"{arch}: no expert count", {k: v for k, v in config.items() if k != key},
              f"{cfg}: {key} (or {alias}) is missing")
        error(f"{arch}: the other spelling not an integer",
              renamed(dict(config, **{key: str(E)}), {key: alias}),
              f"{cfg}: {alias} must be an integer")
        error(f"{arch}: the other spelling below 1",
              renamed(dict(config, **{key: 0}), {key: alias}),
              f"{cfg}: {alias} = 0 is outside [1, 16777216]")
        # The numpy reference says the same.
        for bad, words in [(dict(config, **{alias: E * 2}), "disagrees"),
                           ({k: v for k, v in config.items() if k != key}, "has no")]:
            try:
                ref.num_experts(bad)
                s.check(False, f"{arch}: moe_reference.num_experts accepted a bad config")
            except ValueError as e:
                s.check(words in str(e), f"{arch}: moe_reference.num_experts: {e}")


# --------------------------------------------------------------- moe-compile --model, Python
def compiled_shape(s, arch, config_path):
    """moe-compile --model: the manifest's entries, or the failed process."""
    out = tempfile.mkdtemp(dir=s.work, prefix="compile-")
    policy = os.path.join(ROOT, "policies", NATIVE.get(arch, "topk_softmax") + ".mlir")
    r = s.tool("moe-compile", policy, "--model", config_path, "--target=host", "-o", out)
    if r.returncode != 0:
        return r
    with open(os.path.join(out, "manifest.json")) as f:
        entries = json.load(f)["entries"]
    return [{k: e.get(k) for k in ("entry", "shape", "signature")} for e in entries]


def check_compile(s):
    for arch in ARCHS:
        config = hub_config(s, arch)
        want = compiled_shape(s, arch, os.path.join(s.checkpoint(arch), "config.json"))
        if not isinstance(want, list):
            s.check(False, f"{arch}: moe-compile --model failed: {want.stderr.strip()[:400]}")
            continue
        s.check(all(e["shape"]["experts"] == ref.num_experts(config) and
                    e["shape"]["top_k"] == config["num_experts_per_tok"] for e in want),
                f"{arch}: moe-compile --model bound {[e['shape'] for e in want]}")
        for name, names in [("transformers", TRANSFORMERS_SAVES[arch]),
                            ("other", OTHER_SPELLING[arch])]:
            d = s.variant(arch, name, renamed(config, names))
            got = compiled_shape(s, arch, os.path.join(d, "config.json"))
            s.check(got == want, f"{arch}: moe-compile --model with the {name} spelling: "
                                 f"{got if isinstance(got, list) else got.stderr.strip()[:400]}")
    bad = os.path.join(s.work, "two.json")
    with open(bad, "w") as f:
        json.dump(dict(hub_config(s, "qwen3_moe"), num_local_experts=16), f)
    r = compiled_shape(s, "qwen3_moe", bad)
    s.check(not isinstance(r, list) and "disagrees with" in r.stderr and "two.json" in r.stderr,
            f"moe-compile --model: two spellings that disagree: "
            f"{r if isinstance(r, list) else r.stderr.strip()}")


def check_python(s):
    try:
        from policy_shapes import import_switchyard
        sy = import_switchyard(s.build)
    except ImportError as e:
        print(f"SKIP the Python package: {e}")
        return
    try:
        import transformers
        from transformers import AutoConfig
    except ImportError:
        transformers = None
    for arch in ARCHS:
        config = hub_config(s, arch)
        E = ref.num_experts(config)
        policy = NATIVE.get(arch, "topk_softmax")
        logits = np.random.default_rng(4).standard_normal((7, E)).astype(np.float32)
        models = {"hub dict": config,
                  "hub file": os.path.join(s.checkpoint(arch), "config.json")}
        for name, names in [("transformers", TRANSFORMERS_SAVES[arch]),
                            ("other", OTHER_SPELLING[arch])]:
            models[f"{name} dict"] = renamed(config, names)
            models[f"{name} file"] = os.path.join(
                s.variant(arch, name, renamed(config, names)), "config.json")
        if transformers is not None:
            # The config object as transformers builds it from each spelling (its
            # to_dict is what switchyard.compile and switchyard.hf.patch pass on).
            # Qwen2MoeConfig does not read num_local_experts (it keeps its default
            # num_experts = 60 beside it: moe-compile says they disagree).
            for name in ("hub",) + (("other",) if arch != "qwen2_moe" else ()):
                d = s.checkpoint(arch) if name == "hub" else s.variant(
                    arch, name, renamed(config, OTHER_SPELLING[arch]))
                models[f"transformers {transformers.__version__} object from the {name} "
                       f"spelling"] = AutoConfig.from_pretrained(d)
        want = None
        for name, model in models.items():
            what = f"{arch}: switchyard.compile('{policy}', model=<{name}>)"
            try:
                router = sy.compile(policy, model=model)
            except Exception as e:  # noqa: BLE001
                s.check(False, f"{what} raised {type(e).__name__}: {e}")
                continue
            # DeepSeek-V3's correction bias (zeros) besides the logits.
            out = router(logits, **{n: np.zeros(E, np.float32) for n in router.inputs
                                    if n != "logits"})
            ids = np.asarray(out["topk_ids"])
            s.check(ids.shape == (7, config["num_experts_per_tok"]),
                    f"{what}: topk_ids of shape {ids.shape}")
            if want is None:
                want = ids
            s.check(np.array_equal(ids, want), f"{what}: routes differently from the hub dict")
    try:
        sy.compile("topk_softmax", model=dict(hub_config(s, "qwen3_moe"), num_local_experts=16))
        s.check(False, "switchyard.compile: two spellings that disagree were accepted")
    except sy.SwitchyardError as e:
        s.check("num_local_experts = 16" in str(e) and "disagrees" in str(e),
                f"switchyard.compile: two spellings that disagree: {e}")


# ------------------------------------------------------------------- transformers round trip
ROUND_TRIP = r"""
import json, os, sys, transformers
from transformers import AutoConfig
for src, dst in zip(sys.argv[1::2], sys.argv[2::2]):
    AutoConfig.from_pretrained(src).save_pretrained(dst)
print(transformers.__version__)
"""


def interpreters():
    found = [sys.executable, os.path.join(ROOT, ".venv", "bin", "python"),
             os.path.join(ROOT, ".venv-vllm", "bin", "python")]
    found += [p for p in os.environ.get("SWITCHYARD_TRANSFORMERS_PYTHONS", "").split(":") if p]
    seen = []
    for p in found:
        # Not realpath: a venv's python is a link to the system's, with other packages.
        if os.path.isfile(p) and os.access(p, os.X_OK) and \
                os.path.abspath(p) not in map(os.path.abspath, seen):
            seen.append(p)
    return seen


def check_transformers(s):
    versions = set()
    for python in interpreters():
        probe = subprocess.run([python, "-c", "import transformers"], capture_output=True)
        if probe.returncode != 0:
            continue
        out = os.path.join(s.work, f"saved-{len(versions)}-{os.getpid()}")
        args = []
        for arch in ARCHS:
            args += [s.checkpoint(arch), os.path.join(out, arch)]
        r = subprocess.run([python, "-c", ROUND_TRIP, *args], capture_output=True, text=True,
                           env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
        if r.returncode != 0:
            s.check(False, f"{python}: save_pretrained failed: {r.stderr.strip()[-400:]}")
            continue
        version = r.stdout.strip().splitlines()[-1]
        if version in versions:
            continue
        versions.add(version)
        print(f"transformers {version} ({python})")
        for arch in ARCHS:
            hub = hub_config(s, arch)
            with open(os.path.join(out, arch, "config.json")) as f:
                saved = json.load(f)
            names = TRANSFORMERS_SAVES[arch]
            for key in READ_KEYS:
                if key not in hub:
                    continue
                as_saved = names.get(key, key)
                new = sorted(k for k in saved if k not in hub and k != "transformers_version")
                s.check(saved.get(as_saved) == hub[key],
                        f"transformers {version} does not save {arch}'s {key} = {hub[key]!r} "
                        f"as {as_saved} (recorded from transformers "
                        f"{', '.join(TRANSFORMERS_VERSIONS_RECORDED)}; keys it adds: {new}): "
                        f"record the new spelling in TRANSFORMERS_SAVES and teach the readers")
            x = x_for(hub)
            d = s.variant(arch, f"saved-{version}", saved)
            same_outputs(s, f"{arch} as transformers {version} saves it",
                         s.execute(d, x, "--block-only"),
                         s.execute(s.checkpoint(arch), x, "--block-only"))
    s.check(bool(versions), "no Python here has transformers: nothing checked its round trip")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--only", choices=["executor", "errors", "compile", "python",
                                           "transformers"])
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="switchyard-spellings-")
    s = Suite(os.path.abspath(args.build), work)
    groups = {"executor": check_executor, "errors": check_executor_errors,
              "compile": check_compile, "python": check_python,
              "transformers": check_transformers}
    try:
        for name, run in groups.items():
            if not args.only or args.only == name:
                run(s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{s.passed} checks passed, {len(s.failures)} failed")
    sys.exit(1 if s.failures else 0)


if __name__ == "__main__":
    main()
