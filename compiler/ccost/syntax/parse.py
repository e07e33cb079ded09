"""Text of a .ccost file -> ``ccost.syntax.tree.File``, with friendly syntax diagnostics.

    >>> f = parse('link nv { alpha = 2 us; bandwidth = 450 GB/s }', "x.ccost")
    >>> f.blocks[0].members[1].value.unit
    'GB/s'

How it works, and why:

* The grammar (``grammar/ccost.lark``, its block kinds filled in from ``ccost.schema``) is LALR with
  Lark's contextual lexer, built once per process. The contextual lexer is what lets a unit (``GB/s``) be one token right after a number and a name
  everywhere else, and lets keywords be field names (``model = llama3``).
* A small postlexer drops newlines inside ``( )`` and ``[ ]`` (so lists and calls may span lines),
  refuses brackets nested deeper than ``MAX_DEPTH`` (E006), and applies *repairs* (below).
* Error recovery: on a syntax error we classify it (missing ``=``, two members on one line, missing
  ``}``, unterminated string, stray character, ...) -- where the parser stopped is told by example
  (``SITUATIONS``, matched with Lark's ``match_examples``), what else decides it (an open bracket, the
  token, the text after it) by code --, record one diagnostic, and parse again with a repair
  that is purely positional -- drop the tokens of the broken member, insert a ``}`` or a ``;`` after a
  given token, or blank a bad character -- so every span of the original text stays exact. Each round
  gets past one error, so all errors of a file (one per line, at most ``MAX_ERRORS``) come out in one run
  without a cascade of follow-on nonsense (principle: diagnostics are a product).
* A separate ``Transformer`` (``@v_args(meta=True)``, non-recursive so deep input cannot overflow the
  Python stack) builds the frozen tree with a ``Span`` on every node.
"""

from __future__ import annotations

import contextvars
import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Iterator

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from ccost import schema as SC
from ccost.diagnostics import CcostError, Diagnostic, Span, error
from ccost.resources import resource_dir
from ccost.syntax import tree as T

from ccost.schema import MAX_FILE_BYTES, MAX_IMPORT_DEPTH, MAX_LIST_ITEMS  # noqa: E402, F401  (the language's limits)

MAX_DEPTH = 200  # brackets or operators nested deeper than this are certainly not a capacity plan
#: Operators in one member's expression: a sum of more terms nests deeper than ``MAX_DEPTH`` anyway (E006),
#: and counting them as the tokens arrive stops `layers = 0+0+…` of a million terms before Lark builds
#: its tree (which took 21-44 s and 1.9 GB before the E006).
MAX_OPERATORS = MAX_DEPTH
MAX_ERRORS = 50  # recovery rounds; each round re-parses the file, so bound the work

BLOCK_KINDS = SC.block_kinds()  # the schema's; the grammar's `kind` rule and terminals come from it too
KEYWORDS = SC.keywords()
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_OPEN = {"LPAR": "RPAR", "LSQB": "RSQB"}
_KIND_TYPES = frozenset(k.upper() for k in BLOCK_KINDS)
_CLOSE = {"RPAR", "RSQB"}


# ---------------------------------------------------------------------------------------------------
# Reading files

def read_source(path: str | os.PathLike) -> str:
    """Read a spec file as text, or raise CcostError (E002) saying exactly why it cannot be read.

    Accepts a UTF-8 BOM (dropped) and CRLF line endings (kept; the lexer treats ``\\r`` as blank).
    """
    from ccost.userfiles import read_user_bytes

    name = str(path)
    try:
        data = read_user_bytes(path, limit=MAX_FILE_BYTES, code="E002", what="spec")
    except FileNotFoundError:
        raise CcostError(error("E002", f"cannot read {name}: no such file", None,
                               "check the path (relative paths start at the current directory)")) from None

    def fail(message: str, help: str | None = None, span: Span | None = None) -> CcostError:
        return CcostError(error("E002", message, span, help))

    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start + bom  # an offset into the file as it is on disk
        line = data.count(b"\n", 0, start) + 1
        col = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise fail(f"{name} is not UTF-8 text: byte 0x{data[start]:02x} at byte offset {start} "
                   f"(line {line}, column {col}) cannot be decoded",
                   "save the file as UTF-8 (for example `iconv -f latin1 -t utf-8`)",
                   Span.point(name, line, col)) from None


# ---------------------------------------------------------------------------------------------------
# The parser, built once per process

@dataclass
class _Run:
    """The state of one parse attempt, reached by the postlexer and comment callback via a contextvar
    (the Lark object is shared, so per-parse state cannot live on it)."""

    text: str
    insert_after: dict[int, str] = field(default_factory=dict)  # token start -> synthetic token type
    tokens: list[tuple[Token, int, int]] = field(default_factory=list)  # (token, bracket depth, braces)
    comments: list[Token] = field(default_factory=list)
    brackets: list[Token] = field(default_factory=list)  # open ( and [
    blocks: list[tuple[Token, Token]] = field(default_factory=list)  # (item start, `{`) of open blocks


_RUN: contextvars.ContextVar[_Run] = contextvars.ContextVar("ccost_parse_run")


class _TooDeep(Exception):
    def __init__(self, token: Token, what: str = "brackets"):
        self.token = token
        self.what = what


class _TooLarge(Exception):
    """An expression or a list past the language's size bounds, found as its tokens arrive (the parse stops:
    the tree is never built)."""

    def __init__(self, token: Token, code: str, message: str, help: str):
        self.token, self.code, self.message, self.help = token, code, message, help


def _synthetic(type_: str, value: str, after: Token) -> Token:
    return Token(type_, value, start_pos=after.end_pos, line=after.end_line, column=after.end_column,
                 end_line=after.end_line, end_column=after.end_column, end_pos=after.end_pos)


