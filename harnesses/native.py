"""Reading archived native records: shared by every harness normalizer (pure, read-only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tracetrial.trace import RawStdoutEvent


def as_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (native records vary)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


@dataclass
class NativeLine:
    """One line of a native JSONL file: its data, or why it is not a JSON object."""

    no: int
    text: str
    data: dict[str, Any] | None
    error: str | None


def read_jsonl(path: Path | None) -> Iterator[NativeLine]:
    """Lines of a JSONL file; a line that is not a JSON object carries ``error`` (rule 6:
    malformed records stay visible, they never abort normalization)."""
    if path is None or not path.is_file():
        return
    raw = path.read_bytes().decode("utf-8", errors="replace")
    for no, text in enumerate(raw.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield NativeLine(no, text, None, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(data, dict):
            yield NativeLine(no, text, None, f"not a JSON object ({type(data).__name__})")
            continue
        yield NativeLine(no, text, data, None)


def unparseable_line(line: NativeLine, *, run_id: str, at: datetime, source: str, turn: int) -> RawStdoutEvent:
    """A stdout line that is not a valid record, kept verbatim with its parse error (SPEC §7
    rule 6); the caller marks the trace ``partial``."""
    return RawStdoutEvent(seq=1, timestamp=at, run_id=run_id, source=source, conversation_turn=turn,
                          source_event_seq=line.no, text=line.text, stream_seq=line.no, parseable=False,
                          parse_error=line.error)


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
