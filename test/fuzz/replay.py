#!/usr/bin/python3
"""Replays saved fuzzing reproducers through the tools of one build.

    test/fuzz/replay.py --bin BUILD/bin [--corpus test/fuzz/corpus]
    test/fuzz/replay.py --bin build-sanitized/bin --compiler build/bin/moe-compile \\
        --corpus test/fuzz/corpus-runtime

Each reproducer is a directory holding the input files and cmd.json:
  {"tool": "moe-run", "args": ["{dir}/p.mlir", "--arg", "logits={dir}/logits.npy", ...],
   "expect_rc": 1, "expect_stderr": "text the diagnostic must contain", ...}
`{dir}` is the reproducer's (copied) directory and `{out}` a scratch output directory.
Runtime reproducers (fuzz_runtime.py) may also have
  "env": {"SWITCHYARD_CACHE_DIR": "{dir}/cache"}   variables for the run;
  "prime": true      the command runs once to fill the policy cache, then every file of
                     {dir}/cache-entry/ replaces its namesake in each cache entry, and
                     the second run is judged (a damaged cache entry);
  "tool": "python"   {dir}/calls.py runs in this Python ({dir} replaced in it; the
                     `switchyard` package must be importable), and a line
                     "UNEXPECTED ..." on stdout fails it;
  "timeout": S       seconds instead of --timeout (a pending hang that eats memory);
  "pending": "why"   a known finding in code its owner has yet to fix: reported, not
                     failed (and reported when it passes, so that the mark is dropped).
A file NAME.fifo in the directory becomes a FIFO named NAME (git cannot hold one);
symbolic links (to /dev/zero, ...) are kept as links.
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


def prepare(repro, tmp):
    d = os.path.join(tmp, "in")
    shutil.copytree(repro, d, symlinks=True)
    for dirpath, _, names in os.walk(d):
        for n in names:
            if n.endswith(".fifo"):
                os.remove(os.path.join(dirpath, n))
                os.mkfifo(os.path.join(dirpath, n[:-len(".fifo")]))
    calls = os.path.join(d, "calls.py")
    if os.path.isfile(calls):
        text = open(calls).read().replace("{dir}", d)
        open(calls, "w").write(text)
    return d


def overlay_cache(cache, entry_files):
    """Each file of the reproducer's cache-entry/ over its namesake in every entry."""
    if not os.path.isdir(cache):
        return False
    for entry in os.listdir(cache):
        target = os.path.join(cache, entry)
        if os.path.isfile(os.path.join(target, "manifest.json")):
            for name in os.listdir(entry_files):
                shutil.copyfile(os.path.join(entry_files, name), os.path.join(target, name))
    return True


def replay(bin_dir, repro, timeout, python):
    with open(os.path.join(repro, "cmd.json")) as f:
        meta = json.load(f)
    timeout = meta.get("timeout", timeout)
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        d = prepare(repro, tmp)
        out = os.path.join(tmp, "out")
        sub = lambda a: a.replace("{dir}", d).replace("{out}", out)  # noqa: E731
        env = dict(os.environ, **{k: sub(v) for k, v in meta.get("env", {}).items()})
        if meta["tool"] == "python":
            cmd = [python, os.path.join(d, "calls.py")]
        else:
            cmd = [os.path.join(bin_dir, meta["tool"])] + [sub(a) for a in meta["args"]]
        try:
            if meta.get("prime"):
                subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
                if not overlay_cache(env.get("SWITCHYARD_CACHE_DIR", ""),
                                     os.path.join(d, "cache-entry")):
                    return "the priming run left no policy cache"
                shutil.rmtree(out, ignore_errors=True)
            p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return "timed out after %d s" % timeout
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode < 0:
            return "killed by signal %d" % -p.returncode
        for marker in CRASH_MARKERS:
            if marker in err:
                return "crashed (%s)" % marker
        if "UNEXPECTED" in p.stdout.decode("utf-8", "replace"):
            return "python: " + p.stdout.decode("utf-8", "replace").strip()[-300:]
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
    ap.add_argument("--compiler", help="moe-compile for runtime reproducers "
                    "(SWITCHYARD_MOE_COMPILE)")
    ap.add_argument("--python", default=sys.executable, help="runs python reproducers")
    ap.add_argument("--timeout", type=int, default=60)
    opts = ap.parse_args(argv)
    if opts.compiler:
        os.environ["SWITCHYARD_MOE_COMPILE"] = os.path.abspath(opts.compiler)
    repros = sorted(d for d in os.listdir(opts.corpus)
                    if os.path.isfile(os.path.join(opts.corpus, d, "cmd.json")))
    failed = pending = 0
    for name in repros:
        path = os.path.join(opts.corpus, name)
        problem = replay(os.path.abspath(opts.bin), path, opts.timeout, opts.python)
        why = json.load(open(os.path.join(path, "cmd.json"))).get("pending")
        if why:
            pending += 1
            print("%s %s: %s" % ("PENDING" if problem else "PASSES (drop 'pending')", name,
                                 problem or why))
            continue
        print("%s %s%s" % ("FAIL" if problem else "ok  ", name,
                           ": " + problem if problem else ""))
        failed += problem is not None
    print("%d reproducers, %d failed, %d pending (known, unfixed)" %
          (len(repros), failed, pending))
    return 1 if failed or not repros else 0


if __name__ == "__main__":
    sys.exit(main())
