"""Where the grammar, templates and the bundled std library live.

In a wheel they are copied into ``ccost/_data/``; in a checkout (editable install or tests) they sit at
the top of the repository (``grammar/``, ``templates/``, ``specs/std/``). Look in the package first.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parent.parent

_LOCATIONS = {
    "grammar": (_PACKAGE / "_data" / "grammar", _REPO / "grammar"),
    "templates": (_PACKAGE / "_data" / "templates", _REPO / "templates"),
    "std": (_PACKAGE / "_data" / "std", _REPO / "specs" / "std"),
}


def resource_dir(name: str) -> Path:
    """The folder of a bundled resource: ``grammar``, ``templates`` or ``std``."""
    for candidate in _LOCATIONS[name]:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"ccost is installed without its {name!r} folder (looked in "
                            + ", ".join(str(p) for p in _LOCATIONS[name]) + ")")
