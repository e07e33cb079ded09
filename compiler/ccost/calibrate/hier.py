"""Fit the inter-node link of a multi-node log under the hierarchical model.

A two-node nccl-tests log measures NVLink and the network together. Fitting it as one "measured" link of P
ranks blends both (a 123 µs small-message latency becomes 4 µs per hop of a 16-rank ring). Given the
intra-node link — a spec's link, or the fit of a one-node log of the same machine — the hierarchical model
of ``ccost.model.costs`` (reduce-scatter inside each node on m, AllReduce across the n nodes on m/g, all-gather
inside each node on m) leaves the inter-node stage as the only unknown:

    T(m) = RS_intra(g, m) + AG_intra(g, m) + [a + b·m/g],   a = α_inter·hops(n),  b = (volume(n)/m)/B_inter

The intra stages are priced by the cost core on the given link (its curve and floor included); a and b
are fitted piecewise by relative error with the intra time as a known offset (``fit.fit_pieces``). The
printed block is the inter-node link, and the hierarchical prediction of the whole log — the same
``group_cost`` a plan uses — is compared with what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ccost.calibrate.fit import LARGE, Fit, Piece, _curve, fit_pieces
from ccost.diagnostics import CcostError, Span, error


@dataclass(frozen=True)
class HierFit:
    flat: Fit  # the same log fitted as one link of P ranks (points, exclusions, versions)
    per_node: int  # g
    nodes: int  # n
    per_node_from: str
    intra_label: str  # what the intra-node link is ("link nvlink4 of specs/x.ccost", "fit of LOG")
    intra: object  # costs.LinkParams
    pieces: tuple[Piece, ...]  # a + b·(m/g) above the intra stages
    curve: tuple[tuple[float, float, float], ...]  # inter-node curve: start (bytes of m/g), α, bandwidth
    alpha: float  # α of the first piece (per inter-node hop)
    bandwidth: float  # bandwidth of the last piece
    hops: float  # hops(allreduce, alg, n)
    volume_ratio: float
    intra_share: float  # median share of the measured time the intra stages take
    median_error: float  # hierarchical prediction (group_cost, cross_node = hierarchical) vs the log
    worst_error: float
    worst_size: int
    large_worst_error: float | None
    auto_median_error: float  # the same with cross_node = auto (the cheaper of flat and hierarchical)
    flat_median_error: float  # the log fitted as one blended link of P ranks, as priced
    notes: tuple[str, ...] = ()


def per_node_of(fit_test_obj, per_node: int | None) -> tuple[int, str]:
    """Ranks per node: ``--per-node``, else from the hosts of the log's Rank lines (all equal)."""
    t = fit_test_obj
    if per_node is not None:
        return per_node, f"--per-node {per_node}"
    if t.devices:
        counts: dict[str, int] = {}
        for d in t.devices:
            counts[d.host] = counts.get(d.host, 0) + 1
        if len(set(counts.values())) == 1 and len(counts) >= 2:
            g = next(iter(counts.values()))
            return g, f"{len(counts)} hosts × {g} `Rank` lines each"
    raise CcostError(error(
        "E501", f"{t.name} in {t.file}: cannot tell how many ranks share a node (the log lists "
        + ("one host" if t.devices else "no devices") + ")", Span.point(t.file, t.line, 1),
        "pass --per-node G, the GPUs of one node in the run (e.g. --per-node 8)"))


