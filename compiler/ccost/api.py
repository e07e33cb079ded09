"""ccost from Python: load a spec, check it, evaluate it, run its searches, explain a plan, write its review.

    >>> from ccost import api
    >>> spec = api.load("specs/a1-tp-decode.ccost")                    # doctest: +SKIP
    >>> results = api.evaluate(spec)                                   # doctest: +SKIP
    >>> results.document["plans"]["tp8"]["step_time_s"]                # doctest: +SKIP
    >>> results.frame("plans")        # a pandas DataFrame, one row per plan  # doctest: +SKIP

Every function here calls the code the ``ccost`` command calls (``check.check_file``/``check_text``,
``evaluate.evaluate`` and ``results_document``, ``search.search_documents``, ``evaluate.explain_sections``,
``report.write_report``, ``output.normalize``): nothing is computed twice, so a number read here is the
number ``ccost eval --format json`` prints. Nothing here prints, reads standard input or exits; a spec that
cannot be checked or evaluated raises ``CcostError``, whose ``diagnostics`` are the ones ``ccost check``
shows, as data (``Diagnostic``: code, severity, message, span, help, notes).

What is stable (docs/python.md): the names in ``__all__``, their parameters, and the fields and methods of
the dataclasses below. The results document's keys are those of docs/interface.md, versioned by its
``schema_version``; the derivation's step names are those ``ccost explain`` prints, which change with the
cost model. ``LoadedSpec.checked`` (the checker's entities) is internal and may change in any release.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ccost.diagnostics import CcostError, Diagnostic, Severity, Span, error

if TYPE_CHECKING:
    from ccost.spec import Spec

__all__ = ["CcostError", "Diagnostic", "Severity", "Span", "LoadedSpec", "CheckReport", "Results", "Step",
           "Explanation", "load", "check", "evaluate", "search", "explain", "report", "diagnostics_text"]

# ---------------------------------------------------------------------------------------------------
# load and check

@dataclass(frozen=True)
class LoadedSpec:
    """A spec that checked clean: what ``evaluate``, ``search``, ``explain`` and ``report`` take.

    ``path`` is the file it was read from (or the name given to text), ``warnings`` what ``ccost check``
    would print as warnings, ``sources`` the text of every file read (the spec and its imports). ``plans``,
    ``sweeps``, ``compares`` and ``searches`` are the names it defines or imports, in written order.
    ``from_text``: it was given as text, so it has no file a review could be written from.
    """

    path: str
    checked: Spec = field(repr=False)  # the checker's entities: internal, may change in any release
    warnings: tuple[Diagnostic, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)
    from_text: bool = False

    @property
    def plans(self) -> list[str]:
        return list(self.checked.plans)

    @property
    def sweeps(self) -> list[str]:
        return list(self.checked.sweeps)

    @property
    def compares(self) -> list[str]:
        return list(self.checked.compares)

    @property
    def searches(self) -> list[str]:
        return list(self.checked.searches)


@dataclass(frozen=True)
class CheckReport:
    """What ``ccost check`` finds: every diagnostic, errors and warnings, sorted by place.

    ``ok`` is true when there is no error (warnings allowed), as ``ccost check``'s exit status 0; ``text``
    is the diagnostics as ``ccost check`` prints them (no colour); ``spec`` the loaded spec when ok.
    """

    path: str
    diagnostics: tuple[Diagnostic, ...]
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)
    spec: LoadedSpec | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.spec is not None

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]

    @property
    def text(self) -> str:
        return diagnostics_text(self.diagnostics, self.sources)


def diagnostics_text(diagnostics: Sequence[Diagnostic] | CcostError,
                     sources: Mapping[str, str] | None = None) -> str:
    """Diagnostics (or a ``CcostError``'s) rendered as ``ccost check`` prints them, without colour:
    ``file:line:col: error[CODE]: message``, the source line with a caret, ``= help: ...``."""
    from ccost.diagnostics import render_all

    if isinstance(diagnostics, CcostError):
        sources = sources if sources is not None else getattr(diagnostics, "sources", None)
        diagnostics = diagnostics.diagnostics
    return render_all(list(diagnostics), dict(sources) if sources is not None else None, colour=False)


def _checked(path: str | os.PathLike[str] | None, text: str | None):
    """``check_file`` or ``check_text``, as ``ccost check`` calls them: (name, CheckResult)."""
    from ccost.check import check_file, check_text

    if text is not None:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str (the spec's source); got {type(text).__name__}")
        name = os.fspath(path) if path is not None else "<text>"
        return name, check_text(text, name)
    if path is None:
        raise TypeError("give a spec: load(PATH), or load(text=SOURCE) for spec text")
    if isinstance(path, LoadedSpec):
        raise TypeError("this spec is already loaded")
    name = os.fspath(path)
    return name, check_file(name)


def check(path: str | os.PathLike[str] | None = None, *, text: str | None = None) -> CheckReport:
    """Check a spec file (``check("specs/x.ccost")``) or spec text (``check(text=SOURCE)``; with a path
    too, the text is checked as if it were that file, so its imports resolve beside it). Never raises
    for a problem of the spec: every diagnostic is in the report."""
    name, result = _checked(path, text)
    spec = None
    if result.spec is not None and not result.errors:
        spec = LoadedSpec(name, result.spec, tuple(result.warnings), dict(result.sources), text is not None)
    return CheckReport(name, tuple(result.diagnostics), dict(result.sources), spec)


def load(path: str | os.PathLike[str] | None = None, *, text: str | None = None) -> LoadedSpec:
    """Check a spec file or spec text (as ``check``) and return it ready to evaluate; a spec with errors
    raises ``CcostError`` carrying every diagnostic (``.diagnostics``) and the sources read
    (``.sources``, for ``diagnostics_text``). Warnings are kept on the result, not printed."""
    report_ = check(path, text=text)
    if report_.spec is None:
        exc = CcostError(report_.diagnostics)
        exc.sources = dict(report_.sources)  # type: ignore[attr-defined]
        raise exc
    return report_.spec


def _spec(spec: LoadedSpec | str | os.PathLike[str]) -> LoadedSpec:
    if isinstance(spec, LoadedSpec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load(spec)
    raise TypeError(f"expected a spec from ccost.api.load() or a path; got {type(spec).__name__}")


def _with_sources(exc: CcostError, spec: LoadedSpec) -> CcostError:
    """An evaluation error, with the spec's sources for its caret lines (as ``ccost eval`` shows it)."""
    if getattr(exc, "sources", None) is None:
        exc.sources = dict(spec.sources)  # type: ignore[attr-defined]
    return exc


# ---------------------------------------------------------------------------------------------------
# evaluate and search

@dataclass(frozen=True)
class Results:
    """The results document of a spec (docs/interface.md): exactly what ``ccost eval --format json``
    prints, as Python dicts, lists, numbers, strings, booleans and None.

    Its tables — ``"plans"`` (one row per plan), ``"sweeps.NAME"`` (the sweep's points),
    ``"searches.NAME.top"`` and ``"searches.NAME.pareto"`` — come as lists of flat dicts (``rows``) or as
    pandas DataFrames (``frame``, when pandas is installed). A nested key is one column named by its path
    below the row (``cost.cost_per_mtok_usd``, ``serve.ttft_s``); lists (collectives, the checklist) stay
    in ``document``.
    """

    document: dict[str, Any]
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def tables(self) -> list[str]:
        """The names ``rows`` and ``frame`` take, in the document's order."""
        names = ["plans"] if self.document.get("plans") else []
        names += [f"sweeps.{n}" for n in self.document.get("sweeps", {})]
        for n, s in self.document.get("searches", {}).items():
            names += [f"searches.{n}.{part}" for part in ("top", "pareto") if part in s]
        return names

    def rows(self, table: str = "plans") -> list[dict[str, Any]]:
        """One flat dict per row of ``table`` (see ``tables``); the plans table's first column is ``plan``."""
        if table == "plans":
            return [{"plan": name, **_flat(p)} for name, p in self.document.get("plans", {}).items()]
        kind, _, rest = table.partition(".")
        if kind == "sweeps" and rest in self.document.get("sweeps", {}):
            return [_flat(p) for p in self.document["sweeps"][rest]["points"]]
        if kind == "searches":
            name, _, part = rest.rpartition(".")
            section = self.document.get("searches", {}).get(name)
            if section is not None and part in ("top", "pareto") and part in section:
                return [_flat(p) for p in section[part]]
        known = ", ".join(f"`{t}`" for t in self.tables) or "none: the document has no plans, sweeps or searches"
        raise KeyError(f"no table `{table}` in the results of {self.document.get('spec')}; tables: {known}")

    def frame(self, table: str = "plans"):
        """``rows(table)`` as a pandas DataFrame (the plans table indexed by plan name). Needs pandas:
        without it, ``CcostError`` E512 says how to install it."""
        return _frame(self.rows(table), index="plan" if table == "plans" else None)

    def to_json(self) -> str:
        """The document as ``ccost eval --format json`` prints it."""
        from ccost.output import to_json

        return to_json(self.document)

    def to_yaml(self) -> str:
        """The document as ``ccost eval --format yaml`` prints it (and ``ccost report`` writes it)."""
        from ccost.output import to_yaml

        return to_yaml(self.document)


def _frame(rows: list[dict[str, Any]], index: str | None = None):
    """A DataFrame of ``rows`` whose columns are every row's keys in first-seen order (a sweep point that
    failed has `error`, the others do not)."""
    try:
        import pandas as pd
    except ImportError:
        raise CcostError(error("E512", "pandas is not installed, so results cannot be given as a DataFrame",
                               help="`pip install pandas` in this environment, or read the same table as a "
                                    "list of dicts with `.rows(...)`")) from None
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    df = pd.DataFrame(rows, columns=list(columns))
    return df.set_index(index) if index is not None else df


def _flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A record's scalars, nested objects flattened to dotted columns; lists left out (they are tables of
    their own in the document)."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        elif not isinstance(v, list):
            out[f"{prefix}{k}"] = v
    return out


