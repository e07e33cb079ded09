"""The one way ccost reads a file a user named: regular files only, bounded, with a clear refusal; the one
rule for where a path a file names may lead (``confine``); and bounded JSON and YAML (``load_json``,
``load_yaml``).

Every file that comes from a user (a spec and its imports, an nccl-tests log, the two sides of ``ccost
diff``, a file ``ccost fmt`` rewrites) is read through ``read_user_bytes``. It

* refuses anything that is not a regular file *before opening it*: a folder, a FIFO (opening one blocks
  until a writer comes), a character device (``/dev/zero`` and ``/dev/urandom`` never end), a socket;
* opens without blocking and without acquiring a terminal, then checks the opened file again (the path
  may have been swapped between the two looks);
* reads at most ``limit`` bytes, so a file that grows while it is read, or a ``/proc`` file that reports
  a size of 0, cannot exhaust memory;
* never puts a byte of the file into its messages: a refusal names the path and the reason only.

A missing file raises ``FileNotFoundError`` (callers have their own words for it: "no such file", an
import that is not found with a did-you-mean); every other problem raises ``CcostError`` with the
caller's code (E002 for specs, E501 for logs, ...).

    >>> data = read_user_bytes("specs/a1-tp-decode.ccost", limit=1 << 20)   # doctest: +SKIP
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, BinaryIO

from ccost.diagnostics import CcostError, Span, error

_CHUNK = 1 << 20


def size_text(n: int) -> str:
    """``4.0 MiB``, ``12.5 KiB``, ``300 bytes``: sizes in refusals."""
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"


def project_root(spec_path: str) -> str:
    """The folder a spec's files (its imports, a model's config.json) must stay inside: the top of the git
    work tree that holds the spec (the nearest folder upwards with a ``.git`` entry), or the spec's own
    folder when it is not in git. Give the spec's real path to confine to where its symlinks lead.

    >>> project_root("specs/a1-tp-decode.ccost")   # doctest: +SKIP
    '/path/to/capacity-plans'
    """
    start = os.path.abspath(os.path.dirname(spec_path) or ".")
    d = start
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return start
        d = parent


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both absolute and normalised)."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives
        return False


class Outside(Exception):
    """A path a spec (or a file it names) wrote that leads out of the folder it must stay in.
    ``through_link``: it stays inside as written, but a symbolic link on the way leads out."""

    def __init__(self, path: str, area: str, through_link: bool):
        how = "is a symbolic link that leads" if through_link else "leads"
        super().__init__(f"`{path}` {how} outside {area}")
        self.path, self.area, self.through_link = path, area, through_link


def confine(path: str | os.PathLike, area: str | os.PathLike, written: str | None = None) -> str:
    """The one confinement rule: the real path of ``path`` when it stays inside the folder ``area`` both
    as written (``..`` taken lexically) and with symbolic links resolved; else ``Outside``, raised before
    anything is read. ``written`` is the path as the user wrote it (for the message).

    Every path a command resolves from what a file says goes through here: a spec's imports (the
    checker's E113, ``ccost.check.load.resolve_import``), a model's ``config = "..."``, in the working tree
    and in an old git revision (``ccost diff REV``), the spec column of a ``calibrate --steps`` file, the
    logs and step files a measured link or stack names for the review. ``area`` is the project
    (``project_root``) or the bundled ``std/``.

    >>> confine("specs/../specs/a.ccost", ".")          # doctest: +SKIP
    '/path/to/project/specs/a.ccost'
    """
    area_abs = os.path.abspath(area)
    target = os.path.normpath(os.path.abspath(path))
    shown = written if written is not None else os.fspath(path)
    if not inside(target, area_abs):
        raise Outside(shown, area_abs, through_link=False)
    resolved = os.path.realpath(target)
    if not inside(resolved, os.path.realpath(area_abs)):
        raise Outside(shown, area_abs, through_link=True)
    return resolved


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words: ``a folder``, ``a named pipe (FIFO)``, ..."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _fail(code: str, message: str, help: str | None, name: str) -> CcostError:
    # A spec's read error has no place in the spec (an import's is shown at the import line); a log's
    # points at the log itself, as calibrate's other errors do.
    return CcostError(error(code, message, None if code == "E002" else Span.point(name, 1, 1), help))


def read_user_bytes(path: str | os.PathLike, *, limit: int, code: str = "E002", what: str = "file",
                    display: str | None = None, help: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises ``FileNotFoundError`` when there is no such file (or a component of the path is not a folder)
    and ``CcostError`` (``code``) when it is a folder, a device, a FIFO or a socket, is larger than
    ``limit``, or cannot be read. ``what`` names the file in messages (``spec``, ``nccl-tests log``);
    ``display`` is the name shown (default: the path as given).
    """
    name = display or os.fspath(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(name) from None
    except ValueError:  # an embedded NUL byte
        raise _fail(code, f"cannot read {name!r}: the path contains a NUL character", help, name) from None
    except OSError as exc:
        raise _fail(code, f"cannot read {name}: {exc.strerror or exc}", help, name) from None
    _check_mode(st.st_mode, name, code, what, help)
    if st.st_size > limit:  # checked before reading: a 10 GB file must not be loaded
        raise _too_large(name, code, what, limit, help, st.st_size)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(name) from None
    except OSError as exc:
        raise _fail(code, f"cannot read {name}: {exc.strerror or exc}", help, name) from None
    try:
        _check_mode(os.fstat(fd).st_mode, name, code, what, help)  # swapped since the stat above?
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            except BlockingIOError:  # cannot happen for a regular file; never wait for one
                raise _fail(code, f"cannot read {name}: it is not ready to be read", help, name) from None
            except OSError as exc:
                raise _fail(code, f"cannot read {name}: {exc.strerror or exc}", help, name) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew while being read, or a /proc file that reports size 0
                raise _too_large(name, code, what, limit, help, None)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_stream(stream: BinaryIO | None = None, *, limit: int, code: str = "E002", what: str = "input",
                name: str = "<stdin>") -> bytes:
    """At most ``limit`` bytes of a stream (standard input by default); more is refused, not read on."""
    if stream is None:
        stream = getattr(sys.stdin, "buffer", sys.stdin)  # a test's StringIO has no buffer
    data = stream.read(limit + 1)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > limit:
        raise _too_large(name, code, what, limit, None, None)
    return data


def _check_mode(mode: int, name: str, code: str, what: str, help: str | None) -> None:
    if stat.S_ISREG(mode):
        return
    kind = file_kind(mode)
    if stat.S_ISDIR(mode):
        raise _fail(code, f"cannot read {name}: it is {kind}, not {_a(what)}",
                    help or f"name a file inside it, like {name.rstrip('/')}/main.ccost", name)
    raise _fail(code, f"cannot read {name}: it is {kind}, not a regular file; ccost reads only regular files",
                help or f"save the {what} to a file and pass that file", name)


def _too_large(name: str, code: str, what: str, limit: int, help: str | None, size: int | None) -> CcostError:
    size_part = f"the file is {size_text(size)}, over" if size is not None else "it is over"
    return _fail(code, f"cannot read {name}: {size_part} the limit of {size_text(limit)} for {_a(what)}",
                 help or f"{_a(what)} is a few kilobytes; is this the right file?", name)


def _a(what: str) -> str:
    return ("an " if what[:1] in "aeiou" or what.startswith("nccl") else "a ") + what


# ---------------------------------------------------------------------------------------------------
# Data files a user names (a config.json, a steps table): bounded in nesting and, for YAML, in what its
# aliases expand to, so a 700-byte "billion laughs" or a deeply nested file is a clear error, not minutes
# of work, gigabytes of memory or a RecursionError.

#: Nesting of lists and mappings. A config.json nests 3-4 levels deep, a steps table 2-3.
MAX_DATA_DEPTH = 64
#: Values a data file holds once its YAML aliases are expanded: 10,000 step rows of 10 cells are 110,000.
MAX_DATA_VALUES = 1_000_000


class DataError(ValueError):
    """A data file that is not valid JSON/YAML or is beyond the bounds: ``message`` and the ``line``."""

    def __init__(self, message: str, line: int = 1):
        super().__init__(message)
        self.message, self.line = message, line


def load_json(text: str) -> Any:
    """``json.loads`` with the bounds above (and a whole number of more than 4,300 digits, which Python
    refuses to convert, as a ``DataError`` too)."""
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                        exc.lineno) from None
    except RecursionError:
        raise DataError(f"nested more than {MAX_DATA_DEPTH} levels deep") from None
    except ValueError:  # int(text) of more than sys.get_int_max_str_digits() digits
        raise DataError(f"a number has more than {sys.get_int_max_str_digits():,} digits") from None
    _check_depth(doc)
    return doc


