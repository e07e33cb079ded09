"""Evaluate a checked spec: every plan priced, every sweep and comparison resolved, one results document.

The pipeline of this stage, top to bottom::

    plan ─lower.prepare─▶ Static + Inputs ─phases.lower─▶ Program ─phases.analyse─▶ Metrics ─▶ document
                           (floats | arrays | Values)   collectives, compute, memory      + checklist

``evaluate(spec)`` runs it in float mode for ``ccost eval`` and the report; ``explain(spec, plan)`` runs the
*same* functions on derivation values (``ccost.model.phases`` picks ``lower``/``analysis`` or, for a training
plan, ``training``), so every number in a derivation is bit-identical to the one in
``eval --format json`` (a test checks it on every example spec). Search calls ``phases.lower`` with arrays.

``results_document`` follows docs/interface.md's normative keys and order (extra keys are marked below); the
writers in ``ccost.output`` make its numbers stable. Machine units: seconds, bytes, fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ccost import __version__, axes, collectives, derive
from ccost.model import analysis, costs, economics, lower, phases, target
from ccost import spec as S
from ccost.check.plan import evaluation_errors
from ccost.derive import Step
from ccost.diagnostics import CcostError, Diagnostics, error
from ccost.results import MEMORY_PARTS
from ccost.schema import phase_kind
from ccost.schema import targeted as trains_to_target


@dataclass(frozen=True)
class PlanResult:
    """One plan evaluated in float mode: its program, metrics, checklist and document section."""

    plan: S.Plan
    program: lower.Program
    metrics: analysis.Metrics
    checklist: list
    doc: dict


@dataclass(frozen=True)
class Results:
    """Everything ``ccost eval`` prints and the review renders."""

    spec: S.Spec
    plans: dict  # name -> PlanResult, in written order
    sweeps: dict  # name -> sweep document section
    compares: dict  # name -> compare document section
    searches: dict = field(default_factory=dict)  # name -> search document section (ccost.search)
    version: str = __version__


# ---------------------------------------------------------------------------------------------------

def evaluate_plan(plan: S.Plan, policy: S.Policy) -> PlanResult:
    """Price one plan in float mode, by its phase (``ccost.model.phases``). Raises ``CcostError`` (E401, E301, ...)
    for a plan that cannot be evaluated: a diagnostic, never a traceback or a NaN."""
    phase = phases.of(plan)
    evaluable(plan)
    priced = phase.price(plan, policy, False)
    program, metrics = priced.program, priced.metrics
    econ = plan_economics(plan, policy, metrics)
    items = analysis.checklist(plan, policy, program, metrics)
    items.append(cost_item(plan, policy, econ))
    section = phase.record(plan, priced) if phase.record is not None else None
    if phase.checklist is not None and section is not None:  # the phase's own items (an online plan's SLOs)
        items += phase.checklist(plan, policy, section)
    doc = plan_document(plan, program, metrics, items)
    if section is not None:
        doc[phase.kind.section] = section
    doc["cost"] = cost_document(plan, econ)
    if trains_to_target(plan):  # a training target: time to train, goodput, its money; checklist items 13, 14
        doc["target"] = target_document(plan, policy, program, metrics, econ, items)
    return PlanResult(plan, program, metrics, items, doc)


def target_document(plan: S.Plan, policy: S.Policy, program: lower.Program, m: analysis.Metrics,
                    econ: economics.Economics, items: list | None = None, double: bool = True) -> dict:
    """The ``target`` section of a plan with a training target (``ccost.model.target``), with what twice the GPUs
    would buy at the same global batch (``doubled``); appends checklist items 13 and 14 to ``items``."""
    doc = target.document(plan, target.of_plan(plan, program, m, econ))
    if items is not None:
        items += target.checklist_items(plan, policy, doc, plan.gpus, analysis.TITLES)
    if double:
        twice, note = target.doubled(plan)
        if twice is None or evaluation_errors(twice):
            doc["doubled"] = {"note": note if twice is None else "twice the GPUs cannot be evaluated: "
                              + "; ".join(d.message for d in evaluation_errors(twice))}
        else:
            p2 = phases.of(twice).price(twice, policy, False)
            m2 = p2.metrics
            try:
                t2 = target_document(twice, policy, p2.program, m2, plan_economics(twice, policy, m2), None, False)
            except CcostError as exc:  # twice the GPUs may never finish (interruptions twice as often)
                doc["doubled"] = {"note": "twice the GPUs cannot be evaluated: "
                                  + "; ".join(d.message for d in exc.diagnostics)}
                return doc
            doc["doubled"] = {"note": note, "gpus": twice.gpus, "dp": twice.dp, "batch": twice.batch,
                              "microbatches": twice.microbatches, "step_time_s": _f(m2.step),
                              **{k: t2[k] for k in ("goodput", "ideal_time_s", "checkpoint_writing_s",
                                                    "restarting_s", "lost_work_s", "time_to_train_s", "gpu_days",
                                                    "energy_j", "cost_usd", "meets_deadline")}}
    return doc


def evaluable(plan: S.Plan) -> None:
    """Raise ``CcostError`` for a plan the model cannot price: the rules that need no cost model
    (``check.plan.evaluation_errors``, its phase's own among them). The model (``lower.prepare`` and what it
    feeds) takes the plan as evaluable: it never imports the checker."""
    Diagnostics(evaluation_errors(plan)).raise_if_errors()


def plan_economics(plan: S.Plan, policy: S.Policy, m: analysis.Metrics,
                   derivation: bool = False) -> economics.Economics:
    """The plan's money and power (``ccost.model.economics``) from its metrics, in their mode. A policy with
    ``max_cost_per_mtok`` on a plan that is not priced is E403: the threshold cannot be judged."""
    assert plan.cluster is not None
    pr = economics.pricing(plan.cluster)
    if policy.max_cost_per_mtok is not None and not pr.priced:
        raise CcostError(error(
            "E403", f"plan `{plan.name}` is not priced, so the policy's max_cost_per_mtok cannot judge it",
            policy.spans.get("max_cost_per_mtok", policy.span), economics.not_priced_help(plan.cluster)))
    return economics.economics(plan, pr, m.gpus, m.throughput, derivation)


COST_ITEM = 12


def cost_item(plan: S.Plan, policy: S.Policy, e: economics.Economics) -> dict:
    """Checklist item 12: the cost per million tokens at the plan's load, against the policy's
    ``max_cost_per_mtok`` when it has one."""
    title = analysis.TITLES[COST_ITEM]
    if not e.priced:
        assert plan.cluster is not None
        return {"id": COST_ITEM, "title": title, "status": "n/a", "value": None, "threshold": None,
                "note": "Not priced: " + economics.not_priced_help(plan.cluster) + "."}
    c = _f(e.cost_mtok)
    limit = policy.max_cost_per_mtok
    from ccost import units as U
    text = (f"{U.format_quantity(c, U.MONEY)} per million {e.token_kind} tokens at "
            f"{U.format_percent(plan.load)} load ({U.format_quantity(_f(e.cost_hour), U.MONEY)} per hour)")
    if limit is None:
        return {"id": COST_ITEM, "title": title, "status": "pass", "value": c, "threshold": None,
                "note": text + "; the policy sets no max_cost_per_mtok."}
    ok = c is not None and c <= limit
    return {"id": COST_ITEM, "title": title, "status": "pass" if ok else "fail", "value": c, "threshold": limit,
            "note": text + (f" is within the policy's {U.format_quantity(limit, U.MONEY)}." if ok else
                            f" exceeds the policy's {U.format_quantity(limit, U.MONEY)}: raise the load, the "
                            "batch or the throughput per GPU, or a cheaper GPU.")}


def cost_document(plan: S.Plan, e: economics.Economics) -> dict:
    """The plan's ``cost`` section: money in USD, power in W, energy in J (null where not priced or no
    power is known). Every number is a value ``explain`` derives (same functions, derivation mode)."""
    def _f(x):  # None where not priced / no power is known
        return None if x is None else analysis.finite(x)

    price = _f(e.price_gpu)
    doc: dict[str, Any] = {
        "priced": e.priced,
        "tokens": e.token_kind,
        "load": plan.load,
        "price_per_gpu_hour_usd": None if price is None else price * economics.HOUR_S,
        "cost_per_hour_usd": _f(e.cost_hour),
        "cost_per_month_usd": _f(e.cost_month),
        "cost_per_mtok_usd": _f(e.cost_mtok),
    }
    if e.token_kind == "output":
        doc["cost_per_mtok_output_usd"] = _f(e.cost_mtok)
    elif e.token_kind == "input":
        doc["cost_per_mtok_input_usd"] = _f(e.cost_mtok)
    doc.update({
        "tokens_per_month": _f(e.tokens_month),
        "power_per_gpu_w": _f(e.power_gpu),
        "power_w": _f(e.power),
        "energy_per_token_j": _f(e.energy_token),
        "tokens_per_joule": _f(e.tokens_per_joule),
    })
    if not e.priced:
        assert plan.cluster is not None
        doc["note"] = "not priced: " + economics.not_priced_help(plan.cluster)
    return doc


def _f(x) -> float | None:
    return analysis.finite(x)


def _alt(c: costs.Cost, count: float) -> dict:
    return {"hops": _f(c.hops), "volume_bytes": _f(c.volume), "latency_s": _f(c.latency),
            "bandwidth_s": _f(c.bandwidth_time), "time_s": _f(c.time), "total_time_s": _f(c.time) * count
            if _f(c.time) is not None else None}


#: What each `one_shot_volume` convention charges, in words, with the formulas of the one-shot record (the
#: review's prose uses these too).
ONE_SHOT_TEXT = {
    "egress": f"each GPU's egress {collectives.ONE_SHOT.egress_text}, its whole buffer written to each of the "
              "P−1 peers (what a one-shot kernel moves)",
    "ring": f"the ring volume {collectives.ONE_SHOT.volume_text} (the reference notes' convention)",
}


def collective_record(k: lower.Collective) -> dict:
    """One collective of the program as the document records it (normative keys first)."""
    count = _f(k.count) or 0.0
    rec = {
        "kind": k.kind,
        "purpose": k.purpose,
        "algorithm": k.algorithm,
        "count": count,
        "group_size": _f(k.group_size),
        "link": k.link,
        "message_bytes": _f(k.message),
        "hops": _f(k.cost.hops),
        "volume_bytes": _f(k.cost.volume),
        "latency_s": _f(k.cost.latency),
        "bandwidth_s": _f(k.cost.bandwidth_time),
        "time_s": _f(k.cost.time),
        # extra keys
        "total_time_s": _f(k.total),
    }
    if k.group is not None and k.group.flat is not None:
        rec["cross_node"] = k.group.used
        rec["alternatives"] = {name: _alt(c, count) for name, c in
                               (("flat", k.group.flat), ("hierarchical", k.group.hierarchical),
                                ("split", k.group.split)) if c is not None}
    if k.candidate_costs:
        rec["candidates"] = {a: _f(c.time) for a, c in k.candidate_costs.items()}
    if k.reason:
        rec["reason"] = k.reason
    if k.one_shot_other is not None:
        # Both one-shot volume conventions, each priced by costs.group_cost: the charged one above, the
        # other here, so the review can say which it charged and what the other would have given.
        o = k.one_shot_other.chosen
        charged = k.one_shot_volume
        other = collectives.other_one_shot_volume(charged)
        rec["one_shot_alternative"] = {
            "convention": other, "volume_bytes": _f(o.volume), "time_s": _f(o.time),
            "total_time_s": _f(o.time) * count,
            "note": (f"charged: {ONE_SHOT_TEXT[charged]}; the other convention, {ONE_SHOT_TEXT[other]}, "
                     f"is shown beside it (plan field one_shot_volume)")}
    if k.note:
        rec["note"] = k.note
    return rec


def plan_document(plan: S.Plan, program: lower.Program, m: analysis.Metrics, items: list) -> dict:
    """The document section of one plan: docs/interface.md's normative keys, in their order, then extras."""
    c = program.compute
    mem = _f(c.memory.total)
    limit = _f(c.memory.limit)
    doc: dict[str, Any] = {
        "title": plan.title or plan.name,
        "gpus": plan.gpus,
        # what the GPU holds (FSDP: its shard + one gathered layer); compute.bytes_read_per_gpu is what it reads
        "weight_bytes_per_gpu": _f(c.memory["weights"]),
        "memory_bytes_per_gpu": mem,
        "fits_memory": bool(mem is not None and limit is not None and mem <= limit),
        "compute_time_s": _f(c.T_compute),
        "comm_time_s": _f(m.T_comm),
        "latency_term_s": _f(m.T_lat),
        "bandwidth_term_s": _f(m.T_bw),
        "exposed_comm_s": _f(m.exposed),
        "step_time_s": _f(m.step),
        "overhead": _f(m.overhead),
        "speedup": _f(m.speedup),
        "efficiency": _f(m.efficiency),
        "bubble": _f(m.bubble),
        "regime": analysis.regime(m),
        # extra keys
        "phase": plan.phase,
        # a serve plan's batch is its concurrency: the sequences its (decode) step runs
        "layout": {**{a.name: getattr(plan, a.name) for a in axes.used(plan)},
                   "batch": getattr(plan, phase_kind(plan.phase).rows),
                   "seq": plan.seq, "microbatches": plan.microbatches, "fsdp": plan.fsdp,
                   "allreduce": plan.allreduce, "cross_node": plan.cross_node,
                   "overlap": plan.overlap},
        "latency_s": _f(m.latency),
        "eta": _f(m.eta),
        "throughput_tokens_s": _f(m.throughput),
        "throughput_per_gpu": _f(m.throughput_gpu),
        "tokens_per_step": _f(c.tokens_step),
        "single_gpu_time_s": _f(c.T_one),
        "compute": {
            "bound": ("given" if program.static.compute_given else
                      "memory" if (_f(c.T_mem) or 0) >= (_f(c.T_flop) or 0) else "flops"),
            "memory_time_s": None if program.static.compute_given else _f(c.T_mem),
            "flop_time_s": None if program.static.compute_given else _f(c.T_flop),
            "stage_time_s": _f(c.T_stage),
            "bytes_read_per_gpu": _f(c.bytes_gpu),
            "flops_per_gpu": _f(c.flops_gpu),
        },
        "memory": {**{p.key: _f(c.memory[p.name]) for p in MEMORY_PARTS}, "limit_bytes": limit},
        "volume_bytes_per_step": _f(m.volume),
        "hops_per_step": _f(m.hops),
        "collectives": [collective_record(k) for k in program.collectives if not analysis.costs_nothing(k)],
        "checklist": items,
    }
    return doc


