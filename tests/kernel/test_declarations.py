"""tracetrial.declarations: what a shell tool's declaration says about shell state across calls.

The shell declarations the harnesses really send (captured at the gateway by the E4 packs, whose
probes and verifiers read them with this table), as the verifier reads them (description and
parameter descriptions) and as the description alone says them; and the wordings the table must
read either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tracetrial.declarations import shell_state_declared
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
#: A harness declaring a persistent session: the folder and the variables carry over.
SESSION = _decl("terminal", "Run a command in a persistent shell session shared by every call.", command="Command.")


@pytest.mark.parametrize(("decl", "full", "top"), [
    (REFERENCE_SHELL, ("fresh", "fresh"), ("fresh", "fresh")),
    (CLAUDE_BASH, ("persistent", "fresh"), ("persistent", "fresh")),
    (CODEX_EXEC, ("fresh", None), (None, None)),       # per-call workdir only in the parameter
    (OPENCLAW_EXEC, (None, None), (None, None)),
    (SESSION, ("persistent", "persistent"), ("persistent", "persistent")),
], ids=["reference", "claude_code", "codex", "openclaw", "session"])
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
