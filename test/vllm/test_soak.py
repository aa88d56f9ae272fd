"""A bounded soak of vLLM's OpenAI server with the plugin, on 127.0.0.1 (ctest vllm/soak).

A small random DeepSeek-V3 (make_model.py) served twice, natively and with
SWITCHYARD_POLICY=deepseek_v3 (a per-token policy with a knob, routed_scaling_factor),
SWITCHYARD_CAPTURE and a SWITCHYARD_KNOBS_FILE that a thread keeps rewriting (valid,
empty, cut short, a boolean) all through the run. REQUESTS completions at concurrency
CONCURRENCY, mixed valid and hostile knobs:

  - no answer is a 5xx and the server keeps serving;
  - every hostile request (a JSON boolean, a string, NaN, an unknown knob, the prefix in
    another case, a 1 MB key, a 100,000-element list) is a 400 whose message names the
    knob, in a body of at most BODY_BOUND bytes;
  - routing is per token: tokens of identical prompts routed in different batches with
    bit-identical logits (read from the capture) got identical ids (the tokens of
    identical requests are printed next to the native server's: the engine's own CPU
    numerics depend on the batch, so they may differ even natively);
  - the engine process's resident memory grows by at most RSS_BOUND_MB between the end
    of the warm-up and the end of the run;
  - after SIGTERM to the API server (vLLM's default --shutdown-timeout 0: the engine is
    killed) the routing trace is on disk and load_trace reads it;
  - p50 / p99 latency of the valid requests printed next to the native server's.

Usage: .venv-vllm/bin/python test/vllm/test_soak.py [--requests N] [--keep DIR]
Exit 77 (skipped) when vLLM is not installed in this Python.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from checks import Checks  # noqa: E402

REQUESTS, CONCURRENCY, WARMUP = 300, 8, 40
BODY_BOUND = 1200     # bytes of an error answer, whatever the request's size
RSS_BOUND_MB = 64     # engine memory growth after warm-up
PROMPTS = ["the a of to and in", "water than call first who may down", "you that he was",
           "but what some we", "an each she which do their time if will way",
           "about many then them"]
KNOB = "switchyard.routed_scaling_factor"
# Hostile vllm_xargs: (label, extra args or raw JSON text, what the message must name).
HOSTILE = [("boolean", {KNOB: True}, "routed_scaling_factor"),
           ("string", {KNOB: "2.5"}, "routed_scaling_factor"),
           ("NaN", f'{{"{KNOB}": NaN}}', "routed_scaling_factor"),
           ("unknown knob", {"switchyard.budget": 3}, "budget"),
           ("prefix case", {"Switchyard.routed_scaling_factor": 1.0},
            "switchyard.routed_scaling_factor"),
           ("1 MB key", {"switchyard." + "x" * 1_000_000: 1}, "unknown knob 'xxxx"),
           ("100,000-element list", {KNOB: [1.0] * 100_000}, "routed_scaling_factor")]


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, raw_xargs=None):
    """(status, answer bytes, seconds) of a POST of `body` (with `raw_xargs`, JSON text
    put in as vllm_xargs as it is: NaN is not JSON json.dumps would write)."""
    data = json.dumps(body)
    if raw_xargs is not None:
        data = data[:-1] + f', "vllm_xargs": {raw_xargs}}}'
    request = urllib.request.Request(url, data=data.encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, response.read(), time.monotonic() - start
    except urllib.error.HTTPError as error:
        return error.code, error.read(), time.monotonic() - start


class Server:
    """vllm.entrypoints.openai.api_server on 127.0.0.1 in a child process."""

    def __init__(self, model, log_path, env, core):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
             "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32",
             "--enforce-eager", "--max-model-len", "256", "--served-model-name", "tiny"],
            stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1",
                     VLLM_CPU_OMP_THREADS_BIND=str(core), **env))

    def wait_ready(self, timeout=400):
        deadline = time.time() + timeout
        while time.time() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                time.sleep(0.5)
        self.log.flush()
        print(open(self.log_path).read()[-4000:])
        return False

    def engine_rss_mb(self):
        """The resident memory of the largest process under the server (the engine)."""
        children, frontier = [], [self.process.pid]
        while frontier:
            pid = frontier.pop()
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    found = [int(x) for x in f.read().split()]
            except OSError:
                found = []
            children += found
            frontier += found
        sizes = []
        for pid in children:
            try:
                with open(f"/proc/{pid}/status") as f:
                    sizes += [int(line.split()[1]) / 1024 for line in f
                              if line.startswith("VmRSS:")]
            except OSError:
                pass
        return max(sizes, default=0.0)

    def stop(self):
        """SIGTERM to the API server, as an operator's stop; the rest is vLLM's."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def completion(prompt, xargs=None):
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0}
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return body


