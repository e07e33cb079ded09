"""Online serving: ``phase = online`` — requests arrive at a traffic's rate (an open loop) and an engine
serves them with continuous batching, priced step by step by ccost's own step model.

A ``serve`` plan (``ccost.model.serve``) is a closed loop at a fixed concurrency with mean latencies. An online
plan names a ``traffic`` (arrivals at a mean and a peak rate, request lengths, prefix-cache hits) and the
engine's limits — ``max_seqs`` running requests at most and a ``step_tokens`` budget of tokens per step
(vLLM's ``max_num_seqs`` and
``max_num_batched_tokens``: chunked prefill) — and gets what users see:
TTFT, TPOT and request latency at their percentiles, queueing included, goodput, utilisation, and the
highest rate one replica carries within the policy's latency promises (SLOs). With ``prefill_workers``
it is disaggregated: prefill workers (tp ``prefill_tp``) and decode workers (the plan's layout), the KV
cache of each prompt moved between them over the cluster's link.

**The engine is simulated** (``ccost.model.simulate``, docs/simulation.md): vLLM's scheduling order, one engine
step at a time, seeded (the traffic's ``seed``), so the same spec gives the same numbers. Nothing there
prices hardware: each step it schedules is timed by **this module's step model**, ccost's lowered model:

* a step runs R decoding rows (their contexts summing to C tokens) and prompt chunks of P tokens (Q causal
  (query, key) pairs, in N prompts). It is one forward pass of R + P token rows — the weight GEMMs, the MoE
  experts those tokens hit, the tensor-, expert- and pipeline-parallel collectives, the stack's per-layer
  time: ``lower`` of a decode step of R + P one-token rows without a KV cache — plus attention: the decode
  rows' (``lower``'s decode attention for R sequences at context C/R) and the prompts' (``lower``'s causal
  prefill attention of one prompt of S_eff tokens, S_eff·(S_eff + 1)/2 = Q: the same pairs), plus the
  stack's host time t_step + t_seq·(R + N). ``step_program`` builds that step from ``lower``'s programs
  and prices it with ``analysis.analyse`` (the pipeline schedule, exposed communication), as ``ccost.model.serve``
  builds its mixed step; ``ccost explain`` shows a decode and a mixed step derived so.
* For the simulator, the same formulas are evaluated once on arrays over a grid (``sample``: one
  vectorised call per part): the forward pass on a grid of token rows, the prompts' attention on a grid of
  S_eff, the decode attention at three points (it is linear in R and C: a fixed time per kernel when any
  row decodes, one per row and head, one per KV byte). The step's time is linear in the attention and the
  host time (``analysis``: T_stage and t_mb add them), so ``Sampled`` adds the parts, interpolating
  linearly between the grid's points. ``tests/test_online.py`` checks it against ``step_program``.

The plan's ordinary keys (step time, collectives, compute, checklist) describe the **decode step** of the
mean number of requests decoding (simulated) at their mean context; its memory is that step's (the
engine's KV cache is bounded by what fits beside the weights, ``kv_tokens``: requests beyond it wait or
are preempted); its throughput is the output tokens/s the traffic asks for at its mean rate (what the cost
per token is per). Its GPUs: tp·pp·ep·dp, or per replica prefill_workers·prefill_tp·pp·ep +
decode_workers·tp·pp·ep when disaggregated.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ccost import derive, results, units
from ccost.model import analysis, lower
from ccost.model import simulate as sim
from ccost import spec as S
from ccost.derive import named
from ccost.diagnostics import CcostError, error
from ccost.model.program import Priced, p2p

Num = Any

#: Points of the sampled grids: token rows of a step (1 … the budget, geometric) and prompt lengths S_eff
#: of the prompts' attention (1 … the longest prompt with a chunk after it). 96 and 40 points put two
#: neighbours within 9 % (token rows, to an 8,192 budget) and 35 % (S_eff) of each other; the measured
#: kernel curves bend at their tables' points (Llama-3-70B TP=4 on H200: at 144 rows), which 48 points cut
#: across by up to 1.4 % of a step, 96 by 0.5 % (tests/test_online.py).
TOKEN_POINTS = 96
PROMPT_POINTS = 40
#: The decode attention's context sampled at (per row): far from zero, so its slope is not lost in rounding.
CTX_SAMPLE = 1024.0
#: Relative tolerance of the rate search (``highest_rate``), and the evaluations its fallback may spend.
RATE_TOL = 0.05
RATE_EVALS = 8


# ---------------------------------------------------------------------------------------------------
# The step of an online engine, from lower's programs


@dataclass(frozen=True)
class Prepared:
    """``lower.prepare`` of the three programs a step is built from, for one layout: the forward pass
    (a decode step without a KV cache), the decode rows' attention (a decode step with one) and the
    prompts' attention (a prefill step)."""

    fwd: tuple
    dec: tuple
    pre: tuple


