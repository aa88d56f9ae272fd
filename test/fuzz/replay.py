#!/usr/bin/python3
"""Replays saved fuzzing reproducers through the (normal, non-sanitizer) tools.

    test/fuzz/replay.py --bin BUILD/bin [--corpus test/fuzz/corpus]

Each reproducer is a directory holding the input files and cmd.json:
  {"tool": "moe-run", "args": ["{dir}/p.mlir", "--arg", "logits={dir}/logits.npy", ...],
   "expect_rc": 1, "expect_stderr": "text the diagnostic must contain", ...}
`{dir}` is the reproducer's (copied) directory and `{out}` a scratch output directory.
A reproducer passes when the tool exits 0 or 1 (or exactly `expect_rc` when given),
within the time limit, without a signal, a stack dump or a sanitizer report, and its
stderr contains `expect_stderr` when given. Prints one line per reproducer and exits 1
if any fails.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH_MARKERS = ("Stack dump:", "PLEASE submit a bug report", "ERROR: AddressSanitizer",
                 "runtime error:", "LeakSanitizer")


def replay(bin_dir, repro, timeout):
    with open(os.path.join(repro, "cmd.json")) as f:
        meta = json.load(f)
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        d = os.path.join(tmp, "in")
        shutil.copytree(repro, d)
        out = os.path.join(tmp, "out")
        args = [a.replace("{dir}", d).replace("{out}", out) for a in meta["args"]]
        cmd = [os.path.join(bin_dir, meta["tool"])] + args
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timed out after %d s" % timeout
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode < 0:
            return "killed by signal %d" % -p.returncode
        for marker in CRASH_MARKERS:
            if marker in err:
                return "crashed (%s)" % marker
        if "expect_rc" in meta:
            if p.returncode != meta["expect_rc"]:
                return "exit %d, expected %d: %s" % (p.returncode, meta["expect_rc"],
                                                     err.strip()[-300:])
        elif p.returncode not in (0, 1):
            return "exit %d: %s" % (p.returncode, err.strip()[-300:])
        if meta.get("expect_stderr") and meta["expect_stderr"] not in err:
            return "stderr lacks %r: %s" % (meta["expect_stderr"], err.strip()[-300:])
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus"))
    ap.add_argument("--timeout", type=int, default=60)
    opts = ap.parse_args(argv)
    repros = sorted(d for d in os.listdir(opts.corpus)
                    if os.path.isfile(os.path.join(opts.corpus, d, "cmd.json")))
    failed = 0
    for name in repros:
        problem = replay(os.path.abspath(opts.bin), os.path.join(opts.corpus, name),
                         opts.timeout)
        print("%s %s%s" % ("FAIL" if problem else "ok  ", name,
                           ": " + problem if problem else ""))
        failed += problem is not None
    print("%d reproducers, %d failed" % (len(repros), failed))
    return 1 if failed or not repros else 0


if __name__ == "__main__":
    sys.exit(main())
