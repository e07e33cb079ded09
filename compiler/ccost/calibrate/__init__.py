"""``ccost calibrate``: α and bandwidth of a link from real nccl-tests output.

The stages, top to bottom:

- ``logs.parse_log(text, file)``  nccl-tests text → ``NcclLog`` of ``Test``s of ``Row``s (pure)
- ``fit.fit_test(test)``          rows → piecewise T = a + b·m → α per hop, bandwidth per link (pure)
- ``block.link_block(fit, ...)``  ``Fit`` → a ``link`` block with the fit quality in comments (pure)
- ``plot.plot_svg(fit)``          ``Fit`` → SVG, log-log (matplotlib, imported lazily)
- ``files.read_log(path)``        the one place that reads a log file

For the review: ``fit_for_link(link, spec_dir)`` re-reads the log a measured link names and redoes its
fit, ``plot_svg(fit)`` draws it and ``summary_lines(fit)`` says how good it is, in plain sentences.
"""

from __future__ import annotations

import re
from pathlib import Path

from ccost.calibrate.block import link_block, quality_lines, source_string, summary_lines
from ccost.calibrate.fit import Fit, Holdout, Piece, Point, fit_test, parse_size_range, select_test
from ccost.calibrate.logs import NcclLog, Row, Test, Timing, parse_log
from ccost.collectives import ALGORITHM_NAMES, ALGORITHMS, DEFAULT_ALGORITHM

__all__ = ["Fit", "Holdout", "Piece", "Point", "NcclLog", "Row", "Test", "Timing", "fit_for_link",
           "fit_log", "fit_test", "link_block", "parse_log", "plot_svg", "quality_lines", "read_log",
           "select_test", "source_string", "summary_lines"]


def read_log(path, ranks: int | None = None, display: str | None = None) -> NcclLog:
    from ccost.calibrate.files import read_log as _read

    return _read(path, ranks, display)


def plot_svg(fit: Fit) -> str:
    """SVG of the measured points against the fit (log-log). See ``calibrate/plot.py``."""
    from ccost.calibrate.plot import plot_svg as _plot

    return _plot(fit)


def fit_log(log: NcclLog, algorithm: str = "ring", test: str | None = None, in_place: bool = False,
            holdout: bool = False, line_rate: float | None = None,
            sizes: tuple[int | None, int | None] | None = None) -> Fit:
    """Pick the test to calibrate from (``select_test``) and fit it."""
    return fit_test(select_test(log, test), algorithm, in_place, holdout, log, line_rate, sizes)


_RANKS = re.compile(r"^(\d+) ranks?$")


def fit_for_link(link, spec_dir: Path | str, intra=None):
    """Redo the fit behind a measured link, for the review (a ``HierFit`` for an inter-node link fitted
    under the hierarchical model, given the cluster's ``intra`` link; without it, None).

    ``link.source`` is what ``ccost calibrate`` wrote: ``"measured: nccl-tests all_reduce_perf, LOG,
    8 ranks, ring, ..."``. LOG is looked up relative to the file the link was written in (its span), then
    relative to ``spec_dir``; only files inside one of those folders are read. Returns None when the link
    is not measured by ``ccost calibrate`` or its log is not there (a hand-written measured source, a moved
    log, a path that leaves those folders); raises ``CcostError`` (E501) when the
    log is there but broken, because then the review would show a fit that is not the link's.
    """
    source = (link.source or "").strip()
    if not source.lower().startswith("measured: nccl-tests"):
        return None
    parts = [p.strip() for p in source.split(",")]
    hierarchical = "hierarchical" in parts  # an inter-node link fitted by `calibrate --intra`
    if hierarchical and intra is None:
        return None  # redoing a flat fit of its log would show a fit that is not this link's
    per_node = None
    head = parts[0].split()
    test = head[-1] if head and head[-1].endswith("_perf") else None
    ranks = algorithm = None
    in_place = False
    sizes = None
    log_name = None
    for p in parts[1:]:
        if m := _RANKS.match(p):
            ranks = int(m.group(1))
        elif p in ALGORITHM_NAMES:
            algorithm = p
        elif p == "in-place":
            in_place = True
        elif m := re.match(r"^(\d+) per node$", p):
            per_node = int(m.group(1))
        elif p.startswith("sizes "):
            try:
                sizes = parse_size_range(p[len("sizes "):])
            except ValueError:
                return None
        elif log_name is None and not p.lower().startswith(("nccl-tests ", "nccl ")):
            log_name = p
    if not log_name or Path(log_name).is_absolute():
        return None
    for candidate in _named_files(log_name, link.span, spec_dir):
        if candidate.is_file():
            log = read_log(candidate, ranks, display=str(candidate))
            alg = algorithm if algorithm in ALGORITHMS else DEFAULT_ALGORITHM["allreduce"]
            if hierarchical:
                from ccost.model import costs
                from ccost.calibrate.hier import fit_hierarchical

                flat = fit_log(log, alg, test, in_place, sizes=sizes)
                return fit_hierarchical(flat, select_test(log, test), costs.LinkParams.from_link(intra, label="intra"),
                                        f"link {intra.name}", per_node)
            return fit_log(log, alg, test, in_place, holdout=True, sizes=sizes)
    return None


_STEPS_SOURCE = re.compile(r"^measured: ccost calibrate --steps (.+?), (\d+) rows")


def fit_for_stack(stack, spec_dir: Path | str):
    """Redo the ``--steps`` fit behind a measured stack profile, for the review (a ``StepFit``), or None
    when the stack was not fitted by ``ccost calibrate --steps`` or its file is not there. Only files inside
    the folder of the file the stack was written in, or ``spec_dir``, are read (as for links)."""
    m = _STEPS_SOURCE.match((stack.source or "").strip())
    if not m or Path(m.group(1)).is_absolute():
        return None
    from ccost.calibrate.files import read_steps_file
    from ccost.calibrate.steps import fit_steps

    folds = re.search(r", (\d+)-fold hold-out", stack.source)
    for name in (m.group(1), Path(m.group(1)).name):
        for candidate in _named_files(name, stack.span, spec_dir):
            if candidate.is_file():
                rows = read_steps_file(candidate)
                return fit_steps(rows, int(folds.group(1)) if folds else 0, m.group(1))
    return None


def _named_files(name: str, span, spec_dir: Path | str):
    """Where a file a spec names (a log, a steps file) may be: relative to the file that names it, then to
    the spec's folder; only the paths that stay inside the spec's project (``ccost.userfiles.confine``,
    the rule imports follow). A spec is untrusted input (principle: specs are untrusted input): a review
    cannot be made to read, and quote in an error, a file outside the project."""
    import os

    from ccost.userfiles import Outside, confine, project_root

    area = project_root(os.path.join(os.path.abspath(spec_dir), ""))
    bases = ([Path(span.file).parent] if span is not None and span.file else []) + [Path(spec_dir)]
    for base in bases:
        try:
            yield Path(confine(base / name, area, name))
        except Outside:
            continue

