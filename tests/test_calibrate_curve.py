"""Links that carry a measured curve and floors.

Expected numbers are hand arithmetic written next to the assertion, or the measured times of the real logs
in specs/measured/ (quoted), never the code's own output.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from ccost import derive
from ccost.model import costs
from ccost.calibrate import fit_log, read_log
from ccost.check import check_text
from ccost.cli import main
from ccost.units import INFORMATION

REPO = Path(__file__).resolve().parent.parent
H100 = REPO / "specs" / "measured" / "w_all_reduce.txt"
OCI = REPO / "specs" / "measured" / "oci_a100_1x8_ar.txt"

CURVE_LINK = """
link nv "two pieces" {
  alpha = 2 us
  bandwidth = 200 GB/s
  curve_from = [0 B, 1 MiB]
  curve_alpha = [2 us, 10 us]
  curve_bandwidth = [50 GB/s, 200 GB/s]
  curve_collective = allreduce
  curve_ranks = 8
  %s
}
"""


def _link(extra: str = ""):
    r = check_text(CURVE_LINK % extra, "t.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    return r.spec.links[0] if isinstance(r.spec.links, (list, tuple)) else next(iter(r.spec.links.values()))


def _errors(text: str):
    return [(d.code, d.message) for d in check_text(text, "t.ccost").errors]


def test_a_message_is_priced_on_its_piece_in_every_mode():
    lp = costs.LinkParams.from_link(_link())
    # 4 MiB is on piece 2: 14 hops × 10 µs + 1.75 × 4,194,304 B / 200 GB/s = 140 µs + 36.70016 µs
    t = lp.cost("allreduce", "ring", 8, 4 * 2**20).time
    assert t == pytest.approx(176.70016e-6, rel=1e-12)
    # 64 KiB is on piece 1: 14 × 2 µs + 1.75 × 65,536 / 50 GB/s = 28 µs + 2.29376 µs
    assert lp.cost("allreduce", "ring", 8, 65536).time == pytest.approx(30.29376e-6, rel=1e-12)
    # array mode: the same numbers, element by element (a sweep over message sizes)
    arr = lp.cost("allreduce", "ring", 8, np.array([65536.0, 4 * 2**20])).time
    assert arr.tolist() == [lp.cost("allreduce", "ring", 8, 65536).time, t]
    # derive mode: the same float, and the derivation names the piece that priced it
    dp = costs.LinkParams.from_link(_link(), derivation=True, label="intra")
    m = derive.leaf("m", 4 * 2**20, INFORMATION, "message")
    v = dp.cost("allreduce", "ring", 8, m).time
    assert derive.value_of(v) == t
    text = derive.to_text(derive.steps(v))
    assert "piece 2 of 2" in text and "α_intra,2" in text


def test_the_boundary_belongs_to_the_upper_piece():
    lp = costs.LinkParams.from_link(_link())
    c = lp.curve
    assert c.index(2**20 - 1) == 0 and c.index(2**20) == 1
    assert c.index(np.array([0.0, 2**20 - 1, 2**20, 1e12])).tolist() == [0, 0, 1, 1]


def test_no_algorithm_is_priced_below_the_curve_on_the_measured_collective_and_ranks():
    lp = costs.LinkParams.from_link(_link())
    # tree on 8 ranks at 64 KiB by its own formula: 6 hops × 2 µs + 2.29376 µs = 14.29376 µs; the curve
    # (ring, what was measured) says 30.29376 µs, so tree is raised to it
    tree = lp.cost("allreduce", "tree", 8, 65536)
    assert tree.time == pytest.approx(30.29376e-6, rel=1e-12)
    assert tree.latency + tree.bandwidth_time == pytest.approx(tree.time, rel=1e-12)
    # on 4 ranks nothing was measured: tree keeps its formula, 4 × 2 µs + 1.5 × 65,536 / 50 GB/s
    assert lp.cost("allreduce", "tree", 4, 65536).time == pytest.approx(8e-6 + 1.96608e-6, rel=1e-12)
    # another collective on 8 ranks is not raised either: allgather 7 × 2 µs + 7/8 × 65,536 / 50 GB/s
    assert lp.cost("allgather", None, 8, 65536).time == pytest.approx(14e-6 + 1.14688e-6, rel=1e-12)
    # auto picks among algorithms that are all at least the curve
    g = costs.group_cost("allreduce", "auto", 8.0, np.geomspace(8, 2**33, 31), 8.0, lp, None)
    ring = lp.cost("allreduce", "ring", 8.0, np.geomspace(8, 2**33, 31)).time
    assert np.all(g.chosen.time >= ring * (1 - 1e-12))


def test_floor_latency_is_a_floor_for_two_ranks_or_more_and_nothing_for_one():
    lp = costs.LinkParams.from_link(_link("floor_latency = 25 us"))
    # p2p of 1 KiB: 1 × 2 µs + 1,024 B / 50 GB/s = 2.02 µs, raised to the 25 µs floor
    assert lp.cost("p2p", None, 2, 1024).time == pytest.approx(25e-6, rel=1e-12)
    assert lp.cost("p2p", None, 1, 1024).time == 0
    arr = lp.cost("p2p", None, np.array([1.0, 2.0]), 1024.0).time
    assert arr[0] == 0.0 and arr[1] == pytest.approx(25e-6, rel=1e-12)


@pytest.mark.parametrize("lists,why", [
    ("curve_from = [0 B, 1 MiB]\n curve_alpha = [2 us]", "has 1 value but `curve_from` starts 2 pieces"),
    ("curve_from = [1 KiB, 1 MiB]", "starts at 1.024 kB"),
    ("curve_from = [0 B, 1 MiB, 1 KiB]", "must go up"),
])
def test_a_malformed_curve_is_an_error_that_names_it(lists, why):
    errs = _errors(f'link x {{\n alpha = 2 us\n bandwidth = 1 GB/s\n {lists}\n}}\n')
    assert [c for c, _ in errs] == ["E203"] and why in errs[0][1], errs


def _calibrated(log: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["calibrate", str(log), "--name", "measured"]) == 0
    return out.getvalue()


def _measured(log: Path):
    text = log.read_text().splitlines()
    rows = [ln.split() for ln in text if ln.strip() and ln.split()[0].isdigit()]  # data rows only
    return np.array([float(r[0]) for r in rows]), np.array([float(r[5]) * 1e-6 for r in rows])


LOGS = sorted((REPO / "specs" / "measured").glob("*.txt"))
RANKS = {"w_all_reduce.txt": 4, "oci_a100_1x8_ar.txt": 8, "a3mega_2x8_all_reduce.txt": 16,
         "alps_gh200_2x4_all_reduce.txt": 8, "h100_2x8_ib_all_reduce.txt": 16,
         "oci_a100_2x8_roce_all_reduce.txt": 16}  # from the logs


#: Logs whose own rows scatter beyond the 5 % median: the two-node H100 NDR log times 8 B at 68.52 us beside
#: 24.96 us at 16 B, 256 B at 94.40 us beside 25.68 us at 128 B, and 512 KiB (77.69 us) above 1 MiB (71.93 us);
#: one α-β piece cannot follow that, so its blended fit is held to 10 % at the median (30 % at >= 64 MiB,
#: where NVLink SHARP inside the nodes bends the curve).
NOISY = {"h100_2x8_ib_all_reduce.txt": 0.10}


def test_every_committed_log_is_judged():
    assert sorted(p.name for p in LOGS) == sorted(RANKS)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_the_printed_block_predicts_its_log(log):
    ranks = RANKS[log.name]
    """The block `ccost calibrate` prints, checked as a spec and priced by the cost
    core as a plan prices it (auto AllReduce), is within 5 % at the median and 10 % at >= 64 MiB of the
    out-of-place times the log printed (read here straight from its columns, not through the parser)."""
    text = _calibrated(log)
    r = check_text(text, "c.ccost")
    assert r.errors == []
    link = r.spec.links[0] if isinstance(r.spec.links, (list, tuple)) else next(iter(r.spec.links.values()))
    assert link.curve_ranks == ranks and link.curve_collective == "allreduce"
    from ccost.fmt import format_text

    assert format_text(text, "c.ccost") == text  # written in `ccost fmt`'s layout
    sizes, times = _measured(log)
    lp = costs.LinkParams.from_link(link)
    t = costs.group_cost("allreduce", "auto", float(ranks), sizes, float(ranks), lp, None).chosen.time
    rel = np.abs(t - times) / times
    assert np.median(rel) < NOISY.get(log.name, 0.05)
    assert rel[sizes >= 64 * 2**20].max() < max(0.10, NOISY.get(log.name, 0.0) * 3)


def test_auto_on_a_calibrated_link_is_not_priced_below_the_small_messages_the_log_measured():
    """The issue: `auto` priced a 16 KiB AllReduce at 4.1 µs while the same log measured 23.5 µs. The H100
    log measured 23.96 µs at 16,384 B and 22.72 µs at its fastest (8 B): the block's floor and one-shot
    latency are that 22.72 µs, and no algorithm comes out below it."""
    r = check_text(_calibrated(H100), "c.ccost")
    link = r.spec.links[0] if isinstance(r.spec.links, (list, tuple)) else next(iter(r.spec.links.values()))
    assert link.floor_latency == pytest.approx(22.72e-6) and link.one_shot_latency == pytest.approx(22.72e-6)
    lp = costs.LinkParams.from_link(link)
    for alg in costs.ALLREDUCE_ALGORITHMS:
        assert lp.cost("allreduce", alg, 4, 16384).time >= 22.72e-6
    auto = costs.group_cost("allreduce", "auto", 4.0, 16384.0, 4.0, lp, None).chosen.time
    assert auto == pytest.approx(23.96e-6, rel=0.05)


def test_the_fit_reports_the_block_as_priced():
    fit = fit_log(read_log(H100))
    assert fit.curve[0][0] == 0 and len(fit.curve) == len(fit.pieces)
    assert fit.curve_median_error < 0.05 and fit.curve_large_worst_error < 0.10
    assert fit.alpha_measurable and fit.floor == pytest.approx(22.72e-6)


# ---------------------------------------------------------------------------------------------------
# Logs as they come (item 4). Synthetic tables in nccl-tests' layout with times from a known α-β model,
# so that the α and bandwidth to recover are known by construction.

def _table(name: str, p: int, hops: float, vol: float, alpha: float, bw: float, *, redop: str = "none",
           n_gpus: int | None = None, devices: list[str] = (), min_bytes: int = 8, max_bytes: int = 1 << 30,
           round_to_ranks: bool = False, factor: float = 1.0, seed: int = 1) -> str:
    """T(m) = hops·α + vol·m/B µs with 0.5 % noise; ``round_to_ranks``: nccl-tests' all_gather sizes, the
    count per rank rounded down (m // 4 // P elements), so that sizes below 4·P bytes print as 0 B."""
    rng = np.random.default_rng(seed)
    lines = [f"# Collective test starting: {name}",
             f"# nThread 1 nGpus {n_gpus or p} minBytes {min_bytes} maxBytes {max_bytes} step: 2(factor) "
             "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices", *devices,
             "#                                                              out-of-place                "
             "       in-place          ",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
             "time   algbw   busbw #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
             "(us)  (GB/s)  (GB/s)       "]
    m = min_bytes
    while m <= max_bytes:
        count = m // 4 // p if round_to_ranks else m // 4
        size = count * 4 * p if round_to_ranks else m
        t = (hops * alpha + vol * size / bw) * 1e6 if size else 0.25
        cells = []
        for _ in range(2):
            ti = t * (1 + 0.005 * rng.standard_normal())
            alg = size / ti / 1e3
            cells.append(f"  {ti:7.2f}  {alg:6.2f}  {alg * factor:6.2f}       0")
        lines.append(f"{size:12d}  {count:12d}     float  {redop:>6}      -1" + "".join(cells))
        m *= 2
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0 ", "#",
              f"# Collective test concluded: {name}"]
    return "\n".join(lines) + "\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _block_link(path: Path, *args: str):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["calibrate", str(path), "--name", "measured", *args]) == 0
    text = out.getvalue()
    r = check_text(text, "c.ccost")
    assert r.errors == [], [(d.code, d.message) for d in r.errors]
    links = r.spec.links
    return (links[0] if isinstance(links, (list, tuple)) else next(iter(links.values()))), text


