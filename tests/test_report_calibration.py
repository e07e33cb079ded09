"""The review of a spec whose link is measured shows the calibration fit and its quality (issue 6)."""

from __future__ import annotations

from pathlib import Path

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
