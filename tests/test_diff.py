"""``ccost diff``: a temporary git repository, a committed plan, then changes to a link's bandwidth and a
plan's tp; a change in an imported file; a spec that did not exist at the revision; two files.

The plan is worked example A1 of the notes (Llama-3-70B decode, TP=8, batch 32, ring AllReduce on NVLink
α = 2 µs). Expected numbers are worked out by hand below from the notes' formulas:

    message m = B·S·d·bytes = 32 · 1 · 8192 · 2 = 524,288 B; 2 AllReduces per layer · 80 layers = 160
    old (tp 8, 450 GB/s):  hops 160 · 2·7 = 2240 → 4.48 ms;  volume 160 · 2·7/8 · m = 146,800,640 B
                           → 0.32622 ms at 450 GB/s; T_comm 4.80622 ms; compute 141 GB / 8 / 3.35 TB/s
                           = 5.26119 ms; overhead 91.35 % (> 30 %: checklist 6 fails)
    new (tp 4, 900 GB/s):  hops 160 · 2·3 = 960 → 1.92 ms;  volume 160 · 2·3/4 · m = 125,829,120 B
                           → 0.13981 ms at 900 GB/s; T_comm 2.05981 ms; compute 141 GB / 4 / 3.35 TB/s
                           = 10.52239 ms; overhead 19.58 % (checklist 6 passes)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ccost.cli import main

M = 32 * 1 * 8192 * 2
OLD_COMM = 160 * 14 * 2e-6 + 160 * (2 * 7 / 8) * M / 450e9
NEW_COMM = 160 * 6 * 2e-6 + 160 * (2 * 3 / 4) * M / 900e9
OLD_COMPUTE = 141e9 / 8 / 3.35e12
NEW_COMPUTE = 141e9 / 4 / 3.35e12

HW = """\
link nvl "NVLink 4" {
  alpha     = 2 us
  bandwidth = 450 GB/s
}

gpu h100 {
  memory        = 80 GB
  hbm_bandwidth = 3.35 TB/s
  flops         = 989 TFLOP/s
}

cluster hgx {
  gpu        = h100
  intra_node = nvl
}
"""

PLAN = """\
model llama {
  layers       = 80
  hidden       = 8192
  kv_heads     = 8
  params       = 70.6e9
  weight_bytes = 141 GB
}

stack notes "the notes' model: peak rates, no overhead" { }

plan tp8 "TP=8 decode" {
  model     = llama
  cluster   = hgx
  stack     = notes
  phase     = decode
  batch     = 32
  tp        = 8
  allreduce = ring
}