# ---------------------------------------------------------------------------------------------------

def _plans_to_evaluate(spec: S.Spec) -> list[str]:
    names = list(spec.local_plans) or list(spec.plans)
    for cmp in spec.compares.values():
        for p in cmp.plans:
            if p.name not in names and p.name in spec.plans:
                names.append(p.name)
    return names


def evaluate(spec: S.Spec, progress=None) -> Results:
    """Evaluate every plan written in the spec (and every plan a comparison names), every sweep and every
    comparison, in float mode. Raises one ``CcostError`` with the diagnostics of every plan that cannot
    be evaluated."""
    diags = Diagnostics()
    plans: dict[str, PlanResult] = {}
    for name in _plans_to_evaluate(spec):
        try:
            plans[name] = evaluate_plan(spec.plans[name], spec.policy)
        except CcostError as exc:
            diags.extend(exc.diagnostics)
    sweeps = {}
    for name, sw in spec.sweeps.items():
        try:
            sweeps[name] = sweep_document(sw, spec.policy)
        except CcostError as exc:
            diags.extend(exc.diagnostics)
    compares = {}
    for name, cmp in spec.compares.items():
        missing = [p.name for p in cmp.plans if p.name not in plans]
        if missing:
            continue  # their own diagnostics are already in the bag
        compares[name] = compare_document(cmp, {p.name: plans[p.name].doc for p in cmp.plans})
    searches = _searches(spec, diags, progress)
    diags.raise_if_errors()
    return Results(spec, plans, sweeps, compares, searches)


