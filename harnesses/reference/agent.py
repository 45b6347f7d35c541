"""The agent loop of the reference harness: one user turn of the main principal, its tools,
its sub-agents and its final completion record.

Principals: the main agent is ``main``; each sub-agent gets ``child-<n>`` (unique
within the session) and a fresh context holding only its system prompt and the
delegated prompt. A foreground child's final text is the parent's tool result;
a background child is reported ``pending`` until it finishes, and its result is
delivered to the parent as a user-role notification before the parent's next
model request (the harness waits for pending children, up to the turn deadline,
before it accepts the parent's final answer).

Background jobs (only with ``--background-jobs``, a task listing ``background``): ``shell`` with
``run_in_background`` starts a job and returns its id; ``job_status`` reports it running or ended
with its exit code and output; a ``job`` record marks its start and its end (or its kill at the end
of the turn, when every job still running is ended).

Skills (only when the workspace has ``skills/<name>/SKILL.md``): a new session's system prompt
lists each skill's name and description, and the ``skill`` tool returns a skill's body (SKILL.md
without its front matter) and lists its other files.

Compaction (only with ``--context-window``, a task with ``budgets.context_tokens``): once a main
response reports a prompt of :data:`COMPACT_AT` of the window or more, the next request is a summary
request without tools; the history becomes the system prompt, the user's own messages verbatim and
the summary, and a ``compaction`` record says so. Each turn is one process, so the check is made
within a turn (a prompt size reported at the end of a turn does not carry over to the next).

Every model request carries the headers ``x-tt-session-id``, ``x-tt-principal-id``
(``main`` or ``child-<n>``) and, for a child, ``x-tt-parent-principal-id``, so a
model server can tell whose conversation a request advances.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnesses.reference import tools as T
from harnesses.reference.ask_user import AskUserChannel, AskUserError
from harnesses.reference.chat import ChatClient, ChatError, ChatResponse
from harnesses.reference.mcp_tools import PREFIX, McpBridge, find_receipts
from harnesses.reference.records import NativeLog
from tracetrial.redact import Redactor

MAIN = "main"
#: First line of the user-role message that hands finished background children's results to the parent.
NOTIFICATION = "[sub-agent notification]"


#: Token counts the completion record sums over the turn's answered model requests (Chat Completions
#: ``usage`` names; ``cached_tokens`` and ``reasoning_tokens`` come from the ``*_details`` objects).
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens")


def usage_counts(usage: dict[str, Any]) -> dict[str, int | None]:
    """The :data:`USAGE_FIELDS` of one response's ``usage`` (``None`` where the provider gave none)."""
    details = {"cached_tokens": usage.get("prompt_tokens_details"),
               "reasoning_tokens": usage.get("completion_tokens_details")}
    out: dict[str, int | None] = {}
    for name in USAGE_FIELDS:
        src = details.get(name, usage)
        value = src.get(name) if isinstance(src, dict) else None
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out


#: Completion statuses of a turn that stopped before its work was done (budget, step limit, deadline,
#: children still running) — what ``hide_unfinished`` reports as ``completed``.
UNFINISHED = ("incomplete", "budget_exhausted", "deadline")


#: Share of the context window a response's prompt size must reach before the history is compacted.
COMPACT_AT = 0.8
#: The user message of the summary request (no tools are declared with it).
COMPACT_PROMPT = ("Context checkpoint compaction: summarize the conversation so far for your own "
                  "continuation - the task, every constraint and decision, the results obtained (ids, "
                  "values, file names) and what is left to do. Your summary replaces the earlier "
                  "messages; the user's messages are kept as they were.")
#: First line of the message that carries the summary in a compacted history.
SUMMARY_HEAD = "[context compacted] The earlier conversation was replaced by this summary:"
#: Messages of the newest history the ``window_compaction`` defect keeps instead of a summary.
WINDOW_KEEP = 4


def compacted_history(messages: list[dict[str, Any]], summary: str, *, first_only: bool) -> list[dict[str, Any]]:
    """The history after a compaction: the system prompt, the user's own messages in order (only the
    first with ``stale_goal``), then the summary as a user-role message."""
    users = [m for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)
             and not m["content"].startswith((NOTIFICATION, SUMMARY_HEAD))]
    if first_only:
        users = users[:1]  # the defect: a revised goal (a later user message) does not survive
    system = [m for m in messages[:1] if m.get("role") == "system"]
    return [*system, *({"role": "user", "content": m["content"]} for m in users),
            {"role": "user", "content": f"{SUMMARY_HEAD}\n{summary}"}]


