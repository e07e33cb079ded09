"""Writers for the results document: JSON, YAML and readable text tables.

The document itself (``ccost.evaluate.results_document``) is a plain dict of full-precision floats. The
writers here make it *stable*: the same document always gives the same bytes, and two documents that
differ in the 9th digit do not make a noisy git diff.

Number formatting (decided once, for JSON and YAML alike):

- a float is written with **7 significant digits** (``float(f"{x:.7g}")``, then Python's shortest
  ``repr``): 0.004805632 stays 0.004805632, 0.0048056321234 becomes 0.004805632. Seven digits are three
  more than any number the notes print and far inside the 0.5 % the conformance tests ask for, while
  keeping last-bit noise out of diffs. Whole numbers (146800640.0 bytes) are exact already and are never
  rounded;
- an integral value of a key that counts things (a key whose record in ``ccost.results`` is
  ``integral``: byte sizes, ``integer`` keys, ``count``, ``hops``, ``group_size``, ...) is written as an
  integer;
- NaN and infinities never reach a document (analysis turns them into ``None``); ``null`` is written for
  None. ``json.dumps(allow_nan=False)`` makes sure of it.

Key order is the insertion order of the document (normative keys first, in docs/interface.md's order), never
sorted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ccost import results, units
from ccost.results import fmt_bytes, fmt_gb, fmt_num, fmt_pct, fmt_time  # noqa: F401  (the writers' names)
from ccost.schema import PHASE_KINDS

SIGNIFICANT_DIGITS = 7

# Keys whose integral values are counts or byte sizes: written as integers (the `integral` records of
# ccost.results, by their last segment).
_INT_KEYS = results.integral_names()


def _is_int_key(key: str | None) -> bool:
    return key is not None and key in _INT_KEYS


def stable_number(x: float, key: str | None = None) -> int | float | None:
    """The value a writer puts in the document for the number ``x`` under ``key``."""
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == int(x) and abs(x) < 2.0**53:
        # whole numbers (byte counts, hop counts) are exact and stable already: never rounded
        return int(x) if _is_int_key(key) else float(int(x))  # float(int(x)) also turns -0.0 into 0.0
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}")


def normalize(doc: Any, key: str | None = None) -> Any:
    """A copy of ``doc`` with every number made stable (see module docstring); dict order is kept."""
    if isinstance(doc, dict):
        return {str(k): normalize(v, str(k)) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [normalize(v, key) for v in doc]
    if isinstance(doc, bool) or doc is None or isinstance(doc, str):
        return doc
    if isinstance(doc, (int, float)):
        return stable_number(doc, key)
    # numpy scalars and the like
    try:
        return stable_number(float(doc), key)
    except (TypeError, ValueError):
        return str(doc)


def to_json(doc: dict) -> str:
    """The document as JSON: stable numbers, insertion order, two-space indent, UTF-8 text."""
    return json.dumps(normalize(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def to_yaml(doc: dict) -> str:
    """The document as YAML: safe dumper, no aliases, insertion order, unicode kept, no line folding."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # a repeated small dict must not become &id001
            return True

    return yaml.dump(normalize(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     width=10_000, default_flow_style=False)


# ---------------------------------------------------------------------------------------------------
# Text: readable tables with units.

def table(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """An aligned plain-text table. ``align`` is one letter per column, ``l`` or ``r`` (default: first
    column left, the others right)."""
    cols = len(headers)
    align = align or ("l" + "r" * (cols - 1))
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(cell.ljust(widths[i]) if align[i] == "l" else cell.rjust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep] + [line(r) for r in rows])


_STATUS = {"pass": "pass", "warn": "WARN", "fail": "FAIL", "n/a": "n/a"}


def cost_lines(c: dict) -> list[tuple[str, str]]:
    """The plan's money and power (its ``cost`` section) as text lines; none when neither is known."""
    out = []
    money = units.MONEY
    if c.get("priced"):
        out.append(("cost", f"{units.format_quantity(c['cost_per_mtok_usd'], money)} per million {c['tokens']} "
                            f"tokens at {fmt_pct(c['load'])} load; "
                            f"{units.format_quantity(c['cost_per_hour_usd'], money)}/h, "
                            f"{units.format_quantity(c['cost_per_month_usd'], money)} per month (730 h)"))
    if c.get("power_w") is not None:
        out.append(("power", f"{units.format_quantity(c['power_w'], units.POWER)} "
                             f"({fmt_num(c['tokens_per_joule'], 4)} tokens/J)"))
    return out


def serve_lines(sv: dict | None) -> list[tuple[str, str]]:
    """A serve plan's request figures (ccost.model.serve), for the plan's text block."""
    if not sv:
        return []
    sat = "; prefill saturated: requests wait for a chunk" if sv["prefill_saturated"] else ""
    L = lambda key: results.label_in(key, "text")  # noqa: E731
    return [
        (L("serve"), f"{fmt_num(sv['concurrency'])} requests per replica ({fmt_num(sv['requests_running'])} in all), "
                  f"{fmt_num(sv['input_tokens'])} in / {fmt_num(sv['output_tokens'])} out, "
                  f"{fmt_num(sv['chunks_per_prompt'])} chunk(s) of ≤ {fmt_num(sv['chunk_tokens'])} tokens{sat}"),
        ("steps", f"decode {fmt_time(sv['decode_step_time_s'])}, mixed (decode + chunk) "
                  f"{fmt_time(sv['mixed_step_time_s'])}, {fmt_pct(sv['mixed_step_share'])} of steps mixed"),
        (L("ttft_s"), fmt_time(sv["ttft_s"])),
        (L("tpot_s"), fmt_time(sv["tpot_s"])),
        (L("request_latency_s"), fmt_time(sv["request_latency_s"])),
        (L("requests_per_s"), fmt_num(sv["requests_per_s"], 4)),
        (L("output_tokens_per_s"), f"{fmt_num(sv['output_tokens_per_s'], 4)} "
                                   f"({fmt_num(sv['output_tokens_per_s_per_gpu'], 4)} per GPU)"),
        (L("total_tokens_per_s"), f"{fmt_num(sv['total_tokens_per_s'], 4)} "
                                  f"({fmt_num(sv['total_tokens_per_s_per_gpu'], 4)} per GPU; in + out)"),
    ]


def fmt_tokens(n: float) -> str:
    """A token budget as people say it: ``15 T``, ``300 G``, ``4,194,304``."""
    for scale, prefix in ((1e12, "T"), (1e9, "G")):
        if n >= scale:
            return f"{units.format_quantity(n / scale, units.DIMENSIONLESS)} {prefix}"
    return fmt_num(n)


def fmt_key(key: str, value) -> str:
    """A value of the document in the text output, by its key's dimension (``ccost.results``): a time as
    ``4.48 ms``, a rate with four digits, a fraction as a percentage, bytes in binary units."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    rec = results.record(key)
    dim = rec.dimension if rec is not None else ""
    return {"time": fmt_time, "bytes": fmt_bytes, "gb": fmt_gb, "fraction": fmt_pct,
            "rate": lambda v: fmt_num(v, 4)}.get(dim, fmt_num)(value)


def training_lines(t: dict) -> list[tuple[str, str]]:
    """A training plan's model FLOP/s and MFU (its ``training`` section, ccost.model.training), after its cost."""
    L = lambda key: results.label_in(key, "text")  # noqa: E731
    return [(L("training.model_flops_per_gpu_s"),
             units.format_quantity(t["model_flops_per_gpu_s"] or 0.0, units.FLOP_RATE)
             + f"  ({L('training.mfu')} {fmt_pct(t['mfu'])})")]


def section_lines(section: str, values: dict) -> list[tuple[str, str]]:
    """A phase's own section of a plan (``ccost.schema.PHASE_KINDS``' ``section``) without lines of its own
    here: each number with its label."""
    return [(results.label_in(f"{section}.{k}", "text"), fmt_key(f"{section}.{k}", v)) for k, v in values.items()]


#: The text of a phase's section: (lines before the cost, lines after it). A section not here shows each of
#: its numbers (``section_lines``), before the cost.
SECTION_TEXT = {"serve": (serve_lines, None), "training": (None, training_lines)}


def target_lines(t: dict | None) -> list[tuple[str, str]]:
    """A training target's time and money (its ``target`` section, ccost.model.target), for the plan's text block."""
    if not t:
        return []
    L = lambda key: results.label_in(f"plans.<plan>.target.{key}")  # noqa: E731
    T = units.TIME
    what = (f"{fmt_tokens(t['train_tokens'])} tokens" if t.get("train_tokens") is not None else "")
    out = [("target", (what + " in " if what else "") + f"{fmt_num(t['train_steps'])} steps of "
                      f"{fmt_num(t['tokens_per_step'])} tokens"
                      + (f" (global batch {fmt_num(t['global_batch'])})" if t.get("global_batch") else ""))]
    if t["goodput_modelled"]:
        out.append((L("goodput"), f"{fmt_pct(t['goodput'])}  (an interruption every "
                                  f"{units.format_quantity(t['mtbf_s'], T)}; a checkpoint of "
                                  f"{fmt_gb(t['checkpoint_bytes'])} every "
                                  f"{units.format_quantity(t['checkpoint_interval_s'], T)}, written in "
                                  f"{units.format_quantity(t['checkpoint_time_s'], T)}; "
                                  f"{units.format_quantity(t['restart_time_s'], T)} to restart)"))
    else:
        out.append((L("goodput"), "not modelled (the cluster gives no checkpoint_bandwidth)"))
    verdict = ""
    if t.get("deadline_s") is not None:
        verdict = (f"; {'meets' if t['meets_deadline'] else 'MISSES'} the deadline of "
                   f"{units.format_quantity(t['deadline_s'], T)}")
    out.append((L("time_to_train_s"), f"{units.format_quantity(t['time_to_train_s'], T)}  (without "
                                      f"interruptions {units.format_quantity(t['ideal_time_s'], T)}){verdict}"))
    money = [f"{t['gpu_days']:,.0f} GPU-days"]
    if t.get("energy_j") is not None:
        money.append(units.format_quantity(t["energy_j"], units.ENERGY))
    if t.get("cost_usd") is not None:
        money.append(units.format_quantity(t["cost_usd"], units.MONEY))
    out.append(("run", ", ".join(money)))
    d = t.get("doubled") or {}
    if d.get("time_to_train_s") is not None:
        out.append((L("doubled"), f"{fmt_num(d['gpus'])} GPUs ({d['note']}): "
                                  f"{units.format_quantity(d['time_to_train_s'], T)}, goodput {fmt_pct(d['goodput'])}"
                                  + (f", {units.format_quantity(d['cost_usd'], units.MONEY)}"
                                     if d.get("cost_usd") is not None else "")))
    elif d.get("note"):
        out.append((L("doubled"), d["note"]))
    return out


def plan_text(name: str, p: dict) -> str:
    """One plan of the document as text: headline numbers, collectives, checklist."""
    out = [f"plan {name}" + (f" — {p['title']}" if p.get("title") and p["title"] != name else "")]
    L = lambda key: results.label_in(key, "text")  # noqa: E731
    kv = [
        (L("gpus"), fmt_num(p["gpus"])),
        (L("weight_bytes_per_gpu"), fmt_gb(p["weight_bytes_per_gpu"])),
        (L("memory_bytes_per_gpu"), fmt_gb(p["memory_bytes_per_gpu"])
         + ("" if p["fits_memory"] else "  (does NOT fit)")),
        (L("compute_time_s"), fmt_time(p["compute_time_s"])),
        (L("comm_time_s"), fmt_time(p["comm_time_s"])
         + f"  (latency {fmt_time(p['latency_term_s'])}, bandwidth {fmt_time(p['bandwidth_term_s'])})"),
        (L("exposed_comm_s"), fmt_time(p["exposed_comm_s"])),
        (L("step_time_s"), fmt_time(p["step_time_s"])
         + ((f"  ({p['training']['schedule']}; without the bubble: {fmt_time(p['latency_s'])})"
             if p.get("training") else
             f"  (pipelined; one pass through the stages: {fmt_time(p['latency_s'])})")
            if p.get("latency_s") is not None and fmt_time(p["latency_s"]) != fmt_time(p["step_time_s"]) else "")),
        (L("overhead"), fmt_pct(p["overhead"])),
        (L("speedup"), "—" if p["speedup"] is None else f"{fmt_num(p['speedup'], 3)}×"),
        (L("efficiency"), fmt_pct(p["efficiency"])),
        (L("bubble"), fmt_pct(p["bubble"])),
        (L("regime"), p["regime"]),
    ]
    if "throughput_tokens_s" in p:
        kv.append((L("throughput_tokens_s"), f"{fmt_num(p['throughput_tokens_s'], 4)} tokens/s "
                                 f"({fmt_num(p.get('throughput_per_gpu'), 4)} per GPU)"))
    sections = [(k.section, p[k.section]) for k in PHASE_KINDS if k.section and p.get(k.section)]
    for section, values in sections:
        before, _ = SECTION_TEXT.get(section, (lambda v, s=section: section_lines(s, v), None))
        kv += before(values) if before is not None else []
    kv += cost_lines(p.get("cost") or {})
    for section, values in sections:
        _, after = SECTION_TEXT.get(section, (None, None))
        kv += after(values) if after is not None else []
    kv += target_lines(p.get("target"))
    width = max(len(k) for k, _ in kv)
    out += [f"  {k.ljust(width)}  {v}" for k, v in kv]
    if p.get("collectives"):
        out.append("")
        rows = []
        for c in p["collectives"]:
            rows.append([
                c["kind"], c["purpose"], c["algorithm"], fmt_num(c["count"]), fmt_num(c["group_size"]),
                c["link"], fmt_bytes(c["message_bytes"]), fmt_num(c["hops"]), fmt_bytes(c["volume_bytes"]),
                fmt_time(c["time_s"]), fmt_time(c["time_s"] * c["count"]),
            ])
        out.append(_indent(table(
            ["collective", "purpose", "algorithm", "count", "P", "link", "message", "hops", "volume/GPU",
             "time each", "time/step"], rows, "llllrlrrrrr")))
        for c in p["collectives"]:
            if c.get("reason"):
                out.append(f"  · {c['kind']} ({c['purpose']}): {c['reason']}")
    if p.get("checklist"):
        out.append("")
        rows = [[str(item["id"]), _STATUS.get(item["status"], item["status"]), item["title"],
                 item.get("note", "")] for item in p["checklist"]]
        out.append(_indent(table(["#", "status", "check", "note"], rows, "rlll")))
    return "\n".join(out)


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in text.splitlines())


