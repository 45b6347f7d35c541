"""Pure readers of the three wire formats (no I/O): what the recorder extracts from a
request body and a response.

- :func:`wire_format_for_path` — the API a request path addresses;
- :func:`extract_tools` — tool declarations normalized across formats (Anthropic
  ``tools``; Responses ``function``/``custom``/built-in tools and Codex ``namespace``
  groups; Chat ``function`` wrappers and legacy ``functions``);
- :func:`extract_tool_results` — the tool results a request delivers;
- :func:`last_user_text` — text of the last *user* message (not ``messages[-1]``: Claude
  Code may append a ``role: system`` entry after it);
- :class:`ResponseReader` — incremental SSE / JSON response reader giving usage and any
  error, parsed by us for every format.

Usage convention (OTel GenAI): ``input_tokens`` counts *all* input tokens, including
cache reads and cache writes; ``cache_read_tokens`` / ``cache_write_tokens`` are subsets.
Anthropic reports uncached input separately, so its three counters are summed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from tracetrial.harness import WireFormat
from tracetrial.harness_text import is_harness_injected

#: Tool-result and user-text contents keep this many bytes of head and of tail.
CONTENT_EDGE_BYTES = 32 * 1024

#: Responses input items produced by the model (tool results after the last one are new).
_RESPONSES_MODEL_ITEMS = frozenset({
    "function_call", "custom_tool_call", "reasoning", "local_shell_call", "web_search_call",
    "file_search_call", "computer_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "tool_search_call", "compaction",
})
_RESPONSES_RESULT_ITEMS = frozenset({
    "function_call_output", "custom_tool_call_output", "local_shell_call_output",
    "computer_call_output", "mcp_call_output", "tool_search_output",
})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wire_format_for_path(path: str) -> WireFormat | None:
    """``/v1/messages`` (and ``/messages/count_tokens``) -> anthropic, ``/responses``
    (and ``/responses/compact``) -> responses, ``/chat/completions`` -> chat."""
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith(("/messages", "/messages/count_tokens")):
        return "anthropic"
    if p.endswith(("/responses", "/responses/compact")):
        return "responses"
    if p.endswith("/chat/completions"):
        return "chat"
    return None


def guess_wire_format(body: Any) -> WireFormat:
    """Fallback for a path that names no known API: judge by the body's shape."""
    if isinstance(body, dict):
        if "input" in body and "messages" not in body:
            return "responses"
        msgs = body.get("messages")
        if "system" in body or (isinstance(msgs, list) and any(
                isinstance(m, dict) and isinstance(m.get("content"), list)
                and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
                        for b in m["content"]) for m in msgs)):
            return "anthropic"
    return "chat"


# ---------------------------------------------------------------- tool declarations

def _decl(name: Any, type_: str, description: Any, schema: Any, namespace: str | None) -> dict[str, Any]:
    return {"name": name, "type": type_,
            "description": description if isinstance(description, str) else None,
            "input_schema": schema, "namespace": namespace}


def _responses_tool(t: Any, namespace: str | None, out: list[dict[str, Any]]) -> bool:
    """Append one Responses tool (recursing into namespaces); False if malformed."""
    if not isinstance(t, dict) or not isinstance(t.get("type"), str):
        return False
    kind = t["type"]
    if kind == "namespace":
        inner = t.get("tools")
        if not isinstance(t.get("name"), str) or not isinstance(inner, list):
            return False
        ok = True
        for sub in inner:
            ok = _responses_tool(sub, t["name"], out) and ok
        return ok
    if kind == "function":
        if not isinstance(t.get("name"), str) or not t["name"]:
            return False
        out.append(_decl(t["name"], "function", t.get("description"), t.get("parameters"), namespace))
        return t.get("parameters") is None or isinstance(t.get("parameters"), dict)
    if kind == "custom":
        if not isinstance(t.get("name"), str) or not t["name"]:
            return False
        out.append(_decl(t["name"], "custom", t.get("description"), t.get("format"), namespace))
        return True
    # Built-in tools (web_search, local_shell, image_generation, mcp, ...): named by type.
    name = t.get("name") if isinstance(t.get("name"), str) else (t.get("server_label") or kind)
    out.append(_decl(name, kind, t.get("description"), t.get("parameters"), namespace))
    return True


