"""DeepSeek Harness native records -> Trace IR (pure: reads only the archived files it is given).

Source per turn: ``native/turn-<n>.stdout``, the runtime's JSON-RPC stdout verbatim (one JSON
message per line, wire order = the strongest native order), with the requests we sent in
``turn-<n>.requests.jsonl`` (to name the method a response answers). Messages:

* responses (``initialize``, ``session/prompt``, ``shutdown``) -> ``native_event``
  (``native_method``), an error response -> ``native_diagnostic``;
* ``session.status`` (``running``/``idle``) -> ``native_event`` with the status;
* ``userQuestions/ask`` (tasks with ask_user: the benchmark's user-questions provider asking the
  client; our answer is in ``requests.jsonl``) -> ``native_event``;
* ``session.event`` by ``event.type``:

  - ``assistant/message`` -> ``assistant_message`` (text or reasoning blocks, the message's
    usage as ``token_usage`` of scope ``call``, the finish reason of the step's ``finish``
    chunk) and one ``tool`` per ``tool-call`` block (arguments: the JSON the model sent,
    parsed; kept verbatim when not JSON);
  - ``tool/result`` -> the ``tool_result`` of the call with the same ``toolCallId`` (rc6: its
    ``tool-result`` blocks; 0.2.x: the tool message itself) (content verbatim — rc6 reports a non-zero exit only as ``[exit code: N]`` text, so ``exit_code`` is
    never set — and the block's ``isError``);
  - ``assistant/chunk`` text/reasoning deltas -> ``assistant_delta``; the other chunks
    (block start/end, tool-call deltas, usage, finish) are folded into the
    ``assistant/message`` that lists them in ``sourceEventSeqs`` and are not repeated — except
    a ``finish`` with reason ``error`` (a failed model call, retried or not), which no message
    carries: it becomes a ``native_diagnostic``;
  - ``request/header`` (the system prompt, tools and model config the harness records when
    they change) -> ``model_input`` (messages are not in the header: left ``None``);
  - ``turn/end`` with a reason other than ``completed`` -> ``native_diagnostic``;
  - everything else (``turn/start``, ``step/start``, ``tool/call``, ``user/message``,
    ``agent/inbox/spliced``, ``session/title``, ``request/context``…) -> ``native_event``.

``native/sessions/<session>/session.jsonl.zstd`` (the runtime's own session log, kept
verbatim) becomes a ``native_session_archive`` record with its digest and size.

0.2.x (``deepseek@0.2.1rc2``, the ``sdk`` profile) speaks the same JSON-RPC but records
differently; each of its own records maps as follows:

* no ``assistant/chunk`` notifications: the message's stream travels inside
  ``assistant/message`` (``data.stream``: ``chunk`` block-start/end, usage, finish and
  ``text-chunks`` / ``tool-call-chunks``); the finish reason is read from its ``finish`` chunk;
* ``assistant/attempt`` (a model call that failed and will be retried; its ``stream`` ends in
  a ``finish`` of reason ``error``) -> ``native_diagnostic`` ``assistant/attempt/finish/error``;
* ``system/message`` (the system prompt of the step) -> the ``messages`` of the ``model_input``
  of the ``request/header`` that follows it in the same session, folded into it (one
  ``model_input`` per recorded request, as rc6); a system message no header follows stays
  unaccounted (the trace is ``partial``);
* ``permission/preset``, ``sandbox/mode``, ``approval/policy`` -> ``policy_event`` (kind
  ``permission_preset`` / ``sandbox_mode`` / ``approval_policy``, the value as ``decision``);
* ``job/settled`` of a foreground bash job (its ``toolCall.callId`` is a call of the turn not
  answered yet) -> folded into that call's ``tool``: the job's ``status`` and the exit status
  its ``detail`` states (``exit code: N``, the runtime's job record, not the model-facing
  ``[exit code: N]`` text) as ``exit_code``; any other ``job/settled`` and every
  ``job/registered`` -> ``native_event`` with the job status;
* ``session-log-deepseek/delivery-accepted`` (the session log plugin took events up to a seq)
  -> ``native_event``;
* ``subagent.started`` / ``subagent.finished`` notifications -> ``subagent_lifecycle`` (child =
  the child session id); events of a child session carry that principal (role ``child``).

Call ids are the model's; an id seen in more than one turn is turn-scoped (``<id>#t<n>``) with
``native_tool_call_id``.

Accounting (:mod:`harnesses.native`): every wire message is accounted; a folded chunk is listed
(``source_records``) by the last event of the ``assistant/message`` whose ``sourceEventSeqs``
name it — a folded chunk no message names is unaccounted (trace ``partial``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
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
    single_text,
)
from harnesses.native import NativeLine as _Line
from harnesses.native import as_list as _list
from harnesses.native import as_object as _obj
from tracetrial.trace import (
    AssistantDeltaEvent,
    ModelInputEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    NativeSessionArchiveEvent,
    PolicyEvent,
    SubagentLifecycleEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolEvent,
    ToolResult,
)

HARNESS = "deepseek"
SRC_STDOUT = f"native:{HARNESS}/stdout"
SRC_STDERR = f"native:{HARNESS}/stderr"
SRC_SESSION = f"native:{HARNESS}/session"

#: assistant/chunk types folded into the assistant/message that lists them (sourceEventSeqs).
FOLDED_CHUNKS = {"block-start", "block-end", "tool-call-delta", "usage", "finish"}
#: Wire methods and session event types this normalizer knows (others are flagged unknown).
#: ``userQuestions/ask`` is a request *to* the client from the benchmark's user-questions provider
#: (tasks with ask_user, :mod:`harnesses.deepseek.ask_user`); the model sees the ask as the
#: ask_user_question tool/call and tool/result events.
KNOWN_METHODS = {"session.event", "session.status", "userQuestions/ask", "subagent.started", "subagent.finished"}
KNOWN_EVENTS = {"assistant/chunk", "assistant/message", "tool/result", "request/header", "turn/end", "turn/start",
                "step/start", "step/end", "tool/call", "user/message", "agent/inbox/spliced", "session/title",
                "request/context", "llm/retry", "llm/retry-started",
                # 0.2.x (mapped in _Normalizer.line; the last two kept as native events)
                "assistant/attempt", "system/message", "permission/preset", "sandbox/mode", "approval/policy",
                "job/registered", "job/settled", "session-log-deepseek/delivery-accepted"}
#: 0.2.x session-policy records -> (policy kind, the data key holding the value)
POLICY_EVENTS = {"permission/preset": ("permission_preset", "preset"), "sandbox/mode": ("sandbox_mode", "mode"),
                 "approval/policy": ("approval_policy", "policy")}
#: The runtime's job record states a finished process's status as ``detail: "exit code: N"``.
JOB_EXIT = re.compile(r"exit code: (-?\d+)")
DELTA_CHUNKS = {"text-delta": "content_delta", "reasoning-delta": "reasoning_delta", "thinking-delta": "reasoning_delta"}


def _event(data: dict[str, Any]) -> dict[str, Any]:
    return _obj(_obj(data.get("params")).get("event"))


def _kind(data: dict[str, Any]) -> str:
    """A wire message's type for the accounting."""
    if "method" not in data:
        return "rpc/response"
    ev = _event(data)
    if data.get("method") == "session.event":
        chunk = _obj(_obj(ev.get("data")).get("chunk")).get("type")
        return f"session.event/{ev.get('type')}" + (f"/{chunk}" if isinstance(chunk, str) else "")
    return str(data.get("method"))


