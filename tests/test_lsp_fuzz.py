"""A small run of bench/fuzz_lsp.py (issue 31): random editing sessions, no internal error.

The in-process test drives ``ccost.lsp.features`` with the fuzz's own edits (typing, deletions, bad
imports, mutants, huge pastes) and asks every feature at the fuzz's positions: nothing may raise, and no
answer may show the secret placed outside the project. The slow test runs the bench itself on a few
sessions through a real client over stdio (the full run, 2,000 sessions, is the bench's: its figures are
in the notes of the change that added it).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

pytest.importorskip("pygls", reason="pygls is in the test extra; `pip install -e '.[test]'` installs it")
import fuzz_lsp  # noqa: E402 - after the skip when pygls is missing


def test_the_fuzz_edits_through_the_features_in_process(tmp_path: Path, monkeypatch):
    """10 sessions of the fuzz's edits, every feature asked after each edit, directly (no server)."""
    from ccost.lsp import features as F

    project, outside = fuzz_lsp.make_project(tmp_path)
    pastes = fuzz_lsp.bad_imports(project, outside)
    monkeypatch.setattr(fuzz_lsp, "huge", lambda rng: "7" * 20_000 + "{" * 5_000)  # keep the loop fast
    monkeypatch.chdir(project)
    rng = random.Random(20261206)
    asked = 0
    for i in range(10):
        path = str(project / f"s{i}.ccost")
        doc = fuzz_lsp.Doc(rng.choice(fuzz_lsp.documents())[1])
        for _ in range(rng.randint(3, 8)):
            _, cursor = fuzz_lsp.edit(rng, doc, pastes)
            at = cursor or fuzz_lsp.position(rng, doc)
            answers = [F.hover(doc.text, path, *at), F.complete(doc.text, path, *at),
                       F.definition(doc.text, path, *at)]
            for found in answers[2:]:
                if found is not None:
                    assert fuzz_lsp.allowed_uri(Path(found[0]).as_uri(), project), found
            assert fuzz_lsp.MARKER not in repr(answers)
            asked += 1
        assert fuzz_lsp.MARKER not in repr(F.diagnostics(doc.text, path))
        F.formatted(doc.text, path)
    assert asked >= 30


# slow (starts language servers, ~20 s): CI runs it; the test above is its in-process sibling
@pytest.mark.slow
def test_a_few_fuzz_sessions_over_stdio(tmp_path: Path, capsys):
    status = fuzz_lsp.main(["--sessions", "8", "--per-server", "4", "--jobs", "1", "--seed", "7",
                            "--out", str(tmp_path / "failures")])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "seed 7" in out and "internal errors: 0" in out and "8 sessions" in out
