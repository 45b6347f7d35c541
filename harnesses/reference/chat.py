"""OpenAI Chat Completions client: ``POST {base_url}/chat/completions``, streamed.

The response is read as server-sent events (``data: {chunk}`` lines ending with
``data: [DONE]``); text, reasoning (``reasoning_content``) and ``tool_calls``
deltas are accumulated by index, exactly as the API streams them. There are no
retries: a provider error is reported to the caller, which records it and
stops the turn (a faithful harness surfaces provider failures).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


class ChatError(Exception):
    """The provider answered with an error status, broke the stream, or could not be reached."""

    def __init__(self, kind: str, message: str, http_status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status


@dataclass
class ChatToolCall:
    id: str | None
    name: str
    arguments: str


@dataclass
class ChatResponse:
    """One streamed completion, accumulated."""

    response_id: str | None = None
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ChatToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    http_status: int = 200
    duration_s: float = 0.0
    chunks: int = 0

    def record(self) -> dict[str, Any]:
        return {"response_id": self.response_id, "http_status": self.http_status, "content": self.content or None,
                "reasoning": self.reasoning or None,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
                "finish_reason": self.finish_reason, "usage": self.usage, "duration_s": self.duration_s}


class _Accumulator:
    def __init__(self) -> None:
        self.resp = ChatResponse()
        self.calls: dict[int, dict[str, Any]] = {}

    def feed(self, chunk: dict[str, Any]) -> None:
        self.resp.chunks += 1
        self.resp.response_id = self.resp.response_id or chunk.get("id")
        if chunk.get("usage"):
            self.resp.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.resp.content += delta["content"]
            if delta.get("reasoning_content"):
                self.resp.reasoning += delta["reasoning_content"]
            for tc in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(tc.get("index", len(self.calls))),
                                             {"id": None, "name": "", "arguments": ""})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                self.resp.finish_reason = choice["finish_reason"]

    def done(self) -> ChatResponse:
        self.resp.tool_calls = [ChatToolCall(c["id"], c["name"], c["arguments"])
                                for _, c in sorted(self.calls.items())]
        return self.resp


class ChatClient:
    """One client per harness process (connection reuse across requests)."""

    def __init__(self, base_url: str, api_key: str, *, timeout_s: float = 600.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=30.0))

    async def aclose(self) -> None:
        await self._client.aclose()

    def body(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return body

    async def complete(self, body: dict[str, Any], headers: dict[str, str], *,
                       timeout_s: float | None = None) -> ChatResponse:
        """Send one streamed request and accumulate the answer.

        Raises:
            ChatError: HTTP error status, unreadable stream, or transport failure.
        """
        started = time.monotonic()
        acc = _Accumulator()
        hdrs = {"Authorization": f"Bearer {self.api_key}", "Accept": "text/event-stream", **headers}
        timeout = httpx.Timeout(timeout_s, connect=30.0) if timeout_s else httpx.USE_CLIENT_DEFAULT
        try:
            async with self._client.stream("POST", self.url, json=body, headers=hdrs, timeout=timeout) as resp:
                if resp.status_code >= 400:
                    text = (await resp.aread()).decode("utf-8", errors="replace")
                    raise ChatError("provider_error", f"HTTP {resp.status_code} from {self.url}: {text[:2000]}",
                                    resp.status_code)
                finished = False
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        finished = True
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError as exc:
                        raise ChatError("stream_error", f"unreadable stream chunk {payload[:200]!r}: {exc}",
                                        resp.status_code) from exc
                    if isinstance(chunk, dict) and chunk.get("error"):
                        raise ChatError("provider_error", f"error in stream: {json.dumps(chunk['error'])[:2000]}",
                                        resp.status_code)
                    acc.feed(chunk)
                if not finished and acc.resp.finish_reason is None:
                    raise ChatError("stream_error", "the stream ended before [DONE] and without a finish_reason",
                                    resp.status_code)
                acc.resp.http_status = resp.status_code
        except httpx.HTTPError as exc:
            raise ChatError("transport_error", f"{type(exc).__name__} talking to {self.url}: {exc}") from exc
        out = acc.done()
        out.duration_s = round(time.monotonic() - started, 3)
        return out