class _PostLex:
    """Drops newlines inside brackets, guards nesting depth, applies the repairs of ``_Run``."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        run = _RUN.get()
        depth = 0  # ( and [
        braces = 0  # { }
        item_start: Token | None = None
        at_item_start = True
        tokens = run.tokens
        minus_run: list[Token] = []  # `- - - ... x` nests as deep as brackets do
        operators = 0  # in the current member's expression (MAX_OPERATORS)
        first_operator: Token | None = None
        lists: list[list] = []  # per open bracket: [kind, items so far] (a `[` list's items: MAX_LIST_ITEMS)
        for tok in stream:
            t = tok.type
            if t == "_NL" and depth > 0:
                continue
            if t == "MINUS":
                minus_run.append(tok)
                if len(minus_run) > MAX_DEPTH:
                    raise _TooDeep(minus_run[0], what="signs `-`")
            elif minus_run:
                minus_run = []
            if t in ("PLUS", "MINUS", "STAR", "SLASH"):
                operators += 1
                first_operator = first_operator or tok
                if operators > MAX_OPERATORS:
                    raise _TooLarge(first_operator, "E006", f"an expression of more than {MAX_OPERATORS:,} "
                                    "operators", "a spec needs a few terms at most; is this file generated?")
            elif depth == 0 and t in ("EQUAL", "_NL", "SEMICOLON", "LBRACE", "RBRACE"):
                operators, first_operator = 0, None  # a new member
            elif t == "COMMA" and lists and lists[-1][0] == "LSQB":
                lists[-1][1] += 1
                if lists[-1][1] >= MAX_LIST_ITEMS:
                    raise _TooLarge(lists[-1][2], "E402", f"a list of more than {MAX_LIST_ITEMS:,} items",
                                    "list fewer values, or generate them: `range(1, 100_000, 64)`, "
                                    "`pow2(1, 1024)`")
            tokens.append((tok, depth, braces))
            if t in _OPEN:
                depth += 1
                lists.append([t, 0, tok])
                if depth > MAX_DEPTH:
                    raise _TooDeep(tok)  # before Lark builds a tree deeper than anything can walk
            elif t in _CLOSE:
                depth = max(depth - 1, 0)
                if lists:
                    lists.pop()
            elif t == "LBRACE":
                braces += 1
            elif t == "RBRACE":
                braces = max(braces - 1, 0)
                if braces == 0:
                    at_item_start = True
            if braces == 0 and t != "RBRACE":
                if t == "_NL":
                    at_item_start = True
                elif at_item_start:
                    item_start = tok
                    at_item_start = False
            yield tok
            # Bookkeeping for diagnostics only after the parser accepted the token: when it rejects
            # one, the generator stays suspended at the yield and this still describes the state
            # before the bad token (which `}` or `(` is still open).
            if t in _OPEN:
                run.brackets.append(tok)
            elif t in _CLOSE:
                if run.brackets:
                    run.brackets.pop()
            elif t == "LBRACE":
                run.blocks.append((item_start or tok, tok))
            elif t == "RBRACE":
                if run.blocks:
                    run.blocks.pop()
            extra = run.insert_after.get(tok.start_pos) if run.insert_after else None
            if extra is not None:
                syn = _synthetic(extra, {"RBRACE": "}", "LBRACE": "{", "SEMICOLON": ";"}[extra], tok)
                tokens.append((syn, depth, braces))
                if extra == "RBRACE" and braces > 0:
                    braces -= 1
                    if braces == 0:
                        at_item_start = True
                elif extra == "LBRACE":
                    braces += 1
                yield syn
                if extra == "RBRACE" and run.blocks:
                    run.blocks.pop()
                elif extra == "LBRACE":
                    run.blocks.append((item_start or syn, syn))


def _on_comment(tok: Token) -> Token:
    run = _RUN.get(None)
    if run is not None:
        run.comments.append(tok)
    return tok


_PARSER: Lark | None = None


def _cache_path(grammar: str) -> str | bool:
    """Where to keep the built LALR tables between runs, or False for no cache.

    Building the parser costs ~0.2 s, most of a `ccost check` run; loading the tables costs ~10 ms. They
    live in the user's cache folder (``$XDG_CACHE_HOME/ccost`` or ``~/.cache/ccost``), never in the shared
    temp folder that ``cache=True`` would use (STYLE.md). The file name carries a hash of the grammar and the
    Lark and Python versions, and Lark checks its own hash on load, so a stale file is rebuilt, never used.
    ``CCOST_NO_CACHE=1`` turns it off; an unwritable folder silently does too.
    """
    if os.environ.get("CCOST_NO_CACHE"):
        return False
    import hashlib
    import sys

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "ccost")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK):
        return False
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return os.path.join(folder, f"parser-{digest}-lark{lark.__version__}-py{sys.version_info[0]}"
                                f"{sys.version_info[1]}.cache")


def grammar_text() -> str:
    """The Lark grammar: ``grammar/ccost.lark`` with the block kinds of the schema filled in (its ``kind``
    rule, the keywords a field name may be, and one keyword terminal per kind)."""
    text = (resource_dir("grammar") / "ccost.lark").read_text(encoding="utf-8")
    kinds = SC.block_kinds()
    for k in kinds:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", k), f"block kind {k!r} cannot be a grammar keyword"
    terminals = "\n".join(f"{k.upper()}.2: /{k}\\b/" for k in kinds)
    return text.replace("@KINDS@", " | ".join(k.upper() for k in kinds)).replace("@KIND_TERMINALS@", terminals)


def _parser() -> Lark:
    """The Lark parser, built on first use and kept for the process (tables cached, see ``_cache_path``)."""
    global _PARSER
    if _PARSER is None:
        grammar = grammar_text()
        _PARSER = Lark(grammar, parser="lalr", lexer="contextual", strict=True, propagate_positions=True,
                       maybe_placeholders=True, postlex=_PostLex(), lexer_callbacks={"COMMENT": _on_comment},
                       cache=_cache_path(grammar))
    return _PARSER


# ---------------------------------------------------------------------------------------------------
# The entry point

def parse(text: str, path: str) -> T.File:
    """Parse the text of a .ccost file named ``path`` (used in spans) into a syntax tree.

    Raises CcostError carrying every syntax diagnostic found (one per line at most), sorted by position.
    An empty file is valid and has no items.
    """
    if text.startswith("\ufeff"):
        text = text[1:]  # read_source drops it too; columns are what an editor shows
    parser = _parser()
    diags: list[Diagnostic] = []
    lines_with_errors: set[int] = set()
    seen: set[tuple[int, str]] = set()
    insert_after: dict[int, str] = {}
    working = text
    last_pos = -1
    lark_tree = None
    # Each recovery round re-parses the whole text: bound the total work on big files.
    rounds = MAX_ERRORS if len(text) <= 256 * 1024 else max(2, MAX_ERRORS * 256 * 1024 // len(text))
    for _round in range(rounds + 1):
        run = _Run(working, dict(insert_after))
        token = _RUN.set(run)
        try:
            lark_tree = parser.parse(working)
            break
        except _TooDeep as exc:
            tok = exc.token
            diags.append(error("E006", f"{exc.what} nested more than {MAX_DEPTH} deep",
                               _tok_span(path, tok), "a spec needs a few levels at most; is this file generated?"))
            lark_tree = None
            break
        except _TooLarge as exc:
            diags.append(error(exc.code, exc.message, _tok_span(path, exc.token), exc.help))
            lark_tree = None
            break
        except UnexpectedInput as exc:
            pos = _error_pos(exc)
            repair = _diagnose(exc, run, path, text)
            if repair.diagnostic is not None:
                line = repair.diagnostic.span.line if repair.diagnostic.span else 0
                if line not in lines_with_errors:  # one per line: the rest would be a cascade
                    diags.append(repair.diagnostic)
                    lines_with_errors.add(line)
            key = (pos, repair.diagnostic.message if repair.diagnostic else "")
            if not repair.progress() or pos < last_pos or key in seen:
                break
            seen.add(key)
            last_pos = pos
            for a, mode in repair.skip.items():
                repair.blank.append((a, _statement_end(working, a, mode)))
            insert_after.update(repair.insert_after)
            for a, b in repair.blank:
                working = working[:a] + "".join(c if c == "\n" else " " for c in working[a:b]) + working[b:]
            lark_tree = None
        finally:
            _RUN.reset(token)
    else:
        lark_tree = None

    if lark_tree is None or diags:
        if lark_tree is not None:
            diags.extend(_Builder(path, run.text).build(lark_tree, run.comments)[1])
        if not diags:  # recovery gave up without a message: never fail silently
            diags.append(error("E001", "the file cannot be parsed", Span.point(path, 1, 1)))
        raise _error(diags, path, text)
    file, more = _Builder(path, text).build(lark_tree, run.comments)
    if more:
        raise _error(more, path, text)
    return file


def _error(diags: list[Diagnostic], path: str, text: str) -> CcostError:
    exc = CcostError(_sorted(diags))
    exc.sources = {path: text}  # type: ignore[attr-defined]  # the CLI shows the source lines
    return exc


def _statement_end(text: str, i: int, mode: str) -> int:
    """Where a member or item that starts at ``i`` ends, scanning characters (strings, comments and
    brackets respected), for the "member" and "item" repairs."""
    n = len(text)
    if mode == "token":
        return min(i + 1, n)
    depth = braces = 0
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n" else 1
            i = j + 1 if j < n and text[j] == '"' else j
            continue
        if c == "#":
            j = text.find("\n", i)
            i = n if j == -1 else j
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(depth - 1, 0)
        elif c == "{" and mode == "item":
            braces += 1
        elif c == "}":
            if mode == "member":
                return i  # the `}` closes the block: keep it
            braces -= 1
            if braces <= 0:
                return i + 1
        elif c == "\n" and depth == 0 and braces == 0:
            return i
        elif c == ";" and mode == "member" and depth == 0:
            return i
        i += 1
    return n


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.span.line, d.span.column) if d.span else (0, 0))


def _error_pos(exc: UnexpectedInput) -> int:
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        return tok.start_pos if tok.start_pos is not None else 1 << 60
    return exc.pos_in_stream


# ---------------------------------------------------------------------------------------------------
# Classifying an error and choosing a repair

@dataclass
class _Repair:
    """One diagnostic and the positional repair that gets the next round past it.

    ``skip`` maps a start offset to "member" (blank to the next `;`, newline or `}` outside brackets),
    "item" (blank to the end of the line, or through the matching `}`) or "token" (one character).
    Skipping is done on the text, not on tokens, because the contextual lexer would otherwise fail on
    the next token of a broken member before a postlexer could drop it."""

    diagnostic: Diagnostic | None
    skip: dict[int, str] = field(default_factory=dict)
    insert_after: dict[int, str] = field(default_factory=dict)
    blank: list[tuple[int, int]] = field(default_factory=list)

    def progress(self) -> bool:  # a repair must change something, or the next round fails the same way
        return bool(self.skip or self.insert_after or self.blank)


_DESCRIBE = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "UNIT": "a unit",
    "LBRACE": "`{`", "RBRACE": "`}`", "EQUAL": "`=`", "SEMICOLON": "`;`", "_NL": "a newline",
    "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`", "COMMA": "`,`", "DOT": "`.`",
    "PLUS": "`+`", "MINUS": "`-`", "STAR": "`*`", "SLASH": "`/`", "$END": "the end of the file",
    "EXTENDS": "`extends`", "IMPORT": "`import`", "TRUE": "`true`", "FALSE": "`false`",
}


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the file"
    if tok.type == "_NL":
        return "the end of the line"
    return f"`{tok.value}`"


def _describe_expected(expected: set[str] | frozenset[str], bracket: Token | None = None) -> str:
    """Say in words what the parser would have accepted. LALR merges look-aheads, so the raw set has
    tokens that cannot be right here; ``bracket`` (the innermost open bracket) narrows it."""
    exp = set(expected)
    if "NUMBER" in exp:  # a value is needed: a newline or `;` could not end the member here
        exp -= {"_NL", "SEMICOLON", "RBRACE"}
    if bracket is not None:
        exp -= {"_NL", "SEMICOLON", "RBRACE", "RSQB" if bracket.type == "LPAR" else "RPAR"}
    else:
        exp -= {"RPAR", "RSQB", "COMMA"}
    if "_NL" in exp and "SEMICOLON" not in exp and len(exp) > 1:
        exp.discard("_NL")  # only the blank lines allowed before a block's `{`: not worth saying
    parts: list[str] = []
    if {"NUMBER", "NAME", "STRING"} <= exp:
        parts.append("a value (a number, a name, a string, a list or an expression)")
        exp -= {"NUMBER", "NAME", "STRING", "LPAR", "LSQB", "MINUS", "TRUE", "FALSE"}
    if exp & {"PLUS", "STAR", "SLASH"}:
        parts.append("an operator")
        exp -= {"PLUS", "MINUS", "STAR", "SLASH", "UNIT", "DOT", "LPAR"}
    if {"LINK", "GPU", "PLAN"} <= exp:
        parts.append("a block (" + ", ".join(BLOCK_KINDS) + ") or `import`")
        exp -= {k.upper() for k in KEYWORDS}
    if "NAME" in exp and "RBRACE" in exp:
        parts.append("a member `name = value`")
        exp -= {"NAME"} | {k.upper() for k in KEYWORDS}
    if {"_NL", "SEMICOLON"} <= exp:
        parts.append("the end of the member (a newline or `;`)")
        exp -= {"_NL", "SEMICOLON"}
    exp -= {k.upper() for k in KEYWORDS} - {"EXTENDS"}
    parts += sorted(_DESCRIBE.get(e, f"`{e.lower()}`") for e in exp)
    if not parts:
        return "something else"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _tok_span(path: str, tok: Token) -> Span:
    if tok.type == "_NL":  # point at the end of the line, not at the next one
        return Span.point(path, tok.line, tok.column)
    return Span(path, tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column if tok.end_column is not None else tok.column + 1)


def _header_span(path: str, start: Token, lbrace: Token) -> Span:
    return Span(path, start.line, start.column, lbrace.end_line, lbrace.end_column)


def _statement_start(run: _Run, before: int) -> tuple[Token | None, int, int]:
    """The first token of the member (inside a block) or item (top level) that holds position
    ``before``, with its bracket depth and brace level; None when the error is the first token."""
    toks = run.tokens
    i = len(toks) - 1
    while i >= 0 and toks[i][0].start_pos >= before:
        i -= 1
    start = None
    while i >= 0:
        tok, depth, braces = toks[i]
        if depth == 0 and tok.type in ("_NL", "SEMICOLON", "LBRACE", "RBRACE"):
            break
        start = (tok, depth, braces)
        i -= 1
    if start is None:
        return None, 0, 0
    return start


def _prev_token(run: _Run, pos: int) -> Token | None:
    for tok, _d, _b in reversed(run.tokens):
        if tok.start_pos < pos:
            return tok
    return None


def _rest_of_statement(text: str, pos: int) -> str:
    end = len(text)
    for stop in ("\n", ";", "#", "}"):
        k = text.find(stop, pos)
        if k != -1:
            end = min(end, k)
    return text[pos:end].strip()


# Where a syntax error is, told by example. Each situation is a list of small broken specs whose first
# error is in that situation; ``_situations`` matches an error against them with Lark's ``match_examples``,
# so a situation is the set of parser states its examples stop in. The state is compared alone
# (``_AtState``): Lark also compares the depth of the parser's stack, which the nesting of an expression
# changes (`nodes = 1 gpus = 8` and `nodes = (1 + 1) * 2 gpus = 8` are the same mistake), and the
# look-aheads are not compared (``use_accepts=False``: a member's value and a list's item share their
# states, and the rules below were written on the state). Generated lines cover each block kind and each
# keyword that may be a field name, whose tokens have states of their own. tests/test_parse.py checks that
# each example is diagnosed with its situation's code and that the examples reach every state the situation
# stands for.
# What is not a state stays code in ``_diagnose``, each with its reason.

_HEADERS = ("", " a", ' "T"', ' a "T"', " extends b", " a extends b", ' "T" extends b', ' a "T" extends b')
_FIELDS = ("x",) + tuple(sorted(KEYWORDS))

SITUATIONS: dict[str, tuple[str, ...]] = {
    # in a block header, where its `{` could come: after the kind, the name, the title, `extends NAME`, or
    # the newlines before `{` (one or two `_NL` tokens); E001 "has no `{`", or the header's own message
    "header": tuple(f"link{h}{nl} )" for h in _HEADERS for nl in ("", "\n", "\n#\n"))
    + tuple(f"{k} )" for k in BLOCK_KINDS),
    # after `extends` in a header, where the parent's name must come: E001 in the header
    "after_extends": tuple(f"link{h} extends )" for h in ("", " a", ' "T"', ' a "T"')),
    # right after a member's field name (a name, or a keyword used as one), where `=` must come: E005. A
    # keyword's state is shared with `x.plan` (a reference's field), so `}`, `;` or a newline after it is
    # first reduced, and stops in the state after the field
    "field_name": tuple(f"link a {{ {f} 1 }}" for f in _FIELDS)
    + ("link a { plan }", "link a {\n  plan\n}", "link a { plan; }", "link a { x }", "link a {\n  x\n}"),
    # right after a unit, where `=` cannot come: the unit was the next member's name (E004)
    "after_unit": ("cluster c { nodes = 1 gpus = 8 }",),
    # after a complete value, where the member could end: a name there starts the next member (E004)
    "value_end": tuple(f"link a {{ a = {v} b = 2 }}" for v in (
        "1 us", '"s"', "true", "false", "x", "x.y", "f(1)", "f()", "(1)", "[1]", "[]")
        + tuple(f"x.{k}" for k in sorted(KEYWORDS))),
    # right after `import` (at the top, or a field or a reference's field named `import`): E001, quotes
    "after_import": ("import std/gpus.ccost", "link a { x = y.import 1 }"),
    # where a block or an import may begin: at the top, after an import or after a block's `}` (E001)
    "item_start": ("x = 3", "\nx = 3", 'import "a"\nx = 3', 'import "a" x = 3')
    + tuple(f"link{h}{nl}{{}} x = 3" for h in _HEADERS for nl in (" ", "\n")),
}
#: The code each situation's examples are diagnosed with (tests/test_parse.py).
SITUATION_CODES = {"header": "E001", "after_extends": "E001", "field_name": "E005", "after_unit": "E004",
                   "value_end": "E004", "after_import": "E001", "item_start": "E001"}


class _AtState:
    """An example's parser state, equal to any parser state with the same number (see ``SITUATIONS``)."""

    __slots__ = ("position",)

    def __init__(self, position):
        self.position = position

    def __eq__(self, other) -> bool:
        return getattr(other, "position", other) == self.position

    __hash__ = None  # type: ignore[assignment]


