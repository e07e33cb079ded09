"""Fit the serving stack profiles of std/stacks.ccost (one per engine and version) to the serving rows.

    python bench/fit_stack.py

Every inference row of bench/validation/rows.yaml (decode, prefill and serve rows; development and added)
is priced exactly as bench/validate.py prices it: its plan, on the stack profile of the engine that ran it.
Every profile prices the GPU's work on the GPU's measured kernel curves (`rates = kernels`,
std/kernels.ccost: GEMMs by token rows, attention by batch, context, KV heads and KV dtype, prefill by
prompt length; each engine on the block measured under it), so hbm_efficiency and gemm_efficiency reach no
row (std/stacks.ccost says what they price). One least-squares fit of log(predicted / measured) over all the
rows (bounded Levenberg-Marquardt, numpy) moves:

* ``layer_overhead``, one for every engine: the GPU time per layer of the kernels the curves do not cover
  (norms, rotary, activation, residual adds, the KV-cache write);
* **what the host does, per engine and scheduling design** (``HOST`` below): ``step_overhead`` (scheduler,
  input preparation and the launch of the step's CUDA graph, once per step) and ``seq_overhead`` (per running
  sequence: its slot in the batch tensors, sampling and stop checks, detokenising and output processing).

Whether the host work runs behind the GPU (``host_overlap``: step = max(GPU, host)) or adds to it is a fact
of each engine's scheduler, read from its documentation (std/stacks.ccost, docs/sources.md), not fitted:
SGLang's overlap scheduler (since v0.4) and TensorRT-LLM's overlap scheduler (on by default) overlap; vLLM's
V0 engine (0.6-0.7) and V1 engine until 0.13 do not (asynchronous scheduling was opt-in); vLLM from 0.14
schedules asynchronously by default, and the InferenceMAX runs of the added rows switched it on.

``attention_efficiency`` and ``collective_floor`` are not fitted (std/stacks.ccost says why). Current vLLM
(``vllm``, the bundled default ``serving_default``) takes vLLM V1's host terms (``vllm_v1``) with the host
work behind the GPU, the one change asynchronous scheduling makes: behind the GPU, its rows cannot fit them.

Each host term also carries a weak prior (``PRIOR``: a standard deviation of 40 ms a step and 1 ms a
sequence around 2 ms and 50 µs), which decides only where an engine's rows cannot tell its two host terms
apart. When a host group has no row (a hold-out of bench/validate.py removes an engine or a GPU), each of its host
terms is the median of the fitted groups' values: the held-out engine is predicted as a typical one of the
others. Prints the fitted values, the values as std/stacks.ccost writes them, each row's ratio, the median
and worst factor, and the rms log error.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROWS = HERE / "validation" / "rows.yaml"
sys.path.insert(0, str(HERE))

#: the fitted stacks, each in the group whose host terms it has: one per engine and scheduling design
HOST = {"vllm_v0": "vllm_v0", "vllm_v1": "vllm_v1", "sglang": "sglang", "trtllm": "trtllm"}
#: the stacks that take their host terms from a fitted one: current vLLM is V1's host code with the host's
#: work behind the GPU (asynchronous scheduling; host_overlap in std/stacks.ccost), which hides those terms
#: on every row it ran (the GPU's step is the longer), so its rows cannot fit them
DERIVED = {"vllm": "vllm_v1", "serving_default": "vllm_v1"}
#: the GPU's own terms, one for every engine: the rows' weight GEMMs and attention are priced on each
#: engine's measured kernel curves (rates = kernels), so hbm_efficiency and gemm_efficiency reach no row;
#: layer_overhead is the GPU time of the kernels the curves do not cover (norms, rotary, activation,
#: residual adds, the KV-cache write)
SHARED = ("layer_overhead",)
#: Weight of a weak prior on every host term, in the scaled units the fit moves (START / SCALE): a residual
#: PRIOR·(value − START)/SCALE beside the rows' log errors, i.e. a Gaussian of standard deviation SCALE/PRIOR
#: (40 ms a step, 1 ms a sequence) around a typical engine's 2 ms and 50 µs. Where an engine's rows tell its
#: step and per-sequence host time apart it moves little (the rows' rms log error 0.124 without it, 0.125
#: with it); where they cannot (one shape of workload, or the host hidden behind the GPU) it keeps the fit
#: off its bounds: without it, bench/validate.py's hold-out of the H100 rows fitted SGLang's host terms on
#: its five H200 rows alone to a 21 ms step, and three held-out rows came out 2.7× too slow.
PRIOR = 0.05
HOST_FIELDS = ("step_overhead", "seq_overhead")
START = {"hbm_efficiency": 0.85, "gemm_efficiency": 0.70, "layer_overhead": 10e-6, "step_overhead": 2e-3,
         "seq_overhead": 50e-6}
SCALE = {"hbm_efficiency": 1.0, "gemm_efficiency": 1.0, "layer_overhead": 2e-5, "step_overhead": 2e-3,
         "seq_overhead": 5e-5}
BOUNDS = {"hbm_efficiency": (0.3, 1.0), "gemm_efficiency": (0.2, 1.0), "layer_overhead": (0.0, 1e-3),
          "step_overhead": (0.0, 0.05), "seq_overhead": (0.0, 2e-3)}
#: how std/stacks.ccost writes each value
ROUND = {"hbm_efficiency": 0.01, "gemm_efficiency": 0.01, "layer_overhead": 1e-6, "step_overhead": 1e-4,
         "seq_overhead": 1e-6}


def uses(row: dict) -> bool:
    """The rows.yaml rows this fit uses: every inference row."""
    return row["metric"] in ("decode_step", "prefill", "serve_tpot")


def _stack_name(row: dict) -> str:
    import validate

    return validate._stack_name(row)


def _predict(rows: list[dict], values: dict) -> np.ndarray:
    import validate

    return np.array(validate.times(rows, values))


def _overrides(theta: dict, groups: dict) -> dict:
    """{stack: {field: value}} for every fitted stack, from θ: shared fields and each stack's host group
    (θ holds every group's terms: a group without rows has the median of the others', ``fit_theta``)."""
    out = {}
    for stack, g in HOST.items():
        out[stack] = {**{f: theta[f] for f in SHARED}, **{f: theta[f"{g}.{f}"] for f in HOST_FIELDS}}
    for stack, base in DERIVED.items():
        out[stack] = dict(out[base])
    return out


def fit_theta(rows: list[dict], tol: float = 1e-8) -> tuple[dict, dict]:
    """(θ, groups): the least-squares fit over ``rows``; groups maps each host group to itself when it has
    rows, to None when its terms are the median of the fitted groups'."""
    rows = [r for r in rows if uses(r)]
    present = {HOST[s] for s in map(_stack_name, rows) if s in HOST}
    groups = {g: g if g in present else None for g in set(HOST.values())}  # None: the median of the others
    names = list(SHARED) + [f"{g}.{f}" for g in sorted(present) for f in HOST_FIELDS]
    field = {n: n.split(".")[-1] for n in names}
    lo = np.array([BOUNDS[field[n]][0] / SCALE[field[n]] for n in names])
    hi = np.array([BOUNDS[field[n]][1] / SCALE[field[n]] for n in names])
    x = np.clip(np.array([START[field[n]] / SCALE[field[n]] for n in names]), lo, hi)
    meas = np.array([float(r["measured"]) for r in rows])

    def theta(v):
        th = {n: float(v[k] * SCALE[field[n]]) for k, n in enumerate(names)}
        for g, src in groups.items():  # groups without rows: the median of the fitted groups' values
            if src is None:
                for f in HOST_FIELDS:
                    th[f"{g}.{f}"] = float(np.median([th[f"{p}.{f}"] for p in sorted(present)]))
        return th

    def resid(v, idx=None):
        sel = rows if idx is None else [rows[i] for i in idx]
        m = meas if idx is None else meas[idx]
        return np.log(_predict(sel, _overrides(theta(v), {g: g for g in groups})) / m)

    # The rows a parameter reaches: a host group's terms price only the rows of its stacks (the others'
    # predictions do not change, so their Jacobian entries are exactly 0 and are not recomputed); the
    # shared terms, and a row of a stack outside every group, every row.
    group_of = {**HOST, **{s: HOST[b] for s, b in DERIVED.items()}}
    row_group = [group_of.get(_stack_name(r)) for r in rows]
    reach = [np.arange(len(rows)) if "." not in n else
             np.array([i for i, g in enumerate(row_group) if g is None or g == n.split(".")[0]], dtype=int)
             for n in names]

    host = np.array(["." in n for n in names])
    x0 = x.copy()

    def prior(v):
        return PRIOR * (v - x0)[host]

    P = PRIOR * np.eye(len(names))[host]
    r = resid(x)
    cost, lam = float(r @ r) + float(prior(x) @ prior(x)), 1e-2
    for _ in range(40):
        J = np.zeros((len(rows), len(names)))
        for k in range(len(names)):
            h = 1e-3 * max(abs(x[k]), 1e-2)
            xk = x.copy()
            xk[k] = xk[k] + h if xk[k] + h <= hi[k] else xk[k] - h
            if len(reach[k]):
                J[reach[k], k] = (resid(xk, reach[k]) - r[reach[k]]) / (xk[k] - x[k])
        g, A = J.T @ r + P.T @ prior(x), J.T @ J + P.T @ P
        improved = False
        for _ in range(10):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
            xn = np.clip(x + step, lo, hi)
            rn = resid(xn)
            cn = float(rn @ rn) + float(prior(xn) @ prior(xn))
            if cn < cost:
                rel = (cost - cn) / max(cost, 1e-300)
                x, r, cost, lam, improved = xn, rn, cn, max(lam / 3, 1e-9), True
                break
            lam *= 4
        if not improved or rel < tol:
            break
    return theta(x), groups


