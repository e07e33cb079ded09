"""Charts drawn once and kept by content (issue 16): a reviewer re-rendering a plan does not pay matplotlib
again for the charts whose numbers did not change.

A chart's SVG is a pure function of the values plotted (``ccost.report.charts`` is deterministic: fixed
hash salt, no date), of the code that draws it and of matplotlib. The key is the SHA-256 of all three:
the function's name and the ``repr`` of its arguments (floats round-trip exactly), the source of
``charts.py`` and ``calibrate/plot.py``, and matplotlib's version. A hit returns the stored SVG without
importing matplotlib at all (its import alone is ~0.3 s); a miss draws and stores it. So a cached review is
byte-identical to an uncached one.

Where: ``charts/`` in ccost's cache folder, beside the parser's tables (``$XDG_CACHE_HOME/ccost`` or
``~/.cache/ccost``, never the shared temp folder); ``CCOST_NO_CACHE=1`` turns it off, as it does the
parser's. A cache that cannot be read or written is skipped silently: it only ever saves time. At most
``LIMIT`` charts are kept (the least recently written go).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

LIMIT = 2000
_memory: dict[str, str] = {}


def cache_root() -> Path | None:
    """ccost's cache folder (``ccost.syntax.parse`` keeps the parser's tables there too), or None when
    ``CCOST_NO_CACHE`` is set."""
    if os.environ.get("CCOST_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ccost"


def cache_dir() -> Path | None:
    """The folder of the chart cache, or None when it is turned off."""
    root = cache_root()
    return root / "charts" if root is not None else None


def template_cache():
    """A Jinja bytecode cache beside the charts (``templates-<key>/``): the review's templates compile once
    per version of their source (Jinja keys each entry by the template's checksum), not on every run
    (~0.15 s). The compiled code also depends on the environment's options (``finalize``, autoescape),
    which Jinja's key does not see: ``render.py``, where they are set, keys the folder. None when the
    cache is off or its folder cannot be made."""
    root = cache_root()
    if root is None:
        return None
    import jinja2

    try:
        env = hashlib.sha256((Path(__file__).resolve().parent / "render.py").read_bytes()).hexdigest()[:12]
    except OSError:
        env = "unknown"
    folder = root / f"templates-{env}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder))


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    """What else the SVG depends on: the drawing code and matplotlib's version (read without importing it)."""
    from importlib import metadata

    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for f in (here / "charts.py", here.parent / "calibrate" / "plot.py"):
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"?")
    try:
        h.update(metadata.version("matplotlib").encode())
    except metadata.PackageNotFoundError:
        h.update(b"no matplotlib")
    return h.hexdigest()


def key(name: str, args: tuple, kwargs: dict) -> str:
    text = f"{_code_version()}\n{name}\n{args!r}\n{sorted(kwargs.items())!r}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _read(folder: Path | None, k: str) -> str | None:
    if folder is None:
        return None
    try:
        svg = (folder / f"{k}.svg").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    # Written whole by os.replace, but a disk can fill or a file be cut: anything but a whole SVG is a miss.
    return svg if "<svg" in svg[:2000] and svg.rstrip().endswith("</svg>") else None


def _write(folder: Path | None, k: str, svg: str) -> None:
    if folder is None:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(svg)
        os.replace(tmp, folder / f"{k}.svg")  # whole or absent: a reader never sees half a chart
        _prune(folder)
    except OSError:
        if tmp is not None:
            try:
                Path(tmp).unlink(missing_ok=True)
            except OSError:
                pass


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(".svg")]
    if len(entries) <= LIMIT:
        return
    entries.sort(key=lambda e: e.stat().st_mtime)
    for e in entries[:len(entries) - LIMIT]:
        try:
            os.unlink(e.path)
        except OSError:
            pass


def cached(fn: Callable[..., str]) -> Callable[..., str]:
    """Decorate a chart function (arguments in, SVG text out) with the content cache."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> str:
        k = key(fn.__qualname__, args, kwargs)
        if k in _memory:
            return _memory[k]
        folder = cache_dir()
        svg = _read(folder, k)
        if svg is None:
            svg = fn(*args, **kwargs)
            _write(folder, k, svg)
        if len(_memory) >= 256:  # a long-lived process (the language server) keeps a bounded few
            _memory.clear()
        _memory[k] = svg
        return svg

    wrapper.uncached = fn  # type: ignore[attr-defined]
    return wrapper
