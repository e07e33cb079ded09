"""The figures the docs quote, generated from ccost: ``python -m ccost.docfigures`` rewrites every stale one
in README.md and docs/*.md; ``--check`` rewrites nothing and exits 1 naming each (tests/test_docs_figures.py
runs the check in the inner loop).

A page names the specs it quotes once, in a comment, each under a short name; a name may also stand for
one plan of the spec (a name that a ``<!-- file: NAME -->`` ccost block of the same page carries means
that block, checked as if it were the file NAME at the repository's root)::

    <!-- figures: serve = specs/llama3-70b-serve.ccost, s8 = specs/llama3-70b-serve.ccost serve_tp8 -->

and wraps each figure in a marker that says where it comes from and how it is written::

    TTFT = <!--fig s8 serve.ttft_s ms:.2f-->66.98<!--/fig--> ms

The marker holds three things, separated by spaces:

1. the name of the spec (or plan) on the page;
2. what to read (no spaces): a path into the results document (``ccost eval --format json``; keys in
   docs/interface.md), with ``[N]`` for the N-th item of a list and ``[field=value]`` for the item whose
   field has that value (``plans.tp8.checklist[id=12].status``); ``explain.PLAN.NAME``, the value of step
   NAME in ``ccost explain SPEC PLAN`` (a name with other characters in backquotes); ``spec.KIND.NAME.FIELD``
   (``spec.policy.FIELD``), a field of a block as checked (``spec.stack.serving_default.step_overhead``),
   for the inputs a page quotes from the bundled library; ``gate.PLAN``, ``pass`` or ``fail``: whether
   ``ccost check --policy`` passes the plan (no checklist item fails; ``gate.*``: every plan, alike); a
   ``*`` in a path reads every entry there (``plans.*.checklist[id=9].status``), for a sentence about
   all of them: their common value, and the check fails when they differ; or arithmetic on those with numbers,
   ``+ - * /`` and brackets, for a hand check that quotes a product. Under a plan's name, a path is read
   below ``plans.PLAN.`` and ``explain.NAME`` is that plan's (``/`` before a path reads from the top).
   Values carry their unit: a results key's from docs/interface.md, an explain step's from the
   derivation, a field's from the schema;
3. the format, the rest of the comment: ``UNIT:SPEC`` converts to UNIT (``ms``, ``GB``, ``%``, ``USD/h``:
   any unit a spec may write) and writes the number with Python's format SPEC (``.2f``, ``,.0f``, ``,d``);
   ``SPEC`` alone writes the number as it is; ``~`` (or ``~3``) writes it as ``ccost eval`` does, unit
   included, to 4 (3) significant digits, and ``~%`` (``~%4``) as a percentage the same way; words
   ``pass=within|fail=over`` write the word for the value (true/false for a yes-or-no key; ``+``, ``-`` and
   ``0`` for the sign of a number, so ``a-b +=slower|-=faster`` compares two figures), so a sentence that
   judges a figure changes with it. No format: strings as they are, numbers to 4 significant digits.

Only the text between the marker and ``<!--/fig-->`` is rewritten; the unit or words around it are the
page's. Markers are not read inside fenced code blocks (a block of ``ccost`` output is checked by
tests/test_docs_figures.py against the command).
"""

from __future__ import annotations

import ast
import math
import operator
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ccost import api, units

COMMAND = "python -m ccost.docfigures"

DECLARE = re.compile(r"<!--\s*figures:\s*(.*?)\s*-->", re.S)
FIGURE = re.compile(r"<!--fig\s+(?P<spec>\S+)\s+(?P<expr>(?:(?!-->)\S)+)(?:\s+(?P<fmt>(?:(?!-->).)*?))?\s*-->"
                    r"(?P<text>.*?)<!--/fig-->")
FENCE = re.compile(r"^\s*```")
FILE_BLOCK = re.compile(r"^\s*<!-- file: (\S+) -->\s*$")

#: Units of the results document (docs/interface.md) that are not units a spec writes: what they count is
#: a plain number (tokens, layouts, a fraction), so only their time or energy part is a dimension.
_KEY_UNITS = {"fraction": "", "ratio": "", "count": "", "tokens/s": "1/s", "tokens/J": "1/J"}


