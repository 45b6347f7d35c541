"""A cell's archive as model calls per principal: the common ground of every trace export.

Both exports (ATIF, OTel) need the same thing the Trace IR does not state directly: which
native events were produced by *one* model call, and which provider-boundary record is that
call. This module derives it, purely from the archive:

* **Native grouping** (per principal, in ``seq`` order). A ``model_input`` event opens a call
  explicitly (harnesses that expose their requests). Otherwise each action (an assistant text,
  a tool call) is one call: anything after a tool call needs its result first, and a text
  followed by a tool call cannot be told apart from a final answer followed by the next
  turn's call without the response body, which the archive does not keep. Two consecutive
  tool calls stay in one call when the gateway saw both results delivered by the same request
  (parallel tool use); reasoning attaches to the action it precedes. (Known limit: a response
  holding text *and* a tool call becomes two steps, one of them without a gateway record.)
* **Gateway join**. A request that delivers the result of call ``i``'s tool is call ``i+1`` of
  that principal. A request that delivers no known result starts a principal's first call or
  follows a text-only call (a new user turn): it is matched with the earliest such pending
  call. Requests left over (a harness's internal calls, retries, a call whose response never
  reached a native record) are kept as unmatched calls, so no provider request is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apparatus.gateway.records import REQUESTS_FILE, read_records
from tracetrial.archive import RunPaths
from tracetrial.errors import TraceTrialError
from tracetrial.results import ResultRecord, Summary
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    ConversationTurnStartedEvent,
    EventBase,
    ModelInputEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolDeclaration,
    ToolEvent,
    ToolInventoryEvent,
)
from tracetrial.trace_io import load_events

MAIN = "main"


class ExportError(TraceTrialError):
    """A cell's archive cannot be exported (the message names the file and the problem)."""


@dataclass
class CellArchive:
    """The inputs of an export: one cell's archive files, validated."""

    root: Path
    result: ResultRecord
    summary: Summary | None
    events: list[EventBase]
    records: list[dict[str, Any]]


def load_cell(root: Path) -> CellArchive:
    """Read ``result.json``, ``summary.json``, ``events.json`` and the gateway records of a cell."""
    paths = RunPaths(root)
    try:
        result = ResultRecord.model_validate_json(paths.result.read_bytes())
    except FileNotFoundError:
        raise ExportError(f"{paths.result}: no such file") from None
    except ValueError as exc:
        raise ExportError(f"{paths.result}: not a valid result record: {_first_line(exc)}") from None
    summary: Summary | None = None
    if paths.summary.is_file():
        try:
            summary = Summary.model_validate_json(paths.summary.read_bytes())
        except ValueError as exc:
            raise ExportError(f"{paths.summary}: not a valid summary: {_first_line(exc)}") from None
    events = load_events(paths.events)  # raises TraceFileError with file, index and field
    req = paths.gateway / REQUESTS_FILE
    try:
        records = read_records(req)
    except json.JSONDecodeError as exc:
        raise ExportError(f"{req}: line {exc.lineno} is not valid JSON: {exc.msg}") from None
    return CellArchive(root=root, result=result, summary=summary, events=events, records=records)


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


@dataclass
class ModelCall:
    """One model call: its native output (text, reasoning, tool exchanges) and its gateway record."""

    principal_id: str
    events: list[EventBase] = field(default_factory=list)
    explicit: bool = False
    record: dict[str, Any] | None = None

    @property
    def tools(self) -> list[ToolEvent]:
        return [e for e in self.events if isinstance(e, ToolEvent)]

    @property
    def texts(self) -> list[str]:
        return [_text(e.content) for e in self.events
                if isinstance(e, AssistantMessageEvent) and not _is_reasoning(e) and e.content is not None]

    @property
    def reasoning(self) -> list[str]:
        out: list[str] = []
        for e in self.events:
            if isinstance(e, AssistantMessageEvent):
                if _is_reasoning(e) and e.content is not None:
                    out.append(_text(e.content))
                elif e.reasoning:
                    out.append(e.reasoning)
        return out

    @property
    def model(self) -> str | None:
        if self.record is not None and self.record.get("model"):
            return str(self.record["model"])
        for e in self.events:
            if isinstance(e, (ModelInputEvent, AssistantMessageEvent)) and e.model:
                return e.model
        return None

    @property
    def first_seq(self) -> int:
        return self.events[0].seq if self.events else 0


