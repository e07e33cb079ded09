"""The SPEC arguments every verb takes the same way: files, folders (every ``.ccost`` file below, sorted),
and ``-`` for standard input.

``check``, ``eval``, ``report`` and ``fmt`` all expand their arguments here, so `ccost eval specs/` and
`ccost fmt --check specs/` mean the same files. ``eval`` and ``report`` skip, from folders only, the files
that evaluate nothing (a library such as ``specs/std/``: blocks, no plan); a file named on the command line
is never skipped. Standard input is read by ``read_stdin``, bounded like a spec file.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

STDIN = "-"


@dataclass(frozen=True)
class SpecArg:
    path: str  # as the user wrote it, or the file found in a folder; "-" for standard input
    from_folder: bool = False


def expand(args: list[str]) -> list[SpecArg]:
    """Files as given; a folder becomes its ``.ccost`` files, recursively, in sorted order."""
    out: list[SpecArg] = []
    for a in args:
        if a != STDIN and os.path.isdir(a):
            out += [SpecArg(str(f), True) for f in sorted(Path(a).rglob("*.ccost")) if f.is_file()]
        else:
            out.append(SpecArg(a))
    return out


def read_stdin() -> str:
    """Standard input as a spec's text: at most the 4 MiB a spec file may have, then refused (E002) without
    reading on (``ccost check - < /dev/zero`` stops at once), UTF-8, a byte-order mark dropped. The one
    reader of ``-`` for check, eval and fmt."""
    from ccost.diagnostics import CcostError, error
    from ccost.syntax.parse import MAX_FILE_BYTES
    from ccost.userfiles import read_stream

    data = read_stream(limit=MAX_FILE_BYTES, what="spec", name="standard input")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise CcostError(error("E002", f"standard input is not UTF-8 text (byte offset {exc.start})",
                               help="save the file as UTF-8")) from None


def evaluates_something(spec) -> bool:
    """Whether a checked spec has anything for ``eval`` or ``report``: a plan, sweep, comparison or search."""
    return bool(spec.plans or spec.sweeps or spec.compares or spec.searches)


def say_skipped(path: str) -> None:
    """The one line ``eval`` and ``report`` print for a file from a folder that evaluates nothing."""
    print(f"{path}: skipped (defines no plan, sweep, comparison or search)", file=sys.stderr)


def failed_one_of_several(exc, n_specs: int) -> int:
    """A spec of several failed: print its diagnostics and carry on (exit status 2 at the end); with one
    spec, raise so the CLI reports it as usual."""
    from ccost.diagnostics import render_all, use_colour

    if n_specs == 1:
        raise exc
    print(render_all(exc.diagnostics, getattr(exc, "sources", None), use_colour(sys.stderr)), file=sys.stderr)
    return 2
