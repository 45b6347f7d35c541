"""The probe-policy API: how a task pack scripts the ideal agent.

A task's ``probe_policy.py`` defines ``policy(turn)``, a generator that is run
once per user turn. It *yields* abstract actions and *receives* an
:class:`Observation` for each one, exactly as the harness delivered the result
to the model. The probe server (:mod:`apparatus.probe`) maps every action to
the tool the harness actually declared in that request (``Bash``,
``exec_command``, ``exec``, ``bash``, ``mcp__srv__tool`` …), so one policy
drives every harness.

Example ``tasks/E1-build-status-001/probe_policy.py``::

    from tracetrial.policy import final, read_file, shell, write_file

    PROBE_OPTIONS = {"report_usage_tokens": None}   # optional, see ProbeOptions

    def policy(turn):
        if turn.index == 1:
            build = yield shell("./build.sh", timeout_s=60)
            status = "failed" if build.is_error or "exit code" in build.text.lower() else "ok"
            yield write_file("status.json", '{"build": "%s"}' % status)
            yield final(f"Build {status}.")
        else:
            code = turn.find(r"release code: (\\w+)")      # only facts the model was shown
            yield final(f"The code is {code}.")

    def subagent_policy(prompt_text):                   # optional: child agents
        yield final("child result: " + prompt_text[-20:])

Rules (TASK_GUIDE rule 5): a policy reacts only to what it is shown, i.e. the
observations it receives and ``turn.history_text``; it never embeds private
values. The probe replays the generator from the start on every model request,
so a policy must be a deterministic function of its observations and of
``turn`` (no clocks, no randomness, no I/O). During replay ``turn`` shows the
history *as it was when each step was decided*, so ``turn.find`` is stable.

Optional hooks in ``probe_policy.py``:

* ``subagent_policy(prompt_text)``: generator for a child agent's requests; it
  receives the delegated prompt as a string (or the child's :class:`Turn` if
  its first parameter is named ``turn``). Without it a child answers
  ``final("Done: <prompt>")``.
* ``compaction_summary(turn) -> str``: the text answered to a harness
  compaction request (default: a restatement of the visible facts).
* ``PROBE_OPTIONS``: a dict validated by :class:`apparatus.probe.ProbeOptions`
  (``report_usage_tokens``, ``provider_error``, ``turns``).

After ``final(...)`` the turn is over. If the harness comes back in the same
turn (e.g. a background-task notification), the generator is resumed with an
observation of ``kind == "notification"``; a generator that has ended answers
such requests by repeating its final text.

Helpers for what every pack's ideal agent does the same way: ``yield from await_mcp(turn,
"bank")`` before the first call to an MCP server that a harness may still be connecting (Claude
Code's ``WaitForMcpServers``); ``shell_state_declared(turn.declaration_text(tool))`` for what a
shell tool states about ``cd`` and exported variables across calls; ``pushed_job_ends(turn)`` and
``ends = yield from await_pushed(turn, keys, note)`` for a background job whose end the harness
only pushes (no tool to ask for it).

A pack's simulator module (``simulators/<service>.py``) uses the handler API, re-exported
here so that a pack imports only this module and :mod:`tracetrial.verify`::

    from tracetrial.policy import Call, Reply
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from tracetrial.declarations import PERSISTENT_ON_SUCCESS, STAYS, cwd_after, shell_state_declared
from tracetrial.handlers import Call, Reply
from tracetrial.harness_text import task_notifications

__all__ = [
    "DEFERRED_SEARCH_TOOLS",
    "JOB_OUTPUT_TOOLS",
    "MAX_PUSH_WAITS",
    "MCP_WAITS",
    "MCP_WAIT_TOOL",
    "PERSISTENT_ON_SUCCESS",
    "STAYS",
    "Action",
    "AskUser",
    "Call",
    "CallTool",
    "CallView",
    "EditFile",
    "Final",
    "NativeTool",
    "Observation",
    "PolicyFn",
    "ProviderError",
    "ReadFile",
    "Reply",
    "Shell",
    "SpawnSubagent",
    "Turn",
    "TurnView",
    "Wait",
    "WriteFile",
    "ask_user",
    "await_mcp",
    "await_pushed",
    "call_tool",
    "cwd_after",
    "edit_file",
    "expand_skill_root",
    "final",
    "learn_schema",
    "load_deferred",
    "native_tool",
    "provider_error",
    "pushed_job_ends",
    "read_file",
    "shell",
    "shell_state_declared",
    "spawn_subagent",
    "task_notifications",
    "wait",
    "write_file",
]


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """Base of every abstract action a policy can yield."""

    kind: ClassVar[str] = "action"

    def describe(self) -> dict[str, Any]:
        """JSON-safe form, used in the probe report and to check replay determinism."""
        out: dict[str, Any] = {"kind": self.kind}
        out.update({k: v for k, v in self.__dict__.items()})
        return out


@dataclass(frozen=True)
class Shell(Action):
    """Run a shell command. ``timeout_s`` is passed to the harness when its tool has a timeout field;
    ``tty`` asks for a terminal (the tool's ``tty``/``pty`` field, when it has one)."""

    kind: ClassVar[str] = "shell"
    command: str
    timeout_s: float | None = None
    tty: bool = False

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "command": self.command, "timeout_s": self.timeout_s}
        if self.tty:  # only when asked: the records of every other shell action stay as they were
            out["tty"] = True
        return out


