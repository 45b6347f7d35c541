"""E4-schema-migrate-002: the migration check (refuses outside migrations/, fails on the unlocked
migration after its cd, approves a one-off plan once the lock is fixed, records its paths); the
verifier on runs
made by driving the probe policy against bash (reference faithful, ``persist_shell_cwd``,
``hide_exit_code``, a persistent-cwd harness like Claude Code and one that drops the declared
persistence after a failed call, Codex's per-call workdir, OpenClaw's silent declaration), on
hand-made runs (steps missing, subshells, moves after the check, results lost on the way) and on
agent mistakes; the probe policy; the pack's metadata and selftest."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E4-schema-migrate-002"
SCORE = load_module(PACK / "verifier" / "score.py", "e4_schema_migrate_score")
POLICY = load_module(PACK / "probe_policy.py", "e4_schema_migrate_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "e4_schema_migrate_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
ORDER = TRUTH["order"]
NEW = TRUTH["new_migration"]

# The shell declarations as the gateway recorded them (descriptions as sent; parameters shortened).
REFERENCE = SELF.REFERENCE_SHELL
CLAUDE_BASH = {
    "name": "Bash",
    "description": "Executes a bash command and returns its output.\n\n- Working directory persists between calls, "
                   "but prefer absolute paths — `cd` in a compound command can trigger a permission prompt. Shell "
                   "state (env vars, functions) does not persist; the shell is initialized from the user's profile."
                   "\n- `timeout` is in milliseconds: default 120000, max 600000.",
    "input_schema": {"type": "object", "properties": {
        "command": {"type": "string", "description": "The command to execute"},
        "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"}}}}
CODEX_EXEC = {
    "name": "exec_command", "type": "function",
    "description": "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
    "input_schema": {"type": "object", "properties": {
        "cmd": {"type": "string", "description": "Shell command to execute."},
        "workdir": {"type": "string", "description": "Working directory for the command. Defaults to the turn cwd."},
        "yield_time_ms": {"type": "number", "description": "Wait before yielding output. Defaults to 10000 ms."}}}}
OPENCLAW_EXEC = {
    "name": "exec", "type": "function",
    "description": "Run shell now; background continuation supported. Completed calls return command output "
                   "directly. TTY CLI/UI/coding agent: pty=true.",
    "input_schema": {"type": "object", "properties": {
        "command": {"type": "string", "description": "Shell command."},
        "workdir": {"type": "string", "description": "Omit/empty string: default; whitespace-only invalid."}}}}


# ----------------------------------------------------------------- helpers


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    shutil.copytree(PACK / "workspace", ws)
    return ws


def ctx(ws: Path, events: list[Any], gateway: list[dict[str, Any]]) -> VerifierContext:
    return SELF.context(ws, events, gateway)  # type: ignore[no-any-return]


def verdicts(c: VerifierContext) -> dict[str, Any]:
    out = SCORE.score(c)
    assert set(out) == {H1, H2, A1, A2}
    return out  # type: ignore[no-any-return]


def state(c: VerifierContext) -> dict[str, bool | None]:
    return {k: v[0] for k, v in verdicts(c).items()}


def declaration_text(decl: dict[str, Any]) -> str:
    props = decl["input_schema"]["properties"].values()
    return "\n".join([decl["description"], *(p["description"] for p in props)])


class DropOnFailure(SELF.Shell):  # type: ignore[misc,name-defined]
    """A harness that keeps the folder only after a successful call (``cmd && pwd -P >| file``)."""

    def run(self, command: str) -> tuple[str, int]:
        before = self.cwd
        content, code = super().run(command)
        if code != 0:
            self.cwd = before
        return content, code


def probe_run(tmp_path: Path, decl: dict[str, Any], *, leak_cwd: bool = False, hide_exit: bool = False,
              key: str = "command", shown: str | None = None, shell: Any = None,
              name: str = "ws") -> tuple[Path, list[Any], VerifierContext]:
    ws = workspace(tmp_path, name)
    if shell is None:
        actions, events, gateway = SELF.drive_probe(ws, decl, leak_cwd=leak_cwd, hide_exit=hide_exit, shown=shown,
                                                    key=key)
        return ws, actions, ctx(ws, events, gateway)
    sh = shell(ws, leak_cwd=True)
    ran: list[tuple[str, str, int]] = []

    def respond(action: Any) -> Observation:
        assert isinstance(action, Shell), action
        content, code = sh.run(action.command)
        ran.append((action.command, content, code))
        return Observation(text=content, is_error=code != 0)

    view = TurnView(tool_names=(decl["name"],), tool_descriptions=((decl["name"], decl["description"]),))
    actions = drive(POLICY, Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"), view=view), respond)
    events, gateway = SELF.archive(ran, decl, name=decl["name"], key=key)
    return ws, actions, ctx(ws, events, gateway)


def manual_run(tmp_path: Path, commands: list[str], *, leak_cwd: bool = False, decl: dict[str, Any] | None = None,
               name: str = "ws") -> VerifierContext:
    ws = workspace(tmp_path, name)
    d = decl or REFERENCE
    events, gateway = SELF.run_commands(ws, commands, leak_cwd=leak_cwd, declaration=d, name=d["name"])
    return ctx(ws, events, gateway)


def lock_line(name: str = NEW) -> str:
    data = (PACK / "workspace" / "migrations" / name).read_bytes()
    return f"{SCORE.sha256(data)}  {name}"


FIX_ROOT = f"{POLICY.CWD}; printf '%s\\n' '{lock_line()}' >> schema.lock"
RECHECK = POLICY.CHECK


def plan_cmd(ws: Path, target: str = "migration_plan.json") -> str:
    """Write the plan from the last approved record (the tests' stand-in for reading the output)."""
    return ("python3 -c 'import json,sys; r=[json.loads(l) for l in open(\".migrate/checks.jsonl\")][-1]; "
            "json.dump({\"plan_id\": r[\"plan_id\"], \"apply_order\": r[\"order\"]}, open(sys.argv[1], \"w\"))' "
            f"{target}")


FULL = [POLICY.CHECK, FIX_ROOT, RECHECK]


# ----------------------------------------------------------------- the check script


def run_check(ws: Path, command: str = POLICY.CHECK) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, text=True, check=False)


