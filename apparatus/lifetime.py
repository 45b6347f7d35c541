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

The module imports only the standard library at the top: the supervisor runs as
``python -I -S lifetime.py …`` (isolated, no site: ~20 ms), outside any sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["SUPERVISOR", "alive_with_start", "descendants", "group_alive", "kill_now", "process_start", "spawn",
           "stop", "supervisor_argv", "wait_group_gone"]

SUPERVISOR = Path(__file__).resolve()
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
#: How often the supervisor looks at its parent and its tree (seconds).
_TICK_S = 0.1
#: A descendant that survives SIGKILL this long is stuck in the kernel (D state): give up on it.
_KILL_SETTLE_S = 10.0


# --------------------------------------------------------------------------- /proc helpers
def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (field 3, the state, is first)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    return raw[raw.rfind(b")") + 2:].split()


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


def _parents() -> dict[int, list[int]]:
    """Parent pid -> its live (not zombie) children, from ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is None or len(fields) < 2 or fields[0] == b"Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (by parent links in ``/proc``), nearest first."""
    children = _parents()
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


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


# --------------------------------------------------------------------------- supervisor side
def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the tree is then only what stays in the process group


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Sent by :func:`kill_now`: SIGKILL the tree at once.
_KILL_SIGNAL = signal.SIGUSR1


class _Supervisor:
    def __init__(self, parent: int, grace_s: float):
        self.parent = parent
        self.grace_s = grace_s
        self.me = os.getpid()
        self.child = 0
        self.status: int | None = None   # the command's wait status, once reaped

    def owner_gone(self) -> bool:
        return os.getppid() != self.parent

    def reap(self) -> None:
        """Reap every exited child (the command, and orphans re-parented to us)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.status = status

    def signal_tree(self, sig: int) -> list[int]:
        tree = descendants(self.me) if Path("/proc/self").exists() else ([self.child] if self.status is None else [])
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return tree

    def wait_tree(self, timeout_s: float) -> bool:
        """Reap until no descendant is left (``True``) or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.reap()
            if not (descendants(self.me) if Path("/proc/self").exists() else self.status is None):
                return True
            if time.monotonic() >= deadline:
                return False
            signal.sigtimedwait([signal.SIGCHLD], 0.02)

    def end_tree(self, graceful: bool) -> None:
        if graceful and self.signal_tree(signal.SIGTERM) and self.wait_tree(self.grace_s):
            return
        for _ in range(100):  # bounded: a tree that forks while being killed is killed again
            if not self.signal_tree(signal.SIGKILL):
                break
            if self.wait_tree(_KILL_SETTLE_S):
                break
        self.reap()


def _exit_like(status: int | None) -> NoReturn:
    """Exit with the command's wait ``status``: its code, or die of its signal (no core file)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import resource

        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig != signal.SIGKILL:  # SIGKILL has no handler to reset (and cannot be blocked)
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is to be ignored: report it as the shell would
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    while args and args[0] != "--":
        key = args.pop(0)
        if key == "--pdeathsig":
            opts["pdeathsig"] = "1"
        else:
            opts[key.lstrip("-")] = args.pop(0)
    return opts, args[1:]


def _report(fd: int | None, text: str) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, text.encode())
        os.close(fd)


def main(args: list[str]) -> NoReturn:
    """The supervisor: ``lifetime.py --parent PID --grace S [--pdeathsig] [--report-fd N]
    [--cleanup DIR] -- argv…``; see the module docstring."""
    opts, argv = _parse(args)
    sup = _Supervisor(int(opts["parent"]), float(opts.get("grace", "2")))
    report_fd = int(opts["report-fd"]) if "report-fd" in opts else None
    if report_fd is not None:
        os.set_inheritable(report_fd, False)
    # Block the signals we wait for (sigtimedwait below); the command gets a clean mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD, _KILL_SIGNAL, *_STOP_SIGNALS])
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if opts.get("pdeathsig"):
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if sup.owner_gone():  # the owner died before the parent-death signal was armed
        _report(report_fd, f"E{errno.ESRCH} the owner process {sup.parent} is gone\n")
        os._exit(1)
    try:
        sup.child = os.posix_spawnp(argv[0], argv, dict(os.environ), setsigmask=(),
                                    setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, _KILL_SIGNAL, *_STOP_SIGNALS))
    except OSError as exc:
        _report(report_fd, f"E{exc.errno or errno.EIO} {exc.strerror or exc}: {argv[0]}\n")
        os._exit(127)
    _report(report_fd, f"S{sup.child}\n")
    stopped_by_owner = False
    while True:
        info = signal.sigtimedwait([signal.SIGCHLD, _KILL_SIGNAL, *_STOP_SIGNALS], _TICK_S)
        sup.reap()
        if sup.status is not None:
            sup.end_tree(graceful=False)   # what the finished command left behind is part of its run
            break
        if info is not None and info.si_signo == _KILL_SIGNAL:
            sup.end_tree(graceful=False)
            break
        if (info is not None and info.si_signo in _STOP_SIGNALS) or sup.owner_gone():
            stopped_by_owner = sup.owner_gone()
            sup.end_tree(graceful=True)
            break
    if stopped_by_owner and "cleanup" in opts:
        shutil.rmtree(opts["cleanup"], ignore_errors=True)
    _exit_like(sup.status)


if __name__ == "__main__":
    main(sys.argv[1:])
