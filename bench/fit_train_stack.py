"""Fit the training stack profiles of std/stacks.ccost to the development training rows.

    python bench/fit_train_stack.py

For `megatron_core` it fits gemm_efficiency and elementwise_efficiency together over the nine Megatron-Core
rows (V2-1..9, bench/validation/rows.yaml), minimising the sum of squared log(predicted / measured); for
`torchtitan` it fits gemm_efficiency alone over its two rows (V5-1, V5-2), with elementwise_efficiency
taken from the Megatron fit (the memory-bound kernels run on the same HBM; torchtitan's extra unfused traffic
without torch.compile lands in its GEMM share). attention_efficiency stays at 50 % (FlashAttention-2 on H100,
the serving profile's source), tp_comm_overlap is what each stack does (Megatron-Core's --tp-comm-overlap;
torchtitan's FSDP runs have no TP). One set of values per stack, every row of the stack, no per-row value.
The printed values, rounded to whole percent, are what std/stacks.ccost holds.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from validate import ROWS, megatron_flops_per_token  # noqa: E402


def _rows(stack: str):
    from ccost import check

    data = yaml.safe_load(ROWS.read_text(encoding="utf-8"))
    rows = [r for r in data["rows"] if r["stack"] == stack]
    spec, _ = check.load_spec(str(ROWS.parent / rows[0]["spec"]))
    return spec, rows


def _loss(spec, rows, gemm: float, elem: float) -> float:
    from ccost import evaluate

    total = 0.0
    for r in rows:
        plan = spec.plans[r["plan"]]
        st = replace(plan.stack, gemm_efficiency=gemm, elementwise_efficiency=elem)
        doc = evaluate.evaluate_plan(replace(plan, stack=st), spec.policy).doc
        per_gpu = doc["throughput_tokens_s"] / doc["gpus"]
        pred = per_gpu * megatron_flops_per_token(plan.model, plan.seq) if r["metric"] == "train_tflops" \
            else per_gpu
        total += math.log(pred / float(r["measured"])) ** 2
    return total


def _grid(lo: float, hi: float, step: float):
    n = int(round((hi - lo) / step))
    return [round(lo + i * step, 6) for i in range(n + 1)]


def fit_two(spec, rows):
    """Coarse grid (2 %), then a fine one (0.5 %) around the best point."""
    best = min(((_loss(spec, rows, g, e), g, e) for g in _grid(0.40, 1.0, 0.02) for e in _grid(0.30, 1.0, 0.02)))
    _, g0, e0 = best
    best = min(((_loss(spec, rows, g, e), g, e) for g in _grid(max(0.3, g0 - 0.02), min(1.0, g0 + 0.02), 0.005)
                for e in _grid(max(0.1, e0 - 0.02), min(1.0, e0 + 0.02), 0.005)))
    return best


def fit_gemm(spec, rows, elem: float):
    best = min((_loss(spec, rows, g, elem), g) for g in _grid(0.20, 1.0, 0.01))
    _, g0 = best
    return min((_loss(spec, rows, g, elem), g) for g in _grid(max(0.1, g0 - 0.01), min(1.0, g0 + 0.01), 0.001))


def uses(row: dict) -> bool:
    """The rows.yaml rows these fits use: the Megatron-Core and torchtitan rows."""
    return row["stack"] in ("megatron", "torchtitan")


def fit_profiles(rows: list[dict]) -> dict:
    """The fits on ``rows`` (rows.yaml records, bench/validate.py's hold-outs): {stack name: {field: value}}.
    Without Megatron rows, torchtitan's elementwise share is the bundled megatron_core's."""
    from ccost import check

    out: dict = {}
    meg = [r for r in rows if r["stack"] == "megatron"]
    tt = [r for r in rows if r["stack"] == "torchtitan"]
    if meg:
        spec, _ = check.load_spec(str(ROWS.parent / meg[0]["spec"]))
        _, gemm, elem = fit_two(spec, meg)
        out["megatron_core"] = {"gemm_efficiency": gemm, "elementwise_efficiency": elem}
        out["training_default"] = dict(out["megatron_core"])
    else:
        spec, _ = check.load_spec(str(ROWS.parent / tt[0]["spec"]))
        elem = spec.stacks["megatron_core"].elementwise_efficiency
    if tt:
        spec, _ = check.load_spec(str(ROWS.parent / tt[0]["spec"]))
        _, gemm_t = fit_gemm(spec, tt, elem)
        out["torchtitan"] = {"gemm_efficiency": gemm_t, "elementwise_efficiency": elem}
    return out or None


def main() -> int:
    spec, rows = _rows("megatron")
    loss, gemm, elem = fit_two(spec, rows)
    print(f"megatron_core: gemm_efficiency {gemm:.3f}, elementwise_efficiency {elem:.3f} "
          f"(rms log error {math.sqrt(loss / len(rows)):.3f} over {len(rows)} rows)")
    spec_t, rows_t = _rows("torchtitan")
    loss_t, gemm_t = fit_gemm(spec_t, rows_t, elem)
    print(f"torchtitan:    gemm_efficiency {gemm_t:.3f}, elementwise_efficiency {elem:.3f} (from megatron_core) "
          f"(rms log error {math.sqrt(loss_t / len(rows_t)):.3f} over {len(rows_t)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
