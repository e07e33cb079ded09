"""A search's grid and its constraints: the axes split into passes, layouts and columns, the constraints in
the order they are counted, the ones a layout fails before any pricing, and a point's number in search order
(``_Job``, ``_Grid``, ``_layout_fails``, ``_decode``). See the package's docstring for how a search runs."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ccost import axes as PA
from ccost import layout_rules as rules
from ccost import spec as S
from ccost.check.search import (  # the search block's rules, applied by the checker too
    ARRAY_AXES,
    FLEET_AXES,
    STATIC_AXES,
    validate,
)
from ccost.check.search import value_name as _name
from ccost.diagnostics import CcostError, error
from ccost.schema import phase_kind, rebatched, targeted

if TYPE_CHECKING:
    from ccost.search.pricing import _Acc


OBJECTIVES = ("latency", "throughput_per_gpu", "gpus")


#: Points per chunk: big enough that numpy's per-call overhead vanishes, small enough for the cache and
#: a bounded peak memory (a few hundred arrays of this length live at once).
CHUNK = 1 << 15


#: The constraint that removes columns before pricing: more micro-batches than sequences (E401).
MB_RULE = "microbatches_at_most_batch"


#: A training target's constraints (ccost.model.target): the layouts that hold the global batch (E303), and those
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
        from ccost.model import economics

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
        from ccost.search.document import _document  # the document reads the grid: imported when one is made

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
    if not kind.searchable:  # a serve plan prices several steps per point (ccost.model.serve), not one program
        raise CcostError(error("E401", f"search `{search.name}`: its base plan `{base.name}` is a {kind.name} plan, "
                               "which the layout search does not price", search.spans.get("base", search.span),
                               kind.search_help))
    # the checker's rules for the block (E205, E402, E203, E404), for a Search built without the checker
    diags = [d for d in validate(search, lambda *a: None) if d.is_error]
    if diags:
        raise CcostError(diags)
    from ccost.model import economics

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
        # the pass with virtual_stages = 1 (ccost.model.lower prices v only when interleaved)
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


#: The array axes the layout constraints read: a *layout* is one combination of them; the other array axes
#: (batch, microbatches, seq, overlap) make the *columns* every layout is priced at.
LAYOUT_AXES = tuple(a.name for a in PA.AXES if a.searchable)


class _Grid:
    """The array axes of a pass as layouts × columns, in chunks.

    The flat index of a point in search order is Σ index·stride over the axes, so it splits into a layout
    part and a column part whatever order the axes were written in. The layout constraints are tested once
    per layout; the layouts that pass are priced in blocks of rows × columns: the inputs go to
    ``lower`` as a column vector (tp, pp, ep, dp) and a row vector (batch, ...) — or, in a block with more
    layouts than columns, transposed, so that numpy's inner loop runs along the longer side
    (``_run_units``) — and a quantity that depends on the layout only (weights per GPU, gradient
    collectives, ...) is computed once per layout and one that depends on the columns only (activation
    sizes) once per column, and numpy broadcasts them. Every element is the same IEEE operation on the same
    operands as the flat evaluation: the bits do not change.
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
        self._last = None  # the last layouts decoded: (start, stop), (values, offsets)

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
        """Layouts ``start:stop`` of the layout grid: (field → values, flat-index offsets), read-only. The
        last range asked for is kept: every pass of a search has the same layouts, and decoding them
        costs about as much as a pass's other set-up (bench (b): 15,552 layouts, 0.3 ms)."""
        if self._last is None or self._last[0] != (start, stop):
            vals, off = self._decode(start, stop, self.l_names, self.l_vals, self.l_shape, self.l_strides)
            for a in (*vals.values(), off):
                a.setflags(write=False)
            self._last = ((start, stop), (vals, off))
        return self._last[1]

    def _columns(self, start: int, stop: int):
        vals, off = self._decode(start, stop, self.c_names, self.c_vals, self.c_shape, self.c_strides)
        return {f: v[None, :] for f, v in vals.items()}, off[None, :]

    def columns(self, start: int, stop: int):
        """Columns ``start:stop`` as row vectors: (field → values, flat-index offsets)."""
        if self._cols is not None and (start, stop) == (0, self.n_columns):
            return self._cols
        return self._columns(start, stop)

    def blocks(self, rows: int, width: int | None = None) -> list[tuple[int, int, int, int]]:
        """(row start, row stop, column start, column stop) of the blocks that price ``rows`` layouts.
        ``width``: the columns priced at each layout when they all fit one block (the micro-batch rule
        drops some before pricing, ``_whole_microbatches``): a block then takes ``chunk // width`` layouts,
        still at most ``chunk`` points, so a search whose rule drops half its columns prices half as many
        blocks (each block pays the cost model's fixed cost once, whatever its size)."""
        per = self.rows_per_block
        if width is not None and self.col_block == self.n_columns:
            per = max(1, self.layout_chunk // max(1, width))
        return [(r0, min(rows, r0 + per), c0, min(self.n_columns, c0 + self.col_block))
                for r0 in range(0, rows, per) for c0 in range(0, self.n_columns, self.col_block)]


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
