"""OpenClaw native records -> Trace IR (pure: reads only the archived files it is given).

Sources:

* ``native/turn-<n>.stdout`` — one JSON document per turn: the ``agent exec --json`` envelope
  (``ok``, ``status``, ``final``, ``usage``, ``sessionId``, ``error``…) or, for a resumed turn,
  the ``agent --local --json`` result (``payloads``, ``meta.agentMeta`` with ``sessionId``,
  ``usage`` and ``terminalReceipt.runId``);
* ``native/openclaw/<agent>/transcript_events.jsonl`` — the session transcript (the
  model-facing exchange: user prompts, assistant messages with ``toolCall`` blocks and
  per-call usage, ``toolResult`` messages with ``isError`` and the exec ``details`` —
  ``exitCode``, ``status``, ``durationMs`` — joined by ``toolCallId``);
* ``native/openclaw/<agent>/trajectory_runtime_events.jsonl`` — the runtime trajectory of
  each run (``session.started``, ``context.compiled``, ``prompt.submitted``, ``tool.call``,
  ``tool.result``, ``model.completed``, ``session.ended``…), kept as ``native_event``.

Both tables are dumped row by row by the adapter (``event`` is the stored record).

OpenClaw 2026.6.x (no ``agent exec``; every turn is ``agent --local``) keeps each session as
files instead, archived as they are under ``native/openclaw/<agent>/sessions/``:
``<session id>.jsonl`` (the transcript: each line is the record the table's ``event`` holds —
``session``, ``model_change``, ``thinking_level_change``, ``custom``, ``message``…; the messages
carry no ``__openclaw.runId``) and ``<session id>.trajectory.jsonl`` (the runtime trajectory, each
line the runtime record with ``runId``; its ``seq`` here is the line). ``sessions.json`` (the
session index) is context, not read. The layouts are told apart by the files present, so the
same normalizer reads both. Joins the session files need, by the harness's own records only:

* turn -> run: the ``--local`` result of 2026.6.x has no ``terminalReceipt``; its
  ``meta.systemPromptReport`` (session id + ``generatedAt``) is the report the run's
  ``trace.metadata`` trajectory record holds (``data.prompting.systemPromptReport``): that
  record's ``runId`` is the turn's run;
* transcript line -> run: a line whose ``timestamp`` falls inside exactly one run's span of its
  session (the first to the last trajectory record's ``ts``, the same clock) belongs to that run;
  the others (the session header and model snapshot written just before a run starts) follow the
  rule for rows without a run id below;
* lines of several files are read in the order of their own times (a merge that keeps each
  file's order), as the SQLite tables are read in insertion order.

Turns: every turn is one process and one OpenClaw *run*. A turn's run id is read from its
stdout (``agent exec``: the run id is the session id it reports; ``--local``:
``terminalReceipt.runId``). Transcript assistant/tool messages carry ``__openclaw.runId``;
rows without one (the user prompt, model snapshots) belong to the run of the next row of the
same session that has one, else to the previous. Runtime rows are keyed by run id. When a
turn's stdout is missing (killed), a run nobody claimed goes to it only by a native id: the
session id the adapter recorded for that turn, when it is the run's session and no other
such turn has it; otherwise (no native link) the run's rows stay outside any turn with a
``native_diagnostic`` — never given to a turn by order. Every stdout document and dumped row
is accounted (:mod:`harnesses.native`).

Order within a turn: runtime rows up to ``prompt.submitted``, the transcript rows, the rest of
the runtime rows, the stdout result (a ``native_event``, the turn's aggregate ``token_usage``
and a main-principal ``task_completion`` carrying the result's own statements: final text,
``assistantTurns`` as ``model_calls``, the tool summary), stderr. Tool-call ids are the model's ids as the
transcript stores them (OpenClaw rewrites them on the wire, e.g. ``call_1`` -> ``call1``); an
id seen in more than one turn is turn-scoped (``<id>#t<n>``) with ``native_tool_call_id``.

Gateway-backed turns (tasks that delegate; see the adapter): stdout is ``{runId, status, summary,
result}`` with ``result`` in the ``--local`` shape; the turn's run id is ``runId``.

Sub-agents: a session whose key is ``agent:<agent>:subagent:<uuid>`` (``session_windows`` /
the runtime rows' ``sessionKey``) is a child. Its rows belong to a child principal named after
the spawn call whose result names the child session (``childSessionKey`` in the
``sessions_spawn`` result; else the session key), ``principal_role="child"``,
``parent_principal_id`` = the principal that made the call. Its runs, and the parent's
``announce:*`` runs (OpenClaw resuming the parent with the child's completion), are claimed by no
stdout: they go to the turn of the latest claimed run before them. Lifecycle: the spawn result
gives a ``subagent_lifecycle`` ``spawned`` (status ``pending``, or ``failed`` when the spawn was
refused) for the parent; the child's ``session.started`` a ``started``/``running`` record and its
``session.ended`` a ``completed`` (or the native status) record plus a ``task_completion`` with
the child's last reply — all with the child principal id and the native time.

Indirect calls: OpenClaw defers MCP tools behind Tool Search, so the model calls them through
the dispatcher tool ``tool_call`` (``call_tool`` too) with ``{"id": <tool>, "args": {...}}``.
Such a call's tool event names the tool it reaches (``tool_call.name`` = the ``id``, e.g.
``tickets__close_ticket``) with the inner arguments (:func:`unwrap_dispatch`); the dispatcher
call as the model sent it stays in the event's ``raw_event`` (the transcript record). Its
result is the dispatcher's (content verbatim, with OpenClaw's untrusted-content framing).
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnesses.base import NormalizedTrace
from harnesses.native import (
    MAIN,
    TraceBuilder,
    TurnFiles,
    json_arguments,
    message_events,
    read_jsonl,
    repeated_ids,
    seconds,
    single_text,
)
from harnesses.native import as_list as _list
from harnesses.native import as_object as _obj
from tracetrial.trace import (
    ContextCompactionEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStdoutEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolResult,
)

HARNESS = "openclaw"
SRC_STDOUT = f"native:{HARNESS}/stdout"
SRC_STDERR = f"native:{HARNESS}/stderr"
SRC_TRANSCRIPT = f"native:{HARNESS}/transcript"
SRC_TRAJECTORY = f"native:{HARNESS}/trajectory"
#: OpenClaw's Tool Search dispatcher: deferred tools (MCP tools among them) are called through
#: it with ``{"id": <tool>, "args": {...}}`` (the declared schema; ``input`` is its alias).
DISPATCH_TOOLS = ("tool_call", "call_tool")
#: Transcript event types and message roles this normalizer knows; another one stays a
#: ``native_event`` and is flagged as unknown (trace ``partial``). Runtime-trajectory rows are
#: all kept as ``native_event`` by one generic rule, so no trajectory type is unknown to it.
KNOWN_TRANSCRIPT = {"message", "custom", "session", "model_change", "thinking_level_change", "label",
                    "branch_summary", "custom_message"}
KNOWN_ROLES = {"assistant", "toolResult", "user", "custom", "system"}

#: A sub-agent's session key (``agent:<agent>:subagent:<uuid>``) as OpenClaw names it.
CHILD_KEY = re.compile(r"agent:[A-Za-z0-9_.-]+:subagent:[A-Za-z0-9_.-]+")
#: Run ids OpenClaw gives a parent's follow-up run when a child's completion is announced.
ANNOUNCE_RUN = "announce:"
SPAWN_TOOL = "sessions_spawn"

#: 2026.6.x session files (see the module docstring): ``<agent>/sessions/<session id>.jsonl`` and
#: ``<session id>.trajectory.jsonl``, and the session index (context, not read).
SESSIONS_DIR = "sessions"
TRAJECTORY_SUFFIX = ".trajectory.jsonl"
SESSION_INDEX = "sessions.json"

#: Session-store tables the adapter dumps (table -> SQL order: insertion order).
SQLITE_TABLES: dict[str, str] = {
    "transcript_events": "rowid",
    "trajectory_runtime_events": "rowid",
    "session_windows": "rowid",
    "session_nodes": "rowid",
}


@dataclass
class _Row:
    """One dumped SQLite row (``data``), one line of a 2026.6.x session file (``data`` is the
    record itself, ``file_session`` the session its file is named after), or a line of either
    that is not a JSON object."""

    file: str
    no: int
    data: dict[str, Any] | None
    text: str
    error: str | None = None
    #: a line of the transcript (else of the runtime trajectory)
    is_transcript: bool = True
    #: session-file layout: the session id the file is named after
    file_session: str | None = None
    #: session-file layout: the run whose span of the native clock holds the line (transcript)
    clock_run: str | None = None

    @property
    def event(self) -> dict[str, Any]:
        if self.file_session is not None:
            return self.data or {}
        return _obj((self.data or {}).get("event"))

    @property
    def session(self) -> Any:
        """The session of the row: the table's ``session_id`` column, or the file's session."""
        return self.file_session if self.file_session is not None else (self.data or {}).get("session_id")

    @property
    def seq(self) -> int | None:
        """The row's sequence: the table's ``seq`` column, or the line of the session file."""
        if self.file_session is not None:
            return self.no
        value = (self.data or {}).get("seq")
        return value if isinstance(value, int) else None


def _read_dump(path: Path, *, transcript: bool = True) -> Iterator[_Row]:
    name = f"{path.parent.name}/{path.name}"  # <agent>/<table>.jsonl: unique per agent
    for line in read_jsonl(path, name):
        yield _Row(name, line.no, line.data, line.text, line.error, is_transcript=transcript)


def _read_session_files(folder: Path) -> tuple[list[_Row], list[_Row]]:
    """The lines of an agent's 2026.6.x session files (``<agent>/sessions/``): transcript lines
    and runtime-trajectory lines, each list merged across the files by the lines' own times
    (a file's order is always kept: the merge only interleaves whole files' sequences)."""
    transcripts: list[list[_Row]] = []
    trajectories: list[list[_Row]] = []
    agent = folder.parent.name
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        runtime = path.name.endswith(TRAJECTORY_SUFFIX)
        session = path.name.removesuffix(TRAJECTORY_SUFFIX) if runtime else path.name.removesuffix(".jsonl")
        name = f"{agent}/{SESSIONS_DIR}/{path.name}"
        rows = [_Row(name, line.no, line.data, line.text, line.error, is_transcript=not runtime, file_session=session)
                for line in read_jsonl(path, name)]
        (trajectories if runtime else transcripts).append(rows)
    return _merge_by_time(transcripts), _merge_by_time(trajectories)


def _native_time(row: _Row) -> datetime | None:
    """The record's own time (transcript ``timestamp``, trajectory ``ts``), if it states one."""
    value = row.event.get("ts" if not row.is_transcript else "timestamp")
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _merge_by_time(files: list[list[_Row]]) -> list[_Row]:
    """Lines of several files in the order of their times; a line without one keeps the time of
    the line before it in its file (so it never leaves its place in the file)."""
    keyed: list[list[tuple[datetime, _Row]]] = []
    for rows in files:
        last = datetime.min.replace(tzinfo=UTC)
        items = []
        for row in rows:
            last = _native_time(row) or last
            items.append((last, row))
        keyed.append(items)
    return [row for _, row in heapq.merge(*keyed, key=lambda item: item[0])]


