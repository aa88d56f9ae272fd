"""Precompiled policy artifacts for a machine without the compiler: what moe-compile
made here for a request (policy text, flags, target), keyed so that the same request
made there finds it. The key hashes the policy's text, the flags (a --model file by its
contents, not its path) and the target, like the runtime's PolicyCache.
"""
import hashlib
import os
import shutil
import subprocess

DROP_SUFFIXES = (".ll", ".o", ".cu", "_launch.cpp", ".cubin")


def request_key(policy, flags, target):
    h = hashlib.sha256(b"switchyard-kit-compile/1\0")
    with open(policy, "rb") as f:
        h.update(f.read())
    i = 0
    while i < len(flags):
        h.update(flags[i].encode() + b"\0")
        if flags[i] == "--model" and i + 1 < len(flags):
            with open(flags[i + 1], "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
            i += 2
            continue
        i += 1
    h.update(target.encode())
    return h.hexdigest()[:24]


def record(store, compiler, policy, flags, target):
    """Compiles the request into store/KEY (once) and returns KEY."""
    key = request_key(policy, flags, target)
    out = os.path.join(store, key)
    if not os.path.isdir(out):
        tmp = out + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([compiler, policy, f"--target={target}", "-o", tmp] + flags,
                       check=True, capture_output=True)
        for name in os.listdir(tmp):
            if name.endswith(DROP_SUFFIXES):
                os.remove(os.path.join(tmp, name))
        os.rename(tmp, out)
    return key
