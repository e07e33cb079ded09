"""Runs: a replica or a disaggregated prefill/decode pair simulated at a demand, and what it measured
(docs/simulation.md, "Outputs").

Per request (measured requests only): TTFT = first token − arrival; E2E = last token − arrival;
TPOT = (E2E − TTFT)/(O − 1), the mean inter-token time of the request, NaN for O = 1 (vLLM's serving
benchmark, ``vllm/benchmarks/serve.py``, ``calculate_metrics``, defines it so, and counts such a request's
TPOT as meeting any TPOT limit). Percentiles are ``numpy.percentile``'s default (linear interpolation
between order statistics, Hyndman–Fan type 7), as that benchmark computes them.

Warm-up and cool-down: a run draws ``warmup`` × ``requests`` requests before the measured ones and as
many after; the first are left out (the engine starts empty), the last keep the load on while the
measured ones finish and are dropped too. The measurement window W runs from the first measured arrival
to the last; busy share, mean running requests and throughputs are counted over W (a multi-step
stretch that crosses W's edge is split in proportion to time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ccost.model.simulate.demand import Demand, DemandError
from ccost.model.simulate.engine import Engine, EngineRun, run_engine

PERCENTILES = (50.0, 90.0, 95.0, 99.0)
METRICS = ("ttft", "tpot", "e2e")
#: a run whose measured requests finish, within W, less than this share of those that arrived in W is
#: overloaded: its queue grows without bound however good the latencies of a finite run look
STABLE_SHARE = 0.9
#: scheduling rounds a simulation may take per request before it stops (``run_engine``'s ``max_events``): the
#: three examples' runs take at most 4 (median 1.7); one that falls ever further behind (a queue that grows
#: without bound, requests of 256,256 output tokens arriving faster than they finish) took minutes, and ends
#: here, unstable, its unfinished requests' latencies infinite
MAX_EVENTS_PER_REQUEST = 100


@dataclass(frozen=True)
class Slo:
    """Latency promises: each limit (seconds) holds at ``percentile``; ``goodput`` (optional) is the
    least share of requests that must meet every limit individually.

    >>> Slo(ttft=1.0, tpot=0.03).limits()
    {'ttft': 1.0, 'tpot': 0.03}
    """

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None
    percentile: float = 99.0
    goodput: float | None = None

    def __post_init__(self) -> None:
        for m in METRICS:
            v = getattr(self, m)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise DemandError(f"an SLO limit on {m} must be a positive time in seconds; got {v!r}")
        if not (0 < self.percentile <= 100):
            raise DemandError(f"an SLO percentile must be in (0, 100]; got {self.percentile!r}")
        if self.goodput is not None and not (0 < self.goodput <= 1):
            raise DemandError(f"a goodput share must be in (0, 1]; got {self.goodput!r}")

    def limits(self) -> dict[str, float]:
        return {m: getattr(self, m) for m in METRICS if getattr(self, m) is not None}


@dataclass(frozen=True)
class Pool:
    """One kind of engine in a run: a replica (aggregated), or the prefill or the decode workers."""

    workers: int
    busy_share: float  # mean over the workers of their busy time in W / |W|
    mean_running: float  # per worker: time-average over W of the requests admitted and not finished
    mean_decode_rows: float  # per step in W: decode rows (0 for prefill workers)
    preemptions: int
    steps: int


@dataclass(frozen=True)
class Run:
    """The measured requests of a simulation and the system's figures over the window W."""

    arrival: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray  # NaN where O = 1
    e2e: np.ndarray
    input: np.ndarray
    output: np.ndarray
    queue: np.ndarray  # admission − arrival (for a disaggregated run: at the prefill worker)
    window: tuple[float, float]
    pools: dict[str, Pool]
    requests_per_s: float  # measured requests finished in W / |W|
    offered_per_s: float  # measured requests arrived in W / |W|
    output_tokens_per_s: float  # output tokens in W / |W| (every request's, measured or not)
    total_tokens_per_s: float  # prompt tokens computed + output tokens, in W / |W|
    warmup: int
    cooldown: int
    seed: int
    stable: bool = field(default=True)

    @property
    def busy_share(self) -> float:
        """The busy share of the replica (aggregated) or of the decode workers (disaggregated)."""
        return (self.pools.get("replica") or self.pools["decode"]).busy_share

    def percentile(self, metric: str, p: float) -> float:
        x = getattr(self, metric)
        return _percentile(x[~np.isnan(x)], p)

    def stats(self, metric: str, percentiles=PERCENTILES) -> dict[str, float]:
        """``{"mean": …, "p50": …, "p90": …, …}`` of one metric (seconds)."""
        x = getattr(self, metric)
        x = x[~np.isnan(x)]
        out = {"mean": float(x.mean()) if len(x) else math.nan}
        out.update({f"p{p:g}": _percentile(x, p) for p in percentiles})
        return out

    def good(self, slo: Slo) -> np.ndarray:
        """Per measured request: does it meet every limit of ``slo`` (a NaN TPOT meets any)?"""
        ok = np.ones(len(self.ttft), dtype=bool)
        for m, limit in slo.limits().items():
            x = getattr(self, m)
            ok &= np.isnan(x) | (x <= limit)
        return ok

    def goodput(self, slo: Slo) -> tuple[float, float]:
        """(share of measured requests meeting every limit, those requests per second of W)."""
        share = float(self.good(slo).mean())
        return share, share * self.requests_per_s

    def meets(self, slo: Slo) -> bool:
        """Every limit holds at the SLO's percentile, the goodput share (if any) is met, and the run is
        stable (``STABLE_SHARE``)."""
        if not self.stable:
            return False
        for m, limit in slo.limits().items():
            if not self.percentile(m, slo.percentile) <= limit:
                return False
        return slo.goodput is None or self.goodput(slo)[0] >= slo.goodput

    def summary(self, slo: Slo | None = None) -> dict:
        """Plain floats for writers: percentiles of each metric, throughputs, pools, goodput."""
        out = {m: self.stats(m) for m in METRICS}
        out.update(requests=len(self.ttft), window_s=self.window[1] - self.window[0],
                   requests_per_s=self.requests_per_s, offered_per_s=self.offered_per_s,
                   output_tokens_per_s=self.output_tokens_per_s, total_tokens_per_s=self.total_tokens_per_s,
                   stable=self.stable, warmup=self.warmup, cooldown=self.cooldown, seed=self.seed,
                   pools={k: vars(v).copy() for k, v in self.pools.items()})
        if slo is not None:
            share, rate = self.goodput(slo)
            out.update(goodput_share=share, goodput_per_s=rate, meets=self.meets(slo))
        return out


