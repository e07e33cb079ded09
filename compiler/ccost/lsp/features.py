"""What the language server answers, as plain functions of (text, path, position): no pygls here, so the
answers are tested directly and the server (``ccost.lsp.server``) only translates them to LSP types.

Positions are 0-based lines and characters, as LSP sends them; ccost spans are 1-based (line, column).
Everything comes from the compiler's own tables: the schema (``ccost.schema``) for fields, kinds, enums,
docs and dimensions, the unit table (``ccost.units``) for units, the checker for diagnostics and values,
``ccost eval``'s evaluation for a plan's numbers and ``ccost fmt`` for formatting. Completion and go to
definition work on text that does not parse yet (a line being typed), so they read the text around the
cursor rather than the syntax tree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ccost import schema as SC
from ccost import units as U
from ccost.diagnostics import CcostError, Diagnostic, Span

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER = re.compile(r"\b(" + "|".join(SC.SCHEMA) + r")\b(?:\s+([A-Za-z_][A-Za-z0-9_]*))?[^{}\n]*$")
_NUMBER_THEN_UNIT = re.compile(r"(?:\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?|\.\d+)\s*"
                               r"([A-Za-zµμ%/][A-Za-z0-9µμ/]*)?$")
MAX_IMPORT_DEPTH = 64


# --------------------------------------------------------------------------------------------------
# Diagnostics


@dataclass(frozen=True)
class Problem:
    """A diagnostic placed in the open document (0-based, end exclusive)."""

    line: int
    character: int
    end_line: int
    end_character: int
    severity: str  # error | warning | note
    code: str
    message: str


def diagnostics(text: str, path: str) -> list[Problem]:
    """``ccost check``'s diagnostics for the document. A problem in an imported file is shown on the first
    line, naming the file (the editor cannot underline a file that is not open)."""
    from ccost.check import check_text

    result = check_text(text, path)
    out = []
    for d in result.diagnostics:
        out.append(_place(d, path))
    return out


def _place(d: Diagnostic, path: str) -> Problem:
    msg = d.message + (f"\nhelp: {d.help}" if d.help else "") + "".join(f"\nnote: {n}" for n in d.notes)
    s = d.span
    if s is None or os.path.normpath(s.file) != os.path.normpath(path):
        where = f"{s}: " if s is not None else ""
        return Problem(0, 0, 0, 1, d.severity.value, d.code, where + msg)
    return Problem(s.line - 1, s.column - 1, s.end_line - 1, max(s.end_column - 1, s.column),
                   d.severity.value, d.code, msg)


# --------------------------------------------------------------------------------------------------
# Names across imports (for completion of references and for go to definition)


@dataclass(frozen=True)
class Name:
    name: str
    kind: str
    title: str | None
    file: str  # a path that opens the file
    span: Span  # the name in its header


def _resolve_import(importer: str, target: str) -> str | None:
    if target.startswith("std/"):
        from ccost.resources import resource_dir

        try:
            return os.path.join(str(resource_dir("std")), target[4:])
        except FileNotFoundError:
            return None
    return os.path.normpath(os.path.join(os.path.dirname(importer), target))


def names(text: str, path: str) -> dict[str, Name]:
    """Every block name the document and its imports (transitively) define. Files that do not parse are
    skipped; the document itself is read leniently, block header by block header, so that names stay
    available while a line is being typed."""
    from ccost.syntax.parse import parse, read_source

    out: dict[str, Name] = {}
    for m in re.finditer(r"(?m)^[ \t]*(" + "|".join(SC.SCHEMA) + r")[ \t]+([A-Za-z_][A-Za-z0-9_]*)"
                         r"(?:[ \t]+\"([^\"\n]*)\")?", text):
        line = text.count("\n", 0, m.start(2)) + 1
        col = m.start(2) - (text.rfind("\n", 0, m.start(2)) + 1) + 1
        if m.group(2) not in SC.keywords():
            out.setdefault(m.group(2), Name(m.group(2), m.group(1), m.group(3), path,
                                            Span(path, line, col, line, col + len(m.group(2)))))
    seen = {os.path.normpath(os.path.abspath(path))}
    todo = [(path, imp) for imp in _import_paths(text)]
    depth = 0
    while todo and depth < 10_000:
        depth += 1
        importer, target = todo.pop(0)
        real = _resolve_import(importer, target)
        if real is None:
            continue
        key = os.path.normpath(os.path.abspath(real))
        if key in seen or len(seen) > MAX_IMPORT_DEPTH:
            continue
        seen.add(key)
        try:
            tree = parse(read_source(real), real)
        except CcostError:  # an unreadable or broken import: the checker reports it, as a diagnostic
            tree = None
        if tree is None:
            continue
        for b in tree.blocks:
            if b.name and b.name_span is not None:
                out.setdefault(b.name, Name(b.name, b.kind, b.title, real, b.name_span))
        todo += [(real, i.path) for i in tree.imports]
    return out


def _import_paths(text: str) -> list[str]:
    return re.findall(r'(?m)^[ \t]*import[ \t]+"([^"\n]*)"', text)


# --------------------------------------------------------------------------------------------------
# Where the cursor is


@dataclass(frozen=True)
class Context:
    kind: str | None  # the enclosing block's kind, None at the top level
    block: str | None  # its name
    field: str | None  # the member whose value the cursor is in
    prefix: str  # the text of the current member (or line) up to the cursor


def _strip_comment(line: str) -> str:
    out, quoted = [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        if ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out)


def context(text: str, line: int, character: int) -> Context:
    lines = text.split("\n")
    before = lines[:line] + [lines[line][:character] if line < len(lines) else ""]
    depth, kind, block = 0, None, None
    stack: list[tuple[str | None, str | None]] = []
    for i, raw in enumerate(before):
        code = _strip_comment(raw)
        quoted = False
        for j, ch in enumerate(code):
            if ch == '"':
                quoted = not quoted
            elif not quoted and ch == "{":
                head = " ".join(_strip_comment(x) for x in before[max(0, i - 3):i]) + " " + code[:j]
                m = _HEADER.search(head.replace("\n", " "))
                stack.append((m.group(1), m.group(2)) if m else (None, None))
            elif not quoted and ch == "}" and stack:
                stack.pop()
    depth = len(stack)
    if depth:
        kind, block = stack[-1]
    cur = _strip_comment(before[-1])
    segment = re.split(r"[;{]", cur)[-1]
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", segment)
    if m and depth:
        return Context(kind, block, m.group(1), m.group(2))
    return Context(kind, block, None, segment.lstrip())


# --------------------------------------------------------------------------------------------------
# Completion


@dataclass(frozen=True)
class Item:
    label: str
    kind: str  # field | unit | value | reference | keyword
    detail: str
    doc: str = ""
    insert: str | None = None


def _field(kind: str | None, name: str) -> SC.Field | None:
    if kind is None or kind not in SC.SCHEMA:
        return None
    k = SC.SCHEMA[kind]
    f = k.field(name)
    if f is None and k.varies:
        f = SC.SCHEMA[k.varies].field(name)
    return f


def field_doc(f: SC.Field) -> str:
    """A field's documentation as Markdown: meaning, type, unit, default, range, required-ness."""
    lines = [f"**`{f.name}`** — {f.doc}", ""]
    t = f.type
    kind = t.describe()
    if t.kind == "quantity":
        kind += f" (SI unit: {U.unit_of_dim(t.dim)}; e.g. `{U.DIM_EXAMPLES.get(t.dim, f.example)}`)"
    lines.append(f"type: {kind}")
    if f.default_text():
        lines.append(f"default: {f.default_text()}")
    rng = f.range_text()
    if rng:
        lines.append(f"range: {rng}")
    if f.required:
        lines.append("required")
    elif f.required_doc:
        lines.append(f.required_doc)
    lines.append(f"example: `{f.name} = {f.example}`")
    return "  \n".join(lines)


