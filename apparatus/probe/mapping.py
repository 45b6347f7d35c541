"""Abstract action → the tool call(s) a harness declared in *this* request.

Per action the candidates are tried in order; the first declared one wins:

=================  ===========================================================  =====================
action             native tools (Claude Code / Codex / OpenClaw / DeepSeek / ref) fallback
=================  ===========================================================  =====================
shell              ``Bash`` / ``exec_command`` / ``exec`` / ``bash`` / ``shell``  absent
read_file          ``Read`` / – / ``read`` / – / ``read_file``                    shell ``cat``
write_file         ``Write`` / – / ``write`` / – / ``write_file``                 shell ``printf``
edit_file          ``Edit`` / – / ``edit`` / – / ``edit_file``                    shell ``python3`` one-off
call_tool          ``mcp__<s>__<t>`` / namespace ``mcp__<s>`` + ``<t>`` /         absent
                   ``<s>__<t>`` or ``tool_search`` → ``tool_call {id, args}``;
                   deferred (Claude Code 2.1.332+): ``ToolSearch
                   {query: "select:mcp__<s>__<t>"}`` → ``mcp__<s>__<t>``
spawn_subagent     ``Agent``/``Task`` / ``multi_agent_v1/spawn_agent`` /          absent
                   ``sessions_spawn``, deferred (OpenClaw): ``tool_describe`` →
                   ``tool_call {id: "sessions_spawn", args: {task, label}}``
                   (+ ``sessions_yield`` → ``tool_call {id: "subagents",
                   args: {action: "list"}}`` for a foreground spawn)
ask_user           ``AskUserQuestion`` / ``request_user_input`` / ``ask_user``…;  absent
                   deferred (OpenClaw, named in the request's deferred list):
                   ``tool_describe`` → ``tool_call {id: "ask_user", args:
                   {questions: [{id, header, question, options, multiSelect}]}}``
wait               shell ``sleep N``                                              absent
native_tool        the named tool, verbatim                                       absent
=================  ===========================================================  =====================

Arguments are shaped by the declared JSON schema: semantic values go to the
property that names them (``command``/``cmd``, ``file_path``/``path``,
``old_string``/``oldText`` …), required properties without a value get a
type-correct default, and a ``timeout_s`` becomes milliseconds when the
property is in ms. A shell whose tool backgrounds a still-running command after a
yield window (OpenClaw ``exec {yieldMs}``, default 10 s, then "Command still running …
Use process …") gets that window set to the action's timeout when the timeout is longer than the window, so the command runs to its end
in the foreground as the action asks. MCP and ``native_tool`` arguments are sent verbatim.
Anything lost in the mapping (a timeout with no field) is reported in ``notes``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apparatus.probe.tools import Inventory, ToolDecl
from tracetrial.policy import (
    DEFERRED_SEARCH_TOOLS,  # the search tools behind which a harness defers tools (one list with load_deferred)
    Action,
    AskUser,
    CallTool,
    EditFile,
    NativeTool,
    ReadFile,
    Shell,
    SpawnSubagent,
    Wait,
    WriteFile,
)

SHELL_TOOLS = ("Bash", "exec_command", "exec", "bash", "shell", "run_shell_command", "execute_command",
               "run_command", "terminal")
READ_TOOLS = ("Read", "read", "read_file", "ReadFile", "file_read", "view_file")
WRITE_TOOLS = ("Write", "write", "write_file", "WriteFile", "create_file", "file_write")
EDIT_TOOLS = ("Edit", "edit", "edit_file", "EditFile", "str_replace", "replace_in_file")
AGENT_TOOLS = ("Agent", "Task", "spawn_agent", "sessions_spawn", "spawn_subagent", "subagent", "delegate")
#: OpenClaw's dispatcher (Tool Search): deferred tools are called as ``tool_call {id, args}``,
#: ``tool_describe {id}`` returns a deferred tool's schema.
DISPATCH_TOOLS = ("tool_call", "call_tool")
DESCRIBE_TOOLS = ("tool_describe", "describe_tool")
#: OpenClaw 2026.9.6's ``sessions_spawn`` input (what ``tool_describe`` returns, the fields the
#: probe fills): the spawn arguments are fixed before the describe result is seen.
SESSIONS_SPAWN_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["task"],
    "properties": {"task": {"type": "string"}, "label": {"type": "string"}},
}
#: OpenClaw 2026.9.6's ``ask_user`` input (what ``tool_describe`` returns; the arguments are fixed
#: before the describe result is seen): 1-3 questions, each with 2-4 options (every question also
#: takes the user's own words, ``isOther``), and an optional wait bound.
OPENCLAW_ASK_USER_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["questions"],
    "properties": {
        "questions": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
            "type": "object", "required": ["id", "header", "question", "options"],
            "properties": {
                "id": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
                "header": {"type": "string", "minLength": 1},
                "question": {"type": "string"},
                "options": {"type": "array", "minItems": 2, "maxItems": 4, "items": {
                    "type": "object", "required": ["label"],
                    "properties": {"label": {"type": "string"}, "description": {"type": "string"}}}},
                "multiSelect": {"type": "boolean"}}}},
        "timeoutSeconds": {"type": "integer"}},
}
#: OpenClaw's wait primitive: ends the model turn until the spawned children have settled and
#: resumes the parent with their completion.
YIELD_TOOLS = ("sessions_yield",)
#: Sub-agent tools whose call only accepts the child (OpenClaw): a foreground spawn then yields.
YIELDING_SPAWN_TOOLS = ("sessions_spawn",)
#: OpenClaw's sub-agent status tool, declared directly by 2026.6.9 (``action: list`` only).
STATUS_TOOLS = ("subagents",)
#: Shell-tool properties naming how long the tool waits before it backgrounds a command that is
#: still running (OpenClaw ``exec``: "Milliseconds before backgrounding; default 10000").
#: Codex's ``exec_command {yield_time_ms}`` is a polling window, not a backgrounding one: not here.
YIELD_WINDOW_KEYS = ("yieldMs",)
ASK_TOOLS = ("AskUserQuestion", "ask_user", "ask_user_question", "request_user_input", "ask_followup_question",
             "ask_human", "ask_question")

# semantic value -> property names that carry it, most specific first
ALIASES: dict[str, tuple[str, ...]] = {
    "command": ("command", "cmd", "script", "commandLine", "command_line"),
    "path": ("file_path", "path", "filePath", "filename", "file", "target_file"),
    "content": ("content", "contents", "file_text", "text", "data"),
    "old": ("old_string", "oldText", "old_str", "old_text", "old", "search"),
    "new": ("new_string", "newText", "new_str", "new_text", "new", "replace", "replacement"),
    "prompt": ("prompt", "message", "task", "instructions", "instruction", "input"),
    "question": ("question", "prompt", "message", "text", "query"),
    "description": ("description", "label", "summary", "title", "justification_text"),
    "background": ("run_in_background", "background", "runInBackground", "async"),
    "timeout_s": ("timeout", "timeout_ms", "timeoutMs", "timeout_s", "timeout_seconds", "timeoutSeconds"),
    "tty": ("tty", "pty"),
    "query": ("query", "q", "search", "pattern", "keywords"),
    "tool_id": ("id", "tool_id", "toolId", "tool", "name"),
    "tool_args": ("args", "arguments", "input", "params", "parameters"),
}


@dataclass(frozen=True)
class PlannedCall:
    """One tool call to emit: the declared tool and its arguments."""

    tool: ToolDecl
    arguments: Any
    #: For an indirect call (OpenClaw ``tool_call {id, args}``): the tool it reaches and the
    #: arguments meant for that tool.
    target: str | None = None
    target_arguments: Any = None

    @property
    def display(self) -> str:
        return f"{self.tool.display}:{self.target}" if self.target else self.tool.display

    @property
    def action_arguments(self) -> Any:
        """The arguments of the tool the action calls (unwrapped for indirect calls)."""
        return self.target_arguments if self.target else self.arguments


@dataclass(frozen=True)
class Plan:
    """How one action is carried out in one request.

    ``calls`` is empty for an absent capability (then ``needed`` says what was
    missing). ``via`` is ``native``, ``shell-fallback`` or ``tool_search``.
    """

    calls: tuple[PlannedCall, ...] = ()
    needed: str | None = None
    via: str = "native"
    notes: tuple[str, ...] = ()

    @property
    def absent(self) -> bool:
        return not self.calls

    @property
    def mapped_tool(self) -> str | None:
        return self.calls[-1].display if self.calls else None


# --------------------------------------------------------------------------- argument shaping


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _types(schema: dict[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return [x for x in t if x != "null"]
    if isinstance(t, str):
        return [t]
    if "properties" in schema:
        return ["object"]
    return []


def _is_ms(name: str, schema: dict[str, Any]) -> bool:
    desc = str(schema.get("description", "")).lower()
    return name.lower().endswith("ms") or "millisecond" in desc


def _convert(semantic: str, value: Any, name: str, schema: dict[str, Any]) -> Any:
    types = _types(schema)
    if semantic == "timeout_s":
        if _is_ms(name, schema):
            return round(float(value) * 1000)
        return int(value) if "integer" in types or float(value).is_integer() else float(value)
    if semantic == "command" and "array" in types and "string" not in types:
        return ["bash", "-lc", value]
    return value


def _default(name: str, schema: dict[str, Any], sem: dict[str, Any]) -> Any:
    """A type-correct value for a required property that no semantic value names."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    types = _types(schema)
    kind = types[0] if types else "string"
    if kind == "object":
        return fill_object(schema, sem)[0]
    if kind == "array":
        items = _obj(schema.get("items"))
        if _types(items)[:1] == ["object"] or "properties" in items:
            return [fill_object(items, sem)[0]]
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return int(schema.get("minimum", 0) or 0)
    # strings: derive something meaningful from the action
    lname = name.lower()
    text = sem.get("question") or sem.get("prompt") or sem.get("description") or sem.get("command") or ""
    if lname == "id" or lname.endswith("_id"):
        return "q1"
    if lname in ("header", "label", "title", "name"):
        return (str(text) or "Answer")[:12]
    if lname == "description":
        return _describe(sem)
    return str(text)


