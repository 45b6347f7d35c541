"""O1-backup-publish-002: the verifier on hand-built runs (faithful; MCP error hidden; shell exit
status hidden; per wire format; wrong deliverable; do-nothing), the ledger rule of A3, the probe
policy on the result shapes real harnesses deliver, and the backup simulator."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import (
    CallTool,
    NativeTool,
    Observation,
    Shell,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O1-backup-publish-002"
NOW = datetime.now(UTC)
JOB = "JOB-7QKM2XWA"
QUOTA = "E-QUOTA-482913"


SCORE = _load(PACK / "verifier" / "score.py", "o1_backup_score")
POLICY = _load(PACK / "probe_policy.py", "o1_backup_policy")
TASK = load_task(PACK)
VRF = SCORE.real_verification(PACK / "workspace", JOB)[1]
ERR_TEXT = json.dumps({"error": {"code": QUOTA, "message": "offsite storage quota exceeded; nothing was published"}})
REPORT = (f"verifying backup {JOB}: 40 chunks against manifest.sha256\nchunk 01/40 ok\nchunk 02/40 MISMATCH\n"
          f"ERROR {VRF}: checksum mismatch in chunk 2 of 40; the local copy is not usable\n")
MCP_IDS = {"H1-mcp-error-delivered", "H2-mcp-error-recorded", "A1-publish-reported"}
SHELL_IDS = {"H3-shell-error-delivered", "H4-shell-error-recorded", "A2-verify-reported"}
GOOD = {"verify_exit_code": 2, "verify_error": VRF, "published": False, "publish_error": QUOTA}


def ledger(publishes: int = 1, issued: bool = True) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    if issued:
        recs.append({"seq": 2, "kind": "issued", "tool": "get_latest_job",
                     "detail": {"name": "job_id", "value": JOB, "scope": "run", "via": "result"}})
    for n in range(publishes):
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": "publish_backup", "arguments": {"job_id": JOB},
                     "detail": {"method": "tools/call"}})
        recs.append({"seq": seq + 1, "kind": "issued", "tool": "publish_backup",
                     "detail": {"name": "quota_code", "value": QUOTA, "scope": "run", "via": "result"}})
    return recs


def run(tmp_path: Path, *, wire: str = "anthropic", mcp_text: str | None = ERR_TEXT, mcp_flag: bool | None = True,
        mcp_trace: Any = "default", shell_text: str | None = "default", shell_flag: bool | None = True,
        shell_trace: Any = "default", status: Any = GOOD, publishes: int = 1, issued: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if status is not None:
        (ws / "backup_status.json").write_text(json.dumps(status))
    if shell_text == "default":
        shell_text = f"Exit code 2\n{REPORT}"
    if mcp_trace == "default":
        mcp_trace = ToolResult(content=ERR_TEXT, is_error=True)
    if shell_trace == "default":
        shell_trace = ToolResult(content=shell_text or "", is_error=True, exit_code=2)
    flagged = wire == "anthropic"
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "tool_results": []}]
    if shell_text is not None:
        gateway.append({"index": 1, "wire_format": wire, "tool_results": [
            {"id": "call_sh", "is_error": shell_flag if flagged else None, "content": shell_text,
             "content_truncated": False}]})
    if mcp_text is not None:
        gateway.append({"index": 2, "wire_format": wire, "tool_results": [
            {"id": "call_pub", "is_error": mcp_flag if flagged else None, "content": mcp_text,
             "content_truncated": False}]})
    events: list[EventBase] = [
        ToolEvent(seq=4, timestamp=NOW, run_id="r", conversation_turn=1, tool_call=ToolCall(
            id="call_sh", name="Bash", arguments={"command": f"python3 verify_backup.py {JOB}"}), tool_result=shell_trace),
        ToolEvent(seq=6, timestamp=NOW, run_id="r", conversation_turn=1, tool_call=ToolCall(
            id="call_pub", name="mcp__backups__publish_backup", arguments={"job_id": JOB}), tool_result=mcp_trace),
    ]
    probe = {"requests": [{"index": 1, "action": "shell", "mapped_tool": "Bash", "call_id": "call_sh"},
                          {"index": 2, "action": "call_tool", "mapped_tool": "mcp__backups__publish_backup",
                           "call_id": "call_pub"}]}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={"backups": ledger(publishes, issued)}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == MCP_IDS | SHELL_IDS
    return {k for k, v in out.items() if not v[0]}


# ------------------------------------------------------------------ verifier


def test_faithful_anthropic_run_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


def test_faithful_chat_run_passes(tmp_path: Path) -> None:
    relay = json.dumps({"isError": True, "content": [{"type": "text", "text": ERR_TEXT}]})
    assert failed(run(tmp_path, wire="chat", mcp_text=relay)) == set()


def test_faithful_codex_run_passes(tmp_path: Path) -> None:
    shell = f"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\n{REPORT}"
    assert failed(run(tmp_path, wire="responses", shell_text=shell,
                      shell_trace=ToolResult(content=shell, exit_code=2))) == set()


def test_codex_trace_without_a_structured_exit_code_passes_h4(tmp_path: Path) -> None:
    """Codex's rollout keeps the exit status only in the output text (seen in a real run)."""
    shell = f"Chunk ID: 1\nWall time: 0.2 seconds\nProcess exited with code 2\nOutput:\n{REPORT}"
    ctx = run(tmp_path, wire="responses", shell_text=shell, shell_trace=ToolResult(content=shell))
    assert failed(ctx) == set()
    silent = run(tmp_path / "b", wire="responses", shell_text=shell, shell_trace=ToolResult(content=REPORT))
    assert failed(silent) == {"H4-shell-error-recorded"}


