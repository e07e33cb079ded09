"""The whole pipeline under mutation: check, eval, explain, the text/JSON/YAML writers
and a sample through the HTML review, not check alone.

The mutants are bench/fuzz.py's (the large run, 100,000 specs and 20,300 logs, is a benchmark: see its
docstring); Hypothesis picks the seeds here, so a failure shrinks to one seed and prints it. Any exception
other than ``CcostError`` fails the test.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import fuzz  # noqa: E402 - bench/ is not a package: found through the path set above

GOOD = fuzz.sources(("specs", "tests/hostile"))
BAD = fuzz.sources(("tests/bad",))


def _mutant(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    if rng.random() < 0.3:
        from plan_gen import random_draw, spec_text

        return str(REPO / "specs" / "fuzz-drawn.ccost"), fuzz.mutate(rng, spec_text(random_draw(rng)))
    path, text = rng.choice(GOOD if rng.random() < 0.8 else BAD)
    return path, fuzz.mutate(rng, text)


# slow (~4.5 s, 150 mutants): out of the inner loop, run in full by CI's `python -m pytest`
@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutants_through_check_eval_explain_and_the_writers(seed):
    path, text = _mutant(seed)
    outcome = fuzz.pipeline(path, text, deep=lambda: True, review=lambda: False, max_points=20_000)
    assert outcome  # every outcome is a diagnostic or a result; an internal error raises


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutants_through_the_html_review(seed):
    path, text = _mutant(seed)
    fuzz.pipeline(path, text, deep=lambda: True, review=lambda: True, max_points=20_000)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_logs_through_calibrate(seed):
    logs = sorted((REPO / "specs" / "measured").glob("*.txt"))
    log = logs[seed % len(logs)]
    _, err = fuzz.one_log((seed, 0, log.name, log.read_text()))
    assert err is None, err
