"""ccost against published measurements: the validation bench.

    python bench/validate.py [--rows bench/validation/rows.yaml] [--json] [--no-holdout]

For every row of bench/validation/rows.yaml (the plan that models it, the published figure and its source)
prints measured, predicted, their ratio (predicted / measured) and ccost's bottleneck. Every row is
predicted from the bundled library's defaults with one set of assumptions (a plan names the engine or
framework it runs, nothing else); nothing is tuned per row. Then:

* **overall**: per metric kind (inference, training) and per set (development: the shared validation
  README's table; added: published measurements added since), the median factor (a factor is
  max(ratio, 1/ratio): 1.25 means 25 % off in either direction), the worst factor and the median ratio;
* **by source, engine, GPU, size**: the same per group (the rows.yaml source tag; engine or framework that
  ran; the plan's GPU; the model's parameter count). Every row is a measurement on real GPUs. The added
  serving rows come from AIConfigurator's silicon table (tags AIC-IMX, AIC-GAP): end-to-end runs, the
  table's `silicon_*` columns, not AIConfigurator's estimates (bench/aic_silicon_rows.py says how each kind
  was measured and what is not published);
* **hold-outs by engine and by GPU**: for every fitted profile of std/stacks.ccost, its fit script
  (bench/fit_stack.py for serving, bench/fit_train_stack.py for training) is rerun without the rows of one
  group and the group's rows are predicted with what it fits; a row no fit uses is predicted by the
  bundled defaults (it was held out of every fit already). A profile left with no row to fit keeps its
  bundled values; the rows it prices are then listed as not held out;
* **the trend in size**: log(ratio) against log(parameters) by least squares, per metric family (decode:
  TPOT rows; training), its slope and the fitted ratio at 8 B and at 70 B parameters; a sign change (one
  above 1, the other below) is what a profile right on average but wrong in trend shows;
* the Spearman rank correlation of the Megatron rows, and per framework and GPU the rank correlation of
  measured and predicted MFU (does ccost rank a framework's model sizes by how well they use the GPU?);
* memory: whether every training layout that ran fits ccost's memory per GPU.

A benchmark, not a test: tests/test_validation.py holds the rows to their tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROWS = HERE / "validation" / "rows.yaml"
sys.path.insert(0, str(HERE))

INFERENCE = ("decode_step", "prefill", "serve_tpot")
TPOT = ("decode_step", "serve_tpot")
#: the sizes the trend is read at (parameters)
TREND_AT = (8e9, 70e9)
#: size groups (parameters, upper bounds), for the by-size table
SIZE_BINS = ((3e9, "< 3 B"), (15e9, "3-15 B"), (40e9, "15-40 B"), (100e9, "40-100 B"), (math.inf, "> 100 B"))


@dataclass(frozen=True)
class Row:
    id: str
    stack: str  # the engine or framework that ran
    plan: str
    metric: str
    measured: float
    predicted: float
    bottleneck: str
    as_published: str
    set: str = "development"
    version: str = ""
    gpu: str = ""
    params: float = 0.0
    source: str = ""  # the rows.yaml source tag (V9, AIC-IMX, LF, ...)
    mfu_scale: float = 0.0  # training: MFU per unit of the metric (model FLOPs per token / peak, or 1 / peak)
    fits_memory: bool = True  # ccost's memory per GPU is within the policy's limit

    @property
    def measured_mfu(self) -> float:
        return self.measured * self.mfu_scale

    @property
    def predicted_mfu(self) -> float:
        return self.predicted * self.mfu_scale

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured

    @property
    def factor(self) -> float:
        r = self.ratio
        return max(r, 1 / r)

    @property
    def family(self) -> str:
        return "inference" if self.metric in INFERENCE else "training"

    @property
    def size(self) -> str:
        return next(label for bound, label in SIZE_BINS if self.params < bound)


def generation(gpu: str) -> str:
    """The GPU's generation from its name: `h100_96g`, `h100_fp8` -> h100."""
    m = re.match(r"[a-z]+[0-9]+", gpu)
    return m.group(0) if m else gpu


