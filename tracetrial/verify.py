"""The verifier API: what a task pack's ``verifier/score.py`` receives, offers and returns.

``score.py`` defines ``score(ctx) -> dict[str, bool | tuple[bool, str]]`` over a
:class:`VerifierContext`; the criteria engine (``criteria.verifier``) builds the context
from the run archive, calls ``score`` and records a :class:`VerifierOutcome`. A pack
imports only this module and :mod:`tracetrial.policy`.

The context holds the run's evidence as data (Trace IR events, provider-boundary records,
the probe report, simulator ledgers) and paths into the archive. Its methods answer the
questions every verifier asks, so that ``score.py`` holds only its task's logic:

* **Trace IR** — :meth:`~VerifierContext.events_of`; :meth:`~VerifierContext.tool_events`
  and :meth:`~VerifierContext.first_tool_event` by tool name (every MCP naming form), argument
  text, shell command, turn and principal; :meth:`~VerifierContext.spawn_events`,
  :meth:`~VerifierContext.child_principals`; :func:`call_ids` of an event, :func:`is_main`,
  :func:`is_spawn`, :func:`shell_command`.
* **Gateway** (what the model was shown) — :meth:`~VerifierContext.deliveries` of tool
  results by call id or content, as :class:`Delivery` (with the error flag its wire or text
  carries); :meth:`~VerifierContext.answered` requests; :meth:`~VerifierContext.request_body`;
  :meth:`~VerifierContext.turns_delivered` (rule 11) over :meth:`~VerifierContext.scripted_turns`;
  :meth:`~VerifierContext.turn_start` (the first answered request of a scripted turn) and
  :func:`tool_call_arguments` (the model's own earlier calls in a parsed request body).
* **Runner** — :meth:`~VerifierContext.turn_interrupted` (turn N killed at its marker).
* **Declarations** — :meth:`~VerifierContext.tool_declaration` (a tool's description and parameter
  descriptions as the model was shown them); :func:`shell_state_declared` (what a shell tool says
  about ``cd`` and exported variables across calls, :mod:`tracetrial.declarations`).
* **Probe report** — :meth:`~VerifierContext.probe_requests`,
  :meth:`~VerifierContext.probe_call_ids`, :attr:`~VerifierContext.final_text`.
* **Ledgers** — :meth:`~VerifierContext.ledger` records by service, kind and tool;
  :meth:`~VerifierContext.issued` values.
* **Files** — workspace, frozen-baseline and archive files as text or JSON:
  ``(value, None)``, or ``(None, reason)`` when missing or invalid, so a criterion can fail
  with the reason instead of crashing the verifier; JSON-lines ledgers a workspace script
  appends to (:meth:`~VerifierContext.workspace_jsonl`); :meth:`~VerifierContext.changed_files`.
* **Text** — :func:`norm_id` (call ids as harnesses rewrite them), :func:`norm_text`,
  :func:`strings`, :func:`as_text`, :func:`stated_exit_code`.
* **Truncation notices** (:mod:`tracetrial.notices`) — :func:`size_statements` of a shortened
  result and :func:`check_sizes` against the real output (stated totals and omitted sizes).

Everything is pure over the context's data; the only I/O is reading the archive files the
context points to. Example ``tasks/O1-ticket-close-error-001/verifier/score.py`` (shortened)::

    from tracetrial.verify import call_ids

    def score(ctx):
        code = ctx.issued("tickets", "lock_code")          # the ledger's one-off value
        event = ctx.first_tool_event("close_ticket")       # mcp__tickets__close_ticket, tickets/close_ticket …
        ids = call_ids(event) | ctx.probe_call_ids("call_tool", tool="close_ticket", first=True)
        shown = [d for d in ctx.deliveries(ids=ids) if code in d.content and d.error_flag()[0]]
        data, why = ctx.workspace_json("close.json", want=dict)
        return {
            "H1-error-flag-and-code-delivered": (bool(shown), f"{len(shown)} result(s) show the error"),
            "A1-close-json-reports-lock": (False, why) if why else
                                          (data.get("error_code") == code, f"close.json = {data}"),
        }
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from tracetrial.declarations import PERSISTENT_ON_SUCCESS, STAYS, cwd_after, shell_state_declared
from tracetrial.files import load_yaml
from tracetrial.harness_text import task_notifications
from tracetrial.notices import SIZE_TOLERANCE, SizeStatement, check_sizes, size_statements

# The Trace IR types a pack's verifier reads and its selftest builds (rule 13): packs import only
# tracetrial.policy and tracetrial.verify, so the types they need are part of this API.
from tracetrial.trace import (
    AssistantMessageEvent,
    EventBase,
    ModelInputEvent,
    NativeEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)

__all__ = [
    "COMMAND_KEYS",
    "PERSISTENT_ON_SUCCESS",
    "REQUEST_BODIES",
    "SIZE_TOLERANCE",
    "SPAWN_TOOLS",
    "STAYS",
    "AssistantMessageEvent",
    "Delivery",
    "EventBase",
    "ModelInputEvent",
    "NativeEvent",
    "SizeStatement",
    "SubagentLifecycleEvent",
    "TaskCompletionEvent",
    "TokenUsage",
    "TokenUsageEvent",
    "ToolCall",
    "ToolEvent",
    "ToolResult",
    "VerifierContext",
    "VerifierOutcome",
    "as_text",
    "bare_tool_name",
    "call_ids",
    "check_sizes",
    "compactions_placed",
    "conversation_of",
    "cwd_after",
    "is_main",
    "is_spawn",
    "late_compaction",
    "load_yaml",
    "names_tool",
    "norm_id",
    "norm_text",
    "shell_command",
    "shell_state_declared",
    "size_statements",
    "stated_exit_code",
    "strings",
    "task_notifications",
    "tool_call_arguments",
    "tool_entries",
]

#: Argument keys under which shell-like tools of the supported harnesses take their command line
#: (``Bash``/``shell`` ``command``, Codex ``cmd``, ``exec`` ``input`` …), in order of preference.
COMMAND_KEYS = ("command", "cmd", "script", "commandLine", "command_line", "input")
#: Sub-agent spawn tools, by :func:`bare_tool_name` through :func:`norm_id` (Claude Code ``Agent``/``Task``,
#: Codex ``spawn_agent``, OpenClaw ``sessions_spawn``, the reference harness ``spawn_subagent`` …).
SPAWN_TOOLS = frozenset({"agent", "task", "spawnagent", "spawnsubagent", "sessionsspawn", "subagent", "delegate"})

#: Where the gateway archives raw request bodies (``<index>.json``), relative to the run directory.
REQUEST_BODIES = "gateway/bodies"
# The separators of MCP tool names: ``mcp__srv__tool`` (Claude Code, the reference harness),
# ``srv__tool`` (OpenClaw), ``srv/tool`` (Codex namespaces), ``srv.tool``.
_NAME_SEP = r"(?:__|/|\.)"
# lazy \W so that the sign of "exit code -1" belongs to the number
_NO_SUCH_FILE = re.compile(r"[^\n]*No such file or directory[^\n]*")
_EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}?(-?\d+)")
# An error flag a harness wrote into a result's text (an MCP result relayed as JSON, escaped or not).
_FALSE_FLAG_RE = re.compile(r'(?i)is_?error(?:\\|")*\s*[:=]\s*false|"success(?:\\|")*\s*:\s*true')
_TRUE_FLAG_RE = re.compile(r'(?i)is_?error(?:\\|")*\s*[:=]\s*true')


# --------------------------------------------------------------------------- text


def norm_id(value: object) -> str:
    """A call id reduced to its lower-case letters and digits.

    Harnesses and the gateway spell one call's id differently (``toolu_tt_1_2``,
    ``toolu-tt-1-2``, a turn-scoped ``call_1#t2`` with its native id alongside), so ids are
    compared in this form. ``None`` gives ``""``, which never matches.
    """
    return re.sub(r"[^A-Za-z0-9]", "", str(value or "")).lower()


def norm_text(value: object) -> str:
    """Text with every run of whitespace made one space, stripped (``None`` gives ``""``)."""
    return re.sub(r"\s+", " ", str(value or "")).strip()


def strings(value: object) -> Iterator[str]:
    """Every string inside a JSON-like value, depth first.

    A string that is itself a JSON object, array or string (tool arguments often arrive as
    their JSON text) is parsed first, so ``'{"command": "rm x"}'`` yields ``"rm x"``.
    """
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        if isinstance(parsed, str):
            yield parsed
        elif isinstance(parsed, (Mapping, list)):
            yield from strings(parsed)
        else:  # "42", "true", "null": text that happens to be a JSON scalar
            yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def as_text(value: object) -> str:
    """A string as it is, ``None`` as ``""``, anything else as its JSON text."""
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, default=str)


def stated_exit_code(text: str | None) -> int | None:
    """The exit status a result's text states (``Exit code 2``, ``exited with status 1``,
    ``"exit_code": 0``), or None when it states none."""
    match = _EXIT_RE.search(text or "")
    return int(match.group(1)) if match else None


def shell_command(arguments: object) -> str:
    """The command line of a shell-like tool call (its :data:`COMMAND_KEYS` argument; a list is
    joined with spaces); ``""`` for any other call, e.g. a spawn whose prompt names a command.
    Arguments may be a mapping or its JSON text."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    if not isinstance(arguments, Mapping):
        return ""
    for key in COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, list):
            return " ".join(map(str, value))
        if isinstance(value, str):
            return value
    return ""


