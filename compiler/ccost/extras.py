"""The commands that add one of ccost's optional extras (``lsp``, ``distributed``, ``kernels``,
``completion``) to the installation that is running. ccost is not on the package index, so
``pip install 'ccost[EXTRA]'`` cannot work: every hint that names an extra names these commands instead."""

from __future__ import annotations


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


def install_hint(extra: str, fallback: str | None = None) -> str:
    """The commands of ``install_command`` as one hint (```a` or `b```), or ``fallback`` (by default: the
    extra's requirements installed by the pip of the Python that runs ccost) when none can be named."""
    commands = install_command(extra)
    if commands:
        return " or ".join(f"`{c}`" for c in commands)
    return fallback or f"install ccost's `{extra}` extra with the pip of the Python that runs ccost"
