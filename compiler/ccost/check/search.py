"""A search block's own rules, beyond its field types: the fields a search can vary, its size limit (E402),
``max_gpus`` against the cluster (E203), and the combinations of its fleet axes that no layout could
price (E404, from the plan rules ``evaluation_errors``). The build pass (``ccost.check.build``) runs
``validate`` on each search it builds; ``ccost.search`` applies the same rules before it runs one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ccost import axes
from ccost import spec as S
from ccost.check.plan import evaluation_errors
from ccost.diagnostics import Diagnostic, Span, error
from ccost.results import FLEET_COLUMNS
from ccost.schema import PHASES, targeted

#: Fields a search can vary as arrays: plan field → ``lower.Inputs`` attribute (seq feeds two inputs).
ARRAY_AXES: Mapping[str, str] = {**{a.name: a.name for a in axes.AXES if a.searchable}, "batch": "B",
                                 "microbatches": "M", "seq": "S", "overlap": "overlap"}
#: Fields a search varies with one pass per value (they change which formulas run).
STATIC_AXES = ("allreduce", "fsdp", "cross_node", "one_shot_volume", *(
    # training's choices (ccost.model.training): each changes which formulas run, or (virtual_stages) the schedule's
    # shape the layout rules read
    "recompute", "sequence_parallel", "optimizer_sharding", "schedule", "virtual_stages"))
#: Objectives that rank by a training target's time and money (ccost.model.target): the base plan must state one.
TARGET_OBJECTIVES = ("time_to_train", "train_cost")
#: Fleet axes: which model, cluster, workload and software stack. Each combination is a sub-space of
#: its own (the layout constraints use its model and cluster), priced one pass per value like the
#: static axes; the records name the model, cluster and stack.
FLEET_AXES = ("model", "cluster", "phase", "stack")
SEARCHABLE = tuple(ARRAY_AXES) + STATIC_AXES + FLEET_AXES
#: What a capacity search (a search whose base is an online plan, ``ccost.capacity``) varies.
CAPACITY_AXES = FLEET_COLUMNS
#: The largest `limit` a search may set (E402 says so).
MAX_LIMIT = 1_000_000_000


def size_text(search: S.Search) -> str:
    """'11 tp × 11 pp × 5 allreduce' — how a search's size comes about."""
    return " × ".join(f"{len(v):,} {f}" for f, v in search.axes)