# --------------------------------------------------------------------------- names and events


def bare_tool_name(name: str | None) -> str:
    """A tool's own name without its namespace (``mcp__srv__tool``, ``srv/tool`` → ``tool``)."""
    return re.split(_NAME_SEP, str(name or ""))[-1]


def names_tool(name: str | None, tool: str | re.Pattern[str], service: str | None = None) -> bool:
    """Whether a declared or called tool ``name`` is ``tool``.

    ``tool`` is a tool's own name, matched bare or in every MCP naming form
    (``mcp__srv__tool``, ``srv__tool``, ``srv/tool``, ``srv.tool``); with ``service`` only in a
    form that names that server. A compiled pattern is searched in the full name instead.
    """
    if isinstance(tool, re.Pattern):
        return tool.search(name or "") is not None
    prefix = rf"(?:^|{_NAME_SEP}){re.escape(service)}{_NAME_SEP}" if service else rf"(?:^|{_NAME_SEP})"
    return re.search(prefix + re.escape(tool) + "$", name or "") is not None


def call_ids(event: ToolEvent | None) -> set[str]:
    """The :func:`norm_id` forms of a tool event's call id and native call id (empty for None)."""
    if event is None:
        return set()
    return {norm_id(i) for i in (event.tool_call.id, event.tool_call.native_tool_call_id)} - {""}