policy {
  max_overhead = 30 %
}
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=ccost test", "-c", "user.email=test@example.com",
                           "-c", "commit.gpgsign=false", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / "plan.ccost").write_text(HW + "\n" + PLAN)
    git(tmp_path, "add", "plan.ccost")
    git(tmp_path, "commit", "-q", "-m", "A1 at TP=8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def change_bandwidth_and_tp(path: Path) -> None:
    text = path.read_text()
    assert "bandwidth = 450 GB/s" in text and "tp        = 8" in text
    path.write_text(text.replace("bandwidth = 450 GB/s", "bandwidth = 900 GB/s")
                    .replace("tp        = 8", "tp        = 4"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_diff(repo, capsys):
    change_bandwidth_and_tp(repo / "plan.ccost")
    code, out, err = run(capsys, "plan.ccost")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "ccost diff HEAD:plan.ccost → working tree"
    assert "  link nvl.bandwidth: 450 GB/s → 900 GB/s" in lines
    assert "  plan tp8.tp: 8 → 4" in lines
    assert "  tp8 GPUs: 8 → 4 (−50 %)" in lines
    # 4.80622 ms → 2.05981 ms: (2.05981 − 4.80622) / 4.80622 = −57.1 %
    assert "  tp8 T_comm: 4.806 ms → 2.06 ms (−57.1 %)" in lines
    # 5.26119 ms → 10.52239 ms, twice the weights per GPU
    assert "  tp8 compute time: 5.261 ms → 10.52 ms (+100 %)" in lines
    # overhead 91.35 % → 19.58 %: a share, so the change is in percentage points (−71.8 pp)
    assert "  tp8 overhead: 91.4 % → 19.6 % (−71.8 pp)" in lines
    assert "  tp8 checklist 6 (overhead above the policy: reconsider the strategy): fail → pass" in lines
    # the model did not change: no line names it; unchanged results are not listed either
    assert "llama" not in out
    assert "tp8 regime" not in out and "tp8 bubble" not in out


def test_markdown_diff(repo, capsys):
    change_bandwidth_and_tp(repo / "plan.ccost")
    code, out, _ = run(capsys, "--format", "markdown", "plan.ccost")
    assert code == 0
    assert out.startswith("### ccost diff: `HEAD:plan.ccost` → `working tree`")
    assert "| link `nvl` | `bandwidth` | 450 GB/s | 900 GB/s |" in out
    assert "| plan `tp8` | `tp` | 8 | 4 |" in out
    assert "| `tp8` | T_comm | 4.806 ms | 2.06 ms | −57.1 % |" in out
    assert "| `tp8` | 6 | overhead above the policy: reconsider the strategy | fail | **pass** |" in out


def test_json_diff(repo, capsys):
    change_bandwidth_and_tp(repo / "plan.ccost")
    code, out, _ = run(capsys, "--format", "json", "plan.ccost")
    assert code == 0
    doc = json.loads(out)
    assert doc["old"] == "HEAD:plan.ccost" and doc["new"] == "working tree" and doc["old_absent"] is False
    inputs = {(i["kind"], i["block"], i["field"]): i for i in doc["inputs"]}
    assert set(inputs) == {("link", "nvl", "bandwidth"), ("plan", "tp8", "tp")}
    assert inputs["link", "nvl", "bandwidth"]["old"] == 450e9  # machine units: bytes per second
    assert inputs["link", "nvl", "bandwidth"]["new"] == 900e9
    assert (inputs["plan", "tp8", "tp"]["old"], inputs["plan", "tp8", "tp"]["new"]) == (8, 4)
    results = {(r["plan"], r["metric"]): r for r in doc["results"]}
    comm = results["tp8", "comm_time_s"]
    assert comm["old"] == pytest.approx(OLD_COMM, rel=1e-6)
    assert comm["new"] == pytest.approx(NEW_COMM, rel=1e-6)
    assert comm["delta"] == pytest.approx(NEW_COMM / OLD_COMM - 1, rel=1e-6)
    assert results["tp8", "compute_time_s"]["new"] == pytest.approx(NEW_COMPUTE, rel=1e-6)
    assert results["tp8", "overhead"]["old"] == pytest.approx(OLD_COMM / OLD_COMPUTE, rel=1e-6)
    assert results["tp8", "overhead"]["new"] == pytest.approx(NEW_COMM / NEW_COMPUTE, rel=1e-6)
    assert ("tp8", "regime") not in results  # latency-bound before and after
    status = {(c["plan"], c["id"]): (c["old"], c["new"]) for c in doc["checklist"]}
    assert status["tp8", 6] == ("fail", "pass")
    assert doc["plans_added"] == [] and doc["plans_removed"] == []


def test_no_change(repo, capsys):
    code, out, _ = run(capsys, "plan.ccost")
    assert code == 0
    assert "No change to inputs or results." in out
    assert json.loads(run(capsys, "--format", "json", "plan.ccost")[1])["results"] == []


def test_reformatting_alone_is_no_change(repo, capsys):
    """Layout is not meaning: a spec rewritten on one line diffs as unchanged."""
    p = repo / "plan.ccost"
    p.write_text(p.read_text().replace("\n  ", "; ").replace("{;", "{"))
    code, out, err = run(capsys, "plan.ccost")
    assert code == 0, err
    assert "No change to inputs or results." in out


def test_explicit_revision_and_plans_added_removed(repo, capsys):
    p = repo / "plan.ccost"
    change_bandwidth_and_tp(p)
    git(repo, "commit", "-q", "-am", "TP=4 on faster links")
    p.write_text(p.read_text().replace("plan tp8 ", "plan tp4 ").replace("TP=8 decode", "TP=4 decode"))
    code, out, _ = run(capsys, "--format", "json", "HEAD~1", "plan.ccost")
    assert code == 0
    doc = json.loads(out)
    assert doc["old"] == "HEAD~1:plan.ccost"
    assert doc["plans_added"] == ["tp4"] and doc["plans_removed"] == ["tp8"]
    assert [(i["block"], i["field"]) for i in doc["inputs"]] == [("nvl", "bandwidth")]
    code, text, _ = run(capsys, "HEAD~1", "plan.ccost")
    assert "plans added: tp4" in text and "plans removed: tp8" in text


def test_change_in_an_imported_file(repo, capsys):
    """The spec itself is unchanged; the file it imports changed. The old side must read the import as
    committed (through git), not from the working tree."""
    (repo / "hw.ccost").write_text(HW)
    (repo / "plan.ccost").write_text('import "hw.ccost"\n\n' + PLAN)
    git(repo, "add", "hw.ccost", "plan.ccost")
    git(repo, "commit", "-q", "-m", "hardware in its own file")
    hw = (repo / "hw.ccost")
    hw.write_text(hw.read_text().replace("bandwidth = 450 GB/s", "bandwidth = 900 GB/s"))
    assert git(repo, "status", "--porcelain").strip() == "M hw.ccost"
    code, out, err = run(capsys, "plan.ccost")
    assert code == 0, err
    assert "  link nvl.bandwidth: 450 GB/s → 900 GB/s" in out.splitlines()
    # only the bandwidth term moves: 0.32622 ms → 0.16311 ms
    assert "  tp8 bandwidth term: 326.2 µs → 163.1 µs (−50 %)" in out.splitlines()
    assert "tp8 latency term" not in out


def test_imported_file_added_since_revision(repo, capsys):
    """At HEAD the spec had everything inline; now it imports a file that git never saw."""
    (repo / "hw.ccost").write_text(HW.replace("450 GB/s", "900 GB/s"))
    (repo / "plan.ccost").write_text('import "hw.ccost"\n\n' + PLAN)
    code, out, err = run(capsys, "plan.ccost")
    assert code == 0, err
    assert "  link nvl.bandwidth: 450 GB/s → 900 GB/s" in out.splitlines()


def test_spec_absent_at_revision(repo, capsys):
    new = repo / "new.ccost"
    new.write_text(HW + "\n" + PLAN)
    code, out, err = run(capsys, "new.ccost")
    assert code == 0, err
    assert "The spec did not exist at HEAD:new.ccost: everything in it is added." in out
    assert "plans added: tp8" in out
    # a new plan's headline numbers: step 5.261 + 4.806 = 10.07 ms, overhead 91.35 %, efficiency
    # 42.09 / 10.07 / 8 = 52.3 %; checklist 6 (overhead > 30 %) and 9 (efficiency < 70 %) fail
    assert ("  tp8: GPUs 8, step time 10.07 ms, overhead 91.4 %, efficiency 52.3 %, memory per GPU "
            in out)
    assert out.splitlines()[3].endswith("; checklist fails: 6, 9")
    doc = json.loads(run(capsys, "--format", "json", "new.ccost")[1])
    assert doc["old_absent"] is True and doc["plans_added"] == ["tp8"]
    [summary] = doc["plan_summaries"]
    assert summary["plan"] == "tp8" and summary["side"] == "added" and summary["gpus"] == 8
    assert summary["step_time_s"] == pytest.approx(OLD_COMPUTE + OLD_COMM, rel=1e-6)
    assert summary["checklist_fails"] == [6, 9]
    assert {"kind": "link", "name": "nvl"} in doc["blocks_added"]
    assert doc["results"] == [] and doc["inputs"] == []
    md = run(capsys, "--format", "markdown", "new.ccost")[1]
    assert "did not exist at `HEAD:new.ccost`" in md
    assert "| `tp8` | 8 | 10.07 ms | 91.4 % | 52.3 % |" in md


def test_two_files(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a git repository: two-file mode needs none
    (tmp_path / "old.ccost").write_text(HW + PLAN)
    (tmp_path / "new.ccost").write_text(HW.replace("450 GB/s", "900 GB/s") + PLAN)
    code, out, err = run(capsys, "old.ccost", "new.ccost")
    assert code == 0, err
    assert out.splitlines()[0] == "ccost diff old.ccost → new.ccost"
    assert "  link nvl.bandwidth: 450 GB/s → 900 GB/s" in out.splitlines()


def test_errors_at_revision_exit_2(repo, capsys):
    p = repo / "plan.ccost"
    p.write_text(p.read_text().replace("alpha     = 2 us", "alpha     = 2 GB"))
    git(repo, "commit", "-q", "-am", "broken")
    p.write_text(p.read_text().replace("alpha     = 2 GB", "alpha     = 2 us"))
    code, out, err = run(capsys, "plan.ccost")
    assert code == 2
    assert out == ""
    assert "plan.ccost as of HEAD" in err and "E201" in err and "alpha" in err


def test_errors_in_working_tree_exit_2(repo, capsys):
    p = repo / "plan.ccost"
    p.write_text(p.read_text().replace("tp        = 8", "tp        = 8 GB"))
    code, _, err = run(capsys, "plan.ccost")
    assert code == 2
    assert "working tree" in err and "tp" in err


def test_bad_revision_and_no_repository(repo, tmp_path_factory, capsys):
    code, _, err = run(capsys, "no-such-branch", "plan.ccost")
    assert code == 2 and "E502" in err and "no-such-branch" in err
    code, _, err = run(capsys, "--", "--output=x", "plan.ccost")
    assert code == 2 and "E502" in err
    outside = tmp_path_factory.mktemp("nogit")
    (outside / "a.ccost").write_text(HW + PLAN)
    code, _, err = run(capsys, str(outside / "a.ccost"))
    assert code == 2 and "not inside a git repository" in err


def test_missing_spec_in_working_tree(repo, capsys):
    code, _, err = run(capsys, "nope.ccost")
    assert code == 2 and "no such file" in err


def test_compare_recommendation_change(tmp_path, capsys, monkeypatch):
    """A comparison whose winner flips is reported with the old and new recommendation."""
    monkeypatch.chdir(tmp_path)
    base = HW + PLAN.replace("max_overhead = 30 %", "max_overhead = 100 %\n  min_efficiency = 0 %") + """
plan tp4 extends tp8 { tp = 4 }

compare layout { plans = [tp8, tp4] }
"""
    (tmp_path / "old.ccost").write_text(base)
    # step time = compute + 160 AllReduces · (2(N-1)·α + 2(N-1)/N · m / 450 GB/s):
    #   α = 2 µs:  tp8 5.261 + 4.480 + 0.326 = 10.07 ms;  tp4 10.522 + 1.920 + 0.280 = 12.72 ms → tp8
    #   α = 10 µs: tp8 5.261 + 22.40 + 0.326 = 27.99 ms;  tp4 10.522 + 9.600 + 0.280 = 20.40 ms → tp4
    # (the policy lets both pass: a plan that breaks it would rank after those that meet it)
    (tmp_path / "new.ccost").write_text(base.replace("alpha     = 2 us", "alpha     = 10 us"))
    code, out, err = run(capsys, "--format", "json", "old.ccost", "new.ccost")
    assert code == 0, err
    doc = json.loads(out)
    [c] = doc["compares"]
    assert c["compare"] == "layout"
    assert c["old_ranking"] == ["tp8", "tp4"] and c["new_ranking"] == ["tp4", "tp8"]
    assert c["old_recommendation"] != c["new_recommendation"]
    text = run(capsys, "old.ccost", "new.ccost")[1]
    assert "  layout: ranking tp8, tp4 → tp4, tp8" in text.splitlines()


# ---------------------------------------------------------------------------------------------------
# The docs: the example in docs/git-workflow.md is what ccost prints, and the CI example uses real options.

DOCS = Path(__file__).parent.parent / "docs"
SPECS = Path(__file__).parent.parent / "specs"


def test_git_workflow_doc_example_is_current(tmp_path, capsys, monkeypatch):
    import re
    import shutil

    doc = (DOCS / "git-workflow.md").read_text()
    block = doc.split("$ ccost diff specs/a1-tp-decode.ccost\n", 1)[1].split("```", 1)[0]
    expected = [line for line in block.splitlines() if line.strip() and line.strip() != "..."]
    assert len(expected) >= 10
    git(tmp_path, "init", "-q")
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "a1-tp-decode.ccost"
    shutil.copy(SPECS / "a1-tp-decode.ccost", spec)
    git(tmp_path, "add", "specs")
    git(tmp_path, "commit", "-q", "-m", "A1")
    text, n1 = re.subn(r"(\n\s*bandwidth\s*=\s*)450 GB/s", r"\g<1>900 GB/s", spec.read_text(), count=1)
    text, n2 = re.subn(r"(plan tp8 [^{]*\{[^}]*allreduce\s*=\s*)ring", r"\g<1>tree", text, count=1)
    assert n1 == n2 == 1
    spec.write_text(text)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "specs/a1-tp-decode.ccost")
    assert code == 0, err
    lines = out.splitlines()
    missing = [line for line in expected if line not in lines]
    assert not missing, "docs/git-workflow.md shows lines ccost no longer prints"


def test_ci_example_uses_real_commands_and_options(capsys):
    import re

    import yaml

    workflow = yaml.safe_load((DOCS / "examples" / "ccost-ci.yml").read_text())
    runs = [s["run"] for s in workflow["jobs"]["plans"]["steps"] if "run" in s]
    calls = []
    for script in runs:
        for line in script.splitlines():
            code = line.split(" #", 1)[0]
            calls += re.findall(r"\bccost (check|fmt|diff|eval|report)((?: --[\w-]+)*)", code)
    assert {verb for verb, _ in calls} == {"fmt", "diff", "check"}
    for verb, flags in calls:
        assert main([verb, "--help"]) == 0
        help_text = capsys.readouterr().out
        for flag in flags.split():
            assert flag in help_text, f"ccost {verb} has no {flag}"


def test_policy_change_and_block_added(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.ccost").write_text(HW + PLAN)
    new = (HW + PLAN).replace("max_overhead = 30 %", "max_overhead = 95 %")
    new += 'gpu h200 { memory = 141 GB; hbm_bandwidth = 4.8 TB/s; flops = 989 TFLOP/s }\n'
    (tmp_path / "new.ccost").write_text(new)
    code, out, err = run(capsys, "old.ccost", "new.ccost")
    assert code == 0, err
    lines = out.splitlines()
    assert "  policy.max_overhead: 30 % → 95 %" in lines
    assert "blocks added: gpu h200" in lines
    # overhead 91.35 % was above 30 % and is below 95 %: item 6 flips; the overhead itself is unchanged
    assert any(line.startswith("  tp8 checklist 6 (") and line.endswith("): fail → pass") for line in lines)
    assert "tp8 overhead" not in out


# ---------------------------------------------------------------------------------------------------
# The git reader on its own

def test_git_reader(repo, tmp_path_factory):
    from ccost.diagnostics import CcostError
    from ccost.gitio import GitReader

    (repo / "bin.ccost").write_bytes(b"# caf\xe9\n")
    git(repo, "add", "bin.ccost")
    git(repo, "commit", "-q", "-m", "latin-1")
    (repo / "plan.ccost").write_text("changed on disk\n")
    read = GitReader("HEAD~1", repo / "plan.ccost")
    assert read(str(repo / "plan.ccost")) == HW + "\n" + PLAN  # as committed, not as on disk
    assert read.exists(repo / "plan.ccost") and not read.exists(repo / "bin.ccost")
    with pytest.raises(FileNotFoundError):
        read(str(repo / "bin.ccost"))  # not there at HEAD~1
    with pytest.raises(CcostError) as exc:
        GitReader("HEAD", repo)(str(repo / "bin.ccost"))
    assert exc.value.diagnostics[0].code == "E002" and "UTF-8" in exc.value.diagnostics[0].message
    outside = tmp_path_factory.mktemp("outside") / "o.ccost"
    outside.write_text("# outside the repository\n")
    assert read(str(outside)) == "# outside the repository\n"  # read from disk
    with pytest.raises(FileNotFoundError):
        read(str(outside.with_name("missing.ccost")))
    assert read.relpath(repo / "plan.ccost") == "plan.ccost" and read.relpath(outside) is None


@pytest.mark.parametrize("path", sorted(SPECS.glob("*.ccost")), ids=lambda p: p.name)
def test_formatting_an_example_changes_no_number(path):
    """End to end: fmt, then diff against the original: not one input or result may move."""
    from ccost.check import check_file, check_text
    from ccost.diff import Side, compare
    from ccost.evaluate import evaluate, results_document
    from ccost.fmt import format_text

    def side(result):
        assert result.spec is not None, result.errors
        return Side(str(path), result.spec, results_document(evaluate(result.spec)))

    formatted = format_text(path.read_text(encoding="utf-8"), str(path))
    d = compare(side(check_file(str(path))), side(check_text(formatted, str(path))))
    assert d.empty, d


def test_sweep_change_one_line_per_field(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = HW + PLAN + "sweep s { base = tp8; tp = [1, 2, 4, 8]; batch = [1, 32] }\n"
    (tmp_path / "old.ccost").write_text(base)
    (tmp_path / "new.ccost").write_text(base.replace("tp = [1, 2, 4, 8]", "tp = [1, 2, 4]"))
    code, out, err = run(capsys, "old.ccost", "new.ccost")
    assert code == 0, err
    assert "  sweep s.tp: [1, 2, 4, 8] → [1, 2, 4]" in out.splitlines()
    assert "sweep s.batch" not in out


# ---------------------------------------------------------------------------------------------------
# Readable diffs (issue 10, item 6): a threshold, one line per quantity, labels, rankings, the library

ONE_FIELD_RESULTS = {
    # bandwidth 450 → 900 GB/s on A1's tp8, by hand (module docstring): bandwidth term 0.32622 → 0.16311 ms;
    # T_comm 4.80622 → 4.64311 ms (−3.39 %); step 5.26119 + T_comm = 10.0674 → 9.9043 ms (−1.62 %);
    # overhead 91.35 % → 88.25 % (−3.1 pp); efficiency T_1/step/8 with T_1 = 141 GB / 3.35 TB/s = 42.0896 ms:
    # 52.26 % → 53.12 % (+0.861 pp)
    "  tp8 bandwidth term: 326.2 µs → 163.1 µs (−50 %)",
    "  tp8 T_comm: 4.806 ms → 4.643 ms (−3.39 %)",
    "  tp8 step time: 10.07 ms → 9.904 ms (−1.62 %)",
    "  tp8 overhead: 91.4 % → 88.3 % (−3.1 pp)",
    "  tp8 efficiency: 52.3 % → 53.1 % (+0.861 pp)",
}


def _results_section(out: str) -> list[str]:
    block = out.split("results changed:\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("  ") and not line.startswith("  (")]


def test_one_field_change_lists_each_quantity_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.ccost").write_text(HW + PLAN)
    (tmp_path / "new.ccost").write_text((HW + PLAN).replace("bandwidth = 450 GB/s", "bandwidth = 900 GB/s"))
    code, out, err = run(capsys, "old.ccost", "new.ccost")
    assert code == 0, err
    # latency (= step time here), speedup, η, throughput and exposed communication follow from these
    assert set(_results_section(out)) == ONE_FIELD_RESULTS
    assert len(_results_section(out)) == len(ONE_FIELD_RESULTS)
    assert not any(key in out for key in ("_s:", "step_time_s", "comm_time_s", "speedup", "η", "throughput"))
    doc = json.loads(run(capsys, "--format", "json", "old.ccost", "new.ccost")[1])
    implied = {r["metric"]: r["implied_by"] for r in doc["results"] if r["implied_by"]}
    assert implied == {"latency_s": "step_time_s", "speedup": "efficiency", "eta": "exposed_comm_s",
                       "throughput_tokens_s": "step_time_s", "throughput_per_gpu": "throughput_tokens_s",
                       "exposed_comm_s": "comm_time_s"}
    md = run(capsys, "--format", "markdown", "old.ccost", "new.ccost")[1]
    assert "| `tp8` | step time | 10.07 ms | 9.904 ms | −1.62 % |" in md and "`step_time_s`" not in md


def test_changes_below_the_threshold_are_left_out(tmp_path, capsys, monkeypatch):
    """α 2 µs → 2.0001 µs moves the latency term by 0.005 %: an input change, no result worth a line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.ccost").write_text(HW + PLAN)
    (tmp_path / "new.ccost").write_text((HW + PLAN).replace("alpha     = 2 us", "alpha     = 2.0001 us"))
    code, out, _ = run(capsys, "old.ccost", "new.ccost")
    assert code == 0
    assert "  link nvl.alpha: 2 µs → 2 µs" in out.splitlines()  # four significant digits either way
    assert "results changed:" not in out
    assert "smaller changes (under 0.1 %) not listed; --all lists every change" in out
    everything = run(capsys, "--all", "old.ccost", "new.ccost")[1]
    assert "results changed:" in everything and "tp8 latency term" in everything
    # --threshold 0.001 (percent): the latency term's 0.005 % now counts, the rest (under it) not
    some = run(capsys, "--threshold", "0.001", "old.ccost", "new.ccost")[1]
    assert "tp8 latency term" in some
    assert main(["diff", "--threshold", "250", "old.ccost", "new.ccost"]) == 2  # not a percentage
    capsys.readouterr()


def test_an_unchanged_ranking_is_not_a_change(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = HW + PLAN + "plan tp4 extends tp8 { tp = 4 }\n\ncompare layout { plans = [tp8, tp4] }\n"
    (tmp_path / "old.ccost").write_text(base)
    # 450 → 500 GB/s: every step time moves, tp8 stays ahead (10.07 → 10.04 ms against 12.72 → 12.69 ms)
    (tmp_path / "new.ccost").write_text(base.replace("bandwidth = 450 GB/s", "bandwidth = 500 GB/s"))
    code, out, err = run(capsys, "old.ccost", "new.ccost")
    assert code == 0, err
    assert "tp8 step time" in out and "comparisons changed" not in out
    assert json.loads(run(capsys, "--format", "json", "old.ccost", "new.ccost")[1])["compares"] == []


def test_a_new_spec_does_not_add_the_library(tmp_path, capsys, monkeypatch):
    """A spec that imports the bundled library adds its own blocks, not the library's forty."""
    monkeypatch.chdir(tmp_path)
    git(tmp_path, "init", "-q")
    (tmp_path / "x.ccost").write_text("# nothing yet\n")
    git(tmp_path, "add", "x.ccost")
    git(tmp_path, "commit", "-q", "-m", "start")
    (tmp_path / "serving.ccost").write_text(
        'import "std/gpus.ccost"\nimport "std/links.ccost"\nimport "std/clusters.ccost"\n'
        'import "std/models.ccost"\n\n'
        "plan tp8 { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; tp = 8 }\n"
        "cluster mine extends hgx_h100 { nodes = 2; inter_node = ib_ndr }\n")
    code, out, err = run(capsys, "serving.ccost")
    assert code == 0, err
    lines = out.splitlines()
    assert "plans added: tp8" in lines and "blocks added: cluster mine" in lines
    assert ("library imported: std/clusters.ccost, std/gpus.ccost, std/kernels.ccost, std/links.ccost, std/models.ccost"
            in lines)
    assert "h100" not in out.replace("hgx_h100", "")  # no std gpu listed
    doc = json.loads(run(capsys, "--format", "json", "serving.ccost")[1])
    assert doc["blocks_added"] == [{"kind": "cluster", "name": "mine"}, {"kind": "plan", "name": "tp8"}]
    assert doc["library_imported"] == ["std/clusters.ccost", "std/gpus.ccost", "std/kernels.ccost",
                                       "std/links.ccost", "std/models.ccost"]


def test_two_file_diff_never_suggests_the_importing_file_for_a_missing_import(tmp_path, capsys):
    """Issue 26 item 10: old.ccost importing a missing "models.ccost" was told `did you mean import
    "old.ccost"` (itself: a cycle, and not a models file). The bundled library's file of that name is
    what it meant."""
    plan = ('import "std/gpus.ccost"\nimport "std/links.ccost"\nimport "std/clusters.ccost"\nimport "{imp}"\n'
            "plan b {{ model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; tp = 8 }}\n")
    (tmp_path / "old.ccost").write_text(plan.format(imp="models.ccost"))
    (tmp_path / "new.ccost").write_text(plan.format(imp="std/models.ccost"))
    assert main(["diff", str(tmp_path / "old.ccost"), str(tmp_path / "new.ccost")]) == 2
    err = capsys.readouterr().err
    assert 'did you mean the bundled library\'s `import "std/models.ccost"`?' in err, err
    assert 'import "old.ccost"' not in err and 'import "new.ccost"' not in err


def test_a_missing_import_is_not_offered_a_file_that_imports_it(tmp_path, capsys):
    (tmp_path / "hwa.ccost").write_text('import "hwb.ccost"\n')  # hwb is missing; hwa is the importer
    (tmp_path / "hwc.ccost").write_text("link l { alpha = 2 us; bandwidth = 450 GB/s }\n")
    assert main(["check", str(tmp_path / "hwa.ccost")]) == 2
    err = capsys.readouterr().err
    assert 'did you mean `import "hwc.ccost"`?' in err and 'import "hwa.ccost"' not in err, err
