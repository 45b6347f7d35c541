"""The committed calibration record: incremental calibration keyed by pack and harness digests.

The calibration matrix grows as tasks × mutants (every task on the reference harness and on
each seeded-defect mutant). Re-running all of it on every change would outgrow CI, and most
changes touch neither a pack nor the reference harness. So each task's calibration result
is recorded (``ci/calibration/probe.json``, committed) together with what it was measured
on: the pack's probe-protocol digest (:func:`tracetrial.task.probe_digest`: every file a probe run
reads, so a task-card edit or a new live-only semantic criterion leaves it as it was), the reference harness's source
digest (which covers its mutants) and the mutant list. ``tracetrial calibrate --record FILE``
re-runs only the tasks whose key changed (or that were never calibrated, or were not
calibrated last time) and takes the others' rows from the record; ``--full-matrix`` re-runs
everything. A row from the record is shown as such, so nobody mistakes it for a fresh run.

Pure apart from reading and writing the record file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from reports.calibration import CALIBRATED, CalibrationReport, CalibrationRow, Status
from tracetrial.files import atomic_write_text
from tracetrial.model import StrictModel
from tracetrial.task import TaskPack

__all__ = ["CalibrationEntry", "CalibrationRecord", "RecordedRow", "load_record", "merge", "stale_tasks",
           "write_record"]


class RecordedRow(StrictModel):
    """One (variant, task) row as it was measured."""

    variant: str
    expected: list[str]
    flipped: list[str]
    status: Status
    detail: str = ""


class CalibrationEntry(StrictModel):
    """One task's calibration and the key it was measured under."""

    pack_digest: str = Field(description="The pack's probe-protocol digest (tracetrial.task.probe_digest).")
    reference_version: str = Field(description="The reference harness version (its source digest).")
    mutants: list[str]
    rows: list[RecordedRow]

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.status in CALIBRATED for r in self.rows)


class CalibrationRecord(StrictModel):
    """``ci/calibration/<model>.json``: the last calibration of every task, keyed by digests."""

    schema_: Literal["tt-calibration/1"] = Field(default="tt-calibration/1", alias="schema")
    model: str = "probe"
    tasks: dict[str, CalibrationEntry] = Field(default_factory=dict)


def load_record(path: Path) -> CalibrationRecord:
    """The record at ``path`` (an empty one when the file does not exist yet)."""
    if not path.is_file():
        return CalibrationRecord()
    return CalibrationRecord.model_validate_json(path.read_text(encoding="utf-8"))


def write_record(path: Path, record: CalibrationRecord) -> None:
    """Write the record (sorted, stable: a re-run that changes nothing changes no byte)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = record.model_copy(update={"tasks": dict(sorted(record.tasks.items()))})
    atomic_write_text(path, ordered.model_dump_json(indent=1, by_alias=True) + "\n")


def _key_matches(entry: CalibrationEntry | None, pack: TaskPack, reference_version: str,
                 mutants: Sequence[str]) -> bool:
    return (entry is not None and entry.pack_digest == pack.probe_digest
            and entry.reference_version == reference_version and entry.mutants == sorted(mutants))


def stale_tasks(record: CalibrationRecord, packs: Iterable[TaskPack], reference_version: str,
                mutants: Sequence[str]) -> list[str]:
    """Ids of the tasks to re-run: changed key, never recorded, or not calibrated last time."""
    out = []
    for pack in packs:
        entry = record.tasks.get(pack.id)
        if not _key_matches(entry, pack, reference_version, mutants) or entry is None or not entry.ok:
            out.append(pack.id)
    return sorted(out)


def merge(record: CalibrationRecord, fresh: CalibrationReport, packs: Iterable[TaskPack],
          reference_version: str, mutants: Sequence[str]) -> tuple[CalibrationRecord, CalibrationReport]:
    """The record updated with the freshly measured tasks, and the report over every pack.

    Tasks measured in ``fresh`` replace their entries; the other packs' rows come from the
    record (their detail says ``recorded``); tasks no longer in the suite are dropped.
    """
    by_task: dict[str, list[CalibrationRow]] = {}
    for row in fresh.rows:
        by_task.setdefault(row.task, []).append(row)
    tasks: dict[str, CalibrationEntry] = {}
    report = CalibrationReport()
    for pack in sorted(packs, key=lambda p: p.id):
        if pack.id in by_task:
            rows = by_task[pack.id]
            tasks[pack.id] = CalibrationEntry(
                pack_digest=pack.probe_digest, reference_version=reference_version, mutants=sorted(mutants),
                rows=[RecordedRow(variant=r.variant, expected=sorted(r.expected), flipped=sorted(r.flipped),
                                  status=r.status, detail=r.detail) for r in rows])
            report.rows.extend(rows)
            continue
        entry = record.tasks.get(pack.id)
        if entry is None or not _key_matches(entry, pack, reference_version, mutants):
            report.rows.append(CalibrationRow(pack.id, "reference", frozenset(), frozenset(), "not_run",
                                              "not measured in this run and no current record"))
            continue
        tasks[pack.id] = entry
        report.rows.extend(
            CalibrationRow(pack.id, r.variant, frozenset(r.expected), frozenset(r.flipped), r.status,
                           (r.detail + "; " if r.detail else "") + "recorded")
            for r in entry.rows)
    return record.model_copy(update={"tasks": tasks}), report
