"""``ccost lsp``: the language server, on standard input and output (editors start it; see
docs/editors.md). Needs the optional pygls: ``pip install 'ccost[lsp]'``.

Diagnostics as you type (``ccost check``), hover (a field's doc and unit, its value in SI, a plan's key
numbers from ``ccost eval``), completion of fields, units, enum values and block names, go to definition
across imports, and formatting through ``ccost fmt``.
"""

from __future__ import annotations

import argparse

HELP = "the language server for editors (stdio); needs `pip install 'ccost[lsp]'`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default, and the only transport; "
                             "accepted because editors' clients pass it)")


def run(args: argparse.Namespace) -> int:
    try:
        import pygls  # noqa: F401
    except ImportError:
        from ccost.diagnostics import CcostError, error

        raise CcostError(error("E512", "ccost lsp needs pygls, which is not installed",
                               None, "install the extra: pip install 'ccost[lsp]'")) from None
    from ccost.lsp.server import main

    return main()
