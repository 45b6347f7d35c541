"""Shared pieces of the harness normalizers (pure, read-only): reading archived native
records, the turn files, and the Trace IR logic every normalizer applies the same way —
the turn-scoped call ids and the call/result join (SPEC §7 rules 2 and 3), the stderr and
unparseable-line events, the assistant content blocks, the record accounting and the trace
status.

Record accounting (issue 18): every native record a normalizer reads is registered in the
builder's ledger and ends with one disposition — ``mapped`` (it produced events),
``kept`` (it produced only ``native_event``/``raw_stdout`` events), ``folded`` (it was folded
into another record's event, which lists it in ``source_records``), ``context`` (it carries
nothing a trace event would add — e.g. a copy of a record of another source — and the
normalizer names why) or ``unaccounted``. An unaccounted record, or a record of a type the
normalizer does not know, turns the status ``partial`` with a ``native_diagnostic`` naming
the record (source, file, position, type); :class:`RecordAccounting` is returned with the
trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harnesses.accounting import AccountedRecord, Disposition, RecordAccounting
from harnesses.base import NormalizedTrace
from tracetrial.trace import (
    AssistantMessageEvent,
    EventBase,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStderrEvent,
    RawStdoutEvent,
    SourceRecordRef,
    StructuredTraceStatus,
    ToolCall,
    ToolEvent,
)

#: The principal id of a harness's main agent (its sub-agents have their own ids).
MAIN = "main"


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (native records vary)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def json_arguments(raw: Any) -> Any:
    """Tool arguments as the model sent them: a JSON string decoded, anything else (and a
    string that is not JSON) kept verbatim."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def single_text(blocks: Any) -> Any:
    """Content blocks that are exactly one text block as that text (verbatim); anything else
    as stored."""
    if isinstance(blocks, list) and len(blocks) == 1 and as_object(blocks[0]).get("type") == "text":
        return blocks[0].get("text")
    return blocks


def seconds(ms: Any) -> float | None:
    """A native millisecond count as seconds (``None`` when it is not a number)."""
    return ms / 1000 if isinstance(ms, (int, float)) else None


@dataclass
class NativeLine:
    """One line of a native JSONL file: its data, or why it is not a JSON object."""

    no: int
    text: str
    data: dict[str, Any] | None
    error: str | None
    #: The file's name (the accounting key together with ``no``).
    file: str = ""


