"""Parse the text that NVIDIA's nccl-tests print (``all_reduce_perf`` and friends) into frozen rows.

Pure: text in, ``NcclLog`` out; reading the file is ``read_log`` in ``calibrate/files.py``.

What a log looks like (nccl-tests 2.x)::

    # nccl-tests version 2.18.3 nccl-headers=22902 nccl-library=22902
    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 4 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 50 ...
    # Using devices
    #  Rank  0 Group  0 Pid 4242 on host1 device  0 [0x18] NVIDIA H100 80GB HBM3
    #                                                   out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw  #wrong     time ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us) ...
               8             2     float     sum      -1    22.72    0.00    0.00       0    22.97 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 124.806
    # Collective test concluded: all_reduce_perf

Older logs lack the version and "test starting" lines (then the collective is read from the file name
or from the columns), and some have an ``error`` column instead of ``#wrong``. With ``NCCL_DEBUG=INFO``,
NCCL's own lines (``host:pid:tid [0] NCCL INFO ...``) are mixed in; they are skipped. Everything else that
is not a row inside a table is an error that names the line, because a silently skipped row would bend
the fit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ccost.collectives import CATALOGUE
from ccost.diagnostics import CcostError, Diagnostic, Span, error, warning

# nccl-tests binary name -> ccost collective kind (INTERFACE.md's `kind` values): each collective's own
# test (``collectives.CATALOGUE``), then the tests ccost has no formula for, parsed but not fitted
# (hypercube measures an all-gather).
TEST_KINDS: dict[str, str] = {
    **{c.test: c.kind for c in CATALOGUE.values()},
    "reduce": "reduce",
    "hypercube": "allgather",
    "gather": "gather",
    "scatter": "scatter",
}
# nccl-tests' busbw scale s (factor s·(n−1)/n) of the tests that are no ccost collective.
_OTHER_BUSBW = {"gather": 1.0, "scatter": 1.0}


# busbw = algbw x this factor (nccl-tests doc/PERFORMANCE.md; SOURCES.md of the shared logs).
def busbw_factor(kind: str, ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor: what it multiplies algbw by to get busbw."""
    if kind in CATALOGUE:
        return CATALOGUE[kind].busbw_factor(ranks)
    s = _OTHER_BUSBW.get(kind)
    return 1.0 if s is None else s * (ranks - 1) / ranks


MAX_LOG_BYTES = 64 * 1024 * 1024  # a nccl-tests log is kilobytes; a bigger file is not one

# Plausible values of a row (issue 11): beyond them a number is damage, not a measurement, and it would
# overflow a float or make the fit's linear algebra fail. Each is an E501 naming the line.
MAX_SIZE = 1 << 60  # bytes: 1 EiB (nccl-tests runs to a few GiB)
MAX_RANKS = 1 << 20  # the largest parallel degree a plan may have
TIME_US = (1e-3, 1e12)  # a collective takes at least a nanosecond and less than ~11 days
MAX_GBPS = 1e9  # algbw and busbw: at most 1 EB/s


@dataclass(frozen=True)
class Timing:
    """One out-of-place or in-place triple. ``None`` where the log prints ``N/A``."""

    time_us: float | None
    algbw: float | None  # GB/s (1e9 B/s)
    busbw: float | None  # GB/s
    wrong: float | None  # #wrong count (or max error in old logs); None = N/A = validation off (-c 0)

    @property
    def usable(self) -> bool:
        """Timed, and either validated clean or not validated at all."""
        return (self.time_us is not None and self.time_us > 0
                and (self.wrong is None or self.wrong == 0))


@dataclass(frozen=True)
class Row:
    """One table row: a message size and its two timings."""

    line: int
    size: int  # bytes, total message size (SOURCES.md)
    count: int  # elements per rank
    dtype: str
    redop: str
    root: int
    out_of_place: Timing
    in_place: Timing | None


@dataclass(frozen=True)
class Device:
    rank: int
    host: str
    device: int
    name: str


@dataclass(frozen=True)
class Test:
    """One ``*_perf`` run: its header, devices and rows."""

    file: str
    line: int  # the header line
    name: str  # "all_reduce_perf"
    kind: str  # ccost kind, "allreduce"
    kind_from: str  # how the collective was identified, for the report
    n_threads: int
    n_gpus: int
    min_bytes: int
    max_bytes: int
    ranks: int
    ranks_from: str  # how the rank count was found, for the report
    devices: tuple[Device, ...]
    rows: tuple[Row, ...]
    complete: bool  # the footer was seen

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.host for d in self.devices))

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.name for d in self.devices))