@dataclass
class _Normalizer(TraceBuilder):
    finish: dict[tuple[Any, Any, Any], str] = field(default_factory=dict)  # (session, turn, step) -> reason
    #: (session, event seq) -> the wire line of a folded chunk (for the message that lists it)
    chunks: dict[tuple[Any, Any], _Line] = field(default_factory=dict)
    #: session -> the 0.2.x system/message lines waiting for their request/header
    systems: dict[Any, list[tuple[_Line, Any]]] = field(default_factory=dict)
    #: (turn, native call id) -> a 0.2.x foreground job's settle line, status and exit code
    jobs: dict[tuple[int, str], tuple[_Line, str | None, int | None]] = field(default_factory=dict)
    #: child session id -> its parent session id (0.2.x subagent.started)
    children: dict[str, str] = field(default_factory=dict)

    def env(self, turn: int, line: _Line, data: dict[str, Any]) -> dict[str, Any]:
        params = _obj(data.get("params"))
        ev = _obj(params.get("event"))
        d = _obj(ev.get("data"))
        ts = ev.get("time")
        session = params.get("sessionId")
        parent = self.children.get(session) if isinstance(session, str) else None
        return self.base(
            source=SRC_STDOUT,
            conversation_turn=turn,
            session_id=session if isinstance(session, str) else None,
            turn_id=d.get("turn") if isinstance(d.get("turn"), (int, str)) else None,
            step_id=d.get("step") if isinstance(d.get("step"), (int, str)) else None,
            # a 0.2.x child session is its own principal (its id: the child session id)
            principal_id=session if parent is not None else MAIN,
            principal_role="child" if parent is not None else "main",
            **({"parent_principal_id": MAIN if parent not in self.children else parent} if parent is not None else {}),
            source_event_seq=line.no,
            source_timestamp=str(ts) if isinstance(ts, (int, float)) else None,
            raw_event=data,
        )

    def line(self, turn: int, line: _Line, methods: dict[str, str]) -> None:
        data = line.data or {}
        env = self.env(turn, line, data)
        if "method" not in data and "id" in data:  # a response to one of our requests
            method = methods.get(str(data.get("id")))
            if "error" in data:
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type=f"rpc_error/{method}",
                                                         detail=data.get("error")))
            else:
                self.events.append(NativeEvent(**env, native_event_type="rpc/response", native_method=method))
            return
        method = data.get("method")
        params = _obj(data.get("params"))
        if method == "session.status":
            status = params.get("status")
            self.events.append(NativeEvent(**env, native_event_type="session.status", native_method=method,
                                           status=status if isinstance(status, str) else None))
            return
        if method in ("subagent.started", "subagent.finished"):
            self.subagent(env, str(method), params)
            return
        if method != "session.event":
            event = NativeEvent(**env, native_event_type=str(method), native_method=str(method))
            if method in KNOWN_METHODS:
                self.events.append(event)
            else:
                self.unknown_record(event)
            return
        ev = _event(data)
        etype = ev.get("type")
        d = _obj(ev.get("data"))
        if etype == "assistant/chunk":
            chunk = _obj(d.get("chunk"))
            ctype = chunk.get("type")
            if ctype == "finish":
                reason = _obj(chunk.get("reason")).get("kind")
                if isinstance(reason, str):
                    self.finish[(params.get("sessionId"), d.get("turn"), d.get("step"))] = reason
                if reason == "error":  # a failed model call: no assistant/message carries it
                    self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="assistant/chunk/finish/error",
                                                             detail=chunk.get("reason")))
            if ctype in DELTA_CHUNKS:
                text = chunk.get("text", chunk.get("delta"))
                self.events.append(AssistantDeltaEvent(
                    **env, **{DELTA_CHUNKS[ctype]: text if isinstance(text, str) else None},
                    content_kind="reasoning" if DELTA_CHUNKS[ctype] == "reasoning_delta" else "text",
                    fragment_seq=ev.get("seq") if isinstance(ev.get("seq"), int) else None,
                ))
            elif ctype not in FOLDED_CHUNKS:
                self.unknown_record(NativeEvent(**env, native_event_type=f"assistant/chunk/{ctype}"))
            else:
                self.chunks[(params.get("sessionId"), ev.get("seq"))] = line
        elif etype == "assistant/message":
            before = len(self.events)
            self.assistant(env, turn, d, params.get("sessionId"))
            if len(self.events) > before:
                for seq in _list(ev.get("sourceEventSeqs")):
                    chunk_line = self.chunks.pop((params.get("sessionId"), seq), None)
                    if chunk_line is not None:
                        self.ledger.fold_record(self.events[-1], chunk_line.file, chunk_line.no)
        elif etype == "tool/result":
            self.tool_result(env, turn, d)
        elif etype == "request/header":
            header = _obj(d.get("header"))
            config = _obj(header.get("config"))
            systems = self.systems.pop(params.get("sessionId"), [])
            self.events.append(ModelInputEvent(
                **env,
                model=config.get("model") if isinstance(config.get("model"), str) else None,
                provider=config.get("provider") if isinstance(config.get("provider"), str) else None,
                messages=[m for _, m in systems] or None,
                tools=header.get("tools") if isinstance(header.get("tools"), list) else None,
                request_params=config or None,
            ))
            for system_line, _ in systems:
                self.ledger.fold_record(self.events[-1], system_line.file, system_line.no)
        elif etype == "system/message":  # 0.2.x: folded into the next request/header's model_input
            self.systems.setdefault(params.get("sessionId"), []).append((line, d.get("message")))
        elif etype == "assistant/attempt":  # 0.2.x: a failed model call (retried or not)
            reasons = [_obj(_obj(c).get("chunk")).get("reason") for c in _list(d.get("stream"))
                       if _obj(_obj(c).get("chunk")).get("type") == "finish"]
            errors = [r for r in reasons if _obj(r).get("kind") == "error"]
            if errors:
                for r in errors:
                    self.events.append(NativeDiagnosticEvent(**env, diagnostic_type="assistant/attempt/finish/error",
                                                             detail=r))
            else:
                self.events.append(NativeEvent(**env, native_event_type="session.event/assistant/attempt"))
        elif etype in POLICY_EVENTS:
            policy, key = POLICY_EVENTS[etype]
            value = d.get(key)
            self.events.append(PolicyEvent(**env, policy_kind=policy,
                                           decision=value if isinstance(value, str) else str(value)))
        elif etype == "job/settled":
            self.job_settled(env, turn, line, d)
        elif etype == "job/registered":
            status = d.get("kind")
            self.events.append(NativeEvent(**env, native_event_type="session.event/job/registered",
                                           status=f"registered {status}" if isinstance(status, str) else "registered"))
        elif etype == "turn/end":
            reason = _obj(d.get("reason"))
            kind = reason.get("kind")
            if kind != "completed":
                self.events.append(NativeDiagnosticEvent(**env, diagnostic_type=f"turn/end/{kind}", detail=reason))
            else:
                self.events.append(NativeEvent(**env, native_event_type="session.event/turn/end", status=kind))
        elif etype in KNOWN_EVENTS:
            self.events.append(NativeEvent(**env, native_event_type=f"session.event/{etype}"))
        else:
            self.unknown_record(NativeEvent(**env, native_event_type=f"session.event/{etype}"))

    def assistant(self, env: dict[str, Any], turn: int, d: dict[str, Any], session: Any) -> None:
        msg = _obj(d.get("message"))
        blocks = _list(msg.get("content"))
        mid = msg.get("id") if isinstance(msg.get("id"), str) else None
        model = _obj(msg.get("source")).get("model")
        model = model if isinstance(model, str) else None
        finish = self.finish.get((session, d.get("turn"), d.get("step")))
        if finish is None:  # 0.2.x: the stream travels inside the message
            for c in _list(d.get("stream")):
                chunk = _obj(_obj(c).get("chunk"))
                kind = _obj(chunk.get("reason")).get("kind")
                if chunk.get("type") == "finish" and isinstance(kind, str):
                    finish = kind
        self.events += message_events(env, blocks, tool_block="tool-call", reasoning_keys=("text", "reasoning"),
                                      message_id=mid, model=model, finish_reason=finish)
        for b in blocks:
            if _obj(b).get("type") == "tool-call" and isinstance(b.get("id"), str):
                self.call(env, b["id"], turn, str(b.get("name")), json_arguments(b.get("arguments")),
                          principal=env["principal_id"])
        usage = _obj(d.get("usage"))
        if usage:
            def num(k: str) -> int | None:
                return usage.get(k) if isinstance(usage.get(k), int) else None

            self.events.append(TokenUsageEvent(
                **env,
                usage=TokenUsage(input_tokens=num("inputTokens"), output_tokens=num("outputTokens"),
                                 cache_read_tokens=num("cacheReadTokens"), cache_write_tokens=num("cacheWriteTokens"),
                                 reasoning_tokens=num("reasoningTokens")),
                usage_scope="call",
            ))

    def tool_result(self, env: dict[str, Any], turn: int, d: dict[str, Any]) -> None:
        msg = _obj(d.get("message"))
        blocks = [b for b in _list(msg.get("content")) if _obj(b).get("type") == "tool-result"]
        if not blocks and isinstance(msg.get("toolCallId"), str):
            # 0.2.x: the tool message is the result itself (``toolCallId``, ``content``, ``isError``)
            blocks = [msg]
        if not blocks:
            self.events.append(NativeEvent(**env, native_event_type="session.event/tool/result",
                                           status="no tool-result block"))
            return
        for b in blocks:
            call = self.answered(env, b.get("toolCallId"), turn, principal=env["principal_id"],
                                 missing="no call with toolCallId")
            if call is not None:
                native = b.get("toolCallId")
                job = self.jobs.pop((turn, native), None) if isinstance(native, str) else None
                call.tool_result = ToolResult(
                    content=single_text(b.get("content")),
                    is_error=b.get("isError") if isinstance(b.get("isError"), bool) else None,
                    status=job[1] if job is not None else None,
                    exit_code=job[2] if job is not None else None,
                )
                if job is not None:
                    self.ledger.fold_record(call, job[0].file, job[0].no)

    def job_settled(self, env: dict[str, Any], turn: int, line: _Line, d: dict[str, Any]) -> None:
        """0.2.x ``job/settled``: a foreground job of an unanswered call of this turn waits for
        that call's result (its status and stated exit code are the result's); else a native event."""
        native = _obj(d.get("toolCall")).get("callId")
        status = d.get("status") if isinstance(d.get("status"), str) else None
        detail = d.get("detail")
        match = JOB_EXIT.fullmatch(detail) if isinstance(detail, str) else None
        call = self.find(native, turn, env["principal_id"])
        if isinstance(native, str) and call is not None and call.tool_result is None:
            self.jobs[(turn, native)] = (line, status, int(match.group(1)) if match else None)
            return
        self.events.append(NativeEvent(**env, native_event_type="session.event/job/settled", status=status))

    def subagent(self, env: dict[str, Any], method: str, params: dict[str, Any]) -> None:
        """0.2.x ``subagent.started`` / ``subagent.finished``: a child session's lifecycle."""
        child, parent = params.get("childSessionId"), params.get("parentSessionId")
        if method == "subagent.started" and isinstance(child, str) and isinstance(parent, str):
            self.children[child] = parent
        status = params.get("status")
        stop = params.get("stopReason")
        self.events.append(SubagentLifecycleEvent(
            **{**env, "session_id": parent if isinstance(parent, str) else None},
            action="started" if method == "subagent.started" else "finished",
            status=status if isinstance(status, str) else None, stop_reason=stop if isinstance(stop, str) else None,
            child_principal_id=child if isinstance(child, str) else None,
        ))


