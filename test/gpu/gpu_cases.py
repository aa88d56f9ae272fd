"""What the GPU tests share (test_gpu.py, test_cuda_on_host.py): random inputs for a
router, its inputs and results laid out in the generated code's ABI order (to call a
kernel or launcher through ctypes), the comparison with the host target and the tally.
"""
import json

import numpy as np

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "int8": np.uint8}


def entry_info(switchyard, policy, entry, **shape):
    """The entry `entry` of a policy file bound to `shape`, as `moe-run --list` describes
    it (switchyard.list_entries): experts, top_k, arguments (name, kind, dtype, shape)."""
    return next(e for e in switchyard.list_entries(policy, **shape) if e["name"] == entry)


def example_inputs(info, tokens, rng):
    """Random inputs for every argument of a router (`info` as entry_info() returns
    it): normal logits, a small correction bias, requests of 4 tokens (every third
    token its request's own, the others drafts), decode phase, and the identity
    placement (expert e on slot e) with the spare slots replicating experts 0, 1, ..."""
    experts = info["experts"]
    values = {"logits": rng.standard_normal((tokens, experts)).astype(np.float32),
              "resident": rng.random(experts) < 0.5,
              "bias": (0.01 * rng.standard_normal(experts)).astype(np.float32),
              "request_ids": (np.arange(tokens) // 4).astype(np.int32),
              "draft_mask": (np.arange(tokens) % 3 != 0).astype(np.int32),
              "phase": 1,
              "placement": np.arange(experts, dtype=np.int32).reshape(experts, 1)}
    for p in info["arguments"]:
        if p["kind"] == "placement" and p["shape"][1] > 1:
            spare = p["shape"][1] - 1  # slots - experts
            table = np.full((experts, 2), -1, np.int32)
            table[:, 0] = np.arange(experts)
            table[np.arange(spare) % experts, 1] = experts + np.arange(spare)
            values["placement"] = table
    for p in info["arguments"]:  # dense inputs of other shapes (hidden states, weights)
        if p["name"] not in values and p["dtype"] == "float32":
            shape = tuple(tokens if d == "?" else d for d in p["shape"])
            values[p["name"]] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    return {p["name"]: values[p["name"]] for p in info["arguments"]}


def _placement(value, table_param):
    """Replica counts [E] and the -1 padded log2phy table [E, R] of a placement."""
    experts, width = table_param["shape"]
    table = np.asarray(value, dtype=np.int32).reshape(experts, -1)
    padded = np.full((experts, width), -1, dtype=np.int32)
    padded[:, :table.shape[1]] = table
    return (padded >= 0).sum(axis=1).astype(np.int32), padded


def abi_buffers(router, inputs):
    """The token count, the input arrays in the entry's parameter order (a placement as
    replica counts then log2phy; scalars left out) and zeroed result arrays (name ->
    array, in order) for a call of `router` (a switchyard.Router) on well-formed
    `inputs` (the host router checks them when it runs the same inputs)."""
    return abi_arrays(json.loads(router.signature.to_json())["params"], result_shape, inputs)


def result_shape(param, tokens):
    """The shape of result `param` (a signature parameter) for `tokens` tokens, as
    switchyard.Router.result_shape computes it (no built package needed)."""
    a, b, d = param["size_rule"]
    return [-(-(a * tokens + b) // d) if s < 0 else s for s in param["shape"]]


def abi_arrays(params, shape_of, inputs):
    """abi_buffers() from a signature's parameters and a result-shape function
    (param, tokens) -> shape: what the GPU kit runs where the package is not built."""
    tokens = 0
    for p in params:
        if p["role"] == "in" and p["shape"] and p["shape"][0] < 0 \
                and list(p["size_rule"]) == [1, 0, 1]:
            tokens = int(np.shape(inputs[p["name"]])[0])
            break
    arrays = []
    for i, p in enumerate(params):
        if p["role"] != "in" or p["kind"] in ("scalar", "placement_log2phy"):
            continue
        if p["kind"] == "placement_replicas":
            arrays += _placement(inputs[p["name"].split(".")[0]], params[i + 1])
            continue
        dtype = _DTYPES[p["dtype"]]
        arrays.append(np.ascontiguousarray(np.asarray(inputs[p["name"]]).astype(dtype)))
    outputs = {p["name"]: np.zeros(shape_of(p, tokens), dtype=_DTYPES[p["dtype"]])
               for p in params if p["role"] == "out"}
    return tokens, arrays, outputs


def differing_outputs(expected, got):
    """Names of the outputs that differ: exactly, except weights (float outputs, within
    1e-5)."""
    bad = []
    for key, want in expected.items():
        have = np.asarray(got[key]).astype(want.dtype)
        same = (have.shape == want.shape and np.allclose(have, want, atol=1e-5)
                if np.issubdtype(want.dtype, np.floating)
                else have.shape == want.shape and np.array_equal(have, want))
        if not same:
            bad.append(key)
    return bad


class CaseTally:
    """Prints one line per checked case and the closing `N passed, M failed` line."""

    def __init__(self):
        self.passed = self.failed = 0

    def record(self, label, bad):
        if bad:
            self.failed += 1
            print(f"FAIL {label}: {', '.join(bad)} differ from the host target")
        else:
            self.passed += 1
            print(f"ok   {label}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def baseline_differences(name, expected, got, block=64):
    """What differs between a hand-written baseline's outputs (bench/gpu_baselines) and
    the host router's, as (output, message) pairs: everything exactly (weights within
    1e-5), but for `prod3` (atomic cursors) only which slots each expert's segment of
    sorted_token_ids holds."""
    bad = []
    for key, want in expected.items():
        have = got[key]
        if key == "topk_weights":
            if not np.allclose(have, want, atol=1e-5, rtol=0):
                bad.append((key, f"max error {np.abs(have - want).max():g}"))
        elif key == "sorted_token_ids" and name == "prod3":
            # Atomic cursors: each expert's segment holds the same slots, in any order.
            padded = int(expected["num_tokens_post_padded"][0])
            starts = range(0, padded, block)
            experts = expected["expert_ids"]
            for e in np.unique(experts[experts >= 0]):
                rows = [s for s, x in zip(starts, experts) if x == e]
                seg = lambda a: np.sort(np.concatenate([a[s:s + block] for s in rows]))  # noqa: E731
                if not np.array_equal(seg(have), seg(want)):
                    bad.append((key, f"expert {e}'s segment holds other slots"))
                    break
            if not np.array_equal(have[padded:], want[padded:]):
                bad.append((key, "the sentinels after the padded total differ"))
        elif not np.array_equal(have.reshape(want.shape), want):
            bad.append((key, f"{np.count_nonzero(have.reshape(want.shape) != want)} "
                             f"of {want.size} differ"))
    return bad


def alternative_knobs(router, inputs, default_out):
    """A setting of the router's knobs other than the default that changes its outputs
    on `inputs` (the first that does; else the first valid one), with those outputs."""
    first = None
    for name, knob in router.knobs.items():
        d = knob.default
        if knob.is_float:
            values = (d * 0.5, d * 0.25, d * 2, d * 4, 0.1, 0.0)
        else:
            d = int(d)
            values = (d // 2, d + 1, 1, 2, 0, 4 * d, 64)
        for value in values:
            if value == d:
                continue
            try:
                out = router(**inputs, knobs={name: value})
            except Exception:
                continue
            candidate = ({name: value}, out)
            first = first or candidate
            if any(not np.array_equal(np.asarray(out[k]), np.asarray(v))
                   for k, v in default_out.items() if k in out):
                return candidate
    return first


# Inputs with a row per token: a knob group's rows of them form its batch.
PER_TOKEN = ("logits", "request_ids", "positions", "draft_mask")


def expected_by_groups(host, inputs, group_of, settings, groups):
    """The host's routing (`host`: an entry returning topk_ids / topk_weights) of a batch
    in knob groups: each group's rows (a token's group outside [0, groups) is group 0)
    routed as a batch of their own with its knobs (`settings[g]`)."""
    tokens = len(group_of)
    k = host.result_shape("topk_ids", 1)[1]
    out = {"topk_ids": np.zeros((tokens, k), np.int32),
           "topk_weights": np.zeros((tokens, k), np.float32)}
    effective = np.where((group_of >= 0) & (group_of < groups), group_of, 0)
    for g, knobs in enumerate(settings):
        rows = np.flatnonzero(effective == g)
        if not len(rows):
            continue
        values = {n: (v[rows] if n in PER_TOKEN else v) for n, v in inputs.items()}
        routed = host(**values, knobs=knobs)
        for name in out:
            out[name][rows] = np.asarray(routed[name])
    return out
