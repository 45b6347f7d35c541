"""E4-invoice-run-003: the sourced setup script (refuses to be run as a program or sourced from
elsewhere, enters batch/ itself, exports a one-off run id, records its paths, prints on stdout
only); the verifier on runs made by driving the probe policy against bash (reference faithful,
``persist_shell_cwd``, ``hide_exit_code``, a persistent-cwd harness like Claude Code and one that
drops the declared persistence, a persistent-session declaration that keeps or drops the
variables, exports carried against the declaration, Codex's per-call workdir, OpenClaw's silent
declaration), on hand-made runs (steps missing, the script run or sourced in a subshell, moves and
variable changes around the check, results lost on the way) and on agent mistakes; the probe
policy; the pack's metadata and selftest."""

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

TASKS = Path(__file__).resolve().parents[2] / "tasks"
PACK = TASKS / "E4-invoice-run-003"
SCORE = load_module(PACK / "verifier" / "score.py", "e4_invoice_run_score")
POLICY = load_module(PACK / "probe_policy.py", "e4_invoice_run_policy")
SELF = load_module(PACK / "verifier" / "selftest.py", "e4_invoice_run_selftest")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
FILES = TRUTH["files"]
#: The totals of the invoiced files, worked out by hand from workspace/batch/orders/*.csv.
TOTALS = {"acme-tools": 55838, "borealis-foods": 35950, "cobalt-marine": 199800}

# The shell declarations as the gateway recorded them (descriptions as sent; parameters shortened).
REFERENCE = SELF.REFERENCE_SHELL
CLAUDE_BASH = {
    "name": "Bash",
    "description": "Executes a bash command and returns its output.\n\n- Working directory persists between calls, "
                   "but prefer absolute paths — `cd` in a compound command can trigger a permission prompt. Shell "
                   "state (env vars, functions) does not persist; the shell is initialized from the user's profile."
                   "\n- IMPORTANT: Avoid using this tool to run `cat`, `head`, `tail`, `sed`, `awk`, or `echo` "
                   "commands, unless explicitly instructed.\n- `timeout` is in milliseconds: default 120000, max "
                   "600000.",
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
        "workdir": {"type": "string", "description": "Omit/empty string: default; whitespace-only invalid."},
        "env": {"type": "object", "description": "Literal overrides; no expansion. Omit to inherit."}}}}
#: A harness declaring a persistent session: the folder and the variables carry over.
SESSION = {"name": "terminal", "type": "function",
           "description": "Run a command in a persistent shell session shared by every call.",
           "input_schema": {"type": "object", "properties": {"command": {"type": "string", "description": "Command."}}}}


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


def params(decl: dict[str, Any]) -> list[tuple[str, str]]:
    return [(k, v["description"]) for k, v in decl["input_schema"]["properties"].items()]


def probe_run(tmp_path: Path, decl: dict[str, Any], *, name: str = "ws", key: str = "command",
              shown_params: bool = True, **shell_kw: Any) -> tuple[Path, list[Any], VerifierContext]:
    """Drive the probe policy with a harness that declares ``decl`` (the policy is shown its
    description and, with ``shown_params``, its parameters' descriptions)."""
    ws = workspace(tmp_path, name)
    actions, events, gateway = SELF.drive_probe(ws, decl, key=key, parameters=params(decl) if shown_params else None,
                                                **shell_kw)
    return ws, actions, ctx(ws, events, gateway)


def manual_run(tmp_path: Path, commands: list[str], *, decl: dict[str, Any] | None = None, name: str = "ws",
               **shell_kw: Any) -> VerifierContext:
    ws = workspace(tmp_path, name)
    d = decl or REFERENCE
    events, gateway = SELF.run_commands(ws, commands, declaration=d, name=d["name"], **shell_kw)
    return ctx(ws, events, gateway)