def read_jsonl(path: Path | None, name: str | None = None) -> Iterator[NativeLine]:
    """Lines of a JSONL file; a line that is not a JSON object carries ``error`` (rule 6:
    malformed records stay visible, they never abort normalization). ``name`` is the file's
    name in the accounting (default: the file name)."""
    if path is None or not path.is_file():
        return
    file = name or path.name
    raw = path.read_bytes().decode("utf-8", errors="replace")
    for no, text in enumerate(raw.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield NativeLine(no, text, None, f"invalid JSON: {exc.msg} at column {exc.colno}", file)
            continue
        if not isinstance(data, dict):
            yield NativeLine(no, text, None, f"not a JSON object ({type(data).__name__})", file)
            continue
        yield NativeLine(no, text, data, None, file)


@dataclass(frozen=True)
class TurnFiles:
    """The archived native output of one user turn (``requests``: the JSON-RPC requests we
    sent, for harnesses driven over stdin)."""

    index: int
    stdout: Path
    stderr: Path | None = None
    requests: Path | None = None


def turn_files(native: Path, indices: list[int], *, requests: bool = False) -> list[TurnFiles]:
    """The archived ``turn-<n>.*`` files of each turn in ``native/`` (every ``turn-<n>.stdout``
    there when no indices are known); ``requests`` adds ``turn-<n>.requests.jsonl``."""
    if not indices:
        indices = sorted(int(p.name.split("-")[1].split(".")[0]) for p in native.glob("turn-*.stdout"))
    return [TurnFiles(i, native / f"turn-{i}.stdout", native / f"turn-{i}.stderr",
                      native / f"turn-{i}.requests.jsonl" if requests else None) for i in indices]


def repeated_ids(occurrences: Iterable[tuple[str, Hashable]]) -> set[str]:
    """Native ids that occur in more than one place (a turn, or a harness's finer unit such as
    a thread's rollout turn): these get turn-scoped trace ids (SPEC §7 rule 3)."""
    seen: dict[str, set[Hashable]] = {}
    for native, where in occurrences:
        seen.setdefault(native, set()).add(where)
    return {native for native, places in seen.items() if len(places) > 1}


def message_events(env: dict[str, Any], blocks: list[Any], *, tool_block: str, reasoning_keys: tuple[str, ...],
                   message_id: str | None, model: str | None, finish_reason: str | None) -> list[EventBase]:
    """An assistant message's content blocks (tool-call blocks of type ``tool_block`` aside):
    one reasoning event per reasoning block (its text under the first of ``reasoning_keys``
    the block has), then one text event — a single text block as its text, else the text
    and other blocks as stored."""
    def kind(b: Any) -> Any:
        return as_object(b).get("type")

    texts = [b for b in blocks if kind(b) == "text"]
    reasoning = [b for b in blocks if kind(b) in ("thinking", "reasoning")]
    others = [b for b in blocks if kind(b) not in ("text", "thinking", "reasoning", tool_block)]
    out: list[EventBase] = []
    for b in reasoning:
        text = next((b[k] for k in reasoning_keys if k in b), None)
        out.append(AssistantMessageEvent(**env, message_id=message_id, content_kind="reasoning", model=model,
                                         reasoning=text if isinstance(text, str) else None))
    if texts or others:
        content = texts[0].get("text") if len(texts) == 1 and not others else texts + others
        out.append(AssistantMessageEvent(**env, message_id=message_id, content=content, content_kind="text",
                                         model=model, finish_reason=finish_reason))
    return out


# ------------------------------------------------------------------------------ accounting

@dataclass
class _Entry:
    source: str
    file: str
    seq: int
    type: str
    turn: int | None
    events: list[EventBase] = field(default_factory=list)
    folded_into: EventBase | None = None
    context: str | None = None
    unknown: bool = False


@dataclass
class Ledger:
    """The record accounting of one normalization (see the module docstring). Records are
    registered (:meth:`expect`) when read and claimed while they are handled
    (:meth:`handling`): the events appended to ``events`` meanwhile are theirs."""

    entries: dict[tuple[str, int], _Entry] = field(default_factory=dict)
    stack: list[_Entry] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)

    def expect(self, *, source: str, file: str, seq: int, type: str, turn: int | None = None) -> None:
        """Register a record that must end with a disposition."""
        self.entries.setdefault((file, seq), _Entry(source, file, seq, type, turn))

    @contextmanager
    def handling(self, events: list[EventBase], *, source: str, file: str, seq: int, type: str,
                 turn: int | None) -> Iterator[None]:
        """Claim the events appended to ``events`` in the block for this record (an inner
        record handled inside the block keeps its own)."""
        entry = self.entries.setdefault((file, seq), _Entry(source, file, seq, type, turn))
        entry.turn = turn
        before = len(events)
        self.stack.append(entry)
        try:
            yield
        finally:
            self.stack.pop()
            for ev in events[before:]:
                if id(ev) not in self.claimed:
                    self.claimed.add(id(ev))
                    entry.events.append(ev)

    @property
    def current(self) -> _Entry | None:
        return self.stack[-1] if self.stack else None

    def fold(self, into: EventBase) -> None:
        """The record being handled is folded into ``into``, which lists it."""
        entry = self.current
        if entry is None:
            return
        entry.folded_into = into
        ref = SourceRecordRef(source=entry.source, file=entry.file, seq=entry.seq)
        into.source_records = [*(into.source_records or []), ref]

    def fold_record(self, into: EventBase, file: str, seq: int) -> None:
        """An earlier record (``file``, ``seq``) is folded into ``into``, which lists it."""
        entry = self.entries.get((file, seq))
        if entry is None:
            return
        entry.folded_into = into
        ref = SourceRecordRef(source=entry.source, file=entry.file, seq=entry.seq)
        into.source_records = [*(into.source_records or []), ref]

    def context(self, reason: str) -> None:
        """The record being handled produces no event, for the reason given."""
        if self.current is not None:
            self.current.context = reason

    def unknown(self) -> None:
        """The record being handled is of a type the normalizer does not know."""
        if self.current is not None:
            self.current.unknown = True

    def settle(self, events: list[EventBase]) -> RecordAccounting:
        """The accounting over the final event list."""
        pos = {id(e): i for i, e in enumerate(events)}
        out: list[AccountedRecord] = []
        for e in self.entries.values():
            produced = [pos[id(ev)] for ev in e.events if id(ev) in pos]
            folded = pos.get(id(e.folded_into)) if e.folded_into is not None else None
            disposition: Disposition
            reason = None
            if produced:
                kept = all(isinstance(events[i], (NativeEvent, RawStdoutEvent)) for i in produced)
                disposition = "kept" if kept else "mapped"
            elif folded is not None:
                disposition = "folded"
            elif e.context is not None:
                disposition, reason = "context", e.context
            else:
                disposition, reason = "unaccounted", "no event represents it"
            out.append(AccountedRecord(source=e.source, file=e.file, seq=e.seq, type=e.type, turn=e.turn,
                                       disposition=disposition, events=produced, folded_into=folded,
                                       reason=reason, unknown_type=e.unknown))
        return RecordAccounting(records=out)


