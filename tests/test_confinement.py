"""One confinement rule for every path a command resolves from what a file says (issue 31, items 2 and 3).

``ccost.userfiles.confine`` is the rule: a path stays inside its area (the project: the git work tree that
holds the spec, else the spec's folder; or the bundled ``std/``) both as written and with symbolic links
resolved. Imports (E113, ``ccost.check.load.resolve_import``, which the language server calls too), a
model's ``config = "..."`` in the working tree and in an old git revision (``ccost diff REV``), the spec
column of a ``calibrate --steps`` file and the logs and steps files a measured link or stack names for the
review all go through it. A refused path is refused before anything is read, and nothing of the file is
shown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccost.check.load import ImportRefused, importer_file, resolve_import
from ccost.cli import main
from ccost.userfiles import Outside, confine

REPO = Path(__file__).resolve().parent.parent
DEEPSEEK = REPO / "tests" / "data" / "hf" / "DeepSeek-V3" / "config.json"


def test_confine_keeps_paths_inside_the_area_as_written_and_through_links(tmp_path):
    area = tmp_path / "project"
    (area / "specs").mkdir(parents=True)
    (area / "specs" / "a.ccost").write_text("")
    (tmp_path / "secret").write_text("root:x:0:0")
    assert confine(area / "specs" / ".." / "specs" / "a.ccost", area) == str((area / "specs" / "a.ccost").resolve())
    for path in (area / ".." / "secret", tmp_path / "secret", "/etc/passwd"):
        with pytest.raises(Outside) as info:
            confine(path, area, written="x")
        assert not info.value.through_link and "leads outside" in str(info.value)
    (area / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(Outside) as info:
        confine(area / "link", area, written="link")
    assert info.value.through_link and "symbolic link" in str(info.value)


@pytest.mark.parametrize("written,code", [
    ("/etc/shadow", "E113"), ("../outside.ccost", "E113"), ("std/../../outside.ccost", "E113"),
    ("std/../../../../etc/passwd", "E113"), ("a\x1b.ccost", "E113"), ("", "E106"),
])
def test_resolve_import_refuses_what_check_refuses(tmp_path, written, code):
    """The rule the language server asks for completion, hover and definition (issue 31 item 1's surface)."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".git").mkdir()
    spec = tmp_path / "p" / "s.ccost"
    spec.write_text("")
    with pytest.raises(ImportRefused) as info:
        resolve_import(written, importer_file(str(spec)))
    assert info.value.code == code


def test_resolve_import_follows_what_check_follows(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "specs" / "lib").mkdir(parents=True)
    spec = tmp_path / "specs" / "s.ccost"
    spec.write_text("")
    target = resolve_import("lib/hw.ccost", importer_file(str(spec)))
    assert target.key == str((tmp_path / "specs" / "lib" / "hw.ccost").resolve())
    std = resolve_import("std/gpus.ccost", importer_file(str(spec)))
    assert os.path.isfile(std.real) and std.display == "std/gpus.ccost"
    # a file of the bundled library imports inside std/ only
    inner = resolve_import("links.ccost", importer_file(std.real))
    assert os.path.isfile(inner.real)
    with pytest.raises(ImportRefused):
        resolve_import("../../README.md", importer_file(std.real))


# --------------------------------------------------------------------------------------------------
# 31.2: `ccost diff REV spec` and an old revision's `config = "/outside/config.json"`

PLAN = """import "std/gpus.ccost"
import "std/links.ccost"
cluster c { gpu = h100; nodes = 8; gpus_per_node = 8; intra_node = nvlink4; inter_node = ib_ndr }
plan p { model = ds; cluster = c; phase = decode; batch = 8; seq = 4096; tp = 8; ep = 8 }
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=ccost test", "-c", "user.email=test@example.com", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.mark.parametrize("how", ["absolute", "climbing", "symlink"])
def test_diff_of_an_old_revision_does_not_follow_a_config_outside_the_project(tmp_path, capsys, how):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(DEEPSEEK, outside / "config.json")
    repo = tmp_path / "plans"
    repo.mkdir()
    _git(repo, "init", "-q")
    written = {"absolute": str(outside / "config.json"), "climbing": "../outside/config.json",
               "symlink": "hf/config.json"}[how]
    if how == "symlink":  # committed as a link: at the revision it points outside
        (repo / "hf").symlink_to(outside)
    (repo / "s.ccost").write_text(f'model ds {{ config = "{written}" }}\n' + PLAN)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "plans")
    if how == "symlink":
        (repo / "hf").unlink()
    (repo / "hf").mkdir()
    shutil.copy(DEEPSEEK, repo / "hf" / "config.json")
    (repo / "s.ccost").write_text('model ds { config = "hf/config.json" }\n' + PLAN)
    assert main(["diff", "HEAD", str(repo / "s.ccost")]) == 2
    captured = capsys.readouterr()
    # a link committed in git is a blob holding its target: `git show REV:hf/config.json` does not follow
    # it, so that revision has no such file; the paths as written are refused by the rule
    why = "no such file" if how == "symlink" else "outside the project"
    assert "E510" in captured.err and why in captured.err, captured.err
    assert captured.out == ""  # no number of the old side, none read from the outside file


# --------------------------------------------------------------------------------------------------
# 31.3: the spec column of a `calibrate --steps` file

@pytest.mark.parametrize("spec", ["/etc/passwd", "/proc/self/environ", "../outside.ccost", "link.ccost"])
def test_the_spec_column_of_a_steps_file_stays_inside_the_project(tmp_path, capsys, spec):
    (tmp_path / "outside.ccost").write_text("SECRET_TOKEN = 1\n")
    project = tmp_path / "p"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "link.ccost").symlink_to("/etc/passwd")
    steps = project / "steps.csv"
    steps.write_text(f"plan,spec,tpot_ms\np,{spec},30\n")
    assert main(["calibrate", "--steps", str(steps)]) == 2
    err = capsys.readouterr().err
    assert "E501" in err and "outside the project" in err and f"{steps}:2:" in err, err
    assert "`root`" not in err and "root:x" not in err and "SECRET_TOKEN" not in err and "found `" not in err


def test_the_review_reads_no_log_or_steps_file_outside_the_project(tmp_path):
    """A measured link's log and a measured stack's steps file, named by an untrusted spec, are looked up
    under the same rule: a steps file outside the project is not read (the review gets no refit)."""
    from ccost.calibrate import fit_for_stack
    from ccost.spec import Stack

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".git").mkdir()
    (tmp_path / "steps.csv").write_text("plan,spec,tpot_ms\np,/etc/passwd,30\n")
    stack = Stack("s", None, None, source="measured: ccost calibrate --steps ../steps.csv, 1 rows, fit median 1 %")
    assert fit_for_stack(stack, tmp_path / "p") is None
