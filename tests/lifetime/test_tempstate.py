"""Temp state of a session lives in a folder its process owns; the next session sweeps the
folders of dead owners, ending the processes registered there, and never touches a live
owner's (issue 17, "Crash and kill")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from apparatus import tempstate
from tests.conftest import REPO
from tests.lifetime.helpers import kill_quietly, running

# A "session" as the plugin starts one: its Services set up the session folder; then it
# creates a cell scratch and registers a helper process, as the gateway does.
SESSION = """
import subprocess, sys, time
from pathlib import Path
from apparatus import tempstate
from tracetrial_fixtures.services import Services
Services(output=Path(sys.argv[1]))
scratch = tempstate.mkdtemp("tt-cell-")
(scratch / "secret.txt").write_text("master key")
helper = subprocess.Popen(["sleep", "1000"], start_new_session=True)
tempstate.register_process(helper.pid)
print(tempstate.session_dir(), helper.pid, flush=True)
if sys.argv[2] == "hold":
    time.sleep(1000)
"""


def _session(tmp: Path, mode: str) -> tuple[subprocess.Popen[str], Path, int]:
    proc = subprocess.Popen([sys.executable, "-c", SESSION, str(tmp / "out"), mode], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.stdout is not None
    folder, helper = proc.stdout.readline().split()
    return proc, Path(folder), int(helper)


def test_a_killed_sessions_state_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead, dead_dir, dead_helper = _session(tmp_path, "hold")
    live, live_dir, live_helper = _session(tmp_path, "hold")
    try:
        assert dead_dir.parent == live_dir.parent == tmp_path and dead_dir != live_dir
        dead.kill()
        dead.wait()
        assert dead_dir.is_dir() and running(dead_helper)  # kill -9: nothing cleaned up
        nxt, next_dir, next_helper = _session(tmp_path, "exit")
        nxt.wait()
        assert not dead_dir.exists() and not running(dead_helper)
        assert live_dir.is_dir() and (next(live_dir.glob("tt-cell-*")) / "secret.txt").is_file()
        assert running(live_helper)
        assert not next_dir.exists()  # a session that ends normally removes its own folder
        kill_quietly(next_helper)
    finally:
        live.kill()
        live.wait()
        kill_quietly(dead_helper, live_helper)


def test_a_reused_pid_or_another_hosts_folder_is_not_mistaken(tmp_path: Path) -> None:
    me = tempstate.Owner.me()
    reused = tmp_path / tempstate.Owner(me.host, me.pid, me.start + 1).name   # my pid, another start: dead
    foreign = tmp_path / tempstate.Owner("0" * 8, 1, 1).name                  # another host: unknown
    mine = tmp_path / me.name
    unrelated = tmp_path / "tt-gateway-abc"                                   # not a session folder
    for folder in (reused, foreign, mine, unrelated):
        folder.mkdir()
    assert tempstate.sweep(tmp_path) == [reused]
    assert foreign.is_dir() and mine.is_dir() and unrelated.is_dir()


def test_a_scratch_removed_later_is_gone_soon_and_the_session_folder_stays() -> None:
    """A finished cell's scratch is deleted in the background (the cell does not wait for it)."""
    import time

    scratch = tempstate.mkdtemp("tt-cell-")
    (scratch / "home" / ".cache").mkdir(parents=True)
    (scratch / "home" / ".cache" / "f.txt").write_text("x")
    tempstate.remove_later(scratch)
    deadline = time.monotonic() + 10
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not scratch.exists()
    assert tempstate.session_dir().is_dir()
