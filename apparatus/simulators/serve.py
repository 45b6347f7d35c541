"""Serve one task simulator as an MCP stdio server (official MCP Python SDK, low-level server).

::

    python -m apparatus.simulators.serve --pack <pack dir> --service <simulator name> \\
        --state-dir <run>/private/sim/<name> --ledger <run>/private/ledgers/<name>.jsonl \\
        --seed <run seed>          # or --seed-file <file holding the seed>

``--service`` is the simulator's ``name`` in the pack's ``task.yaml``; its
``service`` file and ``caps`` come from there. Each process start is one
*session* (persisted in the state folder). The process exits when stdin
closes. Exit status 2: the service could not be loaded (the reason is on
stderr and, when the ledger path is usable, in an ``error`` ledger record
marked ``apparatus``).

Tools are declared with their exact JSON schemas; results carry
``structuredContent`` and ``isError``. A case with ``notify: [tools_list_changed]``
sends ``notifications/tools/list_changed`` just before its result; a case with
``delay_s`` sleeps after its effects are committed and before it answers (a
client that cancels during the sleep gets no answer, and the ledger records
the cancellation).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.errors import SimulatorConfigError
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs

#: Requests the tool handlers record themselves (or that carry nothing worth keeping).
_SELF_RECORDED = frozenset({"tools/list", "tools/call", "ping"})


class _RecordRequests:
    """Middleware: record protocol requests such as ``initialize`` in the ledger."""

    def __init__(self, runtime: ServiceRuntime):
        self.runtime = runtime

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is not None and ctx.method not in _SELF_RECORDED:
            params = dict(ctx.params) if ctx.params is not None else None
            self.runtime.note_request(ctx.method, params)
        return await call_next(ctx)


def build_server(runtime: ServiceRuntime) -> Server[Any]:
    """The low-level MCP server for one service runtime."""
    bus = InMemorySubscriptionBus()  # 2026-07-28 change events, fanned out to listen streams

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        raw = dict(ctx.params) if ctx.params is not None else None
        views = await anyio.to_thread.run_sync(runtime.list_tools, raw)
        return types.ListToolsResult(tools=[
            types.Tool(name=v.name, title=v.title, description=v.description,
                       input_schema=v.input_schema, output_schema=v.output_schema,
                       annotations=types.ToolAnnotations.model_validate(v.annotations)
                       if v.annotations else None)
            for v in views])

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        # The ledger keeps the arguments exactly as they arrived on the wire.
        raw = ctx.params.get("arguments") if ctx.params is not None else params.arguments
        outcome = await anyio.to_thread.run_sync(runtime.call_tool, params.name, raw)
        if outcome.notify_tools_changed:
            # Both eras: a 2025-era client gets the standalone notification; at 2026-07-28 the
            # session drops it and the change rides the client's ``subscriptions/listen`` stream.
            await ctx.session.send_tool_list_changed()
            await bus.publish(ToolsListChanged())
        if outcome.delay_s:
            try:
                await anyio.sleep(outcome.delay_s)
            except anyio.get_cancelled_exc_class():
                runtime.ledger.append("error", tool=params.name, detail={
                    "code": "CANCELLED", "message": f"the client cancelled the call during its "
                    f"{outcome.delay_s} s delay; its effects were already committed",
                    "request_seq": outcome.request_seq, "committed": True})
                raise
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text)],
                                    structured_content=outcome.structured, is_error=outcome.is_error)

    spec = runtime.service.spec
    server: Server[Any] = Server(runtime.service.name, version=spec.version,
                                 description=spec.description, instructions=spec.instructions,
                                 on_list_tools=list_tools, on_call_tool=call_tool,
                                 on_subscriptions_listen=ListenHandler(bus) if runtime.service.notifies else None)
    server.middleware.append(_RecordRequests(runtime))
    return server


async def serve_stdio(runtime: ServiceRuntime) -> None:
    """Run the server on stdin/stdout until the client closes stdin."""
    server = build_server(runtime)
    options = server.create_initialization_options(
        NotificationOptions(tools_changed=runtime.service.notifies))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m apparatus.simulators.serve",
                                description="Serve one task simulator as an MCP stdio server.")
    p.add_argument("--pack", type=Path, required=True, help="task pack folder (holds task.yaml)")
    p.add_argument("--service", required=True, help="simulator name from task.yaml")
    p.add_argument("--state-dir", type=Path, required=True, help="private state folder of this run")
    p.add_argument("--ledger", type=Path, required=True, help="private ledger file of this run")
    seed = p.add_mutually_exclusive_group(required=True)
    seed.add_argument("--seed", help="the run seed (one-off values derive from it)")
    seed.add_argument("--seed-file", type=Path, help="a file holding the run seed")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    seed = args.seed if args.seed is not None else args.seed_file.read_text(encoding="utf-8").strip()
    ledger = Ledger(args.ledger, args.service)
    try:
        sims = {s.name: s for s in simulator_specs(args.pack)}
        if args.service not in sims:
            raise SimulatorConfigError("task.yaml", [
                f"task.yaml: no simulator named {args.service!r} (declared: {sorted(sims)})"])
        runtime = ServiceRuntime(load_service(args.pack, sims[args.service]), args.state_dir, ledger, seed)
        ledger.init()
        runtime.start_session()
    except SimulatorConfigError as exc:
        print(f"tracetrial simulator {args.service!r}: {exc}", file=sys.stderr)
        try:
            ledger.append("error", detail={"code": "SIMULATOR_START_FAILED", "message": str(exc),
                                           "apparatus": True})
        except OSError:
            pass
        return 2
    anyio.run(serve_stdio, runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