def window_history(messages: list[dict[str, Any]], keep: int = WINDOW_KEEP) -> list[dict[str, Any]]:
    """The ``window_compaction`` defect: the system prompt and the last ``keep`` messages (moved back to
    the assistant message whose tool calls the first kept tool results answer), nothing else."""
    start = max(len(messages) - keep, 1)
    while start > 1 and messages[start].get("role") == "tool":
        start -= 1
    system = [m for m in messages[:1] if m.get("role") == "system"]
    return [*system, *messages[start:]]


class _Stop(Exception):
    """The loop must stop: ``status`` goes to the completion record."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class AgentConfig:
    workspace: Path
    model: str
    deadline: float
    """``time.monotonic()`` value after which no new model request is sent."""
    shell_env: dict[str, str]
    deny: list[T.DenyRule] = field(default_factory=list)
    mutant: str | None = None
    max_model_calls: int | None = None
    max_steps: int = 60
    ask_user: AskUserChannel | None = None
    redactor: Redactor | None = None
    """Masks credentials in everything shown to the model (``None`` with ``leak_secret``)."""
    turn: int = 1
    background_jobs: bool = False
    """Declare ``shell`` with ``run_in_background`` and the ``job_status`` tool (the task needs jobs)."""
    tty: bool = False
    """Declare the shell's ``tty`` option (the task lists ``tty``)."""
    confine: T.Confinement | None = None
    """The task's OS-level command policy (protected paths, no network), ``None`` when it has none."""
    context_window: int | None = None
    """The model's context window in tokens: the main history is compacted once a response reports a
    prompt of :data:`COMPACT_AT` of it or more (``None``: never compacted)."""


@dataclass
class Child:
    id: str
    background: bool
    task: asyncio.Task[tuple[str, str]] | None = None
    status: str = "pending"
    final_text: str = ""
    delivered: bool = False


@dataclass
class Principal:
    id: str
    parent: str | None = None


SPAWN_TOOL = {"type": "function", "function": {
    "name": "spawn_subagent",
    "description": "Delegate a task to a sub-agent with a fresh context that holds only your prompt. "
                   "Foreground: returns the sub-agent's final answer. background=true: returns at once "
                   "(status pending); the result is delivered to you when the sub-agent finishes.",
    "parameters": {"type": "object", "properties": {
        "description": {"type": "string", "description": "A short label for the task."},
        "prompt": {"type": "string", "description": "Everything the sub-agent needs to know."},
        "background": {"type": "boolean"}}, "required": ["prompt"], "additionalProperties": False}}}
STATUS_TOOL = {"type": "function", "function": {
    "name": "subagent_status",
    "description": "Status of background sub-agents; finished ones include their result. wait_s waits up "
                   "to that many seconds for the pending ones.",
    "parameters": {"type": "object", "properties": {"wait_s": {"type": "number"}},
                   "additionalProperties": False}}}
ASK_TOOL = {"type": "function", "function": {
    "name": "ask_user",
    "description": "Ask the user a question and wait for the answer (use it for facts only the user knows).",
    "parameters": {"type": "object", "properties": {
        "question": {"type": "string"}, "options": {"type": "array", "items": {"type": "string"}}},
        "required": ["question"], "additionalProperties": False}}}


