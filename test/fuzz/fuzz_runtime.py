#!/usr/bin/python3
"""A mutation fuzzer for the runtime's file inputs (moe-exec, the policy cache, Python).

    scripts/build-sanitized.sh    # ASan+UBSan runtime and moe-exec, no MLIR
    test/fuzz/fuzz_runtime.py --bin build-sanitized/bin --compiler build/bin/moe-compile \\
        --minutes 30 --seed 1 --out /tmp/fuzz-runtime

Seeds are small random Hugging Face checkpoints written by test/support/make_checkpoint.py
(Mixtral, Qwen2-MoE, Qwen3-MoE in two shards with model.safetensors.index.json,
OLMoE, DeepSeek-V3), a hidden-state batch for each and one recorded routing run. Each
iteration picks a campaign and mutates one thing:

  config      config.json: a key deleted, set to another JSON value or type, bytes
              flipped or truncated, or the file made huge / nested;
  safetensors a checkpoint file: its 8-byte header length, its JSON header (dtype,
              shape, data_offsets, keys), truncation, byte flips; or the index's
              weight_map (missing shard, '../' paths, wrong types);
  inputs      --input / --request-ids / --positions .npy files (header, dtype, shape,
              values, truncation), a --batches .npz (members, bytes), --layers,
              --phase, --set, or a flag naming /dev/zero, a directory or nothing;
  replay      a --replay directory recorded by moe-exec with one file mutated
              (ids out of range, NaN weights, shapes, dtypes, a missing layer);
  cache       the JIT policy cache: a primed entry whose manifest.json (symbol,
              library, sizes, types) or .so (truncation, bytes) is mutated;
  memory      --memory modes with mutated --budget, --lo, --int4-group,
              --link-bandwidth, --update-steps/--update-seconds, --memory-set and
              injected copy faults;
  python      a batch of calls into the `switchyard` package (compile, a router's
              call, Executor) with mutated arguments, in one subprocess per batch
              (needs --python with the package installed; its extension is the normal
              build, so only signals and wrong exception types are findings there).

Findings: a sanitizer report, a signal, an exit status other than 0 and 1, a run over
the time limit, or exit 1 whose message names neither the mutated file nor the flag
(`unnamed-error`); for Python an exception other than a SwitchyardError, ValueError,
TypeError, OSError or KeyError, or one whose message names no argument. Each finding's
first input is saved under OUT/findings/<id>/ with cmd.json (as fuzz.py's, plus `env`
and `prime` for cache cases); test/fuzz/replay.py replays such directories.
"""
import argparse
import hashlib
import io
import json
import os
import random
import re
import shutil
import struct
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "support"))
import fuzz  # noqa: E402  (run_tool, classify, raw_npy, INTS, run_campaigns)
from make_checkpoint import make_checkpoint  # noqa: E402

JSON_VALUES = [None, True, False, 0, -1, 1, 2, 3, 7, 8, 64, 2 ** 31, 2 ** 31 - 1, -2 ** 31,
               2 ** 32, 2 ** 53, 2 ** 63 - 1, 2 ** 64, -2 ** 63, 1e300, -1e300, 0.5, 1.5,
               1e-45, "8", "", "x" * 300, [], [1, 2], [0] * 40, {}, {"a": 1}, "float32",
               "bfloat16", "int8", "softmax", "sigmoid", "noaux_tc", "greedy", "mixtral",
               "deepseek_v3", "qwen3_moe"]
BAD_PATHS = ["/dev/zero", "/dev/null", "/", "/proc/self/status", "{dir}/nonexistent.npy",
             "", "{dir}"]
ST_DTYPES = ["F32", "F16", "BF16", "F64", "I32", "I8", "U8", "BOOL", "F8_E4M3", "X", "",
             7, None]
# Small enough that a reproducer holding one is ~50 KiB (hidden 16, experts of width 8).
SMALL = dict(hidden=16, intermediate=8, vocab=16)
ARCHES = [("mixtral", SMALL), ("qwen2_moe", dict(SMALL, dense_intermediate=8,
                                                 shared_intermediate=8)),
          ("qwen3_moe", dict(SMALL, dense_intermediate=8, shards=2)), ("olmoe", SMALL),
          ("deepseek_v3", dict(SMALL, dense_intermediate=8))]
