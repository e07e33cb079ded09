"""The project cites only what a user can get: no absolute path of the machine ccost was written
on, no internal file name of the reference notes, and every source tag of the bundled library resolved by
the sources page that ships with it. Everything is read from the repository itself.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Built from pieces so that this file does not match its own patterns.
_HOME = "|".join(["work", "home", "Users", "root", "mnt", "srv"])
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:" + _HOME + r")/[\w.-]")
_S = "se" + "ed"
NOTE_FILE = re.compile(_S + r"s?/0\d\d|(?<![A-Za-z])" + _S + r"[ _-]?0\d\d|\b0\d\d_[0-9a-f]{8,}|" + _S + "-examples")

SKIP_DIRS = {".git", ".venv", "review", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "dist"}


def repository_files() -> list[Path]:
    """The files of the repository: what git tracks, or (in a copy without git) every file but caches."""
    try:
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True)
        names = [n for n in out.stdout.decode().split("\0") if n]
        if names:
            return [REPO / n for n in names if (REPO / n).is_file()]
    except (OSError, subprocess.CalledProcessError):
        pass
    return [p for p in REPO.rglob("*")
            if p.is_file() and not (set(p.relative_to(REPO).parts[:-1]) & SKIP_DIRS) and p.name != ".git"]


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None  # binary (a PDF's compressed streams, a gzip log)
    return data.decode("utf-8", "replace")


def offending_lines(pattern: re.Pattern) -> list[str]:
    hits = []
    for path in repository_files():
        text = text_of(path)
        if text is None:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(REPO)}:{i}: {line.strip()[:120]}")
    return hits


def test_the_scan_sees_the_repository():
    files = {p.relative_to(REPO).as_posix() for p in repository_files()}
    assert {"README.md", "docs/interface.md", "specs/std/links.ccost", "tests/test_docs.py"} <= files


def test_patterns_catch_what_they_are_for():
    """The two patterns must be able to fail: each catches the spellings this issue removed."""
    for bad in ["see /" + "work/shared/data/catalog.md", "/" + "home/someone/ccost/specs"]:
        assert ABSOLUTE.search(bad), bad
    for bad in [_S + "s/001, section 4", _S + " 000's convention", "00" + "1_f75174a8e06f3a64.txt",
                "conformance/" + _S + "-examples.md", "test_" + _S + "000_crossover"]:
        assert NOTE_FILE.search(bad), bad
    for fine in ["1_000_000 KiB", "70.6e9", "/tmp/old.ccost", "random " + _S + "=3", "docs/sources.md"]:
        assert not ABSOLUTE.search(fine) and not NOTE_FILE.search(fine), fine


def test_no_absolute_machine_paths():
    assert offending_lines(ABSOLUTE) == []


def test_reference_notes_cited_by_title_not_by_file_name():
    assert offending_lines(NOTE_FILE) == []


# ---------------------------------------------------------------------------------------------------
# Source tags

TAG = re.compile(r"^[A-Z][A-Za-z0-9-]*[A-Za-z0-9]$")


def tags_used(text: str) -> set[str]:
    """Tags in brackets: ``[KH100]``, ``[LZ(2nd), SAUL(2nd)]``, ``[KB200: "2x 900 GB/s"]`` (a quote after a
    colon). Brackets holding something else (``[1, 2, 4]``) are not tags."""
    out = set()
    for m in re.finditer(r"\[([^\]\n]*)\]", text):
        for part in m.group(1).split(":", 1)[0].split(","):
            name = re.sub(r"\(2nd\)$", "", part.strip()).strip()
            if TAG.match(name):
                out.add(name)
    return out


def tags_listed() -> set[str]:
    page = (REPO / "docs" / "sources.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| \[([^\]]+)\] \|", page, flags=re.M))


def test_tag_parser():
    assert tags_used('x [KH100], [LZ(2nd), SAUL(2nd)] [KB200: "2x 900 GB/s"] tp = [1, 2, 4]') == {
        "KH100", "LZ", "SAUL", "KB200"}


def test_every_std_source_tag_is_on_the_sources_page():
    std = sorted((REPO / "specs" / "std").glob("*.ccost"))
    assert len(std) >= 4
    used: dict[str, str] = {}
    for f in std:
        for tag in tags_used(f.read_text(encoding="utf-8")):
            used.setdefault(tag, f.name)
    assert len(used) > 30  # the library cites dozens of sources; an empty scan would pass vacuously
    listed = tags_listed()
    missing = {t: f for t, f in used.items() if t not in listed}
    assert missing == {}, f"tags without an entry in docs/sources.md: {missing}"


def test_sources_page_entries_say_where_to_get_them():
    page = (REPO / "docs" / "sources.md").read_text(encoding="utf-8")
    rows = [r for r in page.splitlines() if r.startswith("| [")]
    assert len(rows) == len(tags_listed())
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4 and all(cells), row  # tag, source, where, kind
        assert cells[3].split(" ")[0] in ("primary", "secondary"), row
    # both reference notes by title
    assert '"Communication Cost Analysis"' in page
    assert '"Communication Cost Math — Distributed Inference"' in page


@pytest.mark.parametrize("name", ["gpus", "links", "models", "clusters"])
def test_std_files_point_at_the_sources_page(name):
    head = (REPO / "specs" / "std" / f"{name}.ccost").read_text(encoding="utf-8")[:3000]
    assert "docs/sources.md" in head
