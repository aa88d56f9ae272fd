"""What the benchmarks in bench/ share (one module; none of it imports torch):

  paths      ROOT, and sys.path set up for the repository's helpers: test/support
             (policy_shapes, make_checkpoint), test/exec (the numpy references),
             scripts (gen_trace)
  machine    the host the numbers were measured on (CPU model, cores, load average,
             date, ...), stored with every JSON, and the header's load warning
  timing     Variant: a callable timed in calibrated batches of calls, wall and process
             CPU time per call, gc off inside a batch; after every batch `settle` waits,
             off the clock, until the process is idle and records the CPU the process
             burnt meanwhile (OpenMP workers spinning after a threaded call: torch's
             libgomp for milliseconds, the libomp of compiled code with threaded host
             loops for KMP_BLOCKTIME, 200 ms by default) as `after_batch_cpu_us`: a cost
             of the variant that a wall clock alone does not show;
             interleave: rounds of every variant in a shuffled order; summarize: the
             medians; OtherLoad: the share of the machine other processes used
  tools      run_tool: one run of a built tool (moe-exec, mpirun ...) with its wall
             time and the CPU time of the process and its children (every thread,
             spinning included), and a clear error when it fails or hangs
  inputs     parse_hot: the `--hot` expert sets of a drifting trace; BenchError
"""
import datetime
import gc
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (os.path.join(ROOT, "scripts"), os.path.join(ROOT, "test", "exec"),
              os.path.join(ROOT, "test", "support")):
    if _path not in sys.path:
        sys.path.insert(0, _path)   # test/support first, then test/exec, then scripts

NOISY_LOAD = 0.05   # other processes' share of the CPUs above which a row is marked


class BenchError(RuntimeError):
    """A benchmark that cannot run or whose run breaks an invariant: the message says why."""


# -- inputs --------------------------------------------------------------------------------
def add_checkpoint_args(ap, hidden, intermediate, experts, top_k, layers=4):
    """The executor benchmarks' model flags (a random checkpoint built at run time) and
    --build, with each benchmark's defaults."""
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build tree")
    ap.add_argument("--arch", default="qwen3_moe", help="checkpoint layout")
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--hidden", type=int, default=hidden)
    ap.add_argument("--intermediate", type=int, default=intermediate, help="expert width")
    ap.add_argument("--experts", type=int, default=experts)
    ap.add_argument("--top-k", type=int, default=top_k)


def parse_hot(text, experts, count=None):
    """'0,1,2,3:20,21,22,23' -> [[0, 1, 2, 3], [20, 21, 22, 23]]: the hot expert sets of
    the trace's phases (`count` of them when given)."""
    sets = [[int(e) for e in part.split(",")] for part in text.split(":")]
    if count is not None and len(sets) != count:
        raise BenchError(f"--hot {text!r}: give {count} hot sets separated by ':'")
    for hot in sets:
        if not hot or min(hot) < 0 or max(hot) >= experts:
            raise BenchError(f"--hot {text!r}: expert ids must be in [0, {experts})")
    return sets


# -- machine -------------------------------------------------------------------------------
def cpu_model():
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count()


def load_average():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine(**extra):
    """The host the numbers were measured on, with `extra` fields (library versions)."""
    return dict({"cpu": cpu_model(), "nproc": os.cpu_count(), "cores": os.cpu_count(),
                 "usable_cores": usable_cores(), "platform": platform.platform(),
                 "processor": platform.processor() or platform.machine(),
                 "python": platform.python_version(), "load_average": load_average(),
                 "date": datetime.datetime.now().isoformat(timespec="seconds")}, **extra)


def load_line(host, heavy="the multi-threaded variants most"):
    """The header line on the load average at start, with a warning when other work
    runs (over half the usable cores busy)."""
    load = (host.get("load_average") or [0.0])[0]
    busy = load > 0.5 * (host.get("usable_cores") or 1)
    return (f"Load average at start: {load:.2f}"
            + (f" -- other work is running: expect noisy, inflated numbers ({heavy})"
               if busy else ""))


# -- timing --------------------------------------------------------------------------------
def settle(limit_s=1.0):
    """Wait, outside any clock, until the process's other threads stop using the CPU;
    returns the CPU seconds the process used meanwhile (a threaded call's spinning tail).
    OpenMP workers spin after a parallel region; left alone, that spinning would take a
    core from, and add CPU time to, whichever variant runs next. (Spinning between the
    calls of one batch is that batch's own cost and stays in it.)"""
    deadline = time.perf_counter() + limit_s
    start = time.process_time()
    quiet = 0
    # Three idle milliseconds in a row: on a loaded machine a spinning worker can be
    # descheduled for one window and go on spinning after it.
    while quiet < 3 and time.perf_counter() < deadline:
        cpu = time.process_time()
        time.sleep(0.001)
        quiet = quiet + 1 if time.process_time() - cpu < 0.0002 else 0
    return time.process_time() - start


