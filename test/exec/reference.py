#!/usr/bin/python3
"""Independent numpy references for every router policy Switchyard ships.

Each function is written straight from the paper (or model report) that defines the
policy, not from the MLIR ops the policy is built from, so that an execution test which
compares `moe-run` output against these functions checks the whole compiler against
the papers.  Papers: ../../../shared/papers/ (000 = LYNX, 001 = XShare); DESIGN.md §3
states the project's exact reading of each rule.

Conventions used everywhere (docs/MoeDialect.md, "Conventions shared by every op"):
  * Every ranking is by descending score, ties toward the LOWER expert id, and NaN ranks
    below every number (NaN entries come last, among themselves by id).
  * All arithmetic is float32, in the order a straightforward loop would use:
      - softmax row: m = row max; ex_e = exp(x_e - m); sum = ex_0 + ex_1 + ... (left to
        right, float32); p_e = ex_e / sum.  A row of all -inf gives all zeros.
      - sigmoid: 1 / (1 + exp(-x)), each step rounded to float32.
      - batch sums: tokens t = 0..T-1 in order, float32 accumulator.
    exp and pow are evaluated in float64 and rounded once to float32, i.e. the
    correctly rounded float32 result (what a good libm expf/powf returns).
  * Routing ("refinement", XShare §3.4): a token's eligible experts are those in the
    selected set whose routing score is neither -inf nor NaN; the token takes its k best
    eligible experts; missing slots get id -1 and weight 0; the weights (taken from the
    given weight scores) are divided by their float32 sum (slot order) when that sum is
    > 0, then multiplied by the scaling factor.
  * Routing scores.  The softmax policies (topk_softmax, xshare, xshare_spec, lynx) RANK
    by the logits (the same order as the probabilities, but exact: no ties created by
    rounding, and a -inf/NaN logit is not eligible) and take the WEIGHTS from the
    softmax probabilities.  Their union-of-top-k sets (topk_softmax's `selected`, the
    XShare warm-up S0, LYNX's plain-path `selected`) rank by the logits too;
    xshare_spec's per-request selection ranks the probabilities.  The sigmoid policies
    (deepseek_v3, xshare_ep) rank by sigmoid + bias and weigh by the sigmoid.

Results are dicts of numpy arrays: topk_ids int32 [T,k], topk_weights float32 [T,k],
selected bool [E] (where the policy defines one), expert_counts int32 [E].

Batch-level outputs shared by every policy: active_experts(expert_counts) and
align_block_size(topk_ids, E, block_size) (vLLM moe_align_block_size).
"""

import numpy as np

F32 = np.float32
NEG_INF = F32(-np.inf)


# ---------------------------------------------------------------------------------------
# Basic helpers
# ---------------------------------------------------------------------------------------

def rank_desc(values):
    """Indices of a 1-D score vector, best first.

    Descending score, ties toward the lower index, NaN below every number (NaNs last,
    among themselves by index).  np.lexsort is a stable sort: primary key = "is NaN",
    secondary key = -score, and equal keys keep their index order.
    """
    v = np.asarray(values, dtype=F32)
    isnan = np.isnan(v)
    neg = np.where(isnan, F32(0), -v)  # exact negation; NaNs get a dummy key
    # -0.0 and +0.0 compare equal, so they tie and go by index, as they should.
    return np.lexsort((neg, isnan)).astype(np.int64)


def topk_ids_of_row(values, k):
    """A row's k best entries by the ranking rule (always k ids; NaN/-inf included)."""
    return rank_desc(values)[:k]


def union_topk(scores, k0):
    """XShare Alg. 2 warm-up: S0 = U_t TopK0(scores[t]); k0 = 0 gives the empty set."""
    T, E = scores.shape
    sel = np.zeros(E, dtype=bool)
    if k0 <= 0:
        return sel
    for t in range(T):
        sel[topk_ids_of_row(scores[t], k0)] = True
    return sel


def softmax_rows(x):
    """Row softmax in float32 (max subtracted first, left-to-right float32 sum).

    A row of all -inf gives zeros.  A NaN anywhere in a row (or a +inf, since
    inf - inf = NaN) makes the whole row NaN, because the sum becomes NaN.
    """
    x = np.asarray(x, dtype=F32)
    T, E = x.shape
    # Row maximum over the non-NaN entries (-inf when there are none).
    m = np.full(T, NEG_INF, dtype=F32)
    for e in range(E):
        col = x[:, e]
        m = np.where(~np.isnan(col) & (col > m), col, m)
    with np.errstate(invalid="ignore", over="ignore"):
        d = (x - m[:, None]).astype(F32)
        ex = np.exp(d.astype(np.float64)).astype(F32)
        # Left-to-right float32 sum over the experts (not numpy's pairwise sum).
        s = np.zeros(T, dtype=F32)
        for e in range(E):
            s = (s + ex[:, e]).astype(F32)
        p = (ex / s[:, None]).astype(F32)
    all_neg_inf = np.all(x == NEG_INF, axis=1)
    p[all_neg_inf] = F32(0)
    return p