def _execution(jobs: int | None, scheduler: str | None):
    """Where searches run, as ``ccost eval --jobs/--scheduler`` sets it (commands/runopts.py)."""
    from ccost import search as S

    return S.execution(jobs=jobs if jobs is not None else S.default_jobs(), scheduler=scheduler,
                       auto=jobs is None)


def _document(results) -> dict[str, Any]:
    from ccost import evaluate as E
    from ccost.output import normalize

    # the numbers ccost eval --format json prints (seven significant digits, integral keys as integers)
    return normalize(E.results_document(results))


def evaluate(spec: LoadedSpec | str | os.PathLike[str], *, plan: str | None = None, jobs: int | None = None,
             scheduler: str | None = None) -> Results:
    """Evaluate every plan, sweep, comparison and search of ``spec`` (a ``LoadedSpec`` or a path), as
    ``ccost eval`` does; ``plan``: that plan only (``ccost eval --plan``). ``jobs`` and ``scheduler`` say
    where large searches run (``--jobs``, ``--scheduler``; default: the cores available). Raises
    ``CcostError`` when a plan cannot be evaluated (every such plan's diagnostics at once)."""
    from ccost import evaluate as E

    s = _spec(spec)
    try:
        checked = E.plan_only(s.checked, plan) if plan else s.checked
        with _execution(jobs, scheduler):
            return Results(_document(E.evaluate(checked)), s.warnings)
    except CcostError as exc:
        raise _with_sources(exc, s) from None


