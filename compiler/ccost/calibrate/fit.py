"""Fit T = a + b·size to nccl-tests timings, piecewise, and turn it into a link's α and bandwidth.

Why relative error: sizes span 8 B to 8 GiB and times 20 µs to 60 ms. A plain least-squares fit would
listen only to the largest messages and make α whatever they imply (often negative); minimising
Σ((T_fit − T)/T)² gives every size the same say, which is what "the model is within x %" means.
It is weighted least squares with weights 1/T: a 2×2 solve, no scipy.

Why piecewise: NCCL changes protocol (LL → LL128 → Simple) and channel count with size, so one line
rarely fits 8 B–8 GiB. We try 1, 2 and 3 contiguous pieces (every split, at least ``MIN_POINTS`` sizes a
piece) and keep more pieces only when they clearly help: the RMS relative error must fall by at least a
third (``CLEAR_GAIN``) *and* the Bayesian information criterion must fall (so the extra slope, intercept
and breakpoint pay for themselves).

Which piece gives what: the link block has one α and one bandwidth. α comes from the small-message piece
(the intercept there is the latency that decode-sized messages pay), bandwidth from the large-message
piece (its slope is the streaming rate). Converted through the collective's formulas in ``ccost.model.costs``:
α = a / hops(kind, algorithm, P), B = (volume(kind, algorithm, P, m)/m) / b. We also report how well that
single "as priced" α-β line matches every measured size, since that is the error ccost's own estimates
will carry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ccost import collectives
from ccost.calibrate.logs import MAX_SIZE, NcclLog, Test
from ccost.collectives import ALGORITHMS
from ccost.diagnostics import CcostError, Span, error

MIN_POINTS = 4  # sizes per piece: two parameters and enough left over to see a bad fit
LARGE = 64 * 2**20  # the "large messages": the error at >= 64 MiB is reported on its own
# α is measured when some fitted size is latency-bound: the intercept is at least this share of its time.
# Below it the intercept is an extrapolation from bandwidth-bound sizes, not a measured latency.
LATENCY_BOUND_SHARE = 0.5
MAX_PIECES = 4
CLEAR_GAIN = 2.0 / 3.0  # an extra piece must cut the RMS relative error to at most 2/3 of what it was


@dataclass(frozen=True)
class Point:
    size: int  # bytes
    time: float  # seconds
    line: int  # where in the log


@dataclass(frozen=True)
class Piece:
    """T = a + b·size, fitted on the sizes lo..hi (inclusive, bytes)."""

    a: float  # s
    b: float  # s per byte
    lo: int
    hi: int
    n: int
    median_error: float  # |relative error| over its own points
    worst_error: float

    def time(self, size: float) -> float:
        return self.a + self.b * size


@dataclass(frozen=True)
class Holdout:
    """Fit on every other size, predict the rest."""

    trained_on: int
    tested_on: int
    median_error: float  # piecewise model, held-out sizes
    worst_error: float
    worst_size: int
    priced_median_error: float  # the link block (curve and floor) as the cost core prices it, held-out sizes
    priced_worst_error: float


@dataclass(frozen=True)
class Fit:
    """Everything the link block, the plot and the review say about one calibration."""

    file: str
    test: str  # "all_reduce_perf"
    kind: str  # "allreduce"
    algorithm: str
    ranks: int
    ranks_from: str
    placement: str  # "out-of-place" or "in-place"
    points: tuple[Point, ...]
    excluded: tuple[tuple[int, str], ...]  # (line, why) for rows not fitted
    pieces: tuple[Piece, ...]
    alpha: float  # s per hop
    bandwidth: float  # B/s per GPU per direction
    hops: float  # hops(kind, algorithm, ranks)
    volume_ratio: float  # volume(kind, algorithm, ranks, m) / m
    r2_log: float  # R² of log T (piecewise model)
    median_error: float
    worst_error: float
    worst_size: int
    priced_median_error: float
    priced_worst_error: float
    priced_worst_size: int
    busbw_plateau: float  # B/s, max out-of-place busbw in the log
    busbw_plateau_size: int
    tests_version: str | None = None
    nccl_version: str | None = None
    gpu_names: tuple[str, ...] = ()
    holdout: Holdout | None = None
    line_rate: float | None = None  # spec-sheet B/s per GPU per direction, when known
    line_rate_from: str | None = None
    size_range: tuple[int | None, int | None] | None = None  # --sizes, bytes
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The measured curve the link block carries: piece i prices m >= curve[i][0] bytes with
    # α = curve[i][1] s per hop and bandwidth curve[i][2] B/s, the numbers exactly as the block writes them.
    curve: tuple[tuple[float, float, float], ...] = ()
    floor: float | None = None  # s, the smallest time measured at latency-bound sizes; None: not measured
    alpha_measurable: bool = True  # False when no fitted size is latency-bound: α is then extrapolated
    # The curve as ccost prices it (the cost core, with the floors), against every fitted size.
    curve_median_error: float = math.nan
    curve_worst_error: float = math.nan
    curve_worst_size: int = 0
    curve_large_worst_error: float | None = None  # at sizes >= LARGE (None: the log has none)

    @property
    def alpha_piece(self) -> Piece:
        return self.pieces[0]

    @property
    def bandwidth_piece(self) -> Piece:
        return self.pieces[-1]

    def predict(self, size: float) -> float:
        """The piecewise fit at ``size`` (the piece whose range, split at geometric midpoints, holds it)."""
        return _piece_for(self.pieces, size).time(size)

    def priced(self, size: float) -> float:
        """One α-β line, the spec-sheet form: hops·α + volume/B."""
        return self.hops * self.alpha + self.volume_ratio * size / self.bandwidth

    def curve_priced(self, sizes):
        """What ccost charges on the calibrated link (its curve and floors) for this log's collective and
        rank count: the cost core itself, vectorised over ``sizes``."""
        return curve_time(self.kind, self.algorithm, self.ranks, self.curve, self.floor, sizes)


# ---------------------------------------------------------------------------------------------------
# The cost core: one source of truth for hops and volumes (principle: one formula for every number).

def _formulas(kind: str, algorithm: str, ranks: int, file: str, line: int) -> tuple[float, float]:
    """(hops, volume/m) from ``ccost.model.costs``; the volume is linear in m for every α-β formula."""
    from ccost.model import costs

    m = float(1 << 20)
    try:
        hops = float(costs.hops(kind, algorithm, ranks))
        ratio = float(costs.volume(kind, algorithm, ranks, m)) / m
    except (ValueError, KeyError, TypeError) as exc:
        raise CcostError(error(
            "E501", f"ccost has no {algorithm} formula for {kind} on {ranks} ranks ({exc})",
            Span.point(file, line, 1), f"choose another --algorithm ({', '.join(ALGORITHMS)}) or calibrate "
            "from an all_reduce_perf log")) from None
    if not (hops > 0 and ratio > 0):
        raise CcostError(error(
            "E501", f"{kind} on {ranks} rank{'s' if ranks != 1 else ''} has {hops:g} hops and moves "
            f"{ratio:g}·m per GPU: there is no link time to calibrate", Span.point(file, line, 1),
            "calibrate from a run on 2 or more ranks (pass --ranks N if the log under-counts them)"))
    return hops, ratio


# ---------------------------------------------------------------------------------------------------
# Weighted least squares

def fit_line(sizes: np.ndarray, times: np.ndarray, offset: np.ndarray | None = None) -> tuple[float, float]:
    """Minimise Σ((offset + a + b·s − T)/T)² with a ≥ 0, b ≥ 0. Returns (a, b).

    ``offset`` (s, per size; default 0) is time already accounted for: the intra-node stages when a
    multi-node log is fitted under the hierarchical model, the rest being the inter-node link's a + b·s."""
    off = np.zeros_like(times) if offset is None else offset
    u = 1.0 / times  # coefficient of a in the relative residual
    v = sizes / times  # coefficient of b
    y = 1.0 - off / times  # what a·u + b·v must match
    # Scale the columns so the 2×2 system is well conditioned (sizes run to 1e10).
    su = float(np.sqrt(np.dot(u, u))) or 1.0
    sv = float(np.sqrt(np.dot(v, v))) or 1.0
    A = np.column_stack([u / su, v / sv])
    if not (np.all(np.isfinite(A)) and math.isfinite(su) and math.isfinite(sv)):
        raise _unfittable("the sizes and times overflow a float")
    try:
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    except np.linalg.LinAlgError as exc:  # cannot happen with finite input; never a traceback if it does
        raise _unfittable(str(exc)) from None
    a, b = coef[0] / su, coef[1] / sv
    if a >= 0 and b >= 0:
        return float(a), float(b)
    # The unconstrained optimum is unphysical: the best feasible point lies on an edge.
    cands = [(0.0, 0.0)]
    a_only = float(np.dot(u, y) / np.dot(u, u))
    cands.append((max(a_only, 0.0), 0.0))
    if np.dot(v, v) > 0:
        cands.append((0.0, max(float(np.dot(v, y) / np.dot(v, v)), 0.0)))
    return min(cands, key=lambda ab: _sse(ab[0], ab[1], sizes, times, off))