def test_all_gather_with_repeated_zero_rows_is_fitted(tmp_path):
    """all_gather_perf -b 8 on 8 GPUs prints 0 B twice (8 and 16 B hold fewer elements than ranks): the rows
    are read, left out of the fit as empty messages, and the rest fits. 8 ranks: 7 hops, 7/8·m per GPU."""
    text = _table("all_gather_perf", 8, 7, 7 / 8, 1.5e-6, 300e9, round_to_ranks=True, factor=7 / 8)
    assert text.count("\n           0             0") == 2
    path = _write(tmp_path, "ag.txt", text)
    fit = fit_log(read_log(path))
    assert fit.kind == "allgather" and fit.ranks == 8
    assert [why for _, why in fit.excluded] == ["0 B: an empty message says nothing about α or bandwidth"] * 2
    assert fit.alpha == pytest.approx(1.5e-6, rel=0.03) and fit.bandwidth == pytest.approx(300e9, rel=0.03)


def test_a_size_that_goes_down_is_still_two_runs_interleaved(tmp_path):
    text = _table("all_gather_perf", 8, 7, 7 / 8, 1.5e-6, 300e9, round_to_ranks=True)
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.strip().startswith("64 "))
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    from ccost.diagnostics import CcostError

    with pytest.raises(CcostError) as info:
        read_log(_write(tmp_path, "ag.txt", "\n".join(lines) + "\n"))
    assert "interleaved" in str(info.value.diagnostics[0].message)


