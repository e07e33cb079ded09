"""``ccost calibrate --steps FILE``: fit a software-stack profile to step times the user measured.

Inputs (``read_steps``), each row a plan of a spec and a measured time:

- a CSV or YAML table: ``plan``, ``spec`` (or ``--spec``), and the measured time as ``tpot`` / ``ttft`` /
  ``step_time`` (a number in seconds, or a quantity like ``32.1 ms``; a column named ``tpot_ms`` is in ms),
  or as ``metric`` + ``measured`` (``bench/validation/rows.yaml``: ``decode_step`` is a TPOT,
  ``prefill`` a TTFT); an optional ``stack`` column is what ``--only`` selects on;
- vLLM ``benchmark_serving`` result JSON (``median_tpot_ms``, ``median_ttft_ms``), for ``--plan``;
- a Megatron log's ``elapsed time per iteration (ms)`` lines (the median, the first iteration left out as
  warm-up), for ``--plan``.

What is predicted: a decode plan's step time for a TPOT, a prefill plan's latency for a TTFT, a serve plan's
TPOT or TTFT (``ccost.model.serve``; metric ``serve_tpot`` in rows.yaml is a TPOT), any plan's
step time for ``step_time`` — ``ccost.model.lower`` and ``ccost.model.analysis`` in float mode, the plan priced with a
``stack`` whose fields are the parameters.

The fit: minimise Σ log(predicted/measured)² over the stack's fields, each bounded to its physical range
(the schema's), by Levenberg–Marquardt on scaled parameters with a forward-difference Jacobian, each step
projected onto the bounds (numpy only). A field that no row's time depends on keeps its starting value
(the plans' stack) and is reported as not determined. The hold-out error is k-fold: rows are dealt
round-robin into k folds, each fold predicted by the fit on the others.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccost.check.plan import evaluation_errors
from ccost.diagnostics import CcostError, Diagnostics, Span, error

FIELDS = ("step_overhead", "layer_overhead", "seq_overhead", "hbm_efficiency", "gemm_efficiency", "attention_efficiency",
          "collective_floor")
# Typical magnitudes: the fit works on θ/scale so that every parameter moves on the same footing.
SCALE = {"step_overhead": 5e-3, "layer_overhead": 2e-5, "seq_overhead": 2e-4, "hbm_efficiency": 1.0, "gemm_efficiency": 1.0,
         "attention_efficiency": 1.0, "collective_floor": 1.5e-5}
METRICS = {"tpot": "decode", "ttft": "prefill", "step_time": None, "decode_step": "decode", "prefill": "prefill",
           "serve_tpot": "serve"}
MAX_ROWS = 10_000
#: The shortest step time a row may give: one GPU kernel launch costs a few µs (CUDA's launch overhead), so
#: no decode step, prefill or training iteration is shorter than 1 µs; a 1e-320 is a wrong unit or a typo.
MIN_STEP = 1e-6


@dataclass(frozen=True)
class StepRow:
    spec: str  # path of the spec
    plan: str
    metric: str  # tpot | ttft | step_time
    measured: float  # s
    file: str
    line: int
    label: str = ""


@dataclass(frozen=True)
class StepFit:
    values: dict  # field -> fitted value
    determined: dict  # field -> bool (some row's time depends on it)
    start: dict  # field -> starting value
    rows: tuple  # StepRow
    predicted: tuple  # s, with the fitted stack
    median_error: float  # |pred/meas − 1| median, fitted rows
    worst_error: float
    folds: int
    holdout_median_error: float | None
    holdout_worst_error: float | None
    holdout_predicted: tuple  # s per row, each from the fit without its fold (empty without hold-out)
    source_file: str
    start_stack: str


def _err(message: str, file: str, line: int = 1, col: int = 1, help: str | None = None) -> CcostError:
    return CcostError(error("E501", message, Span.point(file, line, col), help))


_STEPS_HELP = ("a CSV or YAML table with columns plan, spec (or pass --spec) and tpot, ttft or step_time "
               "(seconds, or like `32.1 ms`); or vLLM benchmark_serving JSON or a Megatron log with --plan")


def _time(value, file: str, line: int, what: str, unit_ms: bool = False) -> float:
    from ccost import units

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            t = float(value) * (1e-3 if unit_ms else 1.0)
        except OverflowError:  # an integer past a float's range (YAML reads any number of digits): the
            t = math.copysign(sys.float_info.max, 1 if value > 0 else -1)  # checks below judge its sign and size
    else:
        text = str(value).strip()
        try:
            v, dim = units.parse_quantity(text)
        except (ValueError, units.UnitError):
            raise _err(f"{what}: {text[:40]!r} is not a time", file, line,
                       help="write seconds (0.0321) or a quantity like `32.1 ms`") from None
        if dim == units.DIMENSIONLESS:
            v *= 1e-3 if unit_ms else 1.0
        elif dim != units.TIME:
            raise _err(f"{what}: {text[:40]!r} is not a time", file, line, help="write it like `32.1 ms`")
        t = v
    if not (t > 0 and math.isfinite(t)):
        raise _err(f"{what}: the measured time {str(value)[:40]!r} is not a positive number", file, line,
                   help="a measured time is a positive number of seconds")
    if t < MIN_STEP:
        raise _err(f"{what}: {t:g} s is shorter than {MIN_STEP * 1e6:g} µs: not the time of a step", file, line,
                   help="give the time of one step in seconds, or as a quantity like `32.1 ms` "
                        "(a column named *_ms is in milliseconds)")
    if t > 3600:
        raise _err(f"{what}: {t:g} s is longer than an hour: not one step", file, line,
                   help="give the time of one step (TPOT, TTFT or one iteration), not a total")
    return t


def read_steps(path: str, text: str, spec: str | None = None, plan: str | None = None,
               only: str | None = None) -> list[StepRow]:
    """Parse a steps file (format from its content). Raises CcostError naming the place."""
    base = Path(path).parent
    if not text.strip():
        raise _err(f"{path} is empty", path, help=_STEPS_HELP)
    stripped = text.lstrip()
    if stripped.startswith("{") and ("tpot" in text or "ttft" in text):
        return _vllm_json(path, text, spec, plan)
    if "elapsed time per iteration" in text:
        return _megatron(path, text, spec, plan)
    if path.lower().endswith((".yaml", ".yml", ".json")) or stripped.startswith(("-", "rows:", "[", "{")):
        return _yaml_rows(path, text, base, spec, only)
    return _csv_rows(path, text, base, spec, only)


def _need(path: str, spec: str | None, plan: str | None, what: str) -> None:
    if not spec or not plan:
        raise _err(f"{path} is {what}: it does not say which plan it measured", path,
                   help="pass --spec SPEC.ccost --plan NAME for the plan that was run")


def _vllm_json(path: str, text: str, spec: str | None, plan: str | None) -> list[StepRow]:
    from ccost.userfiles import DataError, load_json

    try:
        doc = load_json(text)
    except DataError as exc:
        raise _err(f"{path}: {exc.message}", path, exc.line, help=_STEPS_HELP) from None
    if not isinstance(doc, dict):
        raise _err(f"{path} is JSON but not an object with median_tpot_ms or median_ttft_ms", path,
                   help=_STEPS_HELP)
    _need(path, spec, plan, "a vLLM benchmark_serving result")
    rows = []
    for key, metric in (("median_tpot_ms", "tpot"), ("median_ttft_ms", "ttft")):
        if key in doc:
            line = text[: text.find(f'"{key}"')].count("\n") + 1
            rows.append(StepRow(spec, plan, metric, _time(doc[key], path, line, key, unit_ms=True), path, line,
                                key))
    if not rows:
        raise _err(f"{path} has no median_tpot_ms or median_ttft_ms", path, help=_STEPS_HELP)
    return rows


_MEGATRON = re.compile(r"elapsed time per iteration \(ms\):\s*(\S*)")


def _megatron(path: str, text: str, spec: str | None, plan: str | None) -> list[StepRow]:
    _need(path, spec, plan, "a Megatron log")
    times, first = [], None
    for no, line in enumerate(text.splitlines(), 1):
        if m := _MEGATRON.search(line):
            token = m.group(1).rstrip("|,;")
            try:
                value = float(token)
            except ValueError:
                raise _err(f"elapsed time per iteration: {token[:40]!r} is not a number of milliseconds", path,
                           no, help="the line should read `elapsed time per iteration (ms): 1234.5`") from None
            times.append(_time(value, path, no, "elapsed time per iteration", unit_ms=True))
            first = first or no
    if not times:
        raise _err(f"{path} has no `elapsed time per iteration (ms): N` line with a time", path, help=_STEPS_HELP)
    if len(times) > 1:
        times = times[1:]  # the first iteration includes warm-up (allocation, compilation)
    return [StepRow(spec, plan, "step_time", float(np.median(times)), path, first or 1,
                    f"median of {len(times)} iterations")]


def _cell(rec: dict, key: str) -> str:
    """A cell as text; a list or mapping where a name or a number should be is refused, not printed."""
    v = rec.get(key)
    if isinstance(v, (list, dict, set, tuple)):
        raise TypeError(key)
    return "" if v is None else str(v).strip()


def _record_rows(path: str, records, base: Path, spec: str | None, only: str | None) -> list[StepRow]:
    """The rows of ``records`` ((line, mapping) pairs, read lazily): at most ``MAX_ROWS``, each spec path
    confined to the steps file's project (``ccost.userfiles.confine``: the rule imports follow)."""
    from ccost.userfiles import Outside, confine, project_root

    area = project_root(os.path.realpath(path))
    rows: list[StepRow] = []
    for line, rec in records:
        rec = {str(k).strip().lower(): v for k, v in rec.items() if k is not None}
        try:
            for key in ("stack", "plan", "spec", "id", "metric"):
                _cell(rec, key)
        except TypeError as exc:
            raise _err(f"the `{exc.args[0]}` cell of this row is a list or a mapping, not a value", path, line,
                       help=_STEPS_HELP) from None
        if only is not None and _cell(rec, "stack") != only:
            continue
        if not _cell(rec, "plan"):
            raise _err("this row names no plan", path, line, help="add a `plan` column: the plan that was run")
        name = _cell(rec, "plan")[:200]
        sp = _cell(rec, "spec")
        sp_path = str(base / sp) if sp else spec
        if sp:
            try:
                confine(sp_path, area, sp)
            except Outside as exc:
                how = "is a symbolic link that leads" if exc.through_link else "leads"
                raise _err(f"the spec `{sp[:80]}` of plan `{name[:40]}` {how} outside the project of "
                           f"{path} ({area})", path, line,
                           help="name a spec inside the project, relative to this file, or pass --spec") from None
        if not sp_path:
            raise _err(f"row of plan `{name}` names no spec", path, line,
                       help="add a `spec` column (relative to this file) or pass --spec SPEC.ccost")
        found = False
        for col, metric, ms in (("tpot", "tpot", False), ("tpot_ms", "tpot", True), ("ttft", "ttft", False),
                                ("ttft_ms", "ttft", True), ("step_time", "step_time", False),
                                ("step_time_ms", "step_time", True)):
            v = rec.get(col)
            if v is None or str(v).strip() == "":
                continue
            rows.append(StepRow(sp_path, name, metric, _time(v, path, line, col, ms), path, line,
                                _cell(rec, "id")[:200]))
            found = True
        if "metric" in rec and "measured" in rec:
            metric = _cell(rec, "metric")
            if metric not in METRICS:
                raise _err(f"metric {metric[:40]!r} of plan `{name[:40]}` is not a time ccost can fit a stack to",
                           path, line,
                           help="metrics: tpot, ttft, step_time (or decode_step, prefill); select rows with --only")
            metric = {"decode_step": "tpot", "prefill": "ttft", "serve_tpot": "tpot"}.get(metric, metric)
            rows.append(StepRow(sp_path, name, metric, _time(rec["measured"], path, line, "measured"), path, line,
                                _cell(rec, "id")[:200]))
            found = True
        if not found:
            raise _err(f"row of plan `{name[:40]}` has no measured time", path, line,
                       help="give tpot, ttft or step_time (or metric and measured)")
        if len(rows) > MAX_ROWS:  # said as soon as it is so: the rest of the file is not read
            raise _err(f"{path} has more than {MAX_ROWS:,} rows", path, line,
                       help=f"fit to at most {MAX_ROWS:,} measured times (select some with --only, or split "
                            "the file)")
    if not rows:
        raise _err(f"{path} has no rows" + (f" of stack {only!r}" if only else ""), path, help=_STEPS_HELP)
    return rows


