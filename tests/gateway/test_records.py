"""The per-run writer: arrival order, whole lines, bodies."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

from apparatus.gateway.records import RequestRecord, RunLog, read_records


def _record(index: int, run_id: str = "r") -> RequestRecord:
    return RequestRecord(index=index, run_id=run_id, path="/v1/messages", wire_format="anthropic", model="m",
                         stream=True, started_at="2026-11-30T00:00:00+00:00", duration_ms=1.0, status=200,
                         error=None, tools=[], inventory_present=False, inventory_complete=False,
                         inventory_fingerprint=None, tool_results=[], usage=None, body_sha256="0" * 64,
                         last_user_text=None)


def test_lines_are_written_in_arrival_order_even_when_finished_out_of_order(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "r", record_bodies=False)
    idx = [log.arrive(b"{}") for _ in range(3)]
    assert idx == [0, 1, 2]
    log.finish(_record(2))
    log.finish(_record(1))
    assert read_records(log.path) == []                        # 0 still open: nothing may overtake it
    assert log.counts() == {"arrived": 3, "written": 0}
    log.finish(_record(0))
    assert [r["index"] for r in read_records(log.path)] == [0, 1, 2]
    assert list(read_records(log.path)[0]) == list(RequestRecord.model_fields)   # schema field order


def test_bodies_are_kept_byte_for_byte_only_when_asked(tmp_path: Path) -> None:
    with_bodies = RunLog(tmp_path / "a", record_bodies=True)
    without = RunLog(tmp_path / "b", record_bodies=False)
    raw = b'{"n": 123456789012345678901234567890}'
    assert with_bodies.arrive(raw) == 0 and without.arrive(raw) == 0
    assert (tmp_path / "a" / "bodies" / "0.json").read_bytes() == raw
    assert not (tmp_path / "b" / "bodies").exists()


def test_concurrent_finishers_never_lose_or_tear_a_line(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "r", record_bodies=False)
    n = 200
    indices = [log.arrive(b"{}") for _ in range(n)]
    random.Random(7).shuffle(indices)
    chunks = [indices[i::8] for i in range(8)]
    threads = [threading.Thread(target=lambda c=c: [log.finish(_record(i)) for i in c]) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r["index"] for r in read_records(log.path)] == list(range(n))


def test_planted_secrets_are_counted_then_redacted(tmp_path: Path) -> None:
    """Lines and bodies are written redacted (values only, key shapes kept exact); each record
    counts the planted secrets of its raw body, escaped forms included (issue 17)."""
    from tracetrial.redact import Redactor

    secret, other = "planted-3f9a0c71be", 'quo"ted-secret'
    log = RunLog(tmp_path / "r", record_bodies=True, redactor=Redactor({secret, other}, patterns=False),
                 planted=(secret, other))
    raw = json.dumps({"messages": [{"content": f"{secret} and {other} and {secret}"}],
                      "note": "sk-ant-abcdefghijklmnopqrstuvwx"}).encode()
    assert log.planted_hits(raw) == [2, 1]
    index = log.arrive(raw)
    record = _record(index).model_copy(update={"last_user_text": f"{secret} / {other}", "planted_secrets": [2, 1]})
    log.finish(record)
    body = (tmp_path / "r" / "bodies" / "0.json").read_bytes()
    line = log.path.read_bytes()
    for data in (body, line):
        assert secret.encode() not in data and b"quo" not in data
    assert b"sk-ant-abcdefghijklmnopqrstuvwx" in body        # not a planted value: recorded exactly
    assert read_records(log.path)[0]["last_user_text"] == "[REDACTED] / [REDACTED]"
    assert read_records(log.path)[0]["planted_secrets"] == [2, 1]