# (test, redop, hops on 8 ranks, volume/m on 8 ranks), written by hand from the module table of ccost.model.costs
KINDS_ON_8 = [
    ("all_gather_perf", "none", 7, 7 / 8),
    ("reduce_scatter_perf", "sum", 7, 7 / 8),
    ("alltoall_perf", "none", 7, 7 / 8),
    ("sendrecv_perf", "sum", 1, 1.0),
    ("broadcast_perf", "none", 3, 3.0),
]


@pytest.mark.parametrize("test,redop,hops,vol", KINDS_ON_8)
def test_each_collective_is_converted_through_its_own_hops_and_volume(tmp_path, test, redop, hops, vol):
    """A log of each collective gives back the α and bandwidth it was made with, and the printed block,
    priced by the cost core for that collective on 8 ranks, gives back the log's times."""
    alpha, bw = 2e-6, 200e9
    path = _write(tmp_path, test.replace("_perf", ".txt"), _table(test, 8, hops, vol, alpha, bw, redop=redop))
    link, text = _block_link(path)
    kind = {"all_gather_perf": "allgather", "reduce_scatter_perf": "reducescatter",
            "alltoall_perf": "alltoall", "sendrecv_perf": "p2p", "broadcast_perf": "broadcast"}[test]
    assert link.curve_collective == kind and link.curve_ranks == 8
    assert link.alpha == pytest.approx(alpha, rel=0.05) and link.bandwidth == pytest.approx(bw, rel=0.05)
    fit = fit_log(read_log(path))
    sizes = np.array([p.size for p in fit.points], dtype=float)
    times = np.array([p.time for p in fit.points])
    t = costs.LinkParams.from_link(link).cost(kind, None, 8.0, sizes).time
    assert np.median(np.abs(t - times) / times) < 0.02
    if kind == "broadcast":
        assert "binomial tree" in text