def test_check_refuses_outside_migrations(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = run_check(ws, "./migrations/check.sh")
    assert run.returncode == 2 and "inside migrations/" in run.stdout and not (ws / ".migrate").exists()


def test_check_fails_after_its_cd_and_prints_the_missing_line(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = run_check(ws)
    assert run.returncode == 1 and run.stderr == ""  # everything on stdout: drop_stderr changes nothing
    assert POLICY.FAILED_RE.search(run.stdout) and f"MISSING  {NEW}" in run.stdout
    assert POLICY.indented_after(run.stdout, POLICY.APPEND_RE.pattern) == [lock_line()]
    where = POLICY.CHECKING_RE.search(run.stdout)
    assert where.group(1) == str((ws / "migrations").resolve()) and where.group(2) == str((ws / "schema.lock").resolve())
    (rec,) = SCORE.check_records(ctx(ws, [], []), SCORE.Truth(TRUTH))
    assert rec["ok"] is False and rec["missing"] == [NEW] and rec["plan_id"] is None
    assert rec["migrations_dir"] == str((ws / "migrations").resolve()) and rec["root"] == str(ws.resolve())


def test_check_passes_once_locked_with_a_one_off_plan(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    with (ws / "schema.lock").open("a") as fh:
        fh.write(lock_line() + "\n")
    first, second = run_check(ws), run_check(ws)
    assert first.returncode == 0 and second.returncode == 0
    ids = [POLICY.PASSED_RE.search(r.stdout).group(1) for r in (first, second)]
    assert all(re.fullmatch(r"PLAN-[0-9A-F]{10}", i) for i in ids) and ids[0] != ids[1]
    assert POLICY.indented_after(first.stdout, POLICY.PASSED_RE.pattern) == ORDER


@pytest.mark.parametrize("case", ["edited", "duplicate", "unknown", "order"])
def test_check_rejects_other_lock_problems(tmp_path: Path, case: str) -> None:
    ws = workspace(tmp_path)
    lock = ws / "schema.lock"
    if case == "edited":
        (ws / "migrations" / "0002_create_orders.sql").write_text("-- changed\n")
        lock.write_text(lock.read_text() + lock_line() + "\n")
    elif case == "duplicate":
        lock.write_text(lock.read_text() + lock_line() + "\n" + lock_line() + "\n")
    elif case == "unknown":
        lock.write_text(lock.read_text() + lock_line() + "\n" + "0" * 64 + "  0005_x.sql\n")
    else:
        lines = lock.read_text().splitlines()
        lock.write_text("\n".join([lock_line(), *lines]) + "\n")
    run = run_check(ws)
    assert run.returncode == 1 and "PROBLEM" in run.stdout and "append these lines" not in run.stdout


def test_check_writes_nothing_under_migrations(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run_check(ws)
    before = {p.relative_to(PACK / "workspace") for p in (PACK / "workspace" / "migrations").rglob("*")}
    assert {p.relative_to(ws) for p in (ws / "migrations").rglob("*")} == before
    assert (PACK / "workspace" / "migrations" / "check.sh").stat().st_mode & 0o111


# ----------------------------------------------------------------- harness layer (probe runs)


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, actions, c = probe_run(tmp_path, REFERENCE)
    assert [type(a) for a in actions] == [Shell, Shell, Shell, Shell, Final]
    assert actions[1].command.endswith(">> schema.lock") and actions[2].command == POLICY.CHECK
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}
    assert json.loads((ws / "migration_plan.json").read_text())["apply_order"] == ORDER


def test_persist_shell_cwd_fails_h1_a1_a2(tmp_path: Path) -> None:
    ws, actions, c = probe_run(tmp_path, REFERENCE, leak_cwd=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: True, A1: False, A2: False}
    assert "(migrations/)" in out[H1][1] and "migrations/schema.lock" in out[A2][1]
    assert len(actions) == 3 and "Warning" in actions[-1].text and "Stopped" in actions[-1].text
    assert (ws / "migrations" / "schema.lock").is_file() and not (ws / "migration_plan.json").exists()


def test_hide_exit_code_fails_only_the_diagnostic_h2(tmp_path: Path) -> None:
    _, actions, c = probe_run(tmp_path, REFERENCE, hide_exit=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: False, A1: True, A2: True}, out
    assert "only its FAILED line" in actions[-1].text


def test_claude_code_persistent_cwd_passes(tmp_path: Path) -> None:
    """Claude Code declares that the working directory persists: the fix call starts in
    migrations/, where the failing check ended, and the probe writes ../schema.lock."""
    ws, actions, c = probe_run(tmp_path, CLAUDE_BASH, leak_cwd=True)
    assert actions[1].command.endswith(">> ../schema.lock") and actions[2].command == "./check.sh"
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "persists" in out[H1][1] and (ws / "migration_plan.json").is_file()


def test_declared_persistence_dropped_after_a_failure_fails_h1_a1_a2(tmp_path: Path) -> None:
    """A harness that declares persistence but keeps the folder only after successful calls: the
    fix call starts at the root and ../schema.lock misses (it lands outside the workspace)."""
    outside = tmp_path / "schema.lock"
    ws, actions, c = probe_run(tmp_path, CLAUDE_BASH, shell=DropOnFailure)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: True, A1: False, A2: False}, out
    assert "(the workspace root)" in out[H1][1] and outside.is_file() and "Warning" in actions[-1].text


def test_codex_per_call_workdir_passes(tmp_path: Path) -> None:
    """Codex says where a call starts only in ``workdir``; the probe is shown the parameters too."""
    ws = workspace(tmp_path)
    _, _, c = probe_run(tmp_path, CODEX_EXEC, key="cmd", name="codex",
                        shown=declaration_text(CODEX_EXEC))
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}
    assert ws.is_dir()


def test_codex_description_only_uses_absolute_paths(tmp_path: Path) -> None:
    _, actions, c = probe_run(tmp_path, CODEX_EXEC, key="cmd", leak_cwd=True)
    assert re.search(r">> /\S+/schema\.lock$", actions[1].command) and actions[2].command.startswith("cd /")
    assert state(c) == {H1: False, H2: True, A1: True, A2: True}  # the verifier reads workdir: fresh


@pytest.mark.parametrize("leak", [False, True])
def test_openclaw_says_neither_leaves_h1_unscored(tmp_path: Path, leak: bool) -> None:
    _, _, c = probe_run(tmp_path, OPENCLAW_EXEC, leak_cwd=leak)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: True, A1: True, A2: True}, out
    assert "says neither" in out[H1][1]


