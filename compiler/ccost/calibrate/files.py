"""The calibrate package's only file access: read a log, or a file of measured step times.

Kept apart so that parsing and fitting stay pure (DESIGN principle 7); the CLI and the report writer call
it. Outputs are written by the CLI through ``ccost.report.atomic``.
"""

from __future__ import annotations

import os

from ccost.calibrate.logs import MAX_LOG_BYTES, NcclLog, parse_log
from ccost.diagnostics import CcostError, Span, error

_RUN_HELP = "pass the text that nccl-tests printed, e.g. `all_reduce_perf -b 8 -e 8G -f 2 -g 8 > log.txt`"


def read_log(path: str | os.PathLike, ranks: int | None = None, display: str | None = None) -> NcclLog:
    """Read and parse one nccl-tests log. ``display`` is the name diagnostics and the source string use."""
    from ccost.userfiles import read_user_bytes

    name = display or str(path)
    try:
        data = read_user_bytes(path, limit=MAX_LOG_BYTES, code="E501", what="nccl-tests log",
                               display=name, help=_RUN_HELP)
    except FileNotFoundError:
        raise CcostError(error("E501", f"log file {name} not found", None,
                               "check the path (it is relative to the current folder)")) from None
    return parse_bytes(data, name, ranks)


def parse_bytes(data: bytes, name: str, ranks: int | None = None) -> NcclLog:
    """Decode and parse; undecodable or NUL-bearing bytes mean a binary file, not a log."""
    if b"\x00" in data[:65536]:
        raise CcostError(error("E501", f"{name} is a binary file, not nccl-tests output (it contains NUL "
                               "bytes)", Span.point(name, 1, 1), _RUN_HELP))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CcostError(error("E501", f"{name} is not text (byte {exc.start} is not UTF-8): a binary "
                               "file, not nccl-tests output", Span.point(name, line, 1), _RUN_HELP)) from None
    text = text.lstrip("\ufeff")
    try:
        return parse_log(text, name, ranks)
    except CcostError as exc:
        exc.sources = {name: text}  # the CLI shows the offending line with a caret
        raise


#: A steps file is a table of at most ``steps.MAX_ROWS`` rows, a benchmark's JSON or a training log.
MAX_STEPS_BYTES = 16 * 1024 * 1024
_STEPS_HELP = "a CSV/YAML table, a benchmark JSON or a log"


def read_steps_file(path: str | os.PathLike, spec: str | None = None, plan: str | None = None,
                    only: str | None = None, display: str | None = None):
    """Read (bounded, regular files only: ``ccost.userfiles``) and parse a ``--steps`` file: its rows."""
    from ccost.calibrate.steps import read_steps
    from ccost.userfiles import read_user_bytes

    name = display or str(path)
    try:
        data = read_user_bytes(path, limit=MAX_STEPS_BYTES, code="E501", what="steps file", display=name,
                               help=_STEPS_HELP)
    except FileNotFoundError:
        raise CcostError(error("E501", f"steps file {name} not found", None, "check the path")) from None
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise CcostError(error("E501", f"{name} is not text (UTF-8)", None,
                               "pass a CSV, YAML or JSON file, or a log")) from None
    return read_steps(str(path) if display is None else name, text, spec, plan, only)