def conversation_of(event: ToolEvent, placed: Mapping[str, str]) -> str | None:
    """The conversation :meth:`VerifierContext.conversations` places the event's call in
    (``"parent"``/``"child"``), or None (not placed, or its ids point both ways)."""
    found = {placed[i] for i in call_ids(event) if i in placed}
    return next(iter(found)) if len(found) == 1 else None


def is_main(event: EventBase) -> bool:
    """Recorded for the main agent (or for no principal at all), not for a child."""
    return event.principal_id in (None, "main") and event.principal_role != "child"


def is_spawn(event: ToolEvent) -> bool:
    """A sub-agent spawn call, namespaced or not (``Agent``, ``multi_agent_v1__spawn_agent``)."""
    return norm_id(bare_tool_name(event.tool_call.name)) in SPAWN_TOOLS


def tool_call_arguments(body: object) -> list[str]:
    """The argument text of every tool call the model made, as a parsed provider request body
    shows them (its history), in order: Anthropic ``tool_use`` input (as JSON), Responses
    ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` arguments, chat
    ``tool_calls[].function.arguments``. How a verifier checks what a resumed request still shows
    of the model's own earlier calls, whatever the wire format."""
    out: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, Mapping):
            kind = node.get("type")
            if kind == "tool_use":  # Anthropic
                out.append(json.dumps(node.get("input"), ensure_ascii=False))
            elif kind in ("function_call", "custom_tool_call", "local_shell_call"):  # Responses
                out.append(str(node.get("arguments") or node.get("input") or node.get("action") or ""))
            elif "function" in node and isinstance(node.get("function"), Mapping) and "id" in node:  # chat
                out.append(str(node["function"].get("arguments") or ""))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(body)
    return out


def _found(needle: str | re.Pattern[str], text: str) -> bool:
    return needle.search(text) is not None if isinstance(needle, re.Pattern) else needle in text


def _turn_ok(event: EventBase, turns: Collection[int | None] | None, main: bool | None) -> bool:
    if turns is not None and event.conversation_turn not in turns:
        return False
    return main is None or is_main(event) == main


# --------------------------------------------------------------------------- gateway


_JSON_START = re.compile(r"[\[{]")


def tool_entries(text: str | None, tool: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text`` that describe ``tool``: a discovery listing's entry (OpenClaw's
    ``tool_search``: ``{"id", "name", "label", "input": "unknown"}``) or a describe result
    (``tool_describe``: the entry with its ``parameters``). Every JSON value in the text (an array or
    object after a header; a string that holds JSON, as a relayed content list carries it, is read
    too, two levels deep) is walked for objects whose ``name`` or ``label`` is the tool (compared as
    :func:`bare_tool_name` spells it through :func:`norm_id`), whatever the key order."""
    want = norm_id(bare_tool_name(tool))
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []

    def walk(value: object, depth: int) -> None:
        if isinstance(value, dict):
            if want in {norm_id(bare_tool_name(str(value.get(k) or ""))) for k in ("name", "label")}:
                found.append(value)
            for item in value.values():
                walk(item, depth)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth)
        elif isinstance(value, str) and depth < 3 and value.lstrip()[:1] in ("[", "{"):
            scan(value, depth + 1)

    def scan(chunk: str, depth: int) -> None:
        pos = 0
        while (match := _JSON_START.search(chunk, pos)) is not None:
            try:
                value, end = decoder.raw_decode(chunk, match.start())
            except ValueError:
                pos = match.start() + 1
                continue
            walk(value, depth)
            pos = end

    scan(text or "", 0)
    return found


@dataclass(frozen=True)
class Delivery:
    """One tool result as the gateway delivered it to the model: ``request`` is the
    provider-boundary record, ``result`` one of its ``tool_results`` (``content`` is the
    model-facing text, which the recorder caps at its first and last 32 KiB; ``size`` is the
    full size)."""

    request: Mapping[str, Any]
    result: Mapping[str, Any]

    @property
    def content(self) -> str:
        """The model-facing text (``""`` when there was none)."""
        return as_text(self.result.get("content"))

    @property
    def call_id(self) -> Any:
        """The call id as the request carried it (compare with :func:`norm_id`)."""
        return self.result.get("id")

    @property
    def is_error(self) -> Any:
        """The wire's error flag (None on a wire format that has none)."""
        return self.result.get("is_error")

    @property
    def wire(self) -> Any:
        """The request's wire format (``anthropic``, ``responses``, ``chat`` …)."""
        return self.request.get("wire_format")

    @property
    def index(self) -> Any:
        """The gateway request's index."""
        return self.request.get("index")

    def error_flag(self) -> tuple[bool | None, str]:
        """``(flag, where)``: whether the result is flagged as an error, and by what.

        Anthropic's wire has an ``is_error`` field: its value decides (True only when true).
        The other wire formats have no flag; a harness may still write one into the text (an MCP
        result relayed as JSON: ``"isError": false``, ``"success": true``); None when there is none.
        """
        if self.wire == "anthropic":
            return self.is_error is True, f"is_error={self.is_error!r} (Anthropic flag)"
        if _FALSE_FLAG_RE.search(self.content):
            return False, "the text carries an explicit success flag"
        if _TRUE_FLAG_RE.search(self.content):
            return True, "the text carries an explicit error flag"
        return None, f"no flag on the {self.wire} wire"


