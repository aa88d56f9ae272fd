"""What the live benchmarks (bench_ep_live.py, bench_memory.py) share: the `--hot`
expert sets of a drifting trace and the machine description stored with the numbers."""
import datetime
import os
import platform


class BenchError(RuntimeError):
    """A benchmark that cannot run or whose run breaks an invariant: the message says why."""


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


def machine(**extra):
    """The host the numbers were measured on, with `extra` fields."""
    return dict({"nproc": os.cpu_count(), "platform": platform.platform(),
                 "processor": platform.processor() or platform.machine(),
                 "python": platform.python_version(),
                 "date": datetime.datetime.now().isoformat(timespec="seconds")}, **extra)
