"""Write a fit as a ``link`` block ready to import (LANGUAGE.md §4), its quality in comments."""

from __future__ import annotations

import re

from ccost.calibrate.fit import LARGE, Fit, Piece, size_range_text
from ccost.units import BANDWIDTH, INFORMATION, TIME, format_quantity


def _size(b: float) -> str:
    return format_quantity(float(b), INFORMATION, digits=4)


def _time(s: float) -> str:
    return format_quantity(s, TIME, digits=4).replace("µs", "us")


def _bw(x: float) -> str:
    return format_quantity(x, BANDWIDTH, digits=4)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %" if x < 10 else f"{100 * x:.0f} %"


def _sig(x: float, digits: int = 4) -> str:
    text = f"{x:.{digits}g}"
    if "e" in text:  # keep the spec readable and parseable: no exponents in the block's numbers
        text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text


# Characters that end a line for some reader (the lexer ends a comment at \r and \n only, but editors
# and Python's splitlines also break at these) and the other control characters.
_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def ccost_string(text: str) -> str:
    """A .ccost string literal: double quotes, with the escapes the language has (``\\"``, ``\\\\``,
    ``\\n``, ``\\t``; LANGUAGE.md §2); any other control character (read from a log, say) becomes �,
    since a string has no escape for it and must not carry it raw."""
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + _BREAKS.sub("\ufffd", text) + '"'


def comment_safe(line: str) -> str:
    """A comment line that stays one comment line: every control or line-breaking character in it (a
    title, a log's file name or test name) is written as an escape, so no text after it can become code."""
    return _BREAKS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                       else f"\\u{ord(m.group()):04x}", line)


def valid_name(name: str) -> bool:
    """A block name the language accepts: an identifier that is not a keyword (``plan``, ``link``, ...)."""
    from ccost.schema import keywords

    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None and name not in keywords()


def source_string(fit: Fit, log_name: str) -> str:
    """``measured: nccl-tests all_reduce_perf, <log>, 8 ranks, ring[, nccl-tests 2.18.3, NCCL 2.29.2]``.

    The log path is what ``fit_for_link`` reads back, relative to the file the block is written in; the
    rank count and algorithm let it redo exactly this fit.
    """
    parts = [f"measured: nccl-tests {fit.test}", log_name, f"{fit.ranks} ranks", fit.algorithm]
    if fit.placement != "out-of-place":
        parts.append(fit.placement)
    if fit.size_range:
        parts.append(f"sizes {size_range_text(fit.size_range)}")
    if not fit.alpha_measurable:
        parts.append("alpha not measurable")
    if fit.tests_version:
        parts.append(f"nccl-tests {fit.tests_version}")
    if fit.nccl_version:
        parts.append(f"NCCL {fit.nccl_version}")
    return ", ".join(parts)


def _piece_line(i: int, p: Piece, role: str) -> str:
    # b = 0: the piece's time does not grow with size (a bandwidth of "inf B/s" is no figure to print)
    slope = f" + m / {_bw(1 / p.b)}" if p.b > 0 else ", not growing with size"
    return (f"#   {i}. {_size(p.lo)} to {_size(p.hi)} ({p.n} sizes): T = {_time(p.a)}{slope}; median "
            f"{_pct(p.median_error)}, worst {_pct(p.worst_error)}{role}")


def _wrap(line: str, width: int = 108) -> list[str]:
    """Wrap a long comment at spaces; continuation lines are indented under the text."""
    if len(line) <= width or not line.startswith("#") or line.startswith("# Regenerate:"):
        return [line]  # the command stays on one line so it can be copied
    body = line[1:].lstrip()
    indent = len(line) - len(body) - 1
    lead = "#" + " " * indent
    words: list[str] = []
    for word in body.split(" "):
        if words and _UNIT.match(word) and re.search(r"\d$", words[-1]):
            words[-1] += " " + word  # never split "32 MB" across lines
        elif words and (words[-1] == "<-" or words[-1].endswith("<- gives")):
            words[-1] += " " + word  # nor "<- gives bandwidth"
        else:
            words.append(word)
    out, cur = [], lead
    for word in words:
        if cur.strip("# ") and len(cur) + 1 + len(word) > width:
            out.append(cur.rstrip())
            cur = lead + "    " + word
        else:
            cur = cur + word if cur.endswith(" ") or cur == "#" else cur + " " + word
    out.append(cur)
    return out


_UNIT = re.compile(r"^(%|[kMGTP]?i?B(/s)?[,;:)]*|[mun]?s[,;:)]*|us[,;:)]*|µs[,;:)]*|%[,;:)]*)$")


