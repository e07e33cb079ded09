"""The SPEC arguments every verb takes the same way: files, folders (every ``.ccost`` file below, sorted),
and ``-`` for standard input.

``check``, ``eval``, ``report`` and ``fmt`` all expand their arguments here, so `ccost eval specs/` and
`ccost fmt --check specs/` mean the same files. ``eval`` and ``report`` skip, from folders only, the files
that evaluate nothing (a library such as ``specs/std/``: blocks, no plan); a file named on the command line
is never skipped.
"""

from __future__ import annotations

import os
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


def evaluates_something(spec) -> bool:
    """Whether a checked spec has anything for ``eval`` or ``report``: a plan, sweep, comparison or search."""
    return bool(spec.plans or spec.sweeps or spec.compares or spec.searches)