def fit_profiles(rows: list[dict]) -> dict:
    """The fit on ``rows`` (rows.yaml records; bench/validate.py's hold-outs): {stack name: {field: value}}.
    Stopped at a relative improvement of 1e-5 (main's 1e-8 takes minutes; the values differ by about 1 % of
    an efficiency)."""
    th, groups = fit_theta(rows, tol=1e-5)
    return _overrides(th, {g: g for g in groups})


def rounded(values: dict) -> dict:
    return {f: round(round(v / ROUND[f]) * ROUND[f], 9) for f, v in values.items()}


def _fmt(f: str, v: float) -> str:
    if f.endswith("efficiency"):
        return f"{v * 100:.0f} %"
    if v == 0:
        return "0 s"
    return f"{v * 1e3:g} ms" if v >= 1e-3 else f"{v * 1e6:g} us"


def main(argv: list[str] | None = None) -> int:
    import validate

    rows = [r for r in validate.load_rows() if uses(r)]
    th, groups = fit_theta(rows)
    print(f"serving profiles fitted jointly over {len(rows)} inference rows")
    for n, v in th.items():
        print(f"  {n:<28} {v:.6g}")
    std = {s: rounded(v) for s, v in _overrides(th, groups).items()}
    print("as std/stacks.ccost writes them:")
    for s, v in std.items():
        print(f"  {s:<16} " + "; ".join(f"{f} = {_fmt(f, x)}" for f, x in v.items()))
    priced = validate.price(rows, std)
    factors = [r.factor for r in priced]
    print(f"\n{'row':46} {'stack':16} {'measured':>10} {'fitted':>10} {'ratio':>6}")
    for r, d in zip(priced, rows):
        print(f"{r.id:46} {_stack_name(d):16} {r.measured * 1e3:7.2f} ms {r.predicted * 1e3:7.2f} ms {r.ratio:6.2f}")
    print(f"\nfit (std values): median factor {statistics.median(factors):.3f}x, worst {max(factors):.3f}x "
          f"({priced[int(np.argmax(factors))].id})")
    rms = math.sqrt(sum(math.log(r.ratio) ** 2 for r in priced) / len(priced))
    print(f"rms log error {rms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
