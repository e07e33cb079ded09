"""The analytic screening (``ccost.model.simulate.screen``, docs/simulation.md "Screening") against the simulator
over a grid of loads, its limits by hand, and its vectorisation. The simulator is the reference here:
it is checked against queueing theory and a step-by-step reference in tests/test_simulate.py."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ccost.model.simulate import (
    Arrivals,
    Demand,
    Engine,
    Length,
    LengthSample,
    Roofline,
    Slo,
    screen,
    screen_disagg,
    screen_rate,
    simulate,
    simulate_disagg,
)

STEP = Roofline(weights=0.012, kv_read=2e-7, flop_token=2.5e-5, flop_pair=1e-10, host=0.001, per_seq=1e-5)
FIELDS = ("weights", "kv_read", "flop_token", "flop_pair", "comm_token", "host", "per_seq")

# Where the screen is validated (docs/simulation.md): Poisson arrivals, up to 70 % of the rate at which
# the screen finds the replica overloaded. p50 within 10 %, p99 within 25 % of the simulator's.
P50_TOL, P99_TOL = 0.10, 0.25


def _batched(step: Roofline, K: int) -> Roofline:
    return Roofline(**{f: np.full(K, getattr(step, f)) for f in FIELDS})


def _screen(d: Demand, e: Engine, rates):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return screen(np.asarray(rates, dtype=float), LengthSample.of(d), _batched(STEP, len(rates)),
                      max_seqs=e.max_seqs, max_batched_tokens=e.max_batched_tokens, kv_tokens=e.kv_tokens,
                      scv=d.arrivals.scv, policy=e.policy, kv_policy=e.kv_policy)


def _capacity(d: Demand, e: Engine) -> float:
    rates = np.geomspace(0.05, 200, 200)
    return float(rates[_screen(d, e, rates).stable].max())


def _agree(sc, k, run, metrics=("ttft", "tpot", "e2e")):
    for m in metrics:
        for p, tol in ((50, P50_TOL), (99, P99_TOL)):
            mine, sim = float(sc.percentile(m, p)[k]), run.percentile(m, p)
            assert mine == pytest.approx(sim, rel=tol), f"{m} p{p}: screen {mine:.4f} s, simulator {sim:.4f} s"


CASES = {
    "fixed 1024/256, vLLM order": (Demand(Arrivals.poisson(1), Length.fixed(1024), Length.fixed(256)),
                                    Engine(max_seqs=64, max_batched_tokens=2048)),
    "lognormal lengths, prefix hits": (Demand(Arrivals.poisson(1), Length.lognormal(3000, cv=0.5, max=16000),
                                              Length.lognormal(150, cv=0.8, max=800), prefix_hit=0.5),
                                       Engine(max_seqs=64, max_batched_tokens=2048)),
    "SGLang order": (Demand(Arrivals.poisson(1), Length.fixed(1024), Length.fixed(256)),
                     Engine(max_seqs=128, max_batched_tokens=8192, policy="prefill_first")),
    "long prompts, small chunks": (Demand(Arrivals.poisson(1), Length.fixed(4096), Length.fixed(512)),
                                   Engine(max_seqs=128, max_batched_tokens=512)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_screen_agrees_with_the_simulator_below_70_percent_load(case):
    d, e = CASES[case]
    cap = _capacity(d, e)
    rates = [0.3 * cap, 0.65 * cap]
    sc = _screen(d, e, rates)
    for k, r in enumerate(rates):
        run = simulate(d.at_rate(r), e, STEP, requests=1500, seed=2)
        assert sc.stable[k] and run.stable
        _agree(sc, k, run)


def test_screen_finds_overload_where_the_simulator_does():
    d, e = CASES["fixed 1024/256, vLLM order"]
    cap = _capacity(d, e)
    sc = _screen(d, e, [1.3 * cap])
    assert not sc.stable[0] and np.isinf(sc.percentile("ttft", 99)[0])
    assert not simulate(d.at_rate(1.3 * cap), e, STEP, requests=1500).stable


def test_screen_at_a_vanishing_rate_is_one_request_alone():
    # λ → 0: no queue, no other request. TTFT = the prompt's own step (no decode rows): for 1024 tokens,
    # host 1 ms + 1 seq·10 µs + max(12 ms, 1024·25 µs + 524,800 pairs·0.1 ns) = 1.01 ms + 25.65248 ms;
    # TPOT = a decode step of one row at mean context 1024 + 256/2: 1.01 ms + max(12 + 1152·2e-4, ...) ms
    d, e = CASES["fixed 1024/256, vLLM order"]
    sc = _screen(d, e, [1e-6])
    ttft = 0.001 + 1e-5 + 1024 * 2.5e-5 + 1024 * 1025 / 2 * 1e-10
    tpot = 0.001 + 1e-5 + 0.012 + 1152 * 2e-7
    assert sc.percentile("ttft", 50)[0] == pytest.approx(ttft, rel=1e-3)
    assert sc.percentile("ttft", 99)[0] == pytest.approx(ttft, rel=1e-3)
    assert sc.percentile("tpot", 50)[0] == pytest.approx(tpot, rel=1e-3)


def test_batched_screen_equals_one_configuration_at_a_time():
    d = Demand(Arrivals.poisson(1), Length.lognormal(1200, cv=0.7, max=6000), Length.fixed(200))
    L = LengthSample.of(d)
    K = 3
    step = Roofline(weights=np.array([0.01, 0.02, 0.015]), kv_read=np.full(K, 2e-7),
                    flop_token=np.array([2e-5, 3e-5, 1e-5]), host=np.full(K, 1e-3))
    rates = np.array([2.0, 4.0, 6.0])
    caps, budgets = np.array([32, 64, 128]), np.array([1024, 2048, 4096])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # the E2E length points are cut by one work key for all (given, not the batch's median)
        all3 = screen(rates, L, step, max_seqs=caps, max_batched_tokens=budgets, prompt_per_step=500.0)
        for k in range(K):
            one = Roofline(**{f: np.broadcast_to(getattr(step, f), (K,))[k:k + 1] for f in FIELDS})
            sk = screen(rates[k:k + 1], L, one, max_seqs=caps[k], max_batched_tokens=budgets[k], prompt_per_step=500.0)
            for m in ("ttft", "tpot", "e2e"):
                for key in ("mean", "p50", "p99"):
                    assert getattr(sk, m)[key][0] == pytest.approx(getattr(all3, m)[key][k], rel=1e-9)


def test_a_small_budget_beside_a_large_one_does_not_change_the_large_ones_figures():
    """A 64-token budget cuts a 6,000-token prompt into ~94 chunks, more than MAX_CHUNKS, so its positions
    are sampled; that sampling is the configuration's own. (It was the batch's: the 8,192-token budget's
    single chunk was weighted as 94/64 chunks, and in the Llama-3.1-70B capacity search a 512-token
    step_tokens beside 8,192 made every 8,192-token fleet unstable.)"""
    d = Demand(Arrivals.poisson(1), Length.lognormal(1200, cv=0.7, max=6000), Length.fixed(200))
    L = LengthSample.of(d)
    step = Roofline(weights=np.full(2, 0.01), kv_read=np.full(2, 2e-7), flop_token=np.full(2, 2e-5),
                    host=np.full(2, 1e-3))
    rates, caps, budgets = np.array([1.0, 1.0]), np.array([64, 64]), np.array([64, 8192])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        both = screen(rates, L, step, max_seqs=caps, max_batched_tokens=budgets, prompt_per_step=500.0)
        for k in range(2):
            one = Roofline(**{f: np.broadcast_to(getattr(step, f), (2,))[k:k + 1] for f in FIELDS})
            sk = screen(rates[k:k + 1], L, one, max_seqs=caps[k], max_batched_tokens=budgets[k],
                        prompt_per_step=500.0)
            assert bool(sk.stable[0]) == bool(both.stable[k])
            for m in ("ttft", "tpot", "e2e"):
                for key in ("mean", "p50", "p99"):
                    assert getattr(sk, m)[key][0] == pytest.approx(getattr(both, m)[key][k], rel=1e-9, nan_ok=True)


def test_screen_rate_is_where_the_screen_stops_meeting_the_slo():
    d, e = CASES["fixed 1024/256, vLLM order"]
    slo = Slo(ttft=0.2, tpot=0.025)
    r = screen_rate(lambda rates: _screen(d, e, rates).meets(slo), np.array([0.1]), np.array([100.0]))[0]
    below, above = _screen(d, e, [r * 0.999, r * 1.01]).meets(slo)
    assert below and not above


def test_disaggregated_screen_by_hand_and_against_the_simulator():
    # one request alone: prefill 1000 tokens = max(10 ms, 1000·0.1 ms) = 100 ms, KV moved in 50 ms, a
    # decode step 20 ms: TTFT = 170 ms (the hand case of simulate_disagg), TPOT = 20 ms
    d = Demand(Arrivals.poisson(1), Length.fixed(1000), Length.fixed(4))
    sp, sd = Roofline(weights=np.array([0.01]), flop_token=np.array([1e-4])), Roofline(weights=np.array([0.02]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sc = screen_disagg(np.array([1e-6]), LengthSample.of(d), sp, sd, prefill_workers=1, decode_workers=1,
                           prefill_batched_tokens=4096, decode_max_seqs=64, transfer=lambda tok: 0.05 + 0 * tok)
    assert sc.percentile("ttft", 50)[0] == pytest.approx(0.17, rel=1e-3)
    assert sc.percentile("tpot", 99)[0] == pytest.approx(0.02, rel=1e-3)
    # a loaded fleet: 1 prefill and 2 decode workers at 60 % of the screen's capacity
    d = Demand(Arrivals.poisson(1), Length.fixed(1024), Length.fixed(256))
    sp, sd = (Roofline(weights=0.012, flop_token=2.5e-5, flop_pair=1e-10, host=0.001, per_seq=1e-5),
              Roofline(weights=0.012, kv_read=2e-7, flop_token=2.5e-5, host=0.001, per_seq=1e-5))
    L = LengthSample.of(d)

    def scr(rates):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return screen_disagg(np.asarray(rates), L, _batched(sp, len(rates)), _batched(sd, len(rates)),
                                 prefill_workers=1, decode_workers=2, prefill_batched_tokens=8192,
                                 decode_max_seqs=128, transfer=lambda tok: 2e-6 * tok)

    grid = np.geomspace(0.1, 100, 200)
    r = 0.6 * grid[scr(grid).stable].max()
    run = simulate_disagg(d.at_rate(r), Engine(max_seqs=256, max_batched_tokens=8192),
                          Engine(max_seqs=128, max_batched_tokens=8192), sp, sd, prefill_workers=1,
                          decode_workers=2, transfer=lambda tok: 2e-6 * tok, requests=1500)
    _agree(scr([r]), 0, run)