_EXAMPLE_ERRORS: dict[str, UnexpectedInput] = {}


def _example_error(text: str):
    """Parse an example of ``SITUATIONS`` and raise its first error (kept: each example is parsed once per
    process), as ``match_examples`` wants of its ``parse_fn``."""
    exc = _EXAMPLE_ERRORS.get(text)
    if exc is None:
        token = _RUN.set(_Run(text, {}))
        try:
            _parser().parse(text)
        except UnexpectedInput as e:
            e.state = _AtState(getattr(e.state, "position", e.state))
            exc = _EXAMPLE_ERRORS[text] = e
        finally:
            _RUN.reset(token)
        if exc is None:
            raise AssertionError(f"the syntax example {text!r} parses")
    raise exc.with_traceback(None)


_SITUATIONS_AT: dict = {}


def _situations(exc: UnexpectedInput) -> frozenset[str]:
    """The situations of ``SITUATIONS`` whose examples stop in the parser state ``exc`` stopped in (kept by
    state: the answer depends on nothing else, and a file with many errors, or an editor's every
    keystroke, asks again)."""
    if exc.state is None:  # not seen from Lark's LALR parser; `match_examples` needs a state
        return frozenset()
    key = getattr(exc.state, "position", exc.state)
    where = _SITUATIONS_AT.get(key)
    if where is None:
        where = _SITUATIONS_AT[key] = frozenset(
            name for name, examples in SITUATIONS.items()
            if exc.match_examples(_example_error, {name: examples}, use_accepts=False) == name)
    return where


