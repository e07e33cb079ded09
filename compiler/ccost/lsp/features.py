"""What the language server answers, as plain functions of (text, path, position): no pygls here, so the
answers are tested directly and the server (``ccost.lsp.server``) only translates them to LSP types.

Positions are 0-based lines and characters, as LSP sends them; ccost spans are 1-based (line, column).
Everything comes from the compiler's own tables: the schema (``ccost.schema``) for fields, kinds, enums,
docs and dimensions, the unit table (``ccost.units``) for units, the checker for diagnostics and values,
``ccost eval``'s evaluation for a plan's numbers and ``ccost fmt`` for formatting. Completion and go to
definition work on text that does not parse yet (a line being typed), so they read the text around the
cursor rather than the syntax tree, in time linear in it.

Imports are followed by the checker's own loader (``ccost.check.load.imports_of``), so the answers read
exactly the files ``ccost check`` reads and none it refuses. A document larger than a spec file may be
is refused as ``check`` refuses the file (``too_large``). The check of a text and its import list are
computed once and shared between requests and threads (``_memo``).
"""

from __future__ import annotations

import os
import re
import threading
from concurrent.futures import Future
from dataclasses import dataclass

from ccost import schema as SC
from ccost import units as U
from ccost.diagnostics import CcostError, Diagnostic, Span

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER_THEN_UNIT = re.compile(r"(?:\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?|\.\d+)\s*"
                               r"([A-Za-zµμ%/][A-Za-z0-9µμ/]*)?$")


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


# --------------------------------------------------------------------------------------------------
# What is computed once per text (the check, the imports), and the bound on a document


_MEMO: dict[tuple, object] = {}
_MEMO_SIZE = 8  # a few documents, a few versions: the check of the text on screen is reused by hover
_MEMO_LOCK = threading.Lock()  # the server checks on a worker thread while requests run
_PENDING: dict[tuple, Future] = {}  # computations under way, so that a second asker waits for the first


def _memo(key: tuple, compute):
    """``compute()``, kept for ``key`` (which holds the text) until ``forget()``; while one thread computes
    it, another that asks waits for that answer instead of computing it again. Files on disk can change
    without the text changing: the server forgets when the editor saves or opens a file."""
    with _MEMO_LOCK:
        if key in _MEMO:
            return _MEMO[key]
        pending = _PENDING.get(key)
        if pending is None:
            pending = _PENDING[key] = Future()
            owner = True
        else:
            owner = False
    if not owner:
        return pending.result()
    try:
        value = compute()
    except BaseException as exc:
        pending.set_exception(exc)
        raise
    finally:
        with _MEMO_LOCK:
            _PENDING.pop(key, None)
    with _MEMO_LOCK:
        _MEMO[key] = value
        while len(_MEMO) > _MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]
    pending.set_result(value)
    return value


def forget() -> None:
    """Drop every remembered check and import list (a file may have changed on disk)."""
    with _MEMO_LOCK:
        _MEMO.clear()


def _checked(text: str, path: str):
    """``ccost check``'s result for the text as the file ``path`` (remembered, see ``_memo``)."""
    from ccost.check import check_text

    return _memo(("check", path, text), lambda: check_text(text, path))


def too_large(text: str, path: str) -> Problem | None:
    """The refusal of a document over ``ccost check``'s bound on a spec (``MAX_FILE_BYTES``, E002 in its
    words), or None. A refused document is not checked, and hover, completion, go to definition and
    formatting answer nothing in it."""
    from ccost.schema import MAX_FILE_BYTES

    if len(text) * 4 <= MAX_FILE_BYTES:  # at most 4 bytes a character in UTF-8
        return None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_FILE_BYTES:
        return None
    import io

    from ccost.userfiles import read_stream

    try:
        read_stream(io.BytesIO(data), limit=MAX_FILE_BYTES, what="spec", name=os.path.basename(path))
    except CcostError as exc:
        return _place(exc.diagnostics[0], path)
    return None  # not reached: the stream is over the limit


# --------------------------------------------------------------------------------------------------
# Diagnostics