class FigureError(Exception):
    """A marker that cannot be read or resolved: the message names the page, the line and the marker."""


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    spec: str
    expr: str
    fmt: str
    text: str  # as written on the page
    start: int  # offsets of the text between the markers
    end: int

    @property
    def marker(self) -> str:
        return f"<!--fig {self.spec} {self.expr}{' ' + self.fmt if self.fmt else ''}-->"


@dataclass(frozen=True)
class Stale:
    figure: Figure
    new: str

    def __str__(self) -> str:
        f = self.figure
        return (f"{f.page}:{f.line}: {f.spec} {f.expr} reads `{f.text}`, ccost gives `{self.new}` "
                f"(run `{COMMAND}`)")


# ---------------------------------------------------------------------------------------------------
# Reading a page

def _code_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of the fenced code blocks of a Markdown page (markers there are shown, not figures)."""
    spans, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        if FENCE.match(line):
            if start is None:
                start = pos
            else:
                spans.append((start, pos + len(line)))
                start = None
        pos += len(line)
    if start is not None:
        spans.append((start, pos))
    return spans


def _paragraphs(text: str, code: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of each run of non-blank lines outside code blocks: where an inline code span can be."""
    out = []
    for m in re.finditer(r"(?:^[^\n]*\S[^\n]*(?:\n|$))+", text, re.M):
        if not any(a <= m.start() < b for a, b in code):
            out.append((m.start(), m.end()))
    return out


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


#: An inline code span (CommonMark: a run of backquotes closed by a run of the same length).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.S)


def figures(page: str, text: str) -> list[Figure]:
    """The figure markers of a page, outside code blocks, in order. A marker in an inline code span, or at
    the start of a line (where Markdown reads an HTML block, so the line would leave its paragraph), is an
    error: either would show the marker."""
    code = _code_spans(text)
    inline = [(m.start(), m.end()) for par in _paragraphs(text, code) for m in CODE_SPAN.finditer(text, *par)]
    out = []
    for m in FIGURE.finditer(text):
        if any(a <= m.start() < b for a, b in code):
            continue
        where = f"{page}:{_line_of(text, m.start())}"
        if any(a <= m.start() < b for a, b in inline):
            raise FigureError(f"{where}: a figure marker inside `code` shows as written: take the figure out "
                              "of the backquotes")
        if m.start() == 0 or text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip() == "":
            raise FigureError(f"{where}: a line starts with a figure marker, which Markdown reads as an HTML "
                              "block: move a word of the sentence onto the line before it")
        out.append(Figure(page, _line_of(text, m.start()), m["spec"], m["expr"], (m["fmt"] or "").strip(),
                          m["text"], m.start("text"), m.end("text")))
    return out


def declarations(page: str, text: str) -> dict[str, tuple[str, str | None]]:
    """``{name: (spec, plan or None)}`` from the page's ``<!-- figures: ... -->`` comments."""
    out: dict[str, tuple[str, str | None]] = {}
    for m in DECLARE.finditer(text):
        for part in m.group(1).split(","):
            if not part.strip():
                continue
            name, eq, rhs = part.partition("=")
            words = rhs.split()
            if not eq or not name.strip() or len(words) not in (1, 2):
                raise FigureError(f"{page}:{_line_of(text, m.start())}: `{part.strip()}` in a figures comment: "
                                  "write `NAME = PATH` or `NAME = PATH PLAN`")
            out[name.strip()] = (words[0], words[1] if len(words) == 2 else None)
    return out