def _describe(sem: dict[str, Any]) -> str:
    if sem.get("description"):
        return str(sem["description"])
    if sem.get("command"):
        first = str(sem["command"]).strip().splitlines()[0] if str(sem["command"]).strip() else ""
        return ("Run: " + first)[:80]
    return str(sem.get("prompt") or sem.get("question") or "")[:80]


def fill_object(schema: dict[str, Any], sem: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Arguments for an object schema from semantic values; returns (arguments, unplaced semantic keys)."""
    props = _obj(schema.get("properties"))
    required = [r for r in schema.get("required", []) if isinstance(r, str)] if isinstance(schema.get("required"), list) else []
    args: dict[str, Any] = {}
    unplaced: list[str] = []
    for key, value in sem.items():
        if value is None:
            continue
        target = next((p for p in ALIASES.get(key, (key,)) if p in props and p not in args), None)
        if target is None:
            unplaced.append(key)
            continue
        args[target] = _convert(key, value, target, _obj(props[target]))
    for name in required:
        if name not in args:
            sub = _obj(props.get(name))
            if name in ALIASES["description"] and "description" not in sem:
                args[name] = _describe(sem)
            else:
                args[name] = _default(name, sub, sem)
    return args, unplaced


def shape_arguments(tool: ToolDecl, sem: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Arguments for ``tool`` and notes on semantic values its schema has no field for."""
    args, unplaced = fill_object(tool.schema or {"type": "object"}, sem)
    notes = [f"{k}={sem[k]!r} not transportable: {tool.display} declares no field for it" for k in unplaced
             if k not in ("description",)]
    return args, notes


# --------------------------------------------------------------------------- shell fallbacks


def _delim(*parts: str) -> str:
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:8]
    return f"TT_EOF_{digest}"