def test_several_gpus_per_process(tmp_path):
    """`-g 2` on two hosts: nGpus 2 in the header, four Rank lines from two processes: 4 ranks."""
    devices = [f"#  Rank  {r} Group  0 Pid {1000 + r // 2} on node{r // 2} device  {r % 2} [0x{r:02x}] "
               "Tesla V100-SXM2-16GB" for r in range(4)]
    path = _write(tmp_path, "ar.txt", _table("all_reduce_perf", 4, 6, 1.5, 5e-6, 20e9, redop="sum",
                                             n_gpus=2, devices=devices, factor=1.5))
    fit = fit_log(read_log(path))
    assert fit.ranks == 4 and fit.hops == 6
    assert fit.bandwidth == pytest.approx(20e9, rel=0.05)


def test_a_log_of_large_sizes_only_says_alpha_is_not_measurable(tmp_path):
    """The real H100 log from 64 MiB up (its rows, unchanged): every size is bandwidth-bound, so α is
    reported as not measurable and no floor is written; the block still prices those sizes right."""
    lines = H100.read_text().splitlines()
    keep = [ln for ln in lines if not ln.strip() or ln.startswith("#") or int(ln.split()[0]) >= 64 * 2**20]
    keep = [ln.replace("minBytes 8 ", "minBytes 67108864 ") for ln in keep]
    path = _write(tmp_path, "all_reduce_large.txt", "\n".join(keep) + "\n")
    fit = fit_log(read_log(path))
    assert not fit.alpha_measurable and fit.floor is None
    link, text = _block_link(path)
    assert link.floor_latency == 0 and "NOT MEASURABLE" in text and "alpha is not measurable" in text
    assert "alpha not measurable" in link.source
    sizes, times = _measured(path)
    t = costs.group_cost("allreduce", "auto", 4.0, sizes, 4.0, costs.LinkParams.from_link(link), None).chosen.time
    assert np.max(np.abs(t - times) / times) < 0.10