def _chat_tool(t: Any, out: list[dict[str, Any]]) -> bool:
    if not isinstance(t, dict):
        return False
    kind = t.get("type", "function")
    inner = t.get(kind) if isinstance(t.get(kind), dict) else None
    if kind == "function":
        if inner is None or not isinstance(inner.get("name"), str) or not inner["name"]:
            return False
        out.append(_decl(inner["name"], "function", inner.get("description"), inner.get("parameters"), None))
        return inner.get("parameters") is None or isinstance(inner.get("parameters"), dict)
    if kind == "custom" and inner is not None and isinstance(inner.get("name"), str):
        out.append(_decl(inner["name"], "custom", inner.get("description"), inner.get("format"), None))
        return True
    if not isinstance(kind, str):
        return False
    out.append(_decl(t.get("name") or kind, kind, t.get("description"), None, None))
    return True


def _anthropic_tool(t: Any, out: list[dict[str, Any]]) -> bool:
    if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
        return False
    kind = t.get("type")
    if kind in (None, "custom"):
        out.append(_decl(t["name"], "function", t.get("description"), t.get("input_schema"), None))
        return isinstance(t.get("input_schema"), dict)
    if not isinstance(kind, str):
        return False
    # Server / versioned tools (web_search_20250305, bash_20250124, ...) keep their type.
    out.append(_decl(t["name"], kind, t.get("description"), t.get("input_schema"), None))
    return True


def extract_tools(body: Any, wire: WireFormat) -> tuple[list[dict[str, Any]], bool, bool]:
    """``(tools, present, complete)``: normalized declarations in request order; whether the
    declaration channel (``tools``, or Chat's legacy ``functions``) is present as a list; and
    whether every entry was structurally valid (malformed entries are left out)."""
    if not isinstance(body, dict):
        return [], False, False
    raw = body.get("tools")
    legacy = wire == "chat" and raw is None and "functions" in body
    if legacy:
        raw = body.get("functions")
    if raw is None:
        return [], False, False
    if not isinstance(raw, list):
        return [], True, False
    out: list[dict[str, Any]] = []
    ok = True
    for t in raw:
        if legacy:
            good = isinstance(t, dict) and isinstance(t.get("name"), str)
            if good:
                out.append(_decl(t["name"], "function", t.get("description"), t.get("parameters"), None))
        elif wire == "anthropic":
            good = _anthropic_tool(t, out)
        elif wire == "responses":
            good = _responses_tool(t, None, out)
        else:
            good = _chat_tool(t, out)
        ok = ok and good
    return out, True, ok


def inventory_fingerprint(tools: list[dict[str, Any]]) -> str:
    """SHA-256 of the normalized declarations (order-sensitive, canonical JSON)."""
    canon = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256_hex(canon.encode("utf-8"))


# ---------------------------------------------------------------- content helpers