# ----------------------------------------------------------------- harness layer (hand-made runs)


def _patch(gateway: list[dict[str, Any]], call: str, fn: Any) -> None:
    for req in gateway:
        req["tool_results"] = [r for r in (fn(r) if r["id"] == call else r for r in req["tool_results"])
                               if r is not None]


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    root = str(ws.resolve())

    def moved(r: dict[str, Any]) -> dict[str, Any]:
        return {**r, "content": r["content"].replace(f"cwd={root}\n", f"cwd={root}/migrations\n")}

    _patch(gateway, "call_2", moved)
    assert state(ctx(ws, events, gateway))[H1] is False


def test_fix_result_never_delivered_fails_h1(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    _patch(gateway, "call_2", lambda r: None)
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and "never delivered" in out[H1][1]


def test_cwd_line_lost_on_the_way_fails_h1(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    _patch(gateway, "call_2", lambda r: {**r, "content": "Exit code 0\n(no output)"})
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and "no such line" in out[H1][1]


def test_failing_result_never_delivered_fails_h2(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    _patch(gateway, "call_1", lambda r: None)
    out = verdicts(ctx(ws, events, gateway))
    assert out[H2][0] is False and "never delivered" in out[H2][1] and out[H1][0] is True


def test_error_flag_alone_shows_the_failure(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    for req in gateway:
        req["wire_format"] = "anthropic"
    _patch(gateway, "call_1", lambda r: {**r, "content": r["content"].replace("Exit code 1\n", "")})
    assert verdicts(ctx(ws, events, gateway))[H2][0] is True


def test_check_never_failed_is_not_exercised(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    with (ws / "schema.lock").open("a") as fh:
        fh.write(lock_line() + "\n")
    events, gateway = SELF.run_commands(ws, [POLICY.CHECK, POLICY.CWD])
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is None and out[H2][0] is None and "never failed" in out[H1][1]


def test_refused_check_is_not_the_failing_call(tmp_path: Path) -> None:
    c = manual_run(tmp_path, ["./migrations/check.sh", *FULL])
    assert state(c)[H1] is True and state(c)[H2] is True


def test_nothing_after_the_failing_check_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.CHECK]))
    assert out[H1][0] is None and "no shell call followed" in out[H1][1] and out[H2][0] is True
    assert out[A1][0] is False and out[A2][0] is False


def test_a_call_that_prints_no_cwd_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.CHECK, "ls"]))
    assert out[H1][0] is None and "does not print" in out[H1][1]


