"""Process lifetime: an apparatus process dies with the session, a process tree dies whole.

Two guarantees the rest of the apparatus builds on:

* **The tree of a command ends as a whole.** A harness (or its shell tool) may leave
  its process group — ``setsid``, ``nohup … &``, Node's ``detached`` — and a process
  group kill would then miss it. :func:`spawn` therefore runs a command under a small
  **supervisor** (this file, run as a script) that makes itself a *child subreaper*
  (``prctl(PR_SET_CHILD_SUBREAPER)``): every descendant orphaned in the command's tree
  is re-parented to the supervisor instead of init, so the supervisor can always find
  the whole tree in ``/proc`` (by parent links) and end it. When the command exits, the
  supervisor SIGKILLs what it left behind; on SIGTERM (a deadline) it SIGTERMs the whole
  tree, waits ``--grace`` seconds, SIGKILLs the rest; either way it exits only after
  every descendant is gone and reaped, with the command's own exit status (a signal
  death is re-raised, so the caller sees ``-N`` as before). On SIGUSR1 (:func:`kill_now`:
  the runner's deliberate interruption of a turn, which must look like a crash to the
  harness, not like a polite stop) it SIGKILLs the whole tree at once, with no grace.

  Chosen over a cgroup because it needs no root, no systemd delegation and no cgroup v2
  mount (containers and CI runners often have none writable); its limit is a process
  that escapes through a daemon (``docker run``, ``systemd-run``), which the sandbox
  backends handle themselves (the docker backend removes the cell's containers).

* **The supervisor dies with its owner.** It gets ``PR_SET_PDEATHSIG`` (SIGTERM) when
  the owner started it from the main thread — the kernel ties that signal to the
  *thread* that forked, so from another thread it would fire when that thread ends —
  and in every case it watches ``getppid()`` (a thread's exit never changes it), so a
  ``kill -9`` of pytest ends the LiteLLM proxy and a running harness turn within a
  fraction of a second. ``--cleanup DIR`` removes a folder (the gateway's config with
  its master key) once the tree is gone, when the owner died.

The supervisor itself is :mod:`apparatus.supervisor`, run by path as ``python -I -S
supervisor.py …`` (isolated, no site, the few standard modules it needs: ~10 ms), outside
any sandbox; this module is the owner's side.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apparatus import supervisor as _supervisor
from apparatus.supervisor import _stat_fields, descendants

__all__ = ["SUPERVISOR", "alive_with_start", "descendants", "group_alive", "kill_now", "process_start", "spawn",
           "stop", "supervisor_argv", "wait_exit", "wait_group_gone"]

#: The supervisor script (:mod:`apparatus.supervisor`, run by path with ``python -I -S``).
SUPERVISOR = Path(_supervisor.__file__).resolve()
#: A descendant that survives SIGKILL this long is stuck in the kernel (D state): give up on it.
_KILL_SETTLE_S = _supervisor._KILL_SETTLE_S
_KILL_SIGNAL = _supervisor.KILL_SIGNAL


# --------------------------------------------------------------------------- /proc helpers
def process_start(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field 22): with
    the pid it names one process, even after the pid is reused. ``None``: no such process
    (or no ``/proc``)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def alive_with_start(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` still runs and is the one that started at ``start`` (a zombie
    counts as gone). Without ``/proc``, whether ``pid`` answers a signal 0."""
    fields = _stat_fields(pid)
    if fields is None:
        if Path("/proc/self/stat").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if fields[0] == b"Z":
        return False
    return start is None or (len(fields) > 19 and int(fields[19]) == start)


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a process that has not finished exiting. A zombie
    has (it only waits for its parent to read its status, which a container's init may
    never do); without ``/proc``, whether the group answers a signal 0."""
    if Path("/proc/self/stat").exists():
        try:
            entries = os.listdir("/proc")
        except OSError:
            entries = []
        for entry in entries:
            if entry.isdigit():
                fields = _stat_fields(int(entry))
                if fields is not None and len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
                    return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_group_gone(pgid: int, timeout_s: float, *, reap: subprocess.Popen[bytes] | None = None,
                    kill: bool = True) -> bool:
    """Wait (bounded) until process group ``pgid`` has no process left; returns whether it is gone.

    With ``kill`` the group is SIGKILLed on every look: a SIGKILL is delivered asynchronously,
    so a group just killed can still have members for a moment (a big Node process takes a
    while to tear down its memory, its working directory held all along). ``reap``: the
    group's leader, reaped here. Polled (growing interval, at most 0.1 s): the kernel offers
    no event for "this group is empty".
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        if reap is not None:
            reap.poll()
        # Looked at before any signal: a live member holds the group id, so it cannot have
        # been reused for a stranger's group by the time we signal it.
        if not group_alive(pgid):
            return True
        if kill:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# --------------------------------------------------------------------------- owner side