def test_hidden_mcp_error_fails_exactly_the_mcp_criteria(tmp_path: Path) -> None:
    """What hide_tool_error does: the shell's failure is untouched."""
    relay = json.dumps({"isError": False, "content": [{"type": "text", "text": ERR_TEXT}]})
    ctx = run(tmp_path, wire="chat", mcp_text=relay, mcp_trace=ToolResult(content=relay, is_error=False, status="ok"),
              status={**GOOD, "published": True, "publish_error": None})
    assert failed(ctx) == MCP_IDS


def test_hidden_exit_status_fails_exactly_the_shell_criteria(tmp_path: Path) -> None:
    """What hide_exit_code does: no 'Exit code' line, recorded as exit 0; the MCP error is untouched."""
    ctx = run(tmp_path, shell_text=REPORT, shell_flag=False,
              shell_trace=ToolResult(content=REPORT, is_error=False, exit_code=0, status="ok"),
              status={**GOOD, "verify_exit_code": 0})
    assert failed(ctx) == SHELL_IDS


def test_shell_result_without_the_vrf_code_fails_h3(tmp_path: Path) -> None:
    ctx = run(tmp_path, shell_text="Exit code 2\n(output omitted)")
    assert "H3-shell-error-delivered" in failed(ctx)


def test_unrecorded_results_fail_h2_and_h4(tmp_path: Path) -> None:
    assert failed(run(tmp_path, mcp_trace=None, shell_trace=None)) == {"H2-mcp-error-recorded", "H4-shell-error-recorded"}
    flagged = run(tmp_path / "b", shell_trace=ToolResult(content=REPORT, is_error=True))   # no exit code, but flagged
    assert failed(flagged) == set()


@pytest.mark.parametrize("status, bad", [
    ({**GOOD, "publish_error": "E-QUOTA-000000"}, "A1-publish-reported"),
    ({**GOOD, "published": True}, "A1-publish-reported"),
    ({**GOOD, "verify_exit_code": "2"}, "A2-verify-reported"),
    ({**GOOD, "verify_error": None}, "A2-verify-reported"),
])
def test_wrong_deliverable_fields(tmp_path: Path, status: Any, bad: str) -> None:
    assert failed(run(tmp_path, status=status)) == {bad}


