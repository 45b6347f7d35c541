"""The Claude Code and Codex adapters: registry, install check, environment, flags and
config, and — with the real CLIs against the scripted model server — hangs, crashes and
failed starts (the archive is kept and the outcome says what happened)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import pytest

from harnesses.base import HarnessAdapter, RunContext, TurnContext
from harnesses.claude_code.adapter import MODEL_ENV_VARS, ClaudeCodeAdapter
from harnesses.codex import adapter as codex_adapter
from harnesses.codex.adapter import CodexAdapter, config_toml
from harnesses.registry import get_harness
from tests.harnesses.capture import (
    EXAMPLE_PACK,
    MCP_SERVER,
    Case,
    base_url,
    run_case,
    run_context,
)
from tests.harnesses.capture import TEST_KEY as KEY
from tests.harnesses.conftest import load_golden, needs_claude, needs_codex
from tests.harnesses.scripted_server import Reply, ScriptedServer, text
from tracetrial.task import PermissionSpec, load_task


def make_ctx(
    tmp_path: Path, adapter: HarnessAdapter, *, mode: str = "bypass", mcp: bool = False, url: str = "http://127.0.0.1:9"
) -> RunContext:
    return run_context(tmp_path, url=base_url(url, adapter.wire_format, "r1"), mcp=mcp, mode=mode)


def test_registry_builds_both_adapters() -> None:
    claude, codex = get_harness("claude_code"), get_harness("codex")
    assert isinstance(claude, ClaudeCodeAdapter) and claude.wire_format == "anthropic"
    assert isinstance(codex, CodexAdapter) and codex.wire_format == "responses"
    assert claude.capabilities.subagents and claude.capabilities.native_permissions
    assert codex.capabilities.mcp and codex.capabilities.multi_turn and codex.capabilities.native_permissions
    assert codex.capabilities.subagents  # multi_agent_v1 children, normalized from their own rollouts


@pytest.mark.parametrize("name", ["claude_code", "codex"])
def test_missing_binary_gives_install_hint(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path / "empty"))
    reason = get_harness(name).unavailable_reason()
    assert reason is not None and f"tracetrial install {name}" in reason


@needs_claude
@needs_codex
def test_versions_are_the_pinned_ones() -> None:
    pinned = json.loads((Path(__file__).resolve().parents[2] / "harnesses" / "package.json").read_text())[
        "dependencies"
    ]
    assert ClaudeCodeAdapter().version() == pinned["@anthropic-ai/claude-code"]
    assert CodexAdapter().version() == pinned["@openai/codex"]


def test_claude_environment_is_clean_and_routes_every_model_alias(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-should-not-leak-000000")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "canary")
    ctx = make_ctx(tmp_path, ClaudeCodeAdapter())
    env = ClaudeCodeAdapter().environment(ctx)
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_AUTH_TOKEN" not in env
    assert env["HOME"] == str(ctx.home) and env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(ctx.home / "tmp")
    assert (env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"]) == (ctx.gateway_base_url, KEY)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == env["IS_SANDBOX"] == env["CLAUDE_CODE_MAX_RETRIES"] == "1"
    assert {env[v] for v in MODEL_ENV_VARS} == {"probe"}
    allowed = {
        "PATH",
        "LANG",
        "LC_ALL",
        "TZ",
        "HOME",
        "TMPDIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "NO_PROXY",
        "no_proxy",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "IS_SANDBOX",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_TMPDIR",
        *MODEL_ENV_VARS,
    }
    assert set(env) <= allowed


def test_claude_flags_per_permission_mode(tmp_path: Path) -> None:
    adapter = ClaudeCodeAdapter()
    turn = TurnContext(1, "-starts with a dash", None, 30)
    fresh = make_ctx(tmp_path / "a", adapter, mcp=True)
    fresh.session_id = "s-new"  # a fresh session has the id the adapter chose
    bypass = adapter.argv(fresh, turn, None)
    native = adapter.argv(make_ctx(tmp_path / "b", adapter, mode="native", mcp=True), turn, "s-old")
    assert bypass[bypass.index("--session-id") + 1] == "s-new" and "--resume" not in bypass
    assert native[native.index("--resume") + 1] == "s-old" and "--session-id" not in native
    assert "--dangerously-skip-permissions" in bypass and "--dangerously-skip-permissions" not in native
    allowed = [native[i + 1] for i, a in enumerate(native) if a == "--allowedTools"]
    assert allowed == ["Bash", "mcp__lookup"]
    start = native.index("--allowedTools")
    assert native[start:start + 5] == ["--allowedTools", "Bash", "Read", "Write", "Edit"]  # routine tools
    for argv in (bypass, native):
        assert argv[-2:] == ["--", "-starts with a dash"]  # the prompt can never be read as a flag
        assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
        config = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())
        assert config["mcpServers"]["lookup"]["args"] == [str(MCP_SERVER)]
        assert config["mcpServers"]["lookup"]["env"] == {"LOOKUP_MODE": "test"}
        assert "--strict-mcp-config" in argv


def test_deny_prefixes_become_native_rules(tmp_path: Path) -> None:
    """A task's deny prefixes become Claude ``Bash(<prefix>:*)`` rules and Codex execpolicy rules."""
    adapter = ClaudeCodeAdapter()
    ctx = make_ctx(tmp_path, adapter, mode="native")
    spec = ctx.task.spec.model_copy(update={"permissions": PermissionSpec(mode="native", deny=["rm", "git push"])})
    ctx.task = dataclasses.replace(ctx.task, spec=spec)
    argv = adapter.argv(ctx, TurnContext(1, "hi", None, 30), None)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--disallowedTools"] == ["Bash(rm:*)", "Bash(git push:*)"]
    from harnesses.codex.adapter import deny_rules

    rules = deny_rules(["rm", "git push"])
    assert 'pattern = ["rm"]' in rules and 'pattern = ["git", "push"]' in rules
    assert rules.count('decision = "forbidden"') == 2
    with pytest.raises(ValueError, match="plain command prefix"):
        PermissionSpec(mode="native", deny=["Bash(rm:*)"])