def _clock_runs(transcript: list[_Row], runtime: list[_Row]) -> None:
    """Give each session-file transcript line the run whose span (first to last trajectory
    record of the run in that session, by ``ts``) holds its ``timestamp`` — when exactly one does."""
    spans: dict[tuple[Any, str], list[datetime]] = {}
    for row in runtime:
        rid, when = _runtime_run(row), _native_time(row)
        if row.file_session is None or rid is None or when is None:
            continue
        span = spans.setdefault((row.session, rid), [when, when])
        span[0], span[1] = min(span[0], when), max(span[1], when)
    for row in transcript:
        when = _native_time(row)
        if row.file_session is None or when is None:
            continue
        inside = [rid for (sid, rid), (start, end) in spans.items() if sid == row.session and start <= when <= end]
        row.clock_run = inside[0] if len(inside) == 1 else None


def _report_runs(runtime: list[_Row]) -> dict[tuple[str, int], str]:
    """(session id, ``generatedAt``) of each run's system-prompt report -> the run id (the
    ``trace.metadata`` trajectory record holds the report the ``--local`` result repeats)."""
    out: dict[tuple[str, int], str] = {}
    for row in runtime:
        if row.event.get("type") != "trace.metadata":
            continue
        report = _obj(_obj(_obj(row.event.get("data")).get("prompting")).get("systemPromptReport"))
        sid, at, rid = report.get("sessionId"), report.get("generatedAt"), _runtime_run(row)
        if isinstance(sid, str) and isinstance(at, int) and rid is not None:
            out.setdefault((sid, at), rid)
    return out


