"""Independent numpy references for the rule ops, written from the papers and from
DeepSeek's published EPLB (eplb.py: balanced_packing, replicate_experts,
rebalance_experts_hierarchical, rebalance_experts), in plain Python loops over float32
scalars so that every sum and division happens in the order the ops document.

Orders are made exact where the originals leave them to the sort implementation:
descending sorts are stable (ties keep the lower index first), arg-max ties go to the
lower index, the lightest-pack choice ties to the lower pack.
"""
import numpy as np

f32 = np.float32


# --------------------------------------------------------------------------- EPLB

def balanced_packing(weight, num_packs):
    """Items (weights) onto packs of len/num_packs items each -> (pack, rank)."""
    n = len(weight)
    per_pack = n // num_packs
    if per_pack == 1:  # DeepSeek keeps the identity
        return list(range(n)), [0] * n
    order = sorted(range(n), key=lambda i: (-float(weight[i]), i))
    pack_weight = [f32(0)] * num_packs
    pack_items = [0] * num_packs
    pack, rank = [0] * n, [0] * n
    for item in order:
        p = min((i for i in range(num_packs) if pack_items[i] < per_pack),
                key=lambda i: (float(pack_weight[i]), i))
        pack[item] = p
        rank[item] = pack_items[p]
        pack_weight[p] = f32(pack_weight[p] + f32(weight[item]))
        pack_items[p] += 1
    return pack, rank


def replicate_experts(weight, num_phy):
    """One more replica at a time to the expert with the highest load per replica."""
    n = len(weight)
    phy2log, rank, count = list(range(n)), [0] * n, [1] * n
    for _ in range(n, num_phy):
        ratio = [f32(f32(weight[e]) / f32(count[e])) for e in range(n)]
        hot = max(range(n), key=lambda e: (float(ratio[e]), -e))
        phy2log.append(hot)
        rank.append(count[hot])
        count[hot] += 1
    return phy2log, rank, count


def inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def eplb(loads, slots, groups, nodes, gpus, force_global=False):
    """DeepSeek's rebalance_experts for one layer -> (phy2log, log2phy, replica_count)."""
    loads = [f32(x) for x in loads]
    experts = len(loads)
    if force_global or groups % nodes != 0:
        groups, nodes = 1, 1
    group_size = experts // groups
    groups_per_node = groups // nodes
    phy_per_gpu = slots // gpus

    # Step 1: groups onto nodes.
    group_load = []
    for g in range(groups):
        s = f32(0)
        for j in range(group_size):
            s = f32(s + loads[g * group_size + j])
        group_load.append(s)
    gpack, grank = balanced_packing(group_load, nodes)
    log2mlog = [(gpack[e // group_size] * groups_per_node + grank[e // group_size]) * group_size
                + e % group_size for e in range(experts)]
    mlog2log = inverse(log2mlog)
    mlog_load = [loads[mlog2log[x]] for x in range(experts)]

    # Steps 2 and 3 per node.
    per_node, slots_per_node = experts // nodes, slots // nodes
    pphy2log, pphy_rank, mlog_count = [], [], [0] * experts
    for node in range(nodes):
        w = mlog_load[node * per_node:(node + 1) * per_node]
        phy2mlog, phyrank, count = replicate_experts(w, slots_per_node)
        for i, c in enumerate(count):
            mlog_count[node * per_node + i] = c
        phy_load = [f32(w[phy2mlog[i]] / f32(count[phy2mlog[i]])) for i in range(slots_per_node)]
        pack, rank = balanced_packing(phy_load, gpus // nodes)
        phy2pphy = [pack[i] * phy_per_gpu + rank[i] for i in range(slots_per_node)]
        pphy2phy = inverse(phy2pphy)
        for j in range(slots_per_node):
            phy = pphy2phy[j]
            pphy2log.append(mlog2log[node * per_node + phy2mlog[phy]])
            pphy_rank.append(phyrank[phy])
    replica_count = [mlog_count[log2mlog[e]] for e in range(experts)]
    max_replicas = slots - experts + 1
    log2phy = np.full((experts, max_replicas), -1, np.int32)
    for p in range(slots):
        log2phy[pphy2log[p], pphy_rank[p]] = p
    return (np.array(pphy2log, np.int32), log2phy, np.array(replica_count, np.int32))


def device_loads(loads, gpus, phy2log=None, replica_count=None):
    loads = [f32(x) for x in loads]
    out = []
    if phy2log is None:
        per = len(loads) // gpus
        for d in range(gpus):
            s = f32(0)
            for j in range(per):
                s = f32(s + loads[d * per + j])
            out.append(s)
    else:
        per = len(phy2log) // gpus
        for d in range(gpus):
            s = f32(0)
            for j in range(per):
                e = int(phy2log[d * per + j])
                s = f32(s + f32(loads[e] / f32(replica_count[e])))
            out.append(s)
    return np.array(out, np.float32)


def imbalance(gpu_loads):
    s, m = f32(0), f32(-np.inf)
    for x in gpu_loads:
        s = f32(s + f32(x))
        m = max(m, f32(x))
    if s == 0:
        return np.array([1.0], np.float32)
    mean = f32(s / f32(len(gpu_loads)))
    return np.array([f32(m / mean)], np.float32)


# --------------------------------------------------------------------------- DynaExq

def ema(hotness, counts, alpha):
    """DynaExq §3.5: S <- alpha*S + (1-alpha)*c (f32, negative counts as 0)."""
    a = f32(alpha)
    c = np.maximum(np.asarray(counts), 0).astype(np.float32)
    return (a * np.asarray(hotness, np.float32) + (f32(1) - a) * c).astype(np.float32)


def hi_capacity(budget, fixed, hi_bytes, lo_bytes, layers, experts):
    free = max(budget - fixed - layers * experts * lo_bytes, 0)
    return min(free // (layers * hi_bytes), experts)


def _best(scores, candidates):
    """Highest score, ties to the lower id (None if no candidate)."""
    return min(candidates, key=lambda e: (-float(scores[e]), e), default=None)


def _worst(scores, candidates):
    """Lowest-ranked: lowest score, ties to the higher id."""
    return max(candidates, key=lambda e: (-float(scores[e]), e), default=None)


def hot_set(scores, current, capacity, margin=None, rank_slack=None):
    """moe.hot_set: budget first, fill, then margin swaps (or rank slack)."""
    scores = np.asarray(scores, np.float32)
    E = len(scores)
    n = max(0, min(capacity, E))
    H = set(int(e) for e in np.flatnonzero(current))

    def to_capacity():
        while len(H) > n:
            H.remove(_worst(scores, H))
        while len(H) < n:
            H.add(_best(scores, [e for e in range(E) if e not in H]))

    if margin is not None:
        to_capacity()
        for _ in range(n):
            b = _best(scores, [e for e in range(E) if e not in H])
            w = _worst(scores, H)
            if b is None or w is None:
                break
            if float(scores[b]) > float(f32(scores[w] + f32(margin))):
                H.remove(w)
                H.add(b)
        return H
    order = sorted(range(E), key=lambda e: (-float(scores[e]), e))
    rank = {e: r for r, e in enumerate(order)}
    H = {e for e in H if rank[e] < n + rank_slack}
    to_capacity()
    return H


def ranked(members, scores, ascending=False):
    sign = 1 if ascending else -1
    order = sorted(members, key=lambda e: (sign * float(scores[e]), e))
    ids = np.full(len(scores), -1, np.int32)
    ids[:len(order)] = order
    return ids, np.array([len(order)], np.int32)


def dynaexq(hotness, counts, current, alpha, margin, capacity):
    """The dynaexq.mlir rule: new hotness, hi set, ranked promotions / demotions."""
    s = ema(hotness, counts, alpha)
    cur = set(int(e) for e in np.flatnonzero(current))
    hi = hot_set(s, current, capacity, margin=margin)
    flags = np.zeros(len(s), bool)
    flags[sorted(hi)] = True
    up, n_up = ranked(hi - cur, s)
    down, n_down = ranked(cur - hi, s, ascending=True)
    return {"hotness_out": s, "hi_set": flags, "promotions": up, "num_promotions": n_up,
            "demotions": down, "num_demotions": n_down}


# --------------------------------------------------------------------------- Libra

def gpu_requests(ids, token_gpu, gpus, experts):
    req = np.zeros((gpus, experts), np.int64)
    for t in range(len(ids)):
        g = int(token_gpu[t])
        if not 0 <= g < gpus:
            continue
        for e in ids[t]:
            if 0 <= e < experts:
                req[g, e] += 1
    return req


def _home(e, gpus, experts):
    return e // (experts // gpus)


def served_loads(req, M=None):
    G, E = req.shape
    loads = [0] * G
    for g in range(G):
        for e in range(E):
            here = M[e, g] if M is not None else _home(e, G, E) == g
            loads[g if here else _home(e, G, E)] += int(req[g, e])
    return loads


def libra_replicate(req, N, alpha):
    """Libra Appendix B Alg. 1 as moe.libra_replicate documents it."""
    G, E = req.shape
    M = np.zeros((E, G), np.int32)
    for e in range(E):
        M[e, _home(e, G, E)] = 1
    extra = [0] * G
    L = min(N, int(np.floor(f32(f32(N) * f32(alpha)))))
    for g in range(G):  # phase 1: locality
        remote = [e for e in range(E) if _home(e, G, E) != g and req[g, e] > 0]
        for e in sorted(remote, key=lambda e: (-int(req[g, e]), e))[:L]:
            M[e, g] = 1
            extra[g] += 1
    load = served_loads(req, M)
    B = f32(f32(int(req.sum())) / f32(G))
    for _ in range((N - L) * G):  # phase 2: balance
        over = [g for g in range(G) if f32(load[g]) > B]
        if not over:
            break
        src = min(over, key=lambda g: (-load[g], g))
        remote = {e: sum(int(req[g, e]) for g in range(G) if g != src and not M[e, g])
                  for e in range(E) if _home(e, G, E) == src}
        hot = [e for e in remote if remote[e] > 0]
        if not hot:
            break
        e = min(hot, key=lambda e: (-remote[e], e))
        dsts = [g for g in range(G) if g != src and not M[e, g] and extra[g] < N]
        if not dsts:
            break
        dst = min(dsts, key=lambda g: (load[g], g))
        moved = int(req[dst, e])
        if not f32(load[dst] + moved) <= B:
            break
        M[e, dst] = 1
        extra[dst] += 1
        load[dst] += moved
        load[src] -= moved
    return M


def libra_shard(req, M, epsilon):
    """Libra Appendix C Alg. 2 as moe.libra_shard documents it -> (R, loads)."""
    G, E = req.shape
    R = np.zeros((G, E), np.int64)
    load = [0] * G
    for g in range(G):
        for e in range(E):
            if M[e, g]:
                load[g] += int(req[g, e])
            else:
                h = _home(e, G, E)
                load[h] += int(req[g, e])
                R[h, e] += int(req[g, e])
    B = f32(f32(int(req.sum())) / f32(G))
    limit = f32(f32(f32(1) + f32(epsilon)) * B)
    for _ in range(4 * G * E):
        if not f32(max(load)) > limit:
            break
        moved = False
        for gs in sorted([g for g in range(G) if f32(load[g]) > B], key=lambda g: (-load[g], g)):
            for e in sorted([e for e in range(E) if R[gs, e] > 0], key=lambda e: (-R[gs, e], e)):
                cands = [g for g in range(G) if g != gs and M[e, g]]
                if not cands:
                    continue
                gd = min(cands, key=lambda g: (load[g], g))
                cap = int(np.floor(f32(B - f32(load[gd]))))
                if cap >= 1:
                    moved_tokens = min(int(R[gs, e]), cap)
                    R[gs, e] -= moved_tokens
                    R[gd, e] += moved_tokens
                    load[gs] -= moved_tokens
                    load[gd] += moved_tokens
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return R.astype(np.int32), np.array(load, np.float32)


# --------------------------------------------------------------------------- ExpertFlow

def expected_experts(scores, threshold):
    """ExpertFlow §3.2.1: the smallest best-first set reaching threshold of the mass."""
    scores = [f32(x) for x in scores]
    total = f32(0)
    for x in scores:
        total = f32(total + x)
    target = f32(f32(threshold) * total)
    chosen, cum = [], f32(0)
    for e in sorted(range(len(scores)), key=lambda e: (-float(scores[e]), e)):
        if not cum < target:
            break
        chosen.append(e)
        cum = f32(cum + scores[e])
    flags = np.zeros(len(scores), bool)
    flags[chosen] = True
    return flags, len(chosen)


def step_size(num_experts, expert_bytes, bandwidth, layer_time, layers):
    """S = ceil(Ne*Es / (Cs*Tl)) in f32, clamped to [1, layers]."""
    q = f32(f32(f32(num_experts) * f32(expert_bytes)) / f32(f32(bandwidth) * f32(layer_time)))
    c = np.ceil(q)
    c = min(c, f32(layers))
    c = max(c, f32(1))
    return int(c)


def step_feedback(step, initial, stalls, overfetches, events, stall_threshold,
                  overfetch_threshold, layers):
    """ExpertFlow §3.2.2's counters: stall count > threshold -> S+1, overfetch count
    reaching its threshold -> S-1, S in [1, layers]."""
    s = step if step > 0 else initial
    s = min(max(s, 1), layers)
    trace = []
    for ev in events:
        if ev == 1:
            stalls += 1
            if stalls > stall_threshold:
                stalls = 0
                s = min(s + 1, layers)
        elif ev == 2:
            overfetches += 1
            if overfetches >= overfetch_threshold:
                overfetches = 0
                s = max(s - 1, 1)
        trace.append(s)
    return s, stalls, overfetches, trace


def two_level_lru(resident, last_use, requested, predicted, now, step, capacity):
    """ExpertFlow §3.3: one cache step as moe.two_level_lru documents it."""
    E = len(resident)
    res = set(np.flatnonzero(resident).tolist())
    req = set(np.flatnonzero(requested).tolist())
    pred = set(np.flatnonzero(predicted).tolist())
    lu = [now if e in req else int(last_use[e]) for e in range(E)]
    high = {e for e in range(E) if e in pred or (lu[e] >= 0 and now - lu[e] < step)}
    loads, evictions = [], []

    def lru(cands):
        return min(cands, key=lambda e: (lu[e], e), default=None)

    def insert(x, is_requested):
        if len(res) < capacity:
            res.add(x)
            loads.append(x)
            return
        victim = lru([e for e in res if e not in high and e not in req])
        if victim is None:
            victim = lru([e for e in res if e not in req and e not in pred])
        if victim is None and is_requested:
            victim = lru([e for e in res if e not in req])
        if victim is not None:
            res.remove(victim)
            evictions.append(victim)
            res.add(x)
            loads.append(x)

    for e in range(E):
        if e in req and e not in res:
            insert(e, True)
    for e in range(E):
        if e in pred and e not in req and e not in res:
            insert(e, False)

    def flags(s):
        out = np.zeros(E, bool)
        out[sorted(s)] = True
        return out

    def padded(xs):
        out = np.full(E, -1, np.int32)
        out[:len(xs)] = xs
        return out

    return {"resident_out": flags(res), "high_tier": flags(high & res),
            "last_use_out": np.array(lu, np.int32), "loads": padded(loads),
            "evictions": padded(evictions)}


def resident_first(ids, resident):
    """ExpertFlow §3.4: tokens whose experts are all resident first, then the rest."""
    E = len(resident)

    def ready(row):
        return all(e < 0 or (e < E and resident[e]) for e in row)

    first = [t for t in range(len(ids)) if ready(ids[t])]
    rest = [t for t in range(len(ids)) if not ready(ids[t])]
    return np.array(first + rest, np.int32), np.array([len(first)], np.int32)


# --------------------------------------------------------------------------- LLEP

def least_loaded(loads, gpus, capacity_factor=1.1, min_chunk=1024, threshold=1.3):
    """LLEP's least-loaded assignment (arXiv 2601.17111) as moe.least_loaded documents
    it -> (plan [E, gpus], native GPU loads, loads after, weight transfers)."""
    loads = [max(0, int(x)) for x in loads]
    E = len(loads)
    per = E // gpus
    home = [e // per for e in range(E)]
    native = [sum(loads[g * per:(g + 1) * per]) for g in range(gpus)]
    total = sum(native)
    balanced = total // gpus
    cap = int(float(f32(capacity_factor)) * balanced) if balanced > 0 else total
    cap = max(cap, 1)
    plan = np.zeros((E, gpus), np.int32)
    native_f = np.array(native, np.float32)
    if threshold > 0 and imbalance(native_f)[0] < f32(threshold):
        for e in range(E):
            plan[e, home[e]] = loads[e]
        return plan, native_f, native_f.copy(), np.array([0], np.int32)
    pending, assigned = list(native), [0] * gpus

    def effective(g):
        return assigned[g] + pending[g]

    def give(e, g, tokens):
        plan[e, g] += tokens
        assigned[g] += tokens

    for e in sorted(range(E), key=lambda x: (-loads[x], x)):
        g0 = home[e]
        pending[g0] -= loads[e]
        mine = min(loads[e], max(0, cap - effective(g0)))
        give(e, g0, mine)
        rest = loads[e] - mine
        while rest > 0:
            if gpus == 1:
                give(e, g0, rest)
                break
            h = min((g for g in range(gpus) if g != g0), key=lambda g: (effective(g), g))
            room = cap - effective(h)
            chunk = min(rest, room) if room > 0 and (rest <= room or room >= min_chunk) \
                else rest
            give(e, h, chunk)
            rest -= chunk
    moved = sum(1 for e in range(E) for g in range(gpus) if g != home[e] and plan[e, g] > 0)
    return plan, native_f, np.array(assigned, np.float32), np.array([moved], np.int32)
