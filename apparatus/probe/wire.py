"""Render one probe answer in a wire format: SSE events (streaming) or one JSON body.

Every byte is a function of the :class:`Reply` and the ids passed in: no clock
values (``created``/``created_at`` are 0), so the same request gets the same
bytes. Each SSE event is one element of :attr:`Rendered.events`, which the
server writes with one socket write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CHUNK = 1024  # characters per text / argument delta, roughly like the real APIs


@dataclass(frozen=True)
class EmittedCall:
    """A tool call as it goes on the wire."""

    call_id: str
    name: str
    namespace: str | None = None
    arguments: Any = None


@dataclass(frozen=True)
class Reply:
    """What to answer: a final text or one tool call, with usage."""

    text: str | None = None
    call: EmittedCall | None = None
    input_tokens: int = 1
    output_tokens: int = 1


@dataclass
class Rendered:
    """An HTTP answer: ``events`` for SSE (one write each) or ``body`` for JSON."""

    status: int
    content_type: str
    body: bytes = b""
    events: list[bytes] = field(default_factory=list)

    @property
    def streaming(self) -> bool:
        return bool(self.events)

    def payload(self) -> bytes:
        return b"".join(self.events) if self.events else self.body


def _j(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _chunks(text: str) -> list[str]:
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def _args_json(call: EmittedCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else _j(call.arguments if call.arguments is not None else {})


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else _j(data)
    return f"{head}data: {body}\n\n".encode()


# --------------------------------------------------------------------------- Anthropic Messages


def _anthropic_usage(reply: Reply) -> dict[str, int]:
    return {"input_tokens": reply.input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "output_tokens": reply.output_tokens}


def _anthropic_block(reply: Reply) -> dict[str, Any]:
    if reply.call is not None:
        args = reply.call.arguments if reply.call.arguments is not None else {}
        return {"type": "tool_use", "id": reply.call.call_id, "name": reply.call.name, "input": args}
    return {"type": "text", "text": reply.text or ""}


def render_anthropic(reply: Reply, *, model: str, message_id: str, stream: bool) -> Rendered:
    stop = "tool_use" if reply.call is not None else "end_turn"
    if not stream:
        msg = {"id": message_id, "type": "message", "role": "assistant", "model": model,
               "content": [_anthropic_block(reply)], "stop_reason": stop, "stop_sequence": None,
               "usage": _anthropic_usage(reply)}
        return Rendered(200, "application/json", _j(msg).encode("utf-8"))
    start_usage = dict(_anthropic_usage(reply), output_tokens=1)
    ev = [
        _sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        _sse("ping", {"type": "ping"}),
    ]
    if reply.call is not None:
        ev.append(_sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": reply.call.call_id, "name": reply.call.name, "input": {}}}))
        for part in _chunks(_args_json(reply.call)):
            ev.append(_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "input_json_delta", "partial_json": part}}))
    else:
        ev.append(_sse("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}}))
        for part in _chunks(reply.text or ""):
            ev.append(_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": part}}))
    ev.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    ev.append(_sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": _anthropic_usage(reply)}))
    ev.append(_sse("message_stop", {"type": "message_stop"}))
    return Rendered(200, "text/event-stream", events=ev)


# --------------------------------------------------------------------------- OpenAI Responses


def _responses_usage(reply: Reply) -> dict[str, Any]:
    return {"input_tokens": reply.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens}


def _responses_item(reply: Reply, item_id: str, *, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    if reply.call is not None:
        item: dict[str, Any] = {"id": item_id, "type": "function_call", "status": status,
                                "call_id": reply.call.call_id, "name": reply.call.name,
                                "arguments": _args_json(reply.call) if done else ""}
        if reply.call.namespace:
            item["namespace"] = reply.call.namespace
        return item
    content = [{"type": "output_text", "text": reply.text or "", "annotations": []}] if done else []
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def _response_obj(response_id: str, model: str, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": 0, "status": status, "model": model,
            "output": output, "parallel_tool_calls": False, "error": None, "incomplete_details": None,
            "usage": usage}


def render_responses(reply: Reply, *, model: str, response_id: str, item_id: str, stream: bool) -> Rendered:
    done_item = _responses_item(reply, item_id, done=True)
    final = _response_obj(response_id, model, "completed", [done_item], _responses_usage(reply))
    if not stream:
        return Rendered(200, "application/json", _j(final).encode("utf-8"))
    seq = 0
    ev: list[bytes] = []

    def add(etype: str, payload: dict[str, Any]) -> None:
        nonlocal seq
        ev.append(_sse(etype, {"type": etype, "sequence_number": seq, **payload}))
        seq += 1

    add("response.created", {"response": _response_obj(response_id, model, "in_progress", [], None)})
    add("response.in_progress", {"response": _response_obj(response_id, model, "in_progress", [], None)})
    add("response.output_item.added", {"output_index": 0, "item": _responses_item(reply, item_id, done=False)})
    if reply.call is not None:
        args = _args_json(reply.call)
        for part in _chunks(args):
            add("response.function_call_arguments.delta", {"item_id": item_id, "output_index": 0, "delta": part})
        add("response.function_call_arguments.done", {"item_id": item_id, "output_index": 0, "arguments": args})
    else:
        text = reply.text or ""
        part0 = {"type": "output_text", "text": "", "annotations": []}
        add("response.content_part.added", {"item_id": item_id, "output_index": 0, "content_index": 0, "part": part0})
        for part in _chunks(text):
            add("response.output_text.delta", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                               "delta": part})
        add("response.output_text.done", {"item_id": item_id, "output_index": 0, "content_index": 0, "text": text})
        add("response.content_part.done", {"item_id": item_id, "output_index": 0, "content_index": 0,
                                           "part": {"type": "output_text", "text": text, "annotations": []}})
    add("response.output_item.done", {"output_index": 0, "item": done_item})
    add("response.completed", {"response": final})
    return Rendered(200, "text/event-stream", events=ev)


# --------------------------------------------------------------------------- Chat Completions


def _chat_usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens}


def render_chat(reply: Reply, *, model: str, completion_id: str, stream: bool, include_usage: bool) -> Rendered:
    finish = "tool_calls" if reply.call is not None else "stop"
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text if reply.call is None else None}
        if reply.call is not None:
            message["tool_calls"] = [{"id": reply.call.call_id, "type": "function",
                                      "function": {"name": reply.call.name, "arguments": _args_json(reply.call)}}]
        body = {"id": completion_id, "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _chat_usage(reply)}
        return Rendered(200, "application/json", _j(body).encode("utf-8"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        obj = {"id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}
        return _sse(None, obj)

    ev: list[bytes] = []
    if reply.call is not None:
        ev.append(chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": reply.call.call_id, "type": "function",
             "function": {"name": reply.call.name, "arguments": ""}}]}))
        for part in _chunks(_args_json(reply.call)):
            ev.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
    else:
        ev.append(chunk({"role": "assistant", "content": ""}))
        for part in _chunks(reply.text or ""):
            ev.append(chunk({"content": part}))
    # usage on the finishing chunk (DeepSeek style) and, when asked, the OpenAI usage-only chunk
    ev.append(chunk({}, finish, usage=_chat_usage(reply)))
    if include_usage:
        ev.append(_sse(None, {"id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                              "choices": [], "usage": _chat_usage(reply)}))
    ev.append(_sse(None, "[DONE]"))
    return Rendered(200, "text/event-stream", events=ev)


# --------------------------------------------------------------------------- errors

_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}
_OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error"}


def render_error(wire_format: str, status: int, message: str, error_type: str | None = None,
                 code: str | None = None) -> Rendered:
    """A JSON error body in the native shape of ``wire_format``."""
    if wire_format == "anthropic":
        etype = error_type or _ANTHROPIC_TYPES.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": etype, "message": message}}
    else:
        etype = error_type or _OPENAI_TYPES.get(status, "server_error")
        body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return Rendered(status, "application/json", _j(body).encode("utf-8"))
