"""Result keys are records: every number a writer prints has a record in ccost.results
with a unit and a label, and the writers take their labels from those records, not from tables of their
own."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from ccost import output, results
from ccost.cli import main

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.ccost"))


@lru_cache(maxsize=None)
def document(spec: str) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(["eval", spec, "--format", "json"]) == 0
    return json.loads(buf.getvalue())


def _pattern(parent: str, key: str) -> str | None:
    """The table path of ``key`` below ``parent``: the key itself, else the parent's ``<name>`` child."""
    if f"{parent}.{key}".lstrip(".") in results.BY_PATH:
        return f"{parent}.{key}".lstrip(".")
    free = [p for p in results.BY_PATH
            if p.startswith(f"{parent}.<".lstrip(".")) and "." not in p[len(parent) + 1:].split(">", 1)[1]
            and not p[len(parent) + 1:].split(">", 1)[1].startswith("[")]
    return free[0] if free else None


def numeric_keys(doc, parent: str = ""):
    """(table path, value) of every number in ``doc``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = _pattern(parent, k)
            assert path is not None, f"{parent}.{k}: no record"
            yield from numeric_keys(v, path)
    elif isinstance(doc, list):
        for v in doc:
            yield from numeric_keys(v, parent + "[]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield parent, doc


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_every_number_has_a_record_with_unit_and_label(spec):
    seen = 0
    for path, value in numeric_keys(document(str(spec))):
        k = results.BY_PATH[path]
        seen += 1
        if "<" in k.name:  # a searched or swept field's value: the spec's field, not a result
            continue
        assert k.unit, path
        assert k.label_in("label"), path
        assert not k.dim or k.dim in results.DIMS, path
        if isinstance(value, int) and k.unit not in ("field's", "by's", "item's", "constraint's"):
            assert k.integral, f"{path} is written as an integer but its record is not integral"
    assert seen


def test_integral_keys_are_whole_in_json():
    """A whole float under an integral key is written as an integer, under any other as a float."""
    assert output.stable_number(14.0, "hops") == 14 and isinstance(output.stable_number(14.0, "hops"), int)
    assert isinstance(output.stable_number(3.0, "speedup"), float)
    for name in ("gpus", "tp", "message_bytes", "memory_bytes_per_gpu", "count", "tokens_per_step"):
        assert name in results.integral_names(), name
    assert "step_time_s" not in results.integral_names()


def test_context_labels_differ_on_purpose():
    """The wordings a context keeps for itself (narrow columns, a search, a comparison)."""
    assert results.label_in("step_time_s") == "step time"
    assert results.label_in("step_time_s", "search") == "pipelined step"
    assert results.label_in("throughput_per_gpu", "search") == "tokens/s/GPU"
    assert results.label_in("throughput_per_gpu", "compare") == "tokens/s per GPU"
    assert results.label_in("memory_bytes_per_gpu", "short") == "memory/GPU"
    assert results.label_in("bubble", "search") == "bubble" and results.label_in("bubble") == "pipeline bubble"


def _sentinel(k: results.Key) -> results.Key:
    """``k`` with every label replaced by a marker naming its key and context."""
    return replace(k, **{c: f"«{k.name}:{c}»" for c in results.CONTEXTS})


def test_writers_take_labels_from_the_table(monkeypatch):
    """With every label in the table replaced by a marker, the writers' metric headings are all markers: a
    writer that typed a label of its own would show it here."""
    from ccost.report import build

    doc = document(str(REPO / "specs" / "search-fleet.ccost"))
    sweep_doc = document(str(REPO / "specs" / "a4-tp-scaling.ccost"))
    compare_doc = document(str(REPO / "specs" / "a1-tp-decode.ccost"))
    marked = {p: _sentinel(k) for p, k in results.BY_PATH.items()}
    monkeypatch.setattr(results, "BY_PATH", marked)

    # the review: sweep, search and comparison tables, key numbers
    name, s = next(iter(sweep_doc["sweeps"].items()))
    sw = build.sweep_section(name, s, None, charts=False)
    fields = len(s["field"])
    heads = [h for h in sw.table.headers[fields:] if h != "optimum"]
    assert heads and all(h.startswith("«") and h.endswith(":short»") for h in heads), heads
    name, s = next(iter(doc["searches"].items()))
    se = build.search_section(name, s, charts=False)
    heads = se.top.headers[len(s["axes"]):]
    assert heads and all(h.endswith(":search»") for h in heads), heads
    name, c = next(iter(compare_doc["compares"].items()))
    co = build.compare_section(name, c, compare_doc["plans"], charts=False)
    assert all(r[0].startswith("«") for r in co.table.rows if r[0] != build.RANKED_FIRST_ROW), \
        [r[0] for r in co.table.rows]
    kn = build.key_numbers_table(next(iter(compare_doc["plans"].values())))
    assert all(r[0].startswith("«") and (r[2] == "" or r[2].startswith("«")) for r in kn.rows), kn.rows

    # ccost eval's text: the plan block's metric lines, the sweep and search headings
    text = output.to_text(compare_doc) + output.to_text(sweep_doc) + output.to_text(doc)
    words = ("GPUs", "weights per GPU", "memory per GPU", "compute", "communication", "exposed communication",
             "step time", "overhead", "speedup", "efficiency", "pipeline bubble", "throughput", "latency")
    for line in text.splitlines():
        assert not line.strip().startswith(words), line  # a metric line or heading typed by the writer
    for word in ("pipelined step", "memory/GPU"):  # (tokens/s/GPU is also a unit in sentences)
        assert word not in text, word
    for marker in ("«step_time_s:text»", "«comm_time_s:text»", "«latency_s:search»", "«overhead:label»"):
        assert marker in text, marker


def test_a_context_label_is_found_through_a_bare_name():
    # a bare name finds the first record of that name (a plan's serve record before a sweep point's): the
    # context labels must sit there, or a writer silently falls back to the long label
    from ccost.report import view as V

    assert V.label("output_tokens_per_s", "short") == "output tok/s"
    assert V.label("tpot_s", "review") == "TPOT (inter-token)"
    assert V.fmt_value("memory", 80e9) == "80 GB"  # a record with no number's dimension: by its name


def test_the_step_line_names_a_separate_pass_time_only_when_it_reads_differently():
    # The pipelined step and one pass through the stages can differ in the last bit where they are the same
    # time (a steady pipeline with P = M = 1 adds the host time in another order): the text shows the pass
    # only when the two print differently.
    from ccost import evaluate
    from ccost.check import load_spec

    spec, _ = load_spec(str(Path(__file__).resolve().parent.parent / "specs" / "mixtral-ep.ccost"))
    doc = evaluate.results_document(evaluate.evaluate(spec))["plans"]["ep8"]
    for latency, shown in ((doc["step_time_s"] * (1 + 1e-15), False), (doc["step_time_s"], False),
                           (doc["step_time_s"] / 2, True)):
        text = output.plan_text("ep8", {**doc, "latency_s": latency})
        assert ("one pass through the stages" in text) is shown, latency
