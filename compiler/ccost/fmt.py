"""The canonical layout of a .ccost file, printed from its syntax tree, with every comment kept.

``format_text(text, path) -> str`` parses ``text`` and prints it back in one canonical form, so that two
people who write the same spec produce the same bytes and a git diff shows only what changed:

    link nvlink4 "NVLink 4" {
      alpha     = 2 us      # per hop
      bandwidth = 450 GB/s
    }

The rules (docs/git-workflow.md lists them for users):

- 2-space indentation; one member per line (``a = 1; b = 2`` is split); ``=`` aligned within a block;
  trailing comments of a block's members aligned two spaces after its longest commented member.
- Spacing: one space around binary operators and ``=``, ``, `` in lists and calls, one space between a
  number and its unit. Numbers and units are spelled as written (``2 µs``, ``70.6e9``, ``1_000_000``),
  because a spelling is a choice the author made for the reader; only whitespace is canonical.
- Strings are re-escaped canonically: ``\\"``, ``\\\\``, ``\\n``, ``\\t`` (the language's only escapes).
- Imports first, in the order written (a comment group that opens the file, followed by a blank line,
  stays at the top); one blank line between top-level items (none between imports); inside a block, a
  blank line the author left between members is kept (several collapse into one).
- Comments stay where they were: an own-line comment stays before the member, block, import or closing
  brace that followed it; a trailing comment stays after the member, block header or closing brace it
  followed (a comment continued on the lines below at the same column stays aligned under it);
  comments inside an empty block stay inside; comments at the end of the file stay there.
  A list written with comments inside it (or too long for one line) is printed one item per line so those
  comments keep their place. A comment inside any other multi-line expression moves to just before the
  member: the only place where a comment moves, and it moves the least it can.
- LF line endings, no trailing whitespace, exactly one newline at the end (CRLF and tabs are accepted).

The printer never changes meaning: ``ccost fmt`` (``ccost.commands.fmt``) verifies before it writes that
the output is a fixed point and that it checks to the same spec (``same_meaning``).
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ccost.diagnostics import CcostError, error
from ccost.syntax import tree as t

INDENT = "  "
# A list whose one-line form would pass this column is printed one item per line.
MAX_WIDTH = 100


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF: the canonical form is LF whatever the editor wrote."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def format_text(text: str, path: str) -> str:
    """Parse ``text`` (as if read from ``path``) and return its canonical form.

    Raises ``CcostError`` with the syntax diagnostics when ``text`` does not parse.

    >>> format_text('cluster c { gpu = h; nodes = 1 }', 'x.ccost')
    'cluster c {\\n  gpu   = h\\n  nodes = 1\\n}\\n'
    """
    from ccost.syntax.parse import parse  # the parser is imported lazily: fmt is also a library

    text = normalize_newlines(text)
    return format_tree(parse(text, path), text)


# ---------------------------------------------------------------------------------------------------
# Expressions

def quote(value: str) -> str:
    r"""A string literal in canonical escaping: ``\\``, ``\"``, ``\n`` and ``\t`` (the language's only
    escapes); a tab written raw inside a string becomes ``\t``."""
    return '"' + (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                  .replace("\t", "\\t")) + '"'


def expr(e: t.Expr) -> str:
    """One expression on one line, in canonical spacing."""
    if isinstance(e, t.Number):
        return e.text if not e.unit else f"{e.text} {e.unit}"
    if isinstance(e, t.String):
        return quote(e.value)
    if isinstance(e, t.Bool):
        return "true" if e.value else "false"
    if isinstance(e, t.Ref):
        return e.name if e.field is None else f"{e.name}.{e.field}"
    if isinstance(e, t.Call):
        return f"{e.func}({', '.join(expr(a) for a in e.args)})"
    if isinstance(e, t.ListExpr):
        return f"[{', '.join(expr(i) for i in e.items)}]"
    if isinstance(e, t.BinOp):
        return f"{expr(e.left)} {e.op} {expr(e.right)}"
    if isinstance(e, t.Neg):
        return f"-{expr(e.operand)}"
    if isinstance(e, t.Paren):
        return f"({expr(e.inner)})"
    raise TypeError(f"ccost.fmt: unknown expression node {type(e).__name__}")  # a bug, not user input


# ---------------------------------------------------------------------------------------------------
# Where each comment belongs

@dataclass
class _Slot:
    """Comments attached to one place: ``before`` (own-line, in order) and ``after`` (trailing)."""

    before: list[t.Comment] = field(default_factory=list)
    after: t.Comment | None = None
    # Own-line comments that continue ``after`` on the lines below it, at the same column:
    #     memory = 180 GB  # derived: 1,440 GB per DGX / 8;
    #                      # nvidia-smi shows 179 GB
    # They stay aligned under ``after`` wherever ``after`` moves.
    cont: list[t.Comment] = field(default_factory=list)


class _Attach:
    """Assigns every comment of a file to one slot, keyed by the id of a tree node and a role.

    Roles: ``"item"`` (a member, block or import: comments before it, and its trailing comment),
    ``"header"`` (trailing comment on a block's opening line), ``"close"`` (comments before a block's
    closing brace and its trailing comment), ``"eof"`` (comments at the end of the file). Comments inside
    a member's multi-line value go to ``inner`` (by member), and are placed when the member is printed.

    Why by position and not by the parser: the grammar drops comments (``%ignore``), so the parser keeps
    them aside with their spans, and this is where each finds its place again.
    """

    def __init__(self, file: t.File, lines: list[str]):
        self.lines = lines
        self.slots: dict[tuple[int, str], _Slot] = {}
        self.inner: dict[int, list[t.Comment]] = {}
        # line -> (column, slot) of a trailing comment (or its continuation) that ends on that line
        self._trailing: dict[int, tuple[int, _Slot]] = {}
        # Indexes, so that placing a comment costs a lookup, not a scan of the file (a generated spec can
        # have thousands of members and comments).
        self.items = list(file.items)
        self._item_starts = [i.span.line for i in self.items]
        self._item_ends = [i.span.end_line for i in self.items]
        self._ends: dict[int, list[tuple[int, Any, str]]] = {}  # end line -> (end column, node, role)
        for item in self.items:
            self._ends.setdefault(item.span.end_line, []).append(
                (item.span.end_column, item, "close" if isinstance(item, t.Block) else "item"))
            if isinstance(item, t.Block):
                for m in item.members:
                    self._ends.setdefault(m.span.end_line, []).append((m.span.end_column, m, "item"))
        self._member_starts = {id(b): [m.span.line for m in b.members]
                               for b in self.items if isinstance(b, t.Block)}
        for c in sorted(file.comments, key=lambda c: (c.span.line, c.span.column)):
            prev = self._trailing.get(c.span.line - 1)
            if prev is not None and prev[0] == c.span.column and self._own_line(c):
                prev[1].cont.append(c)
                self._trailing[c.span.line] = prev
                continue
            self._place(file, c)

    def slot(self, node: object, role: str) -> _Slot:
        return self.slots.setdefault((id(node), role), _Slot())

    def _own_line(self, c: t.Comment) -> bool:
        line = self.lines[c.span.line - 1] if 0 < c.span.line <= len(self.lines) else ""
        return line[: max(c.span.column - 1, 0)].strip() == ""

    def _trail(self, node: object, role: str, c: t.Comment) -> None:
        s = self.slot(node, role)
        if s.after is None:
            s.after = c
            self._trailing[c.span.line] = (c.span.column, s)
        else:  # cannot happen with one comment per line; keep it anyway rather than lose it
            s.before.append(c)

    def _place(self, file: t.File, c: t.Comment) -> None:
        line, col = c.span.line, c.span.column
        own = self._own_line(c)
        if not own:
            # The code element that ends last on this line before the comment carries it.
            ending = [e for e in self._ends.get(line, ()) if e[0] <= col]
            if ending:
                _, node, role = max(ending, key=lambda e: e[0])
                if role == "close" and node.span.line == node.span.end_line:
                    # `cluster c { gpu = h; nodes = 1 }  # why`: the comment is about the block; keep it
                    # on the line that starts the block once the block is split.
                    role = "header"
                self._trail(node, role, c)
                return
        k = bisect.bisect_right(self._item_starts, line) - 1  # the last item starting on or before line
        b = self.items[k] if k >= 0 else None
        if isinstance(b, t.Block) and line <= b.span.end_line:
            starts = self._member_starts[id(b)]
            j = bisect.bisect_right(starts, line) - 1
            if j >= 0:
                m = b.members[j]
                if m.span.line < line <= m.span.end_line or (
                        not own and m.span.line == line and m.span.end_line > line):
                    self.inner.setdefault(id(m), []).append(c)
                    return
            if not own:  # on the header line (after `{`), or after the title before a `{` below
                self._trail(b, "header", c)
                return
            nxt = bisect.bisect_right(starts, line)
            target = self.slot(b.members[nxt], "item") if nxt < len(starts) else self.slot(b, "close")
            target.before.append(c)
            return
        if not own:  # after an import's path split over lines, or similar: keep it just after that item
            k = bisect.bisect_right(self._item_ends, line) - 1
            if k >= 0:
                self._trail(self.items[k], "item", c)
                return
        nxt = bisect.bisect_right(self._item_starts, line)
        if nxt < len(self.items):
            self.slot(self.items[nxt], "item").before.append(c)
        else:
            self.slot(file, "eof").before.append(c)


# ---------------------------------------------------------------------------------------------------
# Printing

@dataclass
class _Line:
    """One output line: code (indented), an optional trailing comment, and a blank line before it."""

    code: str
    comment: str | None = None
    blank_before: bool = False
    align_group: int | None = None  # lines of one group get their trailing comments aligned
    cont: tuple[str, ...] = ()  # comment lines that continue ``comment``, aligned under it


def _ctext(c: t.Comment) -> str:
    return c.text.rstrip()


def _trail(slot: _Slot) -> dict[str, Any]:
    """The keyword arguments of a ``_Line`` for a slot's trailing comment and its continuation lines."""
    if slot.after is None:
        return {}
    return {"comment": _ctext(slot.after), "cont": tuple(_ctext(c) for c in slot.cont)}


