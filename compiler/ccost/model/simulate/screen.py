"""Analytic screening: latency percentiles of thousands of configurations at once, from queueing theory
(docs/simulation.md, "Screening"). The simulator confirms the few a search keeps.

Everything is a numpy array over K configurations (rates, engine limits, a batched step model); the
length distribution is M representative (input, output) points shared by all. For one replica (or one
pool of workers) at arrival rate λ with squared coefficient of variation c_a² of the gaps:

* **Decode.** With n requests decoding on average, a decoding request sees 1 + n rows (the others of an
  M/G/∞ population, by PASTA), a decode step of t_d(1 + n) = step(1 + n, (1 + n)·S̄, 0, 0, 0) with S̄ the
  mean context of a decode row, and every prompt that arrives during its decode window adds the time its
  chunks add to the steps they ride on, ΔP (mixed) or its whole prefill steps (prefill_first, during
  which decoding stops). Per output token: τ = t_d(1 + n)/(1 − λ·E[ΔP]), and Little's law closes it:
  n = λ·E[O − 1]·τ. The least fixed point is found by iteration from n = 0 (then bisection); none below
  the slot limit means the configuration is overloaded.
* **Slots.** A request holds a running slot for L = its own prefill steps + (O − 1)·τ. With
  c = min(max_seqs, KV tokens / KV per request) slots and offered load a = λ·E[L], the wait for a slot is
  Erlang C (M/M/c) scaled by (c_a² + c_L²)/2 (Allen–Cunneen), exponential with mean E[W]/P(wait).
* **Prefill queue.** Prompt tokens are served first come first served at c_p tokens per step
  (c_p = budget − n for mixed, the budget for prefill-only steps) of t_p = step(n, n·S̄, c_p, …): a
  GI/G/1 queue of work P·t_p/c_p per prompt, ρ_p = λ·E[P]·t_p/c_p, mean wait by Kingman (exact
  Pollaczek–Khinchine for Poisson), P(wait > 0) = ρ_p, exponential beyond.
* **TTFT** = (busy share)·(half a step, the step in progress) + slot wait + prefill wait + the request's
  own prefill steps. **TPOT** of a request of O outputs: normal, mean τ, variance from the number of
  others decoding averaged over its window (shot noise: Var = λ·E[∫overlap²]/D²) and from the prompts
  arriving in it (Poisson, scaled by c_a²), added as standard deviations (the two move together).
  **E2E** = TTFT + (O − 1)·TPOT, the parts independent. Percentiles are found by bisection on the
  closed-form survival functions (sums of exponentials, exponentially modified Gaussians).

Validated against the simulator over a grid of loads in tests/test_simulate_screen.py (figures in
docs/simulation.md); it is a screen: a search ranks with it and confirms its choice by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ccost.model.simulate.demand import Demand
from ccost.model.simulate.run import PERCENTILES, Slo

#: chunk positions priced per prompt at most; a longer prompt's chunks are sampled evenly and weighted
MAX_CHUNKS = 64
#: other prompts batched into the same step that the screen tells apart (more count as this many)
JMAX = 4
_TINY = 1e-300


#: cumulative shares that cut a length sample into the points the screen uses: finer in the tail, where
#: the p99 lives
TAIL_EDGES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.85, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0)


@dataclass(frozen=True)
class LengthSample:
    """A sample of requests' (input, output, cached) token counts standing for the length distribution:
    means come from the whole sample, percentiles from a few weighted points (``points``)."""

    input: np.ndarray
    output: np.ndarray
    cached: np.ndarray

    @staticmethod
    def of(demand: Demand, n: int = 4096, seed: int = 0) -> "LengthSample":
        """The demand's lengths: one row when both are fixed; else ``n`` draws (a trace: its rows, or
        ``n`` draws from them if it has more)."""
        i, o = demand.length_points(n, seed)
        return LengthSample(i.astype(float), o.astype(float), demand.cached(i).astype(float))

    def points(self, key) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(input, output, cached, weight) of the sample sorted by ``key`` ("input", "output", or one value
        per row) and cut at ``TAIL_EDGES``: the row at the middle of each cut stands for it, with the
        cut's share as weight (identical rows merged)."""
        n = len(self.input)
        keys = self.input if isinstance(key, str) and key == "input" else (
            self.output if isinstance(key, str) else np.asarray(key))
        order = np.argsort(keys, kind="stable")
        edges = np.asarray(TAIL_EDGES)
        mids = np.minimum((0.5 * (edges[:-1] + edges[1:]) * n).astype(int), n - 1)
        rows = order[mids]
        w = np.diff(edges)
        keyed = {}
        for r, wi in zip(rows.tolist(), w.tolist()):
            k = (self.input[r], self.output[r], self.cached[r])
            keyed[k] = keyed.get(k, 0.0) + wi
        arr = np.array(list(keyed), dtype=float).reshape(-1, 3)
        return arr[:, 0], arr[:, 1], arr[:, 2], np.array(list(keyed.values()))


@dataclass(frozen=True)
class Screen:
    """Per configuration: is it stable, and its latency figures (seconds), each a (K,) array."""

    rate: np.ndarray
    stable: np.ndarray
    ttft: dict[str, np.ndarray]
    tpot: dict[str, np.ndarray]
    e2e: dict[str, np.ndarray]
    busy_share: np.ndarray  # of the replica (aggregated) or of a decode worker
    decode_rows: np.ndarray  # n: requests decoding, time average (per replica / decode worker)
    slot_wait: np.ndarray  # P(a request waits for a slot)
    prefill_load: np.ndarray  # ρ_p of the prefill queue (per replica / prefill worker)

    def percentile(self, metric: str, p: float) -> np.ndarray:
        return getattr(self, metric)[f"p{p:g}"]

    def meets(self, slo: Slo) -> np.ndarray:
        """Stable and every limit met at the SLO's percentile (a goodput share is not screened)."""
        ok = self.stable.copy()
        for m, limit in slo.limits().items():
            ok &= self.percentile(m, slo.percentile) <= limit
        return ok


