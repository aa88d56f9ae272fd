#!/usr/bin/python3
"""Self-check of reference.py: tiny cases worked out by hand (see the comments), plus a
few property checks between policies.  Run: /usr/bin/python3 test/exec/test_reference.py
Prints 'N passed, M failed' and exits non-zero on any failure."""

import math
import os
import sys
import traceback

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as R  # noqa: E402

F32 = np.float32
INF = float("inf")
NAN = float("nan")


def arr(x, dt=F32):
    return np.array(x, dtype=dt)


def logit_of_probs(p):
    """Logits whose softmax is p (up to float32 rounding)."""
    return np.log(np.array(p, dtype=np.float64)).astype(F32)


def logit_of_sigmoid(s):
    """Logits whose sigmoid is s (up to float32 rounding)."""
    s = np.array(s, dtype=np.float64)
    return np.log(s / (1.0 - s)).astype(F32)


def eq(a, b, msg=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and np.array_equal(a, b), \
        "%s\n got      %s\n expected %s" % (msg, a.tolist(), b.tolist())


def close(a, b, atol=2e-6, msg=""):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    # NaN matches NaN (a NaN probability row gives NaN weights).
    assert a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=0, equal_nan=True), \
        "%s\n got      %s\n expected %s" % (msg, a.tolist(), b.tolist())


def sel(E, members):
    s = np.zeros(E, dtype=bool)
    s[list(members)] = True
    return s


def check_result(r, ids, weights, E, selected=None, counts=None):
    eq(r["topk_ids"], arr(ids, np.int32), "topk_ids")
    assert r["topk_ids"].dtype == np.int32 and r["topk_weights"].dtype == np.float32
    close(r["topk_weights"], arr(weights), msg="topk_weights")
    if selected is not None:
        eq(r["selected"], sel(E, selected), "selected")
        assert r["selected"].dtype == bool
    else:
        assert "selected" not in r
    if counts is None:
        counts = np.zeros(E, dtype=np.int32)
        for e in np.asarray(ids).reshape(-1):
            if e >= 0:
                counts[e] += 1
    eq(r["expert_counts"], arr(counts, np.int32), "expert_counts")
    assert r["expert_counts"].dtype == np.int32


def sig(a, b):
    """a / (a + b) for positive a, b: the renormalized weight of two experts."""
    return a / (a + b)


TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


# ------------------------------------------------------------------------ helpers ----

@test
def rank_ties_and_nan():
    # 3 at ids 1 and 2 tie -> 1 first; NaN ranks below -inf.
    eq(R.rank_desc(arr([1, 3, 3, NAN, -INF, 2])), [1, 2, 5, 0, 4, 3])
    eq(R.rank_desc(arr([NAN, -INF])), [1, 0])
    eq(R.rank_desc(arr([NAN, NAN, 0])), [2, 0, 1])
    eq(R.rank_desc(arr([-0.0, 0.0])), [0, 1])  # -0 == +0: a tie
    eq(R.rank_desc(arr([5, 5, 5, 5])), [0, 1, 2, 3])


@test
def softmax_rules():
    close(R.softmax_rows(arr([[0, 0, 0, 0]])), [[0.25] * 4], atol=0)
    # exp(0 - 0) = 1, exp(-inf) = 0 -> [1, 0, 0]
    eq(R.softmax_rows(arr([[0, -INF, -INF]])), arr([[1, 0, 0]]))
    # all -inf -> zeros, not NaN
    eq(R.softmax_rows(arr([[-INF, -INF, -INF]])), arr([[0, 0, 0]]))
    # a NaN makes the row's sum NaN, hence the whole row NaN
    assert np.all(np.isnan(R.softmax_rows(arr([[0, NAN, 1]]))))
    # [ln 1, ln 3] -> [0.25, 0.75]
    close(R.softmax_rows(arr([[0, math.log(3)]])), [[0.25, 0.75]])


@test
def softmax_matches_scalar_loop():
    # The vectorized softmax equals a scalar float32 loop exactly.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((7, 33)) * 4).astype(F32)
    p = R.softmax_rows(x)
    for t in range(7):
        m = F32(-np.inf)
        for v in x[t]:
            m = v if v > m else m
        ex = [F32(math.exp(float(F32(v - m)))) for v in x[t]]
        s = F32(0)
        for v in ex:
            s = F32(s + v)
        eq(p[t], arr([F32(v / s) for v in ex]))


@test
def sigmoid_rules():
    eq(R.sigmoid(arr([0, -INF, INF])), arr([0.5, 0, 1]))
    close(R.sigmoid(arr([math.log(3)])), [0.75])


@test
def batch_sum_is_sequential_float32():
    # 1e8 + 1 rounds back to 1e8 in float32 (spacing 8), then - 1e8 -> 0 (not 1).
    eq(R.batch_sum(arr([[1e8], [1], [-1e8]])), arr([0]))
    eq(R.batch_sum(arr([[1, 2], [3, 4]])), arr([4, 6]))


@test
def active_experts_list():
    lst, n = R.active_experts(arr([0, 2, 0, 1], np.int32))
    eq(lst, arr([1, 3, -1, -1], np.int32))
    eq(n, arr([2], np.int32))
    lst, n = R.active_experts(arr([0, 0, 0], np.int32))
    eq(lst, arr([-1, -1, -1], np.int32))
    eq(n, arr([0], np.int32))
    assert lst.dtype == np.int32 and n.dtype == np.int32


