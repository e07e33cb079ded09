"""Layout search: every combination of tp, pp, ep, dp, batch, ... of one plan, priced at once.

A ``search`` block names a base plan, lists (or ranges) of values for some of its fields, constraints and
an objective. ``run_search`` evaluates **every** point through the same functions as a single plan
(``lower.prepare`` → ``lower.with_arrays`` → ``lower.lower`` → ``analysis.analyse``), with numpy arrays
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
  priced (the chunk's arrays compressed with the mask, no Python loop); the *priced* constraints (memory, overhead, efficiency, finite numbers)
  are tested on those. Points that cannot be a plan at all (more GPUs than ``max_gpus`` or the cluster,
  more pipeline stages than layers) are constraints too, first in the list. The search counts, per
  constraint, the points it was tested on, the points that fail it and the points it removed (failing it
  and passing every constraint before it in ``CONSTRAINTS`` order, so the removed counts add up to the
  rejected points): the output says why each rejected region was rejected.
* **Reductions.** Only the running top ``top`` points (by the objective) and the running Pareto front
  (latency down, throughput per GPU up) survive a chunk.

Point order (for ties and for "the first in search order"): the static axes outermost in written order,
then the array axes in written order, the last fastest.

The module is importable without numpy (the checker builds ``Search`` entities and renders text); the
evaluation imports numpy, ``ccost.lower`` and ``ccost.analysis`` when it runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ccost import spec as S
from ccost.diagnostics import CcostError, Diagnostic, Span, error

#: Fields a search can vary as arrays: plan field → ``lower.Inputs`` attribute (seq feeds two inputs).
ARRAY_AXES: Mapping[str, str] = {"tp": "tp", "pp": "pp", "ep": "ep", "dp": "dp", "batch": "B",
                                 "microbatches": "M", "seq": "S", "overlap": "overlap"}
#: Fields a search varies with one pass per value (they change which formulas run).
STATIC_AXES = ("allreduce", "fsdp", "cross_node", "one_shot_volume")
SEARCHABLE = tuple(ARRAY_AXES) + STATIC_AXES

OBJECTIVES = ("latency", "throughput_per_gpu", "gpus")
DEFAULT_LIMIT = 10_000_000
MAX_LIMIT = 1_000_000_000
#: Points per chunk: big enough that numpy's per-call overhead vanishes, small enough for the cache and
#: a bounded peak memory (a few hundred arrays of this length live at once).
CHUNK = 1 << 15
#: Values a range function may produce (``range(1, 1e9)`` is a typo, not a study).
MAX_RANGE_VALUES = 100_000

#: The constraints, in the order they are applied and counted: (key, what it keeps).
CONSTRAINTS: tuple[tuple[str, str], ...] = (
    ("max_gpus", "tp·pp·ep·dp ≤ max_gpus (default: the cluster's GPUs)"),
    ("pp_at_most_layers", "pp ≤ layers (every pipeline stage needs a layer)"),
    ("inter_node_link", "a plan that spans NVLink domains needs the cluster's inter_node link"),
    ("tp_in_domain", "tp ≤ the NVLink domain"),
    ("tp_divides_kv_heads", "tp divides kv_heads"),
    ("pp_divides_layers", "pp divides layers"),
    ("fits_memory", "memory per GPU ≤ max_memory × HBM"),
    ("max_overhead", "overhead = T_comm / T_compute ≤ max_overhead"),
    ("min_efficiency", "efficiency = speedup / GPUs ≥ min_efficiency"),
    ("finite", "the numbers are finite"),
)


# ---------------------------------------------------------------------------------------------------
# The entity (built by the checker from a `search` block)

@dataclass(frozen=True)
class Search(S.Entity):
    """A checked ``search`` block. ``axes`` holds ``(field, (v1, v2, ...))`` in written order.

    ``max_gpus`` None means the cluster's GPUs; ``max_overhead``/``min_efficiency`` None mean "off"
    unless ``use_policy`` brings them from the file's policy; ``use_policy`` None means "when the file has
    a policy block"."""

    base: S.Plan | None = None
    axes: tuple[tuple[str, tuple], ...] = ()
    objective: str = "latency"
    top: int = 10
    limit: int = DEFAULT_LIMIT
    max_gpus: int | None = None
    fits_memory: bool = True
    tp_in_domain: bool = False
    tp_divides_kv_heads: bool = False
    pp_divides_layers: bool = False
    max_overhead: float | None = None
    min_efficiency: float | None = None
    use_policy: bool | None = None

    @property
    def size(self) -> int:
        """Points in the search: the product of the axis lengths."""
        return math.prod(len(v) for _, v in self.axes)