def test_claude_sessions_follow_the_declared_boundaries() -> None:
    """From the real multi-turn capture: new session, native resume, then a new session."""
    g = load_golden("claude_code", "multi_turn_resume")
    argvs = [json.loads((g.native / f"turn-{i}.invocation.json").read_text())["argv"] for i in (1, 2, 3)]
    first = argvs[0][argvs[0].index("--session-id") + 1]
    assert argvs[1][argvs[1].index("--resume") + 1] == first and "--session-id" not in argvs[1]
    assert argvs[2][argvs[2].index("--session-id") + 1] != first
    env = json.loads((g.native / "turn-1.invocation.json").read_text())["env"]
    assert env["ANTHROPIC_API_KEY"] == "[REDACTED]"  # the key never reaches the archive


def test_claude_hands_the_history_over_as_a_fork_of_the_session(tmp_path: Path) -> None:
    """A new session carrying history: ``--resume <earlier> --fork-session --session-id <new>``
    (Claude Code accepts --session-id with --resume only together with --fork-session)."""
    adapter = ClaudeCodeAdapter()
    ctx = make_ctx(tmp_path, adapter, mode="native")
    ctx.session_id, ctx.replay_from = "s-new", "s-old"
    argv = adapter.argv(ctx, TurnContext(3, "take over", None, 30), None)
    assert argv[argv.index("--resume") + 1] == "s-old" and "--fork-session" in argv
    assert argv[argv.index("--session-id") + 1] == "s-new"
    ctx.replay_from = None
    plain = adapter.argv(ctx, TurnContext(3, "take over", None, 30), None)
    assert "--resume" not in plain and "--fork-session" not in plain


