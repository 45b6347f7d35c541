"""Trace IR + provider-boundary records -> ATIF v1.7 (the Harbor / Terminal-Bench trajectory format).

Pure: :func:`to_atif` takes a loaded :class:`~reports.export.calls.CellArchive` and returns the
trajectory as a JSON-ready dict. The field names and rules follow Harbor's own pydantic models
(``harbor.models.trajectories``), which the tests validate every export against:

* one ``agent`` step per model call (``llm_call_count=1``), with the gateway's per-call usage as
  ``metrics`` (``prompt_tokens`` includes cache reads, as ATIF and the gateway both define it);
* tool calls and their results in the same step, joined by call id (Harbor's validator requires
  every ``source_call_id`` to name a tool call of its step); a call without a native result has
  no observation result — never an invented one;
* each sub-agent as an embedded trajectory (``subagent_trajectories``, ``trajectory_id`` =
  ``<run_id>/<principal>``), referenced from the parent's spawning tool call's result;
* a native compaction as a ``system`` step with ``extra.context_management`` =
  ``{type: compaction, boundary: replace}`` (RFC 0001 §VII; Harbor's terminus-2 / vibe convention);
* ``agent.tool_definitions`` from the provider boundary's inventory (OpenAI function schema),
  which Harbor's Claude Code and Codex converters leave empty.
"""

from __future__ import annotations

import json
from typing import Any

from reports.export.calls import (
    MAIN,
    CallGraph,
    CellArchive,
    ModelCall,
    Principal,
    build_call_graph,
)
from tracetrial.trace import (
    ContextCompactionEvent,
    ConversationTurnStartedEvent,
    ToolDeclaration,
    ToolEvent,
)

SCHEMA_VERSION = "ATIF-v1.7"

Json = dict[str, Any]


def to_atif(cell: CellArchive) -> Json:
    """The ATIF v1.7 trajectory of one cell (a dict in the form of Harbor's ``Trajectory``)."""
    graph = build_call_graph(cell)
    return _trajectory(cell, graph, graph.principals[MAIN], root=True)


def tool_definition(decl: ToolDeclaration) -> Json:
    """A provider-boundary declaration in OpenAI's function-calling schema (ATIF ``tool_definitions``)."""
    function: Json = {"name": decl.name}
    if decl.description is not None:
        function["description"] = decl.description
    if decl.input_schema is not None:
        function["parameters"] = decl.input_schema
    out: Json = {"type": "function", "function": function}
    if decl.type != "function":  # provider tools (web_search, custom grammars): keep their kind
        out["extra"] = {"provider_type": decl.type}
    return out


def _trajectory(cell: CellArchive, graph: CallGraph, principal: Principal, *, root: bool) -> Json:
    identity = cell.result.identity
    children = [c for c in graph.children(principal.id) if c.calls]
    child_ids = {c.id: f"{identity.run_id}/{c.id}" for c in children}
    steps: list[Json] = []
    for item in principal.items:
        if isinstance(item, ConversationTurnStartedEvent):
            if item.user_text is not None:
                steps.append({"source": "user", "message": item.user_text, "timestamp": _iso(item)})
        elif isinstance(item, ContextCompactionEvent):
            steps.append(_compaction_step(item))
        else:
            steps.append(_agent_step(item, children, child_ids))
    if root:
        steps.extend(_unmatched_step(r) for r in graph.unmatched)
    if not steps:  # ATIF requires at least one step; say plainly that nothing was recorded
        steps.append({"source": "system", "message": "no model call or user turn was recorded for this run"})
    for number, step in enumerate(steps, start=1):
        step["step_id"] = number

    agent: Json = {
        "name": identity.harness,
        "version": identity.harness_version or "unknown",
        "model_name": identity.model,
    }
    tools = graph.tool_definitions if root else _record_tools(principal)
    if tools:
        agent["tool_definitions"] = [tool_definition(t) for t in tools]
    agent["extra"] = {"task_id": identity.task_id, "protocol": identity.protocol, "principal_id": principal.id}

    out: Json = {
        "schema_version": SCHEMA_VERSION,
        "session_id": identity.run_id,
        "trajectory_id": identity.run_id if root else f"{identity.run_id}/{principal.id}",
        "agent": agent,
        "steps": steps,
    }
    subs = [_trajectory(cell, graph, c, root=False) for c in children]
    out["final_metrics"] = _final_metrics(steps, subs)
    if root:
        out["extra"] = _root_extra(cell, graph)
        out["notes"] = ("Exported by TraceTrial from the archive: agent steps are model calls joined with "
                        "the provider-boundary records; final_metrics include embedded sub-agents.")
    if subs:
        out["subagent_trajectories"] = subs
    return out


def _agent_step(call: ModelCall, children: list[Principal], child_ids: dict[str, str]) -> Json:
    step: Json = {"source": "agent", "message": "\n\n".join(call.texts), "llm_call_count": 1}
    ts = call.record.get("started_at") if call.record else None
    step["timestamp"] = ts or (_iso(call.events[0]) if call.events else None)
    if call.model:
        step["model_name"] = call.model
    reasoning = call.reasoning
    if reasoning:
        step["reasoning_content"] = "\n\n".join(reasoning)
    tools = call.tools
    if tools:
        step["tool_calls"] = [_tool_call(t) for t in tools]
        results = [r for r in (_tool_result(t, children, child_ids) for t in tools) if r is not None]
        if results:
            step["observation"] = {"results": results}
    metrics = _metrics(call.record)
    if metrics is not None:
        step["metrics"] = metrics
    step["extra"] = {"gateway_request_index": call.record.get("index") if call.record else None,
                     "trace_seq": [e.seq for e in call.events]}
    return {k: v for k, v in step.items() if v is not None}


