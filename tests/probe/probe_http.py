"""Test helpers: real HTTP to the probe server and a minimal simulated harness per wire format.

``SimHarness`` keeps a conversation in one wire format, posts it, parses the
(streamed or JSON) answer back into a neutral :class:`Out`, and appends the
assistant output plus a tool result the test supplies, the way a harness does.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_tools(name: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))["tools"]


def post(url: str, body: dict[str, Any] | bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def sse(raw: bytes) -> list[tuple[str | None, Any]]:
    """SSE blocks as (event name, parsed data); ``[DONE]`` stays a string."""
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        payload = "\n".join(data)
        out.append((event, payload if payload == "[DONE]" else json.loads(payload)))
    return out


@dataclass
class Out:
    """A model answer in neutral form."""

    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    namespace: str | None = None
    arguments: Any = None
    usage: dict[str, Any] = field(default_factory=dict)
    raw: bytes = b""
    events: list[tuple[str | None, Any]] = field(default_factory=list)


def parse_anthropic(raw: bytes, stream: bool) -> Out:
    if not stream:
        msg = json.loads(raw)
        block = msg["content"][0]
        if block["type"] == "tool_use":
            return Out(call_id=block["id"], name=block["name"], arguments=block["input"], usage=msg["usage"], raw=raw)
        return Out(text=block["text"], usage=msg["usage"], raw=raw)
    events = sse(raw)
    out = Out(raw=raw, events=events)
    args, text = "", ""
    for name, data in events:
        assert data["type"] == name, "event name and data.type must agree"
        if name == "content_block_start" and data["content_block"]["type"] == "tool_use":
            out.call_id, out.name = data["content_block"]["id"], data["content_block"]["name"]
        elif name == "content_block_delta":
            delta = data["delta"]
            args += delta.get("partial_json", "")
            text += delta.get("text", "")
        elif name == "message_delta":
            out.usage = data["usage"]
    if out.name:
        out.arguments = json.loads(args)
    else:
        out.text = text
    return out


def parse_responses(raw: bytes, stream: bool) -> Out:
    if stream:
        events = sse(raw)
        done = [d for n, d in events if n == "response.completed"]
        assert len(done) == 1, "exactly one response.completed"
        response = done[0]["response"]
    else:
        events, response = [], json.loads(raw)
    item = response["output"][0]
    out = Out(usage=response["usage"], raw=raw, events=events)
    if item["type"] == "function_call":
        out.call_id, out.name, out.namespace = item["call_id"], item["name"], item.get("namespace")
        out.arguments = json.loads(item["arguments"])
    else:
        out.text = item["content"][0]["text"]
    return out


def parse_chat(raw: bytes, stream: bool) -> Out:
    if not stream:
        body = json.loads(raw)
        msg = body["choices"][0]["message"]
        out = Out(usage=body["usage"], raw=raw)
        if msg.get("tool_calls"):
            call = msg["tool_calls"][0]
            out.call_id, out.name = call["id"], call["function"]["name"]
            out.arguments = json.loads(call["function"]["arguments"])
        else:
            out.text = msg["content"]
        return out
    events = sse(raw)
    assert events[-1][1] == "[DONE]", "a chat stream ends with [DONE]"
    out = Out(raw=raw, events=events)
    args, text = "", ""
    for _, data in events[:-1]:
        if data.get("usage"):
            out.usage = data["usage"]
        for choice in data["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                if call.get("id"):
                    out.call_id, out.name = call["id"], call["function"]["name"]
                args += call["function"].get("arguments", "")
    if out.name:
        out.arguments = json.loads(args)
    else:
        out.text = text
    return out


PATHS = {"anthropic": "/v1/messages?beta=true", "responses": "/v1/responses", "chat": "/v1/chat/completions"}
PARSE = {"anthropic": parse_anthropic, "responses": parse_responses, "chat": parse_chat}


class SimHarness:
    """A minimal harness loop in one wire format (history rebuilt by call id, like the real ones)."""

    def __init__(self, fmt: str, base_url: str, tools: list[dict[str, Any]], *, stream: bool = True,
                 system: str = "You are a test agent.", headers: dict[str, str] | None = None):
        self.fmt, self.base_url, self.tools, self.stream = fmt, base_url, tools, stream
        self.system, self.headers = system, headers or {}
        self.messages: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ history
    def user(self, text: str) -> None:
        if self.fmt == "anthropic":
            self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        elif self.fmt == "responses":
            self.messages.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        else:
            self.messages.append({"role": "user", "content": text})

    def assistant(self, out: Out) -> None:
        if self.fmt == "anthropic":
            block = ({"type": "tool_use", "id": out.call_id, "name": out.name, "input": out.arguments}
                     if out.name else {"type": "text", "text": out.text})
            self.messages.append({"role": "assistant", "content": [block]})
        elif self.fmt == "responses":
            if out.name:
                item = {"type": "function_call", "name": out.name, "arguments": json.dumps(out.arguments),
                        "call_id": out.call_id}
                if out.namespace:
                    item["namespace"] = out.namespace
                self.messages.append(item)
            else:
                self.messages.append({"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": out.text}]})
        else:
            if out.name:
                self.messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": out.call_id, "type": "function",
                     "function": {"name": out.name, "arguments": json.dumps(out.arguments)}}]})
            else:
                self.messages.append({"role": "assistant", "content": out.text})

    def result(self, call_id: str, text: str, is_error: bool | None = None) -> None:
        if self.fmt == "anthropic":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
            if is_error is not None:
                block["is_error"] = is_error
            self.messages.append({"role": "user", "content": [block]})
        elif self.fmt == "responses":
            self.messages.append({"type": "function_call_output", "call_id": call_id, "output": text})
        else:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    # ------------------------------------------------------------------ wire
    def body(self) -> dict[str, Any]:
        if self.fmt == "anthropic":
            return {"model": "probe", "max_tokens": 1000, "stream": self.stream, "system": self.system,
                    "messages": self.messages, "tools": self.tools}
        if self.fmt == "responses":
            return {"model": "probe", "stream": self.stream, "instructions": self.system, "input": self.messages,
                    "tools": self.tools}
        return {"model": "probe", "stream": self.stream,
                "messages": [{"role": "system", "content": self.system}, *self.messages], "tools": self.tools}

    def send(self) -> Out:
        status, _, raw = post(self.base_url + PATHS[self.fmt], self.body(), self.headers)
        assert status == 200, raw.decode("utf-8", "replace")
        return PARSE[self.fmt](raw, self.stream)

    def run(self, prompt: str, execute: Callable[[Out], tuple[str, bool | None]], max_steps: int = 20) -> list[Out]:
        """One user turn: send, execute each tool call with ``execute`` until a text answer."""
        self.user(prompt)
        outs: list[Out] = []
        for _ in range(max_steps):
            out = self.send()
            outs.append(out)
            self.assistant(out)
            if out.name is None:
                return outs
            text, is_error = execute(out)
            self.result(out.call_id or "", text, is_error)
        raise AssertionError(f"no final answer within {max_steps} requests: {[o.name for o in outs]}")


# tools in each wire format, from the captured/documented fixtures
def tools_for(fmt: str) -> list[dict[str, Any]]:
    return {
        "anthropic": fixture_tools("claude_code-2.1.220.main.json"),
        "responses": fixture_tools("codex-0.145.0.json"),
        "chat": fixture_tools("openclaw-2026.6.9.documented.json"),
    }[fmt]
