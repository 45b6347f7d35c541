"""Tell requests the policy owns from requests the harness makes for itself.

Signatures observed on the real CLIs (see ``shared/HARNESSES.md``):

* **title** (Claude Code without ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``):
  no tools, system text "Generate a concise, sentence-case title", and
  ``output_config.format`` a JSON schema with a ``title`` property.
* **compaction**: Claude Code's last user text asks to "create a detailed
  summary of the conversation so far" (tools may still be declared); Codex sends
  ``tools: []``, ``request_kind: "compaction"`` in ``x-codex-turn-metadata`` and
  "CONTEXT CHECKPOINT COMPACTION"; OpenClaw 2026.6.9 (its compaction safeguard) sends no tools and a
  user text asking to "Create a structured context checkpoint summary that another LLM will use".
* **heartbeat** (OpenClaw Gateway): a periodic run in the agent's main session whose user text
  is "Follow the heartbeat monitor scratch context when provided. … If nothing needs attention,
  reply NO_REPLY." — harness housekeeping, not the task; answered ``NO_REPLY`` as it asks.
* **sub-agent**: Claude Code sends header ``x-claude-code-agent-id`` and
  ``cc_is_subagent=true`` in its first system block; Codex children send
  ``x-openai-subagent`` (from the binary's strings, not yet observed on the wire); OpenClaw
  children start with "[Subagent Context] … [Subagent Task]" and a runtime line naming their
  own session ``agent:<agent>:subagent:<uuid>``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Literal

from apparatus.probe.conversation import Conversation

Kind = Literal["policy", "title", "compaction", "heartbeat", "unscripted"]

_COMPACTION = re.compile(
    r"detailed summary of the conversation|context checkpoint (compaction|summary)|"
    r"summari[sz]e (the|this) conversation (so far|above)|create a (handoff )?summary for another (llm|model)",
    re.IGNORECASE,
)
_TITLE = re.compile(r"\btitle\b", re.IGNORECASE)
_HEARTBEAT = re.compile(r"^\s*Follow the heartbeat monitor scratch context\b[\s\S]*\breply NO_REPLY\b")
#: What a heartbeat run asks for when nothing needs attention (the probe has nothing to report).
HEARTBEAT_REPLY = "NO_REPLY"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for k, v in headers.items():
        if k.lower() == name:
            return v
    return None


def _codex_metadata(headers: Mapping[str, str]) -> dict[str, object]:
    raw = _header(headers, "x-codex-turn-metadata")
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def is_compaction(conv: Conversation, headers: Mapping[str, str]) -> bool:
    if _codex_metadata(headers).get("request_kind") == "compaction":
        return True
    return bool(_COMPACTION.search(conv.last_user_item_text()))


def is_title(conv: Conversation) -> bool:
    if conv.tools:
        return False
    fmt = (conv.body.get("output_config") or {}).get("format") if isinstance(conv.body.get("output_config"), dict) else None
    props = ((fmt or {}).get("schema") or {}).get("properties") if isinstance(fmt, dict) else None
    if isinstance(props, dict) and "title" in props:
        return True
    return bool(re.search(r"generate a (concise|short)[^.\n]{0,40}\btitle\b", conv.system_text, re.IGNORECASE))


def is_heartbeat(conv: Conversation) -> bool:
    """OpenClaw's heartbeat run: its user text is the heartbeat prompt (never a task's words)."""
    return bool(_HEARTBEAT.search(conv.last_user_item_text()))


def classify(conv: Conversation, headers: Mapping[str, str]) -> Kind:
    """What kind of request this is; ``policy`` covers main and sub-agent turns."""
    if is_title(conv):
        return "title"
    if is_heartbeat(conv):
        return "heartbeat"
    if is_compaction(conv, headers):
        return "compaction"
    if not conv.tools:
        return "unscripted"
    return "policy"


def principal_of(conv: Conversation, headers: Mapping[str, str]) -> str:
    """``main`` or ``subagent:<id>``: whose script a request advances."""
    agent = _header(headers, "x-claude-code-agent-id")
    if agent:
        return f"subagent:{agent}"
    # The reference harness names the principal of every request it sends.
    ref = _header(headers, "x-tt-principal-id")
    if ref and ref != "main":
        return f"subagent:{ref}"
    codex_sub = _header(headers, "x-openai-subagent")
    if codex_sub:
        thread = _header(headers, "thread-id") or _header(headers, "session-id") or ""
        return f"subagent:{codex_sub}:{thread}"
    if _codex_metadata(headers).get("thread_source") in ("subagent", "sub_agent", "thread_spawn"):
        return f"subagent:{_header(headers, 'thread-id') or 'codex'}"
    openclaw_child = conv.openclaw_subagent_key()
    if openclaw_child:  # OpenClaw: the child's first user message names its own session
        return f"subagent:{openclaw_child}"
    first_system = conv.system_text.split("\n", 1)[0]
    if "cc_is_subagent=true" in first_system:
        first_user = conv.user_texts()[:1]
        tag = hashlib.sha256((first_user[0] if first_user else "").encode()).hexdigest()[:12]
        return f"subagent:{tag}"
    return "main"
