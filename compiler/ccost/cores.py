"""The cores this process may run on: the default of ``--jobs`` and whether a second process can help
(``ccost.report.pdfproc``). A module of its own so that asking costs no import of the search."""

from __future__ import annotations

import os


def available() -> int:
    """The cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` where that is
    missing)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