def shell_read(path: str) -> str:
    return f"cat -- {shlex.quote(path)}"


def shell_write(path: str, content: str) -> str:
    # printf '%s' keeps the bytes exactly (a heredoc would add a trailing newline)
    q = shlex.quote(path)
    return f"mkdir -p -- \"$(dirname -- {q})\" && printf '%s' {shlex.quote(content)} > {q}"


def shell_edit(path: str, old: str, new: str) -> str:
    # repr() keeps every value on one line, so the heredoc delimiter cannot occur inside
    tag = _delim(path, old, new)
    return (
        f"python3 - <<'{tag}'\n"
        "import sys\n"
        f"p, old, new = {path!r}, {old!r}, {new!r}\n"
        "s = open(p, encoding='utf-8', newline='').read()\n"
        "n = s.count(old)\n"
        "if n != 1:\n"
        "    sys.exit(f'edit_file: expected exactly one occurrence of the old text in {p}, found {n}')\n"
        "open(p, 'w', encoding='utf-8', newline='').write(s.replace(old, new, 1))\n"
        "print(f'edited {p}')\n"
        f"{tag}"
    )


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# --------------------------------------------------------------------------- planning


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _shell_plan(inv: Inventory, command: str, *, timeout_s: float | None = None, via: str = "native",
                extra_notes: tuple[str, ...] = (), tty: bool = False) -> Plan | None:
    tool = inv.first(SHELL_TOOLS)
    if tool is None:
        return None
    sem: dict[str, Any] = {"command": command}
    if timeout_s is not None:
        sem["timeout_s"] = timeout_s
    if tty:
        # Codex exec_command {tty}, OpenClaw exec {pty}, the reference's shell {tty}; a tool without
        # one runs the command without a terminal (noted: not transportable)
        sem["tty"] = True
    if "description" in tool.required:
        sem["description"] = _describe({"command": command})
    args, notes = shape_arguments(tool, sem)
    window = next((k for k in YIELD_WINDOW_KEYS if k in tool.properties and k not in args), None)
    if timeout_s is not None and window is not None and round(float(timeout_s) * 1000) > _yield_default(tool, window):
        # the command must run to its end (or its timeout), not be backgrounded after the default window
        args[window] = round(float(timeout_s) * 1000)
        notes.append(f"{window}={args[window]}: {tool.display} keeps the command in the foreground up to its "
                     "timeout instead of backgrounding it after its default window")
    return Plan((PlannedCall(tool, args),), via=via, notes=tuple(extra_notes) + tuple(notes))