# Besides any switchyard.SwitchyardError (CompileError, InputError, ...):
PY_OK_EXCEPTIONS = ("ValueError", "TypeError", "OSError", "KeyError", "FileNotFoundError",
                    "NotADirectoryError", "IsADirectoryError", "PermissionError")


def npy(arr):
    f = io.BytesIO()
    np.save(f, arr, allow_pickle=False)
    return f.getvalue()


# A file's contents, or one of these: the file is made a symbolic link to a device, or a
# FIFO (git keeps links; a FIFO is made by replay.py from its `.fifo` marker).
SPECIAL = {b"\0link:/dev/zero": "/dev/zero", b"\0link:/dev/urandom": "/dev/urandom",
           b"\0fifo": None}


def write_file(path, data):
    """Writes one input file, or makes it a link or a FIFO (SPECIAL)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if data in SPECIAL:
        if SPECIAL[data]:
            os.symlink(SPECIAL[data], path)
        else:
            os.mkfifo(path)
        return
    with open(path, "wb") as f:
        f.write(data)


def read_tree(path):
    files = {}
    for dirpath, _, names in os.walk(path):
        for n in names:
            full = os.path.join(dirpath, n)
            with open(full, "rb") as f:
                files[os.path.relpath(full, path)] = f.read()
    return files


class Case:
    """One tool run: the files it needs, its arguments and environment ({dir}, {out})."""

    def __init__(self, tool, args, files, campaign, names=(), env=None, prime=None):
        self.tool, self.args, self.files, self.campaign = tool, args, files, campaign
        self.names = [n for n in names if n]   # an error must name one of these
        self.env = env or {}
        self.prime = prime                     # cache cases: files laid over the entry
        self.meta_arch = ""                    # cache cases: the checkpoint primed


class RuntimeFuzzer:
    def __init__(self, opts):
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.bin = os.path.abspath(opts.bin)
        self.out = os.path.abspath(opts.out)
        os.makedirs(os.path.join(self.out, "findings"), exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="work-", dir=self.out)
        self.env = dict(os.environ)
        self.env["ASAN_OPTIONS"] = opts.asan_options
        self.env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        self.env["SWITCHYARD_MOE_COMPILE"] = os.path.abspath(opts.compiler)
        self.env["OPENBLAS_NUM_THREADS"] = "1"
        self.env["SWITCHYARD_THREADS"] = "1"
        self.execs, self.by_campaign, self.findings = 0, {}, {}
        self.models = []   # (arch, {relpath: bytes}, hidden bytes, recorded routing)

    def log(self, msg):
        print(msg, flush=True)

    # -- seeds -----------------------------------------------------------------------
    def prepare(self):
        self.env["SWITCHYARD_CACHE_DIR"] = os.path.join(self.work, "cache")
        for arch, extra in ARCHES:
            d = os.path.join(self.work, "seed-" + arch)
            make_checkpoint(arch, d, seed=1, **extra)
            files = read_tree(d)
            config = json.loads(files["config.json"])
            x = np.random.default_rng(1).standard_normal(
                (5, config["hidden_size"])).astype(np.float32)
            rec = os.path.join(self.work, "rec-" + arch)
            np.save(os.path.join(self.work, "x.npy"), x)
            res = fuzz.run_tool([self.tool(), d, "--input", os.path.join(self.work, "x.npy"),
                                 "--out", rec], 300, self.env)
            if res.rc != 0:
                raise SystemExit("seed run of %s failed: %s" % (arch, res.stderr.decode()))
            routing = {n: v for n, v in read_tree(rec).items() if n.startswith("topk_")}
            self.models.append((arch, files, npy(x), routing))
        # Each checkpoint's compiled native policy: what the cache campaign mutates.
        self.cache_seed = {}
        cache = self.env["SWITCHYARD_CACHE_DIR"]
        for name in os.listdir(cache):
            entry = os.path.join(cache, name)
            if os.path.isfile(os.path.join(entry, "manifest.json")):
                command = json.load(open(os.path.join(entry, "manifest.json")))["command"]
                arch = next((a for a, _ in ARCHES if any("seed-%s/" % a in c for c in command)),
                            None)
                if arch:
                    self.cache_seed[arch] = {n: v for n, v in read_tree(entry).items()
                                             if n == "manifest.json" or n.endswith(".so")}
        self.log("seeds: %d checkpoints, cache entries for %s" %
                 (len(self.models), sorted(self.cache_seed)))

    def tool(self):
        return os.path.join(self.bin, "moe-exec")

    # -- mutations -------------------------------------------------------------------
    def mutate_bytes(self, data):
        rng = self.rng
        data = bytearray(data)
        r = rng.random()
        if not data or r < 0.25:
            return bytes(data[:rng.randrange(len(data) + 1)])
        if r < 0.5:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif r < 0.7:
            i = rng.randrange(len(data))
            data[i:i] = bytes(rng.choice([b"\x00", b"\xff" * 8, b"{", b"}", b"\"",
                                          b"9" * 20, b"-", b"[", b"\n"]))
        elif r < 0.85:
            i = rng.randrange(len(data))
            del data[i:i + rng.randint(1, 64)]
        else:
            data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        return bytes(data)

    def mutate_json_value(self, obj, depth=0):
        """One key of a (nested) JSON object deleted, replaced or added."""
        rng = self.rng
        if isinstance(obj, list) and obj and depth < 4 and rng.random() < 0.7:
            i = rng.randrange(len(obj))
            obj[i] = self.mutate_json_value(obj[i], depth + 1)
            return obj
        if not isinstance(obj, dict) or not obj:
            return rng.choice(JSON_VALUES)
        key = rng.choice(list(obj))
        r = rng.random()
        if r < 0.15:
            del obj[key]
        elif r < 0.25:
            obj[rng.choice(["extra", "__proto__", key + "_", "model_type", "dtype",
                            "num_experts", "mlp_only_layers"])] = rng.choice(JSON_VALUES)
        elif isinstance(obj[key], (dict, list)) and depth < 4 and rng.random() < 0.6:
            obj[key] = self.mutate_json_value(obj[key], depth + 1)
        else:
            obj[key] = rng.choice(JSON_VALUES)
        return obj

    def mutate_json(self, data):
        rng = self.rng
        if rng.random() < 0.2:
            return self.mutate_bytes(data)
        try:
            obj = json.loads(data)
        except ValueError:
            return self.mutate_bytes(data)
        r = rng.random()
        if r < 0.03:
            return b"[" * 100000 + b"]" * 100000
        if r < 0.06:
            return json.dumps(rng.choice(JSON_VALUES)).encode()
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            obj = self.mutate_json_value(obj)
        return json.dumps(obj).encode()

    def mutate_npy(self, data, ids=False):
        rng = self.rng
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception:  # noqa: BLE001 - already broken: mutate the bytes
            return self.mutate_bytes(data)
        r = rng.random()
        if r < 0.25:
            return self.mutate_bytes(data)
        if r < 0.4:   # header: shape, dtype or order claimed differently
            shape = rng.choice([(), (0,), (1,), (2 ** 31,), (2 ** 62, 2 ** 62), (-1,),
                                tuple(arr.shape[::-1]), arr.shape + (1,), (arr.size + 1,)])
            descr = rng.choice(["<f4", "<f8", "<f2", "<i4", "<i8", ">f4", "|u1", "<c8",
                                "|b1", "<U4", "|O", "x", arr.dtype.str])
            fortran = rng.choice(["False", "True", "1", "None"])
            head = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
                descr, fortran, shape)
            if rng.random() < 0.1:
                head = head.replace("'shape'", "'shapes'")
            return fuzz.raw_npy(head.encode(), arr.tobytes(), rng.choice([1, 1, 2, 3]))
        if r < 0.6:   # values
            flat = arr.astype(np.float64).ravel().copy()
            if flat.size:
                v = rng.choice([np.nan, np.inf, -np.inf, 1e30, -1e30, 2 ** 31 - 1, -1,
                                -2 ** 31, 1e-45, 0, 255, 256, 2 ** 20])
                idx = rng.sample(range(flat.size), min(flat.size, rng.randint(1, 4)))
                flat[idx] = v
            with np.errstate(all="ignore"):
                return npy(flat.reshape(arr.shape).astype(arr.dtype))
        if r < 0.8:   # dtype converted
            dt = rng.choice([np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_,
                             np.int8, np.complex64])
            with np.errstate(all="ignore"):
                return npy(arr.astype(dt))
        # shape
        choice = rng.random()
        if choice < 0.3 and arr.ndim:
            return npy(arr[:rng.randrange(arr.shape[0] + 1)])
        if choice < 0.5:
            return npy(arr.reshape(-1))
        if choice < 0.7 and arr.ndim:
            return npy(np.concatenate([arr, arr]))
        if choice < 0.85:
            return npy(arr.reshape(arr.shape + (1,)))
        return npy(np.zeros((0,) + arr.shape[1:], arr.dtype))

    def mutate_safetensors(self, data):
        rng = self.rng
        if len(data) < 8:
            return self.mutate_bytes(data)
        n = struct.unpack("<Q", data[:8])[0]
        try:
            header = json.loads(data[8:8 + n])
        except ValueError:
            return self.mutate_bytes(data)
        body = data[8 + n:]
        r = rng.random()
        if r < 0.15:
            claim = rng.choice([0, 1, 2, n - 1, n + 1, len(data), 2 ** 32, 2 ** 63, 2 ** 64 - 1,
                                100 * 1024 * 1024])
            return struct.pack("<Q", claim % 2 ** 64) + data[8:]
        if r < 0.3:
            return self.mutate_bytes(data)
        names = [k for k in header if k != "__metadata__"]
        if not names:
            return self.mutate_bytes(data)
        name = rng.choice(names)
        info = header[name]
        r = rng.random()
        if r < 0.2:
            info["dtype"] = rng.choice(ST_DTYPES)
        elif r < 0.4 and isinstance(info, dict) and isinstance(info.get("shape"), list):
            shape = info["shape"]
            info["shape"] = rng.choice([[], [0], shape[::-1], shape + [1], [2 ** 62, 4],
                                        [-1] + shape[1:], [2 ** 31] * 2, ["4"], shape[:1],
                                        [s * 2 for s in shape]])
        elif r < 0.6 and isinstance(info, dict) and isinstance(info.get("data_offsets"), list):
            a, b = (info["data_offsets"] + [0, 0])[:2]
            info["data_offsets"] = rng.choice([[b, a], [a, b + 4], [a - 4, b - 4], [0, 2 ** 63],
                                               [2 ** 64, 2 ** 64 + 4], [-4, b], [a], [a, b, 0],
                                               [str(a), b], [a + 1, b + 1], [0, 0]])
        elif r < 0.7:
            del header[name]
        elif r < 0.8:
            header[name.replace("weight", "weigh")] = header.pop(name)
        else:
            header = self.mutate_json_value(header)
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + body

    # -- running ---------------------------------------------------------------------
    def materialize(self, case, d):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in case.files.items():
            write_file(os.path.join(d, name),
                       data.replace(b"{dir}", d.encode()) if name.endswith(".py") else data)
        out = os.path.join(d, "out")
        sub = lambda a: a.replace("{dir}", d).replace("{out}", out)  # noqa: E731
        env = dict(self.env, **{k: sub(v) for k, v in case.env.items()})
        if case.prime is not None:
            self.prime_cache(case, env["SWITCHYARD_CACHE_DIR"], case.prime)
        return [self.tool()] + [sub(a) for a in case.args], env, d

    def prime_cache(self, case, cache, files):
        """The policy cache of this case's unmutated run (compiled once per checkpoint at
        this same path), each entry's files replaced by the mutated ones."""
        primed = os.path.join(self.work, "primed-" + case.meta_arch)
        if not os.path.isdir(primed):
            cmd = [self.tool()] + [a.replace("{dir}", os.path.dirname(cache)).replace(
                "{out}", os.path.join(self.work, "prime-out")) for a in case.args]
            fuzz.run_tool(cmd, 300, dict(self.env, SWITCHYARD_CACHE_DIR=primed))
        shutil.copytree(primed, cache)
        for entry in os.listdir(cache):
            if os.path.isfile(os.path.join(cache, entry, "manifest.json")):
                for name, data in files.items():
                    with open(os.path.join(cache, entry, name), "wb") as f:
                        f.write(data)

    def execute(self, case, where="cur", count=True):
        cmd, env, d = self.materialize(case, os.path.join(self.work, where))
        if case.tool == "python":
            cmd = [self.opts.python, os.path.join(d, "calls.py")]
        res = fuzz.run_tool(cmd, self.opts.timeout, env)
        if count:
            self.execs += 1
            self.by_campaign[case.campaign] = self.by_campaign.get(case.campaign, 0) + 1
        return res, d

    def judge(self, case, res, d):
        found = fuzz.classify(res, case.tool)
        if found:
            return found
        err = res.stderr.decode("utf-8", "replace")
        if case.tool == "python":
            m = re.search(r"^UNEXPECTED (\w+)(?:: (.*))?$", res.stdout.decode("utf-8", "replace"),
                          re.M)
            if m:
                return ("py-" + m.group(1), "py:%s:%s" % (m.group(1), (m.group(2) or "")[:40]),
                        m.group(0))
            if res.rc != 0:
                return ("py-exit", "py-exit:%s" % fuzz.top_frame(err), err[-400:])
            return None
        if res.rc == 1 and case.names:
            message = err.replace(d, "{dir}")
            if not any(n.replace(d, "{dir}") in message for n in case.names):
                first = re.sub(r"\d+", "N", message.strip().splitlines()[0] if message.strip()
                               else "")[:70]
                return ("unnamed-error", "unnamed:%s" % first,
                        "names none of %s: %s" % (case.names, message.strip()[:300]))
        return None

    def run_case(self, case):
        res, d = self.execute(case)
        found = self.judge(case, res, d)
        if found:
            self.record(case, res, found)

    def record(self, case, res, found):
        kind, key, summary = found
        if key in self.findings:
            self.findings[key]["count"] += 1
            return
        self.log("  FINDING %s  [%s]" % (key, case.campaign))
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        d = os.path.join(self.out, "findings",
                         re.sub(r"[^\w.-]+", "_", kind)[:40] + "-" + digest)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in case.files.items():
            if data == b"\0fifo":   # git cannot hold a FIFO: replay.py makes it
                write_file(os.path.join(d, name + ".fifo"), b"")
            else:
                write_file(os.path.join(d, name), data)
        if case.prime is not None:
            for name, data in case.prime.items():
                os.makedirs(os.path.join(d, "cache-entry"), exist_ok=True)
                with open(os.path.join(d, "cache-entry", name), "wb") as f:
                    f.write(data)
        meta = {"tool": case.tool, "args": case.args, "kind": kind, "key": key,
                "campaign": case.campaign, "env": case.env, "names": case.names,
                "prime": case.prime is not None, "summary": summary}
        with open(os.path.join(d, "cmd.json"), "w") as f:
            json.dump(meta, f, indent=1)
        with open(os.path.join(d, "stderr.txt"), "wb") as f:
            f.write(res.stderr[-20000:])
        self.findings[key] = {"kind": kind, "dir": d, "count": 1}

    # -- campaigns -------------------------------------------------------------------
    def model(self):
        arch, files, x, routing = self.rng.choice(self.models)
        files = {"model/" + k: v for k, v in files.items()}
        files["x.npy"] = x
        return arch, files, routing

    def base_args(self):
        return ["{dir}/model", "--input", "{dir}/x.npy", "--out", "{out}"]

    def special(self, files, names):
        """Sometimes one of `names` becomes a link to a device or a FIFO instead."""
        if self.rng.random() < 0.04:
            files[self.rng.choice(names)] = self.rng.choice(sorted(SPECIAL))
            return True
        return False

    def campaign_config(self):
        _, files, _ = self.model()
        if not self.special(files, ["model/config.json"]):
            files["model/config.json"] = self.mutate_json(files["model/config.json"])
        self.run_case(Case("moe-exec", self.base_args(), files, "config",
                           names=["config.json"]))

    def campaign_safetensors(self):
        _, files, _ = self.model()
        candidates = [k for k in files if k.startswith("model/") and k != "model/config.json"]
        name = self.rng.choice(candidates)
        if self.special(files, [name]):
            pass
        elif name.endswith(".json"):
            files[name] = self.mutate_json(files[name])
        else:
            files[name] = self.mutate_safetensors(files[name])
        # A tensor that is missing or of the wrong shape is named with the checkpoint.
        names = [os.path.basename(name), "model.safetensors.index.json", "safetensors",
                 "{dir}/model"]
        self.run_case(Case("moe-exec", self.base_args(), files, "safetensors", names=names))

    def campaign_inputs(self):
        rng = self.rng
        arch, files, _ = self.model()
        x = np.load(io.BytesIO(files["x.npy"]))
        T = x.shape[0]
        args = self.base_args()
        r = rng.random()
        names = []
        if r < 0.3:
            if not self.special(files, ["x.npy"]):
                files["x.npy"] = self.mutate_npy(files["x.npy"])
            names = ["--input", "x.npy"]
        elif r < 0.45:
            flag = rng.choice(["--request-ids", "--positions"])
            base = npy(np.arange(T, dtype=np.int32) % 3)
            files["a.npy"] = self.mutate_npy(base, ids=True)
            args += [flag, "{dir}/a.npy"]
            names = [flag, "a.npy", "request", "position"]  # values: the batch's structure
        elif r < 0.65:
            members = {"hidden_0": x, "request_ids_0": np.arange(T, dtype=np.int32),
                       "positions_0": np.zeros(T, np.int32), "hidden_1": x[:2],
                       "phase_1": np.int32(1)}
            if rng.random() < 0.5:
                key = rng.choice(list(members))
                try:   # a mutation numpy itself cannot read is left to the byte level
                    members[key] = np.load(io.BytesIO(self.mutate_npy(npy(members[key]))))
                except Exception:  # noqa: BLE001
                    pass
            f = io.BytesIO()
            (np.savez_compressed if rng.random() < 0.5 else np.savez)(f, **members)
            data = f.getvalue()
            if rng.random() < 0.5:
                data = self.mutate_bytes(data)
            files["b.npz"] = data
            args = ["{dir}/model", "--batches", "{dir}/b.npz", "--out", "{out}"]
            names = ["--batches", "b.npz"]
        elif r < 0.8:
            flag, values = rng.choice([
                ("--layers", ["0:1", "1:0", "-1:", ":99", "5:6", "a:b", "0:", ":", "0:2:3",
                              "99999999999999999999:1", "-9223372036854775808:"]),
                ("--phase", ["prefill", "decode", "mixed", "", "x", "verify"]),
                ("--set", ["top_k=0", "budget=-1", "x=1", "=", "budget", "budget=nan",
                           "budget=1e40", "k0=99999999999", "alpha=inf"]),
                ("--repeat", ["0", "-1", "1", "x", "99999999999999"]),
                ("--device", ["cuda", "host", "tpu", ""]),
                ("--entry", ["nope", "", "topk_softmax"]),
                ("--policy", ["{dir}/x.npy", "/dev/null", ROOT + "/policies/lynx.mlir",
                              ROOT + "/policies/xshare.mlir", ROOT + "/policies/eplb.mlir",
                              ROOT + "/policies/deepseek_v3.mlir"])])
            value = rng.choice(values)
            args += [flag, value]
            names = [flag, value.split("=")[0], os.path.basename(value)]
        else:   # a file flag naming something that is no regular file
            flag = rng.choice(["--input", "--request-ids", "--positions", "--batches",
                               "--replay", "--policy"])
            path = rng.choice(BAD_PATHS)
            if flag == "--input":
                args[2] = path
            elif flag == "--batches":
                args = ["{dir}/model", "--batches", path, "--out", "{out}"]
            else:
                args += [flag, path]
            names = [flag, path]
        self.run_case(Case("moe-exec", args, files, "inputs", names=names))

    def campaign_replay(self):
        rng = self.rng
        _, files, routing = self.model()
        rec = {"rec/" + k: v for k, v in routing.items()}
        name = rng.choice(sorted(rec))
        r = rng.random()
        if r < 0.1:
            del rec[name]
        elif r < 0.2:
            rec[name] = rec[rng.choice(sorted(rec))]   # ids <-> weights swapped
        else:
            rec[name] = self.mutate_npy(rec[name], ids="ids" in name)
        files.update(rec)
        names = ["--replay", "replayed routing", os.path.basename(name)]
        self.run_case(Case("moe-exec", self.base_args() + ["--replay", "{dir}/rec"], files,
                           "replay", names=names))

    def campaign_cache(self):
        rng = self.rng
        arch, files, _ = self.model()
        if arch not in self.cache_seed:
            return
        # Mostly this checkpoint's own entry; sometimes another's (wrong sizes).
        prime = dict(self.cache_seed[arch if rng.random() < 0.9 else
                                     rng.choice(sorted(self.cache_seed))])
        r = rng.random()
        if r < 0.5:
            manifest = json.loads(prime["manifest.json"])
            entry = manifest["entries"][0] if manifest.get("entries") else manifest
            field = rng.choice(["host_symbol", "host_library", "entry", "shape", "signature",
                                None])
            if field in ("host_symbol",) and rng.random() < 0.6:
                entry[field] = rng.choice(["free", "malloc", "system", "", "topk_softmax",
                                           "nope", "_init", "topk_softmax_packed\x00x"])
            elif field == "host_library" and rng.random() < 0.6:
                entry[field] = rng.choice(["/lib/x86_64-linux-gnu/libc.so.6", "../x.so", "",
                                           "manifest.json", "/dev/zero", "libtopk_softmax.so/"])
            else:
                manifest = self.mutate_json_value(manifest)
            prime["manifest.json"] = json.dumps(manifest).encode()
            if rng.random() < 0.2:
                prime["manifest.json"] = self.mutate_bytes(prime["manifest.json"])
        else:
            so = [k for k in prime if k.endswith(".so")]
            if not so:
                return
            name = rng.choice(so)
            data = prime[name]
            prime[name] = (data[:rng.randrange(len(data))] if rng.random() < 0.4
                           else self.mutate_bytes(data))
        case = Case("moe-exec", self.base_args(), files, "cache",
                    names=["manifest.json", ".so", "cache"],
                    env={"SWITCHYARD_CACHE_DIR": "{dir}/cache"}, prime=prime)
        case.meta_arch = arch
        self.run_case(case)

    def campaign_memory(self):
        rng = self.rng
        _, files, _ = self.model()
        args = self.base_args() + ["--memory", rng.choice(
            ["resident", "static-lo", "dynaexq", "offload", "on-demand", "x", ""])]
        options = [("--budget", ["0", "1", "64K", "512K", "1M", "-1", "1e30", "x", "1.5G",
                                 "nan", "1KB"]),
                   ("--lo", ["int4", "int8", "int2", "fp8", ""]),
                   ("--int4-group", ["0", "1", "3", "7", "32", "64", "-1", "2147483648"]),
                   ("--link-bandwidth", ["0", "1", "-1", "1e30", "nan", "inf", "x"]),
                   ("--update-steps", ["0", "1", "-1", "99999999999"]),
                   ("--update-seconds", ["0", "-1", "nan", "1e-9", "inf"]),
                   ("--memory-set", ["alpha=0.5", "margin=-1", "threshold=nan", "x=1", "=",
                                     "alpha=1e40", "margin"]),
                   ("--memory-check", None),
                   ("--inject-copy-failures", ["0", "0.5", "1", "2", "-1", "nan"]),
                   ("--inject-copy-delay", ["0", "0.001", "-1", "nan", "1e9"])]
        names = ["--memory"]
        for flag, values in rng.sample(options, rng.randint(1, 4)):
            args += [flag] if values is None else [flag, rng.choice(values)]
            names.append(flag)
        self.run_case(Case("moe-exec", args, files, "memory", names=names))

    PY_PRELUDE = r'''
import sys, traceback
import numpy as np
import switchyard
OK = (%s)
def call(what, fn):
    try:
        fn()
    except Exception as e:
        name = type(e).__name__
        if name not in OK and not isinstance(e, switchyard.SwitchyardError):
            print("UNEXPECTED %%s: %%s: %%s" %% (name, what, str(e)[:200]), flush=True)
            traceback.print_exc()
'''

    def campaign_python(self):
        if not self.opts.python:
            return
        rng = self.rng
        _, files, _ = self.model()
        lines = [self.PY_PRELUDE % ", ".join(repr(n) for n in PY_OK_EXCEPTIONS)]
        policies = ["topk_softmax", "xshare", "lynx", "deepseek_v3", "nope", "",
                    "{dir}/x.npy", "/dev/null", "{dir}/model/config.json"]
        values = ["0", "-1", "1", "8", "2**31", "2**63", "-2**63", "1.5", "float('nan')",
                  "float('inf')", "None", "'8'", "[]", "{}", "True", "object()", "b'x'"]
        for i in range(rng.randint(3, 8)):
            p = rng.choice(policies)
            r = rng.random()
            if r < 0.4:
                kw = {k: rng.choice(values) for k in rng.sample(
                    ["experts", "top_k", "groups", "topk_groups", "dtype", "target", "model",
                     "knobs", "entry", "devices"], rng.randint(0, 3))}
                if rng.random() < 0.4:
                    kw["model"] = repr(rng.choice(["{dir}/model/config.json", "{dir}/model",
                                                   "/dev/zero", "{dir}/nope.json", ""]))
                args = ", ".join("%s=%s" % kv for kv in kw.items())
                lines.append("call('compile %s', lambda: switchyard.compile(%r, %s))"
                             % (p, p, args))
            elif r < 0.75:
                shape = rng.choice(["(4, 8)", "(0, 8)", "(4, 7)", "(4,)", "(2, 2, 8)",
                                    "(4, 2**20)", "(4, 64)"])
                dtype = rng.choice(["np.float32", "np.float64", "np.float16", "np.int32",
                                    "np.bool_", "np.complex64"])
                fill = rng.choice(["0", "np.nan", "np.inf", "1e30", "-1"])
                knobs = rng.choice(["None", "{'budget': %s}" % rng.choice(values),
                                    "{'nope': 1}", "{'k0': -1}", "'x'"])
                lines.append(
                    "call('route %s', lambda: switchyard.compile(%r, experts=8, top_k=2)"
                    "(logits=np.full(%s, %s).astype(%s), knobs=%s))"
                    % (p, p, shape, fill, dtype, knobs))
            else:
                hidden = rng.choice(["np.zeros((4, 64), np.float32)", "np.zeros((4, 63))",
                                     "np.zeros((0, 64), np.float32)", "None", "'x'",
                                     "np.full((2, 64), np.nan, np.float32)"])
                model = rng.choice(["'{dir}/model'", "'{dir}/model/config.json'", "'/dev/zero'",
                                    "'{dir}/nope'", "None", "''"])
                kw = rng.choice(["", ", phase='x'", ", request_ids=np.zeros(3, np.int32)",
                                 ", positions='a'", ", phase='decode'"])
                lines.append("call('executor', lambda: switchyard.Executor(%s, %r).run(%s%s))"
                             % (model, p if rng.random() < 0.5 else "topk_softmax", hidden, kw))
        if rng.random() < 0.5:   # a mutated checkpoint under the Executor
            files["model/config.json"] = self.mutate_json(files["model/config.json"])
        files["calls.py"] = "\n".join(lines).encode()
        self.run_case(Case("python", ["{dir}/calls.py"], files, "python",
                           env={"SWITCHYARD_CACHE_DIR": "{dir}/pycache"}))

    def loop(self):
        return fuzz.run_campaigns(self, [(self.campaign_config, 0.22),
                                         (self.campaign_safetensors, 0.2),
                                         (self.campaign_inputs, 0.2),
                                         (self.campaign_replay, 0.1),
                                         (self.campaign_cache, 0.1),
                                         (self.campaign_memory, 0.1),
                                         (self.campaign_python, 0.08)])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="directory with moe-exec (an ASan+UBSan "
                    "build: scripts/build-sanitized.sh)")
    ap.add_argument("--compiler", required=True, help="moe-compile (any build)")
    ap.add_argument("--python", default="", help="a Python with the switchyard package "
                    "(the python campaign; none: skipped)")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz-out", help="findings and scratch files")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per execution")
    ap.add_argument("--campaigns", default="", help="comma-separated subset of config, "
                    "safetensors, inputs, replay, cache, memory, python")
    ap.add_argument("--asan-options", default="detect_leaks=0:allocator_may_return_null=0:"
                    "handle_abort=1:symbolize=1")
    opts = ap.parse_args(argv)
    fz = RuntimeFuzzer(opts)
    fz.prepare()
    seconds = fz.loop()
    shutil.rmtree(fz.work, ignore_errors=True)
    print("\n=== runtime fuzz summary: seed %d, %.1f minutes, %d executions (%s), "
          "%d findings ===" % (opts.seed, seconds / 60, fz.execs,
                               ", ".join("%s %d" % kv for kv in sorted(fz.by_campaign.items())),
                               len(fz.findings)))
    for key, f in sorted(fz.findings.items()):
        print("  %-70s x%-4d %s" % (key[:70], f["count"], os.path.relpath(f["dir"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
