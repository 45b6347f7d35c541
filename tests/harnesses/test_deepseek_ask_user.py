"""DeepSeek Harness's ask-user channel: for a task with ``ask_user`` the adapter runs the bundled
cordis file plus the runtime's own ask-user plugins and the benchmark's user-questions provider;
the JSON-RPC client answers the provider's ``userQuestions/ask`` requests through the simulated
user — a pick of an offered option as ``selected``, anything else as ``custom`` text. Other tasks
run the bundled file unchanged. The slow test drives the real runtime (0.1.0rc6) against a
scripted chat-completions model and reads what reached the model."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import RunContext, TurnContext
from harnesses.deepseek.adapter import DeepSeekAdapter
from harnesses.deepseek.ask_user import (
    ASK_METHOD,
    CORDIS_ENTRIES,
    PROVIDER_FILE,
    answer_questions,
    ask_cordis,
    simulated_user,
)
from harnesses.deepseek.rpc import METHOD_NOT_FOUND, Runtime
from tests.harnesses.capture import run_context
from tracetrial.task import load_task
from tracetrial.trace import ToolEvent

REPO = Path(__file__).resolve().parents[2]
REGION = REPO / "tasks" / "T7-region-clarify-001"
ROLLOUT = REPO / "tasks" / "T7-rollout-window-002"
THURSDAY = "RW-THU-2200 (Thursday 22:00-23:30 UTC)"
WINDOWS = [{"label": "RW-TUE-0200 (Tuesday 02:00-03:00 UTC)"}, {"label": THURSDAY, "description": "late"},
           {"label": "RW-SAT-0600 (Saturday 06:00-07:00 UTC)"}]
needs_deepseek = pytest.mark.skipif(
    DeepSeekAdapter().unavailable_reason() is not None, reason="deepseek not installed (tracetrial install deepseek)"
)


def _ctx(tmp_path: Path, pack: Path | None = None, url: str = "http://127.0.0.1:9/v1") -> RunContext:
    ctx = run_context(tmp_path, url=url)
    if pack is not None:
        ctx.task = load_task(pack)
    return ctx


# ------------------------------------------------------------------------- cordis / config
def test_an_ask_user_task_runs_the_bundled_config_plus_the_ask_user_plugins(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled.yml"
    bundled.write_text("- id: sdk-jsonrpc-server\n  name: '@deepseek-ai/dsh-sdk-jsonrpc-server'\n")
    ctx = _ctx(tmp_path, REGION)
    cordis, handlers = DeepSeekAdapter.config(ctx, bundled)
    assert cordis == ctx.home / "tt-cordis" / "cordis.yml" and set(handlers) == {ASK_METHOD}
    text = cordis.read_text()
    assert text == ask_cordis(bundled.read_text()) and text.startswith(bundled.read_text())
    for name in ("'@deepseek-ai/dsh-user-questions'", "'@deepseek-ai/dsh-tool-ask-user'", "'./tt-ask-provider.mjs'"):
        assert f"  name: {name}" in CORDIS_ENTRIES
    # the provider is loaded relative to the cordis file: it sits beside it, as shipped
    assert (cordis.parent / PROVIDER_FILE.name).read_bytes() == PROVIDER_FILE.read_bytes()
    assert "userQuestions/ask" in PROVIDER_FILE.read_text()


def test_other_tasks_run_the_bundled_config_unchanged(tmp_path: Path) -> None:
    bundled = tmp_path / "bundled.yml"
    bundled.write_text("- id: x\n  name: y\n")
    ctx = _ctx(tmp_path)  # the example pack: no ask_user among its tools
    assert "ask_user" not in ctx.task.spec.tools
    assert DeepSeekAdapter.config(ctx, bundled) == (bundled, {})
    assert not (ctx.home / "tt-cordis").exists()
    assert DeepSeekAdapter().environment(ctx, bundled)["DSH_CORDIS_CONFIG"] == str(bundled)


@needs_deepseek
def test_the_real_bundled_config_gains_exactly_three_plugins(tmp_path: Path) -> None:
    import yaml

    paths = DeepSeekAdapter().runtime()
    assert paths is not None
    cordis, _ = DeepSeekAdapter.config(_ctx(tmp_path, ROLLOUT), paths[1])
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("tag:yaml.org,2002:js", lambda loader, node: None)  # cordis '!!js' expressions
    ids = [e["id"] for e in yaml.load(cordis.read_text(), Loader=Loader)]
    bundled_ids = [e["id"] for e in yaml.load(paths[1].read_text(), Loader=Loader)]
    assert ids == bundled_ids + ["user-questions", "tool-ask-user", "tt-ask-provider"]


# ------------------------------------------------------------------- question -> answer
def test_a_pick_is_selected_and_free_text_is_custom() -> None:
    asked: list[tuple[str, list[str] | None, str | None]] = []

    def answer(question: str, options: list[str] | None, rid: str | None, raw: Any) -> tuple[str, str | None]:
        asked.append((question, options, rid))
        return (THURSDAY, THURSDAY) if options else ("eu-north-7", None)

    params = {"sessionId": "s1", "questions": [
        {"id": "window", "question": "Which window?", "header": "Window", "options": WINDOWS, "multiSelect": False},
        {"id": "region", "question": "Which region?"}]}
    out = answer_questions(params, answer, "uq_1")
    assert out == {"answers": [{"id": "window", "selected": [THURSDAY]},
                               {"id": "region", "selected": [], "custom": "eu-north-7"}]}
    assert asked == [("Which window?", [w["label"] for w in WINDOWS], "uq_1"), ("Which region?", None, "uq_1")]


def test_an_answer_naming_no_offered_option_is_custom_text() -> None:
    out = answer_questions({"questions": [{"id": "q", "question": "?", "options": WINDOWS}]},
                           lambda *a: ("none of these", None))
    assert out == {"answers": [{"id": "q", "selected": [], "custom": "none of these"}]}


def test_the_simulated_user_answers_and_keeps_its_ledger_under_private(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ROLLOUT)
    answer = simulated_user(ctx.task, ctx.paths.private)
    out = answer_questions({"questions": [
        {"id": "w", "question": "Which rollout window should payments-gateway 5.3.0 use?", "options": WINDOWS},
        {"id": "f", "question": "Which rollout window, in your own words?"}]}, answer, "uq_9")
    assert out == {"answers": [{"id": "w", "selected": [THURSDAY]}, {"id": "f", "selected": [], "custom": "Thursday"}]}
    ledger = [json.loads(x) for x in (ctx.paths.private / "ledgers" / "_ask_user.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in ledger] == ["request", "issued", "request", "issued"]
    assert ledger[0]["detail"]["options"] == [w["label"] for w in WINDOWS] and ledger[0]["detail"]["request_id"] == "uq_9"
    assert ledger[1]["detail"]["option"] == THURSDAY and ledger[3]["detail"]["option"] is None


# --------------------------------------------------------------- the client answers requests
_FAKE_RUNTIME = r"""
import json, sys
print(json.dumps({"jsonrpc": "2.0", "id": "uq_a", "method": "userQuestions/ask",
                  "params": {"sessionId": "s", "questions": [{"id": "q1", "question": "Which region?"}]}}), flush=True)
