"""What a change to a spec did: inputs, plans, results, checklist and recommendations, old → new.

``compare(old, new) -> SpecDiff`` is pure: it takes two ``Side`` values (a checked spec and its results
document, or ``None`` for a spec that did not exist) and lists only what changed. The renderers turn the
diff into text for a terminal, Markdown for a pull-request comment, or a JSON document for scripts.
``ccost.commands.diff`` does the reading (working tree, another file, or a git revision through
``ccost.gitio``) and the evaluating.

Why the results are compared as the results document (docs/interface.md) (``results_document``) rather than
the ``Results`` objects: the document is the normative, stable surface that scripts already read, and a
metric added to it shows up in the diff without a change here.

What a reviewer reads: a result whose relative change is below ``threshold`` (0.1 % by
default) is not listed; a result that follows from another one listed (latency equal to the step time,
speedup from efficiency, η, throughput from the step time, exposed communication from T_comm at the same
overlap, memory from weights when nothing else moved) is marked ``implied_by`` and left out of text and
Markdown, so one change reads as one line; results are named by label (``step time``, not
``step_time_s``); a comparison is listed only when its ranking changed; and blocks of the bundled std
library are never "added": the import is.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from ccost import results as R
from ccost import spec as S
from ccost import units
from ccost.schema import PHASE_KINDS

#: Results whose relative change is smaller than this are not listed (``ccost diff --threshold``, ``--all``).
DEFAULT_THRESHOLD = 0.001

# Plan results that are not single numbers, or that the diff shows in their own section.
_PLAN_SKIP = frozenset({"title", "collectives", "checklist"})


@dataclass(frozen=True)
class Side:
    """One side of a diff: a checked spec and its results document; ``spec`` None means "absent"."""

    label: str  # "HEAD:specs/a.ccost", "working tree", "old.ccost"
    spec: S.Spec | None
    results: Mapping[str, Any] | None


@dataclass(frozen=True)
class InputChange:
    """``link nvlink4.bandwidth: 450 GB/s → 900 GB/s``. ``old``/``new`` in machine units (SI)."""

    kind: str
    block: str
    field: str
    old: Any
    new: Any
    old_text: str
    new_text: str


@dataclass(frozen=True)
class ResultChange:
    """``tp8 step_time_s: 10.07 ms → 8.3 ms (-17.55 %)``; ``delta`` is (new - old) / old, or None."""

    plan: str
    metric: str
    old: Any
    new: Any
    old_text: str
    new_text: str
    delta: float | None
    implied_by: str | None = None  # a listed result this one follows from (not shown in text/Markdown)

    @property
    def label(self) -> str:
        # a sweep's answers (its optima, ``_sweep_changes``) are keys of the sweep, not of a plan
        return R.label(f"sweeps.<sweep>.{self.metric}" if self.plan.startswith("sweep ") else self.metric)

    @property
    def delta_text(self) -> str:
        """``+12.3 %`` relative; for a share (overhead, efficiency, bubble) the change in percentage points,
        ``−377 pp``, because "overhead −87.6 %" of a 431 % overhead reads as a share, not a change."""
        if self.delta is None:
            return ""
        if metric_dim(self.metric) == "fraction" and _number(self.old) and _number(self.new):
            return _signed((self.new - self.old) * 100) + " pp"
        return _signed(self.delta * 100) + " %"


@dataclass(frozen=True)
class StatusChange:
    plan: str
    id: Any
    title: str
    old: str | None  # None: the item did not exist
    new: str | None


@dataclass(frozen=True)
class CompareChange:
    compare: str
    old_ranking: tuple[str, ...]
    new_ranking: tuple[str, ...]
    old_recommendation: str | None
    new_recommendation: str | None


@dataclass(frozen=True)
class PlanSummary:
    """The headline results of a plan added or removed: a reviewer needs a new plan's numbers, not only its
    name. ``values`` are (metric, machine value) for the ``SUMMARY`` metrics; ``fails`` the checklist ids
    with status fail."""

    plan: str
    side: str  # "added" or "removed"
    values: tuple[tuple[str, Any], ...]
    fails: tuple[Any, ...]

    def text(self) -> str:
        parts = ", ".join(f"{R.label(m)} {format_metric(v, m)}" for m, v in self.values)
        fails = f"; checklist fails: {', '.join(str(i) for i in self.fails)}" if self.fails else ""
        return f"{self.plan}: {parts}{fails}"


@dataclass(frozen=True)
class SpecDiff:
    old_label: str
    new_label: str
    old_absent: bool
    blocks_added: tuple[tuple[str, str], ...]  # (kind, name), plans included
    blocks_removed: tuple[tuple[str, str], ...]
    inputs: tuple[InputChange, ...]
    results: tuple[ResultChange, ...]
    checklist: tuple[StatusChange, ...]
    compares: tuple[CompareChange, ...]
    policy: tuple[InputChange, ...] = ()
    summaries: tuple[PlanSummary, ...] = ()  # of the plans added and removed
    threshold: float = DEFAULT_THRESHOLD
    below_threshold: int = 0  # result changes left out because they are smaller than the threshold
    imports_added: tuple[str, ...] = ()  # std library files (their blocks are not listed one by one)
    imports_removed: tuple[str, ...] = ()

    @property
    def shown_results(self) -> tuple[ResultChange, ...]:
        """The result changes a person reads: not those implied by another listed one."""
        return tuple(r for r in self.results if r.implied_by is None)

    @property
    def plans_added(self) -> tuple[str, ...]:
        return tuple(n for k, n in self.blocks_added if k == "plan")

    @property
    def plans_removed(self) -> tuple[str, ...]:
        return tuple(n for k, n in self.blocks_removed if k == "plan")

    @property
    def empty(self) -> bool:
        return not (self.blocks_added or self.blocks_removed or self.inputs or self.results
                    or self.checklist or self.compares or self.policy or self.imports_added
                    or self.imports_removed)


# ---------------------------------------------------------------------------------------------------
# Inputs: the checked entities, field by field

def _dims() -> dict[tuple[str, str], Any]:
    """(block kind, field) -> how its value is shown: a units Dim, ``"fraction"`` or None (as is).
    Read from the schema, the one table that knows every field's type."""
    from ccost import schema

    out: dict[tuple[str, str], Any] = {}
    for kind, bk in schema.SCHEMA.items():
        for f in bk.fields:
            ft = f.type.item if f.type.kind == "list" and f.type.item is not None else f.type
            out[(kind, f.name)] = ft.dim if ft.kind == "quantity" else (
                "fraction" if ft.kind == "fraction" else None)
    return out


