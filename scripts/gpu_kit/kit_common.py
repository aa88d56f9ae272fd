"""What the GPU kit's packing (here) and run (on the GPU machine) agree on: the token
counts of the cases and how a case's inputs are fingerprinted."""
import hashlib

import numpy as np

# Every size class: one CTA (T <= 8 by default), the large-batch pair, its limits.
CASE_TOKENS = (1, 16, 64, 256, 1024, 1025, 4096)
# Where the CUDA-graph step re-parameterises knobs: one-CTA class and the large pair.
GRAPH_TOKENS = (1, 1024)
BENCH_TOKENS = (1, 16, 64, 256, 1024, 4096)


def input_digest(tokens, arrays):
    """SHA-256 of a case's token count and ABI input arrays (dtype, shape, bytes)."""
    h = hashlib.sha256(str(int(tokens)).encode())
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
