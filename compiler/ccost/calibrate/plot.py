"""An SVG of measured times against the fitted model, log-log; ``figure`` and ``svg_text`` give every
calibration plot (``ccost calibrate --steps``'s too) its style. matplotlib is imported here only.

Deterministic: a bare ``Figure`` rendered by the SVG backend (no pyplot, no GUI), a fixed
``svg.hashsalt`` (element ids otherwise come from a random salt), no date in the metadata, fixed size and
fonts, so the same fit gives byte-identical SVG (and the committed review does not churn).
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ccost.calibrate.fit import Fit


def plot_svg(fit: Fit, priced=None, priced_label: str | None = None) -> str:
    """Measured points, the piecewise fit and what ccost prices with, as SVG text.

    ``priced`` (sizes → seconds) is the price to draw; by default the link block's: its curve and floor
    through the cost core (``Fit.curve_priced``), with the one α-β line dotted for comparison."""
    with figure((7.0, 4.2)) as (fig, ax):
        sizes = np.array([p.size for p in fit.points], dtype=float)
        times_us = np.array([p.time for p in fit.points]) * 1e6
        ax.loglog(sizes, times_us, "o", color="#1f4e79", markersize=4, label=f"measured ({fit.placement})",
                  zorder=3)
        for i, piece in enumerate(fit.pieces, 1):
            xs = np.geomspace(max(piece.lo, 1), max(piece.hi, piece.lo + 1), 64)
            role = []
            if i == 1:
                role.append("α")
            if i == len(fit.pieces):
                role.append("bandwidth")
            label = f"fit, piece {i}" + (f" (gives {' and '.join(role)})" if role else "")
            ax.loglog(xs, (piece.a + piece.b * xs) * 1e6, "-", color=("#c55a11", "#548235", "#7030a0")[
                (i - 1) % 3], linewidth=1.6, label=label, zorder=2)
        xs = np.geomspace(sizes.min(), sizes.max(), 128)
        line = (fit.hops * fit.alpha + fit.volume_ratio * xs / fit.bandwidth) * 1e6
        if priced is None and fit.curve:
            priced, priced_label = fit.curve_priced, "as priced: the link's curve and floor"
        if priced is not None:
            ax.loglog(xs, np.asarray(priced(xs)) * 1e6, "--", color="#404040", linewidth=1.2,
                      label=priced_label or "as priced", zorder=1)
            ax.loglog(xs, line, ":", color="#909090", linewidth=1.0,
                      label=f"one α-β line: {fit.hops:g}·α + {fit.volume_ratio:.3g}·m/B", zorder=1)
        else:
            ax.loglog(xs, line, "--", color="#404040", linewidth=1.0,
                      label=f"as priced: {fit.hops:g}·α + {fit.volume_ratio:.3g}·m/B", zorder=1)
        for p, nxt in zip(fit.pieces, fit.pieces[1:]):
            ax.axvline(np.sqrt(p.hi * nxt.lo), color="#a0a0a0", linewidth=0.7, linestyle=":")
        # Decimal sizes, like every byte count ccost prints (1 kB, 1 MB, 1 GB); minor ticks at the powers of
        # two that nccl-tests sweeps.
        lo_exp = int(np.floor(np.log10(sizes.min()) / 3)) * 3
        hi_exp = int(np.ceil(np.log10(sizes.max()) / 3)) * 3
        names = {0: "1 B", 3: "1 kB", 6: "1 MB", 9: "1 GB", 12: "1 TB"}
        ax.set_xticks([10.0 ** e for e in range(lo_exp, hi_exp + 1, 3)],
                      [names.get(e, f"1e{e} B") for e in range(lo_exp, hi_exp + 1, 3)])
        two = range(int(np.floor(np.log2(sizes.min()))), int(np.ceil(np.log2(sizes.max()))) + 1)
        ax.set_xticks([2.0 ** e for e in two], minor=True)
        ax.tick_params(axis="x", which="minor", labelbottom=False)
        ax.set_xlim(sizes.min() / 1.5, sizes.max() * 1.5)
        ax.set_xlabel("message size m (total bytes per collective, as nccl-tests reports it)")
        ax.set_ylabel("time per collective (µs)")
        ax.set_title(f"{fit.test}, {fit.ranks} ranks, {fit.algorithm}: α = {fit.alpha * 1e6:.3g} µs, "
                     f"bandwidth = {fit.bandwidth / 1e9:.4g} GB/s", fontsize=9)
        return svg_text(fig, ax, "ccost calibrate")


@contextmanager
def figure(size: tuple[float, float]) -> Iterator[tuple[Any, Any]]:
    """A figure of ``size`` inches with one pair of axes, in ccost's plot style (reproducible SVG: fixed
    hash salt, text as paths); draw and call ``svg_text`` inside the ``with``."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no GUI backend

    rc = {"svg.hashsalt": "ccost-calibrate", "svg.fonttype": "path", "font.family": "DejaVu Sans",
          "font.size": 9, "path.simplify": False}
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=size)
        yield fig, fig.add_subplot(1, 1, 1)


def svg_text(fig, ax, creator: str) -> str:
    """The figure as SVG text, with the grid and legend every calibration plot has; no date in it."""
    ax.grid(True, which="major", color="#e0e0e0", linewidth=0.6)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": creator})
    return buf.getvalue()
