"""Read one run directory into memory, tolerantly.

Scoring reads only the archive (SPEC §10). Nothing here raises on a damaged
archive: every file that cannot be read leaves its field ``None`` and an error
string behind, and admission (:mod:`criteria.admission`) decides what that
means. Every path goes through :func:`tracetrial.archive.resolve_inside`, so a
symlink or an escape out of the run directory is never followed (SPEC §9).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tracetrial.archive import RunPaths, resolve_inside
from tracetrial.errors import PathEscapeError, TraceFileError
from tracetrial.results import ResultRecord, Summary
from tracetrial.trace import EventBase
from tracetrial.trace_io import load_events

GATEWAY_RECORDS = "gateway/requests.jsonl"
PROBE_RECORD = "gateway/probe.json"
LEDGER_DIR = "private/ledgers"
BASELINE_DIR = "private/baseline"
TASK_SNAPSHOT_DIR = "private/task"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def read_json_file(root: Path, rel: str) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, reason)`` for a JSON file inside ``root``."""
    try:
        path = resolve_inside(root, rel)
    except PathEscapeError as exc:
        return None, str(exc)
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{rel}: {_first_line(exc)}"


def read_jsonl_file(root: Path, rel: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """``(records, None)`` or ``(None, reason)``; every non-blank line must be a JSON object."""
    try:
        path = resolve_inside(root, rel)
    except PathEscapeError as exc:
        return None, str(exc)
    records: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                value = json.loads(line)
                if not isinstance(value, dict):
                    return None, f"{rel} line {number}: expected a JSON object"
                records.append(value)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{rel}: {_first_line(exc)}"
    return records, None


@dataclass
class RunData:
    """Everything scoring reads from one run directory.

    A field is ``None`` when its file is absent or unreadable; the matching
    ``*_error`` string says why.
    """

    root: Path
    result: ResultRecord | None = None
    result_error: str | None = None
    summary: Summary | None = None
    summary_error: str | None = None
    events: list[EventBase] | None = None
    events_error: str | None = None
    gateway: list[dict[str, Any]] | None = None
    gateway_error: str | None = None
    probe: dict[str, Any] | None = None
    probe_error: str | None = None
    ledgers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ledger_errors: dict[str, str] = field(default_factory=dict)

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.root)

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def baseline(self) -> Path:
        return self.root / BASELINE_DIR

    @cached_property
    def event_dicts(self) -> list[dict[str, Any]]:
        """The JSON form of every event (computed once; rules and selectors read this)."""
        return [e.model_dump(mode="json") for e in (self.events or [])]


def _ledger_files(root: Path) -> list[Path]:
    folder = root / LEDGER_DIR
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".jsonl")


def load_run(run_dir: Path) -> RunData:
    """Read ``run_dir`` into a :class:`RunData` (never raises for a damaged archive)."""
    root = Path(run_dir)
    data = RunData(root=root)

    raw, err = read_json_file(root, "result.json")
    if err is None:
        try:
            data.result = ResultRecord.model_validate(raw)
        except ValidationError as exc:
            err = f"result.json: {exc.error_count()} schema error(s), first: {exc.errors()[0]['msg']}"
    data.result_error = err

    raw, err = read_json_file(root, "summary.json")
    if err is None:
        try:
            data.summary = Summary.model_validate(raw)
        except ValidationError as exc:
            err = f"summary.json: {exc.error_count()} schema error(s), first: {exc.errors()[0]['msg']}"
    data.summary_error = err

    try:
        data.events = load_events(resolve_inside(root, "events.json"))
    except (PathEscapeError, TraceFileError) as exc:
        data.events_error = str(exc)

    gateway_file = root / GATEWAY_RECORDS
    if not gateway_file.exists() and not gateway_file.is_symlink():
        data.gateway = []  # the recorder writes no file for a run without provider requests
    else:
        data.gateway, data.gateway_error = read_jsonl_file(root, GATEWAY_RECORDS)
    probe, data.probe_error = read_json_file(root, PROBE_RECORD)
    if data.probe_error is None and not isinstance(probe, dict):
        data.probe_error = f"{PROBE_RECORD}: expected a JSON object"
    else:
        data.probe = probe

    for path in _ledger_files(root):
        records, err = read_jsonl_file(root, f"{LEDGER_DIR}/{path.name}")
        if err is not None:
            data.ledger_errors[path.stem] = err
        else:
            data.ledgers[path.stem] = records or []
    return data