class Agent:
    """Runs one user turn against the session's history (``messages`` is mutated in place)."""

    def __init__(self, cfg: AgentConfig, log: NativeLog, chat: ChatClient, mcp: McpBridge | None,
                 *, session_id: str, next_child: int, save: Callable[[], None]):
        self.cfg = cfg
        self.log = log
        self.chat = chat
        self.mcp = mcp
        self.session_id = session_id
        self.next_child = next_child
        self.save = save
        self.model_calls = 0
        self.tool_calls = 0
        self.failed: list[str] = []
        self.evidence: list[str] = []
        self.receipts: list[dict[str, Any]] = []
        self.children: dict[str, Child] = {}
        self._requests = 0
        self.last_request_id = ""
        self._done = asyncio.Event()
        self._history: list[dict[str, Any]] = []
        self._results_delivered = 0
        self._usage: dict[str, int | None] = dict.fromkeys(USAGE_FIELDS)
        self._usage_responses = 0
        self._no_usage_responses = 0
        self._read_cache: dict[str, dict[str, T.ToolOutcome]] = {}  # only ``stale_read_cache`` fills it
        self._jobs: dict[str, T.Job] = {}
        self._skills = T.find_skills(cfg.workspace)  # the workspace's skills (none: no skill tool)
        self._prompt_tokens = 0  # the main principal's last reported prompt size (compaction)
        # only ``persist_shell_cwd`` keeps a shell state (the faithful shell starts every call afresh)
        self._shell_state = T.ShellState() if cfg.mutant == "persist_shell_cwd" else None

    # ------------------------------------------------------------------ helpers
    def _mask(self, text: str) -> str:
        return self.cfg.redactor.text(text) if self.cfg.redactor is not None else text

    def _write(self, type_: Any, data: dict[str, Any], p: Principal) -> None:
        self.log.write(type_, data, principal_id=p.id, parent_principal_id=p.parent)

    def _tools(self, p: Principal) -> list[dict[str, Any]]:
        # ``hide_mcp_tool``: on a resumed turn the MCP tools are left out of the declarations.
        hidden = self.cfg.mutant == "hide_mcp_tool" and self.cfg.turn > 1
        decls = list(T.BUILTIN_TOOLS.values())
        if self.cfg.background_jobs:
            decls = [T.SHELL_WITH_JOBS if d["function"]["name"] == "shell" else d for d in decls]
            decls.append(T.JOB_STATUS_TOOL)
        if self.cfg.tty:
            decls = [T.with_tty(d) if d["function"]["name"] == "shell" else d for d in decls]
        if self.cfg.confine is not None and self.cfg.confine.active:
            decls = [T.with_policy(d, self.cfg.confine) if d["function"]["name"] == "shell" else d for d in decls]
        if self._skills:
            decls.append(T.SKILL_TOOL)
        decls += self.mcp.declarations() if self.mcp and not hidden else []
        if p.parent is None:
            decls += [SPAWN_TOOL, STATUS_TOOL] + ([ASK_TOOL] if self.cfg.ask_user else [])
        return decls

    def _pending(self) -> list[str]:
        return [c.id for c in self.children.values() if c.background and c.status == "pending"]

    # ------------------------------------------------------------------ model requests
    async def _request(self, p: Principal, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None = None) -> ChatResponse:
        if (self.cfg.max_model_calls is not None and self.model_calls >= self.cfg.max_model_calls
                and self.cfg.mutant != "ignore_model_budget"):  # the defect: the budget is never checked
            msg = f"model-call budget of {self.cfg.max_model_calls} used up; stopping before another request"
            self._write("error", {"kind": "budget", "message": msg}, p)
            raise _Stop("budget_exhausted", msg)
        remaining = self.cfg.deadline - time.monotonic()
        if remaining <= 0:
            self._write("error", {"kind": "deadline", "message": "turn deadline reached"}, p)
            raise _Stop("deadline", "the turn deadline was reached before the work finished")
        if self.mcp is not None and self.cfg.mutant != "stale_tool_list":  # the defect: list changes ignored
            await self.mcp.refresh()
        tools = self._tools(p) if tools is None else tools
        body = self.chat.body(self.cfg.model, messages, tools)
        self._requests += 1
        request_id = f"req-{self.log.turn}-{self._requests}"
        params = {k: v for k, v in body.items() if k not in ("messages", "tools", "model")}
        self._write("request", {"request_id": request_id, "model": self.cfg.model, "url": self.chat.url,
                                "messages": messages, "tools": tools, "params": params}, p)
        headers = {"x-tt-session-id": self.session_id, "x-tt-principal-id": p.id}
        if p.parent:
            headers["x-tt-parent-principal-id"] = p.parent
        self.model_calls += 1
        try:
            resp = await self.chat.complete(body, headers, timeout_s=max(remaining, 1.0))
        except ChatError as exc:
            if self.cfg.mutant == "swallow_provider_error":
                # The defect: the failed request is taken for an empty final answer (no error record,
                # the turn "completed", exit 0).
                raise _Stop("completed", "") from exc
            self._write("error", {"kind": exc.kind, "message": str(exc), "request_id": request_id,
                                  "http_status": exc.http_status}, p)
            raise _Stop("error", f"model request failed: {exc}") from exc
        self._write("response", {"request_id": request_id, **resp.record()}, p)
        self._count_usage(resp.usage)
        if p.parent is None and isinstance(resp.usage, dict):
            prompt = usage_counts(resp.usage)["prompt_tokens"]
            self._prompt_tokens = prompt if prompt is not None else self._prompt_tokens
        self.last_request_id = request_id
        return resp

    def _count_usage(self, usage: dict[str, Any] | None) -> None:
        """Add one answered request's usage to the turn's totals (every principal's requests)."""
        if not isinstance(usage, dict):
            self._no_usage_responses += 1
            return
        self._usage_responses += 1
        for name, value in usage_counts(usage).items():
            if value is None:
                continue
            if self.cfg.mutant == "misreport_usage":
                self._usage[name] = value  # the defect: each response's usage replaces the total
            else:
                self._usage[name] = (self._usage[name] or 0) + value

    def usage(self) -> dict[str, Any] | None:
        """The turn's token usage as the completion record states it (``None``: no response reported any)."""
        if not self._usage_responses:
            return None
        return {**self._usage, "responses_with_usage": self._usage_responses,
                "responses_without_usage": self._no_usage_responses}

    # ------------------------------------------------------------------ the loop
    async def loop(self, p: Principal, messages: list[dict[str, Any]]) -> tuple[str, str]:
        """Run until a final answer; returns ``(status, final_text)``."""
        main = p.parent is None
        if main:
            self._history = messages  # what ``leak_parent_context`` hands a child
        steps = 0
        after_final = False  # the parent already answered and is reactivated by a notification
        try:
            while True:
                if main:
                    self._deliver_finished(messages, after_final)
                    after_final = False
                    await self._maybe_compact(p, messages)
                resp = await self._request(p, messages)
                assistant: dict[str, Any] = {"role": "assistant", "content": resp.content or None}
                calls = [(c.id or f"ref_{uuid.uuid4().hex[:12]}", c.id is None, c) for c in resp.tool_calls]
                if calls:
                    assistant["tool_calls"] = [{"id": cid, "type": "function", "function": {
                        "name": c.name, "arguments": c.arguments or "{}"}} for cid, _, c in calls]
                messages.append(assistant)
                if main:
                    self.save()
                if calls:
                    for cid, generated, c in calls:
                        content = await self._run_tool(p, cid, generated, c.name, c.arguments)
                        messages.append({"role": "tool", "tool_call_id": cid, "content": content})
                        if main:
                            self.save()
                    steps += 1
                    if steps >= self.cfg.max_steps:
                        raise _Stop("incomplete", f"step limit of {self.cfg.max_steps} tool rounds reached")
                    continue
                if main and self._pending():
                    if await self._wait_children(self.cfg.deadline - time.monotonic() - 2.0):
                        after_final = True
                        continue
                    return "incomplete", resp.content
                return "completed", resp.content
        except _Stop as stop:
            return stop.status, str(stop)

    # ------------------------------------------------------------------ compaction
    async def _maybe_compact(self, p: Principal, messages: list[dict[str, Any]]) -> None:
        """Compact the main history when the last response reported a prompt of :data:`COMPACT_AT` of
        the context window or more: a summary request (no tools), then the history is replaced by
        :func:`compacted_history` and a ``compaction`` record says so."""
        window = self.cfg.context_window
        if window is None or self._prompt_tokens < COMPACT_AT * window:
            return
        prompt_tokens, self._prompt_tokens = self._prompt_tokens, 0
        before = len(messages)
        if self.cfg.mutant == "window_compaction":
            # The defect: the oldest messages are dropped without a summary, a notice or a record.
            messages[:] = window_history(messages)
            self.save()
            return
        resp = await self._request(p, [*messages, {"role": "user", "content": COMPACT_PROMPT}], tools=[])
        summary = resp.content or ""
        new = compacted_history(messages, summary, first_only=self.cfg.mutant == "stale_goal")
        self._write("compaction", {"trigger": "auto", "prompt_tokens": prompt_tokens, "context_window": window,
                                   "messages_before": before, "messages_after": len(new),
                                   "user_messages_kept": len(new) - 2 if new and new[0].get("role") == "system"
                                   else len(new) - 1, "request_id": self.last_request_id, "summary": summary}, p)
        messages[:] = new
        self.save()

    # ------------------------------------------------------------------ background jobs
    def _start_job(self, p: Principal, call_id: str, command: str) -> T.ToolOutcome:
        job_id = f"job-{len(self._jobs) + 1}"
        job = T.start_job(command, cwd=self.cfg.workspace, env=self.cfg.shell_env, job_id=job_id, call_id=call_id,
                          confine=self.cfg.confine)
        if isinstance(job, T.ToolOutcome):
            return job
        self._jobs[job_id] = job
        self._write("job", {"action": "start", "job_id": job_id, "call_id": call_id, "command": command,
                            "pid": job.proc.pid}, p)
        return T.ToolOutcome(f"Started background job {job_id} (pid {job.proc.pid}). job_status reports whether "
                             "it is still running and, once it has ended, its exit code and output.",
                             status="started")

    def _record_job_end(self, job: T.Job, code: int | None, p: Principal) -> None:
        if job.recorded or code is None:
            return
        job.recorded = True
        self._write("job", {"action": "exit", "job_id": job.id, "call_id": job.call_id, "exit_code": code,
                            "duration_s": job.duration_s}, p)

    async def _job_status(self, p: Principal, args: dict[str, Any]) -> T.ToolOutcome:
        wanted = args.get("job_id")
        if wanted is not None and str(wanted) not in self._jobs:
            known = ", ".join(self._jobs) or "none"
            return T.ToolOutcome(f"job_status: no job {wanted!r} (jobs of this turn: {known})", is_error=True,
                                 status="error")
        jobs = [self._jobs[str(wanted)]] if wanted is not None else list(self._jobs.values())
        if not jobs:
            return T.ToolOutcome("No background jobs.")
        wait_s = float(args.get("wait_s") or 0)
        end = time.monotonic() + min(max(wait_s, 0.0), max(self.cfg.deadline - time.monotonic() - 2.0, 0.0))
        while any(j.poll() is None for j in jobs) and time.monotonic() < end:
            await asyncio.sleep(0.1)
        texts, codes = [], []
        for job in jobs:
            text, code = T.job_report(job, mutant=self.cfg.mutant)
            self._record_job_end(job, code, p)
            texts.append(text)
            codes.append(code)
        return T.ToolOutcome("\n\n".join(texts), exit_code=codes[0] if len(jobs) == 1 else None,
                             status="ok" if all(c is not None for c in codes) else "running")

    def end_jobs(self) -> list[str]:
        """Record how each job ended (one still running is about to be killed with the turn); ids killed."""
        killed = []
        for job in self._jobs.values():
            code = job.poll()
            if code is not None:
                self._record_job_end(job, 0 if self.cfg.mutant == "hide_job_exit" else code, Principal(MAIN))
            elif not job.recorded:
                job.recorded = True
                killed.append(job.id)
                self._write("job", {"action": "killed", "job_id": job.id, "call_id": job.call_id,
                                    "reason": "still running at the end of the turn"}, Principal(MAIN))
        return killed

    # ------------------------------------------------------------------ tools
    async def _run_tool(self, p: Principal, call_id: str, generated: bool, name: str, raw_args: str) -> str:
        self.tool_calls += 1
        # The principal a tool call and its result are recorded under (the ``misattribute_child``
        # defect records a child's under the main principal; everything else still runs as the child).
        rp = Principal(MAIN) if self.cfg.mutant == "misattribute_child" else p
        try:
            args = json.loads(raw_args) if raw_args.strip() else {}
            bad = None if isinstance(args, dict) else "arguments must be a JSON object"
        except ValueError as exc:
            args, bad = raw_args, f"invalid JSON arguments: {exc}"
        self._write("tool_call", {"call_id": call_id, "name": name, "arguments": args,
                                  "id_generated": generated}, rp)
        if bad:
            out = T.ToolOutcome(f"{name}: {bad}", is_error=True, status="error")
        else:
            out = await self._dispatch(p, call_id, name, args)
        out.content = self._mask(out.content)
        self._write("tool_result", {"call_id": call_id, "name": name, **out.record()}, rp)
        if out.is_error:
            self.failed.append(call_id)
        else:
            self.evidence.append(call_id)
            if name.startswith(PREFIX):
                try:
                    payload = json.loads(out.content)
                except ValueError:
                    payload = None
                for key, value in find_receipts([out.structured_content, payload]):
                    entry = {"call_id": call_id, "tool": name, "key": key, "value": value}
                    if entry not in self.receipts:
                        self.receipts.append(entry)
        return out.content

    async def _dispatch(self, p: Principal, call_id: str, name: str, args: dict[str, Any]) -> T.ToolOutcome:
        out = await self._dispatch_tool(p, call_id, name, args)
        for kind, reason in out.policy_hits:
            # the command ran and ran into the OS-level policy (EROFS, no network): recorded as such
            self._write("policy", {"call_id": call_id, "tool_name": name, "policy_kind": kind, "decision": "deny",
                                   "reason": reason, "reason_visible_to_model": True, "execution_started": True}, p)
        return out

    def _refuse(self, p: Principal, call_id: str, name: str, kind: str, rule: str, reason: str) -> T.ToolOutcome:
        """Refuse a call before it runs: a ``policy`` record and a ``denied`` result."""
        self._write("policy", {"call_id": call_id, "tool_name": name, "policy_kind": kind,
                               "decision": "deny", "rule": rule, "reason": reason,
                               "reason_visible_to_model": True, "execution_started": False}, p)
        return T.ToolOutcome(f"Permission denied: {reason}; it was not run.", is_error=True, status="denied")

    async def _dispatch_tool(self, p: Principal, call_id: str, name: str, args: dict[str, Any]) -> T.ToolOutcome:
        rule = T.find_denial(self.cfg.deny, name, args, literal=self.cfg.mutant == "literal_deny_match")
        if rule is not None and self.cfg.mutant != "execute_denied":
            reason = f"{name} call matches deny rule {rule.text!r} of this task's permission policy"
            self._write("policy", {"call_id": call_id, "tool_name": name, "policy_kind": "permission",
                                   "decision": "deny", "rule": rule.text, "reason": reason,
                                   "reason_visible_to_model": True, "execution_started": False}, p)
            return T.ToolOutcome(f"Permission denied: {reason}; it was not run.", is_error=True, status="denied")
        ws = self.cfg.workspace
        confine = self.cfg.confine
        if confine is not None and name == "shell":
            guarded = confine.refused_by_guard(str(args.get("command", "")))
            if guarded is not None:  # only the ``unguarded_cleanup`` defect guards by the command's text
                return self._refuse(p, call_id, name, "protected_path", guarded,
                                    f"the command would change {guarded}, which this task protects")
        if confine is not None and name in ("write_file", "edit_file"):
            hit = confine.file_refusal(T.resolve(ws, str(args.get("path", ""))))
            if hit is not None:
                return self._refuse(p, call_id, name, "protected_path", hit,
                                    f"{args.get('path')} is in {hit}, which this task protects (read-only)")
        if name == "shell" and self.cfg.background_jobs and args.get("run_in_background") is True:
            return self._start_job(p, call_id, str(args.get("command", "")))
        if name == "skill" and self._skills:
            return await asyncio.to_thread(T.load_skill, self._skills, args, self.cfg.mutant)
        if name == "job_status" and self.cfg.background_jobs:
            return await self._job_status(p, args)
        if name == "shell":
            timeout = min(float(args.get("timeout_s") or T.DEFAULT_SHELL_TIMEOUT_S), T.MAX_SHELL_TIMEOUT_S)
            if self.cfg.mutant == "ignore_requested_timeout":
                timeout = T.DEFAULT_SHELL_TIMEOUT_S  # the defect: the model's timeout_s is dropped
            if self.cfg.tty and args.get("tty") is True:
                return await asyncio.to_thread(T.run_shell_tty, str(args.get("command", "")), cwd=ws,
                                               env=self.cfg.shell_env, timeout_s=timeout, call_id=call_id,
                                               mutant=self.cfg.mutant, confine=confine)
            return await asyncio.to_thread(T.run_shell, str(args.get("command", "")), cwd=ws,
                                           env=self.cfg.shell_env, timeout_s=timeout, call_id=call_id,
                                           mutant=self.cfg.mutant, state=self._shell_state, confine=confine)
        if name == "read_file":
            if self.cfg.mutant == "stale_read_cache":
                return await self._cached_read(ws, args)
            return await asyncio.to_thread(T.read_file, ws, args, self.cfg.mutant)
        if name in ("write_file", "edit_file"):
            self._read_cache.pop(str(T.resolve(ws, str(args.get("path", "")))), None)
            if name == "write_file":
                return await asyncio.to_thread(T.write_file, ws, args, self.cfg.mutant)
            return await asyncio.to_thread(T.edit_file, ws, args)
        if self.mcp is not None and name in self.mcp.tools:
            return await self.mcp.call(name, args, self.cfg.mutant)
        if p.parent is None and name == "spawn_subagent":
            return await self._spawn(p, args)
        if p.parent is None and name == "subagent_status":
            return await self._status(p, args)
        if p.parent is None and name == "ask_user" and self.cfg.ask_user is not None:
            return await self._ask(p, call_id, args)
        return T.ToolOutcome(f"Unknown tool {name!r}; declared tools: "
                             f"{', '.join(t['function']['name'] for t in self._tools(p))}", is_error=True,
                             status="error")

    async def _cached_read(self, ws: Path, args: dict[str, Any]) -> T.ToolOutcome:
        """The ``stale_read_cache`` defect: a file read once is served from memory afterwards; only the
        harness's own write_file/edit_file of that path invalidate it, so a change made on disk by
        anything else (a shell command, a sub-process) goes unseen, without a notice."""
        key = str(T.resolve(ws, str(args.get("path", ""))))
        part = json.dumps([args.get("offset"), args.get("limit")])
        cached = self._read_cache.get(key, {}).get(part)
        if cached is not None:
            return dataclasses.replace(cached)
        out = await asyncio.to_thread(T.read_file, ws, args, self.cfg.mutant)
        if not out.is_error:
            self._read_cache.setdefault(key, {})[part] = dataclasses.replace(out)
        return out

    async def _ask(self, p: Principal, call_id: str, args: dict[str, Any]) -> T.ToolOutcome:
        assert self.cfg.ask_user is not None
        question, options = str(args.get("question", "")), args.get("options")
        try:
            answer = await asyncio.to_thread(self.cfg.ask_user.answer, question, options, call_id=call_id,
                                             turn=self.log.turn)
        except AskUserError as exc:
            self._write("ask_user", {"call_id": call_id, "question": question, "answer": None,
                                     "source": self.cfg.ask_user.source, "error": str(exc)}, p)
            return T.ToolOutcome(f"ask_user failed: {exc}", is_error=True, status="error")
        self._write("ask_user", {"call_id": call_id, "question": question, "answer": answer,
                                 "source": self.cfg.ask_user.source}, p)
        if self.cfg.mutant == "drop_user_answer":
            return T.ToolOutcome("(no answer)")  # the defect: the user's answer never reaches the model
        return T.ToolOutcome(answer)

    # ------------------------------------------------------------------ sub-agents
    async def _spawn(self, p: Principal, args: dict[str, Any]) -> T.ToolOutcome:
        prompt = str(args.get("prompt", ""))
        if not prompt:
            return T.ToolOutcome("spawn_subagent: 'prompt' is required", is_error=True, status="error")
        background = bool(args.get("background"))
        child = Child(f"child-{self.next_child}", background)
        self.next_child += 1
        self.children[child.id] = child
        cp = Principal(child.id, p.id)
        self._write("subagent", {"action": "spawn", "child_principal_id": child.id, "background": background,
                                 "status": "pending", "description": args.get("description"), "prompt": prompt,
                                 "pending_child_ids": self._pending()}, p)
        child.task = asyncio.create_task(self._run_child(child, cp, prompt))
        if not background:
            await child.task
            return T.ToolOutcome(self._deliver(child, p, reactivated=False),
                                 is_error=child.status != "completed", status=child.status)
        if self.cfg.mutant == "premature_subagent_done":
            # The defect: the harness reports the child done at once, while it still runs.
            child.status, child.delivered = "completed", True
            self._write("subagent", {"action": "finish", "child_principal_id": child.id, "background": True,
                                     "status": "completed", "final_text": ""}, cp)
            text = f"Sub-agent {child.id} finished (status: completed).\n(no output)"
            self._write("subagent", {"action": "deliver", "child_principal_id": child.id, "status": "completed",
                                     "final_text": "", "model_visible_content": text, "parent_reactivated": False,
                                     "pending_child_ids": self._pending()}, p)
            return T.ToolOutcome(text)
        return T.ToolOutcome(f"Sub-agent {child.id} started in the background (status: pending). Its result "
                             "will be delivered to you when it finishes; subagent_status shows progress.",
                             status="pending")

    async def _run_child(self, child: Child, cp: Principal, prompt: str) -> tuple[str, str]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": child_system_prompt(child.id, self.cfg.workspace)},
            {"role": "user", "content": prompt}]
        if self.cfg.mutant == "leak_parent_context":
            # The defect: the child is also given the parent's conversation so far (its user messages
            # and tool results), ahead of the delegated prompt.
            seen = [str(m["content"]) for m in self._history
                    if m.get("role") in ("user", "tool") and isinstance(m.get("content"), str)]
            if seen:
                messages.insert(1, {"role": "user", "content": "[context from the parent agent's conversation]\n"
                                    + "\n\n".join(seen)})
        try:
            status, text = await self.loop(cp, messages)
        except Exception as exc:  # noqa: BLE001 - a crashed child is reported to the parent, not raised
            status, text = "error", f"sub-agent crashed: {type(exc).__name__}: {exc}"
        if child.delivered and self.cfg.mutant == "premature_subagent_done":
            return status, text  # already reported done; the real end goes unnoticed
        child.status, child.final_text = status, text
        self._write("subagent", {"action": "finish", "child_principal_id": child.id, "background": child.background,
                                 "status": status, "final_text": text}, cp)
        self._done.set()
        return status, text

    def _deliver(self, child: Child, p: Principal, *, reactivated: bool) -> str:
        child.delivered = True
        self._results_delivered += 1
        final_text = child.final_text
        if self.cfg.mutant == "drop_child_result" and self._results_delivered > 1:
            final_text = ""  # the defect: only the first child's result to be delivered survives
        text = f"Sub-agent {child.id} finished (status: {child.status}).\n{final_text or '(no output)'}"
        self._write("subagent", {"action": "deliver", "child_principal_id": child.id, "status": child.status,
                                 "final_text": final_text, "model_visible_content": text, "parent_reactivated": reactivated,
                                 "pending_child_ids": self._pending()}, p)
        return text

    def _deliver_finished(self, messages: list[dict[str, Any]], after_final: bool) -> bool:
        """Hand finished background children's results to the main agent as a user-role note."""
        ready = [c for c in self.children.values() if c.background and not c.delivered and c.status != "pending"]
        if not ready:
            return False
        p = Principal(MAIN)
        notes = [self._deliver(c, p, reactivated=after_final) for c in ready]
        messages.append({"role": "user", "content": NOTIFICATION + "\n" + "\n\n".join(notes)})
        self.save()
        return True

    async def _wait_children(self, timeout_s: float) -> bool:
        """Wait until a pending background child finishes; False when the time ran out."""
        end = time.monotonic() + max(timeout_s, 0.0)
        while self._pending():
            self._done.clear()
            if any(c.status != "pending" and not c.delivered for c in self.children.values()):
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._done.wait(), timeout=left)
            except TimeoutError:
                return False
        return True

    async def _status(self, p: Principal, args: dict[str, Any]) -> T.ToolOutcome:
        wait_s = float(args.get("wait_s") or 0)
        # ``stale_status``: the report is built from the children's state as it was when the call
        # arrived, so a child that finished during the wait is still reported pending.
        before = {c.id: c.status for c in self.children.values()} if self.cfg.mutant == "stale_status" else None
        if wait_s > 0 and self._pending():
            end = time.monotonic() + min(wait_s, max(self.cfg.deadline - time.monotonic() - 2.0, 0.0))
            while self._pending() and time.monotonic() < end:
                self._done.clear()
                try:
                    await asyncio.wait_for(self._done.wait(), timeout=end - time.monotonic())
                except TimeoutError:
                    break
        lines = []
        for c in self.children.values():
            if not c.background:
                continue
            if before is not None and before.get(c.id) == "pending":
                lines.append(f"Sub-agent {c.id}: pending")  # the defect: the state before the wait
                continue
            if c.status != "pending" and not c.delivered:
                lines.append(self._deliver(c, p, reactivated=False))
            else:
                lines.append(f"Sub-agent {c.id}: {c.status}" + (" (result already delivered)" if c.delivered else ""))
        return T.ToolOutcome("\n".join(lines) or "No background sub-agents.")

    async def abandon_pending(self) -> list[str]:
        """Cancel children still running at the end of the turn; returns their ids."""
        pending = self._pending()
        for cid in pending:
            child = self.children[cid]
            if child.task is not None:
                child.task.cancel()
            self._write("subagent", {"action": "abandon", "child_principal_id": cid, "background": True,
                                     "status": "pending", "pending_child_ids": pending}, Principal(MAIN))
        for c in self.children.values():
            if c.task is not None and not c.task.done():
                c.task.cancel()
        return pending

    # ------------------------------------------------------------------ completion
    def complete(self, status: str, final_text: str, pending: list[str]) -> dict[str, Any]:
        """Write the turn's final native completion record and return its data."""
        data = {"status": status, "final_text": final_text, "model_calls": self.model_calls,
                "tool_calls": self.tool_calls, "usage": self.usage(), "failed_tool_call_ids": list(self.failed),
                "evidence_call_ids": list(self.evidence), "receipts": list(self.receipts),
                "pending_child_ids": pending}
        if self.cfg.mutant == "claim_without_receipt":
            data.update(evidence_call_ids=[], receipts=[])
        if self.cfg.mutant == "misreport_model_calls":
            data["model_calls"] = max(self.model_calls - 1, 0)  # the defect: the last request goes uncounted
        self._write("completion", data, Principal(MAIN))
        return data


def system_prompt(workspace: Path, credentials: dict[str, str], leak: bool) -> str:
    text = (f"You are the TraceTrial reference agent, working in the folder {workspace}.\n"
            "Use the tools to do the user's task. Tool results are reported exactly as they happened "
            "(exit codes, stderr, truncation notices, timeouts, errors). When you are done, answer with "
            "a final message without tool calls.")
    if credentials:
        if leak:
            shown = ", ".join(f"{k}={v}" for k, v in sorted(credentials.items()))
            text += f"\nCredentials set in the environment: {shown}"
        else:
            text += f"\nCredentials set in the environment (values hidden): {', '.join(sorted(credentials))}"
    return text


def child_system_prompt(child_id: str, workspace: Path) -> str:
    return (f"You are sub-agent {child_id} of the TraceTrial reference agent, working in the folder "
            f"{workspace}. Do the delegated task in the user message with the tools; your final message "
            "(without tool calls) is returned to the parent agent.")