def diagnostics(text: str, path: str) -> list[Problem]:
    """``ccost check``'s diagnostics for the document. A problem in an imported file is shown on the first
    line, naming the file (the editor cannot underline a file that is not open); a document over the
    size bound gets its refusal only."""
    refused = too_large(text, path)
    if refused is not None:
        return [refused]
    return [_place(d, path) for d in _checked(text, path).diagnostics]


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


_OWN_NAME = re.compile(r"(?m)^[ \t]*(" + "|".join(SC.SCHEMA) + r")[ \t]+([A-Za-z_][A-Za-z0-9_]*)"
                       r"(?:[ \t]+\"([^\"\n]*)\")?")
# `import "PATH"` at the start of a line, the string as the grammar's STRING reads it (escapes included)
_IMPORT = re.compile(r'(?m)^[ \t]*import[ \t]+("(?:[^"\\\r\n]|\\[^\r\n])*")')


def imported(text: str, path: str) -> list:
    """The files the document imports, transitively (``ccost.check.context.File``; ``tree`` is None for
    one that does not parse), as ``ccost check`` resolves them: its own loader
    (``ccost.check.load.imports_of``) reads the import lines of the document, so an import it refuses
    (outside the project or std/, E113) is neither read nor followed, and a file it cannot read is left
    out. The document need not parse: only its import lines are read, so names stay available while a
    line is being typed."""
    imports = "\n".join("import " + m.group(1) for m in _IMPORT.finditer(text))
    if not imports:
        return []
    return _memo(("imports", path, imports), lambda: _imported(imports, path))


def _imported(imports: str, path: str) -> list:
    from ccost.check.load import imports_of

    root, files = imports_of(imports, path)
    return [f for f in files.values() if f is not root]  # in load order: a file after its imports


def names(text: str, path: str) -> dict[str, Name]:
    """Every block name the document and its imports (transitively) define. The document itself is read
    leniently, block header by block header, so that names stay available while a line is being typed;
    its own names come first."""
    out: dict[str, Name] = {}
    line, counted = 1, 0  # lines counted up to ``counted``: linear in the document, not per name
    for m in _OWN_NAME.finditer(text):
        line += text.count("\n", counted, m.start(2))
        counted = m.start(2)
        col = m.start(2) - (text.rfind("\n", 0, m.start(2)) + 1) + 1
        if m.group(2) not in SC.keywords():
            out.setdefault(m.group(2), Name(m.group(2), m.group(1), m.group(3), path,
                                            Span(path, line, col, line, col + len(m.group(2)))))
    for f in imported(text, path):
        for b in (f.tree.blocks if f.tree is not None else ()):
            if b.name and b.name_span is not None:
                out.setdefault(b.name, Name(b.name, b.kind, b.title, f.real, b.name_span))
    return out


# --------------------------------------------------------------------------------------------------
# Where the cursor is


@dataclass(frozen=True)
class Context:
    kind: str | None  # the enclosing block's kind, None at the top level
    block: str | None  # its name
    field: str | None  # the member whose value the cursor is in
    prefix: str  # the text of the current member (or line) up to the cursor


# the code of a line: up to a `#` outside a string (a string runs to its closing quote or the line's end)
_CODE = re.compile(r'(?:[^"#\n]+|"[^"\n]*"?)*')
# what matters for nesting in the text before the cursor: strings and comments (skipped whole) and braces
_NESTING = re.compile(r'"[^"\n]*"?|#[^\n]*|[{}]')
_COMMENT = re.compile(r'("[^"\n]*"?)|#[^\n]*')
_KIND = re.compile(r"\b(" + "|".join(SC.SCHEMA) + r")\b(?:\s+([A-Za-z_][A-Za-z0-9_]*))?")
HEADER_LINES = 3  # a block's header may start this many lines above its `{`


def _strip_comment(line: str) -> str:
    return _CODE.match(line).group(0)