@dataclass(frozen=True)
class NcclLog:
    file: str
    tests: tuple[Test, ...]
    tests_version: str | None  # nccl-tests version
    nccl_version: str | None  # NCCL library version
    warnings: tuple[Diagnostic, ...]


# ---------------------------------------------------------------------------------------------------

_HEADER = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)"
                     r"(?:\s+step:\s*(\d+)\((factor|bytes)\))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=(\d{1,9})\b)?")
_RANK = re.compile(r"^#\s*Rank\s+(\d{1,9})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d{1,9})"
                   r"\s+\[[^\]]*\]\s*(.*)$")
_FOOTER_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:")
_NCCL_DEBUG = re.compile(r"\bNCCL (INFO|WARN|TRACE|ABORT)\b")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)")
_FAILURE = re.compile(r"(NCCL failure|CUDA failure|Test failure|Test NCCL failure|MPI_ABORT|"
                      r"Segmentation fault|Aborted)", re.I)
_INT = re.compile(r"^-?\d+$")
# Line prefixes that launchers add: Open MPI `--tag-output` ("[1,0]<stdout>:"), Slurm `srun --label` ("0: ").
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\s*\d+: )")
_BARE_NCCL_VERSION = re.compile(r"^NCCL version\s+(\d+\.\d+\.\d+)")
# Old nccl-tests print an `error` column (max relative error of the result) instead of `#wrong`; float
# sums differ from the reference by rounding, so small values are normal. Above this, the row is wrong.
OLD_ERROR_TOLERANCE = 1e-3

# The modern column layout (nccl-tests >= 2.0), used when a table has no column-name line.
_DEFAULT_COLUMNS = ("size", "count", "type", "redop", "root",
                    "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")


def _short(tok: str, n: int = 24) -> str:
    """A token as a message shows it: a 400-digit number is cut, not printed whole."""
    return tok if len(tok) <= n else tok[:n] + f"... ({len(tok)} characters)"


def _bytes(n: int) -> str:
    from ccost.units import INFORMATION, format_quantity

    text = format_quantity(float(n), INFORMATION)
    return f"{n} B" if text == f"{n} B" else f"{n} B ({text})"


def _library_version(code: str) -> str:
    """NCCL_VERSION_CODE -> "2.29.2" (major*10000 + minor*100 + patch since 2.9; 1000s before)."""
    n = int(code)
    if n >= 10000:
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"


def _kind_from_filename(file: str) -> str | None:
    base = file.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for test in sorted(TEST_KINDS, key=len, reverse=True):  # reduce_scatter before reduce
        if test in base or test.replace("_", "") in base:
            return test
    for short, test in (("_ar", "all_reduce"), ("_ag", "all_gather"), ("_rs", "reduce_scatter"),
                        ("_a2a", "alltoall")):
        if re.search(short + r"(?:[._]|$)", base):
            return test
    return None


def _kind_from_rows(rows: list[Row], ranks: int) -> str | None:
    """Read the collective off the columns where nccl-tests makes it unambiguous.

    all_reduce and sendrecv print count = size/elem; reduce_scatter, all_gather and alltoall print the
    per-rank count size/elem/ranks; rooted tests print root >= 0; only reductions print a redop.
    """
    if not rows:
        return None
    r = rows[-1]
    reduces = r.redop.lower() not in ("none", "-", "")
    if r.root >= 0:
        return "reduce" if reduces else "broadcast"
    if r.count <= 0 or r.size % r.count:
        return None
    elem = r.size // r.count
    whole = elem in (1, 2, 4, 8)  # count is the whole message
    if reduces:
        return "all_reduce" if whole else "reduce_scatter"
    return "sendrecv" if whole else None  # all_gather vs alltoall cannot be told apart


