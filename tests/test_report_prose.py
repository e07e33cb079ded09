"""Review text that matches the code: prose generated from the code's own defaults,
`code spans` rendered as code, one unit per quantity kind (bytes in decimal units, shares in %), a
comparison showing the metric it ranks by, and sweep optima only along GPU counts.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from ccost import evaluate, output, schema
from ccost.model import costs, lower
from ccost import spec as S
from ccost.check import check_text, load_spec
from ccost.report import build, render, review

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.ccost"))


def body(html: str) -> str:
    """The review without its appendix (the spec's own text, comments and all, is quoted there)."""
    return html.split('id="appendix"')[0]


def visible_text(html: str) -> str:
    """Text a reader sees: tags dropped, <code> contents kept."""
    return re.sub(r"<[^>]+>", " ", body(html))


@pytest.fixture(scope="module")
def reviews() -> dict[str, str]:
    """The screen HTML of every example spec's review (no charts: this module tests the words)."""
    out = {}
    for path in SPECS:
        rev = review(path, include_git=False, environ={"SOURCE_DATE_EPOCH": "1767225600"}, cwd=REPO,
                     charts=False)
        out[path.stem] = render.render_html(rev.view, "screen")
    return out


# ---------------------------------------------------------------------------------------------------
# One-shot volume: the default the code uses, in the prose

def test_one_shot_default_is_one_value_everywhere():
    """The schema fills the default in; the dataclass, the lowering and the formulas must agree with it."""
    default = schema.SCHEMA["plan"].field("one_shot_volume").default
    assert default == "egress"  # what costs.volume's docstring calls the default, A1 2.585 ms
    assert {f.name: f.default for f in S.Plan.__dataclass_fields__.values()}["one_shot_volume"] == default
    assert {f.name: f.default for f in lower.Static.__dataclass_fields__.values()}["one_shot_volume"] == default
    for fn in (costs.volume, costs.collective_cost, costs.group_cost):
        assert inspect.signature(fn).parameters["one_shot_volume"].default == default, fn.__name__
    assert set(evaluate.ONE_SHOT_TEXT) == set(S.ONE_SHOT_VOLUMES)


def test_not_modelled_one_shot_text_is_generated_from_the_default(monkeypatch):
    text = build.one_shot_volume_text()
    assert text.startswith("By default (`one_shot_volume = egress`)")
    assert evaluate.ONE_SHOT_TEXT["egress"] in text and evaluate.ONE_SHOT_TEXT["ring"] in text
    assert "charges " + evaluate.ONE_SHOT_TEXT["ring"] + " instead" in text
    # generated, not typed: were the default the ring volume, the paragraph would say so
    monkeypatch.setattr(build, "one_shot_default", lambda: "ring")
    flipped = build.one_shot_volume_text()
    assert flipped.startswith("By default (`one_shot_volume = ring`)")
    assert "`one_shot_volume = egress` charges " + evaluate.ONE_SHOT_TEXT["egress"] in flipped


def test_a1_review_states_the_default_and_what_each_plan_charged(reviews):
    text = visible_text(reviews["a1-tp-decode"].split('id="assumptions"')[1])
    assert "By default ( one_shot_volume = egress )" in text
    # tp8_one_shot writes one_shot_volume = ring (the notes' convention): its assumption says so
    plan = text.split("plan tp8_one_shot")[1].split("Not modelled")[0]
    assert "One-shot volume:  ring " in plan and "the ring volume 2(P−1)/P·m" in plan
    assert "(the default)" not in plan
    assert "ring volume 2(P−1)/P·m per GPU, as the reference notes do" not in text  # the old, wrong line


def test_a_one_shot_plan_on_the_default_says_it_is_the_default(tmp_path):
    spec = (REPO / "specs" / "a1-tp-decode.ccost").read_text(encoding="utf-8").replace(
        "  one_shot_volume = ring  # the notes' convention\n", "")
    path = tmp_path / "a1.ccost"
    path.write_text(spec, encoding="utf-8")
    rev = review(path, include_git=False, environ={"SOURCE_DATE_EPOCH": "1767225600"}, cwd=tmp_path,
                 charts=False)
    [a] = [a for a in rev.view.assumptions if a.topic == "plan tp8_one_shot"]
    assert "One-shot volume: `egress` (the default), " + evaluate.ONE_SHOT_TEXT["egress"] in a.text


# ---------------------------------------------------------------------------------------------------
# Backticks are code

def test_prose_filter_renders_code_spans_and_escapes():
    assert str(render.prose("Choose `tp8` <b>now</b>")) == "Choose <code>tp8</code> &lt;b&gt;now&lt;/b&gt;"
    assert str(render.prose("`<x>`")) == "<code>&lt;x&gt;</code>"
    assert str(render.prose("a lone ` stays")) == "a lone ` stays"


def test_no_literal_backticks_in_any_review(reviews):
    for name, html in reviews.items():
        assert "`" not in body(html), name
    assert "Choose <code>tp8_one_shot</code>" in reviews["a1-tp-decode"]


# ---------------------------------------------------------------------------------------------------
# One unit convention per quantity kind

BINARY = re.compile(r"\d\s?[KMGTP]iB\b")


def test_bytes_are_decimal_in_every_review(reviews):
    for name, html in reviews.items():
        assert not BINARY.search(visible_text(html)), (name, BINARY.search(visible_text(html)).group())
    a1 = visible_text(reviews["a1-tp-decode"])
    # 524,288 B message and 917,504 B ring volume (A1), 17.62 GB of weights per GPU beside 80 GB
    assert "524.3 kB" in a1 and "917.5 kB" in a1 and "17.62 GB" in a1 and "80 GB" in a1


def test_memory_derivation_adds_like_units(reviews):
    """The issue's example: `57.45 GB + 213.5 GiB = 286.7 GB` came from the training memory step."""
    text = visible_text(reviews["deepseek-v3-train"])
    for m in re.finditer(r"(\d[\d.,]*) ([kMGT]?B) \+ (\d[\d.,]*) ([kMGT]?B)", text):
        assert "i" not in m.group(2) + m.group(4)
    assert not BINARY.search(text)


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_eval_and_explain_text_use_decimal_bytes(path: Path, capsys):
    from ccost.cli import main

    assert main(["eval", str(path)]) == 0
    out = capsys.readouterr().out
    assert not BINARY.search(out), BINARY.search(out).group()
    spec, _ = load_spec(str(path))
    first = next(iter(spec.local_plans or spec.plans))
    assert main(["explain", str(path), first]) == 0
    assert not BINARY.search(capsys.readouterr().out)


def test_shares_are_percent_in_the_derivation(capsys):
    from ccost.cli import main

    assert main(["explain", str(REPO / "specs" / "b-efficiency.ccost"), "ddp_large_batch"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  overlap = 90 %", out, re.M)
    assert re.search(r"^  overhead = .* = 50 %", out, re.M)  # 50 ms / 100 ms
    assert re.search(r"^  η = .* = 95.2 %", out, re.M)  # 100 / (100 + 50·(1 − 0.9)) = 0.9524
    assert not re.search(r"^  (overlap|overhead|efficiency|η|bubble) = .*= 0\.\d+ ", out, re.M)


# ---------------------------------------------------------------------------------------------------
# A comparison shows what it ranks by

@pytest.mark.parametrize("by, label, value", [("latency", "latency (ranked by)", "6.867 ms"),
                                              ("throughput", "tokens/s (ranked by)", "4660")])
def test_compare_table_leads_with_the_ranked_metric(by, label, value):
    spec, _ = load_spec(str(REPO / "specs" / "a1-tp-decode.ccost"))
    doc = evaluate.results_document(evaluate.evaluate(spec))
    cmp = dict(doc["compares"]["algorithms"], by=by)
    section = build.compare_section("algorithms", cmp, doc["plans"], charts=False)
    first = section.table.rows[0]
    assert first[0] == label
    # A1 one-shot (ring volume): latency 5.261 + 1.606 = 6.867 ms; 32 tokens / 6.867 ms = 4,660 tokens/s
    assert value in first[1:]
    assert not any(r[0] == label.split(" (")[0] for r in section.table.rows)  # not a second time below


# ---------------------------------------------------------------------------------------------------
# Sweep optima only along GPU counts; overlap in %

SWEEPS = '''
import "std/gpus.ccost"
import "std/links.ccost"
import "std/clusters.ccost"
import "std/models.ccost"

plan tp8 { model = llama3_70b; cluster = hgx_h100; phase = decode; batch = 32; tp = 8; allreduce = ring }
sweep by_overlap { base = tp8; overlap = [0, 50 %, 90 %] }
sweep by_model { base = tp8; model = [llama3_70b, llama3_8b] }
sweep by_tp { base = tp8; tp = [1, 2, 4, 8] }
'''


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweeps") / "sweeps.ccost"
    path.write_text(SWEEPS, encoding="utf-8")
    result = check_text(SWEEPS, str(path))
    assert result.spec is not None, [d.message for d in result.diagnostics]
    return path, evaluate.results_document(evaluate.evaluate(result.spec))


def test_no_optimum_for_sweeps_that_do_not_vary_a_gpu_count(sweeps):
    _, doc = sweeps
    for name in ("by_overlap", "by_model"):
        assert doc["sweeps"][name]["time_optimal"] is None and doc["sweeps"][name]["cost_optimal"] == {}
    assert doc["sweeps"]["by_tp"]["time_optimal"] == {"tp": 8}  # decode on one node: more TP is faster
    assert doc["sweeps"]["by_tp"]["cost_optimal"]


def test_eval_text_and_review_of_such_sweeps(sweeps, capsys):
    from ccost.cli import main

    path, doc = sweeps
    assert main(["eval", str(path)]) == 0
    out = capsys.readouterr().out
    by_overlap = out.split("sweep by_overlap")[1].split("sweep by_model")[0]
    assert "optimal" not in by_overlap and "optimal" not in out.split("sweep by_model")[1].split("sweep by_tp")[0]
    assert re.search(r"^\s+90 %\s", by_overlap, re.M) and "0.9" not in by_overlap
    assert "time-optimal: tp = 8" in out
    sec = build.sweep_section("by_overlap", doc["sweeps"]["by_overlap"], None, charts=False)
    assert "optimum" not in sec.table.headers
    assert [r[0] for r in sec.table.rows] == ["0 %", "50 %", "90 %"]
    assert sec.optima and sec.optima[0].startswith("No optimum is marked: the sweep varies overlap")
    tp = build.sweep_section("by_tp", doc["sweeps"]["by_tp"], None, charts=False)
    assert "optimum" in tp.table.headers and tp.optima[0].startswith("Time-optimal point: tp = 8")


def test_fmt_field_prints_shares_in_percent():
    assert output.fmt_field("overlap", 0.9) == "90 %"
    assert output.fmt_field("tp", 8) == "8"
    assert output.fmt_field("model", "llama3_8b") == "llama3_8b"