def _answered(record: Mapping[str, Any]) -> bool:
    status = record.get("status")
    return isinstance(status, int) and 200 <= status < 300 and not record.get("error")


# --------------------------------------------------------------------------- the context


def _read_text(path: Path, rel: str, errors: str) -> tuple[str | None, str | None]:
    try:
        return path.read_text(encoding="utf-8", errors=errors), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{rel} missing or unreadable: {exc}"


def _read_yaml(path: Path, rel: str, want: type | None) -> tuple[Any, str | None]:
    try:
        value = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return None, f"{rel} missing or invalid: {exc}"
    if want is not None and not isinstance(value, want):
        return None, f"{rel} is not {'a mapping' if want is dict else 'a ' + want.__name__}: {value!r}"
    return value, None


def _read_json(path: Path, rel: str, want: type | None) -> tuple[Any, str | None]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        return None, f"{rel} missing or invalid: {exc}"
    if want is not None and not isinstance(value, want):
        return None, f"{rel} is not {'an object' if want is dict else 'a ' + want.__name__}: {value!r}"
    return value, None


@dataclass(frozen=True)
class VerifierContext:
    """What ``score(ctx)`` receives. Paths point into the run archive (read them, do not write).

    ``gateway`` holds the provider-boundary records (one dict per model request), ``probe`` the
    probe report (``gateway/probe.json``; None outside the probe protocol), ``ledgers`` each
    simulator's ledger records by service.
    """

    workspace: Path
    baseline: Path
    truth: Any
    oracle: Any
    events: list[EventBase]
    gateway: list[dict[str, Any]]
    probe: dict[str, Any] | None
    ledgers: dict[str, list[dict[str, Any]]]
    run_dir: Path

    # ------------------------------------------------------------------- Trace IR

    def events_of(self, *event_types: str, turns: Collection[int | None] | None = None,
                  main: bool | None = None) -> list[EventBase]:
        """Events of the given types (all events when none is given), in trace order; ``turns``
        keeps those of these conversation turns, ``main`` those of the main agent (or not)."""
        return [e for e in self.events if (not event_types or getattr(e, "event_type", None) in event_types)
                and _turn_ok(e, turns, main)]

    def tool_events(self, tool: str | re.Pattern[str] | None = None, *, service: str | None = None,
                    args: str | None = None, command: str | re.Pattern[str] | None = None,
                    turns: Collection[int | None] | None = None, main: bool | None = None) -> list[ToolEvent]:
        """Tool events in trace order, filtered by

        * ``tool``: the tool called (see :func:`names_tool`; ``service`` narrows it to one MCP server);
        * ``args``: a text inside one of the arguments' :func:`strings`;
        * ``command``: the :func:`shell_command` the call runs holds the text (or matches the
          pattern); a spawn call never runs a command, even when its prompt names one;
        * ``turns`` (conversation turns) and ``main`` (the main agent's events, or the others').
        """
        out = []
        for e in self.events:
            if not isinstance(e, ToolEvent) or not _turn_ok(e, turns, main):
                continue
            if tool is not None and not names_tool(e.tool_call.name, tool, service):
                continue
            if args is not None and not any(args in s for s in strings(e.tool_call.arguments)):
                continue
            if command is not None and (is_spawn(e) or not _found(command, shell_command(e.tool_call.arguments))):
                continue
            out.append(e)
        return out

    def first_tool_event(self, tool: str | re.Pattern[str] | None = None, *, service: str | None = None,
                         args: str | None = None, command: str | re.Pattern[str] | None = None,
                         turns: Collection[int | None] | None = None, main: bool | None = None) -> ToolEvent | None:
        """The earliest (lowest ``seq``) of :meth:`tool_events`, or None when there is none."""
        found = self.tool_events(tool, service=service, args=args, command=command, turns=turns, main=main)
        return min(found, key=lambda e: e.seq, default=None)

    def spawn_events(self) -> list[ToolEvent]:
        """The sub-agent spawn calls the parent made (:func:`is_spawn`, not by a child)."""
        return [e for e in self.tool_events() if is_spawn(e) and e.principal_role != "child"]

    def child_principals(self) -> set[str]:
        """The principal ids the trace gives child agents: the ``child_principal_id`` of lifecycle
        and completion records, and the ids of the parent's spawn calls (harnesses name a child
        after the call that spawned it)."""
        named = {getattr(e, "child_principal_id", None) for e in self.events_of("subagent_lifecycle", "task_completion")}
        spawned = {i for e in self.spawn_events() for i in (e.tool_call.id, e.tool_call.native_tool_call_id)}
        return {i for i in named | spawned if i}

    # ------------------------------------------------------------------- gateway

    def deliveries(self, *, ids: Iterable[object] | None = None,
                   content: str | re.Pattern[str] | None = None) -> list[Delivery]:
        """Every tool result delivered to the model, in request order; ``ids`` keeps those of
        these call ids (compared as :func:`norm_id`), ``content`` those whose text holds the
        string (or matches the pattern)."""
        wanted = None if ids is None else {norm_id(i) for i in ids} - {""}
        out = []
        for request in self.gateway:
            for result in request.get("tool_results") or []:
                d = Delivery(request, result)
                if wanted is not None and norm_id(d.call_id) not in wanted:
                    continue
                if content is not None and not _found(content, d.content):
                    continue
                out.append(d)
        return out

    def call_succeeded(self, event: ToolEvent) -> bool | None:
        """Whether ``event``'s call succeeded by what the model was shown of it: ``False`` when its
        first delivered result carries an error flag or states a non-zero exit status, ``True`` when
        it is delivered with neither, ``None`` when no result was delivered. (What a harness that
        persists the working directory only after a successful command decides by.)"""
        shown = self.deliveries(ids=call_ids(event))
        if not shown:
            return None
        code = stated_exit_code(shown[0].content)
        return not (shown[0].error_flag()[0] is True or code not in (None, 0))

    def notifications(self) -> list[Delivery]:
        """Each background-task event the harness pushed to the model, once, in the order first
        shown, as a delivery of the call it names: a ``<task-notification>`` block in the last user
        text of an answered request (Claude Code re-invokes the model with one when a background
        job or child ends), ``call_id`` its ``tool-use-id`` (else its ``task-id``), ``content``
        the block as shown, ``result["pushed"]`` True. Only what the gateway recorded as the last
        user text counts (a block the harness sends bare, as the whole user text, is recorded as
        harness-injected and not seen here)."""
        seen: set[str] = set()
        out = []
        for request in self.answered():
            for fields in task_notifications(as_text(request.get("last_user_text"))):
                block = fields["text"]
                if block in seen:
                    continue
                seen.add(block)
                named = fields.get("tool-use-id") or fields.get("task-id")
                out.append(Delivery(request, {"id": named, "content": block, "pushed": True}))
        return out

    def answered(self) -> list[dict[str, Any]]:
        """The gateway requests the provider answered (2xx, no error), in order."""
        return [r for r in self.gateway if _answered(r)]

    def turn_start(self, text: str) -> dict[str, Any] | None:
        """Where a scripted user turn begins at the provider boundary: the first answered request
        whose last user text holds ``text`` (whitespace aside), or None (it never reached the model)."""
        want = norm_text(text)
        return next((r for r in self.answered() if want and want in norm_text(r.get("last_user_text"))), None)

    def turn_interrupted(self, n: int) -> tuple[bool, str]:
        """Whether the runner killed turn ``n`` (1-based) at its marker (task.yaml ``interrupts``),
        from the turn's record in ``result.json``; ``False`` with the reason when it was not, or
        when the record cannot be read (a pack scores what depends on the kill unscored then)."""
        result, why = self.archive_json("result.json", want=dict)
        if result is None:
            return False, f"result.json: {why}"
        turns = result.get("turns") or []
        record = turns[n - 1] if 0 < n <= len(turns) and isinstance(turns[n - 1], Mapping) else {}
        if record.get("interrupted") is True:
            return True, f"turn {n} was killed by the runner at its marker"
        return False, f"turn {n} was not killed by the runner (its marker never appeared)"

    def tool_declaration(self, tool: str) -> tuple[str | None, str]:
        """``(text, where)``: the description and the parameter descriptions of ``tool`` as the
        first answered request that declares it showed them (name compared as harnesses spell it:
        exact, else bare and normalised), or ``(None, reason)``. Read it with
        :func:`shell_state_declared` for a shell tool's stated semantics."""
        want = norm_id(bare_tool_name(tool))
        for req in self.answered():
            for decl in req.get("tools") or []:
                if not isinstance(decl, Mapping):
                    continue
                if decl.get("name") != tool and norm_id(bare_tool_name(str(decl.get("name") or ""))) != want:
                    continue
                parts = [str(decl.get("description") or "")]
                for key in ("input_schema", "parameters", "inputSchema"):
                    schema = decl.get(key)
                    props = schema.get("properties") if isinstance(schema, Mapping) else None
                    if isinstance(props, Mapping):
                        parts += [str(p.get("description") or "") for p in props.values() if isinstance(p, Mapping)]
                        break
                return "\n".join(p for p in parts if p), f"request {req.get('index')}"
        return None, "no answered request declares it"

    def described_schemas(self, tool: str) -> list[tuple[Any, dict[str, Any]]]:
        """``[(request index, input schema)]``: the schemas of ``tool`` that a describe tool's
        delivered result showed the model (OpenClaw's ``tool_describe`` answers with the tool's
        entry, ``parameters`` included, for a tool its ``tool_search`` lists as ``"input":
        "unknown"``): the :func:`tool_entries` of every delivered result that carry
        ``parameters`` / ``inputSchema`` / ``input_schema``; each delivered result once."""
        found: list[tuple[Any, dict[str, Any]]] = []
        for d in self.listed(tool):
            for entry in tool_entries(d.content, tool):
                schema = next((entry[k] for k in ("parameters", "inputSchema", "input_schema")
                               if isinstance(entry.get(k), dict)), None)
                if schema is not None:
                    found.append((d.index, schema))
        return found

    def listed(self, tool: str) -> list[Delivery]:
        """The delivered results that name ``tool`` (its bare name in the text), each call's result
        once (a result is re-sent with every later request): where a discovery or describe tool
        could have shown it."""
        seen: set[str] = set()
        out: list[Delivery] = []
        for d in self.deliveries(content=bare_tool_name(tool)):
            key = f"{norm_id(d.call_id)}:{len(d.content)}"
            if key not in seen:
                seen.add(key)
                out.append(d)
        return out

    def conversations(self, task_id: str, min_prompt: int = 20) -> dict[str, str]:
        """Norm call id -> ``"parent"`` or ``"child"``: in whose conversation the gateway delivered
        the call's result, read from the request that carried it - the parent's requests hold the
        task prompt (the archived ``private/task/<task_id>/prompt.md``) and no spawn prompt, a
        child's hold a spawn prompt (the longest string of a recorded spawn call, at least
        ``min_prompt`` characters) and not the task prompt. Calls whose results reached both kinds
        of conversation, or neither, are left out, so a reading is only made where the wire is
        unambiguous. Who ran a call, independent of how the harness attributed it."""
        prompt, _ = self.archive_text(f"private/task/{task_id}/prompt.md", errors="replace")
        task = norm_text(prompt)
        if not task:
            return {}
        spawned = {norm_text(max(strings(e.tool_call.arguments), key=len, default="")) for e in self.spawn_events()}
        spawned = {p for p in spawned if len(p) >= min_prompt}
        sides: dict[str, set[str | None]] = {}
        for d in self.deliveries():
            text = norm_text(d.request.get("last_user_text"))
            has_task, has_spawn = task in text, any(p in text for p in spawned)
            side = "parent" if has_task and not has_spawn else "child" if has_spawn and not has_task else None
            sides.setdefault(norm_id(d.call_id), set()).add(side)
        return {cid: str(next(iter(s))) for cid, s in sides.items() if len(s) == 1 and None not in s}

    def scripted_turns(self, task_id: str) -> tuple[list[str] | None, str | None]:
        """The run's user messages as scripted, from the pack snapshot in the archive: turn 1 is
        ``prompt.md``, the rest ``turns.json``'s ``user`` texts. ``(None, reason)`` if unreadable."""
        base = f"private/task/{task_id}"
        first, why = self.archive_text(f"{base}/prompt.md")
        if first is None:
            return None, why
        later, why = self.archive_json(f"{base}/turns.json", want=dict)
        if later is None:
            return None, why
        return [first] + [str(t.get("user", "")) for t in later.get("turns") or [] if isinstance(t, dict)], None

    def turns_delivered(self, turns: Sequence[str] | None, why: str | None = None) -> tuple[bool, str]:
        """Rule 11's turn-delivery criterion: each scripted user turn is the last user text of an
        answered gateway request, in order (turn N in a request after turn N-1's), so a later
        turn's verdict is never read off a run where that turn never reached the model.
        ``turns`` as :meth:`scripted_turns` returns it (``None`` fails, with ``why``)."""
        if turns is None:
            return False, f"the scripted turns cannot be read from the pack snapshot: {why or 'missing'}"
        answered = self.answered()
        notes, ok, after = [], True, -1
        for n, text in enumerate(turns, start=1):
            want = norm_text(text)
            hits = [r.get("index") for r in answered if want and want in norm_text(r.get("last_user_text"))]
            later = [i for i in hits if isinstance(i, int) and i > after]
            if not later:
                ok = False
                notes.append(f"turn {n}: never the last user text of an answered request" if not hits
                             else f"turn {n}: delivered only before turn {n - 1} (requests {hits})")
                continue
            after = later[0]
            notes.append(f"turn {n}: request {later[0]}")
        return ok, "; ".join(notes)

    def request_body(self, index: object) -> str | None:
        """The raw body of gateway request ``index`` as the provider received it (archived only
        with ``--tt-record-bodies``), or None."""
        text, _ = self.archive_text(f"{REQUEST_BODIES}/{index}.json", errors="replace")
        return text

    # ------------------------------------------------------------------- probe report

    def probe_requests(self, action: str | None = None, *, tool: str | re.Pattern[str] | None = None,
                       main: bool | None = None, turn: int | None = None,
                       kind: str | None = None) -> list[dict[str, Any]]:
        """The probe report's requests (the probe model's decisions, one per model request), in
        order; filtered by ``action`` (``shell``, ``call_tool``, ``spawn_subagent`` …), the tool
        the action was mapped to (see :func:`names_tool`), whether the main agent or a child
        asked, the conversation ``turn`` and the request ``kind`` (``main``, ``subagent`` …)."""
        out = []
        for r in (self.probe or {}).get("requests") or []:
            if action is not None and r.get("action") != action:
                continue
            if tool is not None and not names_tool(r.get("mapped_tool"), tool):
                continue
            if main is not None and (r.get("principal", "main") == "main") != main:
                continue
            if (turn is not None and r.get("turn") != turn) or (kind is not None and r.get("kind") != kind):
                continue
            out.append(r)
        return out

    def probe_call_ids(self, action: str | None = None, *, tool: str | re.Pattern[str] | None = None,
                       main: bool | None = None, turn: int | None = None, first: bool = False) -> set[str]:
        """:func:`norm_id` forms of the call ids the probe issued for :meth:`probe_requests`
        (only the first request that carries one with ``first``)."""
        requests = self.probe_requests(action, tool=tool, main=main, turn=turn)
        ids = [norm_id(r["call_id"]) for r in requests if r.get("call_id")]
        return set(ids[:1] if first else ids)

    def failed_probe_calls(self, action: str, *, main: bool | None = True) -> list[tuple[dict[str, Any], str]]:
        """``(probe request, why)`` of each call the probe made for ``action`` (``read_file`` …)
        whose delivered result says the call itself failed: flagged as an error, a non-zero exit
        status stated, or "No such file or directory". Such a call showed the model nothing of
        what it was to fetch (e.g. a path the probe read wrongly), so a pack scores what depended
        on it unscored rather than blaming the harness for it."""
        out: list[tuple[dict[str, Any], str]] = []
        for r in self.probe_requests(action, main=main):
            for d in self.deliveries(ids=[r.get("call_id")]) if r.get("call_id") else []:
                flag, _ = d.error_flag()
                code = stated_exit_code(d.content)
                missing = _NO_SUCH_FILE.search(d.content)
                if flag or (code is not None and code != 0) or missing:
                    line = missing.group(0) if missing else next(
                        (ln.strip() for ln in d.content.splitlines() if ln.strip()), "an empty result")
                    why = "flagged as an error" if flag else f"exit code {code}" if code else "a missing file"
                    out.append((r, f"{why}: {line[:160]}"))
                    break
        return out

    @property
    def final_text(self) -> str | None:
        """The probe model's last final answer (probe report), or None."""
        text = (self.probe or {}).get("final_text")
        return text if isinstance(text, str) else None

    # ------------------------------------------------------------------- ledgers

    def ledger(self, service: str, *, kind: str | tuple[str, ...] | None = None,
               tool: str | None = None) -> list[dict[str, Any]]:
        """A simulator's ledger records in order, by ``kind`` (``request``, ``issued``,
        ``transition``, ``error``, ``refused`` …; one or several) and ``tool``."""
        kinds = (kind,) if isinstance(kind, str) else kind
        return [r for r in self.ledgers.get(service, []) if (kinds is None or r.get("kind") in kinds)
                and (tool is None or r.get("tool") == tool)]

    def issued(self, service: str, name: str, *, tool: str | None = None) -> Any:
        """The first value the service issued under ``name`` (a receipt, a code), or None."""
        for r in self.ledger(service, kind="issued", tool=tool):
            detail = r.get("detail") or {}
            if detail.get("name") == name:
                return detail.get("value")
        return None

    # ------------------------------------------------------------------- files

    def workspace_text(self, rel: str, *, errors: str = "strict") -> tuple[str | None, str | None]:
        """``(text, None)`` of a workspace file after the run, or ``(None, reason)``."""
        return _read_text(self.workspace / rel, rel, errors)

    def workspace_json(self, rel: str, *, want: type | None = None) -> tuple[Any, str | None]:
        """``(value, None)`` of a JSON workspace file, or ``(None, reason)`` when it is missing,
        invalid or (with ``want``, e.g. ``dict``) of another type."""
        return _read_json(self.workspace / rel, rel, want)

    def workspace_jsonl(self, rel: str, *, missing_ok: bool = False) -> tuple[list[dict[str, Any]] | None, str | None]:
        """``(records, None)`` of a JSON-lines workspace file (blank lines and non-object lines
        skipped), or ``(None, reason)`` when it is missing or a line is not JSON. ``missing_ok``:
        a missing file is ``([], None)`` (a ledger that nothing ever wrote to)."""
        if missing_ok and not (self.workspace / rel).is_file():
            return [], None
        text, why = self.workspace_text(rel)
        if text is None:
            return None, why
        out: list[dict[str, Any]] = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                return None, f"{rel} line {n} is not JSON: {line[:80]!r}"
            if isinstance(record, dict):
                out.append(record)
        return out, None

    def workspace_yaml(self, rel: str, *, want: type | None = None) -> tuple[Any, str | None]:
        """Like :meth:`workspace_json`, of a YAML workspace file (safe loading: plain data only)."""
        return _read_yaml(self.workspace / rel, rel, want)

    def baseline_text(self, rel: str, *, errors: str = "strict") -> tuple[str | None, str | None]:
        """Like :meth:`workspace_text`, of the frozen baseline (the workspace before the run)."""
        return _read_text(self.baseline / rel, rel, errors)

    def baseline_json(self, rel: str, *, want: type | None = None) -> tuple[Any, str | None]:
        """Like :meth:`workspace_json`, of the frozen baseline."""
        return _read_json(self.baseline / rel, rel, want)

    def changed_files(self) -> list[str]:
        """Workspace files (relative POSIX paths, sorted; links left out) that the run created or
        changed: absent from the frozen baseline or with other bytes."""
        out = []
        for path in self.workspace.rglob("*"):
            if not path.is_file() or path.is_symlink():
                continue
            rel = path.relative_to(self.workspace).as_posix()
            before = self.baseline / rel
            if not (before.is_file() and not before.is_symlink() and before.read_bytes() == path.read_bytes()):
                out.append(rel)
        return sorted(out)

    def archive_text(self, rel: str, *, errors: str = "strict") -> tuple[str | None, str | None]:
        """Like :meth:`workspace_text`, of a file of the run archive (``gateway/bodies/3.json``)."""
        return _read_text(self.run_dir / rel, rel, errors)

    def archive_json(self, rel: str, *, want: type | None = None) -> tuple[Any, str | None]:
        """Like :meth:`workspace_json`, of a file of the run archive (``evidence/secret_scan.json``)."""
        return _read_json(self.run_dir / rel, rel, want)


