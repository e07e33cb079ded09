"""The policy gate: which plans of a spec break its policy, as lines a CI log can show.

``ccost check --policy`` (``ccost.commands.check``) evaluates each clean spec and calls
``policy_failures(spec, results)``; any line returned makes it exit 1. The judging itself is done once, by
the checklist (``ccost.model.analysis.checklist``): the policy's thresholds are items 6 (overhead), 9
(efficiency), 11 (memory) and 12 (cost per million tokens, when the policy sets ``max_cost_per_mtok``), and
an item with status ``fail`` fails the gate. Warnings (spec-sheet α/β, TP
not dividing the KV heads, a large bubble) never fail it: they are for the review, not for CI.

Why the gate reads the checklist instead of comparing metrics with the policy itself: a number judged in
two places drifts; the review, ``ccost eval`` and the gate must agree on what fails.
"""

from __future__ import annotations

from typing import Any, Callable

from ccost import spec as S
from ccost import units

# How a failed item reads: (what was measured, comparison, threshold word, value formatter).
_PCT: Callable[[Any], str] = units.format_percent


def _bytes(x: Any) -> str:
    # decimal on both sides: "78.22 GB > limit 72 GB" compares at a glance, "72.85 GiB > 72 GB" does not
    return units.format_quantity(x, units.INFORMATION, binary=False)


def _days(x: Any) -> str:
    return units.format_quantity(x, units.TIME)


def _money(x: Any) -> str:
    return units.format_quantity(x, units.MONEY)


_ITEMS: dict[int, tuple[str, str, str, Callable[[Any], str]]] = {
    6: ("overhead", ">", "max", _PCT),
    9: ("efficiency", "<", "min", _PCT),
    11: ("memory per GPU", ">", "limit", _bytes),
    12: ("cost per million tokens", ">", "max", _money),
    # a training target's (ccost.model.target): the deadline (item 13 also fails for a GPU budget: its note says
    # so), and the policy's min_goodput
    13: ("time to train", ">", "deadline", _days),
    14: ("goodput", "<", "min", _PCT),
    # an online plan's SLOs at the peak rate (ccost.model.online): the worst figure over its limit
    15: ("SLOs at the peak (worst figure / its limit)", ">", "max", lambda x: f"{x:.3g}×"),
}


def judged(spec: S.Spec, results: Any) -> tuple[list[str], list[str]]:
    """(the plans judged, the checklist items they were judged on: ``6 overhead``, ...): the items the
    gate fails on that had a threshold from the policy (and any item that failed), in id order, so the
    gate's last line says what a green gate checked."""
    from ccost.evaluate import results_document

    plans = results_document(results).get("plans") or {}
    names = gated_plans(spec, list(plans))
    ids = sorted({i.get("id") for n in names for i in plans[n].get("checklist") or []
                  if (i.get("id") in _ITEMS and isinstance(i.get("threshold"), (int, float)))
                  or i.get("status") == "fail"}, key=lambda i: (i if isinstance(i, int) else 1 << 30, str(i)))
    return names, [f"{i} {_ITEMS[i][0]}" if i in _ITEMS else str(i) for i in ids]


def gated_plans(spec: S.Spec, evaluated: list[str]) -> list[str]:
    """The plans judged against this file's policy: those written in the file. A file that writes no plan
    but imports some (a policy overlay for CI) judges every plan it evaluated against its own policy.
    Imported plans are otherwise judged by their own file ("an imported file's policy does not leak")."""
    local = [p for p in spec.local_plans if p in evaluated]
    return local if spec.local_plans else list(evaluated)


def failure_line(plan: str, item: dict[str, Any]) -> str:
    """``tp16: checklist 6 overhead 431 % > max 30 %``."""
    ident = item.get("id")
    value, threshold = item.get("value"), item.get("threshold")
    known = _ITEMS.get(ident) if isinstance(ident, int) else None
    if ident == 13 and isinstance(value, (int, float)) and isinstance(threshold, (int, float)) \
            and value <= threshold:
        known = None  # the deadline is met: the GPU budget failed, which the note says
    if ident == 15:  # which SLO, at which rate, by how much: the note says it all
        return f"{plan}: checklist 15 SLOs at the peak: {item.get('note') or 'not met'}"
    if known is not None and isinstance(value, (int, float)) and isinstance(threshold, (int, float)):
        what, op, word, fmt = known
        return f"{plan}: checklist {ident} {what} {fmt(value)} {op} {word} {fmt(threshold)}"
    # An item this module has no wording for (added to the checklist later): its title and note say it.
    note = item.get("note") or ""
    return f"{plan}: checklist {ident} {item.get('title', '')} failed" + (f": {note}" if note else "")