def _unfittable(why: str) -> CcostError:
    return CcostError(error("E501", f"the timings cannot be fitted: {why}",
                            help="the log's numbers are not plausible measurements; rerun the test"))


def _sse(a: float, b: float, sizes: np.ndarray, times: np.ndarray, offset=0.0) -> float:
    r = (offset + a + b * sizes - times) / times
    return float(np.dot(r, r))


def _rel(a: float, b: float, sizes: np.ndarray, times: np.ndarray, offset=0.0) -> np.ndarray:
    return np.abs((offset + a + b * sizes - times) / times)


def _piece_for(pieces: tuple[Piece, ...] | list[Piece], size: float) -> Piece:
    for p, nxt in zip(pieces, pieces[1:]):
        if size < math.sqrt(p.hi * nxt.lo):
            return p
    return pieces[-1]


def fit_pieces(sizes: np.ndarray, times: np.ndarray, max_pieces: int = MAX_PIECES,
               offset: np.ndarray | None = None) -> tuple[Piece, ...]:
    """Best 1..max_pieces contiguous pieces (sizes sorted ascending), by the rule in the module doc.
    With ``offset`` each piece is the part of the time above it (``fit_line``); its errors are those of
    offset + a + b·s against the time."""
    n = len(sizes)
    off = np.zeros_like(times) if offset is None else offset
    # cost[i][j]: SSE of one line through points i..j-1
    best_line: dict[tuple[int, int], tuple[float, float, float]] = {}

    def seg(i: int, j: int) -> tuple[float, float, float]:
        key = (i, j)
        if key not in best_line:
            a, b = fit_line(sizes[i:j], times[i:j], off[i:j])
            best_line[key] = (a, b, _sse(a, b, sizes[i:j], times[i:j], off[i:j]))
        return best_line[key]

    # Dynamic programming over split points: best[k] = (SSE, bounds) of the best k contiguous pieces of
    # at least MIN_POINTS sizes each; n is ~30, so a few hundred cached 2×2 solves.
    best: dict[int, tuple[float, tuple[int, ...]]] = {1: (seg(0, n)[2], (0, n))}
    # prefix[k][j]: best (SSE, bounds) of k pieces covering points 0..j-1
    prefix: dict[int, dict[int, tuple[float, tuple[int, ...]]]] = {
        1: {j: (seg(0, j)[2], (0, j)) for j in range(MIN_POINTS, n + 1)}}
    for k in range(2, max_pieces + 1):
        cur: dict[int, tuple[float, tuple[int, ...]]] = {}
        for j in range(k * MIN_POINTS, n + 1):
            for i in range(j - MIN_POINTS, (k - 1) * MIN_POINTS - 1, -1):
                if i not in prefix[k - 1]:
                    continue
                c = prefix[k - 1][i][0] + seg(i, j)[2]
                if j not in cur or c < cur[j][0]:
                    cur[j] = (c, prefix[k - 1][i][1] + (j,))
        prefix[k] = cur
        if n in cur:
            best[k] = cur[n]

    def bic(k: int) -> float:
        sse = max(best[k][0], 1e-300)
        return n * math.log(sse / n) + (3 * k - 1) * math.log(n)

    # Compare each larger count with the best so far (not only with k-1): a 3-piece fit can be a clear
    # gain over one line even when two pieces are not (one protocol switch at each end of the range).
    chosen = 1
    for k in range(2, max_pieces + 1):
        if k not in best:
            continue
        rms_prev = math.sqrt(best[chosen][0] / n)
        rms_k = math.sqrt(best[k][0] / n)
        if rms_k <= CLEAR_GAIN * rms_prev and bic(k) < bic(chosen):
            chosen = k
    bounds = best[chosen][1]
    pieces = []
    for i, j in zip(bounds, bounds[1:]):
        a, b, _ = seg(i, j)
        r = _rel(a, b, sizes[i:j], times[i:j], off[i:j])
        pieces.append(Piece(a, b, int(sizes[i]), int(sizes[j - 1]), j - i, float(np.median(r)),
                            float(r.max())))
    return tuple(pieces)


