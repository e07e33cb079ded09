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


def _fleet(cost, tp=4, dp=1, **sim):
    base = {"cluster": "c", "mode": "aggregated", "tp": tp, "pp": 1, "ep": 1, "dp": dp, "max_seqs": 128,
            "step_tokens": 512, "prefill_workers": 0, "decode_workers": 0, "prefill_tp": 0, "gpus": tp * dp,
            "cost_per_month_usd": cost}
    return {**base, "simulated": {"meets": False, "stable": True, **sim}}


def test_cheaper_fleets_that_missed_by_hand():
    """Confirmations of a search whose answer costs 100 USD a month: a 50 USD fleet whose TPOT p99 is 30.2 ms
    against 30 ms (and its second simulation, a replica down, which is not another fleet), a 40 USD one whose
    queue grows, a 150 USD one (dearer than the answer) and a 30 USD one that met: the table lists the 40 and
    the 50 USD fleets, cheapest first, with what each misses and its ratio (30.2 / 30 = 1.0067)."""
    from ccost import output

    s = {"slo_percentile": "p99", "max_ttft_s": 1.0, "max_tpot_s": 0.030, "max_e2e_s": None,
         "min_slo_goodput": None,
         "chosen": _fleet(100.0, tp=8, meets=True, ttft_p99_s=0.2, tpot_p99_s=0.02, slo_ratio=0.02 / 0.030),
         "confirmations": [
             _fleet(50.0, ttft_slo_s=0.5, tpot_slo_s=0.0302, slo_ratio=0.0302 / 0.030),
             _fleet(150.0, tp=8, ttft_slo_s=0.2, tpot_slo_s=0.031, slo_ratio=0.031 / 0.030),
             {**_fleet(30.0, tp=2), "simulated": {"meets": True, "stable": True}},
             _fleet(40.0, dp=2, ttft_slo_s=9.0, tpot_slo_s=0.02, stable=False, slo_ratio=9.0),
             _fleet(50.0, ttft_slo_s=2.0, tpot_slo_s=0.05, slo_ratio=2.0)]}  # the same fleet again: N+1
    got = output.capacity_near_misses(s)
    assert [(r["cost_per_month_usd"], m, w) for r, m, w in got] == [
        (40.0, ["TTFT p99 9 s > 1 s", "its queue grows without bound"], None),
        (50.0, ["TPOT p99 30.2 ms > 30 ms"], pytest.approx(1.0066667, rel=1e-6))]
    c = build.capacity_section("fleet", {**s, "sized_rate_per_s": 8.0, "aggregated": None, "disaggregated": None,
                                         "n_plus_1": None}, charts=False)
    assert [r[-2:] for r in c.missed.rows] == [("TTFT p99 9 s > 1 s; its queue grows without bound", "—"),
                                                ("TPOT p99 30.2 ms > 30 ms", "1.007×")]


def test_the_simulated_slo_ratio_is_the_worst_figure_over_its_limit(doc):
    # every simulated fleet of the Mixtral search: its ratio is the largest of its figures at the SLO's
    # percentile over the search's limits, recomputed here from the document's own figures
    s = doc["searches"]["fleet"]
    for r in s["confirmations"]:
        sim = r["simulated"]
        want = max(sim[f"{m}_slo_s"] / s[f"max_{m}_s"] for m in ("ttft", "tpot", "e2e") if s.get(f"max_{m}_s"))
        assert sim["slo_ratio"] == pytest.approx(want, rel=1e-12)
        assert (sim["slo_ratio"] <= 1) == sim["meets"] or not sim["stable"]