@dataclass(frozen=True)
class ReadFile(Action):
    """Read a file (file tool if declared, else ``cat`` through the shell tool)."""

    kind: ClassVar[str] = "read_file"
    path: str


@dataclass(frozen=True)
class WriteFile(Action):
    """Write a whole file (file tool if declared, else ``printf`` through the shell tool)."""

    kind: ClassVar[str] = "write_file"
    path: str
    content: str


@dataclass(frozen=True)
class EditFile(Action):
    """Replace the one occurrence of ``old`` with ``new`` (file tool, else a python one-off via shell)."""

    kind: ClassVar[str] = "edit_file"
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class CallTool(Action):
    """Call MCP tool ``tool`` of server ``server``; ``arguments`` are sent verbatim."""

    kind: ClassVar[str] = "call_tool"
    server: str
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "server": self.server, "tool": self.tool, "arguments": dict(self.arguments)}


@dataclass(frozen=True)
class SpawnSubagent(Action):
    """Delegate ``prompt`` to a child agent through the harness's sub-agent tool."""

    kind: ClassVar[str] = "spawn_subagent"
    description: str
    prompt: str
    background: bool = False


@dataclass(frozen=True)
class AskUser(Action):
    """Ask the user through a declared ask-user tool (absent capability if none is declared);
    ``options``, when given, are the choices offered (the tool's own options where it has them,
    else listed in the question's text)."""

    kind: ClassVar[str] = "ask_user"
    question: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wait(Action):
    """Wait ``seconds`` (realised as ``sleep`` through the shell tool)."""

    kind: ClassVar[str] = "wait"
    seconds: float


@dataclass(frozen=True)
class NativeTool(Action):
    """Escape hatch: call a declared tool by its exact wire name with verbatim ``arguments``.

    For Codex namespaced tools use ``"<namespace>/<name>"`` (e.g. ``"mcp__tickets/get_ticket"``).
    Use it for harness-specific polling (Codex ``write_stdin``, Claude ``TaskOutput`` …).
    """

    kind: ClassVar[str] = "native_tool"
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "arguments": dict(self.arguments)}


@dataclass(frozen=True)
class Final(Action):
    """End the turn with this assistant text."""

    kind: ClassVar[str] = "final"
    text: str


@dataclass(frozen=True)
class ProviderError(Action):
    """Answer this request — and every retry of it, since a retry replays to the same step — with
    an HTTP error from the provider boundary instead of a model reply (a harness error-notice
    trigger placed by what the policy has seen, e.g. after a given tool result)."""

    kind: ClassVar[str] = "provider_error"
    status: int = 503
    message: str = "Service unavailable (injected by the TraceTrial probe)"


def shell(command: str, timeout_s: float | None = None, tty: bool = False) -> Shell:
    """Run ``command`` in the harness's shell tool (``tty``: on a terminal, when the tool offers one)."""
    return Shell(command, timeout_s, tty)


def read_file(path: str) -> ReadFile:
    """Read ``path``."""
    return ReadFile(path)


def write_file(path: str, content: str) -> WriteFile:
    """Write ``content`` to ``path`` (whole file)."""
    return WriteFile(path, content)


def edit_file(path: str, old: str, new: str) -> EditFile:
    """Replace the single occurrence of ``old`` in ``path`` by ``new``."""
    return EditFile(path, old, new)


def call_tool(server: str, tool: str, arguments: Mapping[str, Any] | None = None) -> CallTool:
    """Call MCP ``tool`` on ``server`` with ``arguments`` (sent verbatim)."""
    return CallTool(server, tool, dict(arguments or {}))


