"""ccost against published measurements: the validation bench.

    python bench/validate.py [--rows bench/validation/rows.yaml] [--json]

For every development row (bench/validation/rows.yaml: the plan that models it, the published figure and
its source) prints measured, predicted, their ratio (predicted / measured) and ccost's bottleneck, then
per metric kind and overall the median factor (a factor is max(ratio, 1/ratio): 1.25 means 25 % off in
either direction), the worst factor, and the Spearman rank correlation of the Megatron rows. Every row is
predicted from the bundled library's defaults with one set of assumptions; nothing is tuned per row.
A benchmark, not a test: tests/test_validation.py holds the rows to their tolerance.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROWS = HERE / "validation" / "rows.yaml"


@dataclass(frozen=True)
class Row:
    id: str
    stack: str
    plan: str
    metric: str
    measured: float
    predicted: float
    bottleneck: str
    as_published: str

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured

    @property
    def factor(self) -> float:
        r = self.ratio
        return max(r, 1 / r)


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


def predict(rows_file: Path = ROWS) -> list[Row]:
    from ccost import check, evaluate

    data = yaml.safe_load(rows_file.read_text(encoding="utf-8"))
    results: dict[str, tuple] = {}
    out = []
    for r in data["rows"]:
        spec_path = str(rows_file.parent / r["spec"])
        if spec_path not in results:
            spec, _ = check.load_spec(spec_path)
            results[spec_path] = (spec, evaluate.evaluate(spec))
        spec, res = results[spec_path]
        doc = res.plans[r["plan"]].doc
        plan = spec.plans[r["plan"]]
        metric = r["metric"]
        if metric == "decode_step":
            pred = doc["step_time_s"]
        elif metric == "prefill":
            pred = doc["latency_s"]
        elif metric == "train_tokens":
            pred = doc["throughput_tokens_s"] / doc["gpus"]
        elif metric == "train_tflops":
            fpt = megatron_flops_per_token(plan.model, plan.seq)
            pred = doc["throughput_tokens_s"] / doc["gpus"] * fpt
        else:
            raise SystemExit(f"{rows_file}: row {r['id']}: unknown metric {metric!r}")
        out.append(Row(r["id"], r["stack"], r["plan"], metric, float(r["measured"]), float(pred),
                       _bottleneck(doc), r.get("as_published", "")))
    return out


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


def _fmt(metric: str, v: float) -> str:
    if metric in ("decode_step", "prefill"):
        return f"{v * 1e3:9.2f} ms"
    if metric == "train_tflops":
        return f"{v / 1e12:7.1f} TF/s"
    return f"{v:8.0f} tok/s"


def summary(rows: list[Row]) -> dict:
    groups = {"inference": [r for r in rows if r.metric in ("decode_step", "prefill")],
              "training": [r for r in rows if r.metric.startswith("train")], "all": rows}
    out = {}
    for name, rs in groups.items():
        if rs:
            out[name] = {"rows": len(rs), "median_factor": statistics.median(r.factor for r in rs),
                         "worst_factor": max(r.factor for r in rs),
                         "worst_row": max(rs, key=lambda r: r.factor).id,
                         "median_ratio": statistics.median(r.ratio for r in rs)}
    meg = [r for r in rows if r.stack == "megatron"]
    if len(meg) > 2:
        out["megatron_spearman"] = spearman([r.measured for r in meg], [r.predicted for r in meg])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--json", action="store_true", help="print the rows and the summary as JSON")
    args = ap.parse_args(argv)
    rows = predict(args.rows)
    s = summary(rows)
    if args.json:
        print(json.dumps({"rows": [dict(r.__dict__, ratio=r.ratio, factor=r.factor) for r in rows],
                          "summary": s}, indent=2))
        return 0
    print(f"{'row':8} {'stack':10} {'measured':>13} {'predicted':>13} {'ratio':>6}  bottleneck")
    for r in rows:
        print(f"{r.id:8} {r.stack:10} {_fmt(r.metric, r.measured):>13} {_fmt(r.metric, r.predicted):>13} "
              f"{r.ratio:6.2f}  {r.bottleneck}")
    print()
    for name in ("inference", "training", "all"):
        if name in s:
            g = s[name]
            print(f"{name:10} {g['rows']:3d} rows  median factor {g['median_factor']:.2f}x  "
                  f"worst {g['worst_factor']:.2f}x ({g['worst_row']})  median ratio {g['median_ratio']:.2f}")
    if "megatron_spearman" in s:
        print(f"Megatron rows: Spearman rank correlation {s['megatron_spearman']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
