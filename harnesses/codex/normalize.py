"""Codex CLI native records -> Trace IR (pure: reads only the archived files it is given).

Sources per turn:

* ``native/turn-<n>.stdout`` — the ``codex exec --json`` stream (primary order: thread and
  turn lifecycle, items, usage, errors);
* the thread's rollout ``native/rollouts/rollout-*-<thread>.jsonl`` — the model-facing
  exchange: ``function_call``/``custom_tool_call`` and their ``*_output`` joined by
  ``call_id``, assistant messages and reasoning, ``mcp_tool_call_end`` (structured
  ``isError``/duration), compaction. A rollout is split into turns at ``task_started``.

Why tool events come from the rollout: the stdout ``command_execution`` item carries
``exit_code`` but its ``aggregated_output`` is the *full* process output, not what the model
was shown (Codex truncates and frames it: "Process exited with code N", "Output:"), and its
``item_N`` id has no native link to the model's ``call_id``. Pairing them would be
heuristic (SPEC §7 rule 2), so the stdout items stay visible as ``native_event`` (status
and the native record, ``exit_code`` included). Only when a turn has no rollout records do
stdout ``command_execution``/``mcp_tool_call`` items become the tool events (with
``exit_code`` from the item), and the status is ``partial``.

Order within a turn: stdout records up to ``turn.started``, the rollout records of the
turn, then the remaining stdout records. Item ids (``item_0``…) restart every process and
call ids may repeat, so an id seen in more than one turn is turn-scoped (``<id>#t<n>``)
with ``native_tool_call_id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harnesses.base import NormalizedTrace
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    EventBase,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStderrEvent,
    RawStdoutEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
    utc_now,
)

HARNESS = "codex"
SRC_STDOUT = f"native:{HARNESS}/stdout"
SRC_STDERR = f"native:{HARNESS}/stderr"
SRC_ROLLOUT = f"native:{HARNESS}/rollout"
MAIN = "main"

CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call", "web_search_call"}
OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output"}
#: Rollout records already represented by stdout or the runner, or pure context (not actions).
SKIPPED_ROLLOUT = {"session_meta", "turn_context", "world_state"}
SKIPPED_EVENT_MSG = {
    "task_started",
    "task_complete",
    "user_message",
    "agent_message",
    "agent_reasoning",
    "token_count",
    "thread_settings_applied",
    "error",
    "warning",
    "stream_error",
    "turn_aborted",
    "exec_command_begin",
    "mcp_tool_call_begin",
}
#: stdout items that become tool events when the turn has no rollout records.
FALLBACK_TOOL_ITEMS = {"command_execution", "mcp_tool_call"}


@dataclass(frozen=True)
class TurnFiles:
    """The archived native output of one user turn."""

    index: int
    stdout: Path
    stderr: Path | None = None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (native records vary)."""
    return value if isinstance(value, dict) else {}


@dataclass
class _Line:
    no: int
    text: str
    data: dict[str, Any] | None
    error: str | None