def spawn_subagent(description: str, prompt: str, background: bool = False) -> SpawnSubagent:
    """Start a child agent with ``prompt``; ``background=True`` asks for an asynchronous child."""
    return SpawnSubagent(description, prompt, background)


def ask_user(question: str, options: Sequence[str] = ()) -> AskUser:
    """Ask the user ``question`` through the harness's clarification channel, offering ``options``."""
    return AskUser(question, tuple(options))


def wait(seconds: float) -> Wait:
    """Let ``seconds`` pass (``sleep`` through the shell tool)."""
    return Wait(seconds)


def native_tool(name: str, arguments: Mapping[str, Any] | None = None) -> NativeTool:
    """Call the declared tool ``name`` verbatim (harness-specific escape hatch)."""
    return NativeTool(name, dict(arguments or {}))


def provider_error(status: int = 503, message: str = "Service unavailable (injected by the TraceTrial probe)"
                   ) -> ProviderError:
    """Fail this request (and its retries) with HTTP ``status`` and ``message`` (400–599)."""
    if not 400 <= int(status) <= 599:
        raise ValueError(f"provider_error status must be an HTTP error (400–599), not {status!r}")
    return ProviderError(int(status), str(message))


def final(text: str) -> Final:
    """End the turn, answering ``text``."""
    return Final(text)


# --------------------------------------------------------------------------- observations

ObservationKind = Literal["tool_result", "absent", "missing", "notification"]


@dataclass(frozen=True)
class Observation:
    """What the model was shown for one action.

    Attributes:
        text: the result text exactly as the harness delivered it (a list of
            text blocks is joined with ``"\\n"``; ``raw`` keeps the original).
        is_error: the error flag as delivered; ``None`` when the wire format or
            harness sends none (Codex, Chat Completions).
        absent: the harness declared no tool for this action (recorded as an
            absent capability in the probe report).
        raw: the native result object (content blocks, output item, message).
        kind: ``tool_result`` | ``absent`` | ``missing`` (the call was made but no
            result came back) | ``notification`` (new user-role text after ``final``).
        tool: the wire tool name the action was mapped to.
        call_id: the probe's call id for this action.
        visible: the result is still in the current request's history (``False``
            after compaction rewrote it: the observation then comes from the run's
            memory of what the model was shown earlier).
    """

    text: str = ""
    is_error: bool | None = None
    absent: bool = False
    raw: Any = None
    kind: ObservationKind = "tool_result"
    tool: str | None = None
    call_id: str | None = None
    visible: bool = True

    @property
    def missing(self) -> bool:
        """The harness never delivered a result for the call."""
        return self.kind == "missing"

    @property
    def ok(self) -> bool:
        """A delivered result not flagged as an error (says nothing about exit codes in the text)."""
        return self.kind == "tool_result" and not self.is_error

    def find(self, pattern: str, group: int | str = 1, default: str | None = None, flags: int = 0) -> str | None:
        """Last match of ``pattern`` in :attr:`text` (its ``group``, or the whole match if it has no groups)."""
        return _last_match(pattern, self.text, group, default, flags)


# --------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class CallView:
    """One tool call the model made earlier in the conversation, as the request shows it."""

    name: str
    #: The arguments as sent (JSON text for a function call; a custom tool's raw input).
    arguments: str
    #: The result the request shows for the call; ``None`` when it shows none.
    result: str | None = None


@dataclass(frozen=True)
class TurnView:
    """What the model was shown in one request (for one principal)."""

    history_text: str = ""
    system_text: str = ""
    tool_names: tuple[str, ...] = ()
    #: ``(name, description)`` of each declared tool, in :attr:`tool_names`' order and spelling.
    tool_descriptions: tuple[tuple[str, str], ...] = ()
    #: ``(name, ((parameter, description), ...))`` of each declared tool: what its input schema's
    #: top-level properties say (a harness may state a tool's semantics there only, e.g. Codex's
    #: ``workdir``: "Defaults to the turn cwd").
    tool_parameters: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    #: The model's own earlier tool calls in the request, in order, each with the result shown for it.
    calls: tuple[CallView, ...] = ()
    #: Tool names the request announces as deferred: named (in a system entry or the system prompt)
    #: but not declared, loadable through the harness's search tool (Claude Code 2.1.332+).
    deferred_tool_names: tuple[str, ...] = ()


class ViewLike(Protocol):
    """Anything with a view's three attributes (the probe passes lazily decompressed views)."""

    @property
    def history_text(self) -> str: ...

    @property
    def system_text(self) -> str: ...

    @property
    def tool_names(self) -> tuple[str, ...]: ...


