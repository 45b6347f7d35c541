"""tracetrial.declarations: what a shell tool's declaration says about shell state across calls.

The declarations the harnesses really send are tested in the E4 packs' tests (their captured
declarations); here, the wordings the table must read either way."""

from __future__ import annotations

from typing import Any

import pytest

from tracetrial.declarations import shell_state_declared
from tracetrial.policy import Turn, TurnView


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
