"""The review's chapter "Capacity for the demand": every number it prints is the
capacity search's own (ccost.capacity), formatted; the chapter answers with the fleet to buy, puts the
aggregated and the disaggregated answer and N+1 side by side, draws their latencies against the SLOs, says
what 1.5× the traffic needs and lists the chosen fleet's engine commands. The rendered pages are looked at
by hand (docs/capacity.md says how); here the view model, without charts or a PDF."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost import evaluate, units
from ccost.check import load_spec
from ccost.report import build

SPEC = Path(__file__).resolve().parent.parent / "specs" / "sla-mixtral-h100.ccost"


@pytest.fixture(scope="module")
def doc():
    spec, _ = load_spec(str(SPEC))
    return evaluate.results_document(evaluate.evaluate(spec))


def test_the_answer_is_the_searchs_chosen_fleet(doc):
    s = doc["searches"]["fleet"]
    c = build.capacity_section("fleet", s, charts=False)
    ch = s["chosen"]
    assert c.verdict.startswith(f"Buy {ch['gpus']:,} GPUs of {ch['cluster']}, {ch['mode']}")
    assert units.format_quantity(ch["cost_per_month_usd"], units.MONEY) in c.verdict
    assert units.format_quantity(ch["simulated"]["tpot_p99_s"], units.TIME) in c.verdict
    # side by side: aggregated, disaggregated (and N+1 when the search found one), each its own figures
    heads = c.answers.headers
    assert heads[1:3] == ("aggregated", "disaggregated")
    rows = {r[0]: r[1:] for r in c.answers.rows}
    for j, mode in enumerate(("aggregated", "disaggregated")):
        f = s[mode]
        assert rows["GPUs"][j] == f"{f['gpus']:,}"
        assert rows["cost per month"][j] == units.format_quantity(f["cost_per_month_usd"], units.MONEY)
        sim = f["simulated"]
        assert rows["TTFT p50 / p99 (simulated)"][j] == (units.format_quantity(sim["ttft_p50_s"], units.TIME) + " / "
                                                         + units.format_quantity(sim["ttft_p99_s"], units.TIME))
        assert rows["headroom: capacity / rate − 1"][j] == units.format_percent(f["headroom"])
    if s["n_plus_1"]:
        down = s["n_plus_1"]["one_down"]["simulated"]
        assert heads[3] == "N+1 (one replica down)"
        assert rows["TPOT p50 / p99 (simulated)"][2].endswith(units.format_quantity(down["tpot_p99_s"], units.TIME))


def test_growth_layouts_and_launch_come_from_the_document(doc):
    s = doc["searches"]["fleet"]
    c = build.capacity_section("fleet", s, charts=False)
    g = s["growth"]
    assert c.growth.startswith(f"At 1.5× the traffic ({g['rate_per_s']:g} requests/s, screened)")
    if g["fleet"]:
        assert f"{g['fleet']['gpus']:,} GPUs" in c.growth
    # each listed layout: its replicas × its GPUs per replica, the replicas the search computed
    for r in c.layouts.rows:
        assert int(r[5]) == int(r[4]) * int(r[1])
    cmds = dict(c.launch)
    engine = s["chosen"]["launch"]["engines"][0]
    assert cmds[f"{engine['count']} × {engine['role']} engine, vLLM"] == engine["vllm"]
    assert cmds["replay the demand"] == s["chosen"]["launch"]["benchmark"]


def test_a_search_that_finds_no_fleet_says_so(doc):
    s = doc["searches"]["fleet"]
    none = dict(s, chosen=None, aggregated=None, disaggregated=None, n_plus_1=None)
    c = build.capacity_section("fleet", none, charts=False)
    assert c.verdict.startswith("No fleet in this search meets the SLOs") and c.figure is None and not c.launch


def test_a_sentence_in_a_plans_section_goes_under_the_key_numbers_not_into_a_cell():
    # an online plan's `method` is a sentence: in a right-aligned value cell that does not wrap it ran
    # 730 px past the page's margin (tests/test_report.py::test_nothing_overflows_the_page[sla-*])
    from ccost.report.build import KV_VALUE_CHARS, key_numbers_table

    method = "simulated: " + "a long description of how, " * 4
    table = key_numbers_table({"gpus": 4, "online": {"engines": 1, "method": method}})
    assert all(len(cell) <= KV_VALUE_CHARS for row in table.rows for cell in row)
    assert method.strip() in table.caption


def test_a_sentence_the_plans_notes_carry_is_not_repeated_under_its_key_numbers(doc):
    # the online plan's method is in its note ("Latencies are simulated: …"): the caption did say it again
    from ccost.model import online
    from ccost.report.build import key_numbers_table

    sec = {"engines": 1, "method": "simulated: " + "a long description of how, " * 4, "traffic": "chat",
           "rate_per_s": 6.0, "peak_rate_per_s": 8.0, "max_seqs": 128, "step_tokens": 8192}
    note = online.review_note(sec)
    assert sec["method"] in note
    assert key_numbers_table({"gpus": 4, "online": sec}, [note]).caption == ""
    assert sec["method"].strip() in key_numbers_table({"gpus": 4, "online": sec}).caption
