"""A tiny model provider for tests and benchmarks: records every request's raw bytes and
answers in the format its path names, streamed (SSE, one socket write per event,
``TCP_NODELAY``) or not.

The ``model`` of a request steers it:

- ``error-<status>``: an error response in the format's own error shape;
- ``stream-error``: a stream that fails in band (Anthropic ``event: error``, Responses
  ``response.failed``, Chat ``{"error": ...}`` chunk) after its first event;
- ``slow-<ms>``: waits that long before each streamed event (or before a JSON answer);
- anything else: a short successful answer with fixed usage (see ``USAGE``).

A ``script(n, wire, request) -> list[bytes] | None`` callable may supply the SSE events of
the n-th POST (0-based) itself, e.g. to answer with a tool call.

``USAGE`` is what each format reports; tests compare the recorder's parse with it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from apparatus.gateway.wire import wire_format_for_path
from tracetrial.harness import WireFormat

Script = Callable[[int, WireFormat, dict[str, Any]], "list[bytes] | None"]

#: Raw usage objects the fake upstream reports, per format.
USAGE: dict[str, dict[str, Any]] = {
    "anthropic": {"input_tokens": 11, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 7,
                  "output_tokens": 3},
    "responses": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 6,
                  "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 26},
    "chat": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35,
             "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 1}},
}


@dataclass
class Captured:
    """One request as the upstream received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    response: bytes = b""
    status: int = 0
    received_at: float = field(default_factory=time.perf_counter)


def sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _events(wire: WireFormat, model: str, fail: bool) -> list[bytes]:
    if wire == "anthropic":
        start_usage = {**USAGE["anthropic"], "output_tokens": 1}
        out = [sse("message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
        if fail:
            return out + [sse("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                     "message": "fake overload mid-stream"}})]
        return out + [
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": "ok"}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                   "stop_sequence": None}, "usage": {"output_tokens": 3}}),
            sse("message_stop", {"type": "message_stop"}),
        ]
    if wire == "responses":
        base = {"id": "resp_fake", "object": "response", "model": model, "output": []}
        out = [sse("response.created", {"type": "response.created", "sequence_number": 0,
                                         "response": {**base, "status": "in_progress"}})]
        if fail:
            return out + [sse("response.failed", {"type": "response.failed", "sequence_number": 1, "response": {
                **base, "status": "failed", "error": {"code": "server_error", "message": "fake failure mid-stream"},
                "usage": None}})]
        item = {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}]}
        return out + [
            sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                                "output_index": 0, "item": {**item, "status": "in_progress",
                                                                            "content": []}}),
            sse("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 2,
                                                "item_id": "msg_fake", "output_index": 0, "content_index": 0,
                                                "delta": "ok"}),
            sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 3,
                                               "output_index": 0, "item": item}),
            sse("response.completed", {"type": "response.completed", "sequence_number": 4, "response": {
                **base, "status": "completed", "output": [item], "usage": USAGE["responses"]}}),
        ]
    chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model}
    out = [sse(None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                             "finish_reason": None}]})]
    if fail:
        return out + [sse(None, {"error": {"message": "fake failure mid-stream", "type": "server_error"}})]
    return out + [
        sse(None, {**chunk, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]}),
        sse(None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        sse(None, {**chunk, "choices": [], "usage": USAGE["chat"]}),
        sse(None, "[DONE]"),
    ]


def _json_answer(wire: WireFormat, model: str) -> dict[str, Any]:
    if wire == "anthropic":
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": USAGE["anthropic"]}
    if wire == "responses":
        return {"id": "resp_fake", "object": "response", "status": "completed", "model": model, "output": [
            {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "ok", "annotations": []}]}], "usage": USAGE["responses"]}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": USAGE["chat"]}


def _error(wire: WireFormat, status: int) -> dict[str, Any]:
    message = f"fake upstream error {status}"
    if wire == "anthropic":
        return {"type": "error", "error": {"type": "rate_limit_error" if status == 429 else "api_error",
                                           "message": message}}
    return {"error": {"message": message, "type": "rate_limit_exceeded" if status == 429 else "server_error",
                      "code": status}}