# ---------------------------------------------------------------------------------------------------

def select_test(log: NcclLog, test: str | None = None) -> Test:
    """The test to calibrate from: the named one, else the first all_reduce, else the first fittable."""
    if test:
        want = test if test.endswith("_perf") else test + "_perf"
        for t in log.tests:
            if t.name == want:
                return t
        raise CcostError(error("E501", f"{log.file} has no {want} table (it has "
                               f"{', '.join(t.name for t in log.tests)})", Span.point(log.file, 1, 1),
                               "pass --test with one of the tests the log contains"))
    for t in log.tests:
        if t.kind == "allreduce":
            return t
    for t in log.tests:
        if t.kind in collectives.CATALOGUE:
            return t
    return log.tests[0]


def fit_test(t: Test, algorithm: str = "ring", in_place: bool = False, holdout: bool = False,
             log: NcclLog | None = None, line_rate: float | None = None,
             sizes: tuple[int | None, int | None] | None = None) -> Fit:
    """Fit one parsed test; raises CcostError (E501) when it cannot be fitted.

    ``line_rate`` (B/s per GPU per direction, from the spec sheet) is only carried along for the
    comparison with the busbw plateau; when None it is guessed from the GPU names the log lists.
    ``sizes`` = (lo, hi) bytes, either None: fit only that range (``--sizes``), e.g. the message sizes a
    plan sends, when one α-β line cannot cover the whole log.
    """
    placement = "in-place" if in_place else "out-of-place"
    points: list[Point] = []
    excluded: list[tuple[int, str]] = []
    unvalidated = 0
    size_range = sizes  # `sizes` is reused below for the array of fitted sizes
    lo, hi = size_range or (None, None)
    outside = 0
    for r in t.rows:
        if (lo is not None and r.size < lo) or (hi is not None and r.size > hi):
            outside += 1
            continue
        tm = r.in_place if in_place else r.out_of_place
        if tm is None or tm.time_us is None:
            excluded.append((r.line, f"{r.size} B: no {placement} time (N/A)"))
        elif tm.time_us <= 0:
            excluded.append((r.line, f"{r.size} B: {placement} time {tm.time_us:g} us is not positive"))
        elif tm.wrong not in (None, 0):
            excluded.append((r.line, f"{r.size} B: {placement} #wrong = {tm.wrong:g} (results wrong; timing "
                                     "not trusted)"))
        elif r.size == 0:
            excluded.append((r.line, "0 B: an empty message says nothing about α or bandwidth"))
        else:
            if tm.wrong is None:
                unvalidated += 1
            points.append(Point(r.size, tm.time_us * 1e-6, r.line))
    if len(points) < MIN_POINTS:
        raise CcostError(error(
            "E501", f"{t.name} in {t.file} has {len(points)} usable sizes; a fit needs at least {MIN_POINTS}"
            + (f" ({len(excluded)} rows excluded: N/A or #wrong)" if excluded else ""),
            Span.point(t.file, t.line, 1), "measure a wider size range, e.g. `-b 8 -e 8G -f 2`"))
    hops, ratio = _formulas(t.kind, algorithm, t.ranks, t.file, t.line)
    algorithm = collectives.algorithm(t.kind, algorithm).name  # a kind with one model: that one
    sizes = np.array([p.size for p in points], dtype=float)
    times = np.array([p.time for p in points], dtype=float)
    pieces = fit_pieces(sizes, times)
    alpha, bandwidth, notes = _link_numbers(pieces, hops, ratio, t)
    if outside:
        notes.append(f"{outside} sizes outside --sizes {size_range_text(size_range)} were left out of "
                     "the fit")
    if collectives.CATALOGUE[t.kind].calibration_note:
        notes.append(collectives.CATALOGUE[t.kind].calibration_note)
    if unvalidated:
        notes.append(f"{unvalidated} rows were not validated by nccl-tests (#wrong = N/A, run with -c 0)")

    curve, floor, measurable, more = _curve(pieces, hops, ratio, sizes, times, t)
    notes += more
    cpred = curve_time(t.kind, algorithm, t.ranks, curve, floor, sizes)
    crel = np.abs(cpred - times) / times
    large = crel[sizes >= LARGE]
    pred = np.array([_piece_for(pieces, s).time(s) for s in sizes])
    rel = np.abs(pred - times) / times
    lt, lp = np.log(times), np.log(np.maximum(pred, 1e-300))
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    r2 = 1.0 - float(np.sum((lp - lt) ** 2)) / ss_tot if ss_tot > 0 else 1.0
    priced = hops * alpha + ratio * sizes / bandwidth
    prel = np.abs(priced - times) / times
    bus = [(r.out_of_place.busbw, r.size) for r in t.rows if r.out_of_place.busbw is not None
           and r.out_of_place.usable]
    plateau, plateau_size = max(bus) if bus else (0.0, 0)
    rate, rate_from = (line_rate, "--line-rate") if line_rate else spec_sheet_rate(t.gpu_names)
    ho = _holdout(sizes, times, hops, ratio, t, algorithm) if holdout else None
    return Fit(
        file=t.file, test=t.name, kind=t.kind, algorithm=algorithm, ranks=t.ranks, ranks_from=t.ranks_from,
        placement=placement, points=tuple(points), excluded=tuple(excluded), pieces=pieces, alpha=alpha,
        bandwidth=bandwidth, hops=hops, volume_ratio=ratio, r2_log=r2, median_error=float(np.median(rel)),
        worst_error=float(rel.max()), worst_size=int(sizes[int(rel.argmax())]),
        priced_median_error=float(np.median(prel)), priced_worst_error=float(prel.max()),
        priced_worst_size=int(sizes[int(prel.argmax())]), busbw_plateau=plateau * 1e9,
        busbw_plateau_size=plateau_size, tests_version=log.tests_version if log else None,
        nccl_version=log.nccl_version if log else None, gpu_names=t.gpu_names, holdout=ho,
        line_rate=rate, line_rate_from=rate_from, size_range=tuple(size_range) if size_range else None,
        notes=tuple(notes), curve=curve, floor=floor, alpha_measurable=measurable,
        curve_median_error=float(np.median(crel)), curve_worst_error=float(crel.max()),
        curve_worst_size=int(sizes[int(crel.argmax())]),
        curve_large_worst_error=float(large.max()) if large.size else None)


