"""One CLI, one set of habits (issue 10, item 7): check, eval and report take folders and several files
like fmt, eval and check read standard input from `-`, and the gate says why a plan passes or fails."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from ccost.cli import main

REPO = Path(__file__).resolve().parents[1]
A1 = REPO / "specs" / "a1-tp-decode.ccost"
B_EFF = REPO / "specs" / "b-efficiency.ccost"


@pytest.fixture
def folder(tmp_path):
    """specs/ in small: two plans files and a library file with no plan (like specs/std)."""
    (tmp_path / "lib").mkdir()
    shutil.copy(A1, tmp_path / "a1.ccost")
    shutil.copy(B_EFF, tmp_path / "b.ccost")
    (tmp_path / "lib" / "hw.ccost").write_text('link x { alpha = 2 us; bandwidth = 450 GB/s }\n')
    return tmp_path


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_takes_a_folder(folder, capsys):
    code, out, err = run(capsys, "check", str(folder))
    assert code == 0, err
    assert out.splitlines() == [f"{folder / 'a1.ccost'}: ok (3 plans, 1 sweep, 1 comparison)",
                                # the notes' DDP examples keep a 7B model's full training state on each
                                # GPU: 16 B per parameter, 112 GB before activations > 72 GB (W401)
                                f"{folder / 'b.ccost'}: ok (4 plans, 1 comparison, 4 warnings)",
                                f"{folder / 'lib' / 'hw.ccost'}: ok (0 plans) — note: it defines no plans, so "
                                "there is nothing to evaluate"]


def test_eval_takes_folders_and_files_and_skips_libraries(folder, capsys):
    code, out, err = run(capsys, "eval", str(folder), "--format", "json")
    assert code == 0, err
    docs = json.loads(out)
    assert [d["spec"] for d in docs] == [str(folder / "a1.ccost"), str(folder / "b.ccost")]
    assert f"{folder / 'lib' / 'hw.ccost'}: skipped (defines no plan" in err
    code, out, _ = run(capsys, "eval", str(folder / "a1.ccost"), str(folder / "b.ccost"), "--format", "yaml")
    assert code == 0
    assert [d["spec"] for d in yaml.safe_load_all(out)] == [str(folder / "a1.ccost"), str(folder / "b.ccost")]
    # one spec: one document, as before (INTERFACE.md)
    code, out, _ = run(capsys, "eval", str(folder / "a1.ccost"), "--format", "json")
    assert isinstance(json.loads(out), dict)
    # a library named explicitly is evaluated (an empty document), not skipped
    code, out, _ = run(capsys, "eval", str(folder / "lib" / "hw.ccost"), "--format", "json")
    assert code == 0 and json.loads(out)["plans"] == {}


def test_eval_reads_standard_input(folder, capsys, monkeypatch):
    monkeypatch.chdir(folder)  # imports of a spec on stdin resolve from the current folder
    text = A1.read_text(encoding="utf-8")
    code, out, err = run(capsys, "eval", "-", "--format", "json", stdin=text, monkeypatch=monkeypatch)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["spec"] == "<stdin>" and doc["plans"]["tp8"]["step_time_s"] == pytest.approx(0.01006741, rel=1e-6)
    (folder / "hw2.ccost").write_text('link y { alpha = 2 us; bandwidth = 450 GB/s }\n')
    code, out, err = run(capsys, "check", "-", stdin='import "hw2.ccost"\nlink z extends y { alpha = 3 us }\n',
                         monkeypatch=monkeypatch)
    assert code == 0 and out.strip() == "<stdin>: ok (0 plans) — note: it defines no plans, so there is " \
        "nothing to evaluate", err


def test_eval_keeps_going_past_a_bad_spec(folder, capsys):
    (folder / "bad.ccost").write_text("link x { alpha = 2 GB }\n")
    code, out, err = run(capsys, "eval", str(folder / "a1.ccost"), str(folder / "bad.ccost"), "--format", "json")
    assert code == 2 and "E201" in err
    assert [d["spec"] for d in json.loads(out)] == [str(folder / "a1.ccost")]


@pytest.mark.slow
def test_report_takes_several_specs(folder, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    code, out, err = run(capsys, "report", str(folder), "-o", str(folder / "out") + "/", "--format", "html",
                         "--no-git")
    assert code == 0, err
    assert sorted(p.name for p in (folder / "out").iterdir()) == ["a1.html", "a1.yaml", "b.html", "b.yaml"]
    code, _, err = run(capsys, "report", str(folder / "a1.ccost"), str(folder / "b.ccost"), "-o",
                       str(folder / "one.pdf"))
    assert code == 2 and "several specs need a folder" in err


def test_gate_says_why_each_plan_passes_or_fails(capsys):
    """The README tour: llama3-70b-serving has one plan that does not fit the 90 % memory limit on purpose
    (64 sequences of 8,192 tokens at TP=4); the others pass, each with the numbers it passed on (the bundled
    serving profile, current vLLM, runs its host work behind the GPU's step). mixtral-ep's plans pass too."""
    code, out, err = run(capsys, "check", "--policy", str(REPO / "specs" / "llama3-70b-serving.ccost"))
    assert code == 1
    passing = [line for line in out.splitlines() if ": policy ok (" in line]
    assert [line.split(": ")[1] for line in passing] == ["tp8", "tp4_dp2", "tp8_b128"]
    assert all("efficiency" in line and "≥ min 70 %" in line for line in passing)
    assert "tp4_dp2_b64: checklist 11 memory per GPU 78.23 GB > limit 72 GB" in err
    code, out, err = run(capsys, "check", "--policy", str(REPO / "specs" / "mixtral-ep.ccost"))
    assert code == 0
    passing = [line for line in out.splitlines() if ": policy ok (" in line]
    assert [line.split(": ")[1] for line in passing] == ["ep8", "tp8", "tp2_ep4"]
    assert all("overhead" in line and "≤ max 30 %" in line and "≥ min 55 %" in line and "≤ limit 72 GB" in line
               for line in passing)
