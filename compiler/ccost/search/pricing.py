"""Pricing a search: chunks of points through the cost model on numpy arrays, the priced constraints, and
the running reductions (top, Pareto fronts, the best point each constraint removed) that two runs merge
(``_run_units``, ``_price_chunk``, ``_Acc``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ccost import axes as PA
from ccost import spec as S
from ccost.collectives import ALGORITHMS  # the AllReduce algorithms a point can end up with (auto: one each)
from ccost.check.plan import evaluation_errors
from ccost.check.search import ARRAY_AXES, FLEET_AXES
from ccost.check.search import combo_label as _combo_label
from ccost.diagnostics import CcostError, Diagnostics, error
from ccost.schema import phase_kind, targeted
from ccost.search.grid import (
    CONSTRAINTS,
    DEADLINE_RULE,
    MB_RULE,
    N_LAYOUT,
    _coalesce,
    _fleet_of,
    _global_batch,
    _Job,
    _layout_fails,
    _PRE_PRICING,
    _whole_microbatches,
)


@dataclass
class _Best:
    """Running reductions over the chunks: a small table of kept points (column arrays)."""

    cols: dict | None = None

    def merge(self, new: dict, select) -> None:
        import numpy as np

        if self.cols is None:
            merged = new
        else:
            merged = {k: np.concatenate([self.cols[k], new[k]]) for k in new}
        sel = select(merged)
        self.cols = {k: v[sel] for k, v in merged.items()}

    def merge_rows(self, keys: dict, rows, take, select) -> None:
        """``merge`` of the points ``rows`` of a chunk whose columns ``take(rows)`` gives: the selection
        reads only ``keys`` (the columns ``select`` sorts by, at every point of the chunk), and only the
        points it keeps are gathered, so the result is the one ``merge`` gives with every column."""
        import numpy as np

        prefilter = getattr(select, "prefilter", None)
        if prefilter is not None:  # the rows that can make the selection, found from the objective alone
            rows = prefilter(keys, rows)
        # only the columns the selection reads (``reads``, when it says) are gathered at every row
        new = {k: keys[k][rows] for k in getattr(select, "reads", keys)}
        n_old = 0 if self.cols is None else len(self.cols["index"])
        merged = new if self.cols is None else {k: np.concatenate([self.cols[k], new[k]]) for k in new}
        sel = np.asarray(select(merged))
        old = sel < n_old
        if self.cols is not None and old.all():  # none of the chunk's points made it: nothing to gather
            self.cols = {k: v[sel] for k, v in self.cols.items()}
            return
        fresh = take(rows[sel[~old] - n_old])
        if self.cols is None:
            self.cols = fresh
            return
        perm = np.empty(sel.size, dtype=np.intp)
        perm[old] = sel[old]
        perm[~old] = n_old + np.arange(sel.size - int(np.count_nonzero(old)))
        self.cols = {k: np.concatenate([self.cols[k], fresh[k]])[perm] for k in self.cols}


def _objective_order(cols: dict, objective: str):
    """Indices of ``cols`` sorted best first by the objective, ties broken by the other measures and
    finally by search order (``np.lexsort`` sorts by its last key first)."""
    import numpy as np

    lat, thr, gpus, idx = cols["latency_s"], cols["throughput_per_gpu"], cols["gpus"], cols["index"]
    if objective == "latency":
        keys = (idx, gpus, -thr, lat)
    elif objective == "throughput_per_gpu":
        keys = (idx, gpus, lat, -thr)
    elif objective == "cost_per_token":  # the cheapest per million tokens; ties: the fewer GPUs, the faster
        keys = (idx, lat, gpus, cols["cost_per_mtok_usd"])
    elif objective == "time_to_train":  # the soonest trained; ties: the cheaper, the fewer GPUs
        keys = (idx, gpus, cols["train_cost_usd"], cols["time_to_train_s"])
    elif objective == "train_cost":  # the cheapest run; ties: the sooner, the fewer GPUs
        keys = (idx, gpus, cols["time_to_train_s"], cols["train_cost_usd"])
    else:
        keys = (idx, -thr, lat, gpus)
    return np.lexsort(keys)


def _order_reads(objective: str) -> tuple[str, ...]:
    """The columns ``_objective_order`` and ``_primary`` read for ``objective`` (a selection's ``reads``)."""
    extra = {"cost_per_token": ("cost_per_mtok_usd",), "time_to_train": ("train_cost_usd", "time_to_train_s"),
             "train_cost": ("time_to_train_s", "train_cost_usd")}
    return ("index", "latency_s", "throughput_per_gpu", "gpus") + extra.get(objective, ())


def _primary(cols: dict, objective: str):
    """The objective as a number to minimise."""
    if objective == "latency":
        return cols["latency_s"]
    if objective == "throughput_per_gpu":
        return -cols["throughput_per_gpu"]
    if objective == "cost_per_token":
        return cols["cost_per_mtok_usd"]
    if objective == "time_to_train":
        return cols["time_to_train_s"]
    if objective == "train_cost":
        return cols["train_cost_usd"]
    return cols["gpus"]


def pareto_mask(lat, thr, idx):
    """The points no other point dominates (latency ≤ and throughput per GPU ≥, one of them strictly);
    of points with identical numbers only the first in search order is kept. Returns the indices of the
    front, fastest first."""
    import numpy as np

    order = np.lexsort((idx, -thr, lat))
    t = thr[order]
    # A point survives when its throughput beats every point before it in (latency, -throughput) order.
    prev_best = np.maximum.accumulate(np.concatenate([[-np.inf], t[:-1]]))
    return order[t > prev_best]


#: The measures that make a point's answer, as the Pareto front reads them (plus the cost): two points equal
#: in all of them are the same answer — a layout that differs only in a value with no effect (the
#: AllReduce algorithm at tp = 1), or more replicas of the same layout (dp in serving). The top list shows
#: each answer once, at its first point in the objective's order (the fewest GPUs, then search order).
RESULT_KEYS = ("latency_s", "throughput_per_gpu", "cost_per_mtok_usd", "time_to_train_s")


#: What a reader of the top list is told when ``distinct`` (the text output and the review).
DISTINCT_NOTE = "each answer once: a layout with the same numbers as one above is left out"


def _first_of_each_result(cols: dict, order):
    """The positions in ``order`` (indices of ``cols``, best first) whose results (``RESULT_KEYS``, bit for
    bit) no earlier position has."""
    import numpy as np

    sig = np.ascontiguousarray(np.stack([np.asarray(cols[k], dtype=float)[order] for k in RESULT_KEYS], axis=1))
    rows = sig.view(np.dtype((np.void, sig.dtype.itemsize * sig.shape[1]))).ravel()  # one bit pattern a row
    _, first = np.unique(rows, return_index=True)  # the first position of each pattern
    return np.sort(first)


def _top_select(objective: str, top: int, distinct: bool = True):
    """The best ``top`` points by the objective, ties broken by the other measures and then by search order;
    points with the same results as a better-ranked one (``RESULT_KEYS``: layouts that differ only in a value
    with no effect, or in replicas) are left out, so the list holds ``top`` different answers, each at the
    first point that gives it in the objective's order. The selection of a union is the selection of its
    parts' selections (a part keeps its best ``top`` different results, each at its first point), so any
    split of a search gives the same list. ``distinct`` false (the search's ``distinct = false``): every
    point, repeats included."""
    def select(cols: dict):
        import numpy as np

        n = len(cols["index"])
        prim = _primary(cols, objective)
        k = top
        while True:
            if n <= k:
                cand = np.arange(n)
            else:
                kth = np.partition(prim, k - 1)[k - 1]
                cand = np.nonzero(prim <= kth)[0]  # the best `k` values and every tie with the last of them
            order = cand[_objective_order({key: v[cand] for key, v in cols.items()}, objective)]
            if not distinct:
                return order[:top]
            firsts = _first_of_each_result(cols, order)
            if firsts.size >= top or cand.size == n:
                return order[firsts[:top]]
            k *= 2  # some were repeats of a better one: look further down

    def prefilter(keys: dict, rows):
        """Of a chunk's points ``rows``, those whose objective is at most the ``top``-th best among them:
        without repeats left out (not ``distinct``), the best ``top`` of any union with them are among those
        (every other one has ``top`` better points in the chunk alone), so ``merge_rows`` gathers only those.
        Every row when one of them is NaN: the bound holds among numbers only (``select`` ranks none of the
        points when fewer than ``top`` have one)."""
        import numpy as np

        if rows.size <= top:
            return rows
        prim = _primary(keys, objective)[rows]
        if np.isnan(prim).any():
            return rows
        return rows[prim <= np.partition(prim, top - 1)[top - 1]]

    # the columns it reads: a chunk's points are gathered only in these before it selects (``merge_rows``)
    select.reads = tuple(dict.fromkeys(_order_reads(objective) + (RESULT_KEYS if distinct else ())))
    if not distinct:
        select.prefilter = prefilter
    return select


def _pareto_select(cols: dict):
    return pareto_mask(cols["latency_s"], cols["throughput_per_gpu"], cols["index"])


_pareto_select.reads = ("latency_s", "throughput_per_gpu", "index")  # type: ignore[attr-defined]


def _target_pareto_select(cols: dict):
    """The front of a training target's time to train against its cost (``target_cost``: the run's cost,
    or its GPU-days when a searched cluster is not priced, ``_Job.target_by``): both down."""
    return pareto_mask(cols["time_to_train_s"], -cols["target_cost"], cols["index"])


_target_pareto_select.reads = ("time_to_train_s", "target_cost", "index")  # type: ignore[attr-defined]


@dataclass
class _Acc:
    """The reductions of some chunks of a search: counts per constraint, the top, the Pareto front, the
    best point each priced constraint removed. Two of them merge into the reductions of both."""

    total: int
    objective: str
    top_n: int
    distinct: bool = True
    done: int = 0
    priced: int = 0
    tested: dict | None = None
    failed: dict | None = None
    removed: dict | None = None
    top: _Best | None = None
    front: _Best | None = None
    tfront: _Best | None = None  # a training target's time to train against cost (or GPU-days)
    best_fleet: dict | None = None  # a training target's best point of each fleet combination (label → _Best)
    best_removed: dict | None = None
    mem_limit: set | None = None

    def __post_init__(self):
        names = [c for c, _ in CONSTRAINTS]
        self.tested = self.tested or dict.fromkeys(names, 0)
        self.failed = self.failed or dict.fromkeys(names, 0)
        self.removed = self.removed or dict.fromkeys(names, 0)
        self.top = self.top or _Best()
        self.front = self.front or _Best()
        self.tfront = self.tfront or _Best()
        self.best_fleet = self.best_fleet if self.best_fleet is not None else {}
        self.best_removed = self.best_removed or {k: _Best() for k in names}
        self.mem_limit = self.mem_limit if self.mem_limit is not None else set()

    def merge(self, other: "_Acc") -> None:
        """Fold ``other`` in: counts add; the kept points are re-selected from both (the top and the
        front of a union are the top and the front of the parts' tops and fronts, and every selection
        is ordered by the objective and then the search order, so the result does not depend on how the
        chunks were split)."""
        select = _top_select(self.objective, self.top_n, self.distinct)
        self.done += other.done
        self.priced += other.priced
        for d, o in ((self.tested, other.tested), (self.failed, other.failed), (self.removed, other.removed)):
            for k, v in o.items():
                d[k] += v
        if other.top.cols is not None:
            self.top.merge(other.top.cols, select)
        if other.front.cols is not None:
            self.front.merge(other.front.cols, _pareto_select)
        if other.tfront.cols is not None:
            self.tfront.merge(other.tfront.cols, _target_pareto_select)
        for label, b in other.best_fleet.items():
            if b.cols is not None:
                self.best_fleet.setdefault(label, _Best()).merge(b.cols, _top_select(self.objective, 1, False))
        best = _top_select(self.objective, 1, False)
        for k, b in other.best_removed.items():
            if b.cols is not None:
                self.best_removed[k].merge(b.cols, best)
        self.mem_limit |= other.mem_limit


def _run_units(job: _Job, units, progress: Callable[[int, int], None] | None = None) -> _Acc:
    """Price the chunks ``units`` ((pass, first layout, end layout) rows, in search order; see
    ``_Job.units``) of ``job``: the reductions of those chunks. A local run gives it every chunk; a worker
    (process or Dask) some of them."""
    import numpy as np

    from ccost.model import economics, lower, phases

    search, policy = job.search, job.policy
    base = search.base
    assert base is not None
    per_pass = job.per_pass
    acc = _Acc(search.size, search.objective, search.top, search.distinct)
    tested, failed, removed = acc.tested, acc.failed, acc.removed
    names = [c for c, _ in CONSTRAINTS]
    priced_checks = [k for k in names[N_LAYOUT:] if k not in _PRE_PRICING]  # the constraints that judge a priced point
    top_select = _top_select(search.objective, search.top, search.distinct)
    best_select = _top_select(search.objective, 1, False)  # a constraint's best removed point: only it is read
    total = search.size

    def count(key: str, fail, alive, weight: int = 1):
        """Tally one constraint over the points still alive (or all, for `failed`) and mask them.
        ``weight``: the points each entry stands for (a layout stands for every column of it)."""
        if fail is None:
            return alive
        tested[key] += fail.size * weight
        failed[key] += int(np.count_nonzero(fail)) * weight
        removed[key] += int(np.count_nonzero(fail & alive)) * weight
        return alive & ~fail

    grid = job.grid()
    whole_block = grid.col_block == grid.n_columns  # every column in one block: filtered once a pass
    current = None  # (pass index, its plan, settings, pricing, [static, x0] once prepared, fixed, columns)
    for p_i, start, stop in _coalesce(units, grid.layout_chunk):
        if current is None or current[0] != p_i:
            fixed, plan, st = job.pass_setup(p_i)
            cols = _pass_columns(grid, plan, 0, grid.n_columns) if whole_block else None
            current = [p_i, plan, st, economics.pricing(plan.cluster), None, fixed, cols]
        _, plan, st, pr, prepared, fixed, cols = current
        n = stop - start
        lvals, row_off = grid.layouts(start, stop)
        # Layout constraints need no pricing and read only tp, pp, ep, dp: tested once per layout (each
        # stands for every combination of the other axes), and only the layouts that pass them are
        # priced (compressed arrays, not a Python loop).
        layout_fails = _layout_fails(plan, st, lvals, n)
        alive = np.ones(n, dtype=bool)
        for k in names[:N_LAYOUT]:
            alive = count(k, layout_fails[k], alive, grid.n_columns)
        keep = np.nonzero(alive)[0]
        if keep.size and prepared is None:
            prepared = current[4] = _prepare_pass(search, policy, plan, fixed, lvals, keep[0])
        blocks = grid.blocks(keep.size, None if cols is None else cols[1].shape[1])
        for b_i, (r0, r1, c0, c1) in enumerate(blocks):
            rows = keep[r0:r1]
            cvals, col_off, bad = cols if cols is not None else _pass_columns(grid, plan, c0, c1)
            # more micro-batches than sequences is not a plan (E401): those columns are never priced
            if bad is not None:
                tested[MB_RULE] += rows.size * (c1 - c0)
                failed[MB_RULE] += bad * rows.size
                removed[MB_RULE] += bad * rows.size
                if not col_off.size:
                    continue
            # The block as layouts × columns, or columns × layouts when it has more layouts than columns:
            # numpy's inner loop then runs along the longer side (bench (b), 1,224 layouts × 16 columns:
            # 8 % less time in the cost model). Each point is the same operation on the same operands
            # either way, and the reductions order points by their index, not their place in the block.
            index = p_i * per_pass + row_off[rows][:, None] + col_off
            if rows.size > col_off.shape[1]:
                vals = {f: v[rows][None, :] for f, v in lvals.items()}
                vals.update({f: v.T for f, v in cvals.items()})
                index = index.T
            else:
                vals = {f: v[rows][:, None] for f, v in lvals.items()}
                vals.update(cvals)
            static, x0 = prepared
            # a global batch (a training target's): each layout's batch is global batch / (dp·ep), and the
            # points where that is no whole number of sequences, or fewer than the micro-batches, go
            alive = _global_batch(plan, vals, index.shape, count)
            if alive is not None and not alive.any():
                continue
            acc.priced += index.size
            fleet = {f: v for f, v in fixed.items() if f in FLEET_AXES}
            fleet_best = (acc.best_fleet.setdefault(_combo_label(fleet), _Best())
                          if fleet and targeted(plan) else None)
            _price_chunk(lower, phases, static, x0, plan, vals, index, st, count, priced_checks, acc.top,
                         acc.front, top_select, acc.best_removed, acc.mem_limit, pr, best_select, alive,
                         acc.tfront, fleet_best)
            if progress is not None and b_i + 1 < len(blocks):
                progress(acc.done + n * grid.n_columns * (b_i + 1) // len(blocks), total)
        acc.done += n * grid.n_columns
        if progress is not None:
            progress(acc.done, total)
    return acc


def _pass_columns(grid, plan: S.Plan, c0: int, c1: int):
    """Columns ``c0:c1`` of a pass without those that give a micro-batch no sequence (more micro-batches
    than sequences is not a plan, E401: never priced): (field → row vector, flat-index offsets, the
    columns dropped; None when the rule does not apply to them, ``_whole_microbatches``)."""
    import numpy as np

    cvals, col_off = grid.columns(c0, c1)
    whole = _whole_microbatches(plan, cvals)
    if whole is None:
        return cvals, col_off, None
    bad = int(np.count_nonzero(~whole))
    if bad:
        cvals = {f: v[:, whole] for f, v in cvals.items()}
        col_off = col_off[:, whole]
    return cvals, col_off, bad


def _prepare_pass(search: S.Search, policy: S.Policy, plan: S.Plan, fixed: Mapping[str, Any], vals, first):
    """``lower.prepare`` of one pass's plan. In a fleet search the base plan's own layout may not fit
    another model or cluster (more GPUs, more stages than layers): the layout of the pass's first point
    that passed the layout constraints stands in (its numbers are replaced by the arrays anyway)."""
    from ccost.model import lower

    def prepared(p: S.Plan):
        Diagnostics(evaluation_errors(p)).raise_if_errors()  # the model takes an evaluable plan
        return _optional_axes(search, lower.prepare(p, policy))

    try:
        return prepared(plan)
    except CcostError as exc:
        if not _fleet_of(search):
            raise
        degrees = {f: int(v[first]) for f, v in vals.items() if f in PA.NAMES}
        try:
            return prepared(replace(plan, **degrees))
        except CcostError:
            raise CcostError(error(
                "E404", f"search `{search.name}`: the combination {_combo_label(fixed)} cannot be evaluated: "
                + "; ".join(d.message for d in exc.diagnostics if d.is_error),
                search.span, "drop that value from its axis, or fix the block it names")) from None


def _optional_axes(search: S.Search, prepared):
    """An optional axis (``axes.OPTIONAL``: priced only above 1) that the search varies is priced at every
    point: its flag in ``lower.Static`` is on (a degree of 1 then costs nothing: a group of one rank)."""
    static, x0 = prepared
    varied = {f for f, v in search.axes if f in PA.OPTIONAL and any(d > 1 for d in v)
              and PA.BY_NAME[f].applies(static.phase)}
    return (replace(static, **dict.fromkeys(varied, True)), x0) if varied else prepared


def merge(job: _Job, results: list) -> _Acc:
    """The reductions of the tasks, folded in search order into one."""
    acc = _Acc(job.search.size, job.search.objective, job.search.top, job.search.distinct)
    for r in results:
        acc.merge(r)
    return acc


#: glibc ``mallopt`` parameters: keep this much freed memory at the top of the heap, and serve blocks below
#: this size from the heap rather than fresh ``mmap`` pages (see ``_keep_freed_memory``).
_M_TOP_PAD, _M_MMAP_THRESHOLD = -2, -3


_HEAP_PAD = 64 << 20


_MMAP_THRESHOLD = 32 << 20


_malloc_tuned = False


def _keep_freed_memory() -> None:
    """Ask glibc's allocator to keep freed memory for reuse instead of returning it to the system.

    Pricing a block allocates and frees a few hundred arrays of up to ``CHUNK`` doubles (256 KiB). By
    default glibc hands such blocks back (``munmap``, or trimming the heap's top) as soon as they are
    freed, and every block's arrays then page-fault fresh zeroed pages: measured on both search benches,
    that is 35–40 % of the search's time. ``M_TOP_PAD`` = 64 MiB keeps that much freed heap mapped, and a
    fixed ``M_MMAP_THRESHOLD`` of 32 MiB serves the arrays from the heap. The process keeps at most
    64 MiB it is not using; the search's own memory stays bounded by the chunk. Once per process; a no-op
    on other C libraries (``mallopt`` is glibc's)."""
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TOP_PAD, _HEAP_PAD)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    except (OSError, AttributeError):  # pragma: no cover - an unusual libc: keep its defaults
        pass


def _price_chunk(lower, phases, static, x0, plan, vals, index, st, count, checks, top, front, top_select,
                 best_removed, mem_limit, pr=None, best_select=None, alive0=None, tfront=None, fleet_best=None):
    """Price the points of one block that passed the layout constraints (``vals``: field → array, arrays
    that broadcast to ``index``'s shape: layouts × columns or its transpose, see ``_Grid``; ``index``: each
    point's number in search order), apply the priced constraints (keeping, per constraint, the best point
    it removed, so the output can say what it cost) and fold the survivors into the running top and Pareto
    front.
    ``alive0``: the points (flat) that passed the constraints tested before pricing (``_global_batch``);
    ``tfront``: the running front of a training target's time to train against its cost."""
    import numpy as np

    _keep_freed_memory()
    shape = index.shape
    n = index.size
    index = index.reshape(n)
    inputs = {}
    feeds = phase_kind(plan.phase).seq_feeds  # seq: the context (ctx) and, but in decode, the step's tokens (S)
    for f, v in vals.items():
        if f == "seq":
            inputs.update(dict.fromkeys(feeds, v))
        else:
            inputs[ARRAY_AXES[f]] = v
    prog = phases.lower(static, lower.with_arrays(x0, **inputs))
    m = phases.analyse(prog)
    c = prog.compute

    def full(a):
        """``a`` (a layout's, a column's or a point's value) at every point of the block, flat."""
        a = np.asarray(a, dtype=float)
        if a.shape == (n,):  # already flat (computed from flat columns)
            return a
        return np.broadcast_to(a, shape).reshape(n)

    def test(fail):
        """A constraint's failures, computed on the sub-grid its operands span, at every point, flat."""
        return np.broadcast_to(fail, shape).reshape(n)

    # latency: one step through every stage in turn (what a user waits); step: the pipelined step time
    mem, limit = np.asarray(c.memory.total, dtype=float), np.asarray(c.memory.limit, dtype=float)
    fails = {
        "fits_memory": test(~(mem <= limit)) if st.fits_memory else None,
        "max_overhead": test(~(np.asarray(m.overhead, dtype=float) <= st.max_overhead))
        if st.max_overhead is not None else None,
        "min_efficiency": test(~(np.asarray(m.efficiency, dtype=float) >= st.min_efficiency))
        if st.min_efficiency is not None else None,
        "finite": test(~(np.isfinite(np.asarray(m.latency, dtype=float)) & np.isfinite(np.asarray(m.step, dtype=float))
                         & np.isfinite(np.asarray(m.throughput_gpu, dtype=float)))),
    }
    mem_limit.add(float(np.max(limit)) if n else None)
    # Every column a kept point records, at the shape it was computed in: only the few points that enter
    # the running top, front or best-removed tables are gathered (`take`); the selections read the keys.
    srcs = {
        "gpus": m.gpus, "latency_s": m.latency, "step_time_s": m.step,
        "throughput_per_gpu": m.throughput_gpu, "throughput_tokens_s": m.throughput,
        "efficiency": m.efficiency, "overhead": m.overhead, "speedup": m.speedup,
        "compute_time_s": m.T_compute, "comm_time_s": m.T_comm,
        "bubble": m.bubble, "memory_bytes_per_gpu": mem,
    }
    keys = {"index": index, "gpus": full(m.gpus), "latency_s": full(m.latency),
            "throughput_per_gpu": full(m.throughput_gpu)}
    # cost per million tokens at the plan's load (ccost.model.economics, the formulas of a single plan); NaN
    # when the cluster is not priced (then no record carries it and the objective refuses to run)
    econ = None
    if pr is not None and (pr.priced or (targeted(plan) and pr.powered)):
        from ccost.model import economics

        econ = economics.economics(plan, pr, keys["gpus"], full(m.throughput))
    keys["cost_per_mtok_usd"] = full(econ.cost_mtok) if econ is not None and econ.priced else np.full(n, np.nan)
    # a training target's time to train, goodput and cost (ccost.model.target, the formulas of a single plan)
    nan = np.full(n, np.nan)
    keys.update(time_to_train_s=nan, train_cost_usd=nan, gpu_days=nan, target_cost=nan)
    if targeted(plan):
        from ccost.model import target

        tg = target.target(plan, N=keys["gpus"], T_step=full(m.step), tokens_step=full(c.tokens_step), W=x0.W,
                           params=x0.params, b_opt=x0.b_opt, power=None if econ is None else econ.power,
                           cost_rate=None if econ is None else econ.cost_rate)
        keys["time_to_train_s"] = full(tg.T_train)
        keys["gpu_days"] = full(tg.gpu_days)
        if tg.cost is not None:
            keys["train_cost_usd"] = full(tg.cost)
        keys["target_cost"] = keys["train_cost_usd"] if st.target_by == "train_cost_usd" else keys["gpu_days"]
        srcs.update(goodput=full(tg.goodput), train_energy_j=nan if tg.energy is None else full(tg.energy),
                    checkpoint_interval_s=nan if tg.tau is None else full(tg.tau))
        if st.deadline is not None:
            fails[DEADLINE_RULE] = ~(keys["time_to_train_s"] <= st.deadline)  # flat already
    if plan.global_sequences is not None and "batch" in vals:  # the batch the global batch gives each layout
        srcs["batch"] = vals["batch"]
    if plan.microbatch_size is not None and "microbatches" in vals:  # and its micro-batches
        srcs["microbatches"] = vals["microbatches"]
    # The AllReduce algorithm each point's TP (and, training, DP) group used: `auto` picks per point.
    codes = {}
    for key in ("TP", "DP"):
        code = np.asarray(-1)
        for k in prog.collectives:
            if k.key == key and k.kind == "allreduce":
                if isinstance(k.algorithm, str):
                    code = np.asarray(ALGORITHMS.index(k.algorithm))
                else:
                    code = np.asarray([ALGORITHMS.index(a) for a in k.candidates])[k.algorithm]
                # a group of one runs no AllReduce
                code = np.where(np.asarray(k.group_size, dtype=float) > 1, code, -1)
        codes[f"{key.lower()}_algorithm"] = code

    views: dict = {}  # every column at the block's shape (flat, or a broadcast view), made by the first take

    def take(rows):
        """Every column at the flat positions ``rows`` of the block."""
        if not views:
            def view(a, dtype):
                a = np.asarray(a, dtype=dtype)
                return a if a.shape == (n,) else np.broadcast_to(a, shape)

            views.update({k: view(v, float) for k, v in srcs.items()})
            views["limit"] = view(limit, float)
            views.update({k: view(v, np.int64) for k, v in codes.items()})
        r, q = np.divmod(rows, shape[1]) if len(shape) == 2 else (rows, None)

        def at(k):
            a = views[k]
            return a[rows] if a.shape == (n,) else a[r, q]

        out = {"index": index[rows]}
        out.update({k: at(k) for k in srcs})
        out["gpus"] = keys["gpus"][rows]
        out["fits_memory"] = at("memory_bytes_per_gpu") <= at("limit")
        for k in ("cost_per_mtok_usd", "time_to_train_s", "train_cost_usd", "gpu_days", "target_cost"):
            out[k] = keys[k][rows]
        out.update({k: at(k) for k in codes})
        return out

    alive = np.ones(n, dtype=bool) if alive0 is None else alive0
    for k in checks:
        before = alive
        alive = count(k, fails.get(k), alive)
        if k != "finite" and fails.get(k) is not None:
            gone = np.nonzero(before & ~alive)[0]
            if gone.size:
                best_removed[k].merge_rows(keys, gone, take, best_select or top_select)
    keep = np.nonzero(alive)[0]
    if not keep.size:
        return
    top.merge_rows(keys, keep, take, top_select)
    front.merge_rows(keys, keep, take, _pareto_select)
    if tfront is not None and targeted(plan):
        tfront.merge_rows(keys, keep, take, _target_pareto_select)
    if fleet_best is not None:  # the best of this fleet combination (a training target's per-cluster answer)
        fleet_best.merge_rows(keys, keep, take, best_select or top_select)
