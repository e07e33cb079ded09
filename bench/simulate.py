"""Speed of the serving simulator and of the analytic screening (docs/simulation.md, "Speed").

    python bench/simulate.py              # simulator, lockstep prototype, 10,000-fleet screening
    python bench/simulate.py --validate   # + the screen against the simulator over a grid of loads
    python bench/simulate.py --numba      # + a jitted event loop's compile and run time (needs numba)
    python bench/simulate.py --parts d    # only (d), the capacity questions end to end

Times are CPU seconds of this process (``time.process_time``), the best of ``--repeat`` runs: on a
shared machine wall time measures the neighbours. The capacity search must price 10,000 candidate
fleets with their tail latencies in ≤ 2 s on one core; the figures below say which of the
three options does that:

(a) the event-jumping simulator (``ccost.model.simulate.simulate``), per simulation;
(b) a lockstep simulator vectorised over many configurations with numpy (a prototype here, for the
    measurement only: fixed lengths, the mixed policy, no KV limit);
(c) the analytic screening (``ccost.model.simulate.screen``), all fleets in one call;
(d) the capacity search end to end (``ccost.capacity``): the specs/sla-*.ccost examples, each evaluated
    whole (check + plan + search, the 2 s budget of one capacity question), and the 70B search widened past 10,000
    candidate fleets — every fleet screened with its tails, the cheapest confirmed by simulation.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "compiler"))
sys.path.insert(0, str(ROOT / "tests"))

from ccost.model.simulate import (  # noqa: E402
    Arrivals,
    Demand,
    Engine,
    Length,
    LengthSample,
    Roofline,
    run_engine,
    screen,
    screen_disagg,
    simulate,
    simulate_disagg,
)

STEP = Roofline(weights=0.012, kv_read=2e-7, flop_token=2.5e-5, flop_pair=1e-10, host=0.001, per_seq=1e-5)
FIELDS = ("weights", "kv_read", "flop_token", "flop_pair", "comm_token", "host", "per_seq")
FIXED = Demand(Arrivals.poisson(4.0), Length.fixed(1024), Length.fixed(256))
LOGN = Demand(Arrivals.poisson(4.0), Length.lognormal(1500, cv=0.8, max=8000), Length.lognormal(200, cv=1.0, max=1500))


def cpu(fn, repeat: int):
    """(best CPU seconds, last result) of ``repeat`` calls."""
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


# --------------------------------------------------------------------------------------------------
# (a) the simulator


def bench_simulator(repeat: int) -> None:
    print("(a) event-jumping simulator, one replica, 2,000 measured requests (+ 200 warm-up, 200 cool-down)")
    e = Engine(max_seqs=64, max_batched_tokens=2048)
    for name, d, rate in (("fixed 1024/256", FIXED, 4.0), ("lognormal", LOGN, 4.0), ("fixed, light load", FIXED, 1.0)):
        t, run = cpu(lambda: simulate(d.at_rate(rate), e, STEP, requests=2000), repeat)
        pool = run.pools["replica"]
        print(f"  {name:18s} λ={rate:4.1f}/s: {t * 1e3:7.1f} ms  = {1 / t:6.1f} simulations/s; "
              f"{pool.steps:,} steps in {t:.3f} s = {pool.steps / t / 1e3:,.0f} k steps/s")
    from simref import reference

    d = LOGN.at_rate(4.0)
    r = d.requests(400, seed=1)
    t_fast, _ = cpu(lambda: run_engine(r.arrival, r.input, r.cached, r.output, e, STEP), repeat)
    t_ref, _ = cpu(lambda: reference(r.arrival, r.input, r.cached, r.output, e, STEP), 1)
    print(f"  same 400 requests: plain step-by-step reference (tests/simref.py) {t_ref:.3f} s, event-jumping "
          f"{t_fast:.3f} s: {t_ref / t_fast:.1f}× faster")
    t, _ = cpu(lambda: simulate_disagg(FIXED.at_rate(8.0), Engine(max_seqs=256, max_batched_tokens=8192),
                                       Engine(max_seqs=128, max_batched_tokens=8192), STEP, STEP,
                                       prefill_workers=1, decode_workers=2, transfer=lambda x: 2e-6 * x,
                                       requests=2000), repeat)
    print(f"  disaggregated 1 prefill + 2 decode workers, 8/s: {t * 1e3:.1f} ms = {1 / t:.1f} simulations/s")
    print(f"  => 10,000 fleets by simulation alone: ~{10_000 * t:,.0f} s (the budget is 2 s)")


# --------------------------------------------------------------------------------------------------
# (b) lockstep: every configuration advanced one engine step per numpy pass


def lockstep(K: int, n: int, rate: np.ndarray, weights: np.ndarray, cap: int, I: int, O: int, B: int, seed=0):
    """K configurations at once, ``n`` requests each, fixed I/O, the mixed policy, no KV limit: one
    numpy pass over (K, n) arrays per engine step of every configuration (each its own clock). Returns
    (TTFT (K, n), passes)."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0, (1, n)), axis=1) / rate[:, None]
    pf = np.full((K, n), float(I))  # prompt tokens left
    out = np.full((K, n), float(O))  # tokens left to produce
    admitted = np.zeros((K, n), dtype=bool)
    first = np.full((K, n), np.nan)
    T = np.zeros(K)
    passes = 0
    while np.isnan(first).any() or (out > 0).any():
        passes += 1
        arrived = arr <= T[:, None]
        running = admitted & (out > 0)
        decoding = running & (pf == 0)
        d = decoding.sum(axis=1)
        # admit FCFS while the cap allows; prompts then share the budget left after the decode rows
        free = cap - running.sum(axis=1)
        waiting = arrived & ~admitted
        rank = np.cumsum(waiting, axis=1)
        admitted |= waiting & (rank <= free[:, None])
        pre = admitted & (pf > 0)
        budget = (B - d)[:, None]
        before = np.cumsum(np.where(pre, pf, 0), axis=1) - np.where(pre, pf, 0)
        chunk = np.where(pre, np.clip(budget - before, 0, pf), 0)
        p = chunk.sum(axis=1)
        idle = (d == 0) & (p == 0)
        nxt = np.where(arr > T[:, None], arr, np.inf).min(axis=1)
        t = np.maximum(weights, 2.5e-5 * (d + p)) + 0.001
        T = np.where(idle, np.where(np.isfinite(nxt), nxt, T), T + t)
        done_pf = pre & (chunk > 0) & (chunk == pf)
        pf = pf - chunk
        out = out - decoding * (~idle)[:, None] - done_pf
        first = np.where(done_pf & np.isnan(first), T[:, None], first)
        if passes > 200_000:
            break
    return first - arr, passes


