"""Rebuild what the model was shown from one request body, for the three wire formats.

The result is a format-neutral :class:`Conversation`: the top-level system text,
the ordered items (user text, assistant text, tool call, tool result,
mid-conversation system text) and the declared tools. Texts are kept exactly as
sent; a list of text blocks is joined with ``"\\n"`` and the native object is
kept in ``raw``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from apparatus.probe.tools import ToolDecl, parse_tools
from tracetrial.harness import WireFormat
from tracetrial.harness_text import HARNESS_INJECTED
from tracetrial.policy import CallView, TurnView

ItemKind = Literal["user", "assistant", "system", "tool_call", "tool_result"]

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# Harness-generated user-role texts that are not a user's words (Claude Code background
# notifications, Codex/Claude environment context blocks, OpenClaw's internal-context block
# appended to a resumed session).
_NOT_USER = HARNESS_INJECTED
_DEFERRED = re.compile(r"following deferred tools[^\n]*:[ \t]*\n((?:[ \t]*(?:[-*][ \t]*)?[A-Za-z0-9_.\-]+[ \t]*(?:\n|$))+)",
                       re.IGNORECASE)
#: OpenClaw 2026.9.6's system prompt: "### Deferred Tool Schemas\nAvailable deferred-schema tools:\n- <name>
#: (<source>): <description>" per tool (reachable through tool_describe / tool_call).
_DEFERRED_LISTED = re.compile(r"Available deferred-schema tools:[ \t]*\n((?:[ \t]*[-*][ \t]*[A-Za-z0-9_.\-]+[^\n]*(?:\n|$))+)")
_LISTED_NAME = re.compile(r"[ \t]*[-*][ \t]*([A-Za-z0-9_.\-]+)")
_FUNCTION = re.compile(r"<function>(\{.*?\})</function>", re.DOTALL)
#: OpenClaw's sub-agent request: its first user message is the delegated task ("[Subagent Context]
#: You are running as a subagent … [Subagent Task] …") and its runtime line names the child's own
#: session, ``session=agent:<agent>:subagent:<uuid>`` (a parent's first message names its own,
#: ``agent:<agent>:explicit:<id>``; its later messages carry the children's completions, which
#: also start with "[Subagent Context]" but are never the first user message).
_OPENCLAW_CHILD_TASK = re.compile(r"\[Subagent (?:Context|Task)\]")
_OPENCLAW_CHILD_SESSION = re.compile(r"\bsession=(agent:[^\s|:]+:subagent:[^\s|]+)")
#: OpenClaw 2026.6.9 names the child's session only in its system prompt's runtime section
#: ("- Your session: agent:<agent>:subagent:<uuid>."), not in the first user message.
_OPENCLAW_CHILD_SESSION_SYSTEM = re.compile(r"Your session:[ \t]*(agent:[^\s|:]+:subagent:[0-9A-Za-z_-]+)")
_CWD = re.compile(r"(?:Primary working directory|Working directory|Current working directory):[ \t]*(/[^\n]*)|"
                  r"<cwd>([^<]+)</cwd>")


@dataclass(frozen=True)
class Item:
    """One visible conversation entry."""

    kind: ItemKind
    text: str = ""
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    is_error: bool | None = None
    raw: Any = None


@dataclass
class Conversation:
    """A rebuilt request: what the model was shown."""

    wire_format: WireFormat
    model: str
    stream: bool
    system_text: str
    items: list[Item]
    tools: list[ToolDecl]
    body: dict[str, Any] = field(repr=False, default_factory=dict)

    # ------------------------------------------------------------------ views
    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.display for t in self.tools)

    @property
    def tool_descriptions(self) -> tuple[tuple[str, str], ...]:
        return tuple((t.display, t.description) for t in self.tools)

    @property
    def tool_parameters(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        out = []
        for t in self.tools:
            props = t.schema.get("properties") if isinstance(t.schema, dict) else None
            params = tuple((str(name), str(spec.get("description") or "")) for name, spec in (props or {}).items()
                           if isinstance(spec, dict)) if isinstance(props, dict) else ()
            out.append((t.display, params))
        return tuple(out)

    def view(self) -> TurnView:
        """What the model was shown, as a policy reads it."""
        return TurnView(self.history_text(), self.system_text, self.tool_names, self.tool_descriptions,
                        self.tool_parameters, self.calls(), self.deferred_tool_names())

    def calls(self) -> tuple[CallView, ...]:
        """The model's own tool calls in the request, each with the result shown for it (by call id)."""
        results = {it.call_id: it.text for it in self.items if it.kind == "tool_result" and it.call_id}
        out = []
        for it in self.items:
            if it.kind != "tool_call":
                continue
            args = it.arguments if isinstance(it.arguments, str) else json.dumps(it.arguments, ensure_ascii=False,
                                                                                 sort_keys=True)
            out.append(CallView(it.name or "", args, results.get(it.call_id) if it.call_id else None))
        return tuple(out)

    def history_text(self) -> str:
        """What the conversation showed the model, in order: user texts, tool results and
        mid-conversation system entries. The model's own words (assistant texts, tool calls) are
        left out, so a policy cannot "find" a fact in a command it wrote itself."""
        return "\n".join(it.text for it in self.items if it.kind in ("user", "tool_result", "system") and it.text)

    def user_texts(self) -> list[str]:
        """User-role texts with ``<system-reminder>`` blocks stripped, empty ones dropped."""
        out = []
        for it in self.items:
            if it.kind == "user":
                t = strip_reminders(it.text)
                if t:
                    out.append(t)
        return out

    def latest_user_text(self) -> str:
        """The last genuine user text (reminders stripped), or ``""``."""
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def last_user_item_text(self) -> str:
        """Text of the final user-role item(s) after the last assistant/tool entry (for classification)."""
        tail: list[str] = []
        for it in reversed(self.items):
            if it.kind == "user":
                tail.append(it.text)
            elif it.kind in ("assistant", "tool_call", "tool_result"):
                break
        return "\n".join(reversed(tail))

    def cwd(self) -> str | None:
        """The agent's working directory as the harness announced it (Claude Code system prompt,
        Codex ``<environment_context>``), else ``None``."""
        m = _CWD.search(self.system_text)
        if m is None:
            m = _CWD.search("\n".join(it.text for it in self.items if it.kind in ("user", "system")))
        return (m.group(1) or m.group(2)).strip() if m else None

    def openclaw_subagent_key(self) -> str | None:
        """The session key of an OpenClaw sub-agent whose request this is (its first user message
        is the delegated task; the child's session is named there (2026.9.6) or in the system
        prompt (2026.6.9); ``unnamed:<digest of the task>`` when neither names it), else ``None``."""
        first = next((it.text for it in self.items if it.kind == "user"), "")
        if not _OPENCLAW_CHILD_TASK.search(first):
            return None
        m = _OPENCLAW_CHILD_SESSION.search(first)  # 2026.9.6 appends the runtime line after the task
        if m is None:
            m = _OPENCLAW_CHILD_SESSION_SYSTEM.search(self.system_text)  # 2026.6.9: the system prompt
        if m is None:
            # A child all the same (its first message is the delegated task): never the parent's
            # script. Keyed by its task, as Claude Code's unnamed children are.
            return "unnamed:" + hashlib.sha256(first.encode()).hexdigest()[:12]
        return m.group(1)

    def deferred_tool_names(self) -> tuple[str, ...]:
        """Tool names the request announces as deferred (named, not declared; loadable through the
        harness's search tool), in order: Claude Code 2.1.332 lists them one per line after "The
        following deferred tools are now available via ToolSearch. …:" in a system entry; OpenClaw
        2026.9.6 one per line, with its source and description, after "Available deferred-schema
        tools:" in its system prompt."""
        names: list[str] = []
        texts = [self.system_text] + [it.text for it in self.items if it.kind in ("user", "system")]
        for text in texts:
            for m in _DEFERRED.finditer(text):
                for line in m.group(1).splitlines():
                    name = line.strip().lstrip("-* ").strip()
                    if name and name not in names:
                        names.append(name)
            for m in _DEFERRED_LISTED.finditer(text):
                for line in m.group(1).splitlines():
                    got = _LISTED_NAME.match(line)
                    if got and got.group(1) not in names:
                        names.append(got.group(1))
        return tuple(names)

    def revealed_tools(self, search_tools: tuple[str, ...]) -> list[ToolDecl]:
        """Tools whose schema the result of a call to one of ``search_tools`` showed the model
        (Claude Code ``ToolSearch``: one ``<function>{"description", "name", "parameters"}</function>``
        line per tool; a ``tool_reference`` block names one without its schema)."""
        searches = {norm_id(it.call_id) for it in self.items
                    if it.kind == "tool_call" and it.call_id and it.name in search_tools}
        out: list[ToolDecl] = []
        for it in self.items:
            if it.kind != "tool_result" or norm_id(it.call_id) not in searches:
                continue
            for m in _FUNCTION.finditer(it.text):
                try:
                    spec = json.loads(m.group(1))
                except ValueError:
                    continue
                if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                    schema = spec.get("parameters")
                    out.append(ToolDecl(spec["name"], None, schema if isinstance(schema, dict) else {},
                                        str(spec.get("description") or "")))
            content = it.raw.get("content") if isinstance(it.raw, dict) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_reference" and block.get("tool_name"):
                    out.append(ToolDecl(str(block["tool_name"])))
        return out

    def results_by_id(self) -> dict[str, Item]:
        """Tool results keyed by normalized call id (last one wins)."""
        return {norm_id(it.call_id): it for it in self.items if it.kind == "tool_result" and it.call_id}

    def call_ids(self) -> set[str]:
        """Normalized ids of the assistant tool calls visible in the history."""
        return {norm_id(it.call_id) for it in self.items if it.kind == "tool_call" and it.call_id}

    def canonical(self) -> dict[str, Any]:
        """Canonical form hashed into the observation digest."""
        return {
            "system": self.system_text,
            "items": [
                {"kind": it.kind, "text": it.text, "call_id": it.call_id, "name": it.name,
                 "arguments": it.arguments, "is_error": it.is_error}
                for it in self.items
            ],
            "tools": list(self.tool_names),
        }

    def digest(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def strip_reminders(text: str) -> str:
    return _REMINDER.sub("", text).strip()


def notification_content(text: str) -> str:
    """``text`` without the harness's boilerplate reminders, but keeping a reminder that carries a
    background-task event: Claude Code 2.x wraps its ``<task-notification>`` (a background
    child's completion and result) in ``<system-reminder>``, and that event is exactly what an
    agent waiting for a child must read."""
    return _REMINDER.sub(lambda m: m.group(0) if "<task-notification>" in m.group(0) else "", text).strip()


def is_harness_user_text(text: str) -> bool:
    """Harness-generated user-role text (notifications, environment context), not a user turn."""
    return bool(_NOT_USER.match(text))


def norm_id(call_id: str | None) -> str:
    """Ids compared without punctuation: OpenClaw rewrites ``call_1`` to ``call1`` on the wire."""
    return re.sub(r"[^A-Za-z0-9]", "", call_id or "")


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _blocks_text(content: Any) -> str:
    """Text of a content value: a string, or the text blocks of a list joined with newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif block.get("type") in ("image", "input_image", "image_url"):
                    texts.append("[image]")
        return "\n".join(texts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return _compact(content)


def _parse_args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


# --------------------------------------------------------------------------- Anthropic


def parse_anthropic(body: dict[str, Any]) -> Conversation:
    system = body.get("system")
    system_text = _blocks_text(system)
    items: list[Item] = []
    for msg in body.get("messages") or []:
        role = msg.get("role")
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                kind: ItemKind = "user" if role == "user" else "assistant" if role == "assistant" else "system"
                items.append(Item(kind, block.get("text", ""), raw=block))
            elif btype == "tool_use" and role == "assistant":
                items.append(Item("tool_call", call_id=block.get("id"), name=block.get("name"),
                                  arguments=block.get("input"), raw=block))
            elif btype == "tool_result":
                is_error = block.get("is_error")
                items.append(Item("tool_result", _blocks_text(block.get("content")), call_id=block.get("tool_use_id"),
                                  is_error=is_error if isinstance(is_error, bool) else None, raw=block))
            elif btype in ("image", "document"):
                items.append(Item("user" if role == "user" else "assistant", f"[{btype}]", raw=block))
            # thinking / redacted_thinking blocks are the model's own, not shown facts
    return Conversation("anthropic", str(body.get("model", "")), bool(body.get("stream")), system_text, items,
                        parse_tools("anthropic", body.get("tools")), body)


# --------------------------------------------------------------------------- OpenAI Responses


def parse_responses(body: dict[str, Any]) -> Conversation:
    system_text = _blocks_text(body.get("instructions"))
    items: list[Item] = []
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        raw_input = [{"type": "message", "role": "user", "content": raw_input}]
    for it in raw_input or []:
        if not isinstance(it, dict):
            continue
        itype = it.get("type", "message")
        if itype == "message":
            role = it.get("role")
            text = _blocks_text(it.get("content"))
            kind: ItemKind = ("user" if role == "user" else "assistant" if role == "assistant" else "system")
            items.append(Item(kind, text, raw=it))
        elif itype in ("function_call", "custom_tool_call", "local_shell_call"):
            name = it.get("name")
            if it.get("namespace"):
                name = f"{it['namespace']}/{name}"
            args = _parse_args(it.get("arguments", it.get("input", it.get("action"))))
            items.append(Item("tool_call", call_id=it.get("call_id") or it.get("id"), name=name, arguments=args, raw=it))
        elif itype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            items.append(Item("tool_result", _blocks_text(it.get("output")), call_id=it.get("call_id"), raw=it))
        elif itype == "compaction":
            items.append(Item("system", "[compacted history]", raw=it))
        # reasoning items: the model's own, not shown facts
    return Conversation("responses", str(body.get("model", "")), bool(body.get("stream")), system_text, items,
                        parse_tools("responses", body.get("tools")), body)


# --------------------------------------------------------------------------- Chat Completions


def parse_chat(body: dict[str, Any]) -> Conversation:
    items: list[Item] = []
    system_parts: list[str] = []
    seen_non_system = False
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        text = _blocks_text(msg.get("content"))
        if role in ("system", "developer"):
            if not seen_non_system:
                system_parts.append(text)
            else:
                items.append(Item("system", text, raw=msg))
            continue
        seen_non_system = True
        if role == "user":
            items.append(Item("user", text, raw=msg))
        elif role == "assistant":
            if text:
                items.append(Item("assistant", text, raw=msg))
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                items.append(Item("tool_call", call_id=call.get("id"), name=fn.get("name"),
                                  arguments=_parse_args(fn.get("arguments")), raw=call))
        elif role in ("tool", "function"):
            items.append(Item("tool_result", text, call_id=msg.get("tool_call_id"), raw=msg))
    return Conversation("chat", str(body.get("model", "")), bool(body.get("stream")), "\n".join(system_parts), items,
                        parse_tools("chat", body.get("tools")), body)


PARSERS = {"anthropic": parse_anthropic, "responses": parse_responses, "chat": parse_chat}


def parse(wire_format: WireFormat, body: dict[str, Any]) -> Conversation:
    """Rebuild the conversation of one request body."""
    return PARSERS[wire_format](body)
