"""A turn the task interrupts on purpose (``interrupts`` in ``task.yaml``) is killed at its marker.

:func:`harnesses.runner.interrupting` arms the watch; :func:`harnesses.runner.run_process`
SIGKILLs the whole tree the moment the marker appears (no grace: a harness must not get the
chance to save its state as on a polite stop), removes the marker and reports ``interrupted``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from apparatus.sandbox import Confinement, LocalSandbox, confined
from harnesses.runner import Interrupt, ProcessOutcome, interrupting, run_process
from tests.lifetime.helpers import kill_quietly, processes_in, running, wait_pid_file

ESCAPE = "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & "
WAIT_ESCAPED = "while [ ! -s escaped.pid ]; do sleep 0.01; done; "
#: A harness that saves its state on SIGTERM: only a polite stop would let it write saved.txt.
SAVES_ON_TERM = "trap 'echo saved > saved.txt; exit 143' TERM; "


def _run(tmp_path: Path, script: str, *, marker: str | None, timeout_s: float = 60) -> tuple[ProcessOutcome, Path,
                                                                                               Interrupt | None]:
    work = tmp_path / "workspace"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"]}
    with confined(Confinement(LocalSandbox())), interrupting(work / marker if marker else None, work) as armed:
        out = run_process(["sh", "-c", script], env=env, cwd=work, stdout=tmp_path / "out.txt",
                          stderr=tmp_path / "err.txt", timeout_s=timeout_s)
    return out, work, armed


def test_the_tree_is_killed_when_the_marker_appears_and_the_marker_is_removed(tmp_path: Path) -> None:
    started = time.monotonic()
    out, work, armed = _run(tmp_path, SAVES_ON_TERM + ESCAPE + WAIT_ESCAPED
                            + "echo paid >> ledger.txt; touch .tt-kill; sleep 1000", marker=".tt-kill")
    escaped = wait_pid_file(work / "escaped.pid")
    try:
        assert out.interrupted and not out.timed_out and out.exit_code is None
        assert out.error is not None and ".tt-kill" in out.error and "SIGKILL" in out.error
        assert armed is not None and armed.fired and armed.after_s is not None
        assert not running(escaped), "a setsid child survived the interruption"
        assert processes_in(work) == []
        assert not (work / ".tt-kill").exists(), "the marker must not reach the resumed session"
        assert (work / "ledger.txt").read_text() == "paid\n"  # what ran before the marker stays done
        assert not (work / "saved.txt").exists(), "the harness got a SIGTERM: an interrupt is a kill, not a stop"
        assert time.monotonic() - started < 20
    finally:
        kill_quietly(escaped)


def test_a_turn_that_never_writes_the_marker_ends_as_usual(tmp_path: Path) -> None:
    out, _, armed = _run(tmp_path, "echo done; exit 4", marker=".tt-kill")
    assert (out.exit_code, out.timed_out, out.interrupted) == (4, False, False)
    assert armed is not None and not armed.fired


def test_the_wall_clock_still_applies_while_a_marker_is_watched(tmp_path: Path) -> None:
    out, _, armed = _run(tmp_path, "sleep 1000", marker=".tt-kill", timeout_s=2)
    assert out.timed_out and not out.interrupted
    assert armed is not None and not armed.fired


def test_a_stale_marker_from_before_the_turn_does_not_fire(tmp_path: Path) -> None:
    work = tmp_path / "workspace"
    work.mkdir()
    (work / ".tt-kill").write_text("left over")
    out, _, armed = _run(tmp_path, "sleep 0.5; exit 0", marker=".tt-kill")
    assert out.exit_code == 0 and not out.interrupted
    assert armed is not None and not armed.fired


def test_nothing_is_armed_without_a_marker(tmp_path: Path) -> None:
    out, work, armed = _run(tmp_path, "touch .tt-kill; exit 0", marker=None)
    assert armed is None and out.exit_code == 0 and not out.interrupted
    assert (work / ".tt-kill").exists()


def test_a_marker_reached_through_a_symlink_out_of_the_workspace_is_not_deleted(tmp_path: Path) -> None:
    """A hostile pack must not get the runner to delete a file outside the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    precious = outside / "precious.txt"
    precious.write_text("keep me")
    work = tmp_path / "workspace"
    work.mkdir()
    (work / "link").symlink_to(outside, target_is_directory=True)
    with interrupting(work / "link" / "precious.txt", work) as armed:
        assert armed is not None
        armed.remove_marker()
    assert precious.read_text() == "keep me"
