"""Property tests: no input, however malformed, makes the front end raise anything but a diagnostic.

Random text, and mutations of the shipped example specs (characters and tokens deleted, inserted,
duplicated, swapped), go through ``check_text``; it must return a ``CheckResult`` whose diagnostics are
registered codes with places that exist, render without error, and whose spec is present exactly when
there is no error. ``load_spec`` on the same input raises ``CcostError`` or returns; nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path

from ccost.check import CheckResult, check_text
from ccost.diagnostics import CODES, render_all
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
SPECS = sorted((REPO / "specs").glob("*.ccost"))
TEXTS = [(str(p), p.read_text(encoding="utf-8")) for p in SPECS]
TOKENS = ["{", "}", "=", ";", "\n", "(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "#", '"', "%",
          "0", "1e400", "2.5", "-1", "us", "GB/s", "GBps", "TFLOP", "tp", "pp", "alpha", "plan", "link", "gpu",
          "extends", "import", '"std/gpus.ccost"', '"x.ccost"', "true", "h100", "ring", "µs", "\t", "\\", "é"]

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(text: str, path: str) -> None:
    result = check_text(text, path)
    assert isinstance(result, CheckResult)
    for d in result.diagnostics:
        assert d.code in CODES
        assert d.message
        if d.span is not None and d.span.file in result.sources:
            lines = result.sources[d.span.file].splitlines()
            assert 1 <= d.span.line <= max(len(lines), 1) + 1, (d, len(lines))
    assert (result.spec is None) == bool(result.errors)
    render_all(result.diagnostics, result.sources)  # rendering never fails either


@SETTINGS
@given(st.text(max_size=400))
def test_random_text(text):
    run(text, str(REPO / "specs" / "fuzz.ccost"))


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map(" ".join))
def test_random_token_soup(text):
    run(text, str(REPO / "specs" / "fuzz.ccost"))


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|\w+|[^\w\s]", text)


@st.composite
def mutated_spec(draw):
    path, text = draw(st.sampled_from(TEXTS))
    parts = _tokens(text)
    for _ in range(draw(st.integers(1, 4))):
        if not parts:
            break
        i = draw(st.integers(0, len(parts) - 1))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "swap", "char"]))
        if op == "delete":
            del parts[i]
        elif op == "insert":
            parts.insert(i, draw(st.sampled_from(TOKENS)))
        elif op == "duplicate":
            parts.insert(i, parts[i])
        elif op == "swap" and i + 1 < len(parts):
            parts[i], parts[i + 1] = parts[i + 1], parts[i]
        elif op == "char" and parts[i]:
            j = draw(st.integers(0, len(parts[i]) - 1))
            parts[i] = parts[i][:j] + draw(st.characters(blacklist_categories=["Cs"])) + parts[i][j + 1:]
    return path, "".join(parts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_spec())
def test_mutated_example_specs(case):
    path, text = case
    run(text, path)
