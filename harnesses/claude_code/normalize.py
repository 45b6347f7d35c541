"""Claude Code native records -> Trace IR (pure: reads only the archived files it is given).

Primary source: the ``--output-format stream-json --verbose`` stdout of each turn
(``native/turn-<n>.stdout``), in stream order. The session transcripts
(``native/transcripts/<session>.jsonl``) add what stdout does not carry: the
``<task-notification>`` text a background sub-agent's completion delivered to the
parent model, whether the parent was reactivated by it, and compaction summaries.

SPEC §7 rules as applied here:

1. content is copied verbatim (``tool_result.content`` is the model-facing block);
2. calls and results are joined only by ``tool_use_id`` — a call without a result
   keeps ``tool_result: null``, a result without a call becomes a ``native_event``;
3. a tool id that occurs in more than one turn is turn-scoped (``<id>#t<n>``) and keeps
   ``native_tool_call_id``;
4. events follow stdout order (``source_event_seq`` is the 1-based stdout line);
5. lines carrying ``parent_tool_use_id`` belong to the sub-agent principal named by that
   id (``principal_role="child"``, ``parent_principal_id`` = the issuer of the call);
6. unknown record types become ``native_event``; unparseable lines ``raw_stdout`` with
   ``parse_error``, and the structured-trace status drops to ``partial``;
7. ``exit_code``/``is_error``/``truncated``/``status`` are set only from structured native
   fields (``is_error``, ``tool_use_result``, ``tool_result_meta``), never from wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harnesses.base import NormalizedTrace
from harnesses.native import MAIN, TraceBuilder, TurnFiles, read_jsonl, repeated_ids, seconds
from harnesses.native import NativeLine as _Line
from harnesses.native import as_object as _obj
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    PolicyEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolResult,
)

HARNESS = "claude_code"
SRC_STDOUT = f"native:{HARNESS}/stdout"
SRC_STDERR = f"native:{HARNESS}/stderr"


# ----------------------------------------------------------------------------- transcripts


@dataclass
class _Transcripts:
    """What the session transcripts add: notifications and compaction summaries."""

    notifications: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # task id -> entries
    reactivated: set[str] = field(default_factory=set)  # uuids an assistant entry answers
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)  # parentUuid -> summary entry

    @classmethod
    def load(cls, paths: Sequence[Path]) -> _Transcripts:
        out = cls()
        for path in paths:
            for line in read_jsonl(path):
                entry = line.data
                if entry is None:
                    continue
                if entry.get("type") == "assistant" and entry.get("parentUuid"):
                    out.reactivated.add(entry["parentUuid"])
                if entry.get("isCompactSummary") and entry.get("parentUuid"):
                    out.summaries[entry["parentUuid"]] = entry
                origin = _obj(entry.get("origin"))
                if entry.get("type") == "user" and origin.get("kind") == "task-notification":
                    text = _message_text(entry.get("message"))
                    match = re.search(r"<task-id>([^<]+)</task-id>", text or "")
                    if match:
                        out.notifications.setdefault(match.group(1), []).append(entry)
        return out


def _message_text(message: Any) -> str | None:
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return None


# ------------------------------------------------------------------------------ normalizer


class _Normalizer(TraceBuilder):
    def __init__(self, run_id: str, at: datetime, transcripts: _Transcripts, scoped: set[str]):
        super().__init__(run_id, at, scoped)
        self.transcripts = transcripts
        self.principal_of_call: dict[str, str] = {}  # native call id -> principal that issued it
        self.task_to_call: dict[str, str] = {}  # sub-agent task id -> Agent tool_use_id
        self.notified: dict[str, int] = {}

    # -- envelope -----------------------------------------------------------------------
    def _env(self, turn: int, line: _Line, data: dict[str, Any], principal: str | None = None) -> dict[str, Any]:
        parent = data.get("parent_tool_use_id")
        env = self.base(source=SRC_STDOUT, conversation_turn=turn, session_id=data.get("session_id"),
                        source_event_seq=line.no, source_timestamp=data.get("timestamp"), raw_event=data)
        who = principal or (parent if isinstance(parent, str) and parent else MAIN)
        env["principal_id"] = who
        env["principal_role"] = "main" if who == MAIN else "child"
        if who != MAIN:
            env["parent_principal_id"] = self.principal_of_call.get(who)
        return env

    # -- turns ----------------------------------------------------------------------------
    def turn(self, files: TurnFiles) -> None:
        lines = list(read_jsonl(files.stdout))
        for line in lines:  # task id -> Agent call id, stated by task_* records (may follow their first use)
            data = line.data or {}
            if (
                data.get("type") == "system"
                and isinstance(data.get("task_id"), str)
                and isinstance(data.get("tool_use_id"), str)
            ):
                self.task_to_call.setdefault(data["task_id"], data["tool_use_id"])
        finished = False
        for line, data in self.records(lines, source=SRC_STDOUT, turn=files.index):
            kind = data.get("type")
            handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
            if handler is None:
                self.events.append(NativeEvent(**self._env(files.index, line, data), native_event_type=str(kind)))
            else:
                handler(files.index, line, data)
            finished = finished or kind == "result"
        if not finished:
            self.unfinished_turn(files.index, f"turn {files.index}: stdout has no final 'result' record")
        self.stderr(files, SRC_STDERR)

    # -- record handlers -----------------------------------------------------------------
    def _on_assistant(self, turn: int, line: _Line, data: dict[str, Any]) -> None:
        msg = _obj(data.get("message"))
        env = self._env(turn, line, data)
        if data.get("is_api_error_message"):
            # Written by the harness, not the model: a diagnostic, never an assistant action.
            self.events.append(
                NativeDiagnosticEvent(
                    **env,
                    diagnostic_type="api_error_message",
                    detail={"error": data.get("error"), "text": _message_text(msg)},
                )
            )
            return
        for block in msg.get("content") or []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_use" and isinstance(block.get("id"), str):
                self.call(env, block["id"], turn, str(block.get("name")), block.get("input"))
                self.principal_of_call[block["id"]] = env["principal_id"]
            elif btype in ("text", "thinking", "redacted_thinking"):
                reasoning = btype != "text"
                self.events.append(
                    AssistantMessageEvent(
                        **env,
                        message_id=msg.get("id"),
                        content=block.get("text") if not reasoning else None,
                        content_kind="reasoning" if reasoning else "text",
                        reasoning=block.get("thinking") if reasoning else None,
                        model=msg.get("model"),
                        finish_reason=msg.get("stop_reason"),
                    )
                )
            else:
                self.events.append(NativeEvent(**env, native_event_type=f"assistant/{btype}"))

    def _on_user(self, turn: int, line: _Line, data: dict[str, Any]) -> None:
        msg = _obj(data.get("message"))
        content = msg.get("content")
        env = self._env(turn, line, data)
        if not isinstance(content, list):
            self.events.append(NativeEvent(**env, native_event_type="user"))
            return
        meta = {m.get("id"): m for m in data.get("tool_result_meta") or [] if isinstance(m, dict)}
        for block in content:
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                self.events.append(
                    NativeEvent(
                        **env, native_event_type=f"user/{block.get('type') if isinstance(block, dict) else 'content'}"
                    )
                )
                continue
            native = block.get("tool_use_id")
            call = self.answered(env, native, turn, missing="no tool_use with id")
            if call is not None:
                call.tool_result = _tool_result(block, data.get("tool_use_result"), meta.get(native))

    def _on_result(self, turn: int, line: _Line, data: dict[str, Any]) -> None:
        env = self._env(turn, line, data, principal=MAIN)
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.events.append(
                TokenUsageEvent(
                    **env,
                    usage=TokenUsage(
                        input_tokens=usage.get("input_tokens"),
                        output_tokens=usage.get("output_tokens"),
                        cache_read_tokens=usage.get("cache_read_input_tokens"),
                        cache_write_tokens=usage.get("cache_creation_input_tokens"),
                    ),
                    usage_scope="turn",
                    usage_aggregate=True,
                    reported_cost_usd=data.get("total_cost_usd"),
                )
            )
        for denial in data.get("permission_denials") or []:
            if not isinstance(denial, dict):
                continue
            native = denial.get("tool_use_id")
            call = self.find(native, turn)
            result = call.tool_result if call is not None else None
            self.events.append(
                PolicyEvent(
                    **env,
                    policy_kind="permission",
                    decision="denied",
                    reason_code=result.status if result is not None else None,
                    tool_call_id=call.tool_call.id if call is not None else native,
                    tool_name=denial.get("tool_name"),
                    reason_visible_to_model=True if result is not None else None,
                    execution_started=False if result is not None and result.status == "user-rejected" else None,
                )
            )
        if data.get("is_error"):
            self.events.append(
                NativeDiagnosticEvent(
                    **env,
                    diagnostic_type="result_error",
                    detail={k: data.get(k) for k in ("subtype", "terminal_reason", "api_error_status", "result")},
                )
            )
        else:
            self.events.append(
                NativeEvent(
                    **env, native_event_type="result", status=data.get("terminal_reason") or data.get("subtype")
                )
            )

    def _on_system(self, turn: int, line: _Line, data: dict[str, Any]) -> None:
        sub = data.get("subtype")
        env = self._env(turn, line, data)
        if sub == "api_retry":
            self.events.append(
                NativeDiagnosticEvent(
                    **env,
                    diagnostic_type="api_retry",
                    detail={
                        k: data.get(k) for k in ("attempt", "max_retries", "retry_delay_ms", "error_status", "error")
                    },
                )
            )
        elif sub in ("task_started", "task_progress", "task_updated", "task_notification"):
            self._task_event(turn, line, data, sub)
        elif sub == "background_tasks_changed":
            pending = [
                self.task_to_call.get(str(t.get("task_id")), t.get("task_id"))
                for t in data.get("tasks") or []
                if isinstance(t, dict)
            ]
            self.events.append(SubagentLifecycleEvent(**env, action="pending_changed", pending_child_ids=pending))
        elif sub == "compact_boundary":
            meta = _obj(data.get("compact_metadata"))
            summary_entry = self.transcripts.summaries.get(data.get("uuid") or "")
            summary = _message_text(summary_entry.get("message")) if summary_entry else None
            self.events.append(
                ContextCompactionEvent(
                    **env,
                    native_event_type="compact_boundary",
                    native_event_id=data.get("uuid"),
                    trigger=meta.get("trigger"),
                    summary=summary,
                    summary_present=True if summary else None,
                )
            )
        else:
            self.events.append(NativeEvent(**env, native_event_type=f"system/{sub}"))

    def _task_event(self, turn: int, line: _Line, data: dict[str, Any], sub: str) -> None:
        task_id = data.get("task_id")
        call = data.get("tool_use_id") or self.task_to_call.get(str(task_id))
        child = call if isinstance(call, str) else None
        env = self._env(turn, line, data, principal=child or MAIN)
        if sub != "task_notification":
            status = (data.get("patch") or {}).get("status") if sub == "task_updated" else None
            self.events.append(
                SubagentLifecycleEvent(**env, action=sub.removeprefix("task_"), status=status, child_principal_id=child)
            )
            return
        visible, reactivated = None, None
        entries = self.transcripts.notifications.get(task_id or "", [])
        nth = self.notified.get(task_id or "", 0)
        if nth < len(entries):
            self.notified[task_id or ""] = nth + 1
            visible = _message_text(entries[nth].get("message"))
            reactivated = entries[nth].get("uuid") in self.transcripts.reactivated
        self.events.append(
            TaskCompletionEvent(
                **env,
                status=data.get("status"),
                content=data.get("summary"),
                model_visible_content=visible,
                child_principal_id=child,
                parent_reactivated=reactivated,
            )
        )


def _tool_result(block: dict[str, Any], structured: Any, meta: dict[str, Any] | None) -> ToolResult:
    """A result from the model-facing block plus structured native fields only."""
    info = _obj(structured)
    exit_code = next((info[k] for k in ("exitCode", "exit_code") if isinstance(info.get(k), int)), None)
    truncated: bool | None = info.get("truncated") if isinstance(info.get("truncated"), bool) else None
    if info.get("persistedOutputPath"):
        truncated = True  # the model got a preview; the full output was persisted to a file
    status = None
    if meta and isinstance(meta.get("non_execution_kind"), str):
        status = meta["non_execution_kind"]
    elif isinstance(info.get("status"), str):
        status = info["status"]
    elif info.get("interrupted") is True:
        status = "interrupted"
    return ToolResult(
        content=block.get("content"),
        is_error=block.get("is_error") if isinstance(block.get("is_error"), bool) else None,
        status=status,
        exit_code=exit_code,
        truncated=truncated,
        duration=seconds(info.get("durationMs")),
    )


def _tool_uses(turns: Sequence[TurnFiles]) -> Iterator[tuple[str, int]]:
    """(native tool id, turn) of every ``tool_use`` block on stdout."""
    for files in turns:
        for line in read_jsonl(files.stdout):
            msg = (line.data or {}).get("message")
            if (line.data or {}).get("type") != "assistant" or not isinstance(msg, dict):
                continue
            for block in msg.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    yield block["id"], files.index


def normalize(turns: Sequence[TurnFiles], transcripts: Sequence[Path], run_id: str, *, at: datetime) -> NormalizedTrace:
    """Normalize archived Claude Code output of a run (turns in order) into Trace IR events;
    ``at`` is every event's timestamp (the adapter passes the recorded turn time)."""
    norm = _Normalizer(run_id, at, _Transcripts.load(transcripts), repeated_ids(_tool_uses(turns)))
    for files in sorted(turns, key=lambda t: t.index):
        norm.turn(files)
    return norm.trace(nothing="no parseable Claude Code stream-json record in any turn")