def fmt_field(field: str, value) -> str:
    """A plan field's value as the spec would write it: shares in % (`overlap = 90 %`), the rest as is."""
    if field in ("overlap",) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_pct(value)
    return str(value)


def _point_label(point: dict, fields: list[str]) -> str:
    return ", ".join(f"{f} = {fmt_field(f, point[f])}" for f in fields if f in point)


def point_keys(points: list) -> tuple[str, ...]:
    """The phase figures a sweep's points carry beside the step (``ccost.schema.PHASE_KINDS``'
    ``sweep_fields``: a serve plan's TTFT, TPOT, requests/s, output tokens/s), none for other sweeps."""
    for kind in PHASE_KINDS:
        if kind.sweep_keys and any(kind.sweep_keys[0] in pt for pt in points):
            return kind.sweep_keys
    return ()


def sweep_text(name: str, s: dict) -> str:
    fields = list(s["field"])
    out = [f"sweep {name}" + (f" — {s['title']}" if s.get("title") else "")]
    rows = []
    # a serve plan's sweep: its request figures too (the keys its phase's sweep points repeat)
    keys = point_keys(s["points"])
    extra = [results.label_in(k) for k in keys]
    unfit = []  # points that do not fit in memory: not a layout that runs, so no speedup or efficiency shown
    for pt in s["points"]:
        if pt.get("error"):
            rows.append([*(fmt_field(f, pt[f]) for f in fields), "—", "—", "—", "—", "—", "—"]
                        + ["—"] * len(extra))
            continue
        fits = pt.get("fits_memory", True)
        if not fits:
            unfit.append(pt)
        rows.append([*(fmt_field(f, pt[f]) for f in fields), fmt_time(pt["step_time_s"]),
                     "—" if pt["speedup"] is None or not fits else f"{fmt_num(pt['speedup'], 3)}×",
                     fmt_pct(pt["efficiency"] if fits else None), fmt_pct(pt["overhead"]),
                     fmt_gb(pt.get("memory_bytes_per_gpu")), "yes" if fits else "NO"]
                    + [fmt_key(k, pt[k]) for k in keys])
    heads = [results.label_in(k) for k in ("step_time_s", "speedup", "efficiency", "overhead")] + \
        [results.label_in(k, "short") for k in ("memory_bytes_per_gpu", "fits_memory")]
    out.append(_indent(table([*fields, *heads, *extra], rows,
                             "r" * len(fields) + "rrrrrl" + "r" * len(extra))))
    for pt in s["points"]:
        if pt.get("error"):
            out.append(f"  {_point_label(pt, fields)}: not evaluated: {pt['error']}")
    if unfit:
        out.append("  does not fit in memory (not a layout that runs; its speedup and efficiency against one "
                   "ideal GPU are in the JSON, not shown here): " + "; ".join(_point_label(pt, fields) for pt in unfit))
    if s.get("time_optimal"):
        out.append(f"  time-optimal: {_point_label(s['time_optimal'], fields)}")
    elif s["points"] and s.get("cost_optimal") and not any(pt.get("fits_memory") for pt in s["points"]):
        out.append("  time-optimal: none (no point fits in memory)")
    for thr, pt in (s.get("cost_optimal") or {}).items():
        label = _point_label(pt, fields) if pt else "none reaches it"
        out.append(f"  cost-optimal at efficiency ≥ {fmt_pct(float(thr))}: {label}")
    if s.get("objective"):  # a serving plan's sweep: the best point by its objective, never by efficiency
        best = s.get("optimum")
        value = s.get("optimum_value")
        shown = (fmt_num(value, 4) + (" USD per million tokens" if s["objective"] == "cost_per_token" else
                                      " tokens/s per GPU" if s["objective"] == "throughput_per_gpu" else "")
                 if s["objective"] in ("cost_per_token", "throughput_per_gpu") else fmt_time(value))
        out.append(f"  best by {s['objective']} among the points that fit memory and meet the policy: "
                   + (f"{_point_label(best, fields)} ({shown})" if best else "none"))
    if s.get("continuous_optimum") is not None:
        out.append(f"  continuous optimum N* = W·ln2/(2·α·c·L·BW) = {fmt_num(s['continuous_optimum'], 4)}")
    return "\n".join(out)


