"""Serving with continuous batching: ``phase = serve``.

A serve plan states its requests — ``input_tokens`` I, ``output_tokens`` O — how many run at once,
``concurrency`` C (per replica, i.e. per dp·ep rank group, like ``batch``), and the chunked-prefill chunk
``chunk_tokens`` c. Nothing here prices hardware: every step is lowered and priced by ``ccost.model.lower`` and
``ccost.model.analysis`` (the decode and prefill physics, the stack profile, the collectives); this module only
says *which* steps a serving engine runs and combines their times into request figures.

**The model (a closed loop; an arrival rate is not modelled).** C requests are in the system at all
times: a finished request is replaced at once. A request's prompt is prefilled in n_c = ⌈I/c⌉ chunks, one
chunk per engine step (one request's chunk per step: prompts are not packed together); the step that
prefills the last chunk also produces the first output token, and O − 1 decode steps produce the rest.
So a request holds its slot for R = n_c + O − 1 steps, and by Little's law λ = C/R requests finish per step.

Two kinds of step run:

* **decode step**: all C requests decode one token each (no prompt in flight), at the mean decode
  context S_dec = I + O/2 tokens (a decode step of a request is at context I + j, j = 1 … O − 1);
* **mixed step**: one prompt chunk of c̄ = I/n_c tokens (the mean chunk) rides along with n_dec decoding
  requests. It is priced as ONE forward pass (weights read once): the weight GEMMs, MoE experts and the
  collectives for n_dec + c̄ tokens (``lower`` of a decode step of n_dec + c̄ one-token rows), plus the
  attention of both parts added in one attention roofline — the decode part's KV reads and FLOPs at S_dec
  (``lower``'s decode attention for n_dec sequences) and 1/n_c of a whole-prompt prefill's attention
  (``lower``'s prefill of one I-token prompt: KV written, causal FLOPs). Under ``roofline = step`` (the
  ``ideal`` profile) the decode part's KV bytes join the step's one roofline instead, as in a decode step.

Every cycle of R steps, each of the C requests prefills once, so C·n_c of the R steps are mixed.

* **Below saturation** (C·n_c ≤ R): in a mixed step C − 1 requests decode (one is prefilling): n_dec = C − 1.
  A request's own n_c prefill steps are mixed (TTFT = n_c·t_mix), and the other (C − 1)·n_c mixed steps of
  the cycle fall in its O − 1 decode steps, so its mean inter-token time is
  TPOT = t_dec + (C − 1)·n_c·(t_mix − t_dec)/(O − 1); the mean step is t̄ = (C·n_c·t_mix + (R − C·n_c)·t_dec)/R.
* **Saturated** (C·n_c > R): one chunk per step cannot keep up: every step is mixed, λ = 1/n_c, the
  n_dec = (O − 1)/n_c requests decoding are those admitted in the last O − 1 steps and the rest wait for
  prefill. TPOT = t̄ = t_mix, and the wait makes TTFT = (C·n_c − O + 1)·t_mix. Both cases agree at C·n_c = R.

In both, request latency E2E = TTFT + (O − 1)·TPOT (= R·t̄ below saturation), and Little's law in time gives
requests/s = dp·ep·C / E2E; output tokens/s = requests/s·O, input (prefill) tokens/s = requests/s·I, total
= requests/s·(I + O), per GPU divided by tp·pp·ep·dp.

A plan's ordinary keys (step time, collectives, compute, the checklist) describe its **decode step**; its
memory is the **peak**: every running request at its longest context, I + O tokens (a conservative bound:
in steady state the requests are spread over their lives). ``throughput_tokens_s`` is the output tokens/s
(and prices the cost per million output tokens); the ``serve`` section holds the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ccost import derive, units
from ccost.model import analysis, costs, lower
from ccost import spec as S
from ccost.derive import maximum, named
from ccost.model.program import Priced

Num = Any


@dataclass(frozen=True)
class ServeTerms:
    """The serve plan's steps and request figures, in one mode (floats or derivation values)."""

    dec: lower.Program  # decode step: C requests decoding, memory at the peak context
    m_dec: analysis.Metrics
    mix: lower.Program  # mixed step: n_dec decoding + one chunk
    m_mix: analysis.Metrics
    saturated: bool
    setup: tuple  # n_c, c̄, R, S_dec, n_dec, f
    mix_values: tuple  # the mixed step's own values (attention, stage, compute)
    memory: tuple
    results: tuple
    C: Num
    I: Num
    O: Num
    c: Num
    n_c: Num
    c_bar: Num
    R: Num
    n_dec: Num
    share_mixed: Num
    ttft: Num
    tpot: Num
    t_mean: Num
    e2e: Num
    req_s: Num
    out_tok_s: Num
    out_tok_s_gpu: Num
    in_tok_s: Num
    total_tok_s: Num
    total_tok_s_gpu: Num
    gpus: Num