def _row_kind(row: _Row) -> str:
    """A dumped row's type for the accounting."""
    ev = row.event
    if row.data is None:
        return "unparseable"
    kind = str(ev.get("type"))
    if kind == "message":
        kind += f"/{_obj(ev.get('message')).get('role')}"
    return kind


@dataclass
class _TurnResult:
    """What a turn's stdout said (``kind`` ``exec``/``local``; ``None`` when unparseable/empty)."""

    kind: str | None
    data: dict[str, Any] | None
    text: str
    error: str | None
    session_id: str | None = None
    run_id: str | None = None

    def report_key(self) -> tuple[str, int] | None:
        """(session id, ``generatedAt``) of the result's system-prompt report (``--local`` and
        Gateway-backed results), which names the run in the 2026.6.x trajectory."""
        body = _obj((self.data or {}).get("result")) if self.kind == "gateway" else (self.data or {})
        report = _obj(_obj(body.get("meta")).get("systemPromptReport"))
        sid, at = report.get("sessionId"), report.get("generatedAt")
        return (sid, at) if isinstance(sid, str) and isinstance(at, int) and not isinstance(at, bool) else None


def _read_result(path: Path) -> _TurnResult:
    text = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else ""
    if not text.strip():
        return _TurnResult(None, None, text, "empty stdout")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return _TurnResult(None, None, text, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    if not isinstance(data, dict):
        return _TurnResult(None, None, text, f"not a JSON object ({type(data).__name__})")
    if isinstance(data.get("runId"), str) and isinstance(data.get("result"), dict) and "ok" not in data:
        # Gateway-backed ``openclaw agent --json``: the run id, and the --local result inside
        agent = _obj(_obj(data["result"].get("meta")).get("agentMeta"))
        sid = agent.get("sessionId")
        return _TurnResult("gateway", data, text, None, sid if isinstance(sid, str) else None, data["runId"])
    if "meta" in data and "ok" not in data:
        agent = _obj(_obj(data.get("meta")).get("agentMeta"))
        receipt = _obj(agent.get("terminalReceipt"))
        sid = agent.get("sessionId")
        rid = receipt.get("runId")
        return _TurnResult("local", data, text, None, sid if isinstance(sid, str) else None,
                           rid if isinstance(rid, str) else None)
    sid = data.get("sessionId")
    sid = sid if isinstance(sid, str) and sid else None
    # agent exec runs its single turn with the session id as run id
    return _TurnResult("exec", data, text, None, sid, sid)


def _usage(raw: Any) -> TokenUsage | None:
    u = _obj(raw)
    if not u:
        return None
    ints = {k: (v if isinstance(v, int) else None) for k, v in u.items()}
    return TokenUsage(
        input_tokens=ints.get("input"),
        output_tokens=ints.get("output"),
        cache_read_tokens=ints.get("cacheRead"),
        cache_write_tokens=ints.get("cacheWrite"),
        total_tokens=ints.get("total", ints.get("totalTokens")),
    )


def unwrap_dispatch(name: str, arguments: Any) -> tuple[str, Any]:
    """The tool a call reaches and its arguments: a call of the dispatcher (``tool_call`` /
    ``call_tool``) whose arguments (an object, or a JSON string of one) name the tool by a
    string ``id`` becomes a call of that tool with the inner arguments — ``args``, else its
    alias ``input``, else the other keys (OpenClaw passes those to the tool itself); any
    other call is returned as it is. The native call stays in the event's ``raw_event``."""
    params = json_arguments(arguments) if name in DISPATCH_TOOLS else None
    if not isinstance(params, dict) or not isinstance(params.get("id"), str) or not params["id"]:
        return name, arguments
    nested = params["args"] if params.get("args") is not None else params.get("input")
    if nested is not None and nested != {}:
        return params["id"], nested
    return params["id"], {k: v for k, v in params.items() if k not in ("id", "args", "input")}


@dataclass
class _Child:
    """A sub-agent session: its principal and who spawned it."""

    principal: str
    parent: str = MAIN
    session_key: str | None = None


@dataclass
class _Normalizer(TraceBuilder):
    #: session id -> the child principal its rows belong to
    children: dict[str, _Child] = None  # type: ignore[assignment]
    #: child session key -> child principal id (from the spawn results)
    child_of_key: dict[str, str] = None  # type: ignore[assignment]
    #: child principal -> its last reply text (for its completion record)
    last_reply: dict[str, str] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.children = self.children or {}
        self.child_of_key = self.child_of_key or {}
        self.last_reply = {}

    def who(self, session: Any) -> _Child | None:
        return self.children.get(session) if isinstance(session, str) else None

    def row(self, row: _Row, source: str, turn: int | None) -> Any:
        """Accounting context of one dumped row."""
        return self.handling(source=source, file=row.file, seq=row.no, type=_row_kind(row), turn=turn)

    def env(self, turn: int | None, source: str, session: str | None, seq: int | None, ts: Any, raw: Any) -> dict[str, Any]:
        child = self.who(session)
        who = {"principal_id": MAIN, "principal_role": "main"} if child is None else {
            "principal_id": child.principal, "principal_role": "child", "parent_principal_id": child.parent}
        return self.base(source=source, conversation_turn=turn, session_id=session, **who, source_event_seq=seq,
                         source_timestamp=ts if isinstance(ts, str) else None, raw_event=raw)

    # -- transcript --------------------------------------------------------------------------
    def transcript(self, turn: int | None, row: _Row) -> None:
        ev = row.event
        env = self.env(turn, SRC_TRANSCRIPT, row.session, row.seq, ev.get("timestamp"), ev)
        etype = ev.get("type")
        if etype == "message":
            self.message(env, turn, _obj(ev.get("message")), ev)
        elif isinstance(etype, str) and "compaction" in etype.lower():
            summary = ev.get("summary")
            self.events.append(
                ContextCompactionEvent(
                    **env,
                    native_event_type=f"transcript/{etype}",
                    native_event_id=ev.get("id") if isinstance(ev.get("id"), str) else None,
                    summary=summary if isinstance(summary, str) else None,
                    summary_present=bool(summary) if isinstance(summary, str) else None,
                )
            )
        else:
            kind = f"transcript/{etype}"
            if etype == "custom" and isinstance(ev.get("customType"), str):
                kind += f"/{ev['customType']}"
            if etype in KNOWN_TRANSCRIPT:
                self.events.append(NativeEvent(**env, native_event_type=kind))
            else:
                self.unknown_record(NativeEvent(**env, native_event_type=kind))

    def message(self, env: dict[str, Any], turn: int | None, msg: dict[str, Any], ev: dict[str, Any]) -> None:
        role = msg.get("role")
        if role == "assistant":
            blocks = _list(msg.get("content"))
            mid = ev.get("id") if isinstance(ev.get("id"), str) else None
            model = msg.get("model") if isinstance(msg.get("model"), str) else None
            stop = msg.get("stopReason") if isinstance(msg.get("stopReason"), str) else None
            texts: list[Any] = []
            if stop == "error":
                # The harness's record of a failed model call: any text in it is the harness's
                # error wording, not a model message (it goes into the diagnostic below).
                texts = [b.get("text") for b in blocks if _obj(b).get("type") == "text"]
                blocks = [b for b in blocks if _obj(b).get("type") != "text"]
            self.events += message_events(env, blocks, tool_block="toolCall", reasoning_keys=("thinking", "text"),
                                          message_id=mid, model=model, finish_reason=stop)
            principal = env["principal_id"]
            for b in blocks:
                if _obj(b).get("type") == "toolCall" and isinstance(b.get("id"), str):
                    self.call(env, b["id"], turn, *unwrap_dispatch(str(b.get("name")), b.get("arguments")),
                              principal=principal)
            said = [b.get("text") for b in blocks if _obj(b).get("type") == "text" and isinstance(b.get("text"), str)]
            if env["principal_role"] == "child" and said and stop != "error":
                self.last_reply[principal] = "\n".join(said)
            if msg.get("errorMessage") or stop == "error":
                detail = {"errorMessage": msg.get("errorMessage"), "text": texts} if texts else msg.get("errorMessage")
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="assistant_error", detail=detail))
            usage = _usage(msg.get("usage"))
            if usage is not None:
                cost = _obj(_obj(msg.get("usage")).get("cost")).get("total")
                self.events.append(
                    TokenUsageEvent(
                        **env, usage=usage, usage_scope="call",
                        reported_cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
                    )
                )
        elif role == "toolResult" and isinstance(msg.get("toolCallId"), str):
            found = self.answered(env, msg["toolCallId"], turn, principal=env["principal_id"],
                                  unmatched="transcript/tool_result_unmatched")
            if found is None:
                return
            details = _obj(msg.get("details"))
            found.tool_result = ToolResult(
                content=single_text(msg.get("content")),
                is_error=msg.get("isError") if isinstance(msg.get("isError"), bool) else None,
                status=details.get("status") if isinstance(details.get("status"), str) else None,
                exit_code=details.get("exitCode") if isinstance(details.get("exitCode"), int) else None,
                duration=seconds(details.get("durationMs")),
            )
            if found.tool_call.name == SPAWN_TOOL:
                self.spawned(env, found, msg)
        elif role in KNOWN_ROLES:
            self.events.append(NativeEvent(**env, native_event_type=f"transcript/message/{role}"))
        else:
            self.unknown_record(NativeEvent(**env, native_event_type=f"transcript/message/{role}"))

    def spawned(self, env: dict[str, Any], call: Any, msg: dict[str, Any]) -> None:
        """The lifecycle record of a spawn call's result: the child it names is pending (the spawn
        was accepted) or the spawn failed."""
        status = _spawn_status(msg)
        text = json.dumps([msg.get("content"), msg.get("details")], ensure_ascii=False)
        key = next(iter(CHILD_KEY.findall(text)), None)
        child = self.child_of_key.get(key) if key else None
        failed = status != "accepted" and (msg.get("isError") is True or status in ("error", "forbidden", "failed"))
        if child is None and not failed:
            return
        self.events.append(SubagentLifecycleEvent(
            **env, action="spawn_failed" if failed else "spawned", status="failed" if failed else "pending",
            child_principal_id=child, pending_child_ids=[child] if child and not failed else None))

    # -- runtime trajectory ------------------------------------------------------------------------
    def runtime(self, turn: int | None, row: _Row) -> None:
        ev = row.event
        data = _obj(ev.get("data"))
        # the table's own sequence (unique per run; the event's "seq" restarts on each retry
        # attempt), or the line of the session file
        seq = row.seq
        sid = ev.get("sessionId") if isinstance(ev.get("sessionId"), str) else None
        env = self.env(turn, SRC_TRAJECTORY, sid, seq, ev.get("ts"), ev)
        etype = str(ev.get("type"))
        if "compaction" in etype.lower():
            self.events.append(ContextCompactionEvent(**env, native_event_type=f"trajectory/{etype}"))
            return
        status = data.get("status", data.get("finalStatus"))
        self.events.append(
            NativeEvent(**env, native_event_type=f"trajectory/{etype}", status=status if isinstance(status, str) else None)
        )
        if env["principal_role"] == "child" and etype in ("session.started", "session.ended"):
            self.child_lifecycle(env, etype, data)
        if etype == "model.completed" and data.get("stopReason") == "error":
            # a failed model call leaves no transcript message: its error is only recorded here
            errors = [
                {k: m[k] for k in ("errorMessage", "errorCode", "errorType") if k in m}
                for m in (data.get("messagesSnapshot") or [])
                if isinstance(m, dict) and m.get("errorMessage")
            ]
            self.events.append(
                NativeDiagnosticEvent(**env, diagnostic_type="trajectory/model.completed/error", detail=errors or None)
            )

    def child_lifecycle(self, env: dict[str, Any], etype: str, data: dict[str, Any]) -> None:
        """A child run's start (``running``) or end (``completed`` for OpenClaw's ``success``, else
        its own status) and, at its end, the child's completion record with its last reply."""
        child = env["principal_id"]
        if etype == "session.started":
            self.events.append(SubagentLifecycleEvent(**env, action="started", status="running",
                                                      child_principal_id=child))
            return
        native = data.get("status") if isinstance(data.get("status"), str) else None
        status = "completed" if native == "success" else (native or "ended")
        stop = data.get("stopReason") if isinstance(data.get("stopReason"), str) else None
        self.events.append(SubagentLifecycleEvent(**env, action="completed" if status == "completed" else "ended",
                                                  status=status, stop_reason=stop, child_principal_id=child))
        reply = self.last_reply.get(child)
        self.events.append(TaskCompletionEvent(**env, status=status, child_principal_id=child,
                                               content={"final_text": reply} if reply is not None else None))

    # -- stdout result ------------------------------------------------------------------------------
    def result(self, turn: int, res: _TurnResult) -> None:
        if res.data is None:
            self.events.append(
                RawStdoutEvent(**self.base(source=SRC_STDOUT, conversation_turn=turn), text=res.text, stream_seq=1,
                               parseable=False, parse_error=res.error)
            )
            return
        env = self.env(turn, SRC_STDOUT, res.session_id, 1, None, res.data)
        data = res.data
        if res.kind == "exec":
            self.events.append(NativeEvent(**env, native_event_type="agent_exec/result",
                                           status=data.get("status") if isinstance(data.get("status"), str) else None))
            usage = _usage(data.get("usage"))
            cost = data.get("costUsd")
            if data.get("ok") is False or data.get("error") is not None:
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="agent_exec_error",
                                                         detail=data.get("error")))
        else:
            body = _obj(data.get("result")) if res.kind == "gateway" else data
            meta = _obj(body.get("meta"))
            agent = _obj(meta.get("agentMeta"))
            stop = meta.get("stopReason")
            self.events.append(NativeEvent(**env, native_event_type=f"agent_{res.kind}/result",
                                           status=stop if isinstance(stop, str) else None))
            if res.kind == "gateway" and data.get("status") not in (None, "ok"):
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="agent_gateway_error",
                                                         detail={"status": data.get("status"),
                                                                 "summary": data.get("summary")}))
            usage = _usage(agent.get("usage"))
            cost = agent.get("costUsd")
            if meta.get("error") is not None or meta.get("aborted") is True:
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="agent_local_error",
                                                         detail=meta.get("error") or {"aborted": True}))
        self.events.append(
            TokenUsageEvent(
                **env,
                usage=usage,
                usage_available=usage is not None,
                usage_scope="turn",
                usage_aggregate=True,
                reported_cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            )
        )
        self.completion(env, res)

    def completion(self, env: dict[str, Any], res: _TurnResult) -> None:
        """The turn's completion record: what OpenClaw states about the finished run, under the
        Trace IR's names (``final_text`` <- ``final``/``finalAssistantVisibleText``,
        ``model_calls`` <- ``assistantTurns``, ``tool_summary`` <- ``toolSummary``); only the
        fields the native result carries."""
        data = res.data or {}
        if res.kind == "exec":
            status, final = data.get("status"), data.get("final")
            turns, summary = data.get("assistantTurns"), data.get("toolSummary")
        else:
            meta = _obj((_obj(data.get("result")) if res.kind == "gateway" else data).get("meta"))
            status = "aborted" if meta.get("aborted") is True else meta.get("stopReason")
            final = meta.get("finalAssistantVisibleText")
            turns, summary = _obj(meta.get("agentMeta")).get("assistantTurns"), meta.get("toolSummary")
        content: dict[str, Any] = {}
        if isinstance(final, str):
            content["final_text"] = final
        if isinstance(turns, int) and not isinstance(turns, bool):
            content["model_calls"] = turns
        if isinstance(summary, dict):
            content["tool_summary"] = summary
        self.events.append(
            TaskCompletionEvent(**env, status=status if isinstance(status, str) else None, content=content or None)
        )


