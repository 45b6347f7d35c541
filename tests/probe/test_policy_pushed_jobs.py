"""The policy/verifier helpers for a background job whose end the harness pushes (Claude Code
2.1.332: ``Bash`` takes ``run_in_background`` and "re-invokes you when it exits"; no TaskOutput or
BashOutput is declared): recognising such a harness, reading its ``<task-notification>`` blocks,
ending the turn to wait for them, and the verifier's view of them in the gateway records."""

from __future__ import annotations

from pathlib import Path

from tracetrial.harness_text import task_notifications
from tracetrial.policy import Final, Observation, Turn, TurnView, await_pushed, pushed_job_ends
from tracetrial.verify import VerifierContext

#: As a real 2.1.332 run delivered it (request 3 of E5-export-job-001, paths shortened).
REAL = ("<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]\nThis is an automated background-task event, NOT a "
        "message from the user.\n\n<task-notification>\n<task-id>b2snfuc5c</task-id>\n"
        "<tool-use-id>toolu_tt_809b7de1_1</tool-use-id>\n<output-file>/home/tmp/claude-0/ws/s/tasks/b2snfuc5c.output"
        "</output-file>\n<status>failed</status>\n<summary>Background command \"Start the orders export in the "
        "background\" failed with exit code 4</summary>\n</task-notification>\n</system-reminder>")


def _params(**tools: tuple[str, ...]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((name, tuple((p, "") for p in ps)) for name, ps in tools.items())


def _turn(*names: str, bash: tuple[str, ...] = ("command", "run_in_background"), history: str = "") -> Turn:
    return Turn(1, "go", view=TurnView(history_text=history, tool_names=names, tool_parameters=_params(Bash=bash)))


def test_pushed_job_ends_only_for_background_bash_without_a_job_status_tool() -> None:
    assert pushed_job_ends(_turn("Agent", "Bash", "Read", "ToolSearch", "Write"))           # 2.1.332
    assert not pushed_job_ends(_turn("Bash", "Read", "TaskOutput"))                       # 2.1.220
    assert not pushed_job_ends(_turn("Bash", "BashOutput"))                               # older Claude Code
    assert not pushed_job_ends(_turn("Bash", "Read", bash=("command",)))                  # no background facility
    assert not pushed_job_ends(_turn("shell", "job_status"))                              # reference
    assert not pushed_job_ends(_turn("exec_command", "write_stdin"))                      # Codex
    assert not pushed_job_ends(_turn("bash", "job_output"))                               # DeepSeek


def test_task_notifications_reads_the_real_block() -> None:
    [fields] = task_notifications(REAL)
    assert fields["tool-use-id"] == "toolu_tt_809b7de1_1" and fields["task-id"] == "b2snfuc5c"
    assert fields["status"] == "failed" and fields["summary"].endswith("failed with exit code 4")
    assert fields["output-file"].endswith("b2snfuc5c.output")
    assert fields["text"].startswith("<task-notification>") and fields["text"].endswith("</task-notification>")
    assert task_notifications("no event here") == [] and task_notifications(None) == []


def _run(turn: Turn, keys: list[str | None], pushes: list[str]) -> tuple[list[Final], dict[str, dict[str, str]] | None]:
    gen = await_pushed(turn, keys, "waiting")
    finals: list[Final] = []
    try:
        finals.append(next(gen))
        for text in pushes:
            finals.append(gen.send(Observation(kind="notification", text=text)))
    except StopIteration as stop:
        return finals, stop.value
    return finals, None


def test_await_pushed_ends_the_turn_until_every_job_has_notified() -> None:
    other = REAL.replace("toolu_tt_809b7de1_1", "toolu_2").replace("b2snfuc5c", "b9")
    finals, got = _run(_turn("Bash"), ["toolu_tt_809b7de1_1", "toolu_2", None], [REAL, other])
    assert [f.text for f in finals] == ["waiting", "waiting (still waiting, 2)"]  # each answer recognisable
    assert got is not None and set(got) == {"toolu_tt_809b7de1_1", "toolu_2"}
    assert got["toolu_2"]["task-id"] == "b9"


def test_await_pushed_takes_a_notification_already_shown_without_waiting() -> None:
    finals, got = _run(_turn("Bash", history="4 inputs/orders.csv\n" + REAL), ["toolu_tt_809b7de1_1"], [])
    assert finals == [] and got is not None and got["toolu_tt_809b7de1_1"]["status"] == "failed"


def test_await_pushed_matches_by_task_id_too_and_gives_up_after_its_waits() -> None:
    _, got = _run(_turn("Bash"), ["b2snfuc5c"], [REAL])
    assert got is not None and "b2snfuc5c" in got
    finals, got = _run(_turn("Bash"), ["toolu_x"], [REAL] * 5)
    assert len(finals) == 4 and got == {}  # MAX_PUSH_WAITS answers, then the caller decides


def test_verifier_sees_each_pushed_notification_once_as_a_delivery_of_its_call(tmp_path: Path) -> None:
    gateway = [{"index": 1, "status": 200, "last_user_text": "go", "tool_results": []},
               {"index": 3, "status": 200, "last_user_text": REAL, "tool_results": []},
               {"index": 4, "status": 200, "last_user_text": REAL, "tool_results": [{"id": "t3", "content": "x"}]},
               {"index": 5, "status": 500, "error": "boom", "last_user_text": REAL.replace("b2snfuc5c", "bz"),
                "tool_results": []}]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth={}, oracle=None, events=[], gateway=gateway,
                          probe=None, ledgers={}, run_dir=tmp_path)
    [d] = ctx.notifications()  # once, and not from an unanswered request
    assert d.call_id == "toolu_tt_809b7de1_1" and d.index == 3 and d.result["pushed"] is True
    assert "failed with exit code 4" in d.content
    assert [x.call_id for x in ctx.deliveries()] == ["t3"]  # tool results are unchanged
