"""A search on several processes (`--jobs N`) or a Dask cluster (`--scheduler`) gives the document a
run in one process gives, bit for bit (issue 16): the chunks are the same, each worker folds its own into
a top list, a Pareto front and counts, and those merge into the reductions of all the points."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest
from ccost import cli, search

from test_search import DECODE, TRAIN, _spec
from test_search_fleet import FLEET

ROOT = Path(__file__).resolve().parent.parent
FLEET_SPEC = str(ROOT / "specs" / "search-fleet.ccost")
CASES = {"decode": DECODE.replace("OBJECTIVE", "throughput_per_gpu"), "train": TRAIN,
         "fleet": FLEET.replace("OBJECTIVE", "latency")}


def _dump(doc: dict) -> str:
    # JSON with float.hex would be stricter still; repr round-trips a double exactly, so equal text is
    # equal bits
    return json.dumps(doc, sort_keys=True, default=repr)


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_processes_give_the_one_process_document(case):
    spec = _spec(CASES[case])
    s = next(iter(spec.searches.values()))
    # chunks of 37 points: dozens of tasks, points of one pass split across both workers
    one = search.run_search(s, spec.policy, chunk=37, jobs=1)
    two = search.run_search(s, spec.policy, chunk=37, jobs=2)
    assert one["feasible"] > 0 and len(one["pareto"]) > 1
    assert _dump(two) == _dump(one)
    # and the chunking itself changes nothing (the default chunk is one task here)
    assert _dump(search.run_search(s, spec.policy)) == _dump(one)


def test_merge_is_the_reductions_of_all_points_whatever_the_split():
    spec = _spec(CASES["fleet"])
    s = spec.searches["fleet"]
    job = search._job(s, spec.policy, 11)
    units = job.units()
    whole = job.document(search._run_units(job, units))
    # uneven, out-of-order parts: the merge re-selects from the parts' reductions
    parts = [units[5:40], units[:5], units[40:41], units[41:]]
    merged = job.document(search.merge(job, [search._run_units(job, p) for p in parts]))
    assert _dump(merged) == _dump(whole)


# slow (~1 s: spawns worker processes from a fresh interpreter): run by CI; the two-process tests stay in the
# inner loop
@pytest.mark.slow
def test_workers_are_spawn_safe():
    # what a worker gets (the job and a task) pickles and runs in a fresh interpreter (`spawn`, the
    # start method of macOS and Windows), not only in a forked copy of this process
    spec = _spec(CASES["decode"])
    s = spec.searches["s"]
    job = search._job(s, spec.policy, 200)
    tasks = search.tasks(job.units(), 2)
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        accs = list(pool.map(search._run_units, [job] * len(tasks), tasks))
    assert _dump(job.document(search.merge(job, accs))) == _dump(search.run_search(s, spec.policy))


def test_progress_reports_every_point_with_jobs(monkeypatch):
    spec = _spec(CASES["decode"])
    s = spec.searches["s"]
    seen = []
    # a search this small is one task per worker; with tasks of any size it is TASKS_PER_WORKER per worker,
    # and the bar moves as each finishes
    monkeypatch.setattr(search, "TASK_MIN_PRICED", 1)
    search.run_search(s, spec.policy, chunk=50, jobs=2, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (s.size, s.size) and len(seen) > 3
    assert all(a[0] < b[0] for a, b in zip(seen, seen[1:]))  # done only goes up


def _eval(capsys, *args):
    code = cli.main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_jobs_gives_the_same_json(capsys):
    code1, one, _ = _eval(capsys, FLEET_SPEC, "--format", "json", "--jobs", "1")
    code2, two, _ = _eval(capsys, FLEET_SPEC, "--format", "json", "--jobs", "2")
    assert code1 == code2 == 0 and one == two
    doc = json.loads(one)["searches"]["fleet"]
    # 3 models × 3 clusters × 4 tp × 4 pp × 4 dp × 11 batch × 7 microbatches × 3 seq × 5 algorithms
    assert doc["points"] == 3 * 3 * 4 * 4 * 4 * 11 * 7 * 3 * 5 == 665_280


def test_cli_jobs_must_be_a_positive_count(capsys):
    code, out, err = _eval(capsys, FLEET_SPEC, "--jobs", "0")
    assert code == 2 and "--jobs takes at least 1 process" in err and not out


def test_the_default_jobs_keep_a_small_search_here_and_an_explicit_jobs_shares_it(monkeypatch):
    # the default (--jobs not given: the cores there are) shares only searches of POOL_MIN_POINTS or more;
    # sharing a search of tens of milliseconds costs more than a second core gives back
    spec = _spec(CASES["decode"])
    s = next(iter(spec.searches.values()))
    assert s.size < search.POOL_MIN_POINTS
    pooled = []
    real = search._run_pool
    monkeypatch.setattr(search, "_run_pool", lambda *a: pooled.append(1) or real(*a))
    with search.execution(jobs=2, auto=True):
        auto = search.run_search(s, spec.policy, chunk=37)
    assert pooled == []
    with search.execution(jobs=2):
        asked = search.run_search(s, spec.policy, chunk=37)
    assert pooled == [1] and _dump(asked) == _dump(auto)
    monkeypatch.setattr(search, "POOL_MIN_POINTS", s.size)  # a search as large as the threshold is shared
    with search.execution(jobs=2, auto=True):
        search.run_search(s, spec.policy, chunk=37)
    assert pooled == [1, 1]


def _weights(job, task):
    """The work of a task as ``balanced_tasks`` counts it, counted here layout by layout: the columns of
    each layout that passes the layout constraints (twice that in an `auto` AllReduce pass, which prices
    every algorithm), 1 for each that does not."""
    import dataclasses

    grid = job.grid()
    total = 0
    for p_i, start, stop in task:
        _, plan, st = job.pass_setup(int(p_i))
        lvals, _ = grid.layouts(int(start), int(stop))
        for i in range(int(stop) - int(start)):
            layout = {f: int(v[i]) for f, v in lvals.items()}
            lp = dataclasses.replace(plan, **layout)
            m, c = lp.model, lp.cluster
            ok = lp.gpus <= st.max_gpus and lp.pp <= m.layers \
                and (c.inter_node is not None or lp.gpus <= c.domain) \
                and (not st.tp_in_domain or lp.tp <= c.domain) \
                and (not st.tp_divides_kv_heads or (m.kv_heads or m.heads) % lp.tp == 0) \
                and (not st.pp_divides_layers or m.layers % lp.pp == 0)
            total += grid.n_columns * (2 if plan.allreduce == "auto" else 1) if ok else 1
    return total


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("workers", [2, 3])
def test_balanced_tasks_cover_the_search_in_order_with_equal_work(monkeypatch, case, workers):
    spec = _spec(CASES[case])
    s = next(iter(spec.searches.values()))
    job = search._job(s, spec.policy, 37)
    units = job.units()
    for least, per in ((10**9, 1), (1, search.TASKS_PER_WORKER)):
        monkeypatch.setattr(search, "TASK_MIN_PRICED", least)
        parts = search.balanced_tasks(job, units, workers)
        assert len(parts) == workers * per
        # every layout of every pass once, in search order: the rows joined end to end are the units'
        rows = [tuple(int(x) for x in r) for p in parts for r in p]
        flat = [(p, i) for p, a, b in rows for i in range(a, b)]
        assert flat == [(p, i) for p, a, b in units for i in range(a, b)]
        work = [_weights(job, p) for p in parts]
        # the work counted is the priced points (auto passes twice) plus one per layout that is not priced
        layouts = sum(b - a for _, a, b in units)
        priced = auto = 0
        for p_i in range(len(units) and units[-1][0] + 1):
            acc = search._run_units(job, [u for u in units if u[0] == p_i])
            priced += acc.priced
            auto += acc.priced if job.pass_setup(p_i)[1].allreduce == "auto" else 0
        assert sum(work) == priced + auto + layouts - priced // job.grid().n_columns
        # equal work: cut between layouts, so no task is off by more than one layout's weight
        ideal = sum(work) / len(parts)
        assert max(abs(w - ideal) for w in work) <= 2 * job.grid().n_columns
        assert _dump(job.document(search.merge(job, [search._run_units(job, p) for p in parts]))) == \
            _dump(search.run_search(s, spec.policy))


def test_a_worker_unpickles_the_job_once_per_search(monkeypatch):
    import pickle

    spec = _spec(CASES["decode"])
    s = spec.searches["s"]
    job = search._job(s, spec.policy, 37)
    blob = pickle.dumps(job)
    loads = []
    real = pickle.loads
    monkeypatch.setattr(pickle, "loads", lambda b: loads.append(1) or real(b))
    monkeypatch.setattr(search, "_WORKER_JOB", {})
    parts = search.tasks(job.units(), 2)
    accs = [search._run_task(7, blob, p) for p in parts]
    assert len(loads) == 1 and len(parts) > 1
    search._run_task(8, blob, parts[0])  # another search: decoded again, the last one dropped
    assert len(loads) == 2 and list(search._WORKER_JOB) == [8]
    assert _dump(job.document(search.merge(job, accs))) == _dump(search.run_search(s, spec.policy))


def test_the_pool_is_kept_between_searches_and_shut_down():
    spec = _spec(CASES["decode"])
    s = spec.searches["s"]
    search.shutdown()
    assert not search.pool_running(2)
    one = search.run_search(s, spec.policy, chunk=37, jobs=2)
    pool = search._pool(2)
    assert search.pool_running(2)
    assert _dump(search.run_search(s, spec.policy, chunk=37, jobs=2)) == _dump(one)
    assert search._pool(2) is pool  # the same worker processes
    search.shutdown()
    assert not search.pool_running(2)
    assert _dump(search.run_search(s, spec.policy, chunk=37, jobs=2)) == _dump(one)  # started again


# --------------------------------------------------------------------------------------------------
# --jobs is capped at the cores there are, unless --oversubscribe (issue 31, item 7: `--jobs 2000` on two
# cores started 2,000 workers, 59 s and 16 GB instead of 1.3 s)

def _execution(monkeypatch, capsys, *argv):
    import argparse

    from ccost.commands import runopts

    monkeypatch.setattr("ccost.cores.available", lambda: 2)
    parser = argparse.ArgumentParser()
    runopts.add_arguments(parser)
    ctx = runopts.execution(parser.parse_args(list(argv)))
    return ctx.new, capsys.readouterr().err


def test_jobs_beyond_the_cores_are_capped_and_said(monkeypatch, capsys):
    ex, err = _execution(monkeypatch, capsys, "--jobs", "2000")
    assert ex.jobs == 2 and not ex.auto
    assert "--jobs 2000 is more than the 2 cores" in err and "--oversubscribe" in err


def test_oversubscribe_starts_what_jobs_says(monkeypatch, capsys):
    ex, err = _execution(monkeypatch, capsys, "--jobs", "6", "--oversubscribe")
    assert ex.jobs == 6 and err == ""


def test_jobs_within_the_cores_and_the_default_are_unchanged(monkeypatch, capsys):
    assert _execution(monkeypatch, capsys, "--jobs", "2") == (search.Execution(2, None, False), "")
    assert _execution(monkeypatch, capsys) == (search.Execution(2, None, True), "")


def test_the_cli_runs_at_most_the_cores_it_has(monkeypatch, capsys):
    monkeypatch.setattr("ccost.cores.available", lambda: 2)
    seen = []
    real = search._run_pool
    monkeypatch.setattr(search, "_run_pool", lambda job, units, jobs, progress: seen.append(jobs)
                        or real(job, units, jobs, progress))
    code, out, err = _eval(capsys, FLEET_SPEC, "--format", "json", "--jobs", "2000")
    assert code == 0 and seen == [2], (seen, err)