def bench_lockstep(repeat: int) -> None:
    print("(b) lockstep prototype: K configurations × n requests advanced together, one engine step a pass")
    for K, n in ((100, 300), (400, 300)):
        rate = np.random.default_rng(1).uniform(2, 6, K)
        weights = np.random.default_rng(2).uniform(0.008, 0.016, K)
        t, (ttft, passes) = cpu(lambda: lockstep(K, n, rate, weights, 64, 1024, 64, 2048), 1)
        cell = K * n * passes / t
        print(f"  K={K:5d}, n={n}: {passes:,} passes in {t:.2f} s = {cell / 1e6:,.0f} M request-steps/s "
              f"({K / t:,.1f} configurations/s)")
    need = 10_000 * 2_400 * 9_000
    print(f"  => 10,000 fleets × 2,400 requests × ~9,000 steps (a 2,000-request run at 4/s) = {need:.1e} "
          f"request-steps: ~{need / cell:,.0f} s at the rate above")


# --------------------------------------------------------------------------------------------------
# (c) the analytic screening


def _fleets(K: int, seed: int = 0):
    """K synthetic fleets: a replica's step model (weights time, KV read, FLOP time per token: a spread of
    GPUs and tp), its engine limits, and a replica count; the demand's peak split over the replicas."""
    rng = np.random.default_rng(seed)
    step = Roofline(weights=rng.uniform(0.004, 0.03, K), kv_read=rng.uniform(5e-8, 4e-7, K),
                    flop_token=rng.uniform(5e-6, 5e-5, K), flop_pair=np.full(K, 1e-10),
                    comm_token=rng.uniform(0, 2e-6, K), host=np.full(K, 0.001), per_seq=np.full(K, 1e-5))
    replicas = rng.integers(1, 17, K)
    peak = 20.0
    return (step, rng.choice([32, 64, 128, 256], K), rng.choice([2048, 4096, 8192], K), replicas,
            peak / replicas, 1.0 / replicas)  # round robin: squared CV 1/R


def bench_screen(repeat: int) -> None:
    print("(c) analytic screening: 10,000 synthetic fleets (replica step model, max_seqs, budget, 1–16 "
          "replicas at 20 requests/s), p50/p90/p99 of TTFT, TPOT and E2E for each")
    K = 10_000
    step, cap, B, R, rate, scv = _fleets(K)
    warnings.simplefilter("ignore", RuntimeWarning)
    for name, d in (("fixed 1024/256", FIXED), ("lognormal lengths", LOGN)):
        L = LengthSample.of(d)
        t, sc = cpu(lambda: screen(rate, L, step, max_seqs=cap, max_batched_tokens=B, scv=scv,
                                   percentiles=(50, 90, 99)), repeat)
        print(f"  {name:18s}: {t:.3f} s = {K / t:,.0f} fleets with tails/s; {sc.stable.sum():,} stable")
    L = LengthSample.of(FIXED)
    rng = np.random.default_rng(5)
    P, D = rng.integers(1, 5, K), rng.integers(1, 9, K)
    t, sc = cpu(lambda: screen_disagg(20.0 * np.ones(K), L, step, step, prefill_workers=P, decode_workers=D,
                                      prefill_batched_tokens=B, decode_max_seqs=cap,
                                      transfer=lambda tok: 1e-5 + 2e-6 * tok, percentiles=(50, 90, 99)), repeat)
    print(f"  disaggregated, fixed : {t:.3f} s = {K / t:,.0f} fleets with tails/s; {sc.stable.sum():,} stable")


