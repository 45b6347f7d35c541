"""The CLI-adapter template (:class:`harnesses.cli_adapter.CliAdapter`) with a scripted fake
CLI: the session decision across turns, the redacted invocation record, the outcome of an
exit, a crash by signal and a hang, and the per-class cached version."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harnesses.base import NormalizedTrace, RunContext, TurnContext, TurnOutcome
from harnesses.cli_adapter import CliAdapter
from tests.harnesses.capture import TEST_KEY as KEY
from tests.harnesses.capture import run_context
from tracetrial.archive import RunPaths
from tracetrial.task import SessionBoundary

#: The fake CLI: ``--version`` (counted in $FAKE_COUNT); else it prints its argv and a session
#: id as JSON, on stderr a line, and behaves as $FAKE_MODE says.
FAKE = f"""#!{sys.executable}
import json, os, signal, sys, time
if sys.argv[1:] == ["--version"]:
    with open(os.environ["FAKE_COUNT"], "a") as fh:
        fh.write("x")
    print("fake-cli 1.2.3")
    sys.exit(0)
mode = os.environ.get("FAKE_MODE", "ok")
args = sys.argv[1:]
session = args[args.index("--resume") + 1] if "--resume" in args else os.environ.get("FAKE_SESSION", "")
print(json.dumps({{"argv": args, "session": session if mode != "no-session" else None}}), flush=True)
print("fake stderr", file=sys.stderr, flush=True)
if mode == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "hang":
    time.sleep(60)