def _round(x: float, dim) -> float:
    """``x`` as the link block writes it (4 significant digits), so the fit reports what the block prices."""
    from ccost.units import format_quantity, parse_quantity

    return parse_quantity(format_quantity(x, dim, digits=4).replace("µs", "us"))[0]


def _curve(pieces: tuple[Piece, ...], hops: float, ratio: float, sizes: np.ndarray, times: np.ndarray,
           t: Test) -> tuple[tuple[tuple[float, float, float], ...], float | None, bool, list[str]]:
    """The link block's curve (start, α per hop, bandwidth per piece), its floor and whether α is measured.

    Piece k starts at the geometric midpoint between the last size of piece k−1 and the first of piece k
    (where ``Fit.predict`` switches too); the first at 0 B. α = a/hops and B = (volume/m)/b, through the
    collective's own formulas, so that ccost pricing this collective on these ranks gives a + b·m back.
    A piece whose time does not grow with size (b = 0) gets the largest bandwidth a link may have.
    The floor is the smallest time measured at latency-bound sizes (where the first piece's intercept is at
    least ``LATENCY_BOUND_SHARE`` of the time); with none, α and the floor are not measurable.
    """
    from ccost.schema import R_LATENCY, R_LINK_BANDWIDTH
    from ccost.units import BANDWIDTH, INFORMATION, TIME

    notes: list[str] = []
    out = []
    for k, p in enumerate(pieces):
        start = 0.0 if k == 0 else _round(math.sqrt(pieces[k - 1].hi * p.lo), INFORMATION)
        alpha = min(p.a / hops, R_LATENCY["maximum"])
        bw = ratio / p.b if p.b > 0 else math.inf
        if bw > R_LINK_BANDWIDTH["maximum"]:
            notes.append(f"piece {k + 1}'s time does not grow with size: it gets the largest bandwidth a link "
                         "may have")
            bw = R_LINK_BANDWIDTH["maximum"]
        bw = max(bw, R_LINK_BANDWIDTH["minimum"])
        out.append((start, _round(alpha, TIME) if alpha > 0 else 0.0, _round(bw, BANDWIDTH)))
    first = pieces[0]
    bound = first.a >= LATENCY_BOUND_SHARE * times
    measurable = bool(first.a > 0 and bound.any())
    floor = None
    if measurable:
        floor = _round(float(times[bound].min()), TIME)
    else:
        notes.append(f"alpha is not measurable from this log: at its smallest size, {int(sizes[0])} B, the "
                     f"latency is {100 * first.a / times[0]:.0f} % of the time; the intercept only prices the "
                     "measured sizes, and no floor is written (measure small sizes, `-b 8`, to see the latency)")
    return tuple(out), floor, measurable, notes