def _diagnose(exc: UnexpectedInput, run: _Run, path: str, text: str) -> _Repair:
    if isinstance(exc, UnexpectedCharacters):
        return _diagnose_chars(exc, run, path, text)
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    expected = set(exc.expected or ())
    pos = tok.start_pos if tok.type != "$END" else len(text)
    start, _depth, braces = _statement_start(run, pos)
    prev = _prev_token(run, pos)
    in_block = bool(run.blocks)
    where = _situations(exc)

    # --- a block header not followed by `{`
    if not in_block and "header" in where:
        head = next((t for t, _d, _b in reversed(run.tokens) if t.type in _KIND_TYPES), None)
        last = next((t for t, _d, _b in reversed(run.tokens) if t.type != "_NL"), None)
        if head is not None and last is not None:
            what = _block_label(run, head, None)
            at_end = Span.point(path, last.end_line, last.end_column)
            if tok.type == "$END":
                return _Repair(error("E001", f"the block {what} has no body: the file ends before its `{{`",
                                     at_end, f"write `{head.value} ... {{ members }}`"))
            name_like = isinstance(tok.value, str) and _NAME_RE.match(tok.value)
            if tok.line > last.line or (name_like and text[tok.end_pos:].lstrip(" \t").startswith("=")):
                rep = _Repair(error("E001", f"the block {what} has no `{{` before its members", at_end,
                                    f"add `{{` at the end of line {last.line}"))
                rep.insert_after[prev.start_pos] = "LBRACE"
                return rep
            if tok.type == "STRING" and prev is not None and prev.type == "NAME" and any(
                    t.type == "EXTENDS" and t.start_pos > head.start_pos for t, _d, _b in run.tokens):
                return _Repair(error("E001", f"the title of {what} must come before `extends`",
                                     _tok_span(path, tok), f"write `{head.value} NAME {tok.value} extends OTHER {{`"),
                               skip={head.start_pos: "item"})

    # --- end of file inside something open. Code, not examples: the file can end in any state; what is
    # open is the postlexer's record (``run.brackets``, ``run.blocks``).
    if tok.type == "$END":
        if run.brackets:
            b = run.brackets[-1]
            close = ")" if b.type == "LPAR" else "]"
            return _Repair(error("E001", f"this `{b.value}` is never closed", _tok_span(path, b),
                                 f"add `{close}` where the expression ends"))
        if run.blocks:
            head, lbrace = run.blocks[-1]
            what = _block_label(run, head, lbrace)
            return _Repair(error("E003", f"the block {what} is never closed: the file ends before its `}}`",
                                 _header_span(path, head, lbrace),
                                 "add `}` after the block's last member"))
        return _Repair(error("E001", f"the file ends too early; expected {_describe_expected(expected)}",
                             _tok_span(path, prev) if prev is not None else Span.point(path, 1, 1)))

    # --- `x = (1 + 2 }` or `x = [1, 2; y = 3`: a bracket still open where the member ends. Code: the open
    # bracket is the postlexer's record, and a `}` or `;` meets it after any value, operator or comma.
    if run.brackets and tok.type in ("RBRACE", "SEMICOLON") and start is not None:
        b = run.brackets[-1]
        close = ")" if b.type == "LPAR" else "]"
        return _Repair(error("E001", f"this `{b.value}` is not closed before the {_describe_token(tok)} "
                             f"on line {tok.line}", _tok_span(path, b), f"add `{close}` where the expression ends"),
                       skip={start.start_pos: "member" if in_block else "item"})

    # --- `tp = [1, 2, 4` then `batch = 32` on the next line: the bracket swallowed the newline (code, as
    # above: told by the open bracket and the line of the token, in any state)
    if run.brackets and tok.line > run.brackets[-1].line and start is not None and (
            tok.type == "EQUAL" or (isinstance(tok.value, str) and _NAME_RE.match(tok.value)
                                    and text[tok.end_pos:].lstrip(" \t").startswith("="))):
        b = run.brackets[-1]
        close = ")" if b.type == "LPAR" else "]"
        return _Repair(error("E001", f"this `{b.value}` is never closed", _tok_span(path, b),
                             f"add `{close}` where the {'list' if close == ']' else 'expression'} ends"),
                       skip={start.start_pos: "member" if in_block else "item"})

    # --- inside a block, right after a field name: `=` was expected
    if in_block and start is not None and prev is start and "field_name" in where and start.type != "RBRACE":
        eol = text.find("\n", start.start_pos)
        header_like = "{" in text[start.start_pos:eol if eol != -1 else len(text)]
        if ((start.value in BLOCK_KINDS and header_like and tok.type in ("NAME", "UNIT", "STRING", "LBRACE", "EXTENDS"))
                or (start.value == "import" and tok.type == "STRING")):
            # `link nvlink4 {` where a member was expected: the previous block lacks its `}`.
            head, lbrace = run.blocks[-1]
            what = _block_label(run, head, lbrace)
            before = _prev_token(run, start.start_pos)
            rep = _Repair(error("E003", f"the block {what} is not closed before `{start.value}` starts a "
                                f"new {'import' if start.value == 'import' else 'block'} on line {start.line}",
                                _header_span(path, head, lbrace), "add `}` after the block's last member"))
            if before is not None:
                rep.insert_after[before.start_pos] = "RBRACE"
            return rep
        if tok.type == "_NL":
            found = "the end of the line"
            example = f"{start.value} = ..."
        else:
            found = _describe_token(tok)
            example = f"{start.value} = {_rest_of_statement(text, tok.start_pos)}"
        return _Repair(error("E005", f"expected `=` after the field name `{start.value}`, found {found}",
                             _tok_span(path, tok), f"write `{example}`"),
                       skip={start.start_pos: "member"})

    # --- `nodes = 1 gpus = 8`: the second name lexed as a unit, then `=`
    if in_block and tok.type == "EQUAL" and prev is not None and "after_unit" in where and start is not None:
        number = _prev_token(run, prev.start_pos)
        first = text[start.start_pos:prev.start_pos].rstrip()
        num_text = f"`{number.value}`" if number is not None and number.type == "NUMBER" else "the number"
        rep = _Repair(error("E004", f"two members on one line: `{prev.value}` reads as the unit of "
                            f"{num_text}, and then `=` cannot follow",
                            _tok_span(path, prev),
                            f"separate members with `;` or a newline: `{first}; {prev.value} = ...`"))
        if number is not None and _NAME_RE.match(prev.value):
            rep.insert_after[number.start_pos] = "SEMICOLON"
        else:
            rep.skip[start.start_pos] = "member"
        return rep

    # --- `alpha = 2 us bandwidth = 3`: a name after a complete value, then `=` (the `=` after the name is
    # text the parser has not read yet: code)
    if (in_block and start is not None and prev is not None and "value_end" in where
            and _NAME_RE.match(str(tok.value)) and text[tok.end_pos:].lstrip(" \t").startswith("=")):
        first = text[start.start_pos:tok.start_pos].rstrip()
        return _Repair(error("E004", f"two members on one line: `{tok.value}` starts a new member",
                             _tok_span(path, tok),
                             f"separate members with `;` or a newline: `{first}; {tok.value} = ...`"),
                       insert_after={prev.start_pos: "SEMICOLON"})

    # --- `tp = 8, pp = 2`: a comma between members (code: told by the token where no bracket is open, in
    # any state after a value)
    if tok.type == "COMMA" and in_block and not run.brackets:
        return _Repair(error("E001", "a `,` cannot separate members", _tok_span(path, tok),
                             "separate members with `;` or a newline"), skip={tok.start_pos: "token"})

    # --- `import std/gpus.ccost`: a path without quotes
    if prev is not None and "after_import" in where and tok.type != "STRING":
        path_text = _rest_of_statement(text, tok.start_pos) if tok.type != "_NL" else "PATH"
        return _Repair(error("E001", f"`import` needs a path in double quotes, found {_describe_token(tok)}",
                             _tok_span(path, tok), f"write `import \"{path_text}\"`"),
                       skip={prev.start_pos: "item"})

    # --- `x = 3` outside any block
    if (braces == 0 and not in_block and (start is None or start is tok) and "item_start" in where
            and isinstance(tok.value, str)
            and _NAME_RE.match(tok.value) and text[tok.end_pos:].lstrip(" \t").startswith("=")):
        return _Repair(error("E001", f"the member `{tok.value} = ...` is outside any block",
                             _tok_span(path, tok),
                             "members go between a block's `{ }`; is there a `}` too early above?"),
                       skip={tok.start_pos: "item"})

    # --- top level: something that is not a block or an import
    if (braces == 0 and not in_block and (start is None or start is tok) and "item_start" in where
            and tok.type != "RBRACE"):
        msg = f"expected a block ({', '.join(BLOCK_KINDS)}) or `import`, found {_describe_token(tok)}"
        help_ = None
        if isinstance(tok.value, str) and _NAME_RE.match(tok.value):
            close = difflib.get_close_matches(tok.value, BLOCK_KINDS + ("import",), n=1, cutoff=0.6)
            if close:
                help_ = f"did you mean `{close[0]}`?"
        return _Repair(error("E001", msg, _tok_span(path, tok), help_), skip={tok.start_pos: "item"})
    if tok.type == "RBRACE" and not in_block:  # code: a `}` too many is its token, after any item
        return _Repair(error("E001", "this `}` closes no block", _tok_span(path, tok),
                             "remove it, or check the block above for a `}` too many"),
                       skip={tok.start_pos: "token"})

    # --- in a block header
    if (not in_block and start is not None and where & {"header", "after_extends"}
            and start.type in _KIND_TYPES):
        msg = (f"unexpected {_describe_token(tok)} in the header of a `{start.value}` block; expected "
               f"{_describe_expected(expected)}")
        return _Repair(error("E001", msg, _tok_span(path, tok),
                             f"a block reads `{start.value} NAME \"Title\" {{ ... }}` "
                             f"(title and `extends OTHER` optional)"),
                       skip={start.start_pos: "item"})

    # --- anything else: name what was found and what would fit, drop the member
    bracket = run.brackets[-1] if run.brackets else None
    found = "end of line" if tok.type == "_NL" else _describe_token(tok)
    msg = f"unexpected {found}; expected {_describe_expected(expected, bracket)}"
    help_ = None
    if tok.type == "_NL" and prev is not None and prev.type in ("PLUS", "MINUS", "STAR", "SLASH"):
        help_ = f"the expression ends with `{prev.value}`; finish it or wrap a long one in `( )`"
    elif tok.type == "EQUAL":
        help_ = "`=` only joins a field name to its value, once per member"
    elif bracket is not None and bracket.type == "LSQB" and tok.type in ("NUMBER", "NAME", "STRING", "UNIT"):
        help_ = "separate list items with `,`: `[1, 2, 4]`"
    elif tok.type == "DOT":
        help_ = "a reference is `NAME` or `NAME.FIELD`, one dot at most"
    rep = _Repair(error("E001", msg, _tok_span(path, tok), help_))
    if start is not None:
        rep.skip[start.start_pos] = "member" if in_block else "item"
    elif tok.type != "$END":
        rep.skip[tok.start_pos] = "member" if in_block else "item"
    return rep