def build(name: str, title: str | None, span: Span | None, spans: Mapping[str, Span],
          values: Mapping[str, Any], varied: tuple) -> Search:
    """The ``Search`` of a checked block (``ccost.schema``'s builder calls this)."""
    return Search(name, title, span, spans, axes=tuple(varied), **values)


def size_text(search: Search) -> str:
    """'11 tp × 11 pp × 5 allreduce' — how a search's size comes about."""
    return " × ".join(f"{len(v):,} {f}" for f, v in search.axes)


def validate(search: Search, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Checks of a search block beyond the field types: only searchable fields are varied, the search is
    within its ``limit`` (E402, saying how large it is), ``max_gpus`` fits the cluster."""
    out: list[Diagnostic] = []
    for f, _ in search.axes:
        if f not in SEARCHABLE:
            out.append(error("E205", f"search `{search.name}` cannot vary `{f}`", where(f) or search.span,
                             help="a search varies " + ", ".join(SEARCHABLE) + f"; to compare values of `{f}`, "
                             "write one search per value, or a sweep"))
    n = search.size
    if n > search.limit:
        out.append(error(
            "E402", f"search `{search.name}` has {n:,} points ({size_text(search)}), more than its limit "
            f"of {search.limit:,}", where("limit") or search.span,
            help=f"narrow the lists, or raise the limit (`limit = {min(MAX_LIMIT, n):_}`, at most "
                 f"{MAX_LIMIT:_}; about a second per million points)"))
    base = search.base
    if base is not None and base.cluster is not None and search.max_gpus is not None \
            and search.max_gpus > base.cluster.gpus:
        out.append(error(
            "E203", f"search `{search.name}`: max_gpus = {search.max_gpus:,} is more than cluster "
            f"`{base.cluster.name}` has ({base.cluster.gpus:,})", where("max_gpus") or search.span,
            help=f"use max_gpus ≤ {base.cluster.gpus:,}, or a larger cluster in the base plan"))
    return out


def range_values(func: str, args: list[float]) -> list[int] | str:
    """The values of a range function, or an error sentence.

    ``pow2(lo, hi)``: the powers of two from lo to hi, both included (``pow2(1, 64)`` = 1, 2, 4, ..., 64).
    ``range(lo, hi)`` / ``range(lo, hi, step)``: lo, lo + step, ... up to hi, both ends included."""
    if not all(float(a).is_integer() for a in args):
        return f"`{func}` takes whole numbers"
    a = [int(x) for x in args]
    if func == "pow2":
        if len(a) != 2:
            return "`pow2` takes two arguments: pow2(lo, hi)"
        lo, hi = a
        if lo < 1 or hi < lo:
            return f"`pow2({lo}, {hi})` needs 1 ≤ lo ≤ hi"
        out, p = [], 1
        while p <= hi:
            if p >= lo:
                out.append(p)
            p *= 2
        return out or f"`pow2({lo}, {hi})` contains no power of two"
    if func == "range":
        if len(a) not in (2, 3):
            return "`range` takes two or three arguments: range(lo, hi) or range(lo, hi, step)"
        lo, hi = a[0], a[1]
        step = a[2] if len(a) == 3 else 1
        if step < 1 or hi < lo:
            return "`range` needs lo ≤ hi and a step of at least 1"
        count = (hi - lo) // step + 1
        if count > MAX_RANGE_VALUES:
            return f"`range({', '.join(map(str, a))})` has {count:,} values, more than {MAX_RANGE_VALUES:,}"
        return list(range(lo, hi + 1, step))
    return f"unknown range function `{func}`"


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


def settings(search: Search, policy: S.Policy) -> Settings:
    """The constraints a search applies: its own fields, the policy's thresholds when ``use_policy`` (by
    default: when the file has a ``policy`` block) and ``max_gpus`` defaulting to the cluster's GPUs."""
    base = search.base
    assert base is not None and base.cluster is not None
    use_policy = search.use_policy if search.use_policy is not None else policy.span is not None
    mo = search.max_overhead if search.max_overhead is not None else (policy.max_overhead if use_policy else None)
    me = search.min_efficiency if search.min_efficiency is not None else (
        policy.min_efficiency if use_policy else None)
    return Settings(search.max_gpus or base.cluster.gpus, search.fits_memory, search.tp_in_domain,
                    search.tp_divides_kv_heads, search.pp_divides_layers, mo, me)


