"""Output folders of ``clustergym run``, ``train`` and ``reproduce``: validate, lock, stage, then swap.

One mechanism for every command that writes a folder ("nothing lost"):

1. :func:`check_path` — the path resolves (no symlink loop, no broken link, no file on the way), every
   name fits the file system (``NAME_MAX``/``PATH_MAX``), the folder (or its nearest existing
   ancestor) is writable;
2. :func:`check_fresh` — a folder holding an earlier run is refused unless ``overwrite``; with
   ``overwrite`` its manifest (:data:`MANIFEST`) is validated: a list of plain file names, nothing else;
3. :class:`OutputFolder` — holds a lock file (:data:`LOCK`, the ``filelock`` package) for the whole
   command, so a second process on the same folder gets one line naming the holder; checks the free
   space and the file-size limit (``ulimit -f``) against the caller's estimate; the command writes into
   a staging folder inside ``--out``; only when it has finished are the new files renamed into place
   and the earlier run's files (those its manifest names) removed. An error or a kill before that
   leaves the earlier run byte-identical; the swap itself is a few renames.

Errors are :class:`OutputError` (a ``ValueError``: the command line prints one line, exit 2).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

__all__ = ["MANIFEST", "LOCK", "OutputError", "OutputFolder", "FolderLock", "check_path", "check_fresh", "read_manifest"]

MANIFEST = ".clustergym-files.json"  # what a command wrote into its --out (so --overwrite clears exactly that)
LOCK = ".clustergym.lock"  # held by the one process writing into the folder
HOLDER = ".clustergym.lock.holder"  # pid, host and command of that process (read by the one refused)
_STAGE = ".clustergym-staging-"  # new files, before the swap
_OLD = ".clustergym-old-"  # the earlier run's files during the swap
_OURS = (LOCK, HOLDER, MANIFEST)


class OutputError(ValueError):
    """A bad or busy output folder (one line on the command line, exit 2)."""


def _short(path: str, n: int = 60) -> str:
    return path if len(path) <= n else path[: n // 2 - 2] + "…" + path[-(n // 2 - 1):]


def check_path(path: str, flag: str = "--out") -> None:
    """Refuse an output folder that cannot work, before any work: empty, a file, a symlink loop or
    broken link, under a file, a name longer than the file system allows, or not writable."""
    if not path:
        raise OutputError(f"{flag} is empty")
    if "\0" in path:
        raise OutputError(f"{flag} {path!r} contains a NUL character")
    shown = _short(path)
    ab = os.path.abspath(path)
    # the nearest existing ancestor (lexists: a dangling link is "existing" and reported below)
    anc = ab
    while not os.path.lexists(anc):
        anc = os.path.dirname(anc)
    try:
        name_max = os.pathconf(anc if os.path.isdir(anc) else os.path.dirname(anc), "PC_NAME_MAX")
        path_max = os.pathconf(anc if os.path.isdir(anc) else os.path.dirname(anc), "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in ab.split(os.sep):
        if len(part.encode(errors="surrogateescape")) > name_max:
            raise OutputError(f"{flag} {shown!r}: the name {_short(part, 30)!r} is {len(part.encode())} bytes long; "
                              f"the file system allows at most {name_max}")
    if len(ab.encode(errors="surrogateescape")) + 96 > path_max:  # room for the files written inside
        raise OutputError(f"{flag} {shown!r}: the path is {len(ab.encode())} bytes long; at most "
                          f"{path_max - 96} leave room for the files written inside (PATH_MAX {path_max})")
    try:
        os.stat(ab)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{flag} {shown!r} is a symlink loop (it never resolves to a folder)") from None
        if exc.errno == errno.ENOTDIR:
            raise OutputError(f"{flag} {shown!r} lies under a file, not a folder") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise OutputError(f"{flag} {shown!r}: the path is too long for the file system") from None
        if exc.errno == errno.EACCES:
            raise OutputError(f"{flag} {shown!r}: permission denied") from None
        if exc.errno != errno.ENOENT:
            raise OutputError(f"{flag} {shown!r}: {exc.strerror}") from None
        if os.path.lexists(ab):
            raise OutputError(f"{flag} {shown!r} is a broken symlink (its target does not exist)") from None
        if not os.path.isdir(anc):
            kind = "a symlink loop or broken link" if os.path.islink(anc) else "a file"
            raise OutputError(f"{flag} {shown!r} lies under {_short(anc)!r}, which is {kind}") from None
        if not os.access(anc, os.W_OK | os.X_OK):
            raise OutputError(f"{flag} {shown!r}: {_short(anc)!r} is not writable") from None
        return
    if not os.path.isdir(ab):
        raise OutputError(f"{flag} {shown!r} is a file; expected a folder path")
    if not os.access(ab, os.W_OK | os.X_OK):
        raise OutputError(f"{flag} {shown!r} is not writable")


def read_manifest(path: str) -> list[str] | None:
    """The file names an earlier command wrote into ``path`` (its :data:`MANIFEST`), None without one.

    The manifest is data from a file: it must be ``{"files": [name, ...]}`` with plain names of
    entries directly inside ``path`` (no separators, no ``.``/``..``, not clustergym's own lock or
    manifest); anything else is an :class:`OutputError` (``--overwrite`` deletes what it names).
    """
    man = os.path.join(path, MANIFEST)
    if not os.path.lexists(man):
        return None
    bad = f"--out {_short(path)!r}: {MANIFEST} is not a clustergym manifest"
    try:
        with open(man, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise OutputError(f"{bad} ({type(exc).__name__}); remove it or choose another folder") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise OutputError(f'{bad} (expected {{"files": [names]}}); remove it or choose another folder')
    for n in files:
        if (not isinstance(n, str) or not n or n in (".", "..") or "/" in n or "\\" in n or os.sep in n
                or "\0" in n or n in _OURS or n.startswith((_STAGE, _OLD))):
            raise OutputError(f"{bad} ({n!r} is not a plain file name inside the folder); remove it or choose "
                              "another folder")
    return list(dict.fromkeys(files))


def check_fresh(path: str, overwrite: bool, marks: tuple[str, ...]) -> None:
    """Refuse a folder holding an earlier run's results unless ``overwrite`` (and validate its manifest)."""
    if not os.path.isdir(path):
        return
    read_manifest(path)  # validated even without --overwrite: a bad manifest is reported before any work
    found = [m for m in (MANIFEST, *marks) if os.path.lexists(os.path.join(path, m))]
    if found and not overwrite:
        raise OutputError(f"--out {_short(path)!r} holds an earlier run's results ({found[0]}); pass --overwrite to "
                          "replace them, or choose another folder")


