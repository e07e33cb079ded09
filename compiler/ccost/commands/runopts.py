"""``--jobs N`` and ``--scheduler ADDRESS``: where the searches of ``eval``, ``report`` and ``diff`` run.

``--jobs`` defaults to the cores this process may use (``os.sched_getaffinity``), and a larger ``--jobs`` is
cut to them unless ``--oversubscribe`` (with a note on stderr saying so); a search of at least
``search.POOL_MIN_POINTS`` points is then split across that many processes, merged exactly as one process
would (a smaller one runs here: sharing it would cost more than it gains; an explicit ``--jobs N`` always
shares a search of more than one chunk).
``--scheduler`` (or the environment variable ``CCOST_SCHEDULER``) runs them on a Dask cluster instead
(``ccost.remote``; the ``distributed`` extra).
"""

from __future__ import annotations

import argparse
import os
import sys

ENV = "CCOST_SCHEDULER"


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number of processes, like `--jobs 4`; got `{text}`") \
            from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes at least 1 process; got {n}")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ccost.cores import available  # not ccost.search: building the parser imports no pricing code

    parser.add_argument("--jobs", "-j", metavar="N", type=_jobs, default=None,
                        help=f"processes that share a large search's chunks (default: the cores available, "
                             f"here {available()}, which is also the most it starts unless "
                             f"--oversubscribe); `--jobs 1` runs in this process")
    parser.add_argument("--oversubscribe", action="store_true",
                        help="start as many processes as --jobs says even when that is more than the cores "
                             "available")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help=f"run searches on the Dask cluster whose scheduler is at ADDRESS (like "
                             f"tcp://10.0.0.5:8786; default: ${ENV}); needs ccost's `distributed` extra")


def execution(args: argparse.Namespace):
    """The ``search.execution`` context the options ask for."""
    from ccost import search

    scheduler = getattr(args, "scheduler", None) or os.environ.get(ENV) or None
    jobs = getattr(args, "jobs", None)
    force = bool(getattr(args, "oversubscribe", False))
    if jobs is not None and not force and not scheduler and jobs > search.capped_jobs(jobs):
        cores = search.default_jobs()
        print(f"ccost: --jobs {jobs} is more than the {cores} core{'s' if cores != 1 else ''} this process "
              f"may use: running {cores} (add --oversubscribe to start {jobs})", file=sys.stderr)
    return search.execution(jobs=jobs if jobs is not None else search.default_jobs(), scheduler=scheduler,
                            auto=jobs is None, oversubscribe=force)