def flap_knobs_file(path, stop):
    """Rewrites the engine's knobs file until `stop`: valid, empty, cut short, a bool."""
    contents = ['{"routed_scaling_factor": 2.5}', "", '{"routed_scal',
                '{"routed_scaling_factor": true}', '{"routed_scaling_factor": 1.5}']
    rewrites = 0
    while not stop.wait(0.05):
        with open(path, "w") as f:
            f.write(contents[rewrites % len(contents)])
        rewrites += 1
    return rewrites


def percentiles(seconds):
    values = np.array(seconds) * 1000
    return np.percentile(values, 50), np.percentile(values, 99)


def run_load(server, plan):
    """Sends `plan` ([(kind, body, raw)]) at CONCURRENCY; [(kind, body, status, answer,
    seconds)] in plan order, and the engine RSS after the first WARMUP requests."""
    url = server.base + "/v1/completions"
    rss = {}

    def one(index):
        kind, body, raw = plan[index]
        status, answer, seconds = post(url, body, raw)
        if index == WARMUP:
            rss["warm"] = server.engine_rss_mb()
        return kind, body, status, answer, seconds

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        results = list(pool.map(one, range(len(plan))))
    return results, rss.get("warm", 0.0)


def answer_groups(results):
    """{(prompt, knobs): the set of answers} of the valid requests with knobs, and the
    keys with more than one answer."""
    groups = {}
    for kind, body, status, answer, _ in results:
        if kind == "valid" and status == 200 and body.get("vllm_xargs"):
            key = (body["prompt"], json.dumps(body["vllm_xargs"]))
            groups.setdefault(key, set()).add(json.loads(answer)["choices"][0]["text"])
    return groups, [key for key, texts in groups.items() if len(texts) > 1]


def batch_invariance(trace):
    """Per layer, the captured tokens whose logits equal another token's bit for bit
    (same prompt, routed in another step or batch): how many there are, and how many of
    them got different ids (a per-token policy: none)."""
    repeated = conflicts = 0
    for layer in trace.layers:
        first = {}
        for logits, ids in zip(trace.layer_logits(layer), trace.ids[layer]):
            key = logits.tobytes()
            if key in first:
                repeated += 1
                conflicts += int(not np.array_equal(first[key], ids))
            else:
                first[key] = ids
    return repeated, conflicts