class Turn:
    """The user turn a policy generator runs for.

    ``index`` (1-based) and ``user_text`` are fixed for the turn; the other
    attributes reflect what the model was shown when the current step was
    decided (see the module docstring on replay).
    """

    def __init__(self, index: int, user_text: str, *, principal: str = "main",
                 options: Mapping[str, Any] | None = None, view: ViewLike | None = None) -> None:
        self.index = index
        self.user_text = user_text
        self.principal = principal
        self.options: Mapping[str, Any] = dict(options or {})
        self._view: ViewLike = view or TurnView()

    @property
    def history_text(self) -> str:
        """Everything the conversation showed the model, in order: user texts (harness reminders
        included), tool results and mid-conversation system/developer entries; not the top-level
        system prompt and not the model's own words (assistant texts, tool calls)."""
        return self._view.history_text

    @property
    def system_text(self) -> str:
        """The top-level system prompt / instructions as sent."""
        return self._view.system_text

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools declared in the request (Codex namespaced tools as ``ns/name``)."""
        return self._view.tool_names

    @property
    def tool_descriptions(self) -> dict[str, str]:
        """Each declared tool's description as the model was shown it, by its name as in
        :attr:`tool_names` (how an agent tells apart tools whose names the harness rewrote)."""
        return dict(getattr(self._view, "tool_descriptions", ()) or ())

    @property
    def tool_parameters(self) -> dict[str, dict[str, str]]:
        """Each declared tool's parameter descriptions as the model was shown them (tool name as
        in :attr:`tool_names` → parameter → description; ``""`` for a parameter without one)."""
        return {name: dict(params) for name, params in getattr(self._view, "tool_parameters", ()) or ()}

    def declaration_text(self, tool: str) -> str:
        """``tool``'s description and its parameters' descriptions as the model was shown them,
        one per line (``""`` when it is not declared). Read a shell tool's with
        :func:`shell_state_declared` to write commands for the semantics it states."""
        parts = [self.tool_descriptions.get(tool, ""), *self.tool_parameters.get(tool, {}).values()]
        return "\n".join(p for p in parts if p)

    @property
    def calls(self) -> tuple[CallView, ...]:
        """The model's own earlier tool calls as the request shows them, in order, each with the
        result shown for it (``None``: the request carries no result for it). An agent always sees
        what it did; a harness that drops a call from a resumed history drops it here too."""
        return tuple(getattr(self._view, "calls", ()) or ())

    @property
    def deferred_tool_names(self) -> tuple[str, ...]:
        """Tool names the request announces as deferred, in order: named, not declared, loadable
        through the harness's own search tool (Claude Code 2.1.332+: "The following deferred tools
        are now available via ToolSearch …"); ``()`` when it announces none."""
        return tuple(getattr(self._view, "deferred_tool_names", ()) or ())

    @property
    def is_subagent(self) -> bool:
        return self.principal != "main"

    def find(self, pattern: str, group: int | str = 1, default: str | None = None, *,
             flags: int = 0, include_system: bool = False) -> str | None:
        """Last match of ``pattern`` in :attr:`history_text` (most recent fact wins).

        Returns capture ``group`` (or the whole match when the pattern has no
        groups), else ``default``. ``include_system`` also searches the system prompt.
        """
        text = self.history_text if not include_system else self.system_text + "\n" + self.history_text
        return _last_match(pattern, text, group, default, flags)

    def find_all(self, pattern: str, *, flags: int = 0, include_system: bool = False) -> list[Any]:
        """Every match of ``pattern`` (as :func:`re.findall` returns them), in order."""
        text = self.history_text if not include_system else self.system_text + "\n" + self.history_text
        return re.findall(pattern, text, flags)

    def __repr__(self) -> str:
        return f"Turn(index={self.index}, principal={self.principal!r}, user_text={self.user_text[:40]!r})"


def _last_match(pattern: str, text: str, group: int | str, default: str | None, flags: int) -> str | None:
    last = None
    for last in re.finditer(pattern, text, flags):
        pass
    if last is None:
        return default
    if not last.re.groups:
        return last.group(0)
    value = last.group(group)
    return default if value is None else value


#: The tool Claude Code declares while an MCP server is still connecting (its own name).
MCP_WAIT_TOOL = "WaitForMcpServers"
#: How many times :func:`await_mcp` calls it at most, by default.
MCP_WAITS = 4