# ---------------------------------------------------------------------------------------------------
# Hierarchies (item 3): a two-node log and the intra-node link give the inter-node link.

INTRA_SPEC = 'link nv "intra" {\n  alpha = 3 us\n  bandwidth = 150 GB/s\n}\n'


def _two_node_log(stage, inter_alpha: float, inter_bw: float, g: int = 4, n: int = 2) -> str:
    """all_reduce_perf over n nodes × g GPUs, times by the hierarchical model written out by hand:
    stage(m) for each of the two intra-node stages, then a ring AllReduce over the n nodes on m/g:
    2(n−1) hops × α + 2(n−1)/n × (m/g) / B."""
    p = g * n
    devices = [f"#  Rank {r:2d} Group  0 Pid {100 + r} on node{r // g} device  {r % g} [0x{r:02x}] NVIDIA H100"
               for r in range(p)]

    def t(m):
        return 2 * stage(m) + 2 * (n - 1) * inter_alpha + 2 * (n - 1) / n * (m / g) / inter_bw

    sizes = [8 << k for k in range(28)]  # 8 B .. 1 GiB
    return _table_from("all_reduce_perf", p, [(m, t(m)) for m in sizes], devices)


def _table_from(name: str, p: int, rows, devices) -> str:
    lines = [f"# Collective test starting: {name}",
             f"# nThread 1 nGpus 1 minBytes {rows[0][0]} maxBytes {rows[-1][0]} step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices", *devices, "#",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
             "time   algbw   busbw #wrong"]
    for m, t in rows:
        us = t * 1e6
        alg = m / us / 1e3
        cell = f"  {us:9.3f}  {alg:6.2f}  {alg * 2 * (p - 1) / p:6.2f}       0"
        lines.append(f"{m:12d}  {m // 4:12d}     float     sum      -1" + cell + cell)
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0 ", "#",
              f"# Collective test concluded: {name}"]
    return "\n".join(lines) + "\n"