def policy_failures(spec: S.Spec, results: Any) -> list[str]:
    """One line per failed checklist item of every plan judged against the spec's policy; empty when the
    spec passes. ``results`` is what ``ccost.evaluate.evaluate(spec)`` returned."""
    from ccost.evaluate import results_document

    plans = results_document(results).get("plans") or {}
    lines: list[str] = []
    for name in gated_plans(spec, list(plans)):
        for item in plans[name].get("checklist") or []:
            if item.get("status") == "fail":
                lines.append(failure_line(name, item))
    return lines


_PASS_OP = {">": "≤", "<": "≥"}


def pass_line(plan: str, items: list[dict[str, Any]]) -> str:
    """``tp8: policy ok (overhead 12.3 % ≤ max 30 %, efficiency 81 % ≥ min 70 %, memory ... ≤ limit ...)``:
    a passing plan with the numbers it passed on, so a green gate says why it is green."""
    parts = []
    for item in items:
        ident = item.get("id")
        known = _ITEMS.get(ident) if isinstance(ident, int) else None
        value, threshold = item.get("value"), item.get("threshold")
        if known is None or item.get("status") != "pass" or not isinstance(value, (int, float)) \
                or not isinstance(threshold, (int, float)):
            continue
        what, op, word, fmt = known
        parts.append(f"{what} {fmt(value)} {_PASS_OP[op]} {word} {fmt(threshold)}")
    return f"{plan}: policy ok" + (f" ({', '.join(parts)})" if parts else "")


def policy_passes(spec: S.Spec, results: Any) -> list[str]:
    """One line per plan judged against the policy that fails none of its items (see ``pass_line``)."""
    from ccost.evaluate import results_document

    plans = results_document(results).get("plans") or {}
    out = []
    for name in gated_plans(spec, list(plans)):
        items = plans[name].get("checklist") or []
        if not any(i.get("status") == "fail" for i in items):
            out.append(pass_line(name, items))
    return out


#: The checklist item that judges memory per GPU against the policy's share of the GPU (``ccost.model.analysis``).
MEMORY_ITEM = 11


def model_diagnostics(spec: S.Spec) -> list:
    """What ``ccost check`` learns from the cost model about the plans written in ``spec`` (memory is
    known at check time): W401 for a plan whose memory per GPU fails checklist item 11 (the
    rule the review, ``eval`` and this gate judge memory by, so the three agree), and the diagnostics of
    a plan the model refuses that the checker did not (none is known: ``check`` runs the same plan rules).
    The checker itself sits below the cost model (``ccost.check``), so the ``check`` command calls this."""
    from ccost import evaluate
    from ccost.diagnostics import CcostError, warning

    out = []
    for name in spec.local_plans:
        plan = spec.plans[name]
        try:
            r = evaluate.evaluate_plan(plan, spec.policy)
        except CcostError as exc:
            out.extend(exc.diagnostics)
            continue
        item = next((i for i in r.checklist if i.get("id") == MEMORY_ITEM), None)
        if item is None or item.get("status") != "fail" or plan.cluster is None or plan.cluster.gpu is None:
            continue
        gpu = plan.cluster.gpu
        out.append(warning(
            "W401", f"plan `{name}` does not fit in GPU memory: it needs {_bytes(item['value'])} per GPU, more "
            f"than its limit of {_bytes(item['threshold'])} ({units.format_percent(spec.policy.max_memory)} of the "
            f"{_bytes(gpu.memory)} of gpu `{gpu.name}`)", plan.span,
            help="shard it over more GPUs (tp, pp; in training also fsdp or optimizer_sharding) or hold fewer "
                 "sequences; `ccost eval` itemises the memory (checklist item 11), and `check --policy` fails "
                 "on it"))
    return out