def _children(store: Path, transcript: list[_Row], runtime: list[_Row]) -> tuple[dict[str, _Child], dict[str, str]]:
    """Child sessions (session id -> principal) and child session key -> principal id.

    A session is a child when its key names a sub-agent (``session_windows`` or the runtime rows'
    ``sessionKey``); its principal is the native id of the ``sessions_spawn`` call (direct or
    through ``tool_call``) whose result names that key (the first one), else the key itself; its
    parent is the principal of the session that made that call (``main``, or a child that spawned
    a child of its own)."""
    keys: dict[str, str] = {}
    for row in runtime:
        sid, key = row.event.get("sessionId"), row.event.get("sessionKey")
        if isinstance(sid, str) and isinstance(key, str):
            keys.setdefault(sid, key)
    for agent in sorted(p for p in store.iterdir() if p.is_dir()) if store.is_dir() else []:
        for row in _read_dump(agent / "session_windows.jsonl", transcript=False):
            data = row.data or {}
            if isinstance(data.get("session_id"), str) and isinstance(data.get("session_key"), str):
                keys.setdefault(data["session_id"], data["session_key"])
    spawn_calls: set[str] = set()
    for row in transcript:
        msg = _obj(row.event.get("message"))
        if msg.get("role") == "assistant":
            for b in _list(msg.get("content")):
                if (_obj(b).get("type") == "toolCall" and isinstance(b.get("id"), str)
                        and unwrap_dispatch(str(b.get("name")), b.get("arguments"))[0] == SPAWN_TOOL):
                    spawn_calls.add(b["id"])
    call_of_key: dict[str, str] = {}
    spawner_of_key: dict[str, str] = {}  # child key -> session id of the spawning session
    for row in transcript:
        msg = _obj(row.event.get("message"))
        cid = msg.get("toolCallId")
        if msg.get("role") != "toolResult" or not isinstance(cid, str) or cid not in spawn_calls:
            continue
        if _spawn_status(msg) is None:
            continue
        for key in CHILD_KEY.findall(json.dumps([msg.get("content"), msg.get("details")], ensure_ascii=False)):
            if key not in call_of_key:
                call_of_key[key] = cid
                sid = row.session
                if isinstance(sid, str):
                    spawner_of_key[key] = sid
    children: dict[str, _Child] = {}
    for sid, key in keys.items():
        if CHILD_KEY.fullmatch(key):
            children[sid] = _Child(call_of_key.get(key, key), MAIN, key)
    for child in children.values():
        spawner = children.get(spawner_of_key.get(child.session_key or "", ""))
        if spawner is not None and spawner is not child:
            child.parent = spawner.principal
    return children, {key: call_of_key.get(key, key) for key in {c.session_key for c in children.values()} | set(call_of_key)
                      if key}


