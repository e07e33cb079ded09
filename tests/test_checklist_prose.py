"""The checklist's sentences come from the values the numbers use.

Item 1 said "no achieved_flops: peak FLOP/s used, compute is optimistic" while `ccost explain` showed the
stack's GEMM efficiency applied. Now the note is written from the rate the weight GEMMs ran at: their FLOPs
over their FLOP time in the per-operator roofline (R_GEMM of `explain`), else ``Inputs.R`` (R). By hand,
on an H100 (peak 989.4 TFLOP/s, std/gpus.ccost):

* prefill of 8,192 tokens under `serving_default` (`rates = kernels`): the measured GEMM curve of
  `h100_vllm` (std/kernels.ccost: η_GEMM 82.5 %, M½ 12.86 rows, N½ 0, K½ 112) at Llama-3-70B's weights on one
  GPU of TP 8 (QKV 1,280 × 8,192, output 8,192 × 1,024, up with gate 7,168 × 8,192, down 8,192 × 3,584;
  σ = Σ N·K / Σ (N + N½)·(K + K½) = 97.47 %): 989.4 × 0.825 × 8192/(8192 + 12.86) × 0.9747 = 794.3 TFLOP/s,
  a measured rate: item 1 passes;
* training under `training_default` (`rates = kernels`): the same curve at the micro-batch's 32,768 token
  rows and Llama-3-8B's weights on one GPU (QKV 6,144 × 4,096, output 4,096 × 4,096, up with gate 28,672 ×
  4,096, down 4,096 × 14,336; σ 97.84 %) × the stack's framework_efficiency 69 %: 989.4 × 0.825 ×
  32768/(32768 + 12.86) × 0.9784 × 0.69 = 550.8 TFLOP/s, a measured rate scaled by a fitted share: item 1
  passes;
* training under a profile without curves (`rates = profile`, gemm_efficiency 59 %): 989.4 × 0.59 =
  583.7 TFLOP/s, an estimate: warn;
* under `ideal` (gemm_efficiency 100 %): the peak, 989.4 TFLOP/s: warn, optimistic.
"""

from __future__ import annotations

import pytest

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
plan t { model = llama3_8b; cluster = hgx_h100; phase = train; batch = 64; seq = 4096; dp = 8; microbatches = 8 }
stack train_profile "training_default's shares, no kernel curves" extends training_default { rates = profile }
plan tp extends t { stack = train_profile }
'''


def _spec():
    return check_text(SPEC, "/nowhere/p.ccost").spec


def _item1(spec, name):
    r = evaluate.evaluate_plan(spec.plans[name], spec.policy)
    return next(i for i in r.checklist if i["id"] == 1)


def test_item_1_names_the_measured_kernel_rate_explain_derives():
    spec = _spec()
    item = _item1(spec, "p")
    assert item["status"] == "pass"
    assert "peak" not in item["note"] and "optimistic" not in item["note"]
    k = spec.kernels["h100_vllm"]
    assert (k.gemm_efficiency, k.gemm_half_tokens, k.gemm_half_n, k.gemm_half_k) == pytest.approx((0.825, 12.86, 0.0, 112.0))
    assert "The weight GEMMs run at 794.3 TFLOP/s on gpu `h100`'s measured kernel curve `h100_vllm`" in item["note"]
    assert "at this step's token rows and weight shapes" in item["note"]
    assert "= 794.3 TFLOP/s  — GEMM rate at this token count" in explain(spec, "p")  # R_GEMM, the same number


def test_item_1_names_the_training_rate_on_the_curve_and_the_framework_share():
    spec = _spec()
    item = _item1(spec, "t")
    assert item["status"] == "pass"
    assert ("The weight GEMMs run at 550.8 TFLOP/s on gpu `h100`'s measured kernel curve `h100_vllm` (stack "
            "`training_default`: rates = kernels), at this step's token rows and weight shapes × the stack's "
            "framework_efficiency 69 %") in item["note"]
    assert "= 550.8 TFLOP/s  — training GEMM rate" in explain(spec, "t")  # R_GEMM,train, the same number


def test_item_1_names_the_stack_s_share_of_the_peak():
    spec = _spec()
    item = _item1(spec, "tp")
    assert item["status"] == "warn"
    assert "the weight GEMMs run at 583.7 TFLOP/s, its flops 989.4 TFLOP/s × stack `train_profile`'s " \
           "gemm_efficiency 59 %" in item["note"]
    assert "R = 583.7 TFLOP/s" in explain(spec, "tp")


def test_item_1_says_peak_only_when_the_peak_is_used():
    spec = _spec()
    item = _item1(spec, "i")
    assert item["status"] == "warn"
    assert "the peak 989.4 TFLOP/s is used, so compute is optimistic" in item["note"]
    assert "R = 989.4 TFLOP/s" in explain(spec, "i")