# --------------------------------------------------------------------------------------------------
# the screen against the simulator


def validate() -> None:
    print("screen ÷ simulator (2,000 measured requests, seed 0), at shares of the screen's capacity")
    cases = (
        ("fixed 1024/256, vLLM order", FIXED, Engine(max_seqs=64, max_batched_tokens=2048)),
        ("4096/512, chunks of 512", Demand(Arrivals.poisson(1), Length.fixed(4096), Length.fixed(512)),
         Engine(max_seqs=128, max_batched_tokens=512)),
        ("lognormal lengths", LOGN, Engine(max_seqs=128, max_batched_tokens=4096)),
        ("prefix hit 0.5, lognormal", Demand(Arrivals.poisson(1), Length.lognormal(3000, cv=0.5, max=16000),
                                             Length.fixed(128), prefix_hit=0.5), Engine(max_seqs=64, max_batched_tokens=2048)),
        ("SGLang order", FIXED, Engine(max_seqs=128, max_batched_tokens=8192, policy="prefill_first")),
        ("KV-bound, reserve", Demand(Arrivals.poisson(1), Length.fixed(2048), Length.fixed(256)),
         Engine(max_seqs=256, max_batched_tokens=4096, kv_tokens=60000, kv_policy="reserve")),
        ("gamma arrivals, CV 2", Demand(Arrivals.gamma(1, 2.0), Length.fixed(1024), Length.fixed(256)),
         Engine(max_seqs=128, max_batched_tokens=4096)),
    )
    warnings.simplefilter("ignore", RuntimeWarning)
    worst: dict[str, float] = {}
    for name, d, e in cases:
        L = LengthSample.of(d)
        grid = np.geomspace(0.05, 200, 300)

        def scr(rates):
            return screen(np.asarray(rates), L, Roofline(**{f: np.full(len(rates), getattr(STEP, f)) for f in FIELDS}),
                          max_seqs=e.max_seqs, max_batched_tokens=e.max_batched_tokens, kv_tokens=e.kv_tokens,
                          scv=d.arrivals.scv, policy=e.policy, kv_policy=e.kv_policy)

        cap = grid[scr(grid).stable].max()
        print(f"  {name} (screen's capacity {cap:.2f}/s)")
        shares = (0.2, 0.5, 0.7, 0.85, 0.95)
        sc = scr([s * cap for s in shares])
        for k, s in enumerate(shares):
            run = simulate(d.at_rate(s * cap), e, STEP, requests=2000)
            ratios = {f"{m} p{p}": float(sc.percentile(m, p)[k]) / run.percentile(m, p)
                      for m in ("ttft", "tpot", "e2e") for p in (50, 99)}
            print(f"    {s:4.0%}: " + "  ".join(f"{k_} {v:5.2f}" for k_, v in ratios.items())
                  + ("" if run.stable else "  (simulator: overloaded)"))
            if s <= 0.7 and d.arrivals.kind == "poisson":
                for k_, v in ratios.items():
                    worst[k_] = max(worst.get(k_, 0.0), abs(v - 1))
    print("  worst |screen/simulator − 1| over Poisson cases at ≤ 70 % load: "
          + ", ".join(f"{k} {v:.0%}" for k, v in worst.items()))


# --------------------------------------------------------------------------------------------------
# numba: a jitted event loop's first call


def bench_numba() -> None:
    t_import = time.perf_counter()
    try:
        import numba
    except ImportError:
        print("numba: not installed here (pip install numba to measure); not measured")
        return

    @numba.njit(cache=False)
    def fcfs(arrival, service):  # one server, FCFS: the smallest event loop there is
        n = arrival.shape[0]
        free = 0.0
        wait = np.empty(n)
        for i in range(n):
            start = max(free, arrival[i])
            wait[i] = start - arrival[i]
            free = start + service[i]
        return wait

    t_imported = time.perf_counter()
    a = np.cumsum(np.random.default_rng(0).exponential(1.0, 100_000))
    s = np.full(100_000, 0.5)
    t0 = time.perf_counter()
    fcfs(a, s)
    t1 = time.perf_counter()
    fcfs(a, s)
    t2 = time.perf_counter()
    print(f"numba {numba.__version__}: import {t_imported - t_import:.2f} s, first call (compile) {t1 - t0:.2f} s "
          f"wall, then {(t2 - t1) * 1e3:.2f} ms for 100,000 events; a loop with the engine's scheduling is larger "
          "and compiles longer")