def quality_lines(fit: Fit) -> list[str]:
    """The fit quality as comment lines (also printed for cross-check tests)."""
    out = []
    np_ = len(fit.pieces)
    out.append(f"# Fit: T = a + b*m per piece, minimising the relative error sum(((T_fit - T)/T)^2) over "
               f"{len(fit.points)} {fit.placement} sizes; {np_} piece{'s' if np_ > 1 else ''} "
               "(NCCL changes protocol with size; a piece is added only when it cuts the RMS error by a "
               "third and lowers the BIC):")
    for i, p in enumerate(fit.pieces, 1):
        roles = []
        if i == 1:
            roles.append("alpha")
        if i == np_:
            roles.append("bandwidth")
        out.append(_piece_line(i, p, f"   <- gives {' and '.join(roles)}" if roles else ""))
    out.append(f"#   piecewise: R^2 of log T {fit.r2_log:.4f}, median error {_pct(fit.median_error)}, worst "
               f"{_pct(fit.worst_error)} (at {_size(fit.worst_size)})")
    if fit.curve:
        large = (f", at >= {_size(LARGE)} worst {_pct(fit.curve_large_worst_error)}"
                 if fit.curve_large_worst_error is not None else f", no size >= {_size(LARGE)} measured")
        out.append(f"# As priced by ccost with this block (the curve, piece by piece, and the floor; "
                   f"{fit.algorithm} {fit.kind}, {fit.ranks} ranks): median error {_pct(fit.curve_median_error)}, "
                   f"worst {_pct(fit.curve_worst_error)} (at {_size(fit.curve_worst_size)}){large}")
    out.append(f"# One alpha-beta line instead (the spec-sheet form, alpha and bandwidth alone) T = "
               f"{fit.hops:g}*alpha + {fit.volume_ratio:.4g}*m/bandwidth: median error "
               f"{_pct(fit.priced_median_error)}, worst {_pct(fit.priced_worst_error)} (at "
               f"{_size(fit.priced_worst_size)})")
    if fit.holdout:
        h = fit.holdout
        out.append(f"# Hold-out (fit on every other size, {h.trained_on}; test on the other {h.tested_on}): "
                   f"piecewise median {_pct(h.median_error)}, worst {_pct(h.worst_error)} (at "
                   f"{_size(h.worst_size)}); as priced median {_pct(h.priced_median_error)}, worst "
                   f"{_pct(h.priced_worst_error)}")
    plateau = (f"# busbw plateau {_bw(fit.busbw_plateau)} (max out-of-place busbw, at "
               f"{_size(fit.busbw_plateau_size)})")
    if fit.line_rate:
        plateau += (f" = {_pct(fit.busbw_plateau / fit.line_rate)} of the spec-sheet line rate "
                    f"{_bw(fit.line_rate)} ({fit.line_rate_from})")
    else:
        plateau += "; spec-sheet line rate unknown (pass --line-rate, e.g. --line-rate '300 GB/s')"
    out.append(plateau)
    for line, why in fit.excluded:
        out.append(f"# Not fitted: line {line}: {why}")
    for note in fit.notes:
        out.append(f"# Note: {note}")
    return [comment_safe(wrapped) for line in out for wrapped in _wrap(line)]


def summary_lines(fit: Fit) -> list[str]:
    """The fit and its quality as plain sentences, for the review next to ``plot_svg(fit)``."""
    first, last = fit.pieces[0], fit.pieces[-1]
    n = len(fit.pieces)
    us = lambda x: _time(x).replace(" us", " µs")  # noqa: E731 - the review is not ASCII-bound
    out = [
        f"nccl-tests {fit.test}, {fit.ranks} ranks ({fit.ranks_from}); {len(fit.points)} {fit.placement} "
        f"sizes fitted as T = a + b·m by relative error, {n} piece{'s' if n > 1 else ''}"
        + (f", sizes {size_range_text(fit.size_range)}" if fit.size_range else "") + ".",
        f"α = {us(fit.alpha)} per hop: a = {us(first.a)} of piece 1 ({_size(first.lo)} to "
        f"{_size(first.hi)}) "
        f"over {fit.hops:g} {fit.algorithm} hops.",
        f"bandwidth = {_bw(fit.bandwidth)}: {fit.volume_ratio:.4g} × {_bw(1 / last.b)} (1/b of piece {n}, "
        f"{_size(last.lo)} to {_size(last.hi)}).",
        f"Piecewise fit: R² of log T {fit.r2_log:.4f}, median error {_pct(fit.median_error)}, worst "
        f"{_pct(fit.worst_error)} at {_size(fit.worst_size)}.",
        f"One α-β line ({fit.hops:g}·α + {fit.volume_ratio:.4g}·m/B): median error "
        f"{_pct(fit.priced_median_error)}, worst {_pct(fit.priced_worst_error)} at "
        f"{_size(fit.priced_worst_size)}.",
    ]
    if fit.curve:
        out.insert(4, f"As priced by ccost on the link's measured curve ({len(fit.curve)} piece"
                   f"{'s' if len(fit.curve) > 1 else ''}) and floor: median error {_pct(fit.curve_median_error)}, "
                   f"worst {_pct(fit.curve_worst_error)} at {_size(fit.curve_worst_size)}"
                   + (f"; at ≥ {_size(LARGE)} worst {_pct(fit.curve_large_worst_error)}"
                      if fit.curve_large_worst_error is not None else "") + ".")
    if not fit.alpha_measurable:
        out.insert(1, "α is not measurable from this log (no latency-bound size): the intercept only prices "
                   "the measured sizes.")
    if fit.holdout:
        h = fit.holdout
        out.append(f"Hold-out (fit on every other size, tested on the other {h.tested_on}): median "
                   f"{_pct(h.median_error)}, worst {_pct(h.worst_error)} at {_size(h.worst_size)}.")
    plateau = f"busbw plateau {_bw(fit.busbw_plateau)} at {_size(fit.busbw_plateau_size)}"
    if fit.line_rate:
        plateau += f", {_pct(fit.busbw_plateau / fit.line_rate)} of the {_bw(fit.line_rate)} line rate"
    out.append(plateau + ".")
    out += [f"Not fitted: line {line}: {why}." for line, why in fit.excluded]
    out += [f"Note: {note}." for note in fit.notes]
    return out