def _ranks_from_busbw(rows: list[Row], kind: str) -> int | None:
    """Invert busbw/algbw = factor(kind, P) on the rows printed with enough digits (algbw >= 10)."""
    ratios = [r.out_of_place.busbw / r.out_of_place.algbw for r in rows
              if r.out_of_place.algbw and r.out_of_place.busbw and r.out_of_place.algbw >= 10]
    if not ratios:
        return None
    ratios.sort()
    f = ratios[len(ratios) // 2]
    s = CATALOGUE[kind].busbw if kind in CATALOGUE else None
    if s is None or f >= s - 0.001:  # a factor of 1, or one too close to s to tell P
        return None
    p = s / (s - f)  # f = s·(P−1)/P
    if abs(p - round(p)) > 0.05 * p:
        return None
    return int(round(p))


class _TestBuilder:
    """One test while it is being read; ``_finish`` freezes it into a ``Test``."""

    def __init__(self, file: str, line: int, name: str | None, m: re.Match | None):
        self.file, self.name = file, name
        self.columns: tuple[str, ...] | None = None
        self.devices: list[Device] = []
        self.rows: list[Row] = []
        self.complete = False
        self.set_header(line, m)

    def set_header(self, line: int, m: re.Match | None) -> None:
        """The `# nThread .. nGpus .. minBytes .. maxBytes .. step:` line (defaults when absent)."""
        if m:
            for i, what, most in ((1, "nThread", MAX_RANKS), (2, "nGpus", MAX_RANKS), (3, "minBytes", MAX_SIZE),
                                  (4, "maxBytes", MAX_SIZE), (5, "step", MAX_SIZE)):
                least = 1 if i in (1, 2) else 0  # nThread 0 or nGpus 0 would mean no rank at all
                if m.group(i) and (len(m.group(i)) > 20 or not least <= int(m.group(i)) <= most):
                    raise CcostError(_diag(self.file, line, f"{what} {_short(m.group(i))} in the header is not "
                                           f"plausible ({least} to {most:,})", "the header is damaged; rerun the "
                                           "test and keep its whole output"))
        self.line = line
        self.n_threads = int(m.group(1)) if m else 1
        self.n_gpus = int(m.group(2)) if m else 1
        self.min_bytes = int(m.group(3)) if m else 0
        self.max_bytes = int(m.group(4)) if m else 0
        self.step = (int(m.group(5)), m.group(6)) if m and m.group(5) else None
        self.header_seen = m is not None


def _diag(file: str, line: int, message: str, help: str | None, column: int = 1,
          end: int | None = None) -> Diagnostic:
    return error("E501", message, Span(file, line, column, line, end or column + 1), help)


def parse_log(text: str, file: str, ranks: int | None = None) -> NcclLog:
    """Parse nccl-tests output. ``ranks`` (``--ranks N``) overrides the rank count the log implies.

    Raises ``CcostError`` (E501) naming ``file:line`` for anything that is not a well-formed log:
    empty, binary, CSV, cut mid-row, two runs interleaved, a failed run.
    """
    if "\x00" in text:
        raise CcostError(_diag(file, 1, "this file is binary, not nccl-tests output (it contains NUL "
                               "bytes)", "pass the text that nccl-tests printed, e.g. "
                               "`all_reduce_perf -b 8 -e 8G -f 2 -g 8 > log.txt`"))
    lines = text.splitlines()
    if not any(ln.strip() for ln in lines):
        raise CcostError(_diag(file, 1, "the log is empty", "pass the text that nccl-tests printed, "
                               "e.g. `all_reduce_perf -b 8 -e 8G -f 2 -g 8 > log.txt`"))

    warns: list[Diagnostic] = []
    tests: list[_TestBuilder] = []
    cur: _TestBuilder | None = None
    pending_name: str | None = None
    tests_version = nccl_version = None
    in_table = False  # between the column-name line (or first row) and the footer
    last_content = max(i for i, ln in enumerate(lines, 1) if _PREFIX.sub("", ln, count=1).strip())

    def close(at: int) -> None:
        """End the current test; a table that stops before its footer is cut."""
        nonlocal cur, in_table
        if cur is not None and cur.rows and not cur.complete and in_table:
            raise CcostError(_diag(
                file, at, f"a new test starts at line {at} while the {cur.name or 'previous'} table "
                f"that began at line {cur.line} has no footer: the log is cut or two runs are interleaved",
                "run each test to completion and keep each run's output whole (`> log.txt` per run); "
                "concatenated complete logs are fine"))
        in_table = False
        cur = None

    for no, raw in enumerate(lines, 1):
        line = _PREFIX.sub("", raw.rstrip("\r\n"), count=1)
        s = line.strip()
        if not s:
            continue
        if m := _BARE_NCCL_VERSION.match(s):  # printed by NCCL itself at init, outside the table
            nccl_version = nccl_version or m.group(1)
            continue
        if _NCCL_DEBUG.search(s):  # NCCL_DEBUG=INFO output, interleaved by design
            m = _NCCL_VERSION.search(s)
            if m and not nccl_version:
                nccl_version = m.group(1)
            continue
        if s.startswith("#"):
            if m := _VERSION.match(s):
                tests_version = m.group(1)
                if m.group(2):
                    nccl_version = _library_version(m.group(2))
                continue
            if m := _STARTING.match(s):
                close(no)
                pending_name = m.group(1)
                continue
            if m := _HEADER.match(s):
                if cur is not None and (cur.rows or cur.header_seen):
                    close(no)
                    cur = None
                if cur is None:
                    cur = _TestBuilder(file, no, pending_name, m)
                    tests.append(cur)
                else:  # device or column lines came first and opened it
                    cur.name = cur.name or pending_name
                    cur.set_header(no, m)
                pending_name = None
                continue
            if m := _RANK.match(s):
                if cur is None:
                    cur = _TestBuilder(file, no, pending_name, None)
                    tests.append(cur)
                cur.devices.append(Device(int(m.group(1)), m.group(2), int(m.group(3)),
                                          m.group(4).strip()))
                continue
            body = s.lstrip("#").split()
            if "size" in body and "time" in body:
                if cur is None:
                    cur = _TestBuilder(file, no, pending_name, None)
                    tests.append(cur)
                cur.columns = tuple(body)
                in_table = True
                continue
            if _FOOTER_AVG.match(s):
                if cur is not None:
                    cur.complete = True
                in_table = False
                continue
            if m := _CONCLUDED.match(s):
                if cur is not None:
                    cur.complete = True
                    if not cur.name:
                        cur.name = m.group(1)
                in_table = False
                cur = None
                continue
            continue  # other comments: units line, "out-of-place in-place", "Out of bounds values"
        # Not a comment: a row, a failure message, or something that does not belong.
        if _FAILURE.search(s):
            raise CcostError(_diag(file, no, f"nccl-tests reported a failure: {s[:120]}",
                                   "fix the run (driver, NCCL, MPI) and measure again; a failed run "
                                   "has no timings to fit"))
        fields = s.split()
        if fields and _INT.match(fields[0]) and cur is not None:
            in_table = True
            cur.rows.append(_parse_row(file, no, line, fields, cur, no == last_content))
            continue
        if "," in s and (cur is None or not cur.rows):
            raise CcostError(_diag(file, no, "this looks like a CSV file, not nccl-tests output",
                                   "calibrate reads the text nccl-tests prints; save its standard "
                                   "output (`all_reduce_perf ... > log.txt`) and pass that file"))
        if in_table and cur is not None:
            raise CcostError(_diag(file, no, f"unexpected text inside the {cur.name or 'results'} table "
                                   f"that began at line {cur.line}: {s[:80]!r}",
                                   "the log is interleaved with other output; rerun with the output "
                                   "of each process kept apart (e.g. mpirun --output-filename), or "
                                   "delete the stray lines"))
        # Text before a table or after its footer (mpirun or scheduler chatter): harmless.

    if not tests or not any(t.rows for t in tests):
        where = tests[0].line if tests else 1
        raise CcostError(_diag(
            file, where, "no nccl-tests results table found" + (" (a header but no rows: the log is cut "
                                                              "before the first size)" if tests else ""),
            "pass the full output of an nccl-tests binary such as all_reduce_perf: the `# nThread ... "
            "nGpus ...` header and the table of sizes and times"))

    built: list[Test] = []
    for b in tests:
        if not b.rows:
            if b.header_seen:
                raise CcostError(_diag(file, b.line, f"the {b.name or 'test'} header at line {b.line} "
                                       "has no rows: the log is cut",
                                       "rerun the test and keep its whole output"))
            continue
        if not b.complete:
            _check_truncated(b, warns)
        built.append(_finish(b, ranks, warns))
    return NcclLog(file, tuple(built), tests_version, nccl_version, tuple(warns))


def _parse_row(file: str, no: int, line: str, fields: list[str], b: _TestBuilder, last: bool) -> Row:
    cols = b.columns or _DEFAULT_COLUMNS
    if len(fields) != len(cols):
        if last and len(fields) < len(cols):
            raise CcostError(_diag(file, no, f"the log is cut in the middle of a row: {len(fields)} of "
                                   f"{len(cols)} columns", "rerun the test and keep its whole output, or "
                                   "delete the incomplete last line", 1, len(line) + 1))
        raise CcostError(_diag(file, no, f"row has {len(fields)} columns where the table header has "
                               f"{len(cols)}: two outputs are interleaved or the row is damaged",
                               "keep each process's output apart (e.g. mpirun --output-filename) or "
                               "delete the damaged line", 1, len(line) + 1))

    def num(i: int, what: str, integer: bool = False) -> float | None:
        tok = fields[i]
        if tok.upper() in ("N/A", "NA", "NAN", "-"):
            return None
        col = line.find(tok) + 1
        try:
            v = int(tok) if integer and len(tok) <= 20 else float(tok)
        except ValueError:
            raise CcostError(_diag(file, no, f"{what} {_short(tok)!r} is not a number", "the row is damaged or "
                                   "interleaved with other output; delete it or rerun", col,
                                   col + len(tok))) from None
        if integer:
            if not (isinstance(v, int) and abs(v) <= MAX_SIZE):
                raise CcostError(_diag(file, no, f"{what} {_short(tok)} is not plausible (at most "
                                       f"{MAX_SIZE:,}{' B' if what == 'size' else ''})",
                                       "the row is damaged; delete it or rerun", col, col + len(tok)))
            return v
        if not math.isfinite(v):
            return None
        lo, hi = TIME_US if what == "time" else (0.0, MAX_GBPS) if what in ("algbw", "busbw") else (-math.inf,
                                                                                                   math.inf)
        if v > hi or (0 < v < lo):
            unit = "us" if what == "time" else "GB/s"
            raise CcostError(_diag(file, no, f"{what} {_short(tok)} {unit} is not plausible (a measurement "
                                   f"is between {lo:g} and {hi:g} {unit})",
                                   "the row is damaged; delete it or rerun", col, col + len(tok)))
        return v

    idx: dict[str, list[int]] = {}
    for i, c in enumerate(cols):
        idx.setdefault(c.lstrip("#").lower(), []).append(i)

    def timing(k: int) -> Timing | None:
        t = idx.get("time", [])
        if len(t) <= k:
            return None
        i = t[k]
        if i + 2 >= len(fields):  # a damaged header: nccl-tests prints algbw and busbw after each time
            raise CcostError(_diag(file, no, "the table header has a `time` column without the `algbw` and "
                                   "`busbw` columns nccl-tests prints after it", "the header line is damaged; "
                                   "rerun the test and keep its whole output", 1, len(line) + 1))
        wrong_cols = idx.get("wrong", []) + idx.get("error", [])
        wrong_cols.sort()
        w = wrong_cols[k] if len(wrong_cols) > k else None
        wrong = num(w, "#wrong") if w is not None else 0.0
        old_error = w is not None and cols[w].lower() == "error"
        if old_error and wrong is not None and wrong <= OLD_ERROR_TOLERANCE:
            wrong = 0.0  # old logs: a rounding-level relative error is a correct result
        return Timing(num(i, "time"), num(i + 1, "algbw"), num(i + 2, "busbw"), wrong)

    size = num(idx["size"][0], "size", True)
    if size is None or size < 0:
        raise CcostError(_diag(file, no, "row without a message size", "delete the damaged line"))
    count = num(idx["count"][0], "count", True) if "count" in idx else 0
    root = num(idx["root"][0], "root", True) if "root" in idx else -1
    dtype = fields[idx["type"][0]] if "type" in idx else "?"
    redop = fields[idx["redop"][0]] if "redop" in idx else "none"
    oop = timing(0)
    if oop is None:
        raise CcostError(_diag(file, no, "the table has no time column", "pass nccl-tests output"))
    # all_gather / reduce_scatter / alltoall round the count down to a multiple of the rank count, so the
    # smallest sizes of `-b 8` print as 0 B several times (counts below the rank count): a size may repeat
    # when the count does too; only a size that goes down means two runs are interleaved.
    if b.rows and (size < b.rows[-1].size or (size == b.rows[-1].size and count != b.rows[-1].count)):
        col = line.find(fields[idx["size"][0]]) + 1
        raise CcostError(_diag(file, no, f"size {_bytes(size)} follows {_bytes(b.rows[-1].size)} (line "
                               f"{b.rows[-1].line}): sizes must grow down a table, so two runs are "
                               "interleaved here", "keep each run's output apart; concatenate whole "
                               "logs, each with its own `# nThread` header", col, col + len(str(size))))
    return Row(no, int(size), int(count or 0), dtype, redop, int(root if root is not None else -1),
               oop, timing(1))


def _expected_last(b: _TestBuilder) -> int | None:
    if not b.step or b.min_bytes <= 0 or b.max_bytes < b.min_bytes:
        return None
    step, how = b.step
    s = b.min_bytes
    if how == "factor":
        if step < 2:
            return None
        while s * step <= b.max_bytes:
            s *= step
        return s
    if step <= 0:
        return None
    return b.min_bytes + (b.max_bytes - b.min_bytes) // step * step


def _check_truncated(b: _TestBuilder, warns: list[Diagnostic]) -> None:
    """A table with no footer: an error if its header promised more sizes, else a warning."""
    last = b.rows[-1]
    expected = _expected_last(b)
    if expected is not None and last.size < expected:
        raise CcostError(_diag(
            b.file, last.line, f"the log is cut: the header (line {b.line}) asks for sizes up to "
            f"{_bytes(expected)} but the table stops at {_bytes(last.size)} on line {last.line}, with no "
            "footer",
            "rerun the test to completion, or pass the whole log"))
    warns.append(warning("W501", "the table has no `# Avg bus bandwidth` footer; the rows look "
                         "complete, so they are used", Span(b.file, last.line, 1, last.line, 2)))


def _finish(b: _TestBuilder, ranks: int | None, warns: list[Diagnostic]) -> Test:
    name = b.name
    kind_from = "the `Collective test starting` line"
    if not name:
        base = _kind_from_filename(b.file)
        if base:
            name, kind_from = base + "_perf", "the file name"
    per_proc = b.n_gpus * b.n_threads
    if ranks is not None:
        p, how = ranks, f"--ranks {ranks}"
    elif b.devices:
        p = len({d.rank for d in b.devices})
        how = f"{p} `Rank` lines under `Using devices`"
    else:
        p = per_proc
        how = f"nGpus {b.n_gpus} × nThread {b.n_threads} × 1 process; the log lists no devices"
    if not name:
        test = _kind_from_rows(b.rows, p)
        if test:
            name, kind_from = test + "_perf", "the count, redop and root columns"
    if not name:
        raise CcostError(_diag(b.file, b.line, "cannot tell which collective this table measured (no "
                               "`Collective test starting` line, and the file name and columns do not "
                               "say)", "name the file after the test, e.g. `all_gather_perf.txt`, or "
                               "keep the `# Collective test starting:` line (nccl-tests >= 2.14)"))
    stem = name[:-5] if name.endswith("_perf") else name
    kind = TEST_KINDS.get(stem, stem)
    if ranks is None and not b.devices:
        inferred = _ranks_from_busbw(b.rows, kind)
        if inferred and inferred != p and inferred % per_proc == 0:
            how = (f"nGpus {b.n_gpus} × nThread {b.n_threads} × {inferred // per_proc} processes "
                   f"(processes inferred from busbw/algbw = {busbw_factor(kind, inferred):.4g})")
            p = inferred
    else:
        inferred = _ranks_from_busbw(b.rows, kind)
        if inferred and inferred != p:
            warns.append(warning(
                "W501", f"the log's busbw/algbw ratio says {inferred} ranks for {stem}, but {how} "
                f"says {p}", Span(b.file, b.line, 1, b.line, 2),
                help=f"check the rank count; pass --ranks {inferred} if the log is right"))
    return Test(b.file, b.line, name, kind, kind_from, b.n_threads, b.n_gpus, b.min_bytes, b.max_bytes,
                p, how, tuple(b.devices), tuple(b.rows), b.complete)