def _leaf(name: str, value: float, desc: str, source: str, derivation: bool):
    return derive.leaf(name, value, units.DIMENSIONLESS, desc, source) if derivation else float(value)


def _lowered(plan: S.Plan, policy: S.Policy, derivation: bool, phase: str, seq: int | None, **override):
    """``lower`` of one step of the serve plan, a decode or prefill step (``lower.Step``) whose KV cache holds
    ``seq`` tokens, with some inputs given by the serve model: the rows it runs (``B``), its contexts."""
    static, x = lower.prepare(plan, policy, derivation, lower.Step(phase, seq))
    return lower.lower(static, lower.with_arrays(x, **override))


def _attention(program: lower.Program):
    """(bytes, FLOPs, time) of the attention row of a program's per-operator roofline."""
    for row in program.compute.operators:
        if row[0] == "attention":
            return row[1], row[2], row[3]
    raise AssertionError("a program with a KV cache has an attention operator")  # pragma: no cover


def terms(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> ServeTerms:
    """Price a serve plan (see the module docstring), one that can be: what it cannot price is refused
    before, by the rules of its record (``ccost.schema``'s serve ``errors``) that
    ``ccost.check.plan.evaluation_errors`` runs for ``ccost check`` and ``ccost.evaluate``."""
    src = f"plan {plan.name}"
    C = _leaf("C", plan.concurrency, "concurrency: requests running per replica", src, derivation)
    I = _leaf("I", plan.input_tokens, "prompt tokens per request", src, derivation)
    O = _leaf("O", plan.output_tokens, "output tokens per request", src, derivation)
    chunk = plan.chunk_tokens or plan.input_tokens
    c = _leaf("c", chunk, "prefill chunk: the most prompt tokens one step prefills",
              src if plan.chunk_tokens else f"{src}: input_tokens (no chunk_tokens: the whole prompt)", derivation)

    n_c = named("n_c", derive.ceil(I / c), "prefill steps per request: ⌈I/c⌉")
    c_bar = named("c̄", I / n_c, "mean chunk: I/n_c tokens")
    R = named("R", n_c + O - 1, "steps a request holds its slot: n_c prefill steps (the last gives the first "
              "token) + O − 1 decode steps")
    ctx_dec = named("S_dec", I + O / 2, "mean context of a decode step: I + O/2")
    ctx_max = named("S_max", I + O, "longest context of a request: I + O (peak memory)")
    saturated = bool(derive.value_of(C * n_c) > derive.value_of(R))
    if saturated:
        n_dec = named("n_dec", (O - 1) / n_c, "requests decoding in a step when prefill is saturated: (O − 1)/n_c")
        share = named("f_mix", derive.constant(1.0, "1", C), "share of steps that carry a chunk: every one "
                      "(C·n_c > R: prefill saturated)", style="percent")
    else:
        n_dec = named("n_dec", C - 1, "requests decoding beside the chunk in a mixed step: C − 1")
        share = named("f_mix", C * n_c / R, "share of steps that carry a chunk: C·n_c/R", style="percent")
    B_mix = named("B_mix", n_dec + c_bar, "token rows of a mixed step's forward pass: n_dec + c̄")

    # --- the decode step: all C requests decoding, at the mean context; memory at the peak context --------
    dec = _lowered(plan, policy, derivation, "decode", plan.input_tokens + plan.output_tokens, B=C, ctx=ctx_dec)
    peak = _lowered(plan, policy, derivation, "decode", plan.input_tokens + plan.output_tokens, B=C, ctx=ctx_max)
    mem = peak.compute.memory
    dec = replace(dec, compute=replace(dec.compute, memory=mem))
    m_dec = analysis.analyse(dec)

    # --- the mixed step: one forward pass of n_dec decode rows + a chunk of c̄ prompt tokens ------------------
    A = _lowered(plan, policy, derivation, "decode", None, B=B_mix)
    part_dec = _lowered(plan, policy, derivation, "decode", plan.input_tokens + plan.output_tokens,
                        B=n_dec, ctx=ctx_dec)
    x, cA = A.inputs, A.compute
    if A.static.roofline == "operator":
        one = _leaf("B_prompt", 1, "sequences in the prompt's prefill: one request's", "serve: one prompt", derivation)
        prompt = _lowered(plan, policy, derivation, "prefill", plan.input_tokens, B=one, S=I, ctx=I)
        b_d, f_d, t_d = _attention(part_dec)
        b_p, f_p, t_p = _attention(prompt)
        kv_b = named("KV_mix", b_d + b_p / n_c, "attention bytes of the mixed step: the decode part's KV reads "
                     "+ 1/n_c of one prompt's KV writes")
        f_a = named("F_attn,mix", f_d + f_p / n_c, "attention FLOPs of the mixed step: the decode part's + 1/n_c "
                    "of one prompt's causal prefill")
        ta_m, ta_f = costs.memory_time(kv_b, x.BW_hbm), costs.flop_time(f_a, x.R_attn)
        if A.static.kernel_attention:  # measured curves (ccost.model.kernels): each part on its own kernel's curve
            T_a = named("T_attn,mix", t_d + t_p / n_c, "attention of the mixed step on the measured curves: the "
                        "decode part's + 1/n_c of one prompt's causal prefill")
        else:
            T_a = named("T_attn,mix", maximum(ta_m, ta_f), "attention of the mixed step: max(bytes/BW, FLOPs/R_attn)")
        d_stage, d_mb = T_a, T_a / x.M
        extra_b, extra_f = kv_b, f_a
        rows = cA.operators + (("attention", kv_b, f_a, T_a, ta_m, ta_f),)
        T_flop = cA.T_flop + ta_f
        own = (kv_b, f_a, T_a)
    else:  # the notes' one roofline: the decode part's KV reads join the step's bytes
        kv_b = named("KV_mix", part_dec.compute.kv_gpu, "KV bytes the decode part reads (per GPU)")
        d_stage = named("ΔT_KV", maximum(costs.memory_time(cA.bytes_gpu + kv_b, x.BW_hbm), cA.T_flop)
                        - maximum(cA.T_mem, cA.T_flop), "the decode part's KV reads in the step's roofline")
        d_mb = named("ΔT_KV,mb", maximum(costs.memory_time(cA.bytes_mb + kv_b / x.M, x.BW_hbm), cA.T_flop_mb)
                     - maximum(cA.T_mem_mb, cA.T_flop_mb), "the same for one micro-batch")
        extra_b, extra_f = kv_b, 0.0
        rows = cA.operators
        T_flop = cA.T_flop
        own = (kv_b, d_stage, d_mb)
    bytes_mix = named("bytes_mix", cA.bytes_gpu + extra_b, "bytes read per mixed step per GPU")
    T_stage = named("T_stage,mix", cA.T_stage + d_stage, "one stage of the mixed step")
    # A was lowered with B_mix token rows; the stack's per-sequence host time counts requests, not rows: the
    # n_dec decoding ones and the one whose chunk is prefilled (a chunk of c̄ tokens is one sequence).
    T_host = cA.T_host
    if A.static.overheads and A.static.seq_host and not A.static.compute_given:
        T_host = named("T_host,mix", x.t_step + x.t_seq * (n_dec + 1), "stack: host time of the mixed step, "
                       "t_step + t_seq·(n_dec + 1) (the requests in the step, not its token rows)")
    if A.static.host_overlap and A.static.overheads and not A.static.compute_given:
        # asynchronous scheduling: the mixed step's host time runs behind its GPU time
        T_compute = named("T_compute,mix", lower.with_host(A.static, x.pp * (cA.T_stage + d_stage), T_host),
                          "compute of the mixed step on the critical path: max(GPU, T_host)")
    else:
        base = x.pp * cA.T_stage + T_host if T_host is not cA.T_host else cA.T_compute
        T_compute = named("T_compute,mix", base + x.pp * d_stage, "compute of the mixed step on the critical path")
    t_mb = named("t_mb,mix", cA.t_mb + d_mb, "one micro-batch of the mixed step on one stage")
    mix = replace(A, compute=replace(
        cA, bytes_gpu=bytes_mix, T_mem=costs.memory_time(bytes_mix, x.BW_hbm),
        T_flop=T_flop, T_stage=T_stage, T_compute=T_compute, t_mb=t_mb, operators=rows, T_host=T_host,
        flops_gpu=named("F_mix", cA.flops_gpu + extra_f, "FLOPs per mixed step per GPU"), memory=mem))
    m_mix = analysis.analyse(mix)
    t_dec = named("t_dec", m_dec.step, "decode step: all C requests decode one token")
    t_mix = named("t_mix", m_mix.step, "mixed step: n_dec requests decode beside one prompt chunk")

    # --- request figures ----------------------------------------------------------------------------------
    if saturated:
        ttft = named("TTFT", (C * n_c - O + 1) * t_mix, "time to first token: waiting for the prefill, then "
                     "n_c chunks: (C·n_c − O + 1)·t_mix")
        tpot = named("TPOT", t_mix, "time per output token (inter-token latency): every step is mixed")
        t_mean = named("t̄", t_mix, "mean step time: every step is mixed")
    else:
        ttft = named("TTFT", n_c * t_mix, "time to first token: the request's n_c mixed steps")
        tpot = named("TPOT", t_dec + (C - 1) * n_c * (t_mix - t_dec) / (O - 1),
                     "time per output token (inter-token latency): O − 1 decode steps, (C − 1)·n_c of them "
                     "carrying another request's chunk: t_dec + (C − 1)·n_c·(t_mix − t_dec)/(O − 1)")
        t_mean = named("t̄", (C * n_c * t_mix + (R - C * n_c) * t_dec) / R,
                       "mean step time: (C·n_c·t_mix + (R − C·n_c)·t_dec)/R")
    e2e = named("E2E", ttft + (O - 1) * tpot, "request latency: TTFT + (O − 1)·TPOT")
    gpus = m_dec.gpus
    running = named("C_all", x.dp * x.ep * C, "requests running in the plan: dp·ep·C")
    req_s = named("req/s", running / e2e, "requests per second, Little's law: C_all/E2E")
    out_s = named("tok/s,out", req_s * O, "output tokens per second: req/s·O")
    out_gpu = named("tok/s,out,GPU", out_s / gpus, "output tokens per second per GPU")
    in_s = named("tok/s,in", req_s * I, "prompt tokens prefilled per second: req/s·I")
    tot_s = named("tok/s,total", req_s * (I + O), "tokens per second, prompt and output: req/s·(I + O)")
    tot_gpu = named("tok/s,total,GPU", tot_s / gpus, "tokens per second per GPU")
    return ServeTerms(
        dec, m_dec, mix, m_mix, saturated, (n_c, c_bar, R, ctx_dec, n_dec, share, B_mix),
        own + (bytes_mix, T_stage) + ((T_host,) if T_host is not cA.T_host else ()) + (T_compute, t_mb),
        (*mem.held, mem.total, mem.limit, ctx_max),
        (t_dec, t_mix, ttft, tpot, t_mean, e2e, running, req_s, out_s, out_gpu, in_s, tot_s, tot_gpu),
        C, I, O, c, n_c, c_bar, R, n_dec, share, ttft, tpot, t_mean, e2e, req_s, out_s, out_gpu, in_s, tot_s,
        tot_gpu, gpus)


def metrics_for_plan(t: ServeTerms) -> analysis.Metrics:
    """The decode step's metrics with the plan's throughput: output tokens/s (what the cost is per)."""
    return replace(t.m_dec, throughput=t.out_tok_s, throughput_gpu=t.out_tok_s_gpu)


def _f(x) -> float | None:
    return analysis.finite(x)


def record(plan: S.Plan, priced: Priced) -> dict:
    """The ``serve`` section of a serve plan's document (seconds, tokens, requests)."""
    t = priced.terms
    return {
        "concurrency": plan.concurrency,
        "input_tokens": plan.input_tokens,
        "output_tokens": plan.output_tokens,
        "chunk_tokens": plan.chunk_tokens or plan.input_tokens,
        "requests_running": _f(t.results[6]),
        "chunks_per_prompt": _f(t.n_c),
        "mean_chunk_tokens": _f(t.c_bar),
        "prefill_saturated": t.saturated,
        "mixed_step_share": _f(t.share_mixed),
        "decoding_in_mixed_step": _f(t.n_dec),
        "decode_step_time_s": _f(t.m_dec.step),
        "mixed_step_time_s": _f(t.m_mix.step),
        "mean_step_time_s": _f(t.t_mean),
        "ttft_s": _f(t.ttft),
        "tpot_s": _f(t.tpot),
        "request_latency_s": _f(t.e2e),
        "requests_per_s": _f(t.req_s),
        "output_tokens_per_s": _f(t.out_tok_s),
        "output_tokens_per_s_per_gpu": _f(t.out_tok_s_gpu),
        "input_tokens_per_s": _f(t.in_tok_s),
        "total_tokens_per_s": _f(t.total_tok_s),
        "total_tokens_per_s_per_gpu": _f(t.total_tok_s_gpu),
    }


def price(plan: S.Plan, policy: S.Policy, derivation: bool = False) -> Priced:
    """A serve plan priced: its decode step's program, the metrics with the plan's throughput (output
    tokens/s), and every term (``ServeTerms``)."""
    t = terms(plan, policy, derivation)
    return Priced(t.dec, metrics_for_plan(t), t)


def explain_groups(plan: S.Plan, priced: Priced) -> list[tuple[str, list]]:
    """The derivation of a serve plan (priced in derivation mode), grouped for reading
    (``evaluate.explain_sections`` numbers them and adds cost and power)."""
    t = priced.terms
    groups: list[tuple[str, list]] = [("serve: chunks, slots and Little's law", list(t.setup))]
    for label, prog, m in (("decode step (all C requests decoding)", t.dec, t.m_dec),
                           ("mixed step (n_dec decoding + one prompt chunk)", t.mix, t.m_mix)):
        groups += [(f"{label}: {title}", vals) for title, vals in analysis.collective_values(prog)]
        c = prog.compute
        vals = [c.bytes_gpu, c.flops_gpu, c.T_stage, c.T_compute, c.t_mb]
        if prog is t.mix:
            vals = list(t.mix_values) + vals
        groups.append((f"{label}: compute and step", vals + [m.T_comm, m.exposed, m.latency, m.overhead,
                                                               m.step]))
    groups.append(("memory: every request at its longest context, I + O", list(t.memory)))
    m = t.m_dec
    groups.append(("totals of the decode step", [m.volume, m.hops, m.T_lat, m.T_bw, m.bubble, m.gpus, m.speedup,
                                                 m.efficiency, m.eta]))
    groups.append(("serve: TTFT, TPOT, requests/s, tokens/s", list(t.results)))
    return groups


def review_note(sv: dict) -> str:
    """What a serve plan's numbers mean, in words, for its part of the review."""
    return (f"Serve plan (continuous batching, a closed loop): {sv['concurrency']:,} requests per replica of "
            f"{sv['input_tokens']:,} prompt and {sv['output_tokens']:,} output tokens; each prompt is prefilled in "
            f"{sv['chunks_per_prompt']:g} chunk(s) of at most {sv['chunk_tokens']:,} tokens, one chunk per step beside "
            "the decoding requests. The step time, collectives, compute and checklist above are the decode step's "
            "(every request decoding); memory is the peak, every request at its longest context; TTFT, TPOT and "
            "requests/s combine the decode and mixed steps by Little's law. An arrival rate (open loop) is not "
            "modelled.")


#: What the continuous-batching model leaves out: a paragraph of a review that has a serve plan.
NOT_MODELLED = (
    "Serving", "A serve plan is a closed loop: a finished request is replaced at once, so an arrival rate, "
    "queueing of an open loop and its tail latencies are not modelled. Every request has the same prompt and "
    "output length; one request's chunk is prefilled per step (prompts are not packed into one step), each "
    "chunk priced as the mean chunk I/n_c; decode steps run at the mean context I + O/2; memory is held to "
    "the peak, every request at I + O; no preemption, prefix caching or speculative decoding.")