def wait_exit(proc: subprocess.Popen[Any], timeout_s: float) -> int:
    """``proc.wait(timeout=timeout_s)``, told of the exit by the kernel: the standard wait with a
    timeout looks every 50 ms once the process has run a while (~25 ms late on average, per
    harness process); a pidfd (Linux 5.3+) becomes readable the moment the process exits.
    Where there is none, the standard wait. Raises ``subprocess.TimeoutExpired`` likewise."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or already reaped
        return proc.wait(timeout=timeout_s)
    try:
        import select

        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout_s
        while not poller.poll(max(deadline - time.monotonic(), 0.0) * 1000):
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    return proc.wait()


def supervisor_argv(argv: Sequence[str], *, grace_s: float = 2.0, report_fd: int | None = None,
                    cleanup: Path | None = None) -> list[str]:
    """The command line that runs ``argv`` under the supervisor owned by this process."""
    cmd = [sys.executable, "-I", "-S", str(SUPERVISOR), "--parent", str(os.getpid()), "--grace", f"{grace_s:g}"]
    if threading.current_thread() is threading.main_thread():
        cmd.append("--pdeathsig")  # see the module docstring: only safe from the main thread
    if report_fd is not None:
        cmd += ["--report-fd", str(report_fd)]
    if cleanup is not None:
        cmd += ["--cleanup", str(cleanup)]
    return [*cmd, "--", *argv]


def spawn(argv: Sequence[str], *, grace_s: float = 2.0, cleanup: Path | None = None,
          **popen: Any) -> tuple[subprocess.Popen[bytes], int | None]:
    """Start ``argv`` under the supervisor in a new session (its own process group).

    ``popen``: further :class:`subprocess.Popen` arguments (cwd, env, stdio). Returns the
    supervisor's ``Popen`` (its exit status is the command's) and the command's pid.

    Raises:
        OSError: the command could not be started (as :class:`subprocess.Popen` would).
    """
    read_end, write_end = os.pipe()
    try:
        proc: subprocess.Popen[bytes] = subprocess.Popen(
            supervisor_argv(argv, grace_s=grace_s, report_fd=write_end, cleanup=cleanup),
            pass_fds=(write_end,), start_new_session=True, **popen)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        report = fh.read()  # EOF once the supervisor has started the command (or failed to)
    if report.startswith(b"E"):
        proc.wait()
        code, _, message = report[1:].decode("utf-8", "replace").strip().partition(" ")
        raise OSError(int(code) if code.isdigit() else errno.EIO, message)
    pid = report[1:].strip()
    return proc, int(pid) if report.startswith(b"S") and pid.isdigit() else None


def stop(proc: subprocess.Popen[bytes], grace_s: float = 2.0) -> None:
    """End a command started by :func:`spawn` and everything it started, and reap it.

    Only the supervisor is signalled (SIGTERM): it passes the signal to the whole tree once
    (a second SIGTERM makes some CLIs skip their own cleanup), SIGKILLs what is left after
    ``grace_s`` and exits when the tree is gone. Should the supervisor itself not exit in
    time, its process group is killed. Returns when the group is gone (bounded).
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s + _KILL_SETTLE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wait_group_gone(proc.pid, _KILL_SETTLE_S, reap=proc)


def kill_now(proc: subprocess.Popen[bytes]) -> None:
    """End a command started by :func:`spawn` and everything it started at once (SIGKILL, no
    grace: nothing in the tree gets the chance to save or clean up), and reap it.

    The supervisor is asked with SIGUSR1 (it then SIGKILLs the tree and exits); should it not
    exit in time, its process group is killed. Returns when the group is gone (bounded).
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, _KILL_SIGNAL)
        try:
            proc.wait(timeout=_KILL_SETTLE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wait_group_gone(proc.pid, _KILL_SETTLE_S, reap=proc)