def sheet_at_root() -> str:
    """A sheet call for a harness that starts every call at the root; it reads the run id from the log."""
    return (f"{POLICY.CHECK}; mkdir -p out && python3 -c 'import json,sys; r=[json.loads(l) for l in "
            "open(\".activate/activate.jsonl\")][-1]; "
            f"t={json.dumps(TOTALS)}; "
            "open(\"out/invoices.csv\",\"w\").write(\"run,customer,total_cents\\n\"+\"\".join("
            "f\"{r[chr(114)+chr(117)+chr(110)+chr(95)+chr(105)+chr(100)]},{c},{v}\\n\" for c,v in t.items()))'")


def write_sheet(ws: Path, lines: list[str] | None = None, *, run: str | None = None, where: str = "out") -> None:
    if run is None:
        recs = (ws / ".activate" / "activate.jsonl").read_text().splitlines()
        run = json.loads(recs[-1])["run_id"]
    body = lines if lines is not None else ["run,customer,total_cents", *(f"{run},{c},{t}" for c, t in TOTALS.items())]
    (ws / where).mkdir(parents=True, exist_ok=True)
    (ws / where / "invoices.csv").write_text("\n".join(body) + "\n")


def _patch(gateway: list[dict[str, Any]], call: str, fn: Any) -> None:
    for req in gateway:
        req["tool_results"] = [r for r in (fn(r) if r["id"] == call else r for r in req["tool_results"])
                               if r is not None]


# ----------------------------------------------------------------- the setup script


def found(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m is not None, (pattern, text[:300])
    return m.group(1)


def sh(ws: Path, command: str, shell: str = "bash", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shell, "-c", command], cwd=cwd or ws, capture_output=True, text=True, check=False)


