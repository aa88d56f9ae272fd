#!/usr/bin/python3
"""ctest docs/numbers: every generated number of the README and docs/ equals its source.

Runs `scripts/update-numbers.py --check` on the checkout (the committed JSONs under docs/,
ctest -N of the build directory given as the first argument, the demo's output), then
checks that the checker can fail: on a scratch copy of the pages it must report a
changed number, an unknown block, an unclosed block and a hand-written result table.
Prints ok / FAIL lines and "N passed, M failed"; exit 1 on a failure.

Run: python3 test/docs/numbers.py [BUILD_DIR]"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "update-numbers.py")


def run(env_root=None, build=None, args=("--check",)):
    env = dict(os.environ)
    if env_root:
        env["SWITCHYARD_DOCS_ROOT"] = env_root
    if build:
        env["SWITCHYARD_BUILD_DIR"] = build
    return subprocess.run([sys.executable, SCRIPT, *args], env=env, capture_output=True,
                          text=True, timeout=900)


def scratch_copy():
    """README.md, docs/ and what the live counts read, in a temporary checkout."""
    d = tempfile.mkdtemp(prefix="switchyard-numbers-")
    shutil.copy(os.path.join(ROOT, "README.md"), d)
    shutil.copytree(os.path.join(ROOT, "docs"), os.path.join(d, "docs"))
    for name in ("test", "policies", "scripts", "models", "build", ".venv", "examples"):
        if os.path.exists(os.path.join(ROOT, name)):
            os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    return d


def main(argv):
    build = argv[0] if argv else None
    passed = failed = 0

    def check(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok   {what}")
        else:
            failed += 1
            print(f"FAIL {what}\n{detail}")

    r = run(build=build)
    check(r.returncode == 0, "every generated block of README.md and docs/ equals its source",
          r.stdout[-6000:] + r.stderr[-2000:])

    # The checker must be able to fail. A scratch copy with one number changed, an unknown
    # block, an unclosed block and a hand-written result table.
    d = scratch_copy()
    try:
        readme = os.path.join(d, "README.md")
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        start = text.index("<!-- generated: readme-test-counts -->")
        digit = next(i for i in range(start + 40, len(text)) if text[i].isdigit())
        changed = text[:digit] + str((int(text[digit]) + 1) % 10) + text[digit + 1:]
        cases = {
            "a changed number": (changed, "stale: README.md"),
            "an unknown block": (text + "\n<!-- generated: no-such-block -->\n<!-- end -->\n",
                                 "unknown block `no-such-block`"),
            "an unclosed block": (text + "\n<!-- generated: test-counts -->\n",
                                  "without its `<!-- end -->`"),
            "a hand-written result table": (text + "\n| policy | ms |\n|---|---|\n| a | 1.5 |\n",
                                            "a table row with a number outside"),
        }
        for what, (content, expected) in cases.items():
            with open(readme, "w", encoding="utf-8") as f:
                f.write(content)
            r = run(env_root=d, build=build, args=("--check", "--pages", "README.md"))
            check(r.returncode == 1 and expected in r.stdout,
                  f"--check fails on {what}", f"exit {r.returncode}:\n{r.stdout[-3000:]}")
        # A missing JSON is an error naming it, not a crash.
        with open(readme, "w", encoding="utf-8") as f:
            f.write(text)
        os.remove(os.path.join(d, "docs", "vllm-engine.json"))
        r = run(env_root=d, build=build, args=("--check", "--pages", "README.md"))
        check(r.returncode == 1 and "docs/vllm-engine.json" in r.stdout
              and "Traceback" not in r.stderr,
              "--check names a missing JSON", f"exit {r.returncode}:\n{r.stdout[-2000:]}"
              f"{r.stderr[-2000:]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