def curve_time(kind: str, algorithm: str, ranks: int, curve, floor: float | None, sizes):
    """The cost core's time for ``kind`` on ``ranks`` ranks of a link with this curve and floor."""
    from ccost.model import costs

    c = costs.Curve(tuple(x[0] for x in curve), tuple(x[1] for x in curve), tuple(x[2] for x in curve),
                    kind, float(ranks))
    link = costs.LinkParams(curve[0][1], curve[-1][2], floor, None, c, floor)
    return link.cost(kind, algorithm, float(ranks), np.asarray(sizes, dtype=float)).time


def _link_numbers(pieces: tuple[Piece, ...], hops: float, ratio: float, t: Test
                  ) -> tuple[float, float, list[str]]:
    notes: list[str] = []
    first, last = pieces[0], pieces[-1]
    if last.b <= 0:
        raise CcostError(error(
            "E501", f"the largest sizes in {t.name} ({last.lo}–{last.hi} B) show no bandwidth term: time "
            "does "
            "not grow with size", Span.point(t.file, t.line, 1),
            "measure up to larger messages (`-e 1G` or more) so the streaming rate shows"))
    if last.a > last.b * last.hi:
        notes.append(f"even at {last.hi} B the latency term exceeds the bandwidth term; measure larger "
                     "messages for a firmer bandwidth")
    alpha = first.a / hops
    if first.a == 0:
        notes.append("the small-message piece has no intercept (α = 0): measure smaller messages "
                     "(`-b 8`) to see the latency")
    bandwidth = ratio / last.b
    # The block must check: a fit outside what a link can be (the schema's plausible ranges, one place)
    # comes from a log whose times are not measurements of a link, and is said so, not written.
    from ccost.schema import R_LATENCY, R_LINK_BANDWIDTH
    from ccost.units import BANDWIDTH, TIME, format_quantity

    for what, v, rng, dim in (("alpha", alpha, R_LATENCY, TIME), ("bandwidth", bandwidth, R_LINK_BANDWIDTH,
                                                                   BANDWIDTH)):
        if not rng["minimum"] <= v <= rng["maximum"]:
            raise CcostError(error(
                "E501", f"the fit of {t.name} gives {what} = {format_quantity(v, dim)}, outside what a link can "
                f"be ({format_quantity(rng['minimum'], dim)} to {format_quantity(rng['maximum'], dim)})",
                Span.point(t.file, t.line, 1), "the log's times do not grow with size as a link's do; check "
                "the log, or fit a range of sizes with --sizes"))
    return alpha, bandwidth, notes


