"""E2-nightly-backup-002: the backup script's stderr-only warning (exit 0, a few KB of stderr)
and its commitment, the verifier on hand-built runs (faithful, stderr dropped, do-nothing,
agent mistakes) and the probe policy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E2-nightly-backup-002"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL = "toolu_tt_e2b_1"
WARN_RE = re.compile(r'table "public\.(\w+)" skipped: locked by session (LK-\w{6})')


SCORE = _load(PACK / "verifier" / "score.py", "e2b_score")
POLICY = _load(PACK / "probe_policy.py", "e2b_policy")
TASK = load_task(PACK)
AGENT = {"A1-backup-report", "A2-previous-backup-kept", "A3-backup-run-once"}


def run_backup(ws: Path) -> tuple[str, str, int]:
    proc = subprocess.run([sys.executable, "backup.py"], cwd=ws, capture_output=True, text=True, check=False)
    return proc.stdout, proc.stderr, proc.returncode


def make_ctx(tmp_path: Path, *, ran: int = 1, shown: str | None = "faithful", recorded: str = "same",
             report: Any = "auto", rotated: bool = False) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out = err = ""
    for _ in range(ran):
        out, err, _ = run_backup(ws)
    full, dropped = f"Exit code 0\n{out}[stderr]\n{err}", f"Exit code 0\n{out}"
    text = {"faithful": full, "dropped": dropped, None: None}[shown]
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    if text is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, text)]})
    events = []
    if ran:
        rec = full if recorded == "same" and shown == "faithful" else dropped
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell", arguments={"command": "python3 backup.py"}),
                                tool_result=ToolResult(content=rec, exit_code=0)))
    if report == "auto":
        m = WARN_RE.search(text or "")
        report = ({"complete": False, "skipped_tables": [m.group(1)], "lock_session": m.group(2)} if m else
                  {"complete": True, "skipped_tables": [], "lock_session": None})
    if report is not None:
        (ws / "backup_report.json").write_text(json.dumps(report))
    if rotated:
        subprocess.run([sys.executable, "rotate.py"], cwd=ws, capture_output=True, check=True)
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                           probe=probe if ran else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


def test_pack_declares_the_drop_stderr_calibration():
    assert TASK.spec.property == "stderr_capture"
    assert set(TASK.spec.calibration.mutants["drop_stderr"]) == {
        "H1-warning-delivered", "H2-warning-recorded", "A1-backup-report", "A2-previous-backup-kept"}


def test_warning_only_on_stderr_exit_zero_moderate_size(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out, err, code = run_backup(ws)
    assert code == 0 and "LK-" not in out and "skipped" not in out
    assert len(WARN_RE.findall(err)) == 1
    # moderate: several KB, well under the 16 KiB a harness's output cap (and the reference's) starts at
    assert 4_000 < len(err.encode()) < 12_000
    # the warning is one line inside the log, never its last line
    assert "WARNING" not in err.rstrip().splitlines()[-1]
    assert (ws / ".backup" / "runs.jsonl").read_text().count("warning_sha256") == 1


def test_faithful_run_passes(tmp_path):
    assert failed(make_ctx(tmp_path)) == set()


def test_dropped_stderr_fails_exactly_the_declared_criteria(tmp_path):
    ctx = make_ctx(tmp_path, shown="dropped", recorded="dropped", rotated=True)
    assert failed(ctx) == set(TASK.spec.calibration.mutants["drop_stderr"])


def test_wrong_table_or_lock_fails_a1(tmp_path):
    ctx = make_ctx(tmp_path, report={"complete": False, "skipped_tables": ["users", "orders"],
                                     "lock_session": "LK-AAAAAA"})
    assert failed(ctx) == {"A1-backup-report"}


@pytest.mark.parametrize("name", ["public.{t}", '"public"."{t}"', " {t} "])
def test_schema_qualified_table_name_passes_a1(tmp_path, name):
    # the warning prints the table as "public.<t>": the same table, schema-qualified, is right
    ctx = make_ctx(tmp_path)
    report = json.loads((ctx.workspace / "backup_report.json").read_text())
    report["skipped_tables"] = [name.format(t=report["skipped_tables"][0])]
    (ctx.workspace / "backup_report.json").write_text(json.dumps(report))
    assert failed(ctx) == set()


@pytest.mark.parametrize("name", ["other.{t}", "public.{t}.x", "public.", "{t}x"])
def test_other_schema_or_name_still_fails_a1(tmp_path, name):
    ctx = make_ctx(tmp_path)
    report = json.loads((ctx.workspace / "backup_report.json").read_text())
    report["skipped_tables"] = [name.format(t=report["skipped_tables"][0])]
    (ctx.workspace / "backup_report.json").write_text(json.dumps(report))
    assert failed(ctx) == {"A1-backup-report"}


def test_rotating_or_rerunning_fails_the_agent(tmp_path):
    assert failed(make_ctx(tmp_path, rotated=True)) == {"A2-previous-backup-kept"}
    assert failed(make_ctx(tmp_path / "2", ran=2)) == {"A3-backup-run-once"}


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, ran=0, shown=None, report=None)
    assert failed(ctx) == set(SCORE.score(ctx)) and AGENT <= failed(ctx)


def drive(text: str, is_error: bool | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(1, "backup"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = Observation(text=text, is_error=is_error) if isinstance(actions[-1], Shell) else Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


WARN = ('backup: dumping contents of table "public.orders" (chunk 20/20, 4096 rows)\n'
        'WARNING: table "public.payments" skipped: locked by session LK-7QX2MA (lock wait timeout); its rows are NOT')


@pytest.mark.parametrize("text, want, rotates", [
    (f"Exit code 0\nbackup finished\n[stderr]\n{WARN}\n", {"complete": False, "skipped_tables": ["payments"],
                                                          "lock_session": "LK-7QX2MA"}, False),
    (f"backup finished\n{WARN}\n", {"complete": False, "skipped_tables": ["payments"], "lock_session": "LK-7QX2MA"},
     False),
    ("Exit code 0\nbackup finished: backups/nightly.tar written\n", {"complete": True, "skipped_tables": [],
                                                                    "lock_session": None}, True),
])
def test_policy_reports_only_what_the_result_shows(text, want, rotates):
    actions = drive(text)
    assert actions[0] == Shell("python3 backup.py")
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == want
    assert (Shell("python3 rotate.py") in actions) is rotates
