"""The evaluation run directory's lock: one live run per directory, whatever its number of processes.

Every rank of a run holds an exclusive flock on `OUT/.locks/rank<R>.lock` for the whole run, and rank 0
also checks that no lock of a higher rank (left by a run with more processes) is held. So a rerun started
while any process of an earlier run still writes (e.g. its launcher was killed but its workers live on) is
refused before it reads a shard, instead of evaluating the same clips a second time. The kernel drops a
flock when its holder dies, even by kill -9, so a crashed run never blocks the next one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from pathlib import Path
from typing import Any

LOCK_DIR = ".locks"
_RANK_LOCK = re.compile(r"^rank(\d+)\.lock$")
_HELD: set[int] = set()  # lock fds of this process, closed in any child it forks


def _drop_in_child() -> None:
    """A forked child (a data worker, a helper) must not keep the run's lock alive after the run dies: an flock
    lasts while any descriptor of it is open, so the child closes its copies (the parent keeps the lock)."""
    for fd in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_drop_in_child)  # exec'd children never see it: os.open is close-on-exec


class RunLockedError(ValueError):
    """Another live run writes to the directory (a user error: one line, no traceback)."""


def _try_flock(path: Path) -> int | None:
    """An fd holding an exclusive flock on `path`, or None when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    _HELD.add(fd)
    return fd


def _close(fd: int) -> None:
    _HELD.discard(fd)
    os.close(fd)


class RunLock:
    """Held by every rank of a run while it evaluates into `out_dir` (a context manager)."""

    def __init__(self, out_dir: str | Path, dist: Any) -> None:
        self.dir = Path(out_dir) / LOCK_DIR
        self.dist = dist
        self._fd: int | None = None

    def _refuse(self, rank: int) -> RunLockedError:
        return RunLockedError(
            f"{self.dir.parent} is in use: process {rank} of another evaluation still writes to it "
            f"(it holds {self.dir / f'rank{rank}.lock'}); wait for it to finish or stop it, then rerun to resume"
        )

    def acquire(self) -> None:
        """Take this rank's lock; after a barrier, rank 0 checks that no higher rank of another run lives."""
        rank, world = self.dist.rank, self.dist.world_size
        self._fd = _try_flock(self.dir / f"rank{rank}.lock")
        if self._fd is None:
            raise self._refuse(rank)
        self.dist.barrier()
        if rank == 0:
            for p in sorted(self.dir.iterdir()):
                m = _RANK_LOCK.match(p.name)
                if m and int(m[1]) >= world:
                    fd = _try_flock(p)
                    if fd is None:
                        self.release()
                        raise self._refuse(int(m[1]))
                    _close(fd)

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        if self._fd is not None:
            _close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