def _plain(value: Any) -> Any:
    """A field value as the diff compares it: references by name (a change to a link shows once, on the
    link, not again on every cluster and plan that uses it), tuples as lists."""
    if isinstance(value, S.Entity):
        return value.name
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("span", "spans")}
    return value


def _fields(entity: Any) -> dict[str, Any]:
    if not (dataclasses.is_dataclass(entity) and not isinstance(entity, type)):
        return {"value": _plain(entity)}
    out = {f.name: _plain(getattr(entity, f.name)) for f in dataclasses.fields(entity)
           if f.name not in ("name", "span", "spans", "trace_data")}
    rows = getattr(entity, "trace_data", None)
    if rows is not None:  # a traffic's trace file as read: what changed in it, in a line
        n = len(rows)
        out["trace_data"] = (f"{n:,} request{'s' if n != 1 else ''}, mean {rows.mean_input:,.0f} in / "
                             f"{rows.mean_output:,.0f} out tokens")
    return out


def format_input(value: Any, dim: units.Dim | None) -> str:
    """A field value for a human: ``450 GB/s``, ``30 %``, ``ring``, ``[1, 2, 4]``, ``—`` for unset."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if dim == "fraction":
            return units.format_percent(value)
        if dim:
            return units.format_quantity(value, dim)
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return units.format_quantity(value, units.DIMENSIONLESS)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(format_input(v, dim) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_input(v, None)}" for k, v in value.items()) + "}"
    return str(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _is_axes(v: Any) -> bool:
    """``[[field, [v1, v2, ...]], ...]``: what a sweep varies (``fields``) or a search spans (``axes``)."""
    return isinstance(v, list) and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], list) for p in v)


def _input_changes(kind: str, name: str, old: Any, new: Any,
                   dims: Mapping[tuple[str, str], Any]) -> list[InputChange]:
    out = []
    a, b = _fields(old), _fields(new)
    for f in list(a) + [f for f in b if f not in a]:
        va, vb = a.get(f), b.get(f)
        if _same(va, vb):
            continue
        dim = dims.get((kind, f))
        if _is_axes(va) and _is_axes(vb):  # a sweep's fields, a search's axes: one line per varied field
            fa, fb = dict(va), dict(vb)
            for k in list(fa) + [k for k in fb if k not in fa]:
                if fa.get(k) != fb.get(k):
                    d = dims.get(("plan", k))
                    out.append(InputChange(kind, name, k, fa.get(k), fb.get(k),
                                           format_input(fa.get(k), d), format_input(fb.get(k), d)))
            continue
        out.append(InputChange(kind, name, f, va, vb, format_input(va, dim), format_input(vb, dim)))
    return out


def _entities(spec: S.Spec | None) -> dict[tuple[str, str], Any]:
    """Every named block of a checked spec by (kind, name), kinds in the schema's order."""
    from ccost import schema

    if spec is None:
        return {}
    out: dict[tuple[str, str], Any] = {}
    for kind, bk in schema.SCHEMA.items():
        if bk.named:
            for name, ent in (getattr(spec, bk.spec_attr, None) or {}).items():
                out[(kind, name)] = ent
    return out