def test_activate_refuses_to_be_run_as_a_program(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = sh(ws, "bash tools/activate.sh")
    assert run.returncode == 2 and "source me" in run.stdout and not (ws / ".activate").exists()
    assert not (PACK / "workspace" / "tools" / "activate.sh").stat().st_mode & 0o111  # sourced, never executed


@pytest.mark.parametrize("shell", ["bash", "dash"])
def test_activate_sourced_enters_batch_and_exports_a_one_off_run(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    ws = workspace(tmp_path)
    run = sh(ws, f'{POLICY.SETUP}; echo "rc=$?"; echo "where=$(pwd -P)"; echo "var=$INVOICE_RUN"', shell)
    assert run.stderr == "" and "rc=0" in run.stdout  # everything on stdout: drop_stderr changes nothing
    assert f"where={(ws / 'batch').resolve()}" in run.stdout
    run_id = found(POLICY.RUN_RE, run.stdout)
    assert re.fullmatch(r"RUN-[0-9A-F]{10}", run_id) and f"var={run_id}" in run.stdout
    assert found(POLICY.ENTERED_RE, run.stdout) == str((ws / "batch").resolve())
    assert POLICY.order_files(run.stdout) == FILES and "on hold, not invoiced: delta-print" in run.stdout
    (rec,) = SCORE.activations(ctx(ws, [], []), SCORE.Truth(TRUTH))
    assert rec == {"batch_dir": str((ws / "batch").resolve()), "root": str(ws.resolve()), "run_id": run_id,
                   "var": "INVOICE_RUN", "files": FILES, "held": ["delta-print"]}


def test_activate_draws_a_new_run_each_time(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    ids = [found(POLICY.RUN_RE, sh(ws, POLICY.SETUP).stdout) for _ in range(2)]
    assert ids[0] != ids[1] and len(SCORE.activations(ctx(ws, [], []), SCORE.Truth(TRUTH))) == 2


def test_activate_sourced_from_batch_with_bash_finds_the_root(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    run = sh(ws, ". ../tools/activate.sh; pwd -P", cwd=ws / "batch")
    assert run.stdout.strip().endswith(str((ws / "batch").resolve())) and "invoice run RUN-" in run.stdout


def test_activate_without_bash_must_be_sourced_from_the_root(tmp_path: Path) -> None:
    if shutil.which("dash") is None:
        pytest.skip("no dash")
    ws = workspace(tmp_path)
    run = sh(ws, '. ../tools/activate.sh; echo "rc=$? where=$(pwd -P)"', "dash", cwd=ws / "batch")
    assert "rc=2" in run.stdout and "from the workspace root" in run.stdout and not (ws / ".activate").exists()


def test_activate_writes_nothing_under_batch_and_sets_no_trap(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    sh(ws, POLICY.SETUP)
    before = {p.relative_to(PACK / "workspace") for p in (PACK / "workspace" / "batch").rglob("*")}
    assert {p.relative_to(ws) for p in (ws / "batch").rglob("*")} == before
    # a trap of its own would replace the harness's EXIT trap (persist_shell_cwd records the folder with one)
    assert "trap" not in (PACK / "workspace" / "tools" / "activate.sh").read_text()


def test_totals_of_the_baseline() -> None:
    got = SCORE.totals(ctx(PACK / "workspace", [], []), SCORE.Truth(TRUTH))
    assert dict(got) == TOTALS and [c for c, _ in got] == list(TOTALS)


# ----------------------------------------------------------------- harness layer (probe runs)


def test_reference_faithful_passes(tmp_path: Path) -> None:
    ws, actions, c = probe_run(tmp_path, REFERENCE)
    assert [type(a) for a in actions] == [Shell, Shell, Final] and actions[0].command == POLICY.SETUP
    assert " batch/orders/acme-tools.csv" in actions[1].command and "> out/invoices.csv" in actions[1].command
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}
    rows = (ws / "out" / "invoices.csv").read_text().splitlines()
    assert rows[0] == TRUTH["header"] and [r.split(",", 1)[1] for r in rows[1:]] == [f"{k},{v}" for k, v in TOTALS.items()]


def test_persist_shell_cwd_fails_h1_a1_a2_and_keeps_h2(tmp_path: Path) -> None:
    ws, actions, c = probe_run(tmp_path, REFERENCE, leak_cwd=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: False, H2: True, A1: False, A2: False}
    assert "(batch/)" in out[H1][1] and "INVOICE_RUN=unset" in out[H2][1]
    assert "there is one at batch/out/invoices.csv" in out[A1][1] and "batch/out/" in out[A2][1]
    assert "failed" in actions[-1].text and "Warning" in actions[-1].text
    assert (ws / "batch" / "out").is_dir() and not (ws / "out").exists()


def test_hide_exit_code_flips_nothing(tmp_path: Path) -> None:
    _, actions, c = probe_run(tmp_path, REFERENCE, hide_exit=True)
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}
    assert "Warning" not in actions[-1].text


def test_claude_code_persistent_cwd_fresh_env_passes(tmp_path: Path) -> None:
    """Claude Code: the folder persists, variables do not. The sheet call starts in batch/, where the
    sourced script left the shell, without INVOICE_RUN; the probe writes ../out/invoices.csv."""
    _, actions, c = probe_run(tmp_path, CLAUDE_BASH, leak_cwd=True)
    assert "> ../out/invoices.csv" in actions[1].command and " orders/acme-tools.csv" in actions[1].command
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "persists" in out[H1][1] and "(batch/)" in out[H1][1] and "expected unset" in out[H2][1]


def test_declared_persistence_dropped_fails_h1_a1_a2(tmp_path: Path) -> None:
    """The opposite defect: the tool declares the folder persists but starts every call at the root:
    ../out lands outside the workspace."""
    _, actions, c = probe_run(tmp_path, CLAUDE_BASH)
    assert state(c) == {H1: False, H2: True, A1: False, A2: False}
    assert (tmp_path / "out" / "invoices.csv").exists() and "Warning" in actions[-1].text


def test_persistent_session_keeping_everything_passes(tmp_path: Path) -> None:
    _, _, c = probe_run(tmp_path, SESSION, leak_cwd=True, leak_env=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert re.search(r"INVOICE_RUN=RUN-[0-9A-F]{10} \(expected RUN-", out[H2][1])


def test_persistent_session_dropping_the_variables_fails_h2_only(tmp_path: Path) -> None:
    """The folder is kept but the exported run id is lost: H2 fails; the probe writes the run id as
    it was printed, so the sheet is right (an agent using $INVOICE_RUN would fail A1: link H2 → A1)."""
    _, _, c = probe_run(tmp_path, SESSION, leak_cwd=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: False, A1: True, A2: True}, out
    assert "printed INVOICE_RUN=unset (expected RUN-" in out[H2][1]


def test_exports_carried_against_the_declaration_fail_h2_only(tmp_path: Path) -> None:
    _, _, c = probe_run(tmp_path, REFERENCE, leak_env=True)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: False, A1: True, A2: True}, out
    assert "(expected unset)" in out[H2][1]


def test_agent_using_the_dropped_variable_is_a_linked_failure(tmp_path: Path) -> None:
    """A model that trusts a persistent-session declaration and writes "$INVOICE_RUN": the harness
    dropped it, so H2 and A1 fail together (the declared link H2 → A1)."""
    ws = workspace(tmp_path)
    rows = " && ".join(f"echo \"$INVOICE_RUN,{c},{t}\"" for c, t in TOTALS.items())
    sheet = f"{POLICY.CHECK}; mkdir -p ../out && {{ echo run,customer,total_cents && {rows}; }} > ../out/invoices.csv"
    events, gateway = SELF.run_commands(ws, [POLICY.SETUP, sheet], declaration=SESSION, name="terminal", leak_cwd=True)
    out = verdicts(ctx(ws, events, gateway))
    assert out[H2][0] is False and out[A1][0] is False and out[H1][0] is True and out[A2][0] is True
    links = {(link.harness, link.agent) for link in TASK.harness_rubric.links}
    assert (H2, A1) in links and (H1, A1) in links and (H1, A2) in links


def test_codex_per_call_workdir_passes(tmp_path: Path) -> None:
    """Codex says where a call starts only in ``workdir``; the probe is shown the parameters too."""
    _, actions, c = probe_run(tmp_path, CODEX_EXEC, key="cmd")
    assert "> out/invoices.csv" in actions[1].command
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: None, A1: True, A2: True}, out
    assert "says neither" in out[H2][1]


def test_codex_description_only_uses_absolute_paths(tmp_path: Path) -> None:
    _, actions, c = probe_run(tmp_path, CODEX_EXEC, key="cmd", shown_params=False, leak_cwd=True)
    assert re.search(r"> /\S+/out/invoices\.csv$", actions[1].command)
    assert state(c) == {H1: False, H2: None, A1: True, A2: True}  # the verifier reads workdir: fresh


@pytest.mark.parametrize("leak", [False, True])
def test_openclaw_says_neither_leaves_h1_h2_unscored(tmp_path: Path, leak: bool) -> None:
    _, _, c = probe_run(tmp_path, OPENCLAW_EXEC, leak_cwd=leak)
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: None, H2: None, A1: True, A2: True}, out
    assert "says neither" in out[H1][1] and "says neither" in out[H2][1]


# ----------------------------------------------------------------- harness layer (hand-made runs)


FULL = [POLICY.SETUP, sheet_at_root()]


def test_hand_run_delivers(tmp_path: Path) -> None:
    assert state(manual_run(tmp_path, FULL)) == {H1: True, H2: True, A1: True, A2: True}


def test_source_keyword_is_the_setup_step_too(tmp_path: Path) -> None:
    assert state(manual_run(tmp_path, ["source tools/activate.sh", sheet_at_root()])) == {
        H1: True, H2: True, A1: True, A2: True}


def test_gateway_not_trace_decides(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    root = str(ws.resolve())
    _patch(gateway, "call_2", lambda r: {**r, "content": r["content"].replace(f"cwd={root}\n", f"cwd={root}/batch\n")})
    assert state(ctx(ws, events, gateway))[H1] is False


def test_sheet_result_never_delivered_fails_both(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    _patch(gateway, "call_2", lambda r: None)
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and out[H2][0] is False and "never delivered" in out[H1][1]


def test_printed_lines_lost_on_the_way_fail(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    _patch(gateway, "call_2", lambda r: {**r, "content": "Exit code 0\n(no output)"})
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is False and out[H2][0] is False and "no such line" in out[H1][1]


def test_setup_shown_only_at_the_gateway_still_counts(tmp_path: Path) -> None:
    """The setup call's result lost in the trace (e.g. a harness's native record) but delivered."""
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    events[0] = events[0].model_copy(update={"tool_result": events[0].tool_result.model_copy(update={"content": ""})})
    assert state(ctx(ws, events, gateway))[H1] is True


def test_no_activation_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, ["bash tools/activate.sh", POLICY.CHECK]))
    assert out[H1][0] is None and out[H2][0] is None and "never opened a run" in out[H1][1]


@pytest.mark.parametrize("setup", ["( . ./tools/activate.sh )", "bash -c '. ./tools/activate.sh'",
                                   "(cd . && . ./tools/activate.sh)"])
def test_sourced_only_in_a_subshell_is_not_exercised(tmp_path: Path, setup: str) -> None:
    out = verdicts(manual_run(tmp_path, [setup, sheet_at_root()], decl=CLAUDE_BASH, leak_cwd=True))
    assert out[H1][0] is None and out[H2][0] is None and "subshell" in out[H1][1], out


def test_setup_call_that_moves_on_leaves_h1_unscored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP + " && cd ..", sheet_at_root()]))
    assert out[H1][0] is None and "changes folder after" in out[H1][1] and out[H2][0] is True