def link_block(fit: Fit, name: str, log_name: str, title: str | None = None,
               command: str | None = None) -> str:
    """The ``link`` block text, comments first. ``log_name`` is the log path as the spec should name it."""
    first, last = fit.pieces[0], fit.pieces[-1]
    lines = [
        f"# Calibrated by `ccost calibrate` from nccl-tests {fit.test} in {log_name}: {fit.ranks} ranks "
        f"({fit.ranks_from})",
    ]
    if command:
        lines.append(f"# Regenerate: {command}")
    lines += quality_lines(fit)
    if fit.alpha_measurable:
        lines.append(f"# alpha = a of piece 1 / hops = {_time(first.a)} / {fit.hops:g} (the small-message "
                     "piece: the latency decode-sized messages pay)")
    else:
        lines.append(f"# alpha: NOT MEASURABLE from this log (no latency-bound size); {_time(first.a)} / "
                     f"{fit.hops:g} is the intercept of bandwidth-bound sizes, written only so that the "
                     "measured sizes are priced right: do not read it as the link's latency")
    lines.append(f"# bandwidth = (volume/m) / b of piece {len(fit.pieces)} = {fit.volume_ratio:.4g} x "
                 f"{_bw(1 / last.b)} (the large-message piece: the streaming "
                 "rate); efficiency is left at 100 %: this bandwidth is already the achieved rate")
    if fit.curve:
        lines.append(f"# curve_*: each piece's alpha = a/{fit.hops:g} and bandwidth = {fit.volume_ratio:.4g}/b, "
                     "from the size where it starts (the geometric midpoint between two pieces' sizes): ccost "
                     f"prices every message on its piece, so {fit.kind} on {fit.ranks} ranks costs what the log "
                     "measured; no algorithm is priced below it there (curve_collective, curve_ranks)")
    if fit.floor is not None:
        lines.append(f"# floor_latency = one_shot_latency = {_time(fit.floor)}, the smallest time measured at a "
                     f"latency-bound size: no collective on this link is priced below it (a lighter collective, "
                     "a sendrecv, may really take less: calibrate from its own log then)")
    if title is None:
        gpus = "/".join(fit.gpu_names)
        title = f"measured {fit.test} on {fit.ranks} ranks" + (f" ({gpus})" if gpus else "")
    lines = [comment_safe(wrapped) for line in lines for wrapped in _wrap(line)]
    lines.append(f"link {name} {ccost_string(title)} {{")
    fields = [("alpha", f"{_sig(fit.alpha * 1e6)} us"), ("bandwidth", f"{_sig(fit.bandwidth / 1e9)} GB/s")]
    if fit.floor is not None:
        fields += [("one_shot_latency", _time(fit.floor)), ("floor_latency", _time(fit.floor))]
    if fit.curve:
        fields += [("curve_from", f"[{', '.join(_size(c[0]) for c in fit.curve)}]"),
                   ("curve_alpha", f"[{', '.join(_time(c[1]) for c in fit.curve)}]"),
                   ("curve_bandwidth", f"[{', '.join(_bw(c[2]) for c in fit.curve)}]"),
                   ("curve_collective", fit.kind), ("curve_ranks", str(fit.ranks))]
    fields.append(("source", ccost_string(source_string(fit, log_name))))
    width = max(len(k) for k, _ in fields)  # `ccost fmt`'s layout: the `=` signs in one column
    lines += [f"  {k.ljust(width)} = {v}" for k, v in fields]
    lines.append("}")
    return "\n".join(lines) + "\n"
