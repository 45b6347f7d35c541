"""Reading archived native records: shared by every harness normalizer (pure, read-only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