def validate(search: S.Search, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """Checks of a search block beyond the field types: only searchable fields are varied, the search is
    within its ``limit`` (E402, saying how large it is), ``max_gpus`` fits the cluster, its base can be
    searched (E401: a serve plan is compared or swept; an online plan's search is a capacity search), and
    the capacity search's own fields and axes."""
    out: list[Diagnostic] = []
    base = search.base
    capacity = base is not None and PHASES[base.phase].capacity
    for f, _ in search.axes:
        if capacity and f not in CAPACITY_AXES:
            out.append(error("E205", f"search `{search.name}` is a capacity search (its base `{base.name}` is an "
                             f"{base.phase} plan) and cannot vary `{f}`", where(f) or search.span,
                             help="a capacity search varies " + ", ".join(CAPACITY_AXES)))
        elif not capacity and f not in SEARCHABLE:
            out.append(error("E205", f"search `{search.name}` cannot vary `{f}`", where(f) or search.span,
                             help="a search varies " + ", ".join(SEARCHABLE) + f"; to compare values of `{f}`, "
                             "write one search per value, or a sweep"
                             + ("; `" + f + "` is varied by a capacity search (an online base plan)"
                                if f in CAPACITY_AXES else "")))
    if base is not None and not capacity and not PHASES[base.phase].searchable:
        kind = PHASES[base.phase]
        out.append(error("E401", f"search `{search.name}`: its base plan `{base.name}` is a {kind.name} plan, which "
                         "the layout search does not price", where("base") or search.span, kind.search_help))
    if not capacity and (search.objective == "cost_per_month" or "headroom" in search.spans):
        what = "objective = cost_per_month" if search.objective == "cost_per_month" else "headroom"
        out.append(error("E203", f"search `{search.name}`: `{what}` applies to a capacity search (an online base "
                         "plan), which sizes a fleet", where("objective" if what.startswith("obj") else "headroom")
                         or search.span, help="rank layouts by cost_per_token, or make an online plan the base"))
    out += _target_diagnostics(search, where)
    n = search.size
    if n > search.limit:
        out.append(error(
            "E402", f"search `{search.name}` has {n:,} points ({size_text(search)}), more than its limit "
            f"of {search.limit:,}", where("limit") or search.span,
            help=f"narrow the lists, or raise the limit (`limit = {min(MAX_LIMIT, n):_}`, at most "
                 f"{MAX_LIMIT:_}; about a second per million points)"))
    base = search.base
    clusters = dict(search.axes).get("cluster") or ((base.cluster,) if base is not None else ())
    biggest = max((c for c in clusters if c is not None), key=lambda c: c.gpus, default=None)
    if biggest is not None and search.max_gpus is not None and search.max_gpus > biggest.gpus:
        out.append(error(
            "E203", f"search `{search.name}`: max_gpus = {search.max_gpus:,} is more than cluster "
            f"`{biggest.name}` has ({biggest.gpus:,})", where("max_gpus") or search.span,
            help=f"use max_gpus ≤ {biggest.gpus:,}, or a larger cluster in the base plan"))
    if not any(d.code == "E205" for d in out) and not capacity:
        out += fleet_diagnostics(search, where)
    return out


def _target_diagnostics(search: S.Search, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """E205 for what a training search cannot vary or rank by: a training field on a base plan of another
    phase, `batch` when the base plan's global batch derives it, a time-to-train objective without a
    training target."""
    from ccost.schema import SCHEMA

    base = search.base
    if base is None:
        return []
    out: list[Diagnostic] = []
    phases = set(dict(search.axes).get("phase") or (base.phase,))  # (names: the registry's keys)
    plan_kind = SCHEMA["plan"]
    for f, _ in search.axes:
        field = plan_kind.field(f)
        if f in STATIC_AXES and field is not None and field.phases and not phases & set(field.phases):
            out.append(error("E205", f"search `{search.name}` varies `{f}`, which applies to "
                             + " and ".join(field.phases) + f" plans only; its base plan `{base.name}` is a "
                             f"{base.phase} plan", where(f) or search.span,
                             help=f"remove `{f}`, or search a {field.phases[0]} plan"))
    targets = any(PHASES[x].targets for x in phases if x in PHASES)
    if "batch" in dict(search.axes) and base.global_sequences is not None and targets:
        gb = "global_batch" if base.global_batch is not None else "global_batch_tokens"
        out.append(error("E205", f"search `{search.name}` varies `batch`, but its base plan `{base.name}` fixes "
                         f"the global batch (`{gb}`): each layout's batch is the global batch / (dp·ep)",
                         where("batch") or search.span,
                         help="remove `batch` (vary dp, and the batch follows), or remove the base plan's "
                              f"`{gb}`"))
    if "microbatches" in dict(search.axes) and base.microbatch_size is not None and targets:
        out.append(error("E205", f"search `{search.name}` varies `microbatches`, but its base plan `{base.name}` "
                         f"fixes `microbatch_size`: each layout's micro-batches are batch / microbatch_size",
                         where("microbatches") or search.span,
                         help="remove `microbatches`, or remove the base plan's `microbatch_size`"))
    if search.objective in TARGET_OBJECTIVES and not targeted(base):
        out.append(error("E205", f"search `{search.name}` ranks by {search.objective}, but its base plan "
                         f"`{base.name}` states no training target", where("objective") or search.span,
                         help=f"give plan `{base.name}` `train_tokens = ...` (a training plan), or rank by "
                              "another objective"))
    return out


def fleet_diagnostics(search: S.Search, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """E404 for each combination of the fleet axes (model × cluster × phase × stack) that no layout
    could make a plan: a prefill or training phase without ``seq``, a GPU without the rates the
    formulas need, a model without parameters. Layout problems (too many GPUs, stages without layers)
    are not errors: the search's constraints count them."""
    base = search.base
    fleet = [(f, v) for f, v in search.axes if f in FLEET_AXES]
    if base is None or not fleet or base.model is None or base.cluster is None:
        return []
    varied = dict(search.axes)
    seqs = varied.get("seq") or (base.seq,)
    out: list[Diagnostic] = []
    layout = dict.fromkeys(axes.NAMES, 1)  # the smallest layout: only the combination counts
    # a phase the search cannot price (serve: several steps per point, ccost.model.serve), not one program
    kinds = [PHASES.get(p) for p in dict.fromkeys(varied.get("phase") or ())]
    for kind in (k for k in kinds if k is not None and not k.searchable):
        out.append(error("E404", f"search `{search.name}`: `{kind.name}` cannot be a value of the `phase` axis: "
                         f"{kind.search_refusal}, which the layout search does not", where("phase") or search.span,
                         help=kind.axis_help))
    for combo in itertools.product(*(v for _, v in fleet)):
        fixed = dict(zip((f for f, _ in fleet), combo))
        if "phase" in fixed and not getattr(PHASES.get(fixed["phase"]), "searchable", True):
            continue
        plan = S.vary(base, **fixed, **layout, seq=seqs[0])
        errs = [d for d in evaluation_errors(plan) if d.is_error and d.code not in ("E301", "E302")
                and "leaves stages without a layer" not in d.message]
        if errs:
            field = next((f for f in ("phase", "model", "cluster", "stack") if f in fixed), fleet[0][0])
            out.append(error(
                "E404", f"search `{search.name}`: the combination {combo_label(fixed)} cannot be evaluated: "
                + "; ".join(d.message for d in errs), where(field) or search.span,
                help="drop that value from its axis"
                     + (", or give the base plan `seq = ...`" if any("needs `seq`" in d.message for d in errs)
                        else ", or fix the block it names")))
        if len(out) >= 5:
            break
    return out


def combo_label(fixed: Mapping[str, Any]) -> str:
    """'model=llama, cluster=h100x64' — one combination of a search's fleet axes."""
    return ", ".join(f"{f}={value_name(v)}" for f, v in fixed.items())


def value_name(v) -> Any:
    """A searched value as a record holds it: an entity by its name."""
    return v.name if isinstance(v, S.Entity) else v


def validate_compare(cmp: S.Compare, where: Callable[..., Span | None]) -> list[Diagnostic]:
    """A comparison by cost per token needs every plan priced (E403, as a cost search does)."""
    if cmp.by != "cost_per_token":
        return []
    out = []
    for p in cmp.plans:
        if p.cluster is not None and not p.cluster.priced:
            gpu = p.cluster.gpu.name if p.cluster.gpu is not None else "its gpu"
            out.append(error("E403", f"compare `{cmp.name}` ranks by cost_per_token, but plan `{p.name}` is not "
                             "priced", where("by") or cmp.span, f"give gpu `{gpu}` a `price_per_hour` (e.g. "
                             f"`price_per_hour = 3.78 USD/h`) or cluster `{p.cluster.name}` a `price_per_gpu_hour` "
                             "or `price_per_node_hour`"))
    return out
