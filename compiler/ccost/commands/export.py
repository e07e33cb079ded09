"""``ccost export SPEC [NAME] [--format text|json]``: the engine launch settings a serving plan assumes.

For a capacity search (a search whose base is an online plan) the fleet it chose, for an online plan its
own engines: the vLLM and SGLang commands that start engines with the limits ccost priced (parallel
sizes, running requests, tokens a step; prefill and decode workers) and a ``vllm bench serve`` command
that replays the demand, so that the plan can be measured and the measurement fed back through
``ccost calibrate --steps`` (``ccost.launch``; docs/capacity.md). NAME defaults to the spec's first
capacity search, else its first online plan. Exit 0, or 2 when the spec has errors, names no such block
(E514) or its search finds no fleet that meets the SLOs (E514).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "print the engine launch settings and a benchmark command for a serving plan's fleet"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="the .ccost file")
    parser.add_argument("name", metavar="NAME", nargs="?",
                        help="a capacity search or an online plan (default: the first capacity search, else the "
                             "first online plan)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: the commands to run (default); json: the settings as `ccost eval` gives them")


def _refuse(message: str, help: str):
    from ccost.diagnostics import CcostError, error

    return CcostError(error("E514", message, None, help))


def settings(spec, name: str | None) -> tuple[str, dict]:
    """(a title, the launch settings) of ``name`` in ``spec``, or raise E514."""
    from ccost import capacity, launch
    from ccost.schema import PHASES

    searches = [s for s in spec.searches.values() if s.base is not None and PHASES[s.base.phase].capacity]
    plans = [p for p in spec.plans.values() if PHASES[p.phase].capacity]
    fix = ("add an online plan (`phase = online`, with a `traffic`), or a search whose base is one "
           "(docs/capacity.md)")
    if name is None:
        if not searches and not plans:
            raise _refuse(f"{spec.path}: no online plan and no capacity search to export", fix)
        name = (searches or plans)[0].name
    if name in spec.searches:
        sr = spec.searches[name]
        if sr not in searches:
            raise _refuse(f"search `{name}` is not a capacity search (its base is not an online plan)", fix)
        doc = capacity.run(sr, spec.policy)
        if doc["chosen"] is None:
            raise _refuse(f"search `{name}`: no fleet meets the SLOs, so there is nothing to launch",
                          "widen the search (more GPUs, other layouts), or relax the policy's SLOs")
        f = doc["chosen"]
        title = (f"search {name}: the chosen fleet, {f['mode']}, {f['gpus']} GPUs on {f['cluster']} "
                 f"(sized for {doc['sized_rate_per_s']:g} requests/s)")
        return title, f["launch"]
    if name in spec.plans:
        plan = spec.plans[name]
        if plan not in plans:
            raise _refuse(f"plan `{name}` is a {plan.phase} plan; only an online plan has engines to launch", fix)
        t = plan.traffic
        rate = t.peak if t.peak is not None else 1.0
        title = f"plan {name}: {plan.gpus} GPUs on {plan.cluster.name} (the benchmark at the peak, {rate:g}/s)"
        return title, launch.settings(launch.plan_fleet(plan), t, rate, spec.policy)
    known = ", ".join(s.name for s in searches) + (", " if searches and plans else "") + ", ".join(
        p.name for p in plans)
    raise _refuse(f"no capacity search or online plan named `{name}`", f"export one of: {known or 'none'}")


def run(args: argparse.Namespace) -> int:
    from ccost import launch
    from ccost.commands.eval import load, with_sources
    from ccost.diagnostics import CcostError, escape_controls

    spec, sources = load(args.spec)
    try:
        title, s = settings(spec, args.name)
    except CcostError as exc:
        raise with_sources(exc, sources)
    if args.format == "json":
        sys.stdout.write(json.dumps(s, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(escape_controls(launch.text(title, s)))
    return 0