def compare_text(name: str, c: dict, plans: dict | None = None) -> str:
    """A comparison's ranking, one plan a line, each ranked down whatever its metric (memory, policy: see
    ``analysis.rank``) saying why, then the recommendation."""
    from ccost.model.analysis import ranked_down

    out = [f"compare {name}" + (f" — {c['title']}" if c.get("title") else "") + f" (by {c['by']})"]
    values = c.get("values") or {}
    fmt = {"latency": fmt_time, "overhead": fmt_pct, "efficiency": fmt_pct,
           "throughput": lambda v: "—" if v is None else f"{fmt_num(v, 4)} tokens/s",
           "throughput_per_gpu": lambda v: "—" if v is None else f"{fmt_num(v, 4)} tokens/s per GPU",
           "cost_per_token": lambda v: "—" if v is None else f"{fmt_num(v, 4)} USD/Mtok"}.get(c["by"], fmt_num)
    width = max((len(p) for p in c["ranking"]), default=0)
    for i, plan in enumerate(c["ranking"], 1):
        shown = f"  {fmt(values[plan])}" if plan in values else ""
        why = ranked_down(plans[plan]) if plans and plan in plans else None
        out.append(f"  {i}. {plan.ljust(width)}{shown}" + (f"  ({why})" if why else ""))
    out.append(f"  {c['recommendation']}")
    return "\n".join(out)