def megatron_flops_per_token(model, seq: int) -> float:
    """Megatron's model FLOPs per token, forward and backward, no recompute (validation README):
    72·L·h²·(1 + s/(6h) + V/(12·L·h))."""
    L, h, V = model.layers, model.hidden, model.vocab
    return 72 * L * h * h * (1 + seq / (6 * h) + V / (12 * L * h))


def _bottleneck(doc: dict) -> str:
    """What dominates the step, in ccost's own terms."""
    item1 = next((i for i in doc.get("checklist", []) if i["id"] == 1), None)
    bound = "memory" if item1 and "memory-bound" in item1["note"] else "FLOPs"
    comm = doc.get("exposed_comm_s") or 0.0
    comp = doc.get("compute_time_s") or 0.0
    if comm > comp:
        return f"communication ({doc.get('regime')})"
    return f"{bound} ({comm / (comm + comp):.0%} comm)" if comp else bound


def load_rows(rows_file: Path = ROWS) -> list[dict]:
    data = yaml.safe_load(rows_file.read_text(encoding="utf-8"))
    return [dict(r, _dir=str(rows_file.parent)) for r in data["rows"]]


_SPECS: dict[str, tuple] = {}


def spec_of(row: dict):
    from ccost import check

    path = str(Path(row["_dir"]) / row["spec"])
    if path not in _SPECS:
        _SPECS[path] = check.load_spec(path)[0]
    return _SPECS[path]


def plan_of(row: dict, overrides: dict | None = None):
    """The row's plan; with ``overrides`` ({stack name: {field: value}}), its stack's fields replaced."""

    plan = spec_of(row).plans[row["plan"]]
    if overrides:
        stack = plan.stack  # the checker gives every plan one (the bundled default when it names none)
        if stack.name in overrides:
            plan = replace(plan, stack=replace(stack, **overrides[stack.name]))
    return plan


def predicted_of(row: dict, doc: dict, plan) -> float:
    metric = row["metric"]
    if metric == "decode_step":
        return doc["step_time_s"]
    if metric == "prefill":
        return doc["latency_s"]
    if metric == "serve_tpot":
        return doc["serve"]["tpot_s"]
    if metric == "train_tokens":
        return doc["throughput_tokens_s"] / doc["gpus"]
    if metric == "train_tflops":
        return doc["throughput_tokens_s"] / doc["gpus"] * megatron_flops_per_token(plan.model, plan.seq)
    raise SystemExit(f"row {row['id']}: unknown metric {metric!r}")


def price(rows: list[dict], overrides: dict | None = None) -> list[Row]:
    """Every row predicted, with the bundled stacks (or their fields replaced by ``overrides``)."""
    from ccost import evaluate

    out = []
    for r in rows:
        plan = plan_of(r, overrides)
        doc = evaluate.evaluate_plan(plan, spec_of(r).policy).doc
        peak = plan.cluster.gpu.flops
        scale = 0.0
        if r["metric"] == "train_tokens":
            scale = doc["training"]["model_flops_per_token"] / peak
        elif r["metric"] == "train_tflops":
            scale = 1.0 / peak
        out.append(Row(r["id"], r["stack"], r["plan"], r["metric"], float(r["measured"]),
                       float(predicted_of(r, doc, plan)), _bottleneck(doc), r.get("as_published", ""),
                       r.get("set", "development"), str(r.get("version", "")), generation(plan.cluster.gpu.name),
                       float(plan.model.params or 0.0), r.get("source") or r["id"].split("-")[0], scale,
                       bool(doc.get("fits_memory", True))))
    return out


def times(rows: list[dict], overrides: dict | None = None) -> list[float]:
    """The predicted time of each inference row alone (what a fit needs; no results document)."""
    from ccost.model import phases, serve

    out = []
    for r in rows:
        plan, policy = plan_of(r, overrides), spec_of(r).policy
        if r["metric"] == "serve_tpot":
            out.append(float(serve.terms(plan, policy).tpot))
            continue
        m = phases.analyse(phases.lower_plan(plan, policy))
        out.append(float(m.latency if r["metric"] == "prefill" else m.step))
    return out


def predict(rows_file: Path = ROWS) -> list[Row]:
    return price(load_rows(rows_file))


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        rk = [0.0] * len(v)
        for pos, i in enumerate(order):
            rk[i] = pos + 1.0
        return rk
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    d2 = sum((a - b) ** 2 for a, b in zip(rx, ry))
    return 1 - 6 * d2 / (n * (n * n - 1))