def make_plan(requests, seed=0):
    """Valid requests (a prompt with no knob, or one of two knob values) and hostile
    ones (HOSTILE), shuffled; the two 1 MB bodies are sent once each."""
    rng = random.Random(seed)
    plan = []
    for i in range(requests):
        if i % 5 == 4:
            label, xargs, _ = HOSTILE[(i // 5) % len(HOSTILE)]
            if label in ("1 MB key", "100,000-element list") and any(
                    p[0] == label for p in plan):
                label, xargs, _ = HOSTILE[0]
            raw = xargs if isinstance(xargs, str) else None
            plan.append((label, completion(rng.choice(PROMPTS),
                                           None if raw else xargs), raw))
        else:
            knob = rng.choice([None, 1.0, 2.5])
            plan.append(("valid", completion(rng.choice(PROMPTS),
                                             None if knob is None else {KNOB: knob}), None))
    return plan


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--keep", help="keep the model, logs and trace here")
    args = parser.parse_args()
    try:
        import vllm  # noqa: F401
        from switchyard.trace import load_trace
    except ImportError as error:
        print(f"skipped: {error} (scripts/setup.sh installs vLLM into .venv-vllm)")
        return 77
    check = Checks()

    def expect(ok, what):
        return check(what, ok)

    tmp = args.keep or tempfile.mkdtemp(prefix="sy-soak-")
    os.makedirs(tmp, exist_ok=True)
    sys.path.insert(0, HERE)
    from make_model import make_model
    model = os.path.join(tmp, "deepseek_v3")
    if not os.path.exists(os.path.join(model, "config.json")):
        make_model("deepseek_v3", model, seed=1, experts=16, top_k=4)
    knobs_file = os.path.join(tmp, "knobs.json")
    with open(knobs_file, "w") as f:
        f.write('{"routed_scaling_factor": 2.5}')
    trace_dir = os.path.join(tmp, "trace")
    # Both servers start together (start-up is most of their cost), then run one at a time.
    # One core each (the last two the machine has: core 0 alone when it has one).
    cores = sorted(os.sched_getaffinity(0))
    native = Server(model, os.path.join(tmp, "native.log"), {}, cores[-1])
    served = Server(model, os.path.join(tmp, "switchyard.log"),
                    {"SWITCHYARD_POLICY": "deepseek_v3", "SWITCHYARD_CAPTURE": trace_dir,
                     "SWITCHYARD_KNOBS_FILE": knobs_file}, cores[-2] if len(cores) > 1
                    else cores[0])
    try:
        if not (expect(native.wait_ready() and served.wait_ready(), "both servers healthy")):
            return check.summary()
        valid = [p for p in make_plan(args.requests) if p[0] == "valid"]
        native_results, _ = run_load(native, valid[:args.requests // 3])
        stop = threading.Event()
        flapper = ThreadPoolExecutor(1).submit(flap_knobs_file, knobs_file, stop)
        start = time.monotonic()
        results, warm_rss = run_load(served, make_plan(args.requests))
        elapsed = time.monotonic() - start
        stop.set()
        rewrites = flapper.result()
        end_rss = served.engine_rss_mb()
    finally:
        native.stop()
        served.stop()   # SIGTERM with vLLM's default shutdown timeout
    statuses = sorted({r[2] for r in results})
    expect(all(r[2] < 500 for r in results) and all(r[2] == 200 for r in results
                                                   if r[0] == "valid"),
          f"{len(results)} requests in {elapsed:.0f} s, {rewrites} knobs-file rewrites: no "
          f"5xx, every valid request answered (statuses {statuses})")
    for label, _, named in HOSTILE:
        answers = [r for r in results if r[0] == label]
        bad = [(r[2], r[3][:300]) for r in answers
               if r[2] != 400 or named.encode() not in r[3] or len(r[3]) > BODY_BOUND]
        sizes = sorted({len(r[3]) for r in answers})
        expect(answers and not bad,
              f"hostile {label}: {len(answers)}× HTTP 400 naming {named!r}, bodies of "
              f"{sizes[-1] if sizes else 0} bytes at most" + (f"; got {bad[0]}" if bad else ""))
    groups, differing = answer_groups(results)
    native_groups, native_differing = answer_groups(native_results)
    print(f"identical requests (same prompt and knobs): {len(differing)} of {len(groups)} "
          f"groups with different tokens; the native server: {len(native_differing)} of "
          f"{len(native_groups)} (the engine's own numerics depend on the batch)")
    expect(0 < warm_rss and end_rss - warm_rss <= RSS_BOUND_MB,
          f"engine RSS {warm_rss:.0f} MB after {WARMUP} requests, {end_rss:.0f} MB at the "
          f"end (growth bound {RSS_BOUND_MB} MB)")
    with open(served.log_path) as f:
        log = f.read()
    expect(f"{knobs_file}: empty" in log and f"{knobs_file}: not JSON" in log
           and f"engine knobs from {knobs_file} now in force" in log,
           "the flapping knobs file: each reload and each bad file logged naming the file, "
           "the last good knobs kept, the server kept serving")
    ranks = sorted(os.listdir(trace_dir)) if os.path.isdir(trace_dir) else []
    trace = None
    if ranks:
        try:
            trace = load_trace(os.path.join(trace_dir, ranks[0]))
        except Exception as error:  # noqa: BLE001 - reported as the check's detail
            trace = f"{type(error).__name__}: {error}"
    expect(trace is not None and not isinstance(trace, str) and trace.num_tokens > 0,
           f"after SIGTERM to the server, the capture reads back: {ranks}, "
           f"{getattr(trace, 'num_tokens', trace)} tokens")
    if trace is not None and not isinstance(trace, str):
        repeated, conflicts = batch_invariance(trace)
        expect(repeated and not conflicts,
               f"routing per token: {repeated} tokens routed in different batches with "
               f"bit-identical logits got identical ids ({conflicts} did not)")
    n50, n99 = percentiles([r[4] for r in native_results])
    s50, s99 = percentiles([r[4] for r in results if r[0] == "valid"])
    print(f"latency of valid requests (ms, concurrency {CONCURRENCY}): native p50 {n50:.0f} "
          f"p99 {n99:.0f} ({len(native_results)} requests); switchyard p50 {s50:.0f} p99 "
          f"{s99:.0f} ({sum(r[0] == 'valid' for r in results)} requests, hostile ones "
          f"mixed in): p50 ratio {s50 / n50:.2f}")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