sys.exit(3 if mode == "fail" else 0)
"""


class FakeAdapter(CliAdapter):
    """A CLI adapter of the fake: only what is specific to the CLI."""

    name: ClassVar[str] = "fake"
    wire_format = "chat"
    install_hint: ClassVar[str] = "fake is not installed"
    binary_name: ClassVar[str] = "fake-cli"

    def __init__(self, variant: str | None = None) -> None:
        super().__init__(variant)
        self.mode = "ok"
        self.sessions: list[str] = []  # what the fake reports, turn by turn

    def version_env(self, home: Path) -> dict[str, str]:
        return {**super().version_env(home), "FAKE_COUNT": os.environ["FAKE_COUNT"]}

    def parse_version(self, text: str) -> str:
        return text.split()[-1]

    def environment(self, ctx: RunContext) -> dict[str, str]:
        session = self.sessions.pop(0) if self.sessions else ""
        return {"PATH": "/usr/bin:/bin", "FAKE_KEY": ctx.gateway_key, "FAKE_MODE": self.mode, "FAKE_SESSION": session}

    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        return [str(self.binary()), *(["--resume", resume] if resume else ["--new"]), "--", turn.user_text]

    def session_from_output(self, stdout: Path) -> str | None:
        first = stdout.read_text(encoding="utf-8").splitlines()[0]
        session = json.loads(first)["session"]
        return session if isinstance(session, str) and session else None

    def invocation_extra(self, resume: str | None, started: float, ended: float) -> dict[str, Any]:
        return {"mode": "resume" if resume else "new", "ordered": started <= ended}

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        return NormalizedTrace([], "unavailable", False)


class ChoosingAdapter(FakeAdapter):
    """A fake that chooses its session ids (as Claude Code's adapter does) and can resume
    only sessions it has seen written."""

    name: ClassVar[str] = "fake_choosing"
    written: ClassVar[set[str]] = set()

    def new_session_id(self) -> str:
        return f"chosen-{len(self.written)}"

    def can_resume(self, ctx: RunContext, session_id: str) -> bool:
        return session_id in self.written


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "tools" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "fake-cli").write_text(FAKE, encoding="utf-8")
    (bin_dir / "fake-cli").chmod(0o755)
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv("FAKE_COUNT", str(tmp_path / "version-calls"))
    return bin_dir


def make_ctx(tmp_path: Path) -> RunContext:
    return run_context(tmp_path, url="http://127.0.0.1:9/v1")


def turn(index: int, kind: str | None = None, deadline_s: float = 30) -> TurnContext:
    boundary = SessionBoundary(kind=kind) if kind else None  # type: ignore[arg-type]
    return TurnContext(index, f"-text of turn {index}", boundary, deadline_s)


def invocation(ctx: RunContext, index: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ctx.paths.native / f"turn-{index}.invocation.json").read_text())
    return data


def test_sessions_follow_the_turns_and_the_harness_reports(tools: Path, tmp_path: Path) -> None:
    adapter, ctx = FakeAdapter(), make_ctx(tmp_path)
    adapter.sessions = ["s-1", "", "s-3", ""]
    first = adapter.run_turn(ctx, turn(1))
    second = adapter.run_turn(ctx, turn(2))  # continues the session turn 1 reported
    third = adapter.run_turn(ctx, turn(3, "new_session"))  # a declared boundary: a new session
    adapter.mode = "no-session"
    fourth = adapter.run_turn(ctx, turn(4, "new_session"))  # fresh, and reports no session
    adapter.mode = "ok"
    fifth = adapter.run_turn(ctx, turn(5))  # nothing to continue: fresh again
    assert [invocation(ctx, i)["mode"] for i in range(1, 6)] == ["new", "resume", "new", "new", "new"]
    assert invocation(ctx, 2)["argv"][1:3] == ["--resume", "s-1"]
    assert [o.session_id for o in (first, second, third, fourth, fifth)] == ["s-1", "s-1", "s-3", None, None]
    assert ctx.session_id is None


def test_an_adapter_chosen_session_is_kept_when_there_is_nothing_to_resume(tools: Path, tmp_path: Path) -> None:
    adapter, ctx = ChoosingAdapter(), make_ctx(tmp_path)
    ChoosingAdapter.written = set()
    adapter.mode = "no-session"
    first = adapter.run_turn(ctx, turn(1))
    # the first turn wrote no session: the second starts the same session afresh
    second = adapter.run_turn(ctx, turn(2))
    ChoosingAdapter.written = {"chosen-0"}
    third = adapter.run_turn(ctx, turn(3))
    assert [o.session_id for o in (first, second, third)] == ["chosen-0"] * 3
    assert [invocation(ctx, i)["mode"] for i in (1, 2, 3)] == ["new", "new", "resume"]
    assert invocation(ctx, 3)["argv"][1:3] == ["--resume", "chosen-0"]


def test_invocation_record_streams_and_exit(tools: Path, tmp_path: Path) -> None:
    adapter, ctx = FakeAdapter(), make_ctx(tmp_path)
    adapter.mode = "fail"
    outcome = adapter.run_turn(ctx, turn(1))
    assert (outcome.exit_code, outcome.timed_out, outcome.error) == (3, False, None)
    assert outcome.stdout == ctx.paths.native / "turn-1.stdout" and outcome.stderr == ctx.paths.native / "turn-1.stderr"
    assert outcome.stderr.read_text() == "fake stderr\n"
    record = invocation(ctx, 1)
    assert list(record) == ["argv", "cwd", "env", "mode", "ordered"]  # the subclass's extras last
    assert record["argv"][-2:] == ["--", "-text of turn 1"] and record["cwd"] == str(ctx.workspace)
    assert record["env"]["FAKE_KEY"] == "[REDACTED]" and record["ordered"] is True
    assert KEY not in (ctx.paths.native / "turn-1.invocation.json").read_text()


def test_a_signal_death_is_a_crash_and_a_hang_is_killed(tools: Path, tmp_path: Path) -> None:
    adapter, ctx = FakeAdapter(), make_ctx(tmp_path)
    adapter.mode = "crash"
    crashed = adapter.run_turn(ctx, turn(1))
    assert crashed.exit_code is None and crashed.error == "fake-cli was killed by SIGKILL"
    adapter.mode = "hang"
    hung = adapter.run_turn(ctx, turn(2, deadline_s=1))
    assert hung.timed_out and hung.exit_code is None and "wall clock" in (hung.error or "")
    assert (ctx.paths.native / "turn-2.invocation.json").is_file()  # recorded even for a killed turn


def test_version_is_read_once_per_adapter_class(tools: Path, tmp_path: Path) -> None:
    class Once(FakeAdapter):
        pass

    class Other(FakeAdapter):
        pass

    assert Once().version() == Once().version() == "1.2.3"
    assert (tmp_path / "version-calls").read_text() == "x"
    assert Other().version() == "1.2.3"  # its own cache
    assert (tmp_path / "version-calls").read_text() == "xx"


def test_missing_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path / "empty"))
    assert FakeAdapter().unavailable_reason() == "fake is not installed"
    with pytest.raises(FileNotFoundError, match="fake is not installed"):
        FakeAdapter().binary()


def test_credential_named_variables_are_never_in_the_invocation_record(tmp_path: Path) -> None:
    from harnesses.cli_adapter import write_invocation

    ctx = make_ctx(tmp_path)
    env = {"OPENCLAW_GATEWAY_TOKEN": "tt-oc-0123abcd", "GH_TOKEN": "ghp_x", "DB_PASSWORD": "pw",
           "SOME_API_KEY": "k", "HOME": "/h", "TOKENIZERS_PARALLELISM": "false", "EMPTY_TOKEN": ""}
    path = tmp_path / "inv.json"
    write_invocation(path, ["x"], env, ctx)
    shown = json.loads(path.read_text())["env"]
    assert {k for k, v in shown.items() if v == "[REDACTED]"} == {
        "OPENCLAW_GATEWAY_TOKEN", "GH_TOKEN", "DB_PASSWORD", "SOME_API_KEY"}
    assert shown["HOME"] == "/h" and shown["TOKENIZERS_PARALLELISM"] == "false" and shown["EMPTY_TOKEN"] == ""
    assert "tt-oc-0123abcd" not in path.read_text()