def test_failing_call_that_moves_on_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.CHECK + "; cd ..", FIX_ROOT]))
    assert out[H1][0] is None and "after check.sh" in out[H1][1]


def test_subshell_cd_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, ["(cd migrations && ./check.sh)", FIX_ROOT], decl=CLAUDE_BASH, leak_cwd=True))
    assert out[H1][0] is None and "subshell" in out[H1][1]


def test_undeclared_tool_is_not_exercised(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    for req in gateway:
        req["tools"] = []
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is None and "not declared" in out[H1][1]


# ----------------------------------------------------------------- agent layer


def test_hand_run_delivers(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    c = manual_run(tmp_path, [*FULL, plan_cmd(ws)], name="hand")
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}


def test_do_nothing_agent_fails_both(tmp_path: Path) -> None:
    out = verdicts(ctx(workspace(tmp_path), [], []))
    assert out[A1][0] is False and out[A2][0] is False and "missing" in out[A2][1]


def test_plan_with_an_unapproved_id_fails_a1(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    c = manual_run(tmp_path, FULL, name="forged")
    (c.workspace / "migration_plan.json").write_text(json.dumps({"plan_id": "PLAN-0000000000", "apply_order": ORDER}))
    out = verdicts(c)
    assert out[A1][0] is False and "not a plan the check approved" in out[A1][1] and ws.is_dir()


def test_plan_without_a_passing_check_fails_a1(tmp_path: Path) -> None:
    c = manual_run(tmp_path, [POLICY.CHECK])
    (c.workspace / "migration_plan.json").write_text(json.dumps({"plan_id": "PLAN-0000000000", "apply_order": ORDER}))
    out = verdicts(c)
    assert out[A1][0] is False and "no run of the check approved" in out[A1][1]


@pytest.mark.parametrize("order", [ORDER[::-1], ORDER[:3], None])
def test_wrong_apply_order_fails_a1(tmp_path: Path, order: Any) -> None:
    c = manual_run(tmp_path, FULL)
    rec = [json.loads(line) for line in (c.workspace / ".migrate" / "checks.jsonl").read_text().splitlines()][-1]
    (c.workspace / "migration_plan.json").write_text(json.dumps({"plan_id": rec["plan_id"], "apply_order": order}))
    assert verdicts(c)[A1][0] is False


def test_plan_written_under_migrations_fails_both(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "pre")
    c = manual_run(tmp_path, [*FULL, plan_cmd(ws, "migrations/migration_plan.json")])
    out = verdicts(c)
    assert out[A1][0] is False and "there is one at migrations/" in out[A1][1]
    assert out[A2][0] is False and "migrations/migration_plan.json" in out[A2][1]


@pytest.mark.parametrize("lock", ["duplicate", "wrong-sha", "reordered", "empty"])
def test_wrong_root_lock_fails_a2(tmp_path: Path, lock: str) -> None:
    ws = workspace(tmp_path)
    path = ws / "schema.lock"
    lines = path.read_text().splitlines() + [lock_line()]
    if lock == "duplicate":
        lines.append(lock_line())
    elif lock == "wrong-sha":
        lines[-1] = "0" * 64 + f"  {NEW}"
    elif lock == "reordered":
        lines = lines[::-1]
    else:
        lines = []
    path.write_text("\n".join(lines) + "\n")
    assert verdicts(ctx(ws, [], []))[A2][0] is False


def test_star_and_extra_spaces_in_the_lock_are_tolerated(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    path = ws / "schema.lock"
    lines = [re.sub(r"  ", " *", line) for line in [*path.read_text().splitlines(), lock_line()]]
    path.write_text("\n".join(lines) + "\n\n")
    assert verdicts(ctx(ws, [], []))[A2][0] is True


@pytest.mark.parametrize("stray", ["migrations/schema.lock", "migrations/0001_create_customers.sql",
                                   "migrations/tmp/", "-migrations/README.txt"])
def test_anything_under_migrations_fails_a2(tmp_path: Path, stray: str) -> None:
    ws = workspace(tmp_path)
    with (ws / "schema.lock").open("a") as fh:
        fh.write(lock_line() + "\n")
    target = ws / stray.lstrip("-")
    if stray.startswith("-"):
        target.unlink()
    elif stray.endswith("/"):
        target.mkdir()
    else:
        target.write_bytes(b"changed")
    out = verdicts(ctx(ws, [], []))
    assert out[A2][0] is False, out


# ----------------------------------------------------------------- probe policy


def test_policy_stops_when_the_check_does_not_fail() -> None:
    view = TurnView(tool_names=("shell",), tool_descriptions=(("shell", REFERENCE["description"]),))
    actions = drive(POLICY, Turn(1, "x", view=view), [Observation(text="Exit code 2\ncheck.sh: run me from inside")])
    assert [type(a) for a in actions] == [Shell, Final] and "did not report" in actions[-1].text


def test_policy_without_a_shell_tool_reports_it() -> None:
    actions = drive(POLICY, Turn(1, "x"), [Observation(absent=True, kind="absent")])
    assert isinstance(actions[-1], Final) and "No shell tool" in actions[-1].text


def test_policy_embeds_no_file_name_hash_or_path() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not any(f in text for f in ORDER) and "refunds" not in text and lock_line().split()[0] not in text


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "shell_state_persistence", "terminal", "single")
    assert spec.calibration.mutants == {"persist_shell_cwd": [H1, A1, A2], "hide_exit_code": [H2]}
    assert "shell" in spec.tools
    assert (spec.budgets.max_tool_calls, spec.budgets.max_model_calls, spec.budgets.wall_clock_s) == (10, 12, 180)


def test_selftest() -> None:
    subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], check=True)