# ---------------------------------------------------------------------------------------------------
# Distributions: Φ, exponential mixtures, exponentially modified Gaussians

_SQRT2 = math.sqrt(2.0)


def _log_erfc_pos(z: np.ndarray) -> np.ndarray:
    """ln erfc(z) for z ≥ 0 (Numerical Recipes' erfcc: relative error < 1.2e-7 everywhere, tails included)."""
    z = np.minimum(z, 1e100)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (-1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    return np.log(t) - z * z + poly


def _log_ndtr(x: np.ndarray) -> np.ndarray:
    """ln Φ(x)."""
    x = np.asarray(x, dtype=float)
    # Φ(x) = erfc(−x/√2)/2: accurate in log space for x < 0; for x ≥ 0, Φ = 1 − erfc(x/√2)/2
    left = _log_erfc_pos(np.maximum(-x, 0) / _SQRT2) - math.log(2.0)
    right = np.log1p(-0.5 * np.exp(_log_erfc_pos(np.maximum(x, 0) / _SQRT2)))
    return np.where(x < 0, left, right)


def _erfc_parts(z):
    """(t, e) with erfc(z) = t·exp(e) for z ≥ 0 (Numerical Recipes' erfcc: relative error < 1.2e-7)."""
    z = np.minimum(z, 1e100)
    t = 1.0 / (1.0 + 0.5 * z)
    e = (-1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))) - z * z
    return t, e


def _sf_normal(y, mu, sd):
    """P(N(mu, sd²) > y) = Φ((mu − y)/sd)."""
    x = (mu - y) / sd
    t, e = _erfc_parts(np.abs(x) / _SQRT2)
    half = 0.5 * t * np.exp(e)  # Φ(−|x|)
    return np.where(x < 0, half, 1 - half)


def _emg_part(y, mu, sd, r):
    """e^{A}·Φ(B) of ``_sf_emg`` (its survival less the normal's)."""
    d = y - mu
    rs = r * sd
    A = -r * d + 0.5 * rs * rs
    B = d / sd - rs
    t, e = _erfc_parts(np.abs(B) / _SQRT2)
    prod = 0.5 * t * np.exp(np.minimum(A + e, 700))
    return np.where(B < 0, prod, np.exp(np.minimum(A, 700)) - prod)


def _sf_emg(y, mu, sd, r):
    """P(N(mu, sd²) + Exp(rate r) > y), the exponentially modified Gaussian's survival function:
    Φ(−u) + e^{A}·Φ(B) with u = (y − mu)/sd, A = −r(y − mu) + (r·sd)²/2, B = u − r·sd. For B < 0 the
    product is written as one exponential (e^{A}·erfc(−B/√2)/2 = t·e^{A + e}/2), which cannot overflow."""
    d = y - mu
    u = d / sd
    rs = r * sd
    A = -r * d + 0.5 * rs * rs
    B = u - rs
    t, e = _erfc_parts(np.abs(B) / _SQRT2)
    prod = 0.5 * t * np.exp(np.minimum(A + e, 700))
    second = np.where(B < 0, prod, np.exp(np.minimum(A, 700)) - prod)
    return _sf_normal(y, mu, sd) + second


def _wait_components(p1, r1, p2, r2):
    """Two independent waits, each 0 with probability 1 − p_i else Exp(r_i): their sum as a mixture of
    (weight, rate) terms, rate 0 standing for the atom at 0 (the hypoexponential part written as a signed
    combination of two exponentials)."""
    r2 = np.where(np.abs(r2 - r1) < 1e-9 * r1, r1 * (1 + 1e-6), r2)
    both = p1 * p2
    return [((1 - p1) * (1 - p2), 0.0), (p1 * (1 - p2) + both * r2 / (r2 - r1), r1),
            ((1 - p1) * p2 - both * r1 / (r2 - r1), r2)]


def _quantiles(sf, ps, lo, hi, grid: int = 12, iters: int = 8):
    """For each configuration (rows) and percentile in ``ps`` (columns): x with sf(x) = 1 − p/100, sf
    decreasing; sf takes (K, X) arrays. A geometric grid of ``grid`` points on [lo, hi] brackets each
    root, then regula falsi (Illinois) on ln sf refines it."""
    K = len(lo)
    target = np.log(1 - np.asarray(ps, dtype=float) / 100.0)[None, :]
    lo = np.maximum(np.asarray(lo, dtype=float), 1e-12)
    hi = np.maximum(np.asarray(hi, dtype=float), lo * 1.001)
    xs = lo[:, None] * (hi / lo)[:, None] ** (np.arange(grid) / (grid - 1))
    f = np.log(np.maximum(sf(xs), _TINY))[:, :, None] - target[:, None, :]  # (K, grid, npct), decreasing
    above = (f > 0).sum(axis=1)  # grid points still above the target
    i1 = np.clip(above, 1, grid - 1)
    rows = np.arange(K)[:, None]
    a, b = xs[rows, i1 - 1], xs[rows, i1]
    fa = np.take_along_axis(f, (i1 - 1)[:, None, :], axis=1)[:, 0, :]
    fb = np.take_along_axis(f, i1[:, None, :], axis=1)[:, 0, :]
    side = np.zeros_like(a)
    for _ in range(iters):
        denom = np.where(fb - fa != 0, fb - fa, -1.0)
        c = np.clip(b - fb * (b - a) / denom, np.minimum(a, b), np.maximum(a, b))
        fc = np.log(np.maximum(sf(c), _TINY)) - target
        left = fc > 0  # root between c and b
        a2, fa2 = np.where(left, c, a), np.where(left, fc, fa)
        b2, fb2 = np.where(left, b, c), np.where(left, fb, fc)
        # Illinois: halve the stale end's value when the same end is kept twice
        fb2 = np.where(left & (side == 1), fb2 / 2, fb2)
        fa2 = np.where(~left & (side == -1), fa2 / 2, fa2)
        side = np.where(left, 1, -1)
        a, fa, b, fb = a2, fa2, b2, fb2
    out = np.where(np.abs(fa) < np.abs(fb), a, b)
    # a root below the grid (sf already under the target at lo) is lo; above it, hi
    out = np.where(above == 0, lo[:, None], out)
    return np.where(above == grid, hi[:, None], out)


