"""``ccost explain SPEC PLAN``: the derivation of every number of one plan, formula → values → result.

Grouped for a reviewer reading line by line: the inputs (with where each came from), each collective of
the plan's program, compute, memory, the totals, and the checklist. The numbers are computed by the very
functions ``ccost eval`` uses, on derivation values, so they are bit-identical to ``eval --format json``.
"""

from __future__ import annotations

import argparse
import sys

HELP = "derive every number of one plan, formula -> values -> result"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="the .ccost file")
    parser.add_argument("plan", metavar="PLAN", help="the plan to explain")


_STATUS = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "n/a": "n/a "}


def render(spec, plan_name: str) -> str:
    """The text ``ccost explain`` prints."""
    from ccost import axes, evaluate, output
    from ccost.schema import phase_kind

    sections = evaluate.explain_sections(spec, plan_name)
    plan = spec.plans[plan_name]
    result = evaluate.evaluate_plan(plan, spec.policy)
    out = [f"plan {plan_name}" + (f" — {plan.title}" if plan.title else "") + f"  ({spec.path})",
           f"phase {plan.phase}; " + " ".join(f"{a.name}={getattr(plan, a.name)}" for a in axes.used(plan)) + ", "
           + phase_kind(plan.phase).workload(plan) + f"; AllReduce {plan.allreduce}"]
    for title, steps in sections:
        if not steps:
            continue
        out += ["", f"## {title}"]
        out += [f"  {s.line()}" for s in steps]
    doc = result.doc
    out += ["", "## result"]
    out.append(f"  regime: {doc['regime']} (latency term {output.fmt_time(doc['latency_term_s'])} vs bandwidth "
               f"term {output.fmt_time(doc['bandwidth_term_s'])})")
    for c in doc["collectives"]:
        if c.get("reason"):
            out.append(f"  {c['purpose']}: auto chose {c['reason']}")
        if c.get("alternatives"):
            alts = ", ".join(f"{k} {output.fmt_time(v['total_time_s'])}" for k, v in c["alternatives"].items())
            out.append(f"  {c['purpose']}: across nodes, priced {c['cross_node']} (per step: {alts}; split is "
                       "the notes' A3 estimate, shown for comparison only)")
        if c.get("one_shot_alternative"):
            od = c["one_shot_alternative"]
            out.append(f"  {c['purpose']}: {od['note']}: under `{od['convention']}` each GPU would send "
                       f"{output.fmt_bytes(od['volume_bytes'])} per AllReduce, "
                       f"{output.fmt_time(od['total_time_s'])} per step")
        if c.get("note"):
            out.append(f"  {c['purpose']}: {c['note']}")
    out += ["", "## checklist (“Communication Cost Math — Distributed Inference” §7, and memory)"]
    for item in doc["checklist"]:
        out.append(f"  {item['id']:>2}. [{_STATUS.get(item['status'], item['status'])}] {item['title']}: "
                   f"{item['note']}")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from ccost.commands.eval import load, with_sources
    from ccost.diagnostics import CcostError

    spec, sources = load(args.spec)
    from ccost.diagnostics import escape_controls

    try:
        text = render(spec, args.plan)
    except CcostError as exc:
        raise with_sources(exc, sources)
    sys.stdout.write(escape_controls(text))  # titles and sources may carry ESC, BEL, ...
    return 0
