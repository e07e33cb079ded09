"""SVG charts for the review, drawn with matplotlib's SVG backend and made deterministic.

Every value plotted is handed in by the view-model builder from the results document; nothing here
computes a result. Determinism (principle: deterministic output): a fixed ``svg.hashsalt`` (clip-path and
glyph ids), no creation date in the metadata, text kept as text (``svg.fonttype = none``, drawn in DejaVu
Sans, which WeasyPrint also has). matplotlib is imported lazily so ``ccost check`` and ``eval`` never pay for
it, and each chart is kept by content (``ccost.report.chart_cache``), so an unchanged chart is never drawn
twice.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence

from ccost.report.chart_cache import cached

# Print size: the text column of A4 with 18 mm margins is ~174 mm (6.85 in).
WIDTH_IN = 6.6
COLOURS = {"compute": "#4c72b0", "latency": "#dd8452", "bandwidth": "#55a868", "step": "#222222",
           "efficiency": "#4c72b0", "threshold": "#c44e52", "optimum": "#8172b3"}

_RC = {
    "svg.hashsalt": "ccost",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "path.simplify": False,
}


def _pyplot():
    import matplotlib

    matplotlib.use("svg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _to_svg(fig, title: str) -> str:
    plt = _pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "ccost"}, bbox_inches="tight")
    plt.close(fig)
    return inline_svg(buf.getvalue(), title)


def inline_svg(svg: str, key: str) -> str:
    """An SVG document made fit to sit inside HTML next to others.

    Drops the XML declaration and DOCTYPE; drops the fixed size, so CSS scales it to the column (its
    viewBox keeps the aspect ratio); prefixes every id (and every reference to one) with ``key``, because
    matplotlib numbers ids per figure (``axes_1``, ``text_9``) and two charts in one page would clash.
    """
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'(<svg[^>]*?) width="[^"]*" height="[^"]*"', r'\1 class="chart"', svg, count=1)
    prefix = re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-") or "chart"
    ids = set(re.findall(r' id="([^"]+)"', svg))
    svg = re.sub(r' id="([^"]+)"', lambda m: f' id="{prefix}-{m.group(1)}"', svg)
    return re.sub(r'(href="#|url\(#)([^")]+)',
                  lambda m: m.group(1) + (f"{prefix}-{m.group(2)}" if m.group(2) in ids else m.group(2)), svg)


def _time_axis(values_s: Sequence[float]) -> tuple[float, str]:
    top = max((abs(v) for v in values_s if v is not None and math.isfinite(v)), default=0.0)
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if top >= factor:
            return factor, unit
    return 1e-9, "ns"


def _x_axis(ax, xs: Sequence[float], label: str) -> None:
    ax.set_xlabel(label)
    positive = all(x > 0 for x in xs)
    powers_of_two = positive and all(float(x).is_integer() and (int(x) & (int(x) - 1)) == 0 for x in xs)
    if powers_of_two and len(xs) > 2:
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{int(x)}" for x in xs])
        ax.minorticks_off()


@cached
def sweep_time_chart(xs: Sequence[float], x_label: str, compute: Sequence[float],
                     comm_terms: Sequence[tuple[str, Sequence[float]]],
                     step: Sequence[float] | None, title: str) -> str:
    """Step time against the swept field: compute, then each communication term, stacked; ``step`` as a
    line. ``comm_terms`` is ``[("latency term", [...]), ("bandwidth term", [...])]`` or one total."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.3))
        tops = [c + sum(t[i] for _, t in comm_terms) for i, c in enumerate(compute)]
        factor, unit = _time_axis(tops + list(step or []))
        series = [[v / factor for v in compute]] + [[v / factor for v in t] for _, t in comm_terms]
        colours = [COLOURS["compute"], COLOURS["latency"], COLOURS["bandwidth"]][:len(series)]
        ax.stackplot(xs, *series, labels=["compute"] + [label for label, _ in comm_terms], colors=colours,
                     alpha=0.85)
        if step is not None:
            ax.plot(xs, [v / factor for v in step], color=COLOURS["step"], marker="o", markersize=3,
                    linewidth=1.2, label="step time (compute + exposed comm)")
        _x_axis(ax, xs, x_label)
        ax.set_ylabel(f"time per step ({unit})")
        ax.set_ylim(bottom=0)
        ax.set_title(title, loc="left")
        ax.legend(loc="upper right", frameon=False)
        return _to_svg(fig, title)