def await_mcp(turn: Turn, server: str, waits: int = MCP_WAITS) -> Generator[NativeTool, Observation, None]:
    """What an ideal agent does before its first call to MCP ``server`` when the harness says the
    server is still connecting: use with ``yield from await_mcp(turn, "bank")``.

    Claude Code declares ``WaitForMcpServers`` (and not yet the server's tools) while a server is
    connecting; its description asks the model to call it when the work needs that server. The
    agent does so at most ``waits`` times (bounded, so a server that never connects ends in the
    pack's own verdict rather than a loop) and stops as soon as a tool of ``server`` is declared or
    the wait tool is gone. With every other harness nothing is yielded: they declare the server's
    tools from the start, or never.
    """
    for _ in range(waits):
        if MCP_WAIT_TOOL not in turn.tool_names or any(server in name for name in turn.tool_names):
            return
        yield native_tool(MCP_WAIT_TOOL, {"servers": [server]})


def learn_schema(turn: Turn, tool: str) -> Generator[NativeTool, Observation, None]:
    """What an ideal agent does before sending exact values to MCP tool ``tool`` when the harness
    keeps its MCP tools behind a dispatcher and lists them without their input: use with
    ``yield from learn_schema(turn, "create_invoice")``.

    OpenClaw 2026.9.6 declares no MCP tool; its ``tool_search`` lists one with ``"input":
    "unknown"`` and its ``tool_describe {id}`` answers with the tool's schema (``parameters``).
    The agent searches for ``tool``, then describes the entry the listing named. With a harness
    that declares the tool itself, or declares no describe tool, nothing is yielded.
    """
    names = set(turn.tool_names)
    if not {"tool_search", "tool_describe"} <= names or any(n.endswith(tool) for n in names):
        return
    found = yield native_tool("tool_search", {"query": tool})
    tool_id = found.find(rf'"id":\s*"([^"]*{re.escape(tool)})"')
    if tool_id:
        yield native_tool("tool_describe", {"id": tool_id})


#: Search tools behind which a harness defers tools it names but does not declare (Claude Code
#: 2.1.332+ ``ToolSearch {query}``: "select:<name>,…" loads the named tools; OpenClaw
#: ``tool_search``), in the order they are preferred.
DEFERRED_SEARCH_TOOLS = ("ToolSearch", "tool_search", "search_tools")
_FUNCTION_ENTRY = re.compile(r"<function>(\{.*?\})</function>", re.DOTALL)


def _of_server(name: str, server: str) -> bool:
    """Whether ``name`` is a tool of MCP ``server`` as harnesses spell it (``mcp__<s>__t``,
    ``<s>__t``, a Codex namespace ``mcp__<s>/t``, ``<s>.t``)."""
    return re.match(r"^(?:mcp__)?" + re.escape(server) + r"(?:__|/|\.)", name) is not None


def load_deferred(turn: Turn, server: str) -> Generator[NativeTool, Observation, dict[str, str]]:
    """What an ideal agent does when a harness declares no tool of MCP ``server`` but keeps tools
    behind its own search tool (:data:`DEFERRED_SEARCH_TOOLS`): it fetches the server's tools
    through that search and reads what it was shown about them. Use with
    ``shown = yield from load_deferred(turn, "warehouse")``; the result is ``{name: description}``
    of the server's tools the search showed (the ``<function>{…}</function>`` entries of its
    result, else the declarations of the request that carried the result: Claude Code 2.1.332
    answers with ``tool_reference`` blocks and declares the loaded tools from then on).

    The server's tools the request announces as deferred (:attr:`Turn.deferred_tool_names`) are
    fetched by name ("select:a,b" when the search tool documents that form, else the names as
    keywords); when it announces none, the search is a keyword search for the server's name (so
    a harness that lost the server's tools shows so in a search result). Nothing is yielded (and
    ``{}`` returned) when a tool of ``server`` is declared already or no search tool is.
    """
    search = next((n for n in DEFERRED_SEARCH_TOOLS if n in turn.tool_names), None)
    if search is None or any(_of_server(n, server) for n in turn.tool_names):
        return {}
    named = [n for n in turn.deferred_tool_names if _of_server(n, server)]
    if not named:
        query = server
    elif "select:" in turn.declaration_text(search):
        query = "select:" + ",".join(named)
    else:
        query = " ".join(named)
    shown = yield native_tool(search, {"query": query})
    found: dict[str, str] = {}
    for m in _FUNCTION_ENTRY.finditer(shown.text or ""):
        try:
            spec = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(spec, dict) and isinstance(spec.get("name"), str) and _of_server(spec["name"], server):
            found.setdefault(spec["name"], str(spec.get("description") or ""))
    for name, description in turn.tool_descriptions.items():
        if _of_server(name, server):
            found.setdefault(name, description)
    return found


