"""Concurrency: runs never share a ledger or state; one run's processes keep one chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from apparatus.simulators import mcp_servers_for, verify_ledger
from tracetrial.task import TaskPack


def test_two_runs_at_once_never_share_ledger_or_state(pack: TaskPack, tmp_path: Path, connect: Any,
                                                      ledger_of: Any, state_of: Any) -> None:
    runs = {"a": (tmp_path / "a" / "private", "seed-a", "T-1"),
            "b": (tmp_path / "b" / "private", "seed-b", "T-2")}
    receipts: dict[str, str] = {}

    async def drive(key: str) -> None:
        run, seed, ticket = runs[key]
        async with connect(pack, run, seed) as c:
            for i in range(3):
                await c.session.call_tool("get_ticket", {"id": ticket, "run": key, "i": i})
                await anyio.lowlevel.checkpoint()
            res = await c.session.call_tool("close_ticket", {"id": ticket, "note": key})
            receipts[key] = res.structured_content["receipt"]

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, "a")
            tg.start_soon(drive, "b")

    anyio.run(both)
    servers = {k: mcp_servers_for(pack, run, seed)[0] for k, (run, seed, _) in runs.items()}
    assert set(servers["a"].args) & set(servers["b"].args) <= {
        "-m", "apparatus.simulators.serve", "--pack", str(pack.root), "--service", "tickets",
        "--state-dir", "--ledger", "--seed"}  # no shared path or seed
    assert receipts["a"] != receipts["b"]
    for key, (run, _, ticket) in runs.items():
        other = "b" if key == "a" else "a"
        calls = [r for r in ledger_of(run) if r["kind"] == "request" and r["tool"]]
        assert {r["arguments"].get("run", r["arguments"].get("note")) for r in calls} == {key}
        assert verify_ledger(run / "ledgers" / "tickets.jsonl").ok
        doc = state_of(run)
        closed = {i for i, t in doc["state"]["tickets"].items() if t["status"] == "closed"}
        assert closed == {"T-3", ticket}  # the other run's close never reached this state
        assert doc["state"]["closures"] == [{"id": ticket, "receipt": receipts[key], "note": key}]
        assert receipts[other] not in (run / "ledgers" / "tickets.jsonl").read_text()


def test_two_server_processes_of_one_run_share_one_chain(pack: TaskPack, tmp_path: Path, connect: Any,
                                                         ledger_of: Any, state_of: Any) -> None:
    """A harness may run two copies of a server for one run: no lost update, one ledger chain."""
    run = tmp_path / "private"

    async def drive() -> None:
        async with connect(pack, run, "seed") as c:
            for _ in range(10):
                res = await c.session.call_tool("queue_digest", {})
                assert not res.is_error

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            tg.start_soon(drive)

    anyio.run(both)
    check = verify_ledger(run / "ledgers" / "tickets.jsonl")
    assert check.ok, check.problems
    doc = state_of(run)
    assert doc["session"] == 2 and doc["served"]["queue_digest"] == 20
    assert doc["state"]["digests"] == 20  # every read-modify-write was serialized
    increments = [r["detail"] for r in ledger_of(run) if r["kind"] == "transition"
                  and r["detail"]["op"] == "increment"]
    assert [(d["old"], d["new"]) for d in increments] == [(None, 1)] + [(i, i + 1) for i in range(1, 20)]
