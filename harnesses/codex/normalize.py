"""Codex CLI native records -> Trace IR (pure: reads only the archived files it is given).

Sources per turn:

* ``native/turn-<n>.stdout`` — the ``codex exec --json`` stream (primary order: thread and
  turn lifecycle, items, usage, errors);
* the thread's rollout ``native/rollouts/rollout-*-<thread>.jsonl`` — the model-facing
  exchange: ``function_call``/``custom_tool_call`` and their ``*_output`` joined by
  ``call_id``, assistant messages and reasoning, ``mcp_tool_call_end`` (structured
  ``isError``/duration), compaction, and (0.171+) one top-level ``token_usage_record`` per
  model response (-> ``token_usage`` of scope ``call``, ``step_id`` = its ``response_id``),
  and ``event_msg/item_completed`` tool items whose ``result.isError``/``exit_code``/``status``
  /``duration`` join the call of the same id (the fields 0.145 wrote in ``*_end`` records).
  A rollout is split into turns at ``task_started``.

Why tool events come from the rollout: the stdout ``command_execution`` item carries
``exit_code`` but its ``aggregated_output`` is the *full* process output, not what the model
was shown (Codex truncates and frames it: "Process exited with code N", "Output:"), and its
``item_N`` id has no native link to the model's ``call_id``. Pairing them would be
heuristic (SPEC §7 rule 2), so the stdout items stay visible as ``native_event`` (status
and the native record, ``exit_code`` included). Only when a turn has no rollout records do
stdout ``command_execution``/``mcp_tool_call`` items become the tool events (with
``exit_code`` from the item), and the status is ``partial``.

Joining a turn to its rollout turn (a *segment*; SPEC §7 rule 2, issue 18): stdout names the
thread (``thread.started``), and a segment closes with ``task_complete`` whose
``last_agent_message`` is the same native text as the turn's last stdout ``agent_message``
item — that pair is the join key (codex stdout carries no turn id or time). Segments and
turns of a thread with the same key (e.g. both without a final message, or the same final
text) are taken in their native order among themselves only; a segment no turn claims is
an *unmatched segment* (its records follow the turns, without a conversation turn, with a
``native_diagnostic``), a started turn without a segment gets its tool events from stdout
items (``partial``). So a missing stdout never shifts another turn onto a wrong segment.
Records before a thread's first turn marker (``task_started``) belong to its first segment
(the same process wrote them).

Order within a turn: stdout records up to ``turn.started``, the rollout records of the
turn, then the remaining stdout records. Item ids (``item_0``…) restart every process and
call ids may repeat, so an id seen in more than one turn is turn-scoped (``<id>#t<n>``)
with ``native_tool_call_id``.

Sub-agents (``multi_agent_v1``: ``spawn_agent``, ``wait_agent``, ``send_input``,
``resume_agent``, ``close_agent``). A child runs as its own thread with its own rollout, whose
``session_meta`` names ``parent_thread_id`` (``thread_source: "subagent"``). Principals
(SPEC §7 rule 5): a root thread is ``main`` (as in the Claude Code normalizer); a child
thread's events carry ``principal_id`` = its thread id (= the ``agent_id`` its spawn
returned), ``principal_role="child"`` and ``parent_principal_id`` = the principal of its
parent thread. Mapping:

* the stdout ``collab_tool_call`` items (the harness's record of each collab call, with the
  receivers' ``agents_states``) -> ``subagent_lifecycle`` of the sender's principal:
  ``action`` = the native ``tool`` (``spawn_agent``, ``wait``, ``close_agent`` …), ``status``
  = the receiver's native agent state (``pending_init``, ``running``, ``completed`` …; never
  the item's own status, which is the *call's*), ``child_principal_id`` = the receiver,
  ``pending_child_ids`` = receivers in ``pending_init``/``running``. One event per receiver.
* a ``<subagent_notification>`` message in a thread's history (the child's status delivered
  to its parent's model) -> ``task_completion`` of the receiving principal (``status`` /
  ``content`` from the notification's ``status``, ``model_visible_content`` = the text);
  ``parent_reactivated`` stays unset: no native record says whether it woke the parent.
* a child thread's ``task_started`` / ``task_complete`` / ``turn_aborted`` ->
  ``subagent_lifecycle`` of the child (``started``; ``finished``/``completed``;
  ``aborted`` with the native ``reason`` as ``stop_reason``); its last ``token_count`` of a
  segment -> ``token_usage`` (thread-cumulative, like stdout ``turn.completed`` for main);
  its ``error``/``warning``/``stream_error`` -> ``native_diagnostic`` (stdout does not
  carry a child's records); everything else as for the main thread.

Order with children: each thread keeps its own rollout order; the threads of a turn are
merged by the rollout ``timestamp`` (the only native order across threads; equal
timestamps keep the parent first). A child segment belongs to the turn whose root-thread
segment is the latest to start at or before it (one ``exec`` process per turn). A stdout
``collab_tool_call`` item is placed right after the rollout record of the same collab call:
the ``spawn_agent`` output naming the same child id, else the k-th call of the same tool
with the same target ids (both are native orders of the sender's calls); an item with no
such record stays at its stdout position. Calls and results are joined by ``call_id``
within one thread only.
"""