def prepare(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> Prepared:
    """The three programs' ``Static`` and ``Inputs`` of ``plan``'s layout (a checked, evaluable plan)."""
    return Prepared(lower.prepare(plan, policy, derivation, lower.Step("decode", None)),
                    lower.prepare(plan, policy, derivation, lower.Step("decode", 1)),
                    lower.prepare(plan, policy, derivation, lower.Step("prefill", 1)))


def _attention(program) -> tuple:
    """(bytes, FLOPs, time, memory time, FLOP time) of the attention row of a program's per-operator roofline."""
    for row in program.compute.operators:
        if row[0] == "attention":
            return row[1], row[2], row[3], row[4], row[5]
    raise AssertionError("a program with a KV cache has an attention operator")  # pragma: no cover


def _forward(prep: Prepared, tokens: Num, **arrays):
    """``lower`` of the forward pass of ``tokens`` token rows (no attention): weights, experts, collectives."""
    static, x = prep.fwd
    return lower.lower(static, lower.with_arrays(x, B=tokens, **arrays))


def _host(x, static, seqs: Num | None) -> Num:
    """The stack's host time of a step of ``seqs`` sequences: t_step + t_seq·seqs (t_step alone for None:
    the part the sampled model adds per sequence, ``Sampled.per_seq``, is left out)."""
    if not static.overheads:
        return 0.0
    if seqs is None or not static.seq_host:
        return x.t_step
    return named("T_host,step", x.t_step + x.t_seq * seqs, "stack: host time of the step, t_step + t_seq·(R + N) "
                 "(the sequences in it)")


def _combine(A, attn_rows: list[tuple], host: Num, memory_from=None):
    """The program of a step: ``A``'s forward pass with the attention ``attn_rows`` added to every stage's
    roofline (and 1/M of it to a micro-batch's) and ``host`` as its host time; its metrics by
    ``analysis.analyse`` (the pipeline schedule and exposed communication of ``A``)."""
    x, cA = A.inputs, A.compute
    if attn_rows:
        b_a = attn_rows[0][0]
        f_a = attn_rows[0][1]
        t_a = attn_rows[0][2]
        tm, tf = attn_rows[0][3], attn_rows[0][4]
        for b, f, t, m_, f_ in attn_rows[1:]:
            b_a, f_a, t_a, tm, tf = b_a + b, f_a + f, t_a + t, tm + m_, tf + f_
        T_a = named("T_attn,step", t_a, "attention of the step: the decode rows' (at their context) + the "
                    "prompts' (causal)") if len(attn_rows) > 1 else t_a
        T_stage = named("T_stage,step", cA.T_stage + T_a, "one stage of the step: the forward pass + attention")
        t_mb = named("t_mb,step", cA.t_mb + T_a / x.M, "one micro-batch of the step on one stage")
        rows = cA.operators + (("attention", b_a, f_a, T_a, tm, tf),)
        bytes_ = named("bytes_step", cA.bytes_gpu + b_a, "bytes read per step per GPU")
        flops = named("F_step", cA.flops_gpu + f_a, "FLOPs per step per GPU")
        T_flop = cA.T_flop + tf
    else:
        T_stage, t_mb, rows, bytes_, flops, T_flop = cA.T_stage, cA.t_mb, cA.operators, cA.bytes_gpu, cA.flops_gpu, \
            cA.T_flop
    T_compute = named("T_compute", x.pp * T_stage + host, "compute of the step on the critical path: pp "
                      "stages in turn + host time") if attn_rows else x.pp * T_stage + host
    compute = replace(cA, bytes_gpu=bytes_, flops_gpu=flops, T_flop=T_flop, T_stage=T_stage, T_compute=T_compute,
                      t_mb=t_mb, operators=rows, T_host=host)
    if memory_from is not None:
        compute = replace(compute, memory=memory_from.memory, kv_gpu=memory_from.kv_gpu)
    prog = replace(A, compute=compute)
    return prog, analysis.analyse(prog)


def step_program(prep: Prepared, rows: Num, context: Num, prompt: Num, s_eff: Num, seqs: Num):
    """The program and metrics of one engine step (see the module docstring): ``rows`` decoding rows at
    ``context`` tokens each (None: none), ``prompt`` prompt tokens whose causal attention has the pairs of
    one prompt of ``s_eff`` tokens (None: no prompt), ``seqs`` sequences in all (the host time's)."""
    tokens = rows if prompt is None else (prompt if rows is None else named("T_rows", rows + prompt,
                                                                              "token rows of the step: R + P"))
    A = _forward(prep, tokens)
    parts, mem = [], None
    if rows is not None:
        sD, xD = prep.dec
        D = lower.lower(sD, lower.with_arrays(xD, B=rows, ctx=context))
        parts.append(_attention(D))
        mem = D.compute
    if prompt is not None:
        sP, xP = prep.pre
        one = derive.constant(1.0, "1", s_eff)
        P = lower.lower(sP, lower.with_arrays(xP, B=one, S=s_eff, ctx=s_eff))
        parts.append(_attention(P))
    return _combine(A, parts, _host(A.inputs, A.static, seqs), mem)


# ---------------------------------------------------------------------------------------------------
# The sampled step model the simulator runs


def _locate(x, grid: np.ndarray):
    """Where ``x`` falls on ``grid``: the segment index i (the first or last segment past the ends) and the
    weight w of its right end, so that the linear interpolation of ``vals`` is vals[i]·(1 − w) + vals[i+1]·w."""
    x = np.asarray(x, dtype=float)
    i = np.searchsorted(grid, x, side="right") - 1
    i = np.minimum(np.maximum(i, 0), len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


def _interp(x, grid: np.ndarray, vals: np.ndarray, rows=None, at=None):
    """Linear interpolation of ``vals`` (the last axis on ``grid``) at ``x``, linear past the ends too;
    ``rows``: the row of ``vals`` each element of ``x`` reads (a batch of layouts; broadcast against x);
    ``at``: ``_locate(x, grid)`` when already known (several tables on one grid)."""
    i, w = _locate(x, grid) if at is None else at
    if rows is None:
        return vals[i] * (1 - w) + vals[i + 1] * w
    return vals[rows, i] * (1 - w) + vals[rows, i + 1] * w


def _interp1(x: float, grid: list, vals: list) -> float:
    i = min(max(bisect.bisect_right(grid, x) - 1, 0), len(grid) - 2)
    g0 = grid[i]
    return vals[i] + (vals[i + 1] - vals[i]) * (x - g0) / (grid[i + 1] - g0)


@dataclass(frozen=True)
class Sampled:
    """ccost's step model sampled for ``ccost.model.simulate`` (its step-model protocol): for a step of R decoding
    rows of context C in all, P prompt tokens with Q (query, key) pairs in N prompts,

        t = forward(R + P) + [R > 0]·(dec_a(R) + dec_b(R)·(C − R·ctx_ref)) + [Q > 0]·prompt(Q) + per_seq·(R + N)

    with ``forward`` on the ``tokens`` grid and ``prompt`` on the ``pairs`` grid interpolated linearly
    (linear past their ends). Every part is ``step_program``'s, sampled (``sample``). Values of shape
    (L, points) hold L layouts; ``index`` (K,) says which layout each of K configurations reads (the
    screen's batch); None: one layout, unbatched."""

    tokens: np.ndarray
    forward: np.ndarray
    pairs: np.ndarray
    prompt: np.ndarray
    dec_a: np.ndarray  # decode attention of R rows at ctx_ref context each, on the tokens grid
    dec_b: np.ndarray  # its time per context token beyond that, at R rows (the kernel curves bend with size)
    ctx_ref: float
    per_seq: Any
    index: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.index is None and np.ndim(self.forward) == 1:
            object.__setattr__(self, "_lists", (self.tokens.tolist(), self.forward.tolist(), self.pairs.tolist(),
                                                self.prompt.tolist(), self.dec_a.tolist(), self.dec_b.tolist(),
                                                float(self.ctx_ref), float(self.per_seq)))
        else:
            object.__setattr__(self, "_lists", None)
        object.__setattr__(self, "_rows", {})  # a decode-only step's time but for its context, by its rows

    @property
    def batch_shape(self) -> tuple:
        return () if self.index is None else (len(self.index),)

    def take(self, index) -> "Sampled":
        """The model of K configurations, configuration k on layout ``index[k]``."""
        new = object.__new__(Sampled)  # what ``replace`` gives, without its cost (the screen cuts rows often)
        new.__dict__.update(self.__dict__, index=np.asarray(index, dtype=np.intp), _lists=None, _rows={})
        return new

    def layout(self, i: int) -> "Sampled":
        """Layout ``i`` alone, unbatched (what one simulation runs)."""
        if np.ndim(self.forward) == 1:
            return replace(self, index=None)
        pick = lambda a: float(np.asarray(a).reshape(-1)[i]) if np.ndim(a) else float(a)  # noqa: E731
        return Sampled(self.tokens, self.forward[i], self.pairs, self.prompt[i], self.dec_a[i], self.dec_b[i],
                       self.ctx_ref, pick(self.per_seq))

    def decode_line(self, rows: int) -> tuple[float, float] | None:
        """A decode-only step of ``rows`` rows as (base, per_ctx): t = base + per_ctx·context, what
        ``__call__`` computes for it (the simulator sums a stretch of such steps in plain Python); None for a
        batch of layouts."""
        L = self._lists
        if L is None or rows <= 0:
            return None
        line = self._rows.get(rows)
        if line is None:
            line = self._line(rows)
        return line[0], line[1]

    def _line(self, rows: int) -> tuple[float, float, float]:
        """``decode_line``'s (base, per_ctx) for ``rows`` rows, and what a step with prompts adds for them
        beside its forward pass and host time (base − forward(R) − per_seq·R), kept by rows: the simulator
        asks again and again for the same few row counts."""
        tg, fv, _, _, da, db, cref, ps = self._lists
        b = _interp1(rows, tg, db)
        base = _interp1(rows, tg, fv) + ps * rows + _interp1(rows, tg, da) - b * rows * cref
        line = self._rows[rows] = (base, b, base - _interp1(rows, tg, fv) - ps * rows)
        return line

    def __call__(self, decode_rows, decode_context, prefill_tokens, prefill_pairs, prefill_seqs):
        L = self._lists
        if L is not None and isinstance(decode_rows, (int, float)) and isinstance(prefill_pairs, (int, float)) \
                and isinstance(prefill_tokens, (int, float)) and isinstance(prefill_seqs, (int, float)):
            # one configuration, the rows and prompts of plain numbers: the simulator's single steps (a float
            # context) and its stretches of decode steps (an array of contexts), in plain Python but for C
            tg, fv, qg, pv, _, _, _, ps = L
            if not prefill_tokens and not prefill_pairs and not prefill_seqs and decode_rows > 0:
                base, per_ctx = self.decode_line(decode_rows)  # the simulator's stretches: same rows, again
                return base + per_ctx * decode_context
            t = _interp1(decode_rows + prefill_tokens, tg, fv) + ps * (decode_rows + prefill_seqs)
            if prefill_pairs > 0:
                t += _interp1(prefill_pairs, qg, pv)
            if decode_rows > 0:
                line = self._rows.get(decode_rows) or self._line(decode_rows)
                t += line[2]
                return t + line[1] * decode_context
            return t if isinstance(decode_context, (int, float)) else np.full(np.shape(decode_context), t)
        # arrays: each part is computed on the shape of its own inputs and broadcast where they meet (the
        # screen passes the decode rows of a step (K, 1) beside its prompt chunks (K, M): the decode terms
        # are interpolated K times, not K·M); the sums are taken in the order of the formula above
        R = np.asarray(decode_rows, dtype=float)
        Cx = np.asarray(decode_context, dtype=float)
        Q = np.asarray(prefill_pairs, dtype=float)
        shape = np.broadcast_shapes(R.shape, Cx.shape, np.shape(prefill_tokens), Q.shape, np.shape(prefill_seqs))
        if self.index is None:
            lay, coef = None, (lambda a: a)
        else:
            lay = self.index.reshape(self.index.shape + (1,) * (len(shape) - 1))
            coef = lambda a: np.asarray(a)[lay] if np.ndim(a) else a  # noqa: E731
        # (the layout index, (K, 1, …), broadcasts against any input: the batch is the first axis)
        T = R + prefill_tokens
        t = _interp(T, self.tokens, self.forward, lay)
        if (R > 0).any():
            at = _locate(R, self.tokens)
            b = _interp(R, self.tokens, self.dec_b, lay, at)
            t = t + np.where(R > 0, _interp(R, self.tokens, self.dec_a, lay, at) + b * (Cx - R * self.ctx_ref), 0.0)
        if (Q > 0).any():
            t = t + np.where(Q > 0, _interp(Q, self.pairs, self.prompt, lay), 0.0)
        t = t + coef(self.per_seq) * (R + prefill_seqs)
        return t if np.shape(t) == shape else np.broadcast_to(t, shape).copy()


def grids(max_tokens: float, max_prompt: float) -> tuple[np.ndarray, np.ndarray]:
    """The token-row grid (1 … ``max_tokens``) and the S_eff grid (1 … ``max_prompt``): whole numbers,
    geometric, the first eight points 1 … 8."""
    def geo(top: float, n: int) -> np.ndarray:
        top = max(float(top), 16.0)
        return np.unique(np.concatenate([np.arange(1.0, 9.0), np.round(np.geomspace(8.0, top, n - 7))]))
    return geo(max_tokens, TOKEN_POINTS), geo(max_prompt, PROMPT_POINTS)


def sample(prep: Prepared, max_tokens: float, max_prompt: float, **layouts) -> Sampled:
    """``step_program``'s parts evaluated on arrays over the grids (``grids``), one vectorised call each,
    for one layout or L at once (``layouts``: tp, pp, ep, M as (L,) arrays)."""
    tg, sg = grids(max_tokens, max_prompt)
    L = max((np.size(v) for v in layouts.values()), default=1)
    batched = bool(layouts)
    col = {k: np.asarray(v, dtype=float).reshape(-1, 1) for k, v in layouts.items()}

    def arr(a):
        return np.asarray(a, dtype=float)

    # the forward pass at every token count; its step time is linear in the attention a stage adds (k)
    A = _forward(prep, tg[None, :] if batched else tg, **col)
    host0 = _host(A.inputs, A.static, None)
    _, m0 = _combine(A, [], host0)
    fwd = np.broadcast_to(arr(m0.step), (L, len(tg)) if batched else (len(tg),)).copy()
    one = _forward(prep, np.ones((1, 1)) if batched else np.ones(1), **col)
    z = np.zeros(np.shape(one.compute.T_stage))
    _, mk0 = _combine(one, [(z, z, z, z, z)], host0)
    _, mk1 = _combine(one, [(z, z, z + 1.0, z, z)], host0)
    k = (arr(mk1.step) - arr(mk0.step)).reshape(-1)  # seconds of step per second of attention on a stage
    # decode attention at every row count of the grid, at CTX_SAMPLE context per row and at twice that: its
    # time at R rows and C context in all is a(R) + b(R)·(C − R·CTX_SAMPLE), exact at the grid's rows at both
    # (the measured kernel curves' efficiency grows with a kernel's size, so neither R nor C is linear alone)
    sD, xD = prep.dec
    n = len(tg)
    B = np.concatenate([tg, tg])
    ctx = np.concatenate([np.full(n, CTX_SAMPLE), np.full(n, 2 * CTX_SAMPLE)])
    D = lower.lower(sD, lower.with_arrays(xD, B=B[None, :] if batched else B, ctx=ctx[None, :] if batched else ctx,
                                          **col))
    td = np.broadcast_to(arr(_attention(D)[2]), (L, 2 * n) if batched else (2 * n,)).reshape(L, 2 * n)
    d_a = td[:, :n]
    d_b = (td[:, n:] - d_a) / (tg * CTX_SAMPLE)  # per context token at R rows
    # the prompts' attention on the S_eff grid, as pairs Q = S(S + 1)/2
    sP, xP = prep.pre
    S_ = sg[None, :] if batched else sg
    P = lower.lower(sP, lower.with_arrays(xP, B=1.0, S=S_, ctx=S_, **col))
    tp = np.broadcast_to(arr(_attention(P)[2]), (L, len(sg)) if batched else (len(sg),))
    x = A.inputs
    per_seq = x.t_seq if (A.static.overheads and A.static.seq_host) else 0.0
    per_seq = np.broadcast_to(arr(per_seq), (L,)).copy() if batched else float(per_seq)
    pairs = sg * (sg + 1) / 2
    if batched:
        return Sampled(tg, fwd, pairs, tp * k[:, None], d_a * k[:, None], d_b * k[:, None], CTX_SAMPLE, per_seq)
    return Sampled(tg, fwd, pairs, np.asarray(tp * k[0]), d_a[0] * k[0], d_b[0] * k[0], CTX_SAMPLE, per_seq)


def kv_capacity(prep: Prepared, **layouts):
    """(KV tokens one engine holds beside its weights, KV bytes per token per GPU, weight bytes per GPU,
    the usable memory per GPU): (max_memory·HBM − weights) / KV bytes per token, per layout."""
    sD, xD = prep.dec
    D = lower.lower(sD, lower.with_arrays(xD, B=1.0, ctx=1.0, **{k: np.asarray(v, float) for k, v in layouts.items()}))
    c = D.compute
    w = c.memory["weights"]
    per_tok = c.kv_gpu
    free = c.memory.limit - w
    tokens = np.floor(np.maximum(free, 0.0) / per_tok)
    return tokens, per_tok, w, c.memory.limit


# ---------------------------------------------------------------------------------------------------
# Demand, promises, engine


def _length(mean: int, cv: float | None, p90: float | None, rng: float | None, top: int | None) -> sim.Length:
    if cv is not None:
        return sim.Length.lognormal(mean, cv=cv, max=top)
    if p90 is not None:
        return sim.Length.lognormal(mean, p90=p90, max=top)
    if rng is not None:
        return sim.Length.uniform(mean, rng, max=top)
    return sim.Length.fixed(mean)


def demand(t: S.Traffic, rate: float | None = None) -> sim.Demand:
    """The ``ccost.model.simulate.Demand`` of a traffic block (at ``rate`` instead of its own, when given).
    Raises ``simulate.DemandError`` for one that cannot be simulated (the checker reports it first)."""
    if t.clients:
        arrivals = sim.Arrivals.closed(t.clients)
    elif t.burst:
        arrivals = sim.Arrivals.burst(t.burst)
    else:
        arrivals = sim.Arrivals.gamma(rate if rate is not None else t.rate, t.burstiness)
    if t.trace_data is not None:
        return sim.Demand(arrivals, trace=t.trace_data, prefix_hit=t.prefix_hit, peak_rate=t.peak_rate)
    return sim.Demand(arrivals, _length(t.input_tokens, t.input_cv, t.input_p90, t.input_range, t.input_max),
                      _length(t.output_tokens, t.output_cv, t.output_p90, t.output_range, t.output_max),
                      prefix_hit=t.prefix_hit, peak_rate=t.peak_rate)


def percentile(policy: S.Policy) -> float:
    """The percentile the policy's SLOs hold at (``slo_percentile``: p99 → 99)."""
    return float(policy.slo_percentile[1:])


def slo(policy: S.Policy) -> sim.Slo:
    """The policy's latency promises as a ``simulate.Slo`` (no limit: only stability is asked)."""
    return sim.Slo(ttft=policy.max_ttft, tpot=policy.max_tpot, e2e=policy.max_e2e, percentile=percentile(policy),
                   goodput=policy.min_slo_goodput)


def engine(plan: S.Plan, kv_tokens: float | None) -> sim.Engine:
    """The simulated engine of ``plan``: vLLM's order (``mixed``), KV blocks as computed (``grow``)."""
    return sim.Engine(max_seqs=plan.max_seqs, max_batched_tokens=budget(plan),
                      kv_tokens=None if kv_tokens is None else int(kv_tokens), policy="mixed", kv_policy="grow")


def budget(plan: S.Plan) -> int:
    """Tokens one engine step may compute (``step_tokens``)."""
    return plan.step_tokens


def engines(plan: S.Plan) -> int:
    """Engines an aggregated plan spreads its traffic over: a replica per dp, each ep rank its own
    sequences (as every serving plan's batch is per dp·ep rank group)."""
    return plan.dp * plan.ep


# ---------------------------------------------------------------------------------------------------
# Pricing a plan


@dataclass(frozen=True)
class Figures:
    """What one simulation measured, as plain floats (a ``simulate.Run``'s summary and the rates)."""

    rate: float | None  # requests/s into the whole plan (None: clients or a burst)
    run: sim.Run
    summary: dict


@dataclass(frozen=True)
class OnlineTerms:
    """An online plan priced: its step models, the simulations at the mean and the peak rate, the highest
    rate one replica carries, the representative steps, in one mode."""

    traffic: S.Traffic
    lengths: sim.LengthSample
    fleet: Fleet
    transfer: float | None  # the mean prompt's KV move (disaggregated)
    mean: Figures
    peak: Figures | None
    highest: sim.RateSearch | None
    slo: sim.Slo
    decode: Any  # (program, metrics) of the representative decode step
    mixed: Any  # (program, metrics) of a step with one chunk
    setup: list  # derivation values: the representative steps' inputs
    results: list  # derivation values: the simulator's outputs
    out_tok_s: Num
    gpus: Num
    engines: int


def _leaf(name: str, value: float, dim, desc: str, source: str, derivation: bool, style=None):
    return derive.leaf(name, value, dim, desc, source, style=style) if derivation else float(value)


def max_prompt(lengths: sim.LengthSample, budget_: int) -> float:
    """The longest prompt a chunk's attention can see: the sample's longest prompt plus one budget."""
    return float(lengths.input.max() + budget_)


def transfer_time(plan: S.Plan, policy: S.Policy, per_tok_gpu, replica_gpus):
    """Seconds to move the KV cache of prompts of I tokens from a prefill worker to a decode worker: each
    prefill GPU sends its share (I × its KV bytes per token, ``per_tok_gpu``) point to point, all at once,
    over the link between the workers — NVLink when a replica's ``replica_gpus`` fit one NVLink domain,
    else the inter-node link (``program.p2p``, the α-β core). ``per_tok_gpu`` and ``replica_gpus`` may be
    (K,) arrays (one per fleet); the function takes prompt lengths of shape (M,) or (K, M)."""
    static, x = lower.prepare(plan, policy, False, lower.Step("decode", None))
    inside = np.asarray(replica_gpus) <= plan.cluster.domain
    per = np.asarray(per_tok_gpu, dtype=float)

    def move(prompt_tokens):
        m = np.asarray(prompt_tokens, dtype=float) * (per if per.ndim == 0 else per.reshape(-1, 1))
        t_in = np.asarray(p2p(static, "KV", "KV cache to a decode worker", 1.0, m, static.intra, static.intra_name,
                              x).cost.time)
        if static.inter is None:
            return t_in
        t_out = np.asarray(p2p(static, "KV", "KV cache to a decode worker", 1.0, m, static.inter, static.inter_name,
                               x).cost.time)
        inner = inside if inside.ndim == 0 else inside.reshape(-1, 1)
        return np.where(inner, t_in, t_out)
    return move


@dataclass(frozen=True)
class Fleet:
    """What a plan's simulations run: its engines (aggregated: ``engines`` of them, each ``engine`` on
    ``step``; disaggregated: ``workers`` = (prefill, decode) workers, the prefill ones ``prefill`` on
    ``prefill_step``, the KV moved in ``transfer`` seconds), and one replica's (``replica``)."""

    engine: sim.Engine
    step: Sampled
    engines: int
    replica: Any  # an aggregated replica's engines (ep), or a disaggregated one's (prefill, decode) workers
    prefill: sim.Engine | None = None
    prefill_step: Sampled | None = None
    transfer: Any = None
    workers: tuple[int, int] | None = None

    @property
    def disaggregated(self) -> bool:
        return self.prefill is not None

    def run(self, d: sim.Demand, t: S.Traffic, rate: float | None = None, one_replica: bool = False) -> sim.Run:
        """A simulation of the fleet (or of one replica) serving ``d`` (at ``rate``, when given)."""
        dd = d if rate is None else d.at_rate(rate)
        if self.disaggregated:
            P, D = self.replica if one_replica else self.workers
            return sim.simulate_disagg(dd, self.prefill, self.engine, self.prefill_step, self.step,
                                       prefill_workers=P, decode_workers=D, transfer=self.transfer,
                                       requests=t.requests, seed=t.seed)
        n = self.replica if one_replica else self.engines
        return sim.simulate(dd.per_replica(n), self.engine, self.step, requests=t.requests, seed=t.seed)

    @property
    def count(self) -> int:
        """The engines the traffic is spread over (every prefill and decode worker, disaggregated)."""
        return sum(self.workers) if self.disaggregated else self.engines


def _refuse(plan: S.Plan, message: str, field: str, help: str) -> CcostError:
    return CcostError(error("E401", f"plan `{plan.name}`: {message}", plan.spans.get(field, plan.span), help))


def fleet(plan: S.Plan, policy: S.Policy, lengths: sim.LengthSample) -> Fleet:
    """The engines of ``plan`` with their sampled step models and KV capacities. Raises ``CcostError`` E401
    when an engine cannot hold the traffic's longest request (or a prefill worker a prompt and a step)."""
    B = budget(plan)
    top = max_prompt(lengths, B)
    prep = prepare(plan, policy)
    step = sample(prep, B, top)
    kv, _, _, _ = kv_capacity(prep)
    need = int(lengths.input.max() + lengths.output.max())
    if float(kv) < need:
        raise _refuse(plan, f"one engine holds {float(kv):,.0f} tokens of KV cache beside its weights, less than the "
                      f"longest request of traffic `{plan.traffic.name}` ({need:,} tokens)", "traffic",
                      "spread the model over more GPUs (tp, pp), or bound the lengths (input_max, output_max)")
    eng = engine(plan, float(kv))
    if not plan.prefill_workers:
        return Fleet(eng, step, engines(plan), plan.ep)
    p_plan = S.vary(plan, tp=plan.prefill_tp or plan.tp)
    p_prep = prepare(p_plan, policy)
    p_kv, p_tok, _, _ = kv_capacity(p_prep)
    if float(p_kv) < B + lengths.input.max():
        raise _refuse(plan, f"a prefill worker (tp = {p_plan.tp}) holds {float(p_kv):,.0f} tokens of KV cache beside "
                      "its weights, less than a prompt and a step's budget", "prefill_tp", "raise prefill_tp")
    p_eng = sim.Engine(max_seqs=eng.max_seqs, max_batched_tokens=B, kv_tokens=int(p_kv), policy="mixed")
    move = transfer_time(plan, policy, float(p_tok), plan.gpus // plan.dp)
    return Fleet(eng, step, engines(plan), (plan.prefill_workers, plan.decode_workers), p_eng, sample(p_prep, B, top),
                 move, (plan.dp * plan.prefill_workers, plan.dp * plan.decode_workers))


def screen_rate(f: Fleet, lengths: sim.LengthSample, goal: sim.Slo, scv: float, near: float) -> float:
    """The highest rate one replica of ``f`` carries within ``goal`` by the analytic screen
    (``simulate.screen_rate_sections`` between ``near``/10³ and ``near``·10², 8 rates a round, 4 rounds:
    within 0.2 %): where the simulated search (``highest_rate``) starts."""
    pct = (goal.percentile,)
    if f.disaggregated:
        P, D = f.replica

        def meets(r, _k):
            return sim.screen_disagg(r, lengths, f.prefill_step, f.step, prefill_workers=P, decode_workers=D,
                                     prefill_batched_tokens=f.prefill.max_batched_tokens,
                                     decode_max_seqs=f.engine.max_seqs, decode_kv_tokens=f.engine.kv_tokens,
                                     transfer=f.transfer, scv=scv, percentiles=pct).meets(goal)
    else:
        n = float(f.replica)

        def meets(r, _k):
            return sim.screen(r / n, lengths, f.step, max_seqs=f.engine.max_seqs,
                              max_batched_tokens=f.engine.max_batched_tokens, kv_tokens=f.engine.kv_tokens,
                              scv=scv / n, percentiles=pct).meets(goal)
    with np.errstate(all="ignore"):
        r = float(sim.screen_rate_sections(meets, near / 1e3, near * 1e2, 1)[0])
    # none screened meets the SLOs: start from the least rate screened (from ``near`` the simulated search
    # walked down through rates the engine falls ever further behind at, each a long simulation)
    return r if r > 0 else near / 1e3


def highest_rate(f: Fleet, d: sim.Demand, t: S.Traffic, goal: sim.Slo, start: float) -> sim.RateSearch:
    """The highest rate one replica of ``f`` carries within ``goal``, simulated at each rate tried: from
    ``start`` (the screen's, ``screen_rate``) up or down in steps of 1 + ``RATE_TOL`` that double in the
    ratio while the verdict stays (×1.05, ×1.1025, ×1.2155, …: a start a few per cent off costs two or
    three simulations, one far off a few more), then bisection in the ratio between the last rate that met
    the SLOs and the first that did not, until they are ``RATE_TOL`` apart. No rate is simulated twice;
    at most ``RATE_EVALS`` simulations after the first three steps."""
    tried: list = []

    def meets(r: float) -> bool:
        ok = f.run(d, t, r, one_replica=True).meets(goal)
        tried.append((r, ok))
        return ok

    up = 1 + RATE_TOL
    r, ok = start, meets(start)
    step = up
    lo, hi = (r, math.inf) if ok else (0.0, r)
    while (hi == math.inf or lo == 0.0) and len(tried) < 3 + RATE_EVALS:
        r = r * step if ok else r / step
        if not (1e-9 < r < 1e9):
            break
        if meets(r):
            lo = max(lo, r)
        else:
            hi = min(hi, r)
        step *= step
    while lo > 0 and hi < math.inf and hi / lo > up and len(tried) < 3 + RATE_EVALS:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return sim.RateSearch(lo, hi, tuple(tried))


def price(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> Priced:
    """An online plan priced (see the module docstring): simulations at the traffic's mean and peak rates,
    the highest rate one replica carries within the SLOs, the representative steps in ``derivation``
    mode or as floats. Raises ``CcostError`` E401 when an engine cannot hold one request's KV cache."""
    t = plan.traffic
    assert t is not None, "an online plan names a traffic (the checker requires it)"
    src = f"plan {plan.name}"
    d = demand(t)
    lengths = sim.LengthSample.of(d)
    goal = slo(policy)
    B = budget(plan)
    try:
        f = fleet(plan, policy, lengths)
    except (sim.EngineError, sim.DemandError) as exc:  # the checker's rules should have said so first
        raise _refuse(plan, f"its engines cannot be built: {exc}", "step_tokens",
                      "check the engine limits (max_seqs, step_tokens) and the KV cache") from None
    mean_o = float(lengths.output.mean())
    try:
        rate = t.rate if t.arrivals == "poisson" else None
        run = f.run(d, t, rate)
        mean = Figures(rate, run, run.summary(goal))
        peak = None
        if rate is not None and t.peak is not None and t.peak != rate:
            run = f.run(d, t, t.peak)
            peak = Figures(t.peak, run, run.summary(goal))
        best = None
        if rate is not None:
            guess = screen_rate(f, lengths, goal, t.burstiness ** 2, (t.peak or rate) / plan.dp)
            best = highest_rate(f, d, t, goal, guess)
    except (sim.EngineError, sim.DemandError) as exc:
        raise _refuse(plan, f"it cannot be simulated: {exc}", "traffic",
                      "check the traffic and the engine limits (max_seqs, step_tokens)") from None
    n_eng = f.count

    # --- the representative steps: the decode step of the mean number decoding at their mean context, and
    # the same with one chunk -------------------------------------------------------------------------------
    pool = mean.run.pools.get("replica") or mean.run.pools["decode"]
    rows_mean = max(1.0, float(round(pool.mean_decode_rows)))
    I_, O_ = lengths.input, lengths.output
    ctx_mean = float(np.mean(I_ + (O_ + 1) / 2))
    chunk = float(min(B, round(float(np.mean(I_ - lengths.cached)))))
    how = (f"simulated: ccost.model.simulate, {t.requests:,} requests at {{}}, seed {t.seed} (vLLM's scheduling order; "
           "docs/simulation.md)")
    src_mean = how.format(f"{mean.rate:g} requests/s" if mean.rate is not None else t.arrivals)
    dprep = prepare(plan, policy, derivation)
    R = _leaf("R", rows_mean, units.DIMENSIONLESS, "requests decoding in a step (the simulated mean)", src_mean,
              derivation)
    ctx = _leaf("S_dec", ctx_mean, units.DIMENSIONLESS, "mean context of a decoding request: E[I + (O + 1)/2]",
                f"traffic {t.name}", derivation)
    c = _leaf("c", chunk, units.DIMENSIONLESS, "a prompt chunk: the mean prompt computed (less its prefix-cache "
              "hit), at most the budget", f"traffic {t.name}; {src}: step_tokens", derivation)
    decode = step_program(dprep, R, ctx, None, None, R)
    seqs = named("R + 1", R + 1.0, "sequences in the mixed step") if derivation else R + 1.0
    mixed = step_program(dprep, R, ctx, c, c, seqs)
    # --- the plan's numbers ------------------------------------------------------------------------------
    if mean.rate is not None:
        lam = _leaf("λ", mean.rate, units.RATE, "requests per second, on average", f"traffic {t.name}: rate",
                    derivation)
        O_bar = _leaf("O̅", mean_o, units.DIMENSIONLESS, "mean output tokens per request", f"traffic {t.name}",
                      derivation)
        out_s = named("tok/s,out", lam * O_bar, "output tokens per second the traffic asks for: λ·O̅")
    else:
        out_s = _leaf("tok/s,out", mean.summary["output_tokens_per_s"] * n_eng, units.RATE,
                      "output tokens per second, simulated", src_mean, derivation)
    gpus = _gpus(plan, decode[0], derivation)
    results = _result_values(plan, t, mean, peak, best, goal, derivation, how)
    setup = [R, ctx, c]
    transfer_mean = float(np.mean(f.transfer(lengths.input))) if f.disaggregated else None
    return Priced(decode[0], _metrics(decode[1], out_s, gpus),
                  OnlineTerms(t, lengths, f, transfer_mean, mean, peak, best, goal, decode, mixed, setup, results,
                              out_s, gpus, n_eng))


def _gpus(plan: S.Plan, program, derivation: bool):
    """N: tp·pp·ep·dp, or per replica the prefill and decode workers' GPUs."""
    if not plan.prefill_workers:
        return analysis.gpus_used(program)
    x = program.inputs
    src = f"plan {plan.name}"
    Wp = _leaf("W_p", plan.prefill_workers, units.DIMENSIONLESS, "prefill workers per replica", src, derivation)
    Wd = _leaf("W_d", plan.decode_workers, units.DIMENSIONLESS, "decode workers per replica", src, derivation)
    tpp = _leaf("tp_p", plan.prefill_tp or plan.tp, units.DIMENSIONLESS, "the prefill workers' tp", src, derivation)
    return named("N", x.dp * x.pp * x.ep * (Wp * tpp + Wd * x.tp), "GPUs: dp·pp·ep·(W_p·tp_p + W_d·tp)")


def _metrics(m: analysis.Metrics, out_s, gpus) -> analysis.Metrics:
    """The decode step's metrics with the plan's GPUs and throughput (output tokens/s: what the cost is per)."""
    return replace(m, gpus=gpus, throughput=out_s, throughput_gpu=named("tok/s,out,GPU", out_s / gpus,
                                                                        "output tokens per second per GPU"))


def _result_values(plan, t, mean: Figures, peak: Figures | None, highest, goal: sim.Slo, derivation: bool, how: str):
    """The simulator's outputs as derivation values (its method named as their source)."""
    out = []
    p = goal.percentile
    for label, f in (("", mean), ("peak", peak)):
        if f is None:
            continue
        src = how.format(f"{f.rate:g} requests/s" if f.rate is not None else t.arrivals)
        for m, what in (("ttft", "time to first token"), ("tpot", "time per output token"), ("e2e", "request latency")):
            for q in sorted({50.0, 90.0, 99.0, p}):
                name = f"{m.upper()}_p{q:g}" + (",peak" if label else "")
                out.append(_leaf(name, f.run.percentile(m, q), units.TIME,
                                 f"{what}, p{q:g}" + (" at the peak rate" if label else ""), src, derivation))
    if highest is not None:
        out.append(_leaf("λ_max", highest.rate, units.RATE, "the highest rate one replica carries within the SLOs",
                         f"simulated rate search (ccost.model.simulate.highest_rate, within {RATE_TOL:.0%}): "
                         f"{len(highest.tried)} rates tried", derivation))
    return out


# ---------------------------------------------------------------------------------------------------
# The document, the derivation, the review


def _f(x) -> float | None:
    return analysis.finite(x)


def record(plan: S.Plan, priced: Priced) -> dict:
    """The ``online`` section of an online plan's document (seconds, tokens, requests/s)."""
    t: OnlineTerms = priced.terms
    tr = t.traffic
    mean, peak = t.mean, t.peak
    s, r = mean.summary, mean.run
    pool = r.pools.get("replica") or r.pools["decode"]
    p = t.slo.percentile
    doc = {
        "traffic": tr.name,
        "arrivals": "gamma" if tr.arrivals == "poisson" and tr.burstiness != 1 else tr.arrivals,
        "rate_per_s": tr.rate if tr.arrivals == "poisson" else None,
        "peak_rate_per_s": tr.peak if tr.arrivals == "poisson" else None,
        "engines": t.engines,
        "max_seqs": engine(plan, None).max_seqs,
        "step_tokens": budget(plan),
        "kv_tokens": float(t.fleet.engine.kv_tokens),
        "mean_input_tokens": _f(float(t.lengths.input.mean())),
        "mean_output_tokens": _f(float(t.lengths.output.mean())),
        "prefill_workers": plan.prefill_workers,
        "decode_workers": plan.decode_workers if plan.prefill_workers else 0,
        "prefill_tp": (plan.prefill_tp or plan.tp) if plan.prefill_workers else 0,
        "kv_transfer_s": t.transfer,
        "decode_step_time_s": _f(t.decode[1].step),
        "mixed_step_time_s": _f(t.mixed[1].step),
        "requests_simulated": len(r.ttft),
        "seed": tr.seed,
        "slo_percentile": f"p{p:g}",
    }
    for m in ("ttft", "tpot", "e2e"):
        doc[f"{m}_mean_s"] = _f(s[m]["mean"])
        for q in (50.0, 90.0, 99.0):
            doc[f"{m}_p{q:g}_s"] = _f(r.percentile(m, q))
    doc.update({
        "goodput_share": _f(s["goodput_share"]) if t.slo.limits() else None,
        "utilisation": _f(pool.busy_share),
        "mean_running": _f(pool.mean_running),
        "preemptions": int(pool.preemptions),
        "stable": bool(r.stable),
        "requests_per_s": _f(s["requests_per_s"] * (t.engines if not plan.prefill_workers else 1)),
        "output_tokens_per_s": _f(t.out_tok_s),
        "output_tokens_per_s_per_gpu": _f(t.out_tok_s / t.gpus),
    })
    pk = peak or mean
    ps, pr = pk.summary, pk.run
    ppool = pr.pools.get("replica") or pr.pools["decode"]
    for m in ("ttft", "tpot", "e2e"):
        for q in (50.0, 90.0, 99.0):
            doc[f"peak_{m}_p{q:g}_s"] = _f(pr.percentile(m, q))
        doc[f"peak_{m}_slo_s"] = _f(pr.percentile(m, p))
    doc.update({
        "peak_goodput_share": _f(ps["goodput_share"]) if t.slo.limits() else None,
        "peak_utilisation": _f(ppool.busy_share),
        "peak_stable": bool(pr.stable),
        "meets_slo": bool(pr.meets(t.slo)),
        "slo_ratio": slo_ratio(t.slo, pr, ps),
        "highest_rate_per_s": _f(t.highest.rate) if t.highest is not None else None,
        "highest_rate_above_per_s": _f(t.highest.above) if t.highest is not None else None,
    })
    if t.highest is not None and t.highest.rate > 0 and tr.peak is not None:
        doc["replicas_for_peak"] = math.ceil(tr.peak / t.highest.rate - 1e-9)
    else:
        doc["replicas_for_peak"] = None
    doc["method"] = (f"simulated: ccost.model.simulate (vLLM's scheduling order), {tr.requests:,} measured requests, "
                     f"seed {tr.seed}; each step priced by ccost's step model sampled on {len(t.fleet.step.tokens)} "
                     f"token counts and {len(t.fleet.step.pairs)} prompt lengths")
    return doc


SLO_ITEM = 15


def slo_ratio(goal: sim.Slo, run: sim.Run, summary: dict) -> float | None:
    """The worst of each SLO figure over its limit in ``run``: a latency at the goal's percentile over its
    maximum, the least goodput share over the one measured (inf when none met it); None without SLOs or when
    it is infinite. The online plan's ``slo_ratio`` and a capacity search's simulated fleets' (ccost.capacity)."""
    ratios = [run.percentile(m, goal.percentile) / limit for m, limit in goal.limits().items()]
    if goal.goodput is not None:
        got = summary["goodput_share"]
        ratios.append(goal.goodput / got if got else math.inf)
    if not ratios:
        return None
    worst = float(max(ratios))
    return worst if math.isfinite(worst) else None


def checklist_items(plan: S.Plan, policy: S.Policy, sec: dict) -> list[dict]:
    """Checklist item 15: the policy's SLOs at the peak rate (the mean's simulation when the traffic has no
    peak), from the plan's ``online`` section; its value is the section's ``slo_ratio`` (above 1, the plan
    misses an SLO). n/a when the policy states none."""
    title = analysis.TITLES[SLO_ITEM]
    goal = slo(policy)
    if not goal.limits() and goal.goodput is None:
        return [{"id": SLO_ITEM, "title": title, "status": "n/a", "value": None, "threshold": None,
                 "note": "The policy states no SLO (max_ttft, max_tpot, max_e2e, min_slo_goodput)."}]
    p = sec["slo_percentile"]
    rate = sec.get("peak_rate_per_s")
    at = f"at {rate:g} requests/s" if rate is not None else f"with traffic `{sec['traffic']}`"
    parts = [text for text, _ in results.slo_figures(
        p, {m: sec.get(f"peak_{m}_slo_s") for m in ("ttft", "tpot", "e2e")}, goal.limits(),
        sec.get("peak_goodput_share"), goal.goodput)]
    worst = sec.get("slo_ratio")
    stable = bool(sec.get("peak_stable"))
    ok = stable and worst is not None and worst <= 1 and bool(sec.get("meets_slo"))
    text = f"{at}: " + ", ".join(parts)
    if not stable:
        note = (text + ": the queue grows without bound at this rate (more requests arrive than finish). More "
                "replicas (dp), a faster layout, or a capacity search (docs/capacity.md).")
    elif ok:
        note = text + "."
    else:
        note = (text + ". More replicas (dp), a layout that meets them (a capacity search: docs/capacity.md), or "
                "looser SLOs.")
    return [{"id": SLO_ITEM, "title": title, "status": "pass" if ok else "fail", "value": worst, "threshold": 1.0,
             "note": note}]


def explain_groups(plan: S.Plan, priced: Priced) -> list[tuple[str, list]]:
    """The derivation of an online plan (priced in derivation mode): two representative steps of the sampled
    step model, derived by the same formulas, then the simulator's outputs as results with their method."""
    t: OnlineTerms = priced.terms
    groups: list[tuple[str, list]] = [("online: the representative steps' rows and contexts", list(t.setup))]
    for label, (prog, m) in (("decode step (R requests decoding at their mean context)", t.decode),
                             ("mixed step (R decoding + one prompt chunk of c tokens)", t.mixed)):
        groups += [(f"{label}: {title}", vals) for title, vals in analysis.collective_values(prog)]
        c = prog.compute
        groups.append((f"{label}: compute and step", [c.bytes_gpu, c.flops_gpu, c.T_stage, c.T_compute, c.t_mb,
                                                      m.T_comm, m.exposed, m.latency, m.step]))
    prog, m = t.decode
    groups.append(("memory: the decode step's (weights, and the KV cache of R requests)",
                   [*prog.compute.memory.held, prog.compute.memory.total, prog.compute.memory.limit]))
    groups.append(("totals of the decode step", [m.volume, m.hops, m.T_lat, m.T_bw, m.bubble, m.gpus, m.speedup,
                                                 m.efficiency, m.eta]))
    pm = priced.metrics
    groups.append(("online: simulated latencies and rates", list(t.results) + [pm.gpus, pm.throughput,
                                                                             pm.throughput_gpu]))
    return groups


def review_note(sec: dict) -> str:
    """What an online plan's numbers mean, in words, for its part of the review."""
    pw = sec.get("prefill_workers") or 0
    where = (f"{pw} prefill worker(s) (tp {sec['prefill_tp']}) and {sec['decode_workers']} decode worker(s) per "
             "replica, the KV cache of each prompt moved between them" if pw else
             f"{sec['engines']:,} engine(s), each up to {sec['max_seqs']:,} running requests and {sec['step_tokens']:,} "
             "tokens a step (chunked prefill)")
    return (f"Online plan (an open loop): traffic `{sec['traffic']}` arrives at {sec['rate_per_s'] or 0:g} requests/s "
            f"(peak {sec['peak_rate_per_s'] or 0:g}) on {where}. Latencies are {sec['method']}. The step time, "
            "collectives, compute and checklist above are the decode step of the mean number of requests decoding.")


#: What the online model leaves out: a paragraph of a review that has an online plan.
NOT_MODELLED = (
    "Online serving", "An online plan's engine is simulated with vLLM's scheduling order (docs/simulation.md, "
    "\"What is not modelled\": KV blocks of 16 tokens, SGLang's retraction, speculative decoding and the "
    "network to the client are not). Each step is priced by the decode and prefill model sampled on a grid; "
    "a pipeline-parallel engine runs one batch through its stages per step (micro-batches in flight only "
    "as the plan's `microbatches` say); a prompt chunk's attention is priced as one causal prompt with the "
    "chunk's (query, key) pairs. Routing between replicas is round robin.")
