"""Re-derive a run's Trace IR from its archive alone (``tracetrial rescore --renormalize``).

What a user does after a normalizer fix, without re-running any agent: the archived native
records, the per-turn records of ``result.json`` and the archived gateway records go through
the *current* normalizer of the run's harness and the same trace assembly as the live cell,
and ``events.json`` and ``summary.json`` are rewritten. Normalizers are pure over data (the
recorded turn time is their fallback timestamp), so re-deriving twice gives byte-identical
files.

An archive whose manifest no longer matches its files is refused (re-deriving would launder
a tampered record into a sealed one), as is an archive written before ``result.json``
recorded its turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from apparatus.gateway.records import read_records
from harnesses.assemble import assemble, summarize, turn_outcome
from harnesses.base import NormalizedTrace
from harnesses.registry import get_harness
from tracetrial.archive import RunArchive, RunPaths, verify_manifest
from tracetrial.redact import Redactor
from tracetrial.results import ResultRecord
from tracetrial.task import load_task
from tracetrial.trace import EventBase
from tracetrial.trace_io import write_events

__all__ = ["RederiveError", "Rederived", "rederive", "renormalize_run"]


class RederiveError(Exception):
    """The archive cannot be re-derived (the message says why and what to do)."""


@dataclass(frozen=True)
class Rederived:
    """The re-derived trace of one run and what changed."""

    events: list[EventBase]
    changed: bool


@dataclass(frozen=True)
class _Derived:
    record: ResultRecord
    task_secrets: list[str]
    events: list[EventBase]
    native: NormalizedTrace
    records: list[dict[str, Any]]


def _derive(run_dir: Path) -> _Derived:
    paths = RunPaths(run_dir)
    try:
        record = ResultRecord.model_validate_json(paths.result.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RederiveError(f"{paths.result}: unreadable result.json ({type(exc).__name__})") from None
    if record.status in ("skipped", "apparatus_error"):
        raise RederiveError(f"{run_dir}: a {record.status} cell has no native records to re-derive")
    execution = record.timing.get("execution")
    if not record.turns or record.started_at is None or execution is None or execution.finished_at is None:
        raise RederiveError(f"{run_dir}: result.json predates per-turn records (turns, started_at); "
                            "re-run the cell with --tt-rerun to archive them")
    ident = record.identity
    task = load_task(paths.private / "task" / ident.task_id)
    adapter = get_harness(ident.harness, installed=False)  # normalizing needs no install
    outcomes = [turn_outcome(t, paths.native) for t in record.turns]
    native = adapter.normalize(paths, outcomes, ident.run_id)
    failure = (record.failure.type, record.failure.message, record.failure.timed_out) if record.failure else None
    records = read_records(paths.gateway / "requests.jsonl")
    events = assemble(run_id=ident.run_id, task_id=task.id, harness=ident.harness, model=ident.model,
                      form=task.spec.conversation, turns=task.user_turns, outcomes=outcomes, native=native,
                      gateway_records=records, started=datetime.fromisoformat(record.started_at),
                      finished=datetime.fromisoformat(execution.finished_at), failure=failure)
    return _Derived(record, list(task.spec.secrets), events, native, list(records))


def rederive(run_dir: Path) -> list[EventBase]:
    """The Trace IR the current normalizer derives from the archive of ``run_dir`` (pure
    over the archived files; writes nothing).

    Raises:
        RederiveError: too old an archive, or an unreadable record.
    """
    return _derive(run_dir).events


def renormalize_run(run_dir: Path) -> Rederived:
    """Rewrite ``events.json`` and ``summary.json`` of one run from its native records and
    re-seal the manifest. Refuses an archive whose manifest does not verify.

    Raises:
        RederiveError: tampered or too old an archive, or an unreadable record.
    """
    check = verify_manifest(run_dir)
    if not check.ok:
        raise RederiveError(f"{run_dir}: the manifest does not match the archive ({'; '.join(check.problems[:3])}); "
                            "refusing to re-derive a tampered record")
    paths = RunPaths(run_dir)
    before = paths.events.read_bytes() if paths.events.is_file() else b""
    d = _derive(run_dir)
    execution = d.record.timing["execution"]
    wall = execution.seconds if execution.seconds is not None else 0.0
    write_events(paths.events, d.events)
    archive = RunArchive(paths, Redactor.from_environment(extra=d.task_secrets))
    archive.write_json("summary.json", summarize(d.record.identity.run_id, d.events, d.native, d.records, wall,
                                                 d.record.failure is not None))
    archive.seal(d.record.identity.run_id)
    return Rederived(events=d.events, changed=paths.events.read_bytes() != before)