def context(text: str, line: int, character: int) -> Context:
    """Where the cursor is: the enclosing block (its kind and name, from the header before its `{`), the
    member whose value is being typed, and the text typed so far. Linear in the text before the cursor:
    one pass over its strings, comments and braces; the header is read between the brace before the
    block's `{` and that `{` (at most ``HEADER_LINES`` lines above it), outside strings and comments."""
    lines = text.split("\n")
    if line < len(lines):
        offset = sum(len(x) + 1 for x in lines[:line])
        before = text[:offset + min(max(character, 0), len(lines[line]))]
    else:
        before = text + "\n"
    stack: list[tuple[int, int]] = []  # the open braces: (where, the end of the brace before it)
    last = 0  # the end of the last brace
    for m in _NESTING.finditer(before):
        tok = m.group(0)
        if tok == "{":
            stack.append((m.start(), last))
            last = m.end()
        elif tok == "}":
            if stack:
                stack.pop()
            last = m.end()
    kind = block = None
    if stack:  # the innermost open block's header
        brace, after = stack[-1]
        start = brace
        for _ in range(HEADER_LINES + 1):  # back to the start of the line HEADER_LINES above
            p = before.rfind("\n", after, start)
            if p < 0:
                start = after
                break
            start = p
        head = _COMMENT.sub(lambda c: '""' if c.group(1) else "", before[start:brace])  # no words of
        k = None  # strings or comments; the kind nearest the brace: `plan\nlink l {` is a link
        for k in _KIND.finditer(head.replace("\n", " ")):
            pass
        if k is not None:
            kind, block = k.group(1), k.group(2)
    cur = _strip_comment(before[before.rfind("\n") + 1:])
    segment = re.split(r"[;{]", cur)[-1]
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", segment)
    if m and stack:
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
    """What may be typed at the cursor: block kinds, a block's fields, an enumerated field's values, the
    names of blocks of the referenced kind, the units of the field's dimension."""
    if too_large(text, path) is not None:
        return []
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
    start = line = min(line, len(lines) - 1)  # a position past the end is on the last line
    while start > 0 and "{" not in _strip_comment(lines[start]):
        start -= 1
    end = line
    while end + 1 < len(lines) and "}" not in _strip_comment(lines[end]):
        end += 1
    body = "\n".join(_strip_comment(x) for x in lines[start:end + 1])
    return {m.group(1) for m in re.finditer(r"(?:^|[;{\n])\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", body)}


# --------------------------------------------------------------------------------------------------
# Hover


_TOKEN = re.compile(r"[A-Za-zµμ_%][A-Za-z0-9_µμ/]*|%")  # a name, a unit or `%`
_NOT_TOKEN = re.compile(r"[^A-Za-z0-9_µμ/%]")  # a character no token holds: tokens start after one
MAX_WORD = 256  # a longer word is nobody's name: hover reads this many characters either side, no more


def _word_at(text: str, line: int, character: int) -> tuple[str, int, int] | None:
    """The name, unit or `%` under the cursor, with its start and end in the line."""
    lines = text.split("\n")
    if line >= len(lines):
        return None
    lo = max(0, character - MAX_WORD)
    s = lines[line][lo:character + MAX_WORD]
    at = character - lo
    start = 0
    for start in (m.end() for m in _NOT_TOKEN.finditer(s, 0, at)):
        pass
    if start == 0 and lo > 0:  # the cursor is in a run of word characters longer than MAX_WORD
        return None
    for m in _TOKEN.finditer(s, start):
        if m.start() > at:
            break
        if at <= m.end():
            if m.end() == len(s) and lo + len(s) < len(lines[line]):
                return None  # runs on past what was read
            return m.group(0), lo + m.start(), lo + m.end()
    return None


def hover(text: str, path: str, line: int, character: int) -> str | None:
    """Markdown for the thing under the cursor: a field's doc and unit with its value resolved in SI; a
    unit; a referenced block; a plan's key numbers from ``ccost eval``'s evaluation."""
    if too_large(text, path) is not None:
        return None
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




def _phase_means(phase: str) -> str:
    """What one step of a phase is, from its record (``ccost.schema.PHASE_KINDS``)."""
    from ccost.schema import phase_kind

    try:
        return phase_kind(phase).means
    except KeyError:
        return ""


