"""End to end: the real Claude Code and Codex CLIs driven by a policy through the probe server.

Skipped when the pinned CLIs are not installed in ``.tt-tools/`` (``tracetrial install``);
about one second per CLI run when they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

BIN = Path(os.environ.get("TT_TOOLS_BIN", Path(__file__).resolve().parents[2] / ".tt-tools/node_modules/.bin"))
MCP_SERVER = Path(__file__).parent / "mcp_tickets_server.py"

pytestmark = pytest.mark.slow

POLICY = r"""
from tracetrial.policy import call_tool, edit_file, final, read_file, shell, spawn_subagent, write_file

def policy(turn):
    if turn.index == 2:
        yield final("turn2 fact=%s" % turn.find(r"FACT=(\d+)", default="lost"))
        return
    build = yield shell("echo FACT=$((6*7)); echo oops >&2; exit 3")
    yield write_file("out/status.txt", "code=PENDING\n")
    yield edit_file("out/status.txt", "PENDING", "E%s" % ("1" if build.is_error or "code 3" in build.text else "0"))
    back = yield read_file("out/status.txt")
    ticket = yield call_tool("tickets", "get_ticket", {"ticket_id": "T-7"})
    parts = ["status=%s" % back.find(r"code=(E\d)"), "ticket=%s" % ticket.find(r"status=(\w+)"),
             "stderr=%s" % ("oops" in build.text)]
    if "Agent" in turn.tool_names:  # Codex children run asynchronously: only delegate where it is synchronous
        child = yield spawn_subagent("count", "Reply with the word three.")
        parts.append("child=" + child.text.strip().splitlines()[0])  # Claude appends "agentId: ..."
    yield final(" ".join(parts))

def subagent_policy(prompt_text):
    out = yield shell("echo three")
    yield final(out.text.strip())
"""

TURNS = ["Do the status task.", "What was the fact?"]


def _need(name: str) -> Path:
    exe = BIN / name
    if not exe.exists():
        pytest.skip(f"{name} not installed at {exe} (run `tracetrial install`)")
    return exe


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def policy_path(write_policy):
    return write_policy(POLICY)


def test_claude_code_end_to_end(probe, policy_path, tmp_path):
    claude = _need("claude")
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    mcp = tmp_path / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"tickets": {"command": sys.executable, "args": [str(MCP_SERVER)]}}}))
    probe.register_run("live-claude", policy_path, {"turns": TURNS})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "ANTHROPIC_BASE_URL": probe.run_url("live-claude"),
           "ANTHROPIC_API_KEY": "x", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1",
           "CLAUDE_CODE_TMPDIR": str(home), "CLAUDE_CODE_MAX_RETRIES": "1"}
    base = [str(claude), "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
    sid = str(uuid.uuid4())
    first = _run(base + ["-p", TURNS[0], "--session-id", sid, "--mcp-config", str(mcp)], ws, env)
    assert first.returncode == 0, first.stderr[-2000:]
    result = json.loads(first.stdout.strip().splitlines()[-1])
    assert result["result"] == "status=E1 ticket=open stderr=True child=three"
    assert (ws / "out/status.txt").read_text() == "code=E1\n"
    assert _run(base + ["-p", "/compact", "--resume", sid], ws, env).returncode == 0
    second = _run(base + ["-p", TURNS[1], "--resume", sid], ws, env)
    assert json.loads(second.stdout.strip().splitlines()[-1])["result"] == "turn2 fact=42"
    report = probe.finish_run("live-claude")
    assert report.apparatus_errors == [] and report.absent_capabilities == []
    main = [(r.turn, r.action, r.mapped_tool) for r in report.requests if r.kind == "main"]
    assert main == [(1, "shell", "Bash"), (1, "write_file", "Write"), (1, "edit_file", "Edit"),
                    (1, "read_file", "Read"), (1, "call_tool", "mcp__tickets__get_ticket"),
                    (1, "spawn_subagent", "Agent"), (1, "final", None), (2, "final", None)]
    assert [r.kind for r in report.requests].count("subagent") == 2
    assert [r.kind for r in report.requests].count("compaction") == 1


def test_codex_end_to_end(probe, policy_path, tmp_path):
    codex = _need("codex")
    home, ws = tmp_path / "codex_home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    (home / "config.toml").write_text(f"""
model = "probe-model"
model_provider = "tt"
check_for_update_on_startup = false

[model_providers.tt]
name = "tt"
base_url = "{probe.run_url('live-codex')}/v1"
env_key = "TT_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[mcp_servers.tickets]
command = "{sys.executable}"
args = ["{MCP_SERVER}"]
required = true
""")
    probe.register_run("live-codex", policy_path, {"turns": TURNS})
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home), "TT_KEY": "x"}
    flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    first = _run([str(codex), "exec", *flags, TURNS[0]], ws, env)
    assert first.returncode == 0, first.stderr[-2000:]
    events = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    messages = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
                and e["item"]["type"] == "agent_message"]
    # Codex delivers no error flag: the exit code is only in the text ("Process exited with code 3")
    assert messages == ["status=E1 ticket=open stderr=True"]
    assert (ws / "out/status.txt").read_text() == "code=E1\n"
    thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
    second = _run([str(codex), "exec", *flags, "resume", thread, TURNS[1]], ws, env)
    assert '"turn2 fact=42"' in second.stdout
    report = probe.finish_run("live-codex")
    assert report.apparatus_errors == []
    main = [(r.action, r.mapped_tool, tuple(r.notes)) for r in report.requests if r.kind == "main"]
    assert main[:5] == [
        ("shell", "exec_command", ()),
        ("write_file", "exec_command", ("no file-write tool declared; done through the shell tool",)),
        ("edit_file", "exec_command", ("no file-edit tool declared; done through the shell tool",)),
        ("read_file", "exec_command", ("no file-read tool declared; done through the shell tool",)),
        ("call_tool", "mcp__tickets/get_ticket", ()),
    ]