#: AllReduce algorithms a point can end up with (``auto`` picks one of them per point).
ALGORITHMS = ("ring", "tree", "one_shot", "two_shot")

#: What a search records for each point it keeps (top, Pareto front): document key → metric.
RECORD = ("gpus", "latency_s", "step_time_s", "throughput_per_gpu", "throughput_tokens_s", "efficiency", "overhead",
          "speedup", "compute_time_s", "comm_time_s", "bubble", "memory_bytes_per_gpu", "fits_memory")


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


def _top_select(objective: str, top: int):
    def select(cols: dict):
        import numpy as np

        n = len(cols["index"])
        if n <= top:
            return _objective_order(cols, objective)
        prim = _primary(cols, objective)
        kth = np.partition(prim, top - 1)[top - 1]
        cand = np.nonzero(prim <= kth)[0]  # the best `top` values and every tie with the last of them
        sub = {k: v[cand] for k, v in cols.items()}
        return cand[_objective_order(sub, objective)[:top]]
    return select


def _pareto_select(cols: dict):
    return pareto_mask(cols["latency_s"], cols["throughput_per_gpu"], cols["index"])


def run_search(search: Search, policy: S.Policy, progress: Callable[[int, int], None] | None = None,
               chunk: int = CHUNK) -> dict:
    """Evaluate every point of ``search`` and return its document section (see ``search_document``).

    ``progress(done, total)`` is called after each chunk (the CLI draws a bar from it). Raises
    ``CcostError`` E402 for a search larger than its limit, E401 when the base plan cannot be evaluated.
    """
    import numpy as np

    from ccost import analysis, lower

    base = search.base
    if base is None or base.cluster is None or base.model is None:
        raise CcostError(error("E401", f"search `{search.name}` has no base plan to evaluate", search.span))
    if base.phase == "serve":  # a serve plan prices several steps per point (ccost.serve), not one program
        raise CcostError(error("E401", f"search `{search.name}`: its base plan `{base.name}` is a serve plan, which "
                               "the layout search does not price", search.spans.get("base", search.span),
                               "search a decode plan of the same layout, or compare serve plans (or sweep one)"))
    total = search.size
    if total > search.limit:
        raise CcostError(error("E402", f"search `{search.name}` has {total:,} points ({size_text(search)}), "
                               f"more than its limit of {search.limit:,}", search.span,
                               "narrow the lists, or raise `limit`"))
    bad = [f for f, _ in search.axes if f not in SEARCHABLE]
    if bad:
        raise CcostError(error("E205", f"search `{search.name}` cannot vary `{bad[0]}`", search.span))
    st = settings(search, policy)
    model, cluster = base.model, base.cluster
    from ccost import economics

    pr = economics.pricing(cluster)
    if search.objective == "cost_per_token" and not pr.priced:
        raise CcostError(error("E403", f"search `{search.name}` ranks by cost_per_token, but its base plan "
                               f"`{base.name}` is not priced", search.spans.get("objective", search.span),
                               economics.not_priced_help(cluster)))
    axes = dict(search.axes)
    static_names = [f for f, _ in search.axes if f in STATIC_AXES]
    array_names = [f for f, _ in search.axes if f in ARRAY_AXES]
    array_vals = [np.asarray(axes[f], dtype=float) for f in array_names]
    shape = tuple(len(v) for v in array_vals)
    per_pass = math.prod(shape)
    seq0 = axes["seq"][0] if "seq" in axes else base.seq

    names = [c for c, _ in CONSTRAINTS]
    failed = dict.fromkeys(names, 0)
    removed = dict.fromkeys(names, 0)
    tested = dict.fromkeys(names, 0)
    top, front = _Best(), _Best()
    top_select = _top_select(search.objective, search.top)
    best_removed = {k: _Best() for k in names}
    mem_limit: set = set()  # max_memory × HBM: one value per search (the cluster's GPU)
    kv_heads = model.kv_heads or model.heads
    done = 0
    priced = 0

    def count(key: str, fail, alive, weight: int = 1):
        """Tally one constraint over the points still alive (or all, for `failed`) and mask them.
        ``weight``: the points each entry stands for (a layout stands for every column of it)."""
        if fail is None:
            return alive
        tested[key] += fail.size * weight
        failed[key] += int(np.count_nonzero(fail)) * weight
        removed[key] += int(np.count_nonzero(fail & alive)) * weight
        return alive & ~fail

    grid = _Grid(array_names, array_vals, chunk)
    for p_i, combo in enumerate(itertools.product(*(axes[f] for f in static_names))):
        fixed = dict(zip(static_names, combo))
        plan = replace(base, seq=seq0, **fixed)
        static, x0 = lower.prepare(plan, policy)
        for start in range(0, grid.n_layouts, grid.layout_chunk):
            stop = min(grid.n_layouts, start + grid.layout_chunk)
            n = stop - start
            lvals, row_off = grid.layouts(start, stop)

            def axis(f, vals=lvals):
                return vals[f] if f in vals else float(getattr(base, f))

            # Layout constraints need no pricing and read only tp, pp, ep, dp: tested once per layout (each
            # stands for every combination of the other axes), and only the layouts that pass them are
            # priced (compressed arrays, not a Python loop).
            tp, pp = axis("tp"), axis("pp")
            gpus = np.broadcast_to(tp * pp * axis("ep") * axis("dp") * float(base.cp), (n,))
            layout_fails = {
                "max_gpus": gpus > st.max_gpus,
                "pp_at_most_layers": np.broadcast_to(pp > model.layers, (n,)),
                "inter_node_link": (gpus > cluster.domain) if cluster.inter_node is None else None,
                "tp_in_domain": np.broadcast_to(tp > cluster.domain, (n,)) if st.tp_in_domain else None,
                "tp_divides_kv_heads": np.broadcast_to(np.mod(kv_heads, tp) != 0, (n,))
                if (st.tp_divides_kv_heads and kv_heads) else None,
                "pp_divides_layers": np.broadcast_to(np.mod(model.layers, pp) != 0, (n,))
                if st.pp_divides_layers else None,
            }
            alive = np.ones(n, dtype=bool)
            for k in names[:6]:
                alive = count(k, layout_fails[k], alive, grid.n_columns)
            keep = np.nonzero(alive)[0]
            blocks = grid.blocks(keep.size)
            for b_i, (r0, r1, c0, c1) in enumerate(blocks):
                rows = keep[r0:r1]
                cvals, col_off = grid.columns(c0, c1)
                vals = {f: v[rows][:, None] for f, v in lvals.items()}
                vals.update(cvals)
                priced += rows.size * (c1 - c0)
                _price_chunk(lower, analysis, static, x0, plan, vals,
                             p_i * per_pass + row_off[rows][:, None] + col_off, st, count, names[6:], top, front,
                             top_select, best_removed, mem_limit, pr)
                if progress is not None and b_i + 1 < len(blocks):
                    progress(done + n * grid.n_columns * (b_i + 1) // len(blocks), total)
            done += n * grid.n_columns
            if progress is not None:
                progress(done, total)

    feasible = total - sum(removed.values())
    worst = {k: b.cols for k, b in best_removed.items() if b.cols is not None}
    return _document(search, st, total, priced, feasible, tested, failed, removed, top.cols, front.cols,
                     static_names, array_names, shape, per_pass, worst, max(mem_limit) if mem_limit else None)


#: The array axes the layout constraints read: a *layout* is one combination of them; the other array axes
#: (batch, microbatches, seq, overlap) make the *columns* every layout is priced at.
LAYOUT_AXES = ("tp", "pp", "ep", "dp")


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


def _price_chunk(lower, analysis, static, x0, plan, vals, index, st, count, checks, top, front, top_select,
                 best_removed, mem_limit, pr=None):
    """Price the points of one block that passed the layout constraints (``vals``: field → array, arrays
    that broadcast to ``index``'s shape: layouts × columns, see ``_Grid``; ``index``: each point's number in
    search order), apply the priced constraints (keeping, per constraint, the best point it removed, so
    the output can say what it cost) and fold the survivors into the running top and Pareto front."""
    import numpy as np

    _keep_freed_memory()
    shape = index.shape
    n = index.size
    index = index.reshape(n)
    inputs = {}
    for f, v in vals.items():
        if f == "seq":
            inputs["ctx"] = v
            if plan.phase != "decode":
                inputs["S"] = v
        else:
            inputs[ARRAY_AXES[f]] = v
    prog = lower.lower(static, lower.with_arrays(x0, **inputs))
    m = analysis.analyse(prog)
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
    mem, limit = np.asarray(c.mem_total, dtype=float), np.asarray(c.mem_limit, dtype=float)
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
    if pr is not None and pr.priced:
        from ccost import economics

        keys["cost_per_mtok_usd"] = full(economics.economics(plan, pr, keys["gpus"], full(m.throughput)).cost_mtok)
    else:
        keys["cost_per_mtok_usd"] = np.full(n, np.nan)
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
        out["cost_per_mtok_usd"] = keys["cost_per_mtok_usd"][rows]
        out.update({k: at(v, np.int64) for k, v in codes.items()})
        return out

    alive = np.ones(n, dtype=bool)
    for k in checks:
        before = alive
        alive = count(k, fails[k], alive)
        if k != "finite" and fails[k] is not None:
            gone = np.nonzero(before & ~alive)[0]
            if gone.size:
                best_removed[k].merge_rows(keys, gone, take, top_select)
    keep = np.nonzero(alive)[0]
    if not keep.size:
        return
    top.merge_rows(keys, keep, take, top_select)
    front.merge_rows(keys, keep, take, _pareto_select)


def _decode(search: Search, index: int, static_names, array_names, shape, per_pass) -> dict:
    """The layout (field → value, in written order) of point ``index`` in search order."""
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


def point_plan(search: Search, layout: Mapping[str, Any]) -> S.Plan:
    """The plan of one search point: the base plan with the point's values (for evaluating it alone)."""
    assert search.base is not None
    label = ",".join(f"{k}={v}" for k, v in layout.items())
    return replace(search.base, name=f"{search.name}[{label}]", **layout)


def _records(search, cols, order, decode) -> list[dict]:
    out = []
    train = search.base is not None and search.base.phase == "train"
    for i in order:
        rec = dict(decode(cols["index"][i]))
        for k in RECORD:
            v = cols[k][i]
            rec[k] = bool(v) if k == "fits_memory" else (int(v) if k == "gpus" else float(v))
        # the algorithm the TP (training: and DP) AllReduce used; None when the group is one GPU
        for k in ("tp_algorithm", "dp_algorithm") if train else ("tp_algorithm",):
            code = int(cols[k][i])
            rec[k] = ALGORITHMS[code] if code >= 0 else None
        if "cost_per_mtok_usd" in cols and math.isfinite(float(cols["cost_per_mtok_usd"][i])):
            rec["cost_per_mtok_usd"] = float(cols["cost_per_mtok_usd"][i])  # priced clusters only
        out.append(rec)
    return out


def _document(search, st, total, priced, feasible, tested, failed, removed, top_cols, front_cols, static_names,
              array_names, shape, per_pass, best_removed, mem_limit) -> dict:
    """The ``searches:`` section: ``title``, ``base``, ``axes`` (field → values), ``objective``, ``points``,
    ``priced`` (passed the layout constraints), ``feasible``, ``rejected``, ``constraints`` (in order:
    ``constraint``, ``rule``, ``tested``, ``failed``, ``removed``, ``threshold`` or ``limit_bytes``, and for
    the priced ones ``best_removed``), ``top`` (best first) and ``pareto`` (fastest first). A point is its
    layout (the searched fields) + ``RECORD`` + ``tp_algorithm`` (training: ``dp_algorithm``)."""
    def decode(i):
        return _decode(search, i, static_names, array_names, shape, per_pass)

    top = _records(search, top_cols, range(len(top_cols["index"])), decode) if top_cols else []
    front = _records(search, front_cols, range(len(front_cols["index"])), decode) if front_cols else []
    limits = {"max_gpus": st.max_gpus, "tp_in_domain": st.tp_in_domain,
              "tp_divides_kv_heads": st.tp_divides_kv_heads, "pp_divides_layers": st.pp_divides_layers,
              "fits_memory": st.fits_memory, "max_overhead": st.max_overhead,
              "min_efficiency": st.min_efficiency}
    rules = dict(CONSTRAINTS)
    constraints = []
    for k, _ in CONSTRAINTS:
        if k in ("tp_in_domain", "tp_divides_kv_heads", "pp_divides_layers", "fits_memory") and not limits[k]:
            continue
        if k in ("max_overhead", "min_efficiency") and limits[k] is None:
            continue
        if k in ("inter_node_link", "finite") and failed[k] == 0:
            continue
        entry = {"constraint": k, "rule": rules[k], "tested": tested[k], "failed": failed[k],
                 "removed": removed[k]}
        if k in ("max_gpus", "max_overhead", "min_efficiency"):
            entry["threshold"] = limits[k]
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
        "axes": {f: list(v) for f, v in search.axes},
        "objective": search.objective,
        "points": total,
        "priced": priced,
        "feasible": feasible,
        "rejected": total - feasible,
        "constraints": constraints,
        "top": top,
        "pareto": front,
    }


