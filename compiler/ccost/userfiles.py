"""The one way ccost reads a file a user named: regular files only, bounded, with a clear refusal.

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
from typing import BinaryIO

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
