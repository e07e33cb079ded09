"""Benchmark of ``ccost.search``: whole layout spaces priced as numpy arrays.

    .venv/bin/python bench/search.py [--repeat 3] [--sample 2000]

Three searches (specs beside this file, std library models):

(a) ``search-llama405b-decode.ccost``: Llama-3.1-405B decode on 128 nodes × 8 H100, every power-of-two
    tp, pp, dp (1..1024), batch (1..4096) and micro-batch count (1..128), every AllReduce algorithm.
(b) ``search-deepseek-v3-train.ccost``: DeepSeek-V3 training on 256 nodes × 8 H100, every power-of-two
    ep (1..256), tp, pp, dp (1..2048), batch 1..64, five micro-batch counts, FSDP on and off.
(c) ``search-llama405b-decode-contexts.ccost``: (a) at 16 context lengths (11 M points): (a) and (b) take
    tens of milliseconds, less than sharing them between processes costs; (c) shows the two-process ratio.

For each: points, wall time (best of ``--repeat`` runs, and the first run, after numpy and the modules are
imported), points per second (and priced points per second: the issue-16 goal is 2 M on one core), peak memory (``tracemalloc`` during one more run: numpy reports its
buffers to it; and the process's max RSS), and the ratio against a Python loop over the same points, one at
a time, in the same run. The loop is *timed on a uniform random sample* of the points and extrapolated to
all of them (timing 10⁶ points one by one would take many minutes); it does what the search does per
point: ``dataclasses.replace`` the base plan, ``check.plan.evaluation_errors`` (rejects points that are not plans),
then ``lower.prepare`` + ``phases.lower`` + ``phases.analyse`` and the constraints. Most points of
a full space are not plans (too many GPUs, more stages than layers) and the loop rejects those cheaply, so
the loop is also timed on a sample of priced points only (extrapolated to the priced count and compared
with the search's whole wall time: the conservative ratio). The same search on two processes
(``run_search(..., jobs=2)``, what ``--jobs 2`` does) is timed too, its document checked equal, and its
rate printed as a ratio to one process, twice: *cold* (the worker pool shut down before each run, so the
run starts it: what the first search of a ``ccost eval`` pays) and *warm* (the pool kept from the run
before: the next searches of the process), each at the best and at the median runs, every run's time
listed, with the load average before each bench: on a machine shared with other work, the two-process
figures say how much of a second core was free, and (a) and (b) (tens of milliseconds) need a quiet
machine to show what two cores give. A second, smaller
sample times ``evaluate.evaluate_plan`` (which also builds the checklist and document), for reference.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = (
    ("(a) Llama-3.1-405B decode, 128 nodes x 8 H100", HERE / "search-llama405b-decode.ccost"),
    ("(b) DeepSeek-V3 training, 256 nodes x 8 H100", HERE / "search-deepseek-v3-train.ccost"),
    ("(c) (a) at 16 context lengths, for the two-process ratio", HERE / "search-llama405b-decode-contexts.ccost"),
)


def _point(s, i: int) -> dict:
    """Layout of point ``i`` in search order (static axes outermost), as ``ccost.search`` numbers them."""
    from ccost import search

    static = [f for f, _ in s.axes if f in search.STATIC_AXES or f in search.FLEET_AXES]
    arrays = [f for f, _ in s.axes if f in search.ARRAY_AXES]
    axes = dict(s.axes)
    shape = [len(axes[f]) for f in arrays]
    per_pass = 1
    for n in shape:
        per_pass *= n
    return search._decode(s, i, static, arrays, shape, per_pass)


def loop_one(s, policy, st, layout: dict) -> tuple | None:
    """One point the slow way: a Plan, checked, lowered and analysed on floats, constraints applied."""
    from ccost.model import lower, phases
    from ccost.check.plan import evaluation_errors

    plan = dataclasses.replace(s.base, **layout)
    model = plan.model
    if plan.gpus > st.max_gpus or plan.pp > model.layers or evaluation_errors(plan):
        return None
    prog = phases.lower(*lower.prepare(plan, policy))
    m = phases.analyse(prog)
    c = prog.compute
    ok = (not st.fits_memory or c.memory.total <= c.memory.limit) and \
        (st.max_overhead is None or m.overhead <= st.max_overhead) and \
        (st.min_efficiency is None or m.efficiency >= st.min_efficiency)
    return (m.latency, m.throughput_gpu) if ok else None


def bench(label: str, path: Path, repeat: int, sample: int, sample_full: int) -> dict:
    from ccost import evaluate, search
    from ccost.check import load_spec
    from ccost.check.plan import evaluation_errors

    spec, _ = load_spec(str(path))
    (s,) = spec.searches.values()
    policy = spec.policy
    total = s.size

    t0 = time.perf_counter()
    doc = search.run_search(s, policy)
    cold = time.perf_counter() - t0
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        doc2 = search.run_search(s, policy)
        walls.append(time.perf_counter() - t0)
        assert doc2 == doc  # deterministic
    wall = min(walls)
    median = sorted(walls)[len(walls) // 2]

    # Two processes (--jobs 2): this one and a pool of one worker share the chunks, merged in search order.
    # Cold: the pool shut down before each run, so the run starts it (what the first search of a `ccost eval`
    # pays); warm: the pool kept from the run before (the next searches of the process). Equal documents.
    colds2 = []
    for _ in range(repeat):
        search.shutdown()
        t0 = time.perf_counter()
        doc2 = search.run_search(s, policy, jobs=2)
        colds2.append(time.perf_counter() - t0)
        assert doc2 == doc
    walls2 = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        doc2 = search.run_search(s, policy, jobs=2)
        walls2.append(time.perf_counter() - t0)
        assert doc2 == doc
    wall2 = min(walls2)
    cpu1, cpu2 = _cpu_split(s, policy)

    tracemalloc.start()
    search.run_search(s, policy)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # The loop, on a uniform sample of the same points.
    rng = random.Random(7)
    idx = [rng.randrange(total) for _ in range(sample)]
    layouts = [_point(s, i) for i in idx]
    st = search.settings(s, policy)
    t0 = time.perf_counter()
    kept = sum(loop_one(s, policy, st, lay) is not None for lay in layouts)
    loop_per_point = (time.perf_counter() - t0) / sample
    # The same loop on priced points only (those that are plans): the conservative ratio, since the
    # search's wall time also covers rejecting every other point.
    priced_layouts = []
    while len(priced_layouts) < sample:
        lay = _point(s, rng.randrange(total))
        plan = dataclasses.replace(s.base, **lay)
        if plan.gpus <= st.max_gpus and plan.pp <= plan.model.layers and not evaluation_errors(plan):
            priced_layouts.append(lay)
    t0 = time.perf_counter()
    for lay in priced_layouts:
        loop_one(s, policy, st, lay)
    priced_per_point = (time.perf_counter() - t0) / sample
    full_layouts = layouts[:sample_full]
    t0 = time.perf_counter()
    n_full = 0
    for lay in full_layouts:
        plan = dataclasses.replace(s.base, **lay)
        if plan.gpus <= st.max_gpus and plan.pp <= plan.model.layers and not evaluation_errors(plan):
            evaluate.evaluate_plan(plan, policy)
        n_full += 1
    full_per_point = (time.perf_counter() - t0) / max(1, n_full)

    return {
        "label": label, "spec": str(path.relative_to(HERE.parent)), "points": total, "priced": doc["priced"],
        "feasible": doc["feasible"], "cold_s": cold, "wall_s": wall, "walls": walls, "median_s": median,
        "points_per_s": total / wall, "priced_per_s": doc["priced"] / wall, "peak_bytes": peak,
        "priced_per_s_median": doc["priced"] / median,
        "wall2_s": wall2, "walls2": walls2, "points_per_s2": total / wall2, "jobs_ratio": wall / wall2,
        "colds2": colds2, "jobs_ratio_median": median / _median(walls2),
        "cold_ratio": wall / min(colds2), "cold_ratio_median": median / _median(colds2),
        "cpu1_s": cpu1, "cpu2": cpu2,
        "loop_per_point_s": loop_per_point, "loop_sample": sample, "loop_sample_kept": kept,
        "loop_total_s": loop_per_point * total, "ratio": loop_per_point * total / wall,
        "priced_loop_per_point_s": priced_per_point,
        "priced_ratio": priced_per_point * doc["priced"] / wall,
        "full_per_point_s": full_per_point, "full_sample": n_full,
        "full_ratio": full_per_point * total / wall,
        "top": doc["top"][0] if doc["top"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="warm runs to time (best and median are reported)")
    ap.add_argument("--sample", type=int, default=2000, help="points timed in the Python loop")
    ap.add_argument("--sample-full", type=int, default=300, help="points timed with evaluate_plan")
    args = ap.parse_args(argv)
    import os

    # the two-process ratio needs two idle cores: say how busy the machine was
    print(f"cores available {search_cores()}; load average at start {os.getloadavg()[0]:.2f}\n")
    for label, path in BENCHES:
        load = os.getloadavg()[0]
        r = bench(label, path, args.repeat, args.sample, args.sample_full)
        print(r["label"] + f"   (load average before it {load:.2f})")
        print(f"  spec                {r['spec']}")
        print(f"  points              {r['points']:,}  (priced: {r['priced']:,} pass the layout constraints; "
              f"feasible: {r['feasible']:,})")
        print(f"  wall time           {r['wall_s']:.3f} s  (best of {len(r['walls'])} warm runs: "
              + ", ".join(f"{w:.3f}" for w in r["walls"]) + f"; first run {r['cold_s']:.3f} s)")
        print(f"  points per second   {r['points_per_s']:,.0f}  (priced points per second {r['priced_per_s']:,.0f}; "
              f"at the median warm run {r['priced_per_s_median']:,.0f})")
        print(f"  two processes, warm {r['wall2_s']:.3f} s  (--jobs 2, pool kept from the run before; best of "
              f"{len(r['walls2'])}: " + ", ".join(f"{w:.3f}" for w in r["walls2"]) + f"); {r['points_per_s2']:,.0f} "
              f"points/s; {r['jobs_ratio']:.2f}× one process at the best runs, {r['jobs_ratio_median']:.2f}× at the "
              "medians (same document)")
        print(f"  two processes, cold {min(r['colds2']):.3f} s  (pool shut down before each run, so its start is "
              "included: " + ", ".join(f"{w:.3f}" for w in r["colds2"]) + f"); {r['cold_ratio']:.2f}× one process at "
              f"the best runs, {r['cold_ratio_median']:.2f}× at the medians")
        busiest = max(r["cpu2"].values())
        print(f"  CPU time            one process {r['cpu1_s']:.3f} s; two processes "
              + " + ".join(f"{v:.3f} ({k})" for k, v in r["cpu2"].items())
              + f" s (split overhead {sum(r['cpu2'].values()) / r['cpu1_s'] - 1:+.0%}); on two idle cores "
              f"the busier process bounds the wall: about {r['cpu1_s'] / busiest:.2f}× one process")
        print(f"  peak memory         {r['peak_bytes'] / 2**20:.1f} MiB traced (tracemalloc, numpy buffers "
              "included)")
        print(f"  Python loop         {r['loop_per_point_s'] * 1e6:.1f} µs per point (timed on a random sample of "
              f"{r['loop_sample']:,} points, {r['loop_sample_kept']} feasible), extrapolated to "
              f"{r['loop_total_s']:.1f} s for all points")
        print(f"  speed-up vs loop    {r['ratio']:.0f}× (two processes: {r['ratio'] * r['jobs_ratio']:.0f}× warm, "
              f"{r['ratio'] * r['cold_ratio']:.0f}× cold, at the best runs)")
        print(f"  loop, priced only   {r['priced_loop_per_point_s'] * 1e6:.1f} µs per priced point (another sample "
              f"of {r['loop_sample']:,}), extrapolated to the {r['priced']:,} priced points: "
              f"{r['priced_ratio']:.0f}× the search's whole wall time")
        print(f"  evaluate_plan loop  {r['full_per_point_s'] * 1e6:.1f} µs per point (sample of {r['full_sample']}),"
              f" {r['full_ratio']:.0f}× slower than the search")
        if r["top"]:
            from ccost import units

            t = r["top"]
            print("  best layout         " + ", ".join(f"{k}={str(t[k]).lower()}" for k in dict(_axes_of(path)))
                  + f" on {t['gpus']:,} GPUs: {t['throughput_per_gpu']:.1f} tokens/s/GPU, "
                  f"latency {units.format_quantity(t['latency_s'], units.TIME)} (pipelined step "
                  f"{units.format_quantity(t['step_time_s'], units.TIME)})")
        print()
    print(f"load average at the end {os.getloadavg()[0]:.2f} (above 0 before the bench: other work shared "
          "the cores, and the two-process ratio understates what two idle cores give)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"process max RSS {rss / 1024:.0f} MiB (interpreter, numpy and both benches)")
    return 0


def _median(xs):
    return sorted(xs)[len(xs) // 2]


def _timed_units(job, part):
    """A worker's task, with the CPU time it took (``time.process_time``: this worker's CPU only, not
    the time it waited for a core other processes held)."""
    import os

    from ccost import search

    t0 = time.process_time()
    acc = search._run_units(job, part)
    return os.getpid(), time.process_time() - t0, acc


def _cpu_split(s, policy) -> tuple[float, dict]:
    """CPU seconds of one process pricing every chunk, and of each of the two processes of ``run_search(jobs=2)``
    pricing the same tasks (``balanced_tasks``): this process takes them from the back of the queue and its one
    worker from the front, so with tasks of equal work each gets half (best of three each)."""
    from ccost import search

    job = search._job(s, policy, search.CHUNK)
    units = job.units()
    one = []
    for _ in range(3):
        t0 = time.process_time()
        search._run_units(job, units)
        one.append(time.process_time() - t0)
    pool = search._pool(2)
    parts = search.balanced_tasks(job, units, 2)
    theirs, mine = parts[:len(parts) // 2], parts[len(parts) // 2:]
    best: dict | None = None
    for _ in range(3):
        futures = [pool.submit(_timed_units, job, part) for part in theirs]
        t0 = time.process_time()
        for part in mine:
            search._run_units(job, part)
        per = {"this process": time.process_time() - t0, "the worker": sum(f.result()[1] for f in futures)}
        if best is None or sum(per.values()) < sum(best.values()):
            best = per
    assert best is not None
    return min(one), best


def search_cores() -> int:
    from ccost.search import default_jobs

    return default_jobs()


def _axes_of(path: Path):
    from ccost.check import load_spec

    spec, _ = load_spec(str(path))
    (s,) = spec.searches.values()
    return s.axes


if __name__ == "__main__":
    sys.exit(main())