def record_type(data: dict[str, Any]) -> str:
    """A record's native ``type`` (``type/subtype`` when it has a subtype), for the accounting."""
    kind = data.get("type")
    sub = data.get("subtype")
    return f"{kind}/{sub}" if isinstance(sub, str) else str(kind)


@dataclass
class TraceBuilder:
    """The state every normalizer builds a trace with: events in native order, notes, the
    degradation to ``partial``, and the run's tool calls by trace id.

    ``at`` is the timestamp of every event (the recorded turn time the adapter passes), so
    the same archive always normalizes to the same events. ``scoped`` are the native call
    ids that occur in more than one turn (:func:`repeated_ids`): their trace ids are
    turn-scoped (``<id>#t<n>``, a child principal's ``<id>#t<n>:<principal>``) and the
    native id is kept as ``native_tool_call_id``. ``ledger`` is the record accounting: a
    record is handled inside :meth:`handling` (or :meth:`records`), a result joined by
    :meth:`answered` is folded into its call's event, and :meth:`trace` settles it.
    """

    run_id: str
    at: datetime
    scoped: set[str] = field(default_factory=set)
    events: list[EventBase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    partial: bool = False
    calls: dict[tuple[str, str], ToolEvent] = field(default_factory=dict)
    #: Whether any native record parsed (else the trace is ``unavailable``).
    parsed_any: bool = False
    #: Turns whose native records have no final record.
    unfinished: list[int] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)

    def degrade(self, note: str) -> None:
        """Record why the trace is only ``partial``."""
        self.partial = True
        self.notes.append(note)

    def unfinished_turn(self, turn: int, note: str) -> None:
        """A turn whose records stop before its final record: the trace is not complete."""
        self.unfinished.append(turn)
        self.degrade(note)

    def handling(self, *, source: str, file: str, seq: int, type: str, turn: int | None) -> Any:
        """Context in which one native record is handled (:meth:`Ledger.handling`)."""
        return self.ledger.handling(self.events, source=source, file=file, seq=seq, type=type, turn=turn)

    def line_handling(self, line: NativeLine, *, source: str, turn: int | None,
                      kind: Callable[[dict[str, Any]], str] = record_type) -> Any:
        """:meth:`handling` for one JSONL line (its type read by ``kind``)."""
        return self.handling(source=source, file=line.file, seq=line.no, turn=turn,
                             type=kind(line.data) if line.data is not None else "unparseable")

    def expect(self, line: NativeLine, *, source: str, turn: int | None = None,
               kind: Callable[[dict[str, Any]], str] = record_type) -> None:
        """Register a JSONL line that must end with a disposition (:meth:`Ledger.expect`)."""
        self.ledger.expect(source=source, file=line.file, seq=line.no, turn=turn,
                           type=kind(line.data) if line.data is not None else "unparseable")

    def unknown_record(self, event: EventBase) -> None:
        """A record of a type the normalizer does not know: kept as ``event`` (a
        ``native_event``); the accounting flags it and the trace becomes ``partial``."""
        self.ledger.unknown()
        self.events.append(event)

    def diagnostic(self, kind: str, detail: Any, *, turn: int | None, note: str) -> None:
        """A normalizer's own finding (an unmatched segment, a join a native source does not
        allow): a ``native_diagnostic`` of type ``kind``, and the trace degrades."""
        self.degrade(note)
        self.events.append(NativeDiagnosticEvent(**self.base(source="normalizer", conversation_turn=turn),
                                                 diagnostic_type=kind, detail=detail))

    def base(self, **fields: Any) -> dict[str, Any]:
        """An event envelope: position 1 (renumbered later), ``at``, the run id, ``fields``."""
        return {"seq": 1, "timestamp": self.at, "run_id": self.run_id, **fields}

    # -- calls and results (SPEC §7 rules 2 and 3) --------------------------------------------
    def trace_id(self, native: str, turn: int | None, principal: str = MAIN) -> str:
        """The trace id of native call id ``native`` in ``turn``."""
        if native not in self.scoped:
            return native
        return f"{native}#t{turn}" if principal == MAIN else f"{native}#t{turn}:{principal}"

    def call(self, env: dict[str, Any], native: str, turn: int | None, name: str, arguments: Any,
             principal: str = MAIN) -> ToolEvent:
        """Append the tool event of a call (no result yet) and register it for its result."""
        cid = self.trace_id(native, turn, principal)
        event = ToolEvent(**env, tool_call=ToolCall(id=cid, name=name, arguments=arguments,
                                                     native_tool_call_id=native if cid != native else None),
                          tool_result=None)
        self.calls[(principal, cid)] = event
        self.events.append(event)
        return event

    def find(self, native: Any, turn: int | None, principal: str = MAIN) -> ToolEvent | None:
        """The call with native id ``native`` in ``turn``, if there is one (a call of another
        turn never answers: results join calls within their turn only)."""
        if not isinstance(native, str):
            return None
        call = self.calls.get((principal, self.trace_id(native, turn, principal)))
        return call if call is not None and call.conversation_turn == turn else None

    def answered(self, env: dict[str, Any], native: Any, turn: int | None, *, principal: str = MAIN,
                 unmatched: str = "tool_result_unmatched", missing: str = "no call with id") -> ToolEvent | None:
        """The call a result with native id ``native`` answers — or, when no call of this turn
        has that id or it already has its result, ``None`` after appending the result as a
        ``native_event`` of type ``unmatched`` (rule 2: joined by native id only)."""
        call = self.find(native, turn, principal)
        if call is None or call.tool_result is not None:
            self.events.append(NativeEvent(**env, native_event_type=unmatched,
                                           status=f"{missing} {native!r} in this turn"))
            return None
        self.ledger.fold(call)
        return call

    # -- raw streams -------------------------------------------------------------------------
    def records(self, lines: Iterable[NativeLine], *, source: str, turn: int,
                kind: Callable[[dict[str, Any]], str] = record_type) -> Iterator[tuple[NativeLine, dict[str, Any]]]:
        """The lines of a turn's native stream that are records, with their data; the others
        are kept verbatim as unparseable (rule 6), in stream order. Each line is accounted:
        what the caller appends while it holds a record is that record's."""
        for line in lines:
            with self.line_handling(line, source=source, turn=turn, kind=kind):
                if line.data is None:
                    self.unparseable(line, source=source, turn=turn)
                else:
                    self.parsed_any = True
                    yield line, line.data

    def unparseable(self, line: NativeLine, *, source: str, turn: int) -> None:
        """A stdout line that is no record: kept verbatim with its parse error, and the trace
        degrades (rule 6)."""
        self.degrade(f"turn {turn}: stdout line {line.no} unparseable ({line.error})")
        self.events.append(RawStdoutEvent(**self.base(source=source, conversation_turn=turn, source_event_seq=line.no),
                                          text=line.text, stream_seq=line.no, parseable=False, parse_error=line.error))

    def stderr(self, files: TurnFiles, source: str) -> None:
        """The turn's stderr, when not blank, as one ``raw_stderr`` event."""
        if files.stderr is None or not files.stderr.is_file():
            return
        text = files.stderr.read_bytes().decode("utf-8", errors="replace")
        if text.strip():
            self.events.append(RawStderrEvent(**self.base(source=source, conversation_turn=files.index), text=text))

    # -- result ------------------------------------------------------------------------------
    def trace(self, *, nothing: str) -> NormalizedTrace:
        """The normalized trace: ``unavailable`` (with the note ``nothing``) when no native
        record parsed, else ``partial`` or ``complete``; complete only when every turn
        finished."""
        accounting = self.ledger.settle(self.events)
        for r in accounting.problems():
            kind = "unknown_record_type" if r.unknown_type else "unaccounted_record"
            what = "of unknown type" if r.unknown_type else "represented by no event"
            self.diagnostic(kind, {"source": r.source, "file": r.file, "seq": r.seq, "type": r.type, "turn": r.turn},
                            turn=r.turn, note=f"{r.file} record {r.seq} ({r.type}) {what}")
        status: StructuredTraceStatus
        if not self.parsed_any:
            self.notes.append(nothing)
            status = "unavailable"
        else:
            status = "partial" if self.partial else "complete"
        return NormalizedTrace(events=self.events, structured_trace_status=status,
                               trace_complete=self.parsed_any and not self.unfinished, notes=self.notes,
                               accounting=accounting)
