"""ccost calibrate: nccl-tests parsing, the fit, the link block, the plot, the CLI.

Expected numbers come from the logs themselves (read off by eye, quoted in the tests), from the hardware sources
(docs/sources.md, [KA100], [KH100], [NCCL-212]: NVLink 3 = 300 GB/s and NVLink 4 = 450 GB/s per direction line rate) or from hand
arithmetic written out next to the assertion, never from the code's own output.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ccost.calibrate import fit_for_link, fit_log, link_block, parse_log, plot_svg, read_log
from ccost.calibrate.files import parse_bytes
from ccost.calibrate.fit import fit_line, fit_pieces
from ccost.cli import main
from ccost.diagnostics import CcostError

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "nccl"
# Real nccl-tests logs, committed verbatim with their sources (specs/measured/SOURCES.md).
OCI = REPO / "specs" / "measured" / "oci_a100_1x8_ar.txt"
H100 = REPO / "specs" / "measured" / "w_all_reduce.txt"


def _err(fn, *args, **kw) -> CcostError:
    with pytest.raises(CcostError) as info:
        fn(*args, **kw)
    return info.value


# ---------------------------------------------------------------------------------------------------
# Synthetic logs: nccl-tests' layout, times from a known α-β model, multiplicative noise, fixed seed.

def _row(size: int, count: int, redop: str, root: int, t_oop: float | None, t_ip: float | None,
         factor: float, wrong: str = "0") -> str:
    def triple(t):
        if t is None:
            return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {wrong:>6}"
        algbw = size / t / 1e3  # GB/s with t in µs (SOURCES.md: algbw = size / time)
        ts = f"{t:7.2f}" if t < 1e4 else f"{t:7.1f}" if t < 1e5 else f"{t:7.0f}"
        return f"  {ts}  {algbw:6.2f}  {algbw * factor:6.2f}  {wrong:>6}"
    return f"{size:12d}  {count:12d}  {'float':>8}  {redop:>6}  {root:6d}" + triple(t_oop) + triple(t_ip)


def synthetic_table(name: str, p: int, alpha: float, bw: float, hops: float, vol: float, *,
                    noise: float = 0.01, seed: int = 0, n_gpus: int | None = None,
                    min_bytes: int = 8, max_bytes: int = 8 << 30, devices: list[str] | None = None,
                    starting_line: bool = True, time_fn=None, factor: float | None = None,
                    per_rank_count: bool = False, edits: dict | None = None) -> str:
    """One test's output. T(m) = hops·α + vol·m/B in µs (the caller writes hops and vol by hand)."""
    rng = np.random.default_rng(seed)
    kind_factor = {"all_reduce_perf": 2 * (p - 1) / p, "all_gather_perf": (p - 1) / p}
    factor = kind_factor.get(name, 1.0) if factor is None else factor
    redop = "sum" if "reduce" in name else "none"
    lines = []
    if starting_line:
        lines.append(f"# Collective test starting: {name}")
    lines.append(f"# nThread 1 nGpus {n_gpus or p} minBytes {min_bytes} maxBytes {max_bytes} step: 2(factor) "
                 "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0")
    lines.append("#")
    if devices is not None:
        lines.append("# Using devices")
        lines += devices
    lines.append("#                                                              out-of-place                "
                 "       in-place          ")
    lines.append("#       size         count      type   redop    root     time   algbw   busbw #wrong     "
                 "time   algbw   busbw #wrong")
    lines.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            "
                 "(us)  (GB/s)  (GB/s)       ")
    m = min_bytes
    while m <= max_bytes:
        t = time_fn(m) if time_fn else (hops * alpha + vol * m / bw) * 1e6
        t1 = t * (1 + noise * rng.standard_normal())
        t2 = t * (1 + noise * rng.standard_normal())
        count = m // 4 // (p if per_rank_count else 1)
        text = _row(m, count, redop, -1, t1, t2, factor)
        if edits and m in edits:
            text = edits[m](m, count, redop, t1, t2, factor)
        lines.append(text)
        m *= 2
    lines.append("# Out of bounds values : 0 OK")
    lines.append("# Avg bus bandwidth    : 42.0 ")
    lines.append("#")
    if starting_line:
        lines.append(f"# Collective test concluded: {name}")
    return "\n".join(lines) + "\n"


def ring_ar(p, alpha, bw, **kw):
    # ring AllReduce: 2(P-1) hops, 2(P-1)/P·m per GPU (the notes' α-β model)
    return synthetic_table("all_reduce_perf", p, alpha, bw, 2 * (p - 1), 2 * (p - 1) / p, **kw)


# ---------------------------------------------------------------------------------------------------
# Parsing the shared logs: rows equal the printed numbers