def _spawn_status(msg: dict[str, Any]) -> str | None:
    """The ``status`` of a ``sessions_spawn`` result (reached directly or through ``tool_call``,
    whose result wraps the tool's as ``result.details``)."""
    for holder in (_obj(msg.get("details")), _obj(_obj(_obj(msg.get("details")).get("result")).get("details"))):
        named = "childSessionKey" in holder or "error" in holder or "runId" in holder
        if isinstance(holder.get("status"), str) and holder.get("status") != "" and named:
            return str(holder["status"])
    text = single_text(msg.get("content"))
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    data = _obj(data)
    inner = _obj(_obj(data.get("result")).get("details")) or data
    return inner.get("status") if isinstance(inner.get("status"), str) else None


def _runtime_run(row: _Row) -> str | None:
    """The run a runtime-trajectory row belongs to (its ``run_id`` column, else the event's ``runId``)."""
    rid = (row.data or {}).get("run_id") or row.event.get("runId")
    return rid if isinstance(rid, str) else None


def _run_of(row: _Row) -> str | None:
    """A transcript row's run: the message's ``__openclaw.runId`` (SQLite store), else the run
    whose span holds the line's time (session files, :func:`_clock_runs`)."""
    rid = _obj(_obj(row.event.get("message")).get("__openclaw")).get("runId")
    return rid if isinstance(rid, str) else row.clock_run


