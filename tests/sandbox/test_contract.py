"""Contract of every sandbox backend (issue 11 §4): exec, file I/O, exit codes, timeouts,
hidden paths, host bridge, cleanup after success and failure.

Run against ``local`` always and ``bwrap`` when bubblewrap runs here
(``apt-get install -y bubblewrap``); docker is not implemented yet.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from harnesses.runner import run_process
from tracetrial.sandbox import (
    BwrapSandbox,
    Confinement,
    LocalSandbox,
    Sandbox,
    confined,
    get_sandbox,
    resolve_sandbox,
)

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("bwrap", id="bwrap",
                 marks=pytest.mark.skipif(BwrapSandbox().available() is not None,
                                          reason=f"bwrap: {BwrapSandbox().available()}")),
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

    def run(script: str, timeout_s: float = 30.0, name: str = "t"):
        out, err = native / f"{name}.stdout", native / f"{name}.stderr"
        with confined(conf):
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


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper that is not us does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_resolve_sandbox():
    assert isinstance(resolve_sandbox("local"), LocalSandbox)
    with pytest.raises(RuntimeError, match="docker backend not implemented yet"):
        resolve_sandbox("docker")
    auto = resolve_sandbox("auto")
    assert auto.name == ("bwrap" if BwrapSandbox().available() is None else "local")


def test_bwrap_unavailable_reason():
    reason = BwrapSandbox(binary="/nonexistent/bwrap").available()
    assert reason and "apt-get install -y bubblewrap" in reason


def test_bwrap_keeps_this_checkout_visible_even_under_tmp() -> None:
    """A checkout cloned into /tmp must stay runnable inside the private /tmp (regression)."""
    from tracetrial.sandbox import BwrapSandbox

    argv = BwrapSandbox().wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[])
    repo = str(Path(__file__).resolve().parents[2])
    tmpfs_at = argv.index("/tmp")
    assert "--ro-bind" in argv[tmpfs_at:]
    assert repo in argv[tmpfs_at:] and argv[argv.index(repo, tmpfs_at) - 1] == "--ro-bind"
