"""What every harness process pays for: the supervisor and the docker launcher import only
the standard modules they use, and the runner learns of an exit when it happens (a pidfd),
not at the standard wait's next 50 ms look. Behaviour, not timing: the imports are read from
``-X importtime``, the wait from how many times it looked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apparatus import lifetime
from apparatus.sandbox import spawner

#: What the owner side of apparatus.lifetime imports and a supervisor or launcher must not.
HEAVY = {"subprocess", "shutil", "pathlib", "typing", "importlib.util", "contextlib", "tempfile"}


def _imported(argv: list[str]) -> set[str]:
    done = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", *argv], capture_output=True, text=True,
                          timeout=60, check=False)
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_the_supervisor_imports_no_heavy_module() -> None:
    seen = _imported([str(lifetime.SUPERVISOR), "--parent", str(os.getpid()), "--grace", "1", "--", "/bin/true"])
    assert "signal" in seen or "errno" in seen, "-X importtime reported nothing the supervisor needs"
    assert not seen & HEAVY, f"the supervisor imported {sorted(seen & HEAVY)}"


def test_the_docker_launcher_imports_no_heavy_module(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text('{"socket": "/nonexistent/keeper.sock", "argv": ["true"], "env": {}, "cwd": "/", '
                   '"start_timeout_s": 0}')
    seen = _imported(["-c", spawner.BOOT, str(Path(spawner.__file__).resolve()), str(job)])
    assert "spawner" in seen and "socket" in seen
    assert not seen & HEAVY, f"the launcher imported {sorted(seen & HEAVY)}"


def test_wait_exit_returns_the_code_when_the_process_ends() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 0.3; exit 7"])
    begun = time.monotonic()
    assert lifetime.wait_exit(proc, 30) == 7
    assert time.monotonic() - begun < 10
    assert lifetime.wait_exit(proc, 30) == 7  # already reaped: the known code


def test_wait_exit_raises_at_its_timeout_and_the_process_still_runs() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            lifetime.wait_exit(proc, 0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_wait_exit_is_told_of_the_exit_rather_than_looking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard wait with a timeout sleeps and looks again (every 50 ms once a process has
    run a while); with a pidfd the waiter sleeps in one poll until the exit."""
    looks: list[float] = []
    real_sleep = time.sleep

    def counting_sleep(seconds: float) -> None:
        looks.append(seconds)
        real_sleep(seconds)

    proc = subprocess.Popen(["sleep", "0.5"])
    monkeypatch.setattr(time, "sleep", counting_sleep)
    assert lifetime.wait_exit(proc, 30) == 0
    assert looks == [], f"the wait polled {len(looks)} times"
