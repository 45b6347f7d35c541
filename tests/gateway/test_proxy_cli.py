"""The real CLIs (Claude Code 2.1.220, Codex 0.145.0 from ``.tt-tools``) through the
gateway to a scripted model that asks for one failing shell command: the run completes,
every body the CLI sent reaches the upstream byte for byte, and the recorder sees the
tool inventory, the failing tool result, usage and the run binding."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from capture_cli_bodies import COMMAND, cli_available, run_cli
from gateway_helpers import UPSTREAM_KEY

from apparatus.gateway import Gateway
from apparatus.gateway.fake_upstream import FakeUpstream, shell_failure_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (cli_available("claude") and cli_available("codex")),
                       reason="pinned CLIs not installed in .tt-tools (run `tracetrial install`)"),
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(script=shell_failure_script(COMMAND)) as up:
        yield up


def _posts_of(upstream: FakeUpstream, marker: str) -> list[bytes]:
    return [c.body for c in upstream.captured if c.method == "POST" and marker in c.path]


@pytest.mark.parametrize(("cli", "wire", "alias"), [
    ("claude", "anthropic", "probe"), ("codex", "responses", "probe"), ("claude", "anthropic", "fake-anthropic")])
def test_cli_run_through_the_gateway(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path, run_id: str,
                                     cli: str, wire: str, alias: str) -> None:
    before = len(upstream.captured)
    proc = run_cli(cli, gateway.base_url(run_id, alias, wire), gateway.api_key(run_id), tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    records = gateway.records(run_id)
    new = upstream.captured[before:]
    posts = [c for c in new if c.method == "POST"]
    assert len(records) == len(posts) == 2

    # Byte identity, end to end: what the CLI sent (kept by record_bodies) is what arrived.
    for rec, cap in zip(records, posts, strict=True):
        sent = (gateway.records_dir / run_id / "bodies" / f"{rec['index']}.json").read_bytes()
        assert sent == cap.body and rec["body_sha256"] == hashlib.sha256(sent).hexdigest()
        assert rec["status"] == 200 and rec["error"] is None and rec["stream"] is True
        assert rec["wire_format"] == wire and rec["inventory_complete"]

    first, second = records
    names = {t["name"] for t in first["tools"]}
    assert ("Bash" if cli == "claude" else "exec_command") in names
    assert first["tool_results"] == [] and first["last_user_text"].endswith("hi")
    (result,) = second["tool_results"]
    if cli == "claude":
        assert (result["is_error"], result["content"]) == (True, "Exit code 3\nhi")
        assert first["usage"] == {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": None,
                                  "cache_write_tokens": None, "reasoning_tokens": None}
        heads = [c for c in new if c.method == "HEAD"]
        if alias == "probe":
            assert heads and heads[0].path == f"/{run_id}/api/hello"     # Claude Code's HEAD passes
    else:
        assert result["is_error"] is None and "Process exited with code 3" in result["content"]
        assert first["usage"]["input_tokens"] == 10 and first["usage"]["output_tokens"] == 5
        assert posts[0].headers.get("session-id")                    # Codex session headers survive
    if alias == "probe":
        assert all(c.path.startswith(f"/{run_id}/") for c in new)
    else:
        assert all(c.headers.get("x-api-key") == UPSTREAM_KEY for c in posts)
        assert gateway.api_key(run_id) not in json.dumps([c.headers for c in new])


def test_claude_code_through_a_translation_route(gateway: Gateway, upstream: FakeUpstream, tmp_path: Path,
                                                 run_id: str) -> None:
    """Claude Code with a chat-only model: LiteLLM translates; the record keeps what Claude
    Code sent (its hash and inventory), the upstream sees a different, translated body."""
    assert gateway.route_info("fake-chat", "anthropic")["native"] is False
    before = len(upstream.captured)
    info = gateway.route_info("fake-chat", "anthropic")
    proc = run_cli("claude", gateway.base_url(run_id, "fake-chat", "anthropic"), gateway.api_key(run_id),
                   tmp_path, model=info["model"])
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    (rec,) = gateway.records(run_id)
    sent = (gateway.records_dir / run_id / "bodies" / "0.json").read_bytes()
    (cap,) = [c for c in upstream.captured[before:] if c.method == "POST"]
    assert cap.path == "/v1/chat/completions" and cap.body != sent
    assert rec["body_sha256"] == hashlib.sha256(sent).hexdigest()
    assert (rec["status"], rec["error"], rec["wire_format"]) == (200, None, "anthropic")
    assert "Bash" in {t["name"] for t in rec["tools"]}
    assert json.loads(sent)["model"] == "fake-chat"
