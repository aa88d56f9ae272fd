#!/usr/bin/python3
"""A mutation fuzzer for Switchyard's front end (moe-opt, moe-run, moe-compile).

    test/fuzz/fuzz.py --bin BUILD/bin --minutes 30 --seed 1 --out /tmp/fuzz

Seeds are the shipped policies (policies/*.mlir), the examples, every test .mlir file
(split at `// -----`), and .npy inputs generated for every entry that `moe-run --list`
describes. Each iteration picks a campaign and mutates one thing:

  opt      a mutated .mlir through moe-opt (verify + print, or a pass pipeline the tools
           use: --moe-host-pipeline, --moe-form-stages, --canonicalize, ...);
  run-mlir a mutated .mlir through moe-run (--list, then a run on generated inputs);
  run-npy  a shipped entry run on inputs where one .npy file (values, dtype, shape,
           header or bytes) or one scalar argument is corrupted;
  run-knob a shipped entry run with mutated `--set knob=value` overrides;
  compile  a mutated .mlir through moe-compile --target=cuda (no nvcc involved);
  shape    a shipped policy bound by mutated shape flags (--experts, --top-k, ...,
           --model with a corrupted config.json) through moe-run, moe-compile and
           moe-opt, or by a mutated --moe-specialize= option string.

The shipped policies are generic: every run on a file derived from one passes the flags
binding it to its documented model (native_shape of test/support/policy_shapes.py).

Mutations: byte flips / inserts / deletes / truncation; token-level edits (numbers
replaced by 0, -1, 2^31, 2^60, 2^63-1, floats, inf, nan, strings; attributes deleted,
duplicated, renamed; unknown attributes added; types changed; ops renamed, lines
deleted, duplicated, swapped or spliced from another seed; ops of other dialects
inserted); .npy header / shape / dtype / data corruption (NaN, +-inf, huge ids,
truncation, trailing bytes); generic syntax (`?` <-> sizes, `k = ?`, `gpus = ?`,
`scaled_by(...)`, `moe.param`).

Findings: a sanitizer report (ASan, UBSan), a signal or abort, an LLVM stack dump, an
exit status other than 0 and 1, a timeout, or exit 0 with suspicious output (a non-text
input accepted, result files that break an invariant or differ from the numpy
reference of a shipped router). Findings are deduplicated by kind and top stack frame;
the first input of each is minimized (line and chunk deletion while the finding
reproduces) and saved under OUT/findings/<id>/ with cmd.json (the command, `{dir}` is
the reproducer's directory, `{out}` a scratch output directory). test/fuzz/replay.py
replays such directories. Only Python 3 and numpy are needed; one tool process runs at
a time. CI (fuzz/replay-corpus) replays test/fuzz/corpus through the normal build: a
sanitized build of the MLIR tools is too slow for CI, so the sanitizers only run here.
The runtime's inputs have their own fuzzer, fuzz_runtime.py (see README.md).
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from functools import reduce

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
import policy_shapes  # noqa: E402  (native_shape, shape_flags, SHAPE_PARAMS)

INTS = ["0", "-1", "1", "2", "3", "7", "63", "64", "255", "256", "65535", "65536",
        "1048576", "2147483647", "2147483648", "-2147483648", "-2147483649",
        "4294967295", "4294967296", str(2 ** 40), str(2 ** 60), str(2 ** 62),
        str(2 ** 63 - 1), str(-2 ** 63), str(2 ** 63), str(2 ** 64), "9" * 30]
FLOATS = ["0.0", "-0.0", "0.5", "1.5", "-1.0", "1e-45", "1e-30", "1e30", "3.4e38",
          "3.5e38", "1e39", "1.0e+309", "inf", "-inf", "nan", "0x7F800000", "0xFF800000",
          "0x7FC00000", "0x00000001", "0x7F7FFFFF"]
STRINGS = ['"x"', '""', '"capacity"', "unit", "true", "false", "[1, 2]", "[]", "{}",
           "dense<1> : tensor<2xi32>", "@sym", "array<i64: 1, 2>", "f32", "i32", "none",
           "#moe<phase decode>", "5 : i32", "5 : i8", "5 : index", "1.0 : f64",
           "1.0 : f16", '"\\00"', "unit : i64", "[decode, decode]", "[]"]
UNKNOWN_ATTRS = ["capacity = 5", "foo", "moe.extra = 1", 'bar = "x"', "k = 2",
                 "experts = 8", "sym_visibility = \"private\"", "llvm.emit_c_interface",
                 "moe.abi = 1", "moe.kind = 3", "top_k = 1", "shared_experts = -1",
                 "arg_names = [\"a\"]", "function_type = i32", "groups = 0",
                 "k = ?", "gpus = ?", "experts = ?", "groups = ?", "keep = ?", "nodes = ?"]
TYPES = ["f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "index", "none",
         "tensor<?xf32>", "tensor<4x4xf32>", "tensor<*xf32>", "tensor<?x?xf32>",
         "tensor<0x8xf32>", "tensor<?x0xf32>", "!moe.set<8>", "!moe.set<0>",
         "!moe.set<2147483648>", "memref<?xf32>", "vector<4xf32>", "complex<f32>",
         "tensor<?x1099511627776xf32>", "tensor<4611686018427387904xi32>",
         "!moe.placement<experts = 8, devices = 2, slots = 8>",
         "!moe.placement<experts = 8, devices = 1, slots = 9223372036854775807>",
         "!moe.set<?>", "tensor<?x?xi32>", "tensor<?x8xf32>", "tensor<8x?xf32>",
         "!moe.placement<experts = ?, devices = ?, slots = ?>",
         "!moe.placement<experts = ?, devices = 2, slots = ?>",
         "!moe.placement<experts = 8, devices = ?, slots = ?>"]
GENERIC_KEYS = ["k", "gpus", "groups", "keep", "nodes", "experts", "devices", "slots"]
PARAM_NAMES = ["top_k", "experts", "groups", "topk_groups", "devices", "slots", "nodes",
               "hidden_size", "shared_experts", "scaling", "norm_topk_prob", "nosuch", "",
               "top-k", "TOP_K"]

# Shape flags (the tools' --experts ... --model, --moe-specialize's options).
SHAPE_INTS = ["0", "-1", "1", "2", "3", "4", "7", "8", "9", "16", "60", "64", "65", "128",
              "256", "257", "288", "7168", "1048576", "1048577", "2147483647", "2147483648",
              str(2 ** 32), str(2 ** 60), str(2 ** 63 - 1), str(-2 ** 63), str(2 ** 63),
              "9" * 30, "", "x", "1.5", "0x10", "1e3", " 8", "+8", "-0"]
SIZES = ["1", "2", "3", "4", "6", "8", "16", "32", "64", "128", "256"]
SHAPE_FLOATS = ["0", "-0", "-1", "1", "2.5", "1e-45", "3.4e38", "1e39", "1e308", "inf",
                "-inf", "nan", "x", ""]
SHAPE_BOOLS = ["true", "false", "1", "0", "yes", "maybe", ""]
MODEL_KEYS = ["num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
              "experts_per_token", "n_group", "topk_group", "n_shared_experts",
              "hidden_size", "routed_scaling_factor", "norm_topk_prob"]
JSON_VALUES = ["8", 8.5, 8.0, True, False, None, [], {}, [8], -1, 0, 1, 2 ** 31, 2 ** 60,
               2 ** 63 - 1, 2 ** 63, 2 ** 64, -2 ** 63, 1e300, -1e300, float("nan"),
               float("inf"), "nan", ""]
PUNCT = list("{}()<>[]:,=%@!#\"?x-") + ["->", "\x00", "\xff", "\n", " ", "//", "\\"]


def other_dialect_snippets(arg, type_):
    snippets = [
        "%fz_c0 = arith.constant 0 : index\n  %fz_d = tensor.dim ARG, %fz_c0 : TYPE",
        "%fz_e = tensor.empty() : tensor<4xf32>",
        "%fz_r = tensor.rank ARG : TYPE",
        "%fz_c = arith.constant 1 : i64\n  %fz_s = arith.addi %fz_c, %fz_c : i64",
        "%fz_c0 = arith.constant 0 : index\n  %fz_c1 = arith.constant 1 : index\n"
        "  scf.for %fz_i = %fz_c0 to %fz_c1 step %fz_c1 {\n  }",
        "func.call @nowhere() : () -> ()",
        "%fz_m = memref.alloc() : memref<4xf32>",
        "%fz_x = math.exp ARG : TYPE",
        "%fz_z = arith.constant 0 : i32\n  %fz_q = arith.divsi %fz_z, %fz_z : i32",
        "%fz_k = moe.knob \"fz\" = 3 : i64",
        "%fz_k = moe.knob \"fz\" = 1.0e39 : f32",
        "%fz_k = moe.knob \"fz\" = 9223372036854775807 : i64",
        "%fz_k = moe.knob \"fz\" = \"str\" : i64",
        "%fz_e = moe.empty_set : !moe.set<8>",
        "cf.br ^bb1\n ^bb1:",
        "%fz_u = ub.poison : i64",
        "llvm.unreachable",
        "%fz_g = gpu.thread_id x",
        "%fz_p = moe.param \"top_k\" : i64",
        "%fz_p = moe.param \"experts\" : i32",
        "%fz_p = moe.param \"nosuch\" : i64",
        "%fz_p = moe.param \"scaling\" : f32",
    ]
    return [s.replace("ARG", arg).replace("TYPE", type_) for s in snippets]


# ---------------------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------------------

def load_seeds():
    seeds, shipped = [], []
    for d in ("policies", "examples"):
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if f.endswith(".mlir"):
                path = os.path.join(ROOT, d, f)
                text = open(path, "rb").read()
                seeds.append(text)
                shipped.append(path)
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, "test")):
        dirnames[:] = [d for d in dirnames if d not in ("fuzz",)]
        for f in sorted(files):
            if f.endswith(".mlir"):
                text = open(os.path.join(dirpath, f), "rb").read()
                for chunk in re.split(rb"\n// -----\n", text):
                    if chunk.strip():
                        seeds.append(chunk)
    return seeds, shipped


# ---------------------------------------------------------------------------------------
# Mutations of .mlir text
# ---------------------------------------------------------------------------------------

NUM_RE = re.compile(rb"-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b|0x[0-9A-Fa-f]+")
ATTR_GROUP_RE = re.compile(rb"\{([^{}\n]*=[^{}\n]*)\}")
TYPE_RE = re.compile(rb"tensor<[^>]*>|!moe\.\w+<[^>]*>"
                     rb"|\b(?:f16|bf16|f32|f64|i1|i8|i32|i64|index)\b")
OPNAME_RE = re.compile(rb"\b(?:moe|arith|tensor|func|scf|math)\.[a-z_]+\b")
SSA_RE = re.compile(rb"%[A-Za-z_][\w$.]*|%\d+")
KEYWORD_RE = re.compile(rb"\b[a-z_]+\b")



def llvm_symbolizer(bin_dir):
    """The llvm-symbolizer of the LLVM the build used (LLVM_DIR in the CMakeCache.txt
    next to `bin_dir`), else the one on PATH, else None."""
    cache = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "CMakeCache.txt")
    if os.path.isfile(cache):
        with open(cache) as f:
            for line in f:
                if line.startswith("LLVM_DIR:"):
                    prefix = line.split("=", 1)[1].strip()   # <prefix>/lib/cmake/llvm
                    tool = os.path.join(prefix, "..", "..", "..", "bin", "llvm-symbolizer")
                    if os.path.isfile(tool):
                        return os.path.normpath(tool)
    return shutil.which("llvm-symbolizer")

class MlirMutator:
    def __init__(self, rng, seeds):
        self.rng = rng
        self.seeds = seeds
        self.opnames = sorted({m for s in seeds for m in OPNAME_RE.findall(s)})
        self.keywords = sorted({m for s in seeds[:40] for m in KEYWORD_RE.findall(s)})
        self.lines = [l for s in seeds for l in s.split(b"\n")
                      if l.strip() and not l.lstrip().startswith(b"//")]

    def mutate(self, text):
        rng = self.rng
        n = 1 + (rng.random() < 0.35) + (rng.random() < 0.15)
        for _ in range(n):
            op = rng.choice([self.number, self.number, self.number, self.attr, self.attr,
                             self.attr, self.type_, self.type_, self.opname, self.ssa,
                             self.line, self.line, self.splice, self.snippet,
                             self.snippet, self.byte, self.byte, self.keyword,
                             self.punct, self.generic, self.generic, self.generic])
            out = op(text)
            if out is not None:
                text = out
        return text

    def _replace_span(self, text, span, new):
        return text[:span[0]] + new + text[span[1]:]

    def _pick(self, regex, text):
        ms = list(regex.finditer(text))
        return self.rng.choice(ms) if ms else None

    def number(self, text):
        m = self._pick(NUM_RE, text)
        if not m:
            return None
        r = self.rng.random()
        if r < 0.08:
            return self._replace_span(text, m.span(), b"?")
        pool = INTS if r < 0.6 else FLOATS if r < 0.8 else STRINGS
        return self._replace_span(text, m.span(), self.rng.choice(pool).encode())

    def attr(self, text):
        m = self._pick(ATTR_GROUP_RE, text)
        rng = self.rng
        if not m or rng.random() < 0.15:
            # Add an attribute dictionary to a moe op line.
            lines = text.split(b"\n")
            idx = [i for i, l in enumerate(lines) if b"moe." in l and b"=" in l
                   and not l.lstrip().startswith(b"//")]
            if not idx:
                return None
            i = rng.choice(idx)
            lines[i] = lines[i].rstrip() + b" {" + rng.choice(UNKNOWN_ATTRS).encode() + b"}"
            return b"\n".join(lines)
        body = m.group(1)
        entries = [e for e in re.split(rb",(?![^\[]*\])", body)]
        choice = rng.randrange(5)
        if choice == 0 and entries:                      # delete
            del entries[rng.randrange(len(entries))]
        elif choice == 1 and entries:                    # duplicate
            entries.append(rng.choice(entries))
        elif choice == 2 and entries:                    # rename
            i = rng.randrange(len(entries))
            if b"=" in entries[i]:
                key, val = entries[i].split(b"=", 1)
                new = rng.choice(["capacity", "k", "experts", "top_k", "moe.x", "groups",
                                  "Experts", "experts_", "shared_experts", "global"])
                entries[i] = b" " + new.encode() + b" =" + val
        elif choice == 3:                                # unknown attribute
            entries.insert(rng.randrange(len(entries) + 1),
                           b" " + rng.choice(UNKNOWN_ATTRS).encode())
        elif entries:                                    # value
            i = rng.randrange(len(entries))
            if b"=" in entries[i]:
                key, _ = entries[i].split(b"=", 1)
                pool = INTS if rng.random() < 0.5 else FLOATS + STRINGS
                entries[i] = key + b"= " + rng.choice(pool).encode()
        start, end = m.span(1)
        return text[:start] + b",".join(entries) + text[end:]

    def type_(self, text):
        m = self._pick(TYPE_RE, text)
        if not m:
            return None
        new = self.rng.choice(TYPES).encode()
        if self.rng.random() < 0.5:
            # Change every occurrence (keeps the file consistent, deeper coverage).
            return text.replace(m.group(0), new)
        return self._replace_span(text, m.span(), new)

    def opname(self, text):
        m = self._pick(OPNAME_RE, text)
        if not m or not self.opnames:
            return None
        return self._replace_span(text, m.span(), self.rng.choice(self.opnames))

    def ssa(self, text):
        ms = list(SSA_RE.finditer(text))
        if len(ms) < 2:
            return None
        a, b = self.rng.choice(ms), self.rng.choice(ms)
        return self._replace_span(text, a.span(), b.group(0))

    def keyword(self, text):
        m = self._pick(KEYWORD_RE, text)
        if not m:
            return None
        return self._replace_span(text, m.span(), self.rng.choice(self.keywords))

    def line(self, text):
        lines = text.split(b"\n")
        if len(lines) < 2:
            return None
        rng = self.rng
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        c = rng.randrange(3)
        if c == 0:
            del lines[i]
        elif c == 1:
            lines.insert(j, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)

    def splice(self, text):
        lines = text.split(b"\n")
        lines.insert(self.rng.randrange(len(lines) + 1), self.rng.choice(self.lines))
        return b"\n".join(lines)

    def snippet(self, text):
        m = re.search(rb"moe\.(?:router|residency|balance|prefetch) @\w+\((%\w+): "
                      rb"(tensor<[^>]*>|[^,)]+)", text)
        arg, ty = (m.group(1).decode(), m.group(2).decode()) if m else ("%x", "tensor<?x8xf32>")
        snippet = self.rng.choice(other_dialect_snippets(arg, ty)).encode()
        lines = text.split(b"\n")
        idx = [i for i, l in enumerate(lines) if re.match(rb"\s+%\w+(, %\w+)* = moe\.", l)]
        if not idx:
            return None
        i = self.rng.choice(idx)
        lines.insert(i, b"  " + snippet)
        return b"\n".join(lines)

    def byte(self, text):
        rng = self.rng
        data = bytearray(text)
        c = rng.randrange(5)
        if not data:
            return bytes(rng.choice(PUNCT).encode("latin-1"))
        i = rng.randrange(len(data))
        if c == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif c == 1:
            data[i:i] = rng.choice(PUNCT).encode("latin-1")
        elif c == 2:
            del data[i:i + rng.randrange(1, 16)]
        elif c == 3:
            data = data[:i]
        else:
            j = rng.randrange(len(data))
            data[j:j] = data[i:i + rng.randrange(1, 64)]
        return bytes(data)

    def generic(self, text):
        """Generic syntax: `?` <-> sizes, `KEY = ?`, scaled_by(...), moe.param."""
        rng = self.rng
        c = rng.randrange(6)
        if c == 0:                                       # a `?` becomes a size
            ms = list(re.finditer(rb"\?", text))
            if not ms:
                return None
            m = rng.choice(ms)
            return self._replace_span(text, m.span(), rng.choice(INTS[:12] + ["?"]).encode())
        if c == 1:                                       # KEY = N / ? swapped, dropped, doubled
            ms = list(re.finditer(rb"\b(%s) = (\?|-?\d+)" % "|".join(GENERIC_KEYS).encode(),
                                  text))
            if not ms:
                return None
            m = rng.choice(ms)
            d = rng.randrange(4)
            new = (b"" if d == 0 else m.group(0) + b" " + m.group(0) if d == 1 else
                   m.group(1) + b" = " + (b"?" if m.group(2) != b"?" else
                                          rng.choice(INTS).encode()) if d == 2 else
                   rng.choice(GENERIC_KEYS).encode() + b" = " + m.group(2))
            return self._replace_span(text, m.span(), new)
        if c == 2:                                       # scaled_by: drop, retype, rebind
            ms = list(re.finditer(rb"scaled_by\((%[\w]+) : (\w+)\)", text))
            if not ms:
                return None
            m = rng.choice(ms)
            ssa = [x.group(0) for x in SSA_RE.finditer(text)] or [b"%x"]
            d = rng.randrange(3)
            new = (b"" if d == 0 else
                   b"scaled_by(" + m.group(1) + b" : " + rng.choice(TYPES[:9]).encode() + b")"
                   if d == 1 else b"scaled_by(" + rng.choice(ssa) + b" : f32)")
            return self._replace_span(text, m.span(), new)
        if c == 3:                                       # scaled_by added to a route / topk
            ms = list(re.finditer(rb"k = (?:\?|\d+)", text))
            if not ms:
                return None
            m = rng.choice(ms)
            ssa = [x.group(0) for x in SSA_RE.finditer(text)] or [b"%x"]
            return self._replace_span(text, (m.end(), m.end()), b" scaled_by(" +
                                      rng.choice(ssa) + b" : f32)")
        if c == 4:                                       # moe.param renamed / retyped
            ms = list(re.finditer(rb"moe\.param \"([^\"]*)\" : (\w+)", text))
            if not ms:
                return None
            m = rng.choice(ms)
            new = b'moe.param "%s" : %s' % (
                rng.choice(PARAM_NAMES).encode() if rng.random() < 0.7 else m.group(1),
                rng.choice(TYPES[:9]).encode() if rng.random() < 0.5 else m.group(2))
            return self._replace_span(text, m.span(), new)
        # a moe.param line inserted before a moe op
        lines = text.split(b"\n")
        idx = [i for i, l in enumerate(lines) if re.match(rb"\s+%\w+(, %\w+)* = moe\.", l)]
        if not idx:
            return None
        lines.insert(rng.choice(idx), b'  %%fz_p%d = moe.param "%s" : %s' % (
            rng.randrange(3), rng.choice(PARAM_NAMES).encode(),
            rng.choice(["i64", "i64", "i32", "f32", "i1", "index"]).encode()))
        return b"\n".join(lines)

    def punct(self, text):
        if not text:
            return None
        i = self.rng.randrange(len(text))
        return text[:i] + self.rng.choice(PUNCT).encode("latin-1") + text[i + 1:]


# ---------------------------------------------------------------------------------------
# Inputs for an entry (from `moe-run --list`), and their corruption
# ---------------------------------------------------------------------------------------

def placement_table(E, R, rng):
    slots = E + R - 1
    table = np.full((E, R), -1, np.int32)
    perm = rng.permutation(slots)
    table[:, 0] = perm[:E]
    spare = list(perm[E:])
    for e in rng.permutation(E):
        if not spare:
            break
        table[e, 1] = spare.pop()
    return table


def make_inputs(entry, rng, tokens):
    """name -> np.ndarray (or int for a scalar) for every argument of the entry."""
    E = entry["experts"]
    inputs = {}
    for a in entry["arguments"]:
        name, kind, dtype = a["name"], a["kind"], a["dtype"]
        shape = [tokens if d == "?" else d for d in a["shape"]]
        if kind == "scalar":
            inputs[name] = int(rng.integers(0, 3)) if name == "phase" else int(rng.integers(0, 8))
        elif kind == "placement":
            inputs[name] = placement_table(shape[0], shape[1], rng)
        elif kind == "set" or dtype == "bool":
            inputs[name] = rng.random(shape) < 0.5
        elif dtype == "float32":
            if name in ("logits", "hidden"):
                inputs[name] = (rng.standard_normal(shape) * 3).astype(np.float32)
            else:
                inputs[name] = rng.random(shape).astype(np.float32)
        elif dtype == "int32":
            if "ids" in name and name != "request_ids":
                v = rng.integers(-1, E, size=shape)
            elif name == "request_ids":
                v = np.sort(rng.integers(0, max(1, tokens // 2 + 1), size=shape))
            elif name == "token_gpu":
                v = rng.integers(0, 8, size=shape)
            elif name == "events":
                v = rng.integers(0, 3, size=shape)
            elif name == "last_use":
                v = rng.integers(-1, 10, size=shape)
            elif name == "now":
                v = np.full(shape, 10)
            else:
                v = rng.integers(0, 5, size=shape)
            inputs[name] = v.astype(np.int32)
        else:
            inputs[name] = np.zeros(shape, np.float32)
    return inputs


def npy_bytes(arr):
    import io
    f = io.BytesIO()
    np.save(f, arr, allow_pickle=False)
    return f.getvalue()


def header_dict(shape, descr="<f4", fortran="False"):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    return raw_npy(d.encode())


def raw_npy(header, data=b"", version=1):
    header = header + b" " * ((64 - (len(header) + 11) % 64) % 64) + b"\n"
    if version == 1:
        pre = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
    else:
        pre = b"\x93NUMPY" + bytes([version, 0]) + len(header).to_bytes(4, "little")
    return pre + header + data


def corrupt_array(arr, rng, entry, name):
    """A corrupted value of one argument: bytes of a file (or a str for a scalar)."""
    E = entry["experts"]
    if isinstance(arr, int):
        return rng.choice(INTS + ["abc", "1.5", "", " 1", "0x1", "3", "-1", "2", "4",
                                  "+1", "1e3"])
    c = rng.randrange(14)
    a = np.array(arr, copy=True)
    if c == 0 and a.dtype == np.float32 and a.size:
        flat = a.reshape(-1)
        for _ in range(rng.randrange(1, 4)):
            flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf, 3.4e38,
                                                         -3.4e38, 1e-45])
        return npy_bytes(a)
    if c == 1 and a.dtype == np.int32 and a.size:
        flat = a.reshape(-1)
        for _ in range(rng.randrange(1, 4)):
            flat[rng.randrange(flat.size)] = rng.choice([E, E + 1, -2, -1, 2 ** 31 - 1,
                                                         -2 ** 31, 2 ** 30, 1000000, 8, 9])
        return npy_bytes(a)
    if c == 2:                                            # dtype change
        t = rng.choice([np.float64, np.float16, np.int64, np.int8, np.uint8, np.bool_,
                        np.complex64, np.int16, np.uint32])
        with np.errstate(all="ignore"):
            b = a.astype(t)
        if t == np.int64 and b.size and rng.random() < 0.5:
            b.reshape(-1)[0] = rng.choice([2 ** 40, -2 ** 40, 2 ** 63 - 1])
        return npy_bytes(b)
    if c == 3:                                            # shape change
        choice = rng.randrange(6)
        if choice == 0:
            b = a.reshape(-1)
        elif choice == 1:
            b = a.reshape((1,) + a.shape)
        elif choice == 2 and a.ndim >= 1:
            b = a[: max(0, a.shape[0] - 1)]
        elif choice == 3:
            b = a.T.copy()
        elif choice == 4 and a.ndim >= 1:
            b = np.concatenate([a, a], axis=0) if a.shape[0] else a
        else:
            b = np.zeros((0,) + a.shape[1:], a.dtype)
        return npy_bytes(np.ascontiguousarray(b))
    data = npy_bytes(a)
    hl = int.from_bytes(data[8:10], "little")
    if c == 4:                                            # truncation / trailing bytes
        if rng.random() < 0.5:
            return data[:rng.randrange(len(data) + 1)]
        return data + bytes(rng.randrange(1, 64))
    if c == 5:                                            # header byte flips
        d = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(min(len(d), 10 + hl))
            d[i] = rng.randrange(256)
        return bytes(d)
    if c == 6:                                            # header length field
        d = bytearray(data)
        d[8:10] = rng.choice([0, 1, 0xFFFF, hl + 1, hl - 1, 11]).to_bytes(2, "little")
        return bytes(d)
    if c == 7:                                            # version
        d = bytearray(data)
        d[6] = rng.choice([0, 2, 3, 4, 255])
        d[7] = rng.choice([0, 0, 1])
        return bytes(d)
    if c == 8:                                            # shape text
        shape = rng.choice(["(-1, %d)" % E, "(4611686018427387904, %d)" % E,
                            "(%d, 4611686018427387904)" % 2, "(1099511627776,)",
                            "(9223372036854775807,)", "(99999999999999999999,)",
                            "(2, 3, 4, 5)", "()", "(0,)", "(3)", "(2,,)", "(1L, %d)" % E,
                            "(%d, %d)" % (2 ** 31, E), "(1e3,)", "('a',)"])
        descr = "<f4" if a.dtype == np.float32 else "<i4" if a.dtype == np.int32 else "|b1"
        body = a.tobytes()
        return header_dict(shape, descr)[:] + body[:rng.randrange(len(body) + 1)]
    if c == 9:                                            # descr text
        descr = rng.choice([">f4", "<f8", "|O", "<U4", "V2", "bfloat16", "<bfloat16", "",
                            "<i4", "<f2", "|b1", "<c8", "f4", "=f4", "!i4", "<m8", "<M8",
                            "|V0"])
        shape = str(tuple(a.shape)) if a.ndim != 1 else "(%d,)" % a.shape[0]
        return header_dict(shape, descr) + a.tobytes()
    if c == 10:                                           # fortran / structured header
        return raw_npy(rng.choice([
            b"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
            b"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
            b"{'descr': '<f4', 'fortran_order': 1, 'shape': (2, 3), }",
            b"{'descr': '<f4', 'shape': (2, 3), }",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}",
            b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            b"{}", b"", b"{", b"\x00" * 40, b"{'descr': '<f4\\x00', 'shape': ()}",
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + b"\xff" * 8,
        ]) + a.tobytes()[:64], version=rng.choice([1, 1, 2, 3]))
    if c == 11:                                           # not an .npy at all
        return rng.choice([b"", b"\x00" * 128, b"\x93NUMPY", b"\x93NUMPY\x01",
                           b"\x93NUMPY\x01\x00", b"not an array\n", os.urandom(64)])
    if c == 12 and a.size:                                # all one value
        v = rng.choice([np.nan, np.inf, -np.inf, 0, -1, E, 2 ** 31 - 1])
        with np.errstate(all="ignore"):
            b = np.full(a.shape, v).astype(a.dtype)
        return npy_bytes(b)
    # Raw byte flips in the data region.
    d = bytearray(data)
    if len(d) > 10 + hl:
        for _ in range(rng.randrange(1, 8)):
            i = rng.randrange(10 + hl, len(d))
            d[i] = rng.randrange(256)
    return bytes(d)


# ---------------------------------------------------------------------------------------
# Shape flags: a shipped policy's binding, its mutations, corrupted config.json files
# ---------------------------------------------------------------------------------------

def policy_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def native_shape(path):
    """The shape binding of a shipped policy ({} for a file outside policies/)."""
    if os.path.dirname(os.path.abspath(path)) != os.path.join(ROOT, "policies"):
        return {}
    return policy_shapes.native_shape(policy_name(path))


def native_flags(path):
    return policy_shapes.shape_flags(**native_shape(path))


MODELS = sorted(os.path.join(ROOT, "models", f) for f in os.listdir(os.path.join(ROOT, "models"))
                if f.endswith(".json"))
# Flags (of moe-run / moe-compile / moe-opt) the minimizer may drop, and whether their
# value is the next argument.
DROPPABLE = {"--" + p.replace("_", "-"): p != "norm_topk_prob"
             for p in policy_shapes.SHAPE_PARAMS}
DROPPABLE.update({"--set": True, "--freeze-knobs": False, "--lane-parallel": False})


def corrupt_model(rng):
    """The bytes of a corrupted copy of a models/*.json."""
    text = open(rng.choice(MODELS), "rb").read()
    d = json.loads(text)
    c = rng.randrange(9)
    if c <= 2:                                            # wrong type / huge / NaN values
        for _ in range(rng.randrange(1, 4)):
            d[rng.choice(MODEL_KEYS)] = rng.choice(JSON_VALUES)
    elif c == 3:                                          # missing keys
        for k in rng.sample(MODEL_KEYS, rng.randrange(1, len(MODEL_KEYS))):
            d.pop(k, None)
    elif c == 4:                                          # aliases that disagree
        d[rng.choice(MODEL_KEYS[:3])] = rng.choice([1, 2, 8, 64, 128, 256, 2 ** 20 + 1])
        d[rng.choice(MODEL_KEYS[3:5])] = rng.choice([0, 1, 2, 8, 9, 300])
    elif c == 5:                                          # not one object
        return rng.choice([b"", b"[]", b"null", b"1", b'"x"', b"{", b"[{}]", b"{}",
                           b"\xef\xbb\xbf" + text, b"\x00", text + b"\n{}",
                           b'{"num_experts": 8, "num_experts": 9, "num_experts_per_tok": 2}',
                           b"[" * 100000 + b"]" * 100000,
                           b'{"a": ' * 50000 + b"1" + b"}" * 50000])
    elif c == 6:                                          # number literals JSON can't hold
        nums = list(re.finditer(rb"(?<=: )-?\d[\d.eE+-]*", text))
        if nums:
            m = rng.choice(nums)
            return text[:m.start()] + rng.choice(
                [b"1e400", b"-1e400", b"99999999999999999999999", b"9223372036854775808",
                 b"18446744073709551616", b"-0", b"8.0", b"8e0", b"0x8", b"NaN", b"Infinity",
                 b"08", b"1e-400", b"9.223372036854775807e18"]) + text[m.end():]
    elif c == 7:                                          # bytes
        data = bytearray(text)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data[:rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data)
    else:                                                 # the values of another model
        d.update({k: v for k, v in json.loads(open(rng.choice(MODELS)).read()).items()
                  if k in MODEL_KEYS and rng.random() < 0.5})
    return json.dumps(d).encode()


def mutate_shape(rng, shape, files):
    """Mutated shape flags (a list of (param, value text)) from a binding dict; a
    corrupted config.json lands in files['model.json']."""
    items = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in shape.items()]
    ints = [p for p in policy_shapes.SHAPE_PARAMS if p not in ("scaling", "norm_topk_prob",
                                                              "model")]
    for _ in range(rng.choice([1, 1, 2, 3])):
        c = rng.randrange(10)
        if c <= 2:                                        # an int parameter's value
            items.append((rng.choice(ints), rng.choice(rng.choice([SHAPE_INTS, SIZES]))))
        elif c == 3:
            items.append(("scaling", rng.choice(SHAPE_FLOATS)))
        elif c == 4:
            items.append(("norm_topk_prob", rng.choice(SHAPE_BOOLS)))
        elif c == 5 and items:                            # dropped
            del items[rng.randrange(len(items))]
        elif c == 6:                                      # another policy's binding
            other = policy_shapes.native_shape(rng.choice(sorted(policy_shapes.NATIVE_SHAPES)))
            items += [(k, str(v)) for k, v in other.items()]
        elif c == 7:                                      # --model: a corrupted copy
            files["model.json"] = corrupt_model(rng)
            items.append(("model", "{dir}/model.json"))
        elif c == 8:                                      # --model: another model, no file
            items.append(("model", rng.choice(MODELS + ["{dir}/nosuch.json", "{dir}", ""])))
        elif items:                                       # a value nudged
            i = rng.randrange(len(items))
            try:
                items[i] = (items[i][0], str(int(items[i][1]) + rng.choice([-1, 1, 2])))
            except ValueError:
                pass
    # Last one wins: a parameter given twice is a cl::opt error, kept now and then.
    if rng.random() < 0.85:
        items = list({k: v for k, v in items}.items())
    return items


def shape_args(rng, items):
    args = []
    for k, v in items:
        flag = "--" + k.replace("_", "-")
        if k == "norm_topk_prob" or rng.random() < 0.3:
            args.append("%s=%s" % (flag, v))
        else:
            args += [flag, v]
    return args


SPECIALIZE_KEYS = ["experts", "top_k", "groups", "topk_groups", "devices", "slots", "nodes",
                   "hidden_size", "shared_experts", "scaling", "norm_topk_prob"]


def specialize_option(rng, shape):
    """A mutated option string of --moe-specialize."""
    items = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in shape.items()
             if k != "model"]
    if "model" in shape:
        m = json.load(open(shape["model"]))
        items += [("experts", str(m.get("num_local_experts", m.get("num_experts",
                                                                   m.get("n_routed_experts"))))),
                  ("top_k", str(m.get("num_experts_per_tok", m.get("experts_per_token"))))]
    for _ in range(rng.randrange(0, 4)):
        c = rng.randrange(8)
        if c <= 2:
            k = rng.choice(SPECIALIZE_KEYS)
            pool = (SHAPE_FLOATS if k == "scaling" else SHAPE_BOOLS if k == "norm_topk_prob"
                    else SHAPE_INTS)
            items.append((k, rng.choice(pool)))
        elif c == 3 and items:
            del items[rng.randrange(len(items))]
        elif c == 4:
            items.append((rng.choice(["model", "Experts", "top-k", "k", "nosuch", "", "experts ",
                                      "values"]), rng.choice(SHAPE_INTS)))
        elif c == 5 and items:
            items.append(rng.choice(items))
        elif c == 6:
            items.append((rng.choice(SPECIALIZE_KEYS), None))   # key without '='
        else:
            rng.shuffle(items)
    sep = rng.choice([" ", " ", ",", "  ", " , ", "\t"])
    text = sep.join(k if v is None else "%s=%s" % (k, v) for k, v in items)
    if rng.random() < 0.1:
        text = rng.choice(["{%s}", "'%s'", '"%s"', "%s}", "{%s", "%s=", "%s\\"]) % text
    return text


# ---------------------------------------------------------------------------------------
# Running a tool and classifying the outcome
# ---------------------------------------------------------------------------------------

SKIP_FRAME = re.compile(
    r"^(__asan|__interceptor|___interceptor|__sanitizer|__ubsan|__lsan|_asan|"
    r"malloc|calloc|realloc|free|operator new|operator delete|__GI_|__libc|"
    r"memcpy|memmove|memset|strlen|abort|raise|gsignal|__pthread|pthread_kill|"
    r"std::__throw|__cxa|__gnu_cxx|std::terminate|__sigaction|"
    r"llvm::sys::|SignalHandler|llvm::report_fatal_error|llvm::llvm_unreachable|"
    r"\(anonymous namespace\)::SignalHandler|"
    r"__assert|_start|__libc_start|main$|syscall|start_thread|clone)")


def short_frame(fn):
    # Drop argument lists and template arguments to keep keys short and stable.
    fn = re.sub(r"\(.*", "", fn)
    prev = None
    while prev != fn:
        prev = fn
        fn = re.sub(r"<[^<>]*>", "", fn)
    return fn.strip()[:120]


FRAME_RES = [
    re.compile(r"#\d+ 0x[0-9a-f]+ in (.+?)(?: /| \(|$)"),          # sanitizer
    re.compile(r"#\d+ 0x[0-9a-f]+ (?:\S+)\((.+?)\+0x[0-9a-f]+\)"),   # llvm, unsymbolized
    re.compile(r"#\d+ 0x[0-9a-f]+ (.+?) (?:\S+:\d+|\(/)"),            # llvm, symbolized
]


def top_frame(text):
    """The first frame in Switchyard's own code, else the first frame outside the
    sanitizer runtime, libc and LLVM's signal handling."""
    for line in text.splitlines():
        m = FRAME_RES[0].search(line)
        if m and ("switchyard" in line or "/work/" in line or "/tools/moe-" in line):
            fn = short_frame(m.group(1).strip())
            if fn not in ("main", "") and not SKIP_FRAME.match(fn):
                return fn
    for line in text.splitlines():
        for fr in FRAME_RES:
            m = fr.search(line)
            if m:
                fn = m.group(1).strip()
                if fn.startswith("std::") and "vector" in fn:
                    continue
                if SKIP_FRAME.match(fn) or "libclang_rt" in line or "libc.so" in line \
                        or "sysdeps" in line:
                    continue
                return short_frame(fn)
    return "?"


class Result:
    def __init__(self, rc, stdout, stderr, seconds, timed_out):
        self.rc, self.stdout, self.stderr = rc, stdout, stderr
        self.seconds, self.timed_out = seconds, timed_out


def run_tool(cmd, timeout, env):
    start = time.time()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    except OSError as exc:
        return Result(-999, b"", str(exc).encode(), 0.0, False)
    try:
        out, err = p.communicate(timeout=timeout)
        return Result(p.returncode, out, err, time.time() - start, False)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = p.communicate()
        return Result(None, out, err, time.time() - start, True)


def classify(res, tool):
    """(kind, key, summary) for a finding, or None."""
    err = res.stderr.decode("utf-8", "replace")
    if res.timed_out:
        return ("timeout", "timeout:%s" % tool, "no exit within the time limit")
    m = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", err)
    if m:
        kind = m.group(1)
        if kind == "requested":  # "requested allocation size ... exceeds maximum"
            kind = "allocation-size-too-big"
        return ("asan-" + kind, "asan:%s:%s" % (kind, top_frame(err[m.start():])),
                err[m.start():m.start() + 300])
    m = re.search(r"ERROR: LeakSanitizer", err)
    if m:
        return ("lsan", "lsan:%s" % top_frame(err[m.start():]), err[m.start():m.start() + 300])
    m = re.search(r"(\S+:\d+:\d+): runtime error: ([^\n]*)", err)
    if m:
        what = re.sub(r"-?\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b|0x[0-9a-f]+|'[^']*'", "N",
                      m.group(2))[:60]
        loc = re.sub(r"^.*/(?=[^/]+/[^/]+$)", "", m.group(1))
        return ("ubsan", "ubsan:%s:%s" % (loc, what), m.group(0)[:300])
    if "Stack dump:" in err or "PLEASE submit a bug report" in err:
        return ("stack-dump", "crash:%s" % top_frame(err), err[-600:])
    if res.rc is not None and res.rc < 0:
        sig = -res.rc
        return ("signal-%d" % sig, "signal%d:%s:%s" % (sig, tool, top_frame(err)), err[-400:])
    if res.rc not in (0, 1):
        return ("exit-%s" % res.rc, "exit%s:%s:%s" % (res.rc, tool, top_frame(err)), err[-400:])
    return None


