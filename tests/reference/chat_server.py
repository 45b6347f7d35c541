"""A tiny scripted OpenAI Chat Completions server for the reference harness's tests.

``POST …/chat/completions`` answers with a streamed SSE completion (text and/or
``tool_calls`` deltas, the arguments split over several chunks, usage in the
last chunk, then ``data: [DONE]``), exactly as the API streams. Replies are
scripted per principal (the harness's ``x-tt-principal-id`` header: ``main``,
``child-1`` …); a callable script sees each request and decides. Every request
(headers without auth, JSON body) is kept for assertions.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted model turn."""

    text: str | None = None
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, args dict | raw str)
    status: int = 200
    error: str | None = None
    delay_s: float = 0.0
    prompt_tokens: int | None = None  # reported prompt size (default 100 + request index)


def say(text: str) -> Reply:
    return Reply(text=text)


def call(call_id: str, name: str, args: Any, text: str | None = None) -> Reply:
    return Reply(text=text, tool_calls=[(call_id, name, args)])


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def principal(self) -> str:
        return self.headers.get("x-tt-principal-id", "main")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools", [])]

    def tool_result(self, call_id: str) -> str | None:
        for m in self.messages:
            if m.get("role") == "tool" and m.get("tool_call_id") == call_id:
                return m.get("content")
        return None


Script = Callable[[Request], Reply]


class ChatServer:
    """Start with :meth:`start`; ``base_url`` ends in ``/v1``."""

    def __init__(self, script: dict[str, list[Reply]] | Script):
        self.script = script
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def of(self, principal: str) -> list[Request]:
        return [r for r in self.requests if r.principal == principal]

    def next_reply(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            if callable(self.script):
                return self.script(req)
            queue = self.script.get(req.principal, [])
            return queue.pop(0) if queue else Reply(status=500, error=f"script exhausted for {req.principal}")


def _chunks(reply: Reply, n: int) -> list[dict[str, Any]]:
    rid = f"chatcmpl-test-{n}"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": rid, "object": "chat.completion.chunk", "model": "scripted",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else 100 + n
    out = [chunk({"role": "assistant"})]
    if reply.text:
        half = len(reply.text) // 2
        out += [chunk({"content": reply.text[:half]}), chunk({"content": reply.text[half:]})]
    for i, (cid, name, args) in enumerate(reply.tool_calls):
        raw = args if isinstance(args, str) else json.dumps(args)
        half = len(raw) // 2
        out.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                          "function": {"name": name, "arguments": raw[:half]}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]}))
    out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    out.append({"id": rid, "object": "chat.completion.chunk", "model": "scripted", "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10}})
    return out


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}
            req = Request(self.path, headers, body)
            reply = server.next_reply(req)
            if reply.delay_s:
                threading.Event().wait(reply.delay_s)
            if reply.status >= 400:
                data = json.dumps({"error": {"message": reply.error or "scripted failure", "type": "api_error"}})
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            for c in _chunks(reply, len(server.requests)):
                self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler
