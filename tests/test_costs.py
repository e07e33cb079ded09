"""ccost.model.costs: the α-β core against the worked examples of the reference notes (docs/examples.md), with the
hand arithmetic written out, plus properties that hold for every collective in every mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccost import derive
from ccost.model import costs
from ccost.model.costs import LinkParams, collective_cost, group_cost
from ccost.derive import leaf, named
from ccost.units import BANDWIDTH, DIMENSIONLESS, INFORMATION, TIME

US, MS = 1e-6, 1e-3
NOTES = dict(rel=0.005)  # conformance tolerance: 0.5 % against the "exact" column

NVLINK = LinkParams(2e-6, 450e9, 8e-6, "NVLink")
IB = LinkParams(3e-6, 50e9, None, "IB")


# ---------------------------------------------------------------------------------------------------
# "Communication Cost Analysis"

def test_analysis_note_ddp_gradient_allreduce():
    c = costs.ring_allreduce(8, 14e9, 5e-6, 450e9)
    # hops 2·(8−1) = 14 → latency 14 × 5 µs = 70 µs
    assert c.hops == 14
    assert c.latency == pytest.approx(70 * US, rel=1e-12)
    # volume 2·7/8 × 14 GB = 24.5 GB → 24.5e9 / 450e9 = 54.444 ms
    assert c.volume == pytest.approx(24.5e9, rel=1e-12)
    assert c.bandwidth_time == pytest.approx(24.5e9 / 450e9, rel=1e-12)
    assert c.bandwidth_time == pytest.approx(54.44 * MS, **NOTES)  # "14 GB AllReduce inside a node"
    assert c.time == pytest.approx(70e-6 + 24.5e9 / 450e9, rel=1e-12)
    assert c.time == pytest.approx(54.51 * MS, **NOTES)


def test_analysis_note_fsdp_allgather_and_its_share_of_a_layer():
    c = costs.allgather(8, 1.75e9, 5e-6, 450e9)
    # 7 × 5 µs = 35 µs; 7/8 × 1.75 GB = 1.53125 GB / 450 GB/s = 3.4028 ms → 3.4378 ms
    assert c.time == pytest.approx(35e-6 + 1.53125e9 / 450e9, rel=1e-12)
    assert c.time == pytest.approx(3.438 * MS, **NOTES)
    # as a share of a 10 ms layer: 34.4 % (the notes print 25 %)
    assert costs.overhead(c.time, 10 * MS) == pytest.approx(0.344, **NOTES)


def test_analysis_note_moe_alltoall():
    m = 4096 * 7168 * 2  # 58,720,256 B = 58.7 MB per GPU
    assert m == 58_720_256
    c = costs.alltoall(32, m, 5e-6, 450e9)
    # 31 × 5 µs = 155 µs; 31/32 × 58,720,256 B = 56,885,248 B / 450 GB/s = 126.41 µs → 281.41 µs
    assert c.volume == pytest.approx(56_885_248, rel=1e-12)
    assert c.time == pytest.approx(155e-6 + 56_885_248 / 450e9, rel=1e-12)
    assert c.time == pytest.approx(0.2814 * MS, **NOTES)
    # twice per MoE layer, 61 layers: 122 × 281.41 µs = 34.33 ms
    assert costs.scaled(c, 2 * 61).time == pytest.approx(34.33 * MS, **NOTES)


def test_analysis_note_crossover():
    # 5 µs × 450 GB/s = 2.25 MB
    assert costs.crossover(5e-6, 450e9) == pytest.approx(2.25e6, rel=1e-12)


def test_analysis_note_flat_ring_over_eight_nodes_waits_on_infiniband():
    inter = LinkParams(5e-6, 50e9)
    g = group_cost("allreduce", "ring", 64, 14e9, 8, LinkParams(5e-6, 450e9), inter, cross_node="flat")
    # 2·63/64 × 14 GB = 27.5625 GB over 50 GB/s = 551.25 ms
    assert g.used == "flat"
    assert g.chosen.bandwidth_time == pytest.approx(27.5625e9 / 50e9, rel=1e-12)
    assert g.chosen.bandwidth_time == pytest.approx(551.3 * MS, **NOTES)
    # 126 hops × 5 µs = 630 µs latency
    assert g.chosen.latency == pytest.approx(630e-6, rel=1e-12)


@pytest.mark.parametrize("compute,comm,overlap,eta", [
    (100, 50, 0.9, 100 / 105),   # DDP, large batch: 100 / (100 + 50·0.1) = 95.2 %
    (20, 50, 0.4, 20 / 50),      # DDP, small batch: 20 / (20 + 50·0.6) = 40.0 %
    (100, 30, 0.8, 100 / 106),   # FSDP, good prefetch: 100 / (100 + 30·0.2) = 94.3 %
    (100, 200, 0.0, 100 / 300),  # TP across InfiniBand: 100 / (100 + 200) = 33.3 %
])
def test_analysis_note_scaling_efficiency_table(compute, comm, overlap, eta):
    got = costs.efficiency_eta(compute * MS, comm * MS, overlap)
    assert got == pytest.approx(eta, rel=1e-12)


def test_analysis_note_table_percentages():
    assert costs.efficiency_eta(100 * MS, 50 * MS, 0.9) == pytest.approx(0.952, **NOTES)
    assert costs.efficiency_eta(20 * MS, 50 * MS, 0.4) == pytest.approx(0.400, **NOTES)
    assert costs.efficiency_eta(100 * MS, 30 * MS, 0.8) == pytest.approx(0.943, **NOTES)
    assert costs.efficiency_eta(100 * MS, 200 * MS, 0.0) == pytest.approx(0.333, **NOTES)


def test_broadcast_is_a_binomial_tree():
    # log₂8 · (α + m/B) = 3 × (5 µs + 1 MB / 450 GB/s)
    c = costs.broadcast(8, 1e6, 5e-6, 450e9)
    assert c.hops == 3
    assert c.time == pytest.approx(3 * (5e-6 + 1e6 / 450e9), rel=1e-12)


# ---------------------------------------------------------------------------------------------------
# "Communication Cost Math — Distributed Inference", A1: TP decode, Llama-3-70B, TP = 8, batch 32

A1_M = 32 * 1 * 8192 * 2  # B·S·d·bytes = 524,288 B (512 KiB)


def test_a1_ring():
    assert A1_M == 524_288
    c = costs.ring_allreduce(8, A1_M, 2e-6, 450e9)
    assert c.hops == 14
    assert c.volume == 917_504  # 2·7/8 × 524,288
    per_token = costs.scaled(c, 160)
    assert per_token.hops == 2240
    assert per_token.volume == 146_800_640  # 160 × 917,504 = 140 MiB
    assert per_token.latency == pytest.approx(2240 * 2e-6, rel=1e-12)  # 4.48 ms
    assert per_token.latency == pytest.approx(4.48 * MS, **NOTES)
    assert per_token.bandwidth_time == pytest.approx(146_800_640 / 450e9, rel=1e-12)  # 0.3262 ms
    assert per_token.bandwidth_time == pytest.approx(0.3262 * MS, **NOTES)
    assert per_token.time == pytest.approx(4.806 * MS, **NOTES)


def test_a1_tree_and_one_shot():
    bw_term = 146_800_640 / 450e9  # 0.3262 ms, the same volume for every algorithm
    tree = costs.scaled(costs.tree_allreduce(8, A1_M, 2e-6, 450e9), 160)
    assert tree.hops == 960  # 160 × 2·log₂8
    assert tree.latency == pytest.approx(1.92 * MS, rel=1e-12)
    assert tree.time == pytest.approx(1.92e-3 + bw_term, rel=1e-12)
    assert tree.time == pytest.approx(2.246 * MS, **NOTES)
    compute = costs.memory_time(141e9 / 8, 3.35e12)
    assert compute == pytest.approx(5.261 * MS, **NOTES)
    assert costs.overhead(tree.time, compute) == pytest.approx(0.427, **NOTES)

    one = costs.scaled(costs.one_shot_allreduce(8, A1_M, 8e-6, 450e9, one_shot_volume="ring"), 160)
    assert one.hops == 160
    assert one.latency == pytest.approx(160 * 8e-6, rel=1e-12)  # 1.28 ms
    assert one.bandwidth_time == pytest.approx(bw_term, rel=1e-12)  # ring volume charged
    assert one.time == pytest.approx(1.606 * MS, **NOTES)
    assert costs.overhead(one.time, compute) == pytest.approx(0.305, **NOTES)
    # The other convention (the default): each GPU pushes its whole buffer to 7 peers:
    # 1.28 ms + 160 × 7 × 512 KiB / 450 GB/s = 1.28 + 1.305 = 2.585 ms
    egress = costs.scaled(costs.one_shot_allreduce(8, A1_M, 8e-6, 450e9), 160)
    assert egress.volume == 160 * 7 * 524_288
    assert egress.time == pytest.approx(2.585 * MS, **NOTES)


def test_a1_link_one_shot_latency_is_used_through_collective_cost():
    c = collective_cost("allreduce", "one_shot", 8, A1_M, 2e-6, 450e9, one_shot_latency=8e-6)
    assert c.latency == 8e-6
    c = collective_cost("allreduce", "one_shot", 8, A1_M, 2e-6, 450e9)  # None: the hop costs α
    assert c.latency == 2e-6


def test_a1_ring_derivation_reads_like_the_notes():
    p = leaf("P", 8, DIMENSIONLESS, "TP degree")
    m = leaf("m", A1_M, INFORMATION, "message per AllReduce, B·S·d·bytes")
    alpha = leaf("α", 2e-6, TIME, "NVLink latency per hop", "spec sheet")
    bw = leaf("B", 450e9, BANDWIDTH, "NVLink bandwidth per GPU", "spec sheet")
    c = costs.ring_allreduce(p, m, alpha, bw)
    lat = named("T_lat", 160 * c.latency, "latency term per token")
    text = derive.to_text(derive.steps(c.time, lat))
    lines = text.splitlines()
    assert "α = 2 µs  — NVLink latency per hop; source: spec sheet" in lines
    assert "m = 524.3 kB  — message per AllReduce, B·S·d·bytes" in lines
    assert any(line.startswith("hops = 2·(P − 1) = 2 × (8 − 1) = 14") for line in lines)
    assert any(line.startswith("volume = 2·(P − 1)/P·m = 2 × (8 − 1) / 8 × 524.3 kB = 917.5 kB")
               for line in lines)
    # 2 µs × 14 = 28 µs; 917,504 B / 450 GB/s = 2.039 µs; sum 30.04 µs
    assert any(line.startswith("T = α·hops + volume/B = 2 µs × 14 + 917.5 kB / 450 GB/s = 30.04 µs")
               for line in lines)
    assert any(line.startswith("T_lat = 160·α·hops = 160 × 2 µs × 14 = 4.48 ms") for line in lines)
    # Dependencies come first.
    names = [s.name for s in derive.steps(c.time, lat)]
    assert names.index("hops") < names.index("T") < names.index("T_lat")


# ---------------------------------------------------------------------------------------------------
# A2: TP prefill, batch 1, 2,048 tokens

def test_a2_prefill():
    m = 2048 * 8192 * 2
    assert m == 33_554_432  # 32 MiB
    c = costs.scaled(costs.ring_allreduce(8, m, 2e-6, 450e9), 160)
    # 160 × 2·7/8 × 32 MiB = 9,395,240,960 B / 450 GB/s = 20.88 ms; latency 2,240 × 2 µs = 4.48 ms
    assert c.volume == 160 * 58_720_256
    assert c.bandwidth_time == pytest.approx(20.88 * MS, **NOTES)
    assert c.time == pytest.approx(25.36 * MS, **NOTES)
    # 2·70e9·2048 = 286.72 TFLOP; / 8 = 35.84 TFLOP at 600 TFLOP/s = 59.73 ms
    compute = costs.flop_time(2 * 70e9 * 2048 / 8, 600e12)
    assert compute == pytest.approx(35.84e12 / 600e12, rel=1e-12)
    assert costs.overhead(c.time, compute) == pytest.approx(0.425, **NOTES)


# ---------------------------------------------------------------------------------------------------
# A3: Llama-3.1-405B on two nodes

A3_M = 32 * 16384 * 2  # 1 MiB


def test_a3_option_a_topology_models():
    g = group_cost("allreduce", "ring", 16, A3_M, 8, NVLINK, IB)
    # flat: 252 × (30 hops × 3 µs + 2·15/16 × 1 MiB / 50 GB/s) = 252 × (90 µs + 39.3216 µs)
    assert 252 * g.flat.time == pytest.approx(252 * (90e-6 + 1_966_080 / 50e9), rel=1e-12)
    assert 252 * g.flat.time == pytest.approx(32.59 * MS, **NOTES)
    # split (the notes' model): 252 × (15 hops × 3 µs + 983,040 B / 50 GB/s) = 11.34 ms + 4.955 ms
    assert 252 * g.split.hops == 3780
    assert 252 * g.split.latency == pytest.approx(11.34 * MS, **NOTES)
    assert 252 * g.split.bandwidth_time == pytest.approx(4.955 * MS, **NOTES)
    assert 252 * g.split.time == pytest.approx(16.29 * MS, **NOTES)
    # hierarchical, by hand, per AllReduce:
    #   reduce-scatter in the node: 7 × 2 µs + 7/8 × 1 MiB / 450 GB/s = 14 µs + 917,504 / 450e9
    #   AllReduce across 2 nodes on 1 MiB / 8 = 128 KiB: 2 × 3 µs + 2·1/2 × 131,072 / 50e9
    #   all-gather in the node: as the reduce-scatter
    rs = 14e-6 + 917_504 / 450e9
    ar = 6e-6 + 131_072 / 50e9
    hier = rs + ar + rs  # = 40.699 µs
    assert g.hierarchical.time == pytest.approx(hier, rel=1e-12)
    assert 252 * g.hierarchical.time == pytest.approx(10.256 * MS, rel=1e-4)
    assert g.used == "hierarchical" and g.chosen.time == g.hierarchical.time
    assert [label for label, _ in g.hierarchical.stages] == ["RS intra", "AR inter", "AG intra"]
    # forcing a model
    assert group_cost("allreduce", "ring", 16, A3_M, 8, NVLINK, IB, cross_node="flat").chosen.time == g.flat.time
    # compute 405e9 × 1 B / 16 / 3,350 GB/s = 7.556 ms; overhead with the split model 216 %
    compute = costs.memory_time(405e9 / 16, 3.35e12)
    assert compute == pytest.approx(7.556 * MS, **NOTES)
    assert costs.overhead(252 * g.split.time, compute) == pytest.approx(2.16, **NOTES)
    assert costs.overhead(252 * g.flat.time, compute) == pytest.approx(4.31, **NOTES)


def test_a3_option_b_tp8_pp2():
    inside = group_cost("allreduce", "ring", 8, A3_M, 8, NVLINK, IB)
    assert inside.used == "intra" and inside.flat is None
    # 252 × (14 × 2 µs + 2·7/8 × 1 MiB / 450 GB/s) = 252 × 32.078 µs = 8.08 ms
    assert 252 * inside.chosen.time == pytest.approx(8.08 * MS, **NOTES)
    tree = costs.tree_allreduce(8, A3_M, 2e-6, 450e9)
    assert 252 * tree.time == pytest.approx(4.05 * MS, **NOTES)  # 252 × (12 µs + 4.078 µs)
    one = costs.one_shot_allreduce(8, A3_M, 8e-6, 450e9, one_shot_volume="ring")  # the notes' convention
    assert 252 * one.time == pytest.approx(3.04 * MS, **NOTES)  # 252 × (8 µs + 4.078 µs)
    # PP send of 1 MiB over IB: 3 µs + 1,048,576 / 50e9 = 23.97 µs
    send = group_cost("p2p", None, 2, A3_M, 1, NVLINK, IB)
    assert send.chosen.time == pytest.approx(3e-6 + 1_048_576 / 50e9, rel=1e-12)
    assert send.chosen.time == pytest.approx(0.02397 * MS, **NOTES)
    compute = costs.memory_time(405e9 / 8, 3.35e12)  # 15.11 ms
    assert compute == pytest.approx(15.11 * MS, **NOTES)
    assert costs.overhead(252 * one.time + send.chosen.time, compute) == pytest.approx(0.203, **NOTES)
    assert costs.overhead(252 * tree.time + send.chosen.time, compute) == pytest.approx(0.270, **NOTES)
    assert costs.pipeline_bubble(2, 32) == pytest.approx(1 / 33, rel=1e-12)  # 3.03 %


def test_hierarchical_two_level_analogues():
    p, g, m = 32, 8, 64e6
    n = p / g
    ag = group_cost("allgather", None, p, m, g, NVLINK, IB).hierarchical
    # across nodes: (n−1)/n × m/g; inside: (g−1)/g × m; together (P−1)/P × m, as a flat all-gather
    assert ag.volume == pytest.approx((n - 1) / n * m / g + (g - 1) / g * m, rel=1e-12)
    assert ag.volume == pytest.approx((p - 1) / p * m, rel=1e-12)
    assert ag.hops == (n - 1) + (g - 1)
    rs = group_cost("reducescatter", None, p, m, g, NVLINK, IB).hierarchical
    assert rs.time == pytest.approx(ag.time, rel=1e-12)
    a2a = group_cost("alltoall", None, p, m, g, NVLINK, IB).hierarchical
    # inside: (g−1)/g·m on NVLink; across: (n−1)/n·m on IB
    assert a2a.time == pytest.approx((g - 1) * 2e-6 + (g - 1) / g * m / 450e9
                                     + (n - 1) * 3e-6 + (n - 1) / n * m / 50e9, rel=1e-12)
    bc = group_cost("broadcast", None, p, m, g, NVLINK, IB).hierarchical
    assert bc.time == pytest.approx(2 * (3e-6 + m / 50e9) + 3 * (2e-6 + m / 450e9), rel=1e-12)


def test_split_model_prices_the_cross_node_share():
    # 32 ranks on 4 nodes of 8: (n−1)/n = 3/4 of the ring's 2·31 = 62 hops and 2·31/32·m bytes cross IB
    m = 1e6
    g = group_cost("allreduce", "ring", 32, m, 8, NVLINK, IB)
    assert g.split.hops == pytest.approx(0.75 * 62, rel=1e-12)
    assert g.split.time == pytest.approx(0.75 * 62 * 3e-6 + 0.75 * (62 / 32 * m) / 50e9, rel=1e-12)


def test_group_spanning_nodes_needs_an_inter_link():
    with pytest.raises(ValueError):
        group_cost("allreduce", "ring", 16, A3_M, 8, NVLINK, None)
    with pytest.raises(ValueError):
        group_cost("allreduce", "ring", 16, A3_M, 8, NVLINK, IB, cross_node="fastest")


def test_bad_kind_or_algorithm_is_a_programming_error():
    with pytest.raises(ValueError):
        costs.hops("allscatter", "ring", 8)
    with pytest.raises(ValueError):
        costs.hops("allreduce", "butterfly", 8)


# ---------------------------------------------------------------------------------------------------
# A4: when does TP stop helping?

def test_a4_continuous_optimum():
    # 141e9 · ln2 / (2 · 2e-6 · 2 · 80 · 3.35e12) = 9.7734e10 / 2.144e9 = 45.58
    n_star = costs.tp_continuous_optimum(141e9, 3.35e12, 2e-6, 2, 80)
    assert n_star == pytest.approx(141e9 * math.log(2) / (2 * 2e-6 * 2 * 80 * 3.35e12), rel=1e-12)
    assert n_star == pytest.approx(45.58, **NOTES)


@pytest.mark.parametrize("n,total_ms,speedup,eff", [
    (1, 42.09, 1.00, 1.000), (2, 21.68, 1.94, 0.971), (4, 11.80, 3.57, 0.892), (8, 7.18, 5.86, 0.733),
    (16, 5.19, 8.11, 0.507), (32, 4.52, 9.32, 0.291), (64, 4.50, 9.36, 0.146),
])
def test_a4_efficiency_table(n, total_ms, speedup, eff):
    # total(N) = W/(N·BW) + α·c·L·2·log₂N, the tree hops of c·L AllReduces
    def total(k):
        tree = costs.tree_allreduce(k, 0.0, 2e-6, 450e9)
        return costs.memory_time(141e9 / k, 3.35e12) + 2 * 80 * tree.latency

    assert total(n) == pytest.approx(141e9 / (n * 3.35e12) + 2e-6 * 2 * 80 * 2 * math.log2(n), rel=1e-12)
    assert total(n) == pytest.approx(total_ms * MS, **NOTES)
    assert costs.speedup(total(1), total(n)) == pytest.approx(speedup, **NOTES)
    assert costs.scaling_efficiency(total(1), total(n), n) == pytest.approx(eff, **NOTES)


# ---------------------------------------------------------------------------------------------------
# auto

def test_auto_picks_tree_for_small_messages_and_says_why():
    a = costs.auto_allreduce(8, A1_M, 2e-6, 450e9, candidates=("ring", "tree"))
    assert a.algorithm == "tree"
    assert a.cost.time == a.costs["tree"].time
    # crossover 2 µs × 450 GB/s = 900 kB; 512 KiB is below it
    assert a.reason == ("tree: 2·log₂8 = 6 hops beat ring's 14 at a 524.3 kB message (14.04 µs vs 30.04 µs); "
                        "latency-bound below the crossover α·B = 900 kB")


def test_auto_with_all_algorithms_and_arrays():
    # one-shot (egress 7 × 512 KiB): 8 µs + 8.156 µs = 16.16 µs; two-shot, two shots of the custom kernel
    # at the one-shot latency each: 2 × 8 µs + 2.039 µs = 18.04 µs; tree 6 × 2 µs + 2.039 µs = 14.04 µs
    # (cheapest); ring 14 × 2 µs + 2.039 µs = 30.04 µs
    a = costs.auto_allreduce(8, A1_M, 2e-6, 450e9, 8e-6)
    assert a.algorithm == "tree"
    assert a.costs["two_shot"].time == pytest.approx(16e-6 + 917_504 / 450e9, rel=1e-12)
    assert a.cost.time == pytest.approx(12e-6 + 917_504 / 450e9, rel=1e-12)
    # one-shot beats two-shot for a small message (16 KiB: 8 µs + 0.255 µs against 16 µs + 0.064 µs) and
    # two-shot beats one-shot for a large one (8 MiB: 8 µs + 130.5 µs against 16 µs + 32.6 µs)
    small = costs.auto_allreduce(8, 16_384, 2e-6, 450e9, 8e-6, candidates=("one_shot", "two_shot"))
    large = costs.auto_allreduce(8, 8 * 1024**2, 2e-6, 450e9, 8e-6, candidates=("one_shot", "two_shot"))
    assert (small.algorithm, large.algorithm) == ("one_shot", "two_shot")
    arr = costs.auto_allreduce(np.array([2, 8]), np.array([A1_M, A1_M]), 2e-6, 450e9, 8e-6,
                               candidates=("ring", "tree", "one_shot"), one_shot_volume="ring")
    # P = 2: ring and tree both 2 hops (ring wins the tie); P = 8: one-shot 10.04 µs < tree 14.04 µs
    assert arr.candidates[arr.algorithm[0]] == "ring"
    assert arr.candidates[arr.algorithm[1]] == "one_shot"
    assert arr.reason is None


def test_auto_on_a_topology():
    # A3 option B, TP = 8 inside a node: one-shot 8 µs + 4.078 µs beats tree 12 µs + 4.078 µs
    g = group_cost("allreduce", "auto", 8, A3_M, 8, NVLINK, IB, candidates=("ring", "tree", "one_shot"),
                   one_shot_volume="ring")  # the notes' convention
    assert g.algorithm == "one_shot" and g.used == "intra"
    assert 252 * g.chosen.time == pytest.approx(3.04 * MS, **NOTES)
    assert g.reason.startswith("one_shot: 1 hop beats tree's 6 at a 1.049 MB message (12.08 µs vs 16.08 µs)")
    assert set(g.alternatives) == {"ring", "tree", "one_shot"}
    # A3 option A, TP = 16 across two nodes, ring vs tree. Hierarchical tree per AllReduce:
    #   14 µs + 2.039 µs (RS) + 2·log₂2 × 3 µs + 131,072 B / 50 GB/s (AR across) + 14 µs + 2.039 µs (AG)
    # = the ring's hierarchical cost (40.70 µs): with n = 2 the tree and the ring are both 2 hops.
    g = group_cost("allreduce", "auto", 16, A3_M, 8, NVLINK, IB, candidates=("ring", "tree"))
    assert g.used == "hierarchical" and g.algorithm == "ring"  # the tie goes to the earlier candidate
    assert g.chosen.time == pytest.approx(2 * (14e-6 + 917_504 / 450e9) + 6e-6 + 131_072 / 50e9, rel=1e-12)
    assert g.reason.endswith("(priced hierarchical across nodes)")
    # Forced flat: tree 2·⌈log₂16⌉ = 8 hops × 3 µs beats the ring's 30 × 3 µs
    g = group_cost("allreduce", "auto", 16, A3_M, 8, NVLINK, IB, cross_node="flat", candidates=("ring", "tree"))
    assert g.algorithm == "tree"
    assert g.chosen.time == pytest.approx(24e-6 + 1_966_080 / 50e9, rel=1e-12)


def test_zero_dimensional_arrays_stay_in_array_mode():
    g = group_cost("allreduce", "ring", np.array(16), 1e6, 8, NVLINK, IB)
    assert isinstance(g.used, np.ndarray) and costs.GROUP_MODES[int(g.used)] == "hierarchical"
    g = group_cost("allreduce", "auto", np.array(16), 1e6, np.array(8), NVLINK, IB)
    assert isinstance(g.algorithm, np.ndarray) and g.reason is None
    a = costs.auto_allreduce(np.array(8), 1e6, 2e-6, 450e9)
    assert isinstance(a.algorithm, np.ndarray) and a.reason is None


def test_regime():
    c = costs.ring_allreduce(8, A1_M, 2e-6, 450e9)
    assert costs.regime(c.latency, c.bandwidth_time) == "latency-bound"
    c = costs.ring_allreduce(8, 14e9, 5e-6, 450e9)
    assert costs.regime(c.latency, c.bandwidth_time) == "bandwidth-bound"
    assert costs.regime(np.array([1.0, 0.0]), np.array([0.5, 0.5])).tolist() == ["latency-bound",
                                                                                  "bandwidth-bound"]


def test_compute_roofline_takes_the_larger_bound():
    # decode: 17.625 GB / 3.35 TB/s = 5.261 ms vs 1 TFLOP / 600 TFLOP/s = 1.667 ms
    assert costs.compute_time(17.625e9, 3.35e12, 1e12, 600e12) == 17.625e9 / 3.35e12
    assert costs.compute_time(1e9, 3.35e12, 287e12, 600e12) == 287e12 / 600e12
    assert costs.exposed_comm(10.0, 0.25) == 7.5


# ---------------------------------------------------------------------------------------------------
# Properties

KIND_ALGS = [("allreduce", a) for a in costs.ALLREDUCE_ALGORITHMS] + [
    (k, None) for k in costs.KINDS if k != "allreduce"]

alphas = st.floats(1e-8, 1e-3)
bandwidths = st.floats(1e6, 1e13)
messages = st.floats(0.0, 1e12)
ranks = st.integers(1, 4096)
FIELDS = ("hops", "volume", "latency", "bandwidth_time", "time")


def _leaves(p, m, alpha, bw, one):
    return (leaf("P", p), leaf("m", m, INFORMATION), leaf("α", alpha, TIME), leaf("B", bw, BANDWIDTH),
            None if one is None else leaf("α1", one, TIME))


def _bits(x) -> str:
    return float(derive.value_of(x)).hex()


@settings(max_examples=60, deadline=None)
@given(p=ranks, m=messages, alpha=alphas, bw=bandwidths, one=st.one_of(st.none(), alphas))
def test_float_array_and_derivation_modes_agree_bit_for_bit(p, m, alpha, bw, one):
    for kind, alg in KIND_ALGS:
        f = collective_cost(kind, alg, p, m, alpha, bw, one)
        a = collective_cost(kind, alg, np.array([p, 1, p]), np.array([m, m, m]), alpha, bw,
                            None if one is None else np.array([one, one, one]))
        v = collective_cost(kind, alg, *_leaves(p, m, alpha, bw, one))
        for fld in FIELDS:
            want = _bits(getattr(f, fld))
            assert _bits(np.asarray(getattr(a, fld), dtype=float)[0]) == want, (kind, alg, fld)
            assert _bits(getattr(v, fld)) == want, (kind, alg, fld)


@settings(max_examples=40, deadline=None)
@given(p=ranks, m=messages, alpha=alphas, bw=bandwidths, one=alphas)
def test_auto_modes_agree(p, m, alpha, bw, one):
    f = costs.auto_allreduce(p, m, alpha, bw, one)
    a = costs.auto_allreduce(np.array([p]), np.array([m]), alpha, bw, one)
    v = costs.auto_allreduce(*_leaves(p, m, alpha, bw, one))
    assert f.algorithm == v.algorithm == a.candidates[int(a.algorithm[0])]
    for fld in FIELDS:
        assert _bits(getattr(f.cost, fld)) == _bits(getattr(a.cost, fld)[0]) == _bits(getattr(v.cost, fld))


group_cases = st.lists(st.tuples(st.integers(1, 512), st.integers(1, 16)), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(cases=group_cases, m=messages, a1=alphas, b1=bandwidths, a2=alphas, b2=bandwidths,
       kind_alg=st.sampled_from(KIND_ALGS + [("allreduce", "auto")]), cross=st.sampled_from(costs.CROSS_NODE))
def test_group_cost_modes_agree(cases, m, a1, b1, a2, b2, kind_alg, cross):
    kind, alg = kind_alg
    intra, inter = LinkParams(a1, b1, a1 * 2), LinkParams(a2, b2)
    ps = np.array([c[0] for c in cases])
    gs = np.array([c[1] for c in cases])
    arr = group_cost(kind, alg, ps, m, gs, intra, inter, cross)
    for i, (p, g) in enumerate(cases):
        f = group_cost(kind, alg, p, m, g, intra, inter, cross)
        vintra = LinkParams(leaf("α_NV", a1, TIME), leaf("B_NV", b1, BANDWIDTH), leaf("α1_NV", a1 * 2, TIME))
        vinter = LinkParams(leaf("α_IB", a2, TIME), leaf("B_IB", b2, BANDWIDTH))
        v = group_cost(kind, alg, leaf("P", p), leaf("m", m, INFORMATION), leaf("g", g), vintra, vinter, cross)
        assert f.used == v.used == costs.GROUP_MODES[int(arr.used[i])]
        if alg == "auto":
            assert f.algorithm == v.algorithm == arr.candidates[int(arr.algorithm[i])]
        for fld in FIELDS:
            want = _bits(getattr(f.chosen, fld))
            assert _bits(np.asarray(getattr(arr.chosen, fld))[i]) == want
            assert _bits(getattr(v.chosen, fld)) == want
        if p > g:
            for model in ("flat", "hierarchical", "split"):
                for fld in FIELDS:
                    want = _bits(getattr(getattr(f, model), fld))
                    assert _bits(getattr(getattr(v, model), fld)) == want
                    assert _bits(np.broadcast_to(getattr(getattr(arr, model), fld), ps.shape)[i]) == want


@settings(max_examples=60, deadline=None)
@given(p=ranks, m=messages, alpha=alphas, bw=bandwidths, faster=st.floats(1.0, 100.0),
       quicker=st.floats(0.0, 1.0))
def test_more_bandwidth_or_less_latency_never_slows_a_collective(p, m, alpha, bw, faster, quicker):
    for kind, alg in KIND_ALGS:
        base = collective_cost(kind, alg, p, m, alpha, bw, alpha).time
        assert collective_cost(kind, alg, p, m, alpha, bw * faster, alpha).time <= base
        assert collective_cost(kind, alg, p, m, alpha * quicker, bw, alpha * quicker).time <= base


@settings(max_examples=40, deadline=None)
@given(p=st.integers(1, 512), g=st.integers(1, 16), m=messages, a=alphas, b=bandwidths,
       faster=st.floats(1.0, 100.0), kind_alg=st.sampled_from(KIND_ALGS))
def test_better_links_never_slow_a_group(p, g, m, a, b, faster, kind_alg):
    kind, alg = kind_alg
    intra, inter = LinkParams(a, b * 9), LinkParams(a * 1.5, b)
    base = group_cost(kind, alg, p, m, g, intra, inter).chosen.time
    assert group_cost(kind, alg, p, m, g, LinkParams(a, b * 9 * faster), inter).chosen.time <= base
    assert group_cost(kind, alg, p, m, g, intra, LinkParams(a * 1.5, b * faster)).chosen.time <= base
    assert group_cost(kind, alg, p, m, g, intra, LinkParams(a * 1.5 / faster, b)).chosen.time <= base


def test_ring_volume_tends_to_twice_the_message():
    m = 1e9
    prev = 0.0
    for p in [2, 4, 8, 16, 64, 256, 1024, 4096]:
        v = costs.volume("allreduce", "ring", p, m)
        assert prev < v < 2 * m  # grows, and stays below 2m
        assert 2 * m - v == pytest.approx(2 * m / p, rel=1e-9)  # the gap is 2m/P
        prev = v


def test_hops_are_whole_numbers():
    for kind, alg in KIND_ALGS:
        for p in range(1, 300):
            h = costs.hops(kind, alg, p)
            assert float(h) == int(h), (kind, alg, p, h)
        h = costs.hops(kind, alg, np.arange(1, 5000))
        assert np.all(h == np.round(h))


@pytest.mark.parametrize("kind,alg", KIND_ALGS)
def test_one_rank_costs_nothing_in_every_mode(kind, alg):
    f = collective_cost(kind, alg, 1, 1e9, 2e-6, 450e9, 8e-6)
    a = collective_cost(kind, alg, np.array([1, 1]), 1e9, 2e-6, 450e9, 8e-6)
    v = collective_cost(kind, alg, *_leaves(1, 1e9, 2e-6, 450e9, 8e-6))
    for fld in FIELDS:
        assert getattr(f, fld) == 0
        assert np.all(getattr(a, fld) == 0)
        assert getattr(v, fld).value == 0
    g = group_cost(kind, alg, 1, 1e9, 8, NVLINK, IB)
    assert g.used == "intra" and g.chosen.time == 0


positive = st.floats(1e-6, 1e12)


@settings(max_examples=60, deadline=None)
@given(a=positive, b=positive, c=positive, d=positive, frac=st.floats(0.0, 1.0), n=st.integers(1, 1024),
       mb=st.integers(1, 512))
def test_analysis_formulas_agree_in_every_mode(a, b, c, d, frac, n, mb):
    def run(w, x, y, z, f, k, j):
        return [
            costs.memory_time(w, x), costs.flop_time(y, z), costs.compute_time(w, x, y, z),
            costs.pipeline_bubble(k, j), costs.exposed_comm(w, f), costs.efficiency_eta(w, x, f),
            costs.overhead(w, x), costs.speedup(w, x), costs.scaling_efficiency(w, x, k),
            costs.tp_continuous_optimum(w, x, y, z, k), costs.crossover(w, x),
        ]

    floats = run(a, b, c, d, frac, n, mb)
    arrays = run(*(np.array([v, v]) for v in (a, b, c, d, frac, n, mb)))
    values = run(leaf("w", a, TIME), leaf("x", b, TIME), leaf("y", c, TIME), leaf("z", d, TIME),
                 leaf("f", frac), leaf("k", n), leaf("j", mb))
    for f, arr, v in zip(floats, arrays, values):
        assert type(f) is float
        assert _bits(f) == _bits(arr[1]) == _bits(v)


# --- one-shot volume conventions (plan field one_shot_volume) -----------------------------------------

def test_one_shot_egress_is_the_default_and_ring_is_the_notes_convention():
    # A1: one AllReduce of 512 KiB on 8 ranks at α1 = 8 µs, 450 GB/s.
    # egress: 7 × 524,288 B = 3,670,016 B; 8 µs + 3,670,016 / 450e9 s = 8 + 8.1556 = 16.1556 µs
    egress = costs.collective_cost("allreduce", "one_shot", 8, 524_288, 2e-6, 450e9, 8e-6)
    assert egress.volume == 3_670_016
    assert egress.time == pytest.approx(16.1556e-6, rel=1e-5)
    # ring (the notes): 2·7/8 × 524,288 = 917,504 B; 8 µs + 2.0389 µs = 10.0389 µs
    ring = costs.collective_cost("allreduce", "one_shot", 8, 524_288, 2e-6, 450e9, 8e-6, one_shot_volume="ring")
    assert ring.volume == 917_504
    assert ring.time == pytest.approx(10.0389e-6, rel=1e-5)
    with pytest.raises(ValueError):
        costs.volume("allreduce", "one_shot", 8, 1.0, one_shot_volume="bogus")


def test_auto_does_not_pick_one_shot_for_a_large_message():
    # A2's prefill message, 32 MiB on 8 ranks, NVLink α = 2 µs, 450 GB/s, one-shot at α (no
    # one_shot_latency). one-shot egress: 2 µs + 7 × 33,554,432 / 450e9 = 2 µs + 521.96 µs = 523.96 µs;
    # two-shot: 4 µs + 58,720,256 / 450e9 = 4 + 130.49 = 134.49 µs, the cheapest (tree: 12 µs + 130.49 µs).
    choice = costs.auto_allreduce(8, 33_554_432, 2e-6, 450e9)
    assert choice.algorithm == "two_shot"
    assert choice.costs["one_shot"].time == pytest.approx(523.96e-6, rel=1e-4)
    # with the notes' ring volume one-shot would have won at 2 µs + 130.49 µs: the slip H2 found
    ring = costs.auto_allreduce(8, 33_554_432, 2e-6, 450e9, one_shot_volume="ring")
    assert ring.algorithm == "one_shot"
    # a small decode message (512 KiB) with a fast one-shot kernel (α1 = 1 µs): one-shot still wins
    # egress: 1 µs + 3,670,016 / 450e9 = 9.156 µs; two-shot: 4 µs + 917,504 / 450e9 = 6.039 µs, which wins
    small = costs.auto_allreduce(8, 524_288, 2e-6, 450e9, one_shot_latency=1e-6)
    assert small.algorithm == "two_shot"
    tiny = costs.auto_allreduce(8, 16_384, 2e-6, 450e9, one_shot_latency=1e-6)
    # 16 KiB: one-shot 1 µs + 7 × 16,384 / 450e9 = 1.255 µs; two-shot 4 µs + 0.064 µs; tree 12 µs
    assert tiny.algorithm == "one_shot"


def test_auto_keeps_custom_allreduce_inside_one_nvlink_domain():
    """One-shot and two-shot write into the peers' memory: NVLink peer access, one domain only. Across
    two nodes `auto` takes NCCL's ring or tree (flat or hierarchical), and says why."""
    intra = costs.LinkParams(2e-6, 450e9, 8e-6, "nvl")
    inter = costs.LinkParams(3e-6, 50e9, 3e-6, "ib")
    # 512 KiB on 16 ranks over 2 nodes: two-shot at the IB link's α would be 2 × 3 µs + 2·15/16·512 KiB /
    # 50 GB/s = 6 + 19.66 = 25.7 µs, the "25.7 µs": no longer a candidate
    g = costs.group_cost("allreduce", "auto", 16, 524_288, 8, intra, inter)
    assert g.algorithm in ("ring", "tree")
    assert "peer access" in g.reason
    arr = costs.group_cost("allreduce", "auto", np.array([8, 16]), np.array([524_288, 524_288]), 8, intra, inter)
    labels = [costs.ALLREDUCE_ALGORITHMS[i] for i in arr.algorithm]
    assert labels[0] in ("one_shot", "two_shot", "tree", "ring") and labels[1] in ("ring", "tree")
    assert arr.chosen.time[1] == g.chosen.time
