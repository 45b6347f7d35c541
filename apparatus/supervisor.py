"""The supervisor of one command (run as a script: ``python -I -S supervisor.py …``).

What it guarantees, and why a subreaper rather than a cgroup, is told in
:mod:`apparatus.lifetime`, which starts it (:func:`apparatus.lifetime.spawn`). This file is
apart from that module so that a supervisor — one per harness process, the LiteLLM proxy
and every other command the apparatus runs — pays only for the standard library it uses:
``os``, ``signal``, ``sys``, ``time`` (and ``ctypes`` for ``prctl``), ~10 ms instead of the
~25 ms the owner side's imports (``subprocess``, ``shutil``, ``pathlib``...) cost. It imports
nothing of the package: it runs outside any sandbox, by path.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs ~2 ms to import
    from typing import NoReturn

__all__ = ["KILL_SIGNAL", "descendants", "main"]

#: How often the supervisor looks at its parent and its tree (seconds).
_TICK_S = 0.1
#: A descendant that survives SIGKILL this long is stuck in the kernel (D state): give up on it.
_KILL_SETTLE_S = 10.0
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


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


# --------------------------------------------------------------------------- the supervisor
def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False  # not Linux: the tree is then only what stays in the process group


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Sent by :func:`apparatus.lifetime.kill_now`: SIGKILL the tree at once.
KILL_SIGNAL = signal.SIGUSR1
#: Signals the command starts with at their default action whatever the apparatus inherited:
#: a background job of a non-interactive shell (``bench.sh &``, some CI runners) has SIGINT and
#: SIGQUIT ignored, ``nohup`` SIGHUP too, and an ignored signal stays ignored across ``exec`` —
#: a harness's Ctrl-C or hang-up to a job on its terminal would then never arrive (E8 tasks
#: grade exactly that), which is the apparatus's doing, not the harness's.
_DEFAULT_IN_COMMAND = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGQUIT, KILL_SIGNAL, *_STOP_SIGNALS)


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
        tree = descendants(self.me) if os.path.exists("/proc/self") else ([self.child] if self.status is None else [])
        for pid in tree:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        return tree

    def wait_tree(self, timeout_s: float) -> bool:
        """Reap until no descendant is left (``True``) or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.reap()
            if not (descendants(self.me) if os.path.exists("/proc/self") else self.status is None):
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

        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ValueError, OSError):
            pass
        if sig != signal.SIGKILL:  # SIGKILL has no handler to reset (and cannot be blocked)
            try:
                signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            except (OSError, ValueError):
                pass
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
    try:
        os.write(fd, text.encode())
        os.close(fd)
    except OSError:
        pass


def main(args: list[str]) -> NoReturn:
    """The supervisor: ``supervisor.py --parent PID --grace S [--pdeathsig] [--report-fd N]
    [--cleanup DIR] -- argv…``; see the module docstring."""
    opts, argv = _parse(args)
    sup = _Supervisor(int(opts["parent"]), float(opts.get("grace", "2")))
    report_fd = int(opts["report-fd"]) if "report-fd" in opts else None
    if report_fd is not None:
        os.set_inheritable(report_fd, False)
    # Block the signals we wait for (sigtimedwait below); the command gets a clean mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD, KILL_SIGNAL, *_STOP_SIGNALS])
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if opts.get("pdeathsig"):
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if sup.owner_gone():  # the owner died before the parent-death signal was armed
        _report(report_fd, f"E{errno.ESRCH} the owner process {sup.parent} is gone\n")
        os._exit(1)
    try:
        sup.child = os.posix_spawnp(argv[0], argv, dict(os.environ), setsigmask=(), setsigdef=_DEFAULT_IN_COMMAND)
    except OSError as exc:
        _report(report_fd, f"E{exc.errno or errno.EIO} {exc.strerror or exc}: {argv[0]}\n")
        os._exit(127)
    _report(report_fd, f"S{sup.child}\n")
    stopped_by_owner = False
    while True:
        info = signal.sigtimedwait([signal.SIGCHLD, KILL_SIGNAL, *_STOP_SIGNALS], _TICK_S)
        sup.reap()
        if sup.status is not None:
            sup.end_tree(graceful=False)   # what the finished command left behind is part of its run
            break
        if info is not None and info.si_signo == KILL_SIGNAL:
            sup.end_tree(graceful=False)
            break
        if (info is not None and info.si_signo in _STOP_SIGNALS) or sup.owner_gone():
            stopped_by_owner = sup.owner_gone()
            sup.end_tree(graceful=True)
            break
    if stopped_by_owner and "cleanup" in opts:
        import shutil  # only here: ~4 ms to import

        shutil.rmtree(opts["cleanup"], ignore_errors=True)
    _exit_like(sup.status)


if __name__ == "__main__":
    main(sys.argv[1:])
