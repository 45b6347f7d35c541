"""Temp state of a session: one folder per owning process, swept once its owner is dead.

Everything an apparatus process keeps in temp space for a session — the cell's scratch
(workspace and HOME), the gateway's config (with its master key), sandbox helper folders —
is created with :func:`mkdtemp` under the process's own folder::

    <tmp>/tt-session-<host>-<pid>-<start>/     owned by process <pid> that started at <start>
        procs/<pid>-<start>                    processes to end should the owner die (the proxy)
        tt-gateway-…/  tt-<task>-…/  …

The owner is named in the folder name itself (created atomically by ``mkdir``): the
host (a short hash of the host name and PID namespace: a temp folder may be shared
between hosts, and a sandbox sees the parents of its bind-mounted scratch), the pid
and the pid's start time (``/proc/<pid>/stat``), so a pid reused after the owner died
is not mistaken for it. A process removes its folder at normal exit;
one killed outright (``kill -9``, the OOM killer) leaves it, and the **next** process
that creates its own folder sweeps every folder whose owner on this host is dead, first
ending the processes registered in it (:func:`register_process`) that still run. A live
owner's folder is never touched, so concurrent sessions and xdist workers coexist.

The folder is per *process*, not per pytest session: an in-process session (``pytester``)
shares its parent's folder, and only process exit removes it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from apparatus.lifetime import alive_with_start, process_start

__all__ = ["PREFIX", "Owner", "mkdtemp", "register_process", "remove_later", "session_dir", "sweep"]

PREFIX = "tt-session-"
_LOCK = threading.Lock()
_DIRS: dict[int, Path] = {}  # pid -> its folder (a forked child makes its own)


def _host() -> str:
    """Where a pid means the same process: the host name and the PID namespace. A folder made
    elsewhere (another host sharing the temp folder, a sandbox with its own PID namespace
    seeing a bind-mounted scratch's parent) names an owner we cannot check, so it is kept."""
    try:
        pidns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pidns = ""
    return hashlib.sha256(f"{socket.gethostname()}\0{pidns}".encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Owner:
    """The owner of a session folder, parsed from its name."""

    host: str
    pid: int
    start: int

    @classmethod
    def of(cls, name: str) -> Owner | None:
        """The owner named by folder ``name``; ``None`` for any other name."""
        if not name.startswith(PREFIX):
            return None
        host, _, rest = name[len(PREFIX):].partition("-")
        pid, _, start = rest.partition("-")
        if not (host and pid.isdigit() and start.isdigit()):
            return None
        return cls(host, int(pid), int(start))

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        return cls(_host(), os.getpid(), process_start(os.getpid()) or 0)

    @property
    def name(self) -> str:
        """The folder name of this owner's session folder."""
        # Fixed width: paths under this folder reach the model (workspace, HOME), and a name
        # whose length changed with the pid would change the probe runs' token counts.
        return f"{PREFIX}{self.host}-{self.pid:07d}-{self.start:012d}"

    def alive(self) -> bool:
        """Still running (on another host: assumed so, we cannot tell)."""
        if self.host != _host():
            return True
        return alive_with_start(self.pid, self.start or None)


def session_dir(root: Path | None = None) -> Path:
    """This process's temp folder (mode 0700), created on first use — sweeping the folders
    of dead owners first. Removed when the process exits normally."""
    pid = os.getpid()
    with _LOCK:
        if pid in _DIRS and _DIRS[pid].is_dir():
            return _DIRS[pid]
        base = Path(root or tempfile.gettempdir())
        sweep(base)
        path = base / Owner.me().name
        path.mkdir(mode=0o700, exist_ok=True)
        if pid not in _DIRS:
            atexit.register(_remove_own, pid, path)
        _DIRS[pid] = path
        return path


def mkdtemp(prefix: str) -> Path:
    """A new private folder (0700) in :func:`session_dir`, like :func:`tempfile.mkdtemp`."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=session_dir()))


def remove_later(path: Path) -> None:
    """Remove ``path`` (a folder of :func:`mkdtemp` nothing uses any more, such as a finished
    cell's scratch) in the background (:func:`apparatus.background.later`: while a next cell
    waits on its harness): deleting a harness's HOME and workspace takes tens to hundreds of
    ms, which a cell need not wait for — nothing reads the folder again. What is still queued
    when the process exits goes with the session folder (:func:`session_dir`)."""
    from apparatus.background import later

    target = Path(path)
    later(lambda: shutil.rmtree(target, ignore_errors=True))


def register_process(pid: int) -> None:
    """Have ``pid`` (a process this one started, e.g. the LiteLLM proxy) ended by the sweep
    should this process die without ending it."""
    start = process_start(pid)
    if start is None:
        return
    procs = session_dir() / "procs"
    procs.mkdir(exist_ok=True)
    (procs / f"{pid}-{start}").touch()


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the session folders under ``root`` (default: the temp folder) whose owner on
    this host is dead, ending first their registered processes that still run. Returns the
    folders removed. Safe to run concurrently (a lost race is ignored)."""
    base = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for path in entries:
        owner = Owner.of(path.name)
        if owner is None or owner.alive() or not path.is_dir() or path.is_symlink():
            continue
        _end_registered(path / "procs")
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


def _end_registered(procs: Path) -> None:
    try:
        names = [p.name for p in procs.iterdir()]
    except OSError:
        return
    for name in names:
        pid, _, start = name.partition("-")
        if pid.isdigit() and start.isdigit() and alive_with_start(int(pid), int(start)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_own(pid: int, path: Path) -> None:
    if os.getpid() == pid:  # not in a forked child that inherited the handler
        shutil.rmtree(path, ignore_errors=True)