def own_searches(spec: S.Spec) -> dict:
    """The searches this file writes: an imported file's searches are its own to run (a spec that imports
    a file with a search prices its plans without pricing that search again), as its plans are judged by
    its own policy. A file that writes nothing to evaluate (imports and a policy, an overlay for CI) runs
    the searches it imports, as it judges the plans it imports."""
    mine = {n: s for n, s in spec.searches.items() if s.span is None or s.span.file == spec.path}
    writes = spec.local_plans or mine or any(
        x.span is None or x.span.file == spec.path for x in (*spec.sweeps.values(), *spec.compares.values()))
    return mine if writes else dict(spec.searches)


def _searches(spec: S.Spec, diags: Diagnostics, progress=None) -> dict:
    """The spec's own `search` blocks (``own_searches``), priced by ``ccost.search``; imported
    only when there is one (it brings numpy's process pool and Dask hooks)."""
    mine = own_searches(spec)
    if not mine:
        return {}
    spec = replace(spec, searches=MappingProxyType(mine))
    from ccost import search

    fn = search.search_documents
    try:
        # progress(name, done, total): the CLI's bar for long searches (ccost.progress)
        return dict(fn(spec, progress) if progress is not None else fn(spec))
    except CcostError as exc:
        diags.extend(exc.diagnostics)
        return {}