def _std_root() -> str | None:
    import os

    from ccost.resources import resource_dir

    try:
        return os.path.realpath(resource_dir("std"))
    except FileNotFoundError:
        return None


def _std_file(path: str | None, root: str | None) -> str | None:
    """``std/gpus.ccost`` when ``path`` is a file of the bundled library, else None."""
    import os

    if not path or root is None:
        return None
    real = os.path.realpath(path)
    if real.startswith(root + os.sep):
        return "std/" + os.path.relpath(real, root).replace(os.sep, "/")
    return None


def _from_std(ent: Any, root: str | None, std_files: set[str]) -> bool:
    """Whether a block was written in the bundled library: its span names a library file (the checker
    shows imported library files as ``std/gpus.ccost``) that the spec really read from the library."""
    file = ent.span.file if ent.span is not None else None
    return file in std_files or _std_file(file, root) is not None


def _std_imports(spec: S.Spec | None, root: str | None) -> set[str]:
    if spec is None:
        return set()
    return {s for s in (_std_file(str(f), root) for f in spec.files) if s}


# ---------------------------------------------------------------------------------------------------
# Results: the results document (docs/interface.md), plan by plan

_DIFF_DIMS = {"time": units.TIME, "bytes": units.INFORMATION, "gb": units.INFORMATION, "money": units.MONEY,
              "power": units.POWER, "fraction": "fraction", "ratio": "ratio", "rate": "rate"}


def metric_dim(metric: str) -> Any:
    """How a result metric is shown, from its record in ``ccost.results``. Returns a units Dim,
    ``"fraction"``, ``"ratio"``, ``"rate"`` (tokens or requests per second) or None (a plain number)."""
    rec = R.record(metric)
    return _DIFF_DIMS.get(rec.dimension) if rec is not None else None


def format_metric(value: Any, metric: str) -> str:
    dim = metric_dim(metric)
    if dim in ("ratio", "rate") and _number(value):
        text = units.format_quantity(value, units.DIMENSIONLESS, digits=4)
        return text + ("×" if dim == "ratio" else f" {R.record(metric).unit.replace('1/s', 'requests/s')}")
    return format_input(value, None if dim in ("ratio", "rate") else dim)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _small(va: Any, vb: Any, threshold: float) -> bool:
    """A numeric change below ``threshold`` of the old value (a change from or to 0 is never small)."""
    return (_number(va) and _number(vb) and va != 0 and vb != 0
            and abs(vb - va) / abs(va) < threshold)


