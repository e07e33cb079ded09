"""Capacity search: the fleet to buy for a traffic and its promises (docs/capacity.md, docs/simulation.md).

A ``search`` block whose base is an online plan (``phase = online``, ``ccost.model.online``) asks: for the base's
traffic at its peak rate (× 1 + ``headroom``) and the policy's SLOs, which fleet — GPU type (``cluster``),
layout (``tp``, ``pp``, ``ep``), replicas (``dp``), engine limits (``max_seqs``, ``step_tokens``),
aggregated or disaggregated (``prefill_workers``, ``decode_workers``, ``prefill_tp``) — meets them at the
least cost? Every axis left out keeps the base plan's value, except the replicas: when ``dp`` is not
listed every count that fits ``max_gpus`` is tried.

How it runs:

1. **Candidates.** Every combination of the axes, kept when its GPUs fit ``max_gpus`` (each cluster's own
   GPUs at most) and its layout the layout rules (pp ≤ layers, ep divides the experts; tp in the NVLink
   domain and tp dividing the KV heads when the search asks, as a layout search does), an engine's KV
   cache holds the traffic's longest request beside the weights, and its step budget holds its running
   requests (``step_tokens`` ≥ ``max_seqs``, as vLLM requires). Disaggregated candidates pair a decode
   layout with prefill workers of tp ``prefill_tp`` (the same pp and ep).
2. **Screen.** Each engine layout's step model is sampled once (``online.sample``: one vectorised call of
   ``lower`` per part over all the layouts of a cluster); the candidates are screened together with
   ``simulate.screen`` / ``screen_disagg`` (queueing theory, docs/simulation.md "Screening"): TTFT, TPOT
   and E2E at p50, p99 and the SLO's percentile at the sized rate, the traffic spread round robin over the
   engines. This is where the time goes (bench/capacity.py prints the rate), and where Dask helps: the
   candidates are cut into tasks (``--scheduler``), each task screens its share, and the arrays are joined
   in search order — the same document as a local run.
3. **Confirm.** The screen is within ~10 % at p50 and ~25 % at p99 of the simulator, weaker near
   saturation and for bursty arrivals: the search walks the candidates in the objective's order, among
   those the screen puts within ``NEAR`` of every limit, and simulates each (``online.Fleet.run``, the
   engine step by step) until one meets the SLOs — the cheapest fleet, aggregated and disaggregated each.
   Every simulation is listed (``confirmations``) with the screen's figures beside it.
4. **Report.** The chosen fleet (the better of the two by the objective), the cheapest fleet that still
   meets the SLOs with one replica down (N+1, its one-down fleet simulated), the Pareto front of cost
   against the p99 request latency (screened), the highest rate one replica of each layout carries
   (screened, ``screen_rate``), and the top fleets by the objective (screened).

The objective ranks: ``cost_per_month`` (the default on priced clusters; else ``gpus``), ``gpus``,
``cost_per_token`` (per million output tokens the traffic asks for at its mean rate), ``latency`` (the
E2E at the SLO percentile), ``throughput_per_gpu``. Ties: fewer GPUs, then the lower latency, then the
search order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ccost import launch
from ccost.model import economics, online
from ccost import layout_rules as rules
from ccost.model import simulate as sim
from ccost import spec as S
from ccost.check.plan import evaluation_errors
from ccost.diagnostics import CcostError, error
from ccost.results import FLEET_COLUMNS, REPLICA_COLUMNS

#: The screen's verdict counts as a near miss up to this factor over a limit (its p99 is within ~25 % of the
#: simulator's below saturation): such a fleet is simulated too when it is cheaper than the screen's pick.
NEAR = 1.25
#: Simulations one search spends confirming, at most (each ~0.1 s for 2,000 requests): per mode (aggregated,
#: disaggregated) on the screen's picks, then on cheaper near misses, and in all with N+1's.
MAX_CONFIRM = 10
PER_MODE = 3
NEAR_TRIES = 2
#: Candidates per task on Dask (or per in-process block).
CHUNK = 4096
#: Each layout's highest rate: ``screen_rate_sections`` between the sized rate / 10³ and × 10², RATE_POINTS
#: rates per configuration a round, RATE_ROUNDS rounds (10⁵ / 9⁴: within 0.2 %, in 5 calls of the screen).
RATE_POINTS = 8
RATE_ROUNDS = 4
RATE_RANGE = (1e-3, 1e2)
#: The objectives a capacity search ranks by, and what each minimises.
OBJECTIVES = ("cost_per_month", "gpus", "cost_per_token", "latency", "throughput_per_gpu")
#: The columns of a candidate.
COLUMNS = FLEET_COLUMNS


# ---------------------------------------------------------------------------------------------------
# The space


@dataclass(frozen=True)
class Layouts:
    """The engine layouts of a search, every cluster's, sampled: ``step`` holds one row per layout."""

    cluster: np.ndarray  # (L,) index into the search's clusters
    tp: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    step: online.Sampled
    kv_tokens: np.ndarray  # (L,) KV-cache tokens an engine of the layout holds beside its weights
    kv_per_token: np.ndarray  # (L,) KV bytes per token per GPU