def non_text(data):
    if b"\x00" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# ---------------------------------------------------------------------------------------
# Output invariants and the numpy references of the shipped routers
# ---------------------------------------------------------------------------------------

def check_outputs(out_dir, entry, inputs, knobs, policy_name, shipped_text):
    """Problems with the results of an exit-0 moe-run, [] when none."""
    problems = []
    E = entry["experts"]
    results = {}
    for r in entry["results"]:
        path = os.path.join(out_dir, r["name"] + ".npy")
        if not os.path.exists(path):
            problems.append("missing result %s" % r["name"])
            continue
        try:
            results[r["name"]] = np.load(path, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001
            problems.append("unreadable result %s: %s" % (r["name"], exc))
    for name, v in results.items():
        if name.endswith("topk_ids") and v.size and (v.min() < -1 or v.max() >= E):
            problems.append("%s holds ids outside [-1, %d)" % (name, E))
        if name in ("expert_counts", "num_active", "num_tokens_post_padded", "num_expected",
                    "replica_count") and v.size and v.min() < 0:
            problems.append("%s holds negative counts" % name)
        if name in ("step_size", "initial_step", "step_trace") and v.size and v.min() < 1:
            problems.append("%s holds a step below 1" % name)
    if shipped_text is None or problems or policy_name not in REFERENCES:
        return problems
    floats = [v for v in inputs.values() if isinstance(v, np.ndarray) and v.dtype == np.float32]
    if any(not np.all(np.isfinite(v)) for v in floats):
        return problems
    try:
        ref = REFERENCES[policy_name](inputs, knobs, entry)
    except Exception:  # noqa: BLE001 - a reference that cannot take the input decides nothing
        return problems
    for name in ("topk_ids", "selected", "expert_counts"):
        if name in ref and name in results:
            exp = np.asarray(ref[name])
            got = results[name]
            if got.shape != exp.shape or not np.array_equal(got.astype(exp.dtype), exp):
                problems.append("%s differs from the numpy reference" % name)
    return problems


def _reference_module():
    sys.path.insert(0, os.path.join(ROOT, "test", "exec"))
    import reference as R  # noqa: E402
    return R


def _knob_values(knobs, entry):
    vals = {k["name"]: k["default"] for k in entry["knobs"]}
    for k, v in knobs.items():
        vals[k] = int(v) if isinstance(vals.get(k), int) else float(v)
    return vals


def _ref_topk_softmax(inputs, knobs, entry):
    R = _reference_module()
    return R.topk_softmax(inputs["logits"], entry["top_k"])


def _ref_xshare(inputs, knobs, entry):
    R = _reference_module()
    kv = _knob_values(knobs, entry)
    return R.xshare(inputs["logits"], entry["top_k"], k0=kv["k0"], budget=kv["budget"])


def _ref_xshare_spec(inputs, knobs, entry):
    R = _reference_module()
    kv = _knob_values(knobs, entry)
    return R.xshare_spec(inputs["logits"], inputs["request_ids"], entry["top_k"],
                         k0=kv["k0"], request_budget=kv["request_budget"],
                         budget=kv["budget"])


def _ref_lynx(inputs, knobs, entry):
    R = _reference_module()
    kv = _knob_values(knobs, entry)
    return R.lynx(inputs["logits"], inputs["phase"], entry["top_k"], alpha=kv["alpha"],
                  beta=kv["beta"], theta=kv["theta"])


REFERENCES = {"topk_softmax": _ref_topk_softmax, "xshare": _ref_xshare,
              "xshare_spec": _ref_xshare_spec, "lynx": _ref_lynx}


# ---------------------------------------------------------------------------------------
# The fuzzer
# ---------------------------------------------------------------------------------------

class Case:
    """One tool invocation: the files it needs and its arguments ({dir}, {out})."""

    def __init__(self, tool, args, files, campaign, meta=None):
        self.tool, self.args, self.files = tool, args, files
        self.campaign = campaign
        self.meta = meta or {}


class Fuzzer:
    def __init__(self, opts):
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.nprng = np.random.default_rng(opts.seed)
        self.bin = os.path.abspath(opts.bin)
        self.out = os.path.abspath(opts.out)
        os.makedirs(os.path.join(self.out, "findings"), exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="work-", dir=self.out)
        self.seeds, self.shipped = load_seeds()
        self.mut = MlirMutator(self.rng, self.seeds)
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = opts.asan_options
        self.env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        self.env["LLVM_DISABLE_CRASH_REPORT"] = "1"
        symbolizer = llvm_symbolizer(self.bin)
        if symbolizer:
            self.env.setdefault("LLVM_SYMBOLIZER_PATH", symbolizer)
        self.execs = 0
        self.by_campaign = {}
        self.findings = {}   # key -> dict
        self.entries = []    # (path, text, entry json, shape flags)
        self.seed_flags = [native_flags(p) for p in self.shipped]  # seeds[:len(shipped)]
        self.deadline = None

    def log(self, msg):
        print(msg, flush=True)

    def tool(self, name):
        return os.path.join(self.bin, name)

    # -- execution -------------------------------------------------------------------
    def materialize(self, case, d):
        os.makedirs(d, exist_ok=True)
        for name, data in case.files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        out = os.path.join(d, "out")
        shutil.rmtree(out, ignore_errors=True)
        args = [a.replace("{dir}", d).replace("{out}", out) for a in case.args]
        return [self.tool(case.tool)] + args, out

    def execute(self, case, d=None, count=True):
        d = d or os.path.join(self.work, "cur")
        shutil.rmtree(d, ignore_errors=True)
        cmd, out = self.materialize(case, d)
        res = run_tool(cmd, self.opts.timeout, self.env)
        if count:
            self.execs += 1
            self.by_campaign[case.campaign] = self.by_campaign.get(case.campaign, 0) + 1
        return res, out

    def judge(self, case, res, out):
        found = classify(res, case.tool)
        if found:
            return found
        if res.rc == 0 and case.meta.get("mlir") is not None and non_text(case.meta["mlir"]):
            return ("accepted-non-text", "accepted-non-text:%s" % case.tool,
                    "exit 0 on an input that is not text")
        if res.rc == 0 and case.meta.get("mlir") is not None and \
                not re.sub(rb"//[^\n]*", b"", case.meta["mlir"]).strip():
            return ("accepted-empty", "accepted-empty:%s" % case.tool,
                    "exit 0 on an empty policy")
        if res.rc == 0 and case.tool == "moe-run" and case.meta.get("entry") \
                and "--list" not in case.args:
            problems = check_outputs(out, case.meta["entry"], case.meta.get("inputs", {}),
                                     case.meta.get("knobs", {}),
                                     case.meta.get("policy_name"), case.meta.get("shipped"))
            if problems:
                return ("wrong-output", "wrong-output:%s:%s" % (case.meta.get("policy_name"),
                                                                 problems[0]),
                        "; ".join(problems))
        return None

    def run_case(self, case):
        res, out = self.execute(case)
        found = self.judge(case, res, out)
        if found:
            self.record(case, res, found)
        return res

    # -- findings --------------------------------------------------------------------
    def record(self, case, res, found):
        kind, key, summary = found
        if key in self.findings:
            self.findings[key]["count"] += 1
            return
        self.log("  FINDING %s  [%s]" % (key, case.campaign))
        case = self.minimize(case, key)
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        slug = re.sub(r"[^\w.-]+", "_", kind)[:40] + "-" + digest
        d = os.path.join(self.out, "findings", slug)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in case.files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        meta = {"tool": case.tool, "args": case.args, "kind": kind, "key": key,
                "campaign": case.campaign,
                "summary": summary.decode("utf-8", "replace") if isinstance(summary, bytes)
                else summary}
        with open(os.path.join(d, "cmd.json"), "w") as f:
            json.dump(meta, f, indent=1)
        with open(os.path.join(d, "stderr.txt"), "wb") as f:
            f.write(res.stderr[-20000:])
        self.findings[key] = {"kind": kind, "dir": d, "count": 1, "campaign": case.campaign}

    def reproduces(self, case, key):
        res, out = self.execute(case, os.path.join(self.work, "min"), count=False)
        found = self.judge(case, res, out)
        return found is not None and found[1] == key

    def minimize(self, case, key):
        """Deletes lines, then chunks of bytes, of the .mlir input while it reproduces."""
        if key.startswith("timeout"):
            return case
        budget_end = time.time() + self.opts.minimize_seconds
        # Flags (shape, --set, ...) dropped one at a time while it reproduces.
        i = 0
        while i < len(case.args) and time.time() < budget_end:
            flag = case.args[i].split("=", 1)[0]
            if flag not in DROPPABLE:
                i += 1
                continue
            n = 2 if DROPPABLE[flag] and "=" not in case.args[i] else 1
            trial = Case(case.tool, case.args[:i] + case.args[i + n:], case.files,
                         case.campaign, case.meta)
            if self.reproduces(trial, key):
                case = trial
            else:
                i += n
        name = case.meta.get("mlir_name")
        if not name or case.files.get(name) is None:
            return case
        data = case.files[name]

        def attempt(candidate):
            trial = Case(case.tool, case.args, dict(case.files, **{name: candidate}),
                         case.campaign, dict(case.meta, mlir=candidate))
            return self.reproduces(trial, key)

        # Line deletion, halving chunk sizes.
        lines = data.split(b"\n")
        chunk = max(1, len(lines) // 2)
        while chunk >= 1 and time.time() < budget_end:
            i, changed = 0, False
            while i < len(lines) and time.time() < budget_end:
                candidate = lines[:i] + lines[i + chunk:]
                if candidate and attempt(b"\n".join(candidate)):
                    lines, changed = candidate, True
                else:
                    i += chunk
            if not changed:
                chunk //= 2
        data = b"\n".join(lines)
        # Drop comment lines (cheap, usually keeps the finding).
        stripped = b"\n".join(l for l in lines if not l.lstrip().startswith(b"//"))
        if stripped != data and time.time() < budget_end and attempt(stripped):
            data = stripped
        return Case(case.tool, case.args, dict(case.files, **{name: data}), case.campaign,
                    dict(case.meta, mlir=data))

    # -- entries of the shipped files ------------------------------------------------
    def list_entries(self, path_or_bytes, count=True, flags=(), files=None):
        files = dict(files or {}, **{"p.mlir": path_or_bytes})
        case = Case("moe-run", ["{dir}/p.mlir", "--list"] + list(flags), files, "list",
                    {"mlir": path_or_bytes, "mlir_name": "p.mlir"})
        res, out = self.execute(case, count=count)
        if count:
            found = self.judge(case, res, out)
            if found:
                self.record(case, res, found)
        if res.rc != 0:
            return None
        try:
            return json.loads(res.stdout.decode("utf-8", "replace"))["entries"]
        except (ValueError, KeyError):
            return None

    def prepare(self):
        for path in self.shipped:
            text = open(path, "rb").read()
            flags = native_flags(path)
            entries = self.list_entries(text, count=False, flags=flags)
            if not entries:
                self.log("warning: cannot list %s %s" % (path, " ".join(flags)))
                continue
            for e in entries:
                self.entries.append((path, text, e, flags))
        self.log("%d seeds, %d shipped entries" % (len(self.seeds), len(self.entries)))

    # -- campaigns -------------------------------------------------------------------
    def run_args(self, entry, inputs, files, extra=None, flags=()):
        args = ["{dir}/p.mlir", "--entry", entry["name"], "--out", "{out}"] + list(flags)
        for name, v in inputs.items():
            if isinstance(v, (int, str)):
                args += ["--arg", "%s=%s" % (name, v)]
            else:
                files[name + ".npy"] = v if isinstance(v, bytes) else npy_bytes(v)
                args += ["--arg", "%s={dir}/%s.npy" % (name, name)]
        if self.rng.random() < 0.15:
            args.append("--lane-parallel")
        return args + (extra or [])

    def tokens(self):
        return self.rng.choice([0, 1, 1, 2, 3, 5, 8, 17, 64, 300])

    def campaign_opt(self):
        i = self.rng.randrange(len(self.seeds))
        text = self.mut.mutate(self.seeds[i])
        flags = self.seed_flags[i] if i < len(self.shipped) and self.rng.random() < 0.7 else []
        passes = self.rng.choice([[], [], ["--moe-host-pipeline"], ["--moe-host-pipeline"],
                                  ["--canonicalize"], ["--moe-form-stages"],
                                  ["--moe-freeze-knobs", "--moe-form-stages",
                                   "--moe-lower-to-loops"],
                                  ["--mlir-print-op-generic"],
                                  ["--moe-set-knobs=values=budget=%s" %
                                   self.rng.choice(INTS)],
                                  ["--moe-map-to-gpu"], ["--cse", "--symbol-dce"]])
        case = Case("moe-opt", ["{dir}/p.mlir"] + flags + passes, {"p.mlir": text}, "opt",
                    {"mlir": text, "mlir_name": "p.mlir"})
        res = self.run_case(case)
        if res.rc == 0 and not passes and self.rng.random() < 0.3:
            # Round trip: what moe-opt prints must parse and verify again.
            case2 = Case("moe-opt", ["{dir}/p.mlir"], {"p.mlir": res.stdout}, "opt-roundtrip",
                         {"mlir": res.stdout, "mlir_name": "p.mlir"})
            self.run_case(case2)

    def campaign_compile(self):
        i = self.rng.randrange(len(self.shipped) if self.rng.random() < 0.7
                               else len(self.seeds))
        text = self.mut.mutate(self.seeds[i])
        flags = self.seed_flags[i] if i < len(self.shipped) else []
        case = Case("moe-compile", ["{dir}/p.mlir", "--target=cuda", "-o", "{out}"] + flags,
                    {"p.mlir": text}, "compile", {"mlir": text, "mlir_name": "p.mlir"})
        self.run_case(case)

    def campaign_run_mlir(self):
        path, text, entry0, flags = self.rng.choice(self.entries)
        text = self.mut.mutate(text)
        entries = self.list_entries(text, flags=flags)
        if not entries:
            return
        entry = self.rng.choice(entries)
        inputs = make_inputs(entry, self.nprng, self.tokens())
        files = {"p.mlir": text}
        args = self.run_args(entry, inputs, files, flags=flags)
        case = Case("moe-run", args, files, "run-mlir",
                    {"mlir": text, "mlir_name": "p.mlir", "entry": entry, "inputs": inputs})
        self.run_case(case)

    def campaign_run_npy(self):
        path, text, entry, flags = self.rng.choice(self.entries)
        inputs = make_inputs(entry, self.nprng, self.tokens())
        if not inputs:
            return self.campaign_run_knob()
        name = self.rng.choice(sorted(inputs))
        inputs[name] = corrupt_array(inputs[name], self.rng, entry, name)
        files = {"p.mlir": text}
        args = self.run_args(entry, inputs, files, flags=flags)
        if self.rng.random() < 0.05:
            args = [a for a in args if not a.startswith(name + "=")]
        case = Case("moe-run", args, files, "run-npy",
                    {"entry": entry, "inputs": {}, "policy_name": None})
        self.run_case(case)

    def campaign_run_knob(self):
        path, text, entry, flags = self.rng.choice(self.entries)
        inputs = make_inputs(entry, self.nprng, self.tokens())
        files = {"p.mlir": text}
        extra, knobs = [], {}
        names = [k["name"] for k in entry["knobs"]]
        for _ in range(self.rng.randrange(1, 3)):
            r = self.rng.random()
            if names and r < 0.85:
                k = self.rng.choice(names)
                kind = [kk["type"] for kk in entry["knobs"] if kk["name"] == k][0]
                pool = INTS if (kind == "int64") == (self.rng.random() < 0.8) else FLOATS
                v = self.rng.choice(pool + ["", " ", "1x", "--1", "1_000"]
                                    if self.rng.random() < 0.1 else pool)
                extra += ["--set", "%s=%s" % (k, v)]
                knobs[k] = v
            else:
                extra += ["--set", self.rng.choice(["nosuch=1", "=1", "k0", "k0=", "==",
                                                    "budget=1=2"])]
        if self.rng.random() < 0.2:
            extra.append("--freeze-knobs")
        args = self.run_args(entry, inputs, files, extra, flags=flags)
        policy_name = os.path.basename(path)[:-5]
        valid_knobs = {}
        for k, v in knobs.items():
            try:
                float(v)
                valid_knobs[k] = v
            except ValueError:
                pass
        case = Case("moe-run", args, files, "run-knob",
                    {"entry": entry, "inputs": inputs, "knobs": valid_knobs,
                     "policy_name": policy_name if entry["name"] == policy_name else None,
                     "shipped": text})
        self.run_case(case)

    def campaign_shape(self):
        """A shipped policy bound by mutated shape flags or --moe-specialize options."""
        rng = self.rng
        path = rng.choice(self.shipped)
        text = shipped = open(path, "rb").read()
        if rng.random() < 0.1:
            text, shipped = self.mut.mutate(text), None
        files = {"p.mlir": text}
        meta = {"mlir": text, "mlir_name": "p.mlir"}
        shape = native_shape(path)
        r = rng.random()
        if r < 0.15:                                      # moe-opt --moe-specialize=...
            opt = specialize_option(rng, shape)
            spec = (["--pass-pipeline=builtin.module(moe-specialize{%s})" % opt]
                    if rng.random() < 0.2 else ["--moe-specialize=" + opt] + rng.choice(
                        [[], [], ["--moe-host-pipeline"], ["--canonicalize"]]))
            extra = shape_args(rng, mutate_shape(rng, {}, files)) if rng.random() < 0.15 else []
            return self.run_case(Case("moe-opt", ["{dir}/p.mlir"] + spec + extra, files,
                                      "shape", meta))
        args = shape_args(rng, mutate_shape(rng, shape, files))
        if r < 0.30:
            passes = rng.choice([[], ["--moe-host-pipeline"], ["--moe-form-stages"],
                                 ["--moe-specialize=experts=8 top_k=2"]])
            return self.run_case(Case("moe-opt", ["{dir}/p.mlir"] + args + passes, files,
                                      "shape", meta))
        if r < 0.45:
            return self.run_case(Case("moe-compile", ["{dir}/p.mlir", "--target=cuda", "-o",
                                                      "{out}"] + args, files, "shape", meta))
        entries = self.list_entries(text, flags=args, files=files)
        if not entries or r < 0.6:
            return
        entry = rng.choice(entries)
        tokens = self.tokens()
        width = 1
        for a in entry["arguments"]:
            width = max(width, reduce(lambda x, d: x * (1 if d == "?" else d), a["shape"], 1))
        if width * max(tokens, 1) > 1 << 22:              # inputs too large to write
            tokens = min(tokens, 1)
            if width > 1 << 22:
                return
        inputs = make_inputs(entry, self.nprng, tokens)
        extra = ["--freeze-knobs"] if rng.random() < 0.2 else []
        run = self.run_args(entry, inputs, files, extra, flags=args)
        name = policy_name(path)
        self.run_case(Case("moe-run", run, files, "shape",
                           dict(meta, entry=entry, inputs=inputs, knobs={},
                                policy_name=name if entry["name"] == name else None,
                                shipped=shipped)))

    def loop(self):
        return run_campaigns(self, [(self.campaign_opt, 0.25), (self.campaign_run_mlir, 0.20),
                                    (self.campaign_run_npy, 0.12),
                                    (self.campaign_run_knob, 0.13),
                                    (self.campaign_compile, 0.05),
                                    (self.campaign_shape, 0.25)])


def run_campaigns(fuzzer, campaigns):
    """Runs the weighted campaigns [(method, weight)] of `fuzzer` (this file's Fuzzer or
    fuzz_runtime.py's) picked at random until its --minutes pass; --campaigns keeps the
    named ones (campaign_run_npy: run-npy or run_npy). A fuzzer bug is logged, not
    raised. Returns the seconds run."""
    if fuzzer.opts.campaigns:
        wanted = fuzzer.opts.campaigns.split(",")
        campaigns = [(f, w) for f, w in campaigns
                     if f.__name__.replace("campaign_", "") in wanted
                     or f.__name__.replace("campaign_", "").replace("_", "-") in wanted]
    fns, weights = zip(*campaigns)
    start = last = time.time()
    fuzzer.deadline = start + fuzzer.opts.minutes * 60
    while time.time() < fuzzer.deadline:
        fn = fuzzer.rng.choices(fns, weights)[0]
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a fuzzer bug must not stop the run
            fuzzer.log("fuzzer error in %s: %r" % (fn.__name__, exc))
        if time.time() - last > 60:
            last = time.time()
            fuzzer.log("[%4.1f min] %d executions, %d findings" %
                       ((last - start) / 60, fuzzer.execs, len(fuzzer.findings)))
    return time.time() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="directory with moe-opt, moe-run, "
                    "moe-compile (an ASan+UBSan build)")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz-out", help="findings and scratch files")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per execution")
    ap.add_argument("--minimize-seconds", type=float, default=120.0)
    ap.add_argument("--campaigns", default="", help="comma-separated subset of opt, "
                    "run-mlir, run-npy, run-knob, compile, shape")
    ap.add_argument("--asan-options", default="detect_leaks=0:detect_odr_violation=0:"
                    "alloc_dealloc_mismatch=0:allocator_may_return_null=0:"
                    "handle_abort=1:symbolize=1")
    opts = ap.parse_args(argv)
    fz = Fuzzer(opts)
    fz.prepare()
    seconds = fz.loop()
    shutil.rmtree(fz.work, ignore_errors=True)
    print("\n=== fuzz summary: seed %d, %.1f minutes, %d executions (%s), %d findings ==="
          % (opts.seed, seconds / 60, fz.execs,
             ", ".join("%s %d" % kv for kv in sorted(fz.by_campaign.items())),
             len(fz.findings)))
    kinds = {}
    for key, f in sorted(fz.findings.items()):
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        print("  %-60s x%-4d %s" % (key[:60], f["count"], os.path.relpath(f["dir"])))
    if kinds:
        print("by kind: " + ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
