"""Analysis: from a plan's collective program to the numbers a design review judges it by.

``analyse(program)`` runs in the three modes (floats, arrays, derivation values) like ``ccost.model.lower``;
the checklist, sweeps and comparisons work on float results.

How the step is put together (one place, so the review can say it):

* ``T_comm`` = Σ count × time over the collective program; its latency and bandwidth terms likewise.
* ``exposed`` = (T_comm − T_hidden)·(1 − overlap), T_hidden the ring-attention sends that run behind the
  attention of the block held (cp; 0 otherwise); ``latency`` = T_compute + exposed: one step of the batch through
  every stage in turn (the notes' per-token latency; A3: 18.2 ms for TP=8 × PP=2; ``latency_s``).
* **The pipelined step** (``step_time_s``), the flush (GPipe / 1F1B) schedule: ``step`` =
  (M + P − 1)·t_mb + exposed/(P·(1 − bubble)), with t_mb one stage's time for one of the M micro-batches
  (``ccost.model.lower``: the roofline of the stage's *whole* weights plus 1/M of its KV cache against 1/M of
  its FLOPs). The last micro-batch leaves after P − 1 fill slots and M slots of a stage; the bubble
  (P−1)/(M+P−1) leaves P·(1 − bubble) = P·M/(M+P−1) stages busy on average, over which the exposed
  communication (counted along the critical path, every stage in turn) is spread. FLOP-bound, t_mb =
  T_stage/M and this is Megatron's latency/(P·(1 − bubble)); memory-bound (decode), every micro-batch
  re-reads the stage's weights, so more micro-batches cost more (A3 option B, 32 micro-batches of one
  sequence: 33 × 7.556 ms, not 18.18 ms × 33/64). P = M = 1 gives step = latency, bit for bit.
* ``throughput`` = tokens per step (all replicas) / step. ``speedup`` = throughput / the throughput of one
  GPU running the same model instance's step alone (its whole weights and the instance's KV cache, no
  communication) = dp·T₁/step, so a single-stage, single-replica plan has the notes' T₁/T(N).
  ``efficiency`` = speedup / GPUs. With pure data parallelism and a given ``compute_time`` this is
  the η of “Communication Cost Analysis” §6 = T_c/(T_c + exposed comm).
* ``overhead`` = T_comm / T_compute (before overlap, as the notes define it).
* ``regime``: latency-bound when the latency term of T_comm is the larger, else bandwidth-bound.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ccost import axes, derive, results, units
from ccost.model import costs, lower
from ccost import layout_rules as rules
from ccost import spec as S
from ccost.derive import named
from ccost.model.program import Collective, Compute, Program, total
from ccost.model.program import on as program_on
from ccost.schema import phase_kind, rebatched

Num = Any

#: Efficiency thresholds of the notes' cost-optimal table (“Communication Cost Math — Distributed Inference” §6); the policy's min_efficiency is added.
COST_THRESHOLDS = (0.8, 0.7, 0.5)
#: A bubble above this share is flagged (checklist item 10): M ≥ 9·(P−1) micro-batches keep it below.
BUBBLE_WARN = 0.10


@dataclass(frozen=True)
class Metrics:
    """The per-step numbers of one plan (floats, arrays or Values)."""

    T_comm: Num
    T_lat: Num
    T_bw: Num
    exposed: Num
    T_compute: Num
    latency: Num  # one step through every stage in turn
    step: Num  # pipelined: (M + P − 1)·t_mb + exposed / (P·(1 − bubble))
    overhead: Num
    bubble: Num
    in_flight: Num
    gpus: Num
    speedup: Num
    efficiency: Num
    throughput: Num
    throughput_gpu: Num
    volume: Num  # bytes each GPU sends per step
    hops: Num  # latency steps per step
    eta: Num  # “Communication Cost Analysis” §6: η = T_compute / (T_compute + T_exposed)


def costs_nothing(k: Collective) -> bool:
    """A collective that is exactly free in this plan: no instance per step, or a group of one rank.
    Only decided for scalars (floats, Values); in array mode every collective is summed (adding an exact
    0.0 changes no bit, so skipping it in the scalar modes keeps the modes identical)."""
    cnt, size = derive.value_of(k.count), derive.value_of(k.group_size)
    if isinstance(cnt, np.ndarray) or isinstance(size, np.ndarray):
        return False
    return cnt == 0 or size <= 1


def analyse(program: Program) -> Metrics:
    """Totals, step time, overhead, bubble, speedup, efficiency and throughput of a lowered plan."""
    # training: the schedule's own step, ccost.model.training.analyse_train (ccost.model.phases picks it)
    assert program.train is None, "a training step is analysed by ccost.model.training (ccost.model.phases.analyse)"
    x, c = program.inputs, program.compute
    coll = [k for k in program.collectives if not costs_nothing(k)]
    # A plan without a collective (one GPU) sums no terms: a zero of the right dimension in derive mode.
    t0, b0, n0 = (derive.zero(d, c.T_compute) for d in (units.TIME, units.INFORMATION, units.DIMENSIONLESS))
    T_comm = named("T_comm", total((k.total for k in coll), t0), "communication per step: Σ count × time")
    T_lat = named("T_lat", total((k.count * k.cost.latency for k in coll), t0), "latency term: Σ count·α·hops")
    T_bw = named("T_bw", total((k.count * k.cost.bandwidth_time for k in coll), t0),
                 "bandwidth term: Σ count·volume/B")
    volume = named("V_step", total((k.count * k.cost.volume for k in coll), b0), "bytes each GPU sends per step")
    hops = named("hops_step", total((k.count * k.cost.hops for k in coll), n0), "latency steps per step")
    hidden = [k.hidden for k in coll if k.hidden is not None]
    if hidden:  # ring attention's sends behind the attention of the block held (lower._ring_attention)
        T_hid = named("T_hidden", total(hidden, t0), "communication hidden behind compute by construction")
        exposed = named("T_exposed", costs.exposed_comm(T_comm - T_hid, x.overlap), "communication not "
                        "hidden: (T_comm − T_hidden)·(1 − overlap)")
    else:
        exposed = named("T_exposed", costs.exposed_comm(T_comm, x.overlap), "communication not hidden: "
                        "T_comm·(1 − overlap)")
    ovh = named("overhead", costs.overhead(T_comm, c.T_compute), "T_comm / T_compute", style="percent")
    if program.static.steady:
        return _steady(program, T_comm, T_lat, T_bw, volume, hops, exposed, ovh)
    latency = named("T_latency", c.T_compute + exposed, "one step through every stage in turn: "
                    "T_compute + T_exposed")
    bubble = named("bubble", costs.pipeline_bubble(x.pp, x.M), "pipeline bubble (P−1)/(M+P−1)",
                   style="percent")
    in_flight = named("in_flight", x.pp * (1 - bubble), "stages busy at once in the pipeline: P·(1 − bubble)")
    # Flush schedule: M + P − 1 slots of one micro-batch's stage time, plus the exposed communication
    # spread over the stages busy at once. P = M = 1: T_stage + T_exposed = T_latency, bit for bit.
    if program.static.overheads and not program.static.compute_given and program.static.host_overlap:
        # asynchronous scheduling: the host's work runs behind the GPU's whole step, communication included
        T_pipe = named("T_pipe", costs.pipeline_time(c.t_mb, x.pp, x.M),
                       "compute of the pipelined step: (M + P − 1)·t_mb")
        step = named("T_step", lower.with_host(program.static, T_pipe + exposed / in_flight, c.T_host),
                     "pipelined step time: max(T_pipe + T_exposed/(P·(1 − bubble)), T_host) (host work runs "
                     "behind the GPU's step)")
        return _rated(program, T_comm, T_lat, T_bw, exposed, latency, step, ovh, bubble, in_flight, volume, hops)
    if program.static.overheads and not program.static.compute_given:
        T_pipe = named("T_pipe", costs.pipeline_time(c.t_mb, x.pp, x.M) + c.T_host,
                       "compute of the pipelined step: (M + P − 1)·t_mb + T_host (the stack's host time per step)")
    else:
        T_pipe = named("T_pipe", costs.pipeline_time(c.t_mb, x.pp, x.M),
                       "compute of the pipelined step: (M + P − 1)·t_mb")
    step = named("T_step", T_pipe + exposed / in_flight,
                 "pipelined step time: T_pipe + T_exposed/(P·(1 − bubble))")
    return _rated(program, T_comm, T_lat, T_bw, exposed, latency, step, ovh, bubble, in_flight, volume, hops)


def _steady(program: Program, T_comm, T_lat, T_bw, volume, hops, exposed, ovh) -> Metrics:
    """Serving (decode, prefill) under a stack with ``pipeline = steady``: M micro-batches circulate through
    the P stages with no flush. The collectives were lowered per micro-batch (messages of B/M sequences,
    one micro-batch's path through every stage), so a stage's slot is t_mb + T_exposed/P. A micro-batch's
    token crosses the P stages in P slots (its latency); a sequence gets its next token every max(M, P)
    slots (the step: with M < P stages idle, with M > P micro-batches wait). P = M = 1 is the
    unpipelined step (bit for bit without host time; with it the two sums add T_host in another order, and
    may differ in the last bit)."""
    x, c = program.inputs, program.compute
    over = program.static.overheads and not program.static.compute_given
    slot = named("t_slot", c.t_mb + exposed / x.pp, "one micro-batch on one stage: t_mb + T_exposed/P")
    rounds = derive.maximum(x.M, x.pp)
    if over and program.static.host_overlap:
        # asynchronous scheduling: the host prepares the next step while the GPU runs this one
        latency = named("T_latency", lower.with_host(program.static, x.pp * slot, c.T_host),
                        "a micro-batch's token through the P stages: max(P·t_slot, T_host)")
        T_pipe = named("T_pipe", rounds * c.t_mb, "compute of the steady-state step: max(M, P)·t_mb")
        step = named("T_step", lower.with_host(program.static, T_pipe + rounds * exposed / x.pp, c.T_host),
                     "steady-state step (every sequence's next token): max(T_pipe + max(M, P)·T_exposed/P, "
                     "T_host): host work runs behind the GPU's step")
        in_flight = named("in_flight", derive.minimum(x.M, x.pp), "stages busy at once: min(M, P)")
        bubble = named("bubble", (x.pp - in_flight) / x.pp, "idle stages in steady state: (P − min(M, P))/P",
                       style="percent")
        return _rated(program, T_comm, T_lat, T_bw, exposed, latency, step, ovh, bubble, in_flight, volume, hops)
    lat = x.pp * slot + c.T_host if over else x.pp * slot
    latency = named("T_latency", lat, "a micro-batch's token through the P stages: P·t_slot"
                    + (" + T_host" if over else ""))
    T_pipe = named("T_pipe", rounds * c.t_mb + c.T_host if over else rounds * c.t_mb,
                   "compute of the steady-state step: max(M, P)·t_mb" + (" + T_host" if over else ""))
    step = named("T_step", T_pipe + rounds * exposed / x.pp,
                 "steady-state step (every sequence's next token): T_pipe + max(M, P)·T_exposed/P")
    in_flight = named("in_flight", derive.minimum(x.M, x.pp), "stages busy at once: min(M, P)")
    bubble = named("bubble", (x.pp - in_flight) / x.pp, "idle stages in steady state: (P − min(M, P))/P",
                   style="percent")
    return _rated(program, T_comm, T_lat, T_bw, exposed, latency, step, ovh, bubble, in_flight, volume, hops)


def _rated(program: Program, T_comm, T_lat, T_bw, exposed, latency, step, ovh, bubble, in_flight, volume,
           hops) -> Metrics:
    """The Metrics of a serving schedule's step (flush or steady): what follows from the step time the same
    way in both, speedup, efficiency, throughput and η."""
    x, c = program.inputs, program.compute
    gpus = gpus_used(program)
    speedup = named("speedup", x.dp * costs.speedup(c.T_one, step), "against one GPU: dp·T_1/T_step")
    eff = named("efficiency", speedup / gpus, "speedup / N", style="percent")
    thr = named("throughput", c.tokens_step / step, "tokens/s: tokens_step/T_step")
    thr_gpu = named("throughput_GPU", thr / gpus, "tokens/s per GPU")
    eta = named("η", c.T_compute / (c.T_compute + exposed),
                "scaling efficiency T_compute/(T_compute + T_exposed), “Communication Cost Analysis” §6",
                style="percent")
    return Metrics(T_comm, T_lat, T_bw, exposed, c.T_compute, latency, step, ovh, bubble, in_flight, gpus,
                   speedup, eff, thr, thr_gpu, volume, hops, eta)


def gpus_used(program: Program):
    """N, the GPUs of the plan: the product of its degrees (``ccost.axes``; an optional axis only when the
    plan prices it), named for the derivation."""
    on = program_on(program.static)
    return named("N", axes.product(program.inputs, on), f"GPUs: {axes.label(on)}")


def collective_values(program: Program) -> list[tuple[str, list]]:
    """(title, values) of each collective of a program that costs something, as ``ccost explain`` groups
    them: count and message, each candidate's and topology alternative's time, then hops, volume, time
    and the step's total."""
    out = []
    for k in program.collectives:
        if costs_nothing(k):
            continue
        vals: list = [k.count, k.message]
        vals += [cand.time for cand in k.candidate_costs.values()]
        if k.group is not None:
            vals += [alt.time for alt in (k.group.flat, k.group.hierarchical, k.group.split) if alt is not None]
        vals += [k.cost.hops, k.cost.volume, k.cost.time, k.total]
        size, cnt = derive.value_of(k.group_size), derive.value_of(k.count)
        out.append((f"{k.key}: {cnt:g} × {k.kind} ({k.algorithm}) on {size:g} ranks over {k.link} — {k.purpose}",
                    vals))
    return out


def step_groups(program: Program, m: Metrics, extra: list | tuple = (), totals: list | tuple = ()
                ) -> list[tuple[str, list]]:
    """The derivation of one step, grouped for reading (``evaluate.explain_sections`` numbers them): each
    collective, compute, the cost model's ``extra`` groups, memory by part, then the totals (and the cost
    model's own ``totals``)."""
    c = program.compute
    groups = collective_values(program)
    groups.append(("compute", [c.weights_gpu, c.kv_gpu, c.bytes_gpu, c.flops_gpu, c.T_mem, c.T_flop,
                               c.T_stage, c.T_compute, c.T_one, c.bytes_mb, c.flops_mb, c.T_mem_mb,
                               c.T_flop_mb, c.t_mb]))
    groups += list(extra)
    groups.append(("memory", [*c.memory.held, c.memory.total, c.memory.limit]))
    groups.append(("totals", [m.volume, m.hops, m.T_lat, m.T_bw, m.T_comm, m.exposed, m.latency, m.overhead,
                              m.bubble, m.in_flight, m.step, m.gpus, m.speedup, m.efficiency, c.tokens_step,
                              m.throughput, m.throughput_gpu, m.eta, *totals]))
    return groups


def regime(m: Metrics) -> str:
    """latency-bound / bandwidth-bound by the dominant term of T_comm; "no communication" without any."""
    lat, bw = derive.value_of(m.T_lat), derive.value_of(m.T_bw)
    if lat == 0 and bw == 0:
        return "no communication"
    return costs.regime(lat, bw)


def finite(x) -> float | None:
    """A float for the document, or None for NaN/∞ (which never reach the JSON)."""
    v = float(derive.value_of(x))
    return v if math.isfinite(v) else None


# ---------------------------------------------------------------------------------------------------
# The checklist of “Communication Cost Math — Distributed Inference” §7 (ten items) plus memory (item 11)

#: The items' titles by id (``ITEMS``, below the judges).


def _item(i: int, status: str, value, threshold, note: str) -> dict:
    return {"id": i, "title": TITLES[i], "status": status, "value": value, "threshold": threshold, "note": note}


# The checklist's sentences format numbers exactly as the text output does (one set of helpers).
_t, _b, _gb, _p = results.fmt_time, results.fmt_bytes, results.fmt_gb, results.fmt_pct

#: What a judge gives: status (pass, warn, fail, n/a), the value judged, the threshold, one sentence.
Verdict = tuple[str, Any, Any, str]


def checklist(plan: S.Plan, policy: S.Policy, program: Program, m: Metrics) -> list[dict]:
    """The notes' ten checks (numbered 1–10 as in “Communication Cost Math — Distributed Inference” §7) and memory (11), each with a status
    (pass, warn, fail, n/a), the value it was judged on, the threshold and one sentence."""
    k = _Ctx(plan, policy, program, m)
    return [_item(item.id, *item.judge(k)) for item in ITEMS if item.judge is not None]


@dataclass(frozen=True)
class _Ctx:
    """What a checklist item is judged on."""

    plan: S.Plan
    policy: S.Policy
    program: Program
    m: Metrics

    @property
    def c(self) -> Compute:
        return self.program.compute

    @property
    def static(self) -> lower.Static:
        return self.program.static

    @property
    def per(self) -> str:
        """What one step of the plan is, its phase's ``per``: a token while decoding, else a step."""
        return phase_kind(self.plan.phase).per


def _judge_1(k: _Ctx) -> Verdict:
    """1. weights per GPU and compute time"""
    plan, c, static = k.plan, k.c, k.static
    model, cluster = plan.model, plan.cluster
    t_mem, t_flop = finite(c.T_mem), finite(c.T_flop)
    if static.compute_given:
        bound = "given in the plan"
    else:
        bound = "memory-bound" if (t_mem or 0) >= (t_flop or 0) else "FLOP-bound"
    status = "pass"
    held = (f"{_gb(finite(c.memory['weights']))} of weights held per GPU (FSDP shard + one gathered layer), "
            f"{_gb(finite(c.weights_gpu))} used per step" if static.fsdp
            else f"{_gb(finite(c.weights_gpu))} of weights per GPU")
    note = (f"{held}; compute {_t(finite(c.T_compute))} per step ({bound}"
            + (f", {plan.microbatches} micro-batch{'es' if plan.microbatches > 1 else ''} on one GPU"
               if static.train else f", {plan.pp} stages in turn" if plan.pp > 1 else "") + ").")
    if bound == "FLOP-bound" and cluster.gpu.achieved_flops is None:
        status, rate_note = _rate_note(k)
        note += " " + rate_note
    if static.moe and model.active_params is None:
        status = "warn"
        note += (f" model `{model.name}` gives no active_params: every parameter is counted as active and "
                 "replicated on each EP rank (conservative).")
    return status, finite(c.memory["weights"]), None, note


def _gemm_rate(k: _Ctx) -> float | None:
    """The FLOP/s the weight GEMMs ran at: their FLOPs over their FLOP time in the per-operator roofline
    (a measured kernel curve's rate at the step's token rows, or ``Inputs.R``), else ``Inputs.R`` (the
    whole-step roofline, training: the rate its GEMMs ran at) — what ``ccost explain`` derives as R_GEMM or R."""
    tt = getattr(k.program, "train", None)
    if tt is not None and tt.r_gemm is not None:
        return finite(tt.r_gemm)
    for row in k.c.operators or ():
        if row[0] == "weight GEMMs":
            flops, t_flop = finite(row[2]), finite(row[5])
            if flops and t_flop:
                return flops / t_flop
    return finite(k.program.inputs.R)


def _rate_note(k: _Ctx) -> tuple[str, str]:
    """(status, sentence): what FLOP/s the compute was priced at, from the values the formulas used rather
    than from what the GPU lacks (the note once said "peak FLOP/s used" while the stack's
    gemm_efficiency was applied). ``warn`` unless the rate comes from measured kernel curves."""
    gpu, plan = k.plan.cluster.gpu, k.plan
    rate = _gemm_rate(k)
    stack = plan.stack  # the checker's: the plan's own, or its phase's bundled default
    eff = stack.gemm_efficiency
    fmt = lambda x: units.format_quantity(x, units.FLOP_RATE)  # noqa: E731
    if rate is None:
        return "warn", f"gpu `{gpu.name}` has no achieved_flops."
    if k.static.kernel_gemm:
        share = (f" × the stack's framework_efficiency {_p(stack.framework_efficiency)}" if k.static.train else "")
        return "pass", (f"The weight GEMMs run at {fmt(rate)} on gpu `{gpu.name}`'s measured kernel curve "
                        f"`{k.static.kernels}` (stack `{stack.name}`: rates = kernels), at this step's token rows and "
                        "weight shapes"
                        f"{share}.")
    peak_name, peak = "flops", gpu.flops
    if gpu.fp8_flops is not None and math.isclose(rate, gpu.fp8_flops * eff, rel_tol=1e-9):
        peak_name, peak = "fp8_flops", gpu.fp8_flops
    if math.isclose(rate, peak, rel_tol=1e-9):
        return "warn", (f"gpu `{gpu.name}` has no achieved_flops and stack `{stack.name}` no gemm_efficiency "
                        f"below 100 %: the peak {fmt(rate)} is used, so compute is optimistic.")
    return "warn", (f"gpu `{gpu.name}` has no achieved_flops: the weight GEMMs run at {fmt(rate)}, its "
                    f"{peak_name} {fmt(peak)} × stack `{stack.name}`'s gemm_efficiency {_p(eff)}, an estimate; "
                    "measure achieved_flops.")


def _judge_2(k: _Ctx) -> Verdict:
    """2. volume and hops"""
    vol, hops = finite(k.m.volume), finite(k.m.hops)
    if not vol and not hops:
        return "n/a", 0.0, None, "No collective: a single GPU per replica."
    return "pass", vol, None, (f"{_b(vol)} sent per GPU and {units.format_quantity(hops, units.DIMENSIONLESS)} "
                               f"hops per {k.per}.")


def _judge_3(k: _Ctx) -> Verdict:
    """3. α, β measured?"""
    plan, program = k.plan, k.program
    used = _links_used(program, plan.cluster)
    if not used:
        return "n/a", None, None, "No communication, so no link parameters are used."
    else:
        not_measured = [ln for ln in used if not ln.measured]
        srcs = "; ".join(f"{ln.name}: {ln.source or 'no source given'}" for ln in used)
        no_alpha = [ln for ln in used if ln.measured and "alpha not measurable" in (ln.source or "")]
        if no_alpha and not not_measured:
            return ("warn", "bandwidth only", "measured",
                    f"Measured, but α is not ({srcs}): the log of "
                    f"{', '.join(ln.name for ln in no_alpha)} has no latency-bound size; measure small "
                    "messages too (`-b 8`) and calibrate again.")
        elif not_measured:
            return ("warn", "spec sheet", "measured",
                    f"Spec-sheet α/β ({srcs}): measure them with nccl-tests and `ccost calibrate`; "
                    "spec sheets are optimistic.")
        else:
            # a measured link is not enough: the profile that priced the plan counts too (its overheads,
            # efficiencies, floor).
            stack = plan.stack  # the checker's: the plan's own, or its phase's bundled default
            if (stack.source or "").strip().lower().startswith("measured"):
                return ("pass", "measured", "measured",
                        f"Measured α/β ({srcs}) and stack profile ({stack.name}: {stack.source}).")
            else:
                return ("warn", "stack not measured", "measured",
                        f"Measured α/β ({srcs}), but the stack profile `{stack.name}` is not measured "
                        f"({stack.source or 'no source given'}): fit it to your step times with "
                        "`ccost calibrate --steps`.")


def _judge_4(k: _Ctx) -> Verdict:
    """4. T_comm"""
    m = k.m
    T_comm, T_lat, T_bw = finite(m.T_comm), finite(m.T_lat), finite(m.T_bw)
    return ("pass" if T_comm else "n/a", T_comm, None,
            f"T_comm = {_t(T_lat)} latency + {_t(T_bw)} bandwidth = {_t(T_comm)} per {k.per} ({regime(m)}).")


def _judge_5(k: _Ctx) -> Verdict:
    """5. overhead"""
    ovh = finite(k.m.overhead)
    return "pass", ovh, None, f"Overhead {_t(finite(k.m.T_comm))} / {_t(finite(k.m.T_compute))} = {_p(ovh)}."


def _judge_6(k: _Ctx) -> Verdict:
    """6. overhead above the policy"""
    ovh, most = finite(k.m.overhead), k.policy.max_overhead
    if ovh is None:
        return "n/a", None, most, "Overhead undefined (no compute time)."
    if ovh > most:
        return ("fail", ovh, most, f"Overhead {_p(ovh)} exceeds {_p(most)}: reconsider the strategy "
                "(a cheaper AllReduce, TP inside the node, PP across nodes, a larger batch).")
    return "pass", ovh, most, f"Overhead {_p(ovh)} is within {_p(most)}."


def _judge_7(k: _Ctx) -> Verdict:
    """7. TP divides KV heads"""
    tp, model = k.plan.tp, k.plan.model
    kvh = model.kv_heads or model.heads
    if tp == 1:
        return "n/a", tp, kvh, "No tensor parallelism."
    if not kvh:
        return "n/a", tp, None, f"model `{model.name}` gives no kv_heads to check."
    if rules.tp_divides_kv_heads(tp, kvh):
        return "pass", tp, kvh, f"tp = {tp} divides {kvh} KV heads ({kvh // tp} per GPU)."
    what = ("each KV head is replicated on " f"{tp // kvh if tp % kvh == 0 else 'several'} GPUs"
            if tp > kvh else "the KV heads split unevenly")
    return ("warn", tp, kvh,
            f"tp = {tp} does not divide {kvh} KV heads: {what}, wasting KV-cache memory and bandwidth.")


def _judge_8(k: _Ctx) -> Verdict:
    """8. TP group inside one NVLink domain"""
    tp, dom = k.plan.tp, k.plan.cluster.domain
    if tp == 1:
        return "n/a", tp, dom, "No tensor parallelism."
    if rules.tp_in_domain(tp, dom):
        return "pass", tp, dom, f"The {tp} TP ranks share one NVLink domain of {dom}."
    tp_coll = next((c for c in k.program.collectives if c.key == "TP"), None)
    how = f" (priced {tp_coll.group.used})" if tp_coll is not None and tp_coll.group is not None else ""
    return ("warn", tp, dom,
            f"The TP group of {tp} spans {math.ceil(tp / dom)} NVLink domains of {dom}: "
            f"every AllReduce crosses the slow link{how}. Keep TP ≤ {dom}; use PP across nodes.")


def _judge_9(k: _Ctx) -> Verdict:
    """9. efficiency"""
    eff, least, n = finite(k.m.efficiency), k.policy.min_efficiency, k.plan.gpus
    if n == 1:
        return "n/a", eff, least, "One GPU: nothing to scale."
    if phase_kind(k.plan.phase).ranked_by_objective:
        speedup = units.format_quantity(finite(k.m.speedup) or 0, units.DIMENSIONLESS, 3)
        return ("n/a", eff, least, f"Efficiency {_p(eff)} on {n} GPUs (speedup {speedup}× over one GPU running the "
                "same step), shown, not judged: a serving plan buys latency and memory with its GPUs and is "
                "judged by its cost per token and its latencies, so min_efficiency does not apply.")
    if eff is not None and eff < least:
        return ("fail", eff, least, f"Efficiency {_p(eff)} on {n} GPUs is below {_p(least)}: use a "
                "smaller N per replica and data parallelism for throughput.")
    speedup = units.format_quantity(finite(k.m.speedup) or 0, units.DIMENSIONLESS, 3)
    return "pass", eff, least, f"Efficiency {_p(eff)} on {n} GPUs (speedup {speedup}×)."


def _judge_10(k: _Ctx) -> Verdict:
    """10. bubble"""
    plan, train = k.plan, k.static.train
    bub = finite(k.m.bubble)
    if plan.pp == 1:
        return "n/a", 0.0, BUBBLE_WARN, "No pipeline parallelism."
    st = "warn" if bub > BUBBLE_WARN else "pass"
    v = plan.virtual_stages if (train and plan.schedule == "interleaved") else 1
    formula = (f"Bubble (({plan.pp}−1)/{v})/({plan.microbatches}+({plan.pp}−1)/{v})" if v > 1
               else f"Bubble ({plan.pp}−1)/({plan.microbatches}+{plan.pp}−1)")
    return (st, bub, BUBBLE_WARN,
            f"{formula} = {_p(bub)}"
            + (f": more micro-batches (M ≥ {math.ceil(9 * (plan.pp - 1) / v)})"
               + (" or an interleaved schedule" if train and v == 1 else "")
               + f" bring it under {_p(BUBBLE_WARN)}." if st == "warn" else "."))


def _judge_11(k: _Ctx) -> Verdict:
    """11. memory"""
    c = k.c
    mem, limit = finite(c.memory.total), finite(c.memory.limit)
    fits = mem is not None and limit is not None and mem <= limit
    parts = [f"{p.word} {_gb(finite(c.memory[p.name]))}" for p in results.MEMORY_PARTS
             if p.always or finite(c.memory[p.name])]
    held = f"{_gb(mem)} per GPU ({' + '.join(parts)})"
    of_gpu = f"{_p(k.policy.max_memory)} of {_gb(k.plan.cluster.gpu.memory)}"
    if fits:
        return "pass", mem, limit, f"{held} fits within {_gb(limit)} ({of_gpu})."
    return ("fail", mem, limit,
            f"{held} exceeds {_gb(limit)} ({of_gpu}): shard more (tp, pp, FSDP"
            + (", optimizer_sharding, sequence_parallel, recompute = full" if k.static.train else "")
            + ") or lower the batch.")


@dataclass(frozen=True)
class Item:
    """One checklist item: its number, title, the result key its value prints as (bytes, seconds, a
    fraction: ``report.build``), and the judge that gives its Verdict (status, value, threshold, note) for a
    plan; None for an item judged elsewhere (12, cost: ``ccost.evaluate``)."""

    id: int
    title: str
    value_key: str | None
    judge: Callable[[_Ctx], dict] | None


ITEMS: tuple[Item, ...] = (
    Item(1, "per-GPU weight bytes and compute time", 'weight_bytes_per_gpu', _judge_1),
    Item(2, "communication volume and hops per step", 'volume_bytes', _judge_2),
    Item(3, "α and β measured, not spec-sheet", None, _judge_3),
    Item(4, "T_comm = α·hops + β·volume", 'comm_time_s', _judge_4),
    Item(5, "overhead = T_comm / T_compute", 'overhead', _judge_5),
    Item(6, "overhead above the policy: reconsider the strategy", 'overhead', _judge_6),
    Item(7, "TP degree divides the KV heads", None, _judge_7),
    Item(8, "TP group inside one NVLink domain", None, _judge_8),
    Item(9, "efficiency = speedup / N above the policy", 'efficiency', _judge_9),
    Item(10, "pipeline bubble (P−1)/(M+P−1)", 'bubble', _judge_10),
    Item(11, "memory per GPU fits (weights, KV cache, gradients, optimizer)", 'memory_bytes_per_gpu', _judge_11),
    Item(12, "cost per million tokens (policy max_cost_per_mtok)", None, None),
    # a training target's (ccost.model.target; judged by ccost.evaluate like item 12): plans with one only
    Item(13, "time to train within the deadline and the GPU budget", None, None),
    Item(14, "goodput at scale (policy min_goodput)", None, None),
    # an online plan's (ccost.model.online, judged by its phase after the simulation): online plans only
    Item(15, "SLOs met at the peak rate (policy max_ttft, max_tpot, max_e2e, min_slo_goodput)", "online.slo_ratio",
         None),
)
TITLES = {i.id: i.title for i in ITEMS}
#: What the value of each item measures, so it prints with its unit.
VALUE_KEYS = {i.id: i.value_key for i in ITEMS if i.value_key}


def _links_used(program: Program, cluster: S.Cluster) -> list[S.Link]:
    """The cluster's links that carry at least one collective with a cost, intra-node first."""
    names: set[str] = set()
    for k in program.collectives:
        if (finite(k.group_size) or 0) > 1 and (finite(k.count) or 0) > 0:
            names.update(str(k.link).split("+"))
    return [ln for ln in (cluster.intra_node, cluster.inter_node) if ln is not None and ln.name in names]


# ---------------------------------------------------------------------------------------------------
# Sweeps and comparisons (float mode: each point is a plan)

def sweep_points(sweep: S.Sweep):
    """The plans of a sweep: the cartesian product of its field lists, in written order, as
    (assignment dict with references shown by name, plan)."""
    base = sweep.base
    names = [f for f, _ in sweep.fields]
    for combo in itertools.product(*(vals for _, vals in sweep.fields)):
        assign = dict(zip(names, combo))
        # a swept reference (cluster = [a, b]) is shown by its name
        shown = {k: getattr(v, "name", v) for k, v in assign.items()}
        label = ",".join(f"{k}={v}" for k, v in shown.items())
        # a fixed global batch (or micro-batch size) gives each point its batch (and micro-batches)
        yield shown, rebatched(S.vary(base, name=f"{sweep.name}[{label}]", **assign), keep=frozenset(assign))


def cost_thresholds(policy: S.Policy) -> list[float]:
    out = sorted(set(COST_THRESHOLDS) | {float(policy.min_efficiency)}, reverse=True)
    return out


def optima(points: list[dict], names: list[str], policy: S.Policy) -> tuple[dict | None, dict]:
    """(time-optimal point, {threshold: cost-optimal point}) among the feasible points that fit memory: a
    layout that does not fit runs nowhere, so it is never an optimum (None and no cost-optimal
    point when none fits). Cost-optimal: the most GPUs whose efficiency stays at or above the threshold
    (ties: the faster)."""
    ok = [p for p in points if p.get("step_time_s") is not None]
    fit = [p for p in ok if p.get("fits_memory")]

    def key_of(p):
        return {k: p[k] for k in names}

    t_opt = min(fit, key=lambda p: p["step_time_s"]) if fit else None
    cost: dict[str, dict | None] = {}
    for thr in cost_thresholds(policy):
        cands = [p for p in fit if p.get("efficiency") is not None and p["efficiency"] >= thr]
        best = max(cands, key=lambda p: (p["gpus"], -p["step_time_s"])) if cands else None
        cost[_thr_key(thr)] = key_of(best) if best else None
    return (key_of(t_opt) if t_opt else None), cost


def _thr_key(thr: float) -> str:
    return f"{thr:g}"


#: compare `by` → (document key, a dotted path into the plan's document; higher is better; how to print)
COMPARE_METRICS = {
    "latency": ("latency_s", False, "per-step latency"),
    "throughput": ("throughput_tokens_s", True, "throughput"),
    "overhead": ("overhead", False, "communication overhead"),
    "efficiency": ("efficiency", True, "efficiency"),
    "cost_per_token": ("cost.cost_per_mtok_usd", False, "cost per million tokens"),
    "throughput_per_gpu": ("throughput_per_gpu", True, "throughput per GPU"),
}


def compare_value(by: str, doc: dict):
    """A plan document's value of the compare measure ``by`` (None where it has none: not priced)."""
    v: Any = doc
    for part in COMPARE_METRICS[by][0].split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def _fmt_metric(by: str, v: float) -> str:
    if by == "latency":
        return units.format_quantity(v, units.TIME)
    if by in ("throughput", "throughput_per_gpu"):
        return units.format_quantity(v, units.DIMENSIONLESS) + " tokens/s" + (" per GPU" if by.endswith("gpu")
                                                                               else "")
    if by == "cost_per_token":
        return units.format_quantity(v, units.MONEY)
    return units.format_percent(v)


def _policy_fails(doc: dict) -> list[str]:
    """The checklist items a plan fails: each is a policy threshold it breaks (overhead, efficiency,
    memory, cost per token), what `ccost check --policy` gates CI on."""
    return [str(i["id"]) for i in doc.get("checklist", []) if i["status"] == "fail"]


def ranked_down(doc: dict, short: bool = False) -> str | None:
    """Why ``rank`` puts a plan after others whatever its metric: it does not fit memory, or it breaks the
    policy (its failed checklist items); None for a plan ranked by its metric alone. ``short``: for a
    table cell."""
    if not doc.get("fits_memory", True):
        return "does not fit" if short else "does not fit memory"
    fails = _policy_fails(doc)
    if not fails:
        return None
    return f"checklist {', '.join(fails)} fail" if short else f"breaks the policy: checklist {', '.join(fails)} failed"


def rank(compare_by: str, plans: dict[str, dict]) -> tuple[list[str], str]:
    """Ranking of plan documents by the compare metric: plans that do not fit memory last, then the plans
    that break a policy threshold (a failed checklist item) after those that meet the policy, whatever
    their metric; and a recommendation sentence with the reason and the margin over the runner-up."""
    key, higher, label = COMPARE_METRICS[compare_by]

    def metric(name: str) -> float:
        v = compare_value(compare_by, plans[name])
        if v is None:
            return -math.inf if higher else math.inf
        return v

    names = list(plans)
    order = sorted(names, key=lambda n: (not plans[n]["fits_memory"], bool(_policy_fails(plans[n])),
                                         -metric(n) if higher else metric(n), names.index(n)))
    if not order:
        return [], "No plans to compare."
    best = order[0]
    bp = plans[best]
    if not bp["fits_memory"]:
        return order, (f"No plan fits in memory; `{best}` would be best by {label} "
                       f"({_fmt_metric(compare_by, metric(best))}), but it needs "
                       f"{_gb(bp['memory_bytes_per_gpu'])} per GPU.")
    text = f"Choose `{best}` ({bp.get('title') or best}): best by {label}, {_fmt_metric(compare_by, metric(best))}"
    def beats_best(n: str) -> bool:
        return metric(n) > metric(best) if higher else metric(n) < metric(best)

    if len(order) > 1:
        ru = order[1]
        mb, mr = metric(best), metric(ru)
        # a runner-up ranked below for breaking the policy, not by the metric, gets no margin (said below)
        by_metric = not (_policy_fails(plans[ru]) and not _policy_fails(bp) and beats_best(ru))
        if by_metric and plans[ru]["fits_memory"] and math.isfinite(mr) and mr != 0:
            if compare_by in ("overhead", "efficiency"):  # fractions: the gap in percentage points
                gap = units.format_quantity(abs(mb - mr) * 100, units.DIMENSIONLESS, 3)
                margin = f"{gap} percentage points {'above' if higher else 'below'}"
            elif higher:
                margin = f"{units.format_percent(mb / mr - 1)} more than"
            else:
                margin = f"{units.format_percent(1 - mb / mr)} less than"
            text += f", {margin} `{ru}` ({_fmt_metric(compare_by, mr)})"
        elif by_metric and plans[ru]["fits_memory"]:
            text += f", against `{ru}` ({_fmt_metric(compare_by, mr)})"
    text += "."
    why = []
    if compare_by != "overhead":
        why.append(f"overhead {units.format_percent(bp['overhead'])}" if bp.get("overhead") is not None else "")
    if compare_by != "efficiency" and bp.get("efficiency") is not None:
        why.append(f"efficiency {units.format_percent(bp['efficiency'])}")
    why.append(bp["regime"])
    why = [w for w in why if w]
    if why:
        text += " It runs at " + ", ".join(why) + "."
    fails = _policy_fails(bp)
    if not fails:  # plans better by the metric that break the policy, and what they break
        for n in [n for n in order if plans[n]["fits_memory"] and _policy_fails(plans[n]) and beats_best(n)]:
            f = _policy_fails(plans[n])
            text += (f" `{n}` is better by {label} ({_fmt_metric(compare_by, metric(n))}) but fails checklist "
                     f"item{'s' if len(f) > 1 else ''} {', '.join(f)} (the policy), so it ranks after the plans "
                     "that meet the policy.")
    unfit = [n for n in order if not plans[n]["fits_memory"]]
    if unfit:
        text += " Ranked last because they do not fit in memory: " + ", ".join(f"`{n}`" for n in unfit) + "."
    if fails:
        text += f" Caution: checklist item{'s' if len(fails) > 1 else ''} {', '.join(fails)} fail{'' if len(fails) > 1 else 's'} for it."
    return order, text
