"""Request traces: the prompt and output token counts of real requests, read from a file a traffic's
`trace = "..."` names (docs/simulation.md, "Traces"). Below the checker, which reads the file when it checks
the spec (the confinement and size rules of every user file: ``ccost.userfiles``); the simulator draws its
requests from the rows (``ccost.model.simulate.Demand``)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass

import numpy as np

from ccost.diagnostics import CcostError, Span, error

#: the most tokens one request may have on either side (a bound, not a model limit: 10 million)
MAX_TOKENS = 10_000_000


#: Column (CSV) or key (JSON) names read as a request's input and output tokens, after normalising
#: (lower case, camelCase split, spaces and dashes as underscores): ccost's own names, then those of
#: public traces and benchmark files (docs/simulation.md lists which uses which).
INPUT_NAMES = ("input_tokens", "input_len", "input_length", "prompt_tokens", "prompt_len", "prompt_length",
               "num_prompt_tokens", "request_tokens", "context_tokens", "isl")
OUTPUT_NAMES = ("output_tokens", "output_len", "output_length", "completion_tokens", "response_tokens",
                "generated_tokens", "num_output_tokens", "max_tokens", "osl")
#: a whole JSON document holding two arrays (vLLM's serving-benchmark result file)
ARRAY_KEYS = (("input_lens", "output_lens"),)
MAX_TRACE_ROWS = 1_000_000
MAX_TRACE_BYTES = 256 * 1024 * 1024

_TRACE_HELP = ("a CSV with a header naming the input and output token columns (e.g. `input_tokens,"
               "output_tokens`), or JSON lines like {\"input_tokens\": 1024, \"output_tokens\": 256}")


@dataclass(frozen=True)
class Trace:
    """Requests' token counts read from a file: ``inputs[i]``, ``outputs[i]`` (int64, ≥ 1)."""

    inputs: np.ndarray
    outputs: np.ndarray
    name: str = "<trace>"
    columns: tuple[str, str] = ("input_tokens", "output_tokens")  # the names the file used

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.outputs) or len(self.inputs) == 0:
            raise ValueError("a trace needs the same number (≥ 1) of input and output token counts")
        for name in ("inputs", "outputs"):  # read-only: a trace is shared by every check of its file in a process
            a = np.array(getattr(self, name), copy=True)
            a.flags.writeable = False
            object.__setattr__(self, name, a)

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def mean_input(self) -> float:
        """Mean prompt tokens of the rows (what ``diff`` shows of a trace and ``export`` replays)."""
        return float(self.inputs.mean())

    @property
    def mean_output(self) -> float:
        """Mean output tokens of the rows."""
        return float(self.outputs.mean())