def _holdout(sizes: np.ndarray, times: np.ndarray, hops: float, ratio: float, t: Test,
             algorithm: str) -> Holdout:
    """Every other size trains, the rest test. Why not random: sizes are a geometric grid, and
    alternating keeps both halves spread over the whole range, deterministically. "As priced" is the link
    block the training half gives (its curve and floor) priced by the cost core on the tested half."""
    train = np.arange(len(sizes)) % 2 == 0
    pieces = fit_pieces(sizes[train], times[train])  # as many pieces as the half allows, by the same rule
    ts, tt = sizes[~train], times[~train]
    pred = np.array([_piece_for(pieces, s).time(s) for s in ts])
    rel = np.abs(pred - tt) / tt
    curve, floor, _, _ = _curve(pieces, hops, ratio, sizes[train], times[train], t)
    prel = np.abs(curve_time(t.kind, algorithm, t.ranks, curve, floor, ts) - tt) / tt
    return Holdout(int(train.sum()), int((~train).sum()), float(np.median(rel)), float(rel.max()),
                   int(ts[int(rel.argmax())]), float(np.median(prel)), float(prel.max()))


# Spec-sheet scale-up line rates per GPU per direction (data/catalog.md §2), to set the busbw plateau
# against when the log names its GPUs. Most specific pattern first.
SPEC_SHEET_RATES: tuple[tuple[str, float, str], ...] = (
    ("GB200", 900e9, "NVLink 5, 1.8 TB/s bidir per GPU [NVL-PAGE]"),
    ("B200", 900e9, "NVLink 5, 1.8 TB/s bidir per GPU [NVL-PAGE, KB200]"),
    ("H200", 450e9, "NVLink 4, 900 GB/s bidir per GPU [SAUL(2nd)]"),
    ("H100 PCIe", 63e9, "PCIe Gen5 x16 per direction [PCIE-TBL(2nd)]"),
    ("H100", 450e9, "NVLink 4, 450 GB/s per direction line rate [KH100, NCCL-212]"),
    ("H800", 200e9, "NVLink 4 (H800), 400 GB/s bidir per GPU (unsourced in the catalog)"),
    ("A100-PCIE", 31.5e9, "PCIe Gen4 x16 per direction [PCIE-TBL(2nd)]"),
    ("A100", 300e9, "NVLink 3, 600 GB/s bidir = 300 per direction [KA100]"),
)


