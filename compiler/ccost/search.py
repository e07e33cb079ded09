"""Layout search: every combination of tp, pp, ep, dp, batch, ... of one plan, priced at once.

A ``search`` block names a base plan, lists (or ranges) of values for some of its fields, constraints and
an objective. ``run_search`` evaluates **every** point through the same functions as a single plan
(``lower.prepare`` → ``lower.with_arrays`` → ``phases.lower`` → ``phases.analyse``), with numpy arrays
in place of the floats: there is no second implementation of the cost model, so a point of a search is
bit for bit the plan ``dataclasses.replace(base, tp=..., ...)`` evaluated on its own (a test checks it).

How it runs:

* **Axes.** The searched fields split in two. Numbers the formulas take as inputs (``tp``, ``pp``, ``ep``,
  ``dp``, ``batch``, ``microbatches``, ``seq``, ``overlap``) become arrays. Choices that change *which*
  formulas run (``allreduce``, ``fsdp``, ``cross_node``) are decided in Python (``lower.Static``): the
  search makes one pass per combination of them.
* **Chunks.** Within a pass the array axes split into *layouts* (the combinations of ``tp``, ``pp``,
  ``ep``, ``dp``: all the layout constraints read) and *columns* (the combinations of the others). The
  layout grid is enumerated in chunks of ``CHUNK`` layouts (flat indices decoded with
  ``np.unravel_index``), and the layouts that pass the layout constraints are priced in blocks of at most
  ``CHUNK`` points, rows (layouts, a column vector) × columns (a row vector): numpy broadcasting computes
  a quantity of the layout alone once per layout and one of the columns alone once per column. Memory
  stays bounded by the chunk whatever the size of the search (``_Grid``).
* **Constraints mask, never skip.** Each constraint is a boolean array over the chunk. The *layout*
  constraints (GPUs, pp ≤ layers, tp in the domain, tp | kv_heads, pp | layers) need no pricing: they are
  tested on every layout (each counting for all its columns), and only the layouts that pass them are
  priced (the chunk's arrays compressed with the mask, no Python loop), except the columns that give a
  micro-batch no sequence (microbatches > batch: not a plan, E401), which are dropped from each block
  before pricing; the *priced* constraints (memory, overhead, efficiency, finite numbers)
  are tested on those. Points that cannot be a plan at all (more GPUs than ``max_gpus`` or the cluster,
  more pipeline stages than layers, more micro-batches than sequences) are constraints too, before the
  priced ones in the list. The search counts, per
  constraint, the points it was tested on, the points that fail it and the points it removed (failing it
  and passing every constraint before it in ``CONSTRAINTS`` order, so the removed counts add up to the
  rejected points): the output says why each rejected region was rejected.
* **Reductions.** Only the running top ``top`` points (by the objective) and the running Pareto front
  (latency down, throughput per GPU up) survive a chunk.

Point order (for ties and for "the first in search order"): the static axes outermost in written order,
then the array axes in written order, the last fastest.

The search block's own rules (searchable fields, the size limit, fleet combinations: E205, E402, E404) are
``ccost.check.search``, which the checker runs too. The module is importable without numpy; the evaluation
imports numpy, ``ccost.lower`` and ``ccost.phases`` when it runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ccost import axes as PA
from ccost import layout_rules as rules
from ccost import spec as S
from ccost.collectives import ALGORITHMS  # the AllReduce algorithms a point can end up with (auto: one each)
from ccost.check.search import (  # the search block's rules, applied by the checker too
    ARRAY_AXES,
    FLEET_AXES,
    STATIC_AXES,
    validate,
)
from ccost.check.search import combo_label as _combo_label
from ccost.check.search import value_name as _name
from ccost.check.plan import evaluation_errors
from ccost.diagnostics import CcostError, Diagnostics, error
from ccost.results import RECORD_METRICS
from ccost.schema import phase_kind, rebatched, targeted

OBJECTIVES = ("latency", "throughput_per_gpu", "gpus")
#: Points per chunk: big enough that numpy's per-call overhead vanishes, small enough for the cache and
#: a bounded peak memory (a few hundred arrays of this length live at once).
CHUNK = 1 << 15

#: The constraint that removes columns before pricing: more micro-batches than sequences (E401).
MB_RULE = "microbatches_at_most_batch"
#: A training target's constraints (ccost.target): the layouts that hold the global batch (E303), and those
#: that meet the deadline.
GB_RULE = "global_batch"
#: A training search's schedule axes: model chunks per GPU mean something only in the interleaved schedule.
V_RULE = "virtual_stages_interleaved"
DEADLINE_RULE = "meets_deadline"

#: The constraints, in the order they are applied and counted: (key, what it keeps).
CONSTRAINTS: tuple[tuple[str, str], ...] = (
    ("max_gpus", f"{PA.label()} ≤ max_gpus (default: the cluster's GPUs)"),
    ("pp_at_most_layers", "pp ≤ layers (every pipeline stage needs a layer)"),
    ("inter_node_link", "a plan that spans NVLink domains needs the cluster's inter_node link"),
    ("tp_in_domain", "tp ≤ the NVLink domain"),
    ("tp_divides_kv_heads", "tp divides kv_heads"),
    ("pp_divides_layers", "pp divides layers"),
    (V_RULE, "virtual_stages > 1 only with schedule = interleaved (elsewhere it is the same layout as 1)"),
    (GB_RULE, "the base plan's global batch splits into whole sequences per replica, batch = global batch / "
              "(dp·ep), and those into whole micro-batches of its microbatch_size"),
    (MB_RULE, "microbatches ≤ batch (every micro-batch needs a sequence)"),
    ("fits_memory", "memory per GPU ≤ max_memory × HBM"),
    ("max_overhead", "overhead = T_comm / T_compute ≤ max_overhead"),
    ("min_efficiency", "efficiency = speedup / GPUs ≥ min_efficiency"),
    (DEADLINE_RULE, "time to train ≤ the base plan's deadline"),
    ("finite", "the numbers are finite"),
)
#: How many of CONSTRAINTS are layout constraints (``_layout_fails``: tested once per layout, no pricing).
N_LAYOUT = 7
#: The constraints tested on points before pricing (after the layout constraints).
_PRE_PRICING = (GB_RULE, MB_RULE)


# ---------------------------------------------------------------------------------------------------
# Running a search

@dataclass(frozen=True)
class Settings:
    """The resolved constraints of a search (policy thresholds looked up, max_gpus defaulted)."""

    max_gpus: int
    fits_memory: bool
    tp_in_domain: bool
    tp_divides_kv_heads: bool
    pp_divides_layers: bool
    max_overhead: float | None
    min_efficiency: float | None
    deadline: float | None = None  # s: the base plan's training target's deadline
    target_by: str | None = None  # what the time-to-train front weighs it against (_Job.target_by)


def settings(search: S.Search, policy: S.Policy) -> Settings:
    """The constraints a search applies: its own fields, the policy's thresholds when ``use_policy`` (by
    default: when the file has a ``policy`` block) and ``max_gpus`` defaulting to the cluster's GPUs."""
    base = search.base
    assert base is not None and base.cluster is not None
    use_policy = search.use_policy if search.use_policy is not None else policy.span is not None
    mo = search.max_overhead if search.max_overhead is not None else (policy.max_overhead if use_policy else None)
    me = search.min_efficiency if search.min_efficiency is not None else (
        policy.min_efficiency if use_policy else None)
    most = search.max_gpus or base.cluster.gpus
    if targeted(base) and base.gpu_budget is not None:  # a training target's GPU budget caps the layouts
        most = min(most, base.gpu_budget)
    return Settings(most, search.fits_memory, search.tp_in_domain, search.tp_divides_kv_heads,
                    search.pp_divides_layers, mo, me, base.deadline if targeted(base) else None)


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

        new = {k: v[rows] for k, v in keys.items()}
        n_old = 0 if self.cols is None else len(self.cols["index"])
        merged = new if self.cols is None else {k: np.concatenate([self.cols[k], new[k]]) for k in new}
        sel = np.asarray(select(merged))
        old = sel < n_old
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
    return select