#: Sweep fields that change how many GPUs a plan uses: only along them is there a time-optimal and a
#: cost-optimal point (more GPUs buy time at a price). A sweep over overlap, batch or the model has none.
GPU_AXES = frozenset(axes.NAMES)


def sweep_document(sw: S.Sweep, policy: S.Policy) -> dict:
    """A sweep: every point priced as a plan, the time-optimal point, the cost-optimal point per
    efficiency threshold (both only when the sweep varies a GPU count, ``GPU_AXES``; else None and {}),
    and the closed-form N* where the notes' model applies."""
    if sw.base is None:
        raise CcostError(error("E401", f"sweep `{sw.name}` has no base plan", sw.span))
    names = [f for f, _ in sw.fields]
    points = []
    for assign, plan in analysis.sweep_points(sw):
        errs = evaluation_errors(plan)
        point: dict[str, Any] = dict(assign)
        if errs:
            point["error"] = errs[0].message.replace(f"plan `{plan.name}`", "this point")
            points.append(point)
            continue
        r = evaluate_plan(plan, policy)
        d = r.doc
        point.update({
            "gpus": d["gpus"], "step_time_s": d["step_time_s"], "latency_s": d["latency_s"],
            "speedup": d["speedup"],
            "efficiency": d["efficiency"], "overhead": d["overhead"], "compute_time_s": d["compute_time_s"],
            "comm_time_s": d["comm_time_s"], "latency_term_s": d["latency_term_s"],
            "bandwidth_term_s": d["bandwidth_term_s"], "throughput_tokens_s": d["throughput_tokens_s"],
            "memory_bytes_per_gpu": d["memory_bytes_per_gpu"], "fits_memory": d["fits_memory"],
        })
        kind = phase_kind(plan.phase)
        if kind.sweep_keys:  # a serve plan's request figures (ccost.model.serve): what a concurrency sweep is for
            point.update({k: d[kind.section][k] for k in kind.sweep_keys})
        if kind.ranked_by_objective:  # what a serving sweep's optimum is chosen by (``serving_optimum``)
            point.update({"throughput_per_gpu": d["throughput_per_gpu"],
                          "cost_per_mtok_usd": d["cost"]["cost_per_mtok_usd"],
                          "meets_policy": not any(i["status"] == "fail" for i in r.checklist)})
            point.update({k: d[kind.section][k] for _, k in kind.latency_keys})
        points.append(point)
    doc = {"title": sw.title or sw.name, "field": names, "points": points}
    if phase_kind(sw.base.phase).ranked_by_objective:  # a serving plan: by the objective, never by efficiency
        objective = serving_objective(sw)
        best, value = serving_optimum(points, names, objective, phase_kind(sw.base.phase))
        doc.update({"time_optimal": None, "cost_optimal": {}, "objective": objective, "optimum": best,
                    "optimum_value": value})
    elif GPU_AXES & set(names):
        doc["time_optimal"], doc["cost_optimal"] = analysis.optima(points, names, policy)
    else:  # the fastest overlap or model is no "optimum" to act on: the table is the answer
        doc["time_optimal"], doc["cost_optimal"] = None, {}
    doc["continuous_optimum"] = continuous_optimum(sw)
    return doc