@cached
def sweep_efficiency_chart(xs: Sequence[float], x_label: str, efficiency: Sequence[float],
                           thresholds: Sequence[tuple[str, float]], n_star: float | None,
                           title: str) -> str:
    """Efficiency (%) against the swept field, with the policy thresholds and the continuous N*."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.1))
        ax.plot(xs, [e * 100 for e in efficiency], color=COLOURS["efficiency"], marker="o", markersize=3,
                linewidth=1.4, label="efficiency = speedup / N")
        for i, (label, value) in enumerate(thresholds):
            ax.axhline(value * 100, color=COLOURS["threshold"], linewidth=0.9,
                       linestyle=("--", ":", "-.")[i % 3], label=label)
        _x_axis(ax, xs, x_label)
        if n_star is not None and math.isfinite(n_star) and n_star > 0:
            ax.axvline(n_star, color=COLOURS["optimum"], linewidth=1.0, linestyle="-")
            ax.annotate(f"N* = {n_star:.3g}", xy=(n_star, 0.97), xycoords=("data", "axes fraction"),
                        ha="right", va="top", fontsize=8, color=COLOURS["optimum"],
                        xytext=(-3, 0), textcoords="offset points")
            if ax.get_xscale() == "log" and n_star > max(xs):
                ax.set_xlim(right=n_star * 1.15)
        ax.set_ylabel("efficiency (%)")
        ax.set_ylim(0, 105)
        ax.set_title(title, loc="left")
        ax.legend(loc="lower left", frameon=False)
        return _to_svg(fig, title)


@cached
def compare_chart(names: Sequence[str], compute: Sequence[float], latency: Sequence[float],
                  bandwidth: Sequence[float], step: Sequence[float], title: str) -> str:
    """Horizontal stacked bars, one per plan: compute, latency and bandwidth terms; step time marked."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        height = 1.0 + 0.42 * len(names)
        fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
        factor, unit = _time_axis([c + la + b for c, la, b in zip(compute, latency, bandwidth)] + list(step))
        ys = list(range(len(names)))[::-1]
        left = [0.0] * len(names)
        for label, values, colour in (("compute", compute, COLOURS["compute"]),
                                      ("latency term", latency, COLOURS["latency"]),
                                      ("bandwidth term", bandwidth, COLOURS["bandwidth"])):
            widths = [v / factor for v in values]
            ax.barh(ys, widths, left=left, color=colour, label=label, height=0.6)
            left = [a + w for a, w in zip(left, widths)]
        ax.scatter([s / factor for s in step], ys, marker="|", s=260, color=COLOURS["step"], zorder=3,
                   label="step time")
        ax.set_yticks(ys)
        ax.set_yticklabels(list(names))
        ax.set_xlabel(f"time per step ({unit})")
        ax.grid(axis="y", visible=False)
        ax.set_title(title, loc="left")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22 - 0.1 / max(len(names), 1)), ncol=4,
                  frameon=False)
        return _to_svg(fig, title)


