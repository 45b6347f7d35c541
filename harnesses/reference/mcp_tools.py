"""The task's MCP tools: stdio servers through the official ``mcp`` SDK client.

Each server's tools are declared to the model as ``mcp__<server>__<tool>`` with
their real input schemas and descriptions. A name a Chat Completions function
name cannot be (over 64 characters, characters outside ``A-Za-z0-9_-``) or one
another tool already holds gets a fitted, unique name: invalid characters become
``_``, the name is cut to leave room for ``_`` and 8 hex digits of the SHA-256 of
``<server>/<tool>``, and its description names the real MCP tool; every tool
stays declared and each wire name routes to exactly one tool. A result is relayed to the model as
the JSON of the MCP result itself — ``{"isError": …, "content": […],
"structuredContent": …}`` — so the error flag and the structured content
arrive intact (Chat Completions has no error field on tool messages). A
``notifications/tools/list_changed`` marks the server for a re-list before the
next model request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from harnesses.reference.tools import ToolOutcome

PREFIX = "mcp__"
#: Keys whose scalar values in a successful result are recorded as receipts.
RECEIPT_KEY = re.compile(r"(?i)receipt|confirmation")


@dataclass
class ServerConfig:
    """One entry of ``--mcp-config`` (``{"servers": {name: {command, args, env}}}``)."""

    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def load_config(text: str) -> list[ServerConfig]:
    data = json.loads(text)
    servers: dict[str, Any] = (data.get("servers") or data.get("mcpServers") or {}) if isinstance(data, dict) else {}
    return [ServerConfig(name, str(v["command"]), [str(a) for a in v.get("args", [])],
                         {str(k): str(x) for k, x in (v.get("env") or {}).items()})
            for name, v in servers.items()]


#: A Chat Completions function name (the provider refuses anything else).
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 64


def wire_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


def fitted_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` with characters a function name cannot hold replaced by ``_``
    and cut to :data:`MAX_NAME` characters (not unique by itself)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", wire_name(server, tool))[:MAX_NAME]


def unique_name(server: str, tool: str, taken: Mapping[str, tuple[str, Any]]) -> str:
    """The wire name of ``server``'s ``tool``: ``mcp__<server>__<tool>`` when it is a valid function
    name no other tool holds, else the fitted name cut to make room for ``_<hash>`` (8 hex digits of
    SHA-256 of ``<server>/<tool>``, more when even that is taken). ``taken``: wire name ->
    ``(server, mcp Tool)`` of the tools named so far."""

    def free(name: str) -> bool:
        held = taken.get(name)
        return held is None or (held[0] == server and held[1].name == tool)

    plain = wire_name(server, tool)
    if FUNCTION_NAME.match(plain) and free(plain):
        return plain
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()
    for width in (8, 12, 16, 24):
        name = f"{fitted_name(server, tool)[:MAX_NAME - width - 1]}_{digest[:width]}"
        if free(name):
            return name
    raise ValueError(f"no unique function name for MCP tool {tool!r} of server {server!r}")


def drop_nested_field(arguments: Any) -> Any:
    """The ``drop_tool_arg_field`` defect: remove the last key of the first nested object
    (depth >= 1, searched depth-first in key order) from a copy of ``arguments``."""
    data = json.loads(json.dumps(arguments))

    def visit(node: Any, depth: int) -> bool:
        if isinstance(node, dict):
            if depth >= 1 and node:
                node.pop(list(node)[-1])
                return True
            return any(visit(v, depth + 1) for v in node.values())
        if isinstance(node, list):
            return any(visit(v, depth + 1) for v in node)
        return False

    visit(data, 0)
    return data


def find_receipts(value: Any) -> list[tuple[str, Any]]:
    """``(key, value)`` for every scalar under a receipt-like key, depth-first."""
    out: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if RECEIPT_KEY.search(str(k)) and isinstance(v, (str, int, float)) and not isinstance(v, bool):
                out.append((str(k), v))
            else:
                out.extend(find_receipts(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(find_receipts(v))
    return out


class McpBridge:
    """Connected MCP servers of one harness process."""

    def __init__(self, servers: list[ServerConfig], *, cwd: str, timeout_s: float = 120.0,
                 mutant: str | None = None):
        self.servers = servers
        self.mutant = mutant
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.clients: dict[str, Any] = {}  # server name -> connected mcp.Client
        self.tools: dict[str, tuple[str, Any]] = {}  # wire name -> (server, mcp Tool)
        self.errors: list[str] = []
        self._dirty: set[str] = set()
        self._listeners: list[asyncio.Task[None]] = []
        self._stack = AsyncExitStack()

    async def start(self) -> None:
        """Connect every server and list its tools; failures are kept in :attr:`errors`."""
        from mcp import (  # imported on use: ~0.5 s, only MCP runs pay it
            Client,
            StdioServerParameters,
        )

        for cfg in self.servers:
            params = StdioServerParameters(command=cfg.command, args=cfg.args, env=cfg.env or None, cwd=self.cwd)
            try:
                client = Client(params, message_handler=self._handler(cfg.name),
                                read_timeout_seconds=self.timeout_s)
                self.clients[cfg.name] = await self._stack.enter_async_context(client)
                await self._listen(cfg.name)
                await self._list(cfg.name)
            except Exception as exc:  # noqa: BLE001 - a broken server is reported, not fatal
                self.errors.append(f"MCP server {cfg.name!r} ({cfg.command}) failed to start: "
                                   f"{type(exc).__name__}: {exc}")
                print(self.errors[-1], file=sys.stderr)

    async def _listen(self, server: str) -> None:
        """At protocol 2026-07-28 a server's change notifications ride a ``subscriptions/listen``
        stream the client opens (the standalone notification is dropped at that era); a 2025-era
        server sends ``notifications/tools/list_changed`` to :meth:`_handler` instead."""
        from mcp.client.subscriptions import ListenNotSupportedError

        client = self.clients[server]
        try:
            sub = await self._stack.enter_async_context(client.listen(tools_list_changed=True))
        except ListenNotSupportedError:
            return  # a 2025-era session: the message handler sees the notification
        except Exception as exc:  # noqa: BLE001 - a server without listen support still works
            print(f"MCP server {server!r}: subscriptions/listen refused ({type(exc).__name__}: {exc}); "
                  "tool-list changes are followed only if announced by notification", file=sys.stderr)
            return

        async def consume() -> None:
            try:
                async for _event in sub:
                    self._dirty.add(server)
            except Exception as exc:  # noqa: BLE001 - a dropped stream is reported, not fatal
                print(f"MCP server {server!r}: listen stream ended: {type(exc).__name__}: {exc}", file=sys.stderr)

        self._listeners.append(asyncio.create_task(consume()))

    def _handler(self, server: str) -> Any:
        from mcp_types import ToolListChangedNotification

        async def handle(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):
                self._dirty.add(server)
            elif isinstance(message, Exception):
                print(f"MCP server {server!r}: {type(message).__name__}: {message}", file=sys.stderr)
        return handle

    async def _list(self, server: str) -> None:
        result = await self.clients[server].list_tools(cache_mode="refresh")
        for name in [n for n, (s, _) in self.tools.items() if s == server]:
            del self.tools[name]
        for tool in result.tools:
            if self.mutant == "collide_tool_names":
                # The defect: the name is fitted (characters replaced, cut to 64) but never made
                # unique, so a tool whose fitted name another already holds silently replaces it.
                self.tools[fitted_name(server, tool.name)] = (server, tool)
            else:
                self.tools[unique_name(server, tool.name, self.tools)] = (server, tool)

    async def refresh(self) -> list[str]:
        """Re-list servers that announced a changed tool list; returns their names."""
        await asyncio.sleep(0)  # let a listen event that arrived with the last result be consumed
        changed = sorted(self._dirty)
        self._dirty.clear()
        for server in changed:
            try:
                await self._list(server)
            except Exception as exc:  # noqa: BLE001
                print(f"MCP server {server!r}: re-listing tools failed: {exc}", file=sys.stderr)
        return changed

    def declarations(self) -> list[dict[str, Any]]:
        out = []
        for name, (server, tool) in self.tools.items():
            desc = tool.description or f"Tool {tool.name} of MCP server {server}."
            if name != wire_name(server, tool.name):
                desc = f"[MCP tool {tool.name!r} of server {server!r}] {desc}"
            out.append({"type": "function", "function": {
                "name": name, "description": desc,
                "parameters": tool.input_schema or {"type": "object", "properties": {}}}})
        return out

    async def call(self, name: str, arguments: dict[str, Any], mutant: str | None) -> ToolOutcome:
        server, tool = self.tools[name]
        if mutant == "drop_tool_arg_field":
            arguments = drop_nested_field(arguments)
        started = time.monotonic()
        try:
            result = await self.clients[server].call_tool(
                tool.name, arguments, read_timeout_seconds=self.timeout_s)
        except TimeoutError:
            return ToolOutcome(
                f"MCP call {name} got no answer within {self.timeout_s:g} s; the request was sent, so the "
                "server may or may not have applied it (state unknown).", is_error=True, status="timed_out",
                duration_s=round(time.monotonic() - started, 3))
        except Exception as exc:  # noqa: BLE001 - protocol errors are relayed as errors
            return ToolOutcome(f"MCP call {name} failed: {type(exc).__name__}: {exc}", is_error=True,
                               status="error", duration_s=round(time.monotonic() - started, 3))
        is_error = bool(result.is_error) and mutant != "hide_tool_error"
        relay: dict[str, Any] = {
            "isError": is_error,
            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
        }
        structured = None if mutant == "drop_structured_content" else result.structured_content  # the defect
        if structured is not None:
            relay["structuredContent"] = structured
        return ToolOutcome(json.dumps(relay, ensure_ascii=False), is_error=is_error,
                           status="error" if is_error else "ok", duration_s=round(time.monotonic() - started, 3),
                           structured_content=structured)

    async def aclose(self) -> None:
        for task in self._listeners:
            task.cancel()
        try:
            await self._stack.aclose()
        except Exception as exc:  # noqa: BLE001 - shutdown noise must not change the turn's result
            print(f"MCP shutdown: {type(exc).__name__}: {exc}", file=sys.stderr)
