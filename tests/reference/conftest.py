"""Fixtures of the reference harness's tests: a scripted model server and a CLI runner.

The CLI always runs as a real process (``python -m harnesses.reference``)
against :class:`chat_server.ChatServer`; MCP tests use the real stdio server in
``mcp_server.py`` through the official SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.reference.chat_server import ChatServer, Reply

HERE = Path(__file__).resolve().parent

API_KEY = "sk-tt-test-0123456789abcdef"


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie has ended; only its exit status is left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@dataclass
class CliRun:
    returncode: int
    result: dict[str, Any] | None
    stderr: str
    records: list[dict[str, Any]]
    server: ChatServer

    def of_type(self, type_: str, turn: int | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == type_ and (turn is None or r["turn"] == turn)]

    def result_of(self, call_id: str) -> dict[str, Any]:
        return next(r["data"] for r in self.of_type("tool_result") if r["data"]["call_id"] == call_id)


class Harness:
    """Runs CLI turns in one run folder (log, sessions, workspace shared across turns)."""

    def __init__(self, root: Path):
        self.root = root
        self.workspace = root / "ws"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.log = root / "native" / "reference-events.jsonl"
        self.sessions = root / "native" / "sessions"
        self.servers: list[ChatServer] = []

    def mcp_config(self) -> Path:
        cfg = {"servers": {"shop": {"command": sys.executable, "args": [str(HERE / "mcp_server.py")],
                                    "env": {"TT_TEST_MCP_LEDGER": str(self.root / "mcp-ledger.jsonl")}}}}
        path = self.root / "mcp.json"
        path.write_text(json.dumps(cfg))
        return path

    def mcp_ledger(self) -> list[dict[str, Any]]:
        path = self.root / "mcp-ledger.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []

    def run(self, script: Any, *args: str, prompt: str = "go", turn: int = 1, env: dict[str, str] | None = None,
            session: tuple[str, ...] = ("--new-session",), timeout: float = 60) -> CliRun:
        server = ChatServer(script).start()
        self.servers.append(server)
        argv = [sys.executable, "-m", "harnesses.reference", "--base-url", server.base_url, "--model", "scripted",
                "--workspace", str(self.workspace), "--log", str(self.log), "--session-dir", str(self.sessions),
                "--turn", str(turn), "--prompt", prompt, *session, *args]
        full_env = {"PATH": os.environ["PATH"], "HOME": str(self.root), "OPENAI_API_KEY": API_KEY,
                    "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=full_env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        records = [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.is_file() else []
        return CliRun(proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr, records, server)

    def close(self) -> None:
        for s in self.servers:
            s.stop()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.close()


__all__ = ["CliRun", "Harness", "Reply"]
