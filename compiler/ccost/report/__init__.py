"""The design review: HTML and PDF of a spec's results, with every number derived.

Pipeline of this package, one module per job::

    load_spec -> evaluate -> results_document ──┐
                 explain(plan) for each plan ───┼─ build.build -> view.ReportView
    provenance.collect (files, git, date) ──────┘        │
                                     render.render_html("screen") -> <stem>.html
                                     render.render_html("print") -> render.render_pdf -> <stem>.pdf
                                     output.to_yaml(document) -> <stem>.yaml
    atomic.AtomicFiles: all outputs land together, or none does.

``write_report`` is the entry point of ``ccost report`` and of ``python -m ccost.report.regen``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ccost.report.view import ReportView

FORMATS = ("html", "pdf", "yaml")


@dataclass(frozen=True)
class Review:
    """Everything rendered for one spec, before it is written."""

    view: ReportView
    document: dict  # results_document(...): what the YAML holds and every number comes from


def output_paths(spec_path: str | Path, out: str | Path | None, fmt: str = "both",
                 cwd: Path | None = None, summary: bool = False) -> dict[str, Path]:
    """Where ``ccost report`` writes: ``reports/<stem>.{html,pdf,yaml}`` under ``cwd`` by default.

    ``-o`` names either a folder (existing, or written with a trailing slash) that receives
    ``<stem>.*``, or a file whose suffix is dropped: ``-o out/review.pdf`` writes ``out/review.pdf``,
    ``out/review.html`` and ``out/review.yaml``. The YAML of the results is always written beside them.
    ``summary`` (``--summary``): the review is ``<stem>-summary.{html,pdf}`` beside the full one's
    ``<stem>.*`` (a file named by ``-o`` is taken as it is); the YAML is the same ``<stem>.yaml``.
    """
    cwd = cwd or Path.cwd()
    stem = Path(spec_path).stem
    review_suffix = "-summary" if summary else ""
    if out is None:
        base = cwd / "reports" / stem
    else:
        text = str(out)
        p = Path(out)
        p = p if p.is_absolute() else cwd / p
        if text.endswith(("/", os.sep)) or _is_dir(p):
            base = p / stem
        elif p.suffix.lower() in (".html", ".htm", ".pdf", ".yaml", ".yml"):
            base, review_suffix = p.with_suffix(""), ""
        else:
            base, review_suffix = p, ""
    kinds = {"both": ("html", "pdf"), "html": ("html",), "pdf": ("pdf",)}[fmt]
    paths = {k: base.with_name(base.name + review_suffix + "." + k) for k in kinds}
    paths["yaml"] = base.with_name(base.name + ".yaml")
    return paths


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:  # a name too long for the file system: not a folder (writing it is refused later)
        return False


@contextmanager
def source_date_epoch(epoch: int) -> Iterator[None]:
    """Set ``SOURCE_DATE_EPOCH`` while the PDF renders: WeasyPrint subsets fonts with fontTools, which
    stamps each subset with the current time unless the variable is set (so two renders would differ)."""
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old


def _warning_text(d) -> str:
    where = f"{d.span}: " if d.span else ""
    text = f"{where}{d.message}"
    if d.help:
        text += f" ({d.help})"
    return f"[{d.code}] {text}"


def calibrations_for(spec, plan_names: Sequence[str], spec_dir: Path) -> dict[str, list]:
    """Calibration plots of the measured links each plan uses (needs ``ccost.calibrate``; optional)."""
    try:
        from ccost.calibrate import fit_for_link, plot_svg, summary_lines
    except ImportError:
        return {}
    from ccost.diagnostics import CcostError
    from ccost.report.build import Calibration
    from ccost.report.chart_cache import cached
    from ccost.report.charts import inline_svg

    def calibration(link, intra=None) -> Calibration:
        try:
            fit = fit_for_link(link, spec_dir, intra)
        except CcostError as exc:  # the log is there but broken: say so rather than plot another fit
            return Calibration(link.name, None, f"the calibration log could not be read: {exc}")
        if fit is None:
            return Calibration(link.name, None, "measured, but its nccl-tests log was not found next to the "
                                                "spec; no fit plot")
        from ccost.calibrate.hier import HierFit, hier_plot, hier_summary

        if isinstance(fit, HierFit):  # an inter-node link fitted under the hierarchical model
            return Calibration(link.name, inline_svg(hier_plot(fit), f"calibration-{link.name}"),
                               f"{link.source or 'measured'}. {' '.join(hier_summary(fit))}")
        # The plot and the fit's quality (pieces, R², median and worst error, hold-out, busbw plateau)
        # in calibrate's own sentences: the same numbers `ccost calibrate` prints in the link block.
        quality = " ".join(summary_lines(fit))
        return Calibration(link.name, inline_svg(cached(plot_svg)(fit), f"calibration-{link.name}"),
                           f"{link.source or 'measured'}. {quality}")

    def profile(stack) -> Calibration | None:
        from ccost.calibrate import fit_for_stack
        from ccost.calibrate.block import _pct
        from ccost.calibrate.steps import plot_steps_svg

        try:
            fit = fit_for_stack(stack, spec_dir)
        except CcostError as exc:
            return Calibration(f"stack {stack.name}", None, f"the measured step times could not be read: {exc}")
        if fit is None:
            return None
        ho = (f"; {fit.folds}-fold hold-out median {_pct(fit.holdout_median_error)}, worst "
              f"{_pct(fit.holdout_worst_error)}" if fit.holdout_median_error is not None else "")
        return Calibration(f"stack {stack.name}", inline_svg(plot_steps_svg(fit), f"calibration-stack-{stack.name}"),
                           f"{stack.source}. Refitted to {len(fit.rows)} measured step times: median error "
                           f"{_pct(fit.median_error)}, worst {_pct(fit.worst_error)}{ho}.")

    out: dict[str, list] = {}
    cache: dict[str, Calibration] = {}
    for name in plan_names:
        plan = spec.plans.get(name)
        if plan is None:  # a hand-made document may name a plan the spec lacks
            continue
        stack = plan.stack
        if stack is not None and (stack.source or "").lower().startswith("measured"):
            key = f"stack/{stack.name}"
            if key not in cache:
                cache[key] = profile(stack)
            if cache[key] is not None:
                out.setdefault(name, []).append(cache[key])
        cluster = plan.cluster
        intra_link = cluster.intra_node if cluster is not None else None
        for link in ((intra_link, cluster.inter_node) if cluster is not None else ()):
            if link is not None and link.measured:
                key = f"{link.name}/{intra_link.name if intra_link is not None else ''}"
                if key not in cache:
                    cache[key] = calibration(link, intra_link if link is not intra_link else None)
                out.setdefault(name, []).append(cache[key])
    return out


def review(spec_path: str | Path, *, include_git: bool = True, environ: Mapping[str, str] | None = None,
           cwd: Path | None = None, git_note: str = "not recorded", charts: bool = True,
           progress=None, summary: bool = False) -> Review:
    """Check, evaluate and explain ``spec_path``; build the view model. ``progress(name, done, total)``
    hears how each search is going (the CLI's bar, ``ccost.progress``). ``summary``: only what the
    summary review shows — no plan is explained step by step and the spec is not highlighted (the
    summary prints neither), the rest is as for the full review.

    Raises ``CcostError`` on a bad spec (the CLI renders it with the source lines).
    """
    from ccost import evaluate as E
    from ccost.check import load_spec

    spec, warnings = load_spec(str(spec_path))
    document = E.results_document(E.evaluate(spec, progress=progress) if progress else E.evaluate(spec))
    # The grouped derivation (inputs, each collective, compute, memory, totals) reads better than the flat
    # list; both are ``explain``'s steps, so the review and `ccost explain` print the same values.
    steps = {} if summary else {name: E.explain_sections(spec, name) for name in document.get("plans", {})}
    return review_from(spec, document, steps, spec_path=spec_path, warnings=warnings,
                       include_git=include_git, environ=environ, cwd=cwd, git_note=git_note, charts=charts,
                       sources=not summary)


def review_from(spec, document: dict, steps: Mapping[str, Sequence], *, spec_path: str | Path,
                warnings: Sequence = (), include_git: bool = True, environ: Mapping[str, str] | None = None,
                cwd: Path | None = None, git_note: str = "not recorded", charts: bool = True,
                sources: bool = True) -> Review:
    """The view model from an already evaluated spec (tests use it with a hand-made document);
    ``sources=False``: without the highlighted spec files of the appendix."""
    from ccost.report import build, provenance, render

    files = list(spec.files or (str(spec_path),))
    stamp = provenance.collect(spec_path, files, include_git=include_git,
                               environ=dict(environ) if environ is not None else None, cwd=cwd,
                               git_note=git_note)
    std = provenance._std_dir()
    shown = sources
    sources = []
    for f in [str(spec_path)] + [f for f in files if Path(f).resolve() != Path(spec_path).resolve()]:
        if not shown:
            break
        p = Path(f)
        if std is not None and p.resolve().is_relative_to(std):
            continue  # the bundled library is named and hashed on the cover, not reprinted
        sources.append(render.highlight_source(provenance.display_path(p, cwd),
                                               _text(p)))
    calibrations = calibrations_for(spec, list(document.get("plans", {})), Path(spec_path).resolve().parent)
    about = build.opening_comment(_text(spec_path))
    view = build.build(spec, document, steps, stamp, [_warning_text(w) for w in warnings], sources,
                       calibrations=calibrations, charts=charts, about=about)
    return Review(view, document)


def _text(path) -> str:
    """A spec file's text as the review shows it: bounded like every user file (ccost.userfiles),
    newlines made universal."""
    from ccost.syntax.parse import read_source

    return read_source(path).replace("\r\n", "\n").replace("\r", "\n")


def write_review(rev: Review, paths: Mapping[str, Path], summary: bool = False, pdf=None) -> list[Path]:
    """Render and write ``paths`` (keys from ``FORMATS``) all-or-nothing; returns the paths written.
    ``summary``: the summary review (``render.render_summary_html``) instead of the full one. ``pdf``: a
    ``pdfproc.PdfProcess`` that renders the PDF (the same bytes) while this process writes the rest.

    The output depends on nothing but ``rev``: every date in it (the cover's, the PDF's creation date,
    the font timestamps) is the provenance stamp's, from ``SOURCE_DATE_EPOCH`` when set, else today.
    """
    from ccost.output import to_yaml
    from ccost.report import render
    from ccost.report.atomic import AtomicFiles, check_targets

    check_targets(paths.values())  # a folder named a1.yaml must not cost a1.html its previous review
    with AtomicFiles() as out:  # any error or SIGTERM/SIGHUP before the end: the previous review stays
        html = render.render_summary_html if summary else render.render_html
        if "html" in paths:
            out.write(paths["html"], html(rev.view, "screen").encode("utf-8"))
        if "pdf" in paths and pdf is not None:
            pdf.submit(html(rev.view, "print"), rev.view.provenance.epoch)  # rendered there meanwhile
        if "yaml" in paths:
            out.write(paths["yaml"], to_yaml(rev.document).encode("utf-8"))
        if "pdf" in paths:
            if pdf is not None:
                out.write(paths["pdf"], pdf.result())
            else:
                with source_date_epoch(rev.view.provenance.epoch):
                    out.write(paths["pdf"], render.render_pdf(html(rev.view, "print")))
    return [Path(paths[k]) for k in ("html", "pdf", "yaml") if k in paths]


def write_report(spec_path: str | Path, paths: Mapping[str, Path], *, include_git: bool = True,
                 environ: Mapping[str, str] | None = None, cwd: Path | None = None,
                 git_note: str = "not recorded", summary: bool = False, progress=None) -> list[Path]:
    """``ccost report``: check, evaluate, render and write the review of ``spec_path`` (``summary``: the
    short review of ``--summary``)."""
    from ccost.report.atomic import check_targets
    from ccost.report.pdfproc import PdfProcess

    check_targets(paths.values())  # before the work: a bad -o fails at once, and before anything is written
    env = dict(os.environ if environ is None else environ)
    pdf = PdfProcess.start() if "pdf" in paths else None  # imports WeasyPrint while the review is built
    try:
        rev = review(spec_path, include_git=include_git, environ=env, cwd=cwd, git_note=git_note,
                     progress=progress, summary=summary)
        return write_review(rev, paths, summary=summary, pdf=pdf)
    finally:
        if pdf is not None:
            pdf.close()