def _tool_calls(turns: Sequence[TurnFiles]) -> Iterator[tuple[str, int]]:
    """(native call id, turn) of every ``tool-call`` block of an ``assistant/message``."""
    for files in turns:
        for line in read_jsonl(files.stdout):
            ev = _event(line.data or {})
            if ev.get("type") != "assistant/message":
                continue
            for b in _list(_obj(_obj(ev.get("data")).get("message")).get("content")):
                if _obj(b).get("type") == "tool-call" and isinstance(b.get("id"), str):
                    yield b["id"], files.index


def normalize(turns: Sequence[TurnFiles], sessions: Path, run_id: str, *, at: datetime) -> NormalizedTrace:
    """Normalize the archived JSON-RPC wire of a run (turns in order) into Trace IR events;
    ``sessions`` is ``native/sessions`` (the runtime's session archives); ``at`` is every
    event's timestamp (the adapter passes the recorded turn time)."""
    ordered = sorted(turns, key=lambda t: t.index)
    norm = _Normalizer(run_id, at, repeated_ids(_tool_calls(ordered)))
    for files in ordered:
        methods: dict[str, str] = {}
        for line in read_jsonl(files.requests):
            if line.data and isinstance(line.data.get("method"), str):
                methods[str(line.data.get("id"))] = line.data["method"]
        prompted = "session/prompt" in methods.values()
        ended = False
        for line, record in norm.records(read_jsonl(files.stdout), source=SRC_STDOUT, turn=files.index, kind=_kind):
            norm.line(files.index, line, methods)
            ended = ended or _event(record).get("type") == "turn/end"
        if prompted and not ended:
            norm.unfinished_turn(files.index, f"turn {files.index}: the wire has no turn/end for the prompt")
        norm.stderr(files, SRC_STDERR)
    last = ordered[-1].index if ordered else None
    if sessions.is_dir():
        # rc6: session.jsonl.zstd; 0.2.x: session.v<format>.jsonl.zstd
        for archive in sorted(sessions.glob("*/session*.jsonl.zstd")):
            data = archive.read_bytes()
            norm.events.append(NativeSessionArchiveEvent(
                **norm.base(source=SRC_SESSION, conversation_turn=last),
                session_id=archive.parent.name, status="archived", format="jsonl+zstd",
                artifact=f"native/sessions/{archive.parent.name}/{archive.name}",
                sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data),
            ))
    return norm.trace(nothing="no parseable JSON-RPC message from the runtime in any turn")
