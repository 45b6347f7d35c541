"""tracetrial.declarations: what a shell tool's declaration says about shell state across calls.

The shell declarations the harnesses really send (captured at the gateway by the E4 packs, whose
probes and verifiers read them with this table), as the verifier reads them (description and
parameter descriptions) and as the description alone says them; and the wordings the table must
read either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tracetrial.declarations import PERSISTENT_ON_SUCCESS, STAYS, cwd_after, shell_state_declared
from tracetrial.policy import Turn, TurnView
from tracetrial.verify import VerifierContext


def _decl(name: str, description: str, **params: str) -> dict[str, Any]:
    return {"name": name, "type": "function", "description": description,
            "input_schema": {"type": "object", "properties": {k: {"type": "string", "description": v}
                                                              for k, v in params.items()}}}


# The shell declarations as the gateway recorded them (descriptions as sent), from the E4 packs' tests.
REFERENCE_SHELL = _decl(
    "shell",
    "Run a command with bash in the workspace. Each call is a fresh process: cd and export do not persist; "
    "background processes it starts run until the end of the turn. The result starts with 'Exit code N'; stderr "
    "follows a '[stderr]' line. Output over 16384 bytes per stream is truncated and saved to a file named in the "
    "notice.",
    command="The bash command line.")
CLAUDE_BASH = _decl(
    "Bash",
    "Executes a bash command and returns its output.\n\n- Working directory persists between calls, but prefer "
    "absolute paths — `cd` in a compound command can trigger a permission prompt. Shell state (env vars, "
    "functions) does not persist; the shell is initialized from the user's profile.\n- IMPORTANT: Avoid using "
    "this tool to run `cat`, `head`, `tail`, `sed`, `awk`, or `echo` commands, unless explicitly instructed.\n"
    "- `timeout` is in milliseconds: default 120000, max 600000.\n- `run_in_background` runs the command "
    "detached: it keeps running across turns and re-invokes you when it exits. No `&` needed.",
    command="The command to execute", timeout="Optional timeout in milliseconds (max 600000)",
    run_in_background="Set to true to run this command in the background.")
CODEX_EXEC = _decl(
    "exec_command", "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
    cmd="Shell command to execute.",
    login="True runs the shell with -l/-i semantics; false disables them. Defaults to true.",
    sandbox_permissions="Per-command sandbox override. Defaults to `use_default`; use `require_escalated` for "
                        "unsandboxed execution.",
    workdir="Working directory for the command. Defaults to the turn cwd.",
    yield_time_ms="Wait before yielding output. Defaults to 10000 ms; effective range is 250-30000 ms.")
OPENCLAW_EXEC = _decl(
    "exec",
    "Run shell now; background continuation supported. Completed calls return command output directly. Use "
    "process only when exec reports running with a sessionId; output text alone is not a process handle. Long "
    "run: automatic completion wake when enabled and output/failure occurs; otherwise process confirms "
    "completion. No sleep loops for reminders/follow-ups; use automations. TTY CLI/UI/coding agent: pty=true.",
    command="Shell command.", workdir="Omit/empty string: default; whitespace-only invalid.",
    env="Literal overrides; no expansion. Omit to inherit.", timeoutSeconds="Process lifetime in seconds; 0 disables.")
#: Claude Code 2.1.332's Bash as the gateway recorded it (E5-export-job-001, request 0; git notes cut).
CLAUDE_BASH_2_1_332 = _decl(
    "Bash",
    "Executes a bash command and returns its output.\n\n- `cd` carries to the next call only in the main session, "
    "if the command succeeds and ends inside the working directories. Outside them the shell returns to the start "
    "folder; otherwise it stays where it was. Prefer absolute paths — `cd` in a compound command can trigger a "
    "permission prompt. Shell state (env vars, functions) does not persist; the shell is initialized from the "
    "user's profile.\n- IMPORTANT: Avoid using this tool to run `cat`, `head`, `tail`, `sed`, `awk`, or `echo` "
    "commands, unless explicitly instructed or after you have verified that a dedicated tool cannot accomplish "
    "your task.\n- Command output is displayed to you, not reliably to the user.\n- `timeout` is in milliseconds: "
    "default 120000, max 600000 for a foreground command.\n- `run_in_background` runs the command detached: it "
    "keeps running across turns and re-invokes you when it exits. With it, `timeout` is how long the command may "
    "run in the background (default 600000, max 7200000); at that limit it is stopped and you are re-invoked. No "
    "`&` needed. Foreground `sleep` is blocked; use Monitor with an until-loop to wait on a condition.",
    command="The command to execute",
    timeout="Optional timeout in milliseconds (max 600000 for a foreground command)",
    run_in_background="Set to true to run this command in the background. With it, `timeout` limits how long "
                      "the command may run in the background before it is stopped (default 600000 ms, max "
                      "7200000 ms).",
    dangerouslyDisableSandbox="Set this to true to dangerously override sandbox mode and run commands without "
                              "sandboxing.")
#: A harness declaring a persistent session: the folder and the variables carry over.
SESSION = _decl("terminal", "Run a command in a persistent shell session shared by every call.", command="Command.")


@pytest.mark.parametrize(("decl", "full", "top"), [
    (REFERENCE_SHELL, ("fresh", "fresh"), ("fresh", "fresh")),
    (CLAUDE_BASH, ("persistent", "fresh"), ("persistent", "fresh")),
    (CLAUDE_BASH_2_1_332, (PERSISTENT_ON_SUCCESS, "fresh"), (PERSISTENT_ON_SUCCESS, "fresh")),
    (CODEX_EXEC, ("fresh", None), (None, None)),       # per-call workdir only in the parameter
    (OPENCLAW_EXEC, (None, None), (None, None)),
    (SESSION, ("persistent", "persistent"), ("persistent", "persistent")),
], ids=["reference", "claude_code", "claude_code@2.1.332", "codex", "openclaw", "session"])
def test_declared_semantics_of_the_real_declarations(tmp_path: Path, decl: dict[str, Any], full: Any,
                                                    top: Any) -> None:
    """``full``: the whole declaration, as a verifier reads it (``VerifierContext.tool_declaration``)
    and a probe policy is shown it (``Turn.declaration_text``); ``top``: its description alone."""
    name = decl["name"]
    params = tuple((k, v["description"]) for k, v in decl["input_schema"]["properties"].items())
    turn = Turn(1, "q", view=TurnView(tool_names=(name,), tool_descriptions=((name, decl["description"]),),
                                      tool_parameters=((name, params),)))
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=None, oracle=None, events=[],
                          gateway=[{"index": 0, "status": 200, "tools": [decl]}], probe=None, ledgers={},
                          run_dir=tmp_path)
    text, where = ctx.tool_declaration(name)
    assert text == turn.declaration_text(name) and where == "request 0"
    assert shell_state_declared(text) == full
    assert shell_state_declared(decl["description"]) == top


@pytest.mark.parametrize(("text", "want"), [
    ("Runs in a persistent shell session: state carries over.", ("persistent", "persistent")),
    ("The working directory is reset after each call.", ("fresh", None)),
    ("cd does not persist between calls; environment variables persist.", ("fresh", "persistent")),
    ("The current directory is kept between commands.", ("persistent", None)),
    ("Every command runs in a new shell process.", ("fresh", "fresh")),
    ("A fresh process per call.", ("fresh", "fresh")),
    ("Exported variables don't carry over.", (None, "fresh")),
    ("Working directory persists between calls. Each call is a fresh process.", (None, "fresh")),  # contradiction
    ("The working directory persists only after a successful command.", (PERSISTENT_ON_SUCCESS, None)),
    ("cd carries over to the next call if the command succeeds.", (PERSISTENT_ON_SUCCESS, None)),
    ("cd does not carry over, even if the command succeeds.", ("fresh", None)),
    ("Run a command.", (None, None)),
    ("", (None, None)),
])
def test_declared_other_wordings(text: str, want: Any) -> None:
    assert shell_state_declared(text) == want


def test_markup_and_line_breaks_do_not_hide_a_statement() -> None:
    assert shell_state_declared("The `working\ndirectory` **persists** between calls.") == ("persistent", None)


def test_a_per_call_working_directory_is_fresh() -> None:
    assert shell_state_declared("workdir: Working directory for the command. Defaults to the turn cwd.") == ("fresh", None)


def test_the_turn_shows_a_declaration_with_its_parameters() -> None:
    view = TurnView(tool_names=("exec_command",), tool_descriptions=(("exec_command", "Runs a command."),),
                    tool_parameters=(("exec_command", (("cmd", "The command."), ("workdir", "Defaults to the turn cwd."))),))
    turn = Turn(1, "q", view=view)
    assert turn.declaration_text("exec_command") == "Runs a command.\nThe command.\nDefaults to the turn cwd."
    assert shell_state_declared(turn.declaration_text("exec_command")) == ("fresh", None)
    assert turn.declaration_text("Bash") == ""


def test_cwd_after_resolves_the_conditional_rule_only() -> None:
    """2.1.332's rule: after a succeeding call the folder carries; after a failing one the shell
    stays where it was. Unconditional semantics (2.1.220's "persists between calls") are as declared."""
    assert cwd_after(PERSISTENT_ON_SUCCESS, True) == "persistent"
    assert cwd_after(PERSISTENT_ON_SUCCESS, False) == STAYS
    assert cwd_after(PERSISTENT_ON_SUCCESS, None) is None
    for sem in ("persistent", "fresh", None):
        assert cwd_after(sem, True) == cwd_after(sem, False) == cwd_after(sem, None) == sem
