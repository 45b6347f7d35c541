"""Helpers of the lifetime tests: is a process (still) there, and cleanup of what a failing
test would otherwise leave running."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def running(pid: int) -> bool:
    """``pid`` exists and has not finished exiting (a zombie has)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2:].split()[0] != b"Z"


def wait_pid_file(path: Path, timeout_s: float = 30.0) -> int:
    """The pid a test process wrote to ``path`` (it writes it before anything else)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def processes_in(cwd: Path) -> list[int]:
    """Every process whose working directory is ``cwd`` (as the OpenClaw hang test looks)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == cwd:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def kill_quietly(*pids: int) -> None:
    """SIGKILL leftovers of a test that failed (so a failure does not leak processes)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def group_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that have not finished exiting (zombies wait only for
    their reaper: this machine's init reaps orphans lazily)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_bytes()
            except OSError:
                continue
            fields = raw[raw.rfind(b")") + 2:].split()
            if fields[0] != b"Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members
