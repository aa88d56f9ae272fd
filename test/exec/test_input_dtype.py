#!/usr/bin/python3
"""--input-dtype NAME=bf16|f16 (switchyard.compile(input_dtypes=...)): a router compiled
to read its logits as bfloat16 / float16 in place gives what the float32 build gives on
the same values widened: ids, counts and sets exactly, weights bit-identical (within
1e-6). Checked for topk_softmax, deepseek_v3 (its bias input stays float32), xshare and
lynx (both phases), in the host and the lane-parallel (GPU) forms:

  * moe-run on a bf16 .npy (descr 'bfloat16', as ml_dtypes writes it) or a float16 .npy
    against moe-run of the float32 build on the widened values;
  * moe-compile's manifest.json / NAME.h record the dtype (bfloat16, uint16_t);
  * the Python package: torch bf16 / f16 tensors (and float16 NumPy arrays) bind with no
    copy; float32 memory for a bf16 input is refused (narrowing would round);
  * the flag's errors (unknown input, non-float input, bad dtype) name the flag.

    test_input_dtype.py --build BUILD_DIR
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
POLICIES = os.path.join(ROOT, "policies")
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
from checks import Checks  # noqa: E402

# (policy, shape flags, extra inputs {name: value}, python shape keywords)
CASES = [
    ("topk_softmax", ["--experts", "128", "--top-k", "8"], {}, dict(experts=128, top_k=8)),
    ("deepseek_v3", ["--experts", "64", "--top-k", "6", "--groups", "8", "--topk-groups", "4"],
     {"bias": "bias"}, dict(experts=64, top_k=6, groups=8, topk_groups=4)),
    ("xshare", ["--experts", "64", "--top-k", "8"], {}, dict(experts=64, top_k=8)),
    ("lynx", ["--experts", "60", "--top-k", "4"], {"phase": 1}, dict(experts=60, top_k=4)),
    ("lynx", ["--experts", "60", "--top-k", "4"], {"phase": 0}, dict(experts=60, top_k=4)),
]


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounded to nearest even (NaN kept quiet)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded).astype(np.uint16)


def bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def save_bf16(path, bits):
    """An .npy of bfloat16 (descr 'bfloat16': what the runtime reads as ml_dtypes')."""
    header = "{'descr': 'bfloat16', 'fortran_order': False, 'shape': %r, }" % (tuple(bits.shape),)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(np.ascontiguousarray(bits, "<u2").tobytes())


def logits_for(tokens, experts, rng):
    x = (rng.standard_normal((tokens, experts)) * 2.5).astype(np.float32)
    x[3, :5] = -np.inf           # masked experts
    x[5, :] = 0.5                # ties: the lower id wins
    x[6, 7] = 1e-40              # a float32 subnormal (bf16 keeps it, f16 flushes)
    return x


def same_outputs(a, b):
    """Names of the results that differ: integers exactly, floats within 1e-6."""
    bad = []
    for name, want in a.items():
        have = np.asarray(b[name])
        want = np.asarray(want)
        if have.shape != want.shape:
            bad.append(name)
        elif np.issubdtype(want.dtype, np.floating):
            if not np.allclose(have, want, rtol=0, atol=1e-6, equal_nan=True):
                bad.append(name)
        elif not np.array_equal(have, want):
            bad.append(name)
    return bad


def moe_run(build, policy, flags, inputs, out, extra=()):
    cmd = [os.path.join(build, "bin", "moe-run"), os.path.join(POLICIES, policy + ".mlir"),
           "--out", out] + flags + list(extra)
    for name, value in inputs.items():
        cmd += ["--arg", f"{name}={value}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r


def load_dir(directory):
    return {f[:-4]: np.load(os.path.join(directory, f))
            for f in sorted(os.listdir(directory)) if f.endswith(".npy")}


def check_moe_run(build, work, tally, rng):
    for policy, flags, extra, _ in CASES:
        experts = int(flags[1])
        x = logits_for(37, experts, rng)
        bias = (0.01 * rng.standard_normal(experts)).astype(np.float32)
        np.save(os.path.join(work, "bias.npy"), bias)
        for dtype in ("bf16", "f16"):
            tag = f"{policy}{'-phase' + str(extra['phase']) if 'phase' in extra else ''}-{dtype}"
            d = os.path.join(work, tag)
            os.makedirs(d, exist_ok=True)
            if dtype == "bf16":
                bits = bf16_bits(x)
                save_bf16(os.path.join(d, "narrow.npy"), bits)
                wide = bf16_widen(bits)
            else:
                half = x.astype(np.float16)
                np.save(os.path.join(d, "narrow.npy"), half)
                wide = half.astype(np.float32)
            np.save(os.path.join(d, "wide.npy"), wide)
            inputs = {k: (os.path.join(work, "bias.npy") if v == "bias" else v)
                      for k, v in extra.items()}
            for lanes in ([], ["--lane-parallel"]):
                form = " lane-parallel" if lanes else ""
                rn = moe_run(build, policy, flags + lanes + [f"--input-dtype=logits={dtype}"],
                             dict(logits=os.path.join(d, "narrow.npy"), **inputs),
                             os.path.join(d, "narrow" + form.strip()))
                rw = moe_run(build, policy, flags + lanes,
                             dict(logits=os.path.join(d, "wide.npy"), **inputs),
                             os.path.join(d, "wide" + form.strip()))
                if rn.returncode or rw.returncode:
                    tally(f"moe-run {tag}{form}", False, rn.stderr + rw.stderr)
                    continue
                a = load_dir(os.path.join(d, "wide" + form.strip()))
                b = load_dir(os.path.join(d, "narrow" + form.strip()))
                bad = same_outputs(a, b)
                tally(f"moe-run {tag}{form}: {len(a)} results equal the float32 build",
                            not bad and len(a) == len(b), f"differ: {bad}")
            # float32 memory for the narrow entry: refused, naming the argument.
            r = moe_run(build, policy, flags + [f"--input-dtype=logits={dtype}"],
                        dict(logits=os.path.join(d, "wide.npy"), **inputs), os.path.join(d, "x"))
            want = "bfloat16" if dtype == "bf16" else "float16"
            tally(f"moe-run {tag}: float32 logits refused",
                        r.returncode != 0 and f"the entry reads {want} in place" in r.stderr
                        and "got float32" in r.stderr, r.stderr)


def check_flag_errors(build, work, tally):
    flags = ["--experts", "60", "--top-k", "4"]
    cases = [("logit=bf16", "--input-dtype logit=bf16: @lynx has no input 'logit' (its inputs: "
              "logits, phase)"),
             ("phase=bf16", "--input-dtype phase=bf16: input 'phase' of @lynx is scalar int32"),
             ("logits=fp8", "--input-dtype logits=fp8: expected NAME=bf16, NAME=f16 or NAME=f32"),
             ("logits", "--input-dtype logits: expected NAME=bf16"),
             ]
    for tool in ("moe-run", "moe-compile"):
        for value, needle in cases:
            cmd = ([os.path.join(build, "bin", tool), os.path.join(POLICIES, "lynx.mlir")]
                   + flags + [f"--input-dtype={value}"])
            cmd += ["--out", os.path.join(work, "e")] if tool == "moe-run" else \
                   ["-o", os.path.join(work, "e")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            tally(f"{tool} --input-dtype={value}: error", r.returncode == 1
                        and needle in r.stderr, repr(r.stderr))
    # moe-compile records the dtype: manifest, header.
    out = os.path.join(work, "compiled")
    cmd = [os.path.join(build, "bin", "moe-compile"), os.path.join(POLICIES, "deepseek_v3.mlir"),
           "--experts", "64", "--top-k", "6", "--groups", "8", "--topk-groups", "4",
           "--input-dtype", "logits=bf16", "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        tally("moe-compile --input-dtype logits=bf16", False, r.stderr)
        return
    entry = json.load(open(os.path.join(out, "manifest.json")))["entries"][0]
    dtypes = {p["name"]: p["dtype"] for p in entry["signature"]["params"] if p["role"] == "in"}
    tally("manifest.json: logits bfloat16, bias float32",
                dtypes == {"logits": "bfloat16", "bias": "float32"}, str(dtypes))
    header = open(os.path.join(out, "deepseek_v3.h")).read()
    tally("header: const uint16_t *logits", "const uint16_t *logits" in header
                and "const float *bias" in header)


def check_python(build, tally, rng):
    sys.path.insert(0, os.path.join(ROOT, "test", "support"))
    from policy_shapes import import_switchyard
    sy = import_switchyard(build)
    try:
        import torch
    except ImportError:
        print("torch is not installed: the Python checks use NumPy float16 only")
        torch = None
    for policy, _, extra, shape in CASES:
        experts = shape["experts"]
        x = logits_for(41, experts, rng)
        more = {}
        if "bias" in extra:
            more["bias"] = (0.01 * rng.standard_normal(experts)).astype(np.float32)
        if "phase" in extra:
            more["phase"] = extra["phase"]
        tag = f"{policy}{' phase=' + str(extra['phase']) if 'phase' in extra else ''}"
        wide_router = sy.compile(policy, **shape)
        for name, spelled in (("bfloat16", "bfloat16"), ("float16", "f16")):
            router = sy.compile(policy, input_dtypes={"logits": spelled}, **shape)
            dtypes = {p.name: p.dtype.name for p in router.params if not p.is_output}
            tally(f"python {tag} {name}: signature", dtypes["logits"] == name
                        and dtypes.get("bias", "float32") == "float32", str(dtypes))
            if name == "float16":  # NumPy has float16
                half = x.astype(np.float16)
                got = router(logits=half, **more)
                want = wide_router(logits=half.astype(np.float32), **more)
                tally(f"python {tag} float16 numpy", not same_outputs(want, got),
                            str(same_outputs(want, got)))
            if torch is None:
                continue
            tdtype = torch.bfloat16 if name == "bfloat16" else torch.float16
            t = torch.from_numpy(x).to(tdtype)
            tmore = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v)
                     for k, v in more.items()}
            got = router(logits=t, **tmore)
            want = wide_router(logits=t.float(), **tmore)
            bad = same_outputs({k: v.numpy() for k, v in want.items()},
                               {k: v.numpy() for k, v in got.items()})
            tally(f"python {tag} torch {name}: equals float32 on the widened values",
                        not bad, str(bad))
            # A float32 tensor for the narrow entry: an InputError naming the argument.
            try:
                router(logits=t.float(), **tmore)
                tally(f"python {tag} torch {name}: float32 refused", False, "no error")
            except sy.InputError as e:
                tally(f"python {tag} torch {name}: float32 refused",
                            f"reads {name} in place" in str(e), str(e))
    # The dtype is part of the cache key: a different compile, same policy and shape.
    a = sy.compile("topk_softmax", experts=128, top_k=8)
    b = sy.compile("topk_softmax", experts=128, top_k=8, input_dtypes={"logits": "bf16"})
    tally("python: input_dtypes compiles apart", a.signature != b.signature)
    try:
        sy.compile("topk_softmax", experts=128, top_k=8, input_dtypes={"logits": "int8"})
        tally("python: input_dtypes int8 refused", False, "no error")
    except sy.SwitchyardError as e:
        tally("python: input_dtypes int8 refused", "int8" in str(e), str(e))
    try:
        sy.compile("topk_softmax", experts=128, top_k=8, input_dtypes={"scores": "bf16"})
        tally("python: unknown input refused", False, "no error")
    except sy.CompileError as e:
        tally("python: unknown input refused",
                    "--input-dtype scores=bf16: @topk_softmax has no input 'scores'" in str(e),
                    str(e))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    os.environ["SWITCHYARD_CACHE_DIR"] = tempfile.mkdtemp(prefix="input-dtype-cache-")
    work = tempfile.mkdtemp(prefix="input-dtype-")
    rng = np.random.default_rng(7)
    tally = Checks()
    check_moe_run(build, work, tally, rng)
    check_flag_errors(build, work, tally)
    check_python(build, tally, rng)
    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