def file_blocks(text: str) -> dict[str, str]:
    """The ``ccost`` blocks of a page that carry ``<!-- file: NAME -->``, by NAME (as test_docs_run reads
    them)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = FILE_BLOCK.match(line)
        if not m or i + 1 >= len(lines) or not re.match(r"^\s*```ccost\s*$", lines[i + 1]):
            continue
        indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
        body = []
        for b in lines[i + 2:]:
            if re.match(r"^\s*```\s*$", b):
                break
            body.append(b[indent:] if b[:indent].strip() == "" else b)
        out[m.group(1)] = "\n".join(body) + "\n"
    return out


# ---------------------------------------------------------------------------------------------------
# Values: (number or string, dimension)

@dataclass
class Quoted:
    """One spec a page quotes: checked, evaluated and explained once however many figures read it."""

    spec: api.LoadedSpec
    _document: dict | None = None
    _explained: dict[str, api.Explanation] = field(default_factory=dict)

    def document(self) -> dict:
        if self._document is None:
            self._document = api.evaluate(self.spec, jobs=1).document
        return self._document

    def explanation(self, plan: str) -> api.Explanation:
        if plan not in self._explained:
            self._explained[plan] = api.explain(self.spec, plan)
        return self._explained[plan]


@dataclass
class Sources:
    """The specs one run reads: a file once for every page, a page's own block for that page."""

    root: Path
    _quoted: dict[tuple[str, str], Quoted] = field(default_factory=dict)

    def get(self, page: str, target: str, blocks: dict[str, str]) -> Quoted:
        key = (page if target in blocks else "", target)
        if key not in self._quoted:
            path = self.root / target
            try:
                spec = api.load(path, text=blocks[target]) if target in blocks else api.load(path)
            except api.CcostError as exc:
                raise FigureError(f"{page}: spec `{target}` does not check:\n{api.diagnostics_text(exc)}") \
                    from None
            self._quoted[key] = Quoted(spec)
        return self._quoted[key]


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<path>[A-Za-z_][\w′]*"
                    r"(?:\.(?:`[^`]+`|[\w′]+|\*)|\[[^\]]*\])*)|(?P<op>[-+*/()]))")

_OPS: dict[type, Callable[[Any, Any], Any]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                               ast.Mult: operator.mul, ast.Div: operator.truediv}


def _dim_of_key(path: str) -> tuple[float, units.Dim] | None:
    """(factor to SI, dimension) of a results key's unit (docs/interface.md), None for text. Of the keys
    whose pattern fits the path, the one with most literal segments (``points[].step_time_s`` over
    ``points[].<field>``)."""
    from ccost import results

    pattern = re.sub(r"\[[^\]]*\]", "[]", re.sub(r"`[^`]*`", "x", path)).split(".")
    best, score = None, -1
    for key in results.KEYS:
        segs = key.path.split(".")
        if len(segs) != len(pattern):
            continue
        literal = 0
        for s, p in zip(segs, pattern):
            if s == p:
                literal += 1
            elif not (s.startswith("<") and s.split("[")[0].endswith(">") and s.endswith("[]") == p.endswith("[]")):
                break
        else:
            if literal > score:
                best, score = key, literal
    if best is None:
        return None
    unit = _KEY_UNITS.get(best.unit, best.unit)
    try:
        return units.parse_unit(unit) if unit else (1.0, units.DIMENSIONLESS)
    except units.UnitError:
        return None


def _walk(doc: Any, path: str, where: str) -> Any:
    """The value at ``path`` (``a.b[2].c``, ``a.b[id=12].c``) of the results document; a ``*`` segment
    reads every entry there and gives their common value (a figure that holds for all of them)."""
    segs = [g.strip("`") for g in re.findall(r"`[^`]+`|[^.\[\]`]+|\[[^\]]*\]", path)]
    for i, seg in enumerate(segs):
        if seg in ("*", "[*]"):
            items = list(doc.values()) if isinstance(doc, dict) else doc if isinstance(doc, list) else None
            if not items:
                raise FigureError(f"{where}: `{path}`: nothing under `{'.'.join(segs[:i])}` to read with *")
            rest = ".".join(segs[i + 1:]).replace(".[", "[")
            values = [_walk(x, rest, where) if rest else x for x in items]
            if any(v != values[0] for v in values):
                raise FigureError(f"{where}: `{path}` differs between entries ({', '.join(map(str, values))}): "
                                  "the sentence that says they are alike no longer holds; rewrite it")
            return values[0]
        if seg.startswith("["):
            inner = seg[1:-1]
            if not isinstance(doc, list):
                raise FigureError(f"{where}: `{path}`: {seg} on something that is not a list")
            if "=" in inner:
                f, _, want = inner.partition("=")
                hits = [x for x in doc if isinstance(x, dict) and _same(x.get(f), want)]
                if len(hits) != 1:
                    raise FigureError(f"{where}: `{path}`: {len(hits)} items have {f} = {want}")
                doc = hits[0]
            else:
                try:
                    doc = doc[int(inner)]
                except (ValueError, IndexError):
                    raise FigureError(f"{where}: `{path}`: no item {seg}") from None
        else:
            if not isinstance(doc, dict) or seg not in doc:
                have = ", ".join(list(doc)[:12]) if isinstance(doc, dict) else type(doc).__name__
                raise FigureError(f"{where}: `{path}`: no `{seg}` here (keys: {have})")
            doc = doc[seg]
    return doc