def _yield_default(tool: ToolDecl, key: str) -> int:
    """The tool's default yield window in ms (its schema's ``default`` or "default <n>" in the
    description; OpenClaw 2026.9.6 says "default 10000"), else 10000."""
    schema = _obj(tool.properties.get(key))
    if isinstance(schema.get("default"), (int, float)) and not isinstance(schema.get("default"), bool):
        return int(schema["default"])
    m = re.search(r"default[:\s]+(\d+)", str(schema.get("description", "")), re.IGNORECASE)
    return int(m.group(1)) if m else 10000


def _absent(needed: str) -> Plan:
    return Plan((), needed=needed, via="absent")


def _file_plan(inv: Inventory, names: tuple[str, ...], sem: dict[str, Any], fallback: str, what: str,
               cwd: str | None = None) -> Plan:
    tool = inv.first(names)
    if tool is not None:
        extra: tuple[str, ...] = ()
        path = str(sem.get("path", ""))
        prop = next((p for p in ALIASES["path"] if p in tool.properties), None)
        wants_abs = prop is not None and "absolute" in str(tool.properties[prop].get("description", "")).lower()
        if wants_abs and cwd and path and not path.startswith("/"):
            # Claude Code's Read/Write/Edit demand absolute paths; the harness announced its cwd
            sem = dict(sem, path=posixpath.normpath(posixpath.join(cwd, path)))
            extra = (f"relative path {path!r} made absolute against the announced working directory {cwd}",)
        args, notes = shape_arguments(tool, sem)
        return Plan((PlannedCall(tool, args),), notes=extra + tuple(notes))
    plan = _shell_plan(inv, fallback, via="shell-fallback",
                       extra_notes=(f"no {what} tool declared; done through the shell tool",))
    return plan or _absent(f"a {what} tool ({'/'.join(names[:3])}) or a shell tool")