def _csv_rows(path: str, text: str, base: Path, spec: str | None, only: str | None) -> list[StepRow]:
    if "\x00" in text:
        raise _err(f"{path} is a binary file, not a table (it contains NUL bytes)", path, help=_STEPS_HELP)
    reader = csv.DictReader(io.StringIO(text))
    try:
        cols = [c.strip().lower() for c in (reader.fieldnames or [])]
    except csv.Error as exc:
        raise _err(f"{path} is not a CSV table: {exc}", path, reader.line_num or 1, help=_STEPS_HELP) from None
    if "plan" not in cols:
        raise _err(f"{path}: the header has no `plan` column (it has {', '.join(cols[:8]) or 'none'})", path, 1,
                   help=_STEPS_HELP)
    if not any(c in cols for c in ("tpot", "ttft", "step_time", "tpot_ms", "ttft_ms", "step_time_ms", "measured")):
        raise _err(f"{path}: the header has no time column (tpot, ttft, step_time)", path, 1, help=_STEPS_HELP)
    def records():
        try:
            for rec in reader:
                if None in rec:
                    raise _err("this row has more cells than the header", path, reader.line_num)
                yield reader.line_num, rec
        except csv.Error as exc:
            raise _err(f"{path} is not a CSV table: {exc}", path, reader.line_num or 1, help=_STEPS_HELP) from None

    return _record_rows(path, records(), base, spec, only)