def _block_label(run: _Run, head: Token, lbrace: Token | None) -> str:
    """`plan tp8` for the block whose header starts at ``head``."""
    words = [head.value]
    end = lbrace.start_pos if lbrace is not None else 1 << 60
    for tok, _d, _b in run.tokens:
        if head.start_pos < tok.start_pos < end and tok.type == "NAME":
            words.append(tok.value)
            break
    return "`" + " ".join(words) + "`"


def _diagnose_chars(exc: UnexpectedCharacters, run: _Run, path: str, text: str) -> _Repair:
    pos = exc.pos_in_stream
    ch = text[pos] if pos < len(text) else ""
    line, col = exc.line, exc.column
    start, _depth, _braces = _statement_start(run, pos)
    in_block = bool(run.blocks)
    eol = text.find("\n", pos)
    eol = len(text) if eol == -1 else eol
    if eol > pos and text[eol - 1] == "\r":
        eol -= 1
    if ch == '"':
        rep = _Repair(error("E003", "this string is never closed on its line",
                            Span(path, line, col, line, col + max(eol - pos, 1)),
                            "end the string with `\"` on the same line (write `\\\"` for a quote inside it)"),
                      blank=[(pos, eol)])
        rest = text[pos:eol].rstrip()
        if rest.endswith("{") and start is not None and not in_block:
            # `link a "NVLink {`: the title lost its closing quote; keep the `{` so the body still parses
            rep.blank = [(pos, pos + len(rest) - 1)]
            return rep
    elif ch == ":" and "EQUAL" in (exc.allowed or ()) and start is not None:
        rep = _Repair(error("E005", f"expected `=` after the field name `{start.value}`, found `:`",
                            Span.point(path, line, col),
                            f"write `{start.value} = {_rest_of_statement(text, pos + 1)}`"),
                      blank=[(pos, pos + 1)])
    else:
        shown = ch if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}"
        help_ = None
        if ch in "'`":
            help_ = "strings are written in double quotes: \"...\""
        elif ch == "\t" or ch.isspace():
            help_ = "use plain spaces"
        elif ord(ch) > 127:
            help_ = "units and names are ASCII, except µ in µs"
        rep = _Repair(error("E001", f"unexpected character `{shown}`", Span.point(path, line, col), help_),
                      blank=[(pos, pos + 1)])
    if start is not None:
        rep.skip[start.start_pos] = "member" if in_block else "item"
    return rep