def units_for(dim: U.Dim) -> list[str]:
    out = []
    for u in U.KNOWN_UNITS:
        try:
            _, d = U.parse_unit(u)
        except U.UnitError:
            continue
        if d == dim:
            out.append(u)
    return out


def complete(text: str, path: str, line: int, character: int) -> list[Item]:
    ctx = context(text, line, character)
    if ctx.kind is None and ctx.field is None:
        if _WORD.fullmatch(ctx.prefix) or not ctx.prefix:
            items = [Item(k, "keyword", f"block kind: {SC.SCHEMA[k].doc.split('. ')[0]}",
                          insert=None) for k in SC.SCHEMA]
            items.append(Item("import", "keyword", 'import "PATH": bring in the blocks of another file'))
            return [i for i in items if i.label.startswith(ctx.prefix)]
        return []
    if ctx.field is None:  # a field name is being typed
        if ctx.prefix and not _WORD.fullmatch(ctx.prefix):
            return []
        k = SC.SCHEMA.get(ctx.kind or "")
        if k is None:
            return []
        fields = list(k.fields) + (list(SC.SCHEMA[k.varies].fields) if k.varies else [])
        written = _written_fields(text, line)
        return [Item(f.name, "field", f.type.describe(), field_doc(f), insert=f"{f.name} = ")
                for f in fields if f.name.startswith(ctx.prefix) and f.name not in written]
    f = _field(ctx.kind, ctx.field)
    if f is None:
        return []
    value = ctx.prefix
    t = f.type.item if f.type.kind == "list" and f.type.item is not None else f.type
    num = _NUMBER_THEN_UNIT.search(value)
    if t.kind == "quantity" and num and value[: num.start()].rstrip()[-1:] not in (".",) and (
            num.group(1) is not None or value.endswith(" ")):
        typed = num.group(1) or ""
        return [Item(u, "unit", f"{U.dim_name(t.dim)}: 1 {u} = {U.parse_unit(u)[0]:g} "
                     f"{U.unit_of_dim(t.dim)}") for u in units_for(t.dim) if u.startswith(typed)]
    word = (re.search(r"[A-Za-z_][A-Za-z0-9_]*$", value) or re.match("", "")).group(0)
    if t.kind == "enum":
        return [Item(v, "value", f"{f.name}: {t.describe()}") for v in t.values if v.startswith(word)]
    if t.kind == "bool":
        return [Item(v, "value", "true or false") for v in ("true", "false") if v.startswith(word)]
    if t.kind == "ref":
        return [Item(n.name, "reference", f"{n.kind} {n.title or ''}".strip(), f"defined in {n.file}")
                for n in names(text, path).values() if n.kind == t.ref and n.name.startswith(word)]
    if t.kind in ("quantity", "int", "count", "fraction") and (word or value.endswith(".")):
        # NAME.FIELD references: block names, then the fields of the named block
        dotted = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)?$", value)
        table = names(text, path)
        if dotted and dotted.group(1) in table:
            k = SC.SCHEMA.get(table[dotted.group(1)].kind)
            typed = dotted.group(2) or ""
            return [Item(g.name, "field", g.type.describe(), field_doc(g))
                    for g in (k.fields if k else ()) if g.type.numeric and g.name.startswith(typed)]
        return [Item(n.name, "reference", f"{n.kind} {n.title or ''}".strip())
                for n in table.values() if n.name.startswith(word)]
    return []