def fit_hierarchical(flat: Fit, test, intra, intra_label: str, per_node: int | None = None) -> HierFit:
    """Fit the inter-node link of an all_reduce log of several nodes, given the intra-node ``LinkParams``."""
    from ccost.model import costs

    if flat.kind != "allreduce":
        raise CcostError(error("E501", f"the hierarchical fit needs an all_reduce_perf log; {flat.test} has no "
                               "two-level model to invert here", Span.point(test.file, test.line, 1),
                               "calibrate the inter-node link from an all_reduce_perf run over the nodes"))
    g, g_from = per_node_of(test, per_node)
    p = flat.ranks
    if g < 2 or p % g or p // g < 2:
        raise CcostError(error("E501", f"{p} ranks at {g} per node is not two or more whole nodes",
                               Span.point(test.file, test.line, 1),
                               "pass --per-node G with G dividing the rank count, at most half of it"))
    n = p // g
    alg = flat.algorithm
    hops = float(costs.hops("allreduce", alg, n))
    ratio = float(costs.volume("allreduce", alg, n, float(1 << 20))) / float(1 << 20)
    sizes = np.array([pt.size for pt in flat.points], dtype=float)
    times = np.array([pt.time for pt in flat.points])
    gf = float(g)
    stages = (intra.cost("reducescatter", None, gf, sizes).time + intra.cost("allgather", None, gf, sizes).time)
    stages = np.asarray(stages, dtype=float)
    x = sizes / g  # the inter-node stage's message
    notes: list[str] = []
    over = stages >= times
    if over.any():
        notes.append(f"at {int(over.sum())} of {len(sizes)} sizes the intra-node stages alone take at least the "
                     "measured time (NCCL runs one fused kernel there, not three collectives): the inter-node "
                     "link cannot make up the difference and the hierarchical model over-predicts them")
    pieces = fit_pieces(x, times, offset=stages)
    if pieces[-1].b <= 0:
        raise CcostError(error("E501", f"above the intra-node stages, the largest sizes of {flat.test} show no "
                               "bandwidth term", Span.point(test.file, test.line, 1),
                               "check the intra-node link (--intra) and measure larger messages"))

    class _T:  # what _curve reads from a Test for its messages
        file, line, name = test.file, test.line, test.name

    curve, _, _, more = _curve(pieces, hops, ratio, x, np.maximum(times - stages, 1e-12), _T)
    notes += [m for m in more if not m.startswith("alpha is not measurable")]
    inter = costs.LinkParams(curve[0][1], curve[-1][2], None, "inter",
                             costs.Curve(tuple(c[0] for c in curve), tuple(c[1] for c in curve),
                                         tuple(c[2] for c in curve), "allreduce", float(n), "inter"), None)

    def err(cross: str) -> np.ndarray:
        t = costs.group_cost("allreduce", alg, float(p), sizes, gf, intra, inter, cross).chosen.time
        return np.abs(np.asarray(t) - times) / times

    rel = err("hierarchical")
    large = rel[sizes >= LARGE]
    return HierFit(
        flat=flat, per_node=g, nodes=n, per_node_from=g_from, intra_label=intra_label, intra=intra,
        pieces=pieces, curve=curve, alpha=curve[0][1], bandwidth=curve[-1][2], hops=hops, volume_ratio=ratio,
        intra_share=float(np.median(np.minimum(stages / times, 1.0))), median_error=float(np.median(rel)),
        worst_error=float(rel.max()), worst_size=int(sizes[int(rel.argmax())]),
        large_worst_error=float(large.max()) if large.size else None,
        auto_median_error=float(np.median(err("auto"))), flat_median_error=flat.curve_median_error,
        notes=tuple(notes))


def hier_summary(h: HierFit) -> list[str]:
    """The hierarchical fit in plain sentences, for the review next to its plot."""
    return [line.lstrip("# ").strip() for line in hier_lines(h)]


def hier_plot(h: HierFit) -> str:
    """The log, the flat piecewise fit and the hierarchical price of the inter-node link (the review)."""
    from ccost.model import costs
    from ccost.calibrate.plot import plot_svg

    link = costs.LinkParams(h.alpha, h.bandwidth, None, "inter",
                            costs.Curve(tuple(c[0] for c in h.curve), tuple(c[1] for c in h.curve),
                                        tuple(c[2] for c in h.curve), "allreduce", float(h.nodes), "inter"), None)
    p, g = float(h.flat.ranks), float(h.per_node)

    def priced(xs):
        return costs.group_cost("allreduce", h.flat.algorithm, p, np.asarray(xs, dtype=float), g, h.intra, link,
                                "hierarchical").chosen.time

    return plot_svg(h.flat, priced, f"as priced: hierarchical, {h.nodes} nodes × {h.per_node}")


def link_params_of_fit(fit: Fit, label: str = "intra"):
    """The ``LinkParams`` a block printed from ``fit`` gives (its curve and floor), for the intra level."""
    from ccost.model import costs

    c = fit.curve
    curve = costs.Curve(tuple(x[0] for x in c), tuple(x[1] for x in c), tuple(x[2] for x in c), fit.kind,
                        float(fit.ranks), label)
    return costs.LinkParams(c[0][1], c[-1][2], fit.floor, label, curve, fit.floor)