@cached
def pareto_chart(front: Sequence[tuple[float, float]], top: Sequence[tuple[float, float]], title: str) -> str:
    """A search's Pareto front: (latency s, tokens/s per GPU) points joined as a staircase (no layout lies
    above and to the left of it), the top layouts by the search's objective ringed. Log-scaled latency
    when the front spans more than a decade."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6))
        lats = [t for t, _ in front] + [t for t, _ in top]
        factor, unit = _time_axis(lats)
        xs = [t / factor for t, _ in front]
        ys = [v for _, v in front]
        ax.step(xs, ys, where="post", color=COLOURS["efficiency"], linewidth=1.0, alpha=0.6)
        ax.plot(xs, ys, linestyle="none", marker="o", markersize=3.5, color=COLOURS["efficiency"],
                label="Pareto front")
        if top:
            ax.plot([t / factor for t, _ in top], [v for _, v in top], linestyle="none", marker="o",
                    markersize=8, markerfacecolor="none", markeredgecolor=COLOURS["threshold"],
                    markeredgewidth=1.0, label="top layouts")
        positive = [x for x in xs if x > 0]
        if positive and max(positive) / min(positive) > 10:
            ax.set_xscale("log")
        ax.set_xlabel(f"latency per step ({unit})")
        ax.set_ylabel("tokens/s per GPU")
        ax.set_ylim(bottom=0)
        ax.set_title(title, loc="left")
        ax.legend(loc="lower right", frameon=False)
        return _to_svg(fig, title)


#: The parts of a training run's calendar (ccost.model.target), in the order the timeline stacks them.
TIMELINE_COLOURS = ("#4c72b0", "#8172b3", "#dd8452", "#c44e52")


@cached
def timeline_chart(bars: Sequence[tuple[str, Sequence[float]]], parts: Sequence[str], deadline_s: float | None,
                   title: str) -> str:
    """A training run's calendar (ccost.model.target): one horizontal bar per fleet (label, seconds of each of
    ``parts``: training, checkpoint writing, restarts, re-done work), stacked, in days; the deadline, when
    there is one, as a vertical line."""
    plt = _pyplot()
    day = 86400.0
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.55 + 0.45 * len(bars)))
        for i, (label, secs) in enumerate(reversed(list(bars))):
            left = 0.0
            for j, (part, s) in enumerate(zip(parts, secs)):
                width = (s or 0.0) / day
                ax.barh(i, width, left=left, color=TIMELINE_COLOURS[j % len(TIMELINE_COLOURS)], height=0.55,
                        label=part if i == 0 else None)
                left += width
        ax.set_yticks(range(len(bars)))
        ax.set_yticklabels([label for label, _ in reversed(list(bars))])
        if deadline_s is not None:
            ax.axvline(deadline_s / day, color=COLOURS["threshold"], linestyle="--", linewidth=1.0,
                       label="deadline")
        ax.set_xlabel("days")
        ax.set_xlim(left=0)
        ax.grid(axis="y", visible=False)
        ax.set_title(title, loc="left")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(bars) < 3 else -0.2), ncol=5,
                  frameon=False)
        return _to_svg(fig, title)


@cached
def target_front_chart(front: Sequence[tuple[float, float]], top: Sequence[tuple[float, float]], y_label: str,
                       title: str) -> str:
    """A training search's front (ccost.search): (time to train in s, the run's cost or GPU-days) joined as a
    staircase (no layout is both sooner and cheaper), the top layouts by the objective ringed."""
    plt = _pyplot()
    day = 86400.0
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6))
        scale = 1e6 if max(c for _, c in front) >= 1e6 else 1.0  # millions read as millions
        if scale > 1:
            y_label = y_label.replace("(USD)", "(M USD)") if "(USD)" in y_label else f"{y_label} (millions)"
        xs = [t / day for t, _ in front]
        ys = [c / scale for _, c in front]
        ax.step(xs, ys, where="post", color=COLOURS["efficiency"], linewidth=1.0, alpha=0.6)
        ax.plot(xs, ys, linestyle="none", marker="o", markersize=3.5, color=COLOURS["efficiency"],
                label="Pareto front")
        if top:
            ax.plot([t / day for t, _ in top], [c / scale for _, c in top], linestyle="none", marker="o", markersize=8,
                    markerfacecolor="none", markeredgecolor=COLOURS["threshold"], markeredgewidth=1.0,
                    label="top layouts")
        ax.set_xlabel("time to train (days)")
        ax.set_ylabel(y_label)
        ax.set_title(title, loc="left")
        ax.legend(loc="upper right", frameon=False)
        return _to_svg(fig, title)


#: The two percentiles a capacity answer's bars show, light and dark.
PERCENTILE_COLOURS = ("#9fb8da", "#4c72b0")


@cached
def percentile_bars(fleets: Sequence[tuple[str, Sequence[tuple[float, float]]]], metrics: Sequence[str],
                    limits: Sequence[float | None], title: str) -> str:
    """A capacity search's answers at the sized rate (ccost.capacity): one panel per metric (TTFT, TPOT),
    per fleet a bar for p50 and one for p99 (simulated), the SLO as a dashed line; in milliseconds."""
    plt = _pyplot()
    with plt.rc_context(_RC):
        fig, axs = plt.subplots(1, len(metrics), figsize=(WIDTH_IN, 0.7 + 0.42 * len(fleets)), squeeze=False)
        labels = [label for label, _ in fleets]
        for j, (ax, metric, limit) in enumerate(zip(axs[0], metrics, limits)):
            for i, (_, values) in enumerate(reversed(list(fleets))):
                p50, p99 = values[j]
                ax.barh(i + 0.18, p50 * 1e3, height=0.34, color=PERCENTILE_COLOURS[0], label="p50" if i == 0 else None)
                ax.barh(i - 0.18, p99 * 1e3, height=0.34, color=PERCENTILE_COLOURS[1], label="p99" if i == 0 else None)
            if limit is not None:
                ax.axvline(limit * 1e3, color=COLOURS["threshold"], linestyle="--", linewidth=1.0, label="SLO")
            ax.set_yticks(range(len(fleets)))
            ax.set_yticklabels(list(reversed(labels)) if j == 0 else [""] * len(fleets))
            ax.set_xlabel(f"{metric} (ms)")
            ax.set_xlim(left=0)
            ax.grid(axis="y", visible=False)
        axs[0][0].set_title(title, loc="left")
        axs[0][-1].legend(loc="upper center", bbox_to_anchor=(0.0, -0.45 if len(fleets) < 3 else -0.3), ncol=3,
                          frameon=False)
        return _to_svg(fig, title)
