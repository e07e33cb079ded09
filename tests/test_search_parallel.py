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


def test_progress_reports_every_point_with_jobs():
    spec = _spec(CASES["decode"])
    s = spec.searches["s"]
    seen = []
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
