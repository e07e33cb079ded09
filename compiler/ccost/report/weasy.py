"""Import WeasyPrint without asking the system for the same shared libraries on every run.

WeasyPrint opens Pango, GObject, HarfBuzz and fontconfig through cffi, trying several names for each
(``libgobject-2.0-0``, ``gobject-2.0-0``, ``gobject-2.0``, ... for Windows, macOS and Linux). Each name that
does not open directly makes cffi call ``ctypes.util.find_library``, which on Linux runs ``ldconfig -p``
in a subprocess: 26 lookups, ~0.2 s of every PDF (a fifth of the summary review's time), to learn what
the last run learnt.

``import_weasyprint()`` imports it with ``find_library`` answered from a small table in ccost's cache
folder (``libraries.json`` beside the parser's tables) and filled by the real ``find_library`` on a miss.
The table is valid for one state of the system's library cache (``/etc/ld.so.cache``: installing a library
rewrites it) and of ``LD_LIBRARY_PATH``; otherwise it is rebuilt. ``find_library`` is itself back as it was
when the import returns. With the cache off (``CCOST_NO_CACHE=1``) or unwritable, the import is as usual.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

LD_CACHE = "/etc/ld.so.cache"


def _stamp() -> str:
    try:
        st = os.stat(LD_CACHE)
        ld = f"{st.st_mtime_ns}:{st.st_size}"
    except OSError:
        ld = "none"
    return f"{sys.platform}|{ld}|{os.environ.get('LD_LIBRARY_PATH', '')}"


def import_weasyprint():
    """The ``weasyprint`` module, imported with remembered library lookups when it is not loaded yet."""
    if "weasyprint" in sys.modules:
        return sys.modules["weasyprint"]
    from ccost.report.chart_cache import cache_root

    root = cache_root()
    if root is None or not sys.platform.startswith("linux"):
        import weasyprint

        return weasyprint
    import ctypes.util

    path = root / "libraries.json"
    stamp = _stamp()
    table: dict[str, str | None] = {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(saved, dict) and saved.get("stamp") == stamp and isinstance(saved.get("found"), dict):
            table = {str(k): (v if isinstance(v, str) else None) for k, v in saved["found"].items()}
    except (OSError, ValueError):
        pass
    real = ctypes.util.find_library
    learnt = False

    def find_library(name):
        nonlocal learnt
        if name not in table:
            table[name] = real(name)
            learnt = True
        return table[name]

    ctypes.util.find_library = find_library
    try:
        import weasyprint
    finally:
        ctypes.util.find_library = real
    if learnt:
        _save(path, {"stamp": stamp, "found": table})
    return weasyprint


def _save(path: Path, data: dict) -> None:
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".libraries.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