def search(spec: LoadedSpec | str | os.PathLike[str], name: str | None = None, *, jobs: int | None = None,
           scheduler: str | None = None) -> Results:
    """Run the spec's ``search`` blocks (``name``: that one only) and nothing else: the results document
    with its ``searches`` section and no plans. Same pricing as ``ccost eval`` (``search.search_documents``)."""
    from dataclasses import replace

    from ccost import evaluate as E
    from ccost import search as S

    s = _spec(spec)
    searches = dict(s.checked.searches)
    if name is not None:
        if name not in searches:
            from difflib import get_close_matches

            close = get_close_matches(name, list(searches), n=1)
            raise CcostError(error("E101", f"no search named `{name}` in {s.path}", None,
                                   f"did you mean `{close[0]}`?" if close else
                                   ("searches: " + ", ".join(searches)) if searches else
                                   "the spec has no search blocks"))
        searches = {name: searches[name]}
    checked = replace(s.checked, searches=searches)
    try:
        with _execution(jobs, scheduler):
            found = S.search_documents(checked)
    except CcostError as exc:
        raise _with_sources(exc, s) from None
    return Results(_document(E.Results(checked, {}, {}, {}, found)), s.warnings)


# ---------------------------------------------------------------------------------------------------
# explain

@dataclass(frozen=True)
class Step:
    """One line of a derivation, as ``ccost explain`` prints it: ``name = formula = substituted = result``.

    ``value`` is the number in SI units (seconds, bytes, FLOP, USD, J), ``unit`` its SI unit (``s``,
    ``B/s``; empty for a plain number), ``result`` the value as printed (``4.806 ms``). ``kind`` is
    ``"input"`` for a number taken from the spec (its ``source`` says where) and ``"step"`` for one
    computed from others; ``note`` says which branch a max, min or choice took.
    """

    section: str
    name: str
    formula: str
    substituted: str
    value: float
    unit: str
    result: str
    description: str | None = None
    kind: str = "step"
    note: str | None = None
    source: str | None = None

    @property
    def line(self) -> str:
        """The step as ``ccost explain`` prints it."""
        return self._derivation_step().line()

    def _derivation_step(self):
        from ccost.derive import Step as DStep
        from ccost.units import parse_unit

        dim = parse_unit(self.unit)[1] if self.unit else ()
        return DStep(self.name, self.description, self.formula, self.substituted, self.value, dim, self.result,
                     self.kind, self.note, self.source)