def _holder(path: str) -> str:
    try:
        with open(os.path.join(path, HOLDER), encoding="utf-8") as f:
            h = json.load(f)
        return f"pid {h['pid']} on {h['host']}, since {h['since']}: {_short(h['command'], 80)}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (no details recorded yet)"


def _free_checks(path: str, need_total: float, need_file: float) -> None:
    """Refuse when the disk's free space or the file-size limit (``ulimit -f``) is below the estimate."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        free = None
    if free is not None and need_total > free:
        raise OutputError(f"--out {_short(path)!r}: about {need_total / 2**20:.1f} MiB needed, only "
                          f"{free / 2**20:.1f} MiB free on its disk")
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    except (ImportError, OSError, ValueError):
        return
    if soft != resource.RLIM_INFINITY and need_file > soft:
        raise OutputError(f"--out {_short(path)!r}: files of about {need_file / 2**10:.0f} KiB are written, but the "
                          f"file-size limit (ulimit -f) is {soft / 2**10:.0f} KiB")


class OutputFolder:
    """``with OutputFolder(out, overwrite=..., marks=...) as stage:`` write into ``stage.path``; on a clean
    exit the staged entries replace the earlier run's (see the module docstring).

    Args:
        path: the ``--out`` folder.
        overwrite: replace an earlier run (else a folder holding one is refused).
        marks: names that identify an earlier run of this command when there is no manifest.
        need_total, need_file: estimated bytes written in all and of the largest file (free-space and
            ``ulimit -f`` checks; 0 skips them).
    """

    def __init__(self, path: str, *, overwrite: bool, marks: tuple[str, ...], need_total: float = 0.0,
                 need_file: float = 0.0):
        self.out = path
        self.overwrite = overwrite
        self.marks = tuple(marks)
        self.need_total, self.need_file = need_total, need_file
        self.path: str | None = None  # the staging folder
        self.written: list[str] = []
        self._lock: Any = None  # the filelock lock, held from acquire until release
        self._created = False

    # -- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> "OutputFolder":
        check_path(self.out)
        check_fresh(self.out, self.overwrite, self.marks)
        self._create_and_lock(release_when_busy=False)
        try:
            self._write_holder()
            check_fresh(self.out, self.overwrite, self.marks)  # again: a writer may have finished meanwhile
            self._sweep_leftovers()
            _free_checks(self.out, self.need_total, self.need_file)
            self.path = tempfile.mkdtemp(prefix=_STAGE, dir=self.out)
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.commit()
        finally:
            self._release(failed=exc_type is not None)

    def _create_and_lock(self, release_when_busy: bool) -> None:
        """Create the folder when missing (``_created``) and take its lock (:data:`LOCK`) without waiting; one
        line naming the holder when it is busy (``release_when_busy``: remove a folder created here first)."""
        from filelock import FileLock, Timeout

        if not os.path.isdir(self.out):
            try:
                os.makedirs(self.out)
                self._created = True
            except FileExistsError:
                pass
            except OSError as exc:
                raise OutputError(f"--out {_short(self.out)!r}: cannot create it ({exc.strerror})") from None
        lock = FileLock(os.path.join(self.out, LOCK), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            if release_when_busy:
                self._release(failed=True)
            raise OutputError(f"--out {_short(self.out)!r} is in use by {_holder(self.out)}; wait for it to finish "
                              "or choose another folder") from None
        except OSError as exc:
            raise OutputError(f"--out {_short(self.out)!r}: cannot create its lock file ({exc.strerror})") from None
        self._lock = lock

    def _write_holder(self) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                "command": " ".join(["clustergym", *sys.argv[1:]]) if sys.argv else "clustergym"}
        try:
            with open(os.path.join(self.out, HOLDER), "w", encoding="utf-8") as f:
                json.dump(info, f)
        except OSError:
            pass  # the lock holds without the details

    def _sweep_leftovers(self) -> None:
        """Staging/old folders a killed earlier command left (under the lock, so never a live one's)."""
        for n in os.listdir(self.out):
            if n.startswith((_STAGE, _OLD)) and os.path.isdir(os.path.join(self.out, n)):
                shutil.rmtree(os.path.join(self.out, n), ignore_errors=True)

    def _release(self, failed: bool) -> None:
        if self.path is not None and os.path.isdir(self.path):
            shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is None:
            return
        for n in (HOLDER,):
            try:
                os.remove(os.path.join(self.out, n))
            except OSError:
                pass
        self._lock.release()
        self._lock = None
        if failed and self._created:  # a fresh folder this command made: leave nothing behind
            try:
                os.remove(os.path.join(self.out, LOCK))
                os.rmdir(self.out)
            except OSError:
                pass

    # -- the swap ------------------------------------------------------------------------------------
    def commit(self) -> list[str]:
        """Move the staged entries into ``--out``, removing the earlier run's; returns the new names."""
        assert self.path is not None
        new = sorted(n for n in os.listdir(self.path) if n not in _OURS)
        old = read_manifest(self.out)
        if old is None:
            old = [m for m in self.marks if os.path.lexists(os.path.join(self.out, m))]
        trash = tempfile.mkdtemp(prefix=_OLD, dir=self.out)
        try:
            for n in new:  # a file is replaced atomically; a folder is moved aside first
                dst = os.path.join(self.out, n)
                if os.path.isdir(dst) and not os.path.islink(dst):
                    os.replace(dst, os.path.join(trash, n))
                os.replace(os.path.join(self.path, n), dst)
            for n in old:
                if n not in new and os.path.lexists(os.path.join(self.out, n)):
                    os.replace(os.path.join(self.out, n), os.path.join(trash, n))
            tmp = os.path.join(self.path, MANIFEST)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"files": new}, f, indent=1)
            os.replace(tmp, os.path.join(self.out, MANIFEST))
        finally:
            shutil.rmtree(trash, ignore_errors=True)
        self.written = new
        return new


class FolderLock:
    """``with FolderLock(folder):`` hold ``folder``'s lock (:data:`LOCK`, the one :class:`OutputFolder` takes,
    so ``clustergym run``, ``train`` and ``drl`` never write one folder at once) for a command that keeps its own
    files in the folder (``clustergym drl``'s cells). Creates the folder when missing (removed again on a
    failure before anything else was written); refused with one line naming the holder when it is busy; checks
    the free space and the file-size limit against the caller's estimate (``need_total``, ``need_file``)."""

    def __init__(self, path: str, *, need_total: float = 0.0, need_file: float = 0.0):
        self.out = path
        self._folder = OutputFolder(path, overwrite=True, marks=(), need_total=need_total, need_file=need_file)

    def __enter__(self) -> "FolderLock":
        f = self._folder
        check_path(self.out)
        f._create_and_lock(release_when_busy=True)
        try:
            f._write_holder()
            _free_checks(self.out, f.need_total, f.need_file)
        except BaseException:
            f._release(failed=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        failed = exc_type is not None and not self._wrote_anything()
        self._folder._release(failed=failed)

    def _wrote_anything(self) -> bool:
        try:
            return bool(set(os.listdir(self.out)) - set(_OURS))
        except OSError:
            return True
