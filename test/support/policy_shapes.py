"""The shapes the shipped generic policies are bound to, and how the scripts and tests
reach the `switchyard` package of a build tree (pure Python; the package itself is
python/switchyard, built into BUILD/python).

    from policy_shapes import import_switchyard, native_shape
    switchyard = import_switchyard()              # BUILD/python/switchyard
    router = switchyard.compile("policies/lynx.mlir", **native_shape("lynx"))

NATIVE_SHAPES is the model each shipped policy's header names (what the demo, the
benchmarks, the lit tests (scripts/native_shape.py), the fuzzer and the GPU tests bind it
to); shape_flags() spells a binding as the tools' flags (--experts 128, --model FILE,
...); GPU_ROUTERS lists the routers with a GPU kernel. Only the standard library is
needed: native_shape.py and the fuzzer run without numpy or the built extension.
"""
import importlib
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The package's shape keywords, read from its source without importing the package
# (which needs the built extension).
_spec = importlib.util.spec_from_file_location(
    "switchyard_shapes", os.path.join(ROOT, "python", "switchyard", "_shapes.py"))
_shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shapes)

# The tools' shape flags (moe-opt, moe-run, moe-compile): switchyard.compile's shape
# keywords and model=.
SHAPE_PARAMS = _shapes.SHAPE_PARAMS + ("model",)

# The model each shipped generic policy was written for (its header's example).
NATIVE_SHAPES = {
    "topk_softmax": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "top_p": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "oea": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "xshare": {"model": os.path.join(ROOT, "models", "gpt-oss-120b.json")},
    "xshare_spec": {"model": os.path.join(ROOT, "models", "gpt-oss-120b.json")},
    "lynx": {"experts": 60, "top_k": 4, "shared_experts": 4},
    "deepseek_v3": {"model": os.path.join(ROOT, "models", "deepseek-v3.json")},
    "xshare_ep": {"experts": 256, "top_k": 8, "shared_experts": 1, "devices": 8,
                  "slots": 256},
    "dynaexq": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "eplb": {"model": os.path.join(ROOT, "models", "deepseek-v3.json"), "nodes": 2,
             "devices": 8, "slots": 288},
    "libra": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json"), "devices": 8},
    "expertflow": {"experts": 64, "top_k": 6},
    "llep": {"model": os.path.join(ROOT, "models", "gpt-oss-120b.json"), "devices": 8},
    "capacity_topk": {"model": os.path.join(ROOT, "models", "mixtral-8x7b.json")},
    "capacity_drop": {"model": os.path.join(ROOT, "models", "mixtral-8x7b.json")},
    "moe_spec": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json")},
    "metro": {"model": os.path.join(ROOT, "models", "qwen3-30b-a3b.json"), "devices": 8,
              "slots": 144},
    "expert_choice": {"experts": 64, "top_k": 2},
}

# (policy file in policies/, router entry): every shipped router that compiles to a GPU
# kernel (the GPU tests run each of them).
GPU_ROUTERS = [("topk_softmax", "topk_softmax"), ("top_p", "top_p"), ("oea", "oea"),
               ("deepseek_v3", "deepseek_v3"),
               ("lynx", "lynx"), ("xshare", "xshare"), ("xshare_spec", "xshare_spec"),
               ("xshare_ep", "xshare_ep"), ("libra", "libra_predict"),
               ("expertflow", "expertflow_route"), ("capacity_topk", "capacity_topk"),
               ("capacity_drop", "capacity_drop"), ("moe_spec", "moe_spec"), ("metro", "metro"),
               ("expert_choice", "expert_choice")]


class ShapeError(ValueError):
    """An unknown shape parameter."""


def build_dir(build=None):
    """The build tree: `build`, else $SWITCHYARD_BUILD_DIR, else ROOT/build."""
    return os.path.abspath(build or os.environ.get("SWITCHYARD_BUILD_DIR")
                           or os.path.join(ROOT, "build"))


def import_switchyard(build=None):
    """The `switchyard` package of the build tree (BUILD/python, put first on sys.path,
    so that a script or test uses this build's copy, not an installed one). Also sets
    $SWITCHYARD_BUILD_DIR to that tree for the tools the caller runs."""
    build = build_dir(build)
    os.environ["SWITCHYARD_BUILD_DIR"] = build
    path = os.path.join(build, "python")
    if not os.path.isfile(os.path.join(path, "switchyard", "__init__.py")):
        raise ImportError(f"no switchyard package in {path}: build it (scripts/build.sh "
                          "switchyard-python; the extension needs nanobind, which "
                          "scripts/setup.sh installs into .venv)")
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)
    module = importlib.import_module("switchyard")
    where = os.path.dirname(os.path.abspath(module.__file__))
    if where != os.path.join(path, "switchyard"):
        raise ImportError(f"switchyard was already imported from {where}, not from {path}")
    return module


def native_shape(policy_name):
    """The shape binding of a shipped policy's own model ({} for a fixed-shape file):
    keywords of switchyard.compile (and of shape_flags)."""
    return dict(NATIVE_SHAPES.get(policy_name, {}))


def shape_flags(**shape):
    """The tools' flags for a shape binding (experts=128 -> --experts 128, model=FILE ->
    --model FILE, ...); None values are left out, an unknown name is a ShapeError."""
    return _shapes.shape_flags(shape, ShapeError, also=("model",))
