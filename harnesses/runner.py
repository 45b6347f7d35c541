"""Run one native process with the runner's budgets.

``stdin`` is closed, stdout and stderr are streamed to files as they arrive
(the process writes straight into them), and the wall clock is enforced by
ending the process's whole tree: the process runs under the apparatus's
supervisor (:mod:`apparatus.lifetime`, a child subreaper), so even a child that
left the process group (``setsid``) is found and killed, and
:func:`run_process` returns only once every process of the turn is gone. The
supervisor also ends the turn when the session process dies (``kill -9`` of
pytest). A crash or hang is reported in the outcome, never raised.

A task may have a turn **interrupted** on purpose (``interrupts`` in ``task.yaml``: a session
killed mid-turn, then resumed). The cell runner arms an :class:`Interrupt` around that turn
(:func:`interrupting`); :func:`run_process` then watches for the pack's marker file and, the
moment it appears, SIGKILLs the whole tree (:func:`apparatus.lifetime.kill_now`) — no adapter
takes part, so every CLI harness is interrupted the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from apparatus.lifetime import kill_now, spawn, stop, wait_exit, wait_group_gone
from apparatus.tempstate import session_dir

#: SIGTERM -> SIGKILL grace when a turn is ended at its deadline.
KILL_GRACE_S = 2.0
#: How often an armed :class:`Interrupt` looks for its marker (seconds).
INTERRUPT_POLL_S = 0.05


@dataclass
class Interrupt:
    """A deliberate kill of the turn's process tree when ``marker`` (a path in the workspace)
    appears; :func:`run_process` sets ``fired`` and ``after_s`` (seconds into the process)."""

    marker: Path
    #: The folder the marker must stay inside (the cell's workspace).
    root: Path
    fired: bool = False
    after_s: float | None = None

    def remove_marker(self) -> None:
        """Delete the marker, unless a symlink in the (pack-made) workspace points it outside
        ``root``: a hostile pack must not get the runner to delete a file elsewhere."""
        try:
            inside = self.marker.parent.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return
        if inside and not self.marker.is_dir():
            self.marker.unlink(missing_ok=True)


_INTERRUPT: contextvars.ContextVar[Interrupt | None] = contextvars.ContextVar("tt_interrupt", default=None)


@contextlib.contextmanager
def interrupting(marker: Path | None, root: Path) -> Iterator[Interrupt | None]:
    """Arm an :class:`Interrupt` on ``marker`` (inside ``root``) for the processes
    :func:`run_process` starts in this block (``None``: nothing armed). A marker left over from
    before is removed first."""
    if marker is None:
        yield None
        return
    armed = Interrupt(marker, root)
    armed.remove_marker()
    token = _INTERRUPT.set(armed)
    try:
        yield armed
    finally:
        _INTERRUPT.reset(token)


@dataclass(frozen=True)
class ProcessOutcome:
    """Exit status of one native process."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    error: str | None = None
    interrupted: bool = False


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = 2.0, *, settle_s: float = 10.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after ``grace_s``; reaped afterwards.

    Returns only when the group has no process left (or, for a process stuck in the kernel,
    after ``settle_s`` more): a SIGKILL is delivered asynchronously, and a caller that looks
    right after the kill must not find a member still exiting.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    # The grace is for the whole group, not just its leader: members get SIGTERM too.
    if not wait_group_gone(proc.pid, grace_s, reap=proc, kill=False):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_group_gone(proc.pid, settle_s, reap=proc)


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdout: Path,
    stderr: Path,
    timeout_s: float,
) -> ProcessOutcome:
    """Run ``argv`` in its own process group; end its whole tree at ``timeout_s``.

    Returns only when no process of the run is left: what a finished process left
    running is killed too (the turn's processes are part of the turn). Inside a cell
    confined to a sandbox (:func:`apparatus.sandbox.confined`), ``argv`` is wrapped by
    that sandbox (bubblewrap etc.); otherwise it runs as given. Under an armed
    :class:`Interrupt` the tree is killed when its marker appears (``interrupted``; the
    marker is removed, so the resumed session never sees it).
    """
    from apparatus.sandbox import current

    conf = current()
    interrupt = _INTERRUPT.get()
    if conf is not None:
        argv = conf.wrap(argv, cwd=cwd, env=env)
    stdout.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with stdout.open("ab") as out, stderr.open("ab") as err:
        try:
            # Under the supervisor (own session): the turn's whole tree ends with it.
            proc, _ = spawn(list(argv), grace_s=KILL_GRACE_S, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                            stdout=out, stderr=err)
        except OSError as exc:
            return ProcessOutcome(None, False, time.monotonic() - started,
                                  f"could not start {argv[0]}: {exc}")
        try:
            code = wait_exit(proc, timeout_s) if interrupt is None else _wait_or_interrupt(
                proc, timeout_s, interrupt, started)
        except _Interrupted:
            assert interrupt is not None
            kill_now(proc)
            if conf is not None:
                conf.sandbox.reap()
            interrupt.remove_marker()
            return ProcessOutcome(None, False, time.monotonic() - started,
                                  f"interrupted by the runner {interrupt.after_s or 0:.1f}s into the turn, when the "
                                  f"task's marker {interrupt.marker.name} appeared; process tree killed (SIGKILL)",
                                  interrupted=True)
        except subprocess.TimeoutExpired:
            stop(proc, grace_s=KILL_GRACE_S)
            if conf is not None:
                conf.sandbox.reap()
            return ProcessOutcome(None, True, time.monotonic() - started,
                                  f"wall clock of {timeout_s:.0f}s exceeded; process group killed")
        # The supervisor has ended (and reaped) whatever the finished process left running,
        # wherever its session; the group is empty before the turn is over.
        wait_group_gone(proc.pid, KILL_GRACE_S, reap=proc)
    # A wrapper that exited by itself cleaned up after itself (the docker launcher removes its
    # container); only a killed one needs the sandbox's reap (above, and at cell cleanup).
    status = conf.sandbox.exit_code(code) if conf is not None else code
    return ProcessOutcome(status, False, time.monotonic() - started)


