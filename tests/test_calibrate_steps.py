"""``ccost calibrate --steps``: a stack profile fitted to measured step times.

The fit is checked by inversion: times made by pricing the development plans with a stack whose fields
are chosen here (4 ms per step, 30 µs per layer, 80 % of HBM bandwidth) must give those fields back.
Bad files must give an error that names the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ccost.calibrate.steps import StepRow, _Plans, fit_steps, read_steps
from ccost.check import check_text
from ccost.cli import main
from ccost.diagnostics import CcostError

REPO = Path(__file__).resolve().parent.parent
INFER = REPO / "bench" / "validation" / "inference.ccost"
DECODE_PLANS = ["v9_tp1", "v9_tp2", "v9_tp4", "v9_tp8", "v11b_tp2_b1", "v11b_tp4_b1", "v11b_tp8_b1", "v11b_tp2_b16",
                "v11b_tp8_b16", "v11e_llama70b"]
TRUE = {"step_overhead": 4e-3, "layer_overhead": 30e-6, "seq_overhead": 100e-6, "hbm_efficiency": 0.80,
        "gemm_efficiency": 0.70,
        "attention_efficiency": 0.50, "collective_floor": 15e-6}


def _project(root: Path) -> Path:
    """A small project (a `.git` entry marks its root) laid out like the repository, so the steps files
    written in it name a spec inside it (the spec column is confined to the project, like an import):
    bench/validation/inference.ccost, which imports the measured A100 link from specs/measured/. Returns
    the folder of inference.ccost."""
    import shutil

    here = root / "bench" / "validation"
    here.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "specs" / "measured").mkdir(parents=True)
    shutil.copy(REPO / "specs" / "measured" / "a100-nvlink.ccost", root / "specs" / "measured")
    shutil.copy(INFER, here / "inference.ccost")
    return here


def _synthetic_csv(tmp_path: Path) -> Path:
    here = _project(tmp_path)
    infer = here / "inference.ccost"
    rows = [StepRow(str(infer), p, "tpot", 1.0, "x", 1) for p in DECODE_PLANS]
    # at the stack's own efficiencies (rates = profile): on the rows' GPUs the bundled serving_default
    # would price the weight reads on the measured kernel curves, which no efficiency of the stack reaches
    times = _Plans(rows, "profile").predict(TRUE)
    lines = ["plan,spec,tpot_ms"] + [f"{p},inference.ccost,{t * 1e3:.6f}" for p, t in zip(DECODE_PLANS, times)]
    path = here / "steps.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_fit_gives_back_the_stack_that_made_the_times(tmp_path):
    path = _synthetic_csv(tmp_path)
    fit = fit_steps(read_steps(str(path), path.read_text()), folds=2, source_file=str(path), rates="profile")
    assert fit.median_error < 0.005 and fit.holdout_median_error < 0.02
    assert fit.values["hbm_efficiency"] == pytest.approx(0.80, rel=0.03)
    # decode times are a + b/tp: the fixed part step + L·layer (80 layers) is what the rows determine
    assert fit.values["step_overhead"] + 80 * fit.values["layer_overhead"] == pytest.approx(4e-3 + 80 * 30e-6,
                                                                                            rel=0.05)
    assert not fit.determined["gemm_efficiency"]  # no prefill row: kept at the start, and said so


def test_the_cli_prints_a_stack_block_that_checks(tmp_path, capsys):
    path = _synthetic_csv(tmp_path)
    plot = tmp_path / "fit.svg"
    assert main(["calibrate", "--steps", str(path), "--name", "vllm_measured", "--folds", "2",
                 "--plot", str(plot)]) == 0
    text = capsys.readouterr().out
    r = check_text(text, "s.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    stack = r.spec.stacks["vllm_measured"]
    assert stack.source.startswith("measured: ccost calibrate --steps") and "2-fold hold-out" in stack.source
    assert "not determined by these rows" in text and plot.read_text().lstrip().startswith("<?xml")


def test_vllm_benchmark_serving_json(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"completed": 100, "median_ttft_ms": 250.5, "median_tpot_ms": 32.09,
                                "mean_tpot_ms": 33.0}, indent=2))
    rows = read_steps(str(path), path.read_text(), str(INFER), "v9_tp1")
    assert [(r.metric, r.measured) for r in rows] == [("tpot", pytest.approx(32.09e-3)), ("ttft", pytest.approx(0.2505))]
    with pytest.raises(CcostError) as info:
        read_steps(str(path), path.read_text())
    assert "--spec SPEC.ccost --plan NAME" in info.value.diagnostics[0].help


def test_megatron_log_median_without_the_first_iteration(tmp_path):
    path = tmp_path / "train.log"
    its = [9000.0, 1210.0, 1190.0, 1200.0, 1250.0]  # the first is warm-up
    path.write_text("\n".join(f" iteration {i + 1}/ 100 | consumed samples: {i * 8} | elapsed time per iteration "
                              f"(ms): {t} | learning rate: 1.0E-04 |" for i, t in enumerate(its)) + "\n")
    (row,) = read_steps(str(path), path.read_text(), "t.ccost", "p")
    assert row.metric == "step_time" and row.measured == pytest.approx(np.median(its[1:]) * 1e-3)
    assert row.line == 1


@pytest.mark.parametrize("name,text,where,why", [
    ("empty.csv", "", 1, "is empty"),
    ("cols.csv", "model,time\nx,1\n", 1, "no `plan` column"),
    ("notime.csv", "plan,spec\nv9_tp1,{infer}\n", 1, "no time column"),
    ("unknown.csv", "plan,spec,tpot_ms\nv9_tp1,{infer},32\nnope,{infer},10\n", 3, "unknown plan `nope`"),
    ("negative.csv", "plan,spec,tpot_ms\nv9_tp1,{infer},-32\n", 2, "not a positive number"),
    ("words.csv", "plan,spec,tpot\nv9_tp1,{infer},fast\n", 2, "is not a time"),
    ("phase.csv", "plan,spec,ttft_ms\nv9_tp1,{infer},32\n", 2, "TTFT"),
    ("nospec.csv", "plan,tpot_ms\nv9_tp1,32\n", 2, "names no spec"),
    ("bad.yaml", "rows: [a, b\n", 2, "not valid YAML"),  # the bracket is found unclosed at the end
    ("metric.yaml", "- {{plan: v9_tp1, spec: {infer}, metric: train_tflops, measured: 4e14}}\n", 1,
     "is not a time ccost can fit"),
    # YAML reads an integer of any length; past a float's range it was an OverflowError (bench/fuzz.py)
    ("huge.yaml", "- {{plan: v9_tp1, spec: {infer}, metric: tpot, measured: 1" + "0" * 400 + "}}\n", 1,
     "longer than an hour"),
    ("hugeneg.yaml", "- {{plan: v9_tp1, spec: {infer}, metric: tpot, measured: -1" + "0" * 400 + "}}\n", 1,
     "not a positive number"),
])
def test_bad_files_get_an_error_with_the_place(tmp_path, capsys, name, text, where, why):
    path = _project(tmp_path) / name
    path.write_text(text.format(infer="inference.ccost"))
    assert main(["calibrate", "--steps", str(path)]) != 0
    err = capsys.readouterr().err
    assert why in err and f"{path}:{where}:" in err, err


def test_the_review_shows_a_measured_profile_with_its_hold_out(tmp_path, capsys):
    from ccost.check import check_file
    from ccost.report import calibrations_for

    import os

    steps = _synthetic_csv(tmp_path)
    here = steps.parent

    cwd = os.getcwd()
    os.chdir(here)
    try:
        assert main(["calibrate", "--steps", steps.name, "--name", "vllm_measured", "--folds", "2",
                     "-o", "stack.ccost"]) == 0
    finally:
        os.chdir(cwd)
    spec = here / "plan.ccost"
    spec.write_text('import "stack.ccost"\nimport "inference.ccost"\nplan mine extends v9_tp4 { stack = vllm_measured }\n')
    res = check_file(str(spec))
    assert res.ok, [(d.code, d.message) for d in res.errors]
    cals = calibrations_for(res.spec, ["mine"], here)["mine"]
    prof = [c for c in cals if c.link == "stack vllm_measured"]
    assert prof and prof[0].svg and "2-fold hold-out median" in prof[0].note


def test_half_of_the_vllm_rows_predict_the_other_half():
    """A profile fitted by ``calibrate --steps`` on half of one stack's development rows
    (vLLM, bench/validation/rows.yaml) predicts the other half within 15 % median. The halves alternate
    through the table, so each holds both TP sweeps and batch sizes; both directions are checked."""
    rows_file = REPO / "bench" / "validation" / "rows.yaml"
    rows = [r for r in read_steps(str(rows_file), rows_file.read_text(), only="vllm") if r.label.startswith("V")]
    assert len(rows) >= 10 and all(r.metric == "tpot" for r in rows)
    halves = (rows[0::2], rows[1::2])
    for train, test in (halves, halves[::-1]):
        fit = fit_steps(list(train), folds=1)
        predicted = _Plans(list(test)).predict(fit.values)
        measured = np.array([r.measured for r in test])
        errors = np.abs(predicted / measured - 1)
        assert float(np.median(errors)) <= 0.15, [f"{r.label or r.plan}: {e:.1%}" for r, e in zip(test, errors)]


# --------------------------------------------------------------------------------------------------
# Hostile steps files: bounded, linear, and no NaN or infinity printed

BOMB = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"lol"'] * 9) + "]\n" for i in range(9))


@pytest.mark.parametrize("name,text,why", [
    ("bomb.yaml", BOMB, "expands to more than 1,000,000 values"),  # 700 bytes; before: 66 s and 3 GB
    ("deep.yaml", "rows:\n" + "".join(" " * (2 * i) + "- \n" for i in range(1, 400)), "nested more than 64"),
    ("deepflow.yaml", "- " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),  # before: exit 70
    ("deep.json", '{"median_tpot_ms": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than 64"),
    ("digits.json", '{"median_tpot_ms": ' + "9" * 5000 + "}", "more than 4,300 digits"),
    ("cells.yaml", "- {plan: [a, b], spec: inference.ccost, tpot: 1}\n", "is a list or a mapping"),
])
def test_hostile_data_files_are_refused_quickly_with_the_file_named(tmp_path, capsys, name, text, why):
    path = _project(tmp_path) / name
    path.write_text(text)
    args = ["calibrate", "--steps", str(path)] + (["--spec", "inference.ccost", "--plan", "v9_tp1"]
                                                  if name.endswith(".json") else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "E501" in err and why in err and str(path) in err and "internal error" not in err, err


def test_more_rows_than_the_limit_are_refused_before_the_rest_is_read(tmp_path, capsys):
    from ccost.calibrate.steps import MAX_ROWS

    path = _project(tmp_path) / "many.csv"
    path.write_text("plan,spec,tpot_ms\n" + "v9_tp1,inference.ccost,30\n" * (MAX_ROWS + 1))
    assert main(["calibrate", "--steps", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"more than {MAX_ROWS:,} rows" in err and f"{path}:{MAX_ROWS + 2}:" in err, err


def test_rows_of_one_plan_are_priced_once_per_step_of_the_fit(tmp_path, monkeypatch):
    """Linear in the rows: 10,000 rows (the documented limit) of two plans cost two preparations per
    stack, not 10,000 (bench/calibrate_steps.py times the whole fit)."""
    from ccost.model import lower

    here = _project(tmp_path)
    path = here / "steps.csv"
    path.write_text("plan,spec,tpot_ms\n" + "v9_tp1,inference.ccost,30\nv9_tp2,inference.ccost,20\n" * 5_000)
    rows = read_steps(str(path), path.read_text())
    assert len(rows) == 10_000
    plans = _Plans(rows)
    calls = []
    real = lower.prepare
    monkeypatch.setattr(lower, "prepare", lambda *a, **k: calls.append(1) or real(*a, **k))
    times = plans.predict_many([TRUE, dict(TRUE, step_overhead=5e-3), dict(TRUE, hbm_efficiency=0.9)])
    assert times.shape == (3, 10_000) and len(calls) == 2 * 3
    # each row gets its own plan's time; the same as one row priced alone
    one = _Plans(rows[:2]).predict(TRUE)
    assert times[0][:4] == pytest.approx(list(one) * 2, rel=1e-12)


@pytest.mark.parametrize("value,why", [
    ("nan", "not a positive number"), ("inf", "not a positive number"), ("-5", "not a positive number"),
    ("1e-320", "shorter than 1 µs"), ("n/a", "not a number of milliseconds"),
])
@pytest.mark.parametrize("plot", [False, True])
def test_a_megatron_time_that_is_not_a_time_is_an_error_with_the_line(tmp_path, capsys, value, why, plot):
    """Before: `(ms): nan` gave exit 0 and `median error nan %` (exit 70 with --plot); 1e-320 gave `inf %`."""
    path = tmp_path / "train.log"
    its = ["1210.0", "1190.0", value, "1200.0"]
    path.write_text("".join(f" iteration {i + 1}/ 100 | elapsed time per iteration (ms): {t} | lr: 1.0E-04 |\n"
                            for i, t in enumerate(its)))
    args = ["calibrate", "--steps", str(path), "--spec", str(INFER), "--plan", "v9_tp1"]
    assert main(args + (["--plot", str(tmp_path / "f.svg")] if plot else [])) == 2
    err = capsys.readouterr().err
    assert why in err and f"{path}:3:" in err and "nan %" not in err and "inf %" not in err, err
    assert not (tmp_path / "f.svg").exists()


@pytest.mark.parametrize("cell", ["1e-320", "0.0000001", "1e-320 ms"])
def test_a_table_time_below_a_microsecond_is_refused(tmp_path, capsys, cell):
    path = _project(tmp_path) / "steps.csv"
    path.write_text(f"plan,spec,tpot\nv9_tp1,inference.ccost,{cell}\n")
    assert main(["calibrate", "--steps", str(path)]) == 2
    assert "shorter than 1 µs" in capsys.readouterr().err


def test_a_log_piece_whose_time_does_not_grow_prints_no_infinite_bandwidth():
    """Eight fuzzed nccl-tests logs printed `T = ... + m / inf B/s`."""
    from ccost.calibrate.block import _piece_line
    from ccost.calibrate.fit import Piece

    line = _piece_line(2, Piece(a=25e-6, b=0.0, lo=65536, hi=1048576, n=5, median_error=0.01, worst_error=0.02), "")
    assert "inf" not in line and "not growing with size" in line and "T = 25 us" in line
