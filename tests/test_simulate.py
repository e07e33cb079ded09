"""The serving simulator (``ccost.model.simulate``, docs/simulation.md): demand draws, trace files, step models,
the engine against queueing theory (M/D/1, M/G/1), hand-worked bursts, Little's law, a plain reference
simulator (tests/simref.py), determinism and the disaggregated mode."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ccost.diagnostics import CcostError
from ccost.model.simulate import (
    Arrivals,
    Demand,
    DemandError,
    Engine,
    EngineError,
    Length,
    Roofline,
    Slo,
    Table,
    highest_rate,
    parse_trace,
    run_engine,
    simulate,
    simulate_disagg,
    sustainable_rate,
)
from ccost.model.simulate.demand import Z90

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simref import reference  # noqa: E402


# --------------------------------------------------------------------------------------------------
# Demand


def test_poisson_gaps_have_the_asked_mean_and_cv():
    rng = np.random.default_rng(3)
    gaps = np.diff(Arrivals.poisson(5.0).times(200_001, rng))
    # exponential: mean 1/λ = 0.2 s, CV 1; 200k draws put both within 1 %
    assert gaps.mean() == pytest.approx(0.2, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.01)


def test_gamma_arrivals_have_the_asked_cv_and_split_round_robin_exactly():
    rng = np.random.default_rng(4)
    a = Arrivals.gamma(10.0, 2.0)
    gaps = np.diff(a.times(400_001, rng))
    assert gaps.mean() == pytest.approx(0.1, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.03)
    # every 4th of the same stream: a sum of 4 gamma gaps, CV 2/√4 = 1, rate 10/4
    t = a.times(400_000, np.random.default_rng(5))
    every4 = np.diff(t[3::4])
    split = a.split(4)
    assert (split.rate, split.cv) == (2.5, 1.0)
    assert every4.mean() == pytest.approx(1 / split.rate, rel=0.02)
    assert every4.std() / every4.mean() == pytest.approx(split.cv, rel=0.03)
    # random routing of Poisson is Poisson at rate/n; of gamma: cv² = 1 + (cv² − 1)/n
    assert Arrivals.poisson(6.0).split(3, "random") == Arrivals.poisson(2.0)
    assert Arrivals.gamma(6.0, 2.0).split(3, "random").cv == pytest.approx(math.sqrt(1 + 3 / 3))
    assert Arrivals.closed(10).split(3).clients == 4


def test_common_random_numbers_scale_arrival_times_with_the_rate():
    d = Demand(Arrivals.poisson(2.0), Length.fixed(10), Length.fixed(5))
    a, b = d.requests(50, seed=9), d.at_rate(8.0).requests(50, seed=9)
    assert np.allclose(a.arrival / 4, b.arrival, rtol=1e-12)


def test_lognormal_fitted_to_mean_and_p90():
    # ln q − ln m = zσ − σ²/2 solved for σ: a draw of 400k has that mean and p90 within 1 %
    L = Length.lognormal(1000, p90=1800)
    assert math.log(1.8) == pytest.approx(Z90 * L.sigma - L.sigma ** 2 / 2, rel=1e-12)
    x = L.sample(400_000, np.random.default_rng(1))
    assert x.mean() == pytest.approx(1000, rel=0.01)
    assert np.percentile(x, 90) == pytest.approx(1800, rel=0.01)
    with pytest.raises(DemandError, match="p90 must be above the mean"):
        Length.lognormal(1000, p90=900)
    with pytest.raises(DemandError, match="give p90 or cv"):
        Length.lognormal(1000)
    # from a CV: σ² = ln(1 + cv²); clipped to [1, max]
    y = Length.lognormal(500, cv=1.5, max=2000).sample(200_000, np.random.default_rng(2))
    assert y.min() >= 1 and y.max() == 2000


def test_uniform_lengths_follow_vllm_random_range():
    # vLLM's random dataset: integers in [⌊m(1−r)⌋, ⌈m(1+r)⌉]
    x = Length.uniform(100, 0.25).sample(100_000, np.random.default_rng(0))
    assert (x.min(), x.max()) == (75, 125)
    assert x.mean() == pytest.approx(100, rel=0.01)


def test_prefix_hit_never_covers_the_whole_prompt():
    d = Demand(Arrivals.poisson(1.0), Length.uniform(10, 0.9), Length.fixed(5), prefix_hit=0.999)
    r = d.requests(1000, seed=0)
    assert np.all(r.cached == np.minimum(np.floor(0.999 * r.input), r.input - 1))
    assert np.all(r.input - r.cached >= 1)


def test_demand_draws_are_deterministic_and_seeded():
    d = Demand(Arrivals.gamma(3.0, 1.7), Length.lognormal(700, cv=0.5), Length.uniform(100, 0.5), prefix_hit=0.3)
    a, b, c = d.requests(500, seed=11), d.requests(500, seed=11), d.requests(500, seed=12)
    for f in ("arrival", "input", "output", "cached"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
    assert not np.array_equal(a.arrival, c.arrival)


def test_demand_refuses_what_it_cannot_simulate():
    with pytest.raises(DemandError, match="positive number of requests/s"):
        Arrivals.poisson(0)
    with pytest.raises(DemandError, match="prefix-cache hit share"):
        Demand(Arrivals.poisson(1), Length.fixed(5), Length.fixed(5), prefix_hit=1.0)
    with pytest.raises(DemandError, match="needs request lengths"):
        Demand(Arrivals.poisson(1))


# --------------------------------------------------------------------------------------------------
# Trace files


def test_trace_csv_with_benchmark_column_names():
    data = b"Timestamp,Model,Request tokens,Response tokens,Total tokens\n5,gpt,472,18,490\n6,gpt,1024,256,1280\n"
    t = parse_trace(data, "burst.csv")
    assert t.inputs.tolist() == [472, 1024] and t.outputs.tolist() == [18, 256]
    assert t.columns == ("Request tokens", "Response tokens")
    t = parse_trace(b"TIMESTAMP,ContextTokens,GeneratedTokens\nx,100,7\n", "azure.csv")
    assert (t.inputs.tolist(), t.outputs.tolist()) == ([100], [7])


def test_trace_jsonl_json_array_and_vllm_result():
    lines = b'{"timestamp": 0, "input_length": 6955, "output_length": 52}\n\n{"input_length": 10, "output_length": 1}\n'
    t = parse_trace(lines, "mooncake.jsonl")
    assert t.inputs.tolist() == [6955, 10] and t.outputs.tolist() == [52, 1]
    t = parse_trace(json.dumps([{"prompt_tokens": 3, "completion_tokens": 4}]).encode(), "a.json")
    assert (t.inputs.tolist(), t.outputs.tolist()) == ([3], [4])
    t = parse_trace(json.dumps({"input_lens": [5, 6], "output_lens": [7, 8], "ttfts": [0.1, 0.2]}).encode(), "r.json")
    assert (t.inputs.tolist(), t.outputs.tolist()) == ([5, 6], [7, 8])


@pytest.mark.parametrize("data, line, words", [
    (b"input_tokens,output_tokens\n10,5\n10,x\n", 3, "not a token count"),
    (b"input_tokens,output_tokens\n10,5\n10,0\n", 3, "between 1 and"),
    (b"input_tokens,output_tokens\n10,5.5\n", 2, "not a whole number"),
    (b"a,b\n1,2\n", 1, "no column of input tokens"),
    (b"input_tokens,output_tokens\n10\n", 2, "the row has 1 column"),
    (b'{"input_tokens": 5, "output_tokens": 6}\n{"input_tokens": 5,\n', 2, "not a JSON object"),
    (b'{"input_tokens": 5, "output_tokens": 6}\n[1, 2]\n', 2, "not an object"),
    (b'{"input_tokens": true, "output_tokens": 6}\n', 1, "not a token count"),
    (b"\xff\xfe\x00", 1, "binary"),
    (b"input_tokens,output_tokens\n\xff\n", 2, "not UTF-8"),
    (b"   \n", 1, "empty"),
    (b"input_tokens,output_tokens\n", 1, "no requests"),
    (b'{"input_lens": [1, 2], "output_lens": [3]}', 1, "same length"),
])
def test_trace_errors_name_the_line(data, line, words):
    with pytest.raises(CcostError) as exc:
        parse_trace(data, "t.csv", code="E002")
    d = exc.value.diagnostics[0]
    assert d.code == "E002" and d.span.file == "t.csv" and d.span.line == line
    assert words in d.message and d.help


def test_trace_is_bounded_in_rows_and_bytes():
    body = b"input_tokens,output_tokens\n" + b"1,1\n" * 11
    with pytest.raises(CcostError, match="more than 10 requests"):
        parse_trace(body, "t.csv", max_rows=10)
    with pytest.raises(CcostError, match="over the limit"):
        parse_trace(body, "t.csv", max_bytes=20)
    with pytest.raises(CcostError, match="more than 10 requests"):
        parse_trace(b'{"input_tokens": 1, "output_tokens": 1}\n' * 12, "t.jsonl", max_rows=10)


def test_a_trace_demand_draws_each_row_once_per_pass():
    t = parse_trace(b"input_tokens,output_tokens\n1,10\n2,20\n3,30\n", "t.csv")
    r = Demand(Arrivals.poisson(1.0), trace=t).requests(6, seed=3)
    assert sorted(r.input[:3].tolist()) == [1, 2, 3] and sorted(r.input[3:].tolist()) == [1, 2, 3]
    assert np.array_equal(r.output, r.input * 10)


# --------------------------------------------------------------------------------------------------
# Step models


def test_roofline_by_hand_and_batched():
    s = Roofline(weights=0.01, kv_read=1e-7, flop_token=1e-4, flop_pair=1e-9, host=0.001, per_seq=1e-5)
    # decode of 8 rows at 8,000 KV tokens: memory 0.01 + 8000e-7 = 0.0108 > FLOPs 8e-4 + 8e-6;
    # + host 0.001 + 8 seqs·1e-5 = 0.01188
    assert s(8, 8000, 0, 0, 0) == pytest.approx(0.01188, rel=1e-12)
    # a prefill of 500 tokens (125,250 pairs): FLOPs 0.05 + 1.2525e-4 > memory 0.01; + host + 1 seq
    assert s(0, 0, 500, 125250, 1) == pytest.approx(0.001 + 1e-5 + 0.05 + 125250e-9, rel=1e-12)
    b = Roofline(weights=np.array([0.01, 0.02]), flop_token=np.array([1e-4, 1e-5]))
    out = b(np.array([[1, 200], [1, 200]]), 0, 0, 0, 0)
    assert out.ravel().tolist() == pytest.approx([0.01, 0.02, 0.02, 0.02])


def test_table_is_exact_on_its_grid_multilinear_between_and_batched():
    def model(tokens, decode_context):
        return np.maximum(0.01 + 1e-7 * decode_context, 2e-5 * tokens)

    axes = {"tokens": np.array([1.0, 256, 1024, 4096]), "decode_context": np.array([0.0, 1e5, 1e6])}
    t = Table.sample(model, axes, linear={"seqs": 1e-5})
    for T in axes["tokens"]:
        for C in axes["decode_context"]:
            assert t(T, C, 0, 0, 0) == pytest.approx(float(model(T, C)) + 1e-5 * T, rel=1e-12)
    # between grid points: bilinear in (tokens, context); at (640, 5e4): corners (256|1024) × (0|1e5)
    v = [float(model(a, c)) for a in (256, 1024) for c in (0, 1e5)]
    wt, wc = (640 - 256) / 768, 0.5
    want = (1 - wt) * (1 - wc) * v[0] + (1 - wt) * wc * v[1] + wt * (1 - wc) * v[2] + wt * wc * v[3]
    assert t(640, 5e4, 0, 0, 0) == pytest.approx(want + 640e-5, rel=1e-12)
    # the array path equals the scalar path; past the grid it extrapolates the last segment linearly
    xs = np.array([3.0, 640, 5000])
    assert t(xs, 5e4, 0, 0, 0).tolist() == pytest.approx([t(float(x), 5e4, 0, 0, 0) for x in xs], rel=1e-12)
    # at context 0: 20.48 ms at 1024 tokens, 81.92 ms at 4096; at 8192 the last segment's slope goes on:
    # 81.92 + (81.92 − 20.48)/3072 · 4096 = 163.84 ms
    assert t(8192, 0, 0, 0, 0) - 8192e-5 == pytest.approx(0.16384, rel=1e-9)
    # batched: two configurations' tables, row k priced with table k
    tb = Table(axes, np.stack([t.values, 2 * t.values]))
    out = tb(np.array([[256.0, 1024], [256, 1024]]), 0, 0, 0, 0)
    assert out[1].tolist() == pytest.approx((2 * out[0]).tolist())


# --------------------------------------------------------------------------------------------------
# The engine against the plain reference simulator (tests/simref.py)

STEP = Roofline(weights=0.012, kv_read=2e-7, flop_token=2.5e-5, flop_pair=1e-10, host=0.001, per_seq=1e-5)
MIXED = Demand(Arrivals.poisson(6.0), Length.lognormal(800, cv=0.8, max=4000), Length.lognormal(100, cv=1.0, max=400),
               prefix_hit=0.2)

CASES = {
    "mixed": (MIXED, Engine(max_seqs=32, max_batched_tokens=512), "serve", 300),
    "mixed, KV full: preemption": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, kv_tokens=12000), "serve", 300),
    "mixed, reserve": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, kv_tokens=12000, kv_policy="reserve"),
                       "serve", 300),
    "prefill_first": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, policy="prefill_first"), "serve", 300),
    "prefill_first, KV full": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, kv_tokens=12000,
                                             policy="prefill_first"), "serve", 300),
    "prefill_first, reserve": (MIXED, Engine(max_seqs=16, max_batched_tokens=2048, kv_tokens=12000,
                                             policy="prefill_first", kv_policy="reserve"), "serve", 300),
    "decode worker": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, kv_tokens=12000), "decode", 300),
    "prefill worker": (MIXED, Engine(max_seqs=32, max_batched_tokens=512, kv_tokens=12000), "prefill", 300),
    "closed loop": (Demand(Arrivals.closed(12), Length.fixed(700), Length.uniform(60, 0.5)),
                    Engine(max_seqs=8, max_batched_tokens=256, kv_tokens=6000), "serve", 300),
    "burst": (Demand(Arrivals.burst(40), Length.fixed(700), Length.uniform(60, 0.5)),
              Engine(max_seqs=64, max_batched_tokens=1024, kv_tokens=9000), "serve", 40),
}


@pytest.mark.parametrize("case", list(CASES))
def test_engine_equals_the_step_by_step_reference(case):
    demand, engine, role, n = CASES[case]
    r = demand.requests(n, seed=1)
    fast = run_engine(r.arrival, r.input, r.cached, r.output, engine, STEP, role=role, clients=r.clients)
    admit, first, finish, arrival, preemptions = reference(r.arrival, r.input, r.cached, r.output, engine, STEP,
                                                           role=role, clients=r.clients)
    assert fast.preemptions == preemptions
    for mine, theirs in ((fast.admit, admit), (fast.first, first), (fast.finish, finish), (fast.arrival, arrival)):
        assert np.allclose(mine, theirs, rtol=1e-12, atol=0, equal_nan=True)
    # and so the percentiles the brief asks to agree within 5 % agree to rounding
    ttft, ref_ttft = fast.first - fast.arrival, np.array(first) - np.array(arrival)
    for p in (50, 99):
        assert np.percentile(ttft, p) == pytest.approx(np.percentile(ref_ttft, p), rel=1e-9)
    if "KV full" in case:
        assert preemptions > 0  # the case exercises preemption


def test_jumps_leave_few_python_steps():
    # light load, long outputs: most steps are decode-only stretches advanced at once
    d = Demand(Arrivals.poisson(0.5), Length.fixed(512), Length.fixed(400))
    r = d.requests(200, seed=0)
    run = run_engine(r.arrival, r.input, r.cached, r.output, Engine(max_seqs=16), STEP)
    assert run.steps > 20 * len(run.segments)


# --------------------------------------------------------------------------------------------------
# Queueing theory


def _md1_cdf(x: float, lam: float, D: float) -> float:
    """P(W ≤ x) of the M/D/1 waiting time (Erlang's formula):
    (1 − ρ)·Σ_{k=0}^{⌊x/D⌋} [λ(kD − x)]^k/k! · e^{−λ(kD − x)}."""
    rho = lam * D
    return (1 - rho) * sum((lam * (k * D - x)) ** k / math.factorial(k) * math.exp(-lam * (k * D - x))
                           for k in range(int(x // D) + 1))


def _md1_quantile(p: float, lam: float, D: float) -> float:
    lo, hi = 0.0, 100 * D
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _md1_cdf(mid, lam, D) < p else (lo, mid)
    return hi


def _one_at_a_time(n: int, rate: float, output: np.ndarray, t: float, seed: int):
    """One sequence at a time (max_seqs = 1), a constant step time t, the prompt in one step: a request
    is served in O steps, so the queue is M/G/1 with service O·t."""
    arrival = Arrivals.poisson(rate).times(n, np.random.default_rng(seed))
    ones = np.ones(n, dtype=np.int64)
    run = run_engine(arrival, 100 * ones, 0 * ones, output, Engine(max_seqs=1), Roofline(weights=t))
    return run.admit - arrival, run


def test_one_at_a_time_with_fixed_service_is_md1():
    # O = 1: service D = t = 10 ms; λ = 50/s: ρ = 0.5, mean wait ρ/(2μ(1 − ρ)) = 0.5/(2·100·0.5) = 5 ms
    t, lam, n = 0.01, 50.0, 40_000
    waits = []
    for seed in range(3):
        w, run = _one_at_a_time(n, lam, np.ones(n, dtype=np.int64), t, seed)
        waits.append(w[n // 10:])
        assert np.allclose(run.first - run.admit, t)  # TTFT = wait + the one prefill step
    w = np.concatenate(waits)
    rho = lam * t
    assert w.mean() == pytest.approx(rho / (2 / t * (1 - rho)), rel=0.04)
    # the waiting time's distribution: P(W = 0) = 1 − ρ, and its p90 and p95 from Erlang's formula
    assert np.mean(w == 0) == pytest.approx(1 - rho, abs=0.01)
    for p in (0.9, 0.95):
        assert np.quantile(w, p) == pytest.approx(_md1_quantile(p, lam, t), rel=0.04)


def test_one_at_a_time_is_the_lindley_recursion_of_fcfs():
    # the M/G/1 queue by definition: W_{i+1} = max(0, W_i + S_i − A_{i+1}), service S = O·t; the engine
    # (steps, jumps cut at arrivals) gives the same waits
    t, lam, n = 0.001, 12.0, 4000
    out = np.random.default_rng(7).geometric(0.05, n).astype(np.int64)
    waits, _ = _one_at_a_time(n, lam, out, t, 0)
    arrival = Arrivals.poisson(lam).times(n, np.random.default_rng(0))
    free, lindley = 0.0, np.empty(n)
    for i in range(n):
        start = max(free, arrival[i])
        lindley[i] = start - arrival[i]
        free = start + out[i] * t
    assert np.allclose(waits, lindley, rtol=0, atol=1e-9)


@pytest.mark.slow  # 120,000 requests for a 5 % statistical check; the Lindley test above is its cheap sibling
def test_one_at_a_time_with_geometric_outputs_is_mg1_pollaczek_khinchine():
    # O geometric on {1, 2, …} with p = 0.05: service S = O·t with E[S] = t/p, E[S²] = t²(2 − p)/p²; in the
    # limit t → 0 this is M/M/1. PK: W = λE[S²]/(2(1 − ρ)). With t = 1 ms, λ = 12/s: ρ = 0.24.
    t, p, lam, n = 0.001, 0.05, 12.0, 40_000
    rng = np.random.default_rng(7)
    waits = []
    for seed in range(3):
        out = rng.geometric(p, n).astype(np.int64)
        w, _ = _one_at_a_time(n, lam, out, t, seed)
        waits.append(w[n // 10:])
    es, es2 = t / p, t * t * (2 - p) / p ** 2
    rho = lam * es
    assert np.concatenate(waits).mean() == pytest.approx(lam * es2 / (2 * (1 - rho)), rel=0.05)
    # and the M/M/1 value, ρ/(μ − λ), within the geometric-vs-exponential difference (t/2 per request)
    assert lam * es2 / (2 * (1 - rho)) == pytest.approx(rho / (1 / es - lam), rel=0.03)


def test_burst_prefill_first_kth_request_waits_for_the_prefills_ahead():
    # SGLang's order: 4 prompts of 100 tokens at t = 0, a prefill batch of at most 100 tokens: step k
    # prefills prompt k. Prefill step: max(0.01, 100·2e-4) = 20 ms; decode step of 4 rows:
    # max(0.01, 4·2e-4) = 10 ms. TTFT_k = 20·k ms; then 2 decode steps (O = 3) for all: E2E = 100 ms.
    d = Demand(Arrivals.burst(4), Length.fixed(100), Length.fixed(3))
    run = simulate(d, Engine(max_seqs=8, max_batched_tokens=100, policy="prefill_first"),
                   Roofline(weights=0.01, flop_token=2e-4))
    assert run.ttft.tolist() == pytest.approx([0.02, 0.04, 0.06, 0.08])
    assert run.e2e.tolist() == pytest.approx([0.10] * 4)
    assert run.tpot.tolist() == pytest.approx([(0.10 - 0.02 * k) / 2 for k in (1, 2, 3, 4)])


def test_burst_mixed_chunks_share_steps_by_hand():
    # vLLM's order, budget 100, 3 prompts of 100 at t = 0, O = 2, every step 10 ms:
    # step 1: r0 100 → first token 0.01; step 2: r0 decodes (1) + r1 99 → r0 ends 0.02;
    # step 3: r1 1 + r2 99 → r1 first 0.03; step 4: r1 decodes + r2 1 → r1 ends, r2 first 0.04; step 5: r2 ends.
    d = Demand(Arrivals.burst(3), Length.fixed(100), Length.fixed(2))
    run = simulate(d, Engine(max_seqs=8, max_batched_tokens=100), Roofline(weights=0.01))
    assert run.ttft.tolist() == pytest.approx([0.01, 0.03, 0.04])
    assert run.e2e.tolist() == pytest.approx([0.02, 0.04, 0.05])


def test_littles_law_on_the_outputs():
    d = Demand(Arrivals.poisson(5.0), Length.lognormal(900, cv=0.6, max=4000), Length.lognormal(150, cv=0.8, max=600))
    r = d.requests(3000, seed=5)
    run = run_engine(r.arrival, r.input, r.cached, r.output, Engine(max_seqs=24, max_batched_tokens=1024), STEP)
    w0, w1 = r.arrival[300], r.arrival[2700]
    # L = time-average number in the system over [w0, w1], from every request's [arrival, finish]
    inside = np.clip(np.minimum(run.finish, w1) - np.maximum(r.arrival, w0), 0, None).sum() / (w1 - w0)
    m = (r.arrival >= w0) & (r.arrival <= w1)
    lam = m.sum() / (w1 - w0)
    assert inside == pytest.approx(lam * (run.finish - r.arrival)[m].mean(), rel=0.03)
    # and the engine's own time-average of running requests equals λ × the mean time running
    from ccost.model.simulate.run import _pool
    pool, _, _ = _pool([run], w0, w1)
    assert pool.mean_running == pytest.approx(lam * (run.finish - run.admit)[m].mean(), rel=0.03)


# --------------------------------------------------------------------------------------------------
# Runs and outputs


def test_same_seed_same_arrays():
    d = Demand(Arrivals.gamma(5.0, 1.5), Length.lognormal(800, cv=0.7), Length.uniform(120, 0.5), prefix_hit=0.1)
    e = Engine(max_seqs=32, max_batched_tokens=1024, kv_tokens=40_000)
    a, b = simulate(d, e, STEP, requests=300, seed=4), simulate(d, e, STEP, requests=300, seed=4)
    for f in ("arrival", "ttft", "tpot", "e2e", "queue"):
        assert np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True)
    assert a.summary() == b.summary()
    c = simulate(d, e, STEP, requests=300, seed=5)
    assert not np.array_equal(a.ttft, c.ttft)


def test_run_outputs_percentiles_goodput_and_window():
    d = Demand(Arrivals.poisson(4.0), Length.fixed(1024), Length.fixed(128))
    run = simulate(d, Engine(max_seqs=64, max_batched_tokens=2048), STEP, requests=400, warmup=0.25)
    assert len(run.ttft) == 400 and run.warmup == run.cooldown == 100
    assert run.stats("ttft")["p99"] == pytest.approx(np.percentile(run.ttft, 99))
    assert np.allclose(run.tpot, (run.e2e - run.ttft) / 127)
    slo = Slo(ttft=float(np.percentile(run.ttft, 50)))
    share, rate = run.goodput(slo)
    assert share == pytest.approx(np.mean(run.ttft <= slo.ttft))
    assert rate == pytest.approx(share * run.requests_per_s)
    # throughputs over the window: every request gives 128 output tokens
    assert run.output_tokens_per_s == pytest.approx(128 * run.offered_per_s, rel=0.05)
    assert 0 < run.busy_share <= 1 and run.stable
    s = run.summary(slo)
    assert s["ttft"]["p50"] == slo.ttft and s["goodput_share"] == share


def test_overloaded_run_is_not_stable_and_meets_no_slo():
    d = Demand(Arrivals.poisson(40.0), Length.fixed(1024), Length.fixed(128))
    run = simulate(d, Engine(max_seqs=16, max_batched_tokens=2048), STEP, requests=400)
    assert not run.stable and not run.meets(Slo(tpot=10.0))


def test_output_of_one_token_has_no_tpot_and_meets_any_tpot_limit():
    d = Demand(Arrivals.poisson(1.0), Length.fixed(100), Length.fixed(1))
    run = simulate(d, Engine(), STEP, requests=50)
    assert np.isnan(run.tpot).all() and run.good(Slo(tpot=1e-9)).all()


def test_highest_rate_brackets_a_threshold():
    s = highest_rate(lambda r: r <= 7.3, start=1.0, rel_tol=0.01)
    assert s.rate <= 7.3 < s.above and s.above / s.rate - 1 <= 0.01
    assert highest_rate(lambda r: r <= 0.01, start=4.0).rate <= 0.01
    assert highest_rate(lambda r: False, start=4.0).rate == 0.0
    # out of evaluations before any rate met it: none found, no division by the zero lower bound
    s = highest_rate(lambda r: False, start=4.0, max_evals=3)
    assert (s.rate, s.above, len(s.tried)) == (0.0, 1.0, 3)


def test_sustainable_rate_meets_the_slo_and_the_next_rate_does_not():
    d = Demand(Arrivals.poisson(1.0), Length.fixed(1024), Length.fixed(64))
    e, slo = Engine(max_seqs=32, max_batched_tokens=2048), Slo(ttft=0.5, tpot=0.03)
    s = sustainable_rate(d, e, STEP, slo, requests=200, rel_tol=0.05)
    assert 0 < s.rate < s.above < math.inf
    assert simulate(d.at_rate(s.rate), e, STEP, requests=200).meets(slo)
    assert not simulate(d.at_rate(s.above), e, STEP, requests=200).meets(slo)


# --------------------------------------------------------------------------------------------------
# Disaggregated prefill and decode


def test_disaggregated_one_request_by_hand():
    # prefill of 1000 tokens: max(0.01, 1000·1e-4) = 100 ms; KV moved in 50 ms; every decode step 20 ms.
    # TTFT = 100 + 50 + 20 (the first decode step gives the first token) = 170 ms; 4 tokens: E2E = 230 ms.
    d = Demand(Arrivals.burst(1), Length.fixed(1000), Length.fixed(4))
    run = simulate_disagg(d, Engine(max_batched_tokens=4096), Engine(), Roofline(weights=0.01, flop_token=1e-4),
                          Roofline(weights=0.02), transfer=lambda tokens: 0.05 + 0 * tokens)
    assert run.ttft.tolist() == pytest.approx([0.17])
    assert run.e2e.tolist() == pytest.approx([0.23])
    assert run.tpot.tolist() == pytest.approx([0.02])


def test_disaggregated_pools_are_round_robin_and_fcfs():
    d = Demand(Arrivals.poisson(8.0), Length.lognormal(2000, cv=0.5, max=8000), Length.fixed(200))
    e_p, e_d = Engine(max_seqs=8, max_batched_tokens=4096), Engine(max_seqs=64, max_batched_tokens=4096)
    run = simulate_disagg(d, e_p, e_d, STEP, STEP, prefill_workers=2, decode_workers=3,
                          transfer=lambda tok: 1e-6 * tok, requests=300)
    assert set(run.pools) == {"prefill", "decode"}
    assert run.pools["prefill"].workers == 2 and run.pools["decode"].workers == 3
    assert run.pools["prefill"].mean_decode_rows == 0
    assert np.all(run.ttft > 1e-6 * run.input)  # at least the transfer
    assert run.stable and np.isfinite(run.e2e).all()
    with pytest.raises(DemandError, match="closed loop"):
        simulate_disagg(Demand(Arrivals.closed(4), Length.fixed(5), Length.fixed(5)), e_p, e_d, STEP, STEP)


# --------------------------------------------------------------------------------------------------
# Refusals


def test_engine_refusals_name_the_value():
    with pytest.raises(EngineError, match="below max_seqs"):
        Engine(max_seqs=512, max_batched_tokens=256)
    with pytest.raises(EngineError, match="policy"):
        Engine(policy="lifo")
    d = Demand(Arrivals.poisson(1.0), Length.fixed(5000), Length.fixed(100))
    with pytest.raises(EngineError, match="needs 5,100 tokens of KV cache; the engine holds 4,000"):
        simulate(d, Engine(kv_tokens=4000), STEP, requests=10)


def test_an_engine_that_falls_ever_further_behind_stops_at_its_event_budget_unstable():
    # found by bench/fuzz.py (seed 4035388686): `output_tokens = 256256` at 6 requests/s on an engine that
    # holds a few such requests; the simulation of an online plan ran for minutes (its cost grows with the
    # backlog). Now it stops after MAX_EVENTS_PER_REQUEST scheduling rounds a request: unstable, the
    # unfinished requests' latencies infinite (never dropped: the p99 is inf, not the finished ones' p99)
    from ccost.model.simulate import run as R

    d = Demand(Arrivals.poisson(6.0), Length.fixed(1024), Length.fixed(256_256))
    e = Engine(max_seqs=64, max_batched_tokens=8192, kv_tokens=1_100_000)
    step = Roofline(weights=0.012, kv_read=2e-9, flop_token=2.5e-7)
    r = simulate(d, e, step, requests=200)
    assert not r.stable
    assert math.isinf(r.percentile("e2e", 99)) and math.isinf(r.stats("e2e")["mean"])
    assert r.pools["replica"].steps > 0
    # a run within the budget is the same run whatever the budget (the examples take at most 4 rounds a request)
    small = Demand(Arrivals.poisson(2.0), Length.fixed(512), Length.fixed(64))
    a = simulate(small, Engine(max_seqs=32), step, requests=300)
    old = R.MAX_EVENTS_PER_REQUEST
    try:
        R.MAX_EVENTS_PER_REQUEST = 10**9
        b = simulate(small, Engine(max_seqs=32), step, requests=300)
    finally:
        R.MAX_EVENTS_PER_REQUEST = old
    assert a.stable and np.array_equal(a.e2e, b.e2e) and np.array_equal(a.ttft, b.ttft)
