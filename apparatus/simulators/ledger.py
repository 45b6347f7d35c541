"""The private, append-only, hash-chained ledger of a simulator (SPEC §3, §9).

One JSON object per line at ``<run>/private/ledgers/<service>.jsonl``::

    {"seq": 1, "time": "2026-09-01T10:00:00.000000Z", "kind": "request",
     "service": "tickets", "tool": "get_ticket", "arguments": {"id": "T-1"},
     "detail": {...}, "prev": "000…0", "hash": "<sha256 hex>"}

``hash`` is the SHA-256 of the canonical JSON (``sort_keys=True``,
``separators=(',', ':')``, ``ensure_ascii=False``, UTF-8) of the record
without ``hash``; ``prev`` is the previous record's hash (64 zeros for the
first). After every append the new head digest is written, fsync'd, to the
sidecar ``<ledger>.head`` so that a truncated or deleted ledger is detectable.
A ledger that was created but never written holds no records and its head is
:data:`GENESIS`.

The ledger is authoritative evidence of what happened in the service. The
criteria engine calls :func:`verify_ledger` at admission; a failed check is a
simulator integrity failure (SPEC §9).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict

from apparatus.simulators.errors import LedgerError
from tracetrial.files import atomic_write_text

#: ``prev`` of the first record, and the head of a ledger without records.
GENESIS = "0" * 64

LedgerKind = Literal["request", "issued", "transition", "refused", "error"]
KINDS: frozenset[str] = frozenset(("request", "issued", "transition", "refused", "error"))
FIELDS: tuple[str, ...] = ("seq", "time", "kind", "service", "tool", "arguments", "detail", "prev", "hash")


def canonical_json(value: Any) -> str:
    """The canonical JSON text the chain hashes (also used to compare values exactly)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``record`` without its ``hash`` field."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def head_path(ledger: Path) -> Path:
    """The sidecar holding the head digest: ``<ledger>.head``."""
    return ledger.with_name(ledger.name + ".head")


def read_head(ledger: Path) -> str | None:
    """The digest recorded in the sidecar, or ``None`` when the sidecar is missing."""
    try:
        return head_path(ledger).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_head(ledger: Path, digest: str) -> None:
    target = atomic_write_text(head_path(ledger), digest + "\n", fsync=True)
    _fsync_dir(target.parent)


def _last_line(fh: BinaryIO, size: int) -> bytes:
    """The last complete line of an open binary file of ``size`` bytes (without newline)."""
    chunk = 4096
    while True:
        start = max(0, size - chunk)
        fh.seek(start)
        data = fh.read(size - start)
        body = data[:-1] if data.endswith(b"\n") else data
        cut = body.rfind(b"\n")
        if cut >= 0 or start == 0:
            return body[cut + 1:]
        chunk *= 4


class Ledger:
    """Appends records to one service's ledger.

    Safe across processes: every append holds an exclusive ``flock`` on the
    ledger file and reads the previous record from the file itself, so two
    server processes of the same run (a harness restarting its MCP server) keep
    one chain.
    """

    def __init__(self, path: Path, service: str):
        self.path = path
        self.service = service

    def init(self) -> None:
        """Create the empty ledger and its genesis head if they do not exist yet (idempotent)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                if not head_path(self.path).exists() and fh.seek(0, os.SEEK_END) == 0:
                    _write_head(self.path, GENESIS)
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def append(self, kind: LedgerKind, *, tool: str | None = None, arguments: Any = None,
               detail: Any = None) -> dict[str, Any]:
        """Append one record, fsync it, update the head sidecar; return the record.

        Raises:
            LedgerError: ``kind`` is unknown, a value is not JSON, or the file's last
                line is not a ledger record (the chain cannot be continued safely).
        """
        if kind not in KINDS:
            raise LedgerError(f"unknown ledger kind {kind!r}; use one of {sorted(KINDS)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                size = fh.seek(0, os.SEEK_END)
                seq, prev = 1, GENESIS
                if size:
                    last = _last_line(fh, size)
                    try:
                        tail = json.loads(last)
                        seq, prev = int(tail["seq"]) + 1, str(tail["hash"])
                    except (ValueError, KeyError, TypeError) as exc:
                        raise LedgerError(
                            f"{self.path}: the last line is not a ledger record ({exc}); "
                            "the ledger was damaged, refusing to extend it"
                        ) from exc
                record: dict[str, Any] = {
                    "seq": seq, "time": _utc_now(), "kind": kind, "service": self.service,
                    "tool": tool, "arguments": arguments, "detail": detail, "prev": prev,
                }
                try:
                    record["hash"] = record_hash(record)
                    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise LedgerError(f"{self.path}: record is not JSON-serializable: {exc}") from exc
                fh.seek(0, os.SEEK_END)
                fh.write(line.encode("utf-8") + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
                _write_head(self.path, record["hash"])
                return record
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """All records of a ledger, in file order.

    Raises:
        LedgerError: the file is missing or a line is not a JSON object.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise LedgerError(f"ledger {path} is missing") from exc
    out: list[dict[str, Any]] = []
    for no, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise LedgerError(f"{path}, line {no}: not valid JSON ({exc})") from exc
        if not isinstance(rec, dict):
            raise LedgerError(f"{path}, line {no}: not a JSON object")
        out.append(rec)
    return out