@dataclass
class Principal:
    """The main agent or one sub-agent, with its timeline (user turns, calls, compactions)."""

    id: str
    parent_id: str | None
    items: list[ModelCall | ConversationTurnStartedEvent | ContextCompactionEvent] = field(default_factory=list)
    #: The parent's tool call that started this sub-agent, when the trace names it.
    spawn_call_id: str | None = None

    @property
    def calls(self) -> list[ModelCall]:
        return [i for i in self.items if isinstance(i, ModelCall)]


@dataclass
class CallGraph:
    """Every principal of a run and the provider requests no native call explains."""

    principals: dict[str, Principal]
    unmatched: list[dict[str, Any]]
    tool_definitions: list[ToolDeclaration]

    def children(self, parent: str) -> list[Principal]:
        return [p for p in self.principals.values() if p.parent_id == parent and p.id != parent]


def _is_reasoning(e: AssistantMessageEvent) -> bool:
    return (e.content_kind or "").lower() in ("reasoning", "thinking")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _principal_of(e: EventBase) -> str:
    return e.principal_id or MAIN


def _native(e: EventBase) -> bool:
    return e.source != "gateway"


def build_call_graph(cell: CellArchive) -> CallGraph:
    """Group a cell's native events into model calls per principal and join the gateway records."""
    together = _delivered_together(cell.records)
    principals: dict[str, Principal] = {MAIN: Principal(MAIN, None)}
    current: dict[str, ModelCall | None] = {}
    for e in cell.events:
        if isinstance(e, (SubagentLifecycleEvent, TaskCompletionEvent)) and e.child_principal_id:
            _principal(principals, e.child_principal_id, _principal_of(e) if e.principal_id != e.child_principal_id
                       else e.parent_principal_id)
        if not _native(e):
            continue
        pid = _principal_of(e)
        owner = _principal(principals, pid, e.parent_principal_id)
        if isinstance(e, ConversationTurnStartedEvent):
            principals[MAIN].items.append(e)
            current[MAIN] = None
            continue
        if isinstance(e, ContextCompactionEvent):
            owner.items.append(e)
            current[pid] = None
            continue
        if not isinstance(e, (ModelInputEvent, AssistantMessageEvent, ToolEvent)):
            continue
        call = current.get(pid)
        if isinstance(e, ModelInputEvent) or call is None or _starts_new_call(call, e, together):
            call = ModelCall(principal_id=pid, explicit=isinstance(e, ModelInputEvent))
            owner.items.append(call)
            current[pid] = call
        call.events.append(e)
    _link_spawns(cell.events, principals)
    unmatched = _join_records(principals, cell.records)
    return CallGraph(principals=principals, unmatched=unmatched, tool_definitions=_inventory(cell.events))


def _principal(principals: dict[str, Principal], pid: str, parent: str | None) -> Principal:
    if pid not in principals:
        principals[pid] = Principal(pid, parent or (None if pid == MAIN else MAIN))
    elif parent and principals[pid].parent_id is None and pid != MAIN:
        principals[pid].parent_id = parent
    return principals[pid]


