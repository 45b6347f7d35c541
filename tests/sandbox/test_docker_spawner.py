"""The docker cell's spawner on its own (:mod:`apparatus.sandbox.spawner`): its failure modes.

The keeper runs here as a plain host process (it is PID 1 only in a container, so it never
sweeps here: the guard), driven by the real launcher or by a raw socket; the last tests run
it where it belongs, in a cell's container.
"""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apparatus.sandbox import docker_reason, get_sandbox, spawner

SPAWNER = str(Path(spawner.__file__).resolve())


@pytest.fixture
def keeper(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A keeper listening on ``<tmp>/keeper.sock`` (its stdin held open, as the owner's attach)."""
    path = tmp_path / "keeper.sock"
    proc = subprocess.Popen([sys.executable, "-I", "-S", SPAWNER, "keeper", "--socket", str(path),
                             spawner.KEEPER_MARK], stdin=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists(), "the keeper never listened"
    yield path, proc
    proc.kill()
    proc.wait()


def _launch(tmp_path: Path, sock: Path, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float = 30, **popen: Any) -> subprocess.Popen[bytes]:
    job = tmp_path / f"job-{time.monotonic_ns()}.json"
    job.write_text(json.dumps({"socket": str(sock), "argv": argv, "env": env or {}, "cwd": str(tmp_path),
                               "stdin": False, "status": str(tmp_path / "status"), "start_timeout_s": 2}))
    return subprocess.Popen([sys.executable, "-I", "-S", "-c", spawner.BOOT, SPAWNER, str(job)], **popen)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_launcher_runs_the_process_with_its_own_stdio(keeper, tmp_path: Path) -> None:
    """Exit code, streams, environment by name, working folder; a signal death is 128+N with
    the raw status written for the sandbox (a crash stays a crash)."""
    sock, _ = keeper
    proc = _launch(tmp_path, sock, ["sh", "-c", 'echo "$TT_X $(pwd)"; echo err >&2; exit 7'],
                   env={"TT_X": "value-by-request"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 7 and (tmp_path / "status").read_text() == "7"
    assert out.decode().split() == ["value-by-request", str(tmp_path)] and err == b"err\n"
    proc = _launch(tmp_path, sock, ["sh", "-c", "kill -KILL $$"])
    assert proc.wait(timeout=30) == 128 + 9 and (tmp_path / "status").read_text() == "-9"


def test_a_regular_file_is_never_handed_over(keeper, tmp_path: Path) -> None:
    """The runner's stdout file reaches the process as a pipe (as under ``docker exec``), not
    as a handle on the host file it could reopen through /proc/self/fd."""
    sock, _ = keeper
    out = tmp_path / "out.txt"
    with out.open("ab") as fh:
        proc = _launch(tmp_path, sock, ["sh", "-c", "readlink /proc/self/fd/1; echo done"], stdout=fh)
        assert proc.wait(timeout=30) == 0
    text = out.read_text()
    assert text.startswith("pipe:") and "done" in text and str(out) not in text


def test_keeper_gone_is_a_clear_error(keeper, tmp_path: Path) -> None:
    sock, proc = keeper
    proc.kill()
    proc.wait()
    launcher = _launch(tmp_path, sock, ["true"], stderr=subprocess.PIPE)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == spawner.SPAWNER_FAILED
    assert b"keeper is gone" in err


def test_no_keeper_at_all_is_a_clear_error(tmp_path: Path) -> None:
    """A socket that never appears: the launcher gives up after its start timeout."""
    launcher = _launch(tmp_path, tmp_path / "never.sock", ["true"], stderr=subprocess.PIPE)
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == spawner.SPAWNER_FAILED and b"did not start" in err


def _raw(sock: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock))
    s.settimeout(10)
    return s


def _reply(s: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return dict(json.loads(data)) if data else {}


@pytest.mark.parametrize("case", ["no-descriptors", "garbage", "bad-argv", "too-large"])
def test_malformed_request_is_refused_and_the_keeper_serves_on(keeper, tmp_path: Path, case: str) -> None:
    sock, proc = keeper
    s = _raw(sock)
    null = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    try:
        if case == "no-descriptors":
            s.sendall(b"\x00\x00\x00\x02{}")
        elif case == "garbage":
            spawner.send_request(s, {}, null)  # framed, but not a request
        elif case == "bad-argv":
            spawner.send_request(s, {"argv": "sh -c id", "env": {}, "cwd": "/"}, null)
        else:
            s.sendmsg([b"\x7f\xff\xff\xff"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", null))])
        answer = _reply(s)
    finally:
        for fd in null:
            os.close(fd)
        s.close()
    assert answer.get("code") == spawner.SPAWNER_FAILED and "malformed request" in answer.get("error", "")
    assert proc.poll() is None
    launcher = _launch(tmp_path, sock, ["true"])
    assert launcher.wait(timeout=30) == 0


def test_a_dropped_connection_kills_the_process(keeper, tmp_path: Path) -> None:
    """A launcher killed outright (no kill request): its process group goes with its connection."""
    sock, _ = keeper
    s = _raw(sock)
    null = [os.open("/dev/null", os.O_RDWR) for _ in range(3)]
    try:
        spawner.send_request(s, {"argv": ["sh", "-c", "sleep 60 & sleep 61"], "env": {}, "cwd": "/"}, null)
    finally:
        for fd in null:
            os.close(fd)
    pid = int(_reply(s)["pid"])
    assert _alive(pid)
    s.close()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_sigterm_of_the_launcher_kills_the_process(keeper, tmp_path: Path) -> None:
    """The runner's deadline: SIGTERM to the launcher becomes a kill request; the launcher
    exits with the process's status (killed: 128+9)."""
    sock, _ = keeper
    marker = tmp_path / "pid"
    launcher = _launch(tmp_path, sock, ["sh", "-c", f"echo $$ > {marker}; exec sleep 60"])
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "the process never started"
        time.sleep(0.02)
    pid = int(marker.read_text())
    launcher.terminate()
    assert launcher.wait(timeout=15) == 128 + 9
    assert not _alive(pid)


NO_DOCKER = pytest.mark.skipif(docker_reason() is not None, reason=f"docker: {docker_reason()}")


@NO_DOCKER
def test_a_removed_container_is_a_clear_error_in_docker(tmp_path: Path) -> None:
    """The command of a cell whose container is gone (removed under it) fails with 125 and says
    why, instead of hanging or running elsewhere."""
    box = get_sandbox("docker")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    try:
        argv = box.wrap(["true"], cwd=workspace, env={"PATH": "/usr/bin:/bin"}, writable=[tmp_path], hidden=[])
        assert subprocess.run(argv, timeout=60, check=False).returncode == 0
        argv = box.wrap(["true"], cwd=workspace, env={"PATH": "/usr/bin:/bin"}, writable=[tmp_path], hidden=[])
        box.reap()  # the container goes; the command already made for it has no keeper
        done = subprocess.run(argv, timeout=60, check=False, capture_output=True)
        assert done.returncode == spawner.SPAWNER_FAILED and b"keeper" in done.stderr, done.stderr
    finally:
        box.cleanup()


@NO_DOCKER
def test_the_keeper_is_pid_1_and_no_exec_runs_in_docker(tmp_path: Path) -> None:
    """In the cell's container, the process is a child of the keeper (PID 1), in a session of
    its own; nothing but the keeper and it runs there (no per-process wrapper)."""
    box = get_sandbox("docker")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    try:
        argv = box.wrap(["sh", "-c", "ps -eo pid,ppid,sid,args 2>/dev/null || cat /proc/[0-9]*/cmdline"],
                        cwd=workspace, env={"PATH": "/usr/bin:/bin"}, writable=[tmp_path], hidden=[])
        done = subprocess.run(argv, timeout=60, check=False, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        rows = [line.split(None, 3) for line in done.stdout.splitlines()[1:]]
        keeper_row = next(r for r in rows if r[0] == "1")
        assert spawner.KEEPER_MARK in keeper_row[3]
        shell = next(r for r in rows if r[3].startswith("sh -c ps"))
        assert shell[1] == "1" and shell[2] == shell[0]
        assert {r[3].split()[0] for r in rows} <= {"/usr/bin/python3", "sh", "ps"}
    finally:
        box.cleanup()


def _one_cell(limits: dict[str, float | int | None] | None = None, *, says_shape: bool = True) -> tuple[Any, Path, int]:
    """A docker sandbox used as a cell uses it: its scratch from the sandbox (naming its shape,
    as the cell runner does, unless ``says_shape`` is false), one process run. Returns the
    sandbox (not cleaned up), its scratch and the process's exit code."""
    box = get_sandbox("docker")
    scratch = (box.scratch("tt-test-", network="loopback", limits=limits) if says_shape
               else box.scratch("tt-test-"))
    workspace = scratch / "workspace"
    workspace.mkdir(exist_ok=True)
    argv = box.wrap(["sh", "-c", "echo in > seen.txt"], cwd=workspace, env={"PATH": "/usr/bin:/bin"},
                    writable=[scratch], hidden=[], limits=limits)
    return box, scratch, subprocess.run(argv, timeout=60, check=False).returncode


def _wait_warm(within_s: float = 30.0) -> Any:
    """The container waiting for a next cell of :func:`_one_cell`'s shape (without limits)."""
    from apparatus.sandbox import docker_backend

    shape = docker_backend._shape("loopback", None, False)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [w for w in docker_backend._WARM if w.shape == shape]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no container was started for the next cell")


def _no_warm() -> None:
    """Let the background work of earlier cells finish, then end every waiting container."""
    from apparatus import background
    from apparatus.sandbox import docker_backend

    assert background.flush(60)
    for thread in list(docker_backend._WARMING.values()):
        thread.join(60)
    while docker_backend._WARM:
        docker_backend._discard(docker_backend._WARM.pop())


def _exists(cid: str) -> bool:
    import docker

    try:
        docker.from_env().api.inspect_container(cid)
    except docker.errors.NotFound:
        return False
    return True


@NO_DOCKER
def test_the_next_cell_finds_its_container_started() -> None:
    """When a cell ends, the next cell's container is started in the background (its folder,
    with an empty workspace, ready); the next cell takes it over with its cell id and runs its
    first process in it; nothing of the first cell is in it."""
    _no_warm()  # a container of another shape left by an earlier test is not this test's
    first, scratch, code = _one_cell()
    assert code == 0 and (scratch / "workspace" / "seen.txt").read_text() == "in\n"
    first.cleanup()
    shutil_rmtree(scratch)
    warm = _wait_warm()
    box, scratch2, code = _one_cell()
    try:
        assert code == 0
        assert (box.cell, scratch2, box._container) == (warm.cell, warm.home, warm.cid)
        assert scratch2 != scratch and (scratch2 / "workspace" / "seen.txt").read_text() == "in\n"
    finally:
        box.cleanup()
        shutil_rmtree(scratch2)


@NO_DOCKER
def test_a_cell_that_started_its_own_container_has_the_next_one_started_while_it_runs() -> None:
    """A cell that found no container of its shape (a session's first) has one started for the
    next cell of its shape while its harness runs, not only when it ends: the next cell asks for
    its container before its own ending's work is released."""
    _no_warm()
    box, scratch, code = _one_cell()
    try:
        assert code == 0
        warm = _wait_warm(15)
        assert warm.cid != box._container and warm.home != scratch
    finally:
        box.cleanup()
        shutil_rmtree(scratch)


@NO_DOCKER
def test_a_warm_container_that_does_not_fit_is_ended() -> None:
    """A cell whose first process needs other limits gets its own container; the warm one,
    made for the previous cell's, is ended (removed by the engine). The cell does not say its
    shape when it asks for its folder, so it takes the waiting container of another shape and
    learns only at its first process that it does not fit."""
    _no_warm()
    first, scratch, _ = _one_cell()
    first.cleanup()
    shutil_rmtree(scratch)
    warm = _wait_warm()
    box, scratch2, code = _one_cell(limits={"pids": 64}, says_shape=False)
    try:
        assert code == 0 and box._container not in (None, warm.cid)
        deadline = time.monotonic() + 15
        while _exists(warm.cid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _exists(warm.cid)
    finally:
        box.cleanup()
        shutil_rmtree(scratch2)


@NO_DOCKER
def test_a_cell_takes_only_a_container_of_its_shape() -> None:
    """Containers for cells to come wait one per shape (a session interleaves Codex's cells,
    whose container nests namespaces, with others): a cell that says its shape takes the one
    of that shape and leaves the other waiting; a cell of a shape nobody started gets its own."""
    from apparatus import background
    from apparatus.sandbox import docker_backend

    _no_warm()  # what earlier tests left waiting is not this test's
    plain = docker_backend._shape("loopback", None, False)
    nesting = docker_backend._shape("loopback", None, True)
    for nested in (False, True):
        box = get_sandbox("docker")
        scratch = box.scratch("tt-test-", network="loopback", nested=nested)
        (scratch / "workspace").mkdir(exist_ok=True)
        argv = box.wrap(["true"], cwd=scratch / "workspace", env={"PATH": "/usr/bin:/bin"}, writable=[scratch],
                        hidden=[], nested=nested)
        assert subprocess.run(argv, timeout=60, check=False).returncode == 0
        box.cleanup()
        shutil_rmtree(scratch)
    assert background.flush(60)
    deadline = time.monotonic() + 30
    while {w.shape for w in docker_backend._WARM} != {plain, nesting} and time.monotonic() < deadline:
        time.sleep(0.05)
    waiting = {w.shape: w for w in docker_backend._WARM}
    assert set(waiting) == {plain, nesting}
    box = get_sandbox("docker")
    scratch = box.scratch("tt-test-", network="loopback", nested=True)
    try:
        assert (box.cell, box._container) == (waiting[nesting].cell, waiting[nesting].cid)
        assert [w.cid for w in docker_backend._WARM] == [waiting[plain].cid]
    finally:
        box.cleanup()
        shutil_rmtree(scratch)
    other = get_sandbox("docker")
    scratch = other.scratch("tt-test-", network="loopback", limits={"pids": 64})
    try:
        assert other._container is None and [w.cid for w in docker_backend._WARM] == [waiting[plain].cid]
    finally:
        other.cleanup()
        shutil_rmtree(scratch)


WARM_OWNER = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from apparatus.sandbox import docker_backend, get_sandbox
box = get_sandbox("docker")
scratch = box.scratch("tt-owner-")
(scratch / "workspace").mkdir()
argv = box.wrap(["true"], cwd=scratch / "workspace", env={"PATH": "/usr/bin:/bin"}, writable=[scratch], hidden=[])
subprocess.run(argv, check=True)
box.cleanup()
while not docker_backend._WARM:
    time.sleep(0.05)
print(docker_backend._WARM[0].cid, flush=True)
time.sleep(120)
"""


@NO_DOCKER
def test_an_idle_warm_container_dies_with_its_owner() -> None:
    """A container waiting for a next cell that never comes goes with the process that
    started it (its keeper's attach), like any cell's container."""
    from apparatus.sandbox.code import checkout_root

    owner = subprocess.Popen([sys.executable, "-c", WARM_OWNER, str(checkout_root())], stdout=subprocess.PIPE,
                             text=True)
    try:
        cid = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert cid and _exists(cid)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 15
    while _exists(cid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _exists(cid)


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