class _Interrupted(Exception):
    """The armed interrupt's marker appeared."""


def _wait_or_interrupt(proc: subprocess.Popen[bytes], timeout_s: float, interrupt: Interrupt, started: float) -> int:
    """``proc.wait(timeout_s)``, looking for the interrupt's marker meanwhile."""
    deadline = started + timeout_s
    while True:
        if interrupt.marker.exists():
            interrupt.fired, interrupt.after_s = True, time.monotonic() - started
            raise _Interrupted
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        try:
            return wait_exit(proc, min(INTERRUPT_POLL_S, left))
        except subprocess.TimeoutExpired:
            continue


def signal_death(code: int | None, error: str | None, binary: str) -> tuple[int | None, str | None]:
    """A process killed by a signal has no exit code: report it as a crash (``exit_code=None``)."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return None, f"{binary} was killed by {name}"
    return code, error


def cli_version_text(binary: Path, env_for: Callable[[Path], Mapping[str, str]]) -> str:
    """Output of ``<binary> --version`` (stdin closed) run in a throwaway HOME, so no user
    config is read and nothing is left behind; ``env_for(home)`` builds its environment."""
    with tempfile.TemporaryDirectory(prefix="tt-version-", dir=session_dir()) as home:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60,
                             check=False, env=dict(env_for(Path(home))), stdin=subprocess.DEVNULL)
    return (out.stdout or out.stderr).strip()


def clean_env(extra: Mapping[str, str], *, home: Path, keep: Sequence[str] = ("PATH", "LANG", "LC_ALL", "TZ")) -> dict[str, str]:
    """A minimal environment: nothing from the caller but ``keep``, plus ``extra``.

    HOME and TMPDIR point into the run directory so native files stay with the run.
    """
    env = {k: os.environ[k] for k in keep if k in os.environ}
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local/share"),
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    env.update(extra)
    return env
