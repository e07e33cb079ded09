"""The code registry against the sources, both ways (recipe (d) of docs/architecture.md).

``Diagnostic`` refuses an unregistered code only when something raises it, which a test reaches only if a
case does; and nothing else noticed a registered code that no stage raises. This test reads every module
of compiler/ccost with ``ast`` and sorts each code-shaped literal (``E201``, ``W305``):

* raised: the first argument of ``error(...)``, ``warning(...)`` or ``Diagnostic(...)``, a keyword argument
  whose name ends in ``code`` (``code="E501"``, ``missing_code="E302"``), or the default of a parameter or
  a field so named;
* mentioned: any other code-shaped literal (``d.code == "E205"``), and a code named inside a message
  (``"... (ccost check warns W401)"``). Docstrings and comments are prose for programmers, and skipped.

Then: every code raised or mentioned is in ``CODES``; every code in ``CODES`` is raised, or is in
``RESERVED`` with its reason; no reserved code is raised or named to a user.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from ccost.diagnostics import CODES, RESERVED

PACKAGE = Path(__file__).resolve().parent.parent / "compiler" / "ccost"
CODE = re.compile(r"[EW]\d{3}")
IN_TEXT = re.compile(r"\b[EW]\d{3}\b")
RAISERS = ("error", "warning", "Diagnostic")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _raising_places(tree: ast.AST) -> set[int]:
    """The ids of the expressions whose value becomes a diagnostic's code."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in RAISERS and node.args:
                out.add(id(node.args[0]))
            out.update(id(k.value) for k in node.keywords if k.arg and k.arg.endswith("code"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                if arg.arg.endswith("code"):
                    out.add(id(default))
            for arg, default in zip(a.kwonlyargs, a.kw_defaults):
                if default is not None and arg.arg.endswith("code"):
                    out.add(id(default))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if node.target.id.endswith("code"):
                out.add(id(node.value))
    return out


def scan(source: str, where: str = "<text>") -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(raised, mentioned): code -> the places (``file:line``) it occurs, in one module's source."""
    tree = ast.parse(source)
    docs, raising = _docstrings(tree), _raising_places(tree)
    raised: dict[str, list[str]] = {}
    mentioned: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        at = f"{where}:{node.lineno}"
        if CODE.fullmatch(node.value):
            (raised if id(node) in raising else mentioned).setdefault(node.value, []).append(at)
        else:
            for code in IN_TEXT.findall(node.value):
                mentioned.setdefault(code, []).append(at)
    return raised, mentioned


def problems(raised: dict[str, list[str]], mentioned: dict[str, list[str]],
             codes: dict[str, str], reserved: dict[str, str]) -> list[str]:
    """What is wrong between the sources and the registry, one sentence each."""
    out = []
    for code, places in sorted({**mentioned, **raised}.items()):
        if code not in codes:
            out.append(f"{code} is used at {', '.join(places)} but is not in diagnostics.CODES")
    for code in sorted(codes):
        if code not in raised and code not in reserved:
            out.append(f"{code} is in diagnostics.CODES but nothing raises it: raise it, or put it in "
                       "diagnostics.RESERVED with the reason")
    for code in sorted(reserved):
        if code not in codes:
            out.append(f"{code} is in diagnostics.RESERVED but not in CODES")
        for place in raised.get(code, []) + mentioned.get(code, []):
            out.append(f"{code} is reserved (not raised) but {place} raises it or names it")
    return out


def scan_package() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    raised: dict[str, list[str]] = {}
    mentioned: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "diagnostics.py" and path.parent == PACKAGE:
            continue  # the registry itself
        r, m = scan(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))
        for code, places in r.items():
            raised.setdefault(code, []).extend(places)
        for code, places in m.items():
            mentioned.setdefault(code, []).extend(places)
    return raised, mentioned


def test_every_code_in_the_sources_is_registered_and_every_registered_code_is_raised():
    raised, mentioned = scan_package()
    assert problems(raised, mentioned, CODES, RESERVED) == []


def test_the_scan_finds_the_codes_it_should():
    """The scan is not vacuous: it sees the stages' codes where they are raised (a few by hand, from the
    sources: E201 in check/fields.py, E502 in gitio.py, E302 as the schema's `missing_code`, E002 as the
    default of userfiles' `code` parameter), and a comparison is a mention, not a raise."""
    raised, mentioned = scan_package()
    assert len(raised) == len(CODES) - len(RESERVED) > 40
    assert any(p.startswith("ccost/check/fields.py:") for p in raised["E201"])
    assert any(p.startswith("ccost/gitio.py:") for p in raised["E502"])
    assert any(p.startswith("ccost/schema.py:") for p in raised["E302"])
    assert any(p.startswith("ccost/userfiles.py:") for p in raised["E002"])
    assert any(p.startswith("ccost/check/search.py:") for p in mentioned["E205"])


PLANTED = '''
"""A module that mentions E999 in its docstring: prose, skipped."""
from ccost.diagnostics import error, warning, Diagnostic, Severity


def f(span, code: str = "E998"):
    out = [error("E101", "unknown reference", span), warning("W777", "a new warning", span)]
    out.append(Diagnostic("E778", Severity.ERROR, "by hand"))
    if out[0].code == "E779":  # compared, not raised
        pass
    return read(span, missing_code="E780"), "see W401 in the docs"
'''


def test_the_check_fails_on_a_planted_module():
    """The test above can fail: a planted module raises unregistered codes in each raising form, compares
    to one, names a reserved one in a message, and a registry has a code nothing raises."""
    raised, mentioned = scan(PLANTED, "planted.py")
    assert sorted(raised) == ["E101", "E778", "E780", "E998", "W777"]
    assert sorted(mentioned) == ["E779", "W401"]  # not E999: docstrings are skipped
    codes = {"E101": "unknown reference", "E102": "duplicate name", "W401": "memory"}
    found = problems(raised, mentioned, codes, {"W401": "the checklist judges memory"})
    assert found == [
        "E778 is used at planted.py:8 but is not in diagnostics.CODES",
        "E779 is used at planted.py:9 but is not in diagnostics.CODES",
        "E780 is used at planted.py:11 but is not in diagnostics.CODES",
        "E998 is used at planted.py:6 but is not in diagnostics.CODES",
        "W777 is used at planted.py:7 but is not in diagnostics.CODES",
        "E102 is in diagnostics.CODES but nothing raises it: raise it, or put it in diagnostics.RESERVED "
        "with the reason",
        "W401 is reserved (not raised) but planted.py:11 raises it or names it",
    ]


@pytest.mark.parametrize("code", sorted(RESERVED))
def test_a_reserved_code_says_why_in_the_reference(code):
    from ccost import schema as SC

    assert RESERVED[code] and f"| {code} | {CODES[code]} (reserved, not raised: {RESERVED[code]}) |" in \
        SC.markdown()


def test_every_registered_code_is_exercised_by_a_test():
    # A code a user can meet is pinned by a test: a tests/bad case's inline expectation (E1xx-E3xx, W3xx
    # mostly) or a test module that names it (parse errors, evaluation, the commands' E5xx). A new code
    # with neither fails here.
    import re
    from pathlib import Path

    from ccost import diagnostics as D

    tests = Path(__file__).parent
    me = Path(__file__).resolve()
    text = "".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(tests.rglob("*"))
                   if p.is_file() and p.suffix in (".ccost", ".py", ".txt", ".yaml", ".json")
                   and p.resolve() != me)
    named = set(re.findall(r"\b[EW]\d{3}\b", text))
    live = set(D.CODES) - set(D.RESERVED)
    assert sorted(live - named) == []
