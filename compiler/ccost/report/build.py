"""Build a ``ReportView`` from the results document, the derivation steps and the checked spec.

The only arithmetic here is layout (counting checklist verdicts, numbering steps); every printed number
is a value of the results document or of a derivation step, formatted (``view.fmt_value``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ccost import axes, output, results, units
from ccost.model import phases
from ccost import spec as S
from ccost.model.analysis import COMPARE_METRICS  # compare `by` -> the key it ranks on, as analysis.rank does
from ccost.model.analysis import VALUE_KEYS  # checklist item id -> the key its value prints as (analysis.ITEMS)
from ccost.model.analysis import ranked_down  # why rank put a plan below a better metric
from ccost.evaluate import GPU_AXES  # the sweep fields along which optima mean something
from ccost.report import view as V
from ccost.report.provenance import Provenance
from ccost.schema import PHASE_KINDS, phase_kind

STATUSES = ("pass", "warn", "fail", "n/a")


@dataclass(frozen=True)
class Calibration:
    """A calibration plot of a measured link (from ``ccost.calibrate``), or why there is none."""

    link: str
    svg: str | None
    note: str


# ----------------------------------------------------------------------------------------------------
# Inputs: what the user wrote, with units and sources.

def _q(value: float | None, dim) -> str:
    return "—" if value is None else units.format_quantity(value, dim)


def _used_entities(spec: S.Spec, plan_names: Iterable[str]):
    plans = [spec.plans[n] for n in plan_names if n in spec.plans]
    clusters: dict[str, S.Cluster] = {}
    models: dict[str, S.Model] = {}
    gpus: dict[str, S.Gpu] = {}
    links: dict[str, S.Link] = {}
    for p in plans:
        if p.cluster is not None:
            clusters.setdefault(p.cluster.name, p.cluster)
            if p.cluster.gpu is not None:
                gpus.setdefault(p.cluster.gpu.name, p.cluster.gpu)
            for link in (p.cluster.intra_node, p.cluster.inter_node):
                if link is not None:
                    links.setdefault(link.name, link)
        if p.model is not None:
            models.setdefault(p.model.name, p.model)
    return plans, clusters, models, gpus, links


def link_provenance(link: S.Link) -> str:
    if link.measured:
        return "measured"
    if not link.source:
        return "spec sheet"
    if link.source.strip().lower().startswith("spec sheet"):
        return link.source.strip()
    return f"spec sheet ({link.source})"


def _money_inputs(clusters) -> V.Table | None:
    """Per cluster: the price of a GPU-hour and the power per GPU the cost model uses, with where each
    comes from (``ccost.model.economics.pricing``); None when no cluster is priced or powered."""
    from ccost.model import economics

    rows = []
    for c in clusters.values():
        pr = economics.pricing(c)
        if not (pr.priced or pr.powered):
            continue
        if pr.price_gpu is not None:
            price = f"{_q(pr.price_gpu, units.MONEY_RATE)} ({pr.price_source})"
        elif pr.price_node is not None:
            price = (f"{_q(pr.price_node / pr.gpus_per_node, units.MONEY_RATE)} = "
                     f"{_q(pr.price_node, units.MONEY_RATE)} per node / {pr.gpus_per_node}")
        else:
            price = "not priced"
        if pr.node_power is not None:
            power = f"{_q(pr.node_power, units.POWER)} per node ({pr.power_source})"
        elif pr.gpu_power is not None:
            power = f"{_q(pr.gpu_power, units.POWER)} ({pr.power_source})"
            if pr.host_power:
                power += f" + {_q(pr.host_power, units.POWER)} host per node"
        else:
            power = "—"
        rows.append((c.name, price, power, units.format_quantity(pr.pue, units.DIMENSIONLESS),
                     _q(pr.electricity_price, units.ENERGY_PRICE) if pr.electricity_price else "— (in the price)"))
    if not rows:
        return None
    return V.Table(("cluster", "price of a GPU-hour", "power", "PUE", "electricity"), tuple(rows),
                   (False, False, False, True, True))


def build_inputs(spec: S.Spec, plan_names: Sequence[str]) -> V.InputsSection:
    plans, clusters, models, gpus, links = _used_entities(spec, plan_names)
    T, INF, BW, FR = units.TIME, units.INFORMATION, units.BANDWIDTH, units.FLOP_RATE
    tables: list[tuple[str, V.Table]] = []
    tables.append(("GPUs", V.Table(
        ("name", "memory", "HBM bandwidth", "peak FLOP/s", "achieved FLOP/s", "source"),
        tuple((f"{g.name} — {g.label}" if g.title else g.name, _q(g.memory, INF), _q(g.hbm_bandwidth, BW),
               _q(g.flops, FR),
               _q(g.achieved_flops, FR) if g.achieved_flops is not None else "— (peak used)",
               g.source or "—") for g in gpus.values()),
        (False, True, True, True, True, False))))
    tables.append(("Links", V.Table(
        ("name", "α per hop", "bandwidth", "efficiency", "one-shot latency", "α, β from"),
        tuple((f"{k.name} — {k.label}" if k.title else k.name, _q(k.alpha, T), _q(k.bandwidth, BW),
               units.format_percent(k.efficiency),
               _q(k.one_shot, T) + ("" if k.one_shot_latency is not None else " (= α)"),
               ("measured: " + k.source.split(":", 1)[-1].strip()) if k.measured
               else (k.source or "spec sheet (no source given)")) for k in links.values()),
        (False, True, True, True, True, False))))
    tables.append(("Clusters", V.Table(
        ("name", "GPU", "nodes × GPUs/node", "NVLink domain", "intra-node", "inter-node"),
        tuple((f"{c.name} — {c.label}" if c.title else c.name, c.gpu.name if c.gpu else "—",
               f"{c.nodes} × {c.gpus_per_node}", f"{c.domain}",
               c.intra_node.name if c.intra_node else "—", c.inter_node.name if c.inter_node else "—")
              for c in clusters.values()),
        (False, False, True, True, False, False))))
    money = _money_inputs(clusters)
    if money is not None:
        tables.append(("Prices and power", money))
    tables.append(("Models", V.Table(
        ("name", "layers L", "hidden d", "heads / KV heads", "params", "weights", "dtypes w / act / kv",
         "MoE"),
        tuple((f"{m.name} — {m.label}" if m.title else m.name, f"{m.layers:,}", f"{m.hidden:,}",
               f"{m.heads or '—'} / {m.kv_heads or '—'}",
               units.format_quantity(m.params, units.DIMENSIONLESS) if m.params else "—",
               _q(m.total_weight_bytes, INF) + (" (given)" if m.weight_bytes is not None else ""),
               f"{m.weights} / {m.activations} / {m.kv_cache}",
               (f"{m.experts} experts, top-{m.top_k}" if m.is_moe else "—")) for m in models.values()),
        (False, True, True, True, True, True, False, False), wide=True)))
    given = any(p.compute_time is not None for p in plans)  # a column only when some plan sets it
    on = frozenset().union(*(axes.shown(p) for p in plans))  # an optional degree: a column part when some plan uses it
    tables.append(("Plans: layouts", V.Table(
        ("plan", "model / cluster", "phase", "batch", "seq", axes.label(on), "micro-batches", "AllReduce",
         "cross-node", "overlap", *(("compute time given",) if given else ())),
        tuple((p.name, f"{p.model.name if p.model else '—'} / {p.cluster.name if p.cluster else '—'}",
               p.phase, *phase_kind(p.phase).cells(p),  # batch and seq (a serve plan: requests, tokens)
               axes.values(p, on) + (" (FSDP)" if p.fsdp else ""), f"{p.microbatches}",
               p.allreduce, p.cross_node, units.format_percent(p.overlap),
               *((_q(p.compute_time, T),) if given else ()))
              for p in plans),
        (False, False, False, True, True, True, True, False, False, True, *((True,) if given else ())),
        wide=True)))
    return V.InputsSection(tuple((h, t) for h, t in tables if t.rows))


# ----------------------------------------------------------------------------------------------------
# Plans: key numbers, collectives, derivation steps.

def key_numbers_table(doc_plan: Mapping[str, Any], said: Sequence[str] = ()) -> V.Table:
    """The plan's key numbers, two quantity/value pairs a row; ``said``: the plan's notes (a sentence they
    already carry, an online plan's method, is not repeated under the table)."""
    rows = []
    for key in V.KEY_NUMBERS:
        if key in doc_plan:
            rows.append((V.label(key), V.fmt_value(key, doc_plan[key])))
    if "throughput_tokens_s" in doc_plan:
        rows.append((V.label("throughput_tokens_s"), throughput(doc_plan)))
    for kind in PHASE_KINDS:  # the phase's own section (ccost.schema: training, serve)
        if kind.section and doc_plan.get(kind.section):
            rows += SECTION_ROWS.get(kind.section, partial(section_rows, kind.section))(doc_plan[kind.section])
    # A sentence (an online plan's method, say) is no number: it goes under the table, where it wraps, not in
    # a right-aligned value cell that does not (it ran 730 px past the page's margin)
    prose = [(q, v) for q, v in rows if len(v) > KV_VALUE_CHARS and not any(v in n for n in said)]
    rows = [r for r in rows if len(r[1]) <= KV_VALUE_CHARS]
    # Two quantity/value pairs a row: the block stays short enough to share the page with the derivation.
    half = (len(rows) + 1) // 2
    left, right = rows[:half], rows[half:] + [("", "")] * (2 * half - len(rows))
    return V.Table(("quantity", "value", "quantity", "value"), tuple(a + b for a, b in zip(left, right)),
                   (False, True, False, True), caption=" ".join(f"{q}: {v}." for q, v in prose))


#: The longest value the key-numbers table holds in a cell (a number with its unit and a note in brackets).
KV_VALUE_CHARS = 40


def training_rows(tr: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A training plan's model FLOP/s and MFU (ccost.model.training) for its key-numbers table."""
    return [(V.label("training.model_flops_per_gpu_s"),
             units.format_quantity(tr["model_flops_per_gpu_s"] or 0.0, units.FLOP_RATE)),
            (V.label("training.mfu"), V.fmt_value("efficiency", tr["mfu"]))]


def section_rows(section: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A phase's own section without rows of its own here: each number with its label."""
    return [(V.label(f"{section}.{k}"), V.fmt_value(f"{section}.{k}", v)) for k, v in values.items()]


def serve_rows(sv: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A serve plan's request figures (ccost.model.serve) for its key-numbers table."""
    if not sv:
        return []
    tok, L = results.fmt_num, V.label
    per_gpu = lambda key: f"{tok(sv[key])} ({tok(sv[key + '_per_gpu'])}/GPU)"  # noqa: E731
    return [
        *[(L(k), V.fmt_value(k, sv[k])) for k in ("ttft_s", "tpot_s", "request_latency_s")],
        (L("requests_per_s"), tok(sv["requests_per_s"])),
        *[(L(k), per_gpu(k)) for k in ("output_tokens_per_s", "total_tokens_per_s")],
        (f"{L('decode_step_time_s')} / {L('mixed_step_time_s')}",
         f"{V.fmt_value('decode_step_time_s', sv['decode_step_time_s'])} / "
         f"{V.fmt_value('mixed_step_time_s', sv['mixed_step_time_s'])}"),
        (L("mixed_step_share"), units.format_percent(sv["mixed_step_share"])
         + (" (prefill saturated)" if sv["prefill_saturated"] else "")),
    ]


#: The key-number rows of a phase's section; a section not here shows each of its numbers (``section_rows``).
SECTION_ROWS = {"serve": serve_rows, "training": training_rows}


def throughput(doc_plan: Mapping[str, Any]) -> str:
    if doc_plan.get("throughput_tokens_s") is None:
        return "—"
    text = f"{units.format_quantity(doc_plan['throughput_tokens_s'], units.DIMENSIONLESS, digits=4)} tokens/s"
    if doc_plan.get("throughput_per_gpu") is not None:
        per_gpu = units.format_quantity(doc_plan["throughput_per_gpu"], units.DIMENSIONLESS, digits=4)
        text += f" ({per_gpu}/GPU)"
    return text


COLLECTIVE_COLUMNS = (("kind", "collective"), ("purpose", "purpose"), ("algorithm", "algorithm"),
                      ("count", "count/step"), ("group_size", "P"), ("link", "link"),
                      ("message_bytes", "message"), ("hops", "hops"), ("volume_bytes", "volume/GPU"),
                      ("latency_s", "latency"), ("bandwidth_s", "bandwidth"), ("time_s", "time each"))


def _breakable(name: str) -> str:
    """An identifier (``nvlink3_measured``, ``nvlink4+ib_ndr``) with a zero-width space after each ``_`` and
    ``+``: a narrow table column may wrap it there instead of growing past the page."""
    return name.replace("_", "_\u200b").replace("+", "+\u200b")


def collectives_table(doc_plan: Mapping[str, Any]) -> V.Table:
    rows = []
    for c in doc_plan.get("collectives") or ():
        rows.append(tuple(_breakable(V.fmt_value(k, c.get(k))) if k == "link" else V.fmt_value(k, c.get(k))
                          for k, _ in COLLECTIVE_COLUMNS))
    numeric = tuple(k in ("count", "group_size", "message_bytes", "hops", "volume_bytes", "latency_s",
                          "bandwidth_s", "time_s") for k, _ in COLLECTIVE_COLUMNS)
    return V.Table(tuple(h for _, h in COLLECTIVE_COLUMNS), tuple(rows), numeric, wide=True)


# Characters of monospace text that fit on one line of the A4 column at the step font size.
ONE_LINE_CHARS = 88


def _step_view(i: int, s: Any) -> V.Step:
    desc = s.description or ""
    if s.note:
        desc = f"{desc}; {s.note}" if desc else s.note
    substituted = "" if s.substituted in (s.formula, s.result) else s.substituted
    width = len(s.name) * (3 if substituted else 2) + len(s.formula) + len(substituted) + len(s.result)
    return V.Step(i, s.name, desc, s.formula, substituted, s.result, one_line=width <= ONE_LINE_CHARS)


def derivation(steps: Sequence[Any]) -> tuple[V.Table, tuple[V.StepGroup, ...]]:
    """``explain`` output as an inputs table and numbered step groups.

    ``steps`` is either the flat ``explain(spec, plan)`` list of ``derive.Step`` or the grouped
    ``explain_sections`` list of ``(heading, steps)``; inputs (``kind == "input"``) go to the table.
    """
    if steps and isinstance(steps[0], tuple):
        sections = [(h, list(ss)) for h, ss in steps]
    else:
        sections = [("derivation", list(steps))]
    inputs = []
    groups = []
    n = 0
    for heading, ss in sections:
        out = []
        for s in ss:
            if s.kind == "input":
                inputs.append((s.name, s.result, s.description or "", s.source or ""))
            else:
                n += 1
                out.append(_step_view(n, s))
        if out:
            groups.append(V.StepGroup(heading, tuple(out)))
    table = V.Table(("symbol", "value", "meaning", "from"), tuple(inputs), (False, True, False, False))
    return table, tuple(groups)


def collective_notes(c: Mapping[str, Any]) -> list[str]:
    """What the document says about how one collective was priced: the algorithm ``auto`` picked and the
    candidates it weighed, flat vs hierarchical pricing across nodes, the one-shot volume convention."""
    head = f"{c.get('kind')} ({c.get('purpose')})"
    out = []
    if c.get("reason"):
        out.append(f"{head}: {c['reason']}")
    cands = c.get("candidates")
    if isinstance(cands, Mapping) and cands:
        out.append(f"{head}: AllReduce algorithms weighed, time of one collective: "
                   + ", ".join(f"{a} {V.fmt_value('time_s', t)}" for a, t in cands.items())
                   + f"; priced with {c.get('algorithm')}.")
    alts = c.get("alternatives")
    if isinstance(alts, Mapping) and alts:
        out.append(f"{head}: the group spans nodes and is priced {c.get('cross_node', '?')}; one collective "
                   "would take " + ", ".join(f"{name} {V.fmt_value('time_s', a.get('time_s'))}"
                                             for name, a in alts.items() if isinstance(a, Mapping)) + ".")
    for key in ("one_shot_alternative", "one_shot_direct"):
        alt = c.get(key)
        if isinstance(alt, Mapping) and alt.get("note"):
            other = (f" (the other convention: {V.fmt_value('volume_bytes', alt.get('volume_bytes'))} "
                     "per GPU, "
                     f"{V.fmt_value('time_s', alt.get('time_s'))} a collective)"
                     if alt.get("time_s") is not None else "")
            out.append(f"{head}, one-shot volume: {alt['note']}{other}.")
    if c.get("note"):
        out.append(f"{head}: {c['note']}")
    return out


def plan_section(name: str, doc_plan: Mapping[str, Any], steps: Sequence[Any],
                 calibrations: Sequence[Calibration] = ()) -> V.PlanSection:
    notes = [n for c in doc_plan.get("collectives") or () for n in collective_notes(c)]
    figures = tuple(V.Figure(cal.svg, f"Calibration of link {cal.link}: {cal.note}")
                    for cal in calibrations if cal.svg)
    notes += [f"Calibration of link {cal.link}: {cal.note}" for cal in calibrations if not cal.svg]
    for ph in phases.PHASES.values():  # what the phase's own numbers mean (a serve plan's closed loop)
        if ph.note is not None and doc_plan.get(ph.kind.section):
            notes.insert(0, ph.note(doc_plan[ph.kind.section]))
    inputs, groups = derivation(steps)
    return V.PlanSection(name, doc_plan.get("title") or name, key_numbers_table(doc_plan, notes),
                         collectives_table(doc_plan), inputs, groups, figures, tuple(notes),
                         memory_table(doc_plan))


def memory_table(doc_plan: Mapping[str, Any]) -> V.Table:
    """Each part of the memory per GPU (the parts that are not zero), the total and the usable limit."""
    mem = doc_plan.get("memory") or {}
    rows = []
    for key in (p.key for p in results.MEMORY_PARTS):
        v = mem.get(key)
        if v:
            what = V.label(f"memory.{key}")
            if key == "activation_bytes" and doc_plan.get("training"):
                t = doc_plan["training"]
                what += (f" ({t['recompute']} recomputation, {V.fmt_value('', t['microbatches_in_flight'])} "
                         f"micro-batches in flight, {t['schedule']})")
            elif key in ("optimizer_bytes", "gradient_bytes") and doc_plan.get("training"):
                what += f" (sharding: {doc_plan['training']['optimizer_sharding']})"
            rows.append((what, V.fmt_value(f"memory.{key}", v)))
    if not rows:
        return V.Table(("part", "bytes per GPU"), (), (False, True))
    rows.append(("total", V.fmt_value("memory_bytes_per_gpu", doc_plan.get("memory_bytes_per_gpu"))))
    rows.append((V.label("memory.limit_bytes"), V.fmt_value("memory.limit_bytes", mem.get("limit_bytes"))))
    return V.Table(("part", "bytes per GPU"), tuple(rows), (False, True))


def checklist(name: str, doc_plan: Mapping[str, Any]) -> V.PlanChecklist:
    rows = tuple(V.ChecklistRow(str(item.get("id", "")), item.get("title", ""),
                                str(item.get("status", "n/a")),
                                _checklist_value(item.get("id"), item.get("value")),
                                _checklist_value(item.get("id"), item.get("threshold")),
                                item.get("note") or "")
                 for item in doc_plan.get("checklist") or ())
    return V.PlanChecklist(name, doc_plan.get("title") or name, rows, verdict_counts(rows))


# The result key whose record (ccost.results) gives the unit of each checklist item's value (analysis.ITEMS).
CHECKLIST_UNITS = VALUE_KEYS


def _checklist_value(item_id: Any, v: Any) -> str:
    if v is None:
        return "—"
    key = CHECKLIST_UNITS.get(item_id) if isinstance(item_id, int) else None
    if key and isinstance(v, (int, float)) and not isinstance(v, bool):
        return V.fmt_value(key, v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return units.format_quantity(float(v), units.DIMENSIONLESS)
    return V.fmt_value("", v)


def status_counts(rows: Sequence[V.ChecklistRow]) -> dict[str, int]:
    """How many checklist items have each status (an unknown status counts as n/a)."""
    counts = {s: 0 for s in STATUSES}
    for r in rows:
        counts[r.status if r.status in counts else "n/a"] += 1
    return counts


def verdict_counts(rows: Sequence[V.ChecklistRow]) -> str:
    counts = status_counts(rows)
    return " · ".join(f"{counts[s]} {s}" for s in STATUSES)


# ----------------------------------------------------------------------------------------------------
# Sweeps and comparisons.

SWEEP_METRICS = ("step_time_s", "compute_time_s", "comm_time_s", "speedup", "efficiency", "overhead",
                 "memory_bytes_per_gpu", "fits_memory")


def _same_point(a: Mapping, b: Mapping, fields: Sequence[str]) -> bool:
    return all(a.get(f) == b.get(f) for f in fields)


def sweep_section(name: str, s: Mapping[str, Any], policy: S.Policy | None, charts: bool,
                  base: str = "") -> V.SweepSection:
    fields = list(s.get("field") or [])
    points = list(s.get("points") or [])
    # a serve plan's sweep: its decode step, request figures (its phase's sweep keys) and memory, not scaling
    keys = next((k.sweep_keys for k in PHASE_KINDS if k.sweep_keys and any(k.sweep_keys[0] in p for p in points)),
                ())
    shown = ("step_time_s", *keys, "memory_bytes_per_gpu", "fits_memory") if keys else SWEEP_METRICS
    metrics = [m for m in shown if any(m in p for p in points)]
    highlight = []
    opt = s.get("time_optimal") or {}
    cost = {k: v for k, v in (s.get("cost_optimal") or {}).items()}
    rows = []
    for i, p in enumerate(points):
        if p.get("error"):
            rows.append(tuple([V.fmt_value(f, p.get(f)) for f in fields] + ["—"] * len(metrics)
                              + [f"not evaluated: {p['error']}"]))
            continue
        marks = []
        if opt and _same_point(p, opt, fields):
            marks.append("time-optimal")
            highlight.append(i)
        for thr, pt in cost.items():
            if pt and _same_point(p, pt, fields):
                marks.append(f"cost-optimal ≥ {units.format_percent(float(thr))}")
        rows.append(tuple([V.fmt_value(f, p.get(f)) for f in fields]
                          + [_point_value(m, p) for m in metrics] + ["; ".join(marks)]))
    has_optima = bool(opt) or any(cost.values())
    if not has_optima:  # a sweep over overlap, batch or the model: no optimum column to fill
        rows = [r[:-1] if not r[-1].startswith("not evaluated") else r for r in rows]
    headers = tuple(fields + [V.label(m, "short") for m in metrics]
                    + (["optimum"] if has_optima or any(p.get("error") for p in points) else []))
    table = V.Table(headers, tuple(rows),
                    tuple([True] * (len(fields) + len(metrics)) + [False]), highlight=tuple(highlight))
    optima = []
    if not has_optima and not (set(fields) & GPU_AXES):
        optima.append(f"No optimum is marked: the sweep varies {', '.join(fields)}, not a GPU count (tp, pp, "
                      "ep or dp), so there is no trade of GPUs against time to optimise; compare the rows.")
    if opt:
        optima.append("Time-optimal point: "
                      + ", ".join(f"{f} = {V.fmt_value(f, opt.get(f))}" for f in fields)
                      + ".")
    for thr, pt in cost.items():
        where = (", ".join(f"{f} = {V.fmt_value(f, pt.get(f))}" for f in fields) if pt
                 else "no point reaches it")
        optima.append(f"Cost-optimal at efficiency ≥ {units.format_percent(float(thr))}: {where}.")
    if s.get("objective"):  # a serving plan's sweep: the best point by its objective, never by efficiency
        best = s.get("optimum")
        where = (", ".join(f"{f} = {V.fmt_value(f, best.get(f))}" for f in fields) if best
                 else "no point fits memory and meets the policy")
        optima.append(f"Best by {s['objective']} among the points that fit memory and meet the policy: {where}.")
    if s.get("continuous_optimum") is not None:
        optima.append("Continuous time optimum N* = W·ln2 / (2·α·c·L·BW) = "
                      f"{units.format_quantity(float(s['continuous_optimum']), units.DIMENSIONLESS)}.")
    figures: list[V.Figure] = []
    numeric_x = len(fields) == 1 and points and all(isinstance(p.get(fields[0]), (int, float))
                                                    and not isinstance(p.get(fields[0]), bool)
                                                    for p in points)
    if charts and numeric_x:
        figures.extend(sweep_figures(name, s, fields[0], points, policy))
    return V.SweepSection(name, s.get("title") or name, str(s.get("base") or base), ", ".join(fields), table,
                          tuple(optima), tuple(figures))


def sweep_figures(name: str, s: Mapping[str, Any], field: str, points: Sequence[Mapping],
                  policy: S.Policy | None) -> list[V.Figure]:
    from ccost.report import charts

    points = [p for p in points if not p.get("error")]  # points that could not be evaluated: table only
    if len(points) < 2:
        return []
    xs = [p[field] for p in points]
    out = []
    step = ([p["step_time_s"] for p in points] if all(p.get("step_time_s") is not None for p in points)
            else None)
    split = all(p.get(k) is not None for p in points for k in ("compute_time_s", "latency_term_s",
                                                                "bandwidth_term_s"))
    if split:
        svg = charts.sweep_time_chart(xs, field, [p["compute_time_s"] for p in points],
                                      [("latency term (α·hops)", [p["latency_term_s"] for p in points]),
                                       ("bandwidth term (volume/B)",
                                        [p["bandwidth_term_s"] for p in points])],
                                      step, f"{name}: step time by term")
        out.append(V.Figure(svg, f"Step time of sweep {name} against {field}, split into compute, the "
                                 "latency term and the bandwidth term of communication (stacked); the line "
                                 "is the step time (compute + exposed communication)."))
    if all(p.get("efficiency") is not None for p in points):
        thresholds = []
        policy_min = policy.min_efficiency if policy is not None else None
        for thr in (s.get("cost_optimal") or {}):
            is_policy = policy_min is not None and abs(float(thr) - policy_min) < 1e-12
            thresholds.append((f"threshold {units.format_percent(float(thr))}"
                               + (" (policy min_efficiency)" if is_policy else ""), float(thr)))
        if policy_min is not None and not any(abs(v - policy_min) < 1e-12 for _, v in thresholds):
            thresholds.insert(0, (f"policy min_efficiency {units.format_percent(policy_min)}", policy_min))
        n_star = s.get("continuous_optimum")
        svg = charts.sweep_efficiency_chart(xs, field, [p["efficiency"] for p in points], thresholds,
                                            n_star if field == "tp" else None, f"{name}: efficiency")
        marked = " and the continuous optimum N*" if n_star is not None and field == "tp" else ""
        out.append(V.Figure(svg, f"Efficiency (speedup / GPUs) of sweep {name} against {field}, with the "
                                 f"efficiency thresholds{marked}."))
    return out


COMPARE_ROWS = ("gpus", "step_time_s", "compute_time_s", "comm_time_s", "latency_term_s", "bandwidth_term_s",
                "exposed_comm_s", "overhead", "efficiency", "bubble", "memory_bytes_per_gpu", "fits_memory",
                "regime")


SEARCH_METRICS = ("gpus", "latency_s", "step_time_s", "throughput_tokens_s", "throughput_per_gpu", "efficiency",
                  "overhead", "bubble", "memory_bytes_per_gpu", "fits_memory")
#: What a layout that does not fit in memory is not shown with: it runs nowhere, so it is not "100 %
#: efficient" (the results document keeps the model's numbers).
UNFIT_HIDDEN = ("speedup", "efficiency")


def _point_value(m: str, p: Mapping[str, Any]) -> str:
    return "—" if m in UNFIT_HIDDEN and p.get("fits_memory") is False else V.fmt_value(m, p.get(m))


#: Columns a page holds at the wide tables' font; a search with more axes than that leaves room for shows
#: each layout as one wrapped cell ("model=…, cluster=…, tp=8, …") instead of a column per axis.
SEARCH_MAX_COLUMNS = 14


#: A training target's search (ccost.model.target): the columns that answer it, fewer of the step's so the page holds them.
TARGET_SEARCH_METRICS = ("gpus", "step_time_s", "throughput_per_gpu", "efficiency", "memory_bytes_per_gpu", "batch",
                         "time_to_train_s", "goodput", "train_cost_usd")


def _search_points(points: Sequence[Mapping[str, Any]], axes: Sequence[str], limit: int = 25) -> V.Table:
    target = any("time_to_train_s" in p for p in points)
    metrics = [m for m in (TARGET_SEARCH_METRICS if target else SEARCH_METRICS)
               if m not in axes and any(m in p for p in points)]
    joined = len(axes) > 1 and len(axes) + len(metrics) > SEARCH_MAX_COLUMNS
    rows = []
    for p in list(points)[:limit]:
        layout = ([", ".join(f"{a}={_search_axis(p, a)}" for a in axes)] if joined
                  else [_search_axis(p, a) for a in axes])
        rows.append(tuple(layout + [_point_value(m, p) for m in metrics]))
    caption = f"first {limit} of {len(points)}" if len(points) > limit else ""
    if "latency_s" in metrics and "step_time_s" in metrics:  # the two times side by side: say which is which
        from ccost.output import search_columns_note

        caption = "; ".join(c for c in (caption, search_columns_note()) if c)
    heads = ["layout"] if joined else list(axes)
    return V.Table(tuple(heads + [V.label(m, "search") for m in metrics]), tuple(rows),
                   tuple([False] * len(heads) + [True] * len(metrics)), caption=caption,
                   wide=len(heads) + len(metrics) > 9)


def _search_axis(p: Mapping[str, Any], axis: str) -> str:
    """A layout's value of a searched field; for `allreduce = auto`, the algorithm auto picked for the TP
    AllReduce (``tp_algorithm``, ccost.search)."""
    v = p.get(axis)
    if axis == "allreduce" and v == "auto" and p.get("tp_algorithm"):
        return f"auto: {p['tp_algorithm']}"
    return V.fmt_value(axis, v)


def search_section(name: str, s: Mapping[str, Any], charts: bool = True) -> V.SearchSection:
    axes = list((s.get("axes") or {}).keys())
    counts = ", ".join(f"{k} {V.fmt_value(k, s[k])}" for k in ("points", "priced", "feasible", "rejected")
                       if k in s)
    cons = []
    for c in s.get("constraints") or ():
        cname = str(c.get("constraint", ""))  # not `name`: that is the search's, used below
        # max_overhead / min_efficiency / max_memory thresholds are fractions (their schema field type)
        cons.append((cname, str(c.get("rule", "")),
                     *[V.fmt_value("count", c.get(k)) for k in ("tested", "failed", "removed")],
                     # a deadline is a time (ccost.model.target), the other thresholds print by their own name
                     V.fmt_value(_T + "deadline_s" if cname == "meets_deadline" else cname, c.get("threshold"))))
    constraints = V.Table(("constraint", "rule", "tested", "failed", "removed", "threshold"), tuple(cons),
                          (False, False, True, True, True, True))
    return V.SearchSection(name, s.get("title") or name, str(s.get("base") or ""),
                           str(s.get("objective") or ""), counts, constraints,
                           _search_points(s.get("top") or (), axes),
                           _search_points(s.get("pareto") or (), axes),
                           search_figure(name, s) if charts else None,
                           _top_note(s), *_target_front(name, s, axes, charts))


# ----------------------------------------------------------------------------------------------------
# Capacity for the demand (ccost.capacity): a search whose base is an online plan.


def _ms(v: Any) -> str:
    return "—" if v is None else units.format_quantity(float(v), units.TIME)


def _usd(v: Any) -> str:
    return "—" if v is None else units.format_quantity(float(v), units.MONEY)


def _workers(f: Mapping[str, Any]) -> str:
    """A fleet's engines in a phrase: `2 × tp4` or `1 prefill tp2 + 2 decode tp4` per replica."""
    par = f"tp{f['tp']}" + (f" pp{f['pp']}" if f.get("pp", 1) > 1 else "") + (f" ep{f['ep']}" if f.get("ep", 1) > 1
                                                                               else "")
    if f.get("prefill_workers"):
        return (f"{f['dp']} × ({f['prefill_workers']} prefill tp{f['prefill_tp'] or f['tp']} + "
                f"{f['decode_workers']} decode {par})")
    return f"{f['dp']} × {par}"


def _pct(v: Any) -> str:
    return "—" if v is None else units.format_percent(float(v))


def capacity_section(name: str, s: Mapping[str, Any], charts: bool = True) -> V.CapacitySection:
    """The chapter "Capacity for the demand" of one capacity search: the fleet to buy, the aggregated and the
    disaggregated answer and N+1 side by side (replicas, GPUs, cost, capacity and headroom, p50/p99 latencies
    simulated at the sized rate), the latencies drawn against the SLOs, what 1.5× the traffic needs, each
    layout's rate per replica, and the engine commands of the chosen fleet. Every number is the search's
    (``ccost.capacity``); this only formats them."""
    rate = s.get("sized_rate_per_s")
    pct = s.get("slo_percentile", "p99")
    limits = [(m, s.get(f"max_{m}_s")) for m in ("ttft", "tpot", "e2e")]
    slos = ", ".join(f"{m.upper()} ≤ {_ms(v)}" for m, v in limits if v is not None) or "none"
    demand = _kv([
        ("traffic", str(s.get("traffic"))), ("mean rate", f"{V.fmt_value('count', s.get('rate_per_s'))} requests/s"),
        ("peak rate", f"{V.fmt_value('count', s.get('peak_rate_per_s'))} requests/s"),
        ("headroom asked", _pct(s.get("headroom"))), ("sized for", f"{rate:g} requests/s"),
        (f"SLOs at {pct}", slos), ("fleets screened", f"{s.get('candidates', 0):,}"),
        ("simulated", f"{s.get('simulations', 0)}")])
    chosen = s.get("chosen")
    cols = [("aggregated", s.get("aggregated")), ("disaggregated", s.get("disaggregated"))]
    n1 = s.get("n_plus_1")
    if n1:  # its latencies are those of its fleet with one replica down: what N+1 promises
        cols.append(("N+1 (one replica down)", {**n1, "simulated": (n1.get("one_down") or {}).get("simulated")}))

    def row(label, fn):
        return (label, *[fn(f) if f else "none meets the SLOs" for _, f in cols])

    def sim(f, key):
        return (f.get("simulated") or {}).get(key) if f is not None else None

    rows = [
        row("engines per replica × replicas", _workers), row("GPUs", lambda f: f"{f['gpus']:,}"),
        row("running requests, tokens a step", lambda f: f"{f['max_seqs']}, {f['step_tokens']:,}"),
        row("cost per month", lambda f: _usd(f.get("cost_per_month_usd"))),
        row("cost per million tokens (mean rate)", lambda f: _usd(f.get("cost_per_mtok_usd"))),
        row("capacity within the SLOs (screened)", lambda f: "—" if f.get("capacity_per_s") is None
            else f"{f['capacity_per_s']:.3g} requests/s"),
        row("load at the sized rate: rate / capacity", lambda f: "—" if not f.get("capacity_per_s")
            else _pct(rate / f["capacity_per_s"])),
        row("headroom: capacity / rate − 1", lambda f: _pct(f.get("headroom"))),
        row("engine busy share (simulated)", lambda f: _pct(sim(f, "utilisation"))),
        *[row(f"{m.upper()} p50 / p99 (simulated)", lambda f, m=m: f"{_ms(sim(f, f'{m}_p50_s'))} / "
              f"{_ms(sim(f, f'{m}_p99_s'))}") for m in ("ttft", "tpot", "e2e")],
        row("meets the SLOs (simulated)", lambda f: "yes" if sim(f, "meets") else "no"),
    ]
    answers = V.Table(("", *[c for c, _ in cols]), tuple(rows), (False, *[True] * len(cols)), wide=True,
                      caption="Latencies simulated at the sized rate (N+1: its fleet with one replica down). "
                              "Capacity is the screen's (queueing theory, within ~25 % of the simulator): where the "
                              "simulation confirmed a fleet the screen puts just short of the rate, the load reads "
                              "above 100 % and the headroom below 0.")
    if chosen:
        verdict = (f"Buy {chosen['gpus']:,} GPUs of {chosen['cluster']}, {chosen['mode']}: "
                   f"{_workers(chosen)}, {_usd(chosen.get('cost_per_month_usd'))} a month "
                   f"({_usd(chosen.get('cost_per_mtok_usd'))} per million tokens at the mean rate). At {rate:g} "
                   f"requests/s it serves TTFT {_ms(sim(chosen, 'ttft_p99_s'))} and TPOT "
                   f"{_ms(sim(chosen, 'tpot_p99_s'))} at p99 (simulated; SLOs {slos}).")
        other = [c for c, f in cols[:2] if f is not None and f is not chosen and f != chosen]
        if other:
            f = dict(cols)[other[0]]
            verdict += (f" The best {other[0]} fleet needs {f['gpus']:,} GPUs "
                        f"({_usd(f.get('cost_per_month_usd'))} a month).")
    else:
        verdict = (f"No fleet in this search meets the SLOs ({slos}) at {rate:g} requests/s: widen the search "
                   "(more GPUs, other layouts) or relax the promises.")
    figure = None
    answered = [(c, f) for c, f in cols if f is not None and f.get("simulated")]
    if charts and answered:
        from ccost.report import charts as ch

        mets = [m for m in ("ttft", "tpot")]
        svg = ch.percentile_bars(tuple((c, tuple((f["simulated"][f"{m}_p50_s"], f["simulated"][f"{m}_p99_s"])
                                                 for m in mets)) for c, f in answered),
                                 tuple(m.upper() for m in mets), tuple(s.get(f"max_{m}_s") for m in mets),
                                 f"Search {name}: latencies at {rate:g} requests/s")
        figure = V.Figure(svg, f"p50 (light) and p99 (dark) of TTFT and TPOT of each answer, simulated at the "
                               f"sized rate ({rate:g} requests/s; the {pct} SLOs dashed; N+1 with one replica down).")
    g = s.get("growth") or {}
    if g:
        gf, same = g.get("fleet"), g.get("same_layout")
        growth = (f"At {g['factor']:g}× the traffic ({g['rate_per_s']:g} requests/s, screened): "
                  + (f"the cheapest fleet is {gf['mode']} {_workers(gf)}, {gf['gpus']:,} GPUs, "
                     f"{_usd(gf.get('cost_per_month_usd'))} a month" if gf else "no fleet in this search carries it")
                  + ("; the chosen layout needs " + (f"{same['dp']} replica{'s' if same['dp'] != 1 else ''} ({same['gpus']:,} GPUs)" if same
                                                     else "more replicas than the search allows")
                     if chosen else "") + ".")
    else:
        growth = ""
    lay = sorted((r for r in s.get("layouts") or () if r.get("replicas_for_rate")),
                 key=lambda r: (r["replicas_for_rate"] * r["gpus"], r["gpus"]))[:15]
    layouts = V.Table(("engines", "GPUs per replica", "running, step tokens", "requests/s per replica",
                       "replicas", "GPUs"),
                      tuple((_workers({**r, "dp": 1}), str(r["gpus"]), f"{r['max_seqs']}, {r['step_tokens']:,}",
                             f"{r['highest_rate_per_s']:.4g}", str(r["replicas_for_rate"]),
                             str(r["replicas_for_rate"] * r["gpus"])) for r in lay),
                      (False, True, True, True, True, True),
                      caption=f"The 15 layouts that carry {rate:g} requests/s on the fewest GPUs, at each one's "
                              "best engine limits (screened: one replica's highest rate within the SLOs).")
    la = (chosen or {}).get("launch") or {}
    launch = tuple((f"{e['count']} × {e['role']} engine, vLLM", e["vllm"]) for e in la.get("engines", ())) + \
        tuple((f"{e['count']} × {e['role']} engine, SGLang", e["sglang"]) for e in la.get("engines", ())) + \
        ((("replay the demand", la["benchmark"]),) if la.get("benchmark") else ())
    near = output.capacity_near_misses(s)
    missed = V.Table(("engines per replica × replicas", "GPUs", "running, step tokens", "cost per month",
                      "what it misses (simulated)", "worst / limit"),
                     tuple((_workers(r), f"{r['gpus']:,}", f"{r['max_seqs']}, {r['step_tokens']:,}",
                            _usd(r.get("cost_per_month_usd")), "; ".join(m) or "—",
                            "—" if w is None else f"{w:.3f}×") for r, m, w in near),
                     (False, True, True, True, False, True),
                     caption=("Fleets cheaper than the answer" if chosen else "Fleets") + " that the search simulated "
                             "(the screen passed them, or put them just short of the promises) and that missed, at "
                             f"{rate:g} requests/s: what the answer's extra cost buys.") if near else None
    return V.CapacitySection(name, s.get("title") or name, verdict, demand, answers, figure, growth, layouts,
                             launch, str(s.get("method") or ""), missed)


# ----------------------------------------------------------------------------------------------------
# Time to train (ccost.model.target): a plan's training target, and a search's front.

_T = "plans.<plan>.target."


def _tv(key: str, v: Any) -> str:
    """A value of a plan's ``target`` section as the review prints it (money in USD, energy in MWh)."""
    rec = results.record(_T + key) or results.record(key)
    dim = rec.dimension if rec is not None else ""
    if v is not None and dim in ("money", "energy", "power") and isinstance(v, (int, float)):
        return units.format_quantity(v, {"money": units.MONEY, "energy": units.ENERGY, "power": units.POWER}[dim])
    if key in ("gpu_days", "checkpoints") and isinstance(v, (int, float)):
        return f"{v:,.0f}"
    if key == "failure_rate_per_gpu_hour" and isinstance(v, (int, float)):
        return f"{v:.4g} per GPU-hour"
    return V.fmt_value(_T + key, v)


def _kv(rows: Sequence[tuple[str, str]]) -> V.Table:
    """Quantity/value rows; more than four go two pairs a row, like a plan's key numbers."""
    rows = list(rows)
    if len(rows) <= 4:
        return V.Table(("quantity", "value"), tuple(rows), (False, True))
    half = (len(rows) + 1) // 2
    left, right = rows[:half], rows[half:] + [("", "")] * (2 * half - len(rows))
    return V.Table(("quantity", "value", "quantity", "value"), tuple(a + b for a, b in zip(left, right)),
                   (False, True, False, True))


#: The calendar of a run, in the order the timeline stacks it: (its key in ``target``, its name).
TIMELINE = (("ideal_time_s", "training"), ("checkpoint_writing_s", "writing checkpoints"),
            ("restarting_s", "restarting"), ("lost_work_s", "re-done work"))


def target_section(name: str, doc_plan: Mapping[str, Any], charts: bool = True) -> V.TargetSection | None:
    """The chapter "Time to train" for one plan with a training target (its ``target`` section, built by
    ``ccost.model.target``; ``ccost explain`` derives every number): the target, the fleet, the calendar with its
    goodput, the money, and twice the GPUs at the same global batch."""
    t = doc_plan.get("target")
    if not isinstance(t, Mapping):
        return None
    lab = lambda k: V.label(_T + k)  # noqa: E731
    T = t.get("time_to_train_s")
    deadline = t.get("deadline_s")
    verdict = (f"{_tv('time_to_train_s', T)} to train on {doc_plan.get('gpus', 0):,} GPUs at "
               + (f"a goodput of {_tv('goodput', t.get('goodput'))}" if t.get("goodput_modelled") else
                  "full goodput (interruptions not modelled: the cluster gives no checkpoint_bandwidth)"))
    if deadline is not None:
        verdict += (f": {'within' if t.get('meets_deadline') else 'past'} the deadline of {_tv('deadline_s', deadline)}")
    if t.get("cost_usd") is not None:
        verdict += f", for {_tv('cost_usd', t['cost_usd'])}"
    verdict += "."
    goal = [(lab("train_tokens"), "—" if t.get("train_tokens") is None else output.fmt_tokens(t["train_tokens"])),
            (lab("train_steps"), _tv("train_steps", t.get("train_steps"))),
            (lab("tokens_per_step"), _tv("tokens_per_step", t.get("tokens_per_step")))]
    if t.get("global_batch") is not None:
        goal.append((lab("global_batch"), f"{t['global_batch']:,.0f} sequences"))
    goal += [(lab("deadline_s"), _tv("deadline_s", deadline)),
             (lab("gpu_budget"), "—" if t.get("gpu_budget") is None else f"{t['gpu_budget']:,}")]
    layout = doc_plan.get("layout") or {}
    cost = doc_plan.get("cost") or {}
    fleet = [(V.label("gpus"), f"{doc_plan.get('gpus', 0):,}"),
             ("layout", " × ".join(f"{k.upper()}{layout[k]}" for k in ("tp", "cp", "pp", "ep", "dp")
                                   if layout.get(k, 1) != 1 or k == "dp")
              + f"; batch {layout.get('batch')} in {layout.get('microbatches')} micro-batches"),
             (V.label("step_time_s"), V.fmt_value("step_time_s", doc_plan.get("step_time_s"))),
             (V.label("throughput_tokens_s"), throughput(doc_plan))]
    if cost.get("power_w") is not None:
        fleet.append((V.label("cost.power_w"), units.format_quantity(cost["power_w"], units.POWER)))
    if cost.get("price_per_gpu_hour_usd") is not None:
        fleet.append((V.label("cost.price_per_gpu_hour_usd"), _money(cost["price_per_gpu_hour_usd"]) + "/h"))
    calendar = [(lab(k), _tv(k, t.get(k))) for k, _ in TIMELINE if t.get(k) is not None]
    calendar.append((lab("time_to_train_s"), _tv("time_to_train_s", T)))
    calendar.append((lab("goodput"), _tv("goodput", t.get("goodput"))))
    if t.get("goodput_modelled"):
        calendar += [(lab(k), _tv(k, t.get(k))) for k in (
            "failure_rate_per_gpu_hour", "mtbf_s", "interruptions", "restart_time_s", "checkpoint_bytes",
            "checkpoint_time_s", "checkpoint_interval_s", "young_interval_s", "checkpoints")]
    money = [(lab(k), _tv(k, t.get(k))) for k in ("gpu_days", "energy_j", "cost_usd")]
    d = t.get("doubled") or {}
    doubling = None
    if d.get("time_to_train_s") is not None:
        heads = ("", "this plan", "twice the GPUs")
        rows = [(V.label("gpus"), f"{doc_plan.get('gpus', 0):,}", f"{d['gpus']:,}"),
                ("dp, batch per replica, micro-batches", f"{layout.get('dp')}, {layout.get('batch')}, "
                 f"{layout.get('microbatches')}", f"{d['dp']}, {d['batch']}, {d['microbatches']}"),
                (V.label("step_time_s"), V.fmt_value("step_time_s", doc_plan.get("step_time_s")),
                 V.fmt_value("step_time_s", d.get("step_time_s")))]
        for k in ("goodput", "time_to_train_s", "gpu_days", "energy_j", "cost_usd", "meets_deadline"):
            if t.get(k) is not None or d.get(k) is not None:
                rows.append((lab(k), _tv(k, t.get(k)), _tv(k, d.get(k))))
        doubling = V.Table(heads, tuple(rows), (False, True, True))
    note = (f"Twice the GPUs with the global batch held: {d['note']}." if d.get("time_to_train_s") is not None
            else f"Twice the GPUs: {d['note']}." if d.get("note") else "")
    srcs = tuple((k.replace("_", " "), v) for k, v in (t.get("sources") or {}).items())
    figure = None
    if charts and T is not None and all(t.get(k) is not None for k, _ in TIMELINE):
        from ccost.report import charts as ch

        bars = [(f"{doc_plan.get('gpus', 0):,} GPUs", tuple(t[k] for k, _ in TIMELINE))]
        if all(d.get(k) is not None for k, _ in TIMELINE):
            bars.append((f"{d['gpus']:,} GPUs", tuple(d[k] for k, _ in TIMELINE)))
        svg = ch.timeline_chart(bars, [p for _, p in TIMELINE], deadline, f"Plan {name}: the calendar of the run")
        figure = V.Figure(svg, "The run's calendar in days: training without interruptions, then what "
                               "interruptions cost (checkpoint writing, restarts, re-done work); the second "
                               "bar is twice the GPUs at the same global batch"
                               + ("; the dashed line is the deadline." if deadline is not None else "."))
    return V.TargetSection(name, doc_plan.get("title") or name, verdict, _kv(goal), _kv(fleet), _kv(calendar),
                           _kv(money), doubling, note, srcs, figure)


def _target_front(name: str, s: Mapping[str, Any], axes: Sequence[str], charts: bool) -> tuple:
    """A training search's front of time to train against cost (or GPU-days): its table, note and chart."""
    tg = s.get("target")
    if not isinstance(tg, Mapping):
        return None, "", None
    by = tg.get("pareto_by") or "gpu_days"
    front = tg.get("pareto") or []
    table = _search_points(front, axes) if front else None
    what = "cost" if by == "train_cost_usd" else "GPU-days (a searched cluster is not priced)"
    goal = (f"{output.fmt_tokens(tg['train_tokens'])} tokens" if tg.get("train_tokens") is not None
            else f"{tg.get('train_steps') or 0:,} steps")
    if tg.get("global_batch"):
        goal += f", a global batch of {tg['global_batch']:,.0f} sequences"
    if tg.get("deadline_s") is not None:
        goal += f", within {V.fmt_value(_T + 'deadline_s', tg['deadline_s'])}"
    note = (f"The target: {goal}. The layouts no other beats on both time to train and {what}, soonest "
            "first." if front else f"The target: {goal}. No layout meets every constraint.")
    figure = None
    if charts and len(front) > 0:
        from ccost.report import charts as ch

        pts = [(p["time_to_train_s"], p[by]) for p in front if p.get("time_to_train_s") is not None
               and p.get(by) is not None]
        top = [(p["time_to_train_s"], p[by]) for p in s.get("top") or () if p.get("time_to_train_s") is not None
               and p.get(by) is not None]
        if pts:
            label = "cost of the run (USD)" if by == "train_cost_usd" else "GPU-days"
            figure = V.Figure(ch.target_front_chart(pts, top, label, f"Search {name}: time to train against "
                                                                     f"{what.split(' ')[0]}"),
                              f"Time to train against {what}: each point is a layout no other feasible one beats "
                              f"on both; the top layouts by {s.get('objective', 'the objective')} are ringed.")
    best = tg.get("best_per_fleet") or []
    if best:
        fleet = [a for a in axes if a in ("model", "cluster", "phase", "stack")]
        note += (f" The best layout of each {'/'.join(fleet)} by {s.get('objective', 'the objective')}: "
                 + "; ".join(f"{', '.join(str(p.get(a)) for a in fleet)}: {_tv('time_to_train_s', p.get('time_to_train_s'))}"
                             + (f", {_tv('cost_usd', p['train_cost_usd'])}" if p.get("train_cost_usd") is not None
                                else "") + f" on {p.get('gpus', 0):,} GPUs" for p in best) + ".")
    return table, note, figure


def _top_note(s: Mapping[str, Any]) -> str:
    from ccost.search import DISTINCT_NOTE

    return (DISTINCT_NOTE[0].upper() + DISTINCT_NOTE[1:] + " (`distinct = false` lists every layout).") \
        if s.get("distinct", True) else ""


def search_figure(name: str, s: Mapping[str, Any]) -> V.Figure | None:
    """The Pareto front of a search (latency against tokens/s per GPU), with its top layouts marked."""
    def pts(key: str) -> list[tuple[float, float]]:
        return [(p["latency_s"], p["throughput_per_gpu"]) for p in s.get(key) or ()
                if isinstance(p, Mapping) and p.get("latency_s") is not None
                and p.get("throughput_per_gpu") is not None]

    front, top = pts("pareto"), pts("top")
    if not front:
        return None
    from ccost.report import charts as ch

    svg = ch.pareto_chart(front, top, f"Search {name}: latency against throughput per GPU")
    return V.Figure(svg, f"Pareto front of search {name}: each point is a layout that no other feasible "
                         "layout beats on both latency and tokens/s per GPU; the top layouts by "
                         f"{s.get('objective', 'the objective')} are ringed.")



#: The comparison row that is not a result key: what ranks plans before the metric (analysis.ranked_down).
RANKED_FIRST_ROW = "policy and memory (ranked first)"


def compare_section(name: str, c: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]],
                    charts: bool) -> V.CompareSection:
    ranking = [p for p in c.get("ranking") or [] if p in plans]
    headers = ("", *[f"{i}. {p}" for i, p in enumerate(ranking, 1)])
    # The row the plans are ranked by comes first, marked: a comparison by latency shows the latency.
    by = str(c.get("by", "latency"))
    ranked_key = COMPARE_METRICS.get(by, ("",))[0]

    def cell(k: str, p: str) -> str:
        return V.fmt_value(k, plans[p].get(k))

    keys = [k for k in COMPARE_ROWS if any(k in plans[p] for p in ranking)]
    if any("throughput_tokens_s" in plans[p] for p in ranking):
        keys += ["throughput_tokens_s", "throughput_per_gpu"]
    if ranked_key in keys:
        keys.remove(ranked_key)
    rows = []
    if ranked_key and any(ranked_key in plans[p] for p in ranking):
        rows.append((f"{V.label(ranked_key, 'compare')} (ranked by)",
                     *[cell(ranked_key, p) for p in ranking]))
    # What ranks a plan before the ranked row does (memory, then the policy: analysis.rank), when it matters.
    why = [ranked_down(plans[p], short=True) for p in ranking]
    if any(why):
        rows.append((RANKED_FIRST_ROW, *[w or "meets both" for w in why]))
    rows += [(V.label(k, "compare"), *[cell(k, p) for p in ranking]) for k in keys]
    table = V.Table(headers, tuple(rows), (False, *[True] * len(ranking)), wide=len(ranking) > 3)
    figure = None
    keys = ("compute_time_s", "latency_term_s", "bandwidth_term_s", "step_time_s")
    if charts and ranking and all(plans[p].get(k) is not None for p in ranking for k in keys):
        from ccost.report import charts as ch

        svg = ch.compare_chart(ranking, *[[plans[p][k] for p in ranking] for k in keys],
                               f"{name}: time per step")
        figure = V.Figure(svg, f"Plans of comparison {name}, best first (by {c.get('by', 'latency')}): "
                               "compute, latency term and bandwidth term of communication; the tick is the "
                               "step time (compute + exposed communication).")
    return V.CompareSection(name, c.get("title") or name, str(c.get("by", "latency")), tuple(ranking),
                            c.get("recommendation") or "", table, figure)


# ----------------------------------------------------------------------------------------------------
# Summary, assumptions.

SUMMARY_COLUMNS = ("gpus", "step_time_s", "comm_time_s", "overhead", "efficiency", "fits_memory")


def summary(doc: Mapping[str, Any], checklists: Sequence[V.PlanChecklist],
            warnings: Sequence[str]) -> V.Summary:
    plans = doc.get("plans") or {}
    recs = tuple((c.get("title") or n, c.get("recommendation") or "")
                 for n, c in (doc.get("compares") or {}).items())
    has_tp = any("throughput_tokens_s" in p for p in plans.values())
    headers = ("plan", *[V.label(k, "label") for k in SUMMARY_COLUMNS[:-1]], "memory fit",
               *((V.label("throughput_tokens_s", "label"),) if has_tp else ()))
    rows = []
    for n, p in plans.items():
        fit = V.fmt_value("fits_memory", p.get("fits_memory"))
        if p.get("memory_bytes_per_gpu") is not None:
            fit += f" ({V.fmt_value('memory_bytes_per_gpu', p['memory_bytes_per_gpu'])}/GPU)"
        rows.append((n, *[V.fmt_value(k, p.get(k)) for k in SUMMARY_COLUMNS[:-1]], fit,
                     *((throughput(p),) if has_tp else ())))
    table = V.Table(headers, tuple(rows), (False, True, True, True, True, True, False,
                                           *((True,) if has_tp else ())), wide=has_tp)
    verdicts = V.Table(("plan", "pass", "warn", "fail", "n/a", "items to look at"),
                       tuple(_verdict_row(c) for c in checklists), (False, True, True, True, True, False))
    cost, note = cost_summary(plans)
    return V.Summary(recs, table, verdicts, tuple(warnings), cost, note)


def _money(x) -> str:
    return "—" if x is None else units.format_quantity(x, units.MONEY)


def cost_summary(plans: Mapping[str, Any]) -> tuple[V.Table | None, str]:
    """The summary's lead: each plan's cost per million tokens, per hour and per month, power and tokens
    per joule, from the plan's ``cost`` section (``ccost.model.economics``; ``explain`` derives each number)."""
    costs = {n: p.get("cost") or {} for n, p in plans.items()}
    if not any(c.get("priced") or c.get("power_w") is not None for c in costs.values()):
        notes = [c.get("note") for c in costs.values() if c.get("note")]
        return None, ("Not priced: " + notes[0].removeprefix("not priced: ") + "." if notes else "")
    rows, unfit = [], []
    for n, c in costs.items():
        per_mtok = _money(c.get("cost_per_mtok_usd"))
        if c.get("cost_per_mtok_usd") is not None:
            per_mtok += f" ({c.get('tokens')})"
            if plans[n].get("fits_memory") is False:  # a price for a plan that cannot run is no offer
                per_mtok += " *"
                unfit.append(n)
        rows.append((n, per_mtok, units.format_percent(c.get("load")) if c.get("load") is not None else "—",
                     "—" if c.get("cost_per_hour_usd") is None else _money(c["cost_per_hour_usd"]) + "/h",
                     _money(c.get("cost_per_month_usd")),
                     "—" if c.get("power_w") is None else units.format_quantity(c["power_w"], units.POWER),
                     "—" if c.get("tokens_per_joule") is None else
                     units.format_quantity(c["tokens_per_joule"], units.DIMENSIONLESS, digits=4)))
    heads = [V.label(f"cost.{k}") for k in ("cost_per_mtok_usd", "load", "cost_per_hour_usd", "cost_per_month_usd",
                                            "power_w", "tokens_per_joule")]
    table = V.Table(("plan", *heads), tuple(rows),
                    (False, True, True, True, True, True, True), wide=True)
    note = ("Cost per million tokens at the plan's load: the GPUs are paid for every hour, so the cost per "
            "hour × 10⁶ / (throughput × load). Power is the GPUs at TDP (plus the hosts' share and PUE where "
            "given); tokens per joule at full load. Each number is derived in the plan's “cost and power” "
            "steps.")
    if unfit:
        note += (" * does not fit in memory (" + ", ".join(unfit) + "): a price for a plan that cannot run "
                 "is no offer.")
    unpriced = [n for n, c in costs.items() if not c.get("priced")]
    if unpriced:
        note += " Not priced: " + ", ".join(unpriced) + "."
    return table, note


def _verdict_row(c: V.PlanChecklist) -> tuple[str, ...]:
    counts = status_counts(c.rows)
    look = ", ".join(f"{r.id} ({r.status})" for r in c.rows if r.status in ("warn", "fail"))
    return (c.plan, *[str(counts[s]) for s in STATUSES], look or "—")


NOT_MODELLED = (
    ("Congestion", "Every collective is priced as if it had its links to itself: no contention between "
     "concurrent collectives, no oversubscribed switch tiers, no stragglers."),
    ("NCCL protocols", "A spec-sheet link has one α and one bandwidth. NCCL's LL, LL128 and Simple protocols, "
     "channel counts and chunking change both with message size: only a link measured with nccl-tests and "
     "fitted by `ccost calibrate` carries that curve (and its small-message floor)."),
    ("Serving engine", "A decode or prefill plan is one step of a fixed batch, priced under the stack profile "
     "named above (a few numbers fitted to published vLLM and TensorRT-LLM measurements): continuous "
     "batching, speculative decoding and prefix caching are not modelled."),
    ("MoE routing", "A step reads the experts its T tokens hit, E·(1 − (1 − k/E)^T) per layer, for uniform "
     "independent routing; routing skew and EP load imbalance are not modelled."),
    ("All-to-All volume", "All-to-All moves (P−1)/P of each GPU's m bytes (the local share stays put, as in "
     "“Communication Cost Analysis” §2), in P−1 hops; “Communication Cost Math — Distributed Inference” §2 charges the full "
     "B·S·k·d·bytes."),
    ("Absolutes", "The notes warn that the α-β model ranks options better than it predicts absolute times: "
     "real overlap is often 30–50 % better than modelled, and spec-sheet bandwidth is optimistic."),
)


def assumptions(spec: S.Spec, doc: Mapping[str, Any]) -> tuple[V.Assumption, ...]:
    out = []
    plans = doc.get("plans") or {}
    _, _, _, _, links = _used_entities(spec, plans.keys())
    for link in links.values():
        out.append(V.Assumption(f"α and β of {link.name}",
                                f"{link_provenance(link)}: α = {_q(link.alpha, units.TIME)}, bandwidth "
                                f"{_q(link.bandwidth, units.BANDWIDTH)} at "
                                f"{units.format_percent(link.efficiency)} efficiency."
                                + ("" if link.measured else " Spec-sheet numbers are optimistic; measure "
                                   "them with nccl-tests and `ccost calibrate`.")))
    for stack, users in _stacks_used(spec, plans.keys()):
        out.append(V.Assumption(f"stack profile {stack.name}", stack_text(stack, users)))
    for name, p in plans.items():
        plan = spec.plans.get(name)
        algos = []
        for c in p.get("collectives") or ():
            text = f"{c.get('kind')} ({c.get('purpose')}): {c.get('algorithm')} on {c.get('link')}"
            if c.get("cross_node"):
                text += f", priced {c['cross_node']} across nodes"
            if c.get("reason"):
                text += f" — {c['reason']}"
            algos.append(text)
        lines = "; ".join(algos) if algos else "no collectives (a single GPU)"
        if plan is not None and any(c.get("algorithm") == "one_shot" for c in p.get("collectives") or ()):
            from ccost.evaluate import ONE_SHOT_TEXT

            osv = plan.one_shot_volume
            lines += (f". One-shot volume: `{osv}`" + (" (the default)" if osv == one_shot_default() else "")
                      + f", {ONE_SHOT_TEXT.get(osv, osv)}")
        if plan is not None:
            st = _plan_stack(plan)
            lines += (f". Priced under stack profile `{st.name}`"
                      + (f" (the bundled default for {plan.phase}: the plan names none)" if not plan.stack_named
                         else ""))
            lines += (f". Overlap assumed: {units.format_percent(plan.overlap)} of communication hidden "
                      "behind compute")
            lines += f". Cross-node pricing: {plan.cross_node}"
            if plan.compute_time is not None:
                lines += (f". Compute time given in the spec ({_q(plan.compute_time, units.TIME)}), "
                          "not derived")
        out.append(V.Assumption(f"plan {name}", lines + "."))
    return tuple(out)


def _plan_stack(plan: S.Plan) -> S.Stack:
    """The stack profile that prices ``plan``: its own, or the bundled default for its phase (the checker
    resolves it)."""
    assert plan.stack is not None
    return plan.stack


def _stacks_used(spec: S.Spec, names) -> list:
    """(stack profile, the plans of ``names`` it prices), one per profile, in the plans' order."""
    out: dict[str, tuple] = {}
    for name in names:
        plan = spec.plans.get(name)
        if plan is None:
            continue
        st = _plan_stack(plan)
        out.setdefault(st.name, (st, []))[1].append(name)
    return list(out.values())


def stack_text(stack: S.Stack, users: list[str]) -> str:
    """What a stack profile charges and where its numbers came from, for the review's assumptions."""
    t = lambda v: _q(v, units.TIME)  # noqa: E731
    pct = units.format_percent
    parts = [f"prices {', '.join(users)}",
             f"step {t(stack.step_overhead)}, per layer {t(stack.layer_overhead)}, per running sequence "
             f"{t(stack.seq_overhead)} (decode, prefill)",
             f"HBM {pct(stack.hbm_efficiency)}, GEMM {pct(stack.gemm_efficiency)}, attention "
             f"{pct(stack.attention_efficiency)} of peak",
             f"collective floor {t(stack.collective_floor)}",
             f"roofline {stack.roofline}, serving pipeline {stack.pipeline}"]
    if stack.elementwise_efficiency != 1.0 or stack.tp_comm_overlap:
        parts.append(f"training: elementwise {pct(stack.elementwise_efficiency)}, TP overlap "
                     f"{'on' if stack.tp_comm_overlap else 'off'}")
    src = stack.source or "no source given"
    return "; ".join(parts) + f". Source: {src}."


def one_shot_default() -> str:
    """The `one_shot_volume` a plan gets when it writes none: the schema's default, the one the checker
    fills in, so the review's prose cannot drift from what the code charges."""
    from ccost import schema

    field = schema.SCHEMA["plan"].field("one_shot_volume")
    assert field is not None
    return str(field.default)


def one_shot_volume_text() -> str:
    """The "not modelled, and conventions" paragraph on the one-shot volume, from the code's default and
    the words ``ccost.evaluate`` records in each one-shot collective's note."""
    from ccost.evaluate import ONE_SHOT_TEXT

    default = one_shot_default()
    others = [v for v in ONE_SHOT_TEXT if v != default]
    other = (f"; `one_shot_volume = {others[0]}` charges {ONE_SHOT_TEXT[others[0]]} instead"
             if others else "")
    return (f"By default (`one_shot_volume = {default}`) a one-shot AllReduce is charged one hop at "
            f"`one_shot_latency` plus {ONE_SHOT_TEXT[default]}{other}. The two differ by a factor P/2. Each "
            "plan above that uses one-shot says which it charged and what the other would give.")


def not_modelled(plans: Mapping[str, Any] | None = None) -> tuple[V.Assumption, ...]:
    """What the model leaves out, and, for each phase whose section a plan of ``plans`` has, what its own
    model leaves out (``ccost.model.phases``: a serve plan's closed loop)."""
    rows = list(NOT_MODELLED)
    rows.insert(3, ("One-shot volume", one_shot_volume_text()))
    docs = [p for p in (plans or {}).values() if isinstance(p, Mapping)]
    rows += [ph.not_modelled for ph in phases.PHASES.values()
             if ph.not_modelled and any(p.get(ph.kind.section) for p in docs)]
    return tuple(V.Assumption(t, x) for t, x in rows)


# ----------------------------------------------------------------------------------------------------

#: The most characters of the opening comment the cover shows: a statement of purpose is a sentence or two.
#: A longer one is cut at a word (a 100 kB comment line took over 60 s to lay out on the cover).
ABOUT_CHARS = 600


def opening_comment(text: str, max_lines: int = 4, max_chars: int = ABOUT_CHARS) -> str:
    """The spec's opening comment up to its first full stop or question mark (at a line end), at most
    ``max_lines`` lines and ``max_chars`` characters (cut at a word, with "…"): the author's one-sentence
    statement of what the spec is for, for the cover. Reads only the lines it keeps."""
    lines = []
    for line in _lines(text):
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        body = stripped.lstrip("#").strip()
        if not body:
            if lines:
                break
            continue
        lines.append(body)
        if body.endswith((".", "?")) or len(lines) >= max_lines or sum(map(len, lines)) > max_chars:
            break
    about = " ".join(lines)
    if len(about) > max_chars:
        cut = about[:max_chars]
        about = (cut[:cut.rfind(" ")] if " " in cut[max_chars // 2:] else cut).rstrip() + " …"
    return about


def _lines(text: str):
    """The lines of ``text`` one at a time (the opening comment needs the first few, not a split of all)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        if end == -1:
            end = len(text)
        yield text[start:end].rstrip("\r")
        start = end + 1


def _sweep_base(spec: S.Spec, name: str) -> str:
    sweep = spec.sweeps.get(name)
    return sweep.base.name if sweep is not None and sweep.base is not None else ""


def build(spec: S.Spec, doc: Mapping[str, Any], steps: Mapping[str, Sequence[Any]], provenance: Provenance,
          warnings: Sequence[str] = (), sources: Sequence[V.SourceFile] = (), source_css: str = "",
          calibrations: Mapping[str, Sequence[Calibration]] | None = None,
          charts: bool = True, about: str = "") -> V.ReportView:
    """The whole review as a view model.

    ``doc`` is ``results_document(evaluate(spec))``; ``steps`` maps each plan of ``doc`` to
    ``explain(spec, plan)``; ``calibrations`` maps a plan to the calibration plots of its measured links.
    """
    plans = doc.get("plans") or {}
    calibrations = calibrations or {}
    checklists = tuple(checklist(n, p) for n, p in plans.items())
    sections = tuple(plan_section(n, p, steps.get(n, ()), calibrations.get(n, ())) for n, p in plans.items())
    sweeps = tuple(sweep_section(n, s, spec.policy, charts, _sweep_base(spec, n))
                   for n, s in (doc.get("sweeps") or {}).items())
    compares = tuple(compare_section(n, c, plans, charts) for n, c in (doc.get("compares") or {}).items())
    searches = tuple(search_section(n, x, charts) for n, x in (doc.get("searches") or {}).items()
                     if isinstance(x, Mapping) and x.get("kind") != "capacity")
    capacities = tuple(capacity_section(n, x, charts) for n, x in (doc.get("searches") or {}).items()
                       if isinstance(x, Mapping) and x.get("kind") == "capacity")
    targets = tuple(t for t in (target_section(n, p, charts) for n, p in plans.items()) if t is not None)
    stem = Path(spec.path).stem
    return V.ReportView(
        title=f"Design review: {stem}",
        spec_name=stem,
        provenance=provenance,
        summary=summary(doc, checklists, warnings),
        inputs=build_inputs(spec, list(plans)),
        plans=sections,
        checklists=checklists,
        sweeps=sweeps,
        compares=compares,
        searches=searches,
        assumptions=assumptions(spec, doc),
        not_modelled=not_modelled(plans),
        sources=tuple(sources),
        source_css=source_css,
        about=about,
        targets=targets,
        capacities=capacities,
    )
