"""Review content that joins two engines: a measured link's fit, a sweep's term split."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost.cli import main

SPEC = Path(__file__).resolve().parent.parent / "specs" / "calibrated-nvlink.ccost"


def test_review_of_a_measured_link_shows_fit_plot_and_quality(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["report", str(SPEC), "-o", f"{tmp_path}/", "--format", "html", "--no-git"]) == 0
    html = (tmp_path / "calibrated-nvlink.html").read_text(encoding="utf-8")
    caption_start = html.index("Calibration of link nvlink3_measured")
    caption = html[caption_start:html.index("<", caption_start)]
    # the fit's quality, in calibrate's words: R², median and worst error, hold-out, busbw plateau
    for words in ("R² of log T", "median error", "worst", "Hold-out", "busbw plateau"):
        assert words in caption, words
    # and the plot itself: an inline SVG with log-log axes over message size
    assert html.count("<svg") >= 1 and "calibration-nvlink3-measured-axes_1" in html


def test_sweep_review_splits_step_time_into_compute_latency_and_bandwidth(tmp_path, monkeypatch):
    # the review promises a "step time split into compute, latency and bandwidth terms against N" — the real
    # engine's sweep points carry both terms, so the A4 review stacks all three (not one T_comm band).
    from ccost import check, evaluate

    spec, _ = check.load_spec(str(SPEC.parent / "a4-tp-scaling.ccost"))
    points = evaluate.results_document(evaluate.evaluate(spec))["sweeps"]["tp_scaling"]["points"]
    for p in points:  # each point's terms add up to its T_comm (A4, tp = 8: 1.92 ms + 10.19 µs)
        assert p["latency_term_s"] + p["bandwidth_term_s"] == pytest.approx(p["comm_time_s"])
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["report", str(SPEC.parent / "a4-tp-scaling.ccost"), "-o", f"{tmp_path}/", "--format", "html",
                 "--no-git"]) == 0
    html = (tmp_path / "a4-tp-scaling.html").read_text(encoding="utf-8")
    assert "latency term (α·hops)" in html and "bandwidth term (volume/B)" in html
