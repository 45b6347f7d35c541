"""Fixtures of the simulator tests: the example pack and a real MCP stdio client."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from apparatus.simulators import mcp_servers_for, read_ledger
from tracetrial.task import TaskPack, load_task

FIXTURES = Path(__file__).parent / "fixtures"
PACK = FIXTURES / "T6-ticket-desk-001"


@pytest.fixture(scope="session")
def pack() -> TaskPack:
    """The example pack, loaded and validated by the kernel's loader."""
    return load_task(PACK)


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    """A writable copy of the example pack (for tests that change task.yaml)."""
    dst = tmp_path / "packs" / PACK.name
    shutil.copytree(PACK, dst)
    return dst


@dataclass
class Conn:
    """An initialized MCP client session and the server notifications it received."""

    session: ClientSession
    notifications: list[Any] = field(default_factory=list)


@asynccontextmanager
async def _connect(task: TaskPack, run_private: Path, seed: str, name: str = "tickets") -> AsyncIterator[Conn]:
    """Spawn the simulator exactly as a harness would (the McpServer from mcp_servers_for)."""
    server = {s.name: s for s in mcp_servers_for(task, run_private, seed)}[name]
    params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env))
    run_private.mkdir(parents=True, exist_ok=True)
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    with (run_private / f"{name}.stderr").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield Conn(session, notes)


def _ledger_of(run_private: Path, name: str = "tickets") -> list[dict[str, Any]]:
    return read_ledger(run_private / "ledgers" / f"{name}.jsonl")


def _state_of(run_private: Path, name: str = "tickets") -> dict[str, Any]:
    return json.loads((run_private / "sim" / name / "state.json").read_text(encoding="utf-8"))


@pytest.fixture
def connect() -> Any:
    """``async with connect(task, run_private, seed) as conn:`` — a real stdio MCP session."""
    return _connect


@pytest.fixture
def ledger_of() -> Any:
    """``ledger_of(run_private, name='tickets')`` — the run's ledger records."""
    return _ledger_of


@pytest.fixture
def state_of() -> Any:
    """``state_of(run_private, name='tickets')`` — the run's persisted service document."""
    return _state_of
