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

Sub-agents and background tasks: a ``system`` ``task_*`` record is a sub-agent's only when its
task type names an agent (``local_agent`` …); a background shell (``local_bash``, Bash
``run_in_background``) is the parent's own process, so its records stay with the principal
that issued the call (``native_event``), never a child principal. A sub-agent's own transcript
(``transcripts/<session>/subagents/agent-<id>.jsonl``, its Agent call named by the
``.meta.json`` ``toolUseId``) holds records the stream may not carry (e.g. its text-only final
reply): those are emitted for the child principal, before the stdout record that closes the
child (the Agent call's result or its ``task_notification``); the ones the stream carries too
are accounted as such.

Usage: the ``result`` record's ``modelUsage`` (per model, every call of the process, sub-agents
included) when it states every count, else its ``usage`` (the main agent's calls only). From 2.1.332
a resumed process restores the session's running totals, so ``modelUsage`` and ``total_cost_usd``
also count the earlier turns; such a record states ``model_usage_since_last_result`` (per model,
every call since the session's previous ``result``), which is then the record's usage and cost.

Every stdout and sub-agent transcript record is accounted (:mod:`harnesses.native`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harnesses.base import NormalizedTrace
from harnesses.native import (
    MAIN,
    TraceBuilder,
    TurnFiles,
    read_jsonl,
    record_type,
    repeated_ids,
    seconds,
)
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
SRC_SUBAGENT = f"native:{HARNESS}/subagent"
#: Top-level stream-json record types of the CLI (the ones without a handler stay
#: ``native_event``); any other type is unknown to this normalizer (trace ``partial``).
KNOWN_TYPES = {"system", "assistant", "user", "result", "stream_event", "rate_limit_event", "tool_progress",
               "auth_status", "tool_use_summary", "prompt_suggestion", "keep_alive"}
#: Transcript records of a model request as the harness built it (new in 2.1.332):
#: ``api-request-shape`` its system text and tool declarations, ``api-request-blob`` one message by
#: hash, ``api-request`` the parameters and the hashes of the messages it sent.
REQUEST_TYPES = {"api-request", "api-request-blob", "api-request-shape"}
#: Record types of a session/sub-agent transcript this normalizer knows (``atis-latch``,
#: ``cost-state`` and ``tools-used`` are 2.1.332's session bookkeeping).
TRANSCRIPT_TYPES = {"user", "assistant", "attachment", "system", "summary", "progress", "file-history-snapshot",
                    "queue-operation", "last-prompt", "mode", "atis-latch", "cost-state", "tools-used",
                    *REQUEST_TYPES}
#: Task types of a sub-agent (a principal); other tasks (``local_bash`` …) are the parent's processes.
AGENT_TASK_TYPES = {"local_agent", "remote_agent", "in_process_teammate"}


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


@dataclass
class _Subagent:
    """One sub-agent transcript: its file, agent id, the Agent call that started it, its lines."""

    file: str
    agent_id: str
    call: str | None
    lines: list[_Line]


def _subagents(transcripts: Sequence[Path]) -> list[_Subagent]:
    """The sub-agent transcripts next to the session transcripts (``<session>/subagents/``)."""
    out: list[_Subagent] = []
    for path in transcripts:
        folder = path.with_suffix("") / "subagents"
        for agent in sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []:
            meta_path = agent.with_suffix(".meta.json")
            call = None
            if meta_path.is_file():
                try:
                    meta = json.loads(meta_path.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError):
                    meta = None
                call = _obj(meta).get("toolUseId")
            name = f"{path.stem}/subagents/{agent.name}"
            out.append(_Subagent(name, agent.stem.removeprefix("agent-"), call if isinstance(call, str) else None,
                                 list(read_jsonl(agent, name))))
    return out


def _stream_key(data: dict[str, Any]) -> str | None:
    """What identifies an assistant/user record on both the stream and a transcript: the
    message id with its content (one record per content block), or the answered call ids."""
    msg = _obj(data.get("message"))
    content = msg.get("content")
    if data.get("type") == "assistant" and isinstance(msg.get("id"), str):
        return f"assistant:{msg['id']}:{json.dumps(content, sort_keys=True)}"
    if data.get("type") == "user" and isinstance(content, list):
        ids = sorted(str(b.get("tool_use_id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
        return f"user:{','.join(ids)}" if ids else None
    return None


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
    def __init__(self, run_id: str, at: datetime, transcripts: _Transcripts, scoped: set[str],
                 subagents: list[_Subagent]):
        super().__init__(run_id, at, scoped)
        self.transcripts = transcripts
        self.principal_of_call: dict[str, str] = {}  # native call id -> principal that issued it
        self.call_turn: dict[str, int] = {}  # native call id -> turn it was issued in
        self.task_to_call: dict[str, str] = {}  # task id -> the tool_use_id that started it
        self.task_type: dict[str, str] = {}  # task id -> its native task_type
        self.notified: dict[str, int] = {}
        self.usage_turns: set[int] = set()  # turns that have a usage event of a ``result`` record
        self.subagents = subagents
        #: Agent call id -> sub-agent transcript lines the stream does not carry (emitted when it closes).
        self.pending: dict[str, list[tuple[_Subagent, _Line]]] = {}
        self.child_source: tuple[str, str] | None = None  # (source, principal) while emitting a transcript record

    # -- envelope -----------------------------------------------------------------------
    def _env(self, turn: int, line: _Line, data: dict[str, Any], principal: str | None = None) -> dict[str, Any]:
        parent = data.get("parent_tool_use_id")
        source = SRC_STDOUT
        if self.child_source is not None:
            source, principal = self.child_source
        env = self.base(source=source, conversation_turn=turn,
                        session_id=data.get("session_id", data.get("sessionId")),
                        source_event_seq=line.no, source_timestamp=data.get("timestamp"), raw_event=data)
        who = principal or (parent if isinstance(parent, str) and parent else MAIN)
        env["principal_id"] = who
        env["principal_role"] = "main" if who == MAIN else "child"
        if who != MAIN:
            env["parent_principal_id"] = self.principal_of_call.get(who)
        return env

    # -- sub-agent transcripts -------------------------------------------------------------
    def plan_subagents(self, turns: Sequence[TurnFiles]) -> None:
        """Which sub-agent transcript records the stream lacks (held until their child closes);
        the others are accounted as carried by the stream."""
        on_stream = {key for files in turns for line in read_jsonl(files.stdout)
                     if (key := _stream_key(line.data or {})) is not None}
        for agent in self.subagents:
            # the child principal is its Agent call's id; without one, the agent's own id
            call = agent.call or self.task_to_call.get(agent.agent_id) or f"agent-{agent.agent_id}"
            for line in agent.lines:
                self.expect(line, source=SRC_SUBAGENT)
                data = line.data
                key = _stream_key(data) if data is not None else None
                with self.line_handling(line, source=SRC_SUBAGENT, turn=None):
                    if data is None:
                        self.ledger.context(f"unparseable sub-agent transcript line ({line.error})")
                        self.degrade(f"{line.file} line {line.no}: {line.error}")
                    elif data.get("type") in REQUEST_TYPES:
                        # what the sub-agent sent, as the harness recorded it: the exchange's
                        # request side, which the gateway records itself (the replies are mapped)
                        self.ledger.context(f"sub-agent transcript {record_type(data)} record (a model request "
                                            "as the harness recorded it; the gateway records the request)")
                    elif key is None:
                        self.ledger.context(f"sub-agent transcript {record_type(data)} record (context, "
                                            "not part of the model exchange)")
                        if data.get("type") not in TRANSCRIPT_TYPES:
                            self.ledger.unknown()
                    elif key in on_stream:
                        self.ledger.context("carried by the stdout stream too (same message id and content)")
                    else:
                        self.pending.setdefault(call, []).append((agent, line))

    def flush_child(self, call: str, turn: int) -> None:
        """Emit the held transcript records of the sub-agent started by ``call``."""
        for agent, line in self.pending.pop(call, []):
            data = line.data or {}
            self.child_source = (SRC_SUBAGENT, call)
            try:
                with self.line_handling(line, source=SRC_SUBAGENT, turn=turn):
                    handler = self._on_assistant if data.get("type") == "assistant" else self._on_user
                    handler(turn, line, data)
            finally:
                self.child_source = None

    def _closes(self, data: dict[str, Any]) -> list[str]:
        """Agent calls a stdout record closes (their result, or their task's notification)."""
        if data.get("type") == "system" and data.get("subtype") == "task_notification":
            call = data.get("tool_use_id") or self.task_to_call.get(str(data.get("task_id")))
            return [call] if isinstance(call, str) else []
        content = _obj(data.get("message")).get("content")
        if data.get("type") == "user" and isinstance(content, list):
            return [str(b.get("tool_use_id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        return []

    # -- turns ----------------------------------------------------------------------------
    def learn_tasks(self, files: TurnFiles) -> None:
        """task id -> the call that started it and its type, stated by ``task_*`` records (a
        record may name a task before the one that states its call)."""
        for line in read_jsonl(files.stdout):
            data = line.data or {}
            if data.get("type") != "system" or not isinstance(data.get("task_id"), str):
                continue
            if isinstance(data.get("tool_use_id"), str):
                self.task_to_call.setdefault(data["task_id"], data["tool_use_id"])
            if isinstance(data.get("task_type"), str):
                self.task_type.setdefault(data["task_id"], data["task_type"])
            for task in data.get("tasks") or []:
                if isinstance(task, dict) and isinstance(task.get("task_id"), str) and isinstance(task.get("task_type"), str):
                    self.task_type.setdefault(task["task_id"], task["task_type"])

    def turn(self, files: TurnFiles) -> None:
        lines = list(read_jsonl(files.stdout))
        finished = False
        for line, data in self.records(lines, source=SRC_STDOUT, turn=files.index):
            for call in self._closes(data):
                if call in self.pending:
                    self.flush_child(call, files.index)
            kind = data.get("type")
            handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
            if handler is None:
                event = NativeEvent(**self._env(files.index, line, data), native_event_type=str(kind))
                if kind in KNOWN_TYPES:
                    self.events.append(event)
                else:
                    self.unknown_record(event)
            else:
                handler(files.index, line, data)
            finished = finished or kind == "result"
        for call in [c for c in self.pending if self.call_turn.get(c) == files.index]:
            self.flush_child(call, files.index)  # a child the stream never closed: after its turn's records
        if not finished:
            self.unfinished_turn(files.index, f"turn {files.index}: stdout has no final 'result' record")
        self.stderr(files, SRC_STDERR)

    # -- record handlers -----------------------------------------------------------------
    def _on_assistant(self, turn: int, line: _Line, data: dict[str, Any]) -> None:
        msg = _obj(data.get("message"))
        env = self._env(turn, line, data)
        if data.get("is_api_error_message") or msg.get("model") == "<synthetic>":
            # Written by the harness, not the model (the CLI marks such messages with the flag
            # and/or the model "<synthetic>"): a diagnostic, never an assistant action.
            self.events.append(
                NativeDiagnosticEvent(
                    **env,
                    diagnostic_type="api_error_message",
                    detail={"error": data.get("error"), "text": _message_text(msg), **_api_error(data)},
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
                self.call_turn.setdefault(block["id"], turn)
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
        usage, cost = _result_usage(data)
        if data.get("model_usage_since_last_result") == {} and turn in self.usage_turns:
            # A later result of the turn with no call since the previous one (a background
            # sub-agent's second result, 2.1.332): that one reported the calls; zeros here would
            # read as the turn's usage to whoever takes a turn's last aggregate.
            usage = None
        if usage is not None:
            self.usage_turns.add(turn)
            self.events.append(
                TokenUsageEvent(
                    **env,
                    usage=usage,
                    usage_scope="turn",
                    usage_aggregate=True,
                    reported_cost_usd=cost,
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
                    detail={**{k: data.get(k) for k in ("subtype", "terminal_reason", "api_error_status", "result")},
                            **_api_error(data)},
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
                if isinstance(t, dict) and self._is_agent(t.get("task_id"))
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

    def _is_agent(self, task_id: Any) -> bool:
        """Whether a task is a sub-agent (a principal); a task of unknown type counts as one,
        as before task types were recorded."""
        kind = self.task_type.get(str(task_id))
        return kind is None or kind in AGENT_TASK_TYPES

    def _task_event(self, turn: int, line: _Line, data: dict[str, Any], sub: str) -> None:
        task_id = data.get("task_id")
        call = data.get("tool_use_id") or self.task_to_call.get(str(task_id))
        if not self._is_agent(task_id):
            # A background shell (or other non-agent task) is the issuing principal's own
            # process: its records stay with that principal and name no child.
            issuer = self.principal_of_call.get(call) if isinstance(call, str) else None
            env = self._env(turn, line, data, principal=issuer or MAIN)
            status = data.get("status") or _obj(data.get("patch")).get("status")
            self.events.append(NativeEvent(**env, native_event_type=f"system/{sub}/{self.task_type.get(str(task_id))}",
                                           status=status if isinstance(status, str) else None))
            return
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


def _api_error(data: dict[str, Any]) -> dict[str, Any]:
    """The structured error fields a record states (2.1.332 puts ``api_error_status`` and
    ``api_error_type`` on the synthetic error message too); absent ones are not invented."""
    return {k: data[k] for k in ("api_error_status", "api_error_type") if k in data}


#: The counts of one model in ``modelUsage`` / ``model_usage_since_last_result``.
_MODEL_KEYS = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")


def _models_usage(models: list[dict[str, Any]]) -> TokenUsage | None:
    """Per-model counts summed (none: all zero); ``None`` unless each model states every count.
    ``thinkingTokens`` (2.1.332; part of the output tokens) is the reasoning count when every
    model states it, else not reported."""
    if not all(isinstance(m.get(k), int) for m in models for k in _MODEL_KEYS):
        return None
    total = {k: sum(int(m[k]) for m in models) for k in _MODEL_KEYS}
    thinking = [m.get("thinkingTokens") for m in models]
    return TokenUsage(input_tokens=total["inputTokens"], output_tokens=total["outputTokens"],
                      cache_read_tokens=total["cacheReadInputTokens"],
                      cache_write_tokens=total["cacheCreationInputTokens"],
                      reasoning_tokens=sum(int(t) for t in thinking if isinstance(t, int))
                      if all(isinstance(t, int) for t in thinking) else None)


def _result_usage(data: dict[str, Any]) -> tuple[TokenUsage | None, float | None]:
    """A ``result`` record's usage and reported cost.

    With ``model_usage_since_last_result`` (2.1.332): its models summed (the calls since the
    session's previous result, sub-agents included; none named: no call, all zero) and their
    ``costUSD``; ``modelUsage`` and ``total_cost_usd`` are then the session's running totals,
    which on a resumed process count the earlier turns again. Without it: ``modelUsage`` summed
    (every call of the process, sub-agents included) and ``total_cost_usd``. Failing those: the
    record's ``usage`` (the main agent's calls of the process only)."""
    since = data.get("model_usage_since_last_result")
    if isinstance(since, dict):
        models = [m for m in since.values() if isinstance(m, dict)]
        usage = _models_usage(models)
        if usage is not None:
            costs = [c for m in models if isinstance(c := m.get("costUSD"), (int, float))]
            return usage, float(sum(costs)) if len(costs) == len(models) else None
        return _main_usage(data), None  # the running total_cost_usd is no cost of this result
    models = [m for m in _obj(data.get("modelUsage")).values() if isinstance(m, dict)]
    usage = _models_usage(models) if models else None
    return usage if usage is not None else _main_usage(data), data.get("total_cost_usd")


def _main_usage(data: dict[str, Any]) -> TokenUsage | None:
    """A ``result`` record's ``usage``: the main agent's calls of the process."""
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    return TokenUsage(input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
                      cache_read_tokens=usage.get("cache_read_input_tokens"),
                      cache_write_tokens=usage.get("cache_creation_input_tokens"))


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
    ordered = sorted(turns, key=lambda t: t.index)
    norm = _Normalizer(run_id, at, _Transcripts.load(transcripts), repeated_ids(_tool_uses(turns)),
                       _subagents(transcripts))
    for files in ordered:
        norm.learn_tasks(files)
    norm.plan_subagents(ordered)
    for files in ordered:
        norm.turn(files)
    last = ordered[-1].index if ordered else 1
    for call in list(norm.pending):  # no stdout record names the Agent call: after the last turn
        norm.diagnostic("subagent_call_not_on_stream", {"tool_use_id": call}, turn=last,
                        note=f"sub-agent of call {call}: its transcript has records but no stdout record names the call")
        norm.flush_child(call, last)
    return norm.trace(nothing="no parseable Claude Code stream-json record in any turn")