def content_text(content: Any) -> str:
    """A message / tool-result content as text: strings as-is; lists of parts joined with
    newlines (text parts by their text, a ``tool_reference`` as ``[tool_reference <tool name>]``,
    other parts as ``[<type>]``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                text = p.get("text")
                if isinstance(text, str) and p.get("type", "text") in (
                        "text", "input_text", "output_text"):
                    parts.append(text)
                elif p.get("type") == "tool_reference" and isinstance(p.get("tool_name"), str):
                    # Claude Code's deferred-tool search result: which tool it loads is the content
                    parts.append(f"[tool_reference {p['tool_name']}]")
                else:
                    parts.append(f"[{p.get('type', 'part')}]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def cap_text(text: str, edge: int = CONTENT_EDGE_BYTES) -> tuple[str, bool]:
    """Keep the first and last ``edge`` bytes of ``text`` (UTF-8), concatenated without a
    marker; ``(text, truncated)``."""
    data = text.encode("utf-8")
    if len(data) <= 2 * edge:
        return text, False
    head = data[:edge].decode("utf-8", errors="ignore")
    tail = data[-edge:].decode("utf-8", errors="ignore")
    return head + tail, True


def tool_result_entry(id_: Any, is_error: bool | None, content: Any) -> dict[str, Any]:
    text = content_text(content)
    data = text.encode("utf-8")
    capped, truncated = cap_text(text)
    return {"id": id_ if isinstance(id_, str) else None, "is_error": is_error, "size": len(data),
            "sha256": sha256_hex(data), "content": capped, "content_truncated": truncated}


def _after_last(items: list[Any], is_model: Any) -> list[Any]:
    last = -1
    for i, item in enumerate(items):
        if is_model(item):
            last = i
    return items[last + 1:]


def extract_tool_results(body: Any, wire: WireFormat) -> list[dict[str, Any]]:
    """Tool results this request delivers: those after the last model-produced item of
    the history (earlier results were delivered by earlier requests)."""
    if not isinstance(body, dict):
        return []
    out: list[dict[str, Any]] = []
    if wire == "responses":
        items = body.get("input")
        if not isinstance(items, list):
            return []
        def model_item(it: Any) -> bool:
            return isinstance(it, dict) and (it.get("type") in _RESPONSES_MODEL_ITEMS or (
                it.get("role") == "assistant"))
        for it in _after_last(items, model_item):
            if isinstance(it, dict) and it.get("type") in _RESPONSES_RESULT_ITEMS:
                out.append(tool_result_entry(it.get("call_id") or it.get("id"), None, it.get("output")))
        return out
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return []
    trailing = _after_last(msgs, lambda m: isinstance(m, dict) and m.get("role") == "assistant")
    for m in trailing:
        if not isinstance(m, dict):
            continue
        if wire == "anthropic":
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        out.append(tool_result_entry(b.get("tool_use_id"),
                                                     bool(b.get("is_error", False)), b.get("content")))
        elif m.get("role") == "tool":
            out.append(tool_result_entry(m.get("tool_call_id"), None, m.get("content")))
        elif m.get("role") == "function":
            out.append(tool_result_entry(m.get("name"), None, m.get("content")))
    return out


def last_user_text(body: Any, wire: WireFormat) -> str | None:
    """Text of the last message the *user* wrote (tool results and harness-injected context
    such as Codex's ``<environment_context>`` excluded), capped like tool-result content;
    ``None`` when there is none."""
    if not isinstance(body, dict):
        return None
    if wire == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return cap_text(items)[0]
        seq: Iterable[Any] = reversed(items) if isinstance(items, list) else ()
        for it in seq:
            if isinstance(it, dict) and it.get("role") == "user" and it.get("type", "message") == "message":
                text = _text_only(it.get("content"))
                if text and not is_harness_injected(text):
                    return cap_text(text)[0]
        return None
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return None
    for m in reversed(msgs):
        if isinstance(m, dict) and m.get("role") == "user":
            text = _text_only(m.get("content"))
            if text and not is_harness_injected(text):
                return cap_text(text)[0]
    return None


def _text_only(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict)
                         and p.get("type", "text") in ("text", "input_text")
                         and isinstance(p.get("text"), str))
    return ""


# ---------------------------------------------------------------- usage and errors

def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def normalize_usage(raw: Any, wire: WireFormat) -> dict[str, int | None] | None:
    """Provider usage object -> ``{input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, reasoning_tokens}`` (see the module docstring for the convention)."""
    if not isinstance(raw, dict):
        return None
    if "prompt_tokens" in raw or "completion_tokens" in raw:   # chat shape
        pd = raw.get("prompt_tokens_details") or {}
        cd = raw.get("completion_tokens_details") or {}
        cached = _int(pd.get("cached_tokens")) if isinstance(pd, dict) else None
        if cached is None:
            cached = _int(raw.get("prompt_cache_hit_tokens"))      # DeepSeek
        return {"input_tokens": _int(raw.get("prompt_tokens")),
                "output_tokens": _int(raw.get("completion_tokens")),
                "cache_read_tokens": cached,
                "cache_write_tokens": _int(pd.get("cache_write_tokens")) if isinstance(pd, dict) else None,
                "reasoning_tokens": _int(cd.get("reasoning_tokens")) if isinstance(cd, dict) else None}
    if wire == "anthropic" or "cache_creation_input_tokens" in raw or "cache_read_input_tokens" in raw:
        fresh = _int(raw.get("input_tokens"))
        read = _int(raw.get("cache_read_input_tokens"))
        write = _int(raw.get("cache_creation_input_tokens"))
        total = None if fresh is None else fresh + (read or 0) + (write or 0)
        return {"input_tokens": total, "output_tokens": _int(raw.get("output_tokens")),
                "cache_read_tokens": read, "cache_write_tokens": write, "reasoning_tokens": None}
    idet = raw.get("input_tokens_details") or {}
    odet = raw.get("output_tokens_details") or {}
    return {"input_tokens": _int(raw.get("input_tokens")), "output_tokens": _int(raw.get("output_tokens")),
            "cache_read_tokens": _int(idet.get("cached_tokens")) if isinstance(idet, dict) else None,
            "cache_write_tokens": _int(idet.get("cache_write_tokens")) if isinstance(idet, dict) else None,
            "reasoning_tokens": _int(odet.get("reasoning_tokens")) if isinstance(odet, dict) else None}


def error_message(payload: Any) -> str | None:
    """The human message of a provider error object (Anthropic, OpenAI, LiteLLM shapes)."""
    if not isinstance(payload, dict):
        return None
    err = payload.get("error")
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail")
        kind = err.get("type") or err.get("code")
        if isinstance(msg, str):
            return f"{kind}: {msg}" if isinstance(kind, str) and kind not in msg else msg
        return json.dumps(err, ensure_ascii=False)[:2000]
    if isinstance(err, str):
        return err
    detail = payload.get("detail")
    return detail if isinstance(detail, str) else None


def error_from_body(body: bytes) -> str:
    """Error text of a non-2xx response body (JSON message when there is one)."""
    try:
        msg = error_message(json.loads(body))
    except ValueError:
        msg = None
    if msg:
        return msg[:2000]
    text = " ".join(body.decode("utf-8", errors="replace").split())
    return text[:2000] or "(empty error body)"


_TERMINAL_MARKERS = (b'"message_stop"', b'"response.completed"', b'"response.incomplete"', b'"response.failed"',
                     b'"response.done"', b"[DONE]")


class ResponseReader:
    """Feed a response's bytes as they stream; read usage and any in-band error at the end.

    Server-sent events are parsed incrementally (only events that can carry usage or an
    error are decoded as JSON); a non-SSE body is parsed once when finished.
    """

    _KEYS = (b"usage", b"error", b"failed")

    def __init__(self, wire: WireFormat, *, sse: bool | None = None):
        self.wire = wire
        self.sse = sse
        self._buf = b""
        self._body: list[bytes] = []
        self._size = 0
        self._usage: dict[str, Any] = {}
        self._raw_usage_seen = False
        self.error: str | None = None
        #: The stream's own terminal event arrived (``message_stop``, ``response.completed``
        #: …, ``[DONE]``): the client had the whole response, so closing the connection
        #: afterwards is not a truncated response.
        self.terminal_seen = False

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self.sse is None:
            self.sse = chunk.lstrip().startswith((b"event:", b"data:", b":"))
        if not self.sse:
            if self._size < 8 * 1024 * 1024:
                self._body.append(chunk)
                self._size += len(chunk)
            return
        self._buf += chunk
        while True:
            cut, sep = _event_end(self._buf)
            if cut < 0:
                break
            event, self._buf = self._buf[:cut], self._buf[cut + sep:]
            self._event(event)

    def finish(self) -> tuple[dict[str, int | None] | None, str | None]:
        """``(usage, error)``."""
        if self.sse:
            if self._buf.strip():
                self._event(self._buf)
                self._buf = b""
        elif self._body:
            try:
                payload = json.loads(b"".join(self._body))
            except ValueError:
                payload = None
            if isinstance(payload, dict):
                self._take_usage(payload.get("usage"))
                if self.error is None:
                    self.error = error_message(payload) if "error" in payload else None
        if not self._raw_usage_seen:
            return None, self.error
        return normalize_usage(self._usage, self.wire), self.error

    def _take_usage(self, raw: Any) -> None:
        if isinstance(raw, dict):
            self._raw_usage_seen = True
            # Later events (message_delta, the final chat chunk) update earlier counters.
            self._usage.update({k: v for k, v in raw.items() if v is not None})

    def _event(self, event: bytes) -> None:
        data_lines = [ln[5:].lstrip() for ln in event.splitlines() if ln.startswith(b"data:")]
        if not data_lines:
            return
        data = b"\n".join(data_lines)
        if any(marker in data for marker in _TERMINAL_MARKERS):
            self.terminal_seen = True
        if not any(k in data for k in self._KEYS) or data.strip() == b"[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if self.wire == "anthropic":
            if kind == "message_start" and isinstance(obj.get("message"), dict):
                self._take_usage(obj["message"].get("usage"))
            elif kind == "message_delta":
                self._take_usage(obj.get("usage"))
            elif kind == "error":
                self.error = error_message(obj) or "stream error"
        elif self.wire == "responses":
            resp = obj.get("response")
            if isinstance(resp, dict) and kind in ("response.completed", "response.incomplete",
                                                   "response.failed", "response.done"):
                self._take_usage(resp.get("usage"))
                if kind == "response.failed":
                    self.error = error_message(resp) or "response.failed"
            elif kind == "error":
                self.error = obj.get("message") if isinstance(obj.get("message"), str) else (
                    error_message(obj) or "stream error")
        else:
            if "usage" in obj:
                self._take_usage(obj.get("usage"))
            if "error" in obj:
                self.error = error_message(obj) or "stream error"


def _event_end(buf: bytes) -> tuple[int, int]:
    """Offset and length of the first SSE event separator in ``buf`` (-1 if none)."""
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        i = buf.find(sep)
        if i >= 0 and (best < 0 or i < best):
            best, size = i, len(sep)
    return best, size