def test_the_inter_node_link_of_a_two_node_log_given_a_spec_link(tmp_path):
    """Intra link 3 µs, 150 GB/s (a spec); 4 GPUs per node: each stage (reduce-scatter, all-gather) is
    3 hops × 3 µs + 3/4 × m / 150 GB/s. Inter-node 10 µs and 25 GB/s by construction: recovered, and the
    hierarchical prediction of the log is exact to the log's printed digits."""
    spec = _write(tmp_path, "intra.ccost", INTRA_SPEC)
    log = _write(tmp_path, "two_nodes.txt", _two_node_log(lambda m: 3 * 3e-6 + 0.75 * m / 150e9, 10e-6, 25e9))
    link, text = _block_link(log, "--intra", f"{spec}:nv")
    assert link.curve_ranks == 2 and link.curve_collective == "allreduce"
    assert link.alpha == pytest.approx(10e-6, rel=0.01) and link.bandwidth == pytest.approx(25e9, rel=0.01)
    assert "2 nodes x 4 per node" in text and "hierarchical" in link.source
    import re

    med = float(re.search(r"hierarchical, ring\): median\s+#?\s*error ([\d.]+) %", text.replace("\n", " ")).group(1))
    assert med < 0.5


def test_the_inter_node_link_given_a_one_node_log(tmp_path):
    """The intra-node link from a one-node all_reduce log (4 ranks: 6 × 3 µs + 1.5 × m / 150 GB/s). Its
    block has a floor, the smallest time it measured (8 B: 18.00008 µs); a plan prices each intra stage at
    least at that floor, so the two-node log is made with the same rule; the inter link (10 µs, 25 GB/s)
    comes back and the hierarchical prediction of the two-node log is within 1 % at the median."""
    one_dev = [f"#  Rank  {r} Group  0 Pid {100 + r} on node0 device  {r} [0x{r:02x}] NVIDIA H100" for r in range(4)]
    sizes = [8 << k for k in range(28)]
    one = _write(tmp_path, "one_node.txt", _table_from(
        "all_reduce_perf", 4, [(m, 6 * 3e-6 + 1.5 * m / 150e9) for m in sizes], one_dev))
    floor = 6 * 3e-6 + 1.5 * 8 / 150e9
    two = _write(tmp_path, "two_nodes.txt", _two_node_log(
        lambda m: max(3 * 3e-6 + 0.75 * m / 150e9, floor), 10e-6, 25e9))
    link, text = _block_link(two, "--intra", str(one))
    assert link.alpha == pytest.approx(10e-6, rel=0.02) and link.bandwidth == pytest.approx(25e9, rel=0.02)


def test_the_alps_two_node_log_under_the_hierarchical_model(tmp_path):
    """A real two-node log (8x GH200, 4 per node) with the spec-sheet NVLink 4 as the intra-node link: the
    inter-node link is fitted and its hierarchical prediction of the log stays within the issue's 10 %."""
    log = REPO / "specs" / "measured" / "alps_gh200_2x4_all_reduce.txt"
    link, text = _block_link(log, "--intra", str(REPO / "specs" / "std" / "links.ccost") + ":nvlink4")
    assert link.curve_ranks == 2
    from ccost.calibrate.hier import fit_hierarchical

    fit = fit_log(read_log(log))
    lp = costs.LinkParams.from_link(check_text(
        (REPO / "specs" / "std" / "links.ccost").read_text(), "links.ccost").spec.links["nvlink4"], label="intra")
    h = fit_hierarchical(fit, read_log(log).tests[0], lp, "nvlink4")
    assert (h.nodes, h.per_node) == (2, 4)
    sizes, times = _measured(log)
    t = costs.group_cost("allreduce", "ring", 8.0, sizes, 4.0, lp, costs.LinkParams.from_link(link),
                         "hierarchical").chosen.time
    assert np.median(np.abs(t - times) / times) < 0.10


@pytest.mark.parametrize("args,why", [
    (["--per-node", "4"], "--per-node is for the hierarchical fit"),
    (["--intra", "nope.ccost:nv"], "not found"),
    (["--intra", "{spec}:ib"], "no link `ib`"),
    (["--intra", "{spec}", "--per-node", "3"], "is not two or more whole nodes"),
])
def test_hierarchical_options_get_clear_errors(tmp_path, capsys, args, why):
    spec = _write(tmp_path, "intra.ccost", INTRA_SPEC)
    log = _write(tmp_path, "two_nodes.txt", _two_node_log(lambda m: 9e-6 + 0.75 * m / 150e9, 10e-6, 25e9))
    rc = main(["calibrate", str(log), *[a.replace("{spec}", str(spec)) for a in args]])
    assert rc != 0 and why in capsys.readouterr().err


