"""What the GPU kit's packing (here) and run (on the GPU machine) agree on: the token
counts of the cases and how a case's inputs are fingerprinted."""
import argparse
import hashlib
import json

import numpy as np

# Every size class: one CTA (T <= 8 by default), the large-batch pair, its limits.
CASE_TOKENS = (1, 16, 64, 256, 1024, 1025, 4096)
# Where the CUDA-graph step re-parameterises knobs: one-CTA class and the large pair.
GRAPH_TOKENS = (1, 1024)
BENCH_TOKENS = (1, 16, 64, 256, 1024, 4096)
# topk_softmax beside the hand-written baselines (step_baselines.py): also 32 -> 33 (one
# CTA of 32 tokens to two: the cost of the grid-wide step) and 4224 (past 4096).
BASELINE_VARIANT = "topk_softmax"
BASELINE_TOKENS = (1, 16, 32, 33, 64, 256, 1024, 1025, 4096, 4224)


def input_digest(tokens, arrays):
    """SHA-256 of a case's token count and ABI input arrays (dtype, shape, bytes)."""
    h = hashlib.sha256(str(int(tokens)).encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def step_arguments(doc=None):
    """A kit step's parser: --kit KIT and --json FILE (add the step's own options)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--kit", required=True)
    ap.add_argument("--json", required=True)
    return ap


def save(path, results):
    """Writes a step's results (after every case: a time-out keeps what finished)."""
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


def finish(path, results):
    """Saves the results, prints the tally and returns the step's exit status."""
    save(path, results)
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0
