"""Recognising text a harness injects as a *user* message (environment context, internal
context blocks, continuation preambles) so that "the user's last message" means what the
user wrote. Shared by the probe model and the gateway's recorder. Also reading one such text:
a background-task event (:func:`task_notifications`), for the policy and verifier APIs alike.
"""

from __future__ import annotations

import re

__all__ = ["HARNESS_INJECTED", "is_harness_injected", "task_notifications"]

HARNESS_INJECTED = re.compile(
    r"^\s*(\[SYSTEM NOTIFICATION|<task-notification>|<environment_context>|<user_instructions>|"
    r"# AGENTS\.md instructions|This session is being continued from a previous conversation|"
    r"Another language model started to solve this problem|<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>|"
    # DeepSeek Harness 0.2.x: a block after the prompt of a new session's first message
    r"Current runtime context\.)"
)


def is_harness_injected(text: str) -> bool:
    """True when a user-role text was written by the harness, not the user."""
    return bool(HARNESS_INJECTED.match(text))


_NOTIFICATION_RE = re.compile(r"<task-notification>(.*?)</task-notification>", re.DOTALL)
_FIELD_RE = re.compile(r"<([a-z][\w-]*)>(.*?)</\1>", re.DOTALL)


def task_notifications(text: str | None) -> list[dict[str, str]]:
    """Each ``<task-notification>`` block in ``text``, in order, as its fields (tag -> stripped
    text: Claude Code's ``task-id``, ``tool-use-id``, ``output-file``, ``status``, ``summary`` …)
    plus ``"text"``, the whole block as shown. Claude Code pushes one to the model when a
    background job or child ends (2.1.332: ``<summary>Background command "…" failed with exit
    code 4</summary>``)."""
    out = []
    for m in _NOTIFICATION_RE.finditer(text or ""):
        fields = {tag: value.strip() for tag, value in _FIELD_RE.findall(m.group(1))}
        fields["text"] = m.group(0)
        out.append(fields)
    return out
