"""``kill -9`` of a pytest session: the LiteLLM proxy dies with it, the gateway config (with
its master key) goes, and the next session sweeps the rest — never a live session's
(issue 17, "Crash and kill"). Real pytest sessions in subprocesses, a real proxy: slow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lifetime.helpers import kill_quietly, running

HOLDER = '''
import os, time
from pathlib import Path

def test_hold(tt_services):
    mode = os.environ["LT_MODE"]
    if mode == "gateway":
        # What tt_services.gateway() starts, with a start timeout for a loaded machine.
        from apparatus.gateway import Gateway

        logs = tt_services.output / "logs"
        Gateway(tt_services.records_dir, logs / "gateway.log", None, start_timeout_s=900).start()
    Path(os.environ["LT_MARK"]).write_text(mode)
    if mode != "exit":
        time.sleep(1000)
'''


def _tree(root: int) -> list[int]:
    """``root``'s descendants (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_bytes()
            except OSError:
                continue
            children.setdefault(int(raw[raw.rfind(b")") + 2:].split()[1]), []).append(int(entry.name))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _session(tmp: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    mark = tmp / f"{mode}.mark"
    env = {**os.environ, "TMPDIR": str(tmp / "tmp"), "LT_MODE": mode, "LT_MARK": str(mark),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", str(tmp / "test_holder.py"), "-q", "-p", "no:cacheprovider",
                             "--tt-sandbox=local", f"--tt-output={tmp / ('out-' + mode)}"],
                            cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, mark


def _wait(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(predicate())  # type: ignore[operator]


@pytest.mark.slow
def test_kill_9_of_the_session_ends_the_proxy_and_the_next_session_sweeps(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "test_holder.py").write_text(HOLDER)
    killed, killed_mark = _session(tmp_path, "gateway")
    live, live_mark = _session(tmp_path, "hold")
    proxies: list[int] = []
    try:
        assert _wait(lambda: killed_mark.exists() or killed.poll() is not None, 900), "the gateway never started"
        assert killed.poll() is None, "the session ended before the gateway was up"
        proxies = [p for p in _tree(killed.pid) if "litellm.proxy.proxy_cli" in _cmdline(p)]
        assert proxies, "no LiteLLM proxy under the session"
        assert list((tmp_path / "tmp").rglob("config.yaml")), "the gateway config is not in the session's temp"
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        # The proxy dies with the session: no waiting for a next session to find it.
        assert _wait(lambda: not any(running(p) for p in proxies), 10), \
            f"the proxy outlived the killed session: {[p for p in proxies if running(p)]}"
        # Its config, with the master key, goes with it.
        assert _wait(lambda: not list((tmp_path / "tmp").rglob("config.yaml")), 10)

        assert _wait(lambda: live_mark.exists() or live.poll() is not None, 120) and live.poll() is None
        live_dir = [p for p in (tmp_path / "tmp").iterdir() if f"-{live.pid:07d}-" in p.name]  # fixed-width pid
        assert len(live_dir) == 1, "the live session has no session folder"
        nxt, next_mark = _session(tmp_path, "exit")
        assert nxt.wait(timeout=300) == 0 and next_mark.exists()
        # Swept: nothing of the killed session is left; the live session's folder is untouched.
        left = sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("tt-"))
        assert left == [live_dir[0].name], left
    finally:
        for proc in (killed, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        kill_quietly(*proxies)
