"""A progress bar on the terminal, for work that takes longer than a second (a large ``search``).

The core never draws: it calls ``progress(name, done, total)`` as chunks finish, and the CLI hands it a
``Bar``. The bar draws only when its stream is a terminal and the work has run for ``after`` seconds, so
pipes, files and CI logs never see it, and quick searches never flicker. It erases itself when done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Self, TextIO


def rate_text(rate: float) -> str:
    """Points per second, three significant figures: ``950 points/s``, ``12.3 k points/s``,
    ``1.38 M points/s``."""
    for factor, prefix in ((1e9, "G "), (1e6, "M "), (1e3, "k ")):
        if rate >= factor:
            return f"{rate / factor:.3g} {prefix}points/s"
    return f"{rate:.3g} points/s"


def eta_text(seconds: float) -> str:
    """Time left as ``m:ss`` (``h:mm:ss`` past an hour), rounded up to the second."""
    s = max(0, math.ceil(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class Bar:
    """``progress(name, done, total)`` drawn as ``search NAME  [#####.....]  45 %  1,234,567 / 2,720,000
    points  1.38 M points/s  ETA 0:01`` on one line of ``stream`` (stderr). The rate is the points done
    since the first report of this search over the time since then; the ETA is the points left at that
    rate. Use as a context manager so the line is cleared at the end."""

    WIDTH = 30

    def __init__(self, stream: TextIO, after: float = 1.0, every: float = 0.1,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.after = after
        self.every = every
        self.clock = clock
        try:
            self.tty = bool(stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False
        self.name: str | None = None
        self.start = 0.0
        self.start_done = 0
        self.done = 0
        self.last = -1.0
        self.drawn = False

    def __call__(self, name: str, done: int, total: int) -> None:
        now = self.clock()
        if name != self.name or done < self.done:  # another search, or the same one run again (ccost diff)
            self.clear()
            self.name, self.start, self.start_done, self.last = name, now, done, -1.0
        self.done = done
        if not self.tty or now - self.start < self.after or now - self.last < self.every:
            return
        self.last = now
        frac = done / total if total else 1.0
        fill = int(frac * self.WIDTH)
        elapsed, counted = now - self.start, done - self.start_done
        speed = ""
        if elapsed > 0 and counted > 0:
            rate = counted / elapsed
            speed = f"  {rate_text(rate)}  ETA {eta_text(max(total - done, 0) / rate)}"
        self.stream.write(f"\r\x1b[Ksearch {name}  [{'#' * fill}{'.' * (self.WIDTH - fill)}]  "
                          f"{frac * 100:3.0f} %  {done:,} / {total:,} points{speed}")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        """Erase the bar's line (if it was drawn)."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.clear()