from __future__ import annotations

import heapq
import json
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
    read_jsonl,
    repeated_ids,
)
from harnesses.native import NativeLine as _Line
from harnesses.native import as_object as _obj
from tracetrial.trace import (
    AssistantMessageEvent,
    ContextCompactionEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolResult,
)

HARNESS = "codex"
SRC_STDOUT = f"native:{HARNESS}/stdout"
SRC_STDERR = f"native:{HARNESS}/stderr"
SRC_ROLLOUT = f"native:{HARNESS}/rollout"

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
#: Why each skipped rollout record produces no event (the accounting's ``context`` reason).
SKIP_REASONS = {
    "session_meta": "thread metadata (the session id and parent thread are on every event)",
    "turn_context": "the turn's configuration (context, not an action)",
    "world_state": "the harness's environment snapshot (context, not an action)",
    "task_started": "turn marker (the runner frames turns; a child's is its lifecycle)",
    "task_complete": "turn end (stdout turn.completed for the main thread)",
    "user_message": "copy of the user message response_item",
    "agent_message": "copy of the assistant message response_item",
    "agent_reasoning": "copy of the reasoning response_item",
    "token_count": "running usage (stdout turn.completed carries the turn's usage)",
    "thread_settings_applied": "settings of a resumed thread (context)",
    "error": "the same error as the stdout error/turn.failed record",
    "warning": "the same warning as a stdout item",
    "stream_error": "the same error as a stdout item",
    "turn_aborted": "stdout ends the turn",
    "exec_command_begin": "the call's start (its response_item call record is the event)",
    "mcp_tool_call_begin": "the call's start (its response_item call record is the event)",
}
#: Rollout record types this normalizer knows (anything else stays a native_event, flagged).
KNOWN_ROLLOUT = {"session_meta", "turn_context", "world_state", "response_item", "event_msg", "compacted",
                 "token_usage_record"}
#: stdout record types this normalizer knows.
KNOWN_STDOUT = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started", "item.updated",
                "item.completed", "error"}
#: Of those, what a *child* thread's rollout alone records (stdout shows only the main thread).
CHILD_EVENT_MSG = {"task_started", "task_complete", "turn_aborted", "token_count", "error", "warning", "stream_error"}
#: stdout items that become tool events when the turn has no rollout records.
FALLBACK_TOOL_ITEMS = {"command_execution", "mcp_tool_call"}
#: multi_agent rollout tool name -> the stdout ``collab_tool_call`` ``tool`` of the same call.
COLLAB_TOOLS = {
    "spawn_agent": "spawn_agent",
    "wait_agent": "wait",
    "send_input": "send_input",
    "resume_agent": "resume_agent",
    "close_agent": "close_agent",
}
#: Native agent states of a child that has not finished.
PENDING_STATES = {"pending_init", "running"}
NOTIFICATION_RE = re.compile(r"^\s*<subagent_notification>\s*(.*?)\s*</subagent_notification>\s*$", re.DOTALL)


def _json(value: Any) -> Any:
    """A JSON-encoded string decoded (``None`` when it is not JSON)."""
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None


def _ts(value: Any) -> datetime | None:
    """A rollout ``timestamp`` (ISO 8601, ``Z``) as a datetime, else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)  # Python 3.11 reads the trailing "Z"
    except ValueError:
        return None


def _rollout_kind(data: dict[str, Any]) -> str:
    """A rollout record's type for the accounting: ``<type>/<payload type>``."""
    ptype = _obj(data.get("payload")).get("type")
    return f"{data.get('type')}/{ptype}" if isinstance(ptype, str) else str(data.get("type"))


def _final_message(segment: list[_Line]) -> str | None:
    """The ``last_agent_message`` of a segment's ``task_complete`` (the join key)."""
    for line in reversed(segment):
        p = _obj((line.data or {}).get("payload"))
        if (line.data or {}).get("type") == "event_msg" and p.get("type") == "task_complete":
            text = p.get("last_agent_message")
            return text if isinstance(text, str) else None
    return None


def _stdout_final(lines: list[_Line]) -> str | None:
    """The text of a turn's last stdout ``agent_message`` item (the join key)."""
    for line in reversed(lines):
        item = _obj((line.data or {}).get("item"))
        if (line.data or {}).get("type") == "item.completed" and item.get("type") == "agent_message":
            text = item.get("text")
            return text if isinstance(text, str) else None
    return None


