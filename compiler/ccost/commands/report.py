"""``ccost report SPEC [-o PATH] [--format pdf|html|both]``: write the design review and the results YAML.

By default writes ``reports/<stem>.html``, ``reports/<stem>.pdf`` and ``reports/<stem>.yaml`` relative to
the current folder and prints the paths written, one a line. All outputs are written to temporary files
first and renamed together, so a failed render leaves the previous review in place. Set
``SOURCE_DATE_EPOCH`` for a byte-identical rebuild (the cover's date comes from it too).
"""

from __future__ import annotations

import argparse
import os

HELP = "write the design review (HTML, PDF) and a YAML of the results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="the .ccost spec to review")
    parser.add_argument("-o", "--output", metavar="PATH", default=None,
                        help="a folder (existing, or ending in /) for <stem>.html/.pdf/.yaml, or a file path "
                             "whose suffix is replaced (-o out/review.pdf); default reports/<stem>")
    parser.add_argument("--format", choices=("pdf", "html", "both"), default="both",
                        help="which review to render (the YAML of the results is always written); "
                             "default both")
    parser.add_argument("--no-git", action="store_true",
                        help="do not record the git revision in the provenance stamp (committed reviews "
                             "use this, so they do not change with every commit)")


def run(args: argparse.Namespace) -> int:
    from ccost.diagnostics import CcostError, error
    from ccost.report import output_paths, write_report
    from ccost.report.provenance import build_date

    try:
        build_date()  # a malformed SOURCE_DATE_EPOCH is the user's to fix, before any work is done
    except ValueError as exc:
        raise CcostError(error("E504", str(exc),
                               help="unset it, or set it to whole seconds since 1970")) from None
    try:
        _check_output_arg(args.output)
        paths = output_paths(args.spec, args.output, args.format)
        written = write_report(args.spec, paths, include_git=not args.no_git,
                               git_note="not recorded (--no-git)")
    except OSError as exc:  # check_targets' refusals, and anything the file system says while writing
        where = exc.filename or "the review"
        raise CcostError(error("E504", f"cannot write {where}: {exc.strerror or exc}",
                               help="nothing was replaced; choose another -o, or fix the folder "
                                    "(it must exist or be creatable, and be writable)")) from None
    except _fetch_error() as exc:
        raise CcostError(error("E504", f"the review was not written: {exc}")) from None
    cwd = os.getcwd()
    for p in written:
        try:
            print(os.path.relpath(p, cwd) if str(p).startswith(cwd) else p)
        except ValueError:
            print(p)
    return 0


def _check_output_arg(out: str | None) -> None:
    """``-o`` itself may name a folder or a file (existing or not), never a device, FIFO or socket:
    ``-o /dev/null`` would otherwise write /dev/null.html beside the device."""
    import errno
    import stat

    from ccost.report.atomic import OutputError

    if out is None:
        return
    try:
        mode = os.stat(out).st_mode
    except OSError:  # absent (it will be created), or a name too long: check_targets says which
        return
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise OutputError(errno.EINVAL, "-o names a device, FIFO or socket, not a folder or a file", out)


def _fetch_error():
    try:
        from ccost.report.fetcher import BlockedFetch
    except ImportError:  # weasyprint missing: nothing to catch
        return ()
    return BlockedFetch
