#!/usr/bin/python3
"""Deterministic synthetic MoE router traces (DESIGN.md §7).

Writes to --out DIR:
  logits.npy       float32 [T, E]  (or [L, T, E] when --layers is given)
  request_ids.npy  int32 [T]
  bias.npy         float32 [E] (or [L, E]), only with --with-bias (a DeepSeek-style
                   score-correction bias for the sigmoid-gated policies)

Model (everything drawn from one numpy Generator seeded by --seed):
  * Hidden states.  Each request r has a latent preference vector u_r ~ N(0, I_D).  Its
    tokens are h_t = sqrt(1 - n^2) * u_r + n * eps_t (n = --token-noise), so tokens of
    one request are correlated (XShare §4, Assumption 4.1) and tokens of different
    requests are not.
  * Layers.  The hidden state drifts slowly from layer to layer:
    h^{l+1} = sqrt(1 - d^2) * h^l + d * eta (d = --drift), so layer l's hidden state
    is a good predictor of layer l+1's routing (Libra's lookahead, ExpertFlow's
    cross-layer prediction).  Every layer has its own router matrix W_l [D, E].
  * Skewed popularity.  Every layer has a Zipf-like popularity vector
    pop_l[perm_l[i]] ∝ 1 / (i + 1)^zipf over a per-layer random expert order; its
    centred log is added to the logits with weight --skew.
  * logits_l = (gain * h^l W_l / sqrt(D) + skew * log pop_l) / temperature.
    Lower --temperature gives sharper (more confident) routers.
  * Requests.  --spec-len S: each request contributes 1 + S consecutive tokens
    (speculative decoding: the generating token and S drafts); the last request may be
    shorter when --tokens is not a multiple of 1 + S.  Otherwise --requests R tokens
    are spread over R requests in a random interleaved order (ids are not contiguous);
    by default every token is its own request (a plain decode batch).

Example:
  scripts/gen_trace.py --tokens 64 --experts 128 --layers 4 --spec-len 3 --seed 1 --out /tmp/tr
"""

import argparse
import math
import os
import sys

