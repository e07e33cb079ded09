"""The bundled InfiniBand and RoCE links carry measured small-message curves (docs/sources.md, "Measured data"):
held to the fits of the committed nccl-tests logs, and priced as nccl-tests measured them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccost import check, evaluate
from ccost.model import costs

REPO = Path(__file__).resolve().parents[1]
US = 1e-6


def _links(path: Path):
    spec, _ = check.load_spec(str(path))
    return spec.links


@pytest.mark.parametrize("std,measured,file", [("ib_ndr", "ib_ndr_measured", "h100-ib-ndr.ccost"),
                                               ("roce_400g", "roce_a100_measured", "oci-a100-roce.ccost")])
def test_std_links_keep_the_fitted_pieces_below_the_line_rate(std, measured, file):
    """std/links.ccost copies the pieces `ccost calibrate --intra` fitted (specs/measured/*.ccost): every
    piece the std link keeps starts, and is timed, as fitted; its last piece runs at the link's line rate
    (the fit's own last bandwidth is above what one NIC carries, or the NIC was slower: docs/sources.md)."""
    link = _links(REPO / "specs" / "std" / "links.ccost")[std]
    fit = _links(REPO / "specs" / "measured" / file)[measured]
    n = len(link.curve_from)
    assert link.curve_from == fit.curve_from[:n] and link.curve_alpha == fit.curve_alpha[:n]
    assert link.curve_bandwidth[:-1] == fit.curve_bandwidth[:n - 1]
    assert link.curve_bandwidth[-1] == link.bandwidth == 50e9  # 400 Gbit/s
    assert (link.curve_collective, link.curve_ranks) == ("allreduce", 2)


def _two_nodes():
    spec, _ = check.load_spec(str(REPO / "specs" / "std" / "clusters.ccost"))
    c = spec.clusters["hgx_h100_2node"]
    return costs.LinkParams.from_link(c.intra_node), costs.LinkParams.from_link(c.inter_node)


def test_a_256_kib_allreduce_over_2x8_h100_costs_what_nccl_tests_measured():
    """Priced at 35.7 µs with the spec-sheet IB link (3 µs per hop), where nccl-tests measured
    48.67 µs (out of place; 46.79 in place) on 2 × 8 H100 with NDR [NCCLT-309]. By hand, hierarchical:
    reduce-scatter inside a node, 7 × 2 µs + 7/8 × 262,144 B / 450 GB/s = 14.510 µs, the all-gather the same;
    across the 2 nodes an AllReduce of m/8 = 32,768 B on the curve's first piece (0.5602 µs, 1.71 GB/s):
    2 × 0.5602 + 32,768 / 1.71e9 = 20.283 µs. 49.30 µs in all, 1.3 % above the measurement. (The issue asked
    for ≥ 50 µs; the one public 2 × 8 H100 NDR log measures 48.67 µs, which the curve follows.)"""
    intra, inter = _two_nodes()
    g = costs.group_cost("allreduce", "auto", 16, 256 * 1024, 8, intra, inter)
    assert g.used == "hierarchical"
    assert g.chosen.time == pytest.approx(49.3025 * US, rel=1e-4)
    assert g.chosen.time == pytest.approx(48.67 * US, rel=0.02)


@pytest.mark.parametrize("size,measured", [(32 * 1024, 34.10), (1 << 20, 71.93), (16 << 20, 185.4)])
def test_other_sizes_follow_the_log(size, measured):
    """The same curve at other decode-sized messages, against the log's out-of-place times (µs): within
    the fit's own scatter (the log has 77.69 µs at 512 KiB above 71.93 µs at 1 MiB)."""
    intra, inter = _two_nodes()
    t = costs.group_cost("allreduce", "auto", 16, size, 8, intra, inter).chosen.time
    assert t == pytest.approx(measured * US, rel=0.20)


def test_tp8_pp2_beats_tp16_for_llama_405b_decode_on_two_hgx_h100_nodes():
    """With the bundled links and stack: TP=16 across the two nodes pays 252 AllReduces of
    1 MiB per token over InfiniBand at the measured ~83 µs each (hierarchical: 2 × 16.039 µs inside the nodes,
    2 × 24.12 µs + 131,072 B / 50 GB/s = 50.86 µs between them), 20.90 ms; TP=8 × PP=2 sends one 1 MiB
    activation between the stages. TP=8 × PP=2 has the lower decode latency."""
    spec, _ = check.load_spec(str(REPO / "specs" / "llama31-405b-two-nodes.ccost"))
    res = evaluate.evaluate(spec)
    tp16, pp2 = res.plans["tp16"].doc, res.plans["tp8_pp2"].doc
    (ar,) = [c for c in tp16["collectives"] if c["kind"] == "allreduce"]
    assert ar["time_s"] == pytest.approx((2 * 16.039 + 50.861) * US, rel=1e-4)
    assert pp2["latency_s"] < tp16["latency_s"]
    assert res.compares["spec_sheet"]["ranking"][0] == "tp8_pp2"
