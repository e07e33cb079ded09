"""The provenance stamp on a review's cover: which spec, which bytes, which revision, which tool, when.

INTERFACE.md: spec path, SHA-256 of the spec and its imports, git revision and whether the tree was dirty,
ccost version, and the date from ``SOURCE_DATE_EPOCH`` when set, so that a rebuild is byte-identical.
This module and the CLI are the only places of the report that touch files, the clock, the environment
or a subprocess (DESIGN principle 7); everything they learn is handed on in a frozen ``Provenance``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ccost import __version__
from ccost.resources import resource_dir


@dataclass(frozen=True)
class FileHash:
    path: str  # as shown: relative to the working folder, or std/..., never a home folder
    sha256: str


@dataclass(frozen=True)
class Provenance:
    spec_path: str
    files: tuple[FileHash, ...]
    git: str  # "3f2a9c1d0e4b (clean)", "... (spec files modified)", "not in git", "not recorded: ..."
    version: str
    date: str  # ISO date, UTC
    epoch: int = 0  # the build time behind ``date`` (SOURCE_DATE_EPOCH), for the PDF's font timestamps


def display_path(path: str | Path, cwd: Path | None = None) -> str:
    """A path as a reader should see it: relative to ``cwd`` when inside it, ``std/...`` for the bundled
    library, else as given. Keeps absolute checkout paths out of committed reviews."""
    p = Path(path)
    cwd = (cwd or Path.cwd()).resolve()
    try:
        resolved = p.resolve()
    except OSError:
        return str(path)
    for base, prefix in ((cwd, ""), (_std_dir(), "std/")):
        if base is None:
            continue
        try:
            return prefix + resolved.relative_to(base).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def _std_dir() -> Path | None:
    try:
        return resource_dir("std").resolve()
    except FileNotFoundError:
        return None


def build_epoch(environ: dict[str, str] | None = None) -> int:
    """The time of the build in seconds since 1970 (UTC): ``SOURCE_DATE_EPOCH`` when set, else the start of
    today. Whole days, so two renders of one spec on one day are byte-identical even without the variable.

    A malformed ``SOURCE_DATE_EPOCH`` raises ``ValueError`` naming the variable: silently using today
    would break the reproducibility the variable was set for.
    """
    env = os.environ if environ is None else environ
    raw = env.get("SOURCE_DATE_EPOCH")
    if raw is None or raw.strip() == "":
        today = _dt.datetime.now(_dt.timezone.utc).date()
        return int(_dt.datetime(today.year, today.month, today.day, tzinfo=_dt.timezone.utc).timestamp())
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {raw!r}") from None


def build_date(environ: dict[str, str] | None = None) -> str:
    """The date of the build, ISO (``2026-01-01``), from ``build_epoch``."""
    return iso_date(build_epoch(environ))


def iso_date(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).date().isoformat()


def sha256_file(path: str | Path) -> str:
    from ccost.syntax.parse import MAX_FILE_BYTES
    from ccost.userfiles import read_user_bytes

    return hashlib.sha256(read_user_bytes(path, limit=MAX_FILE_BYTES, what="spec")).hexdigest()


def git_state(files: list[Path]) -> str:
    """``<revision> (clean)`` or ``<revision> (spec files modified)``, or ``not in git``: judged on the spec
    and those of its imports that are in its repository (``ccost.gitio.working_state``)."""
    from ccost.gitio import working_state

    if shutil.which("git") is None:
        return "not in git"
    return working_state(files)


def collect(spec_path: str | Path, files: tuple[str, ...] | list[str], *, include_git: bool = True,
            environ: dict[str, str] | None = None, cwd: Path | None = None,
            git_note: str = "not recorded") -> Provenance:
    """Read the stamp for ``spec_path`` and its imports ``files`` (``Spec.files``; the spec first).

    ``include_git=False`` records ``git_note`` instead of the revision: the committed reviews in
    ``reports/`` use it so that they do not change with every commit of the repository.
    """
    paths = [Path(f) for f in (files or (spec_path,))]
    if Path(spec_path).resolve() not in {p.resolve() for p in paths}:
        paths.insert(0, Path(spec_path))
    hashes = tuple(FileHash(display_path(p, cwd), sha256_file(p)) for p in paths)
    epoch = build_epoch(environ)
    return Provenance(
        spec_path=display_path(spec_path, cwd),
        files=hashes,
        git=git_state(paths) if include_git else git_note,
        version=__version__,
        date=iso_date(epoch),
        epoch=epoch,
    )