def test_codex_config_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-should-not-leak-000000")
    adapter = CodexAdapter()
    for mode in ("bypass", "native"):
        ctx = make_ctx(tmp_path / mode, adapter, mode=mode, mcp=True)
        cfg = tomllib.loads(config_toml(ctx))
        provider = cfg["model_providers"][cfg["model_provider"]]
        assert (cfg["model"], provider["base_url"], provider["wire_api"]) == (
            "probe",
            ctx.gateway_base_url,
            "responses",
        )
        assert (provider["request_max_retries"], provider["stream_max_retries"]) == (1, 0)
        assert cfg["check_for_update_on_startup"] is False
        assert not cfg["analytics"]["enabled"] and not cfg["feedback"]["enabled"]
        assert cfg["features"] == {"plugins": False, "apps": False, "remote_plugin": False}
        server = cfg["mcp_servers"]["lookup"]
        assert (
            server["required"] is True
            and server["args"] == [str(MCP_SERVER)]
            and server["env"] == {"LOOKUP_MODE": "test"}
        )
        assert server.get("default_tools_approval_mode") == ("approve" if mode == "native" else None)
        env = adapter.environment(ctx)
        assert env[provider["env_key"]] == KEY and env["CODEX_HOME"] == str(ctx.home / ".codex")
        assert "OPENAI_API_KEY" not in env
        argv = adapter.argv(ctx, TurnContext(2, "-x", None, 30), resume="thread-1")
        assert argv[1:4] == ["exec", "resume", "thread-1"] and argv[-2:] == ["--", "-x"]
        assert ("--dangerously-bypass-approvals-and-sandbox" in argv) == (mode == "bypass")


def test_codex_threads_follow_the_declared_boundaries() -> None:
    g = load_golden("codex", "multi_turn_resume")
    argvs = [json.loads((g.native / f"turn-{i}.invocation.json").read_text())["argv"] for i in (1, 2, 3)]
    threads = [t["session_id"] for t in g.meta["turns"]]
    assert "resume" not in argvs[0] and argvs[1][2:4] == ["resume", threads[0]] and "resume" not in argvs[2]
    assert threads[0] == threads[1] != threads[2]


def test_codex_collect_archives_every_thread_rollout(tmp_path: Path) -> None:
    """The real sub-agent capture's rollouts (parent + child thread) laid out as Codex writes
    them, plus an archived thread: all are copied, each once."""
    adapter = CodexAdapter()
    ctx = make_ctx(tmp_path, adapter)
    g = load_golden("codex", "subagent")
    day = adapter.codex_home(ctx) / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    rollouts = sorted((g.native / "rollouts").glob("rollout-*.jsonl"))
    for rollout in rollouts:
        (day / rollout.name).write_bytes(rollout.read_bytes())
    archived = adapter.codex_home(ctx) / "archived_sessions"
    archived.mkdir()
    (archived / "rollout-2026-11-29T00-00-00-old.jsonl").write_text("{}\n", encoding="utf-8")
    (archived / rollouts[0].name).write_text("stale copy\n", encoding="utf-8")
    copied = adapter.collect(ctx)
    assert sorted(p.name for p in copied) == sorted([*(r.name for r in rollouts), "rollout-2026-11-29T00-00-00-old.jsonl"])
    for rollout in rollouts:  # the live rollout wins over a same-named archived one
        assert (ctx.paths.native / "rollouts" / rollout.name).read_bytes() == rollout.read_bytes()


# ------------------------------------------------------------------ real CLIs: bad runs


