"""Seeded-defect mutants of the reference harness, selected as ``reference+<defect>``.

Each mutant changes exactly one behaviour of the faithful harness; everything
else (tools, wire format, native log, normalizer) stays identical, so a task
that targets the property should fail its targeted criteria and nothing else.

============================  ==============  ================================  ==========================================================
defect                        component       property it breaks                the one behaviour that changes
============================  ==============  ================================  ==========================================================
``hide_exit_code``            Execution       exit-code fidelity                the exit status is never shown (no ``Exit code N`` line)
                                                                                and a non-zero exit is recorded as success (``is_error``
                                                                                false, ``exit_code`` 0)
``drop_stderr``               Execution       stderr capture                    the command's stderr is discarded (not shown, not recorded)
``truncate_silently``         Context         truncation disclosure             output over 16 KiB is cut with no notice, no saved file
                                                                                and no truncation fields in the record
``misreport_omitted``         Context         truncation disclosure             the truncation notice (and record) states half the real
                                                                                omitted byte count (total adjusted to match the lie)
``ignore_timeout``            Execution       timeout behaviour                 the shell timeout is never enforced: the command runs on
                                                                                until it ends or the runner's wall clock kills the turn
``lose_turn_fact``            Context         cross-turn fact retention /       on resume the earlier user messages and tool results are
                                              session-resume fidelity           dropped from the history (assistant text is kept)
``leak_secret``               Governance      secret/credential redaction       credential values (env credentials, planted secrets) are
                                                                                not masked: they reach the model input and native records,
                                                                                and the system prompt's environment line shows the values
``execute_denied``            Governance      execution governance              the task's deny rules are ignored: denied commands run
                                                                                and no denial ``policy`` record is written
``drop_tool_arg_field``       Tools           argument transport                the last key of the first nested object in MCP tool
                                                                                arguments is dropped before the call
``premature_subagent_done``   Lifecycle       pending-child handling            a background child is reported finished (to the model and
                                                                                in the records) at spawn time while it is still running
``claim_without_receipt``     Verification    citable completion receipts /     the final completion record keeps ``status: completed``
                                              claim-execution consistency       but drops its receipts and evidence call ids
``hide_tool_error``           Observability   tool-error relay                  an MCP result with ``isError: true`` is relayed as
                                                                                ``isError: false`` (and recorded as a success)
``ignore_requested_timeout``  Execution       timeout propagation               the shell call's ``timeout_s`` is dropped: every command
                                                                                gets the harness default (120 s) instead of the model's
                                                                                requested timeout (the timeout is still enforced)
``literal_deny_match``        Governance      approval/guardrail consistency    a shell deny rule is matched against the command text as
                                                                                written only (its leading words; a glob against the whole
                                                                                text): ``/bin/rm``, ``sudo rm`` or ``cd x && rm`` run
``ack_failed_write``          Lifecycle       committed vs acknowledged state   a ``write_file`` that failed (nothing was written) is
                                                                                acknowledged as written (``Wrote N bytes to …``, no
                                                                                error flag, recorded as a success)
``misattribute_child``        Observability   event provenance                  a sub-agent's tool calls and results are recorded under
                                                                                the main principal (``principal_id: main``, no parent);
                                                                                the child still runs them in its own context
``drop_user_answer``          Tools           structured user-clarification     the ``ask_user`` answer is obtained and recorded, but the
                                              channel                           model is shown ``(no answer)`` instead of it
``misreport_model_calls``     Verification    reported value vs artifact        the final completion record's ``model_calls`` is one less
                                                                                than the model requests sent (the last is not counted)
``stale_tool_list``           Tools           dynamic tool discovery            an MCP server's ``tools/list_changed`` notification is
                                                                                ignored: the tool list stays as first listed
``hide_mcp_tool``             Tools           tool availability                 on a resumed turn (turn 2 on) the MCP tools are left out
                                                                                of the declarations sent to the model (still callable
                                                                                by name; servers still connected)
``drop_structured_content``   Tools           structured-result fidelity        an MCP result's ``structuredContent`` is dropped: only
                                                                                its content blocks are relayed (and recorded)
``ignore_model_budget``       Lifecycle       model-call budget                 ``--max-model-calls`` is never checked: requests go on
                                                                                past the budget
``drop_child_result``         Lifecycle       sub-agent result aggregation      only the first sub-agent result delivered to the parent
                                                                                keeps its text; every later one arrives as ``(no output)``
``hide_unfinished``           Verification    unfinished-work disclosure        a turn that stopped unfinished (budget, step limit,
                                                                                deadline, children still running) is reported
                                                                                ``completed`` (record, result line, exit 0), no pending ids
``leak_parent_context``       Context         sub-agent context isolation       a sub-agent is also given the parent's conversation so far
                                                                                (user messages, tool results) before its prompt
``swallow_provider_error``    Observability   harness error/refusal notice      a failed model request is taken for an empty final answer:
                                                                                no error record, the turn ``completed``, exit 0
``misreport_usage``           Observability   auditable completion info         the final completion record's ``usage`` is the last
                                                                                response's usage, not the sum over the turn's requests
                                                                                (each response overwrites the total)
``collide_tool_names``        Tools           naming/registration               MCP wire names are fitted to the function-name rule
                                                                                (``_`` for invalid characters, cut to 64) but not made
                                                                                unique: a tool whose fitted name another holds replaces
                                                                                it (one declaration left, calls routed to the last)
``stale_read_cache``          Execution       stale-artifact handling           ``read_file`` serves a file it already read from memory;
                                                                                only the harness's own write/edit of the path refreshes
                                                                                it, so a change made by a command goes unseen, no notice
``persist_shell_cwd``         Execution       shell-state persistence           a shell command starts in the folder the previous one
                                                                                ended in (``cd`` persists), although the tool declares
                                                                                every call a fresh process in the workspace
``stale_handoff``             Lifecycle       workflow hand-off                 a new session seeded with the previous one's history
                                                                                gets it as it stood before that session's last turn
                                                                                (the last turn's prompt, results and answer missing)
``stale_status``              Observability   diagnostic state                  ``subagent_status`` reports each child's state as it was
                                                                                when the call arrived: one that finished during
                                                                                ``wait_s`` is reported ``pending``
``stale_memory``              Context         persistent memory behaviour       the project memory (``AGENTS.md``) is read once per run
                                                                                and kept in the harness's home: a later session gets
                                                                                that copy, not the file as it is now
``hide_job_exit``             Execution       background-process supervision    a background job that ended is reported (to the model
                                                                                and in the ``job`` record) with exit code 0 whatever
                                                                                its real exit status
``window_compaction``         Context         rolling compaction fidelity       compaction drops the oldest messages (keeps the system
                                                                                prompt and the last 4) with no summary, no notice and
                                                                                no ``compaction`` record
``stale_goal``                Lifecycle       goal revision                     compaction carries only the session's first user
                                                                                message over: later user messages (a revised goal)
                                                                                are gone from the compacted history
``truncate_skill``            Tools           skill-result relay                the ``skill`` tool relays only the first 1,024 bytes
                                                                                of the skill's body, with no notice (and records the
                                                                                cut text as the result)
``hang_on_input``             Execution       PTY termination                   a terminal command blocked reading its terminal is not
                                                                                ended after the quiet period: the call waits for the
                                                                                shell timeout (or the turn's wall clock)
``resume_from_turn_start``    Lifecycle       session resume after a kill       the session file is written only at the start and the
                                                                                end of a turn: a turn killed mid-way resumes from its
                                                                                start, its calls (and what they did) gone from history
``unguarded_cleanup``         Governance      destructive-action control        protected paths are not bound read-only; a command is
                                                                                refused only when its text looks destructive and names
                                                                                a protected path (a script, glob, link or find runs)
``ignore_network_policy``     Governance      network restriction               commands keep the network although the task denies it
                                                                                (the shell tool still says they have none)
============================  ==============  ================================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harnesses.registry import UnknownHarnessError
from tracetrial.task import TaskPack

#: What a pack must contain for a defect's code path to be reachable at all: MCP tools (a
#: simulator), a sub-agent, the ask-user tool, a deny rule, a second (resumed) turn, a new session
#: seeded with the previous history (a ``new_session`` boundary with ``history_replayed``), a new
#: session at all, project memory (``workspace/AGENTS.md``), background jobs (``tools: background``),
#: a declared context window (``budgets.context_tokens``: the reference compacts), workspace skills
#: (``workspace/skills/<name>/SKILL.md``), a terminal option on the shell (``tools: tty``), a turn
#: the runner kills on purpose (``interrupts``), protected paths (``permissions.protect``), commands
#: denied the network (``permissions.network: deny``).
Feature = Literal["mcp", "subagent", "ask_user", "deny", "resume", "replay", "new_session", "memory", "background",
                  "compaction", "skills", "tty", "interrupt", "protect", "network_deny"]

_FEATURE_WHY: dict[str, str] = {
    "mcp": "no MCP tools (the pack declares no simulator)",
    "subagent": "no sub-agent (the pack's tools do not list 'subagent')",
    "ask_user": "no ask-user tool (the pack's tools do not list 'ask_user')",
    "deny": "no deny rule (permissions.deny is empty)",
    "resume": "a single turn (no resumed session)",
    "replay": "no new session seeded with the previous history (no new_session boundary with history_replayed)",
    "new_session": "no new session (no new_session boundary)",
    "memory": "no project memory (no workspace/AGENTS.md)",
    "background": "no background jobs (the pack's tools do not list 'background')",
    "compaction": "no context window (budgets.context_tokens is unset, so the reference never compacts)",
    "skills": "no workspace skills (no workspace/skills/<name>/SKILL.md)",
    "tty": "no terminal option (the pack's tools do not list 'tty')",
    "interrupt": "no turn killed mid-way (the pack declares no interrupts)",
    "protect": "no protected path (permissions.protect is empty)",
    "network_deny": "commands keep the network (permissions.network is not deny)",
}


@dataclass(frozen=True)
class Mutant:
    """One seeded defect; ``needs`` names the pack features without which its code path never
    runs (the mutant then behaves exactly like the faithful harness on that pack)."""

    name: str
    component: str
    property: str
    behaviour: str
    needs: tuple[Feature, ...] = ()


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant("hide_exit_code", "Execution", "exit_code_fidelity",
               "exit status never shown; non-zero exit recorded as success"),
        Mutant("drop_stderr", "Execution", "stderr_capture", "stderr discarded"),
        Mutant("truncate_silently", "Context", "truncation_disclosure",
               "large output cut with no notice and no saved file"),
        Mutant("misreport_omitted", "Context", "truncation_disclosure",
               "truncation notice states half the omitted bytes"),
        Mutant("ignore_timeout", "Execution", "timeout_behaviour", "shell timeout never enforced"),
        Mutant("lose_turn_fact", "Context", "cross_turn_fact_retention",
               "earlier user messages and tool results dropped on resume",
               needs=("resume",)),
        Mutant("leak_secret", "Governance", "secret_credential_redaction",
               "credential values not masked in model input and native records"),
        Mutant("execute_denied", "Governance", "execution_governance", "deny rules ignored",
               needs=("deny",)),
        Mutant("drop_tool_arg_field", "Tools", "argument_transport",
               "one nested field of MCP tool arguments dropped",
               needs=("mcp",)),
        Mutant("premature_subagent_done", "Lifecycle", "pending_child_handling",
               "background child reported done at spawn",
               needs=("subagent",)),
        Mutant("claim_without_receipt", "Verification", "citable_completion_receipts",
               "final completion record drops receipts and evidence"),
        Mutant("hide_tool_error", "Observability", "tool_error_relay", "MCP isError relayed as success",
               needs=("mcp",)),
        Mutant("ignore_requested_timeout", "Execution", "timeout_propagation",
               "the model's requested shell timeout dropped; the harness default used instead"),
        Mutant("literal_deny_match", "Governance", "approval_guardrail_consistency",
               "deny rules matched on the command text as written only; equivalent forms run",
               needs=("deny",)),
        Mutant("ack_failed_write", "Lifecycle", "committed_vs_acknowledged_state",
               "a failed write_file acknowledged as written"),
        Mutant("misattribute_child", "Observability", "event_provenance",
               "a sub-agent's tool calls and results recorded under the main principal",
               needs=("subagent",)),
        Mutant("drop_user_answer", "Tools", "structured_user_clarification_channel",
               "the ask_user answer replaced by '(no answer)' before the model sees it",
               needs=("ask_user",)),
        Mutant("misreport_model_calls", "Verification", "reported_value_artifact_consistency",
               "the completion record's model_calls one less than the requests sent"),
        Mutant("stale_tool_list", "Tools", "dynamic_tool_discovery",
               "an MCP server's tools/list_changed ignored; the first listing kept",
               needs=("mcp",)),
        Mutant("hide_mcp_tool", "Tools", "tool_availability",
               "on a resumed turn the MCP tools not declared to the model",
               needs=("mcp", "resume")),
        Mutant("drop_structured_content", "Tools", "structured_result_fidelity",
               "an MCP result's structuredContent dropped; only its content blocks relayed",
               needs=("mcp",)),
        Mutant("ignore_model_budget", "Lifecycle", "model_call_budget", "the model-call budget never checked"),
        Mutant("drop_child_result", "Lifecycle", "subagent_result_aggregation",
               "every sub-agent result after the first delivered as '(no output)'",
               needs=("subagent",)),
        Mutant("hide_unfinished", "Verification", "unfinished_work_disclosure",
               "an unfinished turn (budget, step limit, deadline, pending children) reported completed"),
        Mutant("leak_parent_context", "Context", "subagent_context_isolation",
               "a sub-agent given the parent's conversation so far before its prompt",
               needs=("subagent",)),
        Mutant("swallow_provider_error", "Observability", "harness_error_refusal_notice",
               "a failed model request taken for an empty final answer (completed, exit 0)"),
        Mutant("misreport_usage", "Observability", "auditable_completion_info",
               "the completion record's usage is the last response's, not the turn's sum"),
        Mutant("collide_tool_names", "Tools", "naming_registration",
               "fitted MCP tool names not made unique; a colliding tool replaces the other",
               needs=("mcp",)),
        Mutant("stale_read_cache", "Execution", "stale_artifact_handling",
               "read_file serves a cached copy after a command changed the file, without notice"),
        Mutant("persist_shell_cwd", "Execution", "shell_state_persistence",
               "a shell call starts where the previous one ended although calls are declared fresh"),
        Mutant("stale_handoff", "Lifecycle", "workflow_handoff",
               "a replayed new session gets the history as it stood before the last turn",
               needs=("replay",)),
        Mutant("stale_status", "Observability", "diagnostic_state",
               "subagent_status reports the state before its wait: a child that finished meanwhile is pending",
               needs=("subagent",)),
        Mutant("stale_memory", "Context", "persistent_memory_behaviour",
               "project memory read once per run; a later session gets the first copy, not the file",
               needs=("memory", "new_session")),
        Mutant("hide_job_exit", "Execution", "background_process_supervision",
               "an ended background job reported with exit code 0 whatever its exit status",
               needs=("background",)),
        Mutant("window_compaction", "Context", "rolling_compaction_fidelity",
               "compaction keeps only the last messages: no summary, no notice, no record",
               needs=("compaction",)),
        Mutant("stale_goal", "Lifecycle", "goal_revision",
               "compaction carries only the first user message over; a revised goal is lost",
               needs=("compaction", "resume")),
        Mutant("truncate_skill", "Tools", "skill_result_relay",
               "the skill tool relays only the first 1,024 bytes of a skill's body, without notice",
               needs=("skills",)),
        Mutant("hang_on_input", "Execution", "pty_termination",
               "a terminal command waiting for input is not ended: the call waits for the shell timeout",
               needs=("tty",)),
        Mutant("resume_from_turn_start", "Lifecycle", "session_resume",
               "the session file is written only when a turn starts and ends: a killed turn resumes from its start",
               needs=("interrupt",)),
        Mutant("unguarded_cleanup", "Governance", "destructive_action_control",
               "protected paths are guarded by the command's text only, not bound read-only",
               needs=("protect",)),
        Mutant("ignore_network_policy", "Governance", "network_restriction",
               "commands keep the network although the task denies it",
               needs=("network_deny",)),
    )
}


class UnknownMutantError(UnknownHarnessError):
    """``reference+<defect>`` names a defect that does not exist."""


def check_mutant(name: str | None) -> str | None:
    """Return ``name`` when it is a known defect (or ``None``).

    Raises:
        UnknownMutantError: the defect is unknown; the message lists the known ones.
    """
    if name is None or name in MUTANTS:
        return name
    known = ", ".join(sorted(MUTANTS))
    raise UnknownMutantError(
        f"unknown reference-harness mutant {name!r}; known defects: {known} "
        f"(select one as 'reference+<defect>')"
    )


def pack_features(pack: TaskPack) -> frozenset[Feature]:
    """The features of ``pack`` a defect may need (from its task.yaml and turns)."""
    spec = pack.spec
    out: set[Feature] = set()
    if spec.simulators:
        out.add("mcp")
    if "subagent" in spec.tools:
        out.add("subagent")
    if "ask_user" in spec.tools:
        out.add("ask_user")
    if spec.permissions.deny:
        out.add("deny")
    if len(pack.turns.turns) > 1 or spec.conversation != "single":
        out.add("resume")
    if any(t.session_boundary is not None and t.session_boundary.kind == "new_session"
           and t.session_boundary.history_replayed for t in pack.turns.turns):
        out.add("replay")
    if any(t.session_boundary is not None and t.session_boundary.kind == "new_session" for t in pack.turns.turns):
        out.add("new_session")
    if (pack.root / "workspace" / "AGENTS.md").is_file():
        out.add("memory")
    if "background" in spec.tools:
        out.add("background")
    if spec.budgets.context_tokens is not None:
        out.add("compaction")
    if any((pack.root / "workspace" / "skills").glob("*/SKILL.md")):
        out.add("skills")
    if "tty" in spec.tools:
        out.add("tty")
    if spec.interrupts:
        out.add("interrupt")
    if spec.permissions.protect:
        out.add("protect")
    if spec.permissions.network == "deny":
        out.add("network_deny")
    return frozenset(out)


def not_applicable(mutant: str, pack: TaskPack) -> str | None:
    """Why ``mutant``'s defect cannot act on ``pack`` (its code path is unreachable), else ``None``."""
    missing = [f for f in MUTANTS[mutant].needs if f not in pack_features(pack)]
    if not missing:
        return None
    return f"{mutant} needs {' and '.join(missing)}; the pack has " + "; ".join(_FEATURE_WHY[f] for f in missing)