def _yaml_rows(path: str, text: str, base: Path, spec: str | None, only: str | None) -> list[StepRow]:
    from ccost.userfiles import DataError, load_yaml

    try:
        doc = load_yaml(text)  # nesting and what aliases expand to are bounded (ccost.userfiles)
    except DataError as exc:
        raise _err(f"{path}: {exc.message}", path, exc.line, help=_STEPS_HELP) from None
    if isinstance(doc, dict) and "rows" in doc:
        doc = doc["rows"]
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise _err(f"{path}: expected a list of rows (mappings), or `rows:` with one", path, help=_STEPS_HELP)
    if len(doc) > MAX_ROWS:
        raise _err(f"{path} has {len(doc):,} rows; at most {MAX_ROWS:,}", path,
                   help=f"fit to at most {MAX_ROWS:,} measured times (select some with --only, or split the file)")
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.lstrip().startswith("-")]
    records = [(lines[i] if i < len(lines) else 1, r) for i, r in enumerate(doc)]
    return _record_rows(path, records, base, spec, only)


# ---------------------------------------------------------------------------------------------------
# Prediction and the fit

class _Plans:
    """The rows' plans, checked once; ``predict(θ)`` prices every row with a stack of fields θ.

    Rows that measured the same plan of the same spec (and the same metric) are priced once, and the
    stacks of one step of the fit (θ and its seven nudged copies for the Jacobian) in one call: each
    plan's inputs are prepared per stack by ``lower.prepare`` (the one place a stack becomes inputs) and
    lowered and analysed once, on numpy arrays of the inputs that differ, as a search does. A fit costs
    time in proportion to the distinct plans, and the rows only add numpy work: 10,000 rows of 10 plans
    fit in seconds (bench/calibrate_steps.py measures it)."""

    def __init__(self, rows: list[StepRow], rates: str | None = None):
        from ccost import check

        self.rows = rows
        specs: dict[str, object] = {}
        self.plans, self.policies = [], []
        keys: dict[tuple[str, str, str], int] = {}
        self.unique: list[tuple[object, object, str]] = []  # (plan, policy, metric) priced once
        row_u = []
        for r in rows:
            if r.spec not in specs:
                if not Path(r.spec).is_file():
                    raise _err(f"spec {r.spec} not found", r.file, r.line, help="check the spec path (relative to "
                               "the steps file) or --spec")
                try:
                    specs[r.spec], _ = check.load_spec(r.spec)
                except CcostError as exc:
                    raise _err(f"spec {r.spec} does not check: {exc.diagnostics[0].message}", r.file, r.line,
                               help=f"fix it first: ccost check {r.spec}") from None
            spec = specs[r.spec]
            plan = spec.plans.get(r.plan)
            if plan is None:
                raise _err(f"unknown plan `{r.plan}` in {r.spec}", r.file, r.line,
                           help=f"plans there: {', '.join(sorted(spec.plans)[:12]) or '(none)'}")
            from ccost.model import phases

            want = METRICS[r.metric]
            # a serve plan (several steps combined, phases.of(plan).lower is None) has its own TPOT and TTFT
            if want is not None and plan.phase != want and phases.of(plan).lower is not None:
                raise _err(f"{r.metric} is measured on a {want} plan; `{r.plan}` is {plan.phase}", r.file, r.line,
                           help="a TPOT is a decode plan's step time (or a serve plan's TPOT), a TTFT a prefill "
                           "plan's latency (or a serve plan's TTFT)")
            self.plans.append(plan)
            self.policies.append(spec.policy)
            key = (r.spec, r.plan, r.metric)
            if key not in keys:
                keys[key] = len(self.unique)
                self.unique.append((plan, spec.policy, r.metric))
            row_u.append(keys[key])
        self.row_u = np.array(row_u, dtype=np.intp)
        self.measured = np.array([r.measured for r in rows])
        stacks = {p.stack.name if p.stack is not None else None for p in self.plans}
        first = self.plans[0]
        st = first.stack  # the checker's: the plan's own, or its phase's bundled default
        self.start_stack = st.name if len(stacks) == 1 else f"{st.name} (and others)"
        self.start = {f: float(getattr(st, f)) for f in FIELDS}
        # where the fitted profile's operator rates come from, as in the stack it starts from: its efficiencies,
        # or the GPUs' measured kernel curves (`rates = kernels`, docs/kernels.md), which the fit then leaves alone
        self.rates = st.rates if rates is None else rates
        seen: set[int] = set()
        for i, r in enumerate(rows):  # every plan can be priced, or the error names its first row
            if row_u[i] in seen:
                continue
            seen.add(row_u[i])
            try:
                Diagnostics(evaluation_errors(self.plans[i])).raise_if_errors()
                t = self.predict(self.start, [i])[0]
            except CcostError as exc:
                raise _err(f"plan `{r.plan}` of {r.spec} cannot be evaluated: {exc.diagnostics[0].message}",
                           r.file, r.line, help=f"ccost eval {r.spec}") from None
            if not (t > 0 and math.isfinite(t)):
                raise _err(f"plan `{r.plan}` prices to {t!r}, not a time", r.file, r.line)

    def predict(self, theta: dict, idx=None) -> np.ndarray:
        """The time of each row (``idx``: those rows) priced with a stack of fields ``theta``."""
        return self.predict_many([theta], idx)[0]

    def predict_many(self, thetas: list[dict], idx=None) -> np.ndarray:
        """``predict`` for several stacks at once: an array of (stacks, rows)."""
        import dataclasses

        from ccost.model import lower, phases, serve
        from ccost import spec as S

        rows = self.row_u if idx is None else self.row_u[np.asarray(idx, dtype=np.intp)]
        stacks = [S.Stack("fitted", None, None, **{f: float(t.get(f, self.start[f])) for f in FIELDS},
                          source="fit", rates=self.rates) for t in thetas]
        # Every (plan, stack) pair that lowers alike (the same choices but for the plan's name: the
        # same cluster, axes in use, roofline, ...; a stack field at 0 drops its term) is priced in one
        # call, on arrays of the inputs that differ, as a search prices its layouts.
        groups: list[tuple[object, list[tuple[int, int]], list[object]]] = []
        per_plan = np.empty((len(thetas), len(self.unique)))
        for u in np.unique(rows):
            plan, policy, metric = self.unique[u]
            if phases.of(plan).lower is None:  # continuous batching (serve): the serve model's TPOT or TTFT
                for k, stack in enumerate(stacks):
                    st = serve.terms(dataclasses.replace(plan, stack=stack), policy)
                    per_plan[k, u] = float(st.ttft if metric == "ttft" else st.tpot)
                continue
            for k, stack in enumerate(stacks):
                static, x = lower.prepare(dataclasses.replace(plan, stack=stack), policy)
                key = dataclasses.replace(static, plan="")
                for g_key, members, xs in groups:
                    if g_key == key:
                        members.append((int(u), k))
                        xs.append(x)
                        break
                else:
                    groups.append((key, [(int(u), k)], [x]))
        for key, members, xs in groups:
            arrays = {}
            for f in dataclasses.fields(xs[0]):
                values = [getattr(x, f.name) for x in xs]
                if any(v != values[0] for v in values[1:]):
                    arrays[f.name] = np.array(values)
            m = phases.analyse(phases.lower(key, lower.with_arrays(xs[0], **arrays) if arrays else xs[0]))
            step = np.broadcast_to(np.asarray(m.step, dtype=float), (len(members),))
            latency = np.broadcast_to(np.asarray(m.latency, dtype=float), (len(members),))
            for j, (u, k) in enumerate(members):
                per_plan[k, u] = latency[j] if self.unique[u][2] == "ttft" else step[j]
        return per_plan[:, rows]