def _processes_in(cwd: Path) -> list[int]:
    """PIDs whose working directory is ``cwd`` (only this test's harness runs there)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")) == cwd:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


HANG = Reply(text="never sent", hang_s=120)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param("claude_code", marks=needs_claude), pytest.param("codex", marks=needs_codex)]
)
def test_hang_is_killed_at_the_deadline_and_archived(name: str, tmp_path: Path) -> None:
    adapter = get_harness(name)
    ctx, (outcome,), _ = run_case(
        adapter, Case([("hello", None)], [HANG], deadline_s=4), tmp_path, load_task(EXAMPLE_PACK)
    )
    assert outcome.timed_out is True and outcome.exit_code is None and "wall clock" in (outcome.error or "")
    assert 4 <= outcome.duration_s < 15
    assert outcome.stdout.is_file() and outcome.stderr.is_file()
    assert _processes_in(ctx.workspace) == []  # the whole process group is gone
    trace = adapter.normalize(ctx.paths, [outcome], ctx.run_id)
    assert trace.trace_complete is False and trace.structured_trace_status in ("partial", "unavailable")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param("claude_code", marks=needs_claude), pytest.param("codex", marks=needs_codex)]
)
def test_crash_by_signal_is_reported_as_a_crash(name: str, tmp_path: Path) -> None:
    adapter = get_harness(name)
    workspace = tmp_path / "workspace"
    killed: list[int] = []

    def kill_when_waiting() -> None:
        for _ in range(200):  # the harness is waiting on the (hanging) model: crash it
            time.sleep(0.05)
            try:
                pids = [p for p in _processes_in(workspace) if os.getpgid(p) == p]
            except ProcessLookupError:
                continue
            if pids:
                time.sleep(0.5)
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return

    killer = threading.Thread(target=kill_when_waiting)
    killer.start()
    ctx, (outcome,), _ = run_case(
        adapter, Case([("hello", None)], [HANG], deadline_s=30), tmp_path, load_task(EXAMPLE_PACK)
    )
    killer.join()
    assert killed and outcome.timed_out is False
    assert outcome.exit_code is None and outcome.error is not None and "SIGKILL" in outcome.error
    assert outcome.duration_s < 20 and outcome.stdout.is_file()
    assert _processes_in(ctx.workspace) == []  # children of the crashed harness were ended too
    assert adapter.normalize(ctx.paths, [outcome], ctx.run_id).trace_complete is False


@pytest.mark.slow
@needs_codex
def test_codex_startup_failure_keeps_stderr_evidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codex_adapter, "config_toml", lambda ctx: 'model_provider = "nowhere"\n')
    adapter = CodexAdapter()
    with ScriptedServer([text("unused")]) as srv:
        ctx = make_ctx(tmp_path, adapter, url=srv.url)
        outcome = adapter.run_turn(ctx, TurnContext(1, "hello", None, 30))
        assert srv.model_requests() == []
    assert outcome.exit_code not in (0, None) and not outcome.timed_out
    trace = adapter.normalize(ctx.paths, [outcome], ctx.run_id)
    assert trace.structured_trace_status == "unavailable"
    (stderr,) = [e for e in trace.events if e.event_type == "raw_stderr"]
    assert "nowhere" in stderr.text  # Codex's own wording about the bad provider


@needs_codex
@pytest.mark.parametrize("resume", [None, "thread-1"])
def test_codex_native_argv_is_accepted_by_the_real_cli(tmp_path: Path, resume: str | None) -> None:
    """The pinned Codex parses the native-mode command line of a first and of a resumed turn
    (``exec resume`` rejects ``--sandbox``, which made every resumed native turn exit 2 before
    it started); ``--help`` in place of the prompt stops it right after parsing."""
    import subprocess

    adapter = CodexAdapter()
    ctx = make_ctx(tmp_path, adapter, mode="native")
    argv = adapter.argv(ctx, TurnContext(2 if resume else 1, "x", None, 30), resume=resume)
    assert argv[-2:] == ["--", "x"]
    proc = subprocess.run([*argv[:-2], "--help"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "CODEX_HOME": str(tmp_path / "codex-home")})
    assert proc.returncode == 0, proc.stderr[-600:]
    assert "sandbox" in " ".join(argv)


@needs_codex
@pytest.mark.parametrize("resume", [None, "thread-1"])
def test_codex_keeps_the_network_off_when_the_task_denies_it(tmp_path: Path, resume: str | None) -> None:
    """``permissions.network: deny`` is stated as Codex's own sandbox setting (its default, so a
    changed default cannot open the network), and the pinned CLI accepts it on both turns."""
    import subprocess

    adapter = CodexAdapter()
    ctx = make_ctx(tmp_path, adapter, mode="native")
    ctx.task.spec.permissions.network = "deny"
    argv = adapter.argv(ctx, TurnContext(2 if resume else 1, "x", None, 30), resume=resume)
    i = argv.index("sandbox_workspace_write.network_access=false")
    assert argv[i - 1] == "-c"
    proc = subprocess.run([*argv[:-2], "--help"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "CODEX_HOME": str(tmp_path / "codex-home")})
    assert proc.returncode == 0, proc.stderr[-600:]
    ctx.task.spec.permissions.network = "allow"
    assert "sandbox_workspace_write.network_access=false" not in adapter.argv(ctx, TurnContext(1, "x", None, 30), None)