def _starts_new_call(call: ModelCall, e: EventBase, together: list[set[str]]) -> bool:
    if call.explicit:
        return False  # a model_input opened this call; only the next model_input closes it
    tools = call.tools
    if isinstance(e, AssistantMessageEvent):
        if call.texts and e.message_id and any(
                isinstance(x, AssistantMessageEvent) and x.message_id == e.message_id for x in call.events):
            return False  # fragments of one native message
        # Reasoning and text open a call unless the call holds nothing but reasoning so far.
        return bool(tools) or bool(call.texts)
    assert isinstance(e, ToolEvent)
    if not tools:
        # Text then a tool call can be one response, but a final answer followed by a tool call
        # (the next turn, a notification) cannot be told apart without the response: only
        # reasoning-only calls absorb the tool call.
        return bool(call.texts)
    ids = {t.tool_call.id for t in tools} | {e.tool_call.id}
    return not any(ids <= group for group in together)


def _delivered_together(records: list[dict[str, Any]]) -> list[set[str]]:
    """Per request, the tool-call ids whose results it delivers (parallel calls share one)."""
    return [{str(t["id"]) for t in r.get("tool_results") or [] if t.get("id")} for r in records]


def _call_ids(call: ModelCall) -> set[str]:
    ids: set[str] = set()
    for t in call.tools:
        ids.add(t.tool_call.id)
        if t.tool_call.native_tool_call_id:
            ids.add(t.tool_call.native_tool_call_id)
    return ids


def _join_records(principals: dict[str, Principal], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = {pid: p.calls for pid, p in principals.items()}
    where: dict[str, tuple[str, int]] = {}
    for pid, seq in calls.items():
        for i, call in enumerate(seq):
            for cid in _call_ids(call):
                where[cid] = (pid, i)
    unmatched: list[dict[str, Any]] = []
    for record in records:
        delivered = [str(t["id"]) for t in record.get("tool_results") or [] if t.get("id")]
        hits = [where[cid] for cid in delivered if cid in where]
        target: ModelCall | None = None
        if hits:
            pid, index = max(hits, key=lambda h: h[1])
            if index + 1 < len(calls[pid]) and calls[pid][index + 1].record is None:
                target = calls[pid][index + 1]
        else:
            target = _next_fresh_call(calls)
        if target is None:
            unmatched.append(record)
        else:
            target.record = record
    return unmatched


def _next_fresh_call(calls: dict[str, list[ModelCall]]) -> ModelCall | None:
    """The earliest pending call that no tool result leads to (a principal's first call, or
    the call after a text-only one)."""
    best: ModelCall | None = None
    for seq in calls.values():
        for i, call in enumerate(seq):
            if call.record is not None:
                continue
            fresh = i == 0 or not seq[i - 1].tools
            if fresh and (best is None or call.first_seq < best.first_seq):
                best = call
            break  # only a principal's first pending call can be next
    return best


def _link_spawns(events: list[EventBase], principals: dict[str, Principal]) -> None:
    """Name the parent tool call that started each sub-agent: a tool call whose id is the child's
    principal id, else the parent's last tool call before the child is first mentioned."""
    tool_ids = {e.tool_call.id for e in events if isinstance(e, ToolEvent)}
    for child in principals.values():
        if child.id == MAIN:
            continue
        if child.id in tool_ids:
            child.spawn_call_id = child.id
            continue
        first = next((e.seq for e in events if child.id in (e.principal_id,
                      getattr(e, "child_principal_id", None))), None)
        if first is None:
            continue
        parent = child.parent_id or MAIN
        before = [e for e in events if isinstance(e, ToolEvent) and e.seq < first
                  and _principal_of(e) == parent]
        if before:
            child.spawn_call_id = before[-1].tool_call.id


def _inventory(events: list[EventBase]) -> list[ToolDeclaration]:
    """Every tool the provider boundary saw declared, first declaration of each name wins."""
    seen: dict[str, ToolDeclaration] = {}
    for e in events:
        if isinstance(e, ToolInventoryEvent) and e.source == "gateway":
            for tool in e.tools:
                seen.setdefault(tool.name, tool)
    return list(seen.values())