def serving_objective(sw: S.Sweep) -> str:
    """What picks a serving sweep's optimum: its ``objective``, else the cost per million tokens when every
    point's cluster is priced (the swept clusters, or the base's), else tokens/s per GPU."""
    if sw.objective:
        return sw.objective
    clusters = dict(sw.fields).get("cluster") or (sw.base.cluster,)
    return "cost_per_token" if all(c is not None and c.priced for c in clusters) else "throughput_per_gpu"


def serving_optimum(points: list[dict], names: list[str], objective: str, kind) -> tuple[dict | None, float | None]:
    """The point of a serving sweep that is best by ``objective`` among those that were evaluated, fit
    memory and meet the policy (no failed checklist item); ties go to the first in sweep order. (The point's
    varied fields, its value), or (None, None) when no point qualifies."""
    key = {"cost_per_token": "cost_per_mtok_usd", "throughput_per_gpu": "throughput_per_gpu",
           **dict(kind.latency_keys)}[objective]
    sign = -1.0 if objective == "throughput_per_gpu" else 1.0
    ok = [p for p in points if not p.get("error") and p.get("fits_memory") and p.get("meets_policy")
          and p.get(key) is not None]
    if not ok:
        return None, None
    best = min(ok, key=lambda p: sign * p[key])  # min keeps the first of equal values
    return {k: best[k] for k in names}, best[key]