# ---------------------------------------------------------------------------------------------------
# Lark tree -> ccost.syntax.tree

class _Problem(Exception):
    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic


_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_ESCAPE_RE = re.compile(r"\\(.)")


@v_args(meta=True)
class _Builder(Transformer_NonRecursive):
    """Builds the frozen tree. Non-recursive: a 10,000-deep expression must not overflow the stack
    (it is refused with E006 anyway, but the refusal itself must not crash)."""

    def __init__(self, path: str, text: str):
        super().__init__(visit_tokens=False)
        self.path = path
        self.text = text
        self.diags: list[Diagnostic] = []
        self._depth: dict[int, int] = {}

    def build(self, lark_tree, comments: list[Token]) -> tuple[T.File, list[Diagnostic]]:
        try:
            items = self.transform(lark_tree)
        except VisitError as exc:  # Lark wraps whatever a callback raises; unwrap ours
            if isinstance(exc.orig_exc, _Problem):
                self.diags.append(exc.orig_exc.diagnostic)
                items = ()
            else:
                raise exc.orig_exc from None
        except _Problem as exc:
            self.diags.append(exc.diagnostic)
            items = ()
        lines = self.text.count("\n")
        last = self.text.rsplit("\n", 1)[-1]
        span = Span(self.path, 1, 1, lines + 1, len(last) + 1)
        cs = tuple(T.Comment(c.value.rstrip("\r"), self._tok(c)) for c in comments)
        return T.File(self.path, tuple(items), cs, span), self.diags

    # --- helpers
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span.point(self.path, 1, 1)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _expr(self, node, *children):
        depth = 1 + max((self._depth.get(id(c), 1) for c in children), default=0)
        if depth > MAX_DEPTH:
            raise _Problem(error("E006", f"expression nested more than {MAX_DEPTH} levels deep",
                                 node.span, "split it into named parts, or check that the file is not generated"))
        self._depth[id(node)] = depth
        return node

    def _string(self, tok: Token) -> str:
        body = tok.value[1:-1]

        def sub(m: re.Match) -> str:
            c = m.group(1)
            if c in _ESCAPES:
                return _ESCAPES[c]
            col = tok.column + 1 + m.start()
            self.diags.append(error("E001", f"unknown escape `\\{c}` in a string",
                                    Span(self.path, tok.line, col, tok.line, col + 2),
                                    "only \\\" \\\\ \\n and \\t are escapes; write `\\\\` for a backslash"))
            return c

        return _ESCAPE_RE.sub(sub, body) if "\\" in body else body

    # --- structure
    def start(self, meta, children):
        return tuple(c for c in children if c is not None)

    def import_(self, meta, children):
        _kw, s = children
        return T.Import(self._string(s), self._span(meta), self._tok(s))

    def kind(self, meta, children):
        return children[0]

    def field(self, meta, children):
        return children[0]

    def block(self, meta, children):
        kind, name, title, ext_kw, ext_name, _lb, members, _rb = children
        span = self._span(meta)
        kind_span = self._tok(kind)
        if not SC.SCHEMA[kind.value].named:  # policy
            if name is not None:
                self.diags.append(error("E001", f"a {kind.value} block has no name; found `{name.value}`",
                                        self._tok(name), "write `policy { max_overhead = 30 % }`"))
        elif name is None:
            self.diags.append(error("E001", f"a `{kind.value}` block needs a name",
                                    Span(self.path, kind.line, kind.end_column, kind.line, kind.end_column + 1),
                                    f"write `{kind.value} NAME {{ ... }}`, like `{kind.value} {_example_name(kind.value)} {{`"))
        if name is not None and name.value in KEYWORDS:
            self.diags.append(error("E110", f"`{name.value}` is a keyword and cannot name a block",
                                    self._tok(name), f"pick another name, like `my_{name.value}`"))
        if ext_name is not None and ext_name.value in KEYWORDS:
            self.diags.append(error("E110", f"`{ext_name.value}` is a keyword, not the name of a block",
                                    self._tok(ext_name)))
        return T.Block(
            kind=kind.value,
            name=None if name is None or kind.value == "policy" else name.value,
            title=self._string(title) if title is not None else None,
            extends=ext_name.value if ext_name is not None else None,
            members=members,
            span=span, kind_span=kind_span,
            name_span=self._tok(name) if name is not None and kind.value != "policy" else None,
            extends_span=self._tok(ext_name) if ext_name is not None else None,
        )

    def body(self, meta, children):
        return tuple(c for c in children if isinstance(c, T.Member))

    def member(self, meta, children):
        name, value = children
        return T.Member(str(name.value), value, self._span(meta), self._tok(name))

    # --- expressions
    def number(self, meta, children):
        num, unit = children
        try:
            value = float(num.value.replace("_", ""))
        except ValueError:  # the NUMBER pattern should make this impossible
            raise _Problem(error("E001", f"`{num.value}` is not a number", self._tok(num)))
        if value == float("inf"):
            self.diags.append(error("E203", f"`{num.value}` is too large for a number", self._tok(num)))
        return self._expr(T.Number(value, num.value, unit.value if unit is not None else None,
                                   self._span(meta), self._tok(unit) if unit is not None else None))

    def string(self, meta, children):
        return self._expr(T.String(self._string(children[0]), self._span(meta)))

    def true(self, meta, children):
        return self._expr(T.Bool(True, self._span(meta)))

    def false(self, meta, children):
        return self._expr(T.Bool(False, self._span(meta)))

    def ref(self, meta, children):
        return self._expr(T.Ref(children[0].value, None, self._span(meta)))

    def dotted(self, meta, children):
        return self._expr(T.Ref(children[0].value, children[1].value, self._span(meta)))

    def call(self, meta, children):
        args = tuple(c for c in children[1:] if c is not None)
        return self._expr(T.Call(children[0].value, args, self._span(meta)), *args)

    def list(self, meta, children):
        items = tuple(c for c in children if c is not None)
        return self._expr(T.ListExpr(items, self._span(meta)), *items)

    def paren(self, meta, children):
        return self._expr(T.Paren(children[0], self._span(meta)), children[0])

    def neg(self, meta, children):
        return self._expr(T.Neg(children[0], self._span(meta)), children[0])

    def _bin(self, op, meta, children):
        left, right = children
        return self._expr(T.BinOp(op, left, right, self._span(meta)), left, right)

    def add(self, meta, children):
        return self._bin("+", meta, children)

    def sub(self, meta, children):
        return self._bin("-", meta, children)

    def mul(self, meta, children):
        return self._bin("*", meta, children)

    def div(self, meta, children):
        return self._bin("/", meta, children)


# The name in the help for a block without one: the schema's example's (`plan tp8 ...`), but for these
# two, whose help said so before the schema's examples were written.
_EXAMPLE_NAME = {"compare": "layouts", "search": "best"}


def _example_name(kind: str) -> str:
    return _EXAMPLE_NAME.get(kind) or SC.SCHEMA[kind].example.split()[1]