@dataclass
class _Thread:
    """One rollout: its thread, ``session_meta`` and turn segments."""

    id: str
    meta: dict[str, Any] = field(default_factory=dict)
    segments: list[list[_Line]] = field(default_factory=list)
    #: Records of a rollout without any turn marker (no segment to place them in).
    loose: list[_Line] = field(default_factory=list)

    @property
    def parent(self) -> str | None:
        """The spawning thread (``parent_thread_id``, else ``source.subagent.thread_spawn``)."""
        parent = self.meta.get("parent_thread_id")
        if not isinstance(parent, str):
            spawn = _obj(_obj(_obj(self.meta.get("source")).get("subagent")).get("thread_spawn"))
            parent = spawn.get("parent_thread_id")
        return parent if isinstance(parent, str) and parent else None

    @property
    def agent_path(self) -> str | None:
        spawn = _obj(_obj(_obj(self.meta.get("source")).get("subagent")).get("thread_spawn"))
        path = spawn.get("agent_path")
        return path if isinstance(path, str) and path else None

    @property
    def session(self) -> str:
        session = self.meta.get("session_id")
        return session if isinstance(session, str) and session else self.id


@dataclass
class _Rollouts:
    """Rollout records per thread, split into turns at ``event_msg/task_started``."""

    threads: dict[str, _Thread] = field(default_factory=dict)
    bad: list[_Line] = field(default_factory=list)
    #: Every record read, for the accounting.
    lines: list[_Line] = field(default_factory=list)

    @property
    def turns(self) -> dict[str, list[list[_Line]]]:
        return {t.id: t.segments for t in self.threads.values()}

    @classmethod
    def load(cls, paths: Sequence[Path]) -> _Rollouts:
        out = cls()
        for path in paths:
            thread: str | None = None
            meta: dict[str, Any] = {}
            segments: list[list[_Line]] = []
            before: list[_Line] = []  # records before the first turn marker
            for line in read_jsonl(path):
                out.lines.append(line)
                if line.data is None:
                    out.bad.append(line)
                    continue
                payload = _obj(line.data.get("payload"))
                if line.data.get("type") == "session_meta" and thread is None:
                    thread = payload.get("id") or payload.get("session_id")
                    meta = payload
                if line.data.get("type") == "event_msg" and payload.get("type") == "task_started":
                    segments.append(before if not segments else [])
                    before = []
                if segments:
                    segments[-1].append(line)
                else:
                    before.append(line)
            if thread is None:
                match = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$", path.name)
                thread = match.group(1) if match else path.stem
            entry = out.threads.setdefault(thread, _Thread(thread))
            entry.meta = entry.meta or meta
            entry.segments.extend(segments)
            entry.loose.extend(before)
        return out

    def is_child(self, thread: str | None) -> bool:
        return thread is not None and thread in self.threads and self.threads[thread].parent is not None

    def principal(self, thread: str | None) -> str:
        """``main`` for a root (or unknown) thread, else the child's thread id."""
        return thread if thread is not None and self.is_child(thread) else MAIN

    def root(self, thread: str) -> str:
        seen = {thread}
        while self.is_child(thread):
            parent = self.threads[thread].parent
            assert parent is not None
            if parent in seen:
                break
            seen.add(parent)
            thread = parent
        return thread

    def child_by_ref(self, ref: Any) -> str | None:
        """The child thread a native reference (thread id or ``agent_path``) names."""
        if not isinstance(ref, str) or not ref:
            return None
        if self.is_child(ref):
            return ref
        for t in self.threads.values():
            if t.parent is not None and t.agent_path == ref:
                return t.id
        return None


def _seg_start(segment: list[_Line]) -> datetime | None:
    return _ts((segment[0].data or {}).get("timestamp")) if segment else None


def _merge(sequences: list[list[tuple[str, _Line]]]) -> list[tuple[str, _Line]] | None:
    """Threads merged by rollout timestamp, each keeping its own order (``None`` when a
    record has no timestamp). Equal timestamps keep the earlier sequence (the parent) first."""
    keyed = []
    for rank, seq in enumerate(sequences):
        rows = []
        for k, (thread, line) in enumerate(seq):
            at = _ts((line.data or {}).get("timestamp"))
            if at is None:
                return None
            rows.append((at, rank, k, thread, line))
        keyed.append(rows)
    return [(thread, line) for _, _, _, thread, line in heapq.merge(*keyed, key=lambda r: (r[0], r[1], r[2]))]


