"""Checking in time linear in the spec: the structures that used to be quadratic or
cubic give the same answers at sizes where they used to take minutes. The timing itself is measured in
bench/check_scaling.py (ratios, not assertions)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ccost.check import HINT_BUDGET, check_text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from check_scaling import chain, plans, unknown_refs


def test_long_extends_chain_children_first_inherits_from_the_root():
    n = 3000  # deeper than Python's recursion limit: the chain is walked iteratively
    result = check_text(chain(n, reverse=True), "chain.ccost")
    assert result.ok, result.errors[:3]
    last = result.spec.plans[f"p{n - 1}"]
    assert last.model.name == "m" and last.phase == "decode" and last.batch == (n - 1) % 64 + 1


def test_cycle_in_a_long_chain_is_reported_once_per_member():
    text = chain(2000) + "plan x1 extends x3 { batch = 2 }\nplan x2 extends x1 { }\nplan x3 extends x2 { }\n" \
        "plan y extends x3 { }\n"
    result = check_text(text, "cyc.ccost")
    cycles = [d for d in result.errors if "extends cycle" in d.message]
    assert sorted(d.message for d in cycles) == [
        "extends cycle: x1 → x3 → x2 → x1", "extends cycle: x2 → x1 → x3 → x2", "extends cycle: x3 → x2 → x1 → x3"]
    assert len(result.errors) == 3  # y, which leads into the cycle, is broken silently


# slow (~3 s): a 10k-plan linearity check, run by CI; the small cases above stay in the inner loop
@pytest.mark.slow
def test_ten_thousand_unknown_names_each_get_an_error():
    n = 10000  # quadratic, this took minutes (bench/check_scaling.py times 20,000)
    result = check_text(unknown_refs(n), "refs.ccost")
    e101 = [d for d in result.errors if d.code == "E101"]
    assert len(e101) == n
    assert all(d.span is not None and d.notes for d in e101)  # each keeps its place and what is in scope


@pytest.mark.slow  # ~3 s, as above
def test_ten_thousand_plans_with_references_check_clean():
    # each block used to build a map of every name it can see (for one rare hint): 20,000 plans took
    # 227 s against 6.2 s for 5,000; now 8.3 s against 1.8 s (bench/check_scaling.py)
    n = 10000
    result = check_text(plans(n), "plans.ccost")
    assert result.ok, result.errors[:3]
    assert len(result.spec.plans) == n
    assert result.spec.plans[f"q{n - 1}"].model.name == "m" and result.spec.plans["q63"].batch == 64


def test_did_you_mean_stops_when_the_budget_is_spent(monkeypatch):
    import ccost.check as C

    monkeypatch.setattr(C, "HINT_BUDGET", 25)
    models = "".join(f"model llama{i} {{ layers = 2; hidden = 64; params = 1e6 }}\n" for i in range(10))
    plans = "".join(f"plan p{i} {{ model = llama{i}x; cluster = c; phase = decode }}\n" for i in range(10))
    head = ("link nv { alpha = 1 us; bandwidth = 1 GB/s }\n"
            "gpu g { memory = 80 GB; hbm_bandwidth = 3 TB/s; flops = 1 PFLOP/s }\n"
            "cluster c { gpu = g; intra_node = nv }\n")
    e101 = [d for d in check_text(head + models + plans, "x.ccost").errors if d.code == "E101"]
    helps = [d.help for d in e101]
    # each search compares with the 10 models: two searches fit in a budget of 25, the rest get none
    assert helps[:2] == ["did you mean `llama0`?", "did you mean `llama1`?"]
    assert all(h is None or "did you mean" not in h for h in helps[2:])
    assert HINT_BUDGET >= 100_000  # the real budget: thousands of searches in an ordinary spec


def test_near_misspelling_still_gets_its_hint():
    text = ("link nvlink { alpha = 1 us; bandwidth = 1 GB/s }\n"
            "gpu g { memory = 80 GB; hbm_bandwidth = 3 TB/s; flops = 1 PFLOP/s }\n"
            "cluster c { gpu = g; intra_node = nvlnk }\n")
    [d] = check_text(text, "x.ccost").errors
    assert d.code == "E101" and d.help == "did you mean `nvlink`?"
