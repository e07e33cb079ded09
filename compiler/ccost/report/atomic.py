"""Write output files so that a failed run never leaves a half-written file in place of a good one.

INTERFACE.md: "A failed run never leaves a half-written output in place of a good one." The outputs of one
run land together or not at all:

1. **Validate first.** ``check_targets`` looks at every target before anything is rendered or written: a
   folder where a file should go, a special file (``-o /dev/null`` must not replace the device), a parent
   that is a file, a folder that cannot be written, a name longer than the file system allows. Each is an
   ``OutputError`` naming the path, which the commands turn into E504.
2. **Write aside.** Every output is written completely to a temporary file in the target's own folder (so
   the rename stays on one file system and is atomic).
3. **Commit together.** Only when *all* outputs of a run exist are they moved into place with
   ``os.replace``; if one rename fails, the targets already replaced get their previous files back.
4. **Clean up on signals.** While an ``AtomicFiles`` is open, SIGTERM and SIGHUP (like Ctrl-C) end the run
   through the ordinary error path: the temporary files are removed and the previous outputs stay. The
   commit itself runs with those signals held back, so it is never cut in half.
5. **Clean up after a crash.** A run killed outright (SIGKILL, a power cut) cannot remove its temporary
   files. Their names carry the writer's process id (``.a1.html.<pid>.<random>.tmp``), and the next run
   that writes ``a1.html`` removes every one whose process is gone before writing its own. (On a folder
   shared by several machines a process id of another machine may look gone: that run then fails to
   commit, with an error; it never mixes files.)
6. **One run at a time.** The renames of a commit are done holding an exclusive lock (``flock``) on each
   target's folder, so two runs writing the same review at once leave one run's files, never the YAML of
   one beside the HTML of the other. Where the lock cannot be taken (no ``fcntl``, a file system without
   it) the commit goes ahead as before.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path

_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_HELD = _SIGNALS + ((signal.SIGINT,) if hasattr(signal, "SIGINT") else ())
_TMP_SUFFIX = ".tmp"


class OutputError(OSError):
    """A target that cannot be written; ``filename`` is the path, ``strerror`` says why."""


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived while outputs were being written; the exit status is 128 + the signal."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_targets(paths) -> None:
    """Raise ``OutputError`` for the first target that cannot be written; write nothing, create nothing."""
    for p in paths:
        path = Path(p)
        existing = path.parent
        while not existing.exists() and existing != existing.parent:  # the nearest folder that exists
            existing = existing.parent
        limit = _name_max(existing if existing.is_dir() else existing.parent)
        for part in path.parts:
            if len(os.fsencode(part)) > limit:
                raise OutputError(errno.ENAMETOOLONG, f"the name `{part[:40]}...` is {len(os.fsencode(part))} "
                                  f"bytes, longer than the {limit} the file system allows", str(path))
        try:
            st = path.lstat()
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            st = None  # a parent is a file: reported below
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise OutputError(errno.EISDIR, "it is a folder, where the output file should go", str(path))
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise OutputError(errno.EINVAL, "it is not a regular file (a device, FIFO or socket), so it "
                                  "is not replaced", str(path))
        if existing.exists() and not existing.is_dir():
            raise OutputError(errno.ENOTDIR, f"{existing} is a file, so it cannot hold the folder of the "
                              "output", str(path))
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OutputError(errno.EACCES, f"the folder {existing} cannot be written", str(path))


_BAK = ".bak"


def _stem(path: Path) -> str:
    """``.<name>.``, shortened for a name so long that the temporary name would not fit: what every
    temporary file of ``path`` starts with."""
    name = path.name
    # mkstemp adds 8 random characters; then the process id (up to 7 digits) and a dot, ".bak", ".tmp"
    room = _name_max(path.parent) - 8 - 8 - len(_BAK) - len(_TMP_SUFFIX) - 2
    if len(os.fsencode(name)) > room:
        name = os.fsdecode(os.fsencode(name)[:max(room, 1)]).rstrip("\ufffd") or "out"
    return f".{name}."


def _temp_prefix(path: Path) -> str:
    """``.<name>.<pid>.``: a temporary file of ``path`` written by this process."""
    return f"{_stem(path)}{os.getpid()}."


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's process, or cannot tell: leave its files alone
        return True
    return True


def remove_stale(path: Path) -> list[Path]:
    """Remove the temporary files of ``path`` left by runs that were killed (their process is gone);
    returns what was removed. Files of running processes, and of other names, are left alone."""
    path = Path(path)
    stem = _stem(path)
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(stem) and name.endswith(_TMP_SUFFIX)):
            continue
        pid = name[len(stem):].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            (path.parent / name).unlink()
            removed.append(path.parent / name)
        except OSError:
            pass
    return removed


class _folders_locked:
    """An exclusive ``flock`` on each folder (in a fixed order, so two runs cannot deadlock); held until
    the block ends. Best effort: where a folder cannot be locked the block runs without it."""

    def __init__(self, folders):
        self.folders = sorted({os.path.abspath(f) for f in folders})
        self.fds: list[int] = []

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # Windows
            return self
        for folder in self.folders:
            try:
                fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system that cannot lock (some network ones)
                os.close(fd)
                continue
            self.fds.append(fd)
        return self

    def __exit__(self, *exc):
        for fd in self.fds:
            os.close(fd)  # closing the descriptor releases its lock
        self.fds.clear()


class AtomicFiles:
    """Collect the outputs of one run; move them into place together, or not at all.

    >>> with AtomicFiles() as out:          # doctest: +SKIP
    ...     out.write(Path("reports/a.html"), html_bytes)
    ...     out.write(Path("reports/a.pdf"), render_pdf())   # raises -> a.html is not replaced either
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []  # (temporary, final)
        self._old_handlers: dict[int, object] = {}

    def write(self, path: Path, data: bytes) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(path)  # what a killed run left of this output
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=_TMP_SUFFIX, dir=path.parent)
        # Registered before writing: a signal during the write still finds it to remove.
        self._pending.append((Path(tmp), path))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            self._pending.pop()
            raise

    def commit(self) -> list[Path]:
        """Rename every temporary file onto its target; returns the targets in the order written. If a
        rename fails, the targets already replaced get their previous contents back and the error is
        raised (every temporary file is removed)."""
        done: list[Path] = []
        backups: list[tuple[Path, Path | None]] = []  # (final, backup of what it held)
        with _held(_HELD), _folders_locked(final.parent for _, final in self._pending):
            try:
                for tmp, final in self._pending:
                    # mkstemp creates 0600 files; a report is an ordinary file others read (and git commits).
                    os.chmod(tmp, 0o644)
                    backups.append((final, _backup(final)))
                    os.replace(tmp, final)
                    done.append(final)
            except BaseException:
                for final, backup in reversed(backups[:len(done)]):
                    try:
                        if backup is not None:
                            os.replace(backup, final)
                        else:
                            final.unlink(missing_ok=True)
                    except OSError:
                        pass
                raise
            finally:
                for _, backup in backups:
                    if backup is not None:
                        backup.unlink(missing_ok=True)
                self.discard()
        return done

    def discard(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending.clear()

    # -- signals -------------------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        print(f"ccost: {name}: stopped; no output was replaced", file=sys.stderr)
        raise Terminated(signum)

    def __enter__(self) -> AtomicFiles:
        if threading.current_thread() is threading.main_thread():
            for s in _SIGNALS:
                try:
                    self._old_handlers[s] = signal.signal(s, self._on_signal)
                except (OSError, ValueError):
                    pass
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Held until the handlers are back: a SIGTERM that comes during the commit is delivered after it,
        # to the handler the program had before (the outputs are then complete).
        with _held(_HELD):
            try:
                if exc_type is None:
                    self.commit()
                else:
                    self.discard()
            finally:
                for s, old in self._old_handlers.items():
                    signal.signal(s, old)
                self._old_handlers.clear()


class _held:
    """Hold back ``signals`` (they are delivered when the block ends) where the platform allows it."""

    def __init__(self, signals):
        self.signals = set(signals)
        self.old = None

    def __enter__(self):
        if hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread():
            self.old = signal.pthread_sigmask(signal.SIG_BLOCK, self.signals)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.old)


