"""ccost.api: the Python interface (docs/python.md).

Every function is checked against the command it stands for (the same document, the same derivation lines,
the same review YAML), against hand-worked numbers of worked example A1 (docs/examples.md), on its error
path (one exception type carrying diagnostics, never a print or an exit) and, with pandas (a test
dependency, so a fresh install runs these), on its DataFrames. docs/python.md's examples run here too.
"""

from __future__ import annotations

import doctest
import json
import re
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from ccost import api, cli

REPO = Path(__file__).resolve().parents[1]
A1 = str(REPO / "specs" / "a1-tp-decode.ccost")
SEARCH = str(REPO / "specs" / "search-llama70b-serving.ccost")

# Worked example A1 by hand (docs/examples.md, "Communication Cost Math — Distributed Inference" §3): TP=8
# ring AllReduce of 32 × 8192 × 2 B = 524,288 B, 160 per token (2 per layer, 80 layers), 2·7 = 14 hops of
# 2 µs each and 2·7/8 × 524,288 B = 917,504 B over 450 GB/s: 160 × (28 µs + 2.0389 µs) = 4.8062 ms.
A1_MESSAGE = 32 * 8192 * 2
A1_T_COMM = 160 * (14 * 2e-6 + 2 * 7 / 8 * A1_MESSAGE / 450e9)

BAD = 'link nvl { alpha = 2; bandwidth = 450 GB }\n'