def test_oci_log_rows_equal_the_printed_numbers():
    log = read_log(OCI)
    (t,) = log.tests
    assert (t.n_threads, t.n_gpus, t.min_bytes, t.max_bytes) == (1, 8, 64, 10737418240)
    assert t.name == "all_reduce_perf" and t.kind == "allreduce"
    assert t.ranks == 8  # nGpus 8 x nThread 1 x 1 process; the log lists no devices
    assert len(t.rows) == 28  # 64 B .. 8 GiB doubling: 2^6 .. 2^33 is 28 sizes
    first = t.rows[0]  # line 5: "64  16  float  sum  -1  32.01  0.00  0.00  0  31.82  0.00  0.00  0"
    assert (first.line, first.size, first.count, first.dtype, first.redop, first.root) == \
        (5, 64, 16, "float", "sum", -1)
    assert (first.out_of_place.time_us, first.in_place.time_us) == (32.01, 31.82)
    mib = next(r for r in t.rows if r.size == 1048576)  # "76.71 13.67 23.92 0 77.73 13.49 23.61 0"
    assert mib.line == 19
    assert (mib.out_of_place.time_us, mib.out_of_place.algbw, mib.out_of_place.busbw) == (76.71, 13.67, 23.92)
    assert (mib.in_place.time_us, mib.in_place.algbw, mib.in_place.busbw) == (77.73, 13.49, 23.61)
    r128 = next(r for r in t.rows if r.size == 134217728)  # "1191.2 112.67 197.17 0 1182.6 113.50 198.62"
    assert (r128.out_of_place.time_us, r128.in_place.time_us, r128.in_place.busbw) == (1191.2, 1182.6, 198.62)
    last = t.rows[-1]  # line 32: "8589934592 2147483648 ... 63929 134.37 235.14 0 63911 134.40 235.21 0"
    assert (last.line, last.size, last.count) == (32, 8589934592, 2147483648)
    assert (last.out_of_place.time_us, last.out_of_place.algbw, last.out_of_place.busbw,
            last.out_of_place.wrong) == (63929.0, 134.37, 235.14, 0)
    assert (last.in_place.time_us, last.in_place.busbw) == (63911.0, 235.21)
    assert t.complete and log.warnings == ()


def test_h100_log_rows_versions_and_ranks():
    log = read_log(H100)
    assert log.tests_version == "2.18.3"
    assert log.nccl_version == "2.29.2"  # nccl-library=22902 = 2*10000 + 29*100 + 2 (SOURCES.md: 2.29.2)
    (t,) = log.tests
    assert t.name == "all_reduce_perf" and t.line == 3
    assert t.ranks == 4 and t.devices == ()  # "Using devices" with no device lines: nGpus 4
    assert len(t.rows) == 31  # 8 B .. 8 GiB doubling: 2^3 .. 2^33
    first = t.rows[0]  # line 10: "8 2 float sum -1 22.72 0.00 0.00 0 22.97 0.00 0.00 0"
    assert (first.line, first.size, first.count, first.out_of_place.time_us, first.in_place.time_us) == \
        (10, 8, 2, 22.72, 22.97)
    mib = next(r for r in t.rows if r.size == 1048576)  # "27.03 38.79 58.18 0 29.62 35.40 53.10 0"
    assert (mib.out_of_place.time_us, mib.out_of_place.algbw, mib.out_of_place.busbw) == (27.03, 38.79, 58.18)
    assert (mib.in_place.time_us, mib.in_place.algbw, mib.in_place.busbw) == (29.62, 35.40, 53.10)
    last = t.rows[-1]  # "35168.9 244.25 366.37 0 35182.8 244.15 366.23 0"
    assert (last.out_of_place.time_us, last.out_of_place.busbw, last.in_place.time_us) == \
        (35168.9, 366.37, 35182.8)


@pytest.mark.parametrize("path, factor", [(OCI, 2 * 7 / 8), (H100, 2 * 3 / 4)])
def test_parsed_columns_obey_the_log_definitions(path, factor):
    """SOURCES.md: algbw = size/time (GB/s), busbw = algbw·2(n−1)/n. Holds on every parsed row, so no
    column is shifted. Tolerances: the printed two decimals (±0.005) and the printed time's last digit."""
    for r in read_log(path).tests[0].rows:
        for tm in (r.out_of_place, r.in_place):
            assert abs(tm.algbw - r.size / tm.time_us / 1e3) <= 0.0051 + 5e-4 * tm.algbw
            assert abs(tm.busbw - factor * tm.algbw) <= 0.005 + factor * 0.005 + 1e-9


# ---------------------------------------------------------------------------------------------------
# Fitting the shared logs: physically sensible numbers

