"""View models: everything a review template shows, as frozen dataclasses of ready-to-print strings.

Built from three things only (principle: one formula for every number; the report never re-types or recomputes
a number): the results document (``ccost.evaluate.results_document``, docs/interface.md's normative keys), the
derivation steps of each plan (``ccost.evaluate.explain``, the same ``derive.Step`` values ``ccost explain``
prints), and the checked spec for the inputs the user wrote. This module formats; it does no arithmetic on
results. Templates then only loop and print (coverage.py's html.py does the same split).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccost import output, results, schema, units
from ccost.report.provenance import Provenance

# ----------------------------------------------------------------------------------------------------
# Formatting of result-document values, by key. SI floats in, text out.

# Result keys print by their record in ccost.results (its dimension and labels); plan inputs by their field
# type in ccost.schema (a fraction field prints in %).
_INPUT_FRACTIONS = frozenset(f.name for b in schema.SCHEMA.values() for f in b.fields if f.type.kind == "fraction")

# The key numbers of a plan, in the order the summary and the plan sections show them.
KEY_NUMBERS = ("gpus", "step_time_s", "compute_time_s", "comm_time_s", "latency_term_s",
               "bandwidth_term_s", "exposed_comm_s", "overhead", "speedup", "efficiency", "bubble",
               "regime", "weight_bytes_per_gpu", "memory_bytes_per_gpu", "fits_memory")


def fmt_value(key: str, value: Any) -> str:
    """One value of the results document as a reader sees it: ``0.00448`` under ``*_s`` is ``4.48 ms``."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ", ".join(f"{k} = {fmt_value(k, v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt_value(key, v) for v in value)
    if not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return units.format_quantity(value, units.DIMENSIONLESS)
    rec = results.record(key)
    dim = rec.dimension if rec is not None else ""
    if dim == "rate":  # tokens (requests) per second, not a time
        return results.fmt_num(float(value))
    if dim == "time":
        return output.fmt_time(value)
    if dim == "gb":
        return output.fmt_gb(value)  # decimal, like the capacities it is compared with (80 GB)
    if dim == "bytes":
        return output.fmt_bytes(value)
    if dim == "fraction" or (rec is None and key in _INPUT_FRACTIONS):
        return output.fmt_pct(value)
    if dim == "ratio":
        return f"{results.fmt_num(float(value), 3)}×"
    if dim == "money":
        return units.format_quantity(value, units.MONEY)
    if dim == "energy":
        return units.format_quantity(value, units.ENERGY)
    if not dim:  # an input field, a key of a derivation step, or a record with no number's dimension
        if key.endswith("_s") or key.endswith("_time") or key in ("alpha", "latency", "one_shot_latency"):
            return output.fmt_time(value)
        if key.endswith("_bytes") or "_bytes_" in key or key in ("memory", "weight_bytes"):
            return output.fmt_bytes(value)
        if key.endswith("bandwidth") or key.endswith("_bytes_per_s"):
            return units.format_quantity(value, units.BANDWIDTH)
        if key.endswith("flops"):
            return units.format_quantity(value, units.FLOP_RATE)
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return results.fmt_num(float(value))


def label(key: str, context: str = "review") -> str:
    """A result key as the review heads it (``context``: review, short, search, compare; see
    ``ccost.results.Key``), else the key with its unit suffix dropped."""
    return results.label_in(key, context)


# ----------------------------------------------------------------------------------------------------
# The view-model dataclasses.

@dataclass(frozen=True)
class Table:
    """A plain table: header cells, rows of text cells; ``numeric`` marks right-aligned columns."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...] = ()
    caption: str = ""
    highlight: tuple[int, ...] = ()  # row indexes to emphasise (the optimum of a sweep, say)
    wide: bool = False  # many columns: the print layout shrinks the font rather than overflow


@dataclass(frozen=True)
class Figure:
    svg: str  # an <svg> element made by ccost.report.charts (trusted: never spec text)
    caption: str


@dataclass(frozen=True)
class Step:
    index: int
    name: str
    description: str
    formula: str
    substituted: str
    result: str
    one_line: bool = False  # short enough for `name = formula = substituted = result` on one line


@dataclass(frozen=True)
class ChecklistRow:
    id: str
    title: str
    status: str  # pass, warn, fail, n/a
    value: str
    threshold: str
    note: str

    @property
    def css(self) -> str:
        return {"pass": "pass", "warn": "warn", "fail": "fail"}.get(self.status, "na")


@dataclass(frozen=True)
class PlanChecklist:
    plan: str
    title: str
    rows: tuple[ChecklistRow, ...]
    counts: str  # "7 pass · 2 warn · 0 fail · 1 n/a"


@dataclass(frozen=True)
class StepGroup:
    heading: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Section:
    """What every section of the review for a block of the spec has: the block's name (its anchor) and its
    title (the name where the spec gives none)."""

    name: str
    title: str


@dataclass(frozen=True)
class PlanSection(Section):
    key_numbers: Table
    collectives: Table
    inputs: Table  # the derivation's inputs: symbol, value, meaning, where it came from
    groups: tuple[StepGroup, ...]  # the derivation's steps, grouped (each collective, compute, ...)
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    memory: Table | None = None  # what the memory per GPU is made of (training: activations too)


@dataclass(frozen=True)
class SweepSection(Section):
    base: str
    fields: str
    table: Table
    optima: tuple[str, ...]
    figures: tuple[Figure, ...]


@dataclass(frozen=True)
class SearchSection(Section):
    base: str
    objective: str
    counts: str
    constraints: Table
    top: Table
    pareto: Table
    figure: Figure | None = None  # the Pareto front: latency against tokens/s per GPU (ccost.search)
    top_note: str = ""  # how the top list was chosen, when not plainly (ccost.search.DISTINCT_NOTE)
    target: Table | None = None  # a training target's front: time to train against cost (ccost.model.target)
    target_note: str = ""
    target_figure: Figure | None = None


@dataclass(frozen=True)
class CapacitySection(Section):
    """A capacity search (ccost.capacity): the chapter "Capacity for the demand"."""

    verdict: str  # the answer in a sentence: the fleet to buy, its cost, the latencies at the peak
    demand: Table  # the traffic, the rate sized for, the SLOs
    answers: Table  # aggregated, disaggregated and N+1 side by side
    figure: Figure | None  # p50 and p99 TTFT and TPOT of each answer against the SLOs
    growth: str  # what 1.5× the traffic would need
    layouts: Table  # per layout, the highest rate one replica carries and the GPUs the sized rate needs
    launch: tuple[tuple[str, str], ...]  # (what, command) for the chosen fleet (ccost.launch)
    method: str  # how the figures were obtained
    missed: Table | None = None  # cheaper fleets the simulation rejected, and what each misses


@dataclass(frozen=True)
class TargetSection(Section):
    """A plan's training target (ccost.model.target): the chapter "Time to train"."""

    verdict: str  # the answer in a sentence: how long, at what goodput, whether the deadline holds
    target: Table  # what to train: tokens, steps, global batch, deadline, GPU budget
    fleet: Table  # the GPUs, the layout, the step
    timeline: Table  # the calendar: training, checkpoints, restarts, re-done work; goodput
    cost: Table  # GPU-days, energy, cost
    doubling: Table | None  # this fleet against twice the GPUs with the global batch held
    doubling_note: str
    sources: tuple[tuple[str, str], ...]  # (input, where it came from)
    figure: Figure | None = None  # the timeline, this fleet and twice it


@dataclass(frozen=True)
class CompareSection(Section):
    by: str
    ranking: tuple[str, ...]
    recommendation: str
    table: Table
    figure: Figure | None


@dataclass(frozen=True)
class Summary:
    recommendations: tuple[tuple[str, str], ...]  # (compare title, recommendation)
    plans: Table
    verdicts: Table
    warnings: tuple[str, ...]
    cost: Table | None = None  # money and power per plan; None when no plan is priced or powered
    cost_note: str = ""  # what the cost table assumes, or why there is none


@dataclass(frozen=True)
class InputsSection:
    tables: tuple[tuple[str, Table], ...]  # (heading, table)


@dataclass(frozen=True)
class Assumption:
    topic: str
    text: str


@dataclass(frozen=True)
class SourceFile:
    path: str
    html: str  # Pygments output, inline styles; escaped by Pygments


@dataclass(frozen=True)
class ReportView:
    title: str
    spec_name: str
    provenance: Provenance
    summary: Summary
    inputs: InputsSection
    plans: tuple[PlanSection, ...]
    checklists: tuple[PlanChecklist, ...]
    sweeps: tuple[SweepSection, ...]
    compares: tuple[CompareSection, ...]
    searches: tuple[SearchSection, ...]
    assumptions: tuple[Assumption, ...]
    not_modelled: tuple[Assumption, ...]
    sources: tuple[SourceFile, ...]
    source_css: str = ""
    about: str = ""  # the spec's own opening comment: what it is for, in its author's words
    targets: tuple[TargetSection, ...] = ()  # the chapter "Time to train": plans with a training target
    capacities: tuple[CapacitySection, ...] = ()  # the chapter "Capacity for the demand": capacity searches
    extra: Mapping[str, Any] = field(default_factory=dict)