def _assign_transcript(rows: list[_Row], turn_of_run: dict[str, int], fallback: dict[str, int]) -> dict[int, int]:
    """Row index -> turn: by ``__openclaw.runId``; rows without one go with the next row of the
    same session that has one (else the previous); ``fallback`` gives a session's last turn."""
    out: dict[int, int] = {}
    by_session: dict[Any, list[int]] = {}
    for i, row in enumerate(rows):
        by_session.setdefault(row.session, []).append(i)
    for session, idxs in by_session.items():
        pending: list[int] = []
        last: int | None = None
        for i in idxs:
            rid = _run_of(rows[i])
            turn = turn_of_run.get(rid) if rid else None
            if turn is None:
                pending.append(i)
                continue
            for p in pending:
                out[p] = turn
            pending = []
            out[i] = turn
            last = turn
        for p in pending:
            t = last if last is not None else fallback.get(session)
            if t is not None:
                out[p] = t
    return out


def _ended_in_files(runtime: list[_Row], rturn: dict[int, int], turn: int, norm: _Normalizer) -> bool:
    """Whether a main-session run placed in ``turn`` has its ``session.ended`` record in a 2026.6.x
    session file (the only layout whose CLI leaves stdout empty on a failed run)."""
    return any(rturn.get(i) == turn and row.file_session is not None and row.event.get("type") == "session.ended"
               and norm.who(row.event.get("sessionId")) is None for i, row in enumerate(runtime))