def shell_failure_script(command: str = "echo hi; exit 3") -> Script:
    """A script that answers a request without tool results with one shell tool call
    (Claude Code's ``Bash``, Codex's ``exec_command``, else ``bash``) running ``command``,
    and any later request with the default text answer. Stateless, so runs may share it."""
    from apparatus.gateway.wire import extract_tool_results

    def script(n: int, wire: WireFormat, req: dict[str, Any]) -> list[bytes] | None:
        if extract_tool_results(req, wire):
            return None
        names = {t.get("name") for t in req.get("tools") or [] if isinstance(t, dict)}
        if wire == "anthropic":
            args = json.dumps({"command": command, "description": "Fail on purpose"})
            return [
                sse("message_start", {"type": "message_start", "message": {
                    "id": "msg_call1", "type": "message", "role": "assistant", "model": req.get("model"),
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1}}}),
                sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use", "id": "toolu_call1", "name": "Bash" if "Bash" in names else "bash",
                    "input": {}}}),
                sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "input_json_delta", "partial_json": args}}),
                sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
                sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                      "stop_sequence": None}, "usage": {"output_tokens": 5}}),
                sse("message_stop", {"type": "message_stop"}),
            ]
        if wire != "responses":
            return None
        name = "exec_command" if "exec_command" in names else "shell"
        arg = "cmd" if name == "exec_command" else "command"
        item = {"type": "function_call", "id": "fc_call1", "call_id": "call_call1", "name": name,
                "arguments": json.dumps({arg: command}), "status": "completed"}
        base = {"id": "resp_call1", "object": "response", "model": req.get("model")}
        return [
            sse("response.created", {"type": "response.created", "sequence_number": 0,
                                     "response": {**base, "status": "in_progress", "output": []}}),
            sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                               "output_index": 0, "item": {**item, "arguments": "",
                                                                           "status": "in_progress"}}),
            sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 2,
                                              "output_index": 0, "item": item}),
            sse("response.completed", {"type": "response.completed", "sequence_number": 3, "response": {
                **base, "status": "completed", "output": [item],
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}}),
        ]

    return script


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _capture(self) -> Captured:
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else b""
        cap = Captured(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.lock:
            self.server.captured.append(cap)
        return cap

    def do_HEAD(self) -> None:
        self._capture()
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        cap = self._capture()
        self._send_json(cap, 200, {"object": "list", "data": []})

    def do_POST(self) -> None:
        cap = self._capture()
        wire = wire_format_for_path(self.path) or "chat"
        try:
            req = json.loads(cap.body)
        except ValueError:
            req = {}
        model = str(req.get("model", "")) if isinstance(req, dict) else ""
        delay = int(model[5:]) / 1000 if model.startswith("slow-") and model[5:].isdigit() else 0.0
        if model.startswith("error-") and model[6:].isdigit():
            self._send_json(cap, int(model[6:]), _error(wire, int(model[6:])))
        elif isinstance(req, dict) and req.get("stream") is True:
            scripted = self.server.script(self.server.next_post(), wire, req) if self.server.script else None
            self._send_stream(cap, scripted or _events(wire, model, fail=model == "stream-error"), delay)
        else:
            time.sleep(delay)
            self._send_json(cap, 200, _json_answer(wire, model))

    def _send_json(self, cap: Captured, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        cap.status, cap.response = status, data
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, cap: Captured, events: list[bytes], delay: float) -> None:
        cap.status = 200
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for ev in events:
            if delay:
                time.sleep(delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))   # one write per event (Nagle)
            self.wfile.flush()
            cap.response += ev
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], script: Script | None):
        super().__init__(addr, _Handler)
        self.lock = threading.Lock()
        self.captured: list[Captured] = []
        self.script = script
        self._posts = 0

    def next_post(self) -> int:
        with self.lock:
            self._posts += 1
            return self._posts - 1


class FakeUpstream:
    """``with FakeUpstream() as up: up.url`` -- a threaded loopback server."""

    def __init__(self, host: str = "127.0.0.1", *, script: Script | None = None):
        self._server = _Server((host, 0), script)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-upstream", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def captured(self) -> list[Captured]:
        with self._server.lock:
            return list(self._server.captured)

    def clear(self) -> None:
        with self._server.lock:
            self._server.captured.clear()

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
