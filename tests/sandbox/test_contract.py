"""Contract of every sandbox backend (issue 11 §4): exec, file I/O, exit codes, timeouts,
hidden paths, host bridge, cleanup after success and failure.

Run against ``local`` always, ``bwrap`` when bubblewrap runs here
(``apt-get install -y bubblewrap``) and ``docker`` when an engine answers (``.ci/run``
installs and starts one; the first docker test builds the local image once).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apparatus.sandbox import (
    BwrapSandbox,
    Confinement,
    LocalSandbox,
    Sandbox,
    SandboxUnavailable,
    choose_backend,
    confined,
    docker_reason,
    get_sandbox,
    resolve_sandbox,
)
from harnesses.runner import run_process

NO_BWRAP = pytest.mark.skipif(BwrapSandbox().available() is not None, reason=f"bwrap: {BwrapSandbox().available()}")
NO_DOCKER = pytest.mark.skipif(docker_reason() is not None, reason=f"docker: {docker_reason()}")
BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("bwrap", id="bwrap", marks=NO_BWRAP),
    pytest.param("docker", id="docker", marks=NO_DOCKER),
]


@pytest.fixture(params=BACKENDS)
def cell(request: pytest.FixtureRequest, tmp_path: Path):
    """A cell-like layout: scratch (workspace + home), an archive with native/ and private/."""
    box: Sandbox = get_sandbox(request.param)
    scratch, output = tmp_path / "scratch", tmp_path / "output"
    workspace, home = scratch / "workspace", scratch / "home"
    native, private = output / "run" / "native", output / "run" / "private"
    for d in (workspace, home, native, private):
        d.mkdir(parents=True)
    (private / "truth.json").write_text('{"secret": "TRUTH-42"}')
    (workspace / "input.txt").write_text("hello\n")
    conf = Confinement(box, writable=[scratch, native], hidden=[output])
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}

    def run(script: str, timeout_s: float = 30.0, name: str = "t", **kw):
        out, err = native / f"{name}.stdout", native / f"{name}.stderr"
        with confined(Confinement(box, writable=conf.writable, hidden=conf.hidden, **kw)):
            res = run_process(["sh", "-c", script], env=env, cwd=workspace, stdout=out, stderr=err,
                              timeout_s=timeout_s)
        return res, out.read_text() if out.exists() else "", err.read_text() if err.exists() else ""

    yield box, run, workspace, native, private
    box.cleanup()


def test_exec_and_env(cell):
    box, run, workspace, *_ = cell
    res, out, _ = run('echo "$HOME" && pwd')
    assert res.exit_code == 0 and not res.timed_out
    home, cwd = out.split()
    assert cwd == str(workspace.resolve()) and home.endswith("/home")


def test_exit_codes_and_stderr(cell):
    _, run, *_ = cell
    res, _, err = run("echo oops >&2; exit 7")
    assert res.exit_code == 7 and "oops" in err


def test_signal_death_is_a_crash_on_every_backend(cell):
    """A process killed by a signal has no exit code; no backend may turn it into 137."""
    _, run, *_ = cell
    res, _, _ = run("kill -KILL $$")
    assert res.exit_code == -9 and not res.timed_out
    res, _, _ = run("exit 137")
    assert res.exit_code == 137


ECHO = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\nprint('eof', flush=True)\n"


def test_interactive_stdin_round_trips(cell):
    """A JSON-RPC style process: each line in gets its answer out *before* the next line is
    sent (streaming both ways through the sandbox), and closing stdin ends it."""
    box, _, workspace, *_ = cell
    argv = box.wrap(["python3", "-c", ECHO], cwd=workspace, env={"PATH": os.environ["PATH"]},
                    writable=[workspace], hidden=[], stdin=True)
    proc = subprocess.Popen(argv, cwd=workspace, env={"PATH": os.environ["PATH"]}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        for i in range(3):
            proc.stdin.write(f"ping {i}\n".encode())
            proc.stdin.flush()
            assert proc.stdout.readline().decode().strip() == f"PING {i}"
        proc.stdin.close()
        assert proc.stdout.readline().decode().strip() == "eof"
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        box.reap()


def test_workspace_file_io(cell):
    _, run, workspace, native, _ = cell
    res, out, _ = run("cat input.txt; echo written > out.txt; mkdir -p sub && echo x > sub/y; echo log >> " + str(native / "h.log"))
    assert res.exit_code == 0 and out == "hello\n"
    assert (workspace / "out.txt").read_text() == "written\n"
    assert (workspace / "sub" / "y").read_text() == "x\n"
    assert (native / "h.log").read_text() == "log\n"


def test_timeout_kills_process_group(cell, tmp_path: Path):
    _, run, workspace, *_ = cell
    t0 = time.monotonic()
    # A background grandchild in its own session would outlive a plain group kill locally;
    # the plain background child must die with the group on every backend.
    res, _, _ = run("(sleep 30; echo late > late.txt) & sleep 30", timeout_s=1.5)
    assert res.timed_out and res.exit_code is None
    assert time.monotonic() - t0 < 10
    time.sleep(0.5)
    assert not (workspace / "late.txt").exists()


def test_hidden_paths_unreadable(cell):
    box, run, _, _, private = cell
    res, out, err = run(f"cat {private / 'truth.json'} 2>&1; echo; echo LS: $(ls {private.parent} 2>&1); true")
    if box.name == "local":
        assert "TRUTH-42" in out  # local isolates nothing: the reason bwrap exists
    else:
        assert "TRUTH-42" not in out
        assert "No such file" in out
        assert out.split("LS:")[1].split() == ["native"]  # only the harness's own records


def test_host_root_not_reachable_through_proc(cell):
    box, run, _, _, private = cell
    if box.name == "local":
        pytest.skip("local isolates nothing")
    res, out, _ = run(f"cat /proc/1/root{private / 'truth.json'} 2>&1; true")
    assert "TRUTH-42" not in out


def test_readonly_host(cell):
    box, run, *_ = cell
    if box.name == "local":
        pytest.skip("local isolates nothing")
    target = Path(__file__).with_name("should-not-exist.txt")
    res, _, _ = run(f"echo x > {target}")
    assert res.exit_code != 0 and not target.exists()


def test_host_command_runs_outside(cell):
    """Helpers that read private files (simulators, the simulated user) run on the host."""
    box, run, _, _, private = cell
    cmd = box.host_command([sys.executable, "-c",
                            "import sys; d=sys.stdin.read(); print(open(sys.argv[1]).read().strip(), d.upper()); sys.exit(3)",
                            str(private / "truth.json")], name="helper")
    script = "echo ping | " + " ".join(f"'{a}'" for a in cmd) + "; echo rc=$?"
    res, out, err = run(script)
    assert res.exit_code == 0, err
    assert "TRUTH-42" in out and "PING" in out and "rc=3" in out


@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
def test_cleanup(cell, fail: bool):
    box, run, _, _, private = cell
    marker = private / "child.pid"
    cmd = box.host_command(["sh", "-c", f"echo $$ > {marker}; cat >/dev/null; sleep 60"], name="long")
    script = " ".join(f"'{a}'" for a in cmd) + " </dev/null & sleep 0.5; " + ("exit 1" if fail else "exit 0")
    res, _, _ = run(script, timeout_s=20)
    assert res.exit_code == (1 if fail else 0)
    bridge = getattr(box, "_bridge", None)
    t0 = time.monotonic()
    box.cleanup()
    assert time.monotonic() - t0 < 10
    if marker.exists():
        pid = int(marker.read_text())
        deadline = time.monotonic() + 3
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
    if bridge is not None:
        assert not bridge.dir.exists()
        assert all(p.poll() is not None for p in bridge.children)
    if box.name == "docker":
        assert _containers_gone(box)


def _containers_gone(box, within_s: float = 10.0) -> bool:
    """Whether the cell's containers are gone within ``within_s``: the cleanup ends them
    (closing the keeper's attach) without waiting for the engine to remove them."""
    deadline = time.monotonic() + within_s
    while _cell_containers(box) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _cell_containers(box) == []


def _cell_containers(box) -> list[str]:
    import docker

    from apparatus.sandbox.docker_backend import listed
    from apparatus.sandbox.docker_run import CELL_LABEL

    return [c.name for c in listed(docker.from_env(), f"{CELL_LABEL}={box.cell}")]


OWNER = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from apparatus.sandbox.docker_backend import DockerSandbox
box = DockerSandbox()
ws = Path(sys.argv[2])
argv = box.wrap(["sleep", "60"], cwd=ws, env={"PATH": "/usr/bin:/bin"}, writable=[ws], hidden=[])
subprocess.Popen(argv)
print(box.cell, flush=True)
time.sleep(120)
"""


def test_container_dies_with_the_cell_process(cell, tmp_path: Path):
    """Docker: when the process that owns the cell dies outright, its container goes too
    (bwrap's --die-with-parent, for the docker backend): the keeper's stdin was its attach."""
    box, _, workspace, *_ = cell
    if box.name != "docker":
        pytest.skip("docker only")
    from apparatus.sandbox.code import checkout_root

    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(checkout_root()), str(workspace)],
                             stdout=subprocess.PIPE, text=True)
    try:
        other = get_sandbox("docker")
        other.cell = owner.stdout.readline().strip()  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while not _cell_containers(other) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cell_containers(other), "the container never started"
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 15
    while _cell_containers(other) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _cell_containers(other) == []


def _container_processes(box) -> list[str]:
    """The command lines running in the cell's current container."""
    import docker

    assert box._container is not None
    top = docker.from_env().api.top(box._container, ps_args="-eo pid,args")
    return [row[-1] for row in top.get("Processes") or []]


def test_a_process_ends_with_its_launcher(cell):
    """Docker: a launcher whose parent dies ends its process in the cell's container."""
    box, _, workspace, *_ = cell
    if box.name != "docker":
        pytest.skip("docker only")
    argv = box.wrap(["sleep", "61"], cwd=workspace, env={"PATH": os.environ["PATH"]}, writable=[workspace],
                    hidden=[])
    parent = subprocess.Popen(["sh", "-c", '"$@" & wait', "sh", *argv])
    deadline = time.monotonic() + 20
    while not any("sleep 61" in p for p in _container_processes(box)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert any("sleep 61" in p for p in _container_processes(box)), "the process never started"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 15
    while any("sleep 61" in p for p in _container_processes(box)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any("sleep 61" in p for p in _container_processes(box))


def test_orphaned_containers_are_swept(cell):
    """Containers whose owning process died (a killed session) are removed by the next one."""
    box, *_ = cell
    if box.name != "docker":
        pytest.skip("docker only")
    import docker

    from apparatus.sandbox.docker_backend import sweep_orphans
    from apparatus.sandbox.docker_run import CELL_LABEL, OWNER_LABEL

    box.prepare()
    client = docker.from_env()
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    c = client.containers.create(box.images.harnesses, ["sleep", "60"], name=f"tt-orphan-{box.cell}",
                                 labels={CELL_LABEL: "orphan-test", OWNER_LABEL: f"{socket.gethostname()}:{dead.pid}"})
    live = client.containers.create(box.images.harnesses, ["sleep", "60"], name=f"tt-live-{box.cell}",
                                    labels={CELL_LABEL: "live-test", OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"})
    try:
        removed = sweep_orphans(client)
        assert c.name in removed and live.name not in removed
    finally:
        for x in (c, live):
            try:
                x.remove(force=True)
            except docker.errors.NotFound:
                pass


def test_nothing_a_process_leaves_running_outlives_it(cell):
    """Docker: the cell's processes share one container, yet what a process leaves running
    is killed when it ends (as when each had its own container), without delaying it; a
    timed-out process's container is removed and the next process gets a fresh one; no
    container outlives the cell."""
    box, run, workspace, *_ = cell
    if box.name != "docker":
        pytest.skip("docker only")
    t0 = time.monotonic()
    res, out, _ = run("(sleep 30; echo late > late.txt) & echo started")
    assert res.exit_code == 0 and "started" in out
    assert time.monotonic() - t0 < 1.9  # docker exec waits 2 s for a leftover process
    first = box._container
    assert [p for p in _container_processes(box) if "tt-cell-keeper" not in p] == []
    res, out, _ = run("echo again")
    assert res.exit_code == 0 and box._container == first  # one container per cell
    res, _, _ = run("sleep 30", timeout_s=1.5)
    assert res.timed_out and _cell_containers(box) == []
    res, out, err = run("echo after")
    assert res.exit_code == 0 and "after" in out and box._container not in (None, first), err
    time.sleep(0.5)
    assert not (workspace / "late.txt").exists()
    box.cleanup()
    assert _containers_gone(box)


def test_harness_cli_comes_from_the_image(cell):
    """Docker: the pinned CLI install is the image's copy; the host's install is hidden."""
    box, run, *_ = cell
    if box.name != "docker":
        pytest.skip("docker only")
    from apparatus.sandbox.images import IMAGE_TOOLS_DIR
    from harnesses.install import tools_dir

    host = str(tools_dir().resolve())
    half = len(host) // 2  # split, so the rewrite of argv does not touch this probe
    res, out, _ = run(f"ls {IMAGE_TOOLS_DIR}/node_modules/.bin | head -50; echo HOST:; A='{host[:half]}'; "
                      f"B='{host[half:]}'; ls \"$A$B\" 2>&1 | head -3; echo ARG:{host}/x")
    assert res.exit_code == 0
    assert "claude" in out.split("HOST:")[0].split()
    # The host's install is not in the container: not mounted at all (the policy mounts the
    # checkout's code packages only), or covered by an empty tmpfs where a mount would show it.
    # Only the named versions beside it (``versions/``, never in the image) are mounted there.
    host_listing = out.split("HOST:")[1].split("ARG:")[0]
    assert set(host_listing.split()) <= {"versions"} or "No such file or directory" in host_listing, host_listing
    assert "node_modules" not in host_listing
    assert f"ARG:{IMAGE_TOOLS_DIR}/x" in out  # argv naming the host install is rewritten


def _gateway_like_server():
    """A loopback HTTP server standing in for the gateway port (the tunnel's one opening)."""
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"gateway-ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


PROBE_NET = """
import socket, sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=5).read().decode())
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3); print("other:open")
except OSError as exc:
    print("other:closed")
"""


@pytest.mark.parametrize("network", ["loopback", "none"])
def test_network_modes(cell, network: str):
    """``network: none``: only the forwarded (gateway) port is reachable; ``loopback``: the host's."""
    box, run, workspace, *_ = cell
    gateway, other = _gateway_like_server(), _gateway_like_server()
    try:
        (workspace / "net.py").write_text(PROBE_NET)
        args = f"{gateway.server_address[1]} {other.server_address[1]}"
        if box.name == "local" and network == "none":
            with pytest.raises(RuntimeError, match="cannot take the network away"):
                run(f"python3 net.py {args}", network="none", forward=[gateway.server_address[1]])
            return
        res, out, err = run(f"python3 net.py {args}", network=network, forward=[gateway.server_address[1]])
        assert res.exit_code == 0, err
        assert "gateway-ok" in out
        assert ("other:closed" if network == "none" else "other:open") in out
    finally:
        gateway.shutdown()
        other.shutdown()


def test_resource_limits_docker(cell):
    """Docker enforces the task's limits as cgroup limits (here: the process count)."""
    box, run, *_ = cell
    if box.name != "docker":
        pytest.skip("limits are enforced by the docker backend only")
    res, out, _ = run("for i in $(seq 1 40); do sleep 5 & done 2>&1; echo spawned; wait", timeout_s=30,
                      limits={"pids": 20, "memory_mb": 256})
    assert "Resource temporarily unavailable" in out or "fork" in out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not us does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_resolve_sandbox():
    """On this machine, as it is: ``auto`` is docker when it runs, else bwrap, else local."""
    assert isinstance(resolve_sandbox("local"), LocalSandbox)
    expected = "docker" if docker_reason() is None else "bwrap" if BwrapSandbox().available() is None else "local"
    assert choose_backend("auto") == expected
    assert resolve_sandbox("auto").name == expected
    if docker_reason() is not None:
        with pytest.raises(SandboxUnavailable, match="docker"):
            resolve_sandbox("docker")


def test_docker_unavailable_reason(monkeypatch):
    from apparatus.sandbox import docker_backend

    monkeypatch.setattr(docker_backend, "_ENGINE", {})
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    reason = docker_backend.engine_reason()
    assert reason and "no docker engine answers" in reason and "apt-get install -y docker.io" in reason


def test_bwrap_unavailable_reason():
    reason = BwrapSandbox(binary="/nonexistent/bwrap").available()
    assert reason and "apt-get install -y bubblewrap" in reason


def test_bwrap_keeps_this_checkout_visible_even_under_tmp() -> None:
    """A checkout cloned into /tmp must stay runnable inside the private /tmp (regression):
    each of its code packages is bound read-only after the /tmp tmpfs."""
    from apparatus.sandbox import BwrapSandbox
    from apparatus.sandbox.code import CHECKOUT_PACKAGES

    box = BwrapSandbox()
    try:
        argv = box.wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[])
    finally:
        box.cleanup()
    repo = Path(__file__).resolve().parents[2]
    tmpfs_at = argv.index("/tmp")
    assert "--ro-bind" in argv[tmpfs_at:]
    for name in CHECKOUT_PACKAGES:
        package = str(repo / name)
        assert package in argv[tmpfs_at:] and argv[argv.index(package, tmpfs_at) - 1] == "--ro-bind"


def test_the_bwrap_root_is_an_allow_list() -> None:
    """Nothing of the host is mounted wholesale: no ``/`` bind, no checkout root, no
    ``/run``, ``/var``, ``/home``, ``/root`` or host ``/tmp`` (issue 17)."""
    box = BwrapSandbox(binary="bwrap")
    try:
        argv = box.wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[])
    finally:
        box.cleanup()
    mounted = {argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--ro-bind-try")}
    repo = str(Path(__file__).resolve().parents[2])
    for forbidden in ("/", "/run", "/var", "/var/run", "/home", "/root", "/tmp", "/etc", repo, f"{repo}/tasks"):
        assert forbidden not in mounted, forbidden
    assert not any(m.startswith(("/run/", "/var/", "/home/", "/etc/shadow")) for m in mounted), mounted


def test_bwrap_probe_leaves_no_temp_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """``available()`` wraps a probe command; its helper folder goes with it (issue 17)."""
    import tempfile

    from apparatus import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP_PROBE", {})
    root = Path(tempfile.gettempdir())
    before = set(root.glob("tt-run-*"))
    BwrapSandbox().available()
    assert set(root.glob("tt-run-*")) - before == set()


def test_only_the_policy_is_visible(cell, tmp_path: Path) -> None:
    """bwrap and docker show the same host: the checkout's code packages (no task pack, no
    committed baseline, no .git), no host socket, no host /tmp, no other home (issue 17)."""
    box, run, *_ = cell
    if box.name == "local":
        pytest.skip("local isolates nothing (README, Sandboxes)")
    from apparatus.sandbox.code import CHECKOUT_PACKAGES

    repo = Path(__file__).resolve().parents[2]
    host_tmp = Path("/tmp") / f"tt-host-canary-{os.getpid()}"
    host_tmp.write_text("HOST-TMP-CANARY")
    try:
        res, out, err = run(
            f"echo REPO: $(ls -A {repo}); echo TASKS: $(ls {repo}/tasks 2>&1 | head -1);"
            f" echo BASELINES: $(ls -A {repo}/ci/baselines); echo TMP: $(cat {host_tmp} 2>&1);"
            " echo RUN: $(ls -A /run /var/run 2>&1); echo SOCK: $(ls /var/run/docker.sock /run/docker.sock 2>&1);"
            " echo HOME: $(ls -A /home 2>&1)")
    finally:
        host_tmp.unlink()
    assert res.exit_code == 0, err
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert set(fields["REPO"].split()) <= {*CHECKOUT_PACKAGES, ".tt-tools"}, fields["REPO"]
    assert {"tracetrial", "harnesses", "apparatus"} <= set(fields["REPO"].split())
    assert "E1-build-status-001" not in fields["TASKS"] and "No such file" in fields["TASKS"]
    assert fields["BASELINES"].split() == []
    assert "HOST-TMP-CANARY" not in fields["TMP"]
    assert "docker.sock" not in fields["RUN"] and "containerd" not in fields["RUN"]
    assert fields["SOCK"].count("No such file") == 2
    assert "HOME" in fields


def test_collect_records_copies_regular_files_only(tmp_path: Path) -> None:
    """What a confined process leaves in its scratch reaches the archive only as regular
    files under the harness's record names: a symlink to a host file is never followed."""
    from apparatus.sandbox.policy import collect_records

    src, dest = tmp_path / "scratch", tmp_path / "native"
    (src / "sessions").mkdir(parents=True)
    (src / "log.jsonl").write_text("log\n")
    (src / "sessions" / "s.json").write_text("{}")
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST SECRET")
    (src / "sessions" / "leak.json").symlink_to(secret)
    (src / "linked").symlink_to(tmp_path)
    (src / "turn-1.stdout").write_text("forged stream")
    os.mkfifo(src / "sessions" / "pipe")
    copied = collect_records(src, dest, only=("log.jsonl", "sessions"))
    assert sorted(p.relative_to(dest).as_posix() for p in copied) == ["log.jsonl", "sessions/s.json"]
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == \
        ["log.jsonl", "sessions/s.json"]
    everything = collect_records(src, tmp_path / "all")
    assert "HOST SECRET" not in "".join(p.read_text() for p in everything)
    assert sorted(p.name for p in everything) == ["log.jsonl", "s.json", "turn-1.stdout"]