@dataclass(frozen=True)
class Explanation:
    """The derivation of every number of one plan (``ccost explain SPEC PLAN``): its steps in order,
    grouped in sections (inputs, each collective, compute, memory, totals, cost and power; a serve plan
    has its own). The values are the very ones ``evaluate`` reports (same functions)."""

    spec: str
    plan: str
    steps: tuple[Step, ...]

    @property
    def sections(self) -> list[str]:
        return list(dict.fromkeys(s.section for s in self.steps))

    def step(self, name: str) -> Step:
        """The step called ``name`` (``T_comm``, ``C_rate``; ``ccost explain`` prints the names)."""
        found = [s for s in self.steps if s.name == name]
        if len(found) == 1:
            return found[0]
        if found:
            raise KeyError(f"{len(found)} steps of plan `{self.plan}` are called `{name}`; pick one from "
                           f"`steps` by section: {', '.join(s.section for s in found)}")
        from difflib import get_close_matches

        close = get_close_matches(name, [s.name for s in self.steps], n=3)
        raise KeyError(f"no step `{name}` in the derivation of plan `{self.plan}`"
                       + (f"; did you mean {', '.join(f'`{c}`' for c in close)}?" if close else ""))

    def value(self, name: str) -> float:
        """``step(name).value``: the number in SI units."""
        return self.step(name).value

    def rows(self) -> list[dict[str, Any]]:
        from dataclasses import asdict

        return [asdict(s) for s in self.steps]

    def frame(self):
        """The steps as a pandas DataFrame (needs pandas; else ``CcostError`` E512)."""
        return _frame(self.rows())

    @property
    def text(self) -> str:
        """The sections and steps as ``ccost explain`` prints them (without its header and checklist)."""
        out: list[str] = []
        for title in self.sections:
            out += ([""] if out else []) + [f"## {title}"]
            out += [f"  {s.line}" for s in self.steps if s.section == title]
        return "\n".join(out) + "\n"


def explain(spec: LoadedSpec | str | os.PathLike[str], plan: str) -> Explanation:
    """The derivation of plan ``plan`` (``ccost explain SPEC PLAN``). An unknown plan is ``CcostError``
    E101 with a did-you-mean."""
    from ccost import evaluate as E
    from ccost.units import unit_of_dim

    s = _spec(spec)
    try:
        sections = E.explain_sections(s.checked, plan)
    except CcostError as exc:
        raise _with_sources(exc, s) from None
    steps = tuple(Step(title, st.name, st.formula, st.substituted, st.value, unit_of_dim(st.dim), st.result,
                       st.description, st.kind, st.note, st.source)
                  for title, group in sections for st in group)
    return Explanation(s.path, plan, steps)


# ---------------------------------------------------------------------------------------------------
# report

def report(spec: LoadedSpec | str | os.PathLike[str], folder: str | os.PathLike[str], *,
           format: str = "both", summary: bool = False, git: bool = True) -> list[Path]:
    """Write the design review of ``spec`` into ``folder`` (created if needed), as ``ccost report SPEC -o
    FOLDER/`` does: ``<stem>.html`` and ``<stem>.pdf`` (``format`` ``"html"``, ``"pdf"`` or ``"both"``) and
    always ``<stem>.yaml``, the results document; ``summary``: the short review (``<stem>-summary.*``);
    ``git=False`` leaves the git revision out of the provenance stamp. Returns the paths written. The
    review is built from the spec's file as it is now (a spec loaded from text has none: E504). All
    outputs are written together or none is; an unwritable folder is ``CcostError`` E504."""
    from ccost.report import output_paths, write_report
    from ccost.report.provenance import build_date

    if format not in ("html", "pdf", "both"):
        raise ValueError(f"format is 'html', 'pdf' or 'both'; got {format!r}")
    try:
        build_date()  # a malformed SOURCE_DATE_EPOCH is the caller's to fix, before any work is done
    except ValueError as exc:
        raise CcostError(error("E504", str(exc), help="unset it, or set it to whole seconds since 1970")) from None
    if isinstance(spec, LoadedSpec):
        if spec.from_text:
            raise CcostError(error("E504", f"a review needs its spec as a file: `{spec.path}` was given as text",
                                   help="save the spec to a file and load that, or use evaluate() for its "
                                        "numbers"))
        path = spec.path
    else:
        path = os.fspath(spec)
    out = os.fspath(folder)
    try:
        paths = output_paths(path, out if out.endswith(("/", os.sep)) else out + os.sep, format, summary=summary)
        return write_report(path, paths, include_git=git, git_note="not recorded (git=False)", summary=summary)
    except OSError as exc:  # refused targets (check_targets) and what the file system says while writing
        where = exc.filename or "the review"
        raise CcostError(error("E504", f"cannot write {where}: {exc.strerror or exc}",
                               help="nothing was replaced; choose another folder, or fix this one (it must "
                                    "exist or be creatable, and be writable)")) from None
    except _fetch_error() as exc:
        raise CcostError(error("E504", f"the review was not written: {exc}")) from None


def _fetch_error():
    try:
        from ccost.report.fetcher import BlockedFetch
    except ImportError:  # weasyprint missing: nothing to catch
        return ()
    return BlockedFetch
