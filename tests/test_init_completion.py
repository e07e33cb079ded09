"""`ccost init` writes a starter spec that checks clean and evaluates, never over an existing file; shell
completion (argcomplete) completes verbs, options, bundled names and .ccost files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ccost.check import check_file
from ccost.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("model,cluster,phase", [
    ("llama3_70b", "hgx_h100", "decode"),  # the defaults
    ("llama31_405b", "hgx_h100_2node", "prefill"),  # needs pipeline stages across the two nodes
    ("mixtral_8x7b", "dgx_b200", "train"),
    ("llama3_8b", "hgx_h100", "serve"),  # requests (concurrency, input/output tokens), not batch and seq
])
def test_init_writes_a_spec_that_checks_clean_and_evaluates(tmp_path, capsys, model, cluster, phase):
    path = tmp_path / "plan.ccost"
    assert main(["init", str(path), "--model", model, "--cluster", cluster, "--phase", phase]) == 0
    out = capsys.readouterr().out
    assert f"ccost report {path}" in out and f"ccost eval {path}" in out  # the command to run next
    result = check_file(str(path))
    assert result.ok and result.errors == [], [d.message for d in result.diagnostics]
    plan = next(iter(result.spec.plans.values()))
    assert plan.model.name == model and plan.cluster.name == cluster and plan.phase == phase
    assert plan.gpus <= plan.cluster.gpus
    assert main(["eval", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plans"][plan.name]["step_time_s"] > 0
    if phase == "serve":
        assert doc["plans"][plan.name]["serve"]["tpot_s"] > 0 and "batch" not in path.read_text()
    assert main(["fmt", "--check", str(path)]) == 0  # written in canonical form


def test_init_picks_tp_inside_a_node_and_pp_until_the_weights_fit(tmp_path, capsys):
    path = tmp_path / "big.ccost"
    assert main(["init", str(path), "--model", "llama31_405b", "--cluster", "hgx_h100_2node"]) == 0
    plan = next(iter(check_file(str(path)).spec.plans.values()))
    # 405.85e9 parameters × 2 B = 811.7 GB; 8 H100 hold 8 × 72 GB = 576 GB at 90 %, 16 hold 1,152 GB
    assert (plan.tp, plan.pp) == (8, 2)


def test_init_never_overwrites(tmp_path, capsys):
    path = tmp_path / "mine.ccost"
    path.write_text("# my own work\n")
    assert main(["init", str(path)]) == 2
    assert "E511" in capsys.readouterr().err
    assert path.read_text() == "# my own work\n"


def test_init_unknown_names_say_what_exists(capsys):
    assert main(["init", "x.ccost", "--model", "llama3_7b"]) == 2
    err = capsys.readouterr().err
    assert "did you mean `llama3_70b`" in err and "mixtral_8x7b" in err
    assert not os.path.exists("x.ccost")
    assert main(["init", "--list"]) == 0
    out = capsys.readouterr().out
    assert "hgx_h100" in out and "deepseek_v3" in out


def _complete(line: str, cwd: Path = REPO) -> list[str]:
    out = cwd / ".complete-out" if cwd != REPO else Path(os.environ.get("TMPDIR", "/tmp")) / f"ccost-complete-{os.getpid()}"
    env = dict(os.environ, _ARGCOMPLETE="1", COMP_LINE=line, COMP_POINT=str(len(line)),
               _ARGCOMPLETE_STDOUT_FILENAME=str(out))
    subprocess.run([sys.executable, "-m", "ccost"], cwd=cwd, env=env, check=True, capture_output=True)
    try:
        return out.read_text().split("\013")
    finally:
        out.unlink()


@pytest.mark.parametrize("line,expected", [
    ("ccost ch", {"check"}),
    ("ccost init --model llama3_", {"llama3_8b", "llama3_70b"}),
    ("ccost init --cl", {"--cluster"}),
    ("ccost import ", {"hf"}),
])
def test_shell_completion(line, expected):
    assert expected <= {c.strip() for c in _complete(line)}


def test_shell_completion_offers_spec_files(tmp_path):
    (tmp_path / "a1.ccost").write_text("")
    (tmp_path / "a1.txt").write_text("")
    got = {c.strip() for c in _complete("ccost check a1", tmp_path)}
    assert "a1.ccost" in got and "a1.txt" not in got
