"""Real MCP round trips: the SDK's stdio client spawns ``python -m apparatus.simulators.serve``.

One test per building block of the service format, all against the example
pack ``fixtures/T6-ticket-desk-001`` (its ``simulators/tickets.yaml``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from mcp.shared.exceptions import MCPError

from apparatus.simulators import (
    SimulatorConfigError,
    derive_value,
    load_service,
    read_ledger,
    serve,
    verify_ledger,
)
from tracetrial.task import TaskPack, load_task
from tracetrial.values import ValueSpec

SEED = "run-seed-7f3a"


def _run(fn: Any) -> Any:
    return anyio.run(fn)


def _records(ledger: list[dict[str, Any]], kind: str, tool: str | None = None) -> list[dict[str, Any]]:
    return [r for r in ledger if r["kind"] == kind and (tool is None or r["tool"] == tool)]


def test_plain_tool_exact_schema_and_arguments(pack: TaskPack, tmp_path: Path, connect: Any,
                                               ledger_of: Any) -> None:
    run = tmp_path / "private"
    sent = {"id": "T-1", "note": "naïve ✓ 😀", "big": 123456789012345678901234567890,
            "nested": {"null": None, "list": [1.5, True, "x"]}}

    async def go() -> tuple[types.ListToolsResult, types.CallToolResult, types.CallToolResult]:
        async with connect(pack, run, SEED) as c:
            listed = await c.session.list_tools()
            got = await c.session.call_tool("get_ticket", {"id": "T-1"})
            echo = await c.session.call_tool("get_ticket", sent)
            return listed, got, echo

    listed, got, echo = _run(go)
    tools = {t.name: t for t in listed.tools}
    declared = yaml.safe_load((pack.root / "simulators" / "tickets.yaml").read_text())["tools"][0]
    assert tools["get_ticket"].input_schema == declared["input_schema"]
    assert tools["get_ticket"].output_schema == declared["output_schema"]
    assert tools["get_ticket"].annotations is not None and tools["get_ticket"].annotations.read_only_hint
    assert "search_archive" not in tools  # hidden until unlocked
    assert not got.is_error
    assert got.structured_content == {"id": "T-1", "title": "Printer on fire", "status": "open",
                                      "escalation": got.structured_content["escalation"]}
    assert got.structured_content["escalation"].startswith("ESC-")
    assert got.content[0].text.startswith('{"id": "T-1"')  # type: ignore[union-attr]
    assert not echo.is_error

    ledger = ledger_of(run)
    methods = [r["detail"]["method"] for r in _records(ledger, "request")]
    assert methods[:2] == ["initialize", "tools/list"]
    calls = _records(ledger, "request", "get_ticket")
    assert [c["arguments"] for c in calls] == [{"id": "T-1"}, sent]  # exactly as received
    assert verify_ledger(run / "ledgers" / "tickets.jsonl").ok


def test_issued_one_off_value_is_seeded_and_recorded(pack: TaskPack, tmp_path: Path, connect: Any,
                                                     ledger_of: Any) -> None:
    async def close(run: Path, seed: str) -> str:
        async with connect(pack, run, seed) as c:
            res = await c.session.call_tool("close_ticket", {"id": "T-1"})
            assert not res.is_error, res
            return str(res.structured_content["receipt"])

    a = _run(lambda: close(tmp_path / "a" / "private", SEED))
    b = _run(lambda: close(tmp_path / "b" / "private", SEED))
    c = _run(lambda: close(tmp_path / "c" / "private", "another-seed"))
    assert a == b != c
    assert a == derive_value(SEED, ValueSpec(kind="code", length=10, prefix="RCPT-"),
                             service="tickets", name="receipt", scope="close_ticket", index=1)
    issued = _records(ledger_of(tmp_path / "a" / "private"), "issued", "close_ticket")
    assert [(r["detail"]["name"], r["detail"]["value"]) for r in issued] == [("receipt", a)]
    request = _records(ledger_of(tmp_path / "a" / "private"), "request", "close_ticket")[0]
    assert issued[0]["detail"]["request_seq"] == request["seq"]


def test_state_transition_persists_across_sessions(pack: TaskPack, tmp_path: Path, connect: Any,
                                                   ledger_of: Any, state_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> tuple[Any, Any]:
        async with connect(pack, run, SEED) as c:
            closed = await c.session.call_tool("close_ticket", {"id": "T-2", "note": "fixed"})
        async with connect(pack, run, SEED) as c:  # a new server process: session 2
            again = await c.session.call_tool("get_ticket", {"id": "T-2"})
        return closed, again

    closed, again = _run(go)
    assert closed.structured_content["status"] == "closed"
    assert closed.structured_content["was"] == "open"
    assert again.structured_content["status"] == "closed"
    doc = state_of(run)
    assert doc["session"] == 2
    assert doc["state"]["tickets"]["T-2"]["status"] == "closed"
    assert doc["state"]["closures"] == [{"id": "T-2", "receipt": closed.structured_content["receipt"],
                                         "note": "fixed"}]
    transitions = [r["detail"] for r in _records(ledger_of(run), "transition", "close_ticket")]
    assert transitions[0]["op"] == "set" and transitions[0]["at"] == ["tickets", "T-2", "status"]
    assert (transitions[0]["old"], transitions[0]["new"]) == ("open", "closed")
    assert transitions[1]["op"] == "append" and transitions[1]["at"] == ["closures"]
    sessions = [r["detail"]["session"] for r in _records(ledger_of(run), "transition")
                if r["detail"]["op"] == "session_start"]
    assert sessions == [1, 2]


def test_structured_errors(pack: TaskPack, tmp_path: Path, connect: Any, ledger_of: Any,
                           state_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> list[Any]:
        async with connect(pack, run, SEED) as c:
            return [await c.session.call_tool("get_ticket", {"id": "T-9"}),
                    await c.session.call_tool("get_ticket", {"id": 7}),
                    await c.session.call_tool("no_such_tool", {}),
                    await c.session.call_tool("close_ticket", {"id": "T-3"})]

    missing, invalid, unknown, closed = _run(go)
    assert missing.is_error
    assert missing.structured_content == {"error": {"code": "TICKET_NOT_FOUND", "message": "no ticket T-9",
                                                    "data": {"id": "T-9"}}}
    assert "TICKET_NOT_FOUND" in missing.content[0].text  # type: ignore[union-attr]
    assert invalid.is_error and invalid.structured_content["error"]["code"] == "INVALID_ARGUMENTS"
    assert invalid.structured_content["error"]["data"]["path"] == ["id"]
    assert unknown.is_error and unknown.structured_content["error"]["code"] == "UNKNOWN_TOOL"
    assert closed.is_error and closed.structured_content["error"]["code"] == "ALREADY_CLOSED"
    errors = [r["detail"]["code"] for r in _records(ledger_of(run), "error")]
    assert errors == ["TICKET_NOT_FOUND", "INVALID_ARGUMENTS", "UNKNOWN_TOOL", "ALREADY_CLOSED"]
    assert not _records(ledger_of(run), "transition", "close_ticket")
    assert state_of(run)["state"]["tickets"]["T-3"]["status"] == "closed"


def test_slow_tool_commits_then_delays(pack: TaskPack, tmp_path: Path, connect: Any,
                                       ledger_of: Any, state_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> tuple[float, Any, BaseException | None]:
        async with connect(pack, run, SEED) as c:
            t0 = time.monotonic()
            ok = await c.session.call_tool("commit_batch", {"batch": "b1"})
            waited = time.monotonic() - t0
            timed_out: BaseException | None = None
            try:
                await c.session.call_tool("commit_batch", {"batch": "b2"}, read_timeout_seconds=0.3)
            except MCPError as exc:
                timed_out = exc
            ledger = run / "ledgers" / "tickets.jsonl"
            with anyio.move_on_after(10):  # let the server see the cancellation and record it
                while '"CANCELLED"' not in ledger.read_text(encoding="utf-8"):
                    await anyio.sleep(0.05)
            return waited, ok, timed_out

    waited, ok, timed_out = _run(go)
    assert waited >= 1.0
    assert ok.structured_content == {"batch": "b1", "committed": True}
    assert timed_out is not None  # the client gave up before the answer ...
    assert state_of(run)["state"]["created"] == ["batch:b1", "batch:b2"]  # ... but b2 was committed
    cancelled = [r for r in _records(ledger_of(run), "error") if r["detail"]["code"] == "CANCELLED"]
    assert len(cancelled) == 1 and cancelled[0]["detail"]["committed"] is True


def test_large_result_carries_value_at_the_tail(pack: TaskPack, tmp_path: Path, connect: Any,
                                                ledger_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> Any:
        async with connect(pack, run, SEED) as c:
            return await c.session.call_tool("export_report", {})

    res = _run(go)
    text = res.content[0].text  # type: ignore[union-attr]
    assert 255 * 1024 < len(text.encode()) <= 256 * 1024
    checksum = derive_value(SEED, ValueSpec(kind="hex", length=16), service="tickets", name="report_checksum")
    assert text.splitlines()[-1] == f"END OF REPORT checksum={checksum}"
    assert checksum not in text[:-100]
    issued = _records(ledger_of(run), "issued", "export_report")
    assert [(r["detail"]["name"], r["detail"]["value"]) for r in issued] == [("report_checksum", checksum)]


def test_list_changed_notification_reveals_a_tool(pack: TaskPack, tmp_path: Path, connect: Any,
                                                  ledger_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> tuple[Any, list[Any], list[str], Any, Any]:
        async with connect(pack, run, SEED) as c:
            assert c.session.initialize_result is not None
            caps = c.session.initialize_result.capabilities.tools
            before = [t.name for t in (await c.session.list_tools()).tools]
            await c.session.call_tool("unlock_archive", {})
            await anyio.sleep(0.1)
            after = (await c.session.list_tools()).tools
            found = await c.session.call_tool("search_archive", {"query": "printer"})
            return caps, list(c.notifications), before, after, found

    caps, notes, before, after, found = _run(go)
    assert caps is not None and caps.list_changed is True
    assert any(isinstance(n, types.ToolListChangedNotification) for n in notes)
    assert "search_archive" not in before
    search = {t.name: t for t in after}["search_archive"]
    token = derive_value(SEED, ValueSpec(kind="code", length=6), service="tickets", name="archive_token")
    assert token in (search.description or "")
    assert not found.is_error and found.structured_content["token"] == token
    listed = [r["detail"]["tools"] for r in _records(ledger_of(run), "request")
              if r["detail"]["method"] == "tools/list"]
    assert "search_archive" not in listed[0] and "search_archive" in listed[-1]


def test_schema_changes_between_sessions(pack: TaskPack, tmp_path: Path, connect: Any, ledger_of: Any,
                                         state_of: Any) -> None:
    run = tmp_path / "private"

    async def session() -> tuple[dict[str, Any], Any, Any]:
        async with connect(pack, run, SEED) as c:
            tool = {t.name: t for t in (await c.session.list_tools()).tools}["create_ticket"]
            v1 = await c.session.call_tool("create_ticket", {"title": "Fan noise"})
            v2 = await c.session.call_tool("create_ticket", {"summary": "Fan noise", "priority": "low"})
            return tool.input_schema, v1, v2

    schema1, v1_ok, v2_bad = _run(session)
    schema2, v1_bad, v2_ok = _run(session)
    assert schema1["required"] == ["title"] and schema2["required"] == ["summary", "priority"]
    assert not v1_ok.is_error and v1_ok.structured_content["api"] == "v1"
    assert v2_bad.is_error and v2_bad.structured_content["error"]["code"] == "INVALID_ARGUMENTS"
    assert v1_bad.is_error and v1_bad.structured_content["error"]["code"] == "INVALID_ARGUMENTS"
    assert not v2_ok.is_error and v2_ok.structured_content["api"] == "v2"
    assert state_of(run)["state"]["created"] == ["Fan noise", "Fan noise (low)"]


def test_python_handler(pack: TaskPack, tmp_path: Path, connect: Any, ledger_of: Any,
                        state_of: Any) -> None:
    run = tmp_path / "private"

    async def go() -> Any:
        async with connect(pack, run, SEED) as c:
            return await c.session.call_tool("queue_digest", {})

    res = _run(go)
    assert res.structured_content["open"] == ["T-1", "T-2"] and res.structured_content["call"] == 1
    doc = state_of(run)["state"]
    assert doc["digests"] == 1 and doc["last_digest"] == res.structured_content["digest"]
    ops = [r["detail"]["op"] for r in _records(ledger_of(run), "transition", "queue_digest")]
    assert ops == ["increment", "mutate"]
    assert [r["detail"]["value"] for r in _records(ledger_of(run), "issued", "queue_digest")] == [
        res.structured_content["digest"]]


def test_cap_refusal_leaves_state_untouched(pack: TaskPack, tmp_path: Path, connect: Any,
                                            ledger_of: Any, state_of: Any) -> None:
    run = tmp_path / "private"
    snapshots: list[dict[str, Any]] = []

    async def go() -> list[Any]:
        async with connect(pack, run, SEED) as c:
            out = [await c.session.call_tool("close_ticket", {"id": "T-1"}),
                   await c.session.call_tool("close_ticket", {"id": "T-2"})]
            snapshots.append(state_of(run)["state"])
            out.append(await c.session.call_tool("close_ticket", {"id": "T-1", "note": "again"}))
            snapshots.append(state_of(run)["state"])
            return out

    first, second, refused = _run(go)
    assert not first.is_error and not second.is_error
    assert refused.is_error
    err = refused.structured_content["error"]
    assert err["code"] == "REQUEST_CAP_EXCEEDED" and err["data"] == {"cap": "close_ticket", "limit": 2,
                                                                      "served": 2}
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "'close_ticket'" in text and "2 request(s)" in text and "not executed" in text
    assert snapshots[0] == snapshots[1]  # business state unchanged by the refused request
    ledger = ledger_of(run)
    refusals = _records(ledger, "refused", "close_ticket")
    assert len(refusals) == 1 and refusals[0]["detail"]["budget_violation"] is True
    last_request = _records(ledger, "request", "close_ticket")[-1]
    assert last_request["arguments"] == {"id": "T-1", "note": "again"}  # received and recorded ...
    after = [r for r in ledger if r["seq"] > last_request["seq"]]
    assert [r["kind"] for r in after] == ["refused"]  # ... and nothing else happened
    assert state_of(run)["refused_total"] == 1


def test_service_wide_cap(pack_copy: Path, tmp_path: Path, connect: Any, ledger_of: Any) -> None:
    task_yaml = pack_copy / "task.yaml"
    data = yaml.safe_load(task_yaml.read_text())
    data["simulators"][0]["caps"] = {"*": 2}
    task_yaml.write_text(yaml.safe_dump(data))
    task = load_task(pack_copy)
    run = tmp_path / "private"

    async def go() -> list[Any]:
        async with connect(task, run, SEED) as c:
            return [await c.session.call_tool(name, args) for name, args in (
                ("get_ticket", {"id": "T-1"}), ("no_such_tool", {}), ("get_ticket", {"id": "T-2"}))]

    ok, unknown, refused = _run(go)
    assert not ok.is_error and unknown.structured_content["error"]["code"] == "UNKNOWN_TOOL"
    assert refused.structured_content["error"]["data"] == {"cap": "*", "limit": 2, "served": 2}
    assert "all tools" in refused.content[0].text  # type: ignore[union-attr]
    assert len(_records(ledger_of(run), "refused")) == 1


def test_broken_service_fails_before_launch_and_at_start(pack_copy: Path, tmp_path: Path) -> None:
    svc = pack_copy / "simulators" / "tickets.yaml"
    svc.write_text(svc.read_text().replace('"{{ args.id }}"', '"{{ args.id | nope }}"', 1))
    task = load_task(pack_copy)
    with pytest.raises(SimulatorConfigError) as info:
        load_service(task.root, task.spec.simulators[0])
    assert "unknown filter 'nope'" in str(info.value)

    ledger = tmp_path / "private" / "ledgers" / "tickets.jsonl"
    code = serve.main(["--pack", str(pack_copy), "--service", "tickets", "--state-dir",
                       str(tmp_path / "private" / "sim" / "tickets"), "--ledger", str(ledger), "--seed", "s"])
    assert code == 2
    records = read_ledger(ledger)
    assert records[-1]["kind"] == "error" and records[-1]["detail"]["apparatus"] is True
    assert records[-1]["detail"]["code"] == "SIMULATOR_START_FAILED"