def _written_fields(text: str, line: int) -> set[str]:
    """Fields already written in the block around ``line`` (so completion does not offer them again)."""
    lines = text.split("\n")
    start = line
    while start > 0 and "{" not in _strip_comment(lines[start]):
        start -= 1
    end = line
    while end + 1 < len(lines) and "}" not in _strip_comment(lines[end]):
        end += 1
    body = "\n".join(_strip_comment(x) for x in lines[start:end + 1])
    return {m.group(1) for m in re.finditer(r"(?:^|[;{\n])\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", body)}


# --------------------------------------------------------------------------------------------------
# Hover


def _word_at(text: str, line: int, character: int) -> tuple[str, int, int] | None:
    lines = text.split("\n")
    if line >= len(lines):
        return None
    s = lines[line]
    for m in re.finditer(r"[A-Za-zµμ_%][A-Za-z0-9_µμ/]*|%", s):
        if m.start() <= character <= m.end():
            return m.group(0), m.start(), m.end()
    return None


def hover(text: str, path: str, line: int, character: int) -> str | None:
    """Markdown for the thing under the cursor: a field's doc and unit with its value resolved in SI; a
    unit; a referenced block; a plan's key numbers from ``ccost eval``'s evaluation."""
    w = _word_at(text, line, character)
    if w is None:
        return None
    word, start, end = w
    code_line = text.split("\n")[line]
    ctx = context(text, line, start)
    after = code_line[end:].lstrip()
    # a field name: `alpha = ...`
    if ctx.kind and after.startswith("=") and ctx.field is None:
        f = _field(ctx.kind, word)
        if f is None:
            return None
        out = field_doc(f)
        value = _resolved(text, path, ctx.kind, ctx.block, word)
        if value:
            out += "\n\n" + value
        return out
    # a block name in its header: a plan's numbers, any block's title
    header = re.match(r"\s*(" + "|".join(SC.SCHEMA) + r")\s+" + re.escape(word) + r"\b", code_line)
    if header and code_line.find(word) == start:
        if header.group(1) == "plan":
            return plan_numbers(text, path, word)
        return f"**{header.group(1)} `{word}`** — {SC.SCHEMA[header.group(1)].doc}"
    # a unit after a number
    if re.search(r"[\d.]\s*$", code_line[:start]) and ctx.field:
        try:
            factor, dim = U.parse_unit(word)
        except U.UnitError as exc:
            return f"`{word}` is not a unit ccost knows" + (f": did you mean `{exc.suggestion}`?"
                                                             if exc.suggestion else "")
        name = "a fraction" if dim == U.DIMENSIONLESS else U.dim_name(dim)
        base = U.unit_of_dim(dim) or "1"
        return f"**`{word}`** — {name}: 1 {word} = {factor:g} {base}"
    # a reference to a block
    table = names(text, path)
    if word in table:
        n = table[word]
        return (f"**{n.kind} `{n.name}`**" + (f" — {n.title}" if n.title else "")
                + f"  \ndefined at {os.path.relpath(n.file) if not n.file.startswith('<') else n.file}:"
                  f"{n.span.line}")
    f = _field(ctx.kind, ctx.field) if ctx.field else None
    if f is not None and f.type.kind == "enum" and word in f.type.values:
        return f"`{word}`: a value of `{f.name}` ({f.type.describe()})"
    return None