def read_jsonl(path: Path) -> Iterator[_Line]:
    """Lines of a JSONL file; a line that is not a JSON object carries ``error``."""
    if not path.is_file():
        return
    raw = path.read_bytes().decode("utf-8", errors="replace")
    for no, text in enumerate(raw.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield _Line(no, text, None, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(data, dict):
            yield _Line(no, text, None, f"not a JSON object ({type(data).__name__})")
            continue
        yield _Line(no, text, data, None)


@dataclass
class _Rollouts:
    """Rollout records per thread, split into turns at ``event_msg/task_started``."""

    turns: dict[str, list[list[_Line]]] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, paths: Sequence[Path]) -> _Rollouts:
        out = cls()
        for path in paths:
            thread: str | None = None
            segments: list[list[_Line]] = []
            for line in read_jsonl(path):
                if line.data is None:
                    out.bad.append(f"{path.name} line {line.no}: {line.error}")
                    continue
                payload = _obj(line.data.get("payload"))
                if line.data.get("type") == "session_meta" and thread is None:
                    thread = payload.get("id") or payload.get("session_id")
                if line.data.get("type") == "event_msg" and payload.get("type") == "task_started":
                    segments.append([])
                if segments:
                    segments[-1].append(line)
            if thread is None:
                match = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", path.name)
                thread = match.group(1) if match else path.stem
            out.turns.setdefault(thread, []).extend(segments)
        return out


class _Normalizer:
    def __init__(self, run_id: str, at: datetime, rollouts: _Rollouts, scoped: set[str]):
        self.run_id, self.at, self.rollouts, self.scoped = run_id, at, rollouts, scoped
        self.events: list[EventBase] = []
        self.calls: dict[str, ToolEvent] = {}
        self.extra: dict[str, dict[str, Any]] = {}  # call id -> structured fields seen before the output
        self.used: dict[str, int] = {}  # thread -> rollout turns consumed
        self.notes: list[str] = []
        self.partial = False
        self.parsed_any = False
        self.unfinished: list[int] = []

    def _env(self, turn: int, source: str, line: _Line, session: str | None, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "seq": 1,
            "timestamp": self.at,
            "run_id": self.run_id,
            "source": source,
            "conversation_turn": turn,
            "session_id": session,
            "principal_id": MAIN,
            "principal_role": "main",
            "source_event_seq": line.no,
            "source_timestamp": data.get("timestamp"),
            "raw_event": data,
        }

    def _cid(self, native: str, turn: int) -> str:
        return f"{native}#t{turn}" if native in self.scoped else native

    def _add_call(self, env: dict[str, Any], native: str, turn: int, name: str, args: Any) -> None:
        cid = self._cid(native, turn)
        event = ToolEvent(
            **env,
            tool_call=ToolCall(
                id=cid, name=name, arguments=args, native_tool_call_id=native if cid != native else None
            ),
            tool_result=None,
        )
        self.calls[cid] = event
        self.events.append(event)

    # -- turn ------------------------------------------------------------------------------
    def turn(self, files: TurnFiles, thread_hint: str | None) -> None:
        lines = list(read_jsonl(files.stdout))
        thread = thread_hint
        for line in lines:
            if line.data and line.data.get("type") == "thread.started" and isinstance(line.data.get("thread_id"), str):
                thread = line.data["thread_id"]
                break
        started = any(line.data and line.data.get("type") == "turn.started" for line in lines)
        segment: list[_Line] | None = None
        if thread is not None and started:
            k = self.used.get(thread, 0)
            available = self.rollouts.turns.get(thread, [])
            if k < len(available):
                segment = available[k]
                self.used[thread] = k + 1
        if started and segment is None:
            self.partial = True
            self.notes.append(
                f"turn {files.index}: no rollout records for thread {thread}; tool events "
                "come from stdout items (not the model-facing text)"
            )
        completed = {
            (line.data.get("item") or {}).get("id")
            for line in lines
            if line.data and line.data.get("type") == "item.completed" and isinstance(line.data.get("item"), dict)
        }
        finished = False
        rollout_done = False
        for line in lines:
            if line.data is None:
                self.partial = True
                self.notes.append(f"turn {files.index}: stdout line {line.no} unparseable ({line.error})")
                self.events.append(
                    RawStdoutEvent(
                        seq=1,
                        timestamp=self.at,
                        run_id=self.run_id,
                        source=SRC_STDOUT,
                        conversation_turn=files.index,
                        source_event_seq=line.no,
                        text=line.text,
                        stream_seq=line.no,
                        parseable=False,
                        parse_error=line.error,
                    )
                )
                continue
            self.parsed_any = True
            kind = line.data.get("type")
            self._stdout(files.index, line, line.data, thread, segment is None, completed)
            finished = finished or kind in ("turn.completed", "turn.failed")
            if kind == "turn.started" and segment is not None and not rollout_done:
                self._rollout_turn(files.index, segment, thread)
                rollout_done = True
        if not finished:
            self.partial = True
            self.unfinished.append(files.index)
            self.notes.append(f"turn {files.index}: stdout has no turn.completed/turn.failed record")
        if files.stderr is not None and files.stderr.is_file():
            text = files.stderr.read_bytes().decode("utf-8", errors="replace")
            if text.strip():
                self.events.append(
                    RawStderrEvent(
                        seq=1,
                        timestamp=self.at,
                        run_id=self.run_id,
                        source=SRC_STDERR,
                        conversation_turn=files.index,
                        text=text,
                    )
                )

    # -- stdout --------------------------------------------------------------------------------
    def _stdout(
        self, turn: int, line: _Line, data: dict[str, Any], thread: str | None, fallback: bool, completed: set[Any]
    ) -> None:
        env = self._env(turn, SRC_STDOUT, line, thread, data)
        kind = data.get("type")
        if kind in ("item.started", "item.updated", "item.completed") and isinstance(data.get("item"), dict):
            item = data["item"]
            itype, iid = item.get("type"), item.get("id")
            if kind != "item.completed" and iid in completed:
                return  # the completed record carries the same item, in full
            if itype == "error":
                self.events.append(
                    NativeDiagnosticEvent(**env, diagnostic_type="item_error", detail=item.get("message"))
                )
            elif fallback and itype in FALLBACK_TOOL_ITEMS and isinstance(iid, str):
                self._item_tool(env, turn, item, kind)
            elif fallback and itype in ("agent_message", "reasoning") and kind == "item.completed":
                reasoning = itype == "reasoning"
                self.events.append(
                    AssistantMessageEvent(
                        **env,
                        content=None if reasoning else item.get("text"),
                        content_kind="reasoning" if reasoning else "text",
                        reasoning=item.get("text") if reasoning else None,
                    )
                )
            else:
                self.events.append(NativeEvent(**env, native_event_type=f"{kind}/{itype}", status=item.get("status")))
        elif kind == "turn.completed":
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
            self.events.append(
                TokenUsageEvent(
                    **env,
                    usage=TokenUsage(
                        input_tokens=usage.get("input_tokens"),
                        output_tokens=usage.get("output_tokens"),
                        cache_read_tokens=usage.get("cached_input_tokens"),
                        cache_write_tokens=usage.get("cache_write_input_tokens"),
                        reasoning_tokens=usage.get("reasoning_output_tokens"),
                    )
                    if usage
                    else None,
                    usage_available=usage is not None,
                    usage_scope="run",
                    usage_aggregate=True,
                )
            )
        elif kind in ("turn.failed", "error"):
            detail = data.get("error") if kind == "turn.failed" else data.get("message")
            self.events.append(NativeDiagnosticEvent(**env, diagnostic_type=str(kind), detail=detail))
        else:
            self.events.append(NativeEvent(**env, native_event_type=str(kind)))

    def _item_tool(self, env: dict[str, Any], turn: int, item: dict[str, Any], kind: str) -> None:
        """Fallback without a rollout: a stdout item as the tool event (harness view, not model view)."""
        cid = self._cid(item["id"], turn)
        if cid not in self.calls:
            if item.get("type") == "mcp_tool_call":
                name, args = f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments")
            else:
                name, args = "command_execution", {"command": item.get("command")}
            self._add_call(env, item["id"], turn, name, args)
        if kind == "item.completed":
            call = self.calls[cid]
            content = item.get("aggregated_output") if item.get("type") == "command_execution" else item.get("result")
            exit_code = item.get("exit_code") if isinstance(item.get("exit_code"), int) else None
            call.tool_result = ToolResult(content=content, status=item.get("status"), exit_code=exit_code)

    # -- rollout -------------------------------------------------------------------------------
    def _rollout_turn(self, turn: int, segment: list[_Line], thread: str | None) -> None:
        for line in segment:
            data = line.data or {}
            payload = _obj(data.get("payload"))
            env = self._env(turn, SRC_ROLLOUT, line, thread, data)
            top, ptype = data.get("type"), payload.get("type")
            if top in SKIPPED_ROLLOUT:
                continue
            if top == "response_item":
                self._response_item(env, turn, payload, ptype)
            elif top == "event_msg":
                self._event_msg(env, turn, payload, ptype)
            elif top == "compacted":
                message = payload.get("message")
                self.events.append(
                    ContextCompactionEvent(
                        **env,
                        native_event_type="compacted",
                        summary=message or None,
                        summary_present=bool(message) if isinstance(message, str) else None,
                    )
                )
            else:
                self.events.append(NativeEvent(**env, native_event_type=f"rollout/{top}"))

    def _response_item(self, env: dict[str, Any], turn: int, p: dict[str, Any], ptype: Any) -> None:
        if ptype == "message":
            if p.get("role") != "assistant":
                return  # developer/user context the harness sent; the user text is framed by the runner
            parts = p.get("content") or []
            texts = [c.get("text") for c in parts if isinstance(c, dict) and c.get("type") == "output_text"]
            content = texts[0] if len(texts) == 1 and len(parts) == 1 else parts
            self.events.append(
                AssistantMessageEvent(**env, message_id=p.get("id"), content=content, content_kind="text")
            )
        elif ptype == "reasoning":
            summary = [s.get("text") for s in p.get("summary") or [] if isinstance(s, dict)]
            self.events.append(
                AssistantMessageEvent(
                    **env,
                    message_id=p.get("id"),
                    content_kind="reasoning",
                    reasoning="\n".join(t for t in summary if t) or None,
                )
            )
        elif ptype in CALL_TYPES and isinstance(p.get("call_id") or p.get("id"), str):
            name = str(p.get("name") or ptype)
            if p.get("namespace"):
                name = f"{p['namespace']}__{name}"
            raw = p.get("arguments", p.get("input", p.get("action")))
            args: Any = raw
            if isinstance(raw, str):
                try:
                    args = json.loads(raw)
                except json.JSONDecodeError:
                    args = raw  # kept verbatim: the model sent something that is not JSON
            self._add_call(env, p.get("call_id") or p["id"], turn, name, args)
        elif ptype in OUTPUT_TYPES and isinstance(p.get("call_id"), str):
            cid = self._cid(p["call_id"], turn)
            call = self.calls.get(cid)
            if call is None or call.tool_result is not None:
                self.events.append(
                    NativeEvent(
                        **env,
                        native_event_type="tool_output_unmatched",
                        status=f"no call with call_id {p['call_id']!r} in this turn",
                    )
                )
                return
            extra = self.extra.pop(cid, {})
            call.tool_result = ToolResult(content=p.get("output"), **extra)
        else:
            self.events.append(NativeEvent(**env, native_event_type=f"response_item/{ptype}"))

    def _event_msg(self, env: dict[str, Any], turn: int, p: dict[str, Any], ptype: Any) -> None:
        if ptype in ("mcp_tool_call_end", "exec_command_end") and isinstance(p.get("call_id"), str):
            extra: dict[str, Any] = {}
            result = p.get("result")
            if isinstance(result, dict) and isinstance(result.get("Ok"), dict):
                ok = result["Ok"]
                if isinstance(ok.get("isError"), bool):
                    extra["is_error"] = ok["isError"]
            elif isinstance(result, dict) and "Err" in result:
                extra["is_error"] = True
            if isinstance(p.get("exit_code"), int):
                extra["exit_code"] = p["exit_code"]
            duration = p.get("duration")
            if isinstance(duration, dict) and isinstance(duration.get("secs"), int):
                extra["duration"] = duration["secs"] + (duration.get("nanos") or 0) / 1e9
            self.extra[self._cid(p["call_id"], turn)] = extra
        elif ptype in ("context_compacted",):
            self.events.append(ContextCompactionEvent(**env, native_event_type=f"event_msg/{ptype}"))
        elif ptype not in SKIPPED_EVENT_MSG:
            self.events.append(NativeEvent(**env, native_event_type=f"event_msg/{ptype}"))


def _repeated_ids(turns: Sequence[TurnFiles], rollouts: _Rollouts) -> set[str]:
    """Stdout item ids seen in more than one turn, and call ids seen in more than one rollout
    turn (each rollout turn is one CLI turn)."""
    items: dict[str, set[int]] = {}
    for files in turns:
        for line in read_jsonl(files.stdout):
            item = (line.data or {}).get("item")
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                items.setdefault(item["id"], set()).add(files.index)
    calls: dict[str, set[tuple[str, int]]] = {}
    for thread, segments in rollouts.turns.items():
        for n, segment in enumerate(segments):
            for line in segment:
                p = (line.data or {}).get("payload")
                if isinstance(p, dict) and p.get("type") in CALL_TYPES and isinstance(p.get("call_id"), str):
                    calls.setdefault(p["call_id"], set()).add((thread, n))
    return {i for i, t in items.items() if len(t) > 1} | {i for i, t in calls.items() if len(t) > 1}


def normalize(
    turns: Sequence[TurnFiles],
    rollouts: Sequence[Path],
    run_id: str,
    *,
    threads: dict[int, str] | None = None,
    at: datetime | None = None,
) -> NormalizedTrace:
    """Normalize archived Codex output of a run (turns in order) into Trace IR events.

    ``threads`` maps a turn to its thread id when stdout lacks ``thread.started``.
    """
    loaded = _Rollouts.load(rollouts)
    norm = _Normalizer(run_id, at or utc_now(), loaded, _repeated_ids(turns, loaded))
    for note in loaded.bad:
        norm.partial = True
        norm.notes.append(f"rollout {note}")
    for files in sorted(turns, key=lambda t: t.index):
        norm.turn(files, (threads or {}).get(files.index))
    if not norm.parsed_any:
        norm.notes.append("no parseable codex --json record in any turn")
        status = "unavailable"
    else:
        status = "partial" if norm.partial else "complete"
    return NormalizedTrace(
        events=norm.events,
        structured_trace_status=status,  # type: ignore[arg-type]
        trace_complete=norm.parsed_any and not norm.unfinished,
        notes=norm.notes,
    )