def _pareto_select(cols: dict):
    return pareto_mask(cols["latency_s"], cols["throughput_per_gpu"], cols["index"])


def _target_pareto_select(cols: dict):
    """The front of a training target's time to train against its cost (``target_cost``: the run's cost,
    or its GPU-days when a searched cluster is not priced, ``_Job.target_by``): both down."""
    return pareto_mask(cols["time_to_train_s"], -cols["target_cost"], cols["index"])


def run_search(search: S.Search, policy: S.Policy, progress: Callable[[int, int], None] | None = None,
               chunk: int = CHUNK, jobs: int | None = None, scheduler: str | None = None) -> dict:
    """Evaluate every point of ``search`` and return its document section (see ``search_document``).

    ``progress(done, total)`` is called as chunks finish (the CLI draws a bar from it). ``jobs`` processes
    (default: ``EXECUTION``'s, 1 unless the CLI's ``--jobs``) or the Dask ``scheduler`` at an address
    (``ccost.remote``) share the chunks; the partial reductions merge into the same document as a
    run in this process. Raises ``CcostError`` E402 for a search larger than its limit, E401 when the base
    plan cannot be evaluated, E404 for a fleet combination that cannot be evaluated.
    """
    if search.base is not None and phase_kind(search.base.phase).capacity:  # a fleet for a traffic (issue 28)
        from ccost import capacity

        diags = [d for d in validate(search, lambda *a: None) if d.is_error]
        if diags:
            raise CcostError(diags)
        _pickling()  # entities travel to Dask workers
        return capacity.run(search, policy, progress, EXECUTION.scheduler if scheduler is None else scheduler)
    job = _job(search, policy, chunk)
    units = job.units()
    jobs = EXECUTION.jobs if jobs is None else jobs
    scheduler = EXECUTION.scheduler if scheduler is None else scheduler
    if scheduler:
        from ccost import remote

        _pickling()
        acc = merge(job, remote.run(job, units, scheduler, progress, work=_run_units,
                                    tasks=lambda us, workers: balanced_tasks(job, us, workers)))
    elif jobs > 1 and len(units) > 1 and not (EXECUTION.auto and search.size < POOL_MIN_POINTS):
        acc = _run_pool(job, units, jobs, progress)
    else:
        acc = _run_units(job, units, progress)
    return job.document(acc)


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


