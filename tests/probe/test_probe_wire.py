"""Each wire format, streaming and not, over real HTTP: event order, ids, usage, errors, routes."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest
from probe_http import PARSE, PATHS, SimHarness, post, sse, tools_for

from apparatus.probe import ProbeServer

SHELL_THEN_FINAL = """
    from tracetrial.policy import final, shell

    def policy(turn):
        obs = yield shell("echo hi", timeout_s=5)
        yield final("saw: " + obs.text)
"""


def _first_request(probe: ProbeServer, run_id: str, fmt: str, stream: bool) -> tuple[SimHarness, bytes]:
    sim = SimHarness(fmt, probe.run_url(run_id), tools_for(fmt), stream=stream)
    sim.user("do it")
    status, headers, raw = post(sim.base_url + PATHS[fmt], sim.body())
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream" if stream else "application/json")
    return sim, raw


def test_anthropic_stream_event_order(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    sim, raw = _first_request(probe, run_id, "anthropic", stream=True)
    names = [n for n, _ in sse(raw)]
    assert names == ["message_start", "ping", "content_block_start", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]
    events = dict(sse(raw))
    assert events["content_block_start"]["content_block"]["type"] == "tool_use"
    assert events["content_block_start"]["content_block"]["name"] == "Bash"
    assert events["message_delta"]["delta"]["stop_reason"] == "tool_use"
    out = PARSE["anthropic"](raw, True)
    # Claude Code's Bash takes its timeout in milliseconds
    assert out.arguments == {"command": "echo hi", "timeout": 5000}
    assert out.call_id.startswith("toolu_tt_")
    # usage is sized to the content: ~ request bytes / 4
    body_len = len(json.dumps(sim.body()).encode())
    assert events["message_start"]["message"]["usage"]["input_tokens"] == math.ceil(body_len / 4)


def test_anthropic_non_stream_message(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    _, raw = _first_request(probe, run_id, "anthropic", stream=False)
    msg = json.loads(raw)
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["stop_reason"] == "tool_use"
    assert msg["content"][0]["type"] == "tool_use" and msg["content"][0]["input"]["command"] == "echo hi"
    assert msg["usage"]["output_tokens"] >= 1


def test_responses_stream_events(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    _, raw = _first_request(probe, run_id, "responses", stream=True)
    events = sse(raw)
    names = [n for n, _ in events]
    assert names == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    done = dict(events)["response.output_item.done"]["item"]
    assert done["type"] == "function_call" and done["name"] == "exec_command"
    assert json.loads(done["arguments"]) == {"cmd": "echo hi"}  # exec_command has no timeout field
    usage = dict(events)["response.completed"]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert dict(events)["response.completed"]["response"]["created_at"] == 0


def test_responses_non_stream(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    _, raw = _first_request(probe, run_id, "responses", stream=False)
    resp = json.loads(raw)
    assert resp["object"] == "response" and resp["status"] == "completed"
    assert resp["output"][0]["type"] == "function_call" and resp["output"][0]["call_id"].startswith("call_tt_")


def test_chat_stream_chunks(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    sim.user("do it")
    body = dict(sim.body(), stream_options={"include_usage": True})
    status, _, raw = post(sim.base_url + "/v1/chat/completions", body)
    assert status == 200
    events = sse(raw)
    assert events[-1][1] == "[DONE]"
    first = events[0][1]["choices"][0]["delta"]
    assert first["role"] == "assistant" and first["tool_calls"][0]["function"]["name"] == "exec"
    finish = events[-3][1]
    assert finish["choices"][0]["finish_reason"] == "tool_calls" and finish["usage"]["prompt_tokens"] > 0
    usage_only = events[-2][1]
    assert usage_only["choices"] == [] and usage_only["usage"]["total_tokens"] > 0
    out = PARSE["chat"](raw, True)
    # OpenClaw's documented exec takes seconds
    assert out.arguments == {"command": "echo hi", "timeout": 5}


def test_chat_non_stream_and_deepseek_path(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"), stream=False)
    sim.user("do it")
    status, _, raw = post(probe.run_url(run_id) + "/chat/completions", sim.body())  # DeepSeek: {base}/chat/completions
    assert status == 200
    body = json.loads(raw)
    assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["created"] == 0


@pytest.mark.parametrize("fmt", ["anthropic", "responses", "chat"])
@pytest.mark.parametrize("stream", [True, False])
def test_final_text_round_trip(probe, write_policy, run_id, fmt, stream):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    sim = SimHarness(fmt, probe.run_url(run_id), tools_for(fmt), stream=stream)
    outs = sim.run("do it", lambda out: ("hi\n", False))
    assert [o.name is None for o in outs] == [False, True]
    assert outs[-1].text == "saw: hi\n"


def test_long_final_text_is_streamed_in_chunks(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import final
        def policy(turn):
            yield final("x" * 5000)
    """))
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("go")
    out = sim.send()
    deltas = [d for n, d in out.events if n == "content_block_delta"]
    assert len(deltas) == 5 and out.text == "x" * 5000


