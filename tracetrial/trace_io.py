"""Reading, writing and validating ``events.json`` (SPEC §7).

Errors are :class:`TraceFileError` with the file, the event index and field,
and what to do about it, never a bare pydantic traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from tracetrial.errors import TraceFileError
from tracetrial.files import atomic_write_text
from tracetrial.trace import EVENT_CLASSES, Event, EventBase

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENTS_ADAPTER: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


def _describe(error: ValidationError, where: str, kind: str | None = None) -> str:
    parts = []
    for item in error.errors()[:5]:
        locs = list(item["loc"])
        if kind is not None and locs[:1] == [kind]:
            locs = locs[1:]  # the discriminator tag pydantic prepends
        loc = ".".join(str(p) for p in locs)
        parts.append(f"{where} field '{loc}': {item['msg']}")
    more = len(error.errors()) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def parse_event(data: Any, *, where: str = "event") -> EventBase:
    """Validate one JSON object as a Trace IR event, with a precise error."""
    if not isinstance(data, dict):
        raise TraceFileError(f"{where}: expected a JSON object, got {type(data).__name__}")
    kind = data.get("event_type")
    if kind not in EVENT_CLASSES:
        known = ", ".join(sorted(EVENT_CLASSES))
        raise TraceFileError(
            f"{where}: unknown event_type {kind!r}; known types: {known}. "
            "Map unrecognised native records to 'native_event' instead."
        )
    try:
        event = EVENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise TraceFileError(_describe(exc, f"{where} ({kind})", kind)) from None
    return event


def check_sequence(events: Sequence[EventBase], *, where: str = "events") -> None:
    """Enforce a contiguous 1-based ``seq`` and a single ``run_id``."""
    run_ids = {e.run_id for e in events}
    if len(run_ids) > 1:
        raise TraceFileError(f"{where}: events belong to several runs: {sorted(run_ids)}")
    for index, event in enumerate(events):
        if event.seq != index + 1:
            raise TraceFileError(
                f"{where}[{index}]: seq is {event.seq}, expected {index + 1} "
                "(seq must be contiguous from 1 in array order; renumber with "
                "tracetrial.trace_io.renumber)"
            )


def load_events(path: Path) -> list[EventBase]:
    """Read and validate an ``events.json`` file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise TraceFileError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(raw, list):
        raise TraceFileError(f"{path}: expected a JSON array of events, got {type(raw).__name__}")
    events = [parse_event(item, where=f"{path}[{i}]") for i, item in enumerate(raw)]
    check_sequence(events, where=str(path))
    return events


def dump_events(events: Sequence[EventBase]) -> list[dict[str, Any]]:
    """The JSON form of a trace (optional envelope fields omitted when unset)."""
    check_sequence(events)
    return [e.model_dump(mode="json") for e in events]


def write_events(path: Path, events: Sequence[EventBase]) -> None:
    """Validate and write ``events.json`` (atomic replace)."""
    atomic_write_text(path, json.dumps(dump_events(events), indent=1, ensure_ascii=False) + "\n")


def renumber(events: Iterable[EventBase]) -> list[EventBase]:
    """Assign a contiguous ``seq`` in iteration order (the caller orders by native order)."""
    out: list[EventBase] = []
    for index, event in enumerate(events):
        out.append(event.model_copy(update={"seq": index + 1}))
    return out