def _backup(final: Path) -> Path | None:
    """A hard link to the file ``final`` holds now (None if there is none, or links are not possible),
    so a commit that fails half way can put it back."""
    if not final.is_file():
        return None
    fd, name = tempfile.mkstemp(prefix=_temp_prefix(final), suffix=_BAK + _TMP_SUFFIX, dir=final.parent)
    os.close(fd)
    os.unlink(name)
    try:
        os.link(final, name)
    except OSError:
        return None
    return Path(name)


def write_atomic(path: Path, data: bytes) -> Path:
    """Write one file atomically (temporary file in the same folder, then ``os.replace``)."""
    check_targets([path])
    with AtomicFiles() as out:
        out.write(path, data)
    return Path(path)


def write_new(path: Path, data: bytes) -> Path:
    """Create ``path`` with ``data``, complete or not at all, and never over an existing file: the data is
    written to a temporary file, then hard-linked to ``path`` (which fails if it exists, atomically, even
    against another run). Raises ``FileExistsError``, or ``OSError`` when it cannot be written (a full
    disk: nothing is left behind). The folders above it are created."""
    path = Path(path)
    check_targets([path])
    with AtomicFiles() as out:
        out.write(path, data)
        tmp, _ = out._pending[-1]
        os.chmod(tmp, 0o644)
        with _held(_HELD):
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise
            except OSError:  # no hard links here (some FUSE and FAT file systems): exclusive create
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                except BaseException:
                    path.unlink(missing_ok=True)
                    raise
            out._pending.clear()
            Path(tmp).unlink(missing_ok=True)
    return path
