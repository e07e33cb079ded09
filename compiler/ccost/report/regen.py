"""Regenerate the committed reviews of the example specs: ``python -m ccost.report.regen [--check]``.

``reports/`` holds the review (HTML, PDF) and the results YAML of every ``specs/*.ccost`` (not the std
library). They are built so that they depend only on the spec and on ccost, never on the checkout:

- the date comes from a fixed ``SOURCE_DATE_EPOCH`` (``REGEN_EPOCH``), so rebuilds are byte-identical;
- the git revision is not recorded (it would change with every commit and make the copies stale at once);
  the cover says so. A review built by ``ccost report`` for a reader does record it;
- paths are relative to the repository root (the command runs there).

Each file is the same as ``SOURCE_DATE_EPOCH=1767225600 ccost report --no-git specs/NAME.ccost`` run from
the repository root. ``tests/test_report.py`` regenerates the HTML and YAML and fails when the committed
copies differ; run this module to bring them up to date. ``--check`` writes nothing and exits 1 when a
committed copy is stale.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from ccost.resources import _REPO

REGEN_EPOCH = "1767225600"  # 2026-01-01T00:00:00Z
GIT_NOTE = "not recorded (--no-git)"


def example_specs(repo: Path = _REPO) -> list[Path]:
    """The example specs, as paths relative to ``repo``, in name order."""
    return sorted(p.relative_to(repo) for p in (repo / "specs").glob("*.ccost"))


def regenerate(out_dir: Path, repo: Path = _REPO, formats: tuple[str, ...] = ("html", "pdf", "yaml"),
               specs: list[Path] | None = None) -> list[Path]:
    """Write the reviews of the example specs into ``out_dir``; returns the paths written."""
    from ccost.report import review, write_review

    written: list[Path] = []
    old = Path.cwd()
    os.chdir(repo)  # the spec paths in the documents and on the covers are relative to the repo root
    try:
        for spec in specs or example_specs(repo):
            paths = {k: Path(out_dir) / f"{spec.stem}.{k}" for k in formats}
            rev = review(spec, include_git=False, environ={"SOURCE_DATE_EPOCH": REGEN_EPOCH}, cwd=repo,
                         git_note=GIT_NOTE)
            written += write_review(rev, paths)
    finally:
        os.chdir(old)
    return written


def stale(repo: Path = _REPO, formats: tuple[str, ...] = ("html", "yaml")) -> list[str]:
    """Committed review files that differ from a fresh build (or are missing)."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = regenerate(Path(tmp), repo, formats)
        return [f"reports/{p.name}" for p in fresh
                if not (repo / "reports" / p.name).is_file()
                or (repo / "reports" / p.name).read_bytes() != p.read_bytes()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccost.report.regen", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if reports/ is stale")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for name in bad:
            print(f"stale: {name}")
        return 1 if bad else 0
    for p in regenerate(_REPO / "reports"):
        print(p.relative_to(_REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
