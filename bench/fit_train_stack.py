"""Fit the training stack profiles of std/stacks.ccost to the training rows.

    python bench/fit_train_stack.py

Every training row of bench/validation/rows.yaml (the Megatron-Core weak-scaling rows V2-1..9, torchtitan's
V5-1, V5-2, llm-foundry's MPT rows LF-*) is priced exactly as bench/validate.py prices it, on the profile of
the framework that ran it. The profiles price training on the GPU's measured kernel curves (`rates =
kernels`, std/kernels.ccost): each training GEMM at the GEMM curve's rate for the micro-batch's token rows,
R_peak·η·b_mb/(b_mb + M½), attention at the prefill-attention curve's rate for the sequence length; what a
GPU generation reaches comes from its curves, not from a fitted number. The fit moves two kinds of number:

* ``framework_efficiency``, one per framework (``FRAMEWORKS``): the share of those measured rates the
  framework's training step reaches (launch gaps, synchronisation, the kernels the curves do not cover, a
  sustained clock below the one the kernels were timed at);
* ``elementwise_efficiency``, one for every framework: the achieved share of the HBM bandwidth over the
  bytes ccost counts as memory-bound (stored activations, GEMM operand rows, the loss) — a property of the
  memory system the elementwise kernels stream through, whichever framework launches them.

One least-squares fit of log(predicted / measured) over all the rows (bounded Levenberg–Marquardt, numpy).
``training_default`` takes megatron_core's values (without TP communication overlap). A framework without
rows (a hold-out of bench/validate.py removes it) gets the median of the fitted frameworks' shares.
Prints the fitted values, the values as std/stacks.ccost writes them, each row's ratio, the median and worst
factor, and the Spearman rank correlation of measured and predicted per framework (does ccost rank the model
sizes of one framework by how well they use the GPU?).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: the rows' `stack` (framework that ran) -> its profile in std/stacks.ccost
FRAMEWORKS = {"megatron": "megatron_core", "torchtitan": "torchtitan", "llmfoundry": "llmfoundry"}
#: profiles that take a fitted profile's values
DERIVED = {"training_default": "megatron_core"}
START = {"framework_efficiency": 0.7, "elementwise_efficiency": 0.6}
BOUNDS = {"framework_efficiency": (0.1, 1.5), "elementwise_efficiency": (0.05, 1.0)}
#: how std/stacks.ccost writes each value (whole per cent)
ROUND = {"framework_efficiency": 0.01, "elementwise_efficiency": 0.01}


def uses(row: dict) -> bool:
    """The rows.yaml rows these fits use: every training row."""
    return row["stack"] in FRAMEWORKS


def _overrides(theta: dict) -> dict:
    out = {p: {"framework_efficiency": theta[f"{p}.framework_efficiency"],
               "elementwise_efficiency": theta["elementwise_efficiency"]} for p in FRAMEWORKS.values()}
    for name, base in DERIVED.items():
        out[name] = dict(out[base])
    return out


def _predict(rows: list[dict], overrides: dict) -> np.ndarray:
    import validate

    return np.array([r.predicted for r in validate.price(rows, overrides)])


def fit_theta(rows: list[dict], tol: float = 1e-6) -> dict:
    rows = [r for r in rows if uses(r)]
    present = sorted({FRAMEWORKS[r["stack"]] for r in rows})
    names = ["elementwise_efficiency"] + [f"{p}.framework_efficiency" for p in present]
    field = {n: n.split(".")[-1] for n in names}
    lo = np.array([BOUNDS[field[n]][0] for n in names])
    hi = np.array([BOUNDS[field[n]][1] for n in names])
    x = np.array([START[field[n]] for n in names])
    meas = np.array([float(r["measured"]) for r in rows])

    def theta(v):
        th = {n: float(v[k]) for k, n in enumerate(names)}
        med = float(np.median([th[f"{p}.framework_efficiency"] for p in present]))
        for p in FRAMEWORKS.values():
            th.setdefault(f"{p}.framework_efficiency", med)
        return th

    def resid(v):
        return np.log(_predict(rows, _overrides(theta(v))) / meas)

    r = resid(x)
    cost, lam = float(r @ r), 1e-2
    for _ in range(40):
        J = np.empty((len(rows), len(names)))
        for k in range(len(names)):
            h = 1e-3 * max(abs(x[k]), 1e-2)
            xk = x.copy()
            xk[k] = xk[k] + h if xk[k] + h <= hi[k] else xk[k] - h
            J[:, k] = (resid(xk) - r) / (xk[k] - x[k])
        g, A = J.T @ r, J.T @ J
        improved = False
        for _ in range(10):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
            xn = np.clip(x + step, lo, hi)
            rn = resid(xn)
            cn = float(rn @ rn)
            if cn < cost:
                rel = (cost - cn) / max(cost, 1e-300)
                x, r, cost, lam, improved = xn, rn, cn, max(lam / 3, 1e-9), True
                break
            lam *= 4
        if not improved or rel < tol:
            break
    return theta(x)


def fit_profiles(rows: list[dict]) -> dict | None:
    """The fit on ``rows`` (rows.yaml records; bench/validate.py's hold-outs): {stack: {field: value}}."""
    rows = [r for r in rows if uses(r)]
    if not rows:
        return None
    return _overrides(fit_theta(rows, tol=1e-5))


def rounded(values: dict) -> dict:
    return {f: round(round(v / ROUND[f]) * ROUND[f], 9) for f, v in values.items()}


def main() -> int:
    import validate

    rows = [r for r in validate.load_rows() if uses(r)]
    th = fit_theta(rows)
    print(f"training profiles fitted jointly over {len(rows)} training rows")
    for n, v in th.items():
        print(f"  {n:<36} {v:.4f}")
    std = {s: rounded(v) for s, v in _overrides(th).items()}
    print("as std/stacks.ccost writes them:")
    for s, v in std.items():
        print(f"  {s:<16} " + "; ".join(f"{f} = {x * 100:.0f} %" for f, x in v.items()))
    priced = validate.price(rows, std)
    print(f"\n{'row':16} {'stack':11} {'ratio':>6}")
    for r in priced:
        print(f"{r.id:16} {r.stack:11} {r.ratio:6.2f}")
    factors = [r.factor for r in priced]
    print(f"\nfit (std values): median factor {statistics.median(factors):.3f}x, worst {max(factors):.3f}x "
          f"({priced[int(np.argmax(factors))].id})")
    rms = math.sqrt(sum(math.log(r.ratio) ** 2 for r in priced) / len(priced))
    print(f"rms log error {rms:.3f}")
    for fw in FRAMEWORKS:
        mine = [r for r in priced if r.stack == fw]
        if len(mine) > 2:
            rho = validate.spearman([r.measured_mfu for r in mine], [r.predicted_mfu for r in mine])
            print(f"{fw}: Spearman rank correlation of MFU, measured against predicted, {rho:.2f} ({len(mine)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
