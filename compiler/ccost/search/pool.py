"""The process pool: how searches run (``execution``, ``--jobs``), the work cut into tasks of equal cost,
and the worker processes that price them beside this one (``_run_pool``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ccost.diagnostics import CcostError, error
from ccost.search.grid import _Job, _layout_fails, _pickling
from ccost.search.pricing import _Acc, _run_units, merge


@dataclass(frozen=True)
class Execution:
    """How searches run: ``jobs`` local processes, or the Dask ``scheduler`` at an address."""

    jobs: int = 1
    scheduler: str | None = None
    auto: bool = False  # jobs is the default (the cores there are), not asked for: small searches stay here


#: The current way of running searches (the CLI sets it with ``execution``).
EXECUTION = Execution()


#: Below this many points a search runs in this process unless ``--jobs`` was given: starting and feeding
#: a worker process costs more than a second core gives back. Measured with this process pricing a share
#: (``_run_pool``), the first search of a fresh ``ccost`` process (the worker's start included), bench (c)
#: at 1–4 context lengths on a quiet two-core machine, medians of three: 1.4 M points ran 1.00x as fast on
#: two processes, 2.1 M 1.06x, 2.8 M 1.14x, 3.5 M 1.16x (and 11 M 1.57x, bench (c)).
POOL_MIN_POINTS = 2_000_000


class execution:
    """``with search.execution(jobs=2): ...`` — run the searches evaluated inside on 2 processes (or on
    a Dask ``scheduler``). ``jobs`` is capped at the cores this process may use (``capped_jobs``) unless
    ``oversubscribe``: more processes than cores only add start-up and memory (``--jobs 2000`` on two cores
    took 59 s and 16 GB instead of 1.3 s)."""

    def __init__(self, jobs: int = 1, scheduler: str | None = None, auto: bool = False,
                 oversubscribe: bool = False):
        self.new = Execution(capped_jobs(jobs, oversubscribe), scheduler or None, auto)

    def __enter__(self):
        global EXECUTION
        self.old, EXECUTION = EXECUTION, self.new
        return self.new

    def __exit__(self, *exc):
        global EXECUTION
        EXECUTION = self.old


def capped_jobs(jobs: int, oversubscribe: bool = False) -> int:
    """``jobs`` processes, at least 1 and, unless ``oversubscribe``, at most the cores available."""
    jobs = max(1, int(jobs))
    return jobs if oversubscribe else min(jobs, default_jobs())


def default_jobs() -> int:
    """The cores this process may run on (``ccost.cores.available``)."""
    from ccost.cores import available

    return available()


#: Tasks per worker, at most: enough that the cores stay busy to the end and the progress bar moves, few
#: enough that each task's setup and pickled reductions stay small against its work.
TASKS_PER_WORKER = 8


#: The least work worth a task of its own, in priced points (a point that passes the layout constraints;
#: one that fails them costs about nothing): about 40 ms at 5 M priced points/s. Each task costs ~1 ms of
#: setup, reductions and merging, and cuts the layout ranges a worker filters and prices at once:
#: measured on bench (a), its 138,320 priced points as 13 tasks took 1.5x the CPU time of 2 tasks.
TASK_MIN_PRICED = 200_000


def tasks(units: list, workers: int) -> list:
    """``units`` split into contiguous tasks of about as many units each (numpy arrays of (pass, first
    layout, end layout) rows), in search order, ``TASKS_PER_WORKER`` per worker when there are enough. Any
    split gives the same reductions; ``balanced_tasks`` is the split a run uses."""
    import numpy as np

    per = max(1, -(-len(units) // max(1, TASKS_PER_WORKER * workers)))
    return [np.asarray(units[i:i + per], dtype=np.int64) for i in range(0, len(units), per)]


#: The work of a priced point of a pass whose AllReduce is ``auto`` against one with a fixed algorithm: it
#: prices every candidate and picks per point (bench (a): 8.8 ms a pass against 4.1–5.3 ms).
AUTO_COST = 2


def _unit_weights(job: _Job, units, grid) -> list:
    """For each unit, the work of each of its layouts: its columns (the points it stands for; twice that
    in an ``auto`` AllReduce pass, ``AUTO_COST``) when it passes the layout constraints, 1 when it does
    not (filtered, never priced)."""
    current: list = []
    for p_i, start, stop in units:
        yield _layout_weights(job, grid, p_i, start, stop, current)


def _layout_weights(job: _Job, grid, p_i: int, start: int, stop: int, current: list):
    """The work of the layouts ``start:stop`` of pass ``p_i`` (see ``_unit_weights``); ``current`` keeps
    the last pass's setup between calls."""
    import numpy as np

    if not current or current[0] != p_i:
        _, plan, st = job.pass_setup(p_i)
        current[:] = [p_i, plan, st, grid.n_columns * (AUTO_COST if plan.allreduce == "auto" else 1)]
    _, plan, st, cost = current
    lvals, _ = grid.layouts(start, stop)
    alive = np.ones(stop - start, dtype=bool)
    for fail in _layout_fails(plan, st, lvals, stop - start).values():
        if fail is not None:
            alive &= ~fail
    return np.where(alive, cost, 1).astype(np.int64)