def _check_depth(doc: Any) -> None:
    todo = [(doc, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DATA_DEPTH:
                raise DataError(f"nested more than {MAX_DATA_DEPTH} levels deep")
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` (libyaml's when installed) after a pass over the parser's events that refuses
    nesting deeper than ``MAX_DATA_DEPTH`` and aliases that expand to more than ``MAX_DATA_VALUES``
    values, before anything is built."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sizes: dict[str, int] = {}  # anchor -> values its node expands to
    open_: list[list] = []  # [anchor, values so far] of each open list or mapping
    event = None
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if len(open_) >= MAX_DATA_DEPTH:
                    raise DataError(f"nested more than {MAX_DATA_DEPTH} levels deep", _line(event))
                open_.append([event.anchor, 1])
                continue
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                anchor, n = open_.pop()
            elif isinstance(event, yaml.ScalarEvent):
                anchor, n = event.anchor, 1
            elif isinstance(event, yaml.AliasEvent):
                anchor, n = None, sizes.get(event.anchor, 1)
            else:
                continue
            if anchor is not None:
                sizes[anchor] = n
            if open_:
                open_[-1][1] += n
                if open_[-1][1] > MAX_DATA_VALUES:
                    raise DataError(f"expands to more than {MAX_DATA_VALUES:,} values (through its aliases, "
                                    "`*name`)", _line(event))
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or "it cannot be read"
        raise DataError(f"not valid YAML: {problem}", (mark.line + 1) if mark else 1) from None
    except RecursionError:  # cannot happen after the depth bound; never a traceback if it does
        raise DataError(f"nested more than {MAX_DATA_DEPTH} levels deep", _line(event)) from None


def _line(event) -> int:
    mark = getattr(event, "start_mark", None)
    return mark.line + 1 if mark is not None else 1
