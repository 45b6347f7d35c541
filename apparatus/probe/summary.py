"""Declared handlers for requests the policy does not own: compaction summaries and titles."""

from __future__ import annotations

import json
import re

from apparatus.probe.classify import _COMPACTION
from apparatus.probe.conversation import Conversation, strip_reminders

CLIP = 4000  # characters of one tool result kept verbatim in the default summary


def _clip(text: str) -> str:
    if len(text) <= CLIP:
        return text
    half = CLIP // 2
    return f"{text[:half]}\n[... {len(text) - CLIP} characters omitted by the summary ...]\n{text[-half:]}"


def default_summary(conv: Conversation) -> str:
    """Restate every visible fact: user texts and assistant texts in full, tool calls, and tool
    results (each clipped to its first and last 2,000 characters), in order. The compaction
    instruction itself is left out."""
    items = list(conv.items)
    # drop the trailing instruction (keep other text sent with it, e.g. a notification)
    tail_start = len(items)
    while tail_start > 0 and items[tail_start - 1].kind == "user":
        tail_start -= 1
    lines = ["Summary of the conversation so far (every fact the agent was shown):"]
    for n, it in enumerate(items):
        if n >= tail_start and _COMPACTION.search(it.text):
            continue
        if it.kind == "user":
            text = strip_reminders(it.text)
            if text:
                lines.append(f"User: {text}")
        elif it.kind == "assistant" and it.text:
            lines.append(f"Assistant: {it.text}")
        elif it.kind == "tool_call":
            args = it.arguments if isinstance(it.arguments, str) else json.dumps(it.arguments, ensure_ascii=False)
            lines.append(f"Tool call {it.name} [{it.call_id}]: {args}")
        elif it.kind == "tool_result":
            flag = ", is_error" if it.is_error else ""
            lines.append(f"Tool result [{it.call_id}{flag}]: {_clip(it.text)}")
    return "\n".join(lines)


def compaction_text(conv: Conversation, summary: str | None) -> str:
    """The answer to a compaction request; Claude Code's prompt asks for analysis + summary tags."""
    text = summary if summary is not None else default_summary(conv)
    if "<summary>" in conv.last_user_item_text():
        return f"<analysis>\nRestating the visible conversation.\n</analysis>\n\n<summary>\n{text}\n</summary>"
    return text


def title_text(conv: Conversation) -> str:
    """A short title from the session text; JSON when the request asks for a JSON schema."""
    source = conv.last_user_item_text()
    m = re.search(r"<session>\s*(.*?)\s*</session>", source, re.DOTALL)
    words = (m.group(1) if m else strip_reminders(source)).split()[:6]
    title = " ".join(words).strip(" .") or "Probe session"
    title = title[:1].upper() + title[1:]
    fmt = conv.body.get("output_config", {}).get("format") if isinstance(conv.body.get("output_config"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return json.dumps({"title": title}, ensure_ascii=False)
    return title