def hier_lines(h: HierFit) -> list[str]:
    """The hierarchical fit as comment lines for the inter-node block."""
    from ccost.calibrate.block import _bw, _pct, _size, _time

    f = h.flat
    intra = h.intra
    out = [
        f"# Hierarchical fit (calibrate --intra): {f.ranks} ranks = {h.nodes} nodes x {h.per_node} per node "
        f"({h.per_node_from}); T(m) = RS_intra({h.per_node}, m) + AG_intra({h.per_node}, m) + "
        f"[a + b*m/{h.per_node}] per piece, the intra-node stages priced by ccost on {h.intra_label}",
        f"#   intra-node level: alpha {_time(float(intra.alpha))}, bandwidth {_bw(float(intra.bandwidth))}"
        + (f" ({len(intra.curve.starts)}-piece curve)" if intra.curve is not None else "")
        + f"; its two stages are a median {_pct(h.intra_share)} of the measured time",
    ]
    for i, (pc, c) in enumerate(zip(h.pieces, h.curve), 1):
        slope = f"1/b = {_bw(1 / pc.b)}" if pc.b > 0 else "b = 0 (not growing with size)"
        out.append(f"#   inter-node piece {i}: m/{h.per_node} from {_size(c[0])}: a = {_time(pc.a)}, {slope}"
                   f" -> alpha {_time(c[1])} per hop "
                   f"(a / {h.hops:g}), bandwidth {_bw(c[2])} ({h.volume_ratio:.4g} / b)")
    large = (f", at >= {_size(LARGE)} worst {_pct(h.large_worst_error)}" if h.large_worst_error is not None else "")
    out.append(f"# Hierarchical prediction of the whole log (ccost's group_cost, cross_node = hierarchical, "
               f"{f.algorithm}): median error {_pct(h.median_error)}, worst {_pct(h.worst_error)} (at "
               f"{_size(h.worst_size)}){large}; with cross_node = auto {_pct(h.auto_median_error)}")
    out.append(f"# For comparison, the log fitted as one blended link of {f.ranks} ranks: median error "
               f"{_pct(h.flat_median_error)} on this log, but its alpha and bandwidth mix NVLink and the network")
    out += [f"# Note: {n}" for n in h.notes]
    return out


def hier_block(h: HierFit, name: str, log_name: str, title: str | None, command: str | None) -> str:
    from ccost.calibrate.block import _bw, _time, _wrap, ccost_string, comment_safe, source_string
    from ccost.calibrate.block import _size

    f = h.flat
    lines = [f"# Calibrated by `ccost calibrate --intra` from nccl-tests {f.test} in {log_name}: the inter-node "
             f"link of {f.ranks} ranks on {h.nodes} nodes"]
    if command:
        lines.append(f"# Regenerate: {command}")
    lines += hier_lines(h)
    for line, why in f.excluded:
        lines.append(f"# Not fitted: line {line}: {why}")
    lines = [comment_safe(w) for line in lines for w in _wrap(line)]
    title = title or f"inter-node link, measured {f.test} on {h.nodes} nodes x {h.per_node}"
    src = source_string(f, log_name) + f", hierarchical, {h.per_node} per node, intra {h.intra_label}"
    lines.append(f"link {name} {ccost_string(title)} {{")
    lines.append(f"  alpha            = {_time(h.alpha)}")
    lines.append(f"  bandwidth        = {_bw(h.bandwidth)}")
    lines.append(f"  curve_from       = [{', '.join(_size(c[0]) for c in h.curve)}]")
    lines.append(f"  curve_alpha      = [{', '.join(_time(c[1]) for c in h.curve)}]")
    lines.append(f"  curve_bandwidth  = [{', '.join(_bw(c[2]) for c in h.curve)}]")
    lines.append("  curve_collective = allreduce")
    lines.append(f"  curve_ranks      = {h.nodes}")
    lines.append(f"  source           = {ccost_string(src)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["HierFit", "fit_hierarchical", "hier_block", "hier_lines", "hier_plot", "hier_summary",
           "link_params_of_fit", "per_node_of"]
