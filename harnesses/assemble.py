"""Assemble a run's Trace IR from the harness normalizer's events, the runner's
turn outcomes and the gateway's provider-boundary records (pure).

Apparatus evidence keeps its real source (SPEC §7 rule 8): gateway-derived
events carry ``source="gateway"``, runner events ``source="runner"``; none is
turned into a native harness event.

Support events carry the times the apparatus observed: a turn's start (and its session
boundary) the turn's recorded ``started_at``, its end that start plus the recorded duration
(``result.json`` ``turns``); the run's start and end frame the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harnesses.base import NormalizedTrace, TurnOutcome
from tracetrial.results import Summary, TurnRecord
from tracetrial.task import Turn
from tracetrial.trace import (
    ConversationFinishedEvent,
    ConversationStartedEvent,
    ConversationTurnFinishedEvent,
    ConversationTurnStartedEvent,
    EventBase,
    ProviderRequestCountEvent,
    RunFailedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    SessionBoundaryEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolDeclaration,
    ToolEvent,
    ToolInventoryEvent,
)
from tracetrial.trace_io import renumber


def turn_record(outcome: TurnOutcome) -> TurnRecord:
    """The archived form of a turn outcome (``result.json`` ``turns``)."""
    assert outcome.started_at is not None, "the cell runner stamps every turn's start"
    return TurnRecord(index=outcome.index, started_at=outcome.started_at.isoformat(), exit_code=outcome.exit_code,
                      timed_out=outcome.timed_out, duration_s=outcome.duration_s, session_id=outcome.session_id,
                      error=outcome.error, interrupted=outcome.interrupted)


def turn_outcome(record: TurnRecord, native: Path) -> TurnOutcome:
    """A turn outcome rebuilt from its archived record (its files under ``native/``)."""
    return TurnOutcome(index=record.index, exit_code=record.exit_code, timed_out=record.timed_out,
                       duration_s=record.duration_s, stdout=native / f"turn-{record.index}.stdout",
                       stderr=native / f"turn-{record.index}.stderr", session_id=record.session_id,
                       error=record.error, started_at=datetime.fromisoformat(record.started_at),
                       interrupted=record.interrupted)


def _usage(raw: dict[str, Any] | None) -> TokenUsage | None:
    if not raw:
        return None
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
    usage = TokenUsage(**{k: raw.get(k) for k in keys})
    if usage.input_tokens is not None and usage.output_tokens is not None:
        usage.total_tokens = usage.input_tokens + usage.output_tokens
    return usage


def gateway_events(records: Sequence[dict[str, Any]], *, run_id: str, at: datetime) -> list[EventBase]:
    """``tool_inventory`` (when the declared set changes), ``token_usage`` per call and one
    ``provider_request_count`` — all labelled ``source="gateway"``."""
    out: list[EventBase] = []
    last_fp: str | None = None
    for rec in records:
        if rec.get("inventory_present") and rec.get("inventory_fingerprint") != last_fp:
            last_fp = rec.get("inventory_fingerprint")
            tools = [
                ToolDeclaration(
                    name=t.get("name", ""), type=t.get("type") or "function",
                    description=t.get("description"), input_schema=t.get("input_schema"),
                )
                for t in rec.get("tools", [])
            ]
            out.append(ToolInventoryEvent(
                seq=1, timestamp=at, run_id=run_id, source="gateway", model_visible=True,
                complete=bool(rec.get("inventory_complete")) and (rec.get("status") or 0) < 400,
                scope="request", tools=tools, request_count=int(rec.get("index", 0)) + 1,
                inventory_fingerprint=last_fp,
            ))
        usage = _usage(rec.get("usage"))
        out.append(TokenUsageEvent(
            seq=1, timestamp=at, run_id=run_id, source="gateway", usage=usage,
            usage_available=usage is not None, usage_scope="call",
        ))
    failed = sum(1 for r in records if (r.get("status") or 0) >= 400 or r.get("error"))
    out.append(ProviderRequestCountEvent(seq=1, timestamp=at, run_id=run_id, source="gateway",
                                         count=len(records), failed=failed))
    return out


def turn_times(outcome: TurnOutcome, started: datetime, finished: datetime) -> tuple[datetime, datetime]:
    """When the apparatus saw a turn start and end: its recorded start and start + duration
    (the run's start and end when the turn has no recorded start), in UTC."""
    if outcome.started_at is None:
        return started, finished
    start = outcome.started_at.astimezone(UTC)
    return start, start + timedelta(seconds=max(0.0, outcome.duration_s))


def assemble(
    *,
    run_id: str,
    task_id: str,
    harness: str,
    model: str,
    form: str,
    turns: Sequence[Turn],
    outcomes: Sequence[TurnOutcome],
    native: NormalizedTrace,
    gateway_records: Sequence[dict[str, Any]],
    started: datetime,
    finished: datetime,
    failure: tuple[str, str, bool] | None,
) -> list[EventBase]:
    """The full ordered trace with a contiguous ``seq``.

    Native events keep their normalizer order inside each turn (the strongest
    native order); support events frame them. ``failure`` is
    ``(error_type, message, timed_out)`` when the run did not finish normally.
    """
    events: list[EventBase] = [
        RunStartedEvent(seq=1, timestamp=started, run_id=run_id, source="runner",
                        task_id=task_id, harness=harness, model=model),
        ConversationStartedEvent(seq=1, timestamp=started, run_id=run_id, source="runner", form=form),
    ]
    by_turn: dict[int | None, list[EventBase]] = {}
    for ev in native.events:
        by_turn.setdefault(ev.conversation_turn, []).append(ev)
    for outcome in outcomes:
        turn = turns[outcome.index - 1]
        turn_start, turn_end = turn_times(outcome, started, finished)
        if turn.session_boundary is not None:
            b = turn.session_boundary
            events.append(SessionBoundaryEvent(
                seq=1, timestamp=turn_start, run_id=run_id, source="runner",
                conversation_turn=outcome.index, kind=b.kind,
                history_replayed=b.history_replayed, workspace_preserved=b.workspace_preserved,
            ))
        events.append(ConversationTurnStartedEvent(seq=1, timestamp=turn_start, run_id=run_id, source="runner",
                                                   conversation_turn=outcome.index, user_text=turn.user))
        events.extend(by_turn.pop(outcome.index, []))
        status = ("interrupted" if outcome.interrupted else "timed_out" if outcome.timed_out
                  else "ok" if outcome.exit_code == 0 else "error")
        events.append(ConversationTurnFinishedEvent(seq=1, timestamp=turn_end, run_id=run_id, source="runner",
                                                    conversation_turn=outcome.index,
                                                    exit_code=outcome.exit_code, status=status))
    # Events the normalizer could not place in a turn stay visible, after the turns.
    for rest in by_turn.values():
        events.extend(rest)
    events.extend(gateway_events(gateway_records, run_id=run_id, at=finished))
    events.append(ConversationFinishedEvent(seq=1, timestamp=finished, run_id=run_id, source="runner",
                                            turns=len(outcomes)))
    if failure is not None:
        err_type, message, timed_out = failure
        last_code = outcomes[-1].exit_code if outcomes else None
        events.append(RunFailedEvent(seq=1, timestamp=finished, run_id=run_id, source="runner",
                                     error_type=err_type, error_message=message,
                                     exit_code=last_code, timed_out=timed_out))
    events.append(RunFinishedEvent(seq=1, timestamp=finished, run_id=run_id, source="runner",
                                   exit_code=outcomes[-1].exit_code if outcomes else None,
                                   trace_complete=native.trace_complete and failure is None,
                                   summary_path="summary.json"))
    return renumber(events)


def summarize(run_id: str, events: Sequence[EventBase], native: NormalizedTrace,
              records: Sequence[dict[str, Any]], wall: float, failure: bool) -> Summary:
    """``summary.json`` of a run: event counts, token usage of the gateway calls, evidence status."""
    counts: dict[str, int] = {}
    for ev in events:
        kind = str(getattr(ev, "event_type", type(ev).__name__))
        counts[kind] = counts.get(kind, 0) + 1
    # Requests that failed before a response (e.g. a connectivity HEAD) carry no usage;
    # the run total sums the calls that reported it and is None when none did.
    usages = [e.usage for e in events if isinstance(e, TokenUsageEvent) and e.source == "gateway"
              and e.usage is not None]
    total: TokenUsage | None = None
    if usages:
        def add(name: str) -> int | None:
            vals = [getattr(u, name) for u in usages]
            return None if any(v is None for v in vals) else sum(vals)
        total = TokenUsage(input_tokens=add("input_tokens"), output_tokens=add("output_tokens"),
                           cache_read_tokens=add("cache_read_tokens"), cache_write_tokens=add("cache_write_tokens"),
                           reasoning_tokens=add("reasoning_tokens"))
        if total.input_tokens is not None and total.output_tokens is not None:
            total.total_tokens = total.input_tokens + total.output_tokens
    status = native.structured_trace_status
    if failure and status == "complete":
        status = "partial"
    return Summary(run_id=run_id, trace_complete=native.trace_complete and not failure,
                   structured_trace_status=status, event_counts=counts,
                   tool_calls=sum(1 for e in events if isinstance(e, ToolEvent)),
                   model_calls=len(records), usage=total, wall_seconds=round(wall, 3), notes=list(native.notes),
                   accounting=native.accounting.counts() if native.accounting is not None else None)