def _unit_sums(job: _Job, units: list, grid):
    """The work of each unit (the sum of ``_unit_weights``), weighing runs of adjacent units of a pass
    together (up to ``grid.layout_chunk`` layouts, as a worker prices them): a few numpy calls per run,
    not per unit."""
    import numpy as np

    sums = np.empty(len(units), dtype=np.int64)
    current: list = []
    i = 0
    while i < len(units):
        p_i, start, stop = units[i]
        j = i
        while (j + 1 < len(units) and units[j + 1][0] == p_i and units[j + 1][1] == stop
               and units[j + 1][2] - start <= grid.layout_chunk):
            j += 1
            stop = units[j][2]
        w = _layout_weights(job, grid, p_i, start, stop, current)
        sums[i:j + 1] = np.add.reduceat(w, [u[1] - start for u in units[i:j + 1]])
        i = j + 1
    return sums


def balanced_tasks(job: _Job, units: list, workers: int) -> list:
    """``units`` cut into contiguous tasks (numpy arrays of (pass, first layout, end layout) rows, in search
    order) of equal work: a multiple of ``workers`` tasks, one per worker for a search of a few hundred
    thousand priced points, more (up to ``TASKS_PER_WORKER`` each) as each can hold ``TASK_MIN_PRICED``.
    The work of a layout is the points it stands for when it passes the layout constraints (they are
    priced) and next to nothing when it does not; the cuts fall between layouts, inside a unit where
    needed. Weighing reads the layout constraints once more here (a few per cent of a search's time);
    memory stays bounded by the unit (weights are summed per unit, and only the units a cut falls in are
    weighed again, layout by layout)."""
    import numpy as np

    units = [tuple(int(x) for x in u) for u in units]
    grid = job.grid()
    sums = _unit_sums(job, units, grid)
    total = int(sums.sum())
    per_worker = total // max(1, workers)
    k = max(1, min(TASKS_PER_WORKER, per_worker // TASK_MIN_PRICED))
    n_tasks = max(1, workers) * k
    targets = [total * i // n_tasks for i in range(1, n_tasks)]  # cumulative work at each cut
    ends = np.cumsum(sums)
    starts = ends - sums
    # the unit each cut falls in (a cut at a unit's end falls between units), and where in it
    where = np.searchsorted(ends, targets, side="left")
    cuts: dict[int, list[int]] = {}
    for t, u in zip(targets, where):
        cuts.setdefault(int(u), []).append(t)
    heavy = sorted(cuts)
    split_at: dict[int, list[int]] = {}
    for u, w in zip(heavy, _unit_weights(job, [units[u] for u in heavy], grid)):
        acc = starts[u] + np.cumsum(w)
        p_i, start, stop = units[u]
        # the cut goes after the first layout whose running work reaches the target
        split_at[u] = [start + int(np.searchsorted(acc, t, side="left")) + 1 for t in cuts[u]]
    out: list[list[tuple[int, int, int]]] = [[]]
    for u, (p_i, start, stop) in enumerate(units):
        for cut in split_at.get(u, ()):
            cut = min(cut, stop)
            if cut > start:
                out[-1].append((p_i, start, cut))
                start = cut
            out.append([])
        if stop > start:
            out[-1].append((p_i, start, stop))
    return [np.asarray(t, dtype=np.int64) for t in out if t]


_POOL: dict = {}


#: In a worker process: the job of the search it is pricing, by token (``_run_task``).
_WORKER_JOB: dict = {}


_TOKENS = itertools.count()


def _pool(jobs: int):
    """The pool of ``jobs`` − 1 worker processes that price a search with this one (``--jobs N``: N
    processes), started by the first search that needs it and kept for the
    life of this process (the next search, of this spec or another, in ``ccost eval``, a sweep or the
    language server, reuses it; ``shutdown`` at exit). Workers are started with ``fork`` where the
    platform has it and this process runs one thread (no re-import: a fast start, ~5 ms for two); with
    other threads running (a Dask client's, say), which a fork would copy mid-step, from a ``forkserver``
    that has imported the pricing modules; ``spawn`` elsewhere. They get everything they need by argument
    (``_run_task``: a pickled ``_Job`` and the task), so every method works."""
    import multiprocessing as mp
    import threading
    from concurrent.futures import ProcessPoolExecutor

    if jobs not in _POOL:
        methods = mp.get_all_start_methods()
        if "fork" in methods and threading.active_count() == 1:
            ctx = mp.get_context("fork")
        elif "forkserver" in methods:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["numpy", "ccost.search", "ccost.model.lower", "ccost.model.analysis"])
        else:
            ctx = mp.get_context("spawn")
        if not _POOL:
            import atexit

            atexit.register(shutdown)
        _POOL[jobs] = ProcessPoolExecutor(max(1, jobs - 1), mp_context=ctx)
    return _POOL[jobs]


def pool_running(jobs: int) -> bool:
    """Whether a pool of ``jobs`` workers is already running in this process (a search then pays no
    start-up)."""
    return jobs in _POOL


def shutdown() -> None:
    """Stop the worker pools of this process (at exit; the next search that needs one starts it again)."""
    while _POOL:
        _, pool = _POOL.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def _run_task(token: int, blob: bytes, part) -> "_Acc":
    """A worker's task: the chunks ``part`` of the search pickled in ``blob``. The job is unpickled once per
    worker per search (``token``), however many tasks of it the worker gets; only the last one is kept."""
    job = _WORKER_JOB.get(token)
    if job is None:
        import pickle

        _WORKER_JOB.clear()
        job = _WORKER_JOB[token] = pickle.loads(blob)
    return _run_units(job, part)


#: Tasks a worker holds at once: the one it prices and the next, so that it never waits for this process
#: (busy with a task of its own) to hand it more.
WORKER_DEPTH = 2


def _run_pool(job: _Job, units: list, jobs: int, progress) -> _Acc:
    """The chunks priced by ``jobs`` processes, merged in search order: this one and a pool of ``jobs`` − 1
    workers. The tasks (``balanced_tasks``: of equal work, a multiple of ``jobs``) wait in one queue; the
    workers take theirs from its front, ``WORKER_DEPTH`` at a time, and this process its own from the back,
    so nobody waits while work is left (a search of one task per process: each prices one, and this one
    starts at once, with no job to unpickle). The job is pickled once here, not once per task."""
    import pickle
    from collections import deque
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    _pickling()
    parts = balanced_tasks(job, units, jobs)
    blob = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    token = next(_TOKENS)
    pool = _pool(jobs)
    workers = max(1, jobs - 1)
    queue = deque(range(len(parts)))
    results: list = [None] * len(parts)
    running: dict = {}
    total = job.search.size
    done = 0

    def feed() -> None:
        while len(queue) > 1 and len(running) < WORKER_DEPTH * workers:  # the last one is this process's
            i = queue.popleft()
            running[pool.submit(_run_task, token, blob, parts[i])] = i

    def collect(futures) -> None:
        nonlocal done
        for fut in futures:
            results[running.pop(fut)] = acc = fut.result()
            done += acc.done
            if progress is not None:
                progress(done, total)

    try:
        feed()
        while queue or running:
            if queue:
                i, base = queue.pop(), done
                mine = None if progress is None else (lambda d, t, base=base: progress(base + d, total))
                results[i] = acc = _run_units(job, parts[i], mine)
                done += acc.done
                collect([f for f in list(running) if f.done()])
            else:
                collect(wait(list(running), return_when=FIRST_COMPLETED)[0])
            feed()
    except BrokenProcessPool:
        broken = _POOL.pop(jobs, None)
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)
        raise CcostError(error("E513", f"search `{job.search.name}`: a worker process died", job.search.span,
                               "run again with fewer `--jobs` (or `--jobs 1`); a worker killed for memory "
                               "needs a smaller search or more memory")) from None
    except BaseException:
        for fut in running:
            fut.cancel()
        raise
    return merge(job, results)