def continuous_optimum(sw: S.Sweep) -> float | None:
    """N* = W·ln2/(2·α·c·L·BW) (“Communication Cost Math — Distributed Inference” §6) when the notes' model applies: the sweep varies tp only, on a
    decode plan with the tree AllReduce, c = 2 AllReduces per layer, α of the intra-node link."""
    base = sw.base
    if (base is None or [f for f, _ in sw.fields] != ["tp"] or not phase_kind(base.phase).closed_form_tp
            or base.allreduce != "tree"):
        return None
    model, cluster = base.model, base.cluster
    if model is None or cluster is None or cluster.gpu is None or cluster.intra_node is None:
        return None
    if not (cluster.intra_node.alpha > 0 and cluster.gpu.hbm_bandwidth > 0 and model.layers > 0):
        return None
    n = costs.tp_continuous_optimum(model.total_weight_bytes, cluster.gpu.hbm_bandwidth, cluster.intra_node.alpha,
                                    2, model.layers)  # c = 2 AllReduces per layer in decode
    return n if math.isfinite(n) else None


def compare_document(cmp: S.Compare, plan_docs: dict[str, dict]) -> dict:
    """A comparison: the plans ranked by ``by``, the recommendation with its reason and margin."""
    order, text = analysis.rank(cmp.by, plan_docs)
    return {
        "title": cmp.title or cmp.name,
        "by": cmp.by,
        "ranking": order,
        "recommendation": text,
        "values": {n: analysis.compare_value(cmp.by, plan_docs[n]) for n in order},
    }