def time_batch(call, n):
    """(wall seconds, process CPU seconds) per call over `n` calls, gc off meanwhile (a
    collection inside one batch would land on whichever variant runs)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            call()
        wall1, cpu1 = time.perf_counter(), time.process_time()
    finally:
        if gc_was:
            gc.enable()
    return (wall1 - wall0) / n, (cpu1 - cpu0) / n


class Variant:
    """A callable timed in batches of `n` calls (n calibrated to about `batch_s`; at least
    one call). `before` runs before every batch, outside the clock (e.g. torch's thread
    count); `sync` after every call, inside it (e.g. torch.cuda.synchronize). measure()
    returns (wall s, CPU s) per call and the CPU s the process burnt after the batch
    (settle)."""

    def __init__(self, call, batch_s, before=None, sync=None):
        self.fn, self.batch_s, self.before, self.sync = call, batch_s, before, sync
        self.n = None

    def call(self):
        self.fn()
        if self.sync:
            self.sync()

    def measure(self):
        if self.before:
            self.before()
        if self.n is None:
            self.call()   # warm up (allocator, thread pool, caches)
            rough = min(time_batch(self.call, 1)[0], time_batch(self.call, 1)[0])
            self.n = max(1, int(self.batch_s / max(rough, 1e-7)))
        wall, cpu = time_batch(self.call, self.n)
        return wall, cpu, settle()


def interleave(variants, rounds, seed):
    """{name: [measure() per round]}: each round times every variant once, in an order
    shuffled per round (not rotated: a rotation keeps the same neighbours, and what runs
    before a variant matters), so that drift (frequency, other load) and what a variant
    leaves behind (caches, woken threads) fall on all variants alike."""
    names = list(variants)
    samples = {name: [] for name in names}
    order = random.Random(seed)
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            samples[name].append(variants[name].measure())
    return samples


def clock(values):
    """Seconds -> {median, min, samples} in microseconds."""
    us = [v * 1e6 for v in values]
    return {"median": statistics.median(us), "min": min(us), "samples": us}


def summarize(samples, n=None):
    """[(wall, cpu, after-batch cpu) per round] -> the medians in microseconds (wall and CPU
    per call, after_batch_cpu_us per batch, not per call)."""
    wall, cpu, after = zip(*samples)
    return {"calls_per_sample": n, "wall_us": clock(wall), "cpu_us": clock(cpu),
            "after_batch_cpu_us": clock(after)}


class OtherLoad:
    """How much of the machine other processes used between start() and stop(): the CPU
    time /proc/stat counts as busy on all CPUs, less this process's own, over wall time x
    the CPUs. Timings taken while this is high are inflated (multi-threaded variants
    most: a parallel region waits for a worker the other process holds off)."""

    TICK = 1.0 / os.sysconf("SC_CLK_TCK")

    @classmethod
    def _busy_seconds(cls):
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal (guest time is in user)
        return sum(fields[:8]) - fields[3] - fields[4] if len(fields) >= 8 else None

    def start(self):
        self.busy, self.own, self.wall = (self._busy_seconds(), time.process_time(),
                                          time.perf_counter())
        return self

    def stop(self):
        """The share (0..1) of all CPUs' time that other processes used, or None."""
        busy = self._busy_seconds()
        if busy is None or self.busy is None:
            return None
        others = (busy - self.busy) * self.TICK - (time.process_time() - self.own)
        span = (time.perf_counter() - self.wall) * os.cpu_count()
        return max(0.0, others / span) if span > 0 else None


# -- runs ----------------------------------------------------------------------------------
def guarded(name, main):
    """main()'s exit status, with the errors bad input or a missing build cause
    (BenchError, ImportError, ValueError, OSError, the switchyard package's errors)
    printed as `name: error: ...` and exit status 1 instead of a traceback."""
    try:
        return main()
    except (BenchError, ImportError, ValueError, OSError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if not type(e).__module__.startswith("switchyard"):
            raise
        print(f"{name}: error: {e}", file=sys.stderr)
        return 1


def in_workdir(name, prefix, keep, bench):
    """bench(work) in a fresh temporary directory, removed afterwards unless `keep`; a
    BenchError or ValueError is printed as `name: error: ...` and gives None."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        return bench(work)
    except (BenchError, ValueError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return None
    finally:
        if keep:
            print(f"work directory kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# -- tools ---------------------------------------------------------------------------------
def check_exe(exe):
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise BenchError(f"{exe} not found or not executable: build the project first "
                         "(scripts/build.sh) or pass --build")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class ToolRun:
    """A finished tool run: the CompletedProcess, its wall seconds and the CPU seconds of
    the process and every descendant it waited for (all threads: a threaded run shows
    CPU > wall, OpenMP workers' spinning included)."""

    def __init__(self, result, wall_s, cpu_s):
        self.result, self.wall_s, self.cpu_s = result, wall_s, cpu_s

    def json(self):
        return {"process_wall_s": self.wall_s, "process_cpu_s": self.cpu_s}


def run_tool(cmd, label, timeout_s, error=None, env=None, check=True):
    """Run `cmd` (capturing its output); a hang past `timeout_s` is a BenchError, and so is
    a non-zero exit when `check` (or error(message, output) when given, which returns the
    exception to raise)."""
    cpu0, wall0 = children_cpu(), time.perf_counter()
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                                env=env)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{label}: no result after {timeout_s} s: {' '.join(cmd)}")
    run = ToolRun(result, time.perf_counter() - wall0, children_cpu() - cpu0)
    if check and result.returncode != 0:
        text = result.stdout + result.stderr
        message = (f"{label} failed (exit status {result.returncode}): {' '.join(cmd)}\n"
                   f"{text[-3000:]}")
        raise error(message, text) if error else BenchError(message)
    return run