def _collab_anchors(records: list[tuple[str, _Line]]) -> dict[tuple[str, str, frozenset[str]], list[tuple[str, int]]]:
    """(sender thread, stdout collab tool, target ids) -> the rollout record of each such call,
    in the sender's order: its output (a ``spawn_agent`` output names the new child), else
    the call."""
    calls: dict[tuple[str, str], tuple[str, frozenset[str], int]] = {}
    order: list[tuple[str, str]] = []
    anchor: dict[tuple[str, str], int] = {}
    for thread, line in records:
        p = _obj((line.data or {}).get("payload"))
        if (line.data or {}).get("type") != "response_item" or not isinstance(p.get("call_id"), str):
            continue
        key = (thread, p["call_id"])
        ns = p.get("namespace")
        if p.get("type") in CALL_TYPES and p.get("name") in COLLAB_TOOLS and (
            ns is None or (isinstance(ns, str) and ns.startswith("multi_agent"))
        ):
            args = _obj(_json(p.get("arguments")))
            named = args.get("targets")
            refs: list[Any] = named if isinstance(named, list) else [args.get("target"), args.get("id")]
            calls[key] = (COLLAB_TOOLS[p["name"]], frozenset(t for t in refs if isinstance(t, str)), line.no)
            order.append(key)
            anchor[key] = line.no
        elif p.get("type") in OUTPUT_TYPES and key in calls:
            anchor[key] = line.no
            tool, targets, no = calls[key]
            if tool == "spawn_agent":
                child = _obj(_json(p.get("output"))).get("agent_id")
                calls[key] = (tool, frozenset([child] if isinstance(child, str) else []), no)
    out: dict[tuple[str, str, frozenset[str]], list[tuple[str, int]]] = {}
    for key in order:
        tool, targets, _ = calls[key]
        out.setdefault((key[0], tool, targets), []).append((key[0], anchor[key]))
    return out


