"""Issue 13's must-show specs, checked against hand arithmetic: Llama-3.1-405B decode on two HGX H100 nodes
(specs/llama31-405b-two-nodes.ccost) and DeepSeek-V3 decode on one H200 node (specs/deepseek-v3-decode.ccost),
both under the bundled serving stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost import check, evaluate

REPO = Path(__file__).resolve().parents[1]
US, MS = 1e-6, 1e-3


def _results(name: str):
    spec, _ = check.load_spec(str(REPO / "specs" / name))
    return spec, evaluate.evaluate(spec)


@pytest.fixture(scope="module")
def two_nodes():
    return _results("llama31-405b-two-nodes.ccost")


def test_auto_runs_nccl_across_nodes_and_prices_it_by_hand(two_nodes):
    _, res = two_nodes
    (ar,) = [c for c in res.plans["tp16"].doc["collectives"] if c["kind"] == "allreduce"]
    # one-shot and two-shot need NVLink peer access: across nodes auto chooses between ring and tree only
    assert ar["algorithm"] in ("ring", "tree") and set(ar["candidates"]) == {"ring", "tree"}
    assert ar["cross_node"] == "hierarchical"
    # m = 32 × 16384 × 2 B = 1,048,576 B. Hierarchical: reduce-scatter on the 8 ranks of a node (NVLink 4,
    # 2 µs, 450 GB/s): 7 × 2 µs + 7/8 × 1,048,576 B / 450 GB/s = 14 + 2.039 = 16.039 µs; AllReduce of
    # m/8 = 131,072 B on 2 nodes (IB NDR, 3 µs, 50 GB/s): 2 × 3 µs + 2 × (1/2) × 131,072 / 50e9 =
    # 6 + 2.621 = 8.621 µs; all-gather inside as the reduce-scatter, 16.039 µs. 40.699 µs each.
    assert ar["time_s"] == pytest.approx(40.699 * US, rel=1e-4)
    assert ar["total_time_s"] == pytest.approx(252 * 40.699 * US, rel=1e-4)  # 2 × 126 layers: 10.256 ms


def test_tp16_across_nodes_does_not_win(two_nodes):
    spec, res = two_nodes
    doc = {p: res.plans[p].doc for p in spec.plans}
    item6 = {p: next(i for i in d["checklist"] if i["id"] == 6)["status"] for p, d in doc.items()}
    # On the spec-sheet IB link TP=16 is a little faster per token at batch 32 (and at batch 1), but the
    # AllReduces it sends over the network fail the 30 % overhead policy; TP=8 × PP=2 passes it.
    for tp16, tp8pp2 in (("tp16", "tp8_pp2"), ("tp16_b1", "tp8_pp2_b1"), ("tp16_measured", "tp8_pp2_measured"),
                         ("tp16_b1_measured", "tp8_pp2_b1_measured")):
        assert item6[tp16] == "fail" and item6[tp8pp2] == "pass", (tp16, tp8pp2)
        assert doc[tp16]["overhead"] > 0.30 > doc[tp8pp2]["overhead"]
    # On the inter-node link nccl-tests measured (A3 Mega, ~49 µs per hop for small messages) it loses
    # outright, at batch 32 and at batch 1
    assert doc["tp16_measured"]["latency_s"] > 2 * doc["tp8_pp2_measured"]["latency_s"]
    assert doc["tp16_b1_measured"]["latency_s"] > 2 * doc["tp8_pp2_b1_measured"]["latency_s"]
    # the gate says the same
    from ccost import gate

    failing = {line.split(":")[0] for line in gate.policy_failures(spec, res)}
    assert failing == {"tp16", "tp16_b1", "tp16_measured", "tp16_b1_measured"}