def _result_changes(name: str, a: Mapping[str, Any], b: Mapping[str, Any],
                    threshold: float = 0.0) -> tuple[list[ResultChange], int]:
    """The plan's changed results (beyond ``threshold``, with ``implied_by`` set) and how many were
    smaller than the threshold."""
    out, small = [], 0
    for metric in list(a) + [k for k in b if k not in a]:
        if metric in _PLAN_SKIP:
            continue
        va, vb = a.get(metric), b.get(metric)
        if isinstance(va, (dict, list)) or isinstance(vb, (dict, list)):
            continue
        if _same(va, vb):
            continue
        if _small(va, vb, threshold):
            small += 1
            continue
        delta = (vb - va) / abs(va) if _number(va) and _number(vb) and va != 0 else None
        out.append(ResultChange(name, metric, va, vb, format_metric(va, metric), format_metric(vb, metric),
                                delta))
    return _mark_implied(out, a, b), small


#: The money and power results a diff lists (a plan's ``cost`` section, ``ccost.model.economics``).
COST_METRICS = ("cost_per_mtok_usd", "cost_per_hour_usd", "power_w", "tokens_per_joule")


def _cost_changes(name: str, a: Mapping[str, Any], b: Mapping[str, Any],
                  threshold: float = 0.0, section: str = "cost",
                  keys: tuple[str, ...] = COST_METRICS) -> tuple[list[ResultChange], int]:
    """The plan's changed cost and power (``cost.cost_per_mtok_usd``, ...), or with a phase's ``section``
    and ``diff_keys`` (``ccost.schema.PHASE_KINDS``; a serve plan's request figures), beyond ``threshold``."""
    ca, cb = a.get(section) or {}, b.get(section) or {}
    out, small = [], 0
    for key in keys:
        va, vb = ca.get(key), cb.get(key)
        if _same(va, vb):
            continue
        if _small(va, vb, threshold):
            small += 1
            continue
        metric = f"{section}.{key}"
        delta = (vb - va) / abs(va) if _number(va) and _number(vb) and va != 0 else None
        out.append(ResultChange(name, metric, va, vb, format_metric(va, metric), format_metric(vb, metric),
                                delta))
    return out, small


def _mark_implied(changes: list[ResultChange], a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ResultChange]:
    """Mark the results that follow from another listed one, so that one change reads as one line."""
    listed = {c.metric for c in changes}

    def same(key: str) -> bool:
        return _same(a.get(key), b.get(key))

    def equal_on_both_sides(x: str, y: str) -> bool:
        return _same(a.get(x), a.get(y)) and _same(b.get(x), b.get(y))

    def ratio_unchanged(x: str, y: str) -> bool:
        ra = a.get(x) / a[y] if _number(a.get(x)) and _number(a.get(y)) and a[y] else None
        rb = b.get(x) / b[y] if _number(b.get(x)) and _number(b.get(y)) and b[y] else None
        return ra is not None and rb is not None and _same(float(ra), float(rb))

    def diff_unchanged(x: str, y: str) -> bool:
        if not all(_number(d.get(k)) for d in (a, b) for k in (x, y)):
            return False
        return _same(float(a[x] - a[y]), float(b[x] - b[y]))

    rules: dict[str, tuple[str, bool]] = {
        # metric: (the listed result it follows from, whether it does here)
        "latency_s": ("step_time_s", equal_on_both_sides("latency_s", "step_time_s")),
        "speedup": ("efficiency", True),  # efficiency = speedup / GPUs (a change of GPUs is listed itself)
        "eta": ("exposed_comm_s" if "exposed_comm_s" in listed else "compute_time_s", True),
        "throughput_tokens_s": ("step_time_s", same("tokens_per_step")),
        "throughput_per_gpu": ("throughput_tokens_s", True),
        "exposed_comm_s": ("comm_time_s", ratio_unchanged("exposed_comm_s", "comm_time_s")),
        "memory_bytes_per_gpu": ("weight_bytes_per_gpu",
                                 diff_unchanged("memory_bytes_per_gpu", "weight_bytes_per_gpu")),
    }

    def parent(metric: str) -> str | None:
        """The listed result ``metric`` follows from here (a chain such as throughput per GPU → throughput
        → step time hides both), or None when it stands on its own."""
        rule = rules.get(metric)
        return rule[0] if rule is not None and rule[1] and rule[0] in listed and rule[0] != metric else None

    return [dataclasses.replace(c, implied_by=parent(c.metric)) for c in changes]