def _erlang_c(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """P(wait) in M/M/c with c servers (whole, ≥ 1) and offered load a < c: Erlang B by its recursion,
    then C = B/(1 − ρ(1 − B))."""
    cmax = int(np.max(c)) if c.size else 0
    b = np.ones_like(a)
    out = np.zeros_like(a)
    for k in range(1, cmax + 1):
        b = a * b / (k + a * b)
        out = np.where(c == k, b, out)
    rho = a / c
    return np.clip(out / (1 - rho * (1 - out)), 0, 1)


# ---------------------------------------------------------------------------------------------------
# The model


def _positions(n: np.ndarray):
    """Per configuration, the chunk (or step) positions priced of its ``n`` (K,) and the chunks each stands
    for: all of them when n ≤ MAX_CHUNKS, else MAX_CHUNKS spread evenly, each for n/MAX_CHUNKS. Yields
    (positions (K,), weights (K,)) once per position; each configuration's own n decides its sampling, so
    that its figures do not depend on the others screened with it (a 512-token budget beside an 8,192 one
    made the latter's single chunk count 16 times)."""
    n = np.asarray(n, dtype=float)
    many = n > MAX_CHUNKS
    for i in range(int(min(np.max(n, initial=0.0), MAX_CHUNKS))):
        spread = np.round(i * (n - 1) / (MAX_CHUNKS - 1))
        yield (np.where(many, spread, i), np.where(many, n / MAX_CHUNKS, (i < n) * 1.0))


def _active(step, n, j: int):
    """The rows a position ``j`` of ``_positions(n)`` still prices (j < n, or every position when n exceeds
    MAX_CHUNKS), with the step model of those rows alone; None when every row is (or the model cannot be
    cut to rows: it has no ``take``). A row past its last position adds exactly 0, so leaving it out
    changes no figure; it saves pricing a few long prompts' 64 positions for the whole batch (n = 0: a
    row the caller leaves out)."""
    act = ((n > MAX_CHUNKS) | (j < n)) & (n > 0)
    if act.all():
        return None
    index = getattr(step, "index", None)
    if index is not None and hasattr(step, "take"):
        sub = np.nonzero(act)[0]
        return sub, step.take(index[sub])
    if not getattr(step, "batch_shape", ()):
        sub = np.nonzero(act)[0]
        return sub, step
    return None


def _chunks(step, P, cached, chunk, rows, ctx, prefill_only):
    """Per configuration and length point: the time of the steps carrying the prompt's chunks
    (``own``) and what they add to the decode-only steps they ride on (``extra``), chunk size ``chunk``
    (K,), with ``rows`` decode rows at context ``ctx`` (K,) in them (none in prefill-only steps)."""
    K = chunk.shape[0]
    c = chunk[:, None]
    n_chunks = np.ceil(P[None, :] / c)
    r = np.zeros((K, 1)) if prefill_only else rows[:, None]
    x = np.zeros((K, 1)) if prefill_only else ctx[:, None]
    base = step(r, x, 0.0 * c, 0.0 * c, 0.0 * c)
    own = np.zeros((K, len(P)))
    extra = np.zeros((K, len(P)))
    last = n_chunks.max(axis=1)
    for k, (j, wj) in enumerate(_positions(last)):
        cut = _active(step, last, k)
        if cut is None:
            sub, st, cc, rr, xx, bb = slice(None), step, c, r, x, base
        else:
            sub, st = cut
            j, wj, cc, rr, xx, bb = j[sub], wj[sub], c[sub], r[sub], x[sub], base[sub]
        j, wj = j[:, None], wj[:, None]
        cj = np.clip(P[None, :] - j * cc, 0, cc)
        s = cached[None, :] + j * cc
        t = st(rr, xx, cj, cj * s + cj * (cj + 1) / 2, (cj > 0) * 1.0)
        live = cj > 0
        own[sub] += wj * np.where(live, t, 0.0)
        extra[sub] += wj * np.where(live, t - bb, 0.0)
    return own, extra


def _own_in_batch(step, P, cached, EP, q_tok, chunk, rows, ctx, prefill_only, j, keep=None):
    """Time from the first step that takes a prompt of P tokens (per length point, (M,)) to the end of
    the step that computes its last token, when ``j`` other prompts (of EP tokens on average) were queued
    in the same step interval, half of them ahead: the batch of P + j·EP tokens is cut into steps of
    ``chunk`` tokens (K,), first come first served. A step's attention pairs are the prompt's own exact
    ones plus q_tok per token of the others; its sequences, 1 + others' tokens/EP. ``keep`` (K,): the rows
    wanted; the others are 0 (configurations already found unstable, whose figures are inf whatever
    this gives)."""
    K = chunk.shape[0]
    c = chunk[:, None]
    ahead = j * EP / 2.0
    total = P[None, :] + j * EP
    last = np.ceil((ahead + P[None, :]) / c)  # the step that computes the prompt's last token
    r = np.zeros((K, 1)) if prefill_only else rows[:, None]
    x = np.zeros((K, 1)) if prefill_only else ctx[:, None]
    own = np.zeros((K, len(P)))
    top = last.max(axis=1) if keep is None else np.where(keep, last.max(axis=1), 0.0)
    if not top.any():
        return own
    for k, (s_i, w) in enumerate(_positions(top)):
        cut = _active(step, top, k)
        if cut is None:
            sub, st, cc, rr, xx, tot, lst = slice(None), step, c, r, x, total, last
        else:
            sub, st = cut
            s_i, w, cc, rr, xx, tot, lst = s_i[sub], w[sub], c[sub], r[sub], x[sub], total, last[sub]
        s_i, w = s_i[:, None], w[:, None]
        lo = s_i * cc
        tokens = np.clip(tot - lo, 0, cc)
        mine = np.clip(np.minimum(lo + cc, ahead + P[None, :]) - np.maximum(lo, ahead), 0, None)
        pos = cached[None, :] + np.maximum(lo - ahead, 0)
        others = tokens - mine
        pairs = mine * pos + mine * (mine + 1) / 2 + others * q_tok
        seqs = (mine > 0) + others / max(EP, 1.0)
        t = st(rr, xx, tokens, pairs, seqs)
        own[sub] += w * np.where(s_i < lst, t, 0.0)
    return own


def _decode_window_var(lam, D0, D, w):
    """Var of the time-average number of other decode windows overlapping one of length D0 (K, M), when
    windows of lengths D (K, M: the same points, weights w) start as a Poisson process of rate lam (K,):
    λ·E_D[∫ overlap² ds]/D0², with ∫ overlap² = 2a³/3 + a²(b − a), a = min(D0, D), b = max."""
    a = np.minimum(D0[:, :, None], D[:, None, :])
    b = np.maximum(D0[:, :, None], D[:, None, :])
    integral = ((2 * a ** 3 / 3 + a * a * (b - a)) * (w / w.sum())).sum(axis=2)
    return lam[:, None] * integral / np.maximum(D0, _TINY) ** 2


def _solve_decode(lam, mean_dec, S, t_dec, dp_per_req, cap):
    """The least n with n = λ·E[O−1]·t_d(1 + n)/(1 − λ·ΔP): fixed-point iteration from 0, then bisection
    on [n, cap] if not yet converged. Returns (n, τ, converged)."""
    denom = 1 - lam * dp_per_req

    def f(n):
        return lam * mean_dec * t_dec(1 + n) / np.maximum(denom, _TINY)

    n = np.zeros_like(lam)
    done = np.zeros(np.shape(lam), dtype=bool)
    for _ in range(40):
        # a configuration that has converged keeps its n (so that its result does not depend on the others
        # solved with it); the rounds stop when every one has
        n_new = np.minimum(f(n), cap * 4 + 1)
        n_new = np.where(done, n, n_new)
        done = done | (np.abs(n_new - n) <= 1e-6 * np.maximum(n_new, 1))
        n = n_new
        if done.all():
            break
    ok = done & (denom > 0) & (n <= cap)
    # slow to converge near saturation: bisect g(n) = f(n) − n on [n, cap] where g(cap) < 0
    hi = cap.astype(float)
    need = ~ok & (denom > 0) & (f(hi) - hi < 0)
    if need.any():
        lo = np.where(need, np.minimum(n, hi), 0.0)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            g = f(mid) - mid
            lo = np.where(need & (g > 0), mid, lo)
            hi = np.where(need & (g <= 0), mid, hi)
        n = np.where(need, hi, n)
        ok = ok | need
    tau = t_dec(1 + n) / np.maximum(denom, _TINY)
    return n, tau, ok


@dataclass(frozen=True)
class _Tpot:
    mean: np.ndarray  # (K,)
    sd: np.ndarray  # (K, M)
    floor: np.ndarray  # (K,): a request alone
    weight: np.ndarray  # (M,): of the points with O ≥ 2 (0 for the others)


def _tpot_parts(lam, n, tau, dp, dp2, ca2, dec, w, t_dec) -> _Tpot:
    """TPOT per length point (``dec`` = O − 1, weights ``w``): mean τ; sd from the others' number averaged
    over the request's window (shot noise) and from the prompts arriving in it (Poisson, ×c_a²), added
    (they move together)."""
    D = dec[None, :] * tau[:, None]
    var_n = _decode_window_var(lam, D, D, w)
    h = np.maximum(np.sqrt(var_n), 1.0)
    up = (1 + n)[:, None] + h
    down = np.maximum((1 + n)[:, None] - h, 1.0)
    slope = (t_dec(up) - t_dec(down)) / (up - down)
    sd_n = slope * np.sqrt(var_n) / np.maximum(1 - lam * dp, _TINY)[:, None]
    sd_p = np.sqrt(ca2[:, None] * lam[:, None] * tau[:, None] * dp2[:, None] / np.maximum(dec[None, :], 1))
    sd = np.maximum(sd_n + sd_p, 1e-9 * tau[:, None])
    has = dec > 0
    return _Tpot(tau, sd, t_dec(np.ones_like(tau)), np.where(has, w, 0.0) / max(w[has].sum(), _TINY))


def _merge(shifts, weights, q: int):
    """At most ``q`` atoms standing for (shifts, weights) (K, A) per row: sorted, cut at tail-refined
    shares of the row's weight, each cut's weighted mean shift with its weight."""
    if shifts.shape[1] <= q:
        return shifts, weights
    order = np.argsort(shifts, axis=1)
    s = np.take_along_axis(shifts, order, axis=1)
    w = np.take_along_axis(weights, order, axis=1)
    total = np.maximum(w.sum(axis=1, keepdims=True), _TINY)
    mid = (np.cumsum(w, axis=1) - w / 2) / total
    edges = np.concatenate([[0.0], 1 - np.geomspace(0.5, 1e-3, q - 1)])  # 0, .5, …, .999
    b = np.clip(np.searchsorted(edges, mid, side="right") - 1, 0, q - 1)
    out_s, out_w = np.zeros((s.shape[0], q)), np.zeros((s.shape[0], q))
    for k in range(q):
        m = b == k
        out_w[:, k] = (w * m).sum(axis=1)
        out_s[:, k] = (w * s * m).sum(axis=1) / np.maximum(out_w[:, k], _TINY)
    return out_s, out_w


def _tails(K, shifts, weights, idle_count, t_res, comps, tpot: _Tpot, e2e_shift, e2e_w, dec_e, tau, tt_mean,
           percentiles):
    """Percentiles of TTFT (atoms + a uniform residual + the two waits), TPOT (a mixture of normals) and
    E2E (per length point, weights ``e2e_w``: its TTFT shift + the waits + a normal decode part)."""
    ps = list(percentiles)
    x3 = (slice(None), slice(None), None)  # (K, X) against (K, X, atoms)
    k3 = (slice(None), None, slice(None))  # (K, atoms) against (K, X, atoms)

    n_idle = idle_count
    si, wi_, sb, wb = shifts[:, :n_idle], weights[:, :n_idle], shifts[:, n_idle:], weights[:, n_idle:]
    u = np.maximum(t_res, _TINY)[:, None, None]

    def ttft_sf(x):
        out = np.zeros_like(x)
        yi = x[x3] - si[k3]  # idle atoms: no step in progress
        yb = x[x3] - sb[k3]  # busy atoms: after U ~ uniform(0, t_res)
        z = np.clip(yb, 0, u)
        for w, r in comps:
            if np.ndim(r) == 0:  # no wait: P(shift > x), P(shift + U > x)
                fi = yi < 0
                fb = np.clip(1 - yb / u, 0, 1)
            else:
                rr = np.maximum(r, _TINY)[:, None, None]
                fi = np.exp(-rr * np.maximum(yi, 0))
                # (1/u)·∫₀ᵘ P(E > y − s) ds = [(u − z) + e^{−r(y − z)}(1 − e^{−rz})/r]/u, z = clip(y, 0, u)
                fb = ((u - z) + np.exp(-rr * np.maximum(yb - z, 0)) * -np.expm1(-rr * z) / rr) / u
            out += w[:, None] * ((wi_[k3] * fi).sum(axis=2) + (wb[k3] * fb).sum(axis=2))
        return out

    use = np.flatnonzero(tpot.weight > 0)

    def tpot_sf(x):
        z = _sf_normal(x[x3], tpot.mean[:, None, None], tpot.sd[:, use][k3])
        return (z * tpot.weight[use]).sum(axis=2)

    mu_e = dec_e[None, :] * tau[:, None]
    sd_e = np.maximum(dec_e[None, :] * tpot.sd, 1e-9 * tau[:, None])

    def e2e_sf(x):
        # Σ_c w_c·sf_c = sf_normal + Σ_(exponential c) w_c·(the exponential part): the weights add to 1
        y = x[x3] - e2e_shift[k3]
        mu, sd = mu_e[k3], sd_e[k3]
        z = _sf_normal(y, mu, sd)
        for w, r in comps:
            rows = np.flatnonzero(w > 1e-12) if np.ndim(r) else []  # most configurations never wait
            if len(rows):
                z[rows] += w[rows, None, None] * _emg_part(y[rows], mu[rows], sd[rows], r[rows, None, None])
        return (z * e2e_w).sum(axis=2)

    wait_tail = sum(w / np.maximum(r, _TINY) for w, r in comps if np.ndim(r))
    spread = 40 * np.where(np.isfinite(wait_tail), wait_tail, 0)
    lo_t = np.maximum(shifts.min(axis=1), 1e-9)
    hi_t = shifts.max(axis=1) + t_res + spread + 1e-9
    qt = _quantiles(ttft_sf, ps, lo_t * 0.999, hi_t)
    out_t = {"mean": tt_mean}
    if len(use):
        lo_p = np.maximum(tpot.floor * 0.5, 1e-9)
        hi_p = tpot.mean + 10 * tpot.sd.max(axis=1)
        qp = np.maximum(_quantiles(tpot_sf, ps, lo_p, hi_p, grid=6), tpot.floor[:, None])
        out_p = {"mean": tpot.mean}
    else:
        qp = np.full((K, len(ps)), np.nan)
        out_p = {"mean": np.full(K, np.nan)}
    # a tight bracket: the normal decode part dominates E2E, and a geometric grid from near 0 would put
    # one point in its body
    body = (e2e_shift + mu_e).min(axis=1)
    lo_e = np.maximum((e2e_shift + mu_e - 8 * sd_e).min(axis=1), 0.05 * body + 1e-9)
    hi_e = (e2e_shift + mu_e + 10 * sd_e).max(axis=1) + spread + 1e-9
    qe = _quantiles(e2e_sf, ps, lo_e * 0.999, hi_e, grid=6)
    out_e = {"mean": tt_mean + (mu_e * e2e_w).sum(axis=1)}
    for j, p in enumerate(ps):
        out_t[f"p{p:g}"], out_p[f"p{p:g}"], out_e[f"p{p:g}"] = qt[:, j], qp[:, j], qe[:, j]
    return out_t, out_p, out_e


@dataclass(frozen=True)
class _Moments:
    mean_dec: float  # E[O − 1]
    var_dec: float
    S: float  # mean context of a decode row: E[(O−1)(I + O/2)]/E[O − 1]
    mean_p: float  # E[P], prompt tokens to prefill
    cs2: float  # Var(P)/E[P]²
    q_tok: float  # attention pairs per prompt token
    mean_total: float  # E[I + O]
    mean_out: float  # E[O]
    input_points: tuple
    output_points: tuple


def _moments(lengths: LengthSample, prompt_per_step: float) -> _Moments:
    """Means of the sample, and two sets of points: cut by prompt tokens (TTFT) and by a request's
    whole work in decode steps, O − 1 + P/prompt_per_step (TPOT, E2E), where prompt_per_step is how
    many prompt tokens cost one decode step (the median configuration's)."""
    I, O, C = lengths.input, lengths.output, lengths.cached
    P = I - C
    dec = np.maximum(O - 1, 0)
    S = float((dec * (I + O / 2)).sum() / dec.sum()) if dec.sum() > 0 else float(I.mean())
    pts = []
    for key in ("input", dec + P / max(prompt_per_step, _TINY)):
        i, o, c, w = lengths.points(key)
        pts.append((i - c, i, c, o, w))
    return _Moments(float(dec.mean()), float(dec.var()), S, float(P.mean()), float(P.var() / P.mean() ** 2),
                    float((P * (C + (P + 1) / 2)).sum() / P.sum()), float((I + O).mean()), float(O.mean()),
                    pts[0], pts[1])


def _prompt_per_step(step, K, B, prefill_step=None) -> float:
    """Prompt tokens that cost as much as one decode step of one row, in the median configuration: a
    full prefill step of B tokens against a decode step (the key that orders requests by their work)."""
    one, zero = np.ones(K), np.zeros(K)
    ps = prefill_step or step
    per_token = np.asarray(ps(zero, zero, B, B * 0, one), dtype=float) / B
    return float(np.median(np.asarray(step(one, one, zero, zero, zero), dtype=float) / per_token))


def _at(xp, fp, x):
    """fp (K, len(xp)) at x (M,), linear in between the points xp (not sorted), constant beyond."""
    order = np.argsort(xp, kind="stable")
    xs, fs = xp[order], fp[:, order]
    if len(xs) == 1:
        return np.repeat(fs, len(x), axis=1)
    i = np.clip(np.searchsorted(xs, x) - 1, 0, len(xs) - 2)
    w = np.clip((x - xs[i]) / np.where(xs[i + 1] > xs[i], xs[i + 1] - xs[i], 1.0), 0, 1)
    return fs[:, i] * (1 - w) + fs[:, i + 1] * w


def _slot_wait(stable, slots, a, EL, ca2, cL2):
    """P(wait for a slot), its exponential rate given a wait, and the mean wait (Erlang C, Allen–Cunneen)."""
    pw = np.where(stable, _erlang_c(slots, np.minimum(a, slots * (1 - 1e-12))), 1.0)
    ws_mean = pw * EL / np.maximum(slots - a, _TINY) * (ca2 + cL2) / 2
    return pw, pw / np.maximum(ws_mean, _TINY), ws_mean


def _prefill_wait(lam, m: _Moments, tok, ca2):
    """The FCFS prompt-token queue: P(wait), its rate, the mean wait (Kingman), and ρ_p."""
    ES = m.mean_p * tok
    rho = lam * ES
    wq_mean = np.where(rho < 1, (ca2 + m.cs2) / 2 * rho / np.maximum(1 - rho, _TINY) * ES, np.inf)
    pq = np.clip(rho, 0, 1)
    return pq, pq / np.maximum(wq_mean, _TINY), wq_mean, rho


def _arr(x, K):
    return np.broadcast_to(np.asarray(x, dtype=float), (K,)).copy()


def screen(rate, lengths: LengthSample, step, *, max_seqs, max_batched_tokens, kv_tokens=None, scv=1.0,
           policy: str = "mixed", kv_policy: str = "grow", percentiles=PERCENTILES,
           prompt_per_step: float | None = None) -> Screen:
    """Screen K aggregated replicas: ``rate`` (K,) requests/s each, engine limits (K,) or scalars,
    ``step`` a step model with ``batch_shape == (K,)`` (or unbatched: one model for all), ``scv`` the
    squared CV of the replica's inter-arrival gaps (1 for Poisson; ``Arrivals.split`` gives a replica's).

    ``prompt_per_step``: prompt tokens costing one decode step, which orders requests by their work to
    choose the E2E length points (default: the batch's median configuration's; give it to make each
    configuration's figures independent of the others screened with it)."""
    lam = np.atleast_1d(np.asarray(rate, dtype=float))
    K = lam.shape[0]
    cap = _arr(max_seqs, K)
    B = _arr(max_batched_tokens, K)
    KV = _arr(np.inf if kv_tokens is None else kv_tokens, K)
    ca2 = _arr(scv, K)
    prefill_only = policy == "prefill_first"
    m = _moments(lengths, prompt_per_step or _prompt_per_step(step, K, B))
    Pi, Ii, Ci, Oi, wi = m.input_points  # cut by input: the prompt side
    Po, Io, Co, Oo, wo = m.output_points  # cut by output: the decode side
    dec_o = np.maximum(Oo - 1, 0)

    def t_dec(rows):
        return step(rows, rows * m.S, 0.0 * rows, 0.0 * rows, 0.0 * rows)

    # decode fixed point, ΔP priced at the current n (a few rounds), then n solved with ΔP held
    n = np.zeros(K)
    for _ in range(3):
        chunk = B if prefill_only else np.maximum(B - n, 1)
        own, extra = _chunks(step, Pi, Ci, chunk, n, n * m.S, prefill_only)
        dp = ((own if prefill_only else extra) * wi).sum(axis=1)
        n, tau, ok = _solve_decode(lam, m.mean_dec, m.S, t_dec, dp, cap)
    chunk = B if prefill_only else np.maximum(B - n, 1)
    own, extra = _chunks(step, Pi, Ci, chunk, n, n * m.S, prefill_only)
    dp = ((own if prefill_only else extra) * wi).sum(axis=1)
    dp2 = ((own if prefill_only else extra) ** 2 * wi).sum(axis=1)

    # slots: held for the own prefill + (O − 1)·τ; KV per running request bounds their number
    own_mean = (own * wi).sum(axis=1)
    EL = own_mean + m.mean_dec * tau
    varL = ((own - own_mean[:, None]) ** 2 * wi).sum(axis=1) + m.var_dec * tau ** 2
    cL2 = varL / np.maximum(EL, _TINY) ** 2
    kv_per = m.mean_total if kv_policy == "reserve" else m.S
    slots = np.maximum(np.floor(np.minimum(cap, KV / kv_per)), 1)
    a = lam * EL
    stable = ok & (a < slots)
    pw, r_s, ws_mean = _slot_wait(stable, slots, a, EL, ca2, cL2)

    # the prefill queue in tokens: c_p per full step of t_p
    c_p = chunk
    t_p = step(n * (not prefill_only), n * m.S * (not prefill_only), c_p, c_p * m.q_tok, np.ones(K))
    pq, r_q, wq_mean, rho = _prefill_wait(lam, m, t_p / c_p, ca2)
    stable &= rho < 1

    # the step in progress at arrival: with probability `busy` the request lands in a decode step, waits
    # for the rest of it (uniform) and is batched with the j others that land in the same step (Poisson,
    # mean λ·t_step; j ≥ JMAX counted as JMAX), half of them ahead of it; an idle engine starts its
    # prompt at once, alone
    busy = np.clip(1 - np.exp(-a), 0, 1)
    t_res = t_dec(np.maximum(n, 1))
    mu = lam * t_res * ca2
    # each configuration keeps j ≤ its own j_k (the rest of the Poisson mass lumped there), so that its
    # result does not depend on the others screened with it; the arrays go to the largest j_k
    jk = np.minimum(JMAX, np.ceil(mu + 4 * np.sqrt(mu))).astype(int)
    jmax = int(jk.max())
    j = np.arange(jmax + 1)
    pj = np.exp(-mu[:, None]) * mu[:, None] ** j / np.array([math.factorial(i) for i in range(jmax + 1)])
    pj = np.where(j[None, :] < jk[:, None], pj, 0.0)
    pj[np.arange(K), jk] = 1 - pj.sum(axis=1)
    # batched prompts' times on at most 6 of the input points (the extremes, the median and the tail),
    # interpolated in prompt tokens to the others
    sub = np.unique(np.round(np.linspace(0, len(Pi) - 1, min(6, len(Pi)))).astype(int))
    owns = [own] + [_at(Pi[sub], _own_in_batch(step, Pi[sub], Ci[sub], m.mean_p, m.q_tok, chunk, n, n * m.S,
                                               prefill_only, j, stable), Pi) for j in range(1, jmax + 1)]
    # TTFT atoms: idle (own_0, no residual) and busy (own_j after a uniform part of a step), merged
    idle_s, idle_w = _merge(own, (1 - busy)[:, None] * wi, 6)
    busy_s, busy_w = _merge(np.concatenate(owns, axis=1),
                            np.concatenate([(busy * pj[:, j])[:, None] * wi for j in range(jmax + 1)], axis=1), 10)
    shifts = np.concatenate([idle_s, busy_s], axis=1)
    weights = np.concatenate([idle_w, busy_w], axis=1)
    comps = _wait_components(pw, r_s, pq, r_q)
    tpot = _tpot_parts(lam, n, tau, dp, dp2, ca2, dec_o, wo, t_dec)
    # E2E per output point: its prompt's mean TTFT shift (idle or busy, j averaged; interpolated in the
    # prompt tokens between the input points), then the decode part
    own_o = _at(Pi, own, Po)
    cob = sum(pj[:, j][:, None] * _at(Pi, o, Po) for j, o in enumerate(owns))
    resid = busy * t_res / 2
    e2e_shift = resid[:, None] + (1 - busy)[:, None] * own_o + busy[:, None] * cob
    tt_mean = resid + (weights * shifts).sum(axis=1) + ws_mean + wq_mean
    out_t, out_p, out_e = _tails(K, shifts, weights, idle_s.shape[1], t_res, comps, tpot, e2e_shift, wo, dec_o, tau,
                                 tt_mean, percentiles)
    for d in (out_t, out_p, out_e):
        for k in d:
            d[k] = np.where(stable, d[k], np.inf)
    return Screen(lam, stable, out_t, out_p, out_e, busy, n, pw, rho)


def screen_disagg(rate, lengths: LengthSample, prefill_step, decode_step, *, prefill_workers, decode_workers,
                  prefill_batched_tokens, decode_max_seqs, decode_kv_tokens=None, transfer=None, scv=1.0,
                  kv_policy: str = "grow", percentiles=PERCENTILES, prompt_per_step: float | None = None) -> Screen:
    """Screen K disaggregated fleets: ``rate`` (K,) requests/s into the whole fleet, spread round robin
    over ``prefill_workers`` and ``decode_workers`` (K,) (each sees rate/W with squared CV scv/W); a
    prefill worker batches prompts up to ``prefill_batched_tokens``; ``transfer(prompt_tokens)`` gives the
    KV move's seconds ((M,) or (K, M)). As ``simulate_disagg``: TTFT = prefill wait + prefill + transfer
    + wait for a decode slot + the rest of the decode step in progress + the first decode step."""
    lam = np.atleast_1d(np.asarray(rate, dtype=float))
    K = lam.shape[0]
    Wp, Wd = _arr(prefill_workers, K), _arr(decode_workers, K)
    lam_p, lam_d = lam / Wp, lam / Wd
    ca2 = _arr(scv, K)
    ca2_p, ca2_d = ca2 / Wp, ca2 / Wd
    Bp = _arr(prefill_batched_tokens, K)
    cap = _arr(decode_max_seqs, K)
    KV = _arr(np.inf if decode_kv_tokens is None else decode_kv_tokens, K)
    m = _moments(lengths, prompt_per_step or _prompt_per_step(decode_step, K, Bp, prefill_step))
    Pi, Ii, Ci, Oi, wi = m.input_points
    Po, Io, Co, Oo, wo = m.output_points
    I, O = lengths.input, lengths.output
    S_d = float((O * (I + (O + 1) / 2)).sum() / O.sum())  # a decode worker's rows: context I + 1 … I + O

    def tx(points):
        if transfer is None:
            return np.zeros((K, len(points)))
        return np.broadcast_to(np.asarray(transfer(points[None, :]), dtype=float), (K, len(points)))

    # prefill workers: prefill-only steps of up to Bp tokens, FCFS over prompt tokens
    zero = np.zeros(K)
    own, _ = _chunks(prefill_step, Pi, Ci, Bp, zero, zero, True)
    own_o, _ = _chunks(prefill_step, Po, Co, Bp, zero, zero, True)
    t_p = prefill_step(zero, zero, Bp, Bp * m.q_tok, np.ones(K))
    pq, r_q, wq_mean, rho = _prefill_wait(lam_p, m, t_p / Bp, ca2_p)

    # decode workers: decode-only continuous batching; every output token is a decode step
    def t_dec(rows):
        return decode_step(rows, rows * S_d, 0.0 * rows, 0.0 * rows, 0.0 * rows)

    n, tau, ok = _solve_decode(lam_d, m.mean_out, S_d, t_dec, np.zeros(K), cap)
    EL = m.mean_out * tau
    cL2 = float(O.var() / O.mean() ** 2) * np.ones(K)
    kv_per = m.mean_total if kv_policy == "reserve" else S_d
    slots = np.maximum(np.floor(np.minimum(cap, KV / kv_per)), 1)
    a = lam_d * EL
    stable = ok & (a < slots) & (rho < 1)
    pw, r_s, ws_mean = _slot_wait(stable, slots, a, EL, ca2_d, cL2)
    busy = np.clip(1 - np.exp(-a), 0, 1)
    t_res = t_dec(np.maximum(n, 1))

    first = (own + tx(Ii) + tau[:, None])  # prefill, move, the first decode step
    idle_s, idle_w = _merge(first, (1 - busy)[:, None] * wi, 6)
    busy_s, busy_w = _merge(first, busy[:, None] * wi, 10)
    shifts = np.concatenate([idle_s, busy_s], axis=1)
    weights = np.concatenate([idle_w, busy_w], axis=1)
    comps = _wait_components(pw, r_s, pq, r_q)
    dec_o = np.maximum(Oo - 1, 0)
    tpot = _tpot_parts(lam_d, n, tau, np.zeros(K), np.zeros(K), ca2_d, dec_o, wo, t_dec)
    resid = busy * t_res / 2
    e2e_shift = resid[:, None] + own_o + tx(Io) + tau[:, None]
    tt_mean = resid + (weights * shifts).sum(axis=1) + ws_mean + wq_mean
    out_t, out_p, out_e = _tails(K, shifts, weights, idle_s.shape[1], t_res, comps, tpot, e2e_shift, wo, dec_o,
                                 tau, tt_mean, percentiles)
    for d in (out_t, out_p, out_e):
        for k in d:
            d[k] = np.where(stable, d[k], np.inf)
    return Screen(lam, stable, out_t, out_p, out_e, busy, n, pw, rho)


def screen_rate(meets, lo, hi, *, iters: int = 30) -> np.ndarray:
    """Per configuration, the highest rate in [lo, hi] at which ``meets(rates) -> bool (K,)`` holds,
    assuming it holds below some rate and not above (monotone): bisection on ln(rate), all configurations
    at once (``iters`` calls of ``meets``; 30 halve the ratio hi/lo 30 times). 0 where even ``lo`` fails,
    ``hi`` where ``hi`` still meets it.

    >>> screen_rate(lambda r: r <= np.array([3.0, 7.0]), 0.1, 100.0).round(3).tolist()
    [3.0, 7.0]
    """
    lo = np.atleast_1d(np.asarray(lo, dtype=float))
    hi = np.atleast_1d(np.asarray(hi, dtype=float))
    lo, hi = np.broadcast_arrays(lo, hi)
    lo, hi = lo.astype(float).copy(), hi.astype(float).copy()
    ok_lo = np.asarray(meets(lo), dtype=bool)
    ok_hi = np.asarray(meets(hi), dtype=bool)
    a, b = np.log(lo), np.log(hi)
    for _ in range(iters):
        mid = 0.5 * (a + b)
        ok = np.asarray(meets(np.exp(mid)), dtype=bool)
        a = np.where(ok, mid, a)
        b = np.where(ok, b, mid)
    return np.where(ok_hi, hi, np.where(ok_lo, np.exp(a), 0.0))


def screen_rate_sections(meets, lo, hi, K: int, *, points: int = 8, rounds: int = 4,
                         groups: np.ndarray | None = None) -> np.ndarray:
    """``screen_rate`` in fewer calls of the screen: per configuration the highest rate in [lo, hi] at which
    ``meets(rates, which) -> bool`` holds (``which``: the configuration each rate is for, so that one call
    screens K configurations at ``points`` rates each), assuming it holds below some rate and not above.
    Each round tries ``points`` rates evenly spaced in ln(rate) inside every configuration's bracket and
    keeps the interval where the verdict changes: the ratio hi/lo shrinks (points + 1)-fold a round (8 and
    4: 6,561-fold, within 0.2 % from a bracket of 10⁵), in 1 + ``rounds`` calls where bisection makes 2 +
    log2 of that. 0 where even ``lo`` fails, ``hi`` where ``hi`` still meets it.

    ``groups`` (K,): when only each group's highest rate is wanted, a configuration whose bracket lies
    wholly below a rate another of its group was seen to meet is dropped after a round (it cannot be its
    group's highest); its value is then a lower bound only.

    >>> f = lambda r, k: r <= np.array([3.0, 7.0])[k]
    >>> screen_rate_sections(f, 0.1, 100.0, 2).round(2).tolist()
    [3.0, 7.0]
    """
    lo = np.broadcast_to(np.asarray(lo, dtype=float), (K,))
    hi = np.broadcast_to(np.asarray(hi, dtype=float), (K,))
    ends = np.asarray(meets(np.concatenate([lo, hi]), np.concatenate([np.arange(K)] * 2)), dtype=bool)
    ok_lo, ok_hi = ends[:K], ends[K:]
    a, b = np.log(lo), np.log(hi)
    j = np.arange(1, points + 1) / (points + 1)
    live = ok_lo & ~ok_hi  # the configurations whose highest rate lies inside the bracket
    for _ in range(rounds):
        if groups is not None and live.any():
            best = np.full(int(groups.max()) + 1, -np.inf)
            np.maximum.at(best, groups, np.where(ok_lo, np.where(ok_hi, b, a), -np.inf))
            live &= b > best[groups]
        k = np.nonzero(live)[0]
        if not k.size:
            break
        grid = a[k, None] + (b - a)[k, None] * j[None, :]
        ok = np.asarray(meets(np.exp(grid).reshape(-1), np.repeat(k, points)), dtype=bool).reshape(k.size, points)
        first_fail = np.where(ok.all(axis=1), points, np.argmin(ok, axis=1))  # the first rate that fails
        rows = np.arange(k.size)
        a[k] = np.where(first_fail > 0, grid[rows, np.maximum(first_fail - 1, 0)], a[k])
        b[k] = np.where(first_fail < points, grid[rows, np.minimum(first_fail, points - 1)], b[k])
    return np.where(ok_hi, hi, np.where(ok_lo, np.exp(a), 0.0))
