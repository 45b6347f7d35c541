"""The reference harness's own on-disk records: the native event log and session files.

**Native event log** (``--log``, one JSON object per line, appended across turns)::

    {"v": 1, "seq": 7, "ts": "2026-11-30T09:00:01.123456Z", "type": "tool_result",
     "session_id": "s-…", "turn": 1, "principal_id": "main", "parent_principal_id": null,
     "principal_role": "main", "data": {...}}

``seq`` is the log's own order (strictly increasing over the whole file, across
turns and principals); it is the strongest native order. ``type`` is one of
:data:`RECORD_TYPES`; each type's ``data`` fields are documented there.

**Session file** (``<session-dir>/<session_id>.json``): the conversation
history as sent to the model, rewritten atomically after every step so a
killed harness can be resumed from its own records.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor

LOG_VERSION: Literal[1] = 1

#: Record types and their ``data`` fields.
RECORD_TYPES: dict[str, str] = {
    "session": "action (new|resume), session_id, history_replayed, messages_restored, mutant, harness_version",
    "request": "request_id, model, url, messages, tools, params",
    "response": "request_id, response_id, http_status, content, reasoning, tool_calls[{id,name,arguments}], "
                "finish_reason, usage, duration_s",
    "error": "kind (provider_error|transport_error|stream_error|budget|deadline|harness_error), message, "
             "request_id?, http_status?",
    "tool_call": "call_id, name, arguments (parsed, or the raw text when not JSON), id_generated",
    "tool_result": "call_id, name, content (model-facing text), is_error, status, exit_code, duration_s, "
                   "truncated, omitted_bytes, saved_paths, structured_content",
    "policy": "call_id, tool_name, policy_kind, decision, rule, reason, reason_visible_to_model, "
              "execution_started",
    "ask_user": "call_id, question, answer, source",
    "subagent": "action (spawn|finish|deliver|abandon), child_principal_id, background, status, prompt?, "
                "final_text?, model_visible_content?, parent_reactivated?, pending_child_ids",
    "completion": "status (completed|incomplete|budget_exhausted|deadline|error), final_text, model_calls, "
                  "tool_calls, usage (null when no response reported usage, else {prompt_tokens, "
                  "completion_tokens, total_tokens, cached_tokens, reasoning_tokens, responses_with_usage, "
                  "responses_without_usage}: summed over every answered request of the turn, every principal), "
                  "failed_tool_call_ids, evidence_call_ids, receipts[{call_id,tool,key,value}], pending_child_ids",
    "memory": "path (AGENTS.md), bytes, sha256, source (file|cache), truncated: the project memory a new "
              "session's system prompt was given",
    "job": "action (start|exit|killed), job_id, call_id, command?, pid?, exit_code?, duration_s?: a background "
           "job of the shell tool",
    "compaction": "trigger (auto), prompt_tokens, context_window, messages_before, messages_after, "
                  "user_messages_kept, request_id, summary: the history was replaced by a summary",
}

RecordType = Literal["session", "request", "response", "error", "tool_call", "tool_result", "policy",
                     "ask_user", "subagent", "completion", "memory", "job", "compaction"]


def utc_stamp(when: datetime | None = None) -> str:
    """``2026-11-30T09:00:01.123456Z``."""
    when = when or datetime.now(UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NativeRecord(BaseModel):
    """One line of the native event log."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = LOG_VERSION
    seq: int = Field(ge=1, description="Strictly increasing over the whole log file.")
    ts: str = Field(description="UTC time the harness wrote the record.")
    type: RecordType
    session_id: str
    turn: int = Field(ge=1, description="The user turn (the --turn the CLI was started with).")
    principal_id: str
    parent_principal_id: str | None = None
    principal_role: Literal["main", "child"]
    data: dict[str, Any]


def _last_seq(path: Path) -> int:
    """Highest ``seq`` already in the log (malformed lines are skipped, never rewritten)."""
    if not path.is_file():
        return 0
    best = 0
    with path.open("rb") as fh:
        for raw in fh:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("seq"), int):
                best = max(best, obj["seq"])
    return best


class NativeLog:
    """Appends native records, one fsync-free line each, masking with ``redactor`` when given.

    Thread-safe: sub-agents and shell threads write through the same instance.
    """

    def __init__(self, path: Path, *, session_id: str, turn: int, redactor: Redactor | None):
        self.path = path
        self.session_id = session_id
        self.turn = turn
        self.redactor = redactor
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = _last_seq(path)

    def write(self, type_: RecordType, data: dict[str, Any], *, principal_id: str = "main",
              parent_principal_id: str | None = None) -> NativeRecord:
        if self.redactor is not None:
            data = self.redactor.value(data)
        with self._lock:
            self._seq += 1
            rec = NativeRecord(
                seq=self._seq, ts=utc_stamp(), type=type_, session_id=self.session_id, turn=self.turn,
                principal_id=principal_id, parent_principal_id=parent_principal_id,
                principal_role="main" if parent_principal_id is None else "child", data=data,
            )
            line = rec.model_dump_json() + "\n"
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
        return rec


class SessionRecord(BaseModel):
    """``<session-dir>/<session_id>.json``: what a resume restores."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["tt-reference-session/1"] = "tt-reference-session/1"
    session_id: str
    created_at: str
    updated_at: str
    harness_version: str
    turns: list[int] = Field(default_factory=list, description="User turns run in this session.")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="History as sent to the model.")
    next_child: int = Field(default=1, description="Next sub-agent number (principal ids stay unique).")


class SessionStore:
    """Session files in one folder; writes are atomic (temp file + rename)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def path(self, session_id: str) -> Path:
        if not session_id or "/" in session_id or session_id.startswith("."):
            raise ValueError(f"invalid session id {session_id!r}")
        return self.folder / f"{session_id}.json"

    def load(self, session_id: str) -> SessionRecord:
        """Raises ``FileNotFoundError`` with the folder searched when the session is unknown."""
        path = self.path(session_id)
        if not path.is_file():
            known = sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []
            raise FileNotFoundError(f"no session {session_id!r} in {self.folder} (known: {known or 'none'})")
        return SessionRecord.model_validate_json(path.read_text(encoding="utf-8"))

    def save(self, record: SessionRecord, redactor: Redactor | None) -> None:
        record.updated_at = utc_stamp()
        data = record.model_dump(mode="json")
        if redactor is not None:
            data = redactor.value(data)
        atomic_write_text(self.path(record.session_id), json.dumps(data, ensure_ascii=False, indent=1))
