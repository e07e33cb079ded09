"""The language server reads exactly the imports ``ccost check`` reads (issue 31, item 1).

Completion, hover and go to definition used to follow ``import "/abs/path"``, ``../`` and ``std/../..``
that ``check`` refuses: completion offered a link defined outside the project with its title and path,
and definition on ``import "/etc/shadow"`` answered ``file:///etc/shadow`` (and nothing for a missing
file: an oracle for which paths exist). Here a secret file with a unique marker lies outside the project;
for every form of import that ``check`` refuses (tests/test_hostile_files.py's list, absolute paths with
and without an existing target) the server must neither offer nor show nor locate anything of it, and
must answer definition on the refused path exactly as on a path that does not exist. For the imports
``check`` accepts (inside a git work tree, the bundled library) it still follows them. The in-process
tests call ``ccost.lsp.features``; the slow one asks a real server over pipes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ccost.check import check_text
from ccost.lsp import features as F

pytest.importorskip("pygls", reason="pygls is in the test extra; `pip install -e '.[test]'` installs it")
from lsp_client import Session  # noqa: E402 - after the skip when pygls is missing

MARKER = "SECRETMARKER7731"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/outside/secret.ccost (a link titled with the marker, + a folder link to it) and tmp/proj, a git
    work tree with the spec in proj/specs/ and a shared file in proj/lib/."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.ccost").write_text(
        f'link secretlink "{MARKER}" {{ alpha = 1 us; bandwidth = 1 GB/s }}\n')
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "specs" / "sub").mkdir(parents=True)
    (proj / "lib").mkdir()
    (proj / "lib" / "shared.ccost").write_text(
        'link sharedlink "Shared link" { alpha = 2 us; bandwidth = 2 GB/s }\n')
    (proj / "specs" / "sub" / "link.ccost").symlink_to(outside / "secret.ccost")
    (proj / "specs" / "linkdir").symlink_to(outside)
    return proj


def refused_forms(layout: Path) -> list[str]:
    outside = layout.parent / "outside"
    return [
        str(outside / "secret.ccost"),                      # absolute, exists
        str(outside / "missing.ccost"),                     # absolute, does not exist
        "../../outside/secret.ccost",
        "sub/../../../outside/secret.ccost",
        "../../../../../../../../../../../../etc/passwd",
        "/etc/passwd",
        "/etc/shadow",
        "/proc/self/environ",
        "std/../../outside/secret.ccost",
        "std/../../../../../../../../" + str(outside / "secret.ccost").lstrip("/"),
        "sub/link.ccost",                                   # a symlink to the secret
        "linkdir/secret.ccost",                             # through a symlinked folder
    ]


def _spec(layout: Path, target: str) -> tuple[str, str]:
    """A spec in proj/specs that imports ``target`` and has a link being typed (completion of a link name
    after `intra_node = `), and its path."""
    path = str(layout / "specs" / "main.ccost")
    return f'import "{target}"\ncluster c {{\n  intra_node = ', path


def _end(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def test_check_refuses_every_form_used_here(layout: Path):
    """The premise: each form is E113 (E106 for the missing file) in `ccost check`, the same spec text."""
    for target in refused_forms(layout):
        text, path = _spec(layout, target)
        codes = {d.code for d in check_text(text + "x }\n", path).errors}
        assert codes & {"E113", "E106"}, (target, codes)


def test_nothing_of_a_refused_import_is_offered_shown_or_located(layout: Path):
    for target in refused_forms(layout):
        text, path = _spec(layout, target)
        items = F.complete(text, path, *_end(text))
        assert all("secretlink" != i.label and MARKER not in f"{i.detail}{i.doc}" for i in items), target
        typed = text + "secretlink }\n"  # hover and definition on the name, as if it were written
        assert F.hover(typed, path, 2, len("  intra_node = ") + 2) is None, target
        assert F.definition(typed, path, 2, len("  intra_node = ") + 2) is None, target
        assert F.definition(text, path, 0, len('import "') + 1) is None, target
        assert "secretlink" not in F.names(text, path), target


def test_definition_on_a_refused_path_answers_as_on_a_missing_one(layout: Path):
    """No oracle: an existing and a missing file outside the project get the same answer (nothing)."""
    outside = layout.parent / "outside"
    answers = set()
    for target in (str(outside / "secret.ccost"), str(outside / "missing.ccost"), "/etc/shadow",
                   "/etc/no-such-file", "../../outside/secret.ccost", "../../outside/missing.ccost"):
        text, path = _spec(layout, target)
        answers.add(F.definition(text, path, 0, len('import "') + 1))
    assert answers == {None}


def test_imports_check_accepts_are_still_followed(layout: Path):
    """Inside the git work tree `..` may climb (to proj/lib); the bundled library resolves; both are what
    `ccost check` reads."""
    text, path = _spec(layout, "../lib/shared.ccost")
    assert not {d.code for d in check_text(text + "sharedlink }\n", path).errors} & {"E113", "E106"}
    items = {i.label: i for i in F.complete(text, path, *_end(text))}
    assert "sharedlink" in items and "Shared link" in items["sharedlink"].detail
    assert items["sharedlink"].doc == f"defined in {layout / 'lib' / 'shared.ccost'}"
    found = F.definition(text, path, 0, len('import "') + 1)
    assert found is not None and Path(found[0]) == layout / "lib" / "shared.ccost"
    std = 'import "std/links.ccost"\ncluster c {\n  intra_node = '
    assert "nvlink4" in {i.label for i in F.complete(std, path, *_end(std))}
    found = F.definition(std, path, 0, len('import "') + 1)
    assert found is not None and found[0].endswith("links.ccost")


def test_the_server_follows_what_check_follows_for_every_import_form(layout: Path):
    """The rule is the checker's, not a copy: for each form, the server names a block of the imported file
    exactly when `ccost check` reads the import without E113/E106."""
    forms = refused_forms(layout) + ["../lib/shared.ccost", "./../lib/shared.ccost", "std/links.ccost",
                                     "../specs/../lib/shared.ccost"]
    for target in forms:
        text, path = _spec(layout, target)
        followed = bool(F.imported(text, path))
        refused = {d.code for d in check_text(text + "x }\n", path).errors} & {"E113", "E106"}
        assert followed == (not refused), (target, followed, refused)


# slow (a server subprocess over pipes, ~2 s): CI runs it; the in-process tests above stay in the inner loop
@pytest.mark.slow
def test_over_pipes_no_answer_reveals_a_file_outside_the_project(layout: Path):
    outside = layout.parent / "outside"

    async def run():
        s = await Session(cwd=str(layout)).start()
        answers = {}
        try:
            for i, target in enumerate([str(outside / "secret.ccost"), str(outside / "missing.ccost"),
                                        "/etc/shadow", "std/../../outside/secret.ccost",
                                        "../lib/shared.ccost"]):
                text, path = _spec(layout, target)
                uri = Path(path).with_name(f"m{i}.ccost").as_uri()
                s.open(uri, text)
                completion = await s.complete(uri, *_end(text))
                definition = await s.definition(uri, 0, len('import "') + 1)
                answers[target] = (completion, definition)
            return answers, s.internal_errors()
        finally:
            await s.stop()

    answers, errors = asyncio.run(run())
    assert errors == []
    for target, (completion, definition) in answers.items():
        labels = {i.label for i in completion.items}
        shown = " ".join(f"{i.label} {i.detail} {i.documentation}" for i in completion.items)
        if target == "../lib/shared.ccost":
            assert "sharedlink" in labels and definition.uri == (layout / "lib" / "shared.ccost").as_uri()
        else:
            assert "secretlink" not in labels and MARKER not in shown and "outside" not in shown, target
            assert definition is None, target