def search_document(search: Search, policy: S.Policy, progress=None) -> dict:
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


# ---------------------------------------------------------------------------------------------------
# Text

#: Pareto points the text output lists at most (JSON/YAML carry the whole front).
TEXT_FRONT = 25


def search_text(name: str, s: dict) -> str:
    """One search of the results document as readable text: size, constraints, top layouts, Pareto front."""
    from ccost import output as O

    axes = list(s["axes"])
    out = [f"search {name}" + (f" — {s['title']}" if s.get("title") and s["title"] != name else "")]
    out.append(f"  base plan {s['base']}; {s['points']:,} points ("
               + " × ".join(f"{len(v)} {f}" for f, v in s["axes"].items()) + f"); {s['feasible']:,} feasible; "
               f"objective {s['objective']}")
    if s["constraints"]:
        rows = [[c["constraint"], c["rule"], f"{c['tested']:,}", f"{c['failed']:,}", f"{c['removed']:,}"]
                for c in s["constraints"]]
        out.append("")
        out.append(O._indent(O.table(["constraint", "keeps", "tested", "fail it", "removed"], rows, "llrrr")))
        out.append(f"  (layout constraints are tested on every point; the {s['priced']:,} points that pass them are "
                   "priced and tested on the rest; removed: failing this constraint and none above it)")
        fmt_mem = getattr(O, "fmt_gb", O.fmt_bytes)
        for c in s["constraints"]:
            b = c.get("best_removed")
            if not b:
                continue
            k = c["constraint"]
            why = {"fits_memory": f"needs {fmt_mem(b['memory_bytes_per_gpu'])} per GPU"
                                  + (f" (limit {fmt_mem(c['limit_bytes'])})" if c.get("limit_bytes") else ""),
                   "max_overhead": f"overhead {O.fmt_pct(b['overhead'])} > {O.fmt_pct(c.get('threshold'))}",
                   "min_efficiency": f"efficiency {O.fmt_pct(b['efficiency'])} < {O.fmt_pct(c.get('threshold'))}",
                   }.get(k, "")
            layout = ", ".join(f"{f}={str(b[f]).lower() if isinstance(b[f], bool) else O.fmt_field(f, b[f])}"
                               for f in axes)
            out.append(f"  {k} cost: the best layout it removed ({layout}) would give "
                       f"{O.fmt_num(b['throughput_per_gpu'], 4)} tokens/s/GPU at {O.fmt_time(b['latency_s'])}"
                       f" on {b['gpus']:,} GPU{'' if b['gpus'] == 1 else 's'}, but {why}")

    def cell(p, f):
        if isinstance(p[f], bool):
            return str(p[f]).lower()
        if f == "allreduce" and p[f] == "auto" and p.get("tp_algorithm"):
            return f"auto: {p['tp_algorithm']}"  # what auto picked for the TP AllReduce
        return O.fmt_field(f, p[f])  # overlap in %

    priced = any("cost_per_mtok_usd" in p for p in [*s["top"], *s["pareto"]])

    def rows_of(points):
        return [[*(cell(p, f) for f in axes),
                 f"{p['gpus']:,}", O.fmt_time(p["latency_s"]), O.fmt_num(p["throughput_per_gpu"], 4),
                 O.fmt_pct(p["efficiency"]), O.fmt_pct(p["overhead"]), getattr(O, "fmt_gb", O.fmt_bytes)(p["memory_bytes_per_gpu"]),
                 *((O.fmt_num(p.get("cost_per_mtok_usd"), 4),) if priced else ())]
                for p in points]

    headers = [*axes, "GPUs", "latency", "tokens/s/GPU", "efficiency", "overhead", "memory/GPU",
               *(("USD/Mtok",) if priced else ())]
    align = "r" * len(axes) + "rrrrrr" + ("r" if priced else "")
    if s["top"]:
        out += ["", f"  top {len(s['top'])} by {s['objective']}:",
                O._indent(O.table(headers, rows_of(s["top"]), align))]
    else:
        out += ["", "  no point satisfies every constraint"]
    front = s["pareto"]
    if front:
        # a long front is thinned evenly for reading (first and last kept); the document has all of it
        shown = front if len(front) <= TEXT_FRONT else [front[round(i * (len(front) - 1) / (TEXT_FRONT - 1))]
                                                        for i in range(TEXT_FRONT)]
        out += ["", f"  Pareto front, {len(front):,} layout{'' if len(front) == 1 else 's'} (latency against throughput per GPU; each is the "
                    "best throughput at its latency)" + (f"; {len(shown)} of them, evenly spaced:"
                                                         if len(shown) < len(front) else ":"),
                O._indent(O.table(headers, rows_of(shown), align))]
    return "\n".join(out)