def compactions_placed(ctx: VerifierContext, graded: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Each compaction placed before the graded request, after it, or (a record) not placeable.

    A summary request is placed by its probe-report ``index``. A ``context_compaction`` record is
    placed by its position in the trace: after, once a tool call of the graded request or a later
    one was recorded before it; before, when the graded request's own tool call comes after it or
    it belongs to an earlier conversation turn.
    """
    at = graded.get("index")
    before: list[str] = []
    after: list[str] = []
    unplaced: list[str] = []
    for r in ctx.probe_requests(kind="compaction"):
        i = r.get("index")
        (unplaced if not isinstance(i, int) or not isinstance(at, int) else before if i < at else after).append(f"summary request {i}")
    own = {norm_id(graded.get("call_id"))} - {""}
    later = {norm_id(r.get("call_id")) for r in ctx.probe_requests()
             if isinstance(r.get("index"), int) and isinstance(at, int) and r["index"] >= at} - {""}
    # by event type, not class: a verifier's evidence may hold tool events of any shape with call ids
    tools = [(n, call_ids(cast(ToolEvent, e))) for n, e in enumerate(ctx.events)
             if getattr(e, "event_type", None) == "tool"]
    own_at = next((n for n, ids in tools if ids & own), None)
    turn = graded.get("turn")
    for n, e in enumerate(ctx.events):
        if getattr(e, "event_type", None) != "context_compaction":
            continue
        name = f"context_compaction record seq {getattr(e, 'seq', '?')}"
        t = getattr(e, "conversation_turn", None)
        if any(m < n and ids & later for m, ids in tools):
            after.append(name)
        elif (own_at is not None and n < own_at) or (isinstance(t, int) and isinstance(turn, int) and t < turn):
            before.append(name)
        else:
            unplaced.append(name)
    return before, after, unplaced


def late_compaction(ctx: VerifierContext, graded: Mapping[str, Any] | None, step: str) -> str | None:
    """Why a pass of a "survived the compaction" criterion would be vacuous - no compaction is placed
    before the graded request (the probe report's request of the step whose view is graded) - or None.
    Shared by the compaction packs (C2, L6): a harness that compacts only after that step was never
    made to keep anything through one."""
    if graded is None:
        return f"the {step}'s request is not in the probe report, so no compaction can be placed before it"
    before, after, unplaced = compactions_placed(ctx, graded)
    if before:
        return None
    where = f"the {step} (request {graded.get('index')})"
    if unplaced:
        return (f"no compaction is placed before {where}: {', '.join(unplaced)} cannot be placed relative to it"
                + (f"; {', '.join(after)} after it" if after else "") + ": nothing shows it had to survive one")
    return f"the harness compacted only after {where}: nothing had to survive it ({', '.join(after)})"


@dataclass(frozen=True)
class VerifierOutcome:
    """The verifier's output: ``results[id] = (passed, reason)`` (``passed`` ``None``: the criterion
    does not apply to this run, recorded unscored); ``error`` when it crashed."""

    ran: bool
    error: str | None = None
    results: dict[str, tuple[bool | None, str]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "tt-verifier/1",
            "ran": self.ran,
            "error": self.error,
            "results": {k: {"passed": v[0], "reason": v[1]} for k, v in sorted(self.results.items())},
            "problems": dict(sorted(self.problems.items())),
        }