def _bounds() -> dict:
    """Physical ranges of the fitted fields: the schema's, with the overheads and the floor held to what a
    step can be (1 s per step, 10 ms per layer, 10 ms per collective) so the fit cannot run off to them."""
    from ccost.schema import R_COLLECTIVE_FLOOR, R_STACK_EFFICIENCY, R_STACK_OVERHEAD

    eff = (R_STACK_EFFICIENCY["minimum"], R_STACK_EFFICIENCY["maximum"])
    return {"step_overhead": (R_STACK_OVERHEAD["minimum"], min(R_STACK_OVERHEAD["maximum"], 1.0)),
            "layer_overhead": (R_STACK_OVERHEAD["minimum"], min(R_STACK_OVERHEAD["maximum"], 0.01)),
            "seq_overhead": (R_STACK_OVERHEAD["minimum"], min(R_STACK_OVERHEAD["maximum"], 0.01)),
            "hbm_efficiency": eff, "gemm_efficiency": eff, "attention_efficiency": eff,
            "collective_floor": (R_COLLECTIVE_FLOOR["minimum"], min(R_COLLECTIVE_FLOOR["maximum"], 0.01))}


def _lm(plans: _Plans, idx: list[int], start: dict, fields: tuple = FIELDS) -> tuple[dict, dict]:
    """Bounded Levenberg–Marquardt on r = log(pred/meas) over ``idx``, moving ``fields`` (the others stay at
    ``start``); returns (θ, determined)."""
    b = _bounds()
    names = list(fields)
    lo = np.array([b[f][0] / SCALE[f] for f in names])
    hi = np.array([b[f][1] / SCALE[f] for f in names])
    # A floor of 0 has no gradient (max(t, 0) = t for every row), so the search starts it at its typical
    # value; when no row then depends on it, fit_steps reports it undetermined and keeps the start's value.
    first = {f: (SCALE[f] if f == "collective_floor" and start[f] == 0 else start[f]) for f in names}
    x = np.clip(np.array([first[f] / SCALE[f] for f in names]), lo, hi)
    meas = plans.measured[idx]

    def theta(v):
        return dict(start, **{f: float(v[k] * SCALE[f]) for k, f in enumerate(names)})

    def resid(v):
        return np.log(plans.predict(theta(v), idx) / meas)

    r = resid(x)
    cost = float(r @ r)
    lam = 1e-2
    determined = {f: False for f in names}
    for _ in range(60):
        J = np.empty((len(idx), len(names)))
        nudged = []
        for k in range(len(names)):
            h = 1e-4 * max(abs(x[k]), 1e-2)
            xk = x.copy()
            xk[k] = xk[k] + h if xk[k] + h <= hi[k] else xk[k] - h
            nudged.append(xk)
        priced = plans.predict_many([theta(xk) for xk in nudged], idx)  # the seven columns in one call
        for k, xk in enumerate(nudged):
            J[:, k] = (np.log(priced[k] / meas) - r) / (xk[k] - x[k])
        active = np.linalg.norm(J, axis=0) > 1e-6
        for k, f in enumerate(names):
            determined[f] = determined[f] or bool(active[k])
        if not active.any():
            break
        Ja = J[:, active]
        g = Ja.T @ r
        A = Ja.T @ Ja
        improved = False
        for _ in range(12):
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
            xn = x.copy()
            xn[active] = np.clip(x[active] + step, lo[active], hi[active])
            rn = resid(xn)
            cn = float(rn @ rn)
            if cn < cost:
                improved = True
                rel = (cost - cn) / max(cost, 1e-300)
                x, r, cost = xn, rn, cn
                lam = max(lam / 3, 1e-9)
                break
            lam *= 4
        if not improved or rel < 1e-10:
            break
    return theta(x), determined