def _call_ids(rows: list[_Row], turns: dict[int, int]) -> Iterator[tuple[str, int]]:
    """(native call id, turn) of every ``toolCall`` block of the transcript rows placed in a turn."""
    for i, row in enumerate(rows):
        msg = _obj(row.event.get("message"))
        if msg.get("role") != "assistant" or i not in turns:
            continue
        for b in _list(msg.get("content")):
            if _obj(b).get("type") == "toolCall" and isinstance(b.get("id"), str):
                yield b["id"], turns[i]


def normalize(
    turns: Sequence[TurnFiles],
    store: Path,
    run_id: str,
    *,
    sessions: dict[int, str] | None = None,
    at: datetime,
) -> NormalizedTrace:
    """Normalize archived OpenClaw output of a run (turns in order) into Trace IR events.

    ``store`` is ``native/openclaw`` (one folder per agent with the table dumps); ``sessions``
    maps a turn to the session id the adapter recorded (used when a turn's stdout is missing);
    ``at`` is every event's timestamp (the adapter passes the recorded turn time).
    """
    ordered = sorted(turns, key=lambda t: t.index)
    results = {t.index: _read_result(t.stdout) for t in ordered}
    norm = _Normalizer(run_id, at)

    transcript: list[_Row] = []
    runtime: list[_Row] = []
    bad: list[_Row] = []
    for agent in sorted(p for p in store.iterdir() if p.is_dir()) if store.is_dir() else []:
        for row in _read_dump(agent / "transcript_events.jsonl"):
            (transcript if row.data is not None else bad).append(row)
        for row in _read_dump(agent / "trajectory_runtime_events.jsonl", transcript=False):
            (runtime if row.data is not None else bad).append(row)
        lines, steps = _read_session_files(agent / SESSIONS_DIR)
        for row in [*lines, *steps]:
            if row.data is None:
                bad.append(row)
            else:
                (transcript if row.is_transcript else runtime).append(row)
    _clock_runs(transcript, runtime)

    norm.children, norm.child_of_key = _children(store, transcript, runtime)
    # a --local result without a terminal receipt (2026.6.x) names its run by its prompt report
    reports = _report_runs(runtime)
    for t in ordered:
        res = results[t.index]
        key = res.report_key() if res.run_id is None else None
        if key is not None and key in reports:
            res.run_id = reports[key]
    # run id -> turn, from stdout; unclaimed runs go to turns without a known run, in order
    turn_of_run: dict[str, int] = {}
    for t in ordered:
        rid = results[t.index].run_id
        if rid:
            turn_of_run[rid] = t.index
    runs_in_order: list[str] = []
    latest: int | None = None
    for row in runtime:
        rid = _runtime_run(row)
        if not isinstance(rid, str):
            continue
        if rid not in runs_in_order:
            runs_in_order.append(rid)
            delegated = norm.who(row.event.get("sessionId")) is not None or rid.startswith(ANNOUNCE_RUN)
            if rid not in turn_of_run and delegated and latest is not None:
                # a child's run or the parent's announce run: part of the turn that was running
                turn_of_run[rid] = latest
        latest = turn_of_run.get(rid, latest)
    unclaimed = [r for r in runs_in_order if r not in turn_of_run]
    orphans = [t.index for t in ordered if results[t.index].run_id is None]
    run_session: dict[str, str] = {}
    for row in runtime:
        rid, sid = _runtime_run(row), row.event.get("sessionId")
        if isinstance(rid, str) and isinstance(sid, str):
            run_session.setdefault(rid, sid)
    for rid in unclaimed:
        # only a native id links a run to a turn without stdout: the session id recorded for it
        candidates = [i for i in orphans if (sessions or {}).get(i) is not None
                      and (sessions or {}).get(i) == run_session.get(rid)]
        if len(candidates) == 1 and sum(1 for r in unclaimed if run_session.get(r) == run_session.get(rid)) == 1:
            turn_of_run[rid] = candidates[0]
            orphans.remove(candidates[0])
            norm.degrade(f"turn {candidates[0]}: no run id on stdout; runtime run {rid} joined by its session id")
        else:
            norm.diagnostic("unmatched_run", {"run_id": rid, "session_id": run_session.get(rid)}, turn=None,
                            note=f"runtime run {rid} matches no turn (no stdout names it, no native id links it "
                            "to a turn without stdout); its rows stay outside the turns")
    session_turn: dict[str, int] = {}
    for t in ordered:
        sid = results[t.index].session_id or (sessions or {}).get(t.index)
        if sid:
            session_turn[sid] = t.index

    tturn = _assign_transcript(transcript, turn_of_run, session_turn)
    norm.scoped = repeated_ids(_call_ids(transcript, tturn))
    last = ordered[-1].index if ordered else 1
    loose_t: list[_Row] = []
    for i, row in enumerate(transcript):
        if i not in tturn:
            loose_t.append(row)
            norm.degrade(f"transcript row session={row.session!r} seq={row.seq!r} "
                         "matches no turn's run; kept outside the turns")
    rturn: dict[int, int] = {}
    loose_r: list[_Row] = []
    for i, row in enumerate(runtime):
        rid = _runtime_run(row)
        if isinstance(rid, str) and rid in turn_of_run:
            rturn[i] = turn_of_run[rid]
        else:
            loose_r.append(row)
            norm.degrade(f"runtime row run={rid!r} matches no turn; kept outside the turns")

    for row in bad:
        norm.degrade(f"{row.file} line {row.no}: {row.error}")
    for row in [*transcript, *runtime, *bad]:
        norm.ledger.expect(source=SRC_TRANSCRIPT if row.is_transcript else SRC_TRAJECTORY,
                           file=row.file, seq=row.no, type=_row_kind(row))

    norm.parsed_any = bool(transcript or runtime)
    for t in ordered:
        res = results[t.index]
        pre: list[_Row] = []
        post: list[_Row] = []
        submitted = False
        for i, row in enumerate(runtime):
            if rturn.get(i) != t.index:
                continue
            (post if submitted else pre).append(row)
            if row.event.get("type") == "prompt.submitted":
                submitted = True
        for row in pre:
            with norm.row(row, SRC_TRAJECTORY, t.index):
                norm.runtime(t.index, row)
        for i, row in enumerate(transcript):
            if tturn.get(i) == t.index:
                with norm.row(row, SRC_TRANSCRIPT, t.index):
                    norm.transcript(t.index, row)
        for row in post:
            with norm.row(row, SRC_TRAJECTORY, t.index):
                norm.runtime(t.index, row)
        if t.index == last:
            for row in bad:  # malformed dump lines stay visible
                source = SRC_TRANSCRIPT if row.is_transcript else SRC_TRAJECTORY
                with norm.row(row, source, t.index):
                    norm.events.append(
                        NativeEvent(**norm.base(source=source, conversation_turn=t.index, source_event_seq=row.no),
                                    native_event_type="malformed_record", status=row.error, raw_event=row.text)
                    )
        with norm.handling(source=SRC_STDOUT, file=t.stdout.name, seq=1, turn=t.index,
                           type=f"agent_{res.kind}/result" if res.kind else "unparseable"):
            norm.result(t.index, res)
        if res.data is None and not res.text.strip() and _ended_in_files(runtime, rturn, t.index, norm):
            # 2026.6.x ``agent --local`` prints nothing on stdout when its run fails (the error goes
            # to stderr, exit 1); the run's own end record, in the session file, says the turn ended
            norm.degrade(f"turn {t.index}: no result on stdout; its run's session.ended record ends the turn")
        elif res.data is None:
            norm.unfinished_turn(t.index, f"turn {t.index}: stdout has no JSON result ({res.error})")
        elif not any(tturn.get(i) == t.index for i in range(len(transcript))):
            norm.degrade(f"turn {t.index}: no transcript rows for run {res.run_id} (tool exchange not observable)")
        norm.parsed_any = norm.parsed_any or res.data is not None
        norm.stderr(t, SRC_STDERR)
    for row in loose_t:  # rows no turn's run claims: visible, outside the turns
        with norm.row(row, SRC_TRANSCRIPT, None):
            norm.transcript(None, row)
    for row in loose_r:
        with norm.row(row, SRC_TRAJECTORY, None):
            norm.runtime(None, row)
    return norm.trace(nothing="no parseable OpenClaw result and no session records in any turn")