def _tool_call(t: ToolEvent) -> Json:
    args = t.tool_call.arguments
    if isinstance(args, str):  # some wire formats carry arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            pass
    if not isinstance(args, dict):  # ATIF arguments are a JSON object
        args = {} if args is None else {"input": args}
    out: Json = {"tool_call_id": t.tool_call.id, "function_name": t.tool_call.name, "arguments": args}
    if t.tool_call.native_tool_call_id:
        out["extra"] = {"native_tool_call_id": t.tool_call.native_tool_call_id}
    return out


def _tool_result(t: ToolEvent, children: list[Principal], child_ids: dict[str, str]) -> Json | None:
    refs = [{"trajectory_id": child_ids[c.id], "session_id": None, "extra": {"principal_id": c.id}}
            for c in children if c.spawn_call_id == t.tool_call.id]
    if t.tool_result is None and not refs:
        return None
    out: Json = {"source_call_id": t.tool_call.id}
    if t.tool_result is not None:
        content = t.tool_result.content
        out["content"] = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        extra = t.tool_result.model_dump(exclude={"content"}, exclude_none=True)
        if extra:
            out["extra"] = extra
    if refs:
        out["subagent_trajectory_ref"] = [{k: v for k, v in r.items() if v is not None} for r in refs]
    return out


def _compaction_step(e: ContextCompactionEvent) -> Json:
    what = e.native_event_type or "compaction"
    step: Json = {
        "source": "system",
        "message": f"Context compaction ({what}" + (f", trigger {e.trigger}" if e.trigger else "") + ")",
        "timestamp": _iso(e),
        "extra": {"context_management": {"type": "compaction", "boundary": "replace"},
                  "summary_present": e.summary_present, "trace_seq": [e.seq]},
    }
    if e.summary is not None:
        # After a replace boundary the effective context is this content plus later turns.
        step["observation"] = {"results": [{"content": e.summary}]}
    return step


def _unmatched_step(record: dict[str, Any]) -> Json:
    step: Json = {
        "source": "agent",
        "message": "",
        "llm_call_count": 1,
        "timestamp": record.get("started_at"),
        "model_name": record.get("model"),
        "extra": {"gateway_request_index": record.get("index"), "native_content": False,
                  "note": "provider request with no native record of its response"},
    }
    metrics = _metrics(record)
    if metrics is not None:
        step["metrics"] = metrics
    return {k: v for k, v in step.items() if v is not None}


def _metrics(record: dict[str, Any] | None) -> Json | None:
    usage = (record or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    out: Json = {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
                 "cached_tokens": usage.get("cache_read_tokens")}
    extra = {k: usage[k] for k in ("cache_write_tokens", "reasoning_tokens") if usage.get(k) is not None}
    if extra:
        out["extra"] = extra
    return {k: v for k, v in out.items() if v is not None}


def _final_metrics(steps: list[Json], subs: list[Json]) -> Json:
    totals = {"total_prompt_tokens": 0, "total_completion_tokens": 0, "total_cached_tokens": 0}
    seen = False
    for step in steps:
        m = step.get("metrics")
        if m:
            seen = True
            totals["total_prompt_tokens"] += m.get("prompt_tokens", 0)
            totals["total_completion_tokens"] += m.get("completion_tokens", 0)
            totals["total_cached_tokens"] += m.get("cached_tokens", 0)
    for sub in subs:
        fm = sub.get("final_metrics") or {}
        for key in totals:
            if key in fm:
                seen = True
                totals[key] += fm[key]
    out: Json = dict(totals) if seen else {}
    out["total_steps"] = len(steps)
    return out


def _record_tools(principal: Principal) -> list[ToolDeclaration]:
    """A sub-agent's inventory: the declarations of the requests joined with its calls."""
    seen: dict[str, ToolDeclaration] = {}
    for call in principal.calls:
        for tool in (call.record or {}).get("tools") or []:
            name = tool.get("name")
            if isinstance(name, str) and name not in seen:
                seen[name] = ToolDeclaration(name=name, type=str(tool.get("type") or "function"),
                                             description=tool.get("description"),
                                             input_schema=tool.get("input_schema"))
    return list(seen.values())


def _root_extra(cell: CellArchive, graph: CallGraph) -> Json:
    summary = cell.summary
    return {"tracetrial": {
        "status": cell.result.status,
        "structured_trace_status": summary.structured_trace_status if summary else None,
        "trace_complete": summary.trace_complete if summary else None,
        "provider_requests": len(cell.records),
        "unmatched_provider_requests": [r.get("index") for r in graph.unmatched],
        "sub_agents_without_model_calls": sorted(p.id for p in graph.principals.values()
                                                 if p.id != MAIN and not p.calls),
    }}


def _iso(e: Any) -> str:
    src = getattr(e, "source_timestamp", None)
    return str(src) if src else str(e.timestamp.isoformat())
