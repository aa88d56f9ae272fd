#!/usr/bin/env python3
"""`pip install .` (scripts/build.sh runs it into .venv, reusing build/): the installed
package imports from outside the source tree, routes with its own bundled moe-compile
and finds its shipped policies and C++ package.

Run: .venv/bin/python test/python/test_installed.py   (77 when not installed)
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROBE = r"""
import os, sys, numpy as np, switchyard as sy
site = os.path.dirname(sy.__file__)
assert "site-packages" in site, site
assert os.path.isfile(os.path.join(sy.compiler_dir, "moe-compile"))
assert sy.compiler_dir.startswith(site) and sy.policy_dir.startswith(site)
assert os.path.isfile(os.path.join(site, "lib", "cmake", "Switchyard", "SwitchyardConfig.cmake"))
r = sy.compile("xshare", experts=16, top_k=2)
out = r(logits=np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
assert out["topk_ids"].shape == (4, 2)
print("installed:", site)
"""


def main():
    python = sys.executable
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SWITCHYARD_MOE_COMPILE", "SWITCHYARD_POLICY_DIR")}
    env["SWITCHYARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="sy-installed-")
    found = subprocess.run([python, "-c", "import importlib.util as u; "
                            "print(bool(u.find_spec('switchyard')))"],
                           capture_output=True, text=True, cwd="/", env=env)
    if found.stdout.strip() != "True":
        print(f"skipped: switchyard is not installed for {python} (scripts/build.sh installs it)")
        return 77
    result = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, cwd="/",
                            env=env)
    print(result.stdout + result.stderr)
    ok = result.returncode == 0
    print(("ok   " if ok else "FAIL ") + "the installed package imports and routes from /")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