def _checklist_changes(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[StatusChange]:
    ia = {item.get("id"): item for item in a.get("checklist") or []}
    ib = {item.get("id"): item for item in b.get("checklist") or []}
    out = []
    for key in list(ia) + [k for k in ib if k not in ia]:
        sa, sb = ia.get(key, {}).get("status"), ib.get(key, {}).get("status")
        if sa != sb:
            title = (ib.get(key) or ia.get(key) or {}).get("title", "")
            out.append(StatusChange(name, key, title, sa, sb))
    return out


def _point_text(v: Any) -> str:
    """``{tp: 8}`` → ``tp = 8``; ``{"0.7": {tp: 8}, "0.5": null}`` → ``≥ 70 %: tp = 8; ≥ 50 %: none``."""
    from ccost.output import fmt_field

    if v is None:
        return "none"
    if isinstance(v, Mapping) and all(isinstance(x, Mapping) or x is None for x in v.values()) and v:
        return "; ".join(f"≥ {units.format_percent(float(k))}: {_point_text(x)}" for k, x in v.items())
    if isinstance(v, Mapping):
        return ", ".join(f"{k} = {fmt_field(k, x)}" for k, x in v.items()) or "none"
    return format_input(v, None)


def _sweep_changes(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ResultChange]:
    """A sweep's answers (its optima), not its every point: the points follow from inputs shown above."""
    out = []
    for key in ("time_optimal", "cost_optimal", "continuous_optimum"):
        va, vb = a.get(key), b.get(key)
        if va == vb or (_number(va) and _number(vb) and _same(float(va), float(vb))):
            continue
        delta = (vb - va) / abs(va) if _number(va) and _number(vb) and va != 0 else None
        out.append(ResultChange(f"sweep {name}", key, va, vb, _point_text(va), _point_text(vb), delta))
    return out


def compare(old: Side, new: Side, threshold: float = DEFAULT_THRESHOLD) -> SpecDiff:
    """Everything that changed from ``old`` to ``new``, unchanged values left out, and results whose
    relative change is below ``threshold`` too (0 lists every change)."""
    dims = _dims()
    ea, eb = _entities(old.spec), _entities(new.spec)
    root = _std_root()
    # Blocks of the bundled library are not the spec's own: a new spec that imports std/gpus.ccost did
    # not "add" forty GPUs. The import is what changed.
    sa_imp, sb_imp = _std_imports(old.spec, root), _std_imports(new.spec, root)
    added = tuple(k for k in eb if k not in ea and not _from_std(eb[k], root, sb_imp))
    removed = tuple(k for k in ea if k not in eb and not _from_std(ea[k], root, sa_imp))
    inputs: list[InputChange] = []
    for key in eb:
        if key in ea:
            inputs += _input_changes(key[0], key[1], ea[key], eb[key], dims)
    policy: list[InputChange] = []
    if old.spec is not None and new.spec is not None:
        policy = _input_changes("policy", "policy", old.spec.policy, new.spec.policy, dims)

    ra, rb = old.results or {}, new.results or {}
    pa, pb = ra.get("plans") or {}, rb.get("plans") or {}
    results: list[ResultChange] = []
    checklist: list[StatusChange] = []
    below = 0
    for name in pb:
        if name in pa:
            changed, small = _result_changes(name, pa[name], pb[name], threshold)
            results += changed
            below += small
            changed, small = _cost_changes(name, pa[name], pb[name], threshold)
            results += changed
            below += small
            for kind in PHASE_KINDS:  # a phase's own figures a diff lists (a serve plan's: ccost.model.serve)
                if kind.diff_keys:
                    changed, small = _cost_changes(name, pa[name], pb[name], threshold, kind.section,
                                                   kind.diff_keys)
                    results += changed
                    below += small
            checklist += _checklist_changes(name, pa[name], pb[name])
    sa, sb = ra.get("sweeps") or {}, rb.get("sweeps") or {}
    for name in sb:
        if name in sa:
            results += _sweep_changes(name, sa[name], sb[name])
    ca, cb = ra.get("compares") or {}, rb.get("compares") or {}
    compares: list[CompareChange] = []
    for name in cb:
        if name in ca:
            a, b = ca[name], cb[name]
            rka, rkb = tuple(a.get("ranking") or ()), tuple(b.get("ranking") or ())
            if rka != rkb:  # the same ranking with new numbers in its sentence is not a new answer
                compares.append(CompareChange(name, rka, rkb, a.get("recommendation"),
                                              b.get("recommendation")))
    summaries = [_summary(n, pb[n], "added") for k, n in added if k == "plan" and n in pb]
    summaries += [_summary(n, pa[n], "removed") for k, n in removed if k == "plan" and n in pa]
    return SpecDiff(old.label, new.label, old.spec is None, added, removed, tuple(inputs), tuple(results),
                    tuple(checklist), tuple(compares), tuple(policy), tuple(summaries), threshold, below,
                    tuple(sorted(sb_imp - sa_imp)), tuple(sorted(sa_imp - sb_imp)))


# The numbers shown for a plan that is added or removed.
SUMMARY = ("gpus", "step_time_s", "overhead", "efficiency", "memory_bytes_per_gpu")


def _summary(name: str, doc: Mapping[str, Any], side: str) -> PlanSummary:
    values = tuple((m, doc[m]) for m in SUMMARY if m in doc)
    fails = tuple(i.get("id") for i in doc.get("checklist") or [] if i.get("status") == "fail")
    return PlanSummary(name, side, values, fails)


# ---------------------------------------------------------------------------------------------------
# Rendering

def _signed(x: float) -> str:
    sign = "+" if x > 0 else ("−" if x < 0 else "±")
    return f"{sign}{units.format_quantity(abs(x), units.DIMENSIONLESS, digits=3)}"


def _input_line(c: InputChange) -> str:
    where = "policy" if c.kind == "policy" else f"{c.kind} {c.block}"
    return f"{where}.{c.field}: {c.old_text} → {c.new_text}"


def _status(s: str | None) -> str:
    return "—" if s is None else s


def _names(items: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k} {n}" for k, n in items)


@dataclass(frozen=True)
class _Style:
    """How ``to_text`` and ``to_markdown`` write the checklist and comparison changes: the same facts, two
    layouts."""
    checklist_head: tuple[str, ...]
    checklist_row: str  # fields: plan, id, title, old, new
    compares_head: tuple[str, ...]
    compare_row: str  # fields: compare, old, new
    recommendation_row: str  # fields: when (was/now), text
    section_end: tuple[str, ...] = ()
    escape: Any = str


_TEXT = _Style(("", "checklist status changed:"), "  {plan} checklist {id} ({title}): {old} → {new}",
               ("", "comparisons changed:"), "  {compare}: ranking {old} → {new}", "    {when}: {text}")
_MARKDOWN = _Style(("#### Checklist status changed", "", "| plan | # | item | old | new |", "|---|---:|---|---|---|"),
                   "| `{plan}` | {id} | {title} | {old} | **{new}** |", ("#### Comparisons changed", ""),
                   "- `{compare}`: ranking {old} → **{new}**", "  - {when}: {text}", ("",), escape=lambda t: _md(t))


def _status_changes(d: SpecDiff, style: _Style) -> list[str]:
    """The checklist items whose verdict changed, then the comparisons whose ranking changed (with the
    recommendation before and after when that changed too)."""
    out: list[str] = []
    if d.checklist:
        out += style.checklist_head
        out += [style.checklist_row.format(plan=c.plan, id=c.id, title=style.escape(c.title), old=_status(c.old),
                                           new=_status(c.new)) for c in d.checklist]
        out += style.section_end
    if d.compares:
        out += style.compares_head
        for c in d.compares:
            out.append(style.compare_row.format(compare=c.compare, old=", ".join(c.old_ranking) or "—",
                                                new=", ".join(c.new_ranking) or "—"))
            if c.old_recommendation != c.new_recommendation:
                out += [style.recommendation_row.format(when=when, text=style.escape(text or "—"))
                        for when, text in (("was", c.old_recommendation), ("now", c.new_recommendation))]
        out += style.section_end
    return out


def _threshold_note(d: SpecDiff) -> str | None:
    if not d.below_threshold:
        return None
    n = d.below_threshold
    return (f"{n} smaller change{'s' if n != 1 else ''} (under {units.format_percent(d.threshold)}) not "
            "listed; --all lists every change")


def to_text(d: SpecDiff) -> str:
    """The diff for a terminal: sections with one change a line, nothing for what did not change."""
    out = [f"ccost diff {d.old_label} → {d.new_label}"]
    if d.old_absent:
        out.append(f"The spec did not exist at {d.old_label}: everything in it is added.")
    if d.empty and not d.old_absent:
        out.append("No change to inputs or results.")
        return "\n".join(out) + "\n"
    if d.plans_added:
        out.append("plans added: " + ", ".join(d.plans_added))
        out += [f"  {s.text()}" for s in d.summaries if s.side == "added"]
    if d.plans_removed:
        out.append("plans removed: " + ", ".join(d.plans_removed))
        out += [f"  {s.text()}" for s in d.summaries if s.side == "removed"]
    other_added = tuple(k for k in d.blocks_added if k[0] != "plan")
    other_removed = tuple(k for k in d.blocks_removed if k[0] != "plan")
    if other_added:
        out.append("blocks added: " + _names(other_added))
    if other_removed:
        out.append("blocks removed: " + _names(other_removed))
    if d.imports_added:
        out.append("library imported: " + ", ".join(d.imports_added))
    if d.imports_removed:
        out.append("library no longer imported: " + ", ".join(d.imports_removed))
    if d.inputs or d.policy:
        out += ["", "inputs changed:"] + [f"  {_input_line(c)}" for c in d.inputs + d.policy]
    shown = d.shown_results
    if shown:
        out += ["", "results changed:"]
        for r in shown:
            delta = f" ({r.delta_text})" if r.delta_text else ""
            out.append(f"  {r.plan} {r.label}: {r.old_text} → {r.new_text}{delta}")
    note = _threshold_note(d)
    if note:
        out += [f"  ({note})"] if shown else ["", f"({note})"]
    out += _status_changes(d, _TEXT)
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    """Make text safe in a Markdown table cell: `|` would end the cell, `<` could open HTML, a newline would
    end the row. Underscores and backticks stay: GitHub renders `tp8_pp2` and code spans as meant."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


# Results a reviewer weighs first; in Markdown the others fold away when there are many.
HEADLINE = ("gpus", "step_time_s", "overhead", "efficiency", "memory_bytes_per_gpu", "fits_memory", "regime")
MD_SHORT = 12


def _md_results(rows: tuple[ResultChange, ...] | list[ResultChange]) -> list[str]:
    out = ["| plan | result | old | new | Δ |", "|---|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| `{r.plan}` | {_md(r.label)} | {_md(r.old_text)} | {_md(r.new_text)} | "
                   f"{r.delta_text or '—'} |")
    return out + [""]


def to_markdown(d: SpecDiff) -> str:
    """The diff as a pull-request comment: a heading, then one table per section that has changes."""
    out = [f"### ccost diff: `{d.old_label}` → `{d.new_label}`", ""]
    if d.old_absent:
        out += [f"The spec did not exist at `{d.old_label}`: everything in it is added.", ""]
    if d.empty and not d.old_absent:
        out += ["No change to inputs or results.", ""]
        return "\n".join(out)
    if d.blocks_added:
        out += ["**Added:** " + ", ".join(f"{k} `{n}`" for k, n in d.blocks_added), ""]
    if d.blocks_removed:
        out += ["**Removed:** " + ", ".join(f"{k} `{n}`" for k, n in d.blocks_removed), ""]
    if d.imports_added:
        out += ["**Library imported:** " + ", ".join(f"`{f}`" for f in d.imports_added), ""]
    if d.imports_removed:
        out += ["**Library no longer imported:** " + ", ".join(f"`{f}`" for f in d.imports_removed), ""]
    for side in ("added", "removed"):
        rows = [s for s in d.summaries if s.side == side]
        if rows:
            out += [f"#### Plans {side}", "", "| plan | " + " | ".join(R.label(m) for m in SUMMARY)
                    + " | checklist fails |", "|---|" + "---:|" * len(SUMMARY) + "---|"]
            for s in rows:
                vals = dict(s.values)
                cells = [_md(format_metric(vals[m], m)) if m in vals else "—" for m in SUMMARY]
                out.append(f"| `{s.plan}` | " + " | ".join(cells) + " | "
                           + (", ".join(str(i) for i in s.fails) or "none") + " |")
            out.append("")
    if d.inputs or d.policy:
        out += ["#### Inputs changed", "", "| block | field | old | new |", "|---|---|---:|---:|"]
        for c in d.inputs + d.policy:
            block = "policy" if c.kind == "policy" else f"{c.kind} `{c.block}`"
            out.append(f"| {block} | `{c.field}` | {_md(c.old_text)} | {_md(c.new_text)} |")
        out.append("")
    shown = d.shown_results
    if shown:
        out += ["#### Results changed", ""]
        head = [r for r in shown if r.metric in HEADLINE]
        if len(shown) <= MD_SHORT or not head:
            out += _md_results(shown)
        else:
            # A pull-request comment shows what a reviewer weighs first; the rest folds away.
            out += _md_results(head)
            out += [f"<details><summary>All {len(shown)} changed results</summary>", ""]
            out += _md_results(shown)
            out += ["</details>", ""]
    note = _threshold_note(d)
    if note:
        out += [f"_{note[0].upper() + note[1:]}._", ""]
    out += _status_changes(d, _MARKDOWN)
    return "\n".join(out)


def to_document(d: SpecDiff) -> dict[str, Any]:
    """The diff as a JSON-ready document: machine units, formatted texts beside them, stable key order."""
    def inp(c: InputChange) -> dict[str, Any]:
        return {"kind": c.kind, "block": c.block, "field": c.field, "old": c.old, "new": c.new,
                "old_text": c.old_text, "new_text": c.new_text}

    return {
        "old": d.old_label,
        "new": d.new_label,
        "old_absent": d.old_absent,
        "plans_added": list(d.plans_added),
        "plans_removed": list(d.plans_removed),
        "plan_summaries": [{"plan": s.plan, "side": s.side, **dict(s.values), "checklist_fails": list(s.fails)}
                           for s in d.summaries],
        "blocks_added": [{"kind": k, "name": n} for k, n in d.blocks_added],
        "blocks_removed": [{"kind": k, "name": n} for k, n in d.blocks_removed],
        "inputs": [inp(c) for c in d.inputs + d.policy],
        "library_imported": list(d.imports_added),
        "library_no_longer_imported": list(d.imports_removed),
        "threshold": d.threshold,
        "below_threshold": d.below_threshold,
        "results": [{"plan": r.plan, "metric": r.metric, "label": r.label, "old": r.old, "new": r.new,
                     "delta": r.delta, "old_text": r.old_text, "new_text": r.new_text,
                     "implied_by": r.implied_by} for r in d.results],
        "checklist": [{"plan": c.plan, "id": c.id, "title": c.title, "old": c.old, "new": c.new}
                      for c in d.checklist],
        "compares": [{"compare": c.compare, "old_ranking": list(c.old_ranking),
                      "new_ranking": list(c.new_ranking), "old_recommendation": c.old_recommendation,
                      "new_recommendation": c.new_recommendation} for c in d.compares],
    }
