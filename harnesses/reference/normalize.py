"""Pure normalizer: the reference harness's native JSONL log -> Trace IR events (SPEC §7).

:func:`normalize_records` does no I/O; :func:`normalize_run` only reads the
archived files it is given and calls it. Mapping (native ``type`` -> event):

==============  ==================================================================
``request``     ``model_input`` (messages and tools verbatim)
``response``    ``assistant_message`` (when it has text or reasoning) and
                ``token_usage`` (scope ``call``, when the stream reported usage)
``tool_call``   ``tool`` at the call's position; its ``tool_result`` is filled from
                the ``tool_result`` record with the same native call id, else ``null``
``policy``      ``policy_event``
``subagent``    ``subagent_lifecycle``; action ``deliver`` -> ``task_completion``
                (the child's result reaching the parent)
``completion``  ``task_completion`` of the main principal (the turn's final record)
``error``       ``native_diagnostic``
``session``,    ``native_event``
``ask_user``
unknown type    ``native_event`` (status ``unknown_record_type``), trace degraded
invalid record  ``native_event`` (status ``invalid_record: …``), trace degraded
unparseable     ``raw_stdout`` (``parseable: false``, ``parse_error``), trace degraded
==============  ==================================================================

Rules kept: content verbatim (1); calls and results paired only by native id,
a call without a result keeps ``tool_result: null`` and a result without a
call stays visible as incomplete evidence (2); a reused native id gets a
turn-scoped trace id and keeps ``native_tool_call_id`` (3); native log order
(4); every event keeps its principal and parent (5); nothing unknown is
dropped (6) and nothing missing is invented (7); stdout/stderr of the CLI
process are labelled with their own source (8).

Every log line is accounted (:class:`harnesses.native.Ledger`): a ``tool_result`` folds into its
call's event (listed in ``source_records``); an unaccounted line or an unknown record type gets
a ``native_diagnostic`` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harnesses.base import EPOCH, NormalizedTrace, TurnOutcome
from harnesses.native import Ledger
from harnesses.reference.records import NativeRecord
from tracetrial.archive import RunPaths
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    EventBase,
    ModelInputEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    PolicyEvent,
    RawStderrEvent,
    RawStdoutEvent,
    StructuredTraceStatus,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)

LOG_NAME = "reference-events.jsonl"
SOURCE = f"native:reference/{LOG_NAME}"


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _usage(raw: Mapping[str, Any]) -> TokenUsage:
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return TokenUsage(input_tokens=raw.get("prompt_tokens"), output_tokens=raw.get("completion_tokens"),
                      cache_read_tokens=cached, reasoning_tokens=reasoning, total_tokens=raw.get("total_tokens"))


class _Builder:
    def __init__(self, run_id: str, source: str):
        self.run_id = run_id
        self.source = source
        self.events: list[EventBase] = []
        self.notes: list[str] = []
        self.degraded = False
        self.open_calls: dict[str, ToolEvent] = {}
        self.used_ids: set[str] = set()
        self.completed_turns: set[int] = set()
        self.last_ts = EPOCH
        self.last_seq = 0
        self.ledger = Ledger()

    def envelope(self, rec: NativeRecord, raw: Any) -> dict[str, Any]:
        return {"seq": 1, "timestamp": _ts(rec.ts), "run_id": self.run_id, "source": self.source,
                "conversation_turn": rec.turn, "session_id": rec.session_id, "principal_id": rec.principal_id,
                "parent_principal_id": rec.parent_principal_id, "principal_role": rec.principal_role,
                "source_event_seq": rec.seq, "source_event_timestamp": rec.ts, "raw_event": raw}

    def degrade(self, note: str) -> None:
        self.degraded = True
        self.notes.append(note)

    def line(self, number: int, text: str) -> None:
        if not text.strip():
            return
        try:
            obj: Any = json.loads(text)
        except ValueError:
            obj = None
        data = obj if isinstance(obj, dict) else {}
        turn = data.get("turn") if isinstance(data.get("turn"), int) and data["turn"] >= 1 else None
        with self.ledger.handling(self.events, source=self.source, file=LOG_NAME, seq=number, turn=turn,
                                  type=str(data.get("type")) if obj is not None else "unparseable"):
            self._line(number, text)

    def _line(self, number: int, text: str) -> None:
        try:
            obj = json.loads(text)
        except ValueError as exc:
            self.events.append(RawStdoutEvent(seq=1, timestamp=self.last_ts, run_id=self.run_id, source=self.source,
                                              text=text, stream_seq=number, parseable=False, parse_error=str(exc)))
            self.degrade(f"{LOG_NAME} line {number}: not JSON ({exc})")
            return
        try:
            rec = NativeRecord.model_validate(obj)
        except ValidationError as exc:
            kind = obj.get("type") if isinstance(obj, dict) else None
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            status = "unknown_record_type" if isinstance(kind, str) and any(
                e["loc"][:1] == ("type",) for e in exc.errors()) else f"invalid_record: {problem}"
            if status == "unknown_record_type":
                self.ledger.unknown()
            self.events.append(NativeEvent(seq=1, timestamp=self.last_ts, run_id=self.run_id, source=self.source,
                                           native_event_type=kind if isinstance(kind, str) else None,
                                           status=status, raw_event=obj,
                                           source_event_seq=obj.get("seq") if isinstance(obj, dict)
                                           and isinstance(obj.get("seq"), int) else None))
            self.degrade(f"{LOG_NAME} line {number}: {status}")
            return
        if rec.seq <= self.last_seq:
            self.degrade(f"{LOG_NAME} line {number}: seq {rec.seq} does not increase (previous {self.last_seq})")
        self.last_seq = max(self.last_seq, rec.seq)
        self.last_ts = _ts(rec.ts)
        getattr(self, f"_{rec.type}")(rec, obj)

    # ------------------------------------------------------------------ per type
    def _request(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        d = rec.data
        slim = {**raw, "data": {k: v for k, v in d.items() if k not in ("messages", "tools")}}
        self.events.append(ModelInputEvent(**self.envelope(rec, slim), model=d.get("model"), provider="chat",
                                           messages=d.get("messages"), tools=d.get("tools"),
                                           request_params=d.get("params")))

    def _response(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        d = rec.data
        if d.get("content") or d.get("reasoning"):
            kind = "text" if d.get("content") else "reasoning"
            self.events.append(AssistantMessageEvent(
                **self.envelope(rec, raw), message_id=d.get("response_id"), content=d.get("content"),
                content_kind=kind, reasoning=d.get("reasoning"), finish_reason=d.get("finish_reason")))
        if isinstance(d.get("usage"), dict):
            self.events.append(TokenUsageEvent(**self.envelope(rec, raw), usage=_usage(d["usage"]),
                                               usage_available=True, usage_scope="call"))

    def _tool_call(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        native_id = str(rec.data.get("call_id"))
        trace_id, scoped = native_id, False
        if native_id in self.used_ids:
            trace_id, scoped = f"t{rec.turn}:{native_id}", True
            if trace_id in self.used_ids:
                trace_id = f"t{rec.turn}:{rec.seq}:{native_id}"
        if native_id in self.open_calls:
            self.notes.append(f"call id {native_id} reused before its result; the earlier call keeps no result")
        self.used_ids.update({native_id, trace_id})
        ev = ToolEvent(**self.envelope(rec, raw), tool_call=ToolCall(
            id=trace_id, name=str(rec.data.get("name")), arguments=rec.data.get("arguments"),
            native_tool_call_id=native_id if scoped else None), tool_result=None)
        self.open_calls[native_id] = ev
        self.events.append(ev)

    def _tool_result(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        d = rec.data
        native_id = str(d.get("call_id"))
        ev = self.open_calls.pop(native_id, None)
        if ev is None:
            self.events.append(NativeEvent(**self.envelope(rec, raw), native_event_type="tool_result",
                                           status="unmatched_result"))
            self.degrade(f"tool result for call id {native_id} has no matching call")
            return
        self.ledger.fold(ev)
        ev.tool_result = ToolResult(
            content=d.get("content"), is_error=d.get("is_error"), status=d.get("status"),
            exit_code=d.get("exit_code") if isinstance(d.get("exit_code"), int) else None,
            duration=d.get("duration_s"), truncated=d.get("truncated"), omitted_bytes=d.get("omitted_bytes"))
        ev.raw_event = {"call": ev.raw_event, "result": raw}

    def _policy(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        d = rec.data
        self.events.append(PolicyEvent(
            **self.envelope(rec, raw), policy_kind=str(d.get("policy_kind", "permission")),
            decision=str(d.get("decision")), reason_code="deny_rule" if d.get("rule") else None,
            tool_call_id=d.get("call_id"), tool_name=d.get("tool_name"),
            reason_visible_to_model=d.get("reason_visible_to_model"), execution_started=d.get("execution_started")))

    def _subagent(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        d = rec.data
        if d.get("action") == "deliver":
            self.events.append(TaskCompletionEvent(
                **self.envelope(rec, raw), status=d.get("status"), content=d.get("final_text"),
                model_visible_content=d.get("model_visible_content"), child_principal_id=d.get("child_principal_id"),
                parent_reactivated=d.get("parent_reactivated")))
            return
        bg = d.get("background")
        self.events.append(SubagentLifecycleEvent(
            **self.envelope(rec, raw), action=str(d.get("action")), status=d.get("status"),
            child_principal_id=d.get("child_principal_id"),
            boundary_kind=None if bg is None else ("background" if bg else "foreground"),
            pending_child_ids=d.get("pending_child_ids")))

    def _completion(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        self.completed_turns.add(rec.turn)
        self.events.append(TaskCompletionEvent(**self.envelope(rec, raw), status=rec.data.get("status"),
                                               content=rec.data))

    def _error(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        self.events.append(NativeDiagnosticEvent(**self.envelope(rec, raw),
                                                 diagnostic_type=str(rec.data.get("kind")), detail=rec.data))

    def _session(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        self.events.append(NativeEvent(**self.envelope(rec, raw), native_event_type="session",
                                       status=rec.data.get("action")))

    def _memory(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        self.events.append(NativeEvent(**self.envelope(rec, raw), native_event_type="memory",
                                       status=rec.data.get("source")))

    def _job(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        self.events.append(NativeEvent(**self.envelope(rec, raw), native_event_type="job",
                                       status=rec.data.get("action")))

    def _compaction(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        summary = rec.data.get("summary")
        self.events.append(ContextCompactionEvent(
            **self.envelope(rec, raw), native_event_type="compaction", trigger=rec.data.get("trigger"),
            summary=summary if isinstance(summary, str) else None, summary_present=isinstance(summary, str),
            notice_visible_to_model=True))

    def _ask_user(self, rec: NativeRecord, raw: dict[str, Any]) -> None:
        status = "failed" if rec.data.get("answer") is None else "answered"
        self.events.append(NativeEvent(**self.envelope(rec, raw), native_event_type="ask_user", status=status))


def normalize_records(lines: Sequence[str], *, run_id: str, turns: Sequence[int] | None = None,
                      streams: Mapping[int, tuple[str, str]] | None = None) -> NormalizedTrace:
    """Native log lines -> Trace IR events in native order (``seq`` is assigned by the assembler).

    Args:
        lines: the log's lines, in file order.
        turns: user turns whose process exited normally; each must have a completion record
            for the trace to be complete (default: every turn seen in the log).
        streams: per turn, the CLI's stdout and stderr text: non-JSON stdout lines become
            ``raw_stdout``, non-empty stderr one ``raw_stderr`` (apparatus-captured streams).
    """
    b = _Builder(run_id, SOURCE)
    for number, text in enumerate(lines, start=1):
        b.line(number, text)
    for ev in b.open_calls.values():
        b.notes.append(f"tool call {ev.tool_call.id} ({ev.tool_call.name}) has no native result")
    accounting = b.ledger.settle(b.events)
    for r in accounting.problems():
        kind = "unknown_record_type" if r.unknown_type else "unaccounted_record"
        b.degrade(f"{r.file} record {r.seq} ({r.type}) {'of unknown type' if r.unknown_type else 'represented by no event'}")
        b.events.append(NativeDiagnosticEvent(seq=1, timestamp=b.last_ts, run_id=run_id, source="normalizer",
                                              conversation_turn=r.turn, diagnostic_type=kind,
                                              detail={"source": r.source, "file": r.file, "seq": r.seq,
                                                      "type": r.type, "turn": r.turn}))
    for turn, (out, err) in sorted((streams or {}).items()):
        src = f"native:reference/turn-{turn}"
        for i, text in enumerate(out.splitlines(), start=1):
            try:
                json.loads(text)
            except ValueError as exc:
                b.events.append(RawStdoutEvent(seq=1, timestamp=b.last_ts, run_id=run_id, source=f"{src}.stdout",
                                               conversation_turn=turn, text=text, stream_seq=i, parseable=False,
                                               parse_error=str(exc)))
        if err.strip():
            b.events.append(RawStderrEvent(seq=1, timestamp=b.last_ts, run_id=run_id, source=f"{src}.stderr",
                                           conversation_turn=turn, text=err))
    if not lines or not any(t.strip() for t in lines):
        return NormalizedTrace(b.events, "unavailable", False, [*b.notes, f"{LOG_NAME} is missing or empty"],
                               accounting)
    expected = set(turns) if turns is not None else {e.conversation_turn for e in b.events
                                                     if e.conversation_turn is not None}
    missing = sorted(expected - b.completed_turns)
    if missing:
        b.notes.append(f"no completion record for turn(s) {missing}")
    complete = not missing
    status: StructuredTraceStatus = "complete" if complete and not b.degraded else "partial"
    return NormalizedTrace(b.events, status, complete, b.notes, accounting)


def normalize_run(paths: RunPaths, outcomes: Sequence[TurnOutcome], run_id: str) -> NormalizedTrace:
    """Read the archived native files of a run and normalize them (no other I/O)."""
    log = paths.native / LOG_NAME
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    streams: dict[int, tuple[str, str]] = {}
    for o in outcomes:
        out = Path(o.stdout).read_text(encoding="utf-8", errors="replace") if Path(o.stdout).is_file() else ""
        err = Path(o.stderr).read_text(encoding="utf-8", errors="replace") if Path(o.stderr).is_file() else ""
        streams[o.index] = (out, err)
    exited = [o.index for o in outcomes if o.exit_code is not None and not o.timed_out]
    trace = normalize_records(lines, run_id=run_id, turns=exited, streams=streams)
    if any(o.timed_out or o.exit_code is None for o in outcomes):
        trace.trace_complete = False
        if trace.structured_trace_status == "complete":
            trace.structured_trace_status = "partial"
        trace.notes.append("a turn did not exit normally (timed out or crashed)")
    return trace