def _median_time(log_path, upto: int) -> float:
    times = sorted(r.out_of_place.time_us for r in read_log(log_path).tests[0].rows if r.size <= upto)
    n = len(times)
    return (times[n // 2] + times[(n - 1) // 2]) / 2


def test_fit_oci_a100_is_physically_sensible():
    fit = fit_log(read_log(OCI))
    # α: the small-message time is flat at ~32 µs (64 B .. 32 KiB, sorted: 31.75 31.77 32.01 32.01 32.02
    # 32.03 32.13 32.21 32.22 32.48; median (32.02 + 32.03)/2 = 32.025 µs);
    # a ring AllReduce on 8 ranks takes 2(8-1) = 14 hops, so α ≈ 32.025/14 = 2.29 µs per hop. That sits
    # between NCCL's own per-step NVLink figures (0.6 µs LL .. 3.4 µs Simple, plus a 6.6 µs base per
    # collective spread over 14 steps: 1.07 µs) and the notes' "NVLink ~2 µs".
    assert _median_time(OCI, 32768) == pytest.approx(32.025)
    assert fit.alpha == pytest.approx(32.025e-6 / 14, rel=0.03)
    assert 1.0e-6 < fit.alpha < 3.4e-6
    # Bandwidth: below NVLink 3's 300 GB/s per direction line rate [KA100], and close to the busbw
    # plateau 235.14 GB/s (8 GiB row) that NCCL itself reports: busbw = algbw·2(P−1)/P is exactly the
    # per-link rate of the ring model, so B and the plateau must agree within the fit's error (~5 %).
    assert fit.busbw_plateau == pytest.approx(235.14e9)
    assert 0.95 * 235.14e9 < fit.bandwidth < 300e9
    # The fit says why: NCCL switches protocol near 1-4 MiB on this node, so more than one piece.
    assert len(fit.pieces) >= 2
    assert fit.hops == 14 and fit.volume_ratio == pytest.approx(1.75)


def test_fit_h100_is_physically_sensible():
    fit = fit_log(read_log(H100))
    # α: median time of 8 B .. 4 KiB is (23.46 + 23.53)/2 = 23.495 µs; ring on 4 ranks: 2(4−1) = 6 hops.
    assert _median_time(H100, 4096) == pytest.approx(23.495)
    assert fit.alpha == pytest.approx(23.495e-6 / 6, rel=0.03)
    # Bandwidth: below NVLink 4's 450 GB/s per direction line rate [KH100, NCCL-212]; the busbw plateau
    # is 366.37 GB/s (8 GiB) and the catalog's NCCL ring figure ≈ 370 GB/s [NCCL-212]. Here algbw is still
    # rising at 8 GiB (240.67 → 244.25 GB/s over the last two doublings), so a line through 4 MiB .. 8 GiB
    # lands a few % under the plateau: 10 % is the bound.
    assert fit.busbw_plateau == pytest.approx(366.37e9)
    assert 0.90 * 366.37e9 < fit.bandwidth < 450e9
    assert fit.hops == 6 and fit.volume_ratio == pytest.approx(1.5)


def test_tree_algorithm_changes_alpha_not_bandwidth():
    ring = fit_log(read_log(OCI), "ring")
    tree = fit_log(read_log(OCI), "tree")
    # same intercept a; ring divides by 2(P−1) = 14 hops, tree by 2·log2(8) = 6
    assert tree.alpha == pytest.approx(ring.alpha * 14 / 6)
    assert tree.bandwidth == pytest.approx(ring.bandwidth)  # both charged 2(P−1)/P·m per GPU


@pytest.mark.parametrize("path", [OCI, H100])
def test_holdout_error_is_bounded(path):
    """Fit on every other size, predict the others.

    Bound: the log's own repeat of each size (out-of-place vs in-place) differs by up to ~10 % (H100,
    1 MiB: 27.03 vs 29.62 µs = 9.6 %), typically 1-2 %; a held-out size sits between two trained sizes a
    factor 2 apart, and near a protocol switch it may land in the neighbouring piece. So the median
    held-out error must stay within typical noise plus a little (5 %), and the worst within the worst
    repeat noise plus a piece boundary (15 %).
    """
    fit = fit_log(read_log(path), holdout=True)
    h = fit.holdout
    assert h is not None and h.trained_on + h.tested_on == len(fit.points)
    assert h.median_error < 0.05
    assert h.worst_error < 0.15


def test_priced_error_reports_the_single_line_gap():
    """The link block has one α and one B: on the A100 log the single α-β line misses the mid sizes
    badly (at 2 MiB: 14·α + 1.75·2 MiB/B ≈ 32.1 + 15.9 = 48 µs against 112.4 µs measured, −57 %), and
    the fit must say so rather than hide it behind the piecewise error."""
    fit = fit_log(read_log(OCI))
    assert fit.priced_worst_size == 2097152
    assert fit.priced_worst_error == pytest.approx(1 - 48.0 / 112.4, abs=0.02)
    assert fit.worst_error < 0.10  # the piecewise fit itself is good


# ---------------------------------------------------------------------------------------------------
# Synthetic logs: known α and B recovered within 2 %

def test_synthetic_ring_allreduce_recovered_within_2_percent():
    text = ring_ar(8, 2e-6, 200e9, noise=0.01, seed=1)
    fit = fit_log(parse_log(text, "synthetic.txt"))
    assert fit.ranks == 8
    assert fit.alpha == pytest.approx(2e-6, rel=0.02)
    assert fit.bandwidth == pytest.approx(200e9, rel=0.02)
    assert len(fit.pieces) == 1  # one straight line plus noise needs no split


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_synthetic_tree_recovered_within_2_percent(seed):
    # tree AllReduce on 16 ranks: 2·log2(16) = 8 hops; ring volume 2·15/16·m (ccost's convention)
    text = synthetic_table("all_reduce_perf", 16, 5e-6, 50e9, 8, 2 * 15 / 16, noise=0.01, seed=seed)
    fit = fit_log(parse_log(text, "synthetic.txt"), "tree")
    assert fit.alpha == pytest.approx(5e-6, rel=0.02)
    assert fit.bandwidth == pytest.approx(50e9, rel=0.02)


def test_synthetic_protocol_switch_gives_two_pieces():
    """Up to 64 KiB: LL-like, α 1 µs and 20 GB/s; above: Simple-like, α 3 µs and 200 GB/s (8 ranks,
    ring: 14 hops, 1.75·m). α comes from the small piece, B from the large one."""
    def t(m):
        if m <= 65536:
            return (14 * 1e-6 + 1.75 * m / 20e9) * 1e6
        return (14 * 3e-6 + 1.75 * m / 200e9) * 1e6
    text = ring_ar(8, 0, 1, noise=0.005, seed=5, time_fn=t)
    fit = fit_log(parse_log(text, "switch.txt"))
    assert len(fit.pieces) >= 2
    assert fit.pieces[0].hi == 65536
    assert fit.alpha == pytest.approx(1e-6, rel=0.02)
    assert fit.bandwidth == pytest.approx(200e9, rel=0.02)


def test_weighted_line_is_exact_on_exact_data_and_stays_physical():
    sizes = np.array([1e3, 1e5, 1e7, 1e9])
    a, b = fit_line(sizes, 3e-5 + sizes / 1e11)
    assert a == pytest.approx(3e-5) and b == pytest.approx(1e-11)
    # decreasing times would need b < 0: clamp to a flat line at the weighted mean, never negative
    a, b = fit_line(sizes, np.array([4e-5, 3.9e-5, 3.8e-5, 3.7e-5]))
    assert b == 0 and 3.7e-5 < a < 4e-5
    pieces = fit_pieces(sizes, 3e-5 + sizes / 1e11)
    assert len(pieces) == 1


# ---------------------------------------------------------------------------------------------------
# More of what nccl-tests prints

def _devices(n, per_host):
    return [f"#  Rank {r:2d} Group  0 Pid {4000 + r:6d} on gpu-node-{r // per_host} device {r % per_host:2d} "
            f"[0x{16 + r % per_host:02x}] NVIDIA H100 80GB HBM3" for r in range(n)]


def test_ranks_counted_from_device_lines_across_processes():
    # mpirun -np 16 all_reduce_perf -g 1: each process has nGpus 1; the device list names 16 ranks
    text = ring_ar(16, 3e-6, 40e9, n_gpus=1, devices=_devices(16, 8))
    (t,) = parse_log(text, "mpi.txt").tests
    assert t.ranks == 16 and "16 `Rank` lines" in t.ranks_from
    assert t.hosts == ("gpu-node-0", "gpu-node-1") and t.gpu_names == ("NVIDIA H100 80GB HBM3",)
    fit = fit_log(parse_log(text, "mpi.txt"))
    assert fit.hops == 30  # 2(16 − 1)
    assert fit.line_rate == 450e9  # H100 named in the device lines: NVLink 4 line rate from the catalog


def test_processes_inferred_from_busbw_when_devices_are_missing():
    # 2 processes x nGpus 8, device lines stripped: busbw/algbw = 2·15/16 = 1.875 says 16 ranks
    text = ring_ar(16, 3e-6, 40e9, n_gpus=8)
    (t,) = parse_log(text, "two_nodes.txt").tests
    assert t.ranks == 16 and "2 processes" in t.ranks_from


def test_ranks_option_overrides_and_disagreement_warns():
    log = read_log(OCI, ranks=4)
    assert log.tests[0].ranks == 4
    (w,) = log.warnings
    assert w.code == "W501" and "says 8 ranks" in w.message  # busbw/algbw = 1.75 = 2·7/8


def test_two_tests_in_one_file_and_nccl_debug_lines():
    debug = ("gpu-node-0:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
             "gpu-node-0:4242:4242 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\n")
    ar = ring_ar(8, 2e-6, 200e9, seed=6)
    # AllGather on 8 ranks: 7 hops, 7/8·m per GPU; nccl-tests prints the per-rank count
    ag = synthetic_table("all_gather_perf", 8, 2e-6, 200e9, 7, 7 / 8, seed=7, per_rank_count=True)
    log = parse_log("# nccl-tests version 2.18.3\n" + debug + ar + ag, "both.txt")
    assert [t.name for t in log.tests] == ["all_reduce_perf", "all_gather_perf"]
    assert log.nccl_version == "2.18.3"
    fit_ag = fit_log(log, test="all_gather")
    assert fit_ag.kind == "allgather" and fit_ag.hops == 7
    assert fit_ag.alpha == pytest.approx(2e-6, rel=0.02)
    assert fit_ag.bandwidth == pytest.approx(200e9, rel=0.02)
    assert fit_log(log).test == "all_reduce_perf"  # the default is the all_reduce


def test_concatenated_old_style_logs_are_two_tests():
    text = OCI.read_text()
    log = parse_log(text + text, "oci_ar_twice.txt")
    assert len(log.tests) == 2 and log.tests[1].line == 35  # 34 lines per copy; header opens the 2nd


def test_collective_read_from_columns_when_unnamed():
    # reduce_scatter prints redop sum and the per-rank count: told apart from all_reduce by the count
    rs = synthetic_table("reduce_scatter_perf", 8, 2e-6, 100e9, 7, 7 / 8, starting_line=False,
                         per_rank_count=True, factor=7 / 8)
    (t,) = parse_log(rs, "run42.txt").tests
    assert t.name == "reduce_scatter_perf" and t.kind == "reducescatter"


def test_unnamed_allgather_or_alltoall_is_a_clear_error():
    ag = synthetic_table("all_gather_perf", 8, 2e-6, 100e9, 7, 7 / 8, starting_line=False,
                         per_rank_count=True)
    e = _err(parse_log, ag, "run42.txt")
    assert "cannot tell which collective" in e.diagnostics[0].message
    assert "Collective test starting" in e.diagnostics[0].help


def test_wrong_and_na_rows_are_reported_not_fitted():
    def wrong(m, count, redop, t1, t2, f):
        return _row(m, count, redop, -1, t1, t2, f, wrong="3")

    def na(m, count, redop, t1, t2, f):
        return _row(m, count, redop, -1, None, None, f, wrong="N/A")
    text = ring_ar(8, 2e-6, 200e9, seed=8, edits={1024: wrong, 1 << 20: na})
    fit = fit_log(parse_log(text, "bad_rows.txt"))
    reasons = dict(fit.excluded)
    assert len(fit.excluded) == 2
    assert any("#wrong = 3" in why for why in reasons.values())
    assert any("N/A" in why for why in reasons.values())
    assert len(fit.points) == 31 - 2  # 8 B .. 8 GiB is 31 sizes
    assert fit.alpha == pytest.approx(2e-6, rel=0.02)
    block = link_block(fit, "x", "bad_rows.txt")
    assert block.count("# Not fitted: line") == 2


def test_unvalidated_rows_are_fitted_with_a_note():
    def novalid(m, count, redop, t1, t2, f):
        return _row(m, count, redop, -1, t1, t2, f, wrong="N/A")
    edits = {1 << k: novalid for k in range(3, 34)}
    fit = fit_log(parse_log(ring_ar(8, 2e-6, 200e9, seed=9, edits=edits), "c0.txt"))
    assert len(fit.points) == 31 and any("not validated" in n for n in fit.notes)


# ---------------------------------------------------------------------------------------------------
# Malformed logs: each a clear E501 naming the file, the line and the fix

@pytest.mark.parametrize("name, line, fragment", [
    ("empty.txt", 1, "the log is empty"),
    ("cut_mid_row.txt", 23, "cut in the middle of a row"),
    ("cut_between_rows.txt", 19, "the log is cut"),
    ("export.csv", 1, "CSV"),
    ("binary.gz", 1, "binary"),
    ("interleaved_rows.txt", 13, "interleaved"),
    ("interleaved_text.txt", 16, "unexpected text inside"),
])
def test_malformed_logs_give_a_clear_error(name, line, fragment):
    e = _err(read_log, DATA / name)
    (d,) = e.diagnostics
    assert d.code == "E501" and fragment in d.message
    assert d.span is not None and d.span.line == line and d.span.file.endswith(name)
    assert d.help  # every one says what to do


@pytest.mark.parametrize("text, fragment", [
    ("   \n\n", "the log is empty"),
    ("# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5\n", "a header but no rows"),
    (OCI.read_text() + "# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor)\n",
     "line 35 has no rows"),
    ("hello\nworld\n", "no nccl-tests results table"),
    (OCI.read_text().replace("# Out of bounds", "gpu1: Test NCCL failure common.cu:958 'unhandled cuda "
                             "error'\n# Out of bounds"), "reported a failure"),
])
def test_other_bad_inputs(text, fragment):
    e = _err(parse_log, text, "bad.txt")
    assert fragment in e.diagnostics[0].message


def test_non_utf8_bytes_without_nul_are_binary():
    e = _err(parse_bytes, b"\xff\xfe\x80 garbage \x81", "x.bin")
    assert "not text" in e.diagnostics[0].message


def test_too_few_sizes_to_fit():
    text = ring_ar(8, 2e-6, 200e9, min_bytes=1 << 20, max_bytes=4 << 20)  # 1, 2, 4 MiB: 3 sizes
    e = _err(fit_log, parse_log(text, "short.txt"))
    assert "3 usable sizes" in e.diagnostics[0].message


def test_single_rank_log_cannot_calibrate_a_link():
    text = ring_ar(1, 0, 1, time_fn=lambda m: 5 + m / 1e6)
    e = _err(fit_log, parse_log(text, "one.txt"))
    assert "2 or more ranks" in e.diagnostics[0].help


# ---------------------------------------------------------------------------------------------------
# The CLI, the block, the plot, the report hook

def test_cli_block_parses_and_checks(capsys):
    from ccost.check import check_text
    from ccost.syntax.parse import parse

    assert main(["calibrate", str(OCI), "--name", "nvlink3_measured", "--holdout"]) == 0
    out = capsys.readouterr().out
    parse(out, "out.ccost")
    result = check_text(out, "out.ccost")
    assert not [d for d in result.diagnostics if d.is_error]
    link = result.spec.links["nvlink3_measured"]
    fit = fit_log(read_log(OCI))
    assert link.alpha == pytest.approx(fit.alpha, rel=1e-3)  # printed to 4 significant digits
    assert link.bandwidth == pytest.approx(fit.bandwidth, rel=1e-3)
    assert link.measured and link.source.startswith("measured: nccl-tests all_reduce_perf, ")
    assert "8 ranks" in link.source and "Hold-out" in out and "busbw plateau 235.1 GB/s" in out
    assert "<- gives alpha" in out and "<- gives bandwidth" in out


def test_cli_writes_file_plot_and_fit_for_link_round_trip(tmp_path, capsys):
    from ccost.check import check_file

    shutil.copy(H100, tmp_path / "h100.txt")
    out = tmp_path / "links" / "nvlink4.ccost"
    out.parent.mkdir()
    svg = tmp_path / "fit.svg"
    assert main(["calibrate", str(tmp_path / "h100.txt"), "--name", "nvlink4_measured", "-o", str(out),
                 "--plot", str(svg)]) == 0
    text = out.read_text()
    assert '"measured: nccl-tests all_reduce_perf, ../h100.txt, 4 ranks, ring, nccl-tests 2.18.3, NCCL ' \
           '2.29.2"' in text  # the log path is relative to the block's own file
    assert not list(out.parent.glob(".*.tmp"))  # the temporary file was renamed away
    result = check_file(str(out))
    link = result.spec.links["nvlink4_measured"]
    fit = fit_for_link(link, tmp_path)
    assert fit is not None and fit.alpha == pytest.approx(link.alpha, rel=1e-3)
    assert fit.holdout is not None
    body = svg.read_text()
    assert body.startswith("<?xml") and "message size" in body and "<dc:date>" not in body
    assert plot_svg(fit) == body  # deterministic: the same fit, drawn again, is byte-identical


def test_fit_for_link_ignores_links_that_are_not_calibrated(tmp_path):
    from ccost.spec import Link

    sheet = Link("x", None, None, alpha=2e-6, bandwidth=1e9, source="spec sheet")
    assert fit_for_link(sheet, tmp_path) is None
    moved = Link("x", None, None, alpha=2e-6, bandwidth=1e9,
                 source="measured: nccl-tests all_reduce_perf, gone.txt, 8 ranks, ring")
    assert fit_for_link(moved, tmp_path) is None


def test_cli_cross_checks_other_tests(tmp_path, capsys):
    ag = synthetic_table("all_gather_perf", 8, 2e-6, 200e9, 7, 7 / 8, seed=7, per_rank_count=True)
    (tmp_path / "ag.txt").write_text(ag)
    assert main(["calibrate", str(OCI), str(tmp_path / "ag.txt")]) == 0
    out = capsys.readouterr().out
    assert "# Cross-check: all_gather_perf" in out and "link measured" in out


@pytest.mark.parametrize("argv, fragment", [
    (["--name", "9lives"], "not a valid block name"),
    (["--line-rate", "300 GB"], "needs a bandwidth between"),
    (["--ranks", "1"], "at least 2 ranks"),
    (["--test", "alltoall"], "has no alltoall_perf"),
])
def test_cli_usage_errors_exit_2(argv, fragment, capsys):
    assert main(["calibrate", str(OCI), *argv]) == 2
    assert fragment in capsys.readouterr().err


def test_cli_malformed_log_shows_the_line(capsys):
    assert main(["calibrate", str(DATA / "interleaved_rows.txt")]) == 2
    err = capsys.readouterr().err
    assert "interleaved_rows.txt:13:" in err and "error[E501]" in err and "|" in err
    assert "Traceback" not in err


def test_failed_run_leaves_the_previous_output_in_place(tmp_path, capsys):
    target = tmp_path / "link.ccost"
    target.write_text("old\n")
    assert main(["calibrate", str(DATA / "cut_mid_row.txt"), "-o", str(target), "--plot",
                 str(tmp_path / "fit.svg")]) == 2
    assert target.read_text() == "old\n" and not (tmp_path / "fit.svg").exists()
    assert not list(tmp_path.glob(".*.tmp"))
    # an unwritable target is a clear error, not a traceback
    assert main(["calibrate", str(OCI), "-o", str(tmp_path)]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_sizes_option_fits_the_decode_range(tmp_path, capsys):
    """Decode's TP AllReduce is 512 KiB (A1). The whole-log fit's one α-β line prices it at 14·2.271 µs +
    917,504 B / 231.9 GB/s = 35.75 µs against the 58.96 µs the log measured (line 18). Fitting only
    128 KiB..1 MiB (38.50, 45.21, 58.96, 76.71 µs: nearly straight) must land within 5 % of the measured
    58.96 µs (the whole-log curve does too: tests/test_calibrate_curve.py)."""
    log = read_log(OCI)
    whole = fit_log(log)
    assert whole.priced(524288) == pytest.approx(35.75e-6, rel=0.01)
    decode = fit_log(log, sizes=(128 << 10, 1 << 20))
    assert len(decode.points) == 4
    assert decode.priced(524288) == pytest.approx(58.96e-6, rel=0.05)
    assert any("24 sizes outside --sizes 128KiB..1MiB" in n for n in decode.notes)  # 28 - 4
    shutil.copy(OCI, tmp_path / "oci.txt")
    out = tmp_path / "decode.ccost"
    assert main(["calibrate", str(tmp_path / "oci.txt"), "--sizes", "128KiB..1MiB", "-o", str(out)]) == 0
    assert "sizes 128KiB..1MiB" in out.read_text()
    from ccost.check import check_file

    link = check_file(str(out)).spec.links["measured"]
    again = fit_for_link(link, tmp_path)
    assert again is not None and again.size_range == (128 << 10, 1 << 20)
    assert again.alpha == pytest.approx(link.alpha, rel=1e-3)


@pytest.mark.parametrize("bad", ["64KiB", "4MiB..64KiB", "1 GB/s..2 GB/s"])
def test_sizes_option_rejects_bad_ranges(bad, capsys):
    assert main(["calibrate", str(OCI), "--sizes", bad]) == 2
    assert "--sizes" in capsys.readouterr().err


def test_example_link_block_is_current(tmp_path):
    """specs/measured/a100-nvlink.ccost is generated; regenerating it must give the same text (apart from
    the output path in the `Regenerate` comment), so the committed block matches the log and the code."""
    committed = REPO / "specs" / "measured" / "a100-nvlink.ccost"
    shutil.copy(REPO / "specs" / "measured" / "oci_a100_1x8_ar.txt", tmp_path / "oci_a100_1x8_ar.txt")
    out = tmp_path / "a100-nvlink.ccost"
    assert main(["calibrate", str(tmp_path / "oci_a100_1x8_ar.txt"), "--name", "nvlink3_measured", "--title",
                 "NVLink 3 through NVSwitch (A100), measured", "--holdout", "--line-rate", "300 GB/s",
                 "-o", str(out)]) == 0

    def body(text):
        return [ln for ln in text.splitlines() if not ln.startswith("# Regenerate:")]
    assert body(out.read_text()) == body(committed.read_text()), \
        "regenerate it: see the header of specs/calibrated-nvlink.ccost"


def test_example_spec_checks_and_its_link_is_measured():
    from ccost.check import check_file

    result = check_file(str(REPO / "specs" / "calibrated-nvlink.ccost"))
    assert not [d for d in result.diagnostics if d.is_error]
    link = result.spec.plans["tp8"].cluster.intra_node
    assert link.name == "nvlink3_measured" and link.measured
    # the report hook finds the log next to the link's own file
    fit = fit_for_link(link, REPO / "specs")
    assert fit is not None and fit.ranks == 8 and fit.test == "all_reduce_perf"
    assert link.alpha == pytest.approx(fit.alpha, rel=1e-3)
    assert link.bandwidth == pytest.approx(fit.bandwidth, rel=1e-3)
    # what the review prints next to the plot: the same α and bandwidth as the block, and the quality
    from ccost.calibrate import summary_lines

    text = "\n".join(summary_lines(fit))
    # 31.79 µs / 14 hops = 2.271 µs; 1.75 × 132.5 GB/s = 231.9 GB/s (the block's comments, pieces 1 and 4)
    assert "α = 2.271 µs per hop" in text and "bandwidth = 231.9 GB/s" in text
    assert "R² of log T" in text and "Hold-out" in text and "busbw plateau 235.1 GB/s" in text


def test_launcher_prefixes_and_bare_nccl_version_line():
    """mpirun --tag-output prefixes every line with "[1,0]<stdout>:"; NCCL prints "NCCL version ..." on
    its own line at init. Both must parse to exactly the rows of the plain log."""
    plain = read_log(OCI).tests[0]
    lines = OCI.read_text().splitlines()
    tagged = "\n".join(["[1,0]<stdout>:NCCL version 2.25.1+cuda12.8"] +
                       ["[1,0]<stdout>:" + ln for ln in lines]) + "\n"
    log = parse_log(tagged, "oci_ar_tagged.txt")
    assert log.nccl_version == "2.25.1"
    assert [(r.size, r.out_of_place, r.in_place) for r in log.tests[0].rows] == \
        [(r.size, r.out_of_place, r.in_place) for r in plain.rows]


def test_old_format_with_error_column():
    """nccl-tests before 2.x: no root column, an `error` column with the max relative error (rounding-level
    values like 2e-06 are a correct result; 5e-01 is not)."""
    head = ("# nThread 1 nGpus 8 minBytes 1048576 maxBytes 16777216 step: 2(factor) warmup iters: 5 "
            "iters: 20 validation: 1\n"
            "#                                                       out-of-place"
            "                       in-place\n"
            "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   "
            "busbw  error\n"
            "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
            "(GB/s)\n")
    rows = []
    for k, m in enumerate([1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]):
        t = 20 + 1.75 * m / 100e9 * 1e6  # µs: 14 hops x ~1.43 µs + 1.75·m / 100 GB/s
        err = "5e-01" if k == 2 else "2e-06"
        algbw = m / t / 1e3
        rows.append(f"{m:12d}  {m // 4:12d}     float     sum  {t:7.1f}  {algbw:6.2f}  {algbw * 1.75:6.2f}  "
                    f"{err}  {t:7.1f}  {algbw:6.2f}  {algbw * 1.75:6.2f}  {err}")
    text = head + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 50.0\n"
    (t,) = parse_log(text, "all_reduce_old.txt").tests
    assert len(t.rows) == 5 and t.rows[0].root == -1
    fit = fit_log(parse_log(text, "all_reduce_old.txt"))
    assert [line for line, _ in fit.excluded] == [7]  # the 4 MiB row, 5e-01, on line 7
    assert fit.bandwidth == pytest.approx(100e9, rel=0.01)


def test_fit_for_link_reads_only_inside_the_spec_folder(tmp_path):
    """A spec is untrusted: its link's source must not make the review read files outside its folder."""
    from ccost.spec import Link

    (tmp_path / "spec").mkdir()
    shutil.copy(OCI, tmp_path / "outside.txt")
    escape = Link("x", None, None, alpha=2e-6, bandwidth=1e9,
                  source="measured: nccl-tests all_reduce_perf, ../outside.txt, 8 ranks, ring")
    assert fit_for_link(escape, tmp_path / "spec") is None
    absolute = Link("x", None, None, alpha=2e-6, bandwidth=1e9,
                    source=f"measured: nccl-tests all_reduce_perf, {tmp_path / 'outside.txt'}, 8 ranks, ring")
    assert fit_for_link(absolute, tmp_path / "spec") is None
    shutil.copy(OCI, tmp_path / "spec" / "inside.txt")
    inside = Link("x", None, None, alpha=2e-6, bandwidth=1e9,
                  source="measured: nccl-tests all_reduce_perf, inside.txt, 8 ranks, ring")
    assert fit_for_link(inside, tmp_path / "spec") is not None


def test_synthetic_recovery_over_random_links():
    """12 random links (α 0.5-20 µs, B 10-900 GB/s, P 2-64, ring or tree), 1 % noise, fixed seed: every
    α and B back within 2 %. Hops and volume written by hand: ring 2(P−1), tree 2·⌈log2 P⌉; volume
    2(P−1)/P·m."""
    rng = np.random.default_rng(2026)
    for i in range(12):
        p = int(rng.choice([2, 4, 8, 16, 32, 64]))
        alpha = 10 ** rng.uniform(math.log10(0.5e-6), math.log10(20e-6))
        bw = 10 ** rng.uniform(10, math.log10(900e9))
        alg = str(rng.choice(["ring", "tree"]))
        hops = 2 * (p - 1) if alg == "ring" else 2 * math.ceil(math.log2(p))
        text = synthetic_table("all_reduce_perf", p, alpha, bw, hops, 2 * (p - 1) / p, noise=0.01,
                               seed=100 + i)
        fit = fit_log(parse_log(text, f"random{i}.txt"), alg)
        assert fit.alpha == pytest.approx(alpha, rel=0.02), (i, p, alg)
        assert fit.bandwidth == pytest.approx(bw, rel=0.02), (i, p, alg)


def test_new_header_inside_an_unfinished_table_is_interleaving():
    lines = OCI.read_text().splitlines(keepends=True)
    text = "".join(lines[:15]) + "".join(lines)  # a second run starts before the first one's footer
    e = _err(parse_log, text, "two_runs.txt")
    (d,) = e.diagnostics
    assert d.span.line == 16 and "interleaved" in d.message and "line 1" in d.message


def test_windows_line_endings_parse_the_same():
    plain = read_log(OCI).tests[0].rows
    crlf = parse_bytes(OCI.read_text().replace("\n", "\r\n").encode(), "oci_crlf.txt").tests[0].rows
    assert [(r.line, r.size, r.out_of_place) for r in crlf] == [(r.line, r.size, r.out_of_place) for r in plain]