import numpy as np


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=None,
                    help="T, tokens in the batch (default 64, or requests*(1+spec-len))")
    ap.add_argument("--experts", type=int, default=128, help="E, routed experts")
    ap.add_argument("--layers", type=int, default=None,
                    help="L; when given, logits are [L, T, E]")
    ap.add_argument("--requests", type=int, default=None,
                    help="R, requests the tokens belong to (default: one per token)")
    ap.add_argument("--spec-len", type=int, default=None,
                    help="S: every request contributes 1+S consecutive tokens")
    ap.add_argument("--hidden", type=int, default=64, help="D, hidden-state dimension")
    ap.add_argument("--zipf", type=float, default=1.0,
                    help="popularity exponent (0 = uniform)")
    ap.add_argument("--skew", type=float, default=0.5,
                    help="weight of the log-popularity term in the logits")
    ap.add_argument("--gain", type=float, default=2.0,
                    help="scale of the hidden-state term of the logits")
    ap.add_argument("--token-noise", type=float, default=0.5,
                    help="in [0,1]: share of a token's hidden state not from its request")
    ap.add_argument("--drift", type=float, default=0.2,
                    help="in [0,1]: hidden-state change per layer")
    ap.add_argument("--router-corr", type=float, default=0.5,
                    help="in [0,1]: correlation of consecutive layers' router matrices "
                         "and popularity orders")
    ap.add_argument("--temperature", type=float, default=1.0,
                    help="logits are divided by it (> 0)")
    ap.add_argument("--with-bias", action="store_true",
                    help="also write bias.npy (score-correction bias, N(0, 0.01^2))")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args(argv)

    def bad(msg):
        ap.error(msg)

    if a.experts < 1:
        bad("--experts must be >= 1")
    if a.layers is not None and a.layers < 1:
        bad("--layers must be >= 1")
    if a.hidden < 1:
        bad("--hidden must be >= 1")
    if not (0.0 <= a.token_noise <= 1.0):
        bad("--token-noise must be in [0, 1]")
    if not (0.0 <= a.router_corr <= 1.0):
        bad("--router-corr must be in [0, 1]")
    if not (0.0 <= a.drift <= 1.0):
        bad("--drift must be in [0, 1]")
    if not (a.temperature > 0.0 and math.isfinite(a.temperature)):
        bad("--temperature must be finite and > 0")
    if a.zipf < 0.0:
        bad("--zipf must be >= 0")
    if a.spec_len is not None:
        if a.spec_len < 0:
            bad("--spec-len must be >= 0")
        per = 1 + a.spec_len
        if a.tokens is None:
            a.tokens = (a.requests if a.requests is not None else 16) * per
        expect = -(-a.tokens // per)
        if a.requests is not None and a.requests != expect:
            bad("--requests %d disagrees with --tokens %d and --spec-len %d (%d requests)"
                % (a.requests, a.tokens, a.spec_len, expect))
        a.requests = expect
    else:
        if a.tokens is None:
            a.tokens = 64
        if a.requests is None:
            a.requests = a.tokens
    if a.tokens < 0:
        bad("--tokens must be >= 0")
    if a.requests < 0 or (a.tokens > 0 and a.requests < 1):
        bad("--requests must be >= 1")
    if a.spec_len is None and a.requests > max(a.tokens, 1):
        bad("--requests must not exceed --tokens")
    return a


def make_request_ids(a, rng):
    T, R = a.tokens, a.requests
    if a.spec_len is not None:
        return (np.arange(T) // (1 + a.spec_len)).astype(np.int32)
    if R == T:
        return np.arange(T, dtype=np.int32)
    # Every request gets at least one token; the order is random, so a request's
    # tokens are interleaved with other requests' tokens.
    ids = np.arange(T) % max(R, 1)
    return rng.permutation(ids).astype(np.int32)


def generate(a):
    rng = np.random.default_rng(a.seed)
    T, E, D = a.tokens, a.experts, a.hidden
    L = a.layers if a.layers is not None else 1
    request_ids = make_request_ids(a, rng)
    # Request preferences and correlated tokens.
    u = rng.standard_normal((max(a.requests, 1), D))
    eps = rng.standard_normal((T, D))
    n = a.token_noise
    h = math.sqrt(1.0 - n * n) * u[request_ids] + n * eps
    logits = np.empty((L, T, E), dtype=np.float32)
    bias = np.empty((L, E), dtype=np.float32)
    d, c = a.drift, a.router_corr
    W = rng.standard_normal((D, E))
    pop_latent = rng.standard_normal(E)
    for layer in range(L):
        if layer > 0:
            h = math.sqrt(1.0 - d * d) * h + d * rng.standard_normal((T, D))
            W = c * W + math.sqrt(1.0 - c * c) * rng.standard_normal((D, E))
            pop_latent = c * pop_latent + math.sqrt(1.0 - c * c) * rng.standard_normal(E)
        perm = np.argsort(-pop_latent, kind="stable")  # most popular first
        pop = np.empty(E)
        pop[perm] = 1.0 / np.power(np.arange(1, E + 1, dtype=np.float64), a.zipf)
        logpop = np.log(pop / pop.sum())
        logpop -= logpop.mean()
        z = (a.gain * (h @ W) / math.sqrt(D) + a.skew * logpop[None, :]) / a.temperature
        logits[layer] = z.astype(np.float32)
        bias[layer] = (0.01 * rng.standard_normal(E)).astype(np.float32)
    return logits, request_ids, bias


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    logits, request_ids, bias = generate(a)
    os.makedirs(a.out, exist_ok=True)
    if a.layers is None:
        logits, bias = logits[0], bias[0]
    np.save(os.path.join(a.out, "logits.npy"), logits)
    np.save(os.path.join(a.out, "request_ids.npy"), request_ids)
    if a.with_bias:
        np.save(os.path.join(a.out, "bias.npy"), bias)
    # Union of every token's top-k (k = min(8, E)) per layer: the batch-level expert
    # activation the reduction policies attack.
    k = min(8, a.experts)
    per_layer = logits.reshape((a.layers or 1), a.tokens, a.experts)
    unions = []
    for z in per_layer:
        sel = np.zeros(a.experts, dtype=bool)
        if a.tokens:
            sel[np.argsort(-z, axis=1, kind="stable")[:, :k].reshape(-1)] = True
        unions.append(int(sel.sum()))
    print("gen_trace: T=%d E=%d L=%s requests=%d spec_len=%s seed=%d -> %s "
          "(logits %s float32, request_ids [%d] int32%s; union of top-%d per layer: "
          "mean %.1f of %d)"
          % (a.tokens, a.experts, a.layers if a.layers is not None else "-",
             a.requests, a.spec_len if a.spec_len is not None else "-", a.seed, a.out,
             list(logits.shape), a.tokens, ", bias" if a.with_bias else "", k,
             float(np.mean(unions)) if unions else 0.0, a.experts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
