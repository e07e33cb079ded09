"""Money and power of a plan (``ccost.model.economics``): the figures worked by hand from a spec's
inputs, the same figures in ``explain``, a search ranked by cost, and the diagnostics of a spec that asks
for a cost it cannot have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccost import check, cli, evaluate, output, units

SPECS = Path(__file__).resolve().parent.parent / "specs"

# A self-contained spec whose numbers are easy to follow by hand: the compute time is given, there is
# no collective (tp = 1; data-parallel decode replicas do not talk), so the step is exactly 20 ms.
PRICED = """
link nvlink { alpha = 2 us; bandwidth = 450 GB/s }
gpu g { memory = 80 GB; hbm_bandwidth = 3.35 TB/s; flops = 989 TFLOP/s
        price_per_hour = 4 USD/h; power = 700 W }
cluster c { gpu = g; gpus_per_node = 8; intra_node = nvlink
            host_power = 1600 W; pue = 1.25; electricity_price = 0.10 USD/kWh }
model m { layers = 2; hidden = 1024; params = 1e9 }
plan p { model = m; cluster = c; phase = decode; batch = 32; dp = 4; compute_time = 20 ms; load = 50 % }
"""


def _eval(text: str, path: Path) -> dict:
    path.write_text(text, encoding="utf-8")
    spec, _ = check.load_spec(str(path))
    return evaluate.evaluate(spec), spec


def test_cost_and_power_worked_by_hand(tmp_path):
    results, spec = _eval(PRICED, tmp_path / "priced.ccost")
    doc = results.plans["p"].doc
    c = doc["cost"]
    # The inputs, from the spec above:
    n = 1 * 1 * 1 * 4                    # GPUs: tp·pp·ep·dp
    tokens_per_step = 4 * 32 * 1         # dp replicas × batch × one new token per sequence (decode)
    step = 0.020                         # compute_time; no communication
    throughput = tokens_per_step / step  # 6,400 tokens/s
    assert doc["throughput_tokens_s"] == pytest.approx(6400.0, rel=1e-12)
    # Power: each GPU carries 1/8 of its node's 1,600 W host power; the facility adds 25 %.
    per_gpu_w = 700 + 1600 / 8           # 900 W
    facility_w = n * per_gpu_w * 1.25    # 4 × 900 × 1.25 = 4,500 W
    assert c["power_per_gpu_w"] == pytest.approx(900.0)
    assert c["power_w"] == pytest.approx(facility_w) == pytest.approx(4500.0)
    # Cost per hour: 4 GPUs at 4 USD/h, plus 4.5 kW × 0.10 USD/kWh = 0.45 USD/h of energy.
    per_hour = n * 4.0 + 4.5 * 0.10      # 16.45 USD/h
    assert c["price_per_gpu_hour_usd"] == pytest.approx(4.0)
    assert c["cost_per_hour_usd"] == pytest.approx(16.45)
    # A month is 730 h, paid whatever the load.
    assert c["cost_per_month_usd"] == pytest.approx(16.45 * 730)  # 12,008.50 USD
    # At 50 % load an hour serves 6,400 × 0.5 × 3,600 = 11.52 M output tokens.
    per_mtok = per_hour / (throughput * 0.5 * 3600 / 1e6)  # 16.45 / 11.52 = 1.42795 USD
    assert per_mtok == pytest.approx(1.4279514, rel=1e-6)
    assert c["cost_per_mtok_usd"] == pytest.approx(per_mtok)
    assert c["cost_per_mtok_output_usd"] == c["cost_per_mtok_usd"]
    assert "cost_per_mtok_input_usd" not in c
    assert c["tokens"] == "output" and c["load"] == 0.5
    assert c["tokens_per_month"] == pytest.approx(6400 * 0.5 * 730 * 3600)  # 8.4096e9
    # Energy: 4,500 W for 6,400 tokens/s.
    assert c["tokens_per_joule"] == pytest.approx(6400 / 4500)  # 1.422
    assert c["energy_per_token_j"] == pytest.approx(4500 / 6400)  # 0.7031 J
    # checklist item 12 states the cost (no threshold in this file's policy)
    item = doc["checklist"][-1]
    assert item["id"] == 12 and item["status"] == "pass" and item["threshold"] is None
    assert "1.43 USD per million output tokens at 50 % load" in item["note"]


def test_explain_derives_each_cost_number_with_the_same_values(tmp_path):
    results, spec = _eval(PRICED, tmp_path / "priced.ccost")
    c = results.plans["p"].doc["cost"]
    sections = dict(evaluate.explain_sections(spec, "p"))
    steps = {s.name: s for s in sections["cost and power"]}
    pairs = {"C_hour": "cost_per_hour_usd", "C_month": "cost_per_month_usd", "C_Mtok,out": "cost_per_mtok_usd",
             "P": "power_w", "P_GPU": "power_per_gpu_w", "tokens_per_J": "tokens_per_joule",
             "E_token": "energy_per_token_j", "tokens_month": "tokens_per_month"}
    for step, key in pairs.items():
        assert output.stable_number(steps[step].value, key) == output.stable_number(c[key], key), step
    assert steps["C_rate"].formula == "N·p_GPU + P·p_E"
    assert steps["C_Mtok,out"].formula == "C_rate·10⁶/(throughput·load)"
    assert steps["C_Mtok,out"].result == "1.43 USD"
    assert steps["C_rate"].result == "16.45 USD/h"
    inputs = {s.name: s for s in evaluate.explain(spec, "p") if s.kind == "input"}
    assert inputs["p_GPU"].result == "4 USD/h" and inputs["P_TDP"].result == "700 W"
    assert inputs["p_E"].result == "0.1 USD/kWh" and inputs["t_month"].result == "730 h"


def test_price_per_node_hour_is_shared_by_the_node_s_gpus(tmp_path):
    text = PRICED.replace("price_per_hour = 4 USD/h;", "").replace(
        "host_power = 1600 W;", "price_per_node_hour = 32 USD/h; node_power = 7.2 kW;")
    results, _ = _eval(text, tmp_path / "node.ccost")
    c = results.plans["p"].doc["cost"]
    assert c["price_per_gpu_hour_usd"] == pytest.approx(32 / 8)
    assert c["power_per_gpu_w"] == pytest.approx(7200 / 8)  # node_power replaces TDP + host share
    assert c["cost_per_hour_usd"] == pytest.approx(16.45)


def test_a_prefill_plan_prices_input_tokens(tmp_path):
    text = PRICED.replace("phase = decode", "phase = prefill; seq = 1000")
    results, _ = _eval(text, tmp_path / "prefill.ccost")
    c = results.plans["p"].doc["cost"]
    assert c["tokens"] == "input" and "cost_per_mtok_output_usd" not in c
    # 4 × 32 × 1,000 prompt tokens in 20 ms = 6.4 M tokens/s
    assert c["cost_per_mtok_input_usd"] == pytest.approx(16.45 / (6.4e6 * 0.5 * 3600 / 1e6))


def test_a_spec_without_prices_still_works_and_says_not_priced(tmp_path, capsys):
    text = PRICED.replace("price_per_hour = 4 USD/h;", "").replace("power = 700 W", "")
    results, _ = _eval(text, tmp_path / "plain.ccost")
    doc = results.plans["p"].doc
    c = doc["cost"]
    assert c["priced"] is False and c["cost_per_mtok_usd"] is None and c["power_w"] is None
    assert "not priced" in c["note"] and "price_per_hour" in c["note"]
    item = doc["checklist"][-1]
    assert item["id"] == 12 and item["status"] == "n/a"
    # the CLI prints it; nothing crashes
    assert cli.main(["eval", str(tmp_path / "plain.ccost"), "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["plans"]["p"]["cost"]["priced"] is False


def test_policy_threshold_on_cost_passes_and_fails(tmp_path):
    ok, _ = _eval(PRICED + "policy { max_cost_per_mtok = 1.5 USD }", tmp_path / "ok.ccost")
    item = ok.plans["p"].doc["checklist"][-1]
    assert item["status"] == "pass" and item["threshold"] == 1.5
    bad, _ = _eval(PRICED + "policy { max_cost_per_mtok = 1.4 USD }", tmp_path / "bad.ccost")
    item = bad.plans["p"].doc["checklist"][-1]
    assert item["status"] == "fail" and "exceeds the policy's 1.40 USD" in item["note"]


def test_cost_policy_on_an_unpriced_plan_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "unpriced.ccost"
    path.write_text(PRICED.replace("price_per_hour = 4 USD/h;", "") + "policy { max_cost_per_mtok = 2 USD }\n",
                    encoding="utf-8")
    code = cli.main(["eval", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "error[E403]" in err and "not priced" in err and "max_cost_per_mtok" in err
    assert "price_per_hour" in err  # the fix
    assert "unpriced.ccost:9:" in err  # the policy line


def test_cost_search_ranks_by_cost_and_refuses_an_unpriced_base(tmp_path, capsys):
    search = ("search s { base = p; dp = [1, 2, 4]; batch = [8, 32]; max_gpus = 8; objective = cost_per_token"
              "; top = 3 }\n")
    results, _ = _eval(PRICED + search, tmp_path / "search.ccost")
    top = results.searches["s"]["top"]
    costs = [r["cost_per_mtok_usd"] for r in top]
    assert costs == sorted(costs)
    # by hand: batch 32 on any dp gives 32 tokens per GPU per 20 ms = 1,600 tokens/s per GPU, and
    # a GPU-hour costs 4 USD + 1.125 kW × 0.10 USD/kWh = 4.1125 USD: 4.1125 / (1,600 × 0.5 × 3,600) × 10⁶
    assert costs[0] == pytest.approx(4.1125 / (1600 * 0.5 * 3600) * 1e6)
    # dp = 2 and 4 are replicas of dp = 1 at the same cost per token: listed once, on the fewest GPUs
    assert (top[0]["batch"], top[0]["dp"]) == (32, 1) and all(r["batch"] == 8 for r in top[1:])
    results, _ = _eval(PRICED + search.replace("top = 3", "top = 3; distinct = false"), tmp_path / "every.ccost")
    every = results.searches["s"]["top"]
    assert [(r["batch"], r["dp"]) for r in every] == [(32, 1), (32, 2), (32, 4)]
    path = tmp_path / "unpriced-search.ccost"
    path.write_text(PRICED.replace("price_per_hour = 4 USD/h;", "") + search, encoding="utf-8")
    code = cli.main(["eval", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and "error[E403]" in err and "cost_per_token" in err and "Traceback" not in err


@pytest.mark.parametrize("field, value, needs", [
    ("price_per_hour", "700 W", "money per time"),
    ("power", "4 USD/h", "energy per time"),
])
def test_a_wrong_unit_names_the_field_and_what_it_needs(tmp_path, field, value, needs):
    text = PRICED.replace("price_per_hour = 4 USD/h; power = 700 W", f"{field} = {value}")
    result = check.check_text(text, str(tmp_path / "bad.ccost"))
    msgs = " ".join(d.message + " " + (d.help or "") for d in result.errors)
    assert result.errors and field in msgs and needs in msgs


def test_money_and_power_units_are_pint_checked():
    v, d = units.parse_quantity("0.12 USD/kWh")
    assert v == pytest.approx(0.12 / 3.6e6) and d == units.ENERGY_PRICE
    assert units.parse_quantity("10.2 kW") == (10200.0, units.POWER)
    v, d = units.parse_quantity("3.78 USD/h")
    assert v == pytest.approx(3.78 / 3600) and d == units.MONEY_RATE
    assert units.format_quantity(3.78 / 3600, units.MONEY_RATE) == "3.78 USD/h"
    assert units.format_quantity(730 * 3600, units.TIME) == "730 h"


def test_the_serving_review_leads_with_cost_from_the_std_prices():
    spec, _ = check.load_spec(str(SPECS / "llama3-70b-serving.ccost"))
    results = evaluate.evaluate(spec)
    c = results.plans["tp8"].doc["cost"]
    # std h100: 3.78 USD/h (Lambda list price), 700 W; the plan uses 8 GPUs at the default 100 % load
    assert c["cost_per_hour_usd"] == pytest.approx(8 * 3.78)
    thr = results.plans["tp8"].doc["throughput_tokens_s"]
    assert c["cost_per_mtok_output_usd"] == pytest.approx(8 * 3.78 / (thr * 3600) * 1e6)
    assert c["tokens_per_joule"] == pytest.approx(thr / (8 * 700))
    from ccost.report import review

    view = review(SPECS / "llama3-70b-serving.ccost", include_git=False, charts=False).view
    assert view.summary.cost is not None
    assert view.summary.cost.headers[1] == "cost per million tokens"
    rows = {r[0]: r for r in view.summary.cost.rows}
    # the table shows the document's number (checked by hand above), rounded to cents
    assert rows["tp8"][1] == f"{c['cost_per_mtok_output_usd']:.2f} USD (output)"
    # tp4_dp2_b64 needs 78.2 GB per GPU against the 72 GB policy: its price is flagged, not offered
    assert rows["tp4_dp2_b64"][1].endswith(" *") and not rows["tp8"][1].endswith("*")
    assert "* does not fit in memory (tp4_dp2_b64)" in view.summary.cost_note


def test_the_stack_s_host_power_is_added_when_the_cluster_gives_none(tmp_path):
    stack = "stack s { host_power = 150 W }\n"
    text = (PRICED.replace("host_power = 1600 W;", "").replace("load = 50 % }", "load = 50 %; stack = s }")
            + stack)
    results, spec = _eval(text, tmp_path / "stack.ccost")
    c = results.plans["p"].doc["cost"]
    assert c["power_per_gpu_w"] == pytest.approx(700 + 150)  # TDP + the stack's host share per GPU
    assert c["power_w"] == pytest.approx(4 * 850 * 1.25)
    steps = {s.name: s for s in evaluate.explain(spec, "p")}
    assert steps["P_GPU"].formula == "P_TDP + P_host,GPU"
    # the cluster's own host_power (measured hardware) wins over the stack's estimate
    results, _ = _eval(PRICED.replace("load = 50 % }", "load = 50 %; stack = s }") + stack,
                       tmp_path / "both.ccost")
    assert results.plans["p"].doc["cost"]["power_per_gpu_w"] == pytest.approx(700 + 1600 / 8)


@pytest.mark.parametrize("name", ["llama3-70b-serving.ccost", "mixtral-ep.ccost", "deepseek-v3-train.ccost"])
def test_every_priced_plan_s_cost_is_its_explain_value(name):
    """Bit for bit: the document's cost numbers are the values explain derives (same formulas, derive mode)."""
    spec, _ = check.load_spec(str(SPECS / name))
    results = evaluate.evaluate(spec)
    priced = 0
    for pname, r in results.plans.items():
        c = r.doc["cost"]
        steps = {s.name: s.value for s in evaluate.explain(spec, pname)}
        if c["power_w"] is not None:
            assert steps["P"] == c["power_w"] and steps["tokens_per_J"] == c["tokens_per_joule"]
        if c["priced"]:
            priced += 1
            sub = {"output": "out", "input": "in", "training": "train"}[c["tokens"]]
            assert steps[f"C_Mtok,{sub}"] == c["cost_per_mtok_usd"]
            assert steps["C_hour"] == c["cost_per_hour_usd"] and steps["C_month"] == c["cost_per_month_usd"]
    assert priced  # these specs run on the std h100, which has a list price


def test_diff_lists_what_a_price_change_did_to_the_cost(tmp_path, capsys):
    old, new = tmp_path / "old.ccost", tmp_path / "new.ccost"
    old.write_text(PRICED, encoding="utf-8")
    new.write_text(PRICED.replace("price_per_hour = 4 USD/h", "price_per_hour = 3 USD/h"), encoding="utf-8")
    assert cli.main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "gpu g.price_per_hour: 4 USD/h → 3 USD/h" in out
    # 4 × 3 + 0.45 = 12.45 USD/h against 16.45: −24.3 %; per million tokens 12.45 / 11.52 = 1.08 USD
    assert "p cost per hour: 16.45 USD → 12.45 USD (−24.3 %)" in out
    assert "p cost per million tokens: 1.43 USD → 1.08 USD (−24.3 %)" in out
    assert "power" not in out.split("results changed:")[1]  # the power did not change