def _same(value: Any, text: str) -> bool:
    if isinstance(value, bool):
        return str(value).lower() == text.lower()
    if isinstance(value, (int, float)):
        try:
            return float(value) == float(text)
        except ValueError:
            return False
    return str(value) == text


#: The first segments of an absolute path (a path under a plan's name that starts otherwise is read below
#: ``plans.PLAN.``).
_TOP = ("plans", "sweeps", "compares", "searches", "explain", "spec", "gate", "ccost", "ccost_version", "schema_version")


def _resolve(path: str, quoted: Quoted, plan: str | None, where: str) -> tuple[Any, units.Dim | None]:
    """(value in SI units, its dimension; None for a word or a yes-or-no) of one path."""
    head = path.split(".", 1)[0].split("[", 1)[0]
    if plan is not None and head not in _TOP:
        path = f"plans.{plan}.{path}"
    if path.startswith("explain."):
        rest = path[len("explain."):]
        if plan is None or (not rest.startswith("`") and "." in rest):
            step_plan, _, name = rest.partition(".")
        else:
            step_plan, name = plan, rest
        if not step_plan or not name:
            raise FigureError(f"{where}: `{path}`: write explain.PLAN.NAME (explain.NAME under a plan's name)")
        try:
            step = quoted.explanation(step_plan).step(name.strip("`"))
        except KeyError as exc:
            raise FigureError(f"{where}: `{path}`: {exc.args[0]}") from None
        except api.CcostError as exc:
            raise FigureError(f"{where}: `{path}`: {exc}") from None
        return step.value, units.parse_unit(step.unit)[1] if step.unit else units.DIMENSIONLESS
    if path.startswith("spec."):
        return _field(path, quoted.spec, where)
    if path.startswith("gate."):  # ccost.gate: a plan fails `check --policy` when a checklist item fails
        plans = quoted.document().get("plans", {})
        name = path[len("gate."):]
        chosen = list(plans) if name == "*" else [name]
        if any(n not in plans for n in chosen):
            raise FigureError(f"{where}: `{path}`: no plan `{name}` (plans: {', '.join(plans)})")
        verdicts = ["fail" if any(i.get("status") == "fail" for i in plans[n].get("checklist", [])) else "pass"
                    for n in chosen]
        if any(v != verdicts[0] for v in verdicts):
            raise FigureError(f"{where}: `{path}`: plans differ ({', '.join(f'{n} {v}' for n, v in zip(chosen, verdicts))}):"
                              " the sentence that says they are alike no longer holds; rewrite it")
        return verdicts[0], None
    value = _walk(quoted.document(), path, where)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value, None
    if not isinstance(value, (int, float)):
        raise FigureError(f"{where}: `{path}` is not a number or a word but a {type(value).__name__}")
    unit = _dim_of_key(path)
    if unit is None:
        return value, units.DIMENSIONLESS
    factor, dim = unit
    return (value * factor if factor != 1.0 else value), dim


