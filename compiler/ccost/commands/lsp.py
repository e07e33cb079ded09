"""``ccost lsp``: the language server, on standard input and output (editors start it; see
docs/editors.md). Needs the optional pygls (the ``lsp`` extra); without it, error E512 gives the command
that installs it into the Python that runs ccost (``install_command``).

Diagnostics as you type (``ccost check``), hover (a field's doc and unit, its value in SI, a plan's key
numbers from ``ccost eval``), completion of fields, units, enum values and block names, go to definition
across imports, and formatting through ``ccost fmt``.
"""

from __future__ import annotations

import argparse

HELP = "the language server for editors (stdio); needs pygls, the `lsp` extra (docs/editors.md)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default, and the only transport; "
                             "accepted because editors' clients pass it)")


def install_command(extra: str) -> list[str]:
    """Commands that add ccost's optional ``extra`` to the installation that is running: ccost is not on
    the package index, so ``pip install 'ccost[EXTRA]'`` cannot work. Always the extra's own requirements
    (from ccost's installed metadata, so the pins are pyproject.toml's) installed by this Python's pip;
    first, when ccost is installed editable from a checkout, the extra added to that checkout's install."""
    import importlib.metadata as md
    import json
    import shlex
    import sys
    from urllib.parse import unquote, urlparse

    python = shlex.quote(sys.executable)
    marker = f"extra == '{extra}'"
    try:
        dist = md.distribution("ccost")
        requirements = [r.split(";")[0].strip() for r in dist.requires or () if marker in r.replace('"', "'")]
        origin = json.loads(dist.read_text("direct_url.json") or "{}")
    except (md.PackageNotFoundError, ValueError):  # run from a source tree that was never installed
        requirements, origin = [], {}
    out = []
    url = urlparse(origin.get("url", ""))
    if origin.get("dir_info", {}).get("editable") and url.scheme == "file":
        out.append(f"{python} -m pip install -e {shlex.quote(unquote(url.path) + f'[{extra}]')}")
    if requirements:
        out.append(f"{python} -m pip install " + " ".join(shlex.quote(r) for r in requirements))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        import pygls  # noqa: F401
    except ImportError:
        from ccost.diagnostics import CcostError, error

        commands = install_command("lsp")
        how = (" or ".join(f"`{c}`" for c in commands) if commands
               else "install pygls (version 2) with the pip of the Python that runs ccost")
        raise CcostError(error("E512", "ccost lsp needs pygls (the `lsp` extra), which is not installed",
                               None, f"add it to this installation of ccost: {how}")) from None
    from ccost.lsp.server import main

    return main()