def _checked(text: str, path: str):
    from ccost.check import check_text

    return check_text(text, path)


def _resolved(text: str, path: str, kind: str, block: str | None, field: str) -> str | None:
    """The checked value of ``block.field`` in SI, when the document checks."""
    if block is None:
        return None
    result = _checked(text, path)
    if result.spec is None:
        return None
    attr = SC.SCHEMA[kind].spec_attr
    table = getattr(result.spec, attr, None)
    ent = table if kind == "policy" else (table or {}).get(block)
    if ent is None or not hasattr(ent, field):
        return None
    v = getattr(ent, field)
    f = _field(kind, field)
    if v is None or f is None:
        return None
    if f.type.kind == "quantity":
        return (f"value: **{U.format_quantity(v, f.type.dim)}** = {v:.6g} {U.unit_of_dim(f.type.dim)} (SI)")
    if f.type.kind == "fraction":
        return f"value: **{U.format_percent(v)}** = {v:.6g}"
    if hasattr(v, "name"):
        return f"value: `{v.name}`" + (f" — {v.title}" if getattr(v, "title", None) else "")
    if isinstance(v, bool):
        return f"value: `{str(v).lower()}`"
    if isinstance(v, float) and v.is_integer():
        return f"value: {int(v):,}"
    return f"value: {v}"


def plan_numbers(text: str, path: str, plan: str) -> str:
    """A plan's key numbers, from the same evaluation as ``ccost eval --plan``."""
    result = _checked(text, path)
    if result.spec is None:
        return f"**plan `{plan}`** — fix the errors to see its numbers"
    from ccost import evaluate
    from ccost.evaluate import plan_only
    from ccost.diagnostics import CcostError

    try:
        doc = evaluate.results_document(evaluate.evaluate(plan_only(result.spec, plan)))
    except CcostError as exc:
        return f"**plan `{plan}`** cannot be evaluated: " + "; ".join(d.message for d in exc.diagnostics)
    p = doc["plans"][plan]
    t, pct = U.TIME, U.format_percent
    lines = [f"**plan `{plan}`**" + (f" — {p['title']}" if p.get("title") else ""), "",
             "| | |", "|---|---|",
             f"| GPUs | {p['gpus']} |",
             f"| step time | {U.format_quantity(p['step_time_s'], t)} ({p.get('regime', '')}) |",
             (f"| compute / communication | {U.format_quantity(p['compute_time_s'], t)} / "
              f"{U.format_quantity(p['comm_time_s'], t)} |"),
             (f"| throughput | {p['throughput_tokens_s']:,.0f} tokens/s "
              f"({p['throughput_per_gpu']:,.0f} per GPU) |"),
             f"| overhead T_comm/T_compute | {pct(p['overhead'])} |",
             f"| efficiency | {pct(p['efficiency'])} |",
             (f"| memory per GPU | {U.format_quantity(p['memory_bytes_per_gpu'], U.INFORMATION)}"
              f"{'' if p['fits_memory'] else ' — does not fit'} |"),
             "", f"`ccost explain {os.path.basename(path)} {plan}` derives every number."]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Go to definition


def definition(text: str, path: str, line: int, character: int) -> tuple[str, Span] | None:
    """(file, span) of the block named under the cursor, in this file or any file it imports; an import's
    path string goes to that file."""
    code_line = text.split("\n")[line] if line < len(text.split("\n")) else ""
    imp = re.match(r'\s*import\s+"([^"]*)"', code_line)
    if imp and imp.start(1) <= character <= imp.end(1):
        real = _resolve_import(path, imp.group(1))
        if real and os.path.isfile(real):
            return real, Span(real, 1, 1, 1, 1)
        return None
    w = _word_at(text, line, character)
    if w is None:
        return None
    word, start, _ = w
    if code_line[start - 1:start] == ".":  # NAME.FIELD: the field part goes to the block too
        m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\.$", code_line[:start])
        word = m.group(1) if m else word
    n = names(text, path).get(word)
    return (n.file, n.span) if n else None


# --------------------------------------------------------------------------------------------------
# Formatting


def formatted(text: str, path: str) -> str | None:
    """``ccost fmt``'s canonical form (verified the same way), or None when the text has errors."""
    from ccost.fmt import format_checked
    from ccost.diagnostics import CcostError

    try:
        return format_checked(text, path)
    except CcostError:
        return None