def to_text(doc: dict) -> str:
    """The document as readable text: one section per plan, sweep and comparison."""
    out = [f"ccost {doc['ccost']} — {doc['spec']}"]
    for name, p in doc.get("plans", {}).items():
        out += ["", plan_text(name, p)]
    for name, s in (doc.get("sweeps") or {}).items():
        out += ["", sweep_text(name, s)]
    for name, c in (doc.get("compares") or {}).items():
        out += ["", compare_text(name, c, doc.get("plans"))]
    for name, s in (doc.get("searches") or {}).items():  # top layouts, Pareto front, constraints
        out += ["", search_text(name, s)]
    return "\n".join(out) + "\n"


#: Pareto points the text output lists at most (JSON/YAML carry the whole front).
TEXT_FRONT = 25


#: The metric columns of a search's layout tables in the text output.
SEARCH_TEXT_METRICS = ("gpus", "latency_s", "step_time_s", "throughput_per_gpu", "efficiency", "overhead",
                       "memory_bytes_per_gpu", "fits_memory")
#: A training search's extra columns, when its records have them (ccost.model.target).
SEARCH_TARGET_COLUMNS = ("batch", "time_to_train_s", "goodput", "train_cost_usd")


def capacity_near_misses(s: dict) -> list[tuple[dict, list[str], float | None]]:
    """The fleets of a capacity search (its results document ``s``) that cost less than the chosen one (all,
    when none is chosen), were simulated (the screen passed them, or put them just short: ``ccost.capacity``)
    and missed the SLOs: (the fleet's record, what it misses in words, its simulated ``slo_ratio``: the worst
    figure over its limit, None when unbounded), cheapest first, each fleet once. What the answer's extra cost
    buys, and by how much the cheaper fleets missed."""
    chosen = s.get("chosen")
    cap = chosen.get("cost_per_month_usd") if chosen else None
    pct = s.get("slo_percentile", "p99")
    seen: set = set()
    out = []
    for r in s.get("confirmations") or ():
        sim_ = r.get("simulated") or {}
        key = tuple(r.get(k) for k in results.FLEET_COLUMNS)  # the mode follows from prefill_workers
        if sim_.get("meets") or key in seen:
            continue
        seen.add(key)  # a fleet's first simulation is its own; later ones (N+1) run it with a replica down
        cost = r.get("cost_per_month_usd")
        if cap is not None and (cost is None or cost >= cap):
            continue
        misses = [text for text, missed in results.slo_figures(
            pct, {m: sim_.get(f"{m}_slo_s") for m in ("ttft", "tpot", "e2e")},
            {m: s.get(f"max_{m}_s") for m in ("ttft", "tpot", "e2e")}, sim_.get("goodput_share"),
            s.get("min_slo_goodput")) if missed]
        if sim_.get("stable") is False:
            misses.append("its queue grows without bound")
        ratio = sim_.get("slo_ratio")
        out.append((r, misses, None if sim_.get("stable") is False else ratio))
    return sorted(out, key=lambda x: (x[0].get("cost_per_month_usd") or math.inf,
                                      math.inf if x[2] is None else x[2]))


