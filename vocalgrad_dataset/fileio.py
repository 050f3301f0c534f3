"""Atomic, umask-respecting file writes and a directory lock, shared by every package of the project.

Every output goes through `atomic_path` (or its byte/text forms): the data is written to a hidden temporary
file in the target's folder (`.<name>.<random>.tmp`), fsync'ed, given the mode a plain `open(path, "w")`
would give (0o666 minus the user's umask; mkstemp's 0600 would hide results from a lab or a web server),
then renamed over the target. A kill at any moment leaves the old file or the new one, never half of one;
the only trace is a `.tmp` file that `remove_stale_tmp` (or the next run of a builder) deletes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".tmp"


def current_umask() -> int:
    """The process umask, read without changing it (Linux /proc; os.umask round trip elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # not thread-safe, hence only the fallback
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode `open(path, "w")` creates files with: 0o666 & ~umask (0644 under umask 022)."""
    return 0o666 & ~current_umask()


def tmp_name(path: Path) -> Path:
    """A fresh hidden temporary name beside `path`, ending in `.tmp` (what stale-file cleanup looks for)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; best effort (some filesystems refuse to open or fsync directories)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, mkdir: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path` for a writer that wants a file name; on success it becomes `path`.

    The temporary file already exists (created with the user's umask) when yielded; writers may truncate or
    replace it. On any exception it is removed and `path` is left as it was.
    """
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    # O_EXCL + mode 0o666: the kernel applies the umask, exactly as for an ordinary new file.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        os.chmod(tmp, default_file_mode())  # a writer that recreated the file may have used another mode
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write bytes atomically (temp file in the same folder, fsync, rename), with the user's umask."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """atomic_write_bytes for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_stale_tmp(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete the `.<name>.*.tmp` files a killed writer left in `folder` (not recursive); returns them.

    Only call this while holding the folder's lock (`dir_lock`), so no live writer owns them.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(TMP_SUFFIX) and p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


class LockedError(RuntimeError):
    """Another process holds the lock of a directory."""


LOCK_NAME = ".vocalgrad.lock"


@contextlib.contextmanager
def dir_lock(folder: str | os.PathLike[str], *, timeout: float | None = None, what: str = "this folder",
             poll: float = 0.2) -> Iterator[Path]:
    """Hold an exclusive flock on `folder/.vocalgrad.lock` while the block runs.

    timeout None waits for as long as it takes (saying once on stderr whom it waits for), 0 refuses at once,
    otherwise waits up to `timeout` seconds; refusing raises LockedError naming the holder's pid. The kernel
    drops a flock when its holder dies (even by kill -9), so a stale lock file never blocks anyone.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            if deadline is not None and time.monotonic() >= deadline:
                raise LockedError(f"{folder} is in use by another process (pid {holder}) writing {what}; "
                                  "wait for it to finish or stop it") from None
            if not said:
                print(f"waiting for {folder}: another process (pid {holder}) is writing {what}", file=sys.stderr)
                said = True
            time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield lock
    finally:
        os.close(fd)  # closing drops the flock


class PathOutsideError(ValueError):
    """A listed file name that points outside the folder that lists it."""


def safe_join(base: str | os.PathLike[str], name: str, *, where: str, allow_outside: bool = False,
              hint: str = "pass allow_outside / --allow-outside-paths to permit it") -> Path:
    """`base / name` for a file name read from a listing (metadata.csv, a Parquet row), kept inside `base`.

    Absolute names and names whose `..` parts climb out of `base` are refused (a listing from elsewhere must
    not make us read, say, ~/.ssh) unless `allow_outside`. The check is on the name, not on symlinks the
    user placed inside `base` themselves. `hint` ends the message (how to permit it, where there is a way).
    """
    if not name or not name.strip():
        raise PathOutsideError(f"{where}: empty file name")
    if "\x00" in name:
        raise PathOutsideError(f"{where}: file name {name!r} contains a NUL byte")
    rel = Path(name)
    if not allow_outside:
        if rel.is_absolute() or name.startswith(("/", "\\")):
            raise PathOutsideError(f"{where}: absolute file name {name!r} refused (files must lie inside {base}"
                                   f"{'; ' + hint if hint else ''})")
        if ".." in Path(os.path.normpath(name)).parts:
            raise PathOutsideError(f"{where}: file name {name!r} points outside {base} (refused"
                                   f"{'; ' + hint if hint else ''})")
    return Path(base) / rel


def ragged_row(row: dict[str | None, Any]) -> str | None:
    """What is wrong with a csv.DictReader row that has more or fewer fields than its header, else None."""
    if None in row:
        return f"{len(row) - 1 + len(row[None])} fields, the header has {len(row) - 1}"
    missing = [k for k, v in row.items() if v is None]
    if missing:
        return f"{len(row) - len(missing)} fields, the header has {len(row)} (no {', '.join(map(repr, missing))})"
    return None


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes, streamed in 1 MiB blocks (the one file hash every module uses)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,79}")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._+-]+")


def safe_component(text: str) -> str:
    """One file-name component for outside text (a dataset's task, a model's or a user's name).

    Text made only of letters, digits and `._+-` (not starting with a dot, at most 80 characters) is kept as
    it is, so ordinary names give ordinary files; anything else (`/`, `..`, NUL, spaces, markup) becomes a
    slug of its safe characters plus the first 10 hex digits of its sha256, so two texts never share a
    file and no text can climb out of the folder it is joined to. Callers record the mapping.
    """
    text = str(text)
    if _SAFE_COMPONENT.fullmatch(text) and not text.endswith("."):
        return text
    slug = _UNSAFE_CHAR.sub("_", text).strip("._")[:40] or "x"
    return f"{slug}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
