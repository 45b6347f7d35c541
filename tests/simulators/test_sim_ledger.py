"""Ledger format and integrity detection: edited, truncated, reordered, removed, missing."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators import GENESIS, Ledger, read_head, read_ledger, verify_ledger
from apparatus.simulators.errors import LedgerError
from apparatus.simulators.ledger import head_path


def _ledger(tmp_path: Path, n: int = 5) -> Path:
    led = Ledger(tmp_path / "ledgers" / "tickets.jsonl", "tickets")
    led.init()
    for i in range(n):
        led.append("request", tool="get_ticket", arguments={"id": f"T-{i}", "é": [i, None]},
                   detail={"method": "tools/call", "attempt": i + 1})
    return led.path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _rewrite(path: Path, lines: list[str]) -> None:
    path.write_text("".join(lines), encoding="utf-8")


def _rehash(rec: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in rec.items() if k != "hash"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {**body, "hash": hashlib.sha256(canon.encode("utf-8")).hexdigest()}


def test_record_format_and_hash_chain(tmp_path: Path) -> None:
    path = _ledger(tmp_path, 3)
    recs = read_ledger(path)
    assert [list(r) for r in recs] == [["seq", "time", "kind", "service", "tool", "arguments", "detail",
                                        "prev", "hash"]] * 3
    assert [r["seq"] for r in recs] == [1, 2, 3]
    assert recs[0]["prev"] == GENESIS and recs[1]["prev"] == recs[0]["hash"]
    assert recs[0]["time"].endswith("Z") and recs[0]["arguments"] == {"id": "T-0", "é": [0, None]}
    for rec in recs:  # the hash is recomputable from the spec's definition alone
        assert _rehash(rec)["hash"] == rec["hash"]
    assert read_head(path) == recs[-1]["hash"]
    assert head_path(path).read_text() == recs[-1]["hash"] + "\n"
    check = verify_ledger(path)
    assert check.ok and check.records == 3 and check.head == recs[-1]["hash"] and check.problems == []


def test_empty_ledger_has_genesis_head(tmp_path: Path) -> None:
    path = _ledger(tmp_path, 0)
    assert path.read_text() == "" and read_head(path) == GENESIS
    check = verify_ledger(path)
    assert check.ok and check.records == 0 and check.head == GENESIS


def test_edited_record(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    lines = _lines(path)
    rec = json.loads(lines[1])
    rec["arguments"]["id"] = "T-99"
    lines[1] = json.dumps(rec, ensure_ascii=False) + "\n"
    _rewrite(path, lines)
    check = verify_ledger(path)
    assert not check.ok
    assert check.problems == ["line 2 (seq 2): hash does not match the record's content (the record was edited)"]


def test_edited_record_with_recomputed_hash(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    lines = _lines(path)
    rec = json.loads(lines[2])
    rec["detail"]["attempt"] = 42
    lines[2] = json.dumps(_rehash(rec), ensure_ascii=False) + "\n"
    _rewrite(path, lines)
    check = verify_ledger(path)
    assert check.problems == [("line 4 (seq 4): prev does not match the hash of the record before it "
                              "(a record before it was rewritten, removed or reordered)")]


def test_rewritten_chain_and_sidecar_caught_by_expected_head(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    trusted = read_head(path)
    recs = read_ledger(path)
    recs[0]["arguments"] = {"id": "forged"}
    prev = GENESIS
    out = []
    for rec in recs:  # a forger who rebuilds the whole chain and the sidecar
        rec["prev"] = prev
        rec = _rehash(rec)
        prev = rec["hash"]
        out.append(json.dumps(rec, ensure_ascii=False) + "\n")
    _rewrite(path, out)
    head_path(path).write_text(prev + "\n")
    assert verify_ledger(path).ok  # the sidecar alone cannot catch this ...
    check = verify_ledger(path, expected_head=trusted)  # ... a head kept elsewhere does
    assert not check.ok
    assert any("sidecar" in p and "replaced" in p for p in check.problems)
    assert any("truncated or its tail rewritten" in p for p in check.problems)


def test_truncated_whole_records(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    _rewrite(path, _lines(path)[:3])
    check = verify_ledger(path)
    assert check.records == 3
    assert check.problems == [("the last record (seq 3) is not the recorded head "
                              f"{read_head(path)[:12]}… (the ledger was truncated or its tail rewritten)")]


def test_truncated_mid_record(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-40])
    check = verify_ledger(path)
    assert not check.ok
    assert check.problems[0] == ("line 5: file ends in the middle of a record "
                                 "(the ledger was truncated or a write was interrupted)")
    assert any("not the recorded head" in p for p in check.problems)
    with pytest.raises(LedgerError, match="not a ledger record"):
        Ledger(path, "tickets").append("request")  # a damaged ledger is never extended


def test_reordered_records(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    lines = _lines(path)
    lines[1], lines[2] = lines[2], lines[1]
    _rewrite(path, lines)
    check = verify_ledger(path)
    assert check.problems == [("records are out of order: seq order on file is [1, 3, 2, 4, 5] "
                              "(records were reordered)")]


def test_removed_record(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    lines = _lines(path)
    del lines[2]
    _rewrite(path, lines)
    check = verify_ledger(path)
    assert check.problems == ["records with seq [3] are missing (removed from the ledger)",
                              "line 3 (seq 4): prev points to a record that is not in the ledger"]


def test_appended_after_head(tmp_path: Path) -> None:
    path = _ledger(tmp_path, 2)
    head = read_head(path)
    recs = read_ledger(path)
    extra = _rehash({"seq": 3, "time": recs[-1]["time"], "kind": "issued", "service": "tickets",
                     "tool": None, "arguments": None, "detail": {"value": "forged"}, "prev": head})
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(extra) + "\n")
    check = verify_ledger(path)
    assert check.problems == [("1 record(s) follow the recorded head (seq 2): records were appended "
                              "after the head was written")]


def test_missing_ledger_and_missing_head(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    path.unlink()
    check = verify_ledger(path)
    assert not check.ok and check.head is None and check.records == 0
    assert "was deleted" in check.problems[0]

    empty = _ledger(tmp_path / "e", 0)
    empty.unlink()
    assert "created empty" in verify_ledger(empty).problems[0]

    head_path(path).unlink()
    assert "was lost or never created" in verify_ledger(path).problems[0]

    other = _ledger(tmp_path / "o", 2)
    head_path(other).unlink()
    check = verify_ledger(other)
    assert check.records == 2
    assert check.problems == ["head sidecar tickets.jsonl.head is missing: truncation cannot be ruled out"]


def test_malformed_lines(tmp_path: Path) -> None:
    path = _ledger(tmp_path, 2)
    lines = _lines(path)
    lines.insert(1, "{not json\n")
    lines.append(json.dumps({"seq": 3, "kind": "request"}) + "\n")
    _rewrite(path, lines)
    problems = verify_ledger(path).problems
    assert problems[0].startswith("line 2: not valid JSON")
    assert problems[1].startswith("line 4: wrong fields (missing ['time', 'service'")
    with pytest.raises(LedgerError, match="line 2: not valid JSON"):
        read_ledger(path)


def _append_many(path: str, n: int) -> None:
    led = Ledger(Path(path), "tickets")
    for i in range(n):
        led.append("request", tool="t", arguments={"i": i})


def test_concurrent_appenders_keep_one_chain(tmp_path: Path) -> None:
    path = _ledger(tmp_path, 0)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), 25)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    check = verify_ledger(path)
    assert check.ok, check.problems
    assert check.records == 75