def sigmoid(x):
    """1 / (1 + exp(-x)) with every step rounded to float32 (-inf -> 0, +inf -> 1)."""
    x = np.asarray(x, dtype=F32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp((-x).astype(np.float64)).astype(F32)
        d = (F32(1) + e).astype(F32)
        return (F32(1) / d).astype(F32)


def batch_sum(x):
    """sum_t x[t, e], tokens accumulated in order t = 0..T-1 in float32."""
    x = np.asarray(x, dtype=F32)
    acc = np.zeros(x.shape[1], dtype=F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for t in range(x.shape[0]):
            acc = (acc + x[t]).astype(F32)
    return acc


def greedy_add(init, score, count):
    """XShare Alg. 1 with a fixed budget (Cor. 3.3): add `count` experts outside `init`
    in descending `score` order (ties to the lower id, NaN last); stop when full."""
    sel = init.copy()
    added = 0
    for e in rank_desc(score):
        if added >= count:
            break
        if not sel[e]:
            sel[e] = True
            added += 1
    return sel


def renormalize_slots(row):
    """A token's weights divided, in place, by their float32 sum taken in slot order
    (empty slots add 0), when that sum is > 0."""
    total = F32(0)
    for value in row:
        total = F32(total + value)
    if total > 0:
        row[:] = (row / total).astype(F32)


def refine_route(route_scores, weight_scores, allowed, k, renormalize=True,
                 scaling=1.0):
    """XShare §3.4 refinement / LYNX §3.4 remapper: every token goes to its top-k
    eligible experts within `allowed` (eligible: allowed, score not -inf, not NaN).
    Fewer than k eligible -> trailing slots id -1, weight 0.  Weights from
    `weight_scores`, divided by their slot-order float32 sum when > 0, times scaling."""
    route_scores = np.asarray(route_scores, dtype=F32)
    weight_scores = np.asarray(weight_scores, dtype=F32)
    T, E = route_scores.shape
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    if allowed is None:
        allowed = np.ones(E, dtype=bool)
    scale = F32(scaling)
    for t in range(T):
        row = route_scores[t]
        eligible = allowed & ~np.isnan(row) & (row != NEG_INF)
        chosen = [e for e in rank_desc(row) if eligible[e]][:k]
        for j, e in enumerate(chosen):
            ids[t, j] = e
            w[t, j] = weight_scores[t, e]
        if renormalize:
            renormalize_slots(w[t])
        for j in range(k):
            w[t, j] = F32(w[t, j] * scale)
    return ids, w


def expert_counts(ids, E):
    """counts[e] = |{(t, j) : ids[t, j] == e}|; -1 slots are not counted."""
    counts = np.zeros(E, dtype=np.int32)
    for e in np.asarray(ids).reshape(-1):
        if 0 <= e < E:
            counts[e] += 1
    return counts


def _result(ids, weights, E, selected=None):
    out = {
        "topk_ids": np.asarray(ids, dtype=np.int32),
        "topk_weights": np.asarray(weights, dtype=F32),
        "expert_counts": expert_counts(ids, E),
    }
    if selected is not None:
        out["selected"] = np.asarray(selected, dtype=bool)
    return out


def engine_contract(ids, weights, experts):
    """vLLM's routing contract on a routed batch (docs/vllm.md): a slot left empty (an
    id outside [0, E)) gets weight 0 and the token's first routed expert, else the
    lowest expert the batch routes to, else expert 0."""
    ids = np.array(ids, dtype=np.int32)
    weights = np.array(weights, dtype=F32)
    valid = (ids >= 0) & (ids < experts)
    batch = ids[valid].min() if valid.any() else 0
    for t in range(ids.shape[0]):
        own = ids[t][valid[t]]
        ids[t][~valid[t]] = own[0] if own.size else batch
        weights[t][~valid[t]] = 0
    return ids, weights


def _as_logits(logits):
    x = np.asarray(logits, dtype=F32)
    if x.ndim != 2:
        raise ValueError("logits must be [T, E], got shape %s" % (x.shape,))
    return x


# ---------------------------------------------------------------------------------------
# Batch-level outputs (issue 3): compacted active experts and vLLM block alignment
# ---------------------------------------------------------------------------------------

def active_experts(counts):
    """Experts with count > 0, ascending, padded with -1 to length E; and their number.

    Returns (int32 [E], int32 [1]).
    """
    counts = np.asarray(counts)
    E = counts.shape[0]
    lst = np.full(E, -1, dtype=np.int32)
    n = 0
    for e in range(E):
        if counts[e] > 0:
            lst[n] = e
            n += 1
    return lst, np.array([n], dtype=np.int32)


def align_block_size(topk_ids, E, block_size):
    """vLLM `moe_align_block_size` contract.

    Slots are flattened as s = t*k + j.  For expert e = 0..E-1 in order, its slots
    (ascending) form a segment padded with the sentinel T*k up to a multiple of
    block_size; experts with no slots get no blocks; -1 slots are skipped.
      sorted_token_ids: int32 [T*k + E*(block_size-1)], tail after the last segment = T*k
      expert_ids:       int32 [ceil(len(sorted_token_ids) / block_size)], the expert of
                        each block, -1 for unused blocks
      num_tokens_post_padded: int32 [1], total padded length of all segments.
    """
    ids = np.asarray(topk_ids)
    T, k = ids.shape
    numel = T * k
    max_padded = numel + E * (block_size - 1)
    num_blocks = (max_padded + block_size - 1) // block_size
    sentinel = numel
    sorted_ids = np.full(max_padded, sentinel, dtype=np.int32)
    expert_of_block = np.full(num_blocks, -1, dtype=np.int32)
    flat = ids.reshape(-1)
    slots_of = [[] for _ in range(E)]
    for s in range(numel):  # ascending slot order within each expert
        e = int(flat[s])
        if 0 <= e < E:
            slots_of[e].append(s)
    pos = 0
    for e in range(E):
        slots = slots_of[e]
        if not slots:
            continue
        padded = (len(slots) + block_size - 1) // block_size * block_size
        for i, s in enumerate(slots):
            sorted_ids[pos + i] = s
        for b in range(pos // block_size, (pos + padded) // block_size):
            expert_of_block[b] = e
        pos += padded
    return sorted_ids, expert_of_block, np.array([pos], dtype=np.int32)


# ---------------------------------------------------------------------------------------
# Policies
# ---------------------------------------------------------------------------------------

def topk_softmax(logits, k, renormalize=True):
    """Mixtral / Qwen-MoE softmax top-k router (vLLM topk_softmax, Qwen3 norm_topk_prob;
    renormalize=False: OLMoE / Qwen2-MoE's norm_topk_prob = false, the raw top-k
    probabilities).

    selected = union of every token's top-k (the experts the batch activates).
    """
    x = _as_logits(logits)
    E = x.shape[1]
    # Gate: p = softmax(logits) per token.
    p = softmax_rows(x)
    # Each token: its k most probable experts, ranked by the logits (the same order as
    # p, computed exactly; a -inf or NaN logit is not eligible), probabilities
    # renormalized to sum 1.
    ids, w = refine_route(x, p, None, k, renormalize=renormalize)
    # Experts the batch activates: U_t TopK(logits[t]) (XShare §3.1's union).
    selected = union_topk(x, k)
    return _result(ids, w, E, selected)


def top_p(logits, k, p=0.9, k_min=1, renormalize=True):
    """Top-p (dynamic-k) routing, from its definition: per token, the experts in
    decreasing softmax probability (ranked by logit, ties to the lower id; a -inf or
    NaN logit is not eligible), taken while the probabilities taken so far sum to less
    than p (float32, in slot order), at least k_min of them and at most k; the other
    slots id -1, weight 0. Weights: the taken probabilities, divided by their float32
    slot-order sum when `renormalize` (and the sum is > 0)."""
    x = _as_logits(logits)
    T, E = x.shape
    probs = softmax_rows(x)
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    for t in range(T):
        row = x[t]
        eligible = ~np.isnan(row) & (row != NEG_INF)
        taken = F32(0)
        for j, e in enumerate([e for e in rank_desc(row) if eligible[e]][:k]):
            if j >= k_min and not taken < F32(p):
                break
            ids[t, j], w[t, j] = e, probs[t, e]
            taken = F32(taken + probs[t, e])
        if renormalize:
            renormalize_slots(w[t])
    return _result(ids, w, E)


def oea(logits, k, k0=1, max_rank=0, renormalize=True):
    """Opportunistic Expert Activation (arXiv 2511.02237), from its definition: the
    batch activates S = the union of every token's top-k0 experts (by logit, ties to
    the lower id); each token then takes, in decreasing probability, the experts that
    are in S and among its own top `max_rank` (0: k; over all E, NaN last), at most k
    of them (a -inf or NaN logit is never taken); the other slots id -1, weight 0.
    Weights: the taken probabilities, divided by their float32 slot-order sum when
    `renormalize` (and the sum is > 0)."""
    x = _as_logits(logits)
    T, E = x.shape
    probs = softmax_rows(x)
    S = union_topk(x, k0)
    bound = k if max_rank <= 0 else max_rank
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    for t in range(T):
        row = x[t]
        own = set(rank_desc(row)[:bound].tolist())
        taken = [e for e in rank_desc(row)
                 if S[e] and e in own and not np.isnan(row[e]) and row[e] != NEG_INF][:k]
        for j, e in enumerate(taken):
            ids[t, j], w[t, j] = e, probs[t, e]
        if renormalize:
            renormalize_slots(w[t])
    return _result(ids, w, E, S)


def moe_spec(logits, draft_mask, k, budget=32, max_rank=0, renormalize=True):
    """MoE-Spec (arXiv 2602.16052), from its definition: the budget set S = the `budget`
    experts with the largest summed softmax probability over the draft tokens
    (draft_mask != 0; float32 sums in token order, ties to the lower id). A draft token
    takes, best first by logit, the experts in S among its own top `max_rank` (0: k:
    truncation; E: substitution), at most k; any other token takes its own top-k. A
    -inf or NaN logit is never taken; other slots -1 / 0. Weights: the taken
    probabilities, divided by their float32 slot-order sum when `renormalize`."""
    x = _as_logits(logits)
    T, E = x.shape
    drafts = np.asarray(draft_mask).reshape(-1) != 0
    if drafts.shape[0] != T:
        raise ValueError("draft_mask must have one entry per token")
    p = softmax_rows(x)
    S = greedy_add(np.zeros(E, dtype=bool), batch_sum(p[drafts]), budget)
    bound = k if max_rank <= 0 else max_rank
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    for t in range(T):
        row = x[t]
        order = rank_desc(row)
        own = set(order[:bound].tolist()) if drafts[t] else set(range(E))
        taken = [e for e in order if (S[e] or not drafts[t]) and e in own
                 and not np.isnan(row[e]) and row[e] != NEG_INF][:k]
        for j, e in enumerate(taken):
            ids[t, j], w[t, j] = e, p[t, e]
        if renormalize:
            renormalize_slots(w[t])
    return _result(ids, w, E, S)

def deepseek_v3(logits, bias, k=8, groups=8, topk_groups=4, scaling=2.5,
                group_topk=2):
    """DeepSeek-V3 technical report §2.1.2 (vLLM grouped_topk, e_score_correction_bias).

    No `selected` output (the policy has none).
    """
    x = _as_logits(logits)
    T, E = x.shape
    if E % groups != 0:
        raise ValueError("groups must divide E")
    gsize = E // groups
    bias = np.asarray(bias, dtype=F32).reshape(E)
    # DSV3 §2.1.2 eq. (15): affinity s = Sigmoid(u^T e).
    s = sigmoid(x)
    # DSV3 §2.1.2.1 (auxiliary-loss-free balancing): the bias only affects selection:
    # selection score b = s + bias.
    b = (s + bias[None, :]).astype(F32)
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    for t in range(T):
        # Node-limited routing (DSV3 §2.1.2 "Node-Limited Routing"; vLLM grouped_topk):
        # group score = sum of the top-`group_topk` selection scores of the group.
        gscore = np.zeros(groups, dtype=F32)
        for g in range(groups):
            members = b[t, g * gsize:(g + 1) * gsize]
            acc = F32(0)
            for i in topk_ids_of_row(members, group_topk):  # best first
                acc = F32(acc + members[i])
            gscore[g] = acc
        # Keep the top-`topk_groups` groups (ties to the lower group index).
        keep_groups = topk_ids_of_row(gscore, topk_groups)
        in_kept = np.zeros(E, dtype=bool)
        for g in keep_groups:
            in_kept[g * gsize:(g + 1) * gsize] = True
        # Experts outside the kept groups are out (score -inf); route top-k by b among
        # the kept experts whose b is neither -inf nor NaN.
        row = np.where(in_kept, b[t], NEG_INF)
        chosen = [e for e in rank_desc(row)
                  if in_kept[e] and not np.isnan(row[e]) and row[e] != NEG_INF][:k]
        # Gating values = unbiased s of the chosen, normalized (eq. 13), x scaling.
        total = F32(0)
        for j, e in enumerate(chosen):
            ids[t, j] = e
            w[t, j] = s[t, e]
            total = F32(total + s[t, e])
        for j in range(k):
            if total > 0:
                w[t, j] = F32(w[t, j] / total)
            w[t, j] = F32(w[t, j] * F32(scaling))
    return _result(ids, w, E)


def lynx(logits, phase, k, alpha=2.0, beta=4, theta=1.0, max_tokens=256):
    """LYNX (paper 000): §3.1.1 confidence analyzer + Appendix A binning, §3.2.1 adaptive
    expert scorer, §3.3.1 phase-aware optimizer, §3.4 expert remapper; DESIGN.md §3
    "LYNX, precisely".  `phase`: 0 prefill, 1 decode, 2 mixed."""
    x = _as_logits(logits)
    T, E = x.shape
    p = softmax_rows(x)
    # §3.3.1 phase-aware optimizer: only memory-bound decode batches (at most
    # max_tokens tokens, phase == decode) are reduced; others use plain top-k.
    if not (T <= max_tokens and int(phase) == 1):
        ids, w = refine_route(x, p, None, k, renormalize=True)
        return _result(ids, w, E, union_topk(x, k))
    if k < 2:
        raise ValueError("LYNX needs each token's second choice: k >= 2")

    alpha32 = F32(alpha)
    # Each token's top-k by logit (ties to the lower id, NaN last); top-1 = row max.
    topk = np.zeros((T, k), dtype=np.int64)
    for t in range(T):
        topk[t] = topk_ids_of_row(x[t], k)

    # Appendix A / §3.1.1: q = min(floor(alpha * (z_top1 - z_e)), beta), bin = -q.
    # Computed in float32: gap = z_top1 - z_e, then alpha * gap, then floor, then the
    # clamp to beta.  The top-1 logit is the row maximum (over the non-NaN entries);
    # an expert equal to it gets q = 0 (so an all -inf row is all bin 0, although
    # -inf - -inf is NaN); a NaN gap (NaN logit, all-NaN row, inf - inf) gets q = beta.
    q = np.zeros((T, E), dtype=np.int64)
    for t in range(T):
        row = x[t]
        not_nan = row[~np.isnan(row)]
        zmax = not_nan.max() if not_nan.size else F32(np.nan)
        with np.errstate(invalid="ignore", over="ignore"):
            gap = (zmax - row).astype(F32)
            scaled = (alpha32 * gap).astype(F32)
            fl = np.floor(scaled)
            clamped = np.where(np.isnan(fl) | (fl >= beta), F32(beta), fl)
        q[t] = clamped.astype(np.int64)
        q[t, row == zmax] = 0
    bins = -q

    # §3.2.1 adaptive expert scorer: base = batch size B = T;
    # s[e] = sum over tokens t (in order) with e in topk(t) of B ** bin[t, e].
    base = F32(T)
    score = np.zeros(E, dtype=F32)
    for t in range(T):
        for j in range(k):
            e = topk[t, j]
            contrib = F32(np.power(np.float64(base), np.float64(bins[t, e])))
            score[e] = F32(score[e] + contrib)

    # §3.2.1 / Insight 2: a high-confidence token (its second choice at least one bin
    # below its top-1) keeps its top-1 expert.
    kept = np.zeros(E, dtype=bool)
    for t in range(T):
        if bins[t, topk[t, 1]] <= -1:
            kept[topk[t, 0]] = True
    # Experts whose batch score reaches theta (one top-1 vote by default).
    kept |= score >= F32(theta)
    # Grow by descending score until the set holds at least k experts.
    for e in rank_desc(score):
        if kept.sum() >= k:
            break
        kept[e] = True

    # §3.4 expert remapper: every token goes to its top-k within the kept set, ranked by
    # the logits (the probabilities' order, exact), weights = the softmax probabilities
    # renormalized.
    ids, w = refine_route(x, p, kept, k, renormalize=True)
    return _result(ids, w, E, kept)


def xshare(logits, k, k0=1, budget=24, set_budget=0):
    """XShare Algorithm 2 (paper 001 §3.2-3.4). `budget` counts the experts added
    beyond S0; `set_budget` is Eq. 2's bound on the whole set, |S_l| <= m_l (S0 is
    grown to that size, never shrunk; 0 = off)."""
    x = _as_logits(logits)
    E = x.shape[1]
    # §3.1: gating scores g = softmax probabilities.
    p = softmax_rows(x)
    # Alg. 2 warm-up: S0 = U_i Top_k0(G_i), ranked by the logits (the same order).
    S = union_topk(x, k0)
    # §3.2 eq. (2) / Prop. 3.2: marginal gain of e = sum_i g_{i,e} (batch mass).
    mass = batch_sum(p)
    # Alg. 1 with a fixed budget m_l (Cor. 3.3): add the m_l best experts outside S0.
    S = greedy_add(S, mass, budget)
    # Eq. 2's reading of m_l: greedy (the same order) until |S| = set_budget.
    S = greedy_add(S, mass, max(set_budget - int(S.sum()), 0))
    # Alg. 2 refinement: route each token to Top_k(G_i, S) (ranked by the logits),
    # weights from p renormalized.
    ids, w = refine_route(x, p, S, k, renormalize=True)
    return _result(ids, w, E, S)


def xshare_spec(logits, request_ids, k, k0=1, request_budget=4, budget=0):
    """XShare Algorithm 4 with Algorithm 3 per request (paper 001 §4)."""
    x = _as_logits(logits)
    T, E = x.shape
    rids = np.asarray(request_ids).reshape(-1)
    if rids.shape[0] != T:
        raise ValueError("request_ids must have one entry per token")
    p = softmax_rows(x)
    S = np.zeros(E, dtype=bool)
    # §4.1: a request r is the set of tokens T_r sharing one request id (the tokens
    # need not be contiguous).  Requests in order of first appearance (order does not
    # change the union).
    groups = {}
    for t in range(T):
        groups.setdefault(int(rids[t]), []).append(t)
    for r, members in groups.items():
        # Alg. 3 warm-up: S0 = U_{x in T_r} Top_k0(G_x).
        S0 = union_topk(p[members], k0)
        # Alg. 3: scores[j] = sum_{x in T_r} g_{x,j}, tokens in order.
        agg = batch_sum(p[members])
        # Alg. 3: S_r = S0 U Top_{m_r}(scores, E \ S0).
        S_r = greedy_add(S0, agg, request_budget)
        # Alg. 4: S_batch = U_r S_r.
        S |= S_r
    # Alg. 4 then Alg. 1 with budget m: `budget` more experts by batch mass.
    S = greedy_add(S, batch_sum(p), budget)
    # Alg. 4 refinement: Top_k(G_i, S_batch) ranked by the logits, weights from p
    # renormalized.  (The per-request selection above still ranks probabilities.)
    ids, w = refine_route(x, p, S, k, renormalize=True)
    return _result(ids, w, E, S)


def expert_device(log2phy, devices, slots):
    """Home GPU of each expert: the device of its primary copy log2phy[e][0]
    (slot p lives on device p // (slots // devices)); -1 if it has no valid slot."""
    l2p = np.asarray(log2phy).reshape(len(log2phy), -1)
    per_dev = slots // devices
    dev = np.full(l2p.shape[0], -1, dtype=np.int64)
    for e in range(l2p.shape[0]):
        if l2p[e, 0] >= 0:
            dev[e] = int(l2p[e, 0]) // per_dev
    return dev


def xshare_ep(logits, bias, log2phy, k, k0=1, device_budget=5, devices=8, slots=None,
              scaling=2.5):
    """XShare Algorithm 6 with the GPU-aware greedy of Algorithm 5 (paper 001 §5), on
    DeepSeek-R1's sigmoid + correction-bias gate."""
    x = _as_logits(logits)
    T, E = x.shape
    if slots is None:
        slots = E
    bias = np.asarray(bias, dtype=F32).reshape(E)
    # DeepSeek gate (the paper's EP model): s = sigmoid, selection b = s + bias.
    s = sigmoid(x)
    b = (s + bias[None, :]).astype(F32)
    # Alg. 6 warm-up: S0 = U_x Top_k0(G_x) (by the selection score b).
    S = union_topk(b, k0)
    # Prop. 3.2: the marginal gain of e is its batch gating mass sum_t s[t,e].
    mass = batch_sum(s)
    dev = expert_device(log2phy, devices, slots)
    order = rank_desc(mass)
    # Alg. 5, literally: while |S| < m_g * G: for g in 1..G: add the best expert of
    # E_g \ S.  The size is checked once per round; a GPU with nothing left is
    # skipped; a round that adds nothing ends the loop.
    while S.sum() < device_budget * devices:
        added = False
        for g in range(devices):
            best = None
            for e in order:  # best mass first, ties to the lower id, NaN last
                if dev[e] == g and not S[e]:
                    best = e
                    break
            if best is not None:
                S[best] = True
                added = True
        if not added:
            break
    # Alg. 6 refinement: Top_k within S by b, weights = s renormalized x scaling.
    ids, w = refine_route(b, s, S, k, renormalize=True, scaling=scaling)
    return _result(ids, w, E, S)


def metro(logits, log2phy, k, devices=8, slots=None, renormalize=True):
    """METRO's replica choice (arXiv 2512.09277) as moe.metro_replicas documents it, on
    the model's softmax top-k: every expert the batch activates runs on ONE of its
    replicas; experts are placed fewest replicas first (then more tokens first, then the
    lower id), each on the replica whose GPU has the fewest activated experts so far
    (then the fewest tokens, then the lower replica rank). physical_ids = the chosen
    replica of each slot's expert; device_experts = activated experts per GPU."""
    x = _as_logits(logits)
    T, E = x.shape
    slots = slots or E
    base = topk_softmax(x, k, renormalize=renormalize)
    ids = base["topk_ids"]
    counts = expert_counts(ids, E)
    l2p = np.asarray(log2phy, dtype=np.int32).reshape(E, -1)
    replicas = [max(1, int((l2p[e] >= 0).sum())) for e in range(E)]
    per_dev = slots // devices
    dev_experts = np.zeros(devices, np.int32)
    dev_tokens = np.zeros(devices, np.int64)
    chosen = np.full(E, -1, np.int32)
    for e in sorted((e for e in range(E) if counts[e] > 0),
                    key=lambda e: (replicas[e], -int(counts[e]), e)):
        def rank(r):
            g = int(l2p[e, r]) // per_dev
            return (int(dev_experts[g]), int(dev_tokens[g]), r)
        r = min(range(replicas[e]), key=rank)
        g = int(l2p[e, r]) // per_dev
        chosen[e] = l2p[e, r]
        dev_experts[g] += 1
        dev_tokens[g] += int(counts[e])
    phys = np.where(ids >= 0, chosen[np.clip(ids, 0, E - 1)], -1).astype(np.int32)
    out = _result(ids, base["topk_weights"], E)
    out["physical_ids"] = phys
    out["device_experts"] = dev_experts
    return out

__all__ = [
    "rank_desc", "union_topk", "softmax_rows", "sigmoid", "batch_sum", "refine_route",
    "expert_counts", "active_experts", "align_block_size", "expert_device",
    "topk_softmax", "deepseek_v3", "lynx", "xshare", "xshare_spec", "xshare_ep",
]


# ---------------------------------------------------------------------------------------
# Capacity-limited and expert-choice routing (issue 16)
# ---------------------------------------------------------------------------------------

def capacity_of(capacity_factor, T, k, E, limit):
    """C = ceil(capacity_factor * T * k / E) in float64 (the factor as the float32 knob
    holds it), clamped to [0, limit]."""
    import math
    c = math.ceil(float(F32(capacity_factor)) * float(T * k) / float(E))
    return min(max(c, 0), limit)


def capacity_topk(logits, k, capacity_factor=1.25, renormalize_after_drop=False,
                  tokens_per_slot=None):
    """GShard / Switch Transformer capacity-limited routing (Lepikhin et al. 2020 §2.2,
    Fedus et al. 2021 §2.2) on the softmax top-k (weights renormalized over the k, as
    Mixtral).  Each expert admits at most C = ceil(capacity_factor * T * k / E) slots in
    priority order: every token's first choice in token order, then every second
    choice, ...; a slot finding its expert full is dropped (id -1, weight 0)."""
    x = _as_logits(logits)
    T, E = x.shape
    base = topk_softmax(x, k, renormalize=True)
    ids, w = base["topk_ids"].copy(), base["topk_weights"].copy()
    C = capacity_of(capacity_factor, T, k, E, T * k)
    if tokens_per_slot is not None:  # test/exec/Inputs/capacity_absolute.mlir
        C = min(-(-T // tokens_per_slot), T * k)
        renormalize_after_drop = True
    admitted = np.zeros(E, dtype=np.int32)
    dropped = 0
    for j in range(k):
        for t in range(T):
            e = int(ids[t, j])
            if not 0 <= e < E:
                continue
            if admitted[e] < C:
                admitted[e] += 1
            else:
                ids[t, j], w[t, j] = -1, F32(0)
                dropped += 1
    if renormalize_after_drop:
        for t in range(T):
            s = F32(0)
            for j in range(k):
                s = F32(s + w[t, j])
            if s > 0:
                w[t] = (w[t] / s).astype(F32)
    return {"topk_ids": ids, "topk_weights": w, "expert_counts": admitted,
            "num_dropped": np.array([dropped], np.int32)}


def capacity_drop(logits, k, capacity_factor=1.0, candidates=0, renormalize=True):
    """Capacity-aware inference (He et al., ICLR 2026, arXiv 2503.05066), from its
    definition: p = softmax(logits); every token proposes its `candidates` best experts
    by p (0: k; ties to the lower id, NaN last); every expert admits, of the tokens
    proposing it, the C = min(T, ceil(capacity_factor * T * k / E)) with the highest
    p[t, e] (ties to the lower token index; a NaN probability is never admitted); every
    token keeps its best k admitted experts by p (ties to the lower id), weights p,
    divided by their float32 slot-order sum when `renormalize`; other slots -1 / 0."""
    x = _as_logits(logits)
    T, E = x.shape
    p = softmax_rows(x)
    m = k if candidates <= 0 else min(candidates, E)
    proposes = np.zeros((T, E), dtype=bool)
    for t in range(T):
        proposes[t, rank_desc(p[t])[:m]] = True
    C = capacity_of(capacity_factor, T, k, E, T)
    admitted = np.zeros((T, E), dtype=bool)
    for e in range(E):
        tokens = [t for t in range(T) if proposes[t, e] and not np.isnan(p[t, e])]
        tokens.sort(key=lambda t: (-float(p[t, e]), t))
        admitted[tokens[:C], e] = True
    ids = np.full((T, k), -1, dtype=np.int32)
    w = np.zeros((T, k), dtype=F32)
    for t in range(T):
        mine = [e for e in rank_desc(p[t]) if admitted[t, e]][:k]
        for j, e in enumerate(mine):
            ids[t, j], w[t, j] = e, p[t, e]
        if renormalize:
            renormalize_slots(w[t])
    return _result(ids, w, E)

def expert_choice(logits, k, capacity_factor=1.0, max_experts=4, block_size=64,
                  capacity=None):
    """Expert-choice routing (Zhou et al. 2022 §3.1): S = softmax(logits) per token;
    every expert takes the c = min(T, ceil(capacity_factor * T * k / E)) tokens with
    the highest S[t, e] (ties to the lower token index, NaN last); the weight is S[t, e].

    Per-token view: a token's experts by descending S[t, e] (ties to the lower expert
    id), the first max_experts, then -1 / 0.  Grouped layout: expert e's tokens in
    ascending order, padded to a multiple of block_size with the sentinel T, experts
    one after another (every expert has exactly c tokens); sizes for E*T slots."""
    x = _as_logits(logits)
    T, E = x.shape
    p = softmax_rows(x)
    c = capacity_of(capacity_factor, T, k, E, T) if capacity is None else min(max(capacity, 0), T)
    chosen = np.zeros((T, E), dtype=bool)
    for e in range(E):
        col = p[:, e]
        # Descending score, NaN last, ties to the lower token index (a stable sort).
        key = np.where(np.isnan(col), -np.inf, col.astype(np.float64))
        nan_last = np.isnan(col).astype(np.int8)
        order = np.lexsort((np.arange(T), -key, nan_last))
        chosen[order[:c], e] = True
    ids = np.full((T, max_experts), -1, np.int32)
    w = np.zeros((T, max_experts), F32)
    for t in range(T):
        mine = [e for e in range(E) if chosen[t, e]]
        # By descending score (NaN last), ties to the lower id.
        mine.sort(key=lambda e: (np.isnan(p[t, e]), -np.nan_to_num(p[t, e], nan=0.0), e))
        for j, e in enumerate(mine[:max_experts]):
            ids[t, j], w[t, j] = e, p[t, e]
    size = E * T + E * (block_size - 1)
    blocks = (size + block_size - 1) // block_size
    tokens = np.full(size, T, np.int32)
    token_w = np.zeros(size, F32)
    block_ids = np.full(blocks, -1, np.int32)
    per_expert = (c + block_size - 1) // block_size
    for e in range(E):
        start = e * per_expert * block_size
        mine = np.nonzero(chosen[:, e])[0]
        tokens[start:start + len(mine)] = mine
        token_w[start:start + len(mine)] = p[mine, e]
        block_ids[e * per_expert:(e + 1) * per_expert] = e
    unrouted = int(np.count_nonzero(~chosen.any(axis=1)))
    return {"topk_ids": ids, "topk_weights": w, "expert_token_ids": tokens,
            "expert_token_weights": token_w, "expert_block_ids": block_ids,
            "expert_tokens_post_padded": np.array([E * per_expert * block_size], np.int32),
            "num_unrouted": np.array([unrouted], np.int32)}