def fit_steps(rows: list[StepRow], folds: int = 5, source_file: str = "", fields: tuple = FIELDS,
              start: dict | None = None, rates: str | None = None) -> StepFit:
    """Fit ``fields`` of the stack (the others kept at ``start``, by default the plans' own stack); ``rates``
    overrides where its operator rates come from (``profile`` | ``kernels``; default the plans' stack's)."""
    plans = _Plans(rows, rates)
    if start is not None:
        plans.start = dict(plans.start, **start)
    n = len(rows)
    all_idx = list(range(n))
    values, determined = _lm(plans, all_idx, plans.start, fields)
    pred = plans.predict(values)
    rel = np.abs(pred / plans.measured - 1)
    k = min(folds, n)
    ho_pred: list[float] = [math.nan] * n
    if k >= 2:
        for fold in range(k):
            test = [i for i in all_idx if i % k == fold]
            train = [i for i in all_idx if i % k != fold]
            th, _ = _lm(plans, train, plans.start, fields)
            for i, p in zip(test, plans.predict(th, test)):
                ho_pred[i] = float(p)
        ho = np.abs(np.array(ho_pred) / plans.measured - 1)
        ho_med, ho_worst = float(np.median(ho)), float(ho.max())
    else:
        ho_med = ho_worst = None
    determined = {f: determined.get(f, False) for f in FIELDS}
    return StepFit({f: values[f] if determined[f] else plans.start[f] for f in FIELDS}, determined, plans.start,
                   tuple(rows), tuple(float(p) for p in pred), float(np.median(rel)), float(rel.max()), k,
                   ho_med, ho_worst, tuple(ho_pred) if k >= 2 else (), source_file, plans.start_stack)