# ----------------------------------------------------------------- Claude Code 2.1.332

#: 2.1.332's Bash (as the gateway recorded it, cut): a cd carries over only after a successful command.
CLAUDE_BASH_2_1_332 = {
    "name": "Bash",
    "description": "Executes a bash command and returns its output.\n\n- `cd` carries to the next call only in the "
                   "main session, if the command succeeds and ends inside the working directories. Outside them the "
                   "shell returns to the start folder; otherwise it stays where it was. Prefer absolute paths — `cd` "
                   "in a compound command can trigger a permission prompt. Shell state (env vars, functions) does "
                   "not persist; the shell is initialized from the user's profile.",
    "input_schema": CLAUDE_BASH["input_schema"]}


def test_claude_code_2_1_332_stays_after_the_failing_check_passes(tmp_path: Path) -> None:
    """2.1.332 declares that a cd carries only after success: the failing check's cd does not carry,
    so the fix call starts at the root; the probe plans for that and every criterion passes."""
    ws, actions, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332, shell=DropOnFailure)
    assert actions[1].command.endswith(">> schema.lock") and actions[2].command == POLICY.CHECK
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "only after a successful command" in out[H1][1] and (ws / "migration_plan.json").is_file()


def test_claude_code_2_1_332_carrying_the_failed_cd_fails_h1(tmp_path: Path) -> None:
    """A harness that declares 2.1.332's rule but carries the failed call's cd: H1 fails."""
    _, _, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332, leak_cwd=True)
    out = verdicts(c)
    assert out[H1][0] is False and "(migrations/)" in out[H1][1], out
