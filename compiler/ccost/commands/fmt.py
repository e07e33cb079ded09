"""``ccost fmt SPEC... [--check]``: rewrite specs in canonical form, every comment kept.

Before a file is written, the output is verified the way black verifies its own: formatting the output
again must give the same bytes (a fixed point), and the output must check to the same spec as the input
(positions aside). If either fails, that is a bug in ccost: the file is left alone and E503 says so. A file
with errors is left untouched and its errors are shown: the formatter never guesses at a broken file.

A symbolic link is formatted through: the file it leads to is rewritten and the link stays a link, when
that file is inside the spec's project; a link that leads outside it is refused (E504). A file that
cannot be written (a full disk, a read-only folder) is left as it was, said so, and not counted as
reformatted.

Exit status: 0 done (or nothing to do); 1 with ``--check`` when a file would change; 2 when a file has
errors, cannot be read or written, or cannot be formatted safely.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

from ccost.diagnostics import CcostError, Diagnostic, error, escape_controls, render_all, use_colour
from ccost.fmt import format_checked

HELP = "rewrite specs in canonical form, comments kept"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC",
                        help=".ccost files to format in place; a folder means every .ccost file under it; "
                             "`-` reads standard input and writes the result to standard output (for "
                             "editors; imports resolve from the current directory)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; print a unified diff of what would change and exit 1 if "
                             "any file is not in canonical form (for CI)")


def _target(path: Path) -> Path:
    """The file to rewrite for ``path``: itself, or for a symbolic link the file it leads to, so the link
    stays a link (a spec linked into several projects is formatted where it lives, as editors save
    through links). A link that leads outside the spec's project (``ccost.userfiles.confine``, the rule
    imports follow) is refused: ``ccost fmt specs/`` rewrites nothing outside the project."""
    from ccost.userfiles import Outside, confine, project_root

    if not path.is_symlink():
        return path
    try:
        return Path(confine(path, project_root(os.path.abspath(path)), str(path)))
    except Outside:
        raise CcostError(error("E504", f"{path} is a symbolic link that leads outside the project, to "
                               f"{os.path.realpath(path)}: not rewritten",
                               help="format the file where it lives, or copy it into the project")) from None


def _write(path: Path, text: str) -> None:
    """Atomic replace (of the file a link leads to, ``_target``), keeping its permission bits (a spec may
    be group-writable)."""
    from ccost.report.atomic import write_atomic

    target = _target(path)
    mode = target.stat().st_mode & 0o7777
    write_atomic(target, text.encode("utf-8"))
    if mode != 0o644:
        os.chmod(target, mode)


def expand(paths: list[str]) -> list[str]:
    """Files as given; a folder becomes its .ccost files, recursively, in sorted order (so that
    `ccost fmt --check specs/` is one CI line). The same expansion as check, eval and report."""
    from ccost.commands.paths import expand as expand_args

    return [a.path for a in expand_args(paths)]


def _read_bytes(name: str) -> bytes:
    """The file as it is on disk, through the same bounded reader as the text (ccost.userfiles)."""
    from ccost.syntax.parse import MAX_FILE_BYTES
    from ccost.userfiles import read_user_bytes

    try:
        return read_user_bytes(name, limit=MAX_FILE_BYTES, what="spec")
    except FileNotFoundError:
        raise CcostError(error("E002", f"cannot read {name}: no such file")) from None


def run(args: argparse.Namespace) -> int:
    from ccost.commands.paths import read_stdin
    from ccost.fmt import normalize_newlines
    from ccost.syntax.parse import read_source

    failed: list[tuple[list[Diagnostic], dict[str, str]]] = []
    changed = unchanged = 0
    for name in expand(args.specs):
        path = Path(name)
        try:
            if name == "-":
                text = read_stdin()
                out = format_checked(text, "<stdin>")
            else:
                text = read_source(name)
                out = format_checked(text, name)
        except CcostError as exc:
            failed.append((exc.diagnostics, getattr(exc, "sources", None) or {}))
            continue
        if name == "-" and not args.check:
            sys.stdout.write(out)  # an editor replaces its buffer with this
            continue
        # Compare bytes, not decoded text: a CRLF file or one with a BOM is not canonical.
        try:
            current = text.encode("utf-8") if name == "-" else _read_bytes(name)
        except CcostError as exc:
            failed.append((exc.diagnostics, {}))
            continue
        if current == out.encode("utf-8"):
            unchanged += 1
            continue
        if args.check:
            changed += 1
            shown = "<stdin>" if name == "-" else name
            diff = difflib.unified_diff(normalize_newlines(text).splitlines(keepends=True),
                                        out.splitlines(keepends=True), f"{shown} (current)",
                                        f"{shown} (formatted)")
            sys.stdout.writelines(escape_controls(line) for line in diff)
            if "\r" in text:
                print(f"{shown}: line endings would change from CRLF to LF")
            if current.startswith(b"\xef\xbb\xbf"):
                print(f"{shown}: the UTF-8 byte-order mark would be removed")
        else:
            try:
                _write(path, out)
            except OSError as exc:  # a read-only folder, a full disk: the file is left as it was
                failed.append(([error("E504", f"cannot write {exc.filename or name}: {exc.strerror or exc}",
                                      help="the file was left unchanged; check that its folder is writable "
                                           "and its disk has room")], {}))
                continue
            except CcostError as exc:  # a link that leads outside the project
                failed.append((exc.diagnostics, {}))
                continue
            changed += 1  # counted once it is written: a full disk is not "1 file reformatted"
            print(f"reformatted {name}", file=sys.stderr)
    colour = use_colour(sys.stderr)
    for diags, sources in failed:
        print(render_all(diags, sources, colour), file=sys.stderr)
    verb = "would be reformatted" if args.check else "reformatted"
    parts = [f"{changed} file{'s' if changed != 1 else ''} {verb}"] if changed else []
    if unchanged:
        parts.append(f"{unchanged} file{'s' if unchanged != 1 else ''} already formatted")
    if failed:
        parts.append(f"{len(failed)} file{'s' if len(failed) != 1 else ''} with errors left unchanged")
    if parts:
        print(", ".join(parts) + ".", file=sys.stderr)
    if failed:
        return 2
    return 1 if args.check and changed else 0