class _Normalizer(TraceBuilder):
    def __init__(self, run_id: str, at: datetime, rollouts: _Rollouts, scoped: set[str]):
        super().__init__(run_id, at, scoped)
        self.rollouts = rollouts
        self.extra: dict[tuple[str, str], dict[str, Any]] = {}  # structured fields seen before the output
        self.segment_of: dict[int, list[_Line]] = {}  # turn -> its root-thread segment (joined by key)
        self.child_segments: dict[int, list[tuple[str, list[_Line]]]] = {}  # turn -> (child thread, segment)
        self.last_usage: set[tuple[str, int]] = set()  # (child thread, line) of a segment's last token_count

    def _env(self, turn: int | None, source: str, line: _Line, session: str | None, data: dict[str, Any],
             thread: str | None = None) -> dict[str, Any]:
        principal = self.rollouts.principal(thread)
        env = self.base(source=source, conversation_turn=turn, session_id=session, principal_id=principal,
                        principal_role="main" if principal == MAIN else "child", source_event_seq=line.no,
                        source_timestamp=data.get("timestamp"), raw_event=data)
        if principal != MAIN:
            assert thread is not None
            env["session_id"] = self.rollouts.threads[thread].session
            env["parent_principal_id"] = self.rollouts.principal(self.rollouts.threads[thread].parent)
        return env

    # -- children --------------------------------------------------------------------------
    def assign_children(self, roots: dict[int, tuple[str, list[_Line]]]) -> list[tuple[str, list[_Line]]]:
        """Child segments per turn: the turn whose root-thread segment is the latest to start at
        or before the child segment (same root thread). Returns the segments no turn takes."""
        orphans: list[tuple[str, list[_Line]]] = []
        for thread in self.rollouts.threads.values():
            if thread.parent is None:
                continue
            root = self.rollouts.root(thread.id)
            for segment in thread.segments:
                start = _seg_start(segment)
                best: tuple[datetime, int] | None = None
                for turn, (rthread, rseg) in roots.items():
                    rstart = _seg_start(rseg)
                    if (
                        rthread == root
                        and start is not None
                        and rstart is not None
                        and rstart <= start
                        and (best is None or (rstart, turn) > best)
                    ):
                        best = (rstart, turn)
                if best is None:
                    orphans.append((thread.id, segment))
                else:
                    self.child_segments.setdefault(best[1], []).append((thread.id, segment))
                counts = [ln for ln in segment if _obj((ln.data or {}).get("payload")).get("type") == "token_count"
                          and _obj((ln.data or {}).get("payload")).get("info")]
                if counts:
                    self.last_usage.add((thread.id, counts[-1].no))
        for segments in self.child_segments.values():
            segments.sort(key=lambda ts: (_seg_start(ts[1]) or datetime.min, ts[0]))
        return orphans

    def _turn_records(self, turn: int, thread: str | None, segment: list[_Line]) -> list[tuple[str, _Line]]:
        """The turn's rollout records: the root thread's segment merged with its children's."""
        root = [(thread or "", line) for line in segment]
        children = self.child_segments.get(turn, [])
        if not children:
            return root
        sequences = [root] + [[(t, line) for line in seg] for t, seg in children]
        merged = _merge(sequences)
        if merged is None:
            self.notes.append(
                f"turn {turn}: a rollout record has no timestamp; child threads follow the main thread as blocks"
            )
            return [r for seq in sequences for r in seq]
        return merged

    def orphans(self, segments: list[tuple[str, list[_Line]]]) -> None:
        for thread, segment in segments:
            self.notes.append(
                f"child thread {thread}: a rollout turn matches no user turn (no timestamp at or after the start "
                "of its root thread's turns); its records follow the last turn without a conversation turn"
            )
            for line in segment:
                self._rollout_record(None, thread, line)

    def unmatched(self, segments: list[tuple[str, list[_Line]]]) -> None:
        """Root-thread segments no turn claims: a diagnostic each, their records after the turns."""
        for thread, segment in segments:
            task = next((_obj(ln.data.get("payload")) for ln in segment if ln.data
                         and _obj(ln.data.get("payload")).get("type") == "task_started"), {})
            self.diagnostic("unmatched_segment", {"thread": thread, "turn_id": task.get("turn_id"),
                                                  "file": segment[0].file if segment else None,
                                                  "final_message": _final_message(segment)},
                            turn=None, note=f"thread {thread}: rollout turn {task.get('turn_id')!r} matches no "
                            "stdout turn (no turn with its thread and final message); its records follow the turns")
            for line in segment:
                self._rollout_record(None, thread, line)

    def loose(self) -> None:
        """Records of rollouts without a turn marker, and malformed rollout lines: kept."""
        for t in self.rollouts.threads.values():
            for line in t.loose:
                self._rollout_record(None, t.id, line)
        for line in self.rollouts.bad:
            with self.line_handling(line, source=SRC_ROLLOUT, turn=None):
                self.events.append(NativeEvent(**self.base(source=SRC_ROLLOUT, source_event_seq=line.no),
                                               native_event_type="malformed_record", status=line.error,
                                               raw_event=line.text))

    # -- turn ------------------------------------------------------------------------------
    def plan(self, files: TurnFiles, thread_hint: str | None) -> tuple[str | None, list[_Line] | None, bool]:
        """The turn's thread, its rollout segment (joined by :meth:`join`) and whether it started."""
        lines = list(read_jsonl(files.stdout))
        thread = thread_hint
        for line in lines:
            if line.data and line.data.get("type") == "thread.started" and isinstance(line.data.get("thread_id"), str):
                thread = line.data["thread_id"]
                break
        started = any(line.data and line.data.get("type") == "turn.started" for line in lines)
        return thread, self.segment_of.get(files.index) if started else None, started

    def join(self, turns: Sequence[TurnFiles], hints: dict[int, str]) -> list[tuple[str, list[_Line]]]:
        """Each started turn's root-thread segment, joined by (thread, final message) — see the
        module docstring; returns the root segments no turn claims."""
        claims: dict[tuple[str, str | None], list[int]] = {}
        for files in turns:
            lines = list(read_jsonl(files.stdout))
            thread = hints.get(files.index)
            for line in lines:
                if line.data and line.data.get("type") == "thread.started" and isinstance(line.data.get("thread_id"), str):
                    thread = line.data["thread_id"]
                    break
            if thread is None or not any(ln.data and ln.data.get("type") == "turn.started" for ln in lines):
                continue
            claims.setdefault((thread, _stdout_final(lines)), []).append(files.index)
        unmatched: list[tuple[str, list[_Line]]] = []
        for t in self.rollouts.threads.values():
            if t.parent is not None:
                continue
            offered: dict[str | None, list[list[_Line]]] = {}
            for segment in t.segments:
                offered.setdefault(_final_message(segment), []).append(segment)
            for key, segments in offered.items():
                takers = claims.get((t.id, key), [])
                for turn, segment in zip(takers, segments):  # same key: native order among themselves
                    self.segment_of[turn] = segment
                unmatched += [(t.id, seg) for seg in segments[len(takers):]]
        return unmatched

    def turn(self, files: TurnFiles, thread: str | None, segment: list[_Line] | None, started: bool) -> None:
        lines = list(read_jsonl(files.stdout))
        if started and segment is None:
            self.degrade(
                f"turn {files.index}: no rollout records for thread {thread}; tool events "
                "come from stdout items (not the model-facing text)"
            )
        completed = {
            (line.data.get("item") or {}).get("id")
            for line in lines
            if line.data and line.data.get("type") == "item.completed" and isinstance(line.data.get("item"), dict)
        }
        records = self._turn_records(files.index, thread, segment) if segment is not None else []
        placed = self._place_collab(lines, records)
        placed_lines = set(placed.values())
        finished = False
        rollout_done = False
        for line, data in self.records(lines, source=SRC_STDOUT, turn=files.index):
            kind = data.get("type")
            if line.no not in placed_lines:  # else emitted after its collab call's rollout record
                self._stdout(files.index, line, data, thread, segment is None, completed)
            finished = finished or kind in ("turn.completed", "turn.failed")
            if kind == "turn.started" and segment is not None and not rollout_done:
                self._rollout_turn(files.index, records, placed, lines, thread, completed)
                rollout_done = True
        if not finished:
            self.unfinished_turn(files.index, f"turn {files.index}: stdout has no turn.completed/turn.failed record")
        self.stderr(files, SRC_STDERR)

    def _place_collab(self, lines: list[_Line], records: list[tuple[str, _Line]]) -> dict[tuple[str, int], int]:
        """(thread, rollout line) -> the stdout ``collab_tool_call`` line placed right after it."""
        if not records:
            return {}
        anchors = _collab_anchors(records)
        taken: dict[tuple[str, str, frozenset[str]], int] = {}
        placed: dict[tuple[str, int], int] = {}
        for line in lines:
            data = line.data or {}
            item = _obj(data.get("item"))
            if data.get("type") != "item.completed" or item.get("type") != "collab_tool_call":
                continue
            receivers = item.get("receiver_thread_ids")
            key = (
                str(item.get("sender_thread_id")),
                str(item.get("tool")),
                frozenset(r for r in receivers if isinstance(r, str)) if isinstance(receivers, list) else frozenset(),
            )
            k = taken.get(key, 0)
            options = anchors.get(key, [])
            if k < len(options):
                taken[key] = k + 1
                placed[options[k]] = line.no
        return placed

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
                self.ledger.context("superseded by the item.completed record of the same item")
                return  # the completed record carries the same item, in full
            if itype == "error":
                self.events.append(
                    NativeDiagnosticEvent(**env, diagnostic_type="item_error", detail=item.get("message"))
                )
            elif itype == "collab_tool_call":
                self._collab_item(turn, line, data, item, thread)
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
            self.events.append(TokenUsageEvent(**env, **_usage(usage), usage_scope="run", usage_aggregate=True))
        elif kind in ("turn.failed", "error"):
            detail = data.get("error") if kind == "turn.failed" else data.get("message")
            self.events.append(NativeDiagnosticEvent(**env, diagnostic_type=str(kind), detail=detail))
        else:
            event = NativeEvent(**env, native_event_type=str(kind))
            if kind in KNOWN_STDOUT:
                self.events.append(event)
            else:
                self.unknown_record(event)

    def _collab_item(
        self, turn: int, line: _Line, data: dict[str, Any], item: dict[str, Any], thread: str | None
    ) -> None:
        """A stdout ``collab_tool_call`` item: one ``subagent_lifecycle`` per receiver, of the sender."""
        sender = item.get("sender_thread_id") if isinstance(item.get("sender_thread_id"), str) else None
        env = self._env(turn, SRC_STDOUT, line, sender or thread, data, thread=sender)
        states = _obj(item.get("agents_states"))
        receivers = [r for r in item.get("receiver_thread_ids") or [] if isinstance(r, str)]
        receivers += [r for r in states if r not in receivers]
        pending = [r for r in receivers if _obj(states.get(r)).get("status") in PENDING_STATES] if states else None
        each: list[str | None] = list(receivers) or [None]
        for receiver in each:
            state = _obj(states.get(receiver)) if receiver is not None else {}
            status = state.get("status")
            self.events.append(
                SubagentLifecycleEvent(
                    **env,
                    action=str(item.get("tool")),
                    status=status if isinstance(status, str) else None,
                    child_principal_id=receiver,
                    pending_child_ids=pending,
                )
            )

    def _item_tool(self, env: dict[str, Any], turn: int, item: dict[str, Any], kind: str) -> None:
        """Fallback without a rollout: a stdout item as the tool event (harness view, not model view)."""
        call = self.find(item["id"], turn)
        if call is None:
            if item.get("type") == "mcp_tool_call":
                name, args = f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments")
            else:
                name, args = "command_execution", {"command": item.get("command")}
            call = self.call(env, item["id"], turn, name, args)
        if kind == "item.completed":
            content = item.get("aggregated_output") if item.get("type") == "command_execution" else item.get("result")
            exit_code = item.get("exit_code") if isinstance(item.get("exit_code"), int) else None
            call.tool_result = ToolResult(content=content, status=item.get("status"), exit_code=exit_code)

    # -- rollout -------------------------------------------------------------------------------
    def _rollout_turn(
        self,
        turn: int,
        records: list[tuple[str, _Line]],
        placed: dict[tuple[str, int], int],
        stdout: list[_Line],
        thread: str | None,
        completed: set[Any],
    ) -> None:
        by_no = {line.no: line for line in stdout}
        for rthread, line in records:
            self._rollout_record(turn, rthread or thread, line)
            after = placed.get((rthread, line.no))
            if after is not None:
                sline = by_no[after]
                with self.line_handling(sline, source=SRC_STDOUT, turn=turn):
                    self._stdout(turn, sline, sline.data or {}, thread, False, completed)

    def _rollout_record(self, turn: int | None, thread: str | None, line: _Line) -> None:
        with self.line_handling(line, source=SRC_ROLLOUT, turn=turn, kind=_rollout_kind):
            self._rollout_body(turn, thread, line)

    def _rollout_body(self, turn: int | None, thread: str | None, line: _Line) -> None:
        data = line.data or {}
        payload = _obj(data.get("payload"))
        env = self._env(turn, SRC_ROLLOUT, line, thread, data, thread=thread)
        top, ptype = data.get("type"), payload.get("type")
        if top in SKIPPED_ROLLOUT:
            self.ledger.context(SKIP_REASONS[str(top)])
            return
        if top == "response_item":
            self._response_item(env, turn, payload, ptype, thread)
        elif top == "event_msg":
            self._event_msg(env, turn, payload, ptype, thread, line)
        elif top == "token_usage_record":
            self._usage_record(env, payload)
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
            self.unknown_record(NativeEvent(**env, native_event_type=f"rollout/{top}"))

    def _usage_record(self, env: dict[str, Any], p: dict[str, Any]) -> None:
        """A ``token_usage_record`` (Codex 0.171+: one per model response, after its output) ->
        ``token_usage`` of scope ``call``: ``usage`` is that response's own usage,
        ``step_id`` its native ``response_id``; the running ``turn_token_usage`` /
        ``thread_token_usage`` totals stay in the raw record."""
        usage = p.get("usage") if isinstance(p.get("usage"), dict) else None
        response = p.get("response_id")
        self.events.append(TokenUsageEvent(**env, **_usage(usage), usage_scope="call",
                                           step_id=response if isinstance(response, str) else None))

    def _response_item(self, env: dict[str, Any], turn: int | None, p: dict[str, Any], ptype: Any,
                       thread: str | None) -> None:
        principal = env["principal_id"]
        if ptype == "message":
            if p.get("role") == "user":
                self._notification(env, p)
            if p.get("role") != "assistant":
                self.ledger.context(f"{p.get('role')} message the harness sent (context; the user "
                                    "text is framed by the runner)")
                return
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
            args = json_arguments(p.get("arguments", p.get("input", p.get("action"))))
            self.call(env, p.get("call_id") or p["id"], turn, name, args, principal)
        elif ptype in OUTPUT_TYPES and isinstance(p.get("call_id"), str):
            call = self.answered(env, p["call_id"], turn, principal=principal, unmatched="tool_output_unmatched",
                                 missing="no call with call_id")
            if call is not None:
                extra = self.extra.pop((principal, self.trace_id(p["call_id"], turn, principal)), {})
                call.tool_result = ToolResult(content=p.get("output"), **extra)
        else:
            self.events.append(NativeEvent(**env, native_event_type=f"response_item/{ptype}"))

    def _notification(self, env: dict[str, Any], p: dict[str, Any]) -> None:
        """A ``<subagent_notification>`` the harness put into a thread's history -> ``task_completion``."""
        parts = p.get("content") or []
        texts = [str(c["text"]) for c in parts if isinstance(c, dict) and isinstance(c.get("text"), str)]
        if len(texts) != 1:
            return
        match = NOTIFICATION_RE.match(texts[0])
        if match is None:
            return
        body = _obj(_json(match.group(1)))
        state = body.get("status")
        status, content = None, None
        if isinstance(state, str):
            status = state
        elif isinstance(state, dict) and len(state) == 1:
            status, content = next(iter(state.items()))
        child = self.rollouts.child_by_ref(body.get("agent_path"))
        self.events.append(
            TaskCompletionEvent(
                **env,
                status=status,
                content=content,
                model_visible_content=texts[0],
                child_principal_id=child,
            )
        )

    def _event_msg(self, env: dict[str, Any], turn: int | None, p: dict[str, Any], ptype: Any,
                   thread: str | None, line: _Line) -> None:
        principal = env["principal_id"]
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
            key = (principal, self.trace_id(p["call_id"], turn, principal))
            self.extra[key] = extra
            call = self.calls.get(key)
            if call is not None:
                self.ledger.fold(call)  # its structured fields join the call's result
        elif ptype == "item_completed" and self._item_completed(env, turn, _obj(p.get("item"))):
            return
        elif ptype in ("context_compacted",):
            self.events.append(ContextCompactionEvent(**env, native_event_type=f"event_msg/{ptype}"))
        elif principal != MAIN and ptype in CHILD_EVENT_MSG:
            self._child_event(env, p, ptype, thread, line)
        elif ptype not in SKIPPED_EVENT_MSG:
            self.events.append(NativeEvent(**env, native_event_type=f"event_msg/{ptype}"))
        else:
            self.ledger.context(SKIP_REASONS[str(ptype)])

    def _item_completed(self, env: dict[str, Any], turn: int | None, item: dict[str, Any]) -> bool:
        """Codex 0.171+ ``event_msg/item_completed`` of a tool item (``McpToolCall``,
        ``CommandExecution``; its ``id`` is the model's ``call_id``): the structured fields that
        0.145 wrote in ``mcp_tool_call_end``/``exec_command_end`` (``result.isError``,
        ``exit_code``, ``duration``) plus the item's ``status`` join that call's result, and the
        record is folded into the call. Other items (and a tool item naming no known call) stay
        ``native_event`` (returns ``False``)."""
        if item.get("type") not in ("McpToolCall", "CommandExecution") or not isinstance(item.get("id"), str):
            return False
        principal = env["principal_id"]
        key = (principal, self.trace_id(item["id"], turn, principal))
        call = self.calls.get(key)
        if call is None:
            return False
        extra: dict[str, Any] = {}
        result = item.get("result")
        if isinstance(result, dict) and isinstance(result.get("isError"), bool):
            extra["is_error"] = result["isError"]
        if isinstance(item.get("exit_code"), int):
            extra["exit_code"] = item["exit_code"]
        if isinstance(item.get("status"), str):
            extra["status"] = item["status"]
        duration = item.get("duration")
        if isinstance(duration, dict) and isinstance(duration.get("secs"), int):
            extra["duration"] = duration["secs"] + (duration.get("nanos") or 0) / 1e9
        if call.tool_result is not None:  # the output came first: complete the paired result
            call.tool_result = call.tool_result.model_copy(update=extra)
        else:
            self.extra[key] = {**self.extra.get(key, {}), **extra}
        self.ledger.fold(call)
        return True

    def _child_event(self, env: dict[str, Any], p: dict[str, Any], ptype: str, thread: str | None,
                     line: _Line) -> None:
        """What only a child's own rollout says: its turn starting, ending, aborting, usage, errors."""
        child = env["principal_id"]
        if ptype == "task_started":
            self.events.append(SubagentLifecycleEvent(**env, action="started", child_principal_id=child))
        elif ptype == "task_complete":
            self.events.append(
                SubagentLifecycleEvent(**env, action="finished", status="completed", child_principal_id=child)
            )
        elif ptype == "turn_aborted":
            reason = p.get("reason")
            self.events.append(
                SubagentLifecycleEvent(
                    **env,
                    action="aborted",
                    status="aborted",
                    stop_reason=reason if isinstance(reason, str) else None,
                    child_principal_id=child,
                )
            )
        elif ptype == "token_count":
            if (thread, line.no) in self.last_usage:
                total = _obj(_obj(p.get("info")).get("total_token_usage")) or None
                self.events.append(TokenUsageEvent(**env, **_usage(total), usage_scope="run", usage_aggregate=True))
            else:
                self.ledger.context("running usage (the segment's last token_count is the event)")
        else:
            detail = p.get("message") if "message" in p else p
            self.events.append(NativeDiagnosticEvent(**env, diagnostic_type=f"event_msg/{ptype}", detail=detail))


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Codex usage counters as ``TokenUsageEvent`` fields (unavailable when absent)."""
    return {
        "usage": TokenUsage(
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            cache_read_tokens=usage.get("cached_input_tokens"),
            cache_write_tokens=usage.get("cache_write_input_tokens"),
            reasoning_tokens=usage.get("reasoning_output_tokens"),
        )
        if usage
        else None,
        "usage_available": usage is not None,
    }


def _items(turns: Sequence[TurnFiles]) -> Iterator[tuple[str, int]]:
    """(stdout item id, turn) of every item record."""
    for files in turns:
        for line in read_jsonl(files.stdout):
            item = (line.data or {}).get("item")
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                yield item["id"], files.index


def _rollout_calls(rollouts: _Rollouts) -> Iterator[tuple[str, tuple[str, int]]]:
    """(call id, (thread, rollout turn)) of every call record (a rollout turn is one CLI turn)."""
    for thread, segments in rollouts.turns.items():
        for n, segment in enumerate(segments):
            for line in segment:
                p = (line.data or {}).get("payload")
                if isinstance(p, dict) and p.get("type") in CALL_TYPES and isinstance(p.get("call_id"), str):
                    yield p["call_id"], (thread, n)


def normalize(
    turns: Sequence[TurnFiles],
    rollouts: Sequence[Path],
    run_id: str,
    *,
    threads: dict[int, str] | None = None,
    at: datetime,
) -> NormalizedTrace:
    """Normalize archived Codex output of a run (turns in order) into Trace IR events.

    ``threads`` maps a turn to its thread id when stdout lacks ``thread.started``; ``at`` is
    every event's timestamp (the adapter passes the recorded turn time).
    """
    loaded = _Rollouts.load(rollouts)
    # Stdout item ids seen in more than one turn, and call ids seen in more than one rollout
    # turn or thread, get turn-scoped trace ids.
    norm = _Normalizer(run_id, at, loaded, repeated_ids(_items(turns)) | repeated_ids(_rollout_calls(loaded)))
    for line in loaded.bad:
        norm.degrade(f"rollout {line.file} line {line.no}: {line.error}")
    for line in loaded.lines:
        norm.expect(line, source=SRC_ROLLOUT, kind=_rollout_kind)
    ordered = sorted(turns, key=lambda t: t.index)
    unmatched = norm.join(ordered, threads or {})
    plans = {files.index: norm.plan(files, (threads or {}).get(files.index)) for files in ordered}
    roots = {i: (thread, seg) for i, (thread, seg, _) in plans.items() if thread is not None and seg is not None}
    orphans = norm.assign_children(roots)
    for files in ordered:
        norm.turn(files, *plans[files.index])
    norm.orphans(orphans)
    norm.unmatched(unmatched)
    norm.loose()
    named = {
        e.child_principal_id
        for e in norm.events
        if isinstance(e, (SubagentLifecycleEvent, TaskCompletionEvent)) and e.child_principal_id
    }
    for child in sorted(c for c in named if c not in loaded.threads):
        norm.degrade(f"child thread {child} is named by a collab record but has no archived rollout")
    return norm.trace(nothing="no parseable codex --json record in any turn")