# ---------------------------------------------------------------------------------------------------
# Output

def stack_block(fit: StepFit, name: str, title: str | None, command: str | None) -> str:
    from ccost.calibrate.block import _pct, _wrap, ccost_string, comment_safe
    from ccost.units import TIME, format_percent, format_quantity

    def val(f: str, v: float) -> str:
        if f in ("hbm_efficiency", "gemm_efficiency", "attention_efficiency"):
            return format_percent(round(v, 4))
        return format_quantity(v, TIME, digits=4).replace("µs", "us")

    lines = [f"# Fitted by `ccost calibrate --steps` from {fit.source_file}: {len(fit.rows)} measured step times; "
             "minimising sum(log(predicted/measured)^2) over the stack's fields, each bounded to its physical "
             f"range, starting from `{fit.start_stack}`"]
    if command:
        lines.append(f"# Regenerate: {command}")
    lines.append(f"# Fit: median error {_pct(fit.median_error)}, worst {_pct(fit.worst_error)} over the rows it was "
                 "fitted on")
    if fit.holdout_median_error is not None:
        lines.append(f"# Hold-out ({fit.folds}-fold: each row predicted by the fit without its fold): median error "
                     f"{_pct(fit.holdout_median_error)}, worst {_pct(fit.holdout_worst_error)}")
    for f in FIELDS:
        if not fit.determined[f]:
            lines.append(f"# {f}: not determined by these rows (no row's time depends on it); kept at "
                         f"`{fit.start_stack}`'s {val(f, fit.start[f])}")
    for i, r in enumerate(fit.rows):
        ho = (f", hold-out {fit.holdout_predicted[i] * 1e3:.4g} ms" if fit.holdout_predicted else "")
        lines.append(f"#   {r.label or r.plan} ({r.metric}, {r.file}:{r.line}): measured {r.measured * 1e3:.4g} ms, "
                     f"fitted {fit.predicted[i] * 1e3:.4g} ms{ho}")
    lines = [comment_safe(w) for line in lines for w in _wrap(line)]
    src = (f"measured: ccost calibrate --steps {fit.source_file}, {len(fit.rows)} rows, fit median "
           f"{_pct(fit.median_error)}" + (f", {fit.folds}-fold hold-out median {_pct(fit.holdout_median_error)}"
                                          if fit.holdout_median_error is not None else ""))
    lines.append(f"stack {name} {ccost_string(title or f'fitted to {len(fit.rows)} measured step times')} {{")
    for f in FIELDS:
        lines.append(f"  {f:<20} = {val(f, fit.values[f])}")
    lines.append(f"  {'source':<20} = {ccost_string(src)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def plot_steps_svg(fit: StepFit) -> str:
    """Predicted against measured, log-log, with the y = x line and the hold-out predictions."""
    from ccost.calibrate.plot import figure, svg_text

    with figure((5.0, 4.6)) as (fig, ax):
        meas = np.array([r.measured for r in fit.rows]) * 1e3
        pred = np.array(fit.predicted) * 1e3
        ax.loglog(meas, pred, "o", color="#1f4e79", markersize=5, label="fitted", zorder=3)
        if fit.holdout_predicted:
            ax.loglog(meas, np.array(fit.holdout_predicted) * 1e3, "x", color="#c55a11", markersize=6,
                      label=f"hold-out ({fit.folds}-fold)", zorder=3)
        lo, hi = min(meas.min(), pred.min()) / 1.3, max(meas.max(), pred.max()) * 1.3
        ax.loglog([lo, hi], [lo, hi], "-", color="#808080", linewidth=0.8, label="predicted = measured")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured (ms)")
        ax.set_ylabel("predicted by ccost (ms)")
        return svg_text(fig, ax, "ccost calibrate --steps")
