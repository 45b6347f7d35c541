"""A small scripted model server for capturing real native harness output.

It speaks just enough of the Anthropic Messages streaming format
(``POST …/v1/messages``) and the OpenAI Responses streaming format
(``POST …/v1/responses``) for Claude Code and Codex to run a scripted
conversation. The harness output captured against it is real native CLI
output; only the model is scripted.

A script is a list of :class:`Reply` popped one per model request (per
route). Every request is logged (path, headers without auth, body) so tests
can see what the harness sent.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Reply:
    """One scripted model turn: text and/or tool calls, or an HTTP error, or a hang."""

    text: str | None = None
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (id, name, input)
    status: int = 200
    error_body: dict[str, Any] | None = None
    hang_s: float = 0.0
    #: Codex MCP tools arrive as a namespace; (call_id, namespace, short_name, input).
    namespaced_calls: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)


def text(t: str) -> Reply:
    return Reply(text=t)


def tool(call_id: str, name: str, args: dict[str, Any], say: str | None = None) -> Reply:
    return Reply(text=say, tool_calls=[(call_id, name, args)])


def error(status: int, message: str = "scripted upstream failure") -> Reply:
    return Reply(status=status, error_body={"type": "error", "error": {"type": "api_error", "message": message}})


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        import socket

        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.server.log_request_record(self, None)
        body = b'{"data": [], "models": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparseable": raw.decode("utf-8", "replace")}
        path = self.path.split("?")[0]
        self.server.log_request_record(self, body)
        if path.endswith("/v1/messages/count_tokens"):
            return self._json(200, {"input_tokens": 100})
        if path.endswith("/v1/messages"):
            kind = "anthropic"
        elif path.endswith("/responses"):
            kind = "responses"
        else:
            return self._json(404, {"error": f"no route {path}"})
        reply = self.server.next_reply(kind, body, self.headers.get("x-claude-code-agent-id"))
        if reply.hang_s:
            time.sleep(reply.hang_s)
        if reply.status != 200:
            return self._json(reply.status, reply.error_body or {"error": "scripted"})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        n = self.server.next_number()
        events = _anthropic_events(reply, body, n) if kind == "anthropic" else _responses_events(reply, body, n)
        for chunk in events:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def _json(self, status: int, data: dict[str, Any]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _anthropic_events(reply: Reply, body: dict[str, Any], n: int) -> list[bytes]:
    model = body.get("model", "scripted")
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_scripted_{n:04d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 120,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            },
        )
    ]
    index = 0
    if reply.text:
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": reply.text}},
            )
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, args in reply.tool_calls:
        out.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)},
                },
            )
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    stop = "tool_use" if reply.tool_calls else "end_turn"
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 25},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def _responses_events(reply: Reply, body: dict[str, Any], n: int) -> list[bytes]:
    rid = f"resp_scripted_{n:04d}"
    model = body.get("model", "scripted")
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_scripted_{n:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call_id, name, args in reply.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    for call_id, namespace, name, args in reply.namespaced_calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "namespace": namespace,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    base = {
        "id": rid,
        "object": "response",
        "created_at": 1700000000,
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    out = [_sse("response.created", {"type": "response.created", "sequence_number": 0, "response": base})]
    seqno = 1
    for i, item in enumerate(items):
        out.append(
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "sequence_number": seqno, "output_index": i, "item": item},
            )
        )
        seqno += 1
        if item["type"] == "message":
            out.append(
                _sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": seqno,
                        "item_id": item["id"],
                        "output_index": i,
                        "content_index": 0,
                        "delta": item["content"][0]["text"],
                    },
                )
            )
            seqno += 1
        out.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "sequence_number": seqno, "output_index": i, "item": item},
            )
        )
        seqno += 1
    done = dict(
        base,
        status="completed",
        output=items,
        usage={
            "input_tokens": 120,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 25,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 145,
        },
    )
    out.append(_sse("response.completed", {"type": "response.completed", "sequence_number": seqno, "response": done}))
    return out


class ScriptedServer(ThreadingHTTPServer):
    """``with ScriptedServer(script) as srv: srv.url`` — serves the script on loopback."""

    daemon_threads = True

    def __init__(self, script: list[Reply], *, child_script: list[Reply] | None = None, default: Reply | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)
        #: Replies for Claude Code sub-agent requests (header ``x-claude-code-agent-id``).
        self.child_script = list(child_script or [])
        self.default = default or text("(script exhausted)")
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._served = 0

    def next_number(self) -> int:
        """1-based number of the model response being served (message/response ids)."""
        with self._lock:
            self._served += 1
            return self._served

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def log_request_record(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        headers = {k.lower(): v for k, v in handler.headers.items() if k.lower() not in ("authorization", "x-api-key")}
        with self._lock:
            self.requests.append({"method": handler.command, "path": handler.path, "headers": headers, "body": body})

    def next_reply(self, kind: str, body: dict[str, Any], agent_id: str | None = None) -> Reply:
        with self._lock:
            queue = self.child_script if agent_id else self.script
            return queue.pop(0) if queue else self.default

    def model_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST" and not r["path"].endswith("count_tokens")]

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