# ---------------------------------------------------------------------------------------------------


def _sizes(demand: Demand, requests: int, warmup: float) -> tuple[int, int]:
    if int(requests) != requests or requests < 1:
        raise DemandError(f"a run needs at least one measured request; got {requests!r}")
    if not (0 <= warmup < 1):
        raise DemandError(f"the warm-up share must be in [0, 1); got {warmup!r}")
    if demand.arrivals.kind == "burst":
        return 0, 0
    n = math.ceil(warmup * requests)
    return n, n


def _pool(runs: list[EngineRun], w0: float, w1: float) -> tuple[Pool, float, float]:
    """A pool's figures over [w0, w1], and its output and total tokens in the window."""
    span = w1 - w0
    busy = running = rows = steps = out_tok = all_tok = 0.0
    for r in runs:
        s = r.segments
        if not len(s):
            continue
        start, end, k, d, p, run, out = s.T
        overlap = np.clip(np.minimum(end, w1) - np.maximum(start, w0), 0, None)
        frac = np.divide(overlap, end - start, out=np.zeros_like(overlap), where=end > start)
        busy += overlap.sum()
        running += (run * overlap).sum()
        rows += (frac * k * d).sum()
        steps += (frac * k).sum()
        out_tok += (frac * out).sum()
        all_tok += (frac * (k * d + p)).sum()
    n = len(runs)
    pool = Pool(n, float(busy / span / n) if span > 0 else math.nan, float(running / span / n) if span > 0 else math.nan,
                float(rows / steps) if steps else 0.0, sum(r.preemptions for r in runs), sum(r.steps for r in runs))
    return pool, float(out_tok), float(all_tok)


def _percentile(x: np.ndarray, p: float) -> float:
    """numpy's (linear) percentile of ``x``; inf where it would interpolate towards an infinite value (a
    request a stopped run never finished: ``run_engine``'s ``max_events``), where numpy gives NaN."""
    if not len(x):
        return math.nan
    if np.isinf(x).any():
        s = np.sort(x)
        if math.isinf(s[math.ceil(p / 100 * (len(s) - 1))]):
            return math.inf
    return float(np.percentile(x, p))


def _window(arrival: np.ndarray, finish: np.ndarray, burst: bool) -> tuple[float, float]:
    if burst or np.nanmax(arrival) <= np.nanmin(arrival):
        return float(np.nanmin(arrival)), float(np.nanmax(finish))
    return float(np.nanmin(arrival)), float(np.nanmax(arrival))