class _Printer:
    def __init__(self, file: t.File, source: str):
        self.file = file
        self.lines_src = source.split("\n")
        self.attach = _Attach(file, self.lines_src)
        self.out: list[_Line] = []
        self._groups = 0

    # A blank source line between two lines means the author separated them; we keep one.
    def _blank_between(self, end_line: int, start_line: int) -> bool:
        for n in range(end_line + 1, start_line):
            if 0 < n <= len(self.lines_src) and self.lines_src[n - 1].strip() == "":
                return True
        return False

    def _emit_comments(self, comments: Iterable[t.Comment], indent: str, prev_end: int | None,
                       first_blank: bool | None) -> int | None:
        """Own-line comments. The first gets ``first_blank`` (None: a blank line if the source had one
        after ``prev_end``); between the others, a blank line the author left is kept."""
        for i, c in enumerate(comments):
            if i == 0 and first_blank is not None:
                blank = first_blank
            else:
                blank = prev_end is not None and self._blank_between(prev_end, c.span.line)
            self.out.append(_Line(indent + _ctext(c), blank_before=blank))
            prev_end = c.span.end_line
        return prev_end

    def print(self) -> str:
        f = self.file
        imports = [i for i in f.items if isinstance(i, t.Import)]
        blocks = [i for i in f.items if not isinstance(i, t.Import)]
        ordered = imports + blocks
        header = self._file_header(ordered)
        self._emit_comments(header, "", None, False)
        prev: t.Item | None = None
        for item in ordered:
            slot = self.attach.slot(item, "item")
            # One blank line between top-level items; none between two imports unless comments stand there.
            if prev is None:
                first_blank = bool(header)
            elif isinstance(prev, t.Import) and isinstance(item, t.Import):
                first_blank = bool(slot.before)
            else:
                first_blank = True
            prev_end = self._emit_comments(slot.before, "", None, first_blank)
            blank = first_blank if prev_end is None else self._blank_between(prev_end, item.span.line)
            if isinstance(item, t.Import):
                self.out.append(_Line(f"import {quote(item.path)}", blank_before=blank, **_trail(slot)))
            else:
                self._block(item, blank)
            prev = item
        eof = self.attach.slot(f, "eof").before
        if eof:
            last_end = max((i.span.end_line for i in f.items), default=None)
            self._emit_comments(eof, "", last_end, None if last_end is not None else False)
        return self._render()

    def _file_header(self, ordered: list[t.Item]) -> list[t.Comment]:
        """The comments that open the file, when moving imports first would carry them away.

        A comment group before the first item, separated from it by a blank line, is about the file (a
        title, a licence, sources), not about that item: it stays at the top when imports written further
        down move above the first block. Only then: when the first item stays first, nothing moves.
        """
        f = self.file
        if not f.items or ordered[0] is f.items[0]:
            return []
        slot = self.attach.slot(f.items[0], "item")
        split = 0
        for i, c in enumerate(slot.before):
            nxt = slot.before[i + 1].span.line if i + 1 < len(slot.before) else f.items[0].span.line
            if self._blank_between(c.span.end_line, nxt):
                split = i + 1
        header, slot.before = slot.before[:split], slot.before[split:]
        return header

    def _block(self, b: t.Block, blank: bool) -> None:
        head = [b.kind]
        if b.name is not None:
            head.append(b.name)
        if b.title is not None:
            head.append(quote(b.title))
        if b.extends is not None:
            head += ["extends", b.extends]
        header = " ".join(head) + " {"
        hslot = self.attach.slot(b, "header")
        close = self.attach.slot(b, "close")
        if not b.members and not close.before and not hslot.before and (hslot.after is None
                                                                         or close.after is None):
            # `policy {}` stays on one line, with its trailing comment if it had one
            self.out.append(_Line(header + "}", blank_before=blank, **_trail(
                hslot if hslot.after is not None else close)))
            return
        self.out.append(_Line(header, blank_before=blank, **_trail(hslot)))
        for c in hslot.before:  # a second comment between the header and `{`: first thing inside
            self.out.append(_Line(INDENT + _ctext(c)))
        width = max((len(m.name) for m in b.members), default=0)
        self._groups += 1
        group = self._groups
        prev_end: int | None = None
        for m in b.members:
            slot = self.attach.slot(m, "item")
            inner = self.attach.inner.get(id(m), [])
            before = list(slot.before)
            # Comments inside a multi-line value that is not a list have no line of their own in the
            # output: they move to just before the member.
            list_layout = isinstance(m.value, t.ListExpr) and (
                inner or len(INDENT + m.name.ljust(width) + " = " + expr(m.value)) > MAX_WIDTH)
            if inner and not list_layout:
                before = sorted(before + inner, key=lambda c: c.span.line)
            first = before[0].span.line if before else m.span.line
            blank_m = prev_end is not None and self._blank_between(prev_end, first)
            end = self._emit_comments(before, INDENT, prev_end, blank_m)
            blank_member = blank_m if end is None else self._blank_between(end, m.span.line)
            lhs = INDENT + m.name.ljust(width) + " = "
            if list_layout:
                self._list(lhs, m, inner, slot, blank_member, group)
            else:
                self.out.append(_Line(lhs + expr(m.value), blank_before=blank_member, align_group=group,
                                      **_trail(slot)))
            prev_end = m.span.end_line
        first = close.before[0].span.line if close.before else None
        blank_c = (prev_end is not None and first is not None and self._blank_between(prev_end, first))
        self._emit_comments(close.before, INDENT, prev_end, blank_c)
        self.out.append(_Line("}", **_trail(close)))

    def _list(self, lhs: str, m: t.Member, inner: list[t.Comment], slot: _Slot, blank: bool,
              group: int) -> None:
        """A list one item per line, comments kept beside the items they were written beside."""
        lst = m.value
        assert isinstance(lst, t.ListExpr)
        items = list(lst.items)
        before: dict[int, list[t.Comment]] = {i: [] for i in range(len(items) + 1)}
        after: dict[int, t.Comment] = {}
        open_comment: t.Comment | None = None
        for c in inner:
            own = self.attach._own_line(c)
            if not own:
                ends = [i for i, it in enumerate(items) if it.span.end_line == c.span.line]
                if ends and ends[-1] not in after:
                    after[ends[-1]] = c
                elif c.span.line == lst.span.line and open_comment is None:
                    open_comment = c
                else:
                    before[next((i for i, it in enumerate(items) if it.span.line > c.span.line),
                                len(items))].append(c)
            else:
                before[next((i for i, it in enumerate(items) if it.span.line > c.span.line),
                            len(items))].append(c)
        self.out.append(_Line(lhs + "[", _ctext(open_comment) if open_comment else None,
                              blank_before=blank))
        self._groups += 1
        sub = self._groups
        ind = INDENT * 2
        for i, it in enumerate(items):
            for c in before[i]:
                self.out.append(_Line(ind + _ctext(c)))
            self.out.append(_Line(ind + expr(it) + ",", _ctext(after[i]) if i in after else None,
                                  align_group=sub))
        for c in before[len(items)]:
            self.out.append(_Line(ind + _ctext(c)))
        self.out.append(_Line(INDENT + "]", align_group=group, **_trail(slot)))

    def _render(self) -> str:
        col: dict[int, int] = {}
        for ln in self.out:
            if ln.comment is not None and ln.align_group is not None:
                col[ln.align_group] = max(col.get(ln.align_group, 0), len(ln.code))
        text: list[str] = []
        for ln in self.out:
            if ln.blank_before and text:
                text.append("")
            if ln.comment is None:
                text.append(ln.code.rstrip())
                continue
            width = col[ln.align_group] if ln.align_group is not None else len(ln.code)
            text.append(ln.code.ljust(width) + "  " + ln.comment)
            text.extend(" " * (width + 2) + c for c in ln.cont)
        return "\n".join(text) + "\n" if text else ""