@test
def expert_counts_skip_minus_one():
    eq(R.expert_counts(arr([[2, -1], [2, 0]], np.int32), 3), arr([1, 0, 2], np.int32))


@test
def align_block_size_worked_example():
    # ids [[2,0],[2,1],[0,2]]: slots s=t*k+j -> s0:e2 s1:e0 s2:e2 s3:e1 s4:e0 s5:e2.
    # E=4, block 2: length 6 + 4*1 = 10, 5 blocks, sentinel 6.
    # e0 slots [1,4] -> [1,4] (block 0); e1 [3] -> [3,6] (block 1);
    # e2 [0,2,5] -> [0,2,5,6] (blocks 2,3); e3 nothing.  Total 8; tail = 6.
    s, e, n = R.align_block_size(arr([[2, 0], [2, 1], [0, 2]], np.int32), 4, 2)
    eq(s, arr([1, 4, 3, 6, 0, 2, 5, 6, 6, 6], np.int32))
    eq(e, arr([0, 1, 2, 2, -1], np.int32))
    eq(n, arr([8], np.int32))
    assert s.dtype == e.dtype == n.dtype == np.int32


@test
def align_block_size_minus_one_and_block_one():
    # [[1,-1]], E=2, block 4: length 2 + 2*3 = 8, 2 blocks, sentinel 2.
    # e1: slot 0 -> [0,2,2,2] (block 0); the -1 slot is skipped.
    s, e, n = R.align_block_size(arr([[1, -1]], np.int32), 2, 4)
    eq(s, arr([0, 2, 2, 2, 2, 2, 2, 2], np.int32))
    eq(e, arr([1, -1], np.int32))
    eq(n, arr([4], np.int32))
    # block 1: no padding; [[1,0]] -> e0: slot 1, e1: slot 0.
    s, e, n = R.align_block_size(arr([[1, 0]], np.int32), 2, 1)
    eq(s, arr([1, 0], np.int32))
    eq(e, arr([0, 1], np.int32))
    eq(n, arr([2], np.int32))
    # empty batch: everything is padding
    s, e, n = R.align_block_size(np.zeros((0, 2), np.int32), 3, 2)
    eq(s, arr([0, 0, 0], np.int32))
    eq(e, arr([-1, -1], np.int32))
    eq(n, arr([0], np.int32))


# ------------------------------------------------------------------ topk_softmax ----

@test
def topk_softmax_basic():
    # logits [1,3,2,0], k=2: experts 1 (z=3), 2 (z=2); weights e^3/(e^3+e^2) = 1/(1+e^-1).
    r = R.topk_softmax(arr([[1, 3, 2, 0]]), 2)
    w = 1 / (1 + math.exp(-1))
    check_result(r, [[1, 2]], [[w, 1 - w]], 4, selected=[1, 2])


@test
def topk_softmax_ties_and_union():
    # all-equal logits: ties to the lower id -> [0,1], weights 1/2 each.
    r = R.topk_softmax(arr([[0, 0, 0, 0]]), 2)
    check_result(r, [[0, 1]], [[0.5, 0.5]], 4, selected=[0, 1])
    # two tokens, k=1: union {0, 3}; each weight 1.
    r = R.topk_softmax(arr([[5, 0, 0, 0], [0, 0, 0, 5]]), 1)
    check_result(r, [[0], [3]], [[1], [1]], 4, selected=[0, 3], counts=[1, 0, 0, 1])


@test
def topk_softmax_neg_inf():
    # [0,-inf,-inf,-inf]: routing ranks the logits, and a -inf logit is not eligible,
    # so only expert 0 is: [0, -1] with weights [1, 0].  The union of top-k still ranks
    # every logit (-inf included, ties to the lower id): {0, 1}.
    r = R.topk_softmax(arr([[0, -INF, -INF, -INF]]), 2)
    check_result(r, [[0, -1]], [[1, 0]], 4, selected=[0, 1], counts=[1, 0, 0, 0])
    # all -inf: no eligible expert -> [-1, -1] / [0, 0]; the union is still {0, 1}.
    r = R.topk_softmax(arr([[-INF] * 4]), 2)
    check_result(r, [[-1, -1]], [[0, 0]], 4, selected=[0, 1], counts=[0, 0, 0, 0])
    # Two of four -inf, k = 4: [2, 0, -1, -1]; weights e^1/(e^1+1), 1/(e^1+1), 0, 0.
    r = R.topk_softmax(arr([[0, -INF, 1, -INF]]), 4)
    w = 1 / (1 + math.exp(-1))
    check_result(r, [[2, 0, -1, -1]], [[w, 1 - w, 0, 0]], 4, selected=[0, 1, 2, 3])


@test
def topk_softmax_k_equals_E():
    # [3,1,2,0], k=4: order 0,2,1,3; weights = the softmax itself.
    x = [3, 1, 2, 0]
    z = sum(math.exp(v) for v in x)
    r = R.topk_softmax(arr([x]), 4)
    check_result(r, [[0, 2, 1, 3]], [[math.exp(3) / z, math.exp(2) / z,
                                      math.exp(1) / z, math.exp(0) / z]],
                 4, selected=[0, 1, 2, 3])