def _norm(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[\s\-]+", "_", name.lower())


def _fail(code: str, name: str, line: int, message: str, help: str | None = _TRACE_HELP) -> CcostError:
    return CcostError(error(code, message, Span.point(name, line, 1), help))


def _count(value, code: str, name: str, line: int, what: str) -> int:
    """A token count from a cell or a JSON value: a whole number in [1, MAX_TOKENS]."""
    if isinstance(value, bool) or value is None:
        raise _fail(code, name, line, f"{what} is {json.dumps(value)}, not a token count")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if re.fullmatch(r"[+-]?\d{1,12}", text) else float(text)
        except ValueError:
            raise _fail(code, name, line, f"{what} is {text[:30]!r}, not a token count",
                        "write whole numbers of tokens, like 1024") from None
    if isinstance(value, float):
        if not (math.isfinite(value) and value == int(value)):
            raise _fail(code, name, line, f"{what} is {value!r}, not a whole number of tokens",
                        "write whole numbers of tokens, like 1024")
        value = int(value)
    if not isinstance(value, int):
        raise _fail(code, name, line, f"{what} is a {type(value).__name__}, not a token count")
    if not 1 <= value <= MAX_TOKENS:
        raise _fail(code, name, line, f"{what} is {value:,}: a request's token count must be between 1 and "
                    f"{MAX_TOKENS:,}", "drop the row, or fix the count")
    return value


def _pick(names: list[str], code: str, file: str, line: int) -> tuple[int, int]:
    normed = [_norm(n) for n in names]
    found = []
    for wanted, what in ((INPUT_NAMES, "input"), (OUTPUT_NAMES, "output")):
        hit = next((normed.index(w) for w in wanted if w in normed), None)
        if hit is None:
            shown = ", ".join(repr(n) for n in names[:8]) + (" ..." if len(names) > 8 else "")
            raise _fail(code, file, line, f"no column of {what} tokens among {shown}",
                        f"name it one of {', '.join(wanted[:4])} (also read: {', '.join(wanted[4:])})")
        found.append(hit)
    return found[0], found[1]


def parse_trace(data: bytes, name: str = "<trace>", *, code: str = "E002", max_rows: int = MAX_TRACE_ROWS,
                max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """The (input, output) token counts of a trace file's bytes (the caller reads the file, e.g. through
    ``ccost.userfiles.read_user_bytes``).

    Formats, told apart by content: a JSON document with ``input_lens`` and ``output_lens`` arrays (vLLM's
    serving-benchmark result), a JSON array of objects, JSON lines (one object a line), or a CSV whose
    header names the two columns (``INPUT_NAMES``, ``OUTPUT_NAMES``; other columns are ignored). Raises
    ``CcostError`` with ``code`` at ``name:line`` for anything else: not UTF-8, empty, no such column, a
    count that is not a whole number in [1, 10,000,000], more than ``max_rows`` rows or ``max_bytes``.
    """
    if len(data) > max_bytes:
        raise _fail(code, name, 1, f"the trace is {len(data):,} bytes, over the limit of {max_bytes:,}",
                    "keep a sample of the rows (a few thousand are enough for the percentiles)")
    if b"\x00" in data:
        raise _fail(code, name, 1, "the trace is a binary file (it contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _fail(code, name, line, f"the trace is not UTF-8 text (byte {exc.start} is not)") from None
    stripped = text.lstrip()
    if not stripped:
        raise _fail(code, name, 1, "the trace is empty")
    if stripped[0] in "[{":
        whole = _whole_json(text)
        if isinstance(whole, dict) and any(a in whole for a, _ in ARRAY_KEYS):
            return _json_arrays(whole, code, name, max_rows)
        if isinstance(whole, list):
            return _json_rows([(1, r) for r in whole], code, name, max_rows, array=True)
        return _jsonl(text, code, name, max_rows)
    return _csv(text, code, name, max_rows)


def _whole_json(text: str):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None


def _json_arrays(doc: dict, code: str, name: str, max_rows: int) -> Trace:
    for a, b in ARRAY_KEYS:
        if a in doc:
            xs, ys = doc.get(a), doc.get(b)
            if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys):
                raise _fail(code, name, 1, f"`{a}` and `{b}` must be two lists of the same length")
            if not xs:
                raise _fail(code, name, 1, f"`{a}` is empty: the trace has no requests")
            if len(xs) > max_rows:
                raise _fail(code, name, 1, f"the trace has {len(xs):,} requests, over the limit of {max_rows:,}",
                            "keep a sample of the rows")
            ins = [_count(v, code, name, 1, f"{a}[{i}]") for i, v in enumerate(xs)]
            outs = [_count(v, code, name, 1, f"{b}[{i}]") for i, v in enumerate(ys)]
            return Trace(np.array(ins, np.int64), np.array(outs, np.int64), name, (a, b))
    raise AssertionError("unreachable")  # pragma: no cover


def _json_rows(rows: list[tuple[int, object]], code: str, name: str, max_rows: int, array: bool = False) -> Trace:
    if not rows:
        raise _fail(code, name, 1, "the trace has no requests")
    if len(rows) > max_rows:
        raise _fail(code, name, rows[max_rows][0], f"the trace has more than {max_rows:,} requests",
                    "keep a sample of the rows")
    ins, outs, cols = [], [], None
    for k, (line, row) in enumerate(rows):
        where = f"element {k}" if array else "this line"
        if not isinstance(row, dict):
            raise _fail(code, name, line, f"{where} is a JSON {type(row).__name__}, not an object")
        keys = list(row)
        ki, ko = _pick(keys, code, name, line)
        cols = cols or (keys[ki], keys[ko])
        ins.append(_count(row[keys[ki]], code, name, line, f"`{keys[ki]}`"))
        outs.append(_count(row[keys[ko]], code, name, line, f"`{keys[ko]}`"))
    return Trace(np.array(ins, np.int64), np.array(outs, np.int64), name, cols)


def _jsonl(text: str, code: str, name: str, max_rows: int) -> Trace:
    rows = []
    for line, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        if len(rows) > max_rows:
            break
        try:
            rows.append((line, json.loads(raw)))
        except (json.JSONDecodeError, RecursionError) as exc:
            col = getattr(exc, "colno", 1)
            raise CcostError(error(code, f"line {line} is not a JSON object ({getattr(exc, 'msg', 'too deep')})",
                                   Span.point(name, line, col), _TRACE_HELP)) from None
    return _json_rows(rows, code, name, max_rows)


def _csv(text: str, code: str, name: str, max_rows: int) -> Trace:
    lines = text.split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.strip())
    try:
        dialect = csv.Sniffer().sniff(lines[first], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO("\n".join(lines[first:])), dialect)
    try:
        header = next(reader)
        ki, ko = _pick(header, code, name, first + 1)
        ins, outs = [], []
        for row in reader:
            line = first + reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(ins) >= max_rows:
                raise _fail(code, name, line, f"the trace has more than {max_rows:,} requests",
                            "keep a sample of the rows")
            if len(row) <= max(ki, ko):
                raise _fail(code, name, line, f"the row has {len(row)} column{'s' * (len(row) != 1)}; the "
                            f"header has {len(header)}", "give every row the header's columns")
            ins.append(_count(row[ki], code, name, line, f"`{header[ki].strip()}`"))
            outs.append(_count(row[ko], code, name, line, f"`{header[ko].strip()}`"))
    except csv.Error as exc:
        raise _fail(code, name, first + reader.line_num, f"the CSV cannot be read: {exc}") from None
    if not ins:
        raise _fail(code, name, first + 1, "the trace has a header but no requests")
    return Trace(np.array(ins, np.int64), np.array(outs, np.int64), name, (header[ki].strip(), header[ko].strip()))


# ---------------------------------------------------------------------------------------------------
# Demand