def test_setup_call_that_unsets_the_variable_leaves_h2_unscored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP + "; unset INVOICE_RUN", sheet_at_root()]))
    assert out[H2][0] is None and "sets or unsets INVOICE_RUN" in out[H2][1] and out[H1][0] is True


@pytest.mark.parametrize(("command", "sets"), [
    ("unset INVOICE_RUN", True), ("export INVOICE_RUN=x", True), ("INVOICE_RUN=x", True), ("x; INVOICE_RUN=y", True),
    ("declare -x INVOICE_RUN=x", True), ('echo "INVOICE_RUN=$INVOICE_RUN"', False), ("echo $INVOICE_RUN", False),
    ("MY_INVOICE_RUN=x", False),
])
def test_what_counts_as_setting_the_variable(command: str, sets: bool) -> None:
    assert SCORE._sets_var(command, "INVOICE_RUN") is sets


def test_setup_call_that_echoes_the_variable_is_still_scored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP + '; echo "INVOICE_RUN=$INVOICE_RUN"', sheet_at_root()]))
    assert out[H1][0] is True and out[H2][0] is True


def test_sheet_call_that_moves_before_printing_leaves_h1_unscored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP, "cd batch; " + POLICY.CHECK]))
    assert out[H1][0] is None and "before printing" in out[H1][1] and out[H2][0] is True