@test
def topk_softmax_nan_row():
    # Routing ranks the logits: the NaN expert is not eligible, the others are: [3, 2].
    # The NaN logit makes the whole probability row NaN, so the weights are NaN (their
    # sum is NaN, not > 0: no renormalization).  The union ranks NaN last: {2, 3}.
    r = R.topk_softmax(arr([[0, NAN, 1, 2]]), 2)
    check_result(r, [[3, 2]], [[NAN, NAN]], 4, selected=[2, 3], counts=[0, 0, 1, 1])
    assert np.all(np.isnan(r["topk_weights"]))


# ------------------------------------------------------------------- deepseek_v3 ----

@test
def deepseek_groups_and_bias():
    # logits 0 -> s = 0.5 everywhere.  E=8, 4 groups of 2, keep 2, k=2.
    # bias [.1,0, 0,0, .3,0, .2,.2] -> b = [.6,.5 | .5,.5 | .8,.5 | .7,.7]
    # group scores (top-2 sums): 1.1, 1.0, 1.3, 1.4 -> keep groups 3, 2 (experts 4..7).
    # top-2 by b among 4..7: 4 (.8), then 6/7 tie (.7) -> 6.  Expert 0 (b=.6) is out.
    # weights: s = .5, .5 -> .5, .5 -> x2.5 = 1.25, 1.25.
    bias = arr([.1, 0, 0, 0, .3, 0, .2, .2])
    r = R.deepseek_v3(arr([[0] * 8]), bias, k=2, groups=4, topk_groups=2)
    check_result(r, [[4, 6]], [[1.25, 1.25]], 8)
    # Same, but logit[6] = ln 3 -> s6 = .75, b6 = .95: group 3 = 1.65, keep 3, 2;
    # top-2 by b: 6 (.95), 4 (.8); weights s: .75, .5 -> .6, .4 -> x2.5 = 1.5, 1.0.
    x = arr([[0, 0, 0, 0, 0, 0, math.log(3), 0]])
    r = R.deepseek_v3(x, bias, k=2, groups=4, topk_groups=2)
    check_result(r, [[6, 4]], [[1.5, 1.0]], 8)


@test
def deepseek_group_score_is_top2_sum():
    # E=8, 2 groups of 4, keep 1.  b = [.9,0,0,0 | .6,.6,0,0] (s = .5, bias = b - .5).
    # top-2 sums: group 0 = .9, group 1 = 1.2 -> keep group 1, although expert 0 has
    # the largest b.  top-2: 4, 5 (tie -> lower first); weights 1.25, 1.25.
    bias = arr([.4, -.5, -.5, -.5, .1, .1, -.5, -.5])
    r = R.deepseek_v3(arr([[0] * 8]), bias, k=2, groups=2, topk_groups=1)
    check_result(r, [[4, 5]], [[1.25, 1.25]], 8)


@test
def deepseek_group_ties():
    # all equal: every group scores 1.0 -> keep groups 0, 1 -> experts 0..3 -> [0, 1].
    r = R.deepseek_v3(arr([[0] * 8]), arr([0] * 8), k=2, groups=4, topk_groups=2)
    check_result(r, [[0, 1]], [[1.25, 1.25]], 8)


@test
def deepseek_fewer_than_k_eligible():
    # One group; bias -inf makes b = -inf for experts 1, 2 -> ineligible.
    # b = [.5, -inf, -inf, .5], k=3 -> [0, 3, -1]; weights .5,.5 -> x2.5 = 1.25, 1.25, 0.
    r = R.deepseek_v3(arr([[0] * 4]), arr([0, -INF, -INF, 0]), k=3, groups=1,
                      topk_groups=1)
    check_result(r, [[0, 3, -1]], [[1.25, 1.25, 0]], 4, counts=[1, 0, 0, 1])