def capacity_text(name: str, s: dict) -> str:
    """A capacity search (``ccost.capacity``) as readable text: what it sized for, the fleets it chose
    (simulated), N+1, each layout's highest rate per replica and the Pareto front (screened)."""
    out = [f"search {name}" + (f" — {s['title']}" if s.get("title") and s["title"] != name else "")]
    limits = ", ".join(f"{lab} ≤ {fmt_time(s[k])}" for k, lab in (("max_ttft_s", "TTFT"), ("max_tpot_s", "TPOT"),
                                                                   ("max_e2e_s", "E2E")) if s.get(k) is not None)
    if s.get("min_slo_goodput") is not None:
        limits += (", " if limits else "") + f"goodput ≥ {fmt_pct(s['min_slo_goodput'])}"
    out.append(f"  capacity search on base plan {s['base']}: traffic {s['traffic']} sized at "
               f"{fmt_num(s['sized_rate_per_s'], 4)} requests/s (peak {fmt_num(s['peak_rate_per_s'], 4)} × (1 + "
               f"{fmt_pct(s['headroom'])} headroom)); SLOs at {s['slo_percentile']}: {limits or 'none (stability only)'}")
    out.append(f"  {s['candidates']:,} fleets screened ({s['stable']:,} keep up, {s['meeting']:,} within the SLOs); "
               f"{s['simulations']:,} simulated, {s['screen_disagreements']:,} with a verdict other than the screen's; "
               f"objective {s['objective']}")
    if s.get("dropped"):
        out.append("  left out before screening: " + ", ".join(f"{k} {v:,}" for k, v in s["dropped"].items()))

    def fleet(r):
        w = (f"{r['prefill_workers']}×tp{r['prefill_tp']} + {r['decode_workers']}×tp{r['tp']}" if r["prefill_workers"]
             else f"tp{r['tp']}")
        return [r["cluster"], r["mode"], w + (f" pp{r['pp']}" if r["pp"] > 1 else "") + (f" ep{r['ep']}" if r["ep"] > 1
                                                                                           else ""),
                f"{r['dp']:,}", f"{r['max_seqs']:,}", f"{r['step_tokens']:,}", f"{r['gpus']:,}",
                fmt_num(r.get("cost_per_month_usd"), 6)]

    def lat(r, src):
        f = r.get(src) or {}
        return [fmt_time(f.get(k)) for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")]

    head = ["cluster", "mode", "workers", "replicas", "max_seqs", "step_tokens", "GPUs", "USD/month",
            "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"]
    rows = []
    for key, label in (("chosen", "chosen"), ("aggregated", "best aggregated"), ("disaggregated",
                                                                                  "best disaggregated")):
        r = s.get(key)
        rows.append([label, *(fleet(r) + lat(r, "simulated") if r else ["none meets the SLOs"] + [""] * 11)])
    n1 = s.get("n_plus_1")
    if n1:
        rows.append(["N+1", *fleet(n1), *lat(n1["one_down"], "simulated")])
    out += ["", "  fleets (latencies simulated at the sized rate; N+1's with one replica down):",
            _indent(table(["", *head], rows, "lllrrrrrrrrr" + "r"))]
    missed = capacity_near_misses(s)
    if missed:
        mrows = [[*fleet(r), "; ".join(m) or "—", "—" if w is None else f"{w:.3f}×"] for r, m, w in missed]
        out += ["", "  cheaper fleets simulated and rejected (what each misses, simulated at the sized rate):",
                _indent(table([*head[:8], "misses", "worst / limit"], mrows, "lllrrrrrlr"))]
    if s.get("layouts"):
        lrows = [[p["cluster"], p["mode"], (f"{p['prefill_workers']}×tp{p['prefill_tp']} + {p['decode_workers']}×tp"
                  f"{p['tp']}" if p["prefill_workers"] else f"tp{p['tp']}") + (f" pp{p['pp']}" if p["pp"] > 1 else "")
                  + (f" ep{p['ep']}" if p["ep"] > 1 else ""), f"{p['gpus']:,}",
                  fmt_num(p["highest_rate_per_s"], 4), "—" if p["replicas_for_rate"] is None
                  else f"{p['replicas_for_rate']:,}"] for p in s["layouts"]]
        out += ["", "  the highest rate one replica carries within the SLOs (screened), and the replicas the sized "
                    "rate needs:",
                _indent(table(["cluster", "mode", "workers", "GPUs", "requests/s", "replicas"], lrows, "lllrrr"))]
    front = s.get("pareto") or []
    if front:
        shown = front if len(front) <= TEXT_FRONT else [front[round(i * (len(front) - 1) / (TEXT_FRONT - 1))]
                                                        for i in range(TEXT_FRONT)]
        frows = [[*fleet(r), fmt_time(r["screened"]["e2e_p99_s"])] for r in shown]
        out += ["", f"  Pareto front, cost against the p99 request latency (screened), {len(front):,} fleets:",
                _indent(table([*head[:8], "E2E p99"], frows, "lllrrrrrr"))]
    return "\n".join(out)


def search_columns_note() -> str:
    """What a search table's two times are, in the results' own words (``results.KEYS``), for the tables
    that print them side by side: ``latency`` is one pass of the batch through every stage, ``pipelined
    step`` the step the throughput is counted on; they differ when a layout has pipeline stages or
    micro-batches."""
    lat, step = results.record("latency_s"), results.record("step_time_s")
    assert lat is not None and step is not None
    return (f"{lat.label_in('search')} = {lat.meaning.split(';')[0]}; {step.label_in('search')} = "
            f"{step.meaning}, the time throughput is counted on. They differ when a layout has pipeline "
            "stages or micro-batches.")


def search_text(name: str, s: dict) -> str:
    """One search of the results document as readable text: size, constraints, top layouts, Pareto front."""
    if s.get("kind") == "capacity":
        return capacity_text(name, s)
    axes = list(s["axes"])
    out = [f"search {name}" + (f" — {s['title']}" if s.get("title") and s["title"] != name else "")]
    out.append(f"  base plan {s['base']}; {s['points']:,} points ("
               + " × ".join(f"{len(v)} {f}" for f, v in s["axes"].items()) + f"); {s['feasible']:,} feasible; "
               f"objective {s['objective']}")
    if s["constraints"]:
        rows = [[c["constraint"], c["rule"], f"{c['tested']:,}", f"{c['failed']:,}", f"{c['removed']:,}"]
                for c in s["constraints"]]
        out.append("")
        out.append(_indent(table(["constraint", "keeps", "tested", "fail it", "removed"], rows, "llrrr")))
        from ccost.search import MB_RULE

        mb = any(c["constraint"] == MB_RULE for c in s["constraints"])
        out.append(f"  (layout constraints are tested on every point; the {s['priced']:,} points that pass them"
                   + (" and give every micro-batch a sequence" if mb else "")
                   + " are priced and tested on the rest; removed: failing this constraint and none above it)")
        for c in s["constraints"]:
            b = c.get("best_removed")
            if not b:
                continue
            k = c["constraint"]
            why = {"fits_memory": f"needs {fmt_gb(b['memory_bytes_per_gpu'])} per GPU"
                                  + (f" (limit {fmt_gb(c['limit_bytes'])})" if c.get("limit_bytes") else ""),
                   "max_overhead": f"overhead {fmt_pct(b['overhead'])} > {fmt_pct(c.get('threshold'))}",
                   "min_efficiency": f"efficiency {fmt_pct(b['efficiency'])} < {fmt_pct(c.get('threshold'))}",
                   "meets_deadline": f"{units.format_quantity(b.get('time_to_train_s'), units.TIME)} to train > "
                                     f"{units.format_quantity(c.get('threshold'), units.TIME)}",
                   }.get(k, "")
            layout = ", ".join(f"{f}={str(b[f]).lower() if isinstance(b[f], bool) else fmt_field(f, b[f])}"
                               for f in axes)
            out.append(f"  {k} cost: the best layout it removed ({layout}) would give "
                       f"{fmt_num(b['throughput_per_gpu'], 4)} tokens/s/GPU at {fmt_time(b['latency_s'])}"
                       f" on {b['gpus']:,} GPU{'' if b['gpus'] == 1 else 's'}, but {why}")

    def cell(p, f):
        if isinstance(p[f], bool):
            return str(p[f]).lower()
        if f == "allreduce" and p[f] == "auto" and p.get("tp_algorithm"):
            return f"auto: {p['tp_algorithm']}"  # what auto picked for the TP AllReduce
        return fmt_field(f, p[f])  # overlap in %

    priced = any("cost_per_mtok_usd" in p for p in [*s["top"], *s["pareto"]])
    # a training target's columns (ccost.model.target): the batch a fixed global batch gives, time to train, goodput, cost
    tcols = [k for k in SEARCH_TARGET_COLUMNS if any(k in p for p in [*s["top"], *s["pareto"]])]

    def tcell(p, k):
        v = p.get(k)
        if v is None:
            return "—"
        return {"time_to_train_s": lambda: units.format_quantity(v, units.TIME), "goodput": lambda: fmt_pct(v),
                "train_cost_usd": lambda: units.format_quantity(v, units.MONEY)}.get(k, lambda: fmt_num(v))()

    def rows_of(points):
        # a layout that does not fit in memory (a search with `fits_memory = false`) runs nowhere: its
        # efficiency is not shown as if it did
        return [[*(cell(p, f) for f in axes),
                 f"{p['gpus']:,}", fmt_time(p["latency_s"]), fmt_time(p["step_time_s"]),
                 fmt_num(p["throughput_per_gpu"], 4),
                 fmt_pct(p["efficiency"] if p.get("fits_memory", True) else None), fmt_pct(p["overhead"]),
                 fmt_gb(p["memory_bytes_per_gpu"]), "yes" if p.get("fits_memory", True) else "NO",
                 *((fmt_num(p.get("cost_per_mtok_usd"), 4),) if priced else ()), *(tcell(p, k) for k in tcols)]
                for p in points]

    headers = [*axes, *[results.label_in(k, "search") for k in SEARCH_TEXT_METRICS], *(("USD/Mtok",) if priced else ()),
               *[results.label_in(f"searches.<search>.top[].{k}", "search") for k in tcols]]
    align = "r" * len(axes) + "r" * (len(SEARCH_TEXT_METRICS) - 1) + "l" + ("r" if priced else "") + "r" * len(tcols)
    if s["top"]:
        from ccost.search import DISTINCT_NOTE

        once = f" ({DISTINCT_NOTE})" if s.get("distinct", True) else ""
        out += ["", f"  top {len(s['top'])} by {s['objective']}{once}:",
                _indent(table(headers, rows_of(s["top"]), align))]
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
                _indent(table(headers, rows_of(shown), align))]
    if s["top"] or front:
        out += ["", f"  {search_columns_note()}"]
    tg = s.get("target")
    if tg is not None:
        by = "cost" if tg["pareto_by"] == "train_cost_usd" else "GPU-days"
        goal = [f"{fmt_tokens(tg['train_tokens'])} tokens" if tg.get("train_tokens") is not None
                else f"{fmt_num(tg['train_steps'])} steps"]
        if tg.get("global_batch"):
            goal.append(f"global batch {fmt_num(tg['global_batch'])}")
        if tg.get("deadline_s") is not None:
            goal.append(f"deadline {units.format_quantity(tg['deadline_s'], units.TIME)}")
        if tg.get("gpu_budget") is not None:
            goal.append(f"at most {tg['gpu_budget']:,} GPUs")
        if tg["pareto"]:
            out += ["", f"  time to train against {by} ({', '.join(goal)}), {len(tg['pareto']):,} layout"
                        f"{'' if len(tg['pareto']) == 1 else 's'} no other beats on both, soonest first:",
                    _indent(table(headers, rows_of(tg["pareto"][:TEXT_FRONT]), align))]
        else:
            out += ["", f"  time to train against {by} ({', '.join(goal)}): no layout meets every constraint"]
        if tg.get("best_per_fleet"):
            out += ["", f"  the best layout of each {'/'.join(f for f in axes if f in ('model', 'cluster', 'phase', 'stack'))}"
                        f" by {s['objective']}:", _indent(table(headers, rows_of(tg["best_per_fleet"]), align))]
    return "\n".join(out)