def cli_out(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def a1():
    return api.load(A1)


@pytest.fixture(scope="module")
def a1_results(a1):
    return api.evaluate(a1)


# ---------------------------------------------------------------------------------------------------
# load and check

def test_load_a_path_or_text(tmp_path, capsys):
    spec = api.load(A1)
    assert spec.path == A1 and spec.plans == ["tp8", "tp8_tree", "tp8_one_shot"] and not spec.from_text
    assert spec.sweeps == ["tp_scaling"] and spec.compares == ["algorithms"] and spec.searches == []
    text = (REPO / "specs" / "a1-tp-decode.ccost").read_text()
    same = api.load(text=text)
    assert same.path == "<text>" and same.from_text and same.plans == spec.plans
    # text checked as a file of a folder: its imports resolve beside it
    (tmp_path / "lib.ccost").write_text(text)
    here = api.load(tmp_path / "main.ccost", text='import "lib.ccost"\n')
    assert here.plans == spec.plans and here.path == str(tmp_path / "main.ccost")
    assert capsys.readouterr() == ("", "")


def test_warnings_are_kept_not_printed(capsys):
    spec = api.load(REPO / "specs" / "a3-multi-node.ccost")  # tp16 leaves the NVLink domain of 8 GPUs
    assert [d.code for d in spec.warnings] == ["W301", "W302"]
    assert capsys.readouterr() == ("", "")


def test_check_gives_every_diagnostic_as_data(capsys):
    report = api.check(text=BAD)
    assert not report.ok and report.spec is None
    assert [(d.code, d.severity, d.span.line, d.span.column) for d in report.errors] == [
        ("E201", api.Severity.ERROR, 1, 20), ("E201", api.Severity.ERROR, 1, 35)]  # `2`, `450` (counted)
    record = asdict(report.errors[0])  # plain data, all the way down
    assert record["span"] == {"file": "<text>", "line": 1, "column": 20, "end_line": 1, "end_column": 21}
    assert json.dumps(record, default=str)
    assert "<text>:1:20: error[E201]:" in report.text and "2 errors" in report.text
    good = api.check(A1)
    assert good.ok and good.diagnostics == () and good.spec.plans == ["tp8", "tp8_tree", "tp8_one_shot"]
    assert capsys.readouterr() == ("", "")


def test_check_says_what_ccost_check_says(tmp_path, capsys):
    bad = tmp_path / "bad.ccost"
    bad.write_text(BAD)
    code, out, err = cli_out(capsys, "check", str(bad))
    assert code == 2 and out == ""
    assert api.check(bad).text == err.rstrip("\n")  # the same diagnostics, rendered the same way


def test_load_raises_one_exception_type_with_the_diagnostics(capsys):
    with pytest.raises(api.CcostError) as info:
        api.load(text=BAD)
    exc = info.value
    assert [d.code for d in exc.diagnostics] == ["E201", "E201"]
    assert exc.sources == {"<text>": BAD}
    assert "<text>:1:20: error[E201]" in api.diagnostics_text(exc)
    with pytest.raises(api.CcostError) as missing:
        api.load(REPO / "specs" / "no-such-spec.ccost")
    assert [d.code for d in missing.value.diagnostics] == ["E002"]
    assert capsys.readouterr() == ("", "")


def test_wrong_arguments_are_type_errors():
    with pytest.raises(TypeError):
        api.load()
    with pytest.raises(TypeError):
        api.load(text=b"plan x {}")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        api.evaluate(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------
# evaluate

def test_evaluate_gives_the_document_ccost_eval_prints(a1_results, capsys):
    code, out, _ = cli_out(capsys, "eval", A1, "--format", "json")
    assert code == 0
    assert a1_results.document == json.loads(out)  # the same code, the same numbers
    assert a1_results.to_json() == out
    tp8 = a1_results.document["plans"]["tp8"]
    assert tp8["collectives"][0]["message_bytes"] == A1_MESSAGE
    assert tp8["comm_time_s"] == pytest.approx(A1_T_COMM, rel=1e-6)


def test_evaluate_one_plan_and_a_path(capsys):
    one = api.evaluate(A1, plan="tp8_tree")  # a path is loaded first
    assert list(one.document["plans"]) == ["tp8_tree"] and "sweeps" not in one.document
    code, out, _ = cli_out(capsys, "eval", A1, "--plan", "tp8_tree", "--format", "yaml")
    assert code == 0 and one.to_yaml() == out
    with pytest.raises(api.CcostError) as info:
        api.evaluate(A1, plan="tp9")
    assert info.value.diagnostics[0].code == "E101" and "did you mean `tp8`" in info.value.diagnostics[0].help
    assert capsys.readouterr() == ("", "")


def test_a_plan_that_cannot_be_evaluated_raises_with_sources(capsys):
    # A1's GPU has no price, so a policy on the cost per million tokens cannot judge its plans: E403, an
    # evaluation error (the spec itself checks clean), for every plan at once.
    text = re.sub(r"^policy \{", "policy {\n  max_cost_per_mtok = 5 USD", (REPO / "specs" / "a1-tp-decode.ccost")
                  .read_text(), count=1, flags=re.M)
    spec = api.load(text=text)
    with pytest.raises(api.CcostError) as info:
        api.evaluate(spec)
    assert {d.code for d in info.value.diagnostics} == {"E403"}
    assert info.value.sources["<text>"] == text  # (and the std stack file the plans read)
    assert "max_cost_per_mtok" in api.diagnostics_text(info.value)
    assert capsys.readouterr() == ("", "")


def test_tables_as_rows(a1_results):
    assert a1_results.tables == ["plans", "sweeps.tp_scaling"]
    rows = a1_results.rows("plans")
    assert [r["plan"] for r in rows] == ["tp8", "tp8_tree", "tp8_one_shot"]
    assert rows[0]["cost.priced"] is False and rows[0]["layout.tp"] == 8  # nested keys: dotted columns
    assert not any(isinstance(v, (list, dict)) for r in rows for v in r.values())
    points = a1_results.rows("sweeps.tp_scaling")
    assert [p["tp"] for p in points] == [1, 2, 4, 8, 16, 32, 64]
    assert "error" in points[-1] and "error" not in points[0]  # 64 GPUs do not fit the 8-GPU node
    with pytest.raises(KeyError, match="tables: `plans`, `sweeps.tp_scaling`"):
        a1_results.rows("sweeps.nope")


def test_tables_as_dataframes(a1_results):
    df = a1_results.frame("plans")
    assert isinstance(df, pd.DataFrame) and list(df.index) == ["tp8", "tp8_tree", "tp8_one_shot"]
    assert df.loc["tp8", "comm_time_s"] == pytest.approx(A1_T_COMM, rel=1e-6)
    assert "collectives" not in df.columns and "cost.cost_per_mtok_usd" in df.columns
    sweep = a1_results.frame("sweeps.tp_scaling")
    assert len(sweep) == 7 and list(sweep.columns)[:2] == ["tp", "gpus"] and "error" in sweep.columns
    assert sweep["error"].isna().tolist() == [True] * 4 + [False] * 3


def test_frame_without_pandas_is_a_ccost_error(a1_results, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` then raises ImportError
    with pytest.raises(api.CcostError) as info:
        a1_results.frame("plans")
    assert info.value.diagnostics[0].code == "E512" and "pip install pandas" in info.value.diagnostics[0].help
    assert a1_results.rows("plans")  # the rows need no pandas


# ---------------------------------------------------------------------------------------------------
# search

def test_search_runs_the_searches_only(capsys):
    found = api.search(SEARCH)
    assert found.document["plans"] == {} and list(found.document["searches"]) == ["serving", "serving_cost"]
    code, out, _ = cli_out(capsys, "eval", SEARCH, "--format", "json")
    assert found.document["searches"] == json.loads(out)["searches"]  # what ccost eval prints for them
    one = api.search(SEARCH, "serving_cost", jobs=1)
    assert list(one.document["searches"]) == ["serving_cost"]
    assert one.document["searches"]["serving_cost"] == found.document["searches"]["serving_cost"]
    assert one.tables == ["searches.serving_cost.top", "searches.serving_cost.pareto"]
    top = one.frame("searches.serving_cost.top")
    assert len(top) == len(one.document["searches"]["serving_cost"]["top"])
    assert top.iloc[0]["gpus"] == top.iloc[0]["tp"] * top.iloc[0]["pp"] * top.iloc[0]["dp"]
    with pytest.raises(api.CcostError) as info:
        api.search(SEARCH, "servin")
    assert info.value.diagnostics[0].code == "E101" and "`serving`" in info.value.diagnostics[0].help
    assert capsys.readouterr() == ("", "")


# ---------------------------------------------------------------------------------------------------
# explain

def test_explain_gives_the_steps_ccost_explain_prints(a1, a1_results, capsys):
    ex = api.explain(a1, "tp8")
    assert ex.plan == "tp8" and ex.sections[0] == "inputs" and ex.sections[-1] == "cost and power"
    code, out, _ = cli_out(capsys, "explain", A1, "tp8")
    assert code == 0
    printed = out.splitlines()
    mine = [f"  {s.line}" for s in ex.steps]
    assert mine and all(line in printed for line in mine)  # every step, as the command prints it
    t_comm = ex.step("T_comm")
    assert t_comm.value == pytest.approx(A1_T_COMM, rel=1e-12) and t_comm.unit == "s"
    assert t_comm.result == "4.806 ms" and t_comm.kind == "step"
    alpha = ex.step("α_intra")
    assert alpha.kind == "input" and alpha.value == 2e-6 and alpha.source == "spec sheet"
    assert ex.value("T_comm") == pytest.approx(a1_results.document["plans"]["tp8"]["comm_time_s"], rel=1e-6)
    rows = ex.frame()
    assert list(rows.columns)[:3] == ["section", "name", "formula"] and len(rows) == len(ex.steps)
    assert ex.text.startswith("## inputs\n")
    with pytest.raises(KeyError, match="did you mean"):
        ex.step("T_com")


def test_explain_an_unknown_plan(a1):
    with pytest.raises(api.CcostError) as info:
        api.explain(a1, "tp7")
    assert info.value.diagnostics[0].code == "E101"
    assert getattr(info.value, "sources", None)  # for the caret lines


# ---------------------------------------------------------------------------------------------------
# report

def test_report_writes_the_review_and_the_document(a1, a1_results, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    written = api.report(a1, tmp_path / "out", format="html", git=False)  # the folder is created
    assert [p.name for p in written] == ["a1-tp-decode.html", "a1-tp-decode.yaml"]
    assert written[1].read_text(encoding="utf-8") == a1_results.to_yaml()
    html = written[0].read_text(encoding="utf-8")
    assert "4.806 ms" in html and "not recorded (git=False)" in html
    assert capsys.readouterr() == ("", "")


def test_report_errors_are_ccost_errors(tmp_path, monkeypatch):
    with pytest.raises(api.CcostError) as info:
        api.report(api.load(text=BAD.replace("= 2;", "= 2 us;").replace("GB }", "GB/s }")), tmp_path)
    assert info.value.diagnostics[0].code == "E504" and "as text" in info.value.diagnostics[0].message
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(api.CcostError) as info:
        api.report(A1, blocker, format="html")
    assert info.value.diagnostics[0].code == "E504"
    assert blocker.read_text() == "not a folder"  # nothing the user had is lost
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(api.CcostError) as info:
        api.report(A1, tmp_path / "r", format="html")
    assert info.value.diagnostics[0].code == "E504" and not (tmp_path / "r").exists()
    with pytest.raises(ValueError):
        api.report(A1, tmp_path, format="docx")


@pytest.mark.slow  # renders a PDF (~2 s); the HTML and YAML path is test_report_writes_the_review_...
def test_report_writes_the_pdf_too(a1, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    written = api.report(a1, tmp_path, git=False)
    assert [p.suffix for p in written] == [".html", ".pdf", ".yaml"]
    assert written[1].read_bytes().startswith(b"%PDF")


# ---------------------------------------------------------------------------------------------------
# docs/python.md: its pycon blocks, as one doctest in page order

PAGE = REPO / "docs" / "python.md"


def page_doctest(page: Path = PAGE) -> doctest.DocTest:
    """The page's ``pycon`` blocks as one doctest, each example at its line of the page."""
    text = page.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    examples = []
    for m in re.finditer(r"^```pycon\n(.*?)^```", text, flags=re.M | re.S):
        first = text.count("\n", 0, m.start(1))
        for ex in parser.get_examples(m.group(1)):
            ex.lineno += first
            examples.append(ex)
    return doctest.DocTest(examples, {}, "docs/python.md", str(page), 0, text)


def test_python_page_examples_run(tmp_path, monkeypatch):
    test = page_doctest()
    assert len(test.examples) > 30
    shutil.copytree(REPO / "specs", tmp_path / "specs")  # the page reads specs/ and writes review/
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "docs/python.md: an example no longer prints what the page shows:\n" + "".join(out)
    assert (tmp_path / "review" / "a1-tp-decode.yaml").is_file()
