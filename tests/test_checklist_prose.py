"""The checklist's sentences come from the values the numbers use (issue 26, item 6).

Item 1 said "no achieved_flops: peak FLOP/s used, compute is optimistic" while `ccost explain` showed the
stack's GEMM efficiency applied. Now the note is written from the rate the formulas ran on (``Inputs.R``,
what `explain` derives as R). By hand: H100 peak 989.4 TFLOP/s (std/gpus.ccost) × serving_default's
gemm_efficiency 66 % (std/stacks.ccost) = 653.0 TFLOP/s; under the `ideal` stack, the peak itself.
"""

from __future__ import annotations

from ccost import evaluate
from ccost.check import check_text
from ccost.commands.explain import render as explain

SPEC = '''import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "std/clusters.ccost"
import "std/stacks.ccost"
plan p { model = llama3_70b; cluster = hgx_h100; phase = prefill; batch = 1; seq = 8192; tp = 8 }
plan i extends p { stack = ideal }
'''


def _item1(spec, name):
    r = evaluate.evaluate_plan(spec.plans[name], spec.policy)
    return next(i for i in r.checklist if i["id"] == 1)


def test_item_1_names_the_rate_explain_derives():
    spec = check_text(SPEC, "/nowhere/p.ccost").spec
    item = _item1(spec, "p")
    assert item["status"] == "warn"  # no achieved_flops measured on this GPU
    assert "peak" not in item["note"] and "optimistic" not in item["note"]
    assert "the weight GEMMs run at 653 TFLOP/s, its flops 989.4 TFLOP/s × stack `serving_default`'s " \
           "gemm_efficiency 66 %" in item["note"]
    assert "R = 653 TFLOP/s" in explain(spec, "p")  # the same number, from the same input


def test_item_1_says_peak_only_when_the_peak_is_used():
    spec = check_text(SPEC, "/nowhere/p.ccost").spec
    note = _item1(spec, "i")["note"]
    assert "the peak 989.4 TFLOP/s is used, so compute is optimistic" in note
    assert "R = 989.4 TFLOP/s" in explain(spec, "i")