def _fleet_of(search: S.Search) -> list[str]:
    return [f for f, _ in search.axes if f in FLEET_AXES]


@dataclass(frozen=True)
class _Job:
    """Everything a worker needs to price chunks of a search (picklable: shipped to processes and Dask
    workers; ``MappingProxyType`` fields pickle as dicts, see ``_pickle_proxy``)."""

    search: S.Search
    policy: S.Policy
    chunk: int

    @property
    def pass_names(self) -> list[str]:
        """The axes priced one pass per value, in written order: the fleet axes (model, cluster, phase,
        stack) and the static ones."""
        return [f for f, _ in self.search.axes if f in STATIC_AXES or f in FLEET_AXES]

    @property
    def array_names(self) -> list[str]:
        return [f for f, _ in self.search.axes if f in ARRAY_AXES]

    @property
    def shape(self) -> tuple[int, ...]:
        axes = dict(self.search.axes)
        return tuple(len(axes[f]) for f in self.array_names)

    @property
    def per_pass(self) -> int:
        return math.prod(self.shape)

    def grid(self) -> "_Grid":
        """The array axes of a pass as layouts × columns (``_Grid``)."""
        import numpy as np

        axes = dict(self.search.axes)
        return _Grid(self.array_names, [np.asarray(axes[f], dtype=float) for f in self.array_names], self.chunk)

    def units(self) -> list[tuple[int, int, int]]:
        """The work, in search order: (pass, first layout, end layout) for every chunk of every pass, a
        chunk being the layouts that make about ``chunk`` points with their columns (at least one layout).
        A worker joins adjacent ones again (``_coalesce``); the cut only decides how work is shared."""
        axes = dict(self.search.axes)
        passes = math.prod(len(axes[f]) for f in self.pass_names)
        grid = self.grid()
        step = max(1, self.chunk // max(1, grid.n_columns))
        return [(p, s, min(grid.n_layouts, s + step)) for p in range(passes)
                for s in range(0, grid.n_layouts, step)]

    def combo(self, p_i: int) -> dict:
        axes = dict(self.search.axes)
        combo = next(itertools.islice(itertools.product(*(axes[f] for f in self.pass_names)), p_i, None))
        return dict(zip(self.pass_names, combo))

    def pass_plan(self, fixed: Mapping[str, Any]) -> S.Plan:
        base = self.search.base
        assert base is not None
        axes = dict(self.search.axes)
        seq0 = axes["seq"][0] if "seq" in axes else base.seq
        return S.vary(base, seq=seq0, **fixed)

    @property
    def target_by(self) -> str | None:
        """A training target's front weighs the time to train against the run's cost (``train_cost_usd``)
        when every searched cluster is priced, else against its GPU-days; None without a target."""
        base = self.search.base
        if base is None or not targeted(base):
            return None
        from ccost import economics

        clusters = dict(self.search.axes).get("cluster") or (base.cluster,)
        return "train_cost_usd" if all(economics.pricing(c).priced for c in clusters) else "gpu_days"

    def pass_setup(self, p_i: int) -> tuple[dict, S.Plan, Settings]:
        """Pass ``p_i``'s fixed values (fleet and static axes), plan and constraints (in a fleet search each
        cluster's own GPUs cap its points)."""
        fixed = self.combo(p_i)
        plan = self.pass_plan(fixed)
        st = replace(settings(replace(self.search, base=plan), self.policy), target_by=self.target_by)
        if _fleet_of(self.search):
            st = replace(st, max_gpus=min(st.max_gpus, plan.cluster.gpus))
        return fixed, plan, st

    def document(self, acc: "_Acc") -> dict:
        search = self.search
        feasible = acc.total - sum(acc.removed.values())
        worst = {k: b.cols for k, b in acc.best_removed.items() if b.cols is not None}
        mem = acc.mem_limit - {None}
        fleet = {k: b.cols for k, b in acc.best_fleet.items() if b.cols is not None}
        return _document(search, self.settings_doc(), acc.total, acc.priced, feasible, acc.tested, acc.failed,
                         acc.removed, acc.top.cols, acc.front.cols, self.pass_names, self.array_names, self.shape,
                         self.per_pass, worst, max(mem) if len(mem) == 1 else None, acc.tfront.cols, fleet)

    def settings_doc(self) -> Settings:
        """The constraints as the document states them: a fleet search over clusters reports the largest
        ``max_gpus`` (each cluster's own GPUs cap its points)."""
        search = self.search
        base = search.base
        assert base is not None and base.cluster is not None
        clusters = dict(search.axes).get("cluster") or (base.cluster,)
        st = settings(replace(search, base=replace(base, cluster=max(clusters, key=lambda c: c.gpus))), self.policy)
        return replace(st, target_by=self.target_by)


def _job(search: S.Search, policy: S.Policy, chunk: int) -> _Job:
    """Check that ``search`` can run (E401, E402, E205, E403) and wrap it for the workers."""
    base = search.base
    if base is None or base.cluster is None or base.model is None:
        raise CcostError(error("E401", f"search `{search.name}` has no base plan to evaluate", search.span))
    kind = phase_kind(base.phase)
    if not kind.searchable:  # a serve plan prices several steps per point (ccost.serve), not one program
        raise CcostError(error("E401", f"search `{search.name}`: its base plan `{base.name}` is a {kind.name} plan, "
                               "which the layout search does not price", search.spans.get("base", search.span),
                               kind.search_help))
    # the checker's rules for the block (E205, E402, E203, E404), for a Search built without the checker
    diags = [d for d in validate(search, lambda *a: None) if d.is_error]
    if diags:
        raise CcostError(diags)
    from ccost import economics

    if search.objective in ("cost_per_token", "train_cost"):
        for cluster in dict(search.axes).get("cluster") or (base.cluster,):
            if not economics.pricing(cluster).priced:
                raise CcostError(error(
                    "E403", f"search `{search.name}` ranks by {search.objective}, but "
                    + (f"its base plan `{base.name}`" if "cluster" not in dict(search.axes)
                       else f"cluster `{cluster.name}` of its `cluster` axis") + " is not priced",
                    search.spans.get("objective", search.span), economics.not_priced_help(cluster)))
    _pickling()
    return _Job(search, policy, chunk)


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

    from ccost import economics, lower, phases

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
    current = None  # (pass index, its plan, settings, pricing, [static, x0] once prepared, fixed)
    for p_i, start, stop in _coalesce(units, grid.layout_chunk):
        if current is None or current[0] != p_i:
            fixed, plan, st = job.pass_setup(p_i)
            current = [p_i, plan, st, economics.pricing(plan.cluster), None, fixed]
        _, plan, st, pr, prepared, fixed = current
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
        blocks = grid.blocks(keep.size)
        for b_i, (r0, r1, c0, c1) in enumerate(blocks):
            rows = keep[r0:r1]
            cvals, col_off = grid.columns(c0, c1)
            # more micro-batches than sequences is not a plan (E401): those columns are never priced
            whole = _whole_microbatches(plan, cvals)
            if whole is not None:
                bad = int(np.count_nonzero(~whole)) * rows.size
                tested[MB_RULE] += rows.size * (c1 - c0)
                failed[MB_RULE] += bad
                removed[MB_RULE] += bad
                if bad:
                    if not whole.any():
                        continue
                    cvals = {f: v[:, whole] for f, v in cvals.items()}
                    col_off = col_off[:, whole]
            vals = {f: v[rows][:, None] for f, v in lvals.items()}
            vals.update(cvals)
            static, x0 = prepared
            # a global batch (a training target's): each layout's batch is global batch / (dp·ep), and the
            # points where that is no whole number of sequences, or fewer than the micro-batches, go
            alive = _global_batch(plan, vals, (rows.size, col_off.shape[1]), count)
            if alive is not None and not alive.any():
                continue
            acc.priced += rows.size * col_off.shape[1]
            fleet = {f: v for f, v in fixed.items() if f in FLEET_AXES}
            fleet_best = (acc.best_fleet.setdefault(_combo_label(fleet), _Best())
                          if fleet and targeted(plan) else None)
            _price_chunk(lower, phases, static, x0, plan, vals,
                         p_i * per_pass + row_off[rows][:, None] + col_off, st, count, priced_checks, acc.top,
                         acc.front, top_select, acc.best_removed, acc.mem_limit, pr, best_select, alive,
                         acc.tfront, fleet_best)
            if progress is not None and b_i + 1 < len(blocks):
                progress(acc.done + n * grid.n_columns * (b_i + 1) // len(blocks), total)
        acc.done += n * grid.n_columns
        if progress is not None:
            progress(acc.done, total)
    return acc


def _global_batch(plan: S.Plan, vals: dict, shape: tuple[int, int], count):
    """A training base plan that fixes its global batch or its micro-batch size: sets ``vals["batch"]`` to
    global batch / (dp·ep) and ``vals["microbatches"]`` to batch / ``microbatch_size`` at every point of the
    block (``vals``: field → arrays of rows × columns), counts the points where those are not whole numbers
    (``layout_rules.holds_global_batch``: the layout cannot hold the global batch) and then those left with
    fewer sequences than micro-batches, and returns the points still alive (flat); None when the base plan
    fixes neither (``batch`` and ``microbatches`` are then the plan's or axes)."""
    import numpy as np

    mbs = plan.microbatch_size
    if not phase_kind(plan.phase).targets or (plan.global_sequences is None and mbs is None):
        return None
    n = shape[0] * shape[1]

    def axis(f):
        return vals[f] if f in vals else float(getattr(plan, f))

    alive = np.ones(n, dtype=bool)
    if plan.global_sequences is not None:
        g = float(plan.global_batch) if plan.global_batch is not None else plan.global_batch_tokens / axis("seq")
        replicas = axis("dp") * axis("ep")
        vals["batch"] = g / replicas
        holds = rules.holds_global_batch(g, replicas, mbs or 1)
    else:
        holds = rules.holds_global_batch(axis("batch"), 1, mbs)
    alive = count(GB_RULE, ~np.broadcast_to(holds, shape).reshape(n), alive)
    if mbs is not None:
        vals["microbatches"] = axis("batch") / mbs
    fits = rules.microbatches_at_most_batch(axis("microbatches"), axis("batch"))
    return count(MB_RULE, ~np.broadcast_to(fits, shape).reshape(n), alive)


def _whole_microbatches(plan: S.Plan, cvals: dict):
    """Where the columns ``cvals`` give every micro-batch a sequence (``layout_rules``), or None when the
    search varies neither batch nor microbatches (the base plan keeps the rule, or is refused), or when the
    base plan fixes its global batch (``_global_batch`` tests the rule at every point)."""
    import numpy as np

    if phase_kind(plan.phase).rows != "batch" or not ({"batch", "microbatches"} & cvals.keys()):
        return None
    if phase_kind(plan.phase).targets and (plan.global_sequences is not None or plan.microbatch_size is not None):
        return None
    M = np.asarray(cvals["microbatches"] if "microbatches" in cvals else plan.microbatches)
    B = np.asarray(cvals["batch"] if "batch" in cvals else plan.batch)
    return np.broadcast_to(rules.microbatches_at_most_batch(M, B), next(iter(cvals.values())).shape).reshape(-1)


def _layout_fails(plan: S.Plan, st: Settings, lvals: dict, n: int) -> dict:
    """The layout constraints (the first ``N_LAYOUT`` of ``CONSTRAINTS``) at ``n`` layouts (``lvals``: field → values;
    a field not searched is the plan's): constraint → where a layout fails it (None: not applied)."""
    import numpy as np

    model, cluster = plan.model, plan.cluster
    kv_heads = model.kv_heads or model.heads

    def axis(f):
        return lvals[f] if f in lvals else float(getattr(plan, f))

    tp, pp = axis("tp"), axis("pp")
    gpus = tp
    for f in PA.NAMES[1:]:  # tp·pp·ep·dp·cp, the order of axes.product
        gpus = gpus * axis(f)
    gpus = np.broadcast_to(gpus, (n,))
    fails = np.logical_not  # the rules (ccost.layout_rules) say where a layout keeps them
    return {
        "max_gpus": fails(rules.fits_cluster(gpus, st.max_gpus)),
        "pp_at_most_layers": np.broadcast_to(fails(rules.pp_at_most_layers(pp, model.layers)), (n,)),
        "inter_node_link": fails(rules.in_one_domain(gpus, cluster.domain)) if cluster.inter_node is None else None,
        "tp_in_domain": np.broadcast_to(fails(rules.tp_in_domain(tp, cluster.domain)), (n,))
        if st.tp_in_domain else None,
        "tp_divides_kv_heads": np.broadcast_to(fails(rules.tp_divides_kv_heads(tp, kv_heads)), (n,))
        if (st.tp_divides_kv_heads and kv_heads) else None,
        "pp_divides_layers": np.broadcast_to(fails(rules.pp_divides_layers(pp, model.layers)), (n,))
        if st.pp_divides_layers else None,
        # a pass (the static axes' values) with model chunks but no interleaving: every layout of it repeats
        # the pass with virtual_stages = 1 (ccost.lower prices v only when interleaved)
        V_RULE: np.full(n, plan.virtual_stages > 1 and plan.schedule != "interleaved")
        if phase_kind(plan.phase).trains else None,
    }


def _coalesce(units, most: int):
    """``units`` ((pass, first layout, end layout) rows in search order) with runs of adjacent ones of a
    pass joined into ranges of at most ``most`` layouts: the layout constraints then filter a long range
    at once and the layouts that pass fill dense blocks (see ``_Grid``), however finely the work was cut
    for the workers. Any grouping gives the same reductions."""
    run = None
    for u in units:
        p_i, start, stop = (int(x) for x in u)
        if run is not None and run[0] == p_i and run[2] == start and stop - run[1] <= most:
            run[2] = stop
            continue
        if run is not None:
            yield tuple(run)
        run = [p_i, start, stop]
    if run is not None:
        yield tuple(run)


def _prepare_pass(search: S.Search, policy: S.Policy, plan: S.Plan, fixed: Mapping[str, Any], vals, first):
    """``lower.prepare`` of one pass's plan. In a fleet search the base plan's own layout may not fit
    another model or cluster (more GPUs, more stages than layers): the layout of the pass's first point
    that passed the layout constraints stands in (its numbers are replaced by the arrays anyway)."""
    from ccost import lower

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


def _proxy(d: dict):
    from types import MappingProxyType

    return MappingProxyType(d)


def _pickle_proxy(m):
    return _proxy, (dict(m),)


def _pickling() -> None:
    """Spec entities hold ``MappingProxyType`` fields (read-only maps), which pickle cannot ship to a
    worker: pickle them as the dict they wrap."""
    import copyreg
    from types import MappingProxyType

    copyreg.pickle(MappingProxyType, _pickle_proxy)


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
            ctx.set_forkserver_preload(["numpy", "ccost.search", "ccost.lower", "ccost.analysis"])
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


def merge(job: _Job, results: list) -> _Acc:
    """The reductions of the tasks, folded in search order into one."""
    acc = _Acc(job.search.size, job.search.objective, job.search.top, job.search.distinct)
    for r in results:
        acc.merge(r)
    return acc


#: The array axes the layout constraints read: a *layout* is one combination of them; the other array axes
#: (batch, microbatches, seq, overlap) make the *columns* every layout is priced at.
LAYOUT_AXES = tuple(a.name for a in PA.AXES if a.searchable)


class _Grid:
    """The array axes of a pass as layouts × columns, in chunks.

    The flat index of a point in search order is Σ index·stride over the axes, so it splits into a layout
    part and a column part whatever order the axes were written in. The layout constraints are tested once
    per layout; the layouts that pass are priced in blocks of rows × columns: the inputs go to
    ``lower`` as a column vector (tp, pp, ep, dp) and a row vector (batch, ...), so a quantity that depends
    on the layout only (weights per GPU, gradient collectives, ...) is computed once per layout and one
    that depends on the columns only (activation sizes) once per column, and numpy broadcasts them. Every
    element is the same IEEE operation on the same operands as the flat evaluation: the bits do not change.
    A block holds at most ``chunk`` points (one layout and ``chunk`` columns when a layout has more)."""

    def __init__(self, names: list[str], vals: list, chunk: int):
        import numpy as np

        shape = [len(v) for v in vals]
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        lay = [i for i, f in enumerate(names) if f in LAYOUT_AXES]
        col = [i for i, f in enumerate(names) if f not in LAYOUT_AXES]
        self.l_names, self.c_names = [names[i] for i in lay], [names[i] for i in col]
        self.l_vals, self.c_vals = [vals[i] for i in lay], [vals[i] for i in col]
        self.l_shape, self.c_shape = tuple(shape[i] for i in lay), tuple(shape[i] for i in col)
        self.l_strides = np.asarray([strides[i] for i in lay], dtype=np.int64)
        self.c_strides = np.asarray([strides[i] for i in col], dtype=np.int64)
        self.n_layouts, self.n_columns = math.prod(self.l_shape), math.prod(self.c_shape)
        self.layout_chunk = max(1, chunk)
        self.col_block = max(1, min(self.n_columns, chunk))
        self.rows_per_block = max(1, chunk // self.col_block)
        self._cols = self._columns(0, self.n_columns) if self.n_columns <= chunk else None

    @staticmethod
    def _decode(start: int, stop: int, names, vals, shape, strides):
        import numpy as np

        flat = np.arange(start, stop)
        if not shape:
            return {}, np.zeros(stop - start, dtype=np.int64)
        idx = np.unravel_index(flat, shape)
        off = idx[0] * strides[0]
        for i, s in zip(idx[1:], strides[1:]):
            off = off + i * s
        return {f: v[i] for f, v, i in zip(names, vals, idx)}, off

    def layouts(self, start: int, stop: int):
        """Layouts ``start:stop`` of the layout grid: (field → values, flat-index offsets)."""
        return self._decode(start, stop, self.l_names, self.l_vals, self.l_shape, self.l_strides)

    def _columns(self, start: int, stop: int):
        vals, off = self._decode(start, stop, self.c_names, self.c_vals, self.c_shape, self.c_strides)
        return {f: v[None, :] for f, v in vals.items()}, off[None, :]

    def columns(self, start: int, stop: int):
        """Columns ``start:stop`` as row vectors: (field → values, flat-index offsets)."""
        if self._cols is not None and (start, stop) == (0, self.n_columns):
            return self._cols
        return self._columns(start, stop)

    def blocks(self, rows: int) -> list[tuple[int, int, int, int]]:
        """(row start, row stop, column start, column stop) of the blocks that price ``rows`` layouts."""
        return [(r0, min(rows, r0 + self.rows_per_block), c0, min(self.n_columns, c0 + self.col_block))
                for r0 in range(0, rows, self.rows_per_block) for c0 in range(0, self.n_columns, self.col_block)]


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
    that broadcast to ``index``'s shape: layouts × columns, see ``_Grid``; ``index``: each point's number in
    search order), apply the priced constraints (keeping, per constraint, the best point it removed, so
    the output can say what it cost) and fold the survivors into the running top and Pareto front.
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
    # cost per million tokens at the plan's load (ccost.economics, the formulas of a single plan); NaN
    # when the cluster is not priced (then no record carries it and the objective refuses to run)
    econ = None
    if pr is not None and (pr.priced or (targeted(plan) and pr.powered)):
        from ccost import economics

        econ = economics.economics(plan, pr, keys["gpus"], full(m.throughput))
    keys["cost_per_mtok_usd"] = full(econ.cost_mtok) if econ is not None and econ.priced else np.full(n, np.nan)
    # a training target's time to train, goodput and cost (ccost.target, the formulas of a single plan)
    nan = np.full(n, np.nan)
    keys.update(time_to_train_s=nan, train_cost_usd=nan, gpu_days=nan, target_cost=nan)
    if targeted(plan):
        from ccost import target

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

    def take(rows):
        """Every column at the flat positions ``rows`` of the block."""
        r, q = np.divmod(rows, shape[1]) if len(shape) == 2 else (rows, None)

        def at(a, dtype):
            a = np.asarray(a, dtype=dtype)
            return a[rows] if a.shape == (n,) else np.broadcast_to(a, shape)[r, q]

        out = {"index": index[rows]}
        out.update({k: at(v, float) for k, v in srcs.items()})
        out["gpus"] = keys["gpus"][rows]
        out["fits_memory"] = at(mem, float) <= at(limit, float)
        for k in ("cost_per_mtok_usd", "time_to_train_s", "train_cost_usd", "gpu_days", "target_cost"):
            out[k] = keys[k][rows]
        out.update({k: at(v, np.int64) for k, v in codes.items()})
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


def _decode(search: S.Search, index: int, static_names, array_names, shape, per_pass) -> dict:
    """The layout (field → value, in written order) of point ``index`` in search order. ``static_names``:
    the axes priced one pass per value (the fleet and static axes), in written order."""
    axes = dict(search.axes)
    p_i, rest = divmod(int(index), per_pass)
    combo = next(itertools.islice(itertools.product(*(axes[f] for f in static_names)), p_i, None))
    fixed = dict(zip(static_names, combo))
    pos = []
    for n in reversed(shape):
        rest, r = divmod(rest, n)
        pos.append(r)
    pos.reverse()
    fixed.update({f: axes[f][i] for f, i in zip(array_names, pos)})
    return {f: fixed[f] for f, _ in search.axes}


def point_plan(search: S.Search, layout: Mapping[str, Any]) -> S.Plan:
    """The plan of one search point: the base plan with the point's values (for evaluating it alone)."""
    assert search.base is not None
    axes = dict(search.axes)
    # a record names the model, cluster and stack: the entities are the axis's values of those names
    values = {k: next((x for x in axes.get(k, ()) if _name(x) == v), v) if k in FLEET_AXES else v
              for k, v in layout.items()}
    label = ",".join(f"{k}={_name(v)}" for k, v in values.items())
    # a fixed global batch gives each layout its batch (global batch / (dp·ep))
    return rebatched(S.vary(search.base, name=f"{search.name}[{label}]", **values))


def _records(search, cols, order, decode) -> list[dict]:
    out = []
    for i in order:
        layout = decode(cols["index"][i])
        train = phase_kind(layout.get("phase", search.base.phase)).trains if search.base is not None else False
        rec = {f: _name(v) for f, v in layout.items()}  # a model, cluster or stack by its name
        for k in RECORD_METRICS:  # what a search records for each point it keeps
            v = cols[k][i]
            rec[k] = bool(v) if k == "fits_memory" else (int(v) if k == "gpus" else float(v))
        # the algorithm the TP (training: and DP) AllReduce used; None when the group is one GPU
        for k in ("tp_algorithm", "dp_algorithm") if train else ("tp_algorithm",):
            code = int(cols[k][i])
            rec[k] = ALGORITHMS[code] if code >= 0 else None
        if "cost_per_mtok_usd" in cols and math.isfinite(float(cols["cost_per_mtok_usd"][i])):
            rec["cost_per_mtok_usd"] = float(cols["cost_per_mtok_usd"][i])  # priced clusters only
        for k in ("batch", "microbatches"):  # what a fixed global batch or micro-batch size gives the layout
            if k in cols and k not in rec:
                rec[k] = int(cols[k][i])
        # a training target's (ccost.target): present when the base plan states one, and finite
        for k in TARGET_RECORD_KEYS:
            if k in cols and math.isfinite(float(cols[k][i])):
                rec[k] = float(cols[k][i])
        out.append(rec)
    return out


#: What a record of a search whose base plan states a training target adds (ccost.target; results.py).
TARGET_RECORD_KEYS = ("time_to_train_s", "goodput", "checkpoint_interval_s", "gpu_days", "train_energy_j",
                      "train_cost_usd")


def _document(search, st, total, priced, feasible, tested, failed, removed, top_cols, front_cols, static_names,
              array_names, shape, per_pass, best_removed, mem_limit, tfront_cols=None, fleet_cols=None) -> dict:
    """The ``searches:`` section: ``title``, ``base``, ``axes`` (field → values), ``objective``, ``points``,
    ``priced`` (passed the layout constraints), ``feasible``, ``rejected``, ``constraints`` (in order:
    ``constraint``, ``rule``, ``tested``, ``failed``, ``removed``, ``threshold`` or ``limit_bytes``, and for
    the priced ones ``best_removed``), ``top`` (best first) and ``pareto`` (fastest first). A point is its
    layout (the searched fields) + ``RECORD_METRICS`` + ``tp_algorithm`` (training: ``dp_algorithm``)."""
    def decode(i):
        return _decode(search, i, static_names, array_names, shape, per_pass)

    top = _records(search, top_cols, range(len(top_cols["index"])), decode) if top_cols else []
    front = _records(search, front_cols, range(len(front_cols["index"])), decode) if front_cols else []
    limits = {"max_gpus": st.max_gpus, "tp_in_domain": st.tp_in_domain,
              "tp_divides_kv_heads": st.tp_divides_kv_heads, "pp_divides_layers": st.pp_divides_layers,
              "fits_memory": st.fits_memory, "max_overhead": st.max_overhead,
              "min_efficiency": st.min_efficiency}
    rules = dict(CONSTRAINTS)
    # the GPU product names the optional degrees (cp) this search prices: varied, or above 1 in its base
    used = {f for f, v in search.axes if f in PA.OPTIONAL and any(d > 1 for d in v)}
    used |= {a for a in PA.OPTIONAL if search.base is not None and getattr(search.base, a) > 1}
    rules["max_gpus"] = rules["max_gpus"].replace(PA.label(), PA.label(used), 1)
    constraints = []
    for k, _ in CONSTRAINTS:
        if k in ("tp_in_domain", "tp_divides_kv_heads", "pp_divides_layers", "fits_memory") and not limits[k]:
            continue
        if k in ("max_overhead", "min_efficiency") and limits[k] is None:
            continue
        if k in ("inter_node_link", MB_RULE, V_RULE, "finite") and failed[k] == 0:
            continue
        if (k == GB_RULE and not tested[k]) or (k == DEADLINE_RULE and st.deadline is None):
            continue
        entry = {"constraint": k, "rule": rules[k], "tested": tested[k], "failed": failed[k],
                 "removed": removed[k]}
        if k in ("max_gpus", "max_overhead", "min_efficiency"):
            entry["threshold"] = limits[k]
        if k == DEADLINE_RULE:
            entry["threshold"] = st.deadline
        if k == GB_RULE:
            entry["threshold"] = search.base.global_sequences
        if k == "fits_memory" and mem_limit is not None:
            entry["limit_bytes"] = mem_limit
        if k in best_removed:
            # what the constraint cost: the best layout (by the objective) that it alone removed
            entry["best_removed"] = _records(search, best_removed[k], [0], decode)[0]
        constraints.append(entry)
    assert search.base is not None
    return {
        "title": search.title or search.name,
        "base": search.base.name,
        "axes": {f: [_name(x) for x in v] for f, v in search.axes},
        "objective": search.objective,
        "distinct": search.distinct,
        "points": total,
        "priced": priced,
        "feasible": feasible,
        "rejected": total - feasible,
        "constraints": constraints,
        "top": top,
        "pareto": front,
        **({"target": _target_doc(search, st, tfront_cols, decode, fleet_cols)} if targeted(search.base) else {}),
    }


def _target_doc(search: S.Search, st: Settings, tfront_cols, decode, fleet_cols=None) -> dict:
    """A training search's ``target``: what it trains for (tokens or steps, the global batch, the deadline,
    the GPU budget) and the Pareto front of time to train against the run's cost (``by``: the cost, or the
    GPU-days when a searched cluster is not priced), soonest first."""
    base = search.base
    assert base is not None
    front = []
    if tfront_cols:
        order = sorted(range(len(tfront_cols["index"])), key=lambda i: (float(tfront_cols["time_to_train_s"][i]),
                                                                        int(tfront_cols["index"][i])))
        front = _records(search, tfront_cols, order, decode)
    return {
        "train_tokens": base.train_tokens,
        "train_steps": base.train_steps,
        "global_batch": base.global_sequences,
        "deadline_s": st.deadline,
        "gpu_budget": base.gpu_budget,
        "pareto_by": st.target_by,
        "pareto": front,
        # a fleet search's answer per model, cluster, phase and stack: its best layout by the objective
        **({"best_per_fleet": [_records(search, fleet_cols[k], [0], decode)[0] for k in
                               sorted(fleet_cols, key=lambda k: int(fleet_cols[k]["index"][0]))]}
           if fleet_cols else {}),
    }


def search_document(search: S.Search, policy: S.Policy, progress=None) -> dict:
    """The ``searches:`` section of the results document for one search (``ccost eval``, the review)."""
    return run_search(search, policy, progress)


def search_documents(spec: S.Spec, progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Every search of a spec: ``{name: section}`` (``ccost.evaluate`` calls this). Collects the
    diagnostics of every search that cannot run into one ``CcostError``. ``progress(name, done, total)``
    is told as chunks finish."""
    from ccost.diagnostics import Diagnostics

    diags = Diagnostics()
    out = {}
    for name, se in spec.searches.items():
        try:
            out[name] = run_search(se, spec.policy, (lambda d, t, n=name: progress(n, d, t)) if progress else None)
        except CcostError as exc:
            diags.extend(exc.diagnostics)
    diags.raise_if_errors()
    return out