print(json.dumps({"jsonrpc": "2.0", "id": "x_1", "method": "something/else", "params": {}}), flush=True)
for line in sys.stdin:
    print(json.dumps({"jsonrpc": "2.0", "method": "echo", "params": json.loads(line)}), flush=True)
"""


def test_the_client_answers_the_runtimes_requests_through_its_handlers(tmp_path: Path) -> None:
    files = [tmp_path / n for n in ("out", "err", "req.jsonl")]
    runtime = Runtime([sys.executable, "-c", _FAKE_RUNTIME], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                      stdout=files[0], stderr=files[1], requests=files[2],
                      handlers={ASK_METHOD: lambda req: answer_questions(req["params"], lambda *a: ("eu-north-7", None))})
    try:
        def echoed(ms: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
            got = {m["params"]["id"]: m["params"] for m in ms if m.get("method") == "echo"}
            return got if len(got) == 2 else {}

        got = runtime.wait_for(echoed, time.monotonic() + 20)
        assert got["uq_a"] == {"jsonrpc": "2.0", "id": "uq_a", "result": {
            "answers": [{"id": "q1", "selected": [], "custom": "eu-north-7"}]}}
        assert got["x_1"]["error"]["code"] == METHOD_NOT_FOUND
        # every line we wrote is on the turn's requests log
        logged = {json.loads(x)["id"] for x in files[2].read_text().splitlines()}
        assert logged == {"uq_a", "x_1"}
    finally:
        runtime.kill()


# ------------------------------------------------------------------ the real runtime (slow)
class _Chat(BaseHTTPRequestHandler):
    """A scripted OpenAI chat-completions model: the first call asks, the second ends the turn."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.bodies.append(body)
        first = len(self.server.bodies) == 1
        msg: dict[str, Any] = {"role": "assistant", "content": None if first else "done"}
        if first:
            msg["tool_calls"] = [{"id": "call_ask", "type": "function", "function": {
                "name": "ask_user_question", "arguments": json.dumps(self.server.ask)}}]
        finish = "tool_calls" if first else "stop"
        if body.get("stream"):
            base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
            delta = dict(msg, tool_calls=[dict(c, index=0) for c in msg.get("tool_calls", [])]) if first else msg
            chunks = [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                      dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                           usage={"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11})]
            payload = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
            ctype = "text/event-stream"
        else:
            payload = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                                  "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}).encode()
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def chat_model() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    server.daemon_threads = True
    server.bodies = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.slow
@needs_deepseek
def test_the_real_runtime_asks_the_simulated_user_and_the_model_sees_the_answer(
        tmp_path: Path, chat_model: ThreadingHTTPServer) -> None:
    ask = {"questions": [
        {"id": "window", "question": "Which rollout window should payments-gateway 5.3.0 use?", "header": "Window",
         "options": WINDOWS, "multi_select": False},
        {"id": "free", "question": "Which rollout window do you want, in your own words?"}]}
    chat_model.ask = ask  # type: ignore[attr-defined]
    ctx = _ctx(tmp_path, ROLLOUT, url=f"http://127.0.0.1:{chat_model.server_address[1]}/v1")
    adapter = DeepSeekAdapter()
    outcome = adapter.run_turn(ctx, TurnContext(1, "pick the window", None, 90))
    adapter.collect(ctx)
    assert outcome.exit_code == 0, outcome.error
    bodies: list[dict[str, Any]] = chat_model.bodies  # type: ignore[attr-defined]
    assert "ask_user_question" in [t["function"]["name"] for t in bodies[0]["tools"]]
    (result,) = [m for m in bodies[1]["messages"] if m.get("role") == "tool"]
    content = result["content"] if isinstance(result["content"], str) else "".join(
        c.get("text", "") for c in result["content"])
    assert result["tool_call_id"] == "call_ask" and json.loads(content) == {"answers": [
        {"id": "window", "selected": [THURSDAY]}, {"id": "free", "selected": [], "custom": "Thursday"}]}
    ledger = [json.loads(x) for x in (ctx.paths.private / "ledgers" / "_ask_user.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in ledger] == ["request", "issued", "request", "issued"]
    # the wire: the provider's request on stdout, our answer on the requests log, both archived
    wire = [json.loads(x) for x in (ctx.paths.native / "turn-1.stdout").read_text().splitlines() if x.startswith("{")]
    (uq,) = [m for m in wire if m.get("method") == ASK_METHOD]
    assert [q["id"] for q in uq["params"]["questions"]] == ["window", "free"]
    sent = [json.loads(x) for x in (ctx.paths.native / "turn-1.requests.jsonl").read_text().splitlines()]
    assert any(m.get("id") == uq["id"] and "result" in m for m in sent)
    assert (ctx.paths.native / "turn-1.tt-ask-provider.mjs").is_file()
    trace = adapter.normalize(ctx.paths, [outcome], ctx.run_id)
    (call,) = [e for e in trace.events if isinstance(e, ToolEvent) and e.tool_call.name == "ask_user_question"]
    assert call.tool_result is not None and THURSDAY in str(call.tool_result.content)
    assert any(getattr(e, "native_method", None) == ASK_METHOD for e in trace.events)  # known, not "unknown"