def _mcp_plan(inv: Inventory, action: CallTool, deferred: Sequence[str] = (),
              revealed: Sequence[ToolDecl] = ()) -> Plan:
    wanted = {_norm(f"mcp__{action.server}__{action.tool}"), _norm(f"{action.server}__{action.tool}")}
    exact = {f"mcp__{action.server}__{action.tool}", f"{action.server}__{action.tool}",
             f"mcp__{action.server}/{action.tool}"}
    # Names are compared without punctuation (harnesses rewrite it), but a declaration spelled
    # exactly as asked wins over one that only normalises alike (dispatch.create next to
    # dispatch_create: two tools, one normalised name).
    matching = [t for t in inv.tools if _norm(t.display) in wanted]
    matching.sort(key=lambda t: t.display not in exact)
    for tool in matching:
            search = inv.first(DEFERRED_SEARCH_TOOLS) if tool.deferred else None
            if search is not None and not any(_norm(t.name) in wanted for t in revealed):
                # declared with defer_loading but never loaded: the model has only its name
                return _deferred_plan(search, action, wanted, deferred, revealed, declared=tool)
            return Plan((PlannedCall(tool, dict(action.arguments)),))
    caller = inv.first(("tool_call", "call_tool"))
    if caller is not None:
        calls: list[PlannedCall] = []
        search = inv.first(("tool_search", "search_tools"))
        if search is not None:
            sargs, _ = shape_arguments(search, {"query": action.tool})
            calls.append(PlannedCall(search, sargs))
        calls.append(_dispatch(caller, f"{action.server}__{action.tool}", dict(action.arguments)))
        return Plan(tuple(calls), via="tool_search")
    search = inv.first(DEFERRED_SEARCH_TOOLS)
    if search is not None:
        return _deferred_plan(search, action, wanted, deferred, revealed)
    return _absent(f"MCP tool {action.tool!r} of server {action.server!r} "
                   f"(mcp__{action.server}__{action.tool}, namespace mcp__{action.server}, "
                   f"{action.server}__{action.tool}, tool_search/tool_call or a deferred-tool search)")


def _deferred_plan(search: ToolDecl, action: CallTool, wanted: set[str], deferred: Sequence[str],
                   revealed: Sequence[ToolDecl], declared: ToolDecl | None = None) -> Plan:
    """An MCP tool the harness defers behind its own search tool (Claude Code ``ToolSearch``):
    the request names it (a deferred list) but declares no schema, so the model must fetch it
    with the search tool first and then call it by its name.

    Also used for a tool declared with ``defer_loading`` that no search result has loaded yet
    (the Anthropic API shows the model only its name). A tool whose schema (or a
    ``tool_reference`` to it) an earlier search result already showed is called directly; otherwise
    the search runs first — with ``select:<name>`` when the search tool documents that form,
    else the name as the query — then the call. Its name is spelt as the harness announced it
    (else ``mcp__<server>__<tool>``)."""
    done = next((t for t in revealed if _norm(t.name) in wanted), None)
    if done is not None:
        return Plan((PlannedCall(done, dict(action.arguments)),), via="tool_search",
                    notes=(f"{done.name} was loaded by an earlier {search.display} result",))
    name = declared.name if declared is not None else next(
        (n for n in deferred if _norm(n) in wanted), f"mcp__{action.server}__{action.tool}")
    documented = search.description + " " + json.dumps(search.schema, sort_keys=True)
    query = f"select:{name}" if "select:" in documented else name
    sargs, _ = shape_arguments(search, {"query": query})
    if declared is not None:
        how = "declared with defer_loading, not yet loaded"
    else:
        how = "not declared, " + ("announced as deferred" if any(_norm(n) in wanted for n in deferred)
                                  else "not announced")
    return Plan((PlannedCall(search, sargs), PlannedCall(declared or ToolDecl(name), dict(action.arguments))),
                via="tool_search", notes=(f"{name} is {how}; loaded through {search.display} first",))


