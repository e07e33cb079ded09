"""``--jobs N`` and ``--scheduler ADDRESS``: where the searches of ``eval``, ``report`` and ``diff`` run.

``--jobs`` defaults to the cores this process may use (``os.sched_getaffinity``); a search of at least
``search.POOL_MIN_POINTS`` points is then split across that many processes, merged exactly as one process
would (a smaller one runs here: sharing it would cost more than it gains; an explicit ``--jobs N`` always
shares a search of more than one chunk).
``--scheduler`` (or the environment variable ``CCOST_SCHEDULER``) runs them on a Dask cluster instead
(``ccost.remote``; ``pip install 'ccost[distributed]'``).
"""

from __future__ import annotations

import argparse
import os

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
                             f"here {available()}); `--jobs 1` runs in this process")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help=f"run searches on the Dask cluster whose scheduler is at ADDRESS (like "
                             f"tcp://10.0.0.5:8786; default: ${ENV}); needs `pip install 'ccost[distributed]'`")


def execution(args: argparse.Namespace):
    """The ``search.execution`` context the options ask for."""
    from ccost import search

    scheduler = getattr(args, "scheduler", None) or os.environ.get(ENV) or None
    jobs = getattr(args, "jobs", None)
    return search.execution(jobs=jobs if jobs is not None else search.default_jobs(), scheduler=scheduler,
                            auto=jobs is None)
