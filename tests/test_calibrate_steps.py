"""``ccost calibrate --steps``: a stack profile fitted to measured step times (issue 15, item 5).

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


def _synthetic_csv(tmp_path: Path) -> Path:
    rows = [StepRow(str(INFER), p, "tpot", 1.0, "x", 1) for p in DECODE_PLANS]
    # at the stack's own efficiencies (rates = profile): on the rows' GPUs the bundled serving_default
    # would price the weight reads on the measured kernel curves, which no efficiency of the stack reaches
    times = _Plans(rows, "profile").predict(TRUE)
    lines = ["plan,spec,tpot_ms"] + [f"{p},{INFER},{t * 1e3:.6f}" for p, t in zip(DECODE_PLANS, times)]
    path = tmp_path / "steps.csv"
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
    ("negative.csv", "plan,spec,tpot_ms\nv9_tp1,{infer},-32\n", 2, "not positive"),
    ("words.csv", "plan,spec,tpot\nv9_tp1,{infer},fast\n", 2, "is not a time"),
    ("phase.csv", "plan,spec,ttft_ms\nv9_tp1,{infer},32\n", 2, "TTFT"),
    ("nospec.csv", "plan,tpot_ms\nv9_tp1,32\n", 2, "names no spec"),
    ("bad.yaml", "rows: [a, b\n", 2, "not valid YAML"),  # the bracket is found unclosed at the end
    ("metric.yaml", "- {{plan: v9_tp1, spec: {infer}, metric: train_tflops, measured: 4e14}}\n", 1,
     "is not a time ccost can fit"),
])
def test_bad_files_get_an_error_with_the_place(tmp_path, capsys, name, text, where, why):
    path = tmp_path / name
    path.write_text(text.format(infer=INFER))
    assert main(["calibrate", "--steps", str(path)]) != 0
    err = capsys.readouterr().err
    assert why in err and f"{path}:{where}:" in err, err


def test_the_review_shows_a_measured_profile_with_its_hold_out(tmp_path, capsys):
    from ccost.check import check_file
    from ccost.report import calibrations_for

    import os
    import shutil

    # a small project (a `.git` entry marks its root) laid out like the repository: inference.ccost imports
    # the measured A100 link from specs/measured/
    here = tmp_path / "bench" / "validation"
    here.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / "specs" / "measured").mkdir(parents=True)
    shutil.copy(REPO / "specs" / "measured" / "a100-nvlink.ccost", tmp_path / "specs" / "measured")
    steps = _synthetic_csv(here)
    shutil.copy(INFER, here / "inference.ccost")

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
    """Issue 15's must-show: a profile fitted by ``calibrate --steps`` on half of one stack's development rows
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