def _measured_run(arrival, first, finish, admit, inputs, outputs, m, pools, tokens, window, warm, cool, seed) -> Run:
    w0, w1 = window
    span = w1 - w0
    a, f, fin = arrival[m], first[m], finish[m]
    o = outputs[m].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(o > 1, (fin - f) / (o - 1), np.nan)
    done_in = np.count_nonzero((fin >= w0) & (fin <= w1))
    came_in = np.count_nonzero((a >= w0) & (a <= w1))
    req_s = done_in / span if span > 0 else math.nan
    offered = came_in / span if span > 0 else math.nan
    stable = bool(span <= 0 or done_in >= STABLE_SHARE * came_in) and bool(np.isfinite(fin).all())
    return Run(a, f - a, tpot, fin - a, inputs[m], outputs[m], admit[m] - a, window, pools, req_s, offered,
               tokens[0] / span if span > 0 else math.nan, tokens[1] / span if span > 0 else math.nan,
               warm, cool, seed, stable)


def simulate(demand: Demand, engine: Engine, step, *, requests: int = 2000, warmup: float = 0.1,
             seed: int = 0) -> Run:
    """One replica serving ``demand`` (its arrivals are the replica's: see ``Demand.per_replica``).

    ``requests`` measured requests (a burst measures its N and ignores this), after ``warmup``·requests
    left out and before as many more that keep the load on; ``seed`` fixes every draw.

    >>> from ccost.model.simulate import Arrivals, Length, Roofline
    >>> d = Demand(Arrivals.poisson(2.0), Length.fixed(512), Length.fixed(64))
    >>> r = simulate(d, Engine(max_seqs=32), Roofline(weights=0.01, flop_token=2e-5), requests=200)
    >>> r.percentile("tpot", 50) > 0.01
    True
    """
    warm, cool = _sizes(demand, requests, warmup)
    burst = demand.arrivals.kind == "burst"
    n = demand.arrivals.clients if burst else warm + requests + cool
    reqs = demand.requests(n, seed)
    m = np.arange(warm, warm + (n if burst else requests))
    er = run_engine(reqs.arrival, reqs.input, reqs.cached, reqs.output, engine, step, until=m,
                    clients=reqs.clients, max_events=MAX_EVENTS_PER_REQUEST * n)
    window = _window(er.arrival[m], er.finish[m], burst)
    pool, out_tok, all_tok = _pool([er], *window)
    return _measured_run(er.arrival, er.first, er.finish, er.admit, reqs.input, reqs.output, m,
                         {"replica": pool}, (out_tok, all_tok), window, warm, cool, seed)


def simulate_disagg(demand: Demand, prefill: Engine, decode: Engine, prefill_step, decode_step, *,
                    prefill_workers: int = 1, decode_workers: int = 1,
                    transfer: Callable[[np.ndarray], np.ndarray] | None = None,
                    requests: int = 2000, warmup: float = 0.1, seed: int = 0) -> Run:
    """Disaggregated serving: ``prefill_workers`` engines that only prefill and ``decode_workers`` engines
    that only decode, request i sent round robin to prefill worker i mod P and decode worker i mod D.

    A prompt is prefilled (batched and chunked up to the prefill engine's budget, FCFS), its KV cache is
    moved in ``transfer(prompt_tokens)`` seconds (default 0), and the decode worker admits it when it has
    a slot and KV room; its first decode step gives the first token. So TTFT = prefill queueing +
    prefill + transfer + waiting for a decode slot + the first decode step; TPOT and E2E as aggregated.
    The prefix-cache hit shortens the prefill only. A closed loop is not modelled here.
    """
    if demand.arrivals.kind == "closed":
        raise DemandError("a closed loop is simulated on one aggregated engine, not on disaggregated workers")
    for name, v in (("prefill_workers", prefill_workers), ("decode_workers", decode_workers)):
        if int(v) != v or v < 1:
            raise DemandError(f"{name} must be a whole number ≥ 1; got {v!r}")
    warm, cool = _sizes(demand, requests, warmup)
    burst = demand.arrivals.kind == "burst"
    n = demand.arrivals.clients if burst else warm + requests + cool
    reqs = demand.requests(n, seed)
    m = np.arange(warm, warm + (n if burst else requests))
    idx = np.arange(n)
    known = ~np.isnan(reqs.arrival)
    done = np.full(n, np.nan)
    admit = np.full(n, np.nan)
    p_runs = []
    for w in range(prefill_workers):
        sel = idx[(idx % prefill_workers == w) & known]
        if not len(sel):
            continue
        er = run_engine(reqs.arrival[sel], reqs.input[sel], reqs.cached[sel], reqs.output[sel], prefill,
                        prefill_step, role="prefill", max_events=MAX_EVENTS_PER_REQUEST * len(sel))
        p_runs.append(er)
        done[sel] = er.finish
        admit[sel] = er.admit
    moved = np.zeros(n) if transfer is None else np.broadcast_to(
        np.asarray(transfer(reqs.input.astype(float)), dtype=float), (n,))
    if np.any(moved < 0) or not np.all(np.isfinite(moved)):
        raise DemandError("a KV transfer time must be a finite time ≥ 0")
    ready = done + moved
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    d_runs = []
    measured = np.zeros(n, dtype=bool)
    measured[m] = True
    never = known & ~np.isfinite(ready)  # prompts a prefill worker never finished (it stopped: max_events)
    first[never] = finish[never] = math.inf
    for w in range(decode_workers):
        sel = idx[(idx % decode_workers == w) & known & ~never]
        if not len(sel):
            continue
        sel = sel[np.argsort(ready[sel], kind="stable")]
        until = np.flatnonzero(measured[sel])
        er = run_engine(ready[sel], reqs.input[sel], reqs.cached[sel], reqs.output[sel], decode, decode_step,
                        role="decode", until=until, max_events=MAX_EVENTS_PER_REQUEST * len(sel))
        d_runs.append(er)
        first[sel] = er.first
        finish[sel] = er.finish
    window = _window(reqs.arrival[m], finish[m], burst)
    p_pool, _, p_tok = _pool(p_runs, *window)
    d_pool, out_tok, d_tok = _pool(d_runs, *window)
    return _measured_run(reqs.arrival, first, finish, admit, reqs.input, reqs.output, m,
                         {"prefill": p_pool, "decode": d_pool}, (out_tok, p_tok + d_tok), window, warm, cool, seed)


# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateSearch:
    """The highest rate found to meet the SLO (``rate``; 0 if none), the lowest found not to (``above``,
    inf if none within ``limit``), and every rate tried with its verdict, in order."""

    rate: float
    above: float
    tried: tuple[tuple[float, bool], ...]


def highest_rate(meets: Callable[[float], bool], start: float, *, rel_tol: float = 0.02, limit: float = 1e6,
                 max_evals: int = 40) -> RateSearch:
    """The highest arrival rate at which ``meets(rate)`` holds, assuming it holds below some rate and not
    above (monotone): from ``start``, double (or halve) until the verdict changes, then bisect in the
    ratio until the two rates are within ``rel_tol`` of each other.

    A simulator's verdict is monotone in practice when every rate runs the same requests (common random
    numbers: ``Demand.requests`` scales one set of unit-rate gaps), though not guaranteed: the search
    returns a rate that was seen to meet the SLO with one seen not to just above it.
    """
    if not (start > 0 and math.isfinite(start)):
        raise DemandError(f"a rate search starts at a positive rate; got {start!r}")
    tried: list[tuple[float, bool]] = []

    def ask(r: float) -> bool:
        ok = bool(meets(r))
        tried.append((r, ok))
        return ok

    lo, hi = 0.0, math.inf
    r = start
    if ask(r):
        lo = r
        while hi == math.inf and len(tried) < max_evals:
            r = lo * 2
            if r > limit:
                return RateSearch(lo, math.inf, tuple(tried))
            if ask(r):
                lo = r
            else:
                hi = r
    else:
        hi = r
        while lo == 0.0 and len(tried) < max_evals:
            r = hi / 2
            if r < start * 1e-6:
                return RateSearch(0.0, hi, tuple(tried))
            if ask(r):
                lo = r
            else:
                hi = r
    while lo > 0 and hi / lo - 1 > rel_tol and len(tried) < max_evals:
        r = math.sqrt(lo * hi)
        if ask(r):
            lo = r
        else:
            hi = r
    return RateSearch(lo, hi, tuple(tried))


def sustainable_rate(demand: Demand, engine: Engine, step, slo: Slo, *, start: float | None = None,
                     rel_tol: float = 0.02, requests: int = 2000, warmup: float = 0.1, seed: int = 0) -> RateSearch:
    """The highest arrival rate one replica serves within ``slo`` (simulated at each rate tried, all with
    the same ``seed``). ``start``: a first guess (the analytic screening's, say); default the demand's rate."""
    if demand.arrivals.kind not in ("poisson", "gamma"):
        raise DemandError("a rate search needs an arrival process with a rate (Poisson or gamma)")
    return highest_rate(lambda r: simulate(demand.at_rate(r), engine, step, requests=requests, warmup=warmup,
                                           seed=seed).meets(slo),
                        start or demand.arrivals.rate, rel_tol=rel_tol)