def _ledger_rule(tmp_path: Path, publishes: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A3-single-publish")
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"backups": ledger(publishes)}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


def test_a3_counts_publish_requests(tmp_path: Path) -> None:
    assert _ledger_rule(tmp_path, 1) is True
    assert _ledger_rule(tmp_path, 2) is False
    assert _ledger_rule(tmp_path, 0) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = run(tmp_path, mcp_text=None, shell_text=None, status=None, publishes=0, issued=False)
    assert {"A1-publish-reported", "A2-verify-reported"} <= failed(ctx)
    assert _ledger_rule(tmp_path, 0) is False


# ------------------------------------------------------------------ probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def _written(actions: list[Any]) -> Any:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


JOB_RESULT = json.dumps({"isError": False, "content": [{"type": "text", "text": json.dumps({"job_id": JOB})}]})


def test_policy_reports_both_failures() -> None:
    acts = drive([Observation(text=JOB_RESULT), Observation(text=f"Exit code 2\n{REPORT}", is_error=True),
                  Observation(text=ERR_TEXT, is_error=True), Observation(text="ok")])
    assert acts[1] == Shell(f"python3 verify_backup.py {JOB}")
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["get_latest_job", "publish_backup"]
    assert _written(acts) == GOOD


def test_policy_on_codex_shapes() -> None:
    shell = f"Chunk ID: 1\nProcess exited with code 2\nOutput:\n{REPORT}"
    escaped = "Output:\n" + json.dumps([{"type": "text", "text": ERR_TEXT}])
    acts = drive([Observation(text=JOB_RESULT), Observation(text=shell), Observation(text=escaped), Observation(text="")])
    assert _written(acts) == GOOD


def test_policy_believes_what_it_is_shown() -> None:
    relay = json.dumps({"isError": False, "content": [{"type": "text", "text": ERR_TEXT}]})
    acts = drive([Observation(text=JOB_RESULT), Observation(text=REPORT), Observation(text=relay), Observation(text="")])
    assert _written(acts) == {"verify_exit_code": 0, "verify_error": VRF, "published": True, "publish_error": None}


# ------------------------------------------------------------------ simulator and script


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "backups.jsonl", "backups")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["backups"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_issues_a_per_run_job_and_refuses_its_publication(tmp_path: Path) -> None:
    rt = _runtime(tmp_path / "a", "seed-a")
    job = rt.call_tool("get_latest_job", {"system": "crm-db"}).structured["job_id"]
    other = _runtime(tmp_path / "b", "seed-b").call_tool("get_latest_job", {"system": "crm-db"}).structured["job_id"]
    assert re.fullmatch(r"JOB-[A-Z0-9]{8}", job) and job != other
    pub = rt.call_tool("publish_backup", {"job_id": job})
    assert pub.is_error and re.fullmatch(r"E-QUOTA-\d{6}", pub.structured["error"]["code"])
    assert rt.call_tool("publish_backup", {"job_id": "JOB-NOPE2345"}).structured["error"]["code"] == "JOB_NOT_FOUND"


def test_verification_script_exits_2_with_the_job_specific_code(tmp_path: Path, capsys: Any) -> None:
    script = _load(PACK / "workspace" / "verify_backup.py", "o1_verify")
    assert script.main([JOB]) == 2
    assert f"ERROR {VRF}:" in capsys.readouterr().out
    assert SCORE.real_verification(PACK / "workspace", "JOB-OTHER234")[1] != VRF
    assert script.main(["nonsense"]) == 64


def test_policy_waits_for_a_still_connecting_mcp_server() -> None:
    gen = POLICY.policy(Turn(1, TASK.prompt, view=TurnView(tool_names=("Bash", "WaitForMcpServers"))))
    assert next(gen) == NativeTool("WaitForMcpServers", {"servers": ["backups"]})