def test_a_log_without_hosts_needs_per_node(tmp_path, capsys):
    spec = _write(tmp_path, "intra.ccost", INTRA_SPEC)
    log = _write(tmp_path, "ar.txt", _table("all_reduce_perf", 8, 14, 1.75, 5e-6, 20e9, redop="sum"))
    assert main(["calibrate", str(log), "--intra", f"{spec}:nv"]) != 0
    assert "pass --per-node G" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# The review (item 6)

def _review_spec(tmp_path: Path, inter_block: str, inter_name: str) -> Path:
    (tmp_path / "inter.ccost").write_text(inter_block)
    spec = tmp_path / "two.ccost"
    spec.write_text(f'''import "std/gpus.ccost"
import "std/links.ccost"
import "std/models.ccost"
import "inter.ccost"

cluster two "two nodes" {{
  gpu = h100
  nodes = 2
  gpus_per_node = 4
  intra_node = nvlink4
  inter_node = {inter_name}
}}

plan dp2 {{
  model = llama3_8b
  cluster = two
  phase = decode
  batch = 8
  tp = 4
  pp = 2
}}
''')
    return spec


def test_the_review_shows_the_hierarchical_fit_of_an_inter_node_link(tmp_path):
    from ccost.check import check_file
    from ccost.report import calibrations_for

    log = tmp_path / "alps.txt"
    log.write_text((REPO / "specs" / "measured" / "alps_gh200_2x4_all_reduce.txt").read_text())
    assert main(["calibrate", str(log), "--name", "alps_inter", "--intra",
                 str(REPO / "specs" / "std" / "links.ccost") + ":nvlink4", "-o", str(tmp_path / "inter.ccost")]) == 0
    spec = _review_spec(tmp_path, (tmp_path / "inter.ccost").read_text(), "alps_inter")
    res = check_file(str(spec))
    assert res.ok, [(d.code, d.message) for d in res.errors]
    cals = calibrations_for(res.spec, ["dp2"], tmp_path)["dp2"]
    (cal,) = cals  # nvlink4 is the spec sheet's: only the inter-node link is measured
    assert cal.svg and "Hierarchical prediction of the whole log" in cal.note and "median error" in cal.note


def test_checklist_item_3_warns_when_alpha_was_not_measured(tmp_path, capsys):
    spec = tmp_path / "s.ccost"
    base = '''import "std/gpus.ccost"
import "std/models.ccost"
link nv "x" {
  alpha = 7 us
  bandwidth = 350 GB/s
  source = "%s"
}
cluster one { gpu = h100
  gpus_per_node = 4
  intra_node = nv }
plan p { model = llama3_8b
  cluster = one
  phase = decode
  batch = 8
  tp = 4 }
'''
    measured_stack = ('stack st { hbm_efficiency = 80 %\n  source = "measured: ccost calibrate --steps s.csv" }\n'
                      'plan q extends p { stack = st }\n')
    for source, extra, want in (
            ("measured: nccl-tests all_reduce_perf, x.txt, 4 ranks, ring, alpha not measurable", "",
             "WARN    α and β measured, not spec-sheet                               Measured, but α is not"),
            # the plan's profile counts too: the bundled default is not measured
            ("measured: nccl-tests all_reduce_perf, x.txt, 4 ranks, ring", "",
             "but the stack profile `serving_default` is not measured"),
            ("measured: nccl-tests all_reduce_perf, x.txt, 4 ranks, ring", measured_stack,
             "pass    α and β measured, not spec-sheet                               Measured α/β (nv: measured")):
        spec.write_text(base % source + extra)
        assert main(["eval", str(spec)]) in (0, 1)
        out = capsys.readouterr().out
        assert want in out, out