#: The 70B example's search widened past 10,000 fleets (more engine limits and worker mixes).
WIDE = """
search wide "The 70B question over a wider space" {
  base            = chat_tp4
  tp              = [1, 2, 4, 8]
  pp              = [1, 2]
  max_seqs        = [16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512]
  step_tokens     = [512, 1024, 2048, 4096, 8192, 16384]
  prefill_workers = [0, 1, 2, 3, 4, 5, 6]
  decode_workers  = [1, 2, 3, 4]
  prefill_tp      = [1, 2, 4, 8]
  max_gpus        = 16
}
"""


def _cli_cpu(path: Path) -> float:
    """CPU seconds (user + system) of ``ccost eval PATH --format json`` run as a child process."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "compiler"))
    subprocess.run([sys.executable, "-m", "ccost", "eval", str(path), "--format", "json"], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_capacity(repeat: int) -> None:
    from ccost import check, evaluate

    print("(d) capacity search end to end: CPU s of check + evaluate in this process, and of the whole command "
          "`ccost eval SPEC --format json` in a fresh one (interpreter, imports, output: what a user waits for)")
    import timeit

    ref = min(timeit.repeat("sum(range(10**6))", number=10, repeat=5)) / 10
    print(f"  (this core's speed now: sum(range(10**6)) in {ref * 1e3:.1f} ms, best of 5; the same command's time "
          "scales with it, and on a shared machine it moves from one minute to the next)")
    specs = sorted((ROOT / "specs").glob("sla-*.ccost"))
    for path in specs:
        def run(p=path):
            spec, _ = check.load_spec(str(p))
            return evaluate.evaluate(spec)
        t, res = cpu(run, repeat)
        cli = min(_cli_cpu(path) for _ in range(repeat))
        for name, s in res.searches.items():
            ch = s.get("chosen") or {}
            print(f"  {path.name:28s}: {t:.2f} s, the command {cli:.2f} s; {s['candidates']:,} fleets screened, "
                  f"{s['simulations']} simulated; chosen {ch.get('gpus', '—')} GPUs ({ch.get('mode', 'none')})")
    wide = ROOT / "specs" / "sla-llama70b-h200.ccost"
    if wide.exists():
        from ccost import capacity, check

        text = wide.read_text(encoding="utf-8") + WIDE
        spec, _ = check.check_text(text, str(wide)).spec, None  # the example with the wide search added
        sr = spec.searches["wide"]
        t, doc = cpu(lambda: capacity.run(sr, spec.policy), repeat)
        n = doc["candidates"]
        # the screening alone: every candidate fleet's TTFT/TPOT/E2E at p50 and p99 (what "fleets with their
        # tails" means); the rest of the search is the per-layout rates, the simulations and the document
        st = capacity.settings(sr, spec.policy)
        lengths = capacity.sim.LengthSample.of(capacity.online.demand(sr.base.traffic))
        sp = capacity.space(sr, spec.policy, lengths)
        job = capacity.Job(sr, sp, lengths, st["rate"], sr.base.traffic.burstiness ** 2, st["slo"], (50.0, 99.0),
                           capacity._prompt_per_step(sp.layouts.step, float(max(sp.cols["step_tokens"]))),
                           tuple(capacity.S.vary(sr.base, cluster=c) for c in sp.clusters), spec.policy)
        units = [(a, min(sp.size, a + capacity.CHUNK)) for a in range(0, sp.size, capacity.CHUNK)]
        ts, _ = cpu(lambda: capacity.screen_units(job, units), repeat)
        print(f"  70B widened          : {n:,} candidate fleets; screened with their tails in {ts:.2f} s "
              f"({n / ts:,.0f} fleets/s); the whole search {t:.2f} s ({n / t:,.0f} fleets/s: + each layout's "
              f"highest rate, {doc['simulations']} simulations); chosen {doc['chosen']['gpus']} GPUs "
              f"({doc['chosen']['mode']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--numba", action="store_true")
    ap.add_argument("--parts", default="abcd", help="which of (a)–(d) to run, e.g. `d` (default: all)")
    args = ap.parse_args()
    if hasattr(os, "getloadavg"):  # on a shared machine the CPU times below grow with the load
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for part, fn in (("a", bench_simulator), ("b", bench_lockstep), ("c", bench_screen), ("d", bench_capacity)):
        if part in args.parts:
            fn(args.repeat)
    if args.validate:
        validate()
    if args.numba:
        bench_numba()


if __name__ == "__main__":
    main()
