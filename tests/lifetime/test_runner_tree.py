"""A turn's whole process tree ends with it (issue 17, "Crash and kill").

``harnesses.runner.run_process`` runs the harness under the apparatus's supervisor (a
child subreaper, :mod:`apparatus.lifetime`): a child that left the process group with
``setsid`` is still ended — at the deadline and when the harness exits by itself — and
the call returns only when nothing of the turn is left running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apparatus.sandbox import Confinement, LocalSandbox, confined
from harnesses.runner import kill_group, run_process
from tests.lifetime.helpers import group_members, kill_quietly, processes_in, running, wait_pid_file

ESCAPE = "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & "
WAIT_ESCAPED = "while [ ! -s escaped.pid ]; do sleep 0.01; done; "


def _run(tmp_path: Path, script: str, timeout_s: float) -> tuple[object, Path]:
    work = tmp_path / "workspace"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"]}
    with confined(Confinement(LocalSandbox())):
        out = run_process(["sh", "-c", script], env=env, cwd=work, stdout=tmp_path / "out.txt",
                          stderr=tmp_path / "err.txt", timeout_s=timeout_s)
    return out, work


def test_a_setsid_child_of_a_timed_out_local_turn_is_gone(tmp_path: Path) -> None:
    started = time.monotonic()
    out, work = _run(tmp_path, ESCAPE + WAIT_ESCAPED + "sleep 1000", timeout_s=3)
    escaped = wait_pid_file(work / "escaped.pid")
    try:
        assert out.timed_out and out.exit_code is None  # type: ignore[attr-defined]
        assert not running(escaped), "the setsid child survived the timed-out turn"
        assert processes_in(work) == []
        assert time.monotonic() - started < 20
    finally:
        kill_quietly(escaped)


def test_a_setsid_child_of_a_finished_turn_is_gone(tmp_path: Path) -> None:
    out, work = _run(tmp_path, ESCAPE + WAIT_ESCAPED + "exit 3", timeout_s=60)
    escaped = wait_pid_file(work / "escaped.pid")
    try:
        assert (out.exit_code, out.timed_out) == (3, False)  # type: ignore[attr-defined]
        assert not running(escaped), "the setsid child outlived its finished turn"
    finally:
        kill_quietly(escaped)


def test_the_turn_returns_only_when_every_process_of_it_is_gone(tmp_path: Path) -> None:
    """A child in the same group with a lot of memory takes a while to exit after SIGKILL
    (as a Node process does): the turn must not end while it still sits in the workspace."""
    child = (f"{sys.executable} -c \"import os, time; b = bytearray(256 * 2**20); "
             "open('big.pid', 'w').write(str(os.getpid())); time.sleep(1000)\" & ")
    out, work = _run(tmp_path, child + "while [ ! -s big.pid ]; do sleep 0.01; done; exit 0", timeout_s=60)
    big = wait_pid_file(work / "big.pid")
    try:
        left = processes_in(work)  # looked at immediately: no settling allowed
        assert out.exit_code == 0 and left == [], f"still in the workspace: {left}"  # type: ignore[attr-defined]
    finally:
        kill_quietly(big)


def test_exit_codes_and_signal_deaths_pass_through(tmp_path: Path) -> None:
    assert _run(tmp_path, "exit 7", 30)[0].exit_code == 7  # type: ignore[attr-defined]
    assert _run(tmp_path, "kill -KILL $$", 30)[0].exit_code == -9  # type: ignore[attr-defined]
    assert _run(tmp_path, "kill -TERM $$", 30)[0].exit_code == -15  # type: ignore[attr-defined]


def test_a_command_that_cannot_start_is_reported_not_raised(tmp_path: Path) -> None:
    work = tmp_path / "workspace"
    work.mkdir()
    outcome = run_process([str(tmp_path / "no-such-binary")], env={"PATH": os.environ["PATH"]}, cwd=work,
                          stdout=tmp_path / "o", stderr=tmp_path / "e", timeout_s=5)
    assert outcome.exit_code is None and not outcome.timed_out
    assert outcome.error is not None and outcome.error.startswith(f"could not start {tmp_path / 'no-such-binary'}")


@pytest.mark.parametrize("trap", [False, True], ids=["plain", "ignores-sigterm"])
def test_kill_group_returns_when_the_group_is_empty(tmp_path: Path, trap: bool) -> None:
    """The reference harness's shell tool kills a timed-out command with ``kill_group``: a
    member slow to exit (a lot of memory to tear down) must be gone when it returns."""
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if trap else ""
    member = (f"{sys.executable} -c \"import os, signal, time; {ignore}b = bytearray(256 * 2**20); "
              "open('member.pid', 'w').write(str(os.getpid())); time.sleep(1000)\" & ")
    proc = subprocess.Popen(["sh", "-c", member + "while [ ! -s member.pid ]; do sleep 0.01; done; wait"],
                            cwd=tmp_path, start_new_session=True)
    member_pid = wait_pid_file(tmp_path / "member.pid")
    try:
        kill_group(proc, grace_s=0.5)
        assert proc.returncode is not None
        left = group_members(proc.pid)  # looked at immediately: no settling allowed
        assert left == [] and not running(member_pid), f"still running: {left}"
    finally:
        kill_quietly(member_pid)


def test_a_setsid_child_of_the_deepseek_runtime_is_gone_after_kill(tmp_path: Path) -> None:
    """DeepSeek Harness's JSON-RPC runtime lives across turns outside ``run_process``; it runs
    under the same supervisor, so killing it (a turn's wall clock, the run's end) also ends a
    child that left its process group."""
    from harnesses.deepseek.rpc import Runtime

    work = tmp_path / "workspace"
    work.mkdir()
    runtime = Runtime(["sh", "-c", ESCAPE + WAIT_ESCAPED + "cat"], env={"PATH": os.environ["PATH"]}, cwd=work,
                      stdout=tmp_path / "out.txt", stderr=tmp_path / "err.txt", requests=tmp_path / "req.jsonl")
    escaped = wait_pid_file(work / "escaped.pid")
    try:
        assert runtime.alive and running(escaped)
        runtime.kill(grace_s=0.5)
        assert not runtime.alive
        assert not running(escaped), "the setsid child outlived the killed runtime"
    finally:
        kill_quietly(escaped)