def _field(path: str, spec: api.LoadedSpec, where: str) -> tuple[Any, units.Dim | None]:
    """``spec.KIND.NAME.FIELD`` (``spec.policy.FIELD``): a field of a checked block, in SI units."""
    from ccost.schema import SCHEMA

    parts = path.split(".")
    kind = SCHEMA.get(parts[1]) if len(parts) > 2 else None
    if kind is None:
        raise FigureError(f"{where}: `{path}`: write spec.KIND.NAME.FIELD, KIND one of {', '.join(SCHEMA)}")
    collection = getattr(spec.checked, kind.spec_attr)
    if kind.named:
        if len(parts) != 4 or parts[2] not in collection:
            raise FigureError(f"{where}: `{path}`: no {kind.name} `{parts[2] if len(parts) > 2 else ''}`")
        entity, name = collection[parts[2]], parts[3]
    else:
        if len(parts) != 3:
            raise FigureError(f"{where}: `{path}`: write spec.{kind.name}.FIELD")
        entity, name = collection, parts[2]
    f = kind.field(name)
    if f is None:
        raise FigureError(f"{where}: `{path}`: {kind.name} has no field `{name}`")
    value = getattr(entity, name)
    t = f.type
    if t.kind == "quantity":
        return value, t.dim
    if t.kind in ("int", "count", "fraction"):
        return value, units.DIMENSIONLESS
    if t.kind == "ref":
        return getattr(value, "name", value), None
    if t.kind in ("string", "enum", "bool"):
        return value, None
    raise FigureError(f"{where}: `{path}` is a {t.kind}, not a figure")


def value_of(expr: str, quoted: Quoted, plan: str | None, where: str) -> tuple[Any, units.Dim | None]:
    """The value of a marker's expression: one path, or arithmetic on paths and numbers."""
    pos, parts, values = 0, [], {}
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise FigureError(f"{where}: `{expr}`: cannot read `{expr[pos:]}`")
        if m["path"]:
            name = f"_v{len(values)}"
            values[name] = _resolve(m["path"], quoted, plan, where)
            parts.append(name)
        else:
            parts.append(m["num"] or m["op"])
        pos = m.end()
    if len(values) == 1 and parts == [next(iter(values))]:
        return values[parts[0]]
    try:
        tree = ast.parse(" ".join(parts), mode="eval")
    except SyntaxError:
        raise FigureError(f"{where}: `{expr}` is not arithmetic") from None

    def ev(node) -> tuple[float, units.Dim]:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value), units.DIMENSIONLESS
        if isinstance(node, ast.Name):
            v, d = values[node.id]
            if d is None:
                raise FigureError(f"{where}: `{expr}`: arithmetic on a word")
            return float(v), d
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v, d = ev(node.operand)
            return -v, d
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            (a, da), (b, db) = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                if da != db:
                    raise FigureError(f"{where}: `{expr}` adds {units.dim_name(da)} and {units.dim_name(db)}")
                return _OPS[type(node.op)](a, b), da
            dim = units.dim_mul(da, db) if isinstance(node.op, ast.Mult) else units.dim_div(da, db)
            return _OPS[type(node.op)](a, b), dim
        raise FigureError(f"{where}: `{expr}`: only numbers, paths, + - * / and brackets")

    return ev(tree)


# ---------------------------------------------------------------------------------------------------
# Writing a value