class LedgerCheck(BaseModel):
    """The outcome of :func:`verify_ledger`. ``ok`` iff ``problems`` is empty."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: bool
    problems: list[str]
    head: str | None
    """The hash of the last valid-looking record (:data:`GENESIS` for an empty ledger,
    ``None`` when the ledger is missing or unreadable)."""
    records: int


def _parse_lines(path: Path, raw: bytes, problems: list[str]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        problems.append(f"line {len(lines)}: file ends in the middle of a record "
                        "(the ledger was truncated or a write was interrupted)")
        lines.pop()
    for no, line in enumerate(lines, start=1):
        try:
            rec = json.loads(line)
        except ValueError as exc:
            problems.append(f"line {no}: not valid JSON ({exc.__class__.__name__}: {exc})")
            continue
        if not isinstance(rec, dict):
            problems.append(f"line {no}: not a JSON object")
            continue
        missing = [f for f in FIELDS if f not in rec]
        extra = sorted(set(rec) - set(FIELDS))
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
            problems.append(f"line {no}: wrong fields ({'; '.join(parts)})")
            continue
        rec["_line"] = no
        records.append(rec)
    return records


def _check_sequence(records: list[dict[str, Any]], problems: list[str]) -> bool:
    """Seq numbers must be 1..n in order. Returns True when they are."""
    seqs = [r["seq"] for r in records]
    if seqs == list(range(1, len(seqs) + 1)):
        return True
    if not all(isinstance(s, int) for s in seqs):
        bad = [r["_line"] for r in records if not isinstance(r["seq"], int)]
        problems.append(f"lines {bad}: seq is not an integer")
        return False
    if len(set(seqs)) != len(seqs):
        dups = sorted({s for s in seqs if seqs.count(s) > 1})
        problems.append(f"duplicate seq numbers {dups} (records were copied or inserted)")
    if sorted(seqs) != seqs:
        problems.append(f"records are out of order: seq order on file is {seqs} (records were reordered)")
    present = set(seqs)
    top = max(seqs)
    gaps = [s for s in range(1, top + 1) if s not in present]
    if gaps:
        problems.append(f"records with seq {gaps} are missing (removed from the ledger)")
    return False


def verify_ledger(path: Path, expected_head: str | None = None) -> LedgerCheck:
    """Check a ledger's integrity: edits, truncation, reordering, removal and loss.

    Args:
        path: the ledger (``<run>/private/ledgers/<service>.jsonl``).
        expected_head: the head digest the caller trusts (e.g. recorded outside the
            ledger when the run ended). ``None``: use the ``<ledger>.head`` sidecar,
            and report its absence as a problem.

    Returns:
        A :class:`LedgerCheck`; every problem names the line or seq and what it means.
    """
    problems: list[str] = []
    sidecar = read_head(path)
    expected = expected_head if expected_head is not None else sidecar
    if expected_head is not None and sidecar is not None and sidecar != expected_head:
        problems.append(f"head sidecar {head_path(path).name} says {sidecar[:12]}… but the expected "
                        f"head is {expected_head[:12]}… (the ledger and its sidecar were replaced)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if expected is None:
            problems.append(f"ledger {path.name} is missing and so is its head sidecar "
                            "(the ledger was lost or never created)")
        elif expected == GENESIS:
            problems.append(f"ledger {path.name} is missing (its head says it was created empty)")
        else:
            problems.append(f"ledger {path.name} is missing but its head {expected[:12]}… "
                            "shows records were written (the ledger was deleted)")
        return LedgerCheck(ok=False, problems=problems, head=None, records=0)
    if expected is None:
        problems.append(f"head sidecar {head_path(path).name} is missing: truncation cannot be "
                        "ruled out")

    records = _parse_lines(path, raw, problems)
    by_hash: dict[str, dict[str, Any]] = {}
    services = {r["service"] for r in records}
    if len(services) > 1:
        problems.append(f"records name several services {sorted(map(str, services))}")
    for rec in records:
        label = f"line {rec['_line']} (seq {rec['seq']})"
        if rec["kind"] not in KINDS:
            problems.append(f"{label}: unknown kind {rec['kind']!r}")
        body = {k: v for k, v in rec.items() if k != "_line"}
        try:
            actual = record_hash(body)
        except (TypeError, ValueError):
            actual = ""
        if actual != rec["hash"]:
            problems.append(f"{label}: hash does not match the record's content (the record was edited)")
        by_hash[str(rec["hash"])] = rec

    in_order = _check_sequence(records, problems)
    prev = GENESIS
    for rec in records:
        if rec["prev"] != prev:
            label = f"line {rec['_line']} (seq {rec['seq']})"
            if in_order:
                problems.append(f"{label}: prev does not match the hash of the record before it "
                                "(a record before it was rewritten, removed or reordered)")
            elif rec["prev"] not in by_hash and rec["prev"] != GENESIS:
                problems.append(f"{label}: prev points to a record that is not in the ledger")
        prev = str(rec["hash"])

    head = str(records[-1]["hash"]) if records else GENESIS
    if expected is not None and head != expected:
        if expected == GENESIS:
            problems.append(f"the head says the ledger is empty but it holds {len(records)} record(s) "
                            "(records were added after the run)")
        elif not records:
            problems.append(f"the ledger is empty but its head is {expected[:12]}… "
                            "(all records were removed)")
        elif expected in by_hash:
            at = by_hash[expected]
            after = len(records) - records.index(at) - 1
            problems.append(f"{after} record(s) follow the recorded head (seq {at['seq']}): "
                            "records were appended after the head was written")
        else:
            problems.append(f"the last record (seq {records[-1]['seq']}) is not the recorded head "
                            f"{expected[:12]}… (the ledger was truncated or its tail rewritten)")
    return LedgerCheck(ok=not problems, problems=problems, head=head, records=len(records))
