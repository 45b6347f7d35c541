"""The DeepSeek Harness adapter: registry, pinned install check, environment, MCP and other
capabilities (with the reason MCP cells are unsupported), the one-runtime-per-run JSON-RPC
exchange, and — with the real runtime against a model that never answers — a hang killed at
the deadline and a runtime killed mid-turn, both with the archive kept."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harnesses.base import RunContext, TurnContext
from harnesses.deepseek import adapter as ds_adapter
from harnesses.deepseek.adapter import DeepSeekAdapter, runtime_paths
from harnesses.registry import get_harness
from tests.harnesses.capture import TEST_KEY as KEY
from tests.harnesses.capture import run_context
from tests.harnesses.conftest import load_golden
from tracetrial.eligibility import eligibility
from tracetrial.task import load_task

REPO = Path(__file__).resolve().parents[2]
needs_deepseek = pytest.mark.skipif(
    DeepSeekAdapter().unavailable_reason() is not None, reason="deepseek not installed (tracetrial install deepseek)"
)


def make_ctx(tmp_path: Path, url: str = "http://127.0.0.1:9/tt/probe/r1/v1") -> RunContext:
    return run_context(tmp_path, url=url)


def test_registry_builds_the_adapter() -> None:
    adapter = get_harness("deepseek")
    assert isinstance(adapter, DeepSeekAdapter) and adapter.wire_format == "chat"
    caps = adapter.capabilities
    assert caps.multi_turn and caps.new_session and caps.ask_user and not caps.apparatus_gaps
    assert not (caps.mcp or caps.subagents or caps.native_permissions)


@needs_deepseek
def test_version_is_the_papers_pinned_prerelease() -> None:
    assert DeepSeekAdapter().version() == "0.1.0rc6"
    binary, cordis = runtime_paths()  # type: ignore[misc]
    assert binary.is_file() and os.access(binary, os.X_OK) and cordis.name == "cordis.yml"


def test_a_different_installed_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ds_adapter, "dist_version", lambda name: "0.2.1rc2")
    reason = DeepSeekAdapter().unavailable_reason()
    assert reason is not None and "0.1.0rc6 is pinned" in reason and "tracetrial install deepseek" in reason


@pytest.mark.parametrize(
    ("task", "state", "words"),
    [
        ("O1-ticket-close-error-001", "unsupported", "cannot load MCP servers"),
        ("T3-invoice-args-001", "unsupported", "MCP simulators (billing)"),
        ("V1-migration-crash-001", "unsupported", "cannot load MCP servers"),
        ("L4-pending-report-001", "unsupported", "cannot spawn sub-agents"),
        ("G2-log-cleanup-forms-001", "non_comparable", "permission system"),
        ("T7-region-clarify-001", "eligible", None),
        ("T7-rollout-window-002", "eligible", None),
        ("C3-freeze-ticket-001", "eligible", None),
    ],
)
def test_eligibility_per_task(task: str, state: str, words: str | None) -> None:
    got, reason = eligibility(load_task(REPO / "tasks" / task), DeepSeekAdapter.capabilities)
    assert got == state and (words is None or words in (reason or ""))


def test_environment_is_clean_and_routes_the_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-canary-should-not-leak-000000")
    monkeypatch.setenv("DSH_HOME", "/elsewhere")
    ctx = make_ctx(tmp_path)
    env = DeepSeekAdapter().environment(ctx, tmp_path / "cordis.yml")
    assert env["DEEPSEEK_API_KEY"] == KEY and env["DEEPSEEK_BASE_URL"] == ctx.gateway_base_url
    assert env["DEEPSEEK_BASE_URL"].endswith("/v1")  # rc6 posts to {base}/chat/completions
    assert env["DSH_CWD"] == str(ctx.workspace) and env["DSH_SESSION_ROOT"] == str(ctx.home / "dsh-sessions")
    assert env["DSH_CORDIS_CONFIG"] == str(tmp_path / "cordis.yml") and "DSH_HOME" not in env
    assert env["HOME"] == str(ctx.home) and env["TMPDIR"] == str(ctx.home / "tmp")


def test_captured_invocation_uses_the_bundled_config_and_redacts_the_key() -> None:
    g = load_golden("deepseek", "tool_roundtrip")
    inv = json.loads((g.native / "turn-1.invocation.json").read_text())
    assert inv["env"]["DEEPSEEK_API_KEY"] == "[REDACTED]"
    assert inv["env"]["DSH_CORDIS_CONFIG"].endswith("deepseek_harness_runtime/runtime/cordis.yml")
    assert "@deepseek-ai/dsh-bash-local" in (g.native / "turn-1.cordis.yml").read_text()
    (init,) = [json.loads(x) for x in (g.native / "turn-1.requests.jsonl").read_text().splitlines()
               if json.loads(x)["method"] == "initialize"]
    assert init["params"] == {"cwd": inv["cwd"], "provider": "deepseek-official", "model": "probe"}


class _Hang(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(120)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hanging_model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hang)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _processes_in(cwd: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == cwd:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
@needs_deepseek
def test_hang_is_killed_at_the_deadline_and_archived(tmp_path: Path, hanging_model: str) -> None:
    adapter = DeepSeekAdapter()
    ctx = make_ctx(tmp_path, hanging_model)
    outcome = adapter.run_turn(ctx, TurnContext(1, "hello", None, 4))
    adapter.collect(ctx)
    assert outcome.timed_out is True and outcome.exit_code is None and "wall clock" in (outcome.error or "")
    assert 4 <= outcome.duration_s < 15 and _processes_in(ctx.workspace) == []
    trace = adapter.normalize(ctx.paths, [outcome], ctx.run_id)
    assert trace.trace_complete is False and trace.structured_trace_status == "partial"
    assert any(e.event_type == "native_session_archive" for e in trace.events)  # the session log is kept


@pytest.mark.slow
@needs_deepseek
def test_runtime_killed_mid_turn_is_a_crash(tmp_path: Path, hanging_model: str) -> None:
    adapter = DeepSeekAdapter()
    ctx = make_ctx(tmp_path, hanging_model)

    killed_at: list[float] = []
    started = time.monotonic()

    def kill_when_waiting() -> None:
        # Wait for the runtime to be mid-turn (its request to the model sent) however long a loaded
        # machine takes to start it: the turn's own deadline, not a fixed poll count, bounds the wait.
        while time.monotonic() - started < 50:
            time.sleep(0.05)
            runtime = adapter._live.get("r1")
            if runtime is not None and len(runtime.messages) > 3:
                killed_at.append(time.monotonic() - started)
                # The runtime itself crashes (not its supervisor, which reports the death).
                assert runtime.pid is not None
                os.kill(runtime.pid, signal.SIGKILL)
                return

    killer = threading.Thread(target=kill_when_waiting)
    killer.start()
    outcome = adapter.run_turn(ctx, TurnContext(1, "hello", None, 60))
    killer.join()
    assert killed_at, "the runtime never reached the model within 50 s"
    assert outcome.exit_code is None and not outcome.timed_out and "ended before the turn finished" in (outcome.error or "")
    assert outcome.duration_s < killed_at[0] + 15 and "r1" not in adapter._live
    adapter.collect(ctx)
    assert adapter.normalize(ctx.paths, [outcome], ctx.run_id).trace_complete is False
