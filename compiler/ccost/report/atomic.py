"""Write output files so that a failed run never leaves a half-written file in place of a good one.

INTERFACE.md: "A failed run never leaves a half-written output in place of a good one." Every output is
first written completely to a temporary file in the target's own folder (so the rename stays on one file
system and is atomic), and only when *all* outputs of a run exist are they moved into place with
``os.replace``. A render that raises before ``commit`` leaves every previous file untouched.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class AtomicFiles:
    """Collect the outputs of one run; move them into place together, or not at all.

    >>> with AtomicFiles() as out:          # doctest: +SKIP
    ...     out.write(Path("reports/a.html"), html_bytes)
    ...     out.write(Path("reports/a.pdf"), render_pdf())   # raises -> a.html is not replaced either
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []  # (temporary, final)

    def write(self, path: Path, data: bytes) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._pending.append((Path(tmp), path))

    def commit(self) -> list[Path]:
        """Rename every temporary file onto its target; returns the targets in the order written."""
        done = []
        for tmp, final in self._pending:
            # mkstemp creates 0600 files; a report is an ordinary file others read (and git commits).
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)
            done.append(final)
        self._pending.clear()
        return done

    def discard(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending.clear()

    def __enter__(self) -> AtomicFiles:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def write_atomic(path: Path, data: bytes) -> Path:
    """Write one file atomically (temporary file in the same folder, then ``os.replace``)."""
    with AtomicFiles() as out:
        out.write(path, data)
    return Path(path)