def plan_numbers(text: str, path: str, plan: str) -> str:
    """A plan's key numbers, from the same evaluation and in the same words as ``ccost eval --plan``: what
    its phase means first (a serve plan's TTFT, TPOT and requests/s; a decode, prefill or training plan's
    step), then compute and communication, memory, cost."""
    result = _checked(text, path)
    if result.spec is None:
        return f"**plan `{plan}`** — fix the errors to see its numbers"
    from ccost import evaluate
    from ccost import output as O
    from ccost.evaluate import plan_only
    from ccost.results import label_in

    try:
        doc = evaluate.results_document(evaluate.evaluate(plan_only(result.spec, plan)))
    except CcostError as exc:
        return f"**plan `{plan}`** cannot be evaluated: " + "; ".join(d.message for d in exc.diagnostics)
    p = doc["plans"][plan]
    phase = p.get("phase", "")
    rows: list[tuple[str, str]] = [(label_in("gpus", "text"), O.fmt_num(p["gpus"]))]
    if p.get("serve"):
        rows += O.serve_lines(p["serve"])
    else:
        step = O.fmt_time(p["step_time_s"]) + (f" ({p['regime']})" if p.get("regime") else "")
        rows.append((label_in("step_time_s", "text"), step))
        if p.get("latency_s") is not None and O.fmt_time(p["latency_s"]) != O.fmt_time(p["step_time_s"]):
            rows.append((label_in("latency_s", "text") + " (one pass through the stages)",
                         O.fmt_time(p["latency_s"])))
        if "throughput_tokens_s" in p:
            rows.append((label_in("throughput_tokens_s", "text"),
                         f"{O.fmt_num(p['throughput_tokens_s'], 4)} tokens/s "
                         f"({O.fmt_num(p.get('throughput_per_gpu'), 4)} per GPU)"))
        if p.get("training"):
            rows.append((label_in("training.mfu", "text"), O.fmt_pct(p["training"]["mfu"])))
    rows += [
        ("compute / communication", f"{O.fmt_time(p['compute_time_s'])} / {O.fmt_time(p['comm_time_s'])}"),
        ("overhead T_comm/T_compute", O.fmt_pct(p["overhead"])),
        (label_in("efficiency", "text"), O.fmt_pct(p["efficiency"])),
        (label_in("memory_bytes_per_gpu", "text"),
         O.fmt_gb(p["memory_bytes_per_gpu"]) + ("" if p["fits_memory"] else " — does not fit")),
    ]
    rows += O.cost_lines(p.get("cost") or {})
    cell = lambda v: v.replace("|", "\\|")  # noqa: E731  (a table cell)
    lines = [f"**plan `{plan}`**" + (f" — {p['title']}" if p.get("title") else ""), "",
             f"`phase = {phase}`: {_phase_means(phase)}", "",
             "| | |", "|---|---|", *(f"| {cell(k)} | {cell(v)} |" for k, v in rows),
             "", f"`ccost explain {os.path.basename(path)} {plan}` derives every number."]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Go to definition


def definition(text: str, path: str, line: int, character: int) -> tuple[str, Span] | None:
    """(file, span) of the block named under the cursor, in this file or any file it imports; an import's
    path string goes to that file when ``ccost check`` would read it (a refused or missing path: nothing,
    the same answer for both, so that no answer tells whether a file outside the project exists)."""
    if too_large(text, path) is not None:
        return None
    lines = text.split("\n")
    code_line = lines[line] if line < len(lines) else ""
    imp = _IMPORT.match(code_line)
    if imp and imp.start(1) <= character <= imp.end(1):
        files = _memo(("imports", path, "import " + imp.group(1)),
                      lambda: _imported("import " + imp.group(1), path))
        # the import's own file is the first one the loader finished after its imports: the last listed
        return (files[-1].real, Span(files[-1].real, 1, 1, 1, 1)) if files else None
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

    if too_large(text, path) is not None:
        return None
    try:
        return format_checked(text, path)
    except CcostError:
        return None