def test_unregistered_run_is_404_with_clear_json(probe):
    status, _, raw = post(probe.url + "/nope/v1/messages", {"model": "m", "messages": []})
    assert status == 404
    err = json.loads(raw)["error"]
    assert "no probe run registered under 'nope'" in err["message"] and "register_run" in err["message"]
    status, _, raw = post(probe.url + "/nope/v1/responses", {"model": "m", "input": []})
    assert status == 404 and json.loads(raw)["error"]["code"] == "tt_unknown_run"


def test_head_health_and_unknown_route(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))

    def head(path: str) -> int:
        req = urllib.request.Request(probe.url + path, method="HEAD")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code

    assert head("/") == 200
    assert head(f"/{run_id}") == 200
    assert head("/not-a-run") == 404
    with urllib.request.urlopen(probe.url + "/health", timeout=5) as resp:
        assert json.loads(resp.read())["status"] == "ok"
    status, _, raw = post(probe.url + f"/{run_id}/v2/other", {})
    assert status == 404 and b"no route POST" in raw


def test_count_tokens_route(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL))
    status, _, raw = post(probe.run_url(run_id) + "/v1/messages/count_tokens", b"x" * 400)
    assert status == 200 and json.loads(raw) == {"input_tokens": 100}


@pytest.mark.parametrize("fmt,expect", [
    ("anthropic", {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
    ("responses", {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}),
    ("chat", {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}),
])
def test_injected_provider_error_shapes(probe, write_policy, run_id, fmt, expect):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL),
                       {"provider_error": {"at_request": 1, "status": 500, "message": "boom"}})
    sim = SimHarness(fmt, probe.run_url(run_id), tools_for(fmt))
    sim.user("go")
    status, _, raw = post(sim.base_url + PATHS[fmt], sim.body())
    assert status == 500 and json.loads(raw) == expect
    # the next request (a retry) is answered normally: the error did not consume a policy step
    assert sim.send().name is not None
    report = probe.finish_run(run_id)
    assert [r.kind for r in report.requests] == ["provider_error", "main"]
    assert report.requests[0].status == 500 and report.apparatus_errors == []


def test_prompt_too_long_error_for_reactive_compaction(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(SHELL_THEN_FINAL), {"provider_error": {
        "at_request": 1, "status": 400, "message": "prompt is too long: 250000 tokens > 200000 maximum"}})
    sim = SimHarness("anthropic", probe.run_url(run_id), tools_for("anthropic"))
    sim.user("go")
    status, _, raw = post(sim.base_url + PATHS["anthropic"], sim.body())
    assert status == 400
    assert json.loads(raw)["error"] == {"type": "invalid_request_error",
                                        "message": "prompt is too long: 250000 tokens > 200000 maximum"}


SHELL_THEN_ERROR = """
    from tracetrial.policy import final, provider_error, shell

    def policy(turn):
        obs = yield shell("echo hi", timeout_s=5)
        if "hi" in obs.text:
            yield provider_error(529, "overloaded after the first result")
        yield final("unreachable")
"""


def test_policy_placed_provider_error_persists_across_retries(probe, write_policy, run_id):
    """``provider_error(...)`` fails the request at the step the policy reached, and every retry
    replays to the same step, so a harness cannot retry its way past it."""
    probe.register_run(run_id, write_policy(SHELL_THEN_ERROR))
    sim = SimHarness("chat", probe.run_url(run_id), tools_for("chat"))
    sim.user("go")
    call = sim.send()
    assert call.name is not None
    sim.result(call.call_id, "hi\n")
    for _ in range(3):  # the first attempt and two retries
        status, _, raw = post(sim.base_url + PATHS["chat"], sim.body())
        assert status == 529 and json.loads(raw)["error"]["message"] == "overloaded after the first result"
    report = probe.finish_run(run_id)
    assert [r.kind for r in report.requests] == ["main", "provider_error", "provider_error", "provider_error"]
    assert report.apparatus_errors == []


def test_provider_error_status_must_be_an_http_error() -> None:
    from tracetrial.policy import provider_error

    with pytest.raises(ValueError, match="400–599"):
        provider_error(200)
