"""E4-release-bundle-001: the staging script (refuses outside pkg/ or without the export, records
its paths); the verifier on runs made by executing the commands with bash (reference
faithful and ``persist_shell_cwd``, a persistent-cwd harness like Claude Code and one that drops
the declared persistence, Codex's per-call workdir, OpenClaw's silent declaration, steps missing,
agent mistakes); the probe policy under each declaration; the pack's metadata and selftest."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E4-release-bundle-001"
SCORE = load_module(PACK / "verifier" / "score.py", "e4_release_bundle_score")
POLICY = load_module(PACK / "probe_policy.py", "e4_release_bundle_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "e4_release_bundle_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
SHIP = TRUTH["ship"]

# The shell declarations as the gateway recorded them (descriptions as sent; parameters shortened).
REFERENCE = SELF.REFERENCE_SHELL
CLAUDE_BASH = {
    "name": "Bash",
    "description": "Executes a bash command and returns its output.\n\n- Working directory persists between calls, "
                   "but prefer absolute paths — `cd` in a compound command can trigger a permission prompt. Shell "
                   "state (env vars, functions) does not persist; the shell is initialized from the user's profile."
                   "\n- IMPORTANT: Avoid using this tool to run `cat`, `head`, `tail`, `sed`, `awk`, or `echo` "
                   "commands, unless explicitly instructed.\n- `timeout` is in milliseconds: default 120000, max "
                   "600000.\n- `run_in_background` runs the command detached: it keeps running across turns and "
                   "re-invokes you when it exits. No `&` needed.",
    "input_schema": {"type": "object", "properties": {
        "command": {"type": "string", "description": "The command to execute"},
        "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000)"},
        "run_in_background": {"type": "boolean", "description": "Set to true to run this command in the background."}}}}
CODEX_EXEC = {
    "name": "exec_command", "type": "function",
    "description": "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
    "input_schema": {"type": "object", "properties": {
        "cmd": {"type": "string", "description": "Shell command to execute."},
        "login": {"type": "boolean", "description": "True runs the shell with -l/-i semantics; false disables them. "
                                                    "Defaults to true."},
        "sandbox_permissions": {"type": "string", "description": "Per-command sandbox override. Defaults to "
                                                                 "`use_default`; use `require_escalated` for "
                                                                 "unsandboxed execution."},
        "workdir": {"type": "string", "description": "Working directory for the command. Defaults to the turn cwd."},
        "yield_time_ms": {"type": "number", "description": "Wait before yielding output. Defaults to 10000 ms; "
                                                          "effective range is 250-30000 ms."}}}}
OPENCLAW_EXEC = {
    "name": "exec", "type": "function",
    "description": "Run shell now; background continuation supported. Completed calls return command output "
                   "directly. Use process only when exec reports running with a sessionId; output text alone is not "
                   "a process handle. Long run: automatic completion wake when enabled and output/failure occurs; "
                   "otherwise process confirms completion. No sleep loops for reminders/follow-ups; use automations. "
                   "TTY CLI/UI/coding agent: pty=true.",
    "input_schema": {"type": "object", "properties": {
        "command": {"type": "string", "description": "Shell command."},
        "workdir": {"type": "string", "description": "Omit/empty string: default; whitespace-only invalid."},
        "env": {"type": "object", "description": "Literal overrides; no expansion. Omit to inherit."},
        "timeoutSeconds": {"type": "number", "description": "Process lifetime in seconds; 0 disables."}}}}


# ----------------------------------------------------------------- helpers


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    ws = tmp_path / name
    shutil.copytree(PACK / "workspace", ws)
    return ws


def ctx(ws: Path, events: list[Any], gateway: list[dict[str, Any]]) -> VerifierContext:
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def verdicts(c: VerifierContext) -> dict[str, Any]:
    out = SCORE.score(c)
    assert set(out) == {H1, H2, A1, A2}
    return out


def state(c: VerifierContext) -> dict[str, bool | None]:
    return {k: v[0] for k, v in verdicts(c).items()}


def probe_run(tmp_path: Path, decl: dict[str, Any], *, leak_cwd: bool, name: str = "ws",
              key: str = "command", shown: str | None = None) -> tuple[Path, list[Any], VerifierContext]:
    """Drive the probe policy with a harness that declares ``decl`` (the policy is shown
    ``shown``, default the top-level description) and runs calls afresh or (``leak_cwd``) where
    the previous one ended; return the workspace, the actions and the verifier context."""
    ws = workspace(tmp_path, name)
    sh = SELF.Shell(ws, leak_cwd=leak_cwd)
    ran: list[tuple[str, str, int]] = []

    def respond(action: Any) -> Observation:
        assert isinstance(action, Shell), action
        content, code = sh.run(action.command)
        ran.append((action.command, content, code))
        return Observation(text=content, is_error=code != 0)

    view = TurnView(tool_names=(decl["name"],),
                    tool_descriptions=((decl["name"], decl["description"] if shown is None else shown),))
    actions = drive(POLICY, Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"), view=view), respond)
    events = [SELF._tool(i, f"call_{i}", cmd, content, code, name=decl["name"], key=key)
              for i, (cmd, content, code) in enumerate(ran, start=1)]
    results = [{"id": e.tool_call.id, "is_error": e.tool_result.is_error, "content": e.tool_result.content}
               for e in events]
    gateway = [{"index": i, "status": 200, "error": None, "wire_format": "chat", "tools": [decl],
                "tool_results": results[:i]} for i in range(len(results) + 1)]
    return ws, actions, ctx(ws, events, gateway)


def manual_run(tmp_path: Path, commands: list[str], *, leak_cwd: bool = False, decl: dict[str, Any] | None = None,
               name: str = "ws") -> VerifierContext:
    ws = workspace(tmp_path, name)
    d = decl or REFERENCE
    events, gateway = SELF.run_commands(ws, commands, leak_cwd=leak_cwd, name=d["name"], declaration=d)
    return ctx(ws, events, gateway)


FILES = " ".join(SHIP)
PACK_ROOT = (f'{POLICY.CHECK}; mkdir -p dist && tar -czf dist/bundle.tar.gz -C pkg {FILES} '
             f"&& (cd pkg && sha256sum {FILES}) > dist/MANIFEST")


# ----------------------------------------------------------------- the staging script


def test_stage_refuses_outside_pkg(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = subprocess.run(["bash", "-c", "export STAGE_MODE=release && ./pkg/stage.sh"], cwd=ws, capture_output=True,
                         text=True, check=False)
    assert run.returncode == 2 and "inside pkg/" in run.stderr and not (ws / ".stage").exists()


def test_stage_refuses_without_release_mode(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = subprocess.run(["bash", "-c", "cd pkg && ./stage.sh"], cwd=ws, capture_output=True, text=True, check=False)
    assert run.returncode == 3 and "STAGE_MODE" in run.stderr and not (ws / ".stage").exists()


def test_stage_lists_the_shipped_files_and_records_its_paths(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = subprocess.run(["bash", "-c", POLICY.STAGE], cwd=ws, capture_output=True, text=True, check=True)
    assert POLICY.ship_list(run.stdout) == SHIP
    assert POLICY.CHECKED_RE.search(run.stdout).group(1) == str((ws / "pkg").resolve())
    (rec,) = [json.loads(line) for line in (ws / ".stage" / "stage.jsonl").read_text().splitlines()]
    assert rec["pkg_dir"] == str((ws / "pkg").resolve()) and rec["root"] == str(ws.resolve())
    assert rec["files"] == SHIP
    before = {p.relative_to(PACK / "workspace") for p in (PACK / "workspace" / "pkg").rglob("*")}
    assert {p.relative_to(ws) for p in (ws / "pkg").rglob("*")} == before  # writes nothing under pkg/


def test_stage_is_executable_and_ships_no_tests() -> None:
    assert (PACK / "workspace" / "pkg" / "stage.sh").stat().st_mode & 0o111
    assert all((PACK / "workspace" / "pkg" / f).is_file() for f in SHIP)
    assert not any(f.startswith("tests/") or f == "stage.sh" for f in SHIP)


# ----------------------------------------------------------------- harness layer (probe runs)


def test_reference_faithful_passes(tmp_path: Path) -> None:
    _, actions, c = probe_run(tmp_path, REFERENCE, leak_cwd=False)
    assert [type(a) for a in actions] == [Shell, Shell, Final]
    assert "-C pkg" in actions[1].command and " dist/bundle.tar.gz" in actions[1].command
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}


def test_persist_shell_cwd_fails_h1_a1_a2(tmp_path: Path) -> None:
    ws, actions, c = probe_run(tmp_path, REFERENCE, leak_cwd=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: True, A1: False, A2: False}
    assert "(pkg/)" in out[H1][1] and "pkg/dist/ exists" in out[A2][1]
    assert "Packaging failed" in actions[-1].text and "Warning" in actions[-1].text
    assert (ws / "pkg" / "dist").is_dir() and not (ws / "dist").exists()


def test_claude_code_persistent_cwd_passes(tmp_path: Path) -> None:
    """Claude Code declares that the working directory persists (and env vars do not): the next
    call starts in pkg/, and the probe writes ../dist."""
    _, actions, c = probe_run(tmp_path, CLAUDE_BASH, leak_cwd=True)
    assert "../dist/bundle.tar.gz" in actions[1].command
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "persists" in out[H1][1]


def test_declared_persistence_dropped_fails_h1_a1_a2(tmp_path: Path) -> None:
    """The opposite defect: a tool that declares the cwd persists but starts every call afresh."""
    ws, _, c = probe_run(tmp_path, CLAUDE_BASH, leak_cwd=False)
    assert state(c) == {H1: False, H2: True, A1: False, A2: False}
    assert not (ws / "dist" / "bundle.tar.gz").is_file()


def test_codex_per_call_workdir_is_judged_from_the_parameter(tmp_path: Path) -> None:
    """The probe is shown only the description (neither) and uses absolute paths; the verifier
    reads the workdir parameter (each call defaults to the turn cwd) and judges H1; env unscored."""
    _, actions, c = probe_run(tmp_path, CODEX_EXEC, leak_cwd=False, key="cmd")
    assert re.search(r"tar -czf /\S+/dist/bundle\.tar\.gz -C /\S+/pkg", actions[1].command)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: None, A1: True, A2: True}, out
    assert "says neither" in out[H2][1]


def test_codex_leaking_cwd_fails_h1_but_absolute_paths_deliver(tmp_path: Path) -> None:
    _, _, c = probe_run(tmp_path, CODEX_EXEC, leak_cwd=True, key="cmd")
    assert state(c) == {H1: False, H2: None, A1: True, A2: True}


@pytest.mark.parametrize("leak", [False, True])
def test_openclaw_says_neither_leaves_h1_h2_unscored(tmp_path: Path, leak: bool) -> None:
    _, _, c = probe_run(tmp_path, OPENCLAW_EXEC, leak_cwd=leak)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: True, A2: True}, out
    assert "says neither" in out[H1][1]


def test_exports_carried_against_the_declaration_fail_h2(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, [POLICY.STAGE, PACK_ROOT])
    shown = events[1].tool_result.content.replace("STAGE_MODE=unset", "STAGE_MODE=release")
    for req in gateway:
        for r in req["tool_results"]:
            if r["id"] == "call_2":
                r["content"] = shown
    out = verdicts(ctx(ws, events, gateway))
    assert out[H2][0] is False and "expected unset" in out[H2][1] and out[H1][0] is True


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    """The trace says the call ran at the root, but the model was shown pkg/: H1 fails."""
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, [POLICY.STAGE, PACK_ROOT])
    root = json.loads((ws / ".stage" / "stage.jsonl").read_text())["root"]
    for req in gateway:
        for r in req["tool_results"]:
            if r["id"] == "call_2":
                r["content"] = r["content"].replace(f"cwd={root}\n", f"cwd={root}/pkg\n")
    assert state(ctx(ws, events, gateway))[H1] is False


def test_check_result_never_delivered_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, [POLICY.STAGE, PACK_ROOT])
    for req in gateway:
        req["tool_results"] = [r for r in req["tool_results"] if r["id"] != "call_2"]
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and out[H2][0] is False and "never delivered" in out[H1][1]


def test_printed_line_lost_on_the_way_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, [POLICY.STAGE, PACK_ROOT])
    for req in gateway:
        for r in req["tool_results"]:
            if r["id"] == "call_2":
                r["content"] = "Exit code 0\n(no output)"
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and "no such line" in out[H1][1]


def test_staging_never_succeeded_is_not_exercised(tmp_path: Path) -> None:
    c = manual_run(tmp_path, ["cd pkg && ./stage.sh", PACK_ROOT])  # no export: stage.sh refuses
    out = verdicts(c)
    assert out[H1][0] is None and out[H2][0] is None and "never succeeded" in out[H1][1]


def test_nothing_after_the_staging_call_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.STAGE]))
    assert out[H1][0] is None and "no shell call followed" in out[H1][1]
    assert out[A1][0] is False and out[A2][0] is False


def test_a_call_that_prints_no_cwd_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.STAGE, "ls"]))
    assert out[H1][0] is None and out[H2][0] is None and "does not print" in out[H1][1]


def test_staging_without_export_leaves_h2_unscored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, ["cd pkg && STAGE_MODE=release ./stage.sh", PACK_ROOT]))
    assert out[H1][0] is True and out[H2][0] is None and "did not export" in out[H2][1]


def test_staging_call_that_moves_on_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.STAGE + " && cd ..", PACK_ROOT]))
    assert out[H1][0] is None and "changes folder" in out[H1][1]


def test_a_retried_staging_call_counts_from_the_last_one(tmp_path: Path) -> None:
    c = manual_run(tmp_path, ["cd pkg && ./stage.sh", POLICY.STAGE, PACK_ROOT])
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}


def test_undeclared_tool_is_not_exercised(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, [POLICY.STAGE, PACK_ROOT])
    for req in gateway:
        req["tools"] = []
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is None and "not declared" in out[H1][1]


# ----------------------------------------------------------------- agent layer


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _sources() -> dict[str, bytes]:
    return {f: (PACK / "workspace" / "pkg" / f).read_bytes() for f in SHIP}


def _manifest(members: dict[str, bytes]) -> str:
    return "".join(f"{SCORE.sha256(d)}  {n}\n" for n, d in members.items())


def deliver(tmp_path: Path, bundle: bytes | None, manifest: str | None) -> VerifierContext:
    ws = workspace(tmp_path)
    (ws / "dist").mkdir()
    if bundle is not None:
        (ws / "dist" / "bundle.tar.gz").write_bytes(bundle)
    if manifest is not None:
        (ws / "dist" / "MANIFEST").write_text(manifest)
    return ctx(ws, [], [])


def test_do_nothing_agent_fails_both(tmp_path: Path) -> None:
    out = verdicts(ctx(workspace(tmp_path), [], []))
    assert out[A1][0] is False and out[A2][0] is False and "missing" in out[A1][1]


def test_hand_built_bundle_with_dot_slash_names_passes(tmp_path: Path) -> None:
    src = _sources()
    c = deliver(tmp_path, _tar({f"./{n}": d for n, d in src.items()}), _manifest({f"./{n}": d for n, d in src.items()}))
    assert state(c)[A1] is True and state(c)[A2] is True


@pytest.mark.parametrize("case", ["missing", "extra", "bytes", "prefixed"])
def test_wrong_members_fail_a1(tmp_path: Path, case: str) -> None:
    src = _sources()
    members = dict(src)
    if case == "missing":
        members.pop("VERSION")
    elif case == "extra":
        members["tests/test_core.py"] = b"x"
    elif case == "bytes":
        members["VERSION"] = b"9.9.9\n"
    else:
        members = {f"pkg/{n}": d for n, d in src.items()}
    out = verdicts(deliver(tmp_path, _tar(members), _manifest(src)))
    assert out[A1][0] is False and out[A2][0] is True, out[A1]


@pytest.mark.parametrize("manifest", [None, "", "not a manifest\n", "BAD"])
def test_wrong_manifest_fails_a1(tmp_path: Path, manifest: str | None) -> None:
    src = _sources()
    text = manifest
    if manifest == "BAD":
        text = _manifest(src).replace(SCORE.sha256(src["VERSION"]), "0" * 64)
    out = verdicts(deliver(tmp_path, _tar(src), text))
    assert out[A1][0] is False and "MANIFEST" in out[A1][1]


def test_not_a_tar_fails_a1(tmp_path: Path) -> None:
    out = verdicts(deliver(tmp_path, b"not gzip", _manifest(_sources())))
    assert out[A1][0] is False and "not a gzipped tar" in out[A1][1]


@pytest.mark.parametrize("stray", ["pkg/dist/bundle.tar.gz", "pkg/VERSION", "pkg/build/", "-pkg/README.txt"])
def test_anything_under_pkg_fails_a2(tmp_path: Path, stray: str) -> None:
    src = _sources()
    c = deliver(tmp_path, _tar(src), _manifest(src))
    target = c.workspace / stray.lstrip("-")
    if stray.startswith("-"):
        target.unlink()
    elif stray.endswith("/"):
        target.mkdir()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"changed")
    out = verdicts(c)
    assert out[A2][0] is False and out[A1][0] is True, out


# ----------------------------------------------------------------- probe policy


def test_policy_reports_a_failed_staging_check() -> None:
    view = TurnView(tool_names=("shell",), tool_descriptions=(("shell", REFERENCE["description"]),))
    actions = drive(POLICY, Turn(1, "x", view=view),
                    [Observation(text="Exit code 2\nstage.sh: run me from inside pkg/", is_error=True)])
    assert [type(a) for a in actions] == [Shell, Final] and "failed" in actions[-1].text


def test_policy_without_a_shell_tool_reports_it() -> None:
    actions = drive(POLICY, Turn(1, "x"), [Observation(absent=True, kind="absent")])
    assert isinstance(actions[-1], Final) and "No shell tool" in actions[-1].text


def test_policy_embeds_no_path_or_file_name() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not any(f in text for f in SHIP) and "relay" not in text


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "shell_state_persistence", "terminal", "single")
    assert spec.calibration.mutants == {"persist_shell_cwd": [H1, A1, A2]}
    assert "shell" in spec.tools
    assert (spec.budgets.max_tool_calls, spec.budgets.max_model_calls, spec.budgets.wall_clock_s) == (8, 10, 180)


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


def test_claude_code_2_1_332_carries_after_the_succeeding_staging_call(tmp_path: Path) -> None:
    """The staging call succeeds, so under 2.1.332's rule its cd carries: the next call starts in pkg/."""
    _, actions, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332, leak_cwd=True)
    assert "../dist/bundle.tar.gz" in actions[1].command
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "as the staging call succeeded" in out[H1][1]


def test_claude_code_2_1_332_dropping_a_succeeding_cd_fails_h1(tmp_path: Path) -> None:
    _, _, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332, leak_cwd=False)
    out = verdicts(c)
    assert out[H1][0] is False and "(the workspace root)" in out[H1][1], out