#: Codex 0.171.0+ lists skills by a short path under a root alias and states the roots first:
#: "### Skill roots\n- `r1` = `/…/workspace/.agents/skills`" … "(file: r1/rate-card/SKILL.md)".
_SKILL_ROOTS = re.compile(r"#+[ \t]*Skill roots[ \t]*\n((?:[ \t]*[-*][^\n]*(?:\n|$))+)", re.IGNORECASE)
_SKILL_ROOT = re.compile(r"[-*][ \t]*`?([A-Za-z]\w*)`?[ \t]*=[ \t]*`?(/[^`\n]*?)`?[ \t]*$")


def expand_skill_root(turn: Turn, location: str) -> str:
    """``location`` (a skill file the harness listed) with a root alias expanded: Codex 0.171.0+
    lists ``r1/rate-card/SKILL.md`` and defines ``r1`` in a "### Skill roots" table of the same
    instructions (`` - `r1` = `/abs/folder` ``). A location whose first segment the shown table
    does not define (an absolute path, a relative one) is returned as it is."""
    head, sep, rest = location.partition("/")
    if not sep or not head:
        return location
    roots: dict[str, str] = {}
    for text in (turn.system_text, turn.history_text):
        for block in _SKILL_ROOTS.finditer(text):
            for line in block.group(1).splitlines():
                m = _SKILL_ROOT.match(line.strip())
                if m:
                    roots[m.group(1)] = m.group(2).rstrip("/")
    return f"{roots[head]}/{rest}" if head in roots else location


#: Tools with which an agent asks for a background shell job's state (Claude Code up to 2.1.2xx).
JOB_OUTPUT_TOOLS = ("TaskOutput", "BashOutput")
#: How many times :func:`await_pushed` ends the turn to wait for pushed events at most, by default.
MAX_PUSH_WAITS = 4

def pushed_job_ends(turn: Turn, shell_tool: str = "Bash") -> bool:
    """The harness's background facility pushes a job's end instead of answering for it:
    ``shell_tool`` takes ``run_in_background`` and no tool that reports a job's state
    (:data:`JOB_OUTPUT_TOOLS`) is declared. Claude Code 2.1.332 is such a harness: its ``Bash``
    "runs the command detached … and re-invokes you when it exits" with a ``<task-notification>``,
    and it declares neither ``TaskOutput`` nor ``BashOutput``."""
    if shell_tool not in turn.tool_names or any(t in turn.tool_names for t in JOB_OUTPUT_TOOLS):
        return False
    return "run_in_background" in turn.tool_parameters.get(shell_tool, {})


def await_pushed(turn: Turn, keys: Sequence[str | None], note: str,
                 waits: int = MAX_PUSH_WAITS) -> Generator[Final, Observation, dict[str, dict[str, str]]]:
    """What an ideal agent does when the harness re-invokes it as a background job ends rather
    than answering for the job (:func:`pushed_job_ends`): it ends its turn, saying ``note``, and
    reads what the harness pushes back. Use with ``ends = yield from await_pushed(turn, keys,
    note)``.

    ``keys`` name the jobs, each by the id of the call that started it (the observation's
    ``call_id``); a notification belongs to the job whose key is its ``tool-use-id`` (or its
    ``task-id``). One already shown (a harness may attach it to a later tool result before the
    turn ends) counts without waiting. The turn is ended at most ``waits`` times (each answer
    differs, so that each is recognised); the result maps each key whose job notified to its last
    notification's fields (:func:`task_notifications`). A key missing from it: no end was pushed.
    """
    wanted = [k for k in keys if k]
    got: dict[str, dict[str, str]] = {}

    def take(text: str) -> None:
        for fields in task_notifications(text):
            named = {fields.get("tool-use-id"), fields.get("task-id")}
            got.update((key, fields) for key in wanted if key in named)

    take(turn.history_text)
    for i in range(waits):
        if all(k in got for k in wanted):
            break
        obs = yield final(note if i == 0 else f"{note} (still waiting, {i + 1})")
        if obs.kind != "notification":
            break
        take(obs.text)
    return got


PolicyFn = Callable[[Turn], Generator[Action, Observation, Any]]
"""Type of ``policy``: ``def policy(turn: Turn) -> Generator[Action, Observation, None]``."""