def format_tree(file: t.File, source: str) -> str:
    """Print a parsed file canonically. ``source`` is the LF-normalised text the tree was parsed from:
    the printer looks at it only to tell an own-line comment from a trailing one and to find the blank
    lines the author left."""
    return _Printer(file, source).print()


# ---------------------------------------------------------------------------------------------------
# Meaning: two checked specs are the same when they agree on everything but where things were written.

def without_positions(obj: Any) -> Any:
    """A comparable copy of a checked spec (or any part of it) with spans and file positions dropped.

    Why not ``==`` on the specs: ``Entity.span`` takes part in equality, and formatting moves lines.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,) + tuple(
            (f.name, without_positions(getattr(obj, f.name)))
            for f in dataclasses.fields(obj)
            if f.name not in ("span", "spans") and not f.name.endswith("_span"))
    if isinstance(obj, Mapping):
        return ("{}",) + tuple((k, without_positions(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return tuple(without_positions(v) for v in obj)
    if isinstance(obj, float) and obj != obj:  # NaN != NaN would call every spec with a NaN changed
        return "nan"
    return obj


def same_meaning(a: Any, b: Any) -> bool:
    """True when two checked specs differ at most in positions (see ``without_positions``)."""
    return without_positions(a) == without_positions(b)


def format_checked(text: str, path: str) -> str:
    """The canonical form of ``text``, verified: raises CcostError with the spec's own errors if it has
    any, and E503 if the formatted text is not a fixed point or checks to a different spec.

    Imports are resolved from ``path`` on disk, as ``ccost check`` would.
    """
    from ccost.check import check_text

    before = check_text(text, path)
    errors = [d for d in before.diagnostics if d.is_error]
    if errors or before.spec is None:
        exc = CcostError(errors or before.diagnostics)
        exc.sources = before.sources  # type: ignore[attr-defined]
        raise exc
    out = format_text(text, path)
    if format_text(out, path) != out:
        raise _bug(path, "formatting the output again changes it (the layout is not a fixed point)")
    after = check_text(out, path)
    if after.spec is None or any(d.is_error for d in after.diagnostics):
        raise _bug(path, "the formatted text does not check cleanly")
    if not same_meaning(before.spec, after.spec):
        raise _bug(path, "the formatted text checks to a different spec")
    return out


def _bug(path: str, why: str) -> CcostError:
    return CcostError(error(
        "E503", f"{path}: not formatted, because {why}",
        help="this is a bug in ccost, not in your spec; the file was left unchanged. Please report it "
             "with the file attached (CCOST_DEBUG=1 shows more)."))
