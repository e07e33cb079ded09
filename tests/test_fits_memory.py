"""Memory at check time, and sweeps and searches that never call a layout that does not fit efficient
.

Qwen2.5-72B at TP = 1 on one H200: by hand, 72.71e9 parameters × 2 bytes (bf16) = 145.4 GB of weights
alone, more than the 141 GB of the GPU and far more than the policy's 90 % of it, 126.9 GB. `check` said
`ok (1 plan)` and `eval` printed TTFT and TPOT for it; now `check` warns (W401), from the rule `eval`, the
review and the gate judge memory by (checklist item 11), and `check --policy` fails on it.
"""

from __future__ import annotations

import re

from ccost import cli, evaluate, output
from ccost.check import check_text

STD = 'import "std/gpus.ccost"\nimport "std/links.ccost"\nimport "std/models.ccost"\nimport "std/clusters.ccost"\n'
QWEN = STD + """
plan q "Qwen2.5-72B at TP=1 on one H200" {
  model = qwen25_72b; cluster = hgx_h200; phase = serve
  concurrency = 32; input_tokens = 1024; output_tokens = 256
  tp = 1
}
"""


def _write(tmp_path, text: str):
    path = tmp_path / "plan.ccost"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_warns_when_a_plan_does_not_fit_and_the_gate_fails(tmp_path, capsys):
    path = _write(tmp_path, QWEN)
    assert cli.main(["check", path]) == 0  # a warning: the spec is usable
    out, err = capsys.readouterr()
    assert out.strip() == f"{path}: ok (1 plan, 1 warning)"
    (head,) = [ln for ln in err.splitlines() if "warning[W401]" in ln]
    assert head.startswith(f"{path}:6:6: warning[W401]: plan `q` does not fit in GPU memory")
    # the limit is 90 % (the default policy) of 141 GB = 126.9 GB; the need is above the 145.4 GB of weights
    assert "more than its limit of 126.9 GB (90 % of the 141 GB of gpu `h200`)" in head
    need = float(re.search(r"needs ([\d.]+) GB per GPU", head).group(1))
    assert need > 145.4
    assert cli.main(["check", "--policy", path]) == 1
    _, err = capsys.readouterr()
    assert "q: checklist 11 memory per GPU" in err


def test_a_plan_that_fits_gets_no_memory_warning(tmp_path, capsys):
    path = _write(tmp_path, QWEN.replace("tp = 1", "tp = 8"))  # 145.4 GB / 8 = 18.2 GB of weights per GPU
    assert cli.main(["check", path]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"{path}: ok (1 plan)" and "W401" not in err


SWEEP = STD + """
plan d "Qwen2.5-72B decode on H200" { model = qwen25_72b; cluster = hgx_h200; phase = decode; batch = 1; tp = 1 }
sweep tps { base = d; tp = [1, 2, 4] }
sweep none_fits { base = d; tp = [1] }
"""


def test_a_sweep_shows_whether_each_point_fits_and_no_efficiency_for_one_that_does_not():
    r = check_text(SWEEP, "/nowhere/s.ccost")
    doc = evaluate.results_document(evaluate.evaluate(r.spec))
    pts = {p["tp"]: p for p in doc["sweeps"]["tps"]["points"]}
    # the JSON keeps the model's numbers (worked example A4 tabulates tp = 1 at 100 %) and says it does not fit
    assert abs(pts[1]["efficiency"] - 1.0) < 1e-12 and pts[1]["fits_memory"] is False
    assert pts[2]["fits_memory"] is True  # 145.4 GB / 2 = 72.7 GB ≤ 126.9 GB
    text = output.sweep_text("tps", doc["sweeps"]["tps"])
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines()[3:6]}
    assert rows["1"][-1] == "NO" and rows["1"][3] == "—" and rows["1"][4] == "—"  # speedup, efficiency
    assert rows["2"][-1] == "yes" and rows["2"][4] != "—"
    assert "100 %" not in text.splitlines()[3] and "does not fit in memory" in text
    # a layout that does not fit is never an optimum, even when no point fits
    assert doc["sweeps"]["tps"]["time_optimal"] == {"tp": 4}
    none = doc["sweeps"]["none_fits"]
    assert none["time_optimal"] is None and all(v is None for v in none["cost_optimal"].values())
    assert "time-optimal: none (no point fits in memory)" in output.sweep_text("none_fits", none)


SEARCH_BLOCK = "search s { base = d; tp = [1, 2, 4, 8]; fits_memory = false; objective = throughput_per_gpu; top = 4 }\n"
SEARCH = STD + """
plan d "Qwen2.5-72B decode on H200" { model = qwen25_72b; cluster = hgx_h200; phase = decode; batch = 1; tp = 1 }
""" + SEARCH_BLOCK


def test_a_search_without_the_memory_constraint_shows_which_layouts_do_not_fit():
    r = check_text(SEARCH, "/nowhere/s.ccost")
    doc = evaluate.results_document(evaluate.evaluate(r.spec))
    s = doc["searches"]["s"]
    by_tp = {p["tp"]: p for p in s["top"]}
    assert by_tp[1]["fits_memory"] is False and by_tp[8]["fits_memory"] is True
    text = output.search_text("s", s)
    head = next(ln for ln in text.splitlines() if ln.strip().startswith("tp "))
    assert " fits " in head + " "
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines() if ("yes" in ln.split() or "NO" in ln.split())}
    assert "NO" in rows["1"] and "—" in rows["1"] and "100" not in " ".join(rows["1"])  # no efficiency shown
    assert "yes" in rows["8"] and "—" not in rows["8"]


def test_the_review_shows_no_efficiency_for_a_layout_that_does_not_fit():
    from ccost.report import build

    r = check_text(SWEEP + SEARCH_BLOCK, "/nowhere/s.ccost")
    doc = evaluate.results_document(evaluate.evaluate(r.spec))
    sweep = build.sweep_section("tps", doc["sweeps"]["tps"], r.spec.policy, False).table
    col = {h: i for i, h in enumerate(sweep.headers)}
    tp1 = next(row for row in sweep.rows if row[0] == "1")
    assert (tp1[col["speedup"]], tp1[col["efficiency"]], tp1[col["fits"]]) == ("—", "—", "no")
    search = build.search_section("s", doc["searches"]["s"], charts=False).top
    col = {h: i for i, h in enumerate(search.headers)}
    tp1 = next(row for row in search.rows if row[0] == "1")
    assert tp1[col["efficiency"]] == "—" and tp1[col["fits"]] == "no"