def results_document(results: Results) -> dict:
    """The results document of docs/interface.md (normative keys in order; extras marked in
    ``plan_document``)."""
    from ccost.results import SCHEMA_VERSION

    doc: dict[str, Any] = {
        "ccost": results.version,  # the original interface's key, kept for scripts that read it
        "ccost_version": results.version,
        "schema_version": SCHEMA_VERSION,  # ccost.results: the key table, its JSON Schema and its docs
        "spec": results.spec.path,
        "plans": {name: r.doc for name, r in results.plans.items()},
    }
    if results.sweeps:
        doc["sweeps"] = results.sweeps
    if results.compares:
        doc["compares"] = results.compares
    if results.searches:
        doc["searches"] = results.searches
    return doc


# ---------------------------------------------------------------------------------------------------
# explain: the same evaluation on derivation values

def explain_sections(spec: S.Spec, plan_name: str) -> list[tuple[str, list[Step]]]:
    """The derivation of every number of one plan, grouped for reading: inputs, each collective, compute,
    memory, totals. Values are bit-identical to ``evaluate`` (same functions, derivation mode)."""
    plan = spec.plans.get(plan_name)
    if plan is None:
        from difflib import get_close_matches
        close = get_close_matches(plan_name, list(spec.plans), n=1)
        raise CcostError(error("E101", f"no plan named `{plan_name}` in {spec.path}", None,
                               f"did you mean `{close[0]}`?" if close else
                               "plans: " + ", ".join(spec.plans) if spec.plans else "the spec has no plans"))
    phase = phases.of(plan)
    evaluable(plan)
    priced = phase.price(plan, spec.policy, True)
    groups = phase.explain(plan, priced)
    econ = plan_economics(plan, spec.policy, priced.metrics, derivation=True)
    groups.append(("cost and power", econ.values))
    if trains_to_target(plan):  # ccost.model.target: the time to train, its goodput and money
        groups.append(("time to train", target.of_plan(plan, priced.program, priced.metrics, econ,
                                                       derivation=True).values))
    return _sections(groups)


def _sections(groups: list[tuple[str, list]]) -> list[tuple[str, list[Step]]]:
    """Each group's new derivation steps (a step is listed once, in the first group that needs it), and
    the inputs of them all first."""
    sections: list[tuple[str, list[Step]]] = []
    cumulative: list = []
    done = 0
    inputs: list[Step] = []
    for title, vals in groups:
        cumulative += vals
        all_steps = derive.steps(*cumulative)
        new = all_steps[done:]
        done = len(all_steps)
        inputs += [s for s in new if s.kind == "input"]
        sections.append((title, [s for s in new if s.kind != "input"]))
    return [("inputs", sorted(inputs, key=_input_order))] + sections


_INPUT_GROUPS = (("plan", 0), ("decode", 0), ("model", 1), ("gpu", 3), ("cluster", 3), ("policy", 4))


def _input_order(step: Step) -> int:
    """Inputs grouped by where they come from: the plan, the model, the links, the GPU and cluster, the
    policy, then constants of the model (FLOPs and optimizer bytes per parameter). Stable within a group."""
    src = step.source or ""
    for prefix, rank in _INPUT_GROUPS:
        if src.startswith(prefix):
            return rank
    if step.name.startswith(("α", "B_", "e_")):  # link parameters carry the link's own source
        return 2
    return 5


def explain(spec: S.Spec, plan_name: str) -> list[Step]:
    """Every step of one plan's derivation, inputs first (the contract's flat list)."""
    return [s for _, steps in explain_sections(spec, plan_name) for s in steps]


def plan_only(spec, name: str):
    """The spec narrowed to one plan: that plan, no sweeps or comparisons. Unknown name: E101."""
    from dataclasses import replace
    from difflib import get_close_matches

    if name not in spec.plans:
        close = get_close_matches(name, list(spec.plans), n=1)
        raise CcostError(error("E101", f"no plan named `{name}` in {spec.path}", None,
                               f"did you mean `{close[0]}`?" if close else
                               ("plans: " + ", ".join(spec.plans)) if spec.plans else "the spec has no plans"))
    return replace(spec, sweeps={}, compares={}, searches={}, local_plans=(name,))