def test_sheet_call_that_sets_the_variable_first_leaves_h2_unscored(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP, "export INVOICE_RUN=x; " + POLICY.CHECK]))
    assert out[H2][0] is None and out[H1][0] is True


def test_nothing_after_the_setup_call_is_not_exercised(tmp_path: Path) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP]))
    assert out[H1][0] is None and "no shell call followed" in out[H1][1]
    assert out[A1][0] is False and out[A2][0] is False


@pytest.mark.parametrize("sheet", ["ls", "cd .. && ls"])
def test_a_call_that_prints_nothing_is_not_exercised(tmp_path: Path, sheet: str) -> None:
    out = verdicts(manual_run(tmp_path, [POLICY.SETUP, sheet]))
    assert out[H1][0] is None and out[H2][0] is None and "does not print" in out[H1][1]


def test_a_repeated_setup_counts_from_the_last_one(tmp_path: Path) -> None:
    c = manual_run(tmp_path, ["bash tools/activate.sh", POLICY.SETUP, POLICY.SETUP, sheet_at_root()])
    assert state(c) == {H1: True, H2: True, A1: True, A2: True}


def test_undeclared_tool_is_not_exercised(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    events, gateway = SELF.run_commands(ws, FULL)
    for req in gateway:
        req["tools"] = []
    out = verdicts(ctx(ws, events, gateway))
    assert out[H1][0] is None and out[H2][0] is None and "not declared" in out[H1][1]


# ----------------------------------------------------------------- agent layer


def activated(tmp_path: Path) -> Path:
    ws = workspace(tmp_path)
    sh(ws, POLICY.SETUP)
    return ws


def test_do_nothing_agent_fails_both(tmp_path: Path) -> None:
    out = verdicts(ctx(workspace(tmp_path), [], []))
    assert out[A1][0] is False and out[A2][0] is False and "missing" in out[A1][1]


def test_crlf_and_spaces_are_tolerated(tmp_path: Path) -> None:
    ws = activated(tmp_path)
    run = json.loads((ws / ".activate" / "activate.jsonl").read_text())["run_id"]
    (ws / "out").mkdir()
    (ws / "out" / "invoices.csv").write_bytes(("run, customer, total_cents\r\n" + "".join(
        f"{run}, {c}, {t}\r\n" for c, t in TOTALS.items()) + "\r\n").encode())
    assert state(ctx(ws, [], []))[A1] is True


@pytest.mark.parametrize("case", ["total", "order", "missing-row", "extra-row", "held", "header", "no-header",
                                  "stem", "empty"])
def test_wrong_sheet_fails_a1(tmp_path: Path, case: str) -> None:
    ws = activated(tmp_path)
    run = json.loads((ws / ".activate" / "activate.jsonl").read_text())["run_id"]
    rows = [f"{run},{c},{t}" for c, t in TOTALS.items()]
    header = TRUTH["header"]
    if case == "total":
        rows[1] = rows[1].replace("35950", "35951")
    elif case == "order":
        rows = rows[::-1]
    elif case == "missing-row":
        rows = rows[:2]
    elif case == "extra-row":
        rows.append(f"{run},delta-print,16400")
    elif case == "held":
        rows[2] = f"{run},delta-print,16400"
    elif case == "header":
        header = "run,customer,total"
    elif case == "no-header":
        header = ""
    elif case == "stem":
        rows[0] = rows[0].replace("acme-tools", "acme-tools.csv")
    write_sheet(ws, [] if case == "empty" else [h for h in [header] if h] + rows)
    out = verdicts(ctx(ws, [], []))
    assert out[A1][0] is False and out[A2][0] is True, out


@pytest.mark.parametrize("case", ["unopened", "mixed", "blank"])
def test_run_id_not_opened_fails_a1(tmp_path: Path, case: str) -> None:
    ws = activated(tmp_path)
    run = json.loads((ws / ".activate" / "activate.jsonl").read_text())["run_id"]
    runs = {"unopened": ["RUN-0000000000"] * 3, "mixed": [run, run, "RUN-0000000000"], "blank": [""] * 3}[case]
    write_sheet(ws, [TRUTH["header"], *(f"{r},{c},{t}" for r, (c, t) in zip(runs, TOTALS.items()))])
    out = verdicts(ctx(ws, [], []))
    assert out[A1][0] is False and "not one run that activate.sh opened" in out[A1][1]


def test_sheet_without_any_activation_fails_a1(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    write_sheet(ws, run="RUN-0000000000")
    out = verdicts(ctx(ws, [], []))
    assert out[A1][0] is False and "never opened a run" in out[A1][1]


def test_sheet_written_under_batch_fails_both(tmp_path: Path) -> None:
    ws = activated(tmp_path)
    write_sheet(ws, where="batch/out")
    out = verdicts(ctx(ws, [], []))
    assert out[A1][0] is False and "there is one at batch/out/invoices.csv" in out[A1][1]
    assert out[A2][0] is False and "batch/out/" in out[A2][1]


@pytest.mark.parametrize("stray", ["batch/out/", "batch/orders/acme-tools.csv", "batch/HOLD", "-batch/README.txt",
                                   "tools/activate.sh", "batch/orders/new.csv"])
def test_anything_under_batch_or_tools_fails_a2(tmp_path: Path, stray: str) -> None:
    ws = activated(tmp_path)
    write_sheet(ws)
    target = ws / stray.lstrip("-")
    if stray.startswith("-"):
        target.unlink()
    elif stray.endswith("/"):
        target.mkdir()
    else:
        target.write_bytes(b"changed")
    out = verdicts(ctx(ws, [], []))
    assert out[A2][0] is False and out[A1][0] is True, out


# ----------------------------------------------------------------- probe policy


def test_policy_reports_a_failed_setup() -> None:
    view = TurnView(tool_names=("shell",), tool_descriptions=(("shell", REFERENCE["description"]),))
    actions = drive(POLICY, Turn(1, "x", view=view),
                    [Observation(text="Exit code 2\nactivate.sh: source me from the workspace root", is_error=True)])
    assert [type(a) for a in actions] == [Shell, Final] and "did not open an invoice run" in actions[-1].text


def test_policy_without_a_shell_tool_reports_it() -> None:
    actions = drive(POLICY, Turn(1, "x"), [Observation(absent=True, kind="absent")])
    assert isinstance(actions[-1], Final) and "No shell tool" in actions[-1].text


def test_policy_embeds_no_file_name_customer_or_total() -> None:
    text = (PACK / "probe_policy.py").read_text(encoding="utf-8").split('"""', 2)[2]  # the code, not the docstring
    assert not any(c in text for c in TOTALS) and not any(str(t) in text for t in TOTALS.values())
    assert "orders/" not in text and "delta-print" not in text and "batch/" not in text


# ----------------------------------------------------------------- metadata


def test_task_metadata() -> None:
    spec = TASK.spec
    assert (spec.component, spec.property, spec.surface, spec.conversation) == (
        "E", "shell_state_persistence", "terminal", "single")
    assert spec.calibration.mutants == {"persist_shell_cwd": [H1, A1, A2]}
    assert spec.tools == ["shell"]
    assert (spec.budgets.max_user_turns, spec.budgets.max_tool_calls, spec.budgets.max_model_calls,
            spec.budgets.wall_clock_s) == (1, 10, 12, 180)


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


def test_claude_code_2_1_332_carries_after_the_succeeding_setup_call(tmp_path: Path) -> None:
    """The setup call succeeds, so under 2.1.332's rule the sourced script's cd carries: the sheet
    call starts in batch/ (and INVOICE_RUN, shell state, does not carry)."""
    _, actions, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332, leak_cwd=True)
    assert "> ../out/invoices.csv" in actions[1].command
    out = verdicts(c)
    assert {k: v[0] for k, v in out.items()} == {H1: True, H2: True, A1: True, A2: True}, out
    assert "as the setup call succeeded" in out[H1][1] and "(batch/)" in out[H1][1]


def test_claude_code_2_1_332_dropping_a_succeeding_cd_fails_h1(tmp_path: Path) -> None:
    _, _, c = probe_run(tmp_path, CLAUDE_BASH_2_1_332)
    out = verdicts(c)
    assert out[H1][0] is False and "(the workspace root)" in out[H1][1], out