def stats(rs: list[Row]) -> dict:
    return {"rows": len(rs), "median_factor": statistics.median(r.factor for r in rs),
            "worst_factor": max(r.factor for r in rs), "worst_row": max(rs, key=lambda r: r.factor).id,
            "median_ratio": statistics.median(r.ratio for r in rs),
            "over_2x": sum(1 for r in rs if r.factor > 2)}


def _grouped(rows: list[Row], key) -> dict:
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return {k: stats(v) for k, v in sorted(groups.items())}


def trend(rows: list[Row]) -> dict | None:
    """log(ratio) = a + b·log(params) by least squares; the fitted ratio at 8 B and 70 B."""
    pts = [(math.log(r.params), math.log(r.ratio)) for r in rows if r.params > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    a = my - b * mx
    at = {f"{p / 1e9:.0f}B": math.exp(a + b * math.log(p)) for p in TREND_AT}
    lo, hi = at.values()
    return {"rows": n, "slope": b, "ratio_at": at, "sign_change": (lo - 1) * (hi - 1) < 0}


def summary(rows: list[Row]) -> dict:
    out: dict = {}
    for family in ("inference", "training"):
        for st in ("development", "added", "all"):
            rs = [r for r in rows if r.family == family and (st == "all" or r.set == st)]
            if rs:
                out[f"{family}/{st}"] = stats(rs)
    out["all"] = stats(rows)
    out["by_source"] = _grouped(rows, lambda r: f"{r.family}/{r.source}")
    out["by_engine"] = _grouped(rows, lambda r: f"{r.family}/{r.stack}")
    out["by_gpu"] = _grouped(rows, lambda r: f"{r.family}/{r.gpu}")
    out["by_size"] = _grouped(rows, lambda r: f"{r.family}/{r.size}")
    out["trend"] = {"decode (TPOT rows)": trend([r for r in rows if r.metric in TPOT]),
                    "training": trend([r for r in rows if r.family == "training"])}
    meg = [r for r in rows if r.stack == "megatron"]
    if len(meg) > 2:
        out["megatron_spearman"] = spearman([r.measured for r in meg], [r.predicted for r in meg])
    # within one framework on one GPU: does ccost rank the model sizes by MFU as the measurements do?
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.family == "training":
            groups.setdefault(f"{r.stack}/{r.gpu}", []).append(r)
    out["mfu_spearman"] = {k: {"rows": len(v), "rho": spearman([r.measured_mfu for r in v],
                                                                [r.predicted_mfu for r in v])}
                           for k, v in sorted(groups.items()) if len(v) > 2}
    out["not_fitting"] = [r.id for r in rows if r.family == "training" and not r.fits_memory]
    return out


# ---------------------------------------------------------------------------------------------------
# Hold-outs: every fitted profile refitted without a group's rows

def _profiles():
    """The fit scripts' profiles: (name, fit(rows) -> {stack: {field: value}}, uses(row) -> bool)."""
    import fit_stack
    import fit_train_stack

    return [("serving (bench/fit_stack.py)", fit_stack.fit_profiles, fit_stack.uses),
            ("training (bench/fit_train_stack.py)", fit_train_stack.fit_profiles, fit_train_stack.uses)]


def _stack_name(row: dict) -> str:

    plan = plan_of(row)
    return plan.stack.name


def holdout(rows: list[dict], key, label: str) -> dict:
    """For every value of ``key``: refit every profile without its rows, predict them. Returns per value
    the hold-out stats, and the rows that no refit could hold out."""
    keys = {}
    base = {r.id: r for r in price(rows)}
    for r in rows:
        keys.setdefault(key(base[r["id"]]), []).append(r)
    out = {}
    for value, group in sorted(keys.items()):
        ids = {r["id"] for r in group}
        overrides: dict = {}
        stuck: list[str] = []
        for _, fit, uses in _profiles():
            mine = [r for r in rows if uses(r)]
            if not any(r["id"] in ids for r in mine):
                continue  # the profile's fit never saw this group: its rows are held out already
            rest = [r for r in mine if r["id"] not in ids]
            fitted = (fit(rest) if rest else None) or {}
            overrides.update(fitted)
            # a stack of the group's rows that the refit could not fit keeps its bundled values, which
            # were fitted on these rows: not held out
            stuck += [r["id"] for r in mine if r["id"] in ids and _stack_name(r) not in fitted]
        priced = [r for r in price([r for r in group if r["id"] not in stuck], overrides)]
        out[value] = dict(stats(priced) if priced else {"rows": 0}, not_held_out=stuck)
    return {"by": label, "groups": out}


def holdouts(rows: list[dict]) -> dict:
    return {"engine": holdout(rows, lambda r: f"{r.family}/{r.stack}", "engine"),
            "gpu": holdout(rows, lambda r: f"{r.family}/{r.gpu}", "GPU")}


# ---------------------------------------------------------------------------------------------------

def _fmt(metric: str, v: float) -> str:
    if metric in INFERENCE:
        return f"{v * 1e3:9.2f} ms"
    if metric == "train_tflops":
        return f"{v / 1e12:7.1f} TF/s"
    return f"{v:8.0f} tok/s"


def _line(name: str, g: dict) -> str:
    if not g.get("rows"):
        return f"  {name:24} no row held out"
    return (f"  {name:24} {g['rows']:3d} rows  median factor {g['median_factor']:.2f}x  worst "
            f"{g['worst_factor']:.2f}x ({g['worst_row']})  median ratio {g['median_ratio']:.2f}"
            + (f"  {g['over_2x']} off by >2x" if g["over_2x"] else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--json", action="store_true", help="print the rows and the summary as JSON")
    ap.add_argument("--no-holdout", action="store_true", help="skip the hold-outs (they refit every profile)")
    args = ap.parse_args(argv)
    data = load_rows(args.rows)
    rows = price(data)
    s = summary(rows)
    if not args.no_holdout:
        s["holdout"] = holdouts(data)
    if args.json:
        print(json.dumps({"rows": [dict(r.__dict__, ratio=r.ratio, factor=r.factor) for r in rows],
                          "summary": s}, indent=2))
        return 0
    print(f"{'row':46} {'engine':10} {'gpu':5} {'measured':>13} {'predicted':>13} {'ratio':>6}  bottleneck")
    for r in rows:
        print(f"{r.id:46} {r.stack:10} {r.gpu:5} {_fmt(r.metric, r.measured):>13} "
              f"{_fmt(r.metric, r.predicted):>13} {r.ratio:6.2f}  {r.bottleneck}")
    print("\noverall")
    for name in [k for k in s if k.startswith(("inference/", "training/"))] + ["all"]:
        print(_line(name, s[name]))
    for title, key in (("by source (rows.yaml `sources`)", "by_source"), ("by engine", "by_engine"),
                       ("by GPU", "by_gpu"), ("by size", "by_size")):
        print(f"\n{title}")
        for name, g in s[key].items():
            print(_line(name, g))
    print("\ntrend in model size: log(ratio) against log(parameters)")
    for name, t in s["trend"].items():
        if t:
            at = ", ".join(f"{k} {v:.2f}" for k, v in t["ratio_at"].items())
            print(f"  {name:24} {t['rows']:3d} rows  slope {t['slope']:+.3f}  ratio at {at}"
                  + ("  SIGN CHANGE" if t["sign_change"] else ""))
    if "megatron_spearman" in s:
        print(f"\nMegatron rows: Spearman rank correlation {s['megatron_spearman']:.2f}")
    for name, g in s.get("mfu_spearman", {}).items():
        print(f"MFU ranking of the model sizes, {name}: Spearman {g['rho']:.2f} over {g['rows']} rows")
    tr = [r for r in rows if r.family == "training"]
    if tr:
        bad = s.get("not_fitting", [])
        print(f"memory: {len(tr) - len(bad)} of {len(tr)} training layouts that ran fit ccost's memory per GPU"
              + (f"; not: {', '.join(bad)}" if bad else ""))
    if "holdout" in s:
        for h in s["holdout"].values():
            print(f"\nhold-out by {h['by']} (every profile refitted without the group's rows)")
            for name, g in h["groups"].items():
                print(_line(name, g) + (f"  not held out: {', '.join(g['not_held_out'])}"
                                        if g.get("not_held_out") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
