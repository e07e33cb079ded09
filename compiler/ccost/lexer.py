"""A Pygments lexer for ``.ccost`` specs: the review's source appendix, and any editor or site that uses
Pygments (registered as the ``ccost`` entry point in pyproject.toml, so ``pygmentize -l ccost`` works).

The lexer is deliberately forgiving (a highlighter must never refuse a file): it follows docs/language.md's
lexical rules rather than the full grammar. Two things need care because the block kinds are also
field names: ``model = llama3_70b`` inside a plan is a field, ``model llama3_70b "..." {`` opens a block.
A word followed by ``=`` is always a field; a block kind followed by a name, a title or ``{`` is a block.
"""

from __future__ import annotations

from pygments.lexer import Future, RegexLexer, bygroups, words
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

FUNCTIONS = ("min", "max", "ceil", "floor", "log2", "sqrt")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NUMBER = r"(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?"
# A unit follows its number after spaces on the same line: 450 GB/s, 2 µs, 30 %, 400 Gbit/s, 80 GiB.
_UNIT = r"%|[A-Za-zµμ][A-Za-z0-9µμ]*(?:/[A-Za-zµμ][A-Za-z0-9µμ]*)?"


class _Kinds(Future):
    """A regex with the schema's block kinds as an alternation in place of ``{kinds}``, built when the lexer
    is first used (Pygments resolves a ``Future`` then): importing this module, which Pygments does to find
    its lexers, stays as cheap as before; the schema (no Pint, no numpy) is read only to highlight."""

    def __init__(self, pattern: str):
        self.pattern = pattern

    def get(self) -> str:
        from ccost.schema import block_kinds

        return self.pattern.replace("{kinds}", "|".join(block_kinds()))


# A unit is a number's annotation, not a name: its own token type, styled like numbers by default.
Unit = Number.Unit


class CcostLexer(RegexLexer):
    """Lexer for ccost capacity-plan specs (``*.ccost``)."""

    name = "ccost"
    aliases = ["ccost"]
    filenames = ["*.ccost"]
    mimetypes = ["text/x-ccost"]
    version_added = ""

    tokens = {
        "root": [
            (r"[ \t\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'"', String.Double, "string"),
            # field = expression (checked before block kinds: `model = x` is a field)
            (rf"({_NAME})([ \t]*)(=)(?!=)", bygroups(Name.Attribute, Whitespace, Operator)),
            # KIND NAME ... / KIND "title" / KIND {  (policy has no name)
            (_Kinds(rf"({{kinds}})\b([ \t]+)({_NAME})"), bygroups(Keyword.Declaration, Whitespace, Name.Class)),
            (_Kinds(r'({kinds})\b(?=[ \t]*[{"])'), Keyword.Declaration),
            (r"(import)\b", Keyword.Namespace),
            (rf"(extends)\b([ \t]+)({_NAME})", bygroups(Keyword, Whitespace, Name.Class)),
            (r"extends\b", Keyword),
            (words(("true", "false"), suffix=r"\b"), Keyword.Constant),
            (rf"({'|'.join(FUNCTIONS)})(?=[ \t]*\()", Name.Builtin),
            (rf"({_NUMBER})([ \t]+)({_UNIT})", bygroups(Number, Whitespace, Unit)),
            (rf"({_NUMBER})(%)", bygroups(Number, Unit)),
            (_NUMBER, Number),
            (rf"({_NAME})(\.)({_NAME})", bygroups(Name, Punctuation, Name.Attribute)),
            (_NAME, Name),
            (r"[{}\[\](),;.]", Punctuation),
            (r"[+\-*/]", Operator),
            (r".", Text),  # anything else: shown as is, never an error token
        ],
        "string": [
            (r'[^"\\\n]+', String.Double),
            (r'\\["\\]', String.Escape),
            (r"\\.", String.Double),
            (r'"', String.Double, "#pop"),
            (r"\n", Whitespace, "#pop"),  # unterminated string: stop at the line end
        ],
    }

    @staticmethod
    def analyse_text(text: str) -> float:
        head = text[:2000]
        score = 0.0
        for kind in ("link", "gpu", "cluster", "plan"):
            if f"\n{kind} " in "\n" + head:
                score += 0.2
        return min(score, 0.9)
