#!/usr/bin/env python3
"""The installed package (scripts/build.sh installs it into .venv) reads its shipped
policies from inside itself, never from the source tree it was built from: the Python
side (switchyard.policy_dir, the SWITCHYARD_POLICY_DIR it gives the runtime), the
runtime's own lookup beside its library (an Executor opened without that variable
names an installed policy) and a shipped policy compiled by name.

Run: .venv/bin/python test/python/test_installed_layout.py   (77 when not installed)
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROBE = r"""
import os, sys, subprocess, numpy as np, switchyard as sy
root, work = sys.argv[1], sys.argv[2]
site = os.path.dirname(os.path.realpath(sy.__file__))
inside = lambda path: os.path.realpath(path).startswith(site + os.sep)
assert "site-packages" in site, site
assert inside(sy.policy_dir), sy.policy_dir
assert os.path.isfile(os.path.join(sy.policy_dir, "xshare.mlir")), "no shipped policies"
assert inside(os.environ["SWITCHYARD_POLICY_DIR"]), os.environ["SWITCHYARD_POLICY_DIR"]
r = sy.compile("xshare", experts=16, top_k=2)
out = r(logits=np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
assert out["topk_ids"].shape == (4, 2)
# The runtime's own lookup (what moe-exec and the C++ package use): beside its library.
del os.environ["SWITCHYARD_POLICY_DIR"]
ckpt = os.path.join(work, "ckpt")
subprocess.run([sys.executable, os.path.join(root, "test", "support", "make_checkpoint.py"),
                "--preset", "mixtral-tiny", "--out", ckpt, "--seed", "1"], check=True,
               stdout=subprocess.DEVNULL)
policy = sy.Executor(ckpt).info["policy"]
assert inside(policy), f"the runtime's native policy {policy} is outside {site}"
print("policies inside", site)
"""


def main():
    python = sys.executable
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SWITCHYARD_MOE_COMPILE", "SWITCHYARD_POLICY_DIR")}
    work = tempfile.mkdtemp(prefix="sy-installed-layout-")
    env["SWITCHYARD_CACHE_DIR"] = os.path.join(work, "cache")
    found = subprocess.run([python, "-c", "import importlib.util as u; "
                            "print(bool(u.find_spec('switchyard')))"],
                           capture_output=True, text=True, cwd="/", env=env)
    if found.stdout.strip() != "True":
        print(f"skipped: switchyard is not installed for {python} (scripts/build.sh installs it)")
        return 77
    result = subprocess.run([python, "-c", PROBE, ROOT, work], capture_output=True,
                            text=True, cwd="/", env=env)
    print(result.stdout + result.stderr)
    ok = result.returncode == 0
    print(("ok   " if ok else "FAIL ") + "the installed package's policies are its own")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
