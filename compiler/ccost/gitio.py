"""Reading spec files as they were at a git revision, without a checkout.

``ccost diff REV SPEC`` has to check the spec *and everything it imports* as they were at ``REV``. The
checker reads files through a *source reader*: a callable ``read(path) -> str`` that raises ``CcostError``
(E002, or E106 for an import) when a file cannot be read. ``ccost.check`` reads the working tree by
default; ``GitReader(rev, path)`` is a reader that answers from ``git show REV:path`` for every file inside
the repository, and from the file system for files outside it (the bundled ``std/`` library of an
installed ccost, say), so the revision's imports are what gets checked.

``working_state(files)`` is the review's provenance: the revision of the repository that holds the spec and
whether the spec's files differ from it.

This module runs ``git``: it belongs to the CLI side, never to the pure core.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable

from ccost.diagnostics import CcostError, error

Reader = Callable[[str], str]

# Same bound as the working-tree reader: a spec is a few kilobytes; a 10 MB blob is a mistake.
MAX_BYTES = 10 * 1024 * 1024


class GitError(Exception):
    """git could not answer (no repository, unknown revision, git missing)."""


def _git(args: list[str], cwd: str) -> subprocess.CompletedProcess[bytes]:
    try:
        # LC_ALL=C: git's messages are parsed nowhere, but keep them stable for the user's report.
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False,
                              env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None


def _fail(message: str, help: str | None = None) -> CcostError:
    return CcostError(error("E502", message, help=help))


class GitReader:
    """Read files as of ``rev`` in the repository that holds ``near`` (a file or folder).

    >>> read = GitReader("HEAD", "specs/plan.ccost")   # doctest: +SKIP
    >>> read("specs/plan.ccost")                       # the text committed at HEAD
    """

    def __init__(self, rev: str, near: str | os.PathLike[str]):
        if not rev or rev.startswith("-"):  # never let a revision be read as a git option
            raise _fail(f"`{rev}` is not a git revision")
        where = Path(near)
        folder = where if where.is_dir() else where.parent
        folder = folder if str(folder) else Path(".")
        if not folder.is_dir():
            raise _fail(f"folder `{folder}` does not exist, so it has no git history",
                        help="give the path of the spec as it is in the working tree")
        try:
            top = _git(["rev-parse", "--show-toplevel"], str(folder))
        except GitError as exc:
            raise _fail(str(exc)) from None
        if top.returncode != 0:
            raise _fail(f"`{folder}` is not inside a git repository",
                        help="`ccost diff OLD.ccost NEW.ccost` compares two files without git")
        self.top = os.path.realpath(top.stdout.decode("utf-8", "replace").strip())
        commit = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                      self.top)
        if commit.returncode != 0:
            raise _fail(f"`{rev}` is not a revision of the repository at {self.top}",
                        help="use a commit, branch or tag, like HEAD, HEAD~1, main or origin/main")
        self.rev = rev
        self.commit = commit.stdout.decode().strip()

    def relpath(self, path: str | os.PathLike[str]) -> str | None:
        """The path inside the repository (POSIX separators), or None for a file outside it."""
        real = os.path.realpath(path)
        try:
            rel = os.path.relpath(real, self.top)
        except ValueError:  # another drive on Windows
            return None
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            return None
        return Path(rel).as_posix()

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` existed at the revision (files outside the repository: on disk now)."""
        rel = self.relpath(path)
        if rel is None:
            return os.path.isfile(path)
        return _git(["cat-file", "-e", f"{self.commit}:{rel}"], self.top).returncode == 0

    def __call__(self, path: str | os.PathLike[str]) -> str:
        """The text of ``path`` at the revision. Raises ``FileNotFoundError`` when it was not there, and
        ``CcostError`` (E002) when it is not UTF-8 or too large, like the working-tree reader."""
        rel = self.relpath(path)
        if rel is None:  # outside the repository: read it now, like the checker's own reader
            from ccost.syntax.parse import read_source

            if not os.path.isfile(path):
                raise FileNotFoundError(str(path))
            return read_source(str(path))
        size = _git(["cat-file", "-s", f"{self.commit}:{rel}"], self.top)
        if size.returncode != 0:
            raise FileNotFoundError(f"{path} does not exist at {self.rev}")
        if int(size.stdout.decode().strip() or 0) > MAX_BYTES:
            raise CcostError(error("E002", f"{path} at {self.rev} is larger than {MAX_BYTES // 2**20} MiB"))
        blob = _git(["cat-file", "blob", f"{self.commit}:{rel}"], self.top)
        if blob.returncode != 0:
            raise FileNotFoundError(f"{path} does not exist at {self.rev}")
        try:
            return blob.stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CcostError(error("E002", f"{path} at {self.rev} is not UTF-8 text (byte {exc.start})",
                                   help="save the file as UTF-8")) from None

    def describe(self) -> str:
        return f"{self.rev} ({self.commit[:12]})"


def working_state(files: list[str | os.PathLike[str]]) -> str:
    """``<revision> (clean)`` or ``<revision> (spec files modified)`` for the repository that holds the
    spec (``files[0]``), judged on the spec and those of its imports inside that repository; ``<no commit
    yet> (...)`` in a repository without a commit; ``not in git`` outside one.

    "Dirty" is asked about the spec's own files only: the question a reviewer has is whether the spec
    they read is the one at that revision. Files outside the repository (the bundled ``std/`` library of
    an installed ccost, or of the ccost checkout itself, which is another repository) are named and
    hashed on the cover; asking git about them fails (``git status`` refuses a path outside its work
    tree), which made every spec that imports ``std/`` say "dirty flag unknown".
    """
    if not files:
        return "not in git"
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    folder = os.path.dirname(os.path.realpath(files[0])) or "."

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=10,
                                  env=env)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if not top:
        return "not in git"
    top = os.path.realpath(top)
    inside = []
    for f in files:
        rel = os.path.relpath(os.path.realpath(f), top)
        if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            inside.append(Path(rel).as_posix())
    revision = git("rev-parse", "--short=12", "--verify", "--quiet", "HEAD")
    if revision is None:  # a repository whose first commit is still to come: nothing is committed
        return "no commit yet (spec files not committed)"
    status = git("-C", top, "status", "--porcelain", "--untracked-files=all", "--", *inside) if inside else ""
    if status is None:
        return f"{revision} (dirty flag unknown)"
    return f"{revision} ({'spec files modified' if status else 'clean'})"