@test
def deepseek_default_shape():
    # DeepSeek-V3's own shape runs and each token gets 8 distinct experts from at most
    # 4 groups; the weights sum to 2.5.
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 256)).astype(F32)
    r = R.deepseek_v3(x, (rng.standard_normal(256) * 0.05).astype(F32))
    ids = r["topk_ids"]
    assert ids.shape == (5, 8)
    for t in range(5):
        assert len(set(ids[t].tolist())) == 8 and len(set((ids[t] // 32).tolist())) <= 4
    close(r["topk_weights"].sum(axis=1), [2.5] * 5, atol=1e-5)
    assert r["expert_counts"].sum() == 40


# -------------------------------------------------------------------------- lynx ----

@test
def lynx_worked_example():
    # E=6, k=2, alpha=2, beta=4, theta=1, decode, T = B = 2.
    # t0 = [4,3,0,0,0,0]: top [0,1]; q1 = floor(2*1) = 2 (bin -2), others min(8,4)=4.
    #     second choice bin -2 <= -1 -> confident, keeps expert 0.
    # t1 = [0,0,0,3,2.8,0]: top [3,4]; q4 = floor(2*.2) = 0 -> not confident.
    # s = [2^0, 2^-2, 0, 2^0, 2^0, 0] = [1, .25, 0, 1, 1, 0]
    # kept = {0} U {s >= 1} = {0, 3, 4}.
    # t0 within kept: 0 (z=4), then 3/4 tie (z=0) -> 3: e^4/(e^4+1).
    # t1 within kept: 3, 4: e^3/(e^3+e^2.8) = 1/(1+e^-.2).
    x = arr([[4, 3, 0, 0, 0, 0], [0, 0, 0, 3, 2.8, 0]])
    r = R.lynx(x, 1, 2, alpha=2.0, beta=4, theta=1.0)
    a = sig(math.exp(4), 1)
    b = 1 / (1 + math.exp(-0.2))
    check_result(r, [[0, 3], [3, 4]], [[a, 1 - a], [b, 1 - b]], 6, selected=[0, 3, 4])
    # prefill (phase 0) or too many tokens: plain softmax top-2, union of top-2.
    c = 1 / (1 + math.exp(-1))
    for phase, mt in ((0, 256), (2, 256), (1, 1)):
        r = R.lynx(x, phase, 2, alpha=2.0, beta=4, theta=1.0, max_tokens=mt)
        check_result(r, [[0, 1], [3, 4]], [[c, 1 - c], [b, 1 - b]], 6,
                     selected=[0, 1, 3, 4])


@test
def lynx_grow_to_k():
    # Same batch, theta = 10: only the anchor {0} is kept; grow by descending
    # s = [1, .25, 0, 1, 1, 0] -> 0 is in, then 3 (ties 3/4 -> 3): kept {0, 3}.
    # t0: [0, 3], e^4/(e^4+1); t1: [3, 0], e^3/(e^3+1).
    x = arr([[4, 3, 0, 0, 0, 0], [0, 0, 0, 3, 2.8, 0]])
    r = R.lynx(x, 1, 2, alpha=2.0, beta=4, theta=10.0)
    a = sig(math.exp(4), 1)
    b = sig(math.exp(3), 1)
    check_result(r, [[0, 3], [3, 0]], [[a, 1 - a], [b, 1 - b]], 6, selected=[0, 3])


@test
def lynx_bin_boundary():
    # t0 = [1, .5, 0, 0]: gap .5 * alpha 2 = 1 exactly -> q = 1 -> confident.
    # t1 = [0, 0, 0, 1]: top [3, 0]; q0 = 2 -> confident.  B = 2.
    # s0 = 1 + 2^-2 = 1.25, s1 = 2^-1 = .5, s3 = 1 -> kept {0, 3}.
    # t0: [0, 3] e^1/(e^1+1); t1: [3, 0] same.
    w = 1 / (1 + math.exp(-1))
    r = R.lynx(arr([[1, .5, 0, 0], [0, 0, 0, 1]]), 1, 2)
    check_result(r, [[0, 3], [3, 0]], [[w, 1 - w], [w, 1 - w]], 4, selected=[0, 3])
    # gap .49 -> q = floor(.98) = 0: t0 not confident, s1 = 1 -> kept {0, 1, 3}.
    # t0: [0, 1] e^1/(e^1+e^.51); t1: [3, 0].
    r = R.lynx(arr([[1, .51, 0, 0], [0, 0, 0, 1]]), 1, 2)
    a = sig(math.exp(1), math.exp(0.51))
    check_result(r, [[0, 1], [3, 0]], [[a, 1 - a], [w, 1 - w]], 4, selected=[0, 1, 3])


@test
def lynx_batch_size_base():
    # T = B = 4, E = 6, k = 2.  Token t in 0..3: z[t] = 2, z[5] = 1.5 (q = 1, bin -1),
    # others 0 (q = 4).  Every token is confident: anchors {0,1,2,3}.
    # s5 = 4 * 4^-1 = 1.0 >= theta -> kept {0,1,2,3,5}; each token -> [t, 5],
    # weights 1/(1+e^-.5).
    x = np.zeros((4, 6), dtype=F32)
    for t in range(4):
        x[t, t] = 2
        x[t, 5] = 1.5
    r = R.lynx(x, 1, 2)
    w = 1 / (1 + math.exp(-0.5))
    check_result(r, [[t, 5] for t in range(4)], [[w, 1 - w]] * 4, 6,
                 selected=[0, 1, 2, 3, 5], counts=[1, 1, 1, 1, 0, 4])
    # Token 3 votes for expert 4 instead: s5 = .75 < 1, s4 = .25 -> kept {0,1,2,3}.
    # t0 -> [0, 1] (the rest tie at z = 0, lowest id), t1 -> [1, 0], t2 -> [2, 0],
    # t3 -> [3, 0]; weights e^2/(e^2+1).
    x[3, 5] = 0
    x[3, 4] = 1.5
    r = R.lynx(x, 1, 2)
    a = sig(math.exp(2), 1)
    check_result(r, [[0, 1], [1, 0], [2, 0], [3, 0]], [[a, 1 - a]] * 4, 6,
                 selected=[0, 1, 2, 3])


@test
def lynx_neg_inf():
    # t0 = [0,-inf,-inf,-inf]: top [0, 1]; q1 = beta (inf gap) -> confident.
    # t1 = [-inf,-inf,-inf,0]: top [3, 0] -> confident.  B = 2:
    # s = [1 + 2^-4, 2^-4, 0, 1]; kept = {0, 3}.  The remapper ranks the logits and a
    # -inf logit is not eligible: t0 -> [0, -1] with weights [1, 0] (expert 3's logit
    # is -inf for t0), t1 -> [3, -1] with [1, 0].
    r = R.lynx(arr([[0, -INF, -INF, -INF], [-INF, -INF, -INF, 0]]), 1, 2)
    check_result(r, [[0, -1], [3, -1]], [[1, 0], [1, 0]], 4, selected=[0, 3])
    # all -inf row: q = 0 everywhere (every expert equals the row max) -> not
    # confident; s = [1, 1, 0, 0] -> kept {0, 1}; no eligible expert -> [-1, -1].
    r = R.lynx(arr([[-INF] * 4]), 1, 2)
    check_result(r, [[-1, -1]], [[0, 0]], 4, selected=[0, 1])
    # Outside decode (plain path) the same: -inf is not eligible, the union keeps it.
    r = R.lynx(arr([[0, -INF, -INF, -INF], [-INF, -INF, -INF, 0]]), 0, 2)
    check_result(r, [[0, -1], [3, -1]], [[1, 0], [1, 0]], 4, selected=[0, 1, 3])


@test
def lynx_nan_logit():
    # t0 = [NaN, 1, .8, 0]: top by z [1, 2] (NaN ranks last); q2 = floor(2*.2) = 0 ->
    #     not confident; the NaN expert's gap is NaN -> q = beta (it is not in the top-2
    #     anyway).
    # t1 = [0, 0, 0, 1]: top [3, 0], q0 = 2 -> confident (anchor 3).  B = 2:
    # s = [2^-2, 1, 1, 1] -> kept = {3} U {1, 2, 3}.
    # Remapper (ranks logits): t0 within kept -> [1, 2] (the NaN expert is not eligible
    # and not kept); its softmax row is all NaN, so its weights are NaN.  t1: 3, then 1
    # (tie 1/2 at z = 0): e^1/(e^1+1).
    r = R.lynx(arr([[NAN, 1, .8, 0], [0, 0, 0, 1]]), 1, 2)
    w = 1 / (1 + math.exp(-1))
    check_result(r, [[1, 2], [3, 1]], [[NAN, NAN], [w, 1 - w]], 4, selected=[1, 2, 3])


@test
def lynx_all_equal():
    # T=1: all bins 0, no confident token; s = [1, 1, 0, 0] -> kept {0, 1}; [0, 1], .5/.5
    r = R.lynx(arr([[0, 0, 0, 0]]), 1, 2)
    check_result(r, [[0, 1]], [[.5, .5]], 4, selected=[0, 1])


@test
def lynx_k_equals_E():
    # k = E: the kept set is grown to all experts, so routing equals plain top-k.
    x = arr([[3, 1, 2, 0], [0, 1, 2, 3]])
    r = R.lynx(x, 1, 4)
    p = R.topk_softmax(x, 4)
    eq(r["topk_ids"], p["topk_ids"])
    eq(r["topk_weights"], p["topk_weights"])
    eq(r["selected"], sel(4, range(4)))


# ------------------------------------------------------------------------ xshare ----

# p rows given directly (logits = ln p); E = 6.
P0 = [0.5, 0.2, 0.15, 0.05, 0.05, 0.05]
P1 = [0.05, 0.3, 0.05, 0.5, 0.05, 0.05]


@test
def xshare_worked_example():
    # k=2, k0=1, budget=1.  S0 = {0, 3} (top-1s).  mass = [.55, .5, .2, .55, .1, .1];
    # best outside S0: 1 -> S = {0, 1, 3}.
    # t0 within S: 0 (.5), 1 (.2) -> 5/7, 2/7.  t1: 3 (.5), 1 (.3) -> .625, .375.
    r = R.xshare(logit_of_probs([P0, P1]), 2, k0=1, budget=1)
    check_result(r, [[0, 1], [3, 1]], [[5 / 7, 2 / 7], [.625, .375]], 6,
                 selected=[0, 1, 3])


@test
def xshare_k0_zero():
    x = logit_of_probs([P0, P1])
    # k0 = 0, budget = 0: S is empty -> every slot -1 / 0.
    r = R.xshare(x, 2, k0=0, budget=0)
    check_result(r, [[-1, -1], [-1, -1]], [[0, 0], [0, 0]], 6, selected=[])
    # k0 = 0, budget = 2: top-2 by mass: 0 and 3 (.55 each, tie) -> S = {0, 3}.
    # t0: [0, 3] .5/.55, .05/.55; t1: [3, 0] .5/.55, .05/.55.
    r = R.xshare(x, 2, k0=0, budget=2)
    check_result(r, [[0, 3], [3, 0]], [[10 / 11, 1 / 11], [10 / 11, 1 / 11]], 6,
                 selected=[0, 3])


@test
def xshare_budget_over_E():
    # budget > E: every expert is added (stops when full) -> plain top-k.
    x = logit_of_probs([P0, P1])
    r = R.xshare(x, 2, k0=1, budget=100)
    p = R.topk_softmax(x, 2)
    eq(r["topk_ids"], p["topk_ids"])
    eq(r["topk_weights"], p["topk_weights"])
    eq(r["selected"], sel(6, range(6)))


@test
def xshare_fewer_than_k():
    # E=4, k=4, k0=1, budget=1, one token [0,1,2,3]: S0 = {3}, + best mass outside: 2.
    # ids [3, 2, -1, -1], weights e^3/(e^3+e^2), ..., 0, 0.
    r = R.xshare(arr([[0, 1, 2, 3]]), 4, k0=1, budget=1)
    w = 1 / (1 + math.exp(-1))
    check_result(r, [[3, 2, -1, -1]], [[w, 1 - w, 0, 0]], 4, selected=[2, 3])


@test
def xshare_ties():
    # all equal, k=1, k0=0, budget=2: masses tie -> {0, 1}; route -> [0], weight 1.
    r = R.xshare(arr([[0, 0, 0, 0]]), 1, k0=0, budget=2)
    check_result(r, [[0]], [[1]], 4, selected=[0, 1])


# ------------------------------------------------------------------- xshare_spec ----

Q0 = [0.5, 0.3, 0.1, 0.04, 0.03, 0.03]   # request 7
Q1 = [0.05, 0.05, 0.1, 0.5, 0.1, 0.2]    # request 9
Q2 = [0.4, 0.1, 0.4, 0.04, 0.03, 0.03]   # request 7 (0 and 2 tie exactly)


@test
def xshare_spec_worked_example():
    # k=2, k0=1, m_r=1, m=0.  Request 7 = tokens {0, 2} (not contiguous):
    #   S0 = {0} (t0's top-1; t2's tie 0/2 -> 0); agg = [.9,.4,.5,.08,.06,.06];
    #   best outside S0: 2 -> S_7 = {0, 2}.
    # Request 9 = {1}: S0 = {3}; best outside: 5 (.2) -> S_9 = {3, 5}.
    # S = {0, 2, 3, 5}.  t0: [0, 2] .5/.6, .1/.6; t1: [3, 5] 5/7, 2/7; t2: [0, 2] .5/.5.
    x = logit_of_probs([Q0, Q1, Q2])
    r = R.xshare_spec(x, arr([7, 9, 7], np.int32), 2, k0=1, request_budget=1, budget=0)
    check_result(r, [[0, 2], [3, 5], [0, 2]], [[5 / 6, 1 / 6], [5 / 7, 2 / 7], [.5, .5]],
                 6, selected=[0, 2, 3, 5])
    # Plain Alg. 2 on the same batch (k0=1, m=1) picks differently: S0 = {0, 3},
    # mass = [.95, .45, .6, .58, .16, .26] -> + 2 -> {0, 2, 3}.
    r2 = R.xshare(x, 2, k0=1, budget=1)
    eq(r2["selected"], sel(6, [0, 2, 3]))
    # Token order does not matter (same requests, permuted tokens).
    r3 = R.xshare_spec(logit_of_probs([Q0, Q2, Q1]), arr([7, 7, 9], np.int32), 2, k0=1,
                       request_budget=1, budget=0)
    eq(r3["selected"], r["selected"])


@test
def xshare_spec_batch_budget():
    # Same, m = 1: batch mass outside {0,2,3,5}: 1 (.45) -> S = {0,1,2,3,5}.
    # t0: [0, 1] .5/.8, .3/.8; t1: [3, 5]; t2: [0, 2].
    x = logit_of_probs([Q0, Q1, Q2])
    r = R.xshare_spec(x, arr([7, 9, 7], np.int32), 2, k0=1, request_budget=1, budget=1)
    check_result(r, [[0, 1], [3, 5], [0, 2]], [[.625, .375], [5 / 7, 2 / 7], [.5, .5]],
                 6, selected=[0, 1, 2, 3, 5])


@test
def xshare_spec_single_token_requests():
    # Requests of length 1: S_r = the token's top-(k0 + m_r).
    # t0 {0, 1}, t1 {3, 5}, t2 {0, 2} (tie at .4: 0 is the warm-up, 2 the greedy pick).
    x = logit_of_probs([Q0, Q1, Q2])
    r = R.xshare_spec(x, arr([0, 1, 2], np.int32), 2, k0=1, request_budget=1, budget=0)
    eq(r["selected"], sel(6, [0, 1, 2, 3, 5]))
    # k0 = 0, m_r = 0, m = 0: nothing selected.
    r = R.xshare_spec(x, arr([0, 1, 2], np.int32), 2, k0=0, request_budget=0, budget=0)
    check_result(r, [[-1, -1]] * 3, [[0, 0]] * 3, 6, selected=[])


@test
def xshare_spec_reduces_to_alg2():
    # With m_r = 0, S_r = S0_r and U_r S0_r = S0, so Alg. 4 is Alg. 2 (any request ids).
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 16)).astype(F32)
    rid = rng.integers(0, 4, 12).astype(np.int32)
    for k0, m in ((0, 3), (1, 0), (2, 5)):
        a = R.xshare_spec(x, rid, 4, k0=k0, request_budget=0, budget=m)
        b = R.xshare(x, 4, k0=k0, budget=m)
        for key in a:
            eq(a[key], b[key], key)


# ------------------------------------------------- ranking by logits, not probs ----

# Logits 0 and 1e-8 differ, but their probabilities round to the same float32
# (exp(-1e-8) rounds to 1.0f): ranking the logits picks expert 1, ranking the
# probabilities would pick expert 0 (the tie's lower id).
ROUND_TIE = [[0, 1e-8, -5, -5]]


@test
def softmax_policies_rank_logits():
    x = arr(ROUND_TIE)
    p = R.softmax_rows(x)
    assert p[0, 0] == p[0, 1] and x[0, 1] > x[0, 0]
    r = R.topk_softmax(x, 1)
    check_result(r, [[1]], [[1]], 4, selected=[1])
    # XShare's warm-up union ranks the logits too: S0 = {1}.
    r = R.xshare(x, 1, k0=1, budget=0)
    check_result(r, [[1]], [[1]], 4, selected=[1])
    # LYNX plain path (prefill) and decode path.
    r = R.lynx(x, 0, 1)
    check_result(r, [[1]], [[1]], 4, selected=[1])
    r = R.lynx(arr(ROUND_TIE), 1, 2)
    eq(r["topk_ids"], arr([[1, 0]], np.int32))
    # Probabilities that underflow to 0 still rank by their logits: [100, 0, -20.0001,
    # -20], k = 3 -> [0, 1, 3] (p2 = p3 = 0 would tie toward 2).
    x = arr([[100, 0, -20.0001, -20]])
    p = R.softmax_rows(x)
    assert p[0, 2] == p[0, 3] == 0
    r = R.topk_softmax(x, 3)
    eq(r["topk_ids"], arr([[0, 1, 3]], np.int32))
    close(r["topk_weights"], [[1, 0, 0]])


@test
def xshare_spec_request_selection_ranks_probs():
    # segment_fill (Alg. 3) ranks the probabilities: the request's warm-up top-1 is the
    # tie's lower id, 0 (xshare's logit-ranked warm-up would take 1).  The final route
    # ranks the logits within S = {0}: [0].
    x = arr(ROUND_TIE)
    r = R.xshare_spec(x, arr([0], np.int32), 1, k0=1, request_budget=0, budget=0)
    check_result(r, [[0]], [[1]], 4, selected=[0])
    # request_budget = 1 adds expert 1 (agg tie at the top: 0 is taken, 1 next): the
    # route then ranks the logits: [1].
    r = R.xshare_spec(x, arr([0], np.int32), 1, k0=1, request_budget=1, budget=0)
    check_result(r, [[1]], [[1]], 4, selected=[0, 1])


# --------------------------------------------------------------------- xshare_ep ----

S_T0 = [0.9, 0.8, 0.7, 0.6, 0.1, 0.1, 0.2, 0.1]
S_T1 = [0.8, 0.9, 0.1, 0.1, 0.3, 0.1, 0.1, 0.1]
S_T2 = [0.1, 0.1, 0.95, 0.1, 0.1, 0.1, 0.1, 0.1]
L2P_8 = np.arange(8, dtype=np.int32).reshape(8, 1)   # expert e on slot e


@test
def xshare_ep_worked_example():
    # E=8, 2 GPUs x 4 slots: experts 0-3 on GPU 0, 4-7 on GPU 1.  k=2, k0=1, m_g=2.
    # b = s (bias 0).  S0 = {0, 1}.  mass = [1.7,1.7,.8,.7,.4,.2,.3,.2].
    # |S| = 2 < 4: GPU 0 adds 2 (.8), GPU 1 adds 4 (.4) -> |S| = 4, stop.
    # t0: [0, 1] .9/1.7*2.5, .8/1.7*2.5; t1: [1, 0] the same.
    x = logit_of_sigmoid([S_T0, S_T1])
    r = R.xshare_ep(x, arr([0] * 8), L2P_8, 2, k0=1, device_budget=2, devices=2, slots=8)
    a, b = .9 / 1.7 * 2.5, .8 / 1.7 * 2.5
    check_result(r, [[0, 1], [1, 0]], [[a, b], [a, b]], 8, selected=[0, 1, 2, 4])


@test
def xshare_ep_round_overshoot():
    # Add t2 (top-1 = 2): S0 = {0, 1, 2}, |S| = 3 < 4 -> one full round: GPU 0 adds 3
    # (mass .8), GPU 1 adds 4 (.5) -> |S| = 5 > m_g*G = 4 (checked once per round).
    # t2 within S: 2 (.95), then 0/1/3/4 tie at .1 -> 0: .95/1.05*2.5, .1/1.05*2.5.
    x = logit_of_sigmoid([S_T0, S_T1, S_T2])
    r = R.xshare_ep(x, arr([0] * 8), L2P_8, 2, k0=1, device_budget=2, devices=2, slots=8)
    a, b = .9 / 1.7 * 2.5, .8 / 1.7 * 2.5
    check_result(r, [[0, 1], [1, 0], [2, 0]],
                 [[a, b], [a, b], [.95 / 1.05 * 2.5, .1 / 1.05 * 2.5]], 8,
                 selected=[0, 1, 2, 3, 4])


@test
def xshare_ep_skips_exhausted_gpu():
    # E=5, slots=8, 2 GPUs (4 slots each).  Primary slots: e0..e3 -> 0..3 (GPU 0),
    # e4 -> 4 (GPU 1).  e0 has a replica on slot 5 (GPU 1): only the primary counts.
    # log2phy is [E, slots-E+1] = [5, 4], padded with -1.  k0=0, m_g=2 (target 4).
    # s = [.9,.8,.7,.6,.1].  Round 1: GPU 0 adds 0, GPU 1 adds 4 -> 2.
    # Round 2: GPU 0 adds 1, GPU 1 has nothing left (skipped) -> 3.
    # Round 3: GPU 0 adds 2 -> 4, stop.  S = {0, 1, 2, 4}.  Route k=2: [0, 1].
    l2p = np.full((5, 4), -1, dtype=np.int32)
    l2p[:, 0] = [0, 1, 2, 3, 4]
    l2p[0, 1] = 5
    x = logit_of_sigmoid([[.9, .8, .7, .6, .1]])
    r = R.xshare_ep(x, arr([0] * 5), l2p, 2, k0=0, device_budget=2, devices=2, slots=8)
    check_result(r, [[0, 1]], [[.9 / 1.7 * 2.5, .8 / 1.7 * 2.5]], 5,
                 selected=[0, 1, 2, 4])
    # A budget beyond E: everything is added, then a round adds nothing and it stops.
    r = R.xshare_ep(x, arr([0] * 5), l2p, 2, k0=0, device_budget=100, devices=2,
                    slots=8)
    eq(r["selected"], sel(5, range(5)))


@test
def xshare_ep_bias_selects_sigmoid_weighs():
    # One GPU, k=2, k0=2, m_g=0.  s = [.9,.8,.7,.6], bias [0,0,.3,0] -> b = [.9,.8,1,.6].
    # S0 = top-2 by b = {2, 0}; route by b: [2, 0]; weights from s: .7, .9 -> /1.6 x2.5.
    x = logit_of_sigmoid([[.9, .8, .7, .6]])
    r = R.xshare_ep(x, arr([0, 0, .3, 0]), np.arange(4).reshape(4, 1), 2, k0=2,
                    device_budget=0, devices=1, slots=4)
    check_result(r, [[2, 0]], [[.7 / 1.6 * 2.5, .9 / 1.6 * 2.5]], 4, selected=[0, 2])


@test
def xshare_ep_k0_zero_empty():
    # k0 = 0 and m_g = 0: nothing is selected; every slot -1.
    x = logit_of_sigmoid([S_T0])
    r = R.xshare_ep(x, arr([0] * 8), L2P_8, 2, k0=0, device_budget=0, devices=2, slots=8)
    check_result(r, [[-1, -1]], [[0, 0]], 8, selected=[])


@test
def xshare_ep_balanced_load():
    # Paper §5: from an empty start, MaxLoad(S) <= ceil(|S| / G).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((32, 64)).astype(F32)
    l2p = rng.permutation(64).astype(np.int32).reshape(64, 1)
    dev = l2p[:, 0] // 8
    for mg in (1, 3, 5):
        r = R.xshare_ep(x, np.zeros(64, F32), l2p, 8, k0=0, device_budget=mg,
                        devices=8, slots=64)
        S = r["selected"]
        load = np.bincount(dev[S], minlength=8)
        assert S.sum() == mg * 8 and load.max() <= math.ceil(S.sum() / 8), load


# --------------------------------------------------------------------- properties ----

@test
def consistency_on_random_batches():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((40, 32)) * 2).astype(F32)
    plain = R.topk_softmax(x, 4)
    # LYNX outside decode is plain top-k; xshare with a budget >= E is too.
    for key in ("topk_ids", "topk_weights", "selected", "expert_counts"):
        eq(R.lynx(x, 0, 4)[key], plain[key], key)
    full = R.xshare(x, 4, k0=0, budget=32)
    for key in ("topk_ids", "topk_weights", "expert_counts"):
        eq(full[key], plain[key], key)
    eq(full["selected"], np.ones(32, dtype=bool))  # the full set, not the union
    # Reducing policies keep their routing inside the selected set, and the union of
    # routed experts never exceeds it.
    for r in (R.lynx(x, 1, 4), R.xshare(x, 4, 1, 4), R.xshare_spec(x, np.arange(40) // 4,
                                                                   4, 1, 2, 0)):
        used = r["expert_counts"] > 0
        assert not np.any(used & ~r["selected"])
        assert r["expert_counts"].sum() == np.count_nonzero(r["topk_ids"] >= 0)
        ok = r["topk_ids"] >= 0
        close(r["topk_weights"].sum(axis=1), np.ones(40), atol=1e-5)
        assert np.all(r["topk_weights"][~ok] == 0)
    # Batch outputs are consistent with the counts.
    c = plain["expert_counts"]
    lst, n = R.active_experts(c)
    eq(lst[:n[0]], np.nonzero(c)[0].astype(np.int32))
    s, e, total = R.align_block_size(plain["topk_ids"], 32, 16)
    assert total[0] == sum(-(-int(v) // 16) * 16 for v in c)
    assert np.count_nonzero(s < 40 * 4) == 40 * 4


def main():
    passed = failed = 0
    for fn in TESTS:
        try:
            fn()
            passed += 1
        except Exception:  # noqa: BLE001 - report every failure, keep going
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
