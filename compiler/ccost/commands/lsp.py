"""``ccost lsp``: the language server, on standard input and output (editors start it; see
docs/editors.md). Needs the optional pygls (the ``lsp`` extra); without it, error E512 gives the command
that installs it into the Python that runs ccost (``ccost.extras``).

Diagnostics as you type (``ccost check``), hover (a field's doc and unit, its value in SI, a plan's key
numbers from ``ccost eval``), completion of fields, units, enum values and block names, go to definition
across imports, and formatting through ``ccost fmt``.
"""

from __future__ import annotations

import argparse

from ccost.extras import install_hint

HELP = "the language server for editors (stdio); needs pygls, the `lsp` extra (docs/editors.md)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default, and the only transport; "
                             "accepted because editors' clients pass it)")


def run(args: argparse.Namespace) -> int:
    try:
        import pygls  # noqa: F401
    except ImportError:
        from ccost.diagnostics import CcostError, error

        how = install_hint("lsp", "install pygls (version 2) with the pip of the Python that runs ccost")
        raise CcostError(error("E512", "ccost lsp needs pygls (the `lsp` extra), which is not installed",
                               None, f"add it to this installation of ccost: {how}")) from None
    from ccost.lsp.server import main

    return main()