@dataclass(frozen=True)
class Space:
    """The candidate fleets, as columns (``COLUMNS`` and the layout rows each uses), in search order."""

    cols: dict  # column → (K,) int array; "layout" and "p_layout" (−1: aggregated) index ``Layouts``
    layouts: Layouts
    clusters: tuple  # the search's clusters (entities)
    counts: dict  # what the enumeration dropped, by reason

    @property
    def size(self) -> int:
        return len(self.cols["tp"])

    def fleet(self, i: int) -> dict:
        """Candidate ``i``'s values, by plan field (the cluster by its name)."""
        out = {c: int(self.cols[c][i]) for c in COLUMNS if c != "cluster"}
        out["cluster"] = self.clusters[int(self.cols["cluster"][i])].name
        return out


def _values(search: S.Search, name: str, default):
    return tuple(dict(search.axes).get(name) or default)


def settings(search: S.Search, policy: S.Policy) -> dict:
    """The sized rate, the SLO, the objective and the GPU cap of a capacity search."""
    base = search.base
    t = base.traffic
    clusters = _values(search, "cluster", (base.cluster,))
    objective = search.objective if "objective" in search.spans else (
        "cost_per_month" if all(economics.pricing(c).priced for c in clusters) else "gpus")
    return {"objective": objective, "rate": (t.peak or 0.0) * (1 + search.headroom), "slo": online.slo(policy),
            "clusters": clusters}


def _layout_ok(model: S.Model, cluster: S.Cluster, search: S.Search, tp, pp, ep, gpus_cap) -> np.ndarray:
    kv_heads = model.kv_heads or model.heads
    experts = model.experts or 0
    ok = rules.pp_at_most_layers(pp, model.layers) & rules.ep_has_experts(ep, experts)
    ok &= rules.ep_divides_experts(ep, experts) & rules.fits_cluster(tp * pp * ep, gpus_cap)
    if cluster.inter_node is None:
        ok &= rules.in_one_domain(tp * pp * ep, cluster.domain)
    if search.tp_in_domain:
        ok &= rules.tp_in_domain(tp, cluster.domain)
    if search.tp_divides_kv_heads and kv_heads:
        ok &= rules.tp_divides_kv_heads(tp, kv_heads)
    return ok


def _evaluable(search: S.Search, base: S.Plan, cluster: S.Cluster) -> None:
    """E404 for a cluster no layout of the base can be priced on (the plan rules, layout ones aside)."""
    probe = S.vary(base, cluster=cluster, tp=1, pp=1, ep=1, dp=1, prefill_workers=0)
    errs = [d for d in evaluation_errors(probe) if d.is_error and d.code not in ("E301", "E302")
            and "leaves stages without a layer" not in d.message]
    if errs:
        raise CcostError(error("E404", f"search `{search.name}`: cluster `{cluster.name}` cannot be evaluated: "
                               + "; ".join(d.message for d in errs), search.spans.get("cluster", search.span),
                               "drop it from the `cluster` axis, or fix the block it names"))