def _agent_tool(inv: Inventory) -> ToolDecl | None:
    tool = inv.first(AGENT_TOOLS)
    if tool is not None:
        return tool
    for t in inv.tools:  # Codex: multi_agent_v1/spawn_agent
        if t.namespace and t.name == "spawn_agent":
            return t
    return None


def _dispatch(caller: ToolDecl, name: str, arguments: dict[str, Any]) -> PlannedCall:
    """A call of ``name`` through a dispatcher tool (``tool_call {id, args}``, keys as it declares)."""
    props = caller.properties
    id_key = next((p for p in ALIASES["tool_id"] if p in props), "id")
    args_key = next((p for p in ALIASES["tool_args"] if p in props), "args")
    return PlannedCall(caller, {id_key: name, args_key: arguments}, target=name, target_arguments=arguments)


def _describe_first(inv: Inventory, name: str) -> list[PlannedCall]:
    """``tool_describe {id: name}`` when the harness declares a describe tool (the schema, as an
    agent learns it before a dispatched call), else nothing."""
    describe = inv.first(DESCRIBE_TOOLS)
    if describe is None:
        return []
    key = next((p for p in ALIASES["tool_id"] if p in describe.properties), "id")
    return [PlannedCall(describe, {key: name})]


def _deferred_spawn_plan(inv: Inventory, action: SpawnSubagent, deferred: Sequence[str]) -> Plan | None:
    """A sub-agent tool the harness defers behind its dispatcher (OpenClaw 2026.9.6:
    ``sessions_spawn`` is listed under "Available deferred-schema tools", reachable through
    ``tool_describe``/``tool_call``). ``None`` without a dispatcher, or when the request's deferred
    list is known and names no sub-agent tool.

    The calls: ``tool_describe {id}`` (the schema, as an agent learns it), then
    ``tool_call {id, args}`` with the prompt as ``task`` and the description as ``label``. A
    foreground spawn then waits the harness's way: ``sessions_yield`` (the parent's model turn ends
    until the children settle; OpenClaw resumes the parent with their completion) and, in the
    resumed turn, ``tool_call {id: "subagents", args: {action: "list"}}``, whose result (the
    child's status and reply) is the step's observation."""
    caller = inv.first(DISPATCH_TOOLS)
    if caller is None:
        return None
    known = [n for n in deferred if n in AGENT_TOOLS]
    if deferred and not known:
        return None
    name = known[0] if known else "sessions_spawn"
    calls = _describe_first(inv, name)
    args, _ = fill_object(SESSIONS_SPAWN_SCHEMA, {"prompt": action.prompt, "description": action.description})
    calls.append(_dispatch(caller, name, args))
    notes = [f"{name} is deferred behind {caller.display}; "
             + (f"its schema loaded with {calls[0].tool.display} first" if len(calls) > 1 else "called by name")]
    wait = inv.first(YIELD_TOOLS)
    if not action.background and wait is not None:
        calls.append(PlannedCall(wait, {}))
        calls.append(_dispatch(caller, "subagents", {"action": "list"}))
        notes.append(f"foreground: waits with {wait.display}, then reads the child's result with subagents list")
    elif not action.background:
        notes.append("foreground requested but no sessions_yield declared: the spawn result is the observation")
    return Plan(tuple(calls), via="tool_search", notes=tuple(notes))


#: Open placeholders for a free-text question put to a multiple-choice ask tool: an ideal agent
#: that does not know the answer offers no guesses, and these tools always let the user type
#: their own answer instead (Claude Code's "Other").
OPEN_CHOICES = (("Type the answer", "None of these: answer in your own words"),
                ("Not known yet", "I cannot say yet"))


def _option_items(options: dict[str, Any], labels: Sequence[str]) -> list[Any] | None:
    """``labels`` in the form of a ``questions[].options`` schema, or None when they do not fit it."""
    low, high = int(options.get("minItems", 0) or 0), options.get("maxItems")
    if len(labels) < low or (isinstance(high, int) and len(labels) > high):
        return None
    items = options.get("items")
    if not isinstance(items, dict):
        items = {}
    if items.get("type") == "string":
        return list(labels)
    required = items.get("required")
    if not isinstance(required, list):
        required = []
    return [{"label": label, **({"description": label} if "description" in required else {})} for label in labels]