def render(value: Any, dim: units.Dim | None, fmt: str, where: str) -> str:
    """The figure's text: ``value`` (SI) written as ``fmt`` says (module docstring)."""
    if "=" in fmt:
        words = dict(w.split("=", 1) for w in fmt.split("|"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # a comparison: its sign
            key = "+" if value > 0 else "-" if value < 0 else "0"
        else:
            key = str(value).lower() if isinstance(value, bool) or value is None else str(value)
        if key not in words:
            raise FigureError(f"{where}: the value is `{key}`, and `{fmt}` has no word for it")
        return words[key]
    if isinstance(value, str) or value is None or isinstance(value, bool):
        if fmt:
            raise FigureError(f"{where}: `{value}` is a word: give words (`{value}=...|...`), not `{fmt}`")
        return str(value)
    if not math.isfinite(value):
        raise FigureError(f"{where}: the value is {value}")
    if fmt.startswith("~%"):
        return units.format_percent(value, int(fmt[2:] or 3))
    if fmt.startswith("~"):
        return units.format_quantity(value, dim or units.DIMENSIONLESS, digits=int(fmt[1:] or 4))
    unit, colon, spec = fmt.rpartition(":") if ":" in fmt else ("", "", fmt)
    if unit:
        try:
            factor, target = units.parse_unit(unit)
        except units.UnitError as exc:
            raise FigureError(f"{where}: unit `{unit}`: {exc}") from None
        if dim is not None and target != dim:
            raise FigureError(f"{where}: the value is {units.dim_name(dim)}, not {units.dim_name(target)} "
                              f"(`{unit}`)")
        value = value / factor
    if not spec:
        return f"{value:.4g}"
    if spec.endswith("d"):
        if abs(value - round(value)) > 1e-6 * max(1.0, abs(value)):
            raise FigureError(f"{where}: {value} is not a whole number for `{spec}`")
        value = int(round(value))
    try:
        return format(value, spec)
    except ValueError as exc:
        raise FigureError(f"{where}: format `{spec}`: {exc}") from None


# ---------------------------------------------------------------------------------------------------
# Pages

def pages(root: Path) -> list[Path]:
    """README.md and docs/*.md under ``root``."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


def _spec_key(page: str, target: str, blocks: dict[str, str]) -> str:
    """What a figure reads: a spec file (``specs/x.ccost``), or a page's own block (``docs/cost.md:cost.ccost``)."""
    return f"{page}:{target}" if target in blocks else target


def regenerate(page: Path, root: Path, sources: Sources | None = None,
               only: str | None = None) -> tuple[str, list[Stale], int]:
    """(the page with every figure regenerated, the stale ones, how many figures it has); ``only``: just the
    figures read from that spec (a key of ``quoted_specs``), the others left as they are and not counted."""
    sources = sources or Sources(root)
    name = page.relative_to(root).as_posix() if page.is_relative_to(root) else str(page)
    text = page.read_text(encoding="utf-8")
    specs = declarations(name, text)
    blocks = file_blocks(text)
    figs = figures(name, text)
    stale, out, last, count = [], [], 0, 0
    for f in figs:
        where = f"{name}:{f.line}: {f.marker}"
        if f.spec not in specs:
            raise FigureError(f"{where}: no spec named `{f.spec}` on this page: declare it in a comment "
                              f"`<!-- figures: {f.spec} = specs/FILE.ccost -->`"
                              + (f" (declared: {', '.join(specs)})" if specs else ""))
        target, plan = specs[f.spec]
        if only is not None and _spec_key(name, target, blocks) != only:
            continue
        new = render(*value_of(f.expr, sources.get(name, target, blocks), plan, where), f.fmt, where)
        count += 1
        if new != f.text:
            stale.append(Stale(f, new))
        out += [text[last:f.start], new]
        last = f.end
    out.append(text[last:])
    return "".join(out), stale, count


def quoted_specs(root: Path, paths: list[Path] | None = None) -> list[str]:
    """Every spec the pages quote (``regenerate``'s ``only``), in first-quoted order, without evaluating."""
    keys: dict[str, None] = {}
    for page in paths or pages(root):
        name = page.relative_to(root).as_posix()
        text = page.read_text(encoding="utf-8")
        specs, blocks = declarations(name, text), file_blocks(text)
        for f in figures(name, text):
            if f.spec in specs:
                keys[_spec_key(name, specs[f.spec][0], blocks)] = None
    return list(keys)


def run(root: Path, paths: list[Path] | None = None, write: bool = True,
        only: str | None = None) -> tuple[list[Stale], int]:
    """Regenerate (``write``) or check the figures of ``paths`` (default: README.md and docs/*.md);
    ``only``: those read from one spec."""
    sources = Sources(root)
    stale: list[Stale] = []
    count = 0
    for page in paths or pages(root):
        new, s, n = regenerate(page, root, sources, only)
        stale += s
        count += n
        if write and s:
            page.write_text(new, encoding="utf-8")
    return stale, count


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=COMMAND, description="Rewrite the figures README.md and docs/*.md "
                                     "quote from the tool (run from the repository's root).")
    parser.add_argument("pages", nargs="*", type=Path, help="pages to rewrite (default: README.md docs/*.md)")
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if a figure is stale")
    args = parser.parse_args(argv)
    root = Path.cwd()
    try:
        stale, count = run(root, [p.resolve() for p in args.pages] or None, write=not args.check)
    except FigureError as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    for s in stale:
        print(s if args.check else f"{s.figure.page}:{s.figure.line}: {s.figure.text} -> {s.new}",
              file=sys.stderr if args.check else sys.stdout)
    verb = "stale" if args.check else "rewritten"
    print(f"{count} figures, {len(stale)} {verb}", file=sys.stderr if args.check and stale else sys.stdout)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