def space(search: S.Search, policy: S.Policy, lengths: sim.LengthSample) -> Space:
    """Every candidate fleet of ``search`` that can run (see the module docstring, step 1), with the
    sampled step models of the engine layouts they use."""
    base = search.base
    st = settings(search, policy)
    clusters = st["clusters"]
    tps, pps, eps = (_values(search, a, (getattr(base, a),)) for a in ("tp", "pp", "ep"))
    seqs, budgets = _values(search, "max_seqs", (base.max_seqs,)), _values(search, "step_tokens", (base.step_tokens,))
    pws = _values(search, "prefill_workers", (base.prefill_workers,))
    dws = _values(search, "decode_workers", (base.decode_workers,))
    ptps = _values(search, "prefill_tp", (base.prefill_tp,) if base.prefill_tp else (None,))
    dps_given = dict(search.axes).get("dp")
    b_max = max(budgets)
    top = online.max_prompt(lengths, b_max)
    need = int(lengths.input.max() + lengths.output.max())
    counts = {"layout_rules": 0, "kv_cache": 0, "max_gpus": 0, "budget_below_max_seqs": 0}
    # --- engine layouts, per cluster: decode (or aggregated) ones and the prefill workers' --------------------
    rows = []  # (cluster index, tp, pp, ep)
    for ci, c in enumerate(clusters):
        _evaluable(search, base, c)
        cap = min(search.max_gpus or c.gpus, c.gpus)
        want = {(t, p, e) for t, p, e in itertools.product(tps, pps, eps)}
        want |= {(q, p, e) for q in ptps if q for p, e in itertools.product(pps, eps)}
        grid = np.array(sorted(want), dtype=float).reshape(-1, 3)
        ok = _layout_ok(base.model, c, search, grid[:, 0], grid[:, 1], grid[:, 2], cap)
        counts["layout_rules"] += int(np.count_nonzero(~ok))
        rows += [(ci, *map(int, g)) for g in grid[ok]]
    if not rows:
        return Space({c: np.zeros(0, dtype=np.int64) for c in (*COLUMNS, "layout", "p_layout", "gpus")},
                     None, clusters, counts)
    arr = np.array(rows, dtype=np.int64)
    parts, kvs, pers = [], [], []
    for ci, c in enumerate(clusters):
        sel = arr[:, 0] == ci
        if not sel.any():
            continue
        prep = online.prepare(S.vary(base, cluster=c), policy)
        parts.append(online.sample(prep, b_max, top, tp=arr[sel, 1], pp=arr[sel, 2], ep=arr[sel, 3]))
        kv, per, _, _ = online.kv_capacity(prep, tp=arr[sel, 1], pp=arr[sel, 2], ep=arr[sel, 3])
        kvs.append(np.broadcast_to(kv, (int(sel.sum()),)))
        pers.append(np.broadcast_to(per, (int(sel.sum()),)))
    step = _concat(parts)
    L = Layouts(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], step, np.concatenate(kvs), np.concatenate(pers))
    index = {tuple(r): i for i, r in enumerate(rows)}
    # --- aggregated fleets: layout × max_seqs × step_tokens × replicas ---------------------------------------
    cols: dict[str, list] = {k: [] for k in (*COLUMNS, "layout", "p_layout")}

    def add(**kw):
        for k, v in kw.items():
            cols[k].append(v)

    for ci, c in enumerate(clusters):
        cap = min(search.max_gpus or c.gpus, c.gpus)
        for t, p, e in itertools.product(tps, pps, eps):
            li = index.get((ci, t, p, e))
            if li is None:
                continue
            if L.kv_tokens[li] < need:
                counts["kv_cache"] += 1
                continue
            per = t * p * e
            for pw in pws:
                for dw in (dws if pw else (1,)):
                    for q in (ptps if pw else (None,)):
                        q_ = q or t
                        pi = -1
                        if pw:
                            pi = index.get((ci, q_, p, e), -1)
                            if pi < 0:
                                continue
                            if L.kv_tokens[pi] < max(budgets) + lengths.input.max():
                                counts["kv_cache"] += 1
                                continue
                        g = p * e * (pw * q_ + dw * t) if pw else per
                        dps = dps_given or range(1, cap // g + 1)
                        for s_, b in itertools.product(seqs, budgets):
                            if b < s_:
                                counts["budget_below_max_seqs"] += len(dps)
                                continue
                            for d in dps:
                                if g * d > cap:
                                    counts["max_gpus"] += 1
                                    continue
                                add(cluster=ci, tp=t, pp=p, ep=e, dp=d, max_seqs=s_, step_tokens=b,
                                    prefill_workers=pw, decode_workers=dw if pw else 0,
                                    prefill_tp=q_ if pw else 0, layout=li, p_layout=pi)
    out = {k: np.asarray(v, dtype=np.int64) for k, v in cols.items()}
    out["gpus"] = np.where(out["prefill_workers"] > 0,
                           out["dp"] * out["pp"] * out["ep"] * (out["prefill_workers"] * out["prefill_tp"]
                                                                + out["decode_workers"] * out["tp"]),
                           out["dp"] * out["tp"] * out["pp"] * out["ep"])
    return Space(out, L, clusters, counts)


def _concat(parts: list[online.Sampled]) -> online.Sampled:
    """One batched model of several clusters' layouts (their grids are the same: the search's)."""
    first = parts[0]
    cat = lambda f: np.concatenate([np.atleast_1d(getattr(p, f)) for p in parts])  # noqa: E731
    return online.Sampled(first.tokens, np.concatenate([p.forward for p in parts]), first.pairs,
                          np.concatenate([p.prompt for p in parts]), np.concatenate([p.dec_a for p in parts]),
                          np.concatenate([p.dec_b for p in parts]), first.ctx_ref, cat("per_seq"))


# ---------------------------------------------------------------------------------------------------
# Screening (the part Dask shares)


@dataclass(frozen=True)
class Job:
    """What a worker needs to screen candidates (picklable): the space and the screen's settings."""

    search: S.Search  # remote.run names it
    space: Space
    lengths: sim.LengthSample
    rate: float
    scv: float
    slo: sim.Slo
    percentiles: tuple
    prompt_per_step: float
    transfers: tuple  # per cluster: (α·… as a function) is rebuilt on the worker from these plans
    policy: S.Policy


def _take_transfer(move, k: np.ndarray):
    """``move`` (a ``_transfer``) for the candidates at positions ``k`` of its own (repeats allowed)."""
    return lambda points: move(points)[k]


def _transfer(job: Job, idx: np.ndarray):
    """The KV move of the disaggregated candidates ``idx``, per cluster (``online.transfer_time``)."""
    sp = job.space
    c = sp.cols
    L = sp.layouts
    per = L.kv_per_token[c["p_layout"][idx]]
    group = c["gpus"][idx] // c["dp"][idx]
    moves = [online.transfer_time(plan, job.policy, per, group) for plan in job.transfers]
    cl = c["cluster"][idx]

    def move(points):
        pts = np.asarray(points, dtype=float).reshape(1, -1)
        out = np.zeros((len(idx), pts.shape[1]))
        for ci, m in enumerate(moves):
            sel = cl == ci
            if sel.any():
                out[sel] = np.asarray(m(pts))[sel]
        return out
    return move


@dataclass(frozen=True)
class Screened:
    """A task's share of the screen: its arrays, and ``done``, its share of the search's points (what
    ``remote.run`` adds up for the progress bar)."""

    arrays: dict
    done: int


def screen_units(job: Job, units) -> Screened:
    """Screen the candidates of ``units`` ((start, stop) rows): their latencies (K,) per metric and
    percentile, stability, and the per-engine busy share, in search order."""
    rows = np.asarray(units, dtype=np.int64).reshape(-1, 2)
    with np.errstate(all="ignore"):  # an overloaded candidate's figures are inf: the screen marks it unstable
        outs = [_screen(job, int(a), int(b)) for a, b in rows]
    K, N = job.space.size, job.search.size
    done = sum(N * int(b) // K - N * int(a) // K for a, b in rows) if K else 0
    return Screened({k: np.concatenate([o[k] for o in outs]) for k in outs[0]} if outs else {}, done)


def _screen(job: Job, start: int, stop: int) -> dict:
    return _screen_at(job, np.arange(start, stop), np.full(stop - start, job.rate))


def _screen_at(job: Job, idx: np.ndarray, rates: np.ndarray) -> dict:
    """Screen the candidates ``idx`` (repeats allowed), candidate ``idx[k]`` at the fleet rate ``rates[k]``."""
    sp = job.space
    c = {k: v[idx] for k, v in sp.cols.items()}
    K = len(idx)
    out = {f"{m}_p{q:g}": np.full(K, np.inf) for m in ("ttft", "tpot", "e2e") for q in job.percentiles}
    out["stable"] = np.zeros(K, dtype=bool)
    out["busy"] = np.full(K, np.nan)
    agg = np.nonzero(c["prefill_workers"] == 0)[0]
    dis = np.nonzero(c["prefill_workers"] > 0)[0]
    L = sp.layouts
    cv2 = job.scv
    if agg.size:
        n = (c["dp"] * c["ep"])[agg].astype(float)
        sc = sim.screen(rates[agg] / n, job.lengths, L.step.take(c["layout"][agg]), max_seqs=c["max_seqs"][agg],
                        max_batched_tokens=c["step_tokens"][agg], kv_tokens=L.kv_tokens[c["layout"][agg]],
                        scv=cv2 / n, policy="mixed", kv_policy="grow", percentiles=job.percentiles,
                        prompt_per_step=job.prompt_per_step)
        _fill(out, agg, sc, job.percentiles)
    if dis.size:
        P = (c["dp"] * c["prefill_workers"])[dis]
        D = (c["dp"] * c["decode_workers"])[dis]
        sc = sim.screen_disagg(rates[dis], job.lengths, L.step.take(c["p_layout"][dis]),
                               L.step.take(c["layout"][dis]), prefill_workers=P, decode_workers=D,
                               prefill_batched_tokens=c["step_tokens"][dis], decode_max_seqs=c["max_seqs"][dis],
                               decode_kv_tokens=L.kv_tokens[c["layout"][dis]],
                               transfer=_transfer(job, idx[dis]), scv=cv2, kv_policy="grow",
                               percentiles=job.percentiles, prompt_per_step=job.prompt_per_step)
        _fill(out, dis, sc, job.percentiles)
    return out


def _fill(out: dict, where: np.ndarray, sc: sim.Screen, percentiles) -> None:
    for m in ("ttft", "tpot", "e2e"):
        for q in percentiles:
            out[f"{m}_p{q:g}"][where] = sc.percentile(m, q)
    out["stable"][where] = sc.stable
    out["busy"][where] = sc.busy_share


def _prompt_per_step(step: online.Sampled, B: float) -> float:
    """Prompt tokens that cost as much as one decode row (the screen's key for ordering requests by work),
    from the search's first layout, so that every candidate's figures are independent of the others."""
    one = step.layout(0)
    per_token = float(one(0, 0, B, 0, 1)) / B
    return float(one(1, 1, 0, 0, 0)) / per_token


# ---------------------------------------------------------------------------------------------------
# Running a search


@dataclass
class Result:
    """The screened space with its costs, ranks and the simulations that confirmed a choice."""

    space: Space
    screened: dict
    cost_month: np.ndarray
    cost_mtok: np.ndarray
    primary: np.ndarray
    ratio: np.ndarray  # the worst of the screened figure / its limit, per candidate (inf: unstable)
    latency: np.ndarray  # the screened E2E at the SLO's percentile (ties of the objective)
    confirmations: list = field(default_factory=list)


def run(search: S.Search, policy: S.Policy, progress: Callable[[int, int], None] | None = None,
        scheduler: str | None = None) -> dict:
    """The document section of a capacity search (see the module docstring). ``scheduler``: a Dask
    scheduler's address to screen on (``ccost.remote``)."""
    base = search.base
    t = base.traffic
    st = settings(search, policy)
    if t is None or t.arrivals != "poisson":
        raise CcostError(error("E401", f"search `{search.name}`: a capacity search sizes a fleet for an arrival "
                               f"rate; traffic `{getattr(t, 'name', '?')}` has none (clients or a burst)",
                               search.spans.get("base", search.span), "give the traffic a `rate` and `peak_rate`"))
    for c in st["clusters"]:
        if st["objective"] in ("cost_per_month", "cost_per_token") and not economics.pricing(c).priced:
            raise CcostError(error("E403", f"search `{search.name}` ranks by {st['objective']}, but cluster "
                                   f"`{c.name}` is not priced", search.spans.get("objective", search.span),
                                   economics.not_priced_help(c)))
    d = online.demand(t)
    lengths = sim.LengthSample.of(d)
    sp = space(search, policy, lengths)
    goal = st["slo"]
    pct = tuple(sorted({50.0, 99.0, goal.percentile}))
    K = sp.size
    screened: dict = {}
    if K:
        job = Job(search, sp, lengths, st["rate"], t.burstiness ** 2, goal, pct,
                  _prompt_per_step(sp.layouts.step, float(max(sp.cols["step_tokens"]))),
                  tuple(S.vary(base, cluster=c) for c in sp.clusters), policy)
        units = [(a, min(K, a + CHUNK)) for a in range(0, K, CHUNK)]
        if scheduler:  # the caller (ccost.search) has registered how spec entities pickle
            from ccost import remote

            parts = [p.arrays for p in remote.run(job, units, scheduler, progress, work=screen_units,
                                                  tasks=_tasks)]
            screened = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        else:
            screened = screen_units(job, units).arrays
            if progress is not None:
                progress(search.size, search.size)
    res = _rank(search, policy, sp, screened, st, t, lengths)
    return _document(search, policy, st, t, d, lengths, res)


def _tasks(units: list, workers: int) -> list:
    """The units in contiguous tasks, about two per worker."""
    n = max(1, min(len(units), 2 * max(1, workers)))
    per = -(-len(units) // n)
    return [np.asarray(units[i:i + per], dtype=np.int64) for i in range(0, len(units), per)]


def _rank(search, policy, sp: Space, screened: dict, st: dict, t: S.Traffic, lengths) -> Result:
    K = sp.size
    c = sp.cols
    thr = (t.rate or 0.0) * float(lengths.output.mean())  # output tokens/s the traffic asks for at its mean
    cost_month = np.full(K, np.nan)
    cost_mtok = np.full(K, np.nan)
    for ci, cl in enumerate(sp.clusters):
        sel = c["cluster"] == ci
        pr = economics.pricing(cl)
        if sel.any() and pr.priced:
            e = economics.economics(S.vary(search.base, cluster=cl), pr, c["gpus"][sel].astype(float), thr)
            cost_month[sel] = e.cost_month
            cost_mtok[sel] = e.cost_mtok
    goal: sim.Slo = st["slo"]
    p = goal.percentile
    ratio = np.zeros(K)
    for m, limit in goal.limits().items():
        ratio = np.maximum(ratio, screened.get(f"{m}_p{p:g}", np.full(K, np.inf)) / limit) if K else ratio
    if K:
        ratio = np.where(screened["stable"], ratio, np.inf)
    obj = st["objective"]
    lat = screened.get(f"e2e_p{p:g}", np.zeros(K)) if K else np.zeros(0)
    primary = {"cost_per_month": cost_month, "gpus": c["gpus"].astype(float), "cost_per_token": cost_mtok,
               "latency": lat, "throughput_per_gpu": -thr / np.maximum(c["gpus"], 1)}[obj]
    return Result(sp, screened, cost_month, cost_mtok, np.asarray(primary, dtype=float), ratio,
                  np.asarray(lat, dtype=float))


def _order(res: Result, sel: np.ndarray, closest: bool = False) -> np.ndarray:
    """Indices of ``sel`` by the objective; ties: fewer GPUs, lower latency, search order. ``closest``: ties
    by the screen's ratio to the SLO limits first (near misses: the one nearest to meeting them is the one
    to simulate)."""
    idx = np.nonzero(sel)[0]
    c = res.space.cols
    keys = (idx, res.latency[idx], c["gpus"][idx], res.primary[idx])
    if closest:
        keys = (idx, res.latency[idx], res.ratio[idx], c["gpus"][idx], res.primary[idx])
    return idx[np.lexsort(keys)]


def _plan(search: S.Search, sp: Space, i: int) -> S.Plan:
    """The online plan of candidate ``i`` (to simulate, or to write out)."""
    f = sp.fleet(i)
    cl = sp.clusters[int(sp.cols["cluster"][i])]
    label = ",".join(f"{k}={v}" for k, v in f.items() if k not in ("decode_workers", "prefill_tp")
                     or f["prefill_workers"])
    return S.vary(search.base, name=f"{search.name}[{label}]", cluster=cl, tp=f["tp"], pp=f["pp"], ep=f["ep"],
                  dp=f["dp"], max_seqs=f["max_seqs"], step_tokens=f["step_tokens"],
                  prefill_workers=f["prefill_workers"], decode_workers=max(1, f["decode_workers"]),
                  prefill_tp=f["prefill_tp"] or None)


def _fleet(policy, sp: Space, plan: S.Plan, i: int, lengths) -> online.Fleet:
    """The simulated fleet of candidate ``i``, on the search's sampled step models."""
    c, L = sp.cols, sp.layouts
    li = int(c["layout"][i])
    eng = online.engine(plan, float(L.kv_tokens[li]))
    if not plan.prefill_workers:
        return online.Fleet(eng, L.step.layout(li), online.engines(plan), plan.ep)
    pi = int(c["p_layout"][i])
    p_eng = sim.Engine(max_seqs=eng.max_seqs, max_batched_tokens=plan.step_tokens, kv_tokens=int(L.kv_tokens[pi]),
                       policy="mixed")
    move = online.transfer_time(plan, policy, float(L.kv_per_token[pi]), plan.gpus // plan.dp)
    return online.Fleet(eng, L.step.layout(li), online.engines(plan), (plan.prefill_workers, plan.decode_workers),
                        p_eng, L.step.layout(pi), move, (plan.dp * plan.prefill_workers, plan.dp * plan.decode_workers))


def _simulate(search, policy, res: Result, i: int, d, t, lengths, rate: float, dp: int | None = None) -> dict:
    """Simulate candidate ``i`` (with ``dp`` replicas instead of its own, when given) at ``rate``."""
    sp = res.space
    plan = _plan(search, sp, i)
    if dp is not None:
        plan = replace(plan, dp=dp)
    run_ = _fleet(policy, sp, plan, i, lengths).run(d, t, rate)
    goal = online.slo(policy)
    s = run_.summary(goal)
    pool = run_.pools.get("replica") or run_.pools["decode"]
    out = {f"{m}_{q}_s": _num(s[m][q]) for m in ("ttft", "tpot", "e2e") for q in ("p50", "p99")}
    out.update({f"{m}_slo_s": _num(run_.percentile(m, goal.percentile)) for m in ("ttft", "tpot", "e2e")})
    out.update({"goodput_share": _num(s["goodput_share"]) if goal.limits() else None,
                "utilisation": _num(pool.busy_share), "stable": bool(run_.stable), "meets": bool(run_.meets(goal)),
                "requests": len(run_.ttft), "slo_ratio": online.slo_ratio(goal, run_, s)})
    return out


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _record(res: Result, i: int) -> dict:
    """A candidate as the document lists it: its fleet, GPUs, costs and screened latencies."""
    sp, s = res.space, res.screened
    rec = sp.fleet(i)
    rec["mode"] = "disaggregated" if rec["prefill_workers"] else "aggregated"
    rec["gpus"] = int(sp.cols["gpus"][i])
    if math.isfinite(res.cost_month[i]):  # priced clusters only
        rec["cost_per_month_usd"] = float(res.cost_month[i])
        rec["cost_per_mtok_usd"] = float(res.cost_mtok[i])
    scr = {f"{m}_p{q:g}_s": _num(s[f"{m}_p{q:g}"][i]) for m in ("ttft", "tpot", "e2e") for q in (50.0, 99.0)}
    scr["stable"] = bool(s["stable"][i])
    scr["utilisation"] = _num(s["busy"][i])
    rec["screened"] = scr
    return rec


def _confirm(search, policy, res: Result, pick: np.ndarray, d, t, lengths, rate, budget: list,
             most: int) -> int | None:
    """Walk ``pick`` (candidate indices, best first) simulating each until one meets the SLOs, at most
    ``most`` simulations; ``budget`` (a one-item list) counts the search's simulations left. Returns the
    index confirmed, or None."""
    c = res.space.cols
    tries = 0
    failed: dict = {}  # a fleet's shape → the best screen ratio the simulator refused for it
    for i in pick:
        i = int(i)
        shape = tuple(int(c[k][i]) for k in ("cluster", "tp", "pp", "ep", "dp", "prefill_workers", "decode_workers",
                                              "prefill_tp"))
        if shape in failed and res.ratio[i] >= failed[shape] - 1e-12:
            continue  # the same fleet with other engine limits the screen finds no better: refused alike
        if budget[0] <= 0 or tries >= most:
            return None
        budget[0] -= 1
        tries += 1
        sim_ = _simulate(search, policy, res, i, d, t, lengths, rate)
        res.confirmations.append((i, sim_))
        if sim_["meets"]:
            return i
        failed[shape] = min(failed.get(shape, math.inf), res.ratio[i])
    return None


def _document(search, policy, st, t, d, lengths, res: Result) -> dict:
    sp = res.space
    K = sp.size
    c = sp.cols
    goal: sim.Slo = st["slo"]
    rate = st["rate"]
    near = res.ratio <= NEAR
    meets = res.ratio <= 1.0
    budget = [MAX_CONFIRM]
    picks = {}
    for mode, sel in (("aggregated", c["prefill_workers"] == 0), ("disaggregated", c["prefill_workers"] > 0)):
        # the screen's picks, best first, until the simulator confirms one (at most PER_MODE simulations) ...
        order = _order(res, meets & sel) if K else np.zeros(0, dtype=np.int64)
        got = _confirm(search, policy, res, order, d, t, lengths, rate, budget, PER_MODE)
        # ... then the near misses the objective ranks strictly before it: the screen may be pessimistic
        cheaper = _order(res, near & ~meets & sel, closest=True) if K else np.zeros(0, dtype=np.int64)
        if got is not None:
            cheaper = cheaper[res.primary[cheaper] < res.primary[got]]
        better = _confirm(search, policy, res, cheaper, d, t, lengths, rate, budget, NEAR_TRIES)
        picks[mode] = better if better is not None else got
    sims = dict(res.confirmations)
    best = [i for i in picks.values() if i is not None]
    chosen = min(best, key=lambda i: (res.primary[i], c["gpus"][i], res.latency[i], i)) if best else None

    def fleet_rec(i):
        if i is None:
            return None
        rec = _record(res, i)
        rec["simulated"] = sims.get(i)
        r = capacity.get(i)
        rec["capacity_per_s"] = _num(r) if r is not None and r > 0 else None
        rec["headroom"] = _num(r / rate - 1) if r is not None and r > 0 else None
        rec["launch"] = launch.settings(rec, t, rate, policy)  # what to run it with, and measure it by
        return rec

    # N+1: the cheapest fleet that still meets the SLOs (screened) with one replica down, its one-down fleet
    # simulated
    n1 = None
    if K:
        key = np.stack([c[k] for k in REPLICA_COLUMNS], axis=1)
        by_cfg: dict = {}
        for i in np.nonzero(meets)[0]:
            k = tuple(key[i])
            if k not in by_cfg or c["dp"][i] < c["dp"][by_cfg[k]]:
                by_cfg[k] = int(i)
        plus = []
        lookup = {(tuple(key[i]), int(c["dp"][i])): int(i) for i in range(K)}
        for k, i in by_cfg.items():
            j = lookup.get((k, int(c["dp"][i]) + 1))
            if j is not None:
                plus.append((j, i))
        if plus:
            plus.sort(key=lambda ji: (res.primary[ji[0]], c["gpus"][ji[0]], res.latency[ji[0]], ji[0]))
            for j, i in plus[:3]:
                down = sims.get(i)
                if down is None and budget[0] > 0:
                    budget[0] -= 1
                    down = _simulate(search, policy, res, i, d, t, lengths, rate)
                    res.confirmations.append((i, down))
                if down is not None and down["meets"]:
                    n1 = _record(res, j)
                    n1["one_down"] = _record(res, i)
                    n1["one_down"]["simulated"] = down
                    break
    # the Pareto front: cost (the objective's money, else GPUs) against the p99 request latency, screened
    front = []
    if K:
        money = res.cost_month if np.isfinite(res.cost_month).any() else c["gpus"].astype(float)
        lat = res.screened["e2e_p99"]
        ok = np.nonzero(res.screened["stable"] & np.isfinite(lat) & np.isfinite(money))[0]
        order = ok[np.lexsort((ok, lat[ok], money[ok]))]
        best_lat = np.inf
        for i in order:
            if lat[i] < best_lat:
                best_lat = lat[i]
                front.append(_record(res, int(i)))
    top = [_record(res, int(i)) for i in _order(res, meets)[:search.top]] if K else []
    with np.errstate(all="ignore"):
        layouts = _layout_rates(search, policy, res, st, lengths) if K else []
        job = _job(search, policy, sp, lengths, rate, t, goal) if K else None
        # each answer's capacity (screened): the highest fleet rate within the SLOs, and so its headroom
        answers = {k: v for k, v in (("chosen", chosen), *picks.items()) if v is not None}
        capacity: dict = {}
        if answers:
            idx = np.array(sorted(set(answers.values())), dtype=np.intp)
            # an answer carries about the sized rate: a bracket of 100 around it, 3 rounds (within 0.6 %)
            cap = sim.screen_rate_sections(lambda r, k: _meets_at(job, idx[k], r, goal), rate / 10, rate * 10,
                                           idx.size, points=RATE_POINTS, rounds=3)
            capacity = dict(zip(idx.tolist(), cap.tolist()))
        growth = _growth(search, res, job, goal, rate, chosen) if K else None
    dropped = {k: v for k, v in sp.counts.items() if v}
    return {
        "title": search.title or search.name,
        "base": search.base.name,
        "kind": "capacity",
        "axes": {f: [v.name if isinstance(v, S.Entity) else v for v in vals] for f, vals in search.axes},
        "objective": st["objective"],
        "traffic": t.name,
        "rate_per_s": t.rate,
        "peak_rate_per_s": t.peak,
        "headroom": search.headroom,
        "sized_rate_per_s": rate,
        "slo_percentile": f"p{goal.percentile:g}",
        "max_ttft_s": goal.ttft,
        "max_tpot_s": goal.tpot,
        "max_e2e_s": goal.e2e,
        "min_slo_goodput": goal.goodput,
        "candidates": K,
        "dropped": dropped,
        "stable": int(np.count_nonzero(res.screened["stable"])) if K else 0,
        "meeting": int(np.count_nonzero(meets)) if K else 0,
        "simulations": len(res.confirmations),
        "screen_disagreements": sum(1 for i, s_ in res.confirmations if bool(s_["meets"]) != bool(meets[i])),
        "method": (f"screened: ccost.model.simulate.screen (queueing theory) at {rate:g} requests/s, every candidate; "
                   f"confirmed: ccost.model.simulate, {t.requests:,} requests, seed {t.seed}"),
        "chosen": fleet_rec(chosen),
        "aggregated": fleet_rec(picks.get("aggregated")),
        "disaggregated": fleet_rec(picks.get("disaggregated")),
        "n_plus_1": n1,
        "growth": growth,
        "confirmations": [{**_record(res, i), "simulated": s_} for i, s_ in res.confirmations],
        "pareto": front,
        "layouts": layouts,
        "fleets": top,
    }


#: The traffic growth a capacity search prices beside its answer (the review's "what 1.5× would need").
GROWTH = 1.5


def _job(search, policy, sp: Space, lengths, rate: float, t: S.Traffic, goal: sim.Slo) -> Job:
    pct = tuple(sorted({50.0, 99.0, goal.percentile}))
    return Job(search, sp, lengths, rate, t.burstiness ** 2, goal, pct,
               _prompt_per_step(sp.layouts.step, float(max(sp.cols["step_tokens"]))),
               tuple(S.vary(search.base, cluster=c) for c in sp.clusters), policy)


def _meets_at(job: Job, idx: np.ndarray, rates: np.ndarray, goal: sim.Slo) -> np.ndarray:
    """Whether candidates ``idx`` meet every SLO limit at the fleet rates ``rates`` (screened)."""
    out = _screen_at(job, idx, np.asarray(rates, dtype=float))
    ok = out["stable"].copy()
    for m, limit in goal.limits().items():
        ok &= out.get(f"{m}_p{goal.percentile:g}", np.full(len(idx), np.inf)) <= limit
    return ok


def _growth(search, res: Result, job: Job, goal: sim.Slo, rate: float, chosen: int | None) -> dict:
    """What GROWTH × the sized rate would need (screened, every candidate again): the cheapest fleet by the
    objective, and the chosen fleet's layout and engine limits with the fewest replicas that carry it
    (null: none in the search does)."""
    sp = res.space
    c = sp.cols
    grown = rate * GROWTH
    ok = _meets_at(job, np.arange(sp.size), np.full(sp.size, grown), goal)
    idx = np.nonzero(ok)[0]
    best = idx[np.lexsort((idx, c["gpus"][idx], res.primary[idx]))] if idx.size else idx
    same = None
    if chosen is not None:
        like = idx[np.all([c[k][idx] == c[k][chosen] for k in REPLICA_COLUMNS], axis=0)] if idx.size else idx
        if like.size:
            same = _record(res, int(like[np.argmin(c["dp"][like])]))
    return {"factor": GROWTH, "rate_per_s": grown, "fleet": _record(res, int(best[0])) if best.size else None,
            "same_layout": same}


def _layout_rates(search, policy, res: Result, st, lengths) -> list[dict]:
    """Per engine layout (aggregated) or worker mix (disaggregated), the highest rate one replica carries
    within the SLOs (screened, ``screen_rate``), at its best max_seqs and step_tokens."""
    sp = res.space
    c = sp.cols
    one = np.nonzero(c["dp"] == 1)[0]
    if not one.size:
        return []
    goal: sim.Slo = st["slo"]
    L = sp.layouts
    t = search.base.traffic
    cv2 = t.burstiness ** 2
    pct = (goal.percentile,)
    pps = _prompt_per_step(L.step, float(max(c["step_tokens"])))
    agg = one[c["prefill_workers"][one] == 0]
    dis = one[c["prefill_workers"][one] > 0]
    rates = np.zeros(len(one))
    pos = {int(i): k for k, i in enumerate(one)}
    lo, hi = RATE_RANGE[0] * st["rate"], RATE_RANGE[1] * st["rate"]
    # the table keeps each layout's best engine limits: a configuration that cannot beat its layout's best
    # is dropped after a round (``groups``)
    key = np.stack([c[k][one] for k in ("cluster", "tp", "pp", "ep", "prefill_workers", "decode_workers",
                                        "prefill_tp")], axis=1)
    group = np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)
    gpos = np.zeros(len(c["tp"]), dtype=np.intp)
    gpos[one] = group
    if agg.size:
        n = c["ep"][agg].astype(float)
        lay = c["layout"][agg]

        def meets_agg(r, k):  # rates r for configurations k of agg (several rates each)
            sc = sim.screen(r / n[k], lengths, L.step.take(lay[k]), max_seqs=c["max_seqs"][agg][k],
                            max_batched_tokens=c["step_tokens"][agg][k], kv_tokens=L.kv_tokens[lay[k]],
                            scv=cv2 / n[k], percentiles=pct, prompt_per_step=pps)
            return sc.meets(goal)
        r = sim.screen_rate_sections(meets_agg, lo, hi, agg.size, points=RATE_POINTS, rounds=RATE_ROUNDS,
                                     groups=gpos[agg])
        for i, v in zip(agg, r):
            rates[pos[int(i)]] = v
    if dis.size:
        job = Job(search, sp, lengths, 1.0, cv2, goal, pct, pps, tuple(S.vary(search.base, cluster=cl)
                                                                        for cl in sp.clusters), policy)
        move = _transfer(job, dis)
        p_lay, d_lay = c["p_layout"][dis], c["layout"][dis]

        def meets_dis(r, k):
            sc = sim.screen_disagg(r, lengths, L.step.take(p_lay[k]), L.step.take(d_lay[k]),
                                   prefill_workers=c["prefill_workers"][dis][k],
                                   decode_workers=c["decode_workers"][dis][k],
                                   prefill_batched_tokens=c["step_tokens"][dis][k],
                                   decode_max_seqs=c["max_seqs"][dis][k], decode_kv_tokens=L.kv_tokens[d_lay[k]],
                                   transfer=_take_transfer(move, k), scv=cv2, percentiles=pct, prompt_per_step=pps)
            return sc.meets(goal)
        r = sim.screen_rate_sections(meets_dis, lo, hi, dis.size, points=RATE_POINTS, rounds=RATE_ROUNDS,
                                     groups=gpos[dis])
        for i, v in zip(dis, r):
            rates[pos[int(i)]] = v
    groups: dict = {}
    for k, i in enumerate(one):
        f = sp.fleet(int(i))
        key = (f["cluster"], f["tp"], f["pp"], f["ep"], f["prefill_workers"], f["decode_workers"], f["prefill_tp"])
        if key not in groups or rates[k] > groups[key][1]:
            groups[key] = (int(i), rates[k])
    out = []
    for (cl, tp, pp, ep, pw, dw, ptp), (i, r) in groups.items():
        f = sp.fleet(i)
        out.append({"cluster": cl, "tp": tp, "pp": pp, "ep": ep, "mode": "disaggregated" if pw else "aggregated",
                    "prefill_workers": pw, "decode_workers": dw, "prefill_tp": ptp,
                    "gpus": int(c["gpus"][i]), "max_seqs": f["max_seqs"], "step_tokens": f["step_tokens"],
                    "highest_rate_per_s": _num(r),
                    "replicas_for_rate": (math.ceil(st["rate"] / r - 1e-9) if r > 0 else None)})
    return out