def listed(question: str, options: Sequence[str]) -> str:
    """The question with its options in its text (``"<question> Options: <a>; <b>"``), for a tool
    that cannot carry them as options."""
    return f"{question} Options: {'; '.join(options)}" if options else question


def ask_arguments(tool: ToolDecl, question: str, options: Sequence[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """Arguments asking ``question`` (offering ``options``) through ``tool``: a multiple-choice
    ``{questions: [...]}`` tool (Claude Code ``AskUserQuestion``, Codex ``request_user_input``,
    DeepSeek ``ask_user_question``) gets one question in its own form - the options as the tool's
    options where its schema takes them, else open placeholders where its schema requires options;
    any other tool the generic fill, the options listed in the question's text."""
    questions = (tool.schema.get("properties") or {}).get("questions")
    item = questions.get("items") if isinstance(questions, dict) else None
    props = item.get("properties") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(props, dict) or "question" not in props:
        return shape_arguments(tool, {"question": listed(question, options)})
    q: dict[str, Any] = {"question": listed(question, options)}
    notes: list[str] = []
    if "id" in props:
        q["id"] = "q1"
    if "header" in props:
        limit = props["header"].get("maxLength", 12) if isinstance(props["header"], dict) else 12
        q["header"] = "Question"[:limit]
    field = props.get("options")
    choices = _option_items(field, options) if isinstance(field, dict) and len(options) >= 2 else None
    if choices is not None:
        q["question"], q["options"] = question, choices
        notes.append(f"multiple-choice question: its {len(choices)} options are offered as {tool.display}'s options")
        if "multi_select" in props:
            q["multi_select"] = False
    elif isinstance(field, dict):
        need = max(int(field.get("minItems", 0) or 0), 2 if "options" in (item.get("required") or []) else 0)
        if need:
            kind = (field.get("items") or {}).get("type")
            q["options"] = [{"label": label, "description": text} if kind != "string" else label
                            for label, text in OPEN_CHOICES[:need]]
            if need > len(OPEN_CHOICES):
                q["options"] += [f"Option {i + 1}" for i in range(len(OPEN_CHOICES), need)]
            notes.append(f"free-text question: {tool.display} requires {need}+ options, so open placeholders "
                         "were offered and the user answers in their own words")
    if "multiSelect" in props:
        q["multiSelect"] = False
    return {"questions": [q]}, notes


def _ask_tool(inv: Inventory) -> ToolDecl | None:
    tool = inv.first(ASK_TOOLS)
    if tool is not None:
        return tool
    for t in inv.tools:
        if re.search(r"ask[_-]?(the[_-]?)?user|user[_-]?input|clarif", t.name, re.IGNORECASE):
            return t
    return None


def _deferred_ask_plan(inv: Inventory, action: AskUser, deferred: Sequence[str]) -> Plan | None:
    """An ask-user tool the harness defers behind its dispatcher (OpenClaw 2026.9.6: ``ask_user``
    is listed under "Available deferred-schema tools", reachable through ``tool_describe`` /
    ``tool_call``). Only when the request's deferred list names one (else ``None``: no ask tool).

    The calls: ``tool_describe {id}`` (the schema, as an agent learns it), then ``tool_call {id,
    args}`` asking the question in the tool's own form (:func:`ask_arguments`; OpenClaw wants 2-4
    options per question, so a free-text question offers the open placeholders and the user
    answers in their own words). No wait bound is set: the harness's default applies."""
    caller = inv.first(DISPATCH_TOOLS)
    known = [n for n in deferred if n in ASK_TOOLS]
    if caller is None or not known:
        return None
    name = known[0]
    calls = _describe_first(inv, name)
    args, notes = ask_arguments(ToolDecl(name, schema=OPENCLAW_ASK_USER_SCHEMA), action.question, action.options)
    calls.append(_dispatch(caller, name, args))
    notes.insert(0, f"{name} is deferred behind {caller.display}; "
                 + (f"its schema loaded with {calls[0].tool.display} first" if len(calls) > 1 else "called by name"))
    return Plan(tuple(calls), via="tool_search", notes=tuple(notes))


def plan_action(action: Action, inv: Inventory, cwd: str | None = None, *, deferred: Sequence[str] = (),
                revealed: Sequence[ToolDecl] = ()) -> Plan:
    """Map ``action`` to the calls this request's declarations allow (or an absent capability).

    ``cwd`` (the working directory the harness announced) turns relative paths absolute for
    file tools whose schema demands absolute paths. ``deferred`` (tool names the request
    announces as loadable through a search tool) and ``revealed`` (tools an earlier search
    result gave the schema of) only matter when an MCP tool is not declared and a
    deferred-tool search tool is (:data:`DEFERRED_SEARCH_TOOLS`), or when no ask-user tool is
    declared and the deferred list names one behind a dispatcher (OpenClaw ``ask_user``).
    """
    if isinstance(action, Shell):
        return _shell_plan(inv, action.command, timeout_s=action.timeout_s, tty=action.tty) or _absent(
            f"a shell tool ({'/'.join(SHELL_TOOLS[:5])})")
    if isinstance(action, ReadFile):
        return _file_plan(inv, READ_TOOLS, {"path": action.path}, shell_read(action.path), "file-read", cwd)
    if isinstance(action, WriteFile):
        return _file_plan(inv, WRITE_TOOLS, {"path": action.path, "content": action.content},
                          shell_write(action.path, action.content), "file-write", cwd)
    if isinstance(action, EditFile):
        return _file_plan(inv, EDIT_TOOLS, {"path": action.path, "old": action.old, "new": action.new},
                          shell_edit(action.path, action.old, action.new), "file-edit", cwd)
    if isinstance(action, CallTool):
        return _mcp_plan(inv, action, deferred, revealed)
    if isinstance(action, SpawnSubagent):
        tool = _agent_tool(inv)
        if tool is None:
            plan = _deferred_spawn_plan(inv, action, deferred)
            return plan or _absent("a sub-agent tool (Agent/Task, spawn_agent, sessions_spawn, or sessions_spawn "
                                   "behind tool_call)")
        sem = {"description": action.description, "prompt": action.prompt, "background": action.background}
        args, notes = shape_arguments(tool, sem)
        calls = [PlannedCall(tool, args)]
        kept = [n for n in notes if not n.startswith("background")]
        wait = inv.first(YIELD_TOOLS)
        if tool.name in YIELDING_SPAWN_TOOLS and not action.background and wait is not None:
            # OpenClaw 2026.6.9 declares sessions_spawn, sessions_yield and subagents directly: the
            # spawn only accepts the child, so a foreground spawn waits the harness's way (as the
            # deferred plan does) and reads the child's result with the status tool.
            calls.append(PlannedCall(wait, {}))
            status = inv.first(STATUS_TOOLS)
            if status is not None:
                calls.append(PlannedCall(status, {"action": "list"}))
            kept.append(f"foreground: waits with {wait.display}"
                        + (f", then reads the child's result with {status.display} list" if status else ""))
        return Plan(tuple(calls), notes=tuple(kept))
    if isinstance(action, AskUser):
        tool = _ask_tool(inv)
        if tool is None:
            plan = _deferred_ask_plan(inv, action, deferred)
            return plan or _absent("an ask-user tool (AskUserQuestion, request_user_input, ask_user, or ask_user "
                                   "named as deferred behind tool_call)")
        args, notes = ask_arguments(tool, action.question, action.options)
        return Plan((PlannedCall(tool, args),), notes=tuple(notes))
    if isinstance(action, Wait):
        return _shell_plan(inv, f"sleep {_seconds(action.seconds)}",
                           extra_notes=("wait realised as sleep through the shell tool",)) or _absent(
            "a shell tool to wait with")
    if isinstance(action, NativeTool):
        tool = inv.by_display(action.name) or inv.first((action.name,))
        if tool is None:
            return _absent(f"the native tool {action.name!r}")
        return Plan((PlannedCall(tool, dict(action.arguments)),))
    raise TypeError(f"no mapping for action {action!r}")