def spec_sheet_rate(gpu_names: tuple[str, ...]) -> tuple[float | None, str | None]:
    """The catalog's per-direction scale-up line rate for the GPUs a log lists, if all agree."""
    found = set()
    for name in gpu_names:
        for pattern, rate, why in SPEC_SHEET_RATES:
            if pattern.lower() in name.lower():
                found.add((rate, why))
                break
        else:
            return None, None
    if len(found) != 1:
        return None, None
    rate, why = found.pop()
    return rate, why


def size_range_text(sizes: tuple[int | None, int | None] | None) -> str:
    """(65536, 4194304) -> "64KiB..4MiB" (the --sizes syntax, no spaces so it survives a source string)."""
    from ccost.units import INFORMATION, format_quantity

    if not sizes:
        return ""
    lo, hi = sizes
    def one(x):
        return "" if x is None else format_quantity(float(x), INFORMATION, binary=None).replace(" ", "")
    return f"{one(lo)}..{one(hi)}"


def parse_size_range(text: str) -> tuple[int | None, int | None]:
    """"64KiB..4MiB" -> (65536, 4194304); either end may be empty. Raises ValueError with the reason."""
    from ccost.units import DIMENSIONLESS, INFORMATION, UnitError, parse_quantity

    if ".." not in text:
        raise ValueError("write a range like 64KiB..4MiB (either end may be left out)")
    out: list[int | None] = []
    for part in text.split("..", 1):
        part = part.strip()
        if not part:
            out.append(None)
            continue
        try:
            value, dim = parse_quantity(part)
        except (ValueError, UnitError) as exc:
            raise ValueError(f"{part!r} is not a size ({exc})") from None
        if dim not in (INFORMATION, DIMENSIONLESS) or value < 0:
            raise ValueError(f"{part!r} is not a size in bytes, like 64KiB")
        if not value <= MAX_SIZE:  # also NaN and infinity (1e400)
            raise ValueError(f"{part[:24]!r} is larger than any message (at most 1 EiB)")
        out.append(int(round(value)))
    lo, hi = out
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"the range is empty: {text}")
    return lo, hi
